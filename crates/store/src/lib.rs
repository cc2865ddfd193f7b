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
//! Depends only on `granary-packet`. Does no networking and no signing.
#![forbid(unsafe_code)]

pub mod chunking;
pub mod index;
pub mod integrity;
pub mod meta;
pub mod path;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use granary_packet::Name;
use sha2::{Digest, Sha256};

pub use chunking::Chunking;
pub use meta::{Backend, FileMeta};

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
    pub file: Option<std::sync::Arc<fs::File>>,
    /// Its `.offsets` file, open, for variable-size segments from a lookup.
    pub offsets: Option<std::sync::Arc<fs::File>>,
    /// Its `.hashes` file, open, from a lookup (serve-time integrity checks
    /// read one hash per segment served).
    pub hashes: Option<std::sync::Arc<fs::File>>,
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
    /// otherwise. A hit costs a `stat` at most every 2 ms (renames and
    /// removals by other processes are seen within that, or at once after
    /// [`Store::forget`]); a new version published by another process is
    /// seen within [`CACHE_TTL`].
    cache: std::sync::Mutex<LookupCache>,
    /// The hash index, opened on first use; `None` inside while another
    /// process holds it.
    index: std::sync::Mutex<IndexState>,
    /// Held while marks are being indexed (one catch-up at a time).
    catching: std::sync::Mutex<()>,
    /// Set by [`Store::index_in_background`]: lookups never index marks
    /// themselves.
    background: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Default)]
struct IndexState {
    db: Option<std::sync::Arc<index::Index>>,
    /// Last time an open was tried or marks were looked for.
    checked: Option<std::time::Instant>,
    /// Why the last open failed.
    error: Option<String>,
}

type LookupCache = std::collections::HashMap<(Name, Option<u64>), Cached>;

#[derive(Debug)]
struct Cached {
    inserted: std::time::Instant,
    /// Last time the file was seen to exist.
    checked: std::time::Instant,
    entry: Arc<Entry>,
}

/// How often a cached lookup's file is checked to still exist.
const RECHECK: std::time::Duration = std::time::Duration::from_millis(2);

/// How long a cached lookup is trusted.
pub const CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(1);
const CACHE_MAX: usize = 4096;

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
        let backend = meta::detect(&tmp);
        Ok(Store {
            root,
            objects,
            tmp,
            backend,
            cache: Default::default(),
            index: Default::default(),
            catching: Default::default(),
            background: Default::default(),
        })
    }

    /// The metadata backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The store root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Ingests `reader` as a new version of `name`, streaming: the bytes are
    /// copied to a temp file while they are cut into segments
    /// ([`PutOptions::chunking`]) and each segment is hashed, all in one
    /// pass over a 1 MiB buffer; the version becomes visible only when
    /// complete and durable, and its segments are then added to the hash
    /// index ([`PutOptions::index`]). `progress` gets the byte count so far.
    pub fn put(
        &self,
        name: &Name,
        reader: impl Read,
        opts: &PutOptions,
        progress: impl FnMut(u64),
    ) -> Result<Entry> {
        let id = format!("{}-{}", std::process::id(), unique());
        self.ingest(name, reader, None, &id, opts, progress)
    }

    /// Ingests the file at `src`. Where the file system can share extents
    /// (reflink: XFS, btrfs; source and store on the same file system) the
    /// temp file is a copy-on-write clone of `src` and the ingest only reads
    /// it once to hash it — no data is written; elsewhere this is [`put`]
    /// on the opened file. The hashes are computed from the clone, so they
    /// describe exactly the stored bytes even if `src` changes meanwhile.
    /// Returns the entry and whether the data was reflinked.
    ///
    /// [`put`]: Store::put
    pub fn put_file(
        &self,
        name: &Name,
        src: &Path,
        opts: &PutOptions,
        progress: impl FnMut(u64),
    ) -> Result<(Entry, bool)> {
        path::object_dir(name)?;
        let id = format!("{}-{}", std::process::id(), unique());
        let clone = self.tmp.join(format!("{id}.data"));
        if reflink_copy::reflink(src, &clone).is_ok() {
            let f = fs::File::open(&clone).map_err(Error::io(&clone));
            let r = f.and_then(|f| self.ingest(name, f, Some(&clone), &id, opts, progress));
            if r.is_err() {
                let _ = fs::remove_file(&clone);
            }
            return r.map(|e| (e, true));
        }
        let _ = fs::remove_file(&clone);
        // No reflink: read into the ingest's buffers and written from there
        // (with direct I/O where the file system takes it), so the hashes
        // describe exactly the bytes stored even if `src` changes
        // meanwhile.
        let r = fs::File::open(src)
            .map_err(Error::io(src))
            .and_then(|from| self.ingest(name, from, None, &id, opts, progress));
        r.map(|e| (e, false))
    }

    /// One streaming pass over `reader`: per-segment and whole-file hashes,
    /// and the copy into the temp data file ([`DataFile`]) — unless `cloned`
    /// names the temp data file that `reader` reads from (a reflink of the
    /// source).
    fn ingest(
        &self,
        name: &Name,
        mut reader: impl Read,
        cloned: Option<&Path>,
        id: &str,
        opts: &PutOptions,
        mut progress: impl FnMut(u64),
    ) -> Result<Entry> {
        let dir = self.objects.join(path::object_dir(name)?);
        let chunking = opts
            .chunking
            .unwrap_or(Chunking::Fixed(opts.segment_size.max(1)));
        chunking.validate().map_err(Error::Corrupt)?;
        let cutter = chunking.cutter();
        let version = opts.version.unwrap_or_else(now_us);
        let tmp_data = self.tmp.join(format!("{id}.data"));
        let tmp_hash = self.tmp.join(format!("{id}.hashes"));
        let tmp_off = self.tmp.join(format!("{id}.offsets"));
        let variable = !chunking.is_fixed();
        let final_data = dir.join(format!("@{version}"));
        let rel = final_data
            .strip_prefix(&self.objects)
            .map(|r| r.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The hash index, if this process can have it (otherwise the mark
        // written below gets the version indexed by whoever holds it).
        let index = if opts.index {
            self.index_handle()
        } else {
            None
        };
        let result = (|| -> Result<Entry> {
            let mut data = match cloned {
                Some(c) => DataFile::cloned(c)?,
                None => DataFile::create(&tmp_data)?,
            };
            let hashes =
                std::io::BufWriter::new(fs::File::create(&tmp_hash).map_err(Error::io(&tmp_hash))?);
            let offsets = if variable {
                Some(std::io::BufWriter::new(
                    fs::File::create(&tmp_off).map_err(Error::io(&tmp_off))?,
                ))
            } else {
                None
            };
            // Three stages, each on its own thread: this one reads and cuts
            // each block into segments; a worker hashes each segment (and
            // the whole file if asked), writes the hash and offset files
            // and feeds the index (a fourth thread); a writer puts the
            // block in the data file. Blocks of 1 MiB go round between
            // them, with `max` bytes of room in front where the reader puts
            // the undecided tail of the previous block (at most one
            // segment): constant memory, each byte copied once, and
            // reading, hashing and writing overlap (the reader never waits
            // for the disk; 16 blocks keep the stages fed through the
            // disk's hiccups). Cutting stays with reading: the bytes are
            // still in this core's cache, and on two cores one thread
            // fewer keeps the hasher running (FastCDC 1 GiB put 1.10 ->
            // 0.97 s, bench/RESULTS.md).
            const BLOCK: usize = 1 << 20;
            const BLOCKS: usize = 16;
            let max = cutter.max();
            let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Block>(BLOCKS);
            let (free_tx, free_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(BLOCKS);
            for _ in 0..BLOCKS {
                // Room for the carried tail, the block, and the slack that
                // puts the block at an aligned address (direct I/O).
                let _ = free_tx.send(vec![0u8; max + BLOCK + 2 * DataFile::ALIGN]);
            }
            // The writing stage: blocks go to the data file once hashed,
            // then back to the reader. On its own thread so that reading
            // never waits for the disk.
            let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<Block>(BLOCKS);
            let write = cloned.is_none();
            let write_thread = spawn("ingest-write", move || -> Result<DataFile> {
                for mut b in done_rx {
                    let offset = b.start + (b.head - b.begin) as u64;
                    if write && b.len > b.head {
                        data.write_block(&mut b.buf[b.head..], b.len - b.head, offset)?;
                    }
                    let _ = free_tx.send(b.buf);
                }
                Ok(data)
            })?;
            let worker_paths = (tmp_hash.clone(), tmp_off.clone());
            // One ingest at a time holds a write transaction; others (their
            // marks) are indexed when it is done, never waited for here.
            let writer = match &index {
                Some(ix) if !ix.writing() => ix.writer(&rel).ok(),
                _ => None,
            };
            let whole = opts.file_sha256;
            let worker = spawn("ingest-hash", move || {
                segment_worker(
                    full_rx,
                    done_tx,
                    hashes,
                    offsets,
                    writer,
                    whole,
                    worker_paths,
                )
            })?;
            let mut carver = Carver::new(&cutter);
            let mut size = 0u64;
            let read_result = (|| -> Result<()> {
                // Never read again after the end (some readers fail then).
                let mut eof = false;
                while !eof {
                    let Ok(mut buf) = free_rx.recv() else {
                        return Ok(()); // a later stage stopped: its error follows
                    };
                    // New bytes go to buf[head..], at an aligned address,
                    // with at least `max` bytes of room in front.
                    let head = max + DataFile::slack(&buf[max..]);
                    let mut len = head;
                    while len < head + BLOCK {
                        match reader.read(&mut buf[len..head + BLOCK]) {
                            Ok(0) => {
                                eof = true;
                                break;
                            }
                            Ok(k) => len += k,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => {
                                return Err(Error::Io {
                                    path: "input".into(),
                                    source: e,
                                })
                            }
                        }
                    }
                    size += (len - head) as u64;
                    progress(size);
                    if full_tx.send(carver.block(buf, head, len, eof)).is_err() {
                        return Ok(()); // a later stage stopped: its error follows
                    }
                }
                Ok(())
            })();
            drop(full_tx);
            let worked = worker
                .join()
                .map_err(|_| Error::Corrupt("segment worker panicked".into()))?;
            let data = write_thread
                .join()
                .map_err(|_| Error::Corrupt("data file writer panicked".into()))?;
            let (segments, index_writer, whole) = worked?;
            let data = data?;
            read_result?;
            let segments = segments.max(1);
            if let Some(want) = opts.expect_hashes {
                let got = fs::read(&tmp_hash).map_err(Error::io(&tmp_hash))?;
                if <[u8; 32]>::from(Sha256::digest(&got)) != want {
                    return Err(Error::Corrupt(format!(
                        "{name}: the file's segments are not the expected ones (it changed, or was cut differently); not published"
                    )));
                }
            }
            data.finish(size)?;
            let m = FileMeta {
                name: name.to_string(),
                version,
                size,
                segment_size: chunking.max_len(),
                chunking: chunking.to_string(),
                segments: variable.then_some(segments),
                sha256: whole.map(hex::encode),
                manifest: None,
                signer: None,
                signing: None,
                content_type: opts.content_type.clone(),
                created_ms: now_us() / 1000,
                tags: Default::default(),
            };
            fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
            if final_data.exists() {
                return Err(Error::Exists(format!("{name} version {version}")));
            }
            // Metadata first (on the temp file, or its sidecar at the final
            // place), hashes and offsets next, an index-pending mark, data
            // last: the data file's rename is the moment the version appears.
            match self.backend {
                Backend::Xattr => meta::write(Backend::Xattr, &tmp_data, &m)?,
                Backend::Sidecar => meta::write(Backend::Sidecar, &final_data, &m)?,
            }
            fs::rename(&tmp_hash, dir.join(format!("@{version}.hashes")))
                .map_err(Error::io(&dir))?;
            if variable {
                fs::rename(&tmp_off, dir.join(format!("@{version}.offsets")))
                    .map_err(Error::io(&dir))?;
            }
            let mark = if opts.index {
                Some(self.mark_pending(&final_data)?)
            } else {
                None
            };
            if let Err(e) = fs::rename(&tmp_data, &final_data) {
                if let Some(m) = &mark {
                    let _ = fs::remove_file(m);
                }
                return Err(Error::io(&final_data)(e));
            }
            sync_dir(&dir);
            let e = Entry {
                path: final_data.clone(),
                meta: m,
                file: None,
                offsets: None,
                hashes: None,
            };
            // The version is durable: commit its index entries (made while
            // ingesting), then drop the mark. Without the index here, the
            // mark stays for its holder.
            if let Some(mark) = mark {
                let committed = index_writer.is_some_and(|w| w.commit().is_ok());
                if committed {
                    let _ = fs::remove_file(&mark);
                }
                // This version if it is not in yet, and those of ingests
                // that ran beside this one.
                if let Some(ix) = index.as_ref().filter(|ix| !ix.writing()) {
                    self.catch_up_into(ix, true);
                }
            }
            Ok(e)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp_data);
            let _ = fs::remove_file(&tmp_hash);
            let _ = fs::remove_file(&tmp_off);
        }
        result
    }

    /// Versions of `name`, ascending.
    pub fn versions(&self, name: &Name) -> Result<Vec<u64>> {
        let dir = self.objects.join(path::object_dir(name)?);
        let mut v: Vec<u64> = match fs::read_dir(&dir) {
            Ok(rd) => rd
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(path::parse_version_file))
                .collect(),
            Err(_) => Vec::new(),
        };
        v.sort_unstable();
        Ok(v)
    }

    /// A version of `name` (the latest when `version` is `None`).
    pub fn get(&self, name: &Name, version: Option<u64>) -> Result<Entry> {
        self.get_shared(name, version).map(|e| (*e).clone())
    }

    /// [`Store::get`] without copying the entry: what serving uses, once
    /// per Interest.
    pub fn get_shared(&self, name: &Name, version: Option<u64>) -> Result<Arc<Entry>> {
        let key = (name.clone(), version);
        let now = std::time::Instant::now();
        if let Ok(mut c) = self.cache.lock() {
            if let Some(hit) = c.get_mut(&key) {
                // Still fresh, and the file still there: checked with one
                // `stat` at most every RECHECK, so a rename or removal by
                // another process is seen within that (the CLI's mv and rm
                // also tell a running daemon to forget at once).
                if now.duration_since(hit.inserted) < CACHE_TTL {
                    if now.duration_since(hit.checked) < RECHECK {
                        return Ok(hit.entry.clone());
                    }
                    if hit.entry.path.exists() {
                        hit.checked = now;
                        return Ok(hit.entry.clone());
                    }
                }
            }
        }
        let e = Arc::new(self.get_uncached(name, version)?);
        if let Ok(mut c) = self.cache.lock() {
            if c.len() >= CACHE_MAX {
                c.clear();
            }
            c.insert(
                key,
                Cached {
                    inserted: now,
                    checked: now,
                    entry: e.clone(),
                },
            );
        }
        Ok(e)
    }

    /// Drops every cached lookup: the next one reads the files again (for
    /// a daemon told that another process renamed or removed a version).
    pub fn forget(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
    }

    fn get_uncached(&self, name: &Name, version: Option<u64>) -> Result<Entry> {
        let v = match version {
            Some(v) => v,
            None => *self
                .versions(name)?
                .last()
                .ok_or_else(|| Error::NotFound(name.to_string()))?,
        };
        let p = self.objects.join(path::version_file(name, v)?);
        if !p.is_file() {
            return Err(Error::NotFound(format!("{name} version {v}")));
        }
        let file = fs::File::open(&p).map_err(Error::io(&p))?;
        let meta = meta::read(self.backend, &p)?;
        let offsets = if meta.is_fixed() {
            None
        } else {
            let op = extra_path(&p, "offsets");
            Some(std::sync::Arc::new(
                fs::File::open(&op).map_err(Error::io(&op))?,
            ))
        };
        let hashes = fs::File::open(hashes_path(&p))
            .ok()
            .map(std::sync::Arc::new);
        Ok(Entry {
            meta,
            file: Some(std::sync::Arc::new(file)),
            offsets,
            hashes,
            path: p,
        })
    }

    /// Hash of one segment (from the `.hashes` file).
    pub fn segment_hash(&self, e: &Entry, seg: u64) -> Result<[u8; 32]> {
        let hp = hashes_path(&e.path);
        let mut h = [0u8; 32];
        match &e.hashes {
            Some(f) => f.read_exact_at(&mut h, seg * 32),
            None => fs::File::open(&hp).and_then(|f| f.read_exact_at(&mut h, seg * 32)),
        }
        .map_err(Error::io(&hp))?;
        Ok(h)
    }

    /// Byte offset and length of segment `seg` (one 16-byte `pread` of the
    /// `.offsets` file for variable-size segments).
    pub fn segment_range(&self, e: &Entry, seg: u64) -> Result<(u64, u64)> {
        if seg >= e.meta.segments() {
            return Err(Error::NotFound(format!("segment {seg} of {}", e.meta.name)));
        }
        if e.meta.is_fixed() {
            let start = seg * e.meta.segment_size as u64;
            let len = (e.meta.size - start.min(e.meta.size)).min(e.meta.segment_size as u64);
            return Ok((start, len));
        }
        let mut b = [0u8; 16];
        let op = extra_path(&e.path, "offsets");
        match &e.offsets {
            Some(f) => f.read_exact_at(&mut b, seg * 8),
            None => fs::File::open(&op).and_then(|f| f.read_exact_at(&mut b, seg * 8)),
        }
        .map_err(Error::io(&op))?;
        let start = u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
        let end = u64::from_le_bytes(b[8..].try_into().unwrap_or_default());
        if start > end || end > e.meta.size || end - start > e.meta.segment_size as u64 {
            return Err(Error::Corrupt(format!(
                "{}: segment {seg} spans {start}..{end}",
                op.display()
            )));
        }
        Ok((start, end - start))
    }

    /// Every segment's (offset, length), in order (reads the whole
    /// `.offsets` file for variable-size segments: 8 bytes per segment).
    pub fn segment_spans(&self, e: &Entry) -> Result<Vec<(u64, u32)>> {
        let n = e.meta.segments();
        if e.meta.is_fixed() {
            let s = e.meta.segment_size as u64;
            return Ok((0..n)
                .map(|i| {
                    (
                        i * s,
                        (e.meta.size - (i * s).min(e.meta.size)).min(s) as u32,
                    )
                })
                .collect());
        }
        let op = extra_path(&e.path, "offsets");
        let raw = fs::read(&op).map_err(Error::io(&op))?;
        if raw.len() as u64 != (n + 1) * 8 {
            return Err(Error::Corrupt(format!(
                "{}: {} bytes for {n} segments",
                op.display(),
                raw.len()
            )));
        }
        let ends: Vec<u64> = raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        let mut out = Vec::with_capacity(n as usize);
        for w in ends.windows(2) {
            if w[0] > w[1] || w[1] - w[0] > e.meta.segment_size as u64 {
                return Err(Error::Corrupt(format!("{}: bad offsets", op.display())));
            }
            out.push((w[0], (w[1] - w[0]) as u32));
        }
        if ends.last() != Some(&e.meta.size) {
            return Err(Error::Corrupt(format!("{}: bad offsets", op.display())));
        }
        Ok(out)
    }

    /// Reads segment `seg` of a version into `buf` (resized to the segment).
    pub fn read_segment(&self, e: &Entry, seg: u64, buf: &mut Vec<u8>) -> Result<()> {
        let (start, len) = self.segment_range(e, seg)?;
        buf.resize(len as usize, 0);
        self.read_at(e, start, buf)
    }

    /// Fills `dst` with the version's bytes from `offset` (a segment's, as
    /// [`Store::segment_range`] gives it, read straight into a packet).
    pub fn read_at(&self, e: &Entry, offset: u64, dst: &mut [u8]) -> Result<()> {
        match &e.file {
            Some(f) => f.read_exact_at(dst, offset).map_err(Error::io(&e.path)),
            None => fs::File::open(&e.path)
                .and_then(|f| f.read_exact_at(dst, offset))
                .map_err(Error::io(&e.path)),
        }
    }

    /// The direct children of `prefix`: `(component URI text, is a
    /// published object, has children)`, sorted by name.
    pub fn children(&self, prefix: &Name) -> Result<Vec<(String, bool, bool)>> {
        let mut dir = self.objects.clone();
        for c in prefix.components() {
            dir.push(path::object_dir(&Name::new().append(&c.to_owned()))?);
        }
        let mut out = Vec::new();
        let Ok(rd) = fs::read_dir(&dir) else {
            return Ok(out);
        };
        for e in rd.flatten() {
            let p = e.path();
            if !p.is_dir() {
                continue;
            }
            let Some(fname) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let (mut object, mut children, mut version_file) = (false, false, None);
            for sub in fs::read_dir(&p).map_err(Error::io(&p))?.flatten() {
                let sp = sub.path();
                if sp.is_dir() {
                    children = true;
                } else if sub
                    .file_name()
                    .to_str()
                    .and_then(path::parse_version_file)
                    .is_some()
                {
                    object = true;
                    version_file.get_or_insert(sp);
                }
            }
            // A hashed (over-long) component: its text comes from a version's metadata.
            let text = if fname.starts_with('#') {
                match version_file
                    .and_then(|v| meta::read(self.backend, &v).ok())
                    .and_then(|m| m.name().ok())
                {
                    Some(n) => n
                        .get(prefix.len() as isize)
                        .map_or(fname.clone(), |c| c.to_string()),
                    None => fname.clone(),
                }
            } else {
                fname
            };
            if object || children {
                out.push((text, object, children));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Every stored version under `prefix`, in name order.
    pub fn list(&self, prefix: &Name) -> Result<Vec<FileMeta>> {
        let mut start = self.objects.clone();
        for c in prefix.components() {
            start.push(path::object_dir(&Name::new().append(&c.to_owned()))?);
        }
        let mut out = Vec::new();
        let mut stack = vec![start];
        while let Some(dir) = stack.pop() {
            let Ok(rd) = fs::read_dir(&dir) else { continue };
            for e in rd.flatten() {
                let p = e.path();
                let fname = e.file_name();
                let Some(fname) = fname.to_str() else {
                    continue;
                };
                if p.is_dir() {
                    stack.push(p);
                } else if path::parse_version_file(fname).is_some() {
                    out.push(meta::read(self.backend, &p)?);
                }
            }
        }
        let mut keyed: Vec<(Name, FileMeta)> = out
            .into_iter()
            .filter_map(|m| m.name().ok().map(|n| (n, m)))
            .collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.version.cmp(&b.1.version)));
        Ok(keyed.into_iter().map(|(_, m)| m).collect())
    }

    /// Renames an object (all its versions) in O(1): one directory rename
    /// and a metadata update per version; no data is read or rewritten.
    pub fn rename(&self, old: &Name, new: &Name) -> Result<()> {
        self.forget();
        let from = self.objects.join(path::object_dir(old)?);
        let to = self.objects.join(path::object_dir(new)?);
        let versions = self.versions(old)?;
        if versions.is_empty() {
            return Err(Error::NotFound(old.to_string()));
        }
        if !self.versions(new)?.is_empty() {
            return Err(Error::Exists(new.to_string()));
        }
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent).map_err(Error::io(parent))?;
        }
        // Move the versions (children objects under `old` stay where they are).
        fs::create_dir_all(&to).map_err(Error::io(&to))?;
        for v in &versions {
            // The data file last (as ingest does): a lookup that finds the
            // version at its new place finds its hashes there too, so the
            // serve-time integrity check never sees half a rename.
            let mut files = version_files(&from, *v);
            let data = format!("@{v}");
            files.sort_by_key(|f| f.file_name().is_some_and(|n| n == data.as_str()));
            for f in files {
                if let Some(fname) = f.file_name() {
                    fs::rename(&f, to.join(fname)).map_err(Error::io(&f))?;
                }
            }
            let p = to.join(format!("@{v}"));
            let mut m = meta::read(self.backend, &p)?;
            m.name = new.to_string();
            meta::write(self.backend, &p, &m)?;
        }
        sync_dir(&from);
        sync_dir(&to);
        // The hash index learns the new paths later (whoever holds it picks
        // the marks up; the old paths fail validation meanwhile). The marks
        // are not synced: a crash loses only index entries, which
        // `reindex` rebuilds; rename stays O(1).
        for v in &versions {
            let _ = self.mark(&to.join(format!("@{v}")), false);
        }
        let _ = fs::remove_dir(&from);
        Ok(())
    }

    /// Removes one version, or every version when `version` is `None`.
    pub fn remove(&self, name: &Name, version: Option<u64>) -> Result<usize> {
        self.forget();
        let dir = self.objects.join(path::object_dir(name)?);
        let versions = match version {
            Some(v) => vec![v],
            None => self.versions(name)?,
        };
        let mut n = 0;
        for v in versions {
            let f = dir.join(format!("@{v}"));
            if fs::remove_file(&f).is_ok() {
                n += 1;
                for extra in version_files(&dir, v) {
                    let _ = fs::remove_file(extra);
                }
            }
        }
        if n == 0 {
            return Err(Error::NotFound(name.to_string()));
        }
        sync_dir(&dir);
        let _ = fs::remove_dir(&dir);
        Ok(n)
    }
}

/// The data file of version `v` in `dir` and every file beside it
/// (`@<v>.hashes`, `.meta`, `.manifest`, `.levels`).
fn version_files(dir: &Path, v: u64) -> Vec<PathBuf> {
    let base = format!("@{v}");
    let dotted = format!("@{v}.");
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|f| f == base || f.starts_with(&dotted))
        })
        .map(|e| e.path())
        .collect()
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
        write_atomic(&extra_path(&e.path, suffix), bytes)
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

/// Per-repository settings, `<root>/config.toml`:
/// `chunking = "fastcdc:1024:4096:8192"` (any [`Chunking`] form).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct RepoConfig {
    /// Chunking of new versions published without an explicit choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunking: Option<String>,
    /// How segments of versions that have a signed manifest are signed
    /// when served: `digest` (DigestSha256, the default: consumers that
    /// check every packet's digest accept them) or `null` (NullSignature,
    /// SignatureType 200, no value: the manifest already covers every
    /// segment, so the per-segment SHA-256 is skipped; only consumers that
    /// verify through the manifest, or not at all, accept them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_signature: Option<String>,
}

/// The values of [`RepoConfig::segment_signature`].
pub const SEGMENT_SIGNATURES: [&str; 2] = ["digest", "null"];

impl Store {
    fn config_path(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// The repository's settings (defaults when there is no file).
    pub fn config(&self) -> Result<RepoConfig> {
        let p = self.config_path();
        match fs::read_to_string(&p) {
            Ok(t) => {
                toml::from_str(&t).map_err(|e| Error::Corrupt(format!("{}: {e}", p.display())))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(RepoConfig::default()),
            Err(e) => Err(Error::io(&p)(e)),
        }
    }

    /// Saves the repository's settings.
    pub fn set_config(&self, c: &RepoConfig) -> Result<()> {
        let t = toml::to_string(c).map_err(|e| Error::Corrupt(e.to_string()))?;
        write_atomic(&self.config_path(), t.as_bytes())
    }

    /// True when segments covered by a manifest are served with a
    /// NullSignature ([`RepoConfig::segment_signature`] `null`).
    pub fn null_segments(&self) -> Result<bool> {
        match self.config()?.segment_signature.as_deref() {
            None | Some("digest") => Ok(false),
            Some("null") => Ok(true),
            Some(other) => Err(Error::Corrupt(format!(
                "{}: segment_signature {other:?} is not one of {}",
                self.config_path().display(),
                SEGMENT_SIGNATURES.join(", ")
            ))),
        }
    }

    /// The chunking new versions get by default: the config file's, or
    /// FastCDC 1/4/8 KiB ([`Chunking::fastcdc`]).
    pub fn default_chunking(&self) -> Result<Chunking> {
        match self.config()?.chunking {
            Some(s) => s
                .parse()
                .map_err(|e| Error::Corrupt(format!("{}: {e}", self.config_path().display()))),
            None => Ok(Chunking::fastcdc()),
        }
    }
}

/// What a reindex did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reindexed {
    /// Versions indexed.
    pub versions: u64,
    /// Segments indexed.
    pub segments: u64,
}

impl Store {
    fn pending_dir(&self) -> PathBuf {
        self.root.join("index-pending")
    }

    /// Path of the hash index (a directory).
    pub fn index_path(&self) -> PathBuf {
        self.root.join("index")
    }

    /// Writes a durable mark saying that `data` (a version file, about to
    /// appear) must be indexed.
    fn mark_pending(&self, data: &Path) -> Result<PathBuf> {
        self.mark(data, true)
    }

    fn mark(&self, data: &Path, durable: bool) -> Result<PathBuf> {
        let rel = data
            .strip_prefix(&self.objects)
            .map_err(|_| Error::Corrupt(format!("{} is outside the store", data.display())))?;
        let dir = self.pending_dir();
        fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
        let mark = dir.join(format!("{}-{}", std::process::id(), unique()));
        if durable {
            write_atomic(&mark, rel.as_os_str().as_encoded_bytes())?;
        } else {
            fs::write(&mark, rel.as_os_str().as_encoded_bytes()).map_err(Error::io(&mark))?;
        }
        Ok(mark)
    }

    /// Runs `f` with the index, opening it if needed (and, when it was
    /// missing, rebuilding it from the files). `None` when another process
    /// holds it (retried at most once a second) or it cannot be opened.
    fn with_index<T>(&self, f: impl FnOnce(&std::sync::Arc<index::Index>) -> T) -> Option<T> {
        let mut st = self.index.lock().ok()?;
        let mut opened_now = false;
        if st.db.is_none() {
            let now = std::time::Instant::now();
            if st
                .checked
                .is_some_and(|t| now.duration_since(t) < std::time::Duration::from_secs(1))
            {
                return None;
            }
            st.checked = Some(now);
            let path = self.index_path();
            let mut fresh = !path.join("tree").exists();
            let mut opened = index::Index::open(&path);
            if let Err(index::OpenError::Other(e)) = &opened {
                // Unreadable or of another layout: it is only a cache of the
                // files, so set it aside and rebuild.
                eprintln!("granary-store: {e}; rebuilding the hash index");
                let aside = self.root.join("index.bad");
                let _ = fs::remove_dir_all(&aside);
                let _ = fs::rename(&path, &aside);
                fresh = true;
                opened = index::Index::open(&path);
            }
            if opened.is_ok() {
                // The index of releases before 0.2 (a redb file): only a
                // cache, rebuilt above in the new layout.
                let _ = fs::remove_file(self.root.join("index.redb"));
            }
            match opened {
                Ok(ix) => {
                    let ix = std::sync::Arc::new(ix);
                    if fresh {
                        // Missing: rebuilt from the files first (nobody
                        // else may write it meanwhile).
                        let _ = self.reindex_into(&ix);
                    }
                    st.db = Some(ix);
                    st.error = None;
                    opened_now = true;
                }
                Err(index::OpenError::Busy) => {
                    st.error = Some(
                        "the hash index is in use by another process (a running daemon?)".into(),
                    );
                    return None;
                }
                Err(index::OpenError::Other(e)) => {
                    eprintln!("granary-store: {e}");
                    st.error = Some(e);
                    return None;
                }
            }
        }
        let ix = st.db.clone()?;
        drop(st);
        if opened_now {
            // What was published while it was closed; lookups on other
            // threads go on meanwhile (and may miss: the index is only a
            // cache, the consumer then asks elsewhere).
            self.catch_up_into(&ix, true);
        }
        Some(f(&ix))
    }

    /// The open index (opening it if needed), shared.
    fn index_handle(&self) -> Option<std::sync::Arc<index::Index>> {
        self.with_index(|ix| ix.clone())
    }

    /// Indexes the version a mark names. `Ok(false)` when that version is
    /// not there (yet).
    fn index_mark(&self, ix: &std::sync::Arc<index::Index>, mark: &Path) -> Result<bool> {
        let rel = fs::read(mark).map_err(Error::io(mark))?;
        let rel = String::from_utf8(rel)
            .map_err(|_| Error::Corrupt(format!("{}: not UTF-8", mark.display())))?;
        let data = self.objects.join(&rel);
        if !data.is_file() {
            return Ok(false);
        }
        self.index_file(ix, &data).map(|_| true)
    }

    fn index_file(&self, ix: &std::sync::Arc<index::Index>, data: &Path) -> Result<u64> {
        let rel = data
            .strip_prefix(&self.objects)
            .map_err(|_| Error::Corrupt(format!("{} is outside the store", data.display())))?
            .to_string_lossy()
            .into_owned();
        let e = Entry {
            meta: meta::read(self.backend, data)?,
            path: data.to_path_buf(),
            file: None,
            offsets: None,
            hashes: None,
        };
        let spans = self.segment_spans(&e)?;
        let hp = hashes_path(data);
        let hashes = fs::read(&hp).map_err(Error::io(&hp))?;
        if hashes.len() != spans.len() * 32 {
            return Err(Error::Corrupt(format!(
                "{}: {} hashes for {} segments",
                hp.display(),
                hashes.len() / 32,
                spans.len()
            )));
        }
        let mut items: Vec<([u8; 32], u64, u32)> = hashes
            .chunks_exact(32)
            .zip(spans)
            .filter(|(_, (_, len))| *len > 0)
            .map(|(h, (offset, len))| {
                let mut k = [0u8; 32];
                k.copy_from_slice(h);
                (k, offset, len)
            })
            .collect();
        ix.insert(&rel, &mut items).map_err(Error::Corrupt)?;
        Ok(items.len() as u64)
    }

    /// Indexes every marked version that is there; `wait` for a catch-up
    /// running on another thread, or else skip. Returns the versions
    /// indexed.
    fn catch_up_into(&self, ix: &std::sync::Arc<index::Index>, wait: bool) -> usize {
        let _one = match self.catching.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::WouldBlock) if wait => match self.catching.lock() {
                Ok(g) => g,
                Err(_) => return 0,
            },
            Err(_) => return 0,
        };
        let Ok(rd) = fs::read_dir(self.pending_dir()) else {
            return 0;
        };
        let mut done = 0;
        for m in rd.flatten() {
            // `.tmp-…`: a mark still being written (`write_atomic` renames it
            // into place). Not a mark yet; removing it would fail its writer.
            if m.file_name().as_encoded_bytes().starts_with(b".") {
                continue;
            }
            let p = m.path();
            // A mark being written (`write_atomic`'s `.tmp-<pid>-<n>`): not
            // a mark yet; removed only when its writer is gone (removing it
            // under a live writer made that writer's rename fail).
            if let Some(tmp) = m.file_name().to_str().and_then(|f| f.strip_prefix(".tmp-")) {
                let alive = tmp
                    .split('-')
                    .next()
                    .and_then(|pid| pid.parse::<u32>().ok())
                    .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
                if !alive {
                    let _ = fs::remove_file(&p);
                }
                continue;
            }
            match self.index_mark(ix, &p) {
                Ok(true) => {
                    let _ = fs::remove_file(&p);
                    done += 1;
                }
                Ok(false) => {
                    // Not there: an ingest still running (its owner is
                    // alive: keep the mark), or one that died before its
                    // version appeared (drop the mark).
                    let alive = m
                        .file_name()
                        .to_str()
                        .and_then(|f| f.split('-').next())
                        .and_then(|pid| pid.parse::<u32>().ok())
                        .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
                    if !alive {
                        let _ = fs::remove_file(&p);
                    }
                }
                Err(e) => eprintln!("granary-store: {}: {e}", p.display()),
            }
        }
        done
    }

    /// Indexes versions that other processes published (their marks), at
    /// most once a second; cheap when there is nothing to do. Does nothing
    /// once [`Store::index_in_background`] runs.
    pub fn index_catch_up(&self) {
        if self.background.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let due = self.index.lock().ok().is_some_and(|mut st| {
            let now = std::time::Instant::now();
            let due = st
                .checked
                .is_none_or(|t| now.duration_since(t) >= std::time::Duration::from_secs(1));
            if due && st.db.is_some() {
                st.checked = Some(now);
            }
            due
        });
        if due {
            if let Some(ix) = self.index_handle() {
                // Never wait for an ingest's transaction on the serving path.
                if !ix.writing() {
                    self.catch_up_into(&ix, false);
                }
            }
        }
    }

    /// Indexes, now, the versions that other processes published (their
    /// marks), opening the index if this process can have it. Lookups
    /// meanwhile are not held up. Returns the versions indexed.
    pub fn index_pending(&self) -> usize {
        match self.index_handle() {
            Some(ix) if !ix.writing() => self.catch_up_into(&ix, true),
            _ => 0,
        }
    }

    /// Says that a thread of this process calls [`Store::index_pending`]
    /// regularly (a serving daemon): from now on lookups never index marks
    /// themselves, so a hash request never waits for a version to be
    /// indexed.
    pub fn index_in_background(&self) {
        self.background
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn reindex_into(&self, ix: &std::sync::Arc<index::Index>) -> Result<Reindexed> {
        ix.clear().map_err(Error::Corrupt)?;
        let mut r = Reindexed::default();
        let mut stack = vec![self.objects.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(rd) = fs::read_dir(&dir) else { continue };
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if e
                    .file_name()
                    .to_str()
                    .and_then(path::parse_version_file)
                    .is_some()
                {
                    match self.index_file(ix, &p) {
                        Ok(n) => {
                            r.versions += 1;
                            r.segments += n;
                        }
                        Err(err) => eprintln!("granary-store: not indexed: {err}"),
                    }
                }
            }
        }
        Ok(r)
    }

    /// Rebuilds the hash index from the `.hashes` and `.offsets` files of
    /// every stored version. Fails when another process (a running daemon)
    /// holds the index.
    pub fn reindex(&self) -> Result<Reindexed> {
        // A fresh attempt to open, even right after a failed one.
        if let Ok(mut st) = self.index.lock() {
            st.checked = None;
        }
        match self.with_index(|ix| self.reindex_into(ix)) {
            Some(r) => r,
            None => Err(Error::Corrupt(
                self.index
                    .lock()
                    .ok()
                    .and_then(|st| st.error.clone())
                    .unwrap_or_else(|| "the hash index cannot be opened".into()),
            )),
        }
    }

    /// Looks a chunk up by the SHA-256 of its bytes: the bytes, read from
    /// whichever version file holds them and checked against the hash.
    /// Stale locations (file gone, moved or changed) are dropped on the way.
    pub fn chunk(&self, h: &[u8; 32]) -> Result<Option<Vec<u8>>> {
        self.index_catch_up();
        let mut stale = false;
        for attempt in 0..2 {
            if attempt == 1 {
                if !stale {
                    break;
                }
                // Moved, perhaps: pick up pending marks now and look again.
                if let Some(ix) = self.index_handle().filter(|ix| !ix.writing()) {
                    self.catch_up_into(&ix, false);
                }
            }
            let Some(locs) = self.with_index(|ix| ix.get(h)) else {
                return Ok(None);
            };
            for (slot, loc) in locs.map_err(Error::Corrupt)? {
                let p = self.objects.join(&loc.file);
                let mut buf = vec![0u8; loc.len as usize];
                let ok = fs::File::open(&p)
                    .and_then(|f| f.read_exact_at(&mut buf, loc.offset))
                    .is_ok()
                    && <[u8; 32]>::from(Sha256::digest(&buf)) == *h;
                if ok {
                    return Ok(Some(buf));
                }
                stale = true;
                self.with_index(|ix| {
                    if !ix.writing() {
                        let _ = ix.remove(h, &slot);
                    }
                });
            }
        }
        Ok(None)
    }

    /// Which of `hashes` the hash index holds a location for: one pass over
    /// the index, no data read (a hint: [`Store::chunk`] still reads and
    /// re-hashes the bytes, so a stale entry costs one miss later, never a
    /// wrong byte). All `false` when the index is not available here.
    pub fn has_chunks(&self, hashes: &[[u8; 32]]) -> Vec<bool> {
        self.index_catch_up();
        // A location counts only while its file exists (removal leaves index
        // entries behind; they are dropped here as `chunk` drops them).
        let mut exists: std::collections::HashMap<String, bool> = Default::default();
        self.with_index(|ix| {
            hashes
                .iter()
                .map(|h| {
                    let Ok(locs) = ix.get(h) else { return false };
                    let mut found = false;
                    for (slot, loc) in locs {
                        let here = *exists
                            .entry(loc.file.clone())
                            .or_insert_with(|| self.objects.join(&loc.file).is_file());
                        if here {
                            found = true;
                            break;
                        }
                        if !ix.writing() {
                            let _ = ix.remove(h, &slot);
                        }
                    }
                    found
                })
                .collect()
        })
        .unwrap_or_else(|| vec![false; hashes.len()])
    }

    /// Number of (hash, location) entries in the index, if it is available.
    pub fn index_len(&self) -> Option<u64> {
        self.with_index(|ix| ix.len().ok()).flatten()
    }
}

/// One block of input on its way to the segment worker: `buf[begin..len]`
/// holds the bytes carried from the previous block (counted, and written
/// with it) up to `head`, then new bytes; `cuts` are the segment ends in
/// `buf` (the first segment starts at `begin`); `start` is the file offset
/// of `buf[begin]`.
struct Block {
    buf: Vec<u8>,
    begin: usize,
    head: usize,
    len: usize,
    cuts: Vec<u32>,
    start: u64,
}

/// The cutting side of reading: puts the undecided tail of the previous
/// block in front of each block's new bytes and cuts where at least `max`
/// bytes follow (or at the end), so boundaries never depend on where
/// blocks fall.
struct Carver<'a> {
    cutter: &'a chunking::Cutter,
    /// The tail of the previous block that is not a whole segment yet.
    carry: Vec<u8>,
    /// File offset of `carry[0]`.
    start: u64,
}

impl<'a> Carver<'a> {
    fn new(cutter: &'a chunking::Cutter) -> Self {
        Carver {
            cutter,
            carry: Vec::with_capacity(cutter.max()),
            start: 0,
        }
    }

    /// The block of `buf`, whose new bytes are `buf[head..len]` (`head` is
    /// at least `max`); `eof` when nothing follows.
    fn block(&mut self, mut buf: Vec<u8>, head: usize, len: usize, eof: bool) -> Block {
        let max = self.cutter.max();
        let begin = head - self.carry.len();
        buf[begin..head].copy_from_slice(&self.carry);
        let mut cuts = Vec::with_capacity((len - begin) / 1024 + 1);
        let mut pos = begin;
        while pos < len && (eof || len - pos >= max) {
            pos += self.cutter.cut(&buf[pos..len]);
            cuts.push(pos as u32);
        }
        self.carry.clear();
        self.carry.extend_from_slice(&buf[pos..len]);
        let start = self.start;
        self.start += (pos - begin) as u64;
        Block {
            buf,
            begin,
            head,
            len,
            cuts,
            start,
        }
    }
}

/// Segment count, the index transaction, the whole-file hash if asked.
type Worked = (u64, Option<index::Writer>, Option<[u8; 32]>);

/// The hashing side of ingest: hashes the segments of each block it
/// receives, writes each segment's hash and start offset, adds them to the
/// index transaction in batches, and hashes the whole file when `whole`.
/// Returns the segment count (an empty input is one empty segment).
fn segment_worker(
    full: std::sync::mpsc::Receiver<Block>,
    done: std::sync::mpsc::SyncSender<Block>,
    mut hashes: std::io::BufWriter<fs::File>,
    mut offsets: Option<std::io::BufWriter<fs::File>>,
    mut writer: Option<index::Writer>,
    whole: bool,
    (hash_path, off_path): (PathBuf, PathBuf),
) -> Result<Worked> {
    // Index entries per batch (sorted before insertion: 1.5 MiB).
    const BATCH: usize = 32 * 1024;
    let mut whole = whole.then(Sha256::new);
    let mut end = 0u64; // file offset just past the last segment
    let mut segments = 0u64;
    let mut batch: Vec<([u8; 32], u64, u32)> = Vec::with_capacity(BATCH);
    // Index inserts run on a thread of their own, beside the other stages.
    let (batch_tx, batch_rx) = std::sync::mpsc::sync_channel::<Vec<([u8; 32], u64, u32)>>(2);
    let indexer = writer.take().and_then(|mut w| {
        spawn("ingest-index", move || {
            for mut b in batch_rx {
                if w.add(&mut b).is_err() {
                    return None; // the mark gets it indexed later
                }
            }
            Some(w)
        })
        .ok() // no thread: no index entries now; the mark gets them later
    });
    let mut last = false;
    while !last {
        let block = full.recv();
        last = block.is_err();
        if let Ok(b) = block {
            if let Some(w) = whole.as_mut() {
                w.update(&b.buf[b.head..b.len]);
            }
            let mut pos = b.begin;
            for &cut in &b.cuts {
                let cut = cut as usize;
                let h: [u8; 32] = Sha256::digest(&b.buf[pos..cut]).into();
                hashes.write_all(&h).map_err(Error::io(&hash_path))?;
                let off = b.start + (pos - b.begin) as u64;
                if let Some(o) = offsets.as_mut() {
                    o.write_all(&off.to_le_bytes())
                        .map_err(Error::io(&off_path))?;
                }
                if indexer.is_some() {
                    batch.push((h, off, (cut - pos) as u32));
                }
                segments += 1;
                pos = cut;
            }
            end = b.start + (pos - b.begin) as u64;
            if done.send(b).is_err() {
                // The writer stopped: its error is the one to report.
                return Ok((segments, None, None));
            }
        }
        if batch.len() >= BATCH || (last && !batch.is_empty()) {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            let _ = batch_tx.send(full);
        }
    }
    if segments == 0 {
        // An empty file is one empty segment (not indexed).
        hashes
            .write_all(&Sha256::digest(b""))
            .map_err(Error::io(&hash_path))?;
        if let Some(o) = offsets.as_mut() {
            o.write_all(&0u64.to_le_bytes())
                .map_err(Error::io(&off_path))?;
        }
        segments = 1;
    }
    hashes
        .into_inner()
        .map_err(|e| Error::io(&hash_path)(e.into_error()))?
        .sync_all()
        .map_err(Error::io(&hash_path))?;
    if let Some(mut o) = offsets {
        // The end of the last segment closes the table.
        o.write_all(&end.to_le_bytes())
            .map_err(Error::io(&off_path))?;
        o.into_inner()
            .map_err(|e| Error::io(&off_path)(e.into_error()))?
            .sync_all()
            .map_err(Error::io(&off_path))?;
    }
    drop(batch_tx);
    let writer = indexer.and_then(|t| t.join().ok().flatten());
    Ok((segments, writer, whole.map(|w| w.finalize().into())))
}

/// The temp data file of an ingest. Written with direct I/O (`O_DIRECT`)
/// where the file system takes it: the blocks go from the ingest's buffers
/// to the disk without a copy into the page cache. That copy was most of
/// an ingest's CPU time (on a VM each new page-cache page can also cost
/// the host a page fault), and a large ingest no longer pushes everything
/// else out of the cache. Elsewhere (tmpfs, or a write refused) it falls
/// back to buffered writes, flushed every [`DataFile::EVERY`] bytes on a
/// thread of its own so the final `fsync` has only the tail left.
struct DataFile {
    file: fs::File,
    path: PathBuf,
    direct: bool,
    /// The write-back thread (buffered writes only).
    flusher: Option<Flusher>,
    /// The last block was padded to the alignment (direct I/O): cut back.
    padded: bool,
}

impl DataFile {
    /// Alignment of direct I/O: addresses, offsets and lengths (4 KiB
    /// covers 512-byte and 4 KiB sectors).
    const ALIGN: usize = 4096;
    /// Buffered fallback: flush this often.
    const EVERY: u64 = 64 << 20;

    fn create(path: &Path) -> Result<DataFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let direct = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
            .open(path);
        let (file, direct) = match direct {
            Ok(f) => (f, true),
            Err(_) => {
                let _ = fs::remove_file(path);
                (fs::File::create(path).map_err(Error::io(path))?, false)
            }
        };
        let mut d = DataFile {
            file,
            path: path.to_path_buf(),
            direct,
            flusher: None,
            padded: false,
        };
        if !direct {
            d.flusher = Some(Flusher::start(&d.file, path)?);
        }
        Ok(d)
    }

    /// A reflinked clone: nothing is written, only made durable.
    fn cloned(path: &Path) -> Result<DataFile> {
        let file = fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(Error::io(path))?;
        Ok(DataFile {
            file,
            path: path.to_path_buf(),
            direct: false,
            flusher: None,
            padded: false,
        })
    }

    /// Bytes to skip from the start of `buf` to an aligned address.
    fn slack(buf: &[u8]) -> usize {
        buf.as_ptr().align_offset(Self::ALIGN).min(Self::ALIGN)
    }

    /// Writes `buf[..n]` at `offset`. `buf` starts at an aligned address
    /// and has room for `n` rounded up to the alignment (the padding is
    /// written too, then cut off by [`DataFile::finish`]).
    fn write_block(&mut self, buf: &mut [u8], n: usize, offset: u64) -> Result<()> {
        use std::os::unix::fs::FileExt;
        if self.direct && !self.padded {
            let whole = n.div_ceil(Self::ALIGN) * Self::ALIGN;
            let aligned =
                offset % Self::ALIGN as u64 == 0 && Self::slack(buf) == 0 && whole <= buf.len();
            if aligned {
                buf[n..whole].fill(0);
                match self.file.write_all_at(&buf[..whole], offset) {
                    Ok(()) => {
                        self.padded = whole != n;
                        return Ok(());
                    }
                    // Refused (a file system that takes O_DIRECT at open
                    // but not this write): buffered from here on.
                    Err(e)
                        if [rustix::io::Errno::INVAL, rustix::io::Errno::OPNOTSUPP]
                            .iter()
                            .any(|n| e.raw_os_error() == Some(n.raw_os_error())) => {}
                    Err(e) => return Err(Error::io(&self.path)(e)),
                }
            }
            self.buffered()?;
        }
        self.file
            .write_all_at(&buf[..n], offset)
            .map_err(Error::io(&self.path))?;
        if let Some(f) = self.flusher.as_mut() {
            f.written(offset + n as u64);
        }
        Ok(())
    }

    /// Leaves direct I/O (the flags of the open file; nothing is lost).
    fn buffered(&mut self) -> Result<()> {
        let flags =
            rustix::fs::fcntl_getfl(&self.file).map_err(|e| Error::io(&self.path)(e.into()))?;
        rustix::fs::fcntl_setfl(&self.file, flags - rustix::fs::OFlags::DIRECT)
            .map_err(|e| Error::io(&self.path)(e.into()))?;
        self.direct = false;
        self.flusher = Some(Flusher::start(&self.file, &self.path)?);
        Ok(())
    }

    /// Cuts the padding off and makes the file durable.
    fn finish(mut self, size: u64) -> Result<()> {
        if let Some(f) = self.flusher.take() {
            f.stop();
        }
        if self.padded {
            self.file.set_len(size).map_err(Error::io(&self.path))?;
        }
        self.file.sync_all().map_err(Error::io(&self.path))
    }
}

/// Early write-back of a buffered data file: a thread that flushes what
/// has been written every [`DataFile::EVERY`] bytes (`fdatasync` on its
/// own handle), so the disk works while the CPU cuts and hashes and the
/// final `fsync` waits only for the tail. Errors are left for that final
/// `fsync` to report.
struct Flusher {
    tx: std::sync::mpsc::SyncSender<u64>,
    thread: std::thread::JoinHandle<()>,
    next: u64,
}

impl Flusher {
    fn start(file: &fs::File, path: &Path) -> Result<Flusher> {
        let f = file.try_clone().map_err(Error::io(path))?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(1);
        let thread = spawn("ingest-flush", move || {
            for _ in rx {
                let _ = f.sync_data();
            }
        })?;
        Ok(Flusher {
            tx,
            thread,
            next: DataFile::EVERY,
        })
    }

    /// `size` bytes are written so far; ask for a flush when a new
    /// [`DataFile::EVERY`] boundary is crossed (never waits: a flush still
    /// running covers it).
    fn written(&mut self, size: u64) {
        if size >= self.next {
            let _ = self.tx.try_send(size);
            self.next = size + DataFile::EVERY;
        }
    }

    fn stop(self) {
        drop(self.tx);
        let _ = self.thread.join();
    }
}

/// Starts a named thread (the name shows in `top -H` and profiles).
fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| Error::Io {
            path: format!("thread {name}"),
            source: e,
        })
}

pub(crate) fn hashes_path(data: &Path) -> PathBuf {
    let mut s = data.as_os_str().to_owned();
    s.push(".hashes");
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer like the ingest's, and the aligned start in it.
    fn buffer(n: usize) -> (Vec<u8>, usize) {
        let buf = vec![0u8; n + 2 * DataFile::ALIGN];
        let at = DataFile::slack(&buf);
        (buf, at)
    }

    /// A new data file in a temp directory (kept alive by the guard).
    fn data_file() -> (tempfile::TempDir, PathBuf, DataFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let f = DataFile::create(&path).unwrap();
        (dir, path, f)
    }

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8 ^ seed).collect()
    }

    /// Full blocks, then a last block that is not a multiple of the
    /// alignment: the file holds exactly the bytes (padding cut off),
    /// whichever way they were written.
    #[test]
    fn data_file_writes_exactly_the_bytes() {
        let (_dir, path, mut f) = data_file();
        let (mut buf, at) = buffer(1 << 16);
        let mut want = Vec::new();
        let mut off = 0u64;
        for (i, n) in [1usize << 16, 1 << 16, 5000].into_iter().enumerate() {
            let p = pattern(n, i as u8);
            buf[at..at + n].copy_from_slice(&p);
            f.write_block(&mut buf[at..], n, off).unwrap();
            off += n as u64;
            want.extend_from_slice(&p);
        }
        f.finish(off).unwrap();
        assert_eq!(fs::read(&path).unwrap(), want);
    }

    /// A block at an unaligned address cannot be written directly: the
    /// file drops to buffered writes and still gets every byte.
    #[test]
    fn data_file_falls_back_to_buffered_writes() {
        let (_dir, path, mut f) = data_file();
        let (mut buf, at) = buffer(1 << 16);
        let a = pattern(1 << 16, 1);
        buf[at..at + a.len()].copy_from_slice(&a);
        f.write_block(&mut buf[at..], a.len(), 0).unwrap();
        let b = pattern(3000, 2);
        buf[at + 1..at + 1 + b.len()].copy_from_slice(&b);
        f.write_block(&mut buf[at + 1..], b.len(), a.len() as u64)
            .unwrap();
        assert!(!f.direct, "an unaligned block switches to buffered writes");
        assert!(
            f.flusher.is_some(),
            "buffered writes are flushed as they go"
        );
        f.finish((a.len() + b.len()) as u64).unwrap();
        assert_eq!(fs::read(&path).unwrap(), [a, b].concat());
    }
}
