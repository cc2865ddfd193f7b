//! The FUSE file system: inodes over NDN names, handles over pinned
//! versions, drafts (publish mode) over temporary files.
//!
//! Inodes: a directory is a name prefix; a file is one *version* of an
//! object (`<name>/v=<version>`), so a new version is a new inode and the
//! kernel's page cache of an open version is never mixed with another's.
//! Lookups resolve the latest version (RDR metadata, cached for the
//! directory TTL); the kernel keeps entries for the same TTL.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};
use granary_packet::{types::COMP_GENERIC, Component, Name};
use granary_transfer::ObjectInfo;

use crate::fetch::{Child, FetchError, Fetcher, Meta};
use crate::{Publisher, Stream};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update under these locks is a single insert/remove, so a
    // poisoned lock still holds consistent data.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn errno(e: &FetchError) -> Errno {
    match e {
        FetchError::NotFound(_) => Errno::ENOENT,
        FetchError::Io(_) => Errno::EIO,
    }
}

#[derive(Clone)]
enum Kind {
    Dir,
    File {
        versioned: Name,
        size: u64,
        mtime: SystemTime,
    },
}

struct Node {
    name: Name,
    kind: Kind,
    /// Its keys in [`Nodes::by_key`] (removed with it).
    keys: Vec<(u8, String)>,
}

impl Node {
    fn new(name: Name, kind: Kind) -> Node {
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
struct Nodes {
    next: u64,
    by_ino: HashMap<u64, Node>,
    by_key: HashMap<(u8, String), u64>,
    /// Entry replies not yet forgotten, per inode.
    lookups: HashMap<u64, u64>,
}

impl Nodes {
    fn get_or_add(&mut self, key: (u8, String), node: impl FnOnce() -> Node) -> u64 {
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
    fn add_key(&mut self, ino: u64, key: (u8, String)) {
        if let Some(n) = self.by_ino.get_mut(&ino) {
            n.keys.push(key.clone());
            self.by_key.insert(key, ino);
        }
    }

    /// The kernel was given `ino` once more (an entry reply).
    fn looked_up(&mut self, ino: u64) {
        *self.lookups.entry(ino).or_default() += 1;
    }

    /// The kernel forgot `n` of its references to `ino`; at none left the
    /// inode goes (the root stays, and so does a file still being written,
    /// `pinned`). True when it went.
    fn forget(&mut self, ino: u64, n: u64, pinned: bool) -> bool {
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
    fn listed(&self, key: &(u8, String)) -> u64 {
        use std::hash::{BuildHasher, BuildHasherDefault};
        self.by_key.get(key).copied().unwrap_or_else(|| {
            let h = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
                .hash_one(key);
            LISTED | (h >> 1)
        })
    }
}

/// The high bit marks the numbers of listed entries that have no inode.
const LISTED: u64 = 1 << 63;

/// One entry of a directory as the file system shows it.
#[derive(Clone)]
struct Entry {
    fs_name: Vec<u8>,
    comp: Component,
    dir: bool,
}

/// A file being written (publish mode), published on close as a new
/// version of `name`: streamed into the repository while it is written in
/// order, else a temporary file at `path`.
struct Draft {
    name: Mutex<Name>,
    path: PathBuf,
    body: Mutex<Body>,
    dirty: AtomicBool,
    abandoned: AtomicBool,
    opens: AtomicU64,
}

/// Where a draft's bytes are.
enum Body {
    /// Written in order from the start so far: each write goes straight
    /// into the repository's ingest (no file here, no second pass).
    Stream { s: Box<dyn Stream>, size: u64 },
    /// A temporary file, written at any offset, published from its path.
    File(Arc<File>),
    /// Published from a stream and not changed since: the bytes are that
    /// version's (fetched into a file if the draft is changed or read).
    Published { versioned: Name, size: u64 },
    /// A stream that failed or was abandoned: its bytes are gone.
    Failed,
}

impl Draft {
    fn size(&self) -> u64 {
        match &*lock(&self.body) {
            Body::Stream { size, .. } | Body::Published { size, .. } => *size,
            Body::File(f) => f.metadata().map(|m| m.len()).unwrap_or(0),
            Body::Failed => 0,
        }
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

/// Adaptive read-ahead of one handle: the window doubles while reads are
/// sequential (up to `max`) and closes on a seek.
#[derive(Default)]
struct ReadAhead {
    next: u64,
    window: u64,
}

const RA_MIN: u64 = 256 << 10;
const NEAR: u64 = 4 << 20;

impl ReadAhead {
    fn on_read(&mut self, off: u64, len: u64, max: u64) -> u64 {
        let sequential =
            off + NEAR >= self.next && off <= self.next + NEAR && self.next > 0 || off == 0;
        self.window = if sequential {
            (self.window * 2).clamp(RA_MIN, max.max(RA_MIN))
        } else {
            0
        };
        self.next = self.next.max(off + len);
        if !sequential {
            self.next = off + len;
        }
        self.window
    }
}

/// Publish mode's state.
pub struct PublishState {
    /// Publishes, renames, removes.
    pub publisher: Arc<dyn Publisher>,
    /// Where drafts are written.
    pub drafts_dir: PathBuf,
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

const ROOT: u64 = 1;

/// A new, empty draft file.
fn draft_file(path: &std::path::Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
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
        let body = match streamed {
            Some(s) => Body::Stream { s, size: 0 },
            None => Body::File(Arc::new(draft_file(&path)?)),
        };
        Ok(Arc::new(Draft {
            name: Mutex::new(name.clone()),
            path,
            body: Mutex::new(body),
            dirty: AtomicBool::new(true),
            abandoned: AtomicBool::new(false),
            opens: AtomicU64::new(1),
        }))
    }

    /// The draft's file, made first when the draft is a stream (the bytes
    /// written so far become the file) or a published stream (its
    /// version's bytes are fetched into it).
    fn file_of(&self, d: &Draft) -> Result<Arc<File>, Errno> {
        let mut b = lock(&d.body);
        match &*b {
            Body::File(f) => return Ok(f.clone()),
            Body::Failed => return Err(Errno::EIO),
            _ => {}
        }
        let f = match std::mem::replace(&mut *b, Body::Failed) {
            Body::Stream { s, .. } => {
                if let Err(e) = s.into_file(&d.path) {
                    tracing::error!("{}: keeping the streamed bytes: {e}", lock(&d.name));
                    d.abandoned.store(true, Ordering::Release);
                    return Err(Errno::EIO);
                }
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&d.path)
                    .map_err(Errno::from)?
            }
            Body::Published { versioned, .. } => {
                let f = draft_file(&d.path).map_err(Errno::from)?;
                if let Err(e) = self.fill(&f, &versioned) {
                    tracing::error!("{versioned}: {e}");
                    return Err(errno(&e));
                }
                f
            }
            Body::File(_) | Body::Failed => unreachable!("handled above"),
        };
        let f = Arc::new(f);
        *b = Body::File(f.clone());
        Ok(f)
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

    /// Publishes a draft as a new version of its name; the inode then
    /// shows that version.
    fn publish_draft(&self, ino: u64, d: &Draft) -> Result<(), Errno> {
        let Some(p) = &self.publish else {
            return Err(Errno::EROFS);
        };
        if !d.dirty.swap(false, Ordering::AcqRel) || d.abandoned.load(Ordering::Acquire) {
            return Ok(());
        }
        let name = lock(&d.name).clone();
        let mut b = lock(&d.body);
        let (published, size) = match std::mem::replace(&mut *b, Body::Failed) {
            Body::Stream { s, size } => {
                let r = s.publish();
                match &r {
                    Ok(v) => {
                        *b = Body::Published {
                            versioned: v.clone(),
                            size,
                        }
                    }
                    // The bytes went with the stream: nothing to retry.
                    Err(_) => d.abandoned.store(true, Ordering::Release),
                }
                (r, size)
            }
            Body::File(f) => {
                let _ = f.sync_data();
                let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                *b = Body::File(f);
                let r = p.publisher.publish(&name, &d.path);
                if r.is_err() {
                    d.dirty.store(true, Ordering::Release);
                }
                (r, size)
            }
            other => {
                *b = other;
                return Ok(());
            }
        };
        drop(b);
        match published {
            Ok(versioned) => {
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
            Err(e) => {
                tracing::error!("publishing {name}: {e}");
                Err(Errno::EIO)
            }
        }
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

    /// True when the process behind a close is dying of a signal (killed
    /// midway): its draft must not be published. Linux sets the exit code
    /// before closing the files of an exiting task (`/proc/PID/stat`,
    /// fields 9 (flags, PF_EXITING = 4) and 52 (exit code, wait status)).
    fn killed(pid: u32) -> bool {
        let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // Fields after the command (in parentheses, which may hold spaces).
        let Some(rest) = s.rfind(')').map(|i| &s[i + 1..]) else {
            return false;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        // rest starts at field 3 (state).
        let flags: u64 = f.get(9 - 3).and_then(|v| v.parse().ok()).unwrap_or(0);
        let code: i64 = f.get(52 - 3).and_then(|v| v.parse().ok()).unwrap_or(0);
        flags & 4 != 0 && code & 0x7f != 0
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

fn entry_of(c: &Child) -> Entry {
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
fn comp_of(name: &OsStr) -> Result<Component, Errno> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() > 8000 {
        return Err(Errno::EINVAL);
    }
    Ok(Component::generic(b))
}

impl Filesystem for GranaryFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_readahead(1 << 20);
        // O_TRUNC arrives with open (no separate truncate to 0 first).
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_ATOMIC_O_TRUNC);
        if self.writable() {
            let _ = config.add_capabilities(fuser::InitFlags::FUSE_BIG_WRITES);
            let _ = config.set_max_write(1 << 20);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let ttl = self.s.dir_ttl;
        // A file being written here first.
        if let Some((pname, _)) = self.node(parent.0) {
            if let Ok(c) = comp_of(name) {
                let n = pname.append(&c);
                if let Some(ino) = lock(&self.draft_names).get(&n).copied() {
                    self.entry_given(ino);
                    return reply.entry(&Duration::ZERO, &self.draft_attr(ino), Generation(0));
                }
            }
        }
        let (pname, e) = match self.find(parent.0, name) {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        let child = Self::child_name(&pname, &e);
        if e.dir {
            let ino = self.give_dir(&child);
            return reply.entry(&ttl, &self.attr(ino, &Kind::Dir), Generation(0));
        }
        match self.meta(&child) {
            Ok((m, size)) => {
                let (ino, kind) = self.give_file(&child, &m, size);
                reply.entry(&ttl, &self.attr(ino, &kind), Generation(0))
            }
            Err(err) => {
                tracing::warn!("{child}: {err}");
                reply.error(errno(&err))
            }
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.node(ino.0) {
            Some((_, k)) => {
                let ttl = if lock(&self.drafts).contains_key(&ino.0) {
                    Duration::ZERO
                } else {
                    self.s.dir_ttl
                };
                reply.attr(&ttl, &self.attr(ino.0, &k))
            }
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let Some((_, k)) = self.node(ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        if let Some(s) = size {
            // Only a file being written can change size.
            let Some(d) = lock(&self.drafts).get(&ino.0).cloned() else {
                return reply.error(if self.writable() {
                    Errno::EPERM
                } else {
                    Errno::EROFS
                });
            };
            // The size it has already (`ftruncate(fd, 0)` after creating):
            // nothing changes, a stream stays one.
            if d.size() != s || matches!(*lock(&d.body), Body::File(_)) {
                let f = match self.file_of(&d) {
                    Ok(f) => f,
                    Err(e) => return reply.error(e),
                };
                if let Err(e) = f.set_len(s) {
                    return reply.error(e.into());
                }
                d.dirty.store(true, Ordering::Release);
            }
        }
        // Modes, owners and times are not kept: accepted and ignored (as
        // `cp -p` expects), shown as the mount's.
        reply.attr(&Duration::ZERO, &self.attr(ino.0, &k))
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let Some((name, kind)) = self.node(ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let write = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
        // Joined under the map's lock: a release that drops the draft
        // decides under it too, so this handle never joins a draft that is
        // going away (close() returns before the kernel sends the release).
        let draft = lock(&self.drafts).get(&ino.0).cloned().inspect(|d| {
            d.opens.fetch_add(1, Ordering::AcqRel);
        });
        if let Some(d) = draft {
            return self.open_joined(ino.0, &d, flags, reply);
        }
        let Kind::File { versioned, .. } = kind else {
            return reply.error(Errno::EISDIR);
        };
        if write {
            if !self.writable() {
                return reply.error(Errno::EROFS);
            }
            // Rewriting a stored file: a draft with its bytes (none with
            // O_TRUNC: then streamed), published as a new version on close.
            let trunc = flags.0 & libc::O_TRUNC != 0;
            let d = match self.new_draft(&name, trunc) {
                Ok(d) => d,
                Err(e) => return reply.error(e.into()),
            };
            if !trunc {
                let copied = match &*lock(&d.body) {
                    Body::File(f) => self.fill(f, &versioned),
                    _ => Err(FetchError::Io("a rewrite's draft is a file".into())),
                };
                if let Err(e) = copied {
                    let _ = std::fs::remove_file(&d.path);
                    return reply.error(errno(&e));
                }
            }
            // Another open may have made a draft of this file while ours
            // was filled: then this handle joins that one and ours goes.
            let joined = {
                let mut g = lock(&self.drafts);
                match g.get(&ino.0) {
                    Some(other) => {
                        other.opens.fetch_add(1, Ordering::AcqRel);
                        Some(other.clone())
                    }
                    None => {
                        g.insert(ino.0, d.clone());
                        None
                    }
                }
            };
            if let Some(other) = joined {
                d.abandoned.store(true, Ordering::Release);
                // A stream is dropped: its ingest removes what it wrote.
                *lock(&d.body) = Body::Failed;
                let _ = std::fs::remove_file(&d.path);
                return self.open_joined(ino.0, &other, flags, reply);
            }
            lock(&self.draft_names).insert(name, ino.0);
            return reply.opened(
                FileHandle(self.new_fh(Handle::Draft(ino.0))),
                FopenFlags::empty(),
            );
        }
        match self.rt.block_on(self.fetcher.open(&versioned)) {
            Ok((id, info)) => {
                let fh = self.new_fh(Handle::Object {
                    id,
                    info,
                    ra: Mutex::new(ReadAhead::default()),
                });
                // One inode is one version: its cached pages stay valid.
                reply.opened(FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE)
            }
            Err(e) => {
                tracing::warn!("open {versioned}: {e}");
                reply.error(errno(&e))
            }
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(h) = lock(&self.handles).get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        match &*h {
            Handle::Draft(ino) => {
                let Some(d) = lock(&self.drafts).get(ino).cloned() else {
                    return reply.error(Errno::EBADF);
                };
                let f = match self.file_of(&d) {
                    Ok(f) => f,
                    Err(e) => return reply.error(e),
                };
                let mut buf = vec![0; size as usize];
                let mut n = 0;
                while n < buf.len() {
                    match f.read_at(&mut buf[n..], offset + n as u64) {
                        Ok(0) => break,
                        Ok(k) => n += k,
                        Err(e) => return reply.error(e.into()),
                    }
                }
                reply.data(&buf[..n])
            }
            Handle::Object { id, info, ra } => {
                let ahead = match self.s.max_readahead {
                    0 => 0,
                    max => lock(ra).on_read(offset, size as u64, max),
                };
                let (id, info) = (*id, info.clone());
                let f = self.fetcher.clone();
                self.rt.spawn(async move {
                    match f.read(id, &info, offset, size as u64, ahead).await {
                        Ok(b) => reply.data(&b),
                        Err(e) => {
                            tracing::warn!("read {} at {offset}: {e}", info.versioned);
                            reply.error(Errno::EIO)
                        }
                    }
                });
            }
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let h = lock(&self.handles).get(&fh.0).cloned();
        let Some(Handle::Draft(ino)) = h.as_deref() else {
            return reply.error(Errno::EBADF);
        };
        let Some(d) = lock(&self.drafts).get(ino).cloned() else {
            return reply.error(Errno::EBADF);
        };
        {
            // In order: straight into the ingest.
            let mut b = lock(&d.body);
            if let Body::Stream { s, size } = &mut *b {
                if offset == *size {
                    return match s.write(data) {
                        Ok(()) => {
                            *size += data.len() as u64;
                            d.dirty.store(true, Ordering::Release);
                            reply.written(data.len() as u32)
                        }
                        Err(e) => {
                            tracing::error!("{}: {e}", lock(&d.name));
                            *b = Body::Failed;
                            d.abandoned.store(true, Ordering::Release);
                            reply.error(Errno::EIO)
                        }
                    };
                }
            }
        }
        let f = match self.file_of(&d) {
            Ok(f) => f,
            Err(e) => return reply.error(e),
        };
        match f.write_all_at(data, offset) {
            Ok(()) => {
                d.dirty.store(true, Ordering::Release);
                reply.written(data.len() as u32)
            }
            Err(e) => reply.error(e.into()),
        }
    }

    fn flush(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Each close(): a draft is published now, so that when close()
        // returns the version is served; unless its writer is being killed.
        let h = lock(&self.handles).get(&fh.0).cloned();
        let Some(Handle::Draft(ino)) = h.as_deref() else {
            return reply.ok();
        };
        let Some(d) = lock(&self.drafts).get(ino).cloned() else {
            return reply.ok();
        };
        if Self::killed(req.pid()) {
            tracing::warn!(
                "{}: the writer (pid {}) was killed: nothing published",
                lock(&d.name),
                req.pid()
            );
            d.abandoned.store(true, Ordering::Release);
            // A stream is dropped now: its ingest removes what it wrote.
            let mut b = lock(&d.body);
            if matches!(*b, Body::Stream { .. }) {
                *b = Body::Failed;
            }
            return reply.ok();
        }
        match self.publish_draft(*ino, &d) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _ds: bool, reply: ReplyEmpty) {
        let h = lock(&self.handles).get(&fh.0).cloned();
        if let Some(Handle::Draft(ino)) = h.as_deref() {
            let d = lock(&self.drafts).get(ino).cloned();
            // A stream's bytes are durable when published (on close).
            let file = d.and_then(|d| match &*lock(&d.body) {
                Body::File(f) => Some(f.clone()),
                _ => None,
            });
            if let Some(f) = file {
                if let Err(e) = f.sync_data() {
                    return reply.error(e.into());
                }
            }
        }
        reply.ok()
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let h = lock(&self.handles).remove(&fh.0);
        if let Some(Handle::Draft(ino)) = h.as_deref() {
            let d = lock(&self.drafts).get(ino).cloned();
            if let Some(d) = d {
                if let Err(e) = self.leave_draft(*ino, &d) {
                    return reply.error(e);
                }
            }
        }
        reply.ok()
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some((name, kind)) = self.node(ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        if !matches!(kind, Kind::Dir) {
            return reply.error(Errno::ENOTDIR);
        }
        let es = match self.entries(ino.0, &name) {
            Ok(e) => e,
            Err(e) => return reply.error(e),
        };
        let mut all: Vec<(u64, FileType, Vec<u8>)> = vec![
            (ino.0, FileType::Directory, b".".to_vec()),
            (ROOT, FileType::Directory, b"..".to_vec()),
        ];
        let mut seen = HashSet::new();
        let nodes = lock(&self.nodes);
        for e in &es {
            let child = Self::child_name(&name, e);
            let (i, t) = if e.dir {
                (nodes.listed(&(0, child.to_string())), FileType::Directory)
            } else {
                (nodes.listed(&(2, child.to_string())), FileType::RegularFile)
            };
            seen.insert(e.fs_name.clone());
            all.push((i, t, e.fs_name.clone()));
        }
        drop(nodes);
        // Files being written here, not listed yet.
        for (n, i) in lock(&self.draft_names).iter() {
            if n.len() == name.len() + 1 && name.is_prefix_of(n) {
                if let Some(e) = n.last().map(|c| {
                    entry_of(&Child {
                        comp: c.to_owned(),
                        object: true,
                        prefix: false,
                    })
                }) {
                    if seen.insert(e.fs_name.clone()) {
                        all.push((*i, FileType::RegularFile, e.fs_name));
                    }
                }
            }
        }
        for (k, (i, t, n)) in all.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(i), k as u64 + 1, t, OsStr::from_bytes(&n)) {
                break;
            }
        }
        reply.ok()
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let n = match self.new_child(parent.0, name) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let d = match self.new_draft(&n, true) {
            Ok(d) => d,
            Err(e) => return reply.error(e.into()),
        };
        let ino = {
            let mut g = lock(&self.nodes);
            g.next += 1;
            let ino = g.next;
            g.by_ino.insert(
                ino,
                Node::new(
                    n.clone(),
                    Kind::File {
                        versioned: Name::new(),
                        size: 0,
                        mtime: SystemTime::now(),
                    },
                ),
            );
            g.looked_up(ino);
            ino
        };
        lock(&self.drafts).insert(ino, d);
        lock(&self.draft_names).insert(n, ino);
        let fh = self.new_fh(Handle::Draft(ino));
        reply.created(
            &Duration::ZERO,
            &self.draft_attr(ino),
            Generation(0),
            FileHandle(fh),
            FopenFlags::empty(),
        )
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let n = match self.new_child(parent.0, name) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        if self.find(parent.0, name).is_ok() {
            return reply.error(Errno::EEXIST);
        }
        lock(&self.made_dirs).insert(n.clone());
        self.invalidate(parent.0, None);
        let ino = self.give_dir(&n);
        reply.entry(&self.s.dir_ttl, &self.attr(ino, &Kind::Dir), Generation(0))
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let p = match self.publish_of() {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let (pname, e) = match self.find(parent.0, name) {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        if e.dir {
            return reply.error(Errno::EISDIR);
        }
        let n = Self::child_name(&pname, &e);
        match p.publisher.remove(&n) {
            Ok(()) => {
                self.fetcher.forget(&n);
                self.invalidate(parent.0, Some(&n));
                reply.ok()
            }
            Err(err) => {
                tracing::error!("removing {n}: {err}");
                reply.error(Errno::EIO)
            }
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let Err(e) = self.publish_of() {
            return reply.error(e);
        }
        let (pname, e) = match self.find(parent.0, name) {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        if !e.dir {
            return reply.error(Errno::ENOTDIR);
        }
        let n = Self::child_name(&pname, &e);
        let ino = self.dir_ino(&n);
        self.invalidate(ino, None);
        match self.entries(ino, &n) {
            Ok(es)
                if es
                    .iter()
                    .any(|x| !lock(&self.made_dirs).contains(&n.append(&x.comp))) =>
            {
                return reply.error(Errno::ENOTEMPTY)
            }
            Ok(es) if !es.is_empty() => return reply.error(Errno::ENOTEMPTY),
            _ => {}
        }
        lock(&self.made_dirs).remove(&n);
        self.invalidate(parent.0, None);
        reply.ok()
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let p = match self.publish_of() {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let (Some((pname, _)), Some((npname, _))) = (self.node(parent.0), self.node(newparent.0))
        else {
            return reply.error(Errno::ENOENT);
        };
        let (old, new) = match (comp_of(name), comp_of(newname)) {
            (Ok(a), Ok(b)) => (pname.append(&a), npname.append(&b)),
            _ => return reply.error(Errno::EINVAL),
        };
        // A file still being written: it will be published under the new
        // name.
        let draft = lock(&self.draft_names).remove(&old);
        if let Some(ino) = draft {
            let d = lock(&self.drafts).get(&ino).cloned();
            if let Some(d) = d {
                // A stream is for its first name: a file from here on.
                if matches!(*lock(&d.body), Body::Stream { .. }) {
                    if let Err(e) = self.file_of(&d) {
                        lock(&self.draft_names).insert(old, ino);
                        return reply.error(e);
                    }
                }
                *lock(&d.name) = new.clone();
            }
            lock(&self.draft_names).insert(new, ino);
            return reply.ok();
        }
        let (pname, e) = match self.find(parent.0, name) {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        let old = Self::child_name(&pname, &e);
        if e.dir {
            // Prefixes are not renamed in one step: EXDEV makes `mv` copy
            // and remove instead.
            return reply.error(Errno::EXDEV);
        }
        // rename(2) replaces the target.
        if let Ok((_, t)) = self.find(newparent.0, newname) {
            if t.dir {
                return reply.error(Errno::EISDIR);
            }
            if let Err(err) = p.publisher.remove(&new) {
                tracing::error!("replacing {new}: {err}");
                return reply.error(Errno::EIO);
            }
        }
        match p.publisher.rename(&old, &new) {
            Ok(()) => {
                self.fetcher.forget(&old);
                self.invalidate(parent.0, Some(&old));
                self.invalidate(newparent.0, Some(&new));
                reply.ok()
            }
            Err(err) => {
                tracing::error!("renaming {old} to {new}: {err}");
                reply.error(Errno::EIO)
            }
        }
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: fuser::ReplyXattr,
    ) {
        reply.error(Errno::from_i32(libc::ENODATA))
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, size: u32, reply: fuser::ReplyXattr) {
        if size == 0 {
            reply.size(0)
        } else {
            reply.data(&[])
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let pinned = lock(&self.drafts).contains_key(&ino.0);
        if lock(&self.nodes).forget(ino.0, nlookup, pinned) {
            lock(&self.dirs).remove(&ino.0);
        }
    }

    /// `files`: the inodes held now (what `df -i` shows as used).
    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: fuser::ReplyStatfs) {
        let files = lock(&self.nodes).by_ino.len() as u64;
        reply.statfs(0, 0, 0, files, 0, 128 << 10, 255, 128 << 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_ahead_grows_while_sequential_and_closes_on_a_seek() {
        let mut ra = ReadAhead::default();
        let max = 8 << 20;
        let mut w = Vec::new();
        let mut off = 0;
        for _ in 0..8 {
            w.push(ra.on_read(off, 128 << 10, max));
            off += 128 << 10;
        }
        assert_eq!(w[0], RA_MIN);
        assert!(w.windows(2).all(|p| p[1] >= p[0]));
        assert_eq!(*w.last().unwrap(), max);
        // A far seek: no read-ahead until reads are sequential again.
        assert_eq!(ra.on_read(900 << 20, 4096, max), 0);
        assert_eq!(ra.on_read((900 << 20) + 4096, 4096, max), RA_MIN);
    }

    #[test]
    fn a_live_process_is_not_being_killed() {
        assert!(!GranaryFs::killed(std::process::id()));
        assert!(!GranaryFs::killed(u32::MAX));
    }

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
