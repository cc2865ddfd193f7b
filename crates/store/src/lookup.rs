//! Lookup: versions of a name, [`Store::get`] / [`Store::get_shared`] and
//! the lookup cache, segment hashes, ranges and reads, and listing.

use std::fs;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use granary_packet::Name;

use crate::{
    extra_path, hashes_path, meta, path, Cached, Dir, Dormant, Entry, Error, FileMeta, LookupCache,
    Result, Side, Stamp, Store, CACHE_TTL, RECHECK, SWEEP_EVERY,
};

/// How often the process's lookup caches are swept of expired lookups.
const SWEEP_PERIOD: std::time::Duration = std::time::Duration::from_secs(2);

type Caches = std::sync::Mutex<Vec<std::sync::Weak<std::sync::Mutex<LookupCache>>>>;

/// A new lookup cache, registered with the process's sweeper: a thread that
/// drops every cache's expired lookups (and so closes their files) every
/// [`SWEEP_PERIOD`], so an idle server holds no descriptors for versions
/// it served a while ago. Caches of dropped stores are forgotten.
pub(crate) fn swept_cache() -> Arc<std::sync::Mutex<LookupCache>> {
    static CACHES: std::sync::OnceLock<Caches> = std::sync::OnceLock::new();
    let c: Arc<std::sync::Mutex<LookupCache>> = Default::default();
    let mut started = false;
    let all = CACHES.get_or_init(|| {
        started = true;
        Default::default()
    });
    if let Ok(mut v) = all.lock() {
        v.retain(|w| w.strong_count() > 0);
        v.push(Arc::downgrade(&c));
    }
    if started {
        let _ = std::thread::Builder::new()
            .name("store-sweep".into())
            .spawn(move || loop {
                std::thread::sleep(SWEEP_PERIOD);
                let live: Vec<_> = match all.lock() {
                    Ok(v) => v.iter().filter_map(|w| w.upgrade()).collect(),
                    Err(_) => return,
                };
                let now = std::time::Instant::now();
                for c in live {
                    if let Ok(mut c) = c.lock() {
                        c.sweep(now);
                    }
                }
            });
    }
    c
}

impl Store {
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
        if let Some(e) = self.get_cached(name, version) {
            return Ok(e);
        }
        let now = std::time::Instant::now();
        let key = (name.clone(), version);
        // The latest version: the name's directory before its versions are
        // listed, so that one added meanwhile shows as a change.
        let dir = match version {
            Some(_) => None,
            None => {
                let path = self.objects.join(path::object_dir(name)?);
                fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .ok()
                    .map(|mtime| Dir { path, mtime })
            }
        };
        let (e, stamp, file_settled) = self.get_uncached(name, version)?;
        let e = Arc::new(e);
        let ino = stamp.map(|s| s.ino);
        if let Ok(mut c) = self.cache.lock() {
            // Expired lookups hold open files (data, .hashes, .offsets):
            // dropped every SWEEP_EVERY insertions, so a server that looks
            // up many distinct versions keeps only those of the last TTL
            // open, not the whole cap's.
            if c.map.len() % SWEEP_EVERY == SWEEP_EVERY - 1 {
                c.sweep(now);
            }
            if c.map.len() >= self.cache_max.load(std::sync::atomic::Ordering::Relaxed) {
                c.map.clear();
            }
            let settled = dir.as_ref().is_none_or(|d| {
                d.mtime
                    .elapsed()
                    .is_ok_and(|since| since >= crate::DIR_SETTLE)
            });
            let ttl = if settled { c.ttl } else { CACHE_TTL.min(c.ttl) };
            let dormant_ok = settled
                && file_settled
                && self.backend == meta::Backend::Xattr
                && self.data_only.load(std::sync::atomic::Ordering::Relaxed);
            c.dormant.remove(&key);
            let stamp = stamp.filter(|_| dormant_ok);
            c.map
                .insert(key, Cached::new(now, ttl, dir, stamp, e.clone(), ino));
        }
        Ok(e)
    }

    /// [`Store::get_shared`] when its answer is cached and fresh; `None` otherwise,
    /// without reading the repository (but for one `stat` of the cached file's path,
    /// at most every RECHECK). For a caller that must not wait for the disk (an
    /// async worker): it takes the blocking route on `None`.
    ///
    /// A data-only lookup past its time to live comes back here too, without a
    /// lookup, when its file is still the one it found, unchanged: opened with
    /// `RESOLVE_CACHED` (the open fails rather than wait for the disk) and
    /// checked by inode and change time, and for a latest version the name's
    /// directory by its modification time ([`Dormant`]).
    pub fn get_cached(&self, name: &Name, version: Option<u64>) -> Option<Arc<Entry>> {
        let key = (name.clone(), version);
        let now = std::time::Instant::now();
        let mut c = self.cache.lock().ok()?;
        let Some(hit) = c.map.get_mut(&key) else {
            return self.revive(c, key, now);
        };
        // Still fresh, the file still the one open, and for a latest version
        // its directory unchanged: checked with one `stat` (two) at most every
        // RECHECK, so a rename, removal or new version by another process is
        // seen within that (the CLI's mv and rm also tell a running daemon to
        // forget at once). The entry holds the file open: its path's dentries
        // are in memory.
        if now.duration_since(hit.inserted) >= hit.ttl {
            if let Some(old) = c.map.remove(&key) {
                c.put_dormant(key.clone(), old);
            }
            return self.revive(c, key, now);
        }
        if now.duration_since(hit.checked) >= RECHECK {
            let same_file = fs::metadata(&hit.entry.path).is_ok_and(|m| {
                hit.ino
                    .is_none_or(|i| std::os::unix::fs::MetadataExt::ino(&m) == i)
            });
            let same_dir = hit.dir.as_ref().is_none_or(|d| {
                fs::metadata(&d.path)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t == d.mtime)
            });
            if !(same_file && same_dir) {
                c.map.remove(&key);
                return None;
            }
            hit.checked = now;
        }
        Some(hit.entry.clone())
    }

    /// A dormant lookup of `key` brought back (and cached again) when it can be
    /// checked without waiting for the disk and is unchanged; dropped when it
    /// changed; kept when it cannot be checked now (the caller looks up).
    fn revive(
        &self,
        mut c: std::sync::MutexGuard<'_, LookupCache>,
        key: (Name, Option<u64>),
        now: std::time::Instant,
    ) -> Option<Arc<Entry>> {
        if !self.data_only.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let d = c.dormant.remove(&key)?;
        let ttl = c.ttl;
        drop(c);
        let file = match reopen_unchanged(&d) {
            Revival::Unchanged(f) => f,
            Revival::NotNow => {
                if let Ok(mut c) = self.cache.lock() {
                    c.dormant.insert(key, d);
                }
                return None;
            }
            Revival::Changed => return None,
        };
        let entry = Arc::new(Entry {
            meta: d.meta,
            file: Some(Arc::new(OpenData::new(file, Box::default()))),
            offsets: None,
            hashes: None,
            crcs: None,
            path: d.path,
        });
        let mut c = self.cache.lock().ok()?;
        if c.map.len() >= self.cache_max.load(std::sync::atomic::Ordering::Relaxed) {
            c.map.clear();
        }
        let (ino, stamp) = (Some(d.stamp.ino), Some(d.stamp));
        c.map
            .insert(key, Cached::new(now, ttl, d.dir, stamp, entry.clone(), ino));
        Some(entry)
    }

    /// Caps the lookups cached (each holds up to three open files; 4096
    /// by default): a reader that must stay within a descriptor budget
    /// sets a lower cap.
    pub fn set_cache_max(&self, n: usize) {
        self.cache_max
            .store(n.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// Lookups open the data file alone: the entries' `hashes`, `crcs` and
    /// `offsets` are `None` (what reads them opens the file by its path) and
    /// no damage record is read. For a reader that checks every segment
    /// against a signed manifest itself (the gateway's `/data`), so that a
    /// lookup costs one `open` instead of five.
    pub fn set_data_only(&self, on: bool) {
        self.data_only
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Drops the cached lookups older than their time to live (a lookup
    /// would not use them any more), closing their files: for a long-lived
    /// reader to call now and then, so that descriptors are released
    /// when lookups stop.
    pub fn sweep(&self) {
        let now = std::time::Instant::now();
        if let Ok(mut c) = self.cache.lock() {
            c.sweep(now);
        }
    }

    /// Drops every cached lookup: the next one reads the files again (for
    /// a daemon told that another process renamed or removed a version).
    pub fn forget(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.map.clear();
            c.dormant.clear();
        }
    }

    /// How long a lookup is trusted ([`CACHE_TTL`] by default). Changes by
    /// other processes are seen through the checks of every hit, not by
    /// expiry: a longer time keeps more files open (up to the cap) for a
    /// reader of many distinct versions, each looked up once per time.
    pub fn set_cache_ttl(&self, ttl: std::time::Duration) {
        if let Ok(mut c) = self.cache.lock() {
            c.ttl = ttl;
        }
    }

    /// A lookup read from the repository: the entry, the data file's
    /// [`Stamp`] taken before its attributes were read, and whether the file
    /// had settled then (unchanged for [`crate::DIR_SETTLE`]: a change within
    /// the same tick of the file system's clock would not show in its change
    /// time).
    fn get_uncached(
        &self,
        name: &Name,
        version: Option<u64>,
    ) -> Result<(Entry, Option<Stamp>, bool)> {
        let v = match version {
            Some(v) => v,
            None => *self
                .versions(name)?
                .last()
                .ok_or_else(|| Error::NotFound(name.to_string()))?,
        };
        let p = self.objects.join(path::version_file(name, v)?);
        // Opened first, then checked to be a file through the descriptor,
        // and its attributes read through it too: no path walk each.
        let not_found = || Error::NotFound(format!("{name} version {v}"));
        let file = match fs::File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || !p.is_file() => {
                return Err(not_found())
            }
            Err(e) => return Err(Error::io(&p)(e)),
        };
        let (stamp, settled) = match file.metadata() {
            Ok(m) if m.is_file() => {
                use std::os::unix::fs::MetadataExt;
                let ctime = std::time::UNIX_EPOCH
                    + std::time::Duration::new(m.ctime().max(0) as u64, m.ctime_nsec() as u32);
                let settled = ctime
                    .elapsed()
                    .is_ok_and(|since| since >= crate::DIR_SETTLE);
                let stamp = Stamp {
                    ino: m.ino(),
                    ctime: (m.ctime(), m.ctime_nsec()),
                };
                (Some(stamp), settled)
            }
            Ok(_) => return Err(not_found()),
            Err(e) => return Err(Error::io(&p)(e)),
        };
        let meta = meta::read_at(self.backend, &p, Some(&file))?;
        if self.data_only.load(std::sync::atomic::Ordering::Relaxed) {
            let e = Entry {
                meta,
                file: Some(std::sync::Arc::new(OpenData::new(file, Box::default()))),
                offsets: None,
                hashes: None,
                crcs: None,
                path: p,
            };
            return Ok((e, stamp, settled));
        }
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
        let crcs = fs::File::open(extra_path(&p, crate::CRC_SUFFIX))
            .ok()
            .map(std::sync::Arc::new);
        // The damage record, read with the entry (one failed `open` when
        // there is none): serving withholds its segments without a read
        // per segment, and sees a new record when the entry is looked up
        // again (within CACHE_TTL, or at once after `forget`).
        let withheld = crate::integrity::damaged_segments(&p);
        let e = Entry {
            meta,
            file: Some(std::sync::Arc::new(OpenData::new(file, withheld))),
            offsets,
            hashes,
            crcs,
            path: p,
        };
        Ok((e, stamp, settled))
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
        match (&e.offsets, &e.file) {
            (Some(f), Some(d)) => d.read_side(
                Side::Offsets,
                f,
                &mut b,
                seg * 8,
                (e.meta.segments() + 1) * 8,
                e.meta.size,
            ),
            (Some(f), None) => f.read_exact_at(&mut b, seg * 8),
            (None, _) => fs::File::open(&op).and_then(|f| f.read_exact_at(&mut b, seg * 8)),
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
            Some(f) => {
                f.read_at(dst, offset, e.meta.size)
                    .map_err(Error::io(&e.path))?;
                f.drop_behind(offset, e.meta.size);
                Ok(())
            }
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
                    match meta::read(self.backend, &p) {
                        Ok(m) => out.push(m),
                        // Removed or renamed since the listing: not there.
                        Err(_) if !p.exists() => {}
                        // One unreadable version does not hide the others.
                        Err(e) => eprintln!("granary-store: not listed: {e}"),
                    }
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
}

/// A version's data file, open for serving, and how far behind its reader
/// its pages were dropped from the page cache.
#[derive(Debug)]
pub struct OpenData {
    /// The data file.
    pub file: fs::File,
    /// Pages below this offset were dropped.
    dropped: std::sync::atomic::AtomicU64,
    /// Bytes the drop-behind advised the kernel away (`fadvise` calls that
    /// succeeded): see [`OpenData::dropped_behind`].
    advised: std::sync::atomic::AtomicU64,
    /// Segments the version's damage record (`@<v>.damaged`) names, sorted,
    /// as of the lookup: never served (see [`Store::withheld`]).
    withheld: Box<[u64]>,
    /// The bytes read ahead for a sequential reader ([`read_in_runs`]): of
    /// the data file, of `.offsets`, of `.crc32`.
    run: std::sync::Mutex<Run>,
    offsets_run: std::sync::Mutex<Run>,
    crcs_run: std::sync::Mutex<Run>,
}

impl Run {
    fn new() -> std::sync::Mutex<Run> {
        std::sync::Mutex::new(Run {
            at: 0,
            buf: Vec::new(),
            start: u64::MAX,
            next: u64::MAX,
        })
    }
}

/// Reads `dst.len()` bytes at `offset` of `file` (`size` bytes long). With
/// `runs`, a read that goes on in order from the one before it (it starts
/// at or after that one's start and no later than its end, as a consumer's
/// pipeline asks for a file's segments) takes its bytes from one read of
/// [`RUN`] bytes made at the first of them; anything else is a `pread` of
/// its own. A reader never goes back into a run, so what it gets was in the
/// file at most one run earlier; the callers' checks (the serve-time CRC-32,
/// the consumer's manifest) see these bytes as they see any others.
fn read_in_runs(
    run: &std::sync::Mutex<Run>,
    file: &fs::File,
    dst: &mut [u8],
    offset: u64,
    size: u64,
    runs: bool,
) -> std::io::Result<()> {
    let end = offset.saturating_add(dst.len() as u64);
    let mut r = match run.try_lock() {
        Ok(r) if runs && dst.len() < RUN / 4 => r,
        _ => return file.read_exact_at(dst, offset),
    };
    let in_order = offset >= r.start && offset <= r.next;
    r.start = offset;
    r.next = end;
    if !in_order {
        r.buf.clear();
        return file.read_exact_at(dst, offset);
    }
    let held = r.at..r.at + r.buf.len() as u64;
    if offset < held.start || end > held.end {
        let want = (RUN as u64).min(size.saturating_sub(offset)) as usize;
        if want < dst.len() {
            r.buf.clear();
            return file.read_exact_at(dst, offset);
        }
        // Grown (and zeroed) once; a run overwrites what it held.
        r.buf.resize(want, 0);
        if let Err(e) = file.read_exact_at(&mut r.buf[..want], offset) {
            // A file shorter than its record: the read of its own says.
            r.buf.clear();
            return match e.kind() {
                std::io::ErrorKind::UnexpectedEof => file.read_exact_at(dst, offset),
                _ => Err(e),
            };
        }
        r.buf.truncate(want);
        r.at = offset;
    }
    let from = (offset - r.at) as usize;
    dst.copy_from_slice(&r.buf[from..from + dst.len()]);
    Ok(())
}

/// Bytes read ahead of a sequential reader: `buf` holds the file's bytes
/// from `at`; the last read through this handle was `start..next`.
#[derive(Debug)]
struct Run {
    at: u64,
    buf: Vec<u8>,
    start: u64,
    next: u64,
}

/// One read of this many bytes serves the next reads of a file read in
/// order (a consumer's pipeline asks for its segments in order): ≈ 43
/// segments of 6 KiB per `pread` instead of one each.
pub const RUN: usize = 256 << 10;

/// Files read in runs are at least this large (smaller ones are served in a
/// few reads anyway).
pub const RUN_MIN: u64 = 16 << 20;

/// Files at least this large are streamed through the page cache without
/// growing it: the pages more than [`DROP_WINDOW`] behind the furthest read
/// are dropped (`POSIX_FADV_DONTNEED`, as `dd iflag=nocache` and nginx's
/// `directio` for large files do). A multi-gigabyte file served once does
/// not evict the machine's working set, and the page cache reuses the pages
/// just freed instead of taking fresh ones (on a VM that returns freed
/// memory to its host, each fresh page is a host fault: serving 1 GiB cold
/// cost the repository 0.4–0.7 s more CPU without this). Smaller files stay
/// cached. The bytes are the same either way (read again from the disk).
pub const DROP_BEHIND_MIN: u64 = 256 << 20;

/// Pages kept behind the furthest read of a large file (readers a little
/// behind it still find theirs cached).
pub const DROP_WINDOW: u64 = 32 << 20;

impl OpenData {
    fn new(file: fs::File, withheld: Box<[u64]>) -> OpenData {
        OpenData {
            file,
            dropped: std::sync::atomic::AtomicU64::new(0),
            advised: std::sync::atomic::AtomicU64::new(0),
            withheld,
            run: Run::new(),
            offsets_run: Run::new(),
            crcs_run: Run::new(),
        }
    }

    /// Reads `dst.len()` bytes at `offset` of the data file, of `size` bytes
    /// ([`read_in_runs`]).
    fn read_at(&self, dst: &mut [u8], offset: u64, size: u64) -> std::io::Result<()> {
        read_in_runs(&self.run, &self.file, dst, offset, size, size >= RUN_MIN)
    }

    /// Reads `dst.len()` bytes at `offset` of a version's side file `f`
    /// (`.offsets`, `.crc32`) of `len` bytes, in runs when the data file is
    /// large: a sequential reader of the data reads these in order too.
    pub(crate) fn read_side(
        &self,
        which: Side,
        f: &fs::File,
        dst: &mut [u8],
        offset: u64,
        len: u64,
        data_size: u64,
    ) -> std::io::Result<()> {
        let run = match which {
            Side::Offsets => &self.offsets_run,
            Side::Crcs => &self.crcs_run,
        };
        read_in_runs(run, f, dst, offset, len, data_size >= RUN_MIN)
    }

    /// Bytes of this file (from its start) that reads through this handle
    /// have advised the kernel to drop from the page cache
    /// (`POSIX_FADV_DONTNEED` calls that succeeded): 0 for a file under
    /// [`DROP_BEHIND_MIN`], up to all but the last [`DROP_WINDOW`] or two
    /// behind the furthest read of a larger one.
    pub fn dropped_behind(&self) -> u64 {
        self.advised.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// True when the damage record read with this lookup names `seg`.
    pub(crate) fn withholds(&self, seg: u64) -> bool {
        self.withheld.binary_search(&seg).is_ok()
    }

    /// A read at `at` of a file of `size` bytes: drops the pages far
    /// enough behind it (one `fadvise` per [`DROP_WINDOW`] read).
    fn drop_behind(&self, at: u64, size: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        if size < DROP_BEHIND_MIN {
            return;
        }
        let done = self.dropped.load(Relaxed);
        if at < done + 2 * DROP_WINDOW {
            return;
        }
        let to = at - DROP_WINDOW;
        if self
            .dropped
            .compare_exchange(done, to, Relaxed, Relaxed)
            .is_err()
        {
            return; // another reader took this window
        }
        let advice = rustix::fs::fadvise(
            &self.file,
            done,
            std::num::NonZeroU64::new(to - done),
            rustix::fs::Advice::DontNeed,
        );
        if advice.is_ok() {
            self.advised.fetch_add(to - done, Relaxed);
        }
    }
}

/// How much a store holds: its versions and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Stored file versions.
    pub versions: u64,
    /// Their bytes (the sum of the versions' file lengths).
    pub bytes: u64,
}

/// [`Usage`] of the store at `root`, read without opening it (nothing is
/// written: no probe, no clean-up of `tmp/`): one walk of `<root>/objects`
/// with a `stat` per version file. A missing store holds nothing.
pub fn usage(root: &std::path::Path) -> Usage {
    let mut u = Usage::default();
    let mut stack = vec![root.join("objects")];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file()
                && e.file_name()
                    .to_str()
                    .and_then(path::parse_version_file)
                    .is_some()
            {
                // Removed since the listing: not there.
                if let Ok(m) = e.metadata() {
                    u.versions += 1;
                    u.bytes += m.len();
                }
            }
        }
    }
    u
}

/// What a dormant lookup's file is now ([`Store::get_cached`]).
enum Revival {
    /// The same file, unchanged, open again.
    Unchanged(fs::File),
    /// Not known without waiting for the disk (a path not in the dentry
    /// cache), or not knowable here (a kernel without `RESOLVE_CACHED`).
    NotNow,
    /// Replaced, removed, renamed or changed (or its directory changed).
    Changed,
}

/// Opens a dormant lookup's data file (and for a latest version its
/// directory) with `RESOLVE_CACHED`, so that nothing waits for the disk, and
/// compares them with what the lookup saw.
fn reopen_unchanged(d: &Dormant) -> Revival {
    use rustix::fs::{fstat, openat2, FileType, Mode, OFlags, ResolveFlags, CWD};
    use rustix::io::Errno;
    let open = |path: &std::path::Path, flags: OFlags| {
        openat2(
            CWD,
            path,
            flags | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::CACHED,
        )
    };
    let fail = |e: Errno| {
        // EAGAIN: a component is not cached; ENOSYS/EINVAL: no openat2 or no
        // RESOLVE_CACHED (kernels before 5.12).
        if e == Errno::AGAIN || e == Errno::NOSYS || e == Errno::INVAL {
            Revival::NotNow
        } else {
            Revival::Changed
        }
    };
    if let Some(dir) = &d.dir {
        let fd = match open(&dir.path, OFlags::PATH | OFlags::DIRECTORY) {
            Ok(fd) => fd,
            Err(e) => return fail(e),
        };
        let Ok(st) = fstat(&fd) else {
            return Revival::NotNow;
        };
        let mtime = std::time::UNIX_EPOCH
            + std::time::Duration::new(st.st_mtime.max(0) as u64, st.st_mtime_nsec as u32);
        if mtime != dir.mtime {
            return Revival::Changed;
        }
    }
    let fd = match open(&d.path, OFlags::RDONLY) {
        Ok(fd) => fd,
        Err(e) => return fail(e),
    };
    let Ok(st) = fstat(&fd) else {
        return Revival::NotNow;
    };
    // The stat fields' integer types differ between targets (i64 here).
    #[allow(clippy::unnecessary_cast)]
    let now = Stamp {
        ino: st.st_ino as u64,
        ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
    };
    if !FileType::from_raw_mode(st.st_mode).is_file() || now != d.stamp {
        return Revival::Changed;
    }
    Revival::Unchanged(fs::File::from(fd))
}
