//! The FUSE file system: inodes over NDN names, handles over pinned
//! versions, drafts (publish mode) over temporary files. This file holds
//! [`GranaryFs`] and the helpers its callbacks share; the callbacks are in
//! `fs/callbacks.rs`, the inode table in `inodes.rs`, read-ahead in
//! `read_ahead.rs`, drafts in `drafts.rs`.
//!
//! Inodes: a directory is a name prefix; a file is one *version* of an
//! object (`<name>/v=<version>`), so a new version is a new inode and the
//! kernel's page cache of an open version is never mixed with another's.
//! Lookups resolve the latest version (RDR metadata, cached for the
//! directory TTL); the kernel keeps entries for the same TTL.

mod callbacks;

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use fuser::{Errno, FileAttr, FileHandle, FileType, FopenFlags, INodeNo, OpenFlags, ReplyOpen};
use granary_packet::Name;
use granary_transfer::ObjectInfo;

use crate::drafts::{Draft, PublishState};
use crate::fetch::{Child, FetchError, Fetcher, Meta};
use crate::inodes::{comp_of, entry_of, Entry, Kind, Node, Nodes, ROOT};
use crate::read_ahead::ReadAhead;
use crate::sync::lock;

fn errno(e: &FetchError) -> Errno {
    match e {
        FetchError::NotFound(_) => Errno::ENOENT,
        FetchError::Io(_) => Errno::EIO,
    }
}

enum Handle {
    Object {
        id: u64,
        info: Arc<ObjectInfo>,
        ra: Mutex<ReadAhead>,
    },
    Draft(u64),
}

/// The mount's settings.
pub struct Settings {
    /// The prefix mounted at the root.
    pub prefix: Name,
    /// Directory (and entry, attribute) cache lifetime.
    pub dir_ttl: Duration,
    /// Owner shown for every file.
    pub uid: u32,
    /// Group shown for every file.
    pub gid: u32,
    /// Largest read-ahead window in bytes.
    pub max_readahead: u64,
}

/// The file system.
pub struct GranaryFs {
    s: Settings,
    fetcher: Arc<Fetcher>,
    rt: tokio::runtime::Handle,
    nodes: Mutex<Nodes>,
    dirs: Mutex<HashMap<u64, (Instant, Vec<Entry>)>>,
    metas: Mutex<HashMap<Name, (Instant, Meta, u64)>>,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_fh: AtomicU64,
    publish: Option<PublishState>,
    drafts: Mutex<HashMap<u64, Arc<Draft>>>,
    draft_names: Mutex<HashMap<Name, u64>>,
    made_dirs: Mutex<HashSet<Name>>,
    next_draft: AtomicU64,
    started: SystemTime,
}

impl GranaryFs {
    /// A file system over `fetcher`, publishing through `publish` when set.
    pub fn new(
        s: Settings,
        fetcher: Arc<Fetcher>,
        rt: tokio::runtime::Handle,
        publish: Option<PublishState>,
    ) -> GranaryFs {
        let mut nodes = Nodes {
            next: ROOT,
            ..Default::default()
        };
        let root_key = (0, s.prefix.to_string());
        let mut root = Node::new(s.prefix.clone(), Kind::Dir);
        root.keys.push(root_key.clone());
        nodes.by_ino.insert(ROOT, root);
        nodes.by_key.insert(root_key, ROOT);
        GranaryFs {
            s,
            fetcher,
            rt,
            nodes: Mutex::new(nodes),
            dirs: Mutex::new(HashMap::new()),
            metas: Mutex::new(HashMap::new()),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            publish,
            drafts: Mutex::new(HashMap::new()),
            draft_names: Mutex::new(HashMap::new()),
            made_dirs: Mutex::new(HashSet::new()),
            next_draft: AtomicU64::new(1),
            started: SystemTime::now(),
        }
    }

    fn writable(&self) -> bool {
        self.publish.is_some()
    }

    fn node(&self, ino: u64) -> Option<(Name, Kind)> {
        lock(&self.nodes)
            .by_ino
            .get(&ino)
            .map(|n| (n.name.clone(), n.kind.clone()))
    }

    fn dir_ino(&self, name: &Name) -> u64 {
        lock(&self.nodes).get_or_add((0, name.to_string()), || Node::new(name.clone(), Kind::Dir))
    }

    /// The inode of directory `name`, for an entry reply: found or made and
    /// counted under one lock, so a `forget` on another FUSE thread cannot
    /// remove it in between.
    fn give_dir(&self, name: &Name) -> u64 {
        let mut g = lock(&self.nodes);
        let ino = g.get_or_add((0, name.to_string()), || Node::new(name.clone(), Kind::Dir));
        g.looked_up(ino);
        ino
    }

    /// The inode of version `m` of file `name` and its kind, for an entry
    /// reply (as [`Self::give_dir`]).
    fn give_file(&self, name: &Name, m: &Meta, size: u64) -> (u64, Kind) {
        let mut g = lock(&self.nodes);
        let ino = g.get_or_add((1, m.versioned.to_string()), || {
            Node::new(
                name.clone(),
                Kind::File {
                    versioned: m.versioned.clone(),
                    size,
                    mtime: m.mtime,
                },
            )
        });
        g.looked_up(ino);
        let kind = g.by_ino.get(&ino).map(|n| n.kind.clone());
        (ino, kind.unwrap_or(Kind::Dir))
    }

    /// `ino` handed to the kernel in an entry reply: counted until forgotten.
    fn entry_given(&self, ino: u64) {
        lock(&self.nodes).looked_up(ino);
    }

    fn attr(&self, ino: u64, kind: &Kind) -> FileAttr {
        let (kind, size, perm, mtime) = match kind {
            Kind::Dir => (
                FileType::Directory,
                0,
                if self.writable() { 0o755 } else { 0o555 },
                self.started,
            ),
            Kind::File { size, mtime, .. } => (
                FileType::RegularFile,
                *size,
                if self.writable() { 0o644 } else { 0o444 },
                *mtime,
            ),
        };
        let draft = lock(&self.drafts).get(&ino).cloned();
        let (size, mtime) = match draft {
            Some(d) => (d.size(), SystemTime::now()),
            None => (size, mtime),
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: mtime,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.s.uid,
            gid: self.s.gid,
            rdev: 0,
            // The I/O size tools like `cp` use for their buffers: in publish
            // mode the largest FUSE write (1 MiB, 8× fewer requests than
            // 128 KiB for the same bytes).
            blksize: if self.writable() { 1 << 20 } else { 128 << 10 },
            flags: 0,
        }
    }

    fn draft_attr(&self, ino: u64) -> FileAttr {
        self.attr(
            ino,
            &Kind::File {
                versioned: Name::new(),
                size: 0,
                mtime: SystemTime::now(),
            },
        )
    }

    /// The entries of a directory (cached for the directory TTL), with the
    /// prefixes made here by `mkdir`.
    fn entries(&self, ino: u64, name: &Name) -> Result<Vec<Entry>, Errno> {
        if let Some((at, e)) = lock(&self.dirs).get(&ino) {
            if at.elapsed() < self.s.dir_ttl {
                return Ok(e.clone());
            }
        }
        let kids = match self.rt.block_on(self.fetcher.list(name)) {
            Ok(k) => k,
            // An empty prefix has no listing: empty if it is the root or
            // was made here, else gone.
            Err(FetchError::NotFound(_)) if ino == ROOT || lock(&self.made_dirs).contains(name) => {
                Vec::new()
            }
            Err(e) => {
                tracing::warn!("listing {name}: {e}");
                return Err(errno(&e));
            }
        };
        let mut out: Vec<Entry> = kids.iter().map(entry_of).collect();
        for d in lock(&self.made_dirs).iter() {
            if d.len() == name.len() + 1 && name.is_prefix_of(d) {
                if let Some(c) = d.last().map(|c| c.to_owned()) {
                    if !out.iter().any(|e| e.comp == c) {
                        out.push(entry_of(&Child {
                            comp: c,
                            object: false,
                            prefix: true,
                        }));
                    }
                }
            }
        }
        lock(&self.dirs).insert(ino, (Instant::now(), out.clone()));
        Ok(out)
    }

    fn invalidate(&self, dir: u64, child: Option<&Name>) {
        lock(&self.dirs).remove(&dir);
        if let Some(c) = child {
            lock(&self.metas).remove(c);
        }
    }

    /// The latest version of a file (metadata, cached for the TTL) and its
    /// size.
    fn meta(&self, name: &Name) -> Result<(Meta, u64), FetchError> {
        if let Some((at, m, size)) = lock(&self.metas).get(name) {
            if at.elapsed() < self.s.dir_ttl {
                return Ok((m.clone(), *size));
            }
        }
        let m = self.rt.block_on(self.fetcher.metadata(name))?;
        let size = match m.size {
            Some(s) => s,
            None => {
                let (_, info) = self.rt.block_on(self.fetcher.open(&m.versioned))?;
                info.map.file_size().unwrap_or(0)
            }
        };
        lock(&self.metas).insert(name.clone(), (Instant::now(), m.clone(), size));
        Ok((m, size))
    }

    fn child_name(parent: &Name, e: &Entry) -> Name {
        parent.append(&e.comp)
    }

    fn new_fh(&self, h: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, Arc::new(h));
        fh
    }

    /// A new, empty draft of `name`: streamed when `stream` and the
    /// publisher can, else a temporary file.
    fn new_draft(&self, name: &Name, stream: bool) -> std::io::Result<Arc<Draft>> {
        let Some(p) = &self.publish else {
            return Err(std::io::Error::from_raw_os_error(libc::EROFS));
        };
        let path = p.drafts_dir.join(format!(
            "{}",
            self.next_draft.fetch_add(1, Ordering::Relaxed)
        ));
        let streamed = if stream {
            p.publisher.stream(name)
        } else {
            None
        };
        Ok(Arc::new(Draft::new(name, path, streamed)?))
    }

    /// The draft's file ([`Draft::file`]), a published stream's bytes
    /// fetched into it.
    fn file_of(&self, d: &Draft) -> Result<Arc<File>, Errno> {
        d.file(|f, versioned| {
            self.fill(f, versioned).map_err(|e| {
                tracing::error!("{versioned}: {e}");
                errno(&e)
            })
        })
    }

    /// Copies a stored version's verified bytes into `file`.
    fn fill(&self, file: &File, versioned: &Name) -> Result<(), FetchError> {
        self.rt.block_on(async {
            let (id, info) = self.fetcher.open(versioned).await?;
            let size = info.map.file_size().unwrap_or(0);
            let mut off = 0;
            while off < size {
                let b = self.fetcher.read(id, &info, off, 8 << 20, 0).await?;
                if b.is_empty() {
                    break;
                }
                file.write_all_at(&b, off)
                    .map_err(|e| FetchError::Io(e.to_string()))?;
                off += b.len() as u64;
            }
            Ok(())
        })
    }

    /// A new handle on draft `d`, already counted in its `opens`: a file
    /// from here on (its writes and reads may go anywhere).
    fn open_joined(&self, ino: u64, d: &Arc<Draft>, flags: OpenFlags, reply: ReplyOpen) {
        let f = match self.file_of(d) {
            Ok(f) => f,
            Err(e) => {
                let _ = self.leave_draft(ino, d);
                return reply.error(e);
            }
        };
        if flags.0 & libc::O_TRUNC != 0 {
            let _ = f.set_len(0);
            d.dirty.store(true, Ordering::Release);
        }
        reply.opened(
            FileHandle(self.new_fh(Handle::Draft(ino))),
            FopenFlags::empty(),
        )
    }

    /// One handle of draft `d` (inode `ino`) is gone. The last one
    /// publishes whatever was not published yet (never a killed writer's)
    /// and drops the draft, unless a new handle joined it meanwhile: the
    /// count and the map change only under the map's lock, as in `open`.
    fn leave_draft(&self, ino: u64, d: &Arc<Draft>) -> Result<(), Errno> {
        let last = {
            let _g = lock(&self.drafts);
            d.opens.fetch_sub(1, Ordering::AcqRel) == 1
        };
        if !last {
            return Ok(());
        }
        let r = if d.abandoned.load(Ordering::Acquire) {
            Ok(())
        } else {
            self.publish_draft(ino, d)
        };
        let gone = {
            let mut g = lock(&self.drafts);
            let ours = g.get(&ino).is_some_and(|x| Arc::ptr_eq(x, d));
            let idle = d.opens.load(Ordering::Acquire) == 0;
            if ours && idle {
                g.remove(&ino);
            }
            ours && idle
        };
        if gone {
            lock(&self.draft_names).remove(&*lock(&d.name));
            // Forgotten by the kernel while it was being written: it goes now.
            lock(&self.nodes).forget(ino, 0, false);
            let _ = std::fs::remove_file(&d.path);
        }
        r
    }

    /// Publishes a draft as a new version of its name ([`Draft::publish`]);
    /// the inode then shows that version.
    fn publish_draft(&self, ino: u64, d: &Draft) -> Result<(), Errno> {
        let p = self.publish_of()?;
        let Some((name, versioned, size)) = d.publish(p.publisher.as_ref())? else {
            return Ok(());
        };
        let v = versioned
            .last()
            .and_then(|c| c.as_version())
            .unwrap_or_default();
        let mut g = lock(&self.nodes);
        g.add_key(ino, (1, versioned.to_string()));
        if let Some(n) = g.by_ino.get_mut(&ino) {
            n.name = name.clone();
            n.kind = Kind::File {
                versioned,
                size,
                mtime: crate::fetch::version_time(v),
            };
        }
        drop(g);
        self.forget_name(&name);
        Ok(())
    }

    /// Drops what is cached about `name` and its parent's listing.
    fn forget_name(&self, name: &Name) {
        lock(&self.metas).remove(name);
        let parent = name.prefix(-1);
        let pino = lock(&self.nodes)
            .by_key
            .get(&(0, parent.to_string()))
            .copied();
        if let Some(p) = pino {
            self.invalidate(p, None);
        }
    }

    fn publish_of(&self) -> Result<&PublishState, Errno> {
        self.publish.as_ref().ok_or(Errno::EROFS)
    }

    /// The name of a new entry `name` in directory `parent` (create,
    /// mkdir): EROFS when read-only, ENOENT without the parent, EINVAL for
    /// a name NDN cannot carry.
    fn new_child(&self, parent: u64, name: &OsStr) -> Result<Name, Errno> {
        self.publish_of()?;
        let (pname, _) = self.node(parent).ok_or(Errno::ENOENT)?;
        let n = pname.append(&comp_of(name)?);
        if let Err(e) = granary_packet::Name::from_uri(&n.to_string()) {
            tracing::warn!("{n}: {e}");
            return Err(Errno::EINVAL);
        }
        Ok(n)
    }

    fn find(&self, parent: u64, name: &OsStr) -> Result<(Name, Entry), Errno> {
        let (pname, kind) = self.node(parent).ok_or(Errno::ENOENT)?;
        if !matches!(kind, Kind::Dir) {
            return Err(Errno::ENOTDIR);
        }
        let es = self.entries(parent, &pname)?;
        let e = es
            .into_iter()
            .find(|e| e.fs_name == name.as_bytes())
            .ok_or(Errno::ENOENT)?;
        Ok((pname, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_as_times() {
        use crate::fetch::version_time;
        let t = |v| {
            version_time(v)
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        };
        assert_eq!(t(1_795_430_698_329_782), 1_795_430_698);
        assert_eq!(t(1_795_430_698_329), 1_795_430_698);
        assert_eq!(t(1_795_430_698), 1_795_430_698);
        assert_eq!(t(3), 0);
    }
}
