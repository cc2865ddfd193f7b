//! # granary-store
//!
//! The file-backed repository store. Each published file version is a
//! regular file under `<root>/objects/`, at a path derived from its name
//! ([`path`]); its metadata lives in `user.granary.*` xattrs or a sidecar
//! ([`meta`]); per-segment SHA-256 hashes sit beside it (`@<v>.hashes`, 32
//! bytes per segment) for the manifest. Ingest streams in constant memory,
//! hashing as it copies, and publishes atomically (temp file in
//! `<root>/tmp/`, fsync, rename, fsync directory); leftovers of an
//! interrupted ingest are removed on open. Rename is a directory rename plus
//! a metadata update: no segment is touched.
//!
//! This file holds the types, [`Store::open`] and the files beside a
//! version; the `Store` methods live by concern in `ingest.rs` (put),
//! `lookup.rs` (versions, get, segment reads, listing), `rename.rs` (rename,
//! remove), `index_upkeep.rs` (the hash index's upkeep, chunks by hash) and
//! `config.rs` (`config.toml`).
//!
//! Depends only on `granary-packet`. Does no networking and no signing.
#![forbid(unsafe_code)]

pub mod chunking;
pub mod hash_index;
pub mod integrity;
pub mod meta;
pub mod path;

mod config;
mod index_upkeep;
mod ingest;
mod lookup;
mod pipe;
mod rename;
mod staged;

use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use granary_packet::Name;

pub use chunking::Chunking;
pub use config::{RepoConfig, SEGMENT_SIGNATURES};
pub use index_upkeep::Reindexed;
pub use lookup::{usage, OpenData, Usage, DROP_BEHIND_MIN, DROP_WINDOW};

/// A version's side files read in runs beside its data ([`OpenData`]; here, not in
/// `lookup`, because the serve-time check in `integrity` names it too).
#[derive(Clone, Copy)]
pub(crate) enum Side {
    /// `.offsets`: 8 bytes per segment boundary.
    Offsets,
    /// `.crc32`: 4 bytes per segment.
    Crcs,
}
pub use meta::{Backend, FileMeta};
pub use pipe::{pipe, PipeReader, PipeWriter, Stopped, PIPE_DEPTH};

/// Default content bytes per segment (a Data with this much content and a
/// typical name fits the 8800-byte packet limit).
pub const DEFAULT_SEGMENT_SIZE: u32 = 8192;

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The name cannot be stored.
    #[error("{0}")]
    Name(#[from] path::NameError),
    /// No such object or version.
    #[error("not found: {0}")]
    NotFound(String),
    /// The target exists.
    #[error("already exists: {0}")]
    Exists(String),
    /// Metadata or files disagree.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// File-system error.
    #[error("{path}: {source}")]
    Io {
        /// Path involved.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// Result alias.
pub type Result<T> = std::result::Result<T, Error>;

fn sync_dir(dir: &Path) {
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// The store-wide publish lock (`<root>/publish.lock`, `flock`): held by
/// whoever moves a version into place, from the check that it does not
/// exist yet to the rename of its data file. Every process and thread that
/// publishes into one store takes it (each opens the file anew, so threads
/// of one process exclude each other too), so of several writers of one
/// version exactly one publishes and the others get [`Error::Exists`]; a
/// writer that dies holding it releases it with its descriptor. Only
/// renames happen under it: ingest, hashing and syncing run outside.
pub(crate) struct PublishLock(#[allow(dead_code)] fs::File);

impl Store {
    pub(crate) fn publish_lock(&self) -> Result<PublishLock> {
        let p = self.root.join("publish.lock");
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)
            .map_err(Error::io(&p))?;
        loop {
            match rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive) {
                Ok(()) => return Ok(PublishLock(f)),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Error::io(&p)(e.into())),
            }
        }
    }
}

/// Writes a small file atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::Corrupt(format!("{} has no parent", path.display())))?;
    let tmp = dir.join(format!(".tmp-{}-{}", std::process::id(), unique()));
    let mut f = fs::File::create(&tmp).map_err(Error::io(&tmp))?;
    f.write_all(bytes).map_err(Error::io(&tmp))?;
    f.sync_all().map_err(Error::io(&tmp))?;
    fs::rename(&tmp, path).map_err(Error::io(path))?;
    sync_dir(dir);
    Ok(())
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ N.fetch_add(1, Ordering::Relaxed).rotate_left(40)
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Options of one ingest.
#[derive(Debug, Clone)]
pub struct PutOptions {
    /// Version (default: now in microseconds).
    pub version: Option<u64>,
    /// Content bytes per segment.
    pub segment_size: u32,
    /// Content type.
    pub content_type: Option<String>,
    /// Chunking (overrides `segment_size` when set).
    pub chunking: Option<Chunking>,
    /// Add the segments to the hash index once published.
    pub index: bool,
    /// Also compute the SHA-256 of the whole file (one more hashing pass;
    /// recorded in the metadata and the manifest root). Off by default:
    /// the manifest's hash tree already identifies the content.
    pub file_sha256: bool,
    /// The SHA-256 of the segment hashes concatenated in order (32 bytes
    /// each): when set, the version is published only if its segments are
    /// exactly these (e.g. a fetched file, checked against the manifest it
    /// was fetched by, that may have changed on disk since).
    pub expect_hashes: Option<[u8; 32]>,
    /// Stage the version instead of publishing it: it is left complete in
    /// the temp directory, nothing made durable, and the entry returned
    /// names its temp data file (files beside it — manifest, levels — may
    /// be added with [`Store::write_extra`], metadata with
    /// [`Store::set_meta`]). [`Store::commit`] then publishes many staged
    /// versions with two `syncfs` in all instead of several `fsync`s each.
    /// Not indexed until committed.
    pub staged: bool,
    /// [`Store::put_file`] may take the source file: where it cannot be
    /// reflinked, it is moved into the store (same file system) instead of
    /// copied, and only read to hash it — one pass instead of two. For a
    /// caller's own temporary file (a replica fetched into the data
    /// directory), never for a user's file: it is gone afterwards.
    pub take_source: bool,
    /// The segments the file is known to consist of, in order (a replica
    /// whose every segment the fetch has just checked against the signed
    /// manifest): the ingest cuts at these lengths and records these hashes
    /// instead of cutting and hashing again; it still reads the bytes once,
    /// to compare each segment's CRC-32 with the one recorded when it was
    /// checked. The file must be exactly these segments, with those
    /// CRC-32s, or nothing is published. Only with
    /// [`PutOptions::take_source`] (the caller's own file, which nobody
    /// else writes); ignored otherwise.
    pub known_segments: Option<std::sync::Arc<KnownSegments>>,
}

/// Lengths and SHA-256s of a file's segments ([`PutOptions::known_segments`]).
#[derive(Debug, Clone, Default)]
pub struct KnownSegments {
    /// Length of each segment (none empty).
    pub lengths: Vec<u32>,
    /// SHA-256 of each segment.
    pub hashes: Vec<[u8; 32]>,
    /// CRC-32 of each segment's bytes as they were checked against its
    /// hash: the ingest compares them with the bytes it reads.
    pub crcs: Vec<u32>,
}

impl Default for PutOptions {
    fn default() -> Self {
        PutOptions {
            version: None,
            segment_size: DEFAULT_SEGMENT_SIZE,
            content_type: None,
            chunking: None,
            index: true,
            file_sha256: false,
            expect_hashes: None,
            staged: false,
            take_source: false,
            known_segments: None,
        }
    }
}

/// One stored version.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Data file.
    pub path: PathBuf,
    /// Its metadata.
    pub meta: FileMeta,
    /// The file, open (shared), when the entry came from a lookup.
    pub file: Option<std::sync::Arc<lookup::OpenData>>,
    /// Its `.offsets` file, open, for variable-size segments from a lookup.
    pub offsets: Option<std::sync::Arc<fs::File>>,
    /// Its `.hashes` file, open, from a lookup (serve-time integrity checks
    /// read one hash per segment served).
    pub hashes: Option<std::sync::Arc<fs::File>>,
    /// Its `.crc32` file, open, from a lookup (when the version has one:
    /// the serve-time check reads a CRC-32 instead of re-hashing).
    pub crcs: Option<std::sync::Arc<fs::File>>,
}

/// The store.
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    objects: PathBuf,
    tmp: PathBuf,
    backend: Backend,
    /// Recently resolved versions and their open files, for serving: a
    /// lookup costs a `readdir`, an `open` and a dozen `getxattr`s
    /// otherwise. A hit costs a `stat` at most every 2 ms, two for a latest
    /// version: renames, removals and (through the name's directory) new
    /// versions by other processes are seen within that, or at once after
    /// [`Store::forget`]. Lookups are trusted for [`CACHE_TTL`] unless
    /// [`Store::set_cache_ttl`] says otherwise.
    cache: Arc<std::sync::Mutex<LookupCache>>,
    /// Most cached lookups ([`Store::set_cache_max`]).
    cache_max: std::sync::atomic::AtomicUsize,
    /// The hash index, opened on first use; `None` inside while another
    /// process holds it.
    index: std::sync::Mutex<IndexState>,
    /// Held while marks are being indexed (one catch-up at a time).
    catching: std::sync::Mutex<()>,
    /// Set by [`Store::index_in_background`]: lookups never index marks
    /// themselves.
    background: std::sync::atomic::AtomicBool,
    /// Set by [`Store::set_data_only`]: lookups open the data file alone.
    data_only: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Default)]
struct IndexState {
    db: Option<std::sync::Arc<hash_index::Index>>,
    /// Last time an open was tried or marks were looked for.
    checked: Option<std::time::Instant>,
    /// Why the last open failed.
    error: Option<String>,
}

#[derive(Debug)]
struct LookupCache {
    map: std::collections::HashMap<(Name, Option<u64>), Cached>,
    /// Data-only lookups past their time to live, their files closed: what
    /// the lookup found, and the data file's inode and change time as it was
    /// read. [`Store::get_cached`] brings one back without waiting for the
    /// disk when the file is still that one, unchanged (see [`Dormant`]).
    dormant: std::collections::HashMap<(Name, Option<u64>), Dormant>,
    /// How long a lookup is trusted ([`Store::set_cache_ttl`]).
    ttl: std::time::Duration,
}

impl Default for LookupCache {
    fn default() -> Self {
        LookupCache {
            map: Default::default(),
            dormant: Default::default(),
            ttl: CACHE_TTL,
        }
    }
}

impl LookupCache {
    /// Drops the lookups no longer trusted (closing their files); those that
    /// can come back are kept dormant.
    fn sweep(&mut self, now: std::time::Instant) {
        let expired: Vec<_> = self
            .map
            .iter()
            .filter(|(_, x)| now.duration_since(x.inserted) >= x.ttl)
            .map(|(k, _)| k.clone())
            .collect();
        for k in expired {
            if let Some(c) = self.map.remove(&k) {
                self.put_dormant(k, c);
            }
        }
    }

    /// Keeps what an expired lookup found, without its files, when it can be
    /// checked again without a lookup (a data-only lookup of a settled file).
    fn put_dormant(&mut self, key: (Name, Option<u64>), c: Cached) {
        let Some(stamp) = c.stamp else {
            return;
        };
        if self.dormant.len() >= DORMANT_MAX {
            self.dormant.clear();
        }
        let d = Dormant {
            path: c.entry.path.clone(),
            meta: c.entry.meta.clone(),
            stamp,
            dir: c.dir,
        };
        self.dormant.insert(key, d);
    }
}

/// Most dormant lookups kept per store (a few hundred bytes each).
const DORMANT_MAX: usize = 8192;

/// A data file as a lookup opened it: inode and change time, taken before its
/// attributes were read. An attribute written since, a `chmod`, a rename or a
/// write changes the change time; a file put at the path since has another
/// inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    ctime: (i64, i64),
}

/// What an expired data-only lookup found ([`LookupCache::dormant`]). It comes
/// back only through `RESOLVE_CACHED` opens (no wait for the disk) of a file
/// with the same [`Stamp`] and, for a latest version, a directory with the same
/// modification time: what a live hit checks, plus the change time for what a
/// live lookup's time to live covered (attributes rewritten in place).
#[derive(Debug, Clone)]
struct Dormant {
    path: PathBuf,
    meta: FileMeta,
    stamp: Stamp,
    dir: Option<Dir>,
}

#[derive(Debug)]
struct Cached {
    inserted: std::time::Instant,
    /// How long it is trusted: the cache's, or [`CACHE_TTL`] when the name's
    /// directory had changed just before (see [`Dir`]).
    ttl: std::time::Duration,
    /// Last time the file was seen to be the one open.
    checked: std::time::Instant,
    /// Inode of the open data file (a file put at the same path since is
    /// another one).
    ino: Option<u64>,
    /// For a latest-version lookup: the name's directory as it was before
    /// its versions were listed.
    dir: Option<Dir>,
    /// Set when the lookup may be kept dormant after its time to live: a
    /// data-only lookup through extended attributes, whose file and directory
    /// had settled (unchanged for [`DIR_SETTLE`]) when it was made.
    stamp: Option<Stamp>,
    entry: Arc<Entry>,
}

impl Cached {
    /// A lookup made (or brought back) `now`.
    fn new(
        now: std::time::Instant,
        ttl: std::time::Duration,
        dir: Option<Dir>,
        stamp: Option<Stamp>,
        entry: Arc<Entry>,
        ino: Option<u64>,
    ) -> Cached {
        Cached {
            inserted: now,
            ttl,
            checked: now,
            ino,
            dir,
            stamp,
            entry,
        }
    }
}

/// A directory's modification time, taken before its versions were listed: a
/// version added since changes it (one `stat` tells).
#[derive(Debug, Clone)]
struct Dir {
    path: PathBuf,
    mtime: std::time::SystemTime,
}

/// A directory changed less than this long before it was looked at may change
/// again within the same clock tick of the file system's timestamps, unseen:
/// lookups through it are trusted for [`CACHE_TTL`] only.
const DIR_SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

/// How often a cached lookup's file is checked to still exist.
const RECHECK: std::time::Duration = std::time::Duration::from_millis(2);

/// How long a cached lookup is trusted.
pub const CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(1);
const CACHE_MAX: usize = 4096;
/// Expired lookups are dropped every this many insertions.
const SWEEP_EVERY: usize = 64;

impl Store {
    /// Opens (creating) a store at `root`, detects the metadata backend and
    /// removes leftovers of interrupted ingests.
    pub fn open(root: impl AsRef<Path>) -> Result<Store> {
        let root = root.as_ref().to_path_buf();
        let objects = root.join("objects");
        let tmp = root.join("tmp");
        for d in [&objects, &tmp] {
            fs::create_dir_all(d).map_err(Error::io(d))?;
        }
        // Leftovers of interrupted ingests: temp files are named
        // `<pid>-<id>.*`; those of processes that are gone are removed,
        // those of a live ingest (another `granary put`) are left alone.
        for e in fs::read_dir(&tmp).map_err(Error::io(&tmp))?.flatten() {
            let fname = e.file_name();
            let owner = fname
                .to_str()
                .and_then(|f| f.split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            let alive = owner.is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
            if !alive {
                let _ = fs::remove_file(e.path());
            }
        }
        let backend = Self::backend_of(&root, &tmp)?;
        Ok(Store {
            root,
            objects,
            tmp,
            backend,
            cache: lookup::swept_cache(),
            cache_max: CACHE_MAX.into(),
            data_only: false.into(),
            index: Default::default(),
            catching: Default::default(),
            background: Default::default(),
        })
    }

    /// The metadata back end of the store at `root`: detected once, at the
    /// first open, and recorded in `<root>/backend`. Never detected again:
    /// a probe that fails for a passing reason (a full disk refuses the new
    /// xattr block) must not switch one process to sidecars while the
    /// others read xattrs.
    fn backend_of(root: &Path, tmp: &Path) -> Result<Backend> {
        let rec = root.join("backend");
        match fs::read_to_string(&rec) {
            Ok(s) if s.trim() == "xattr" => return Ok(Backend::Xattr),
            Ok(s) if s.trim() == "sidecar" => return Ok(Backend::Sidecar),
            Ok(s) => {
                return Err(Error::Corrupt(format!(
                    "{}: {:?} is not a metadata back end (xattr, sidecar)",
                    rec.display(),
                    s.trim()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&rec)(e)),
        }
        let b = meta::detect(tmp);
        let word = match b {
            Backend::Xattr => "xattr",
            Backend::Sidecar => "sidecar",
        };
        write_atomic(&rec, word.as_bytes())?;
        Ok(b)
    }

    /// The metadata backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The store root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

pub(crate) fn extra_path(data: &Path, suffix: &str) -> PathBuf {
    let mut s = data.as_os_str().to_owned();
    s.push(".");
    s.push(suffix);
    PathBuf::from(s)
}

impl Store {
    /// Writes a file beside a version (`@<v>.<suffix>`), atomically.
    pub fn write_extra(&self, e: &Entry, suffix: &str, bytes: &[u8]) -> Result<()> {
        let p = extra_path(&e.path, suffix);
        if self.is_staged(e) {
            // Made durable by the commit that publishes it.
            return fs::write(&p, bytes).map_err(Error::io(&p));
        }
        write_atomic(&p, bytes)
    }

    /// Reads a whole file beside a version, if present.
    pub fn read_extra(&self, e: &Entry, suffix: &str) -> Option<Vec<u8>> {
        fs::read(extra_path(&e.path, suffix)).ok()
    }

    /// Reads `len` bytes at `offset` of a file beside a version.
    pub fn read_extra_at(
        &self,
        e: &Entry,
        suffix: &str,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>> {
        let p = extra_path(&e.path, suffix);
        let f = fs::File::open(&p).map_err(Error::io(&p))?;
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, offset).map_err(Error::io(&p))?;
        Ok(buf)
    }

    /// Replaces a version's metadata.
    pub fn set_meta(&self, e: &Entry, m: &FileMeta) -> Result<()> {
        self.forget();
        meta::write(self.backend, &e.path, m)
    }
}

/// Suffix of a version's serve-time check file (`@<v>.crc32`): one CRC-32
/// (little-endian) per segment, taken at ingest beside its SHA-256.
pub const CRC_SUFFIX: &str = "crc32";

pub(crate) fn hashes_path(data: &Path) -> PathBuf {
    let mut s = data.as_os_str().to_owned();
    s.push(".hashes");
    PathBuf::from(s)
}
