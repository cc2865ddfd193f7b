//! The inode table: which inode stands for which name prefix (a
//! directory) or version (a file), counted from the entry reply that gives
//! an inode to the kernel until the kernel forgets it; and a directory's
//! entries as the file system shows them (NDN component <-> file name).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::SystemTime;

use fuser::Errno;
use granary_packet::{types::COMP_GENERIC, Component, Name};

use crate::fetch::Child;

/// The root directory's inode.
pub(crate) const ROOT: u64 = 1;

#[derive(Clone)]
pub(crate) enum Kind {
    Dir,
    File {
        versioned: Name,
        size: u64,
        mtime: SystemTime,
    },
}

pub(crate) struct Node {
    pub(crate) name: Name,
    pub(crate) kind: Kind,
    /// Its keys in [`Nodes::by_key`] (removed with it).
    pub(crate) keys: Vec<(u8, String)>,
}

impl Node {
    pub(crate) fn new(name: Name, kind: Kind) -> Node {
        Node {
            name,
            kind,
            keys: Vec::new(),
        }
    }
}

/// The inodes the kernel knows. An inode lives from the entry reply that
/// gives it to the kernel (lookup, create, mkdir; each one counted) until
/// the kernel forgets it as many times (FUSE `forget`), so a long-lived mount
/// over a large tree holds only what the kernel holds. Directory listings
/// give no inodes (their entries carry informational numbers only).
#[derive(Default)]
pub(crate) struct Nodes {
    pub(crate) next: u64,
    pub(crate) by_ino: HashMap<u64, Node>,
    pub(crate) by_key: HashMap<(u8, String), u64>,
    /// Entry replies not yet forgotten, per inode.
    pub(crate) lookups: HashMap<u64, u64>,
}

impl Nodes {
    pub(crate) fn get_or_add(&mut self, key: (u8, String), node: impl FnOnce() -> Node) -> u64 {
        if let Some(i) = self.by_key.get(&key) {
            return *i;
        }
        self.next += 1;
        let ino = self.next;
        let mut n = node();
        n.keys.push(key.clone());
        self.by_ino.insert(ino, n);
        self.by_key.insert(key, ino);
        ino
    }

    /// Another key for an existing inode (a draft published as a version).
    pub(crate) fn add_key(&mut self, ino: u64, key: (u8, String)) {
        if let Some(n) = self.by_ino.get_mut(&ino) {
            n.keys.push(key.clone());
            self.by_key.insert(key, ino);
        }
    }

    /// The kernel was given `ino` once more (an entry reply).
    pub(crate) fn looked_up(&mut self, ino: u64) {
        *self.lookups.entry(ino).or_default() += 1;
    }

    /// The kernel forgot `n` of its references to `ino`; at none left the
    /// inode goes (the root stays, and so does a file still being written,
    /// `pinned`). True when it went.
    pub(crate) fn forget(&mut self, ino: u64, n: u64, pinned: bool) -> bool {
        let left = self.lookups.get_mut(&ino).map_or(0, |c| {
            *c = c.saturating_sub(n);
            *c
        });
        if left > 0 || ino == ROOT || pinned {
            return false;
        }
        self.lookups.remove(&ino);
        match self.by_ino.remove(&ino) {
            Some(node) => {
                for k in node.keys {
                    if self.by_key.get(&k) == Some(&ino) {
                        self.by_key.remove(&k);
                    }
                }
                true
            }
            None => false,
        }
    }

    /// The number a listing shows for `key`: its inode when the kernel has
    /// one, else a stable number outside the inode range (never looked up:
    /// FUSE listings create no inodes).
    pub(crate) fn listed(&self, key: &(u8, String)) -> u64 {
        use std::hash::{BuildHasher, BuildHasherDefault};
        self.by_key.get(key).copied().unwrap_or_else(|| {
            let h = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
                .hash_one(key);
            LISTED | (h >> 1)
        })
    }
}

/// The high bit marks the numbers of listed entries that have no inode.
pub(crate) const LISTED: u64 = 1 << 63;

/// One entry of a directory as the file system shows it.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) fs_name: Vec<u8>,
    pub(crate) comp: Component,
    pub(crate) dir: bool,
}

pub(crate) fn entry_of(c: &Child) -> Entry {
    let r = c.comp.as_ref();
    let plain = r.typ == COMP_GENERIC
        && !r.value.is_empty()
        && !r.value.contains(&b'/')
        && !r.value.contains(&0)
        && r.value != b"."
        && r.value != b"..";
    Entry {
        fs_name: if plain {
            r.value.to_vec()
        } else {
            c.comp.to_string().into_bytes()
        },
        comp: c.comp.clone(),
        dir: c.prefix,
    }
}

/// The NDN component a new file name stands for.
pub(crate) fn comp_of(name: &OsStr) -> Result<Component, Errno> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() > 8000 {
        return Err(Errno::EINVAL);
    }
    Ok(Component::generic(b))
}
