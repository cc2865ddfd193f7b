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

pub mod meta;
pub mod path;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use granary_packet::Name;
use sha2::{Digest, Sha256};

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
}

impl Default for PutOptions {
    fn default() -> Self {
        PutOptions {
            version: None,
            segment_size: DEFAULT_SEGMENT_SIZE,
            content_type: None,
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
    /// otherwise. A hit costs one `stat` (so renames and removals by other
    /// processes are seen at once); a new version published by another
    /// process is seen within [`CACHE_TTL`].
    cache: std::sync::Mutex<LookupCache>,
}

type LookupCache = std::collections::HashMap<(Name, Option<u64>), (std::time::Instant, Entry)>;

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
    /// copied to a temp file while each segment is hashed; the version
    /// becomes visible only when complete and durable. `progress` gets the
    /// byte count so far.
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
        let f = fs::File::open(src).map_err(Error::io(src))?;
        self.ingest(name, f, None, &id, opts, progress)
            .map(|e| (e, false))
    }

    /// One streaming pass over `reader`: per-segment and whole-file hashes,
    /// and the copy into the temp data file — unless `cloned` names a temp
    /// data file that already holds the bytes (a reflink of `reader`'s file).
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
        let seg = opts.segment_size.max(1) as usize;
        let version = opts.version.unwrap_or_else(now_us);
        let tmp_data = self.tmp.join(format!("{id}.data"));
        let tmp_hash = self.tmp.join(format!("{id}.hashes"));
        let result = (|| -> Result<Entry> {
            let mut data = match cloned {
                Some(c) => fs::OpenOptions::new()
                    .write(true)
                    .open(c)
                    .map_err(Error::io(c))?,
                None => fs::File::create(&tmp_data).map_err(Error::io(&tmp_data))?,
            };
            let mut hashes =
                std::io::BufWriter::new(fs::File::create(&tmp_hash).map_err(Error::io(&tmp_hash))?);
            let mut whole = Sha256::new();
            let mut buf = vec![0u8; ((1usize << 20) / seg).max(1) * seg];
            let mut pending = Sha256::new();
            let mut in_seg = 0usize;
            let mut size = 0u64;
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        return Err(Error::Io {
                            path: "input".into(),
                            source: e,
                        })
                    }
                };
                if cloned.is_none() {
                    data.write_all(&buf[..n]).map_err(Error::io(&tmp_data))?;
                }
                whole.update(&buf[..n]);
                let mut rest = &buf[..n];
                while !rest.is_empty() {
                    let take = rest.len().min(seg - in_seg);
                    pending.update(&rest[..take]);
                    in_seg += take;
                    rest = &rest[take..];
                    if in_seg == seg {
                        hashes
                            .write_all(&std::mem::replace(&mut pending, Sha256::new()).finalize())
                            .map_err(Error::io(&tmp_hash))?;
                        in_seg = 0;
                    }
                }
                size += n as u64;
                progress(size);
            }
            if in_seg > 0 || size == 0 {
                hashes
                    .write_all(&pending.finalize())
                    .map_err(Error::io(&tmp_hash))?;
            }
            hashes
                .into_inner()
                .map_err(|e| Error::io(&tmp_hash)(e.into_error()))?
                .sync_all()
                .map_err(Error::io(&tmp_hash))?;
            data.sync_all().map_err(Error::io(&tmp_data))?;
            let m = FileMeta {
                name: name.to_string(),
                version,
                size,
                segment_size: seg as u32,
                chunking: format!("fixed:{seg}"),
                sha256: hex::encode(whole.finalize()),
                manifest: None,
                signer: None,
                signing: None,
                content_type: opts.content_type.clone(),
                created_ms: now_us() / 1000,
            };
            fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
            let final_data = dir.join(format!("@{version}"));
            if final_data.exists() {
                return Err(Error::Exists(format!("{name} version {version}")));
            }
            // Metadata first (on the temp file, or its sidecar at the final
            // place), hashes next, data last: the data file's rename is the
            // moment the version appears.
            match self.backend {
                Backend::Xattr => meta::write(Backend::Xattr, &tmp_data, &m)?,
                Backend::Sidecar => meta::write(Backend::Sidecar, &final_data, &m)?,
            }
            fs::rename(&tmp_hash, dir.join(format!("@{version}.hashes")))
                .map_err(Error::io(&dir))?;
            fs::rename(&tmp_data, &final_data).map_err(Error::io(&final_data))?;
            sync_dir(&dir);
            Ok(Entry {
                path: final_data,
                meta: m,
                file: None,
            })
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp_data);
            let _ = fs::remove_file(&tmp_hash);
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
        let key = (name.clone(), version);
        let now = std::time::Instant::now();
        if let Ok(c) = self.cache.lock() {
            if let Some((t, e)) = c.get(&key) {
                // Still fresh, and the file is still there (one stat: a
                // rename or removal by another process is seen at once).
                if now.duration_since(*t) < CACHE_TTL && e.path.exists() {
                    return Ok(e.clone());
                }
            }
        }
        let e = self.get_uncached(name, version)?;
        if let Ok(mut c) = self.cache.lock() {
            if c.len() >= CACHE_MAX {
                c.clear();
            }
            c.insert(key, (now, e.clone()));
        }
        Ok(e)
    }

    fn forget(&self) {
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
        Ok(Entry {
            meta: meta::read(self.backend, &p)?,
            file: Some(std::sync::Arc::new(file)),
            path: p,
        })
    }

    /// Hash of one segment (from the `.hashes` file).
    pub fn segment_hash(&self, e: &Entry, seg: u64) -> Result<[u8; 32]> {
        let hp = hashes_path(&e.path);
        let f = fs::File::open(&hp).map_err(Error::io(&hp))?;
        let mut h = [0u8; 32];
        f.read_exact_at(&mut h, seg * 32).map_err(Error::io(&hp))?;
        Ok(h)
    }

    /// Reads segment `seg` of a version into `buf` (resized to the segment).
    pub fn read_segment(&self, e: &Entry, seg: u64, buf: &mut Vec<u8>) -> Result<()> {
        if seg >= e.meta.segments() {
            return Err(Error::NotFound(format!("segment {seg} of {}", e.meta.name)));
        }
        let start = seg * e.meta.segment_size as u64;
        let len = (e.meta.size - start.min(e.meta.size)).min(e.meta.segment_size as u64) as usize;
        buf.resize(len, 0);
        match &e.file {
            Some(f) => f.read_exact_at(buf, start).map_err(Error::io(&e.path))?,
            None => {
                let f = fs::File::open(&e.path).map_err(Error::io(&e.path))?;
                f.read_exact_at(buf, start).map_err(Error::io(&e.path))?;
            }
        }
        Ok(())
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
            for f in version_files(&from, *v) {
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

fn extra_path(data: &Path, suffix: &str) -> PathBuf {
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

fn hashes_path(data: &Path) -> PathBuf {
    let mut s = data.as_os_str().to_owned();
    s.push(".hashes");
    PathBuf::from(s)
}
