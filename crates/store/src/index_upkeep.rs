//! The hash index kept in step with the files (pending marks, catch-up,
//! reindex) and chunks looked up by hash ([`Store::chunk`],
//! [`Store::has_chunks`]).

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::{
    hash_index, hashes_path, meta, path, unique, write_atomic, Entry, Error, Result, Store,
};

/// What a reindex did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reindexed {
    /// Versions indexed.
    pub versions: u64,
    /// Segments indexed.
    pub segments: u64,
}

/// Hashes looked up in the index at once ([`hash_index::Index::get_many`]):
/// bounds the memory of a lookup of a whole large file.
const LOOKUP_BATCH: usize = 65_536;

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
    pub(crate) fn mark_pending(&self, data: &Path) -> Result<PathBuf> {
        self.mark(data, true)
    }

    pub(crate) fn mark(&self, data: &Path, durable: bool) -> Result<PathBuf> {
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
    fn with_index<T>(&self, f: impl FnOnce(&std::sync::Arc<hash_index::Index>) -> T) -> Option<T> {
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
            let mut opened = hash_index::Index::open(&path);
            if let Err(hash_index::OpenError::Other(e)) = &opened {
                // Unreadable or of another layout: it is only a cache of the
                // files, so set it aside and rebuild.
                eprintln!("granary-store: {e}; rebuilding the hash index");
                let aside = self.root.join("index.bad");
                let _ = fs::remove_dir_all(&aside);
                let _ = fs::rename(&path, &aside);
                fresh = true;
                opened = hash_index::Index::open(&path);
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
                Err(hash_index::OpenError::Busy) => {
                    st.error = Some(
                        "the hash index is in use by another process (a running daemon?)".into(),
                    );
                    return None;
                }
                Err(hash_index::OpenError::Other(e)) => {
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
    pub(crate) fn index_handle(&self) -> Option<std::sync::Arc<hash_index::Index>> {
        self.with_index(|ix| ix.clone())
    }

    /// Indexes the version a mark names. `Ok(false)` when that version is
    /// not there (yet).
    fn index_mark(&self, ix: &std::sync::Arc<hash_index::Index>, mark: &Path) -> Result<bool> {
        let rel = fs::read(mark).map_err(Error::io(mark))?;
        let rel = String::from_utf8(rel)
            .map_err(|_| Error::Corrupt(format!("{}: not UTF-8", mark.display())))?;
        let data = self.objects.join(&rel);
        if !data.is_file() {
            return Ok(false);
        }
        self.index_file(ix, &data).map(|_| true)
    }

    fn index_file(&self, ix: &std::sync::Arc<hash_index::Index>, data: &Path) -> Result<u64> {
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
            crcs: None,
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
    pub(crate) fn catch_up_into(
        &self,
        ix: &std::sync::Arc<hash_index::Index>,
        wait: bool,
    ) -> usize {
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
        // Marks of the versions indexed: removed once the index is durable
        // (one sync for all of them).
        let mut indexed = Vec::new();
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
                    indexed.push(p);
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
                // Gone meanwhile: its version was not published after all
                // (a writer that lost the race removes its mark).
                Err(_) if !p.exists() => {}
                Err(e) => eprintln!("granary-store: {}: {e}", p.display()),
            }
        }
        if !indexed.is_empty() && ix.persist().is_ok() {
            for p in indexed {
                let _ = fs::remove_file(&p);
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

    fn reindex_into(&self, ix: &std::sync::Arc<hash_index::Index>) -> Result<Reindexed> {
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
        ix.persist().map_err(Error::Corrupt)?;
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

    /// [`Store::chunk`] for many hashes: `got(i, bytes)` for each of
    /// `hashes` found (in the order given), every one checked against its
    /// hash. The version files stay open from one chunk to the next, so a
    /// run of chunks from one file costs one `open`, not one each. A hash
    /// whose locations are all stale goes through [`Store::chunk`] (which
    /// drops them).
    pub fn chunks(&self, hashes: &[[u8; 32]], mut got: impl FnMut(usize, Vec<u8>)) {
        self.index_catch_up();
        let mut files: std::collections::HashMap<String, Option<fs::File>> = Default::default();
        for (b, batch) in hashes.chunks(LOOKUP_BATCH).enumerate() {
            let Some(Ok(all)) = self.with_index(|ix| ix.get_many(batch)) else {
                continue;
            };
            for (k, locs) in all.into_iter().enumerate() {
                let (i, h) = (b * LOOKUP_BATCH + k, &batch[k]);
                self.read_chunk_at(&mut files, i, h, locs, &mut got);
            }
        }
    }

    /// One chunk of [`Store::chunks`]: from the first of `locs` that gives
    /// its bytes, files kept open in `files`.
    fn read_chunk_at(
        &self,
        files: &mut std::collections::HashMap<String, Option<fs::File>>,
        i: usize,
        h: &[u8; 32],
        locs: Vec<(hash_index::Slot, hash_index::Location)>,
        got: &mut impl FnMut(usize, Vec<u8>),
    ) {
        const OPEN: usize = 64;
        for (_, loc) in &locs {
            if files.len() >= OPEN && !files.contains_key(&loc.file) {
                files.clear();
            }
            let Some(f) = files
                .entry(loc.file.clone())
                .or_insert_with(|| fs::File::open(self.objects.join(&loc.file)).ok())
            else {
                continue;
            };
            let mut buf = vec![0u8; loc.len as usize];
            if f.read_exact_at(&mut buf, loc.offset).is_ok()
                && <[u8; 32]>::from(Sha256::digest(&buf)) == *h
            {
                return got(i, buf);
            }
        }
        // Stale everywhere: `chunk` drops those entries and looks again.
        if !locs.is_empty() {
            if let Ok(Some(b)) = self.chunk(h) {
                got(i, b);
            }
        }
    }

    /// Which of `hashes` the hash index holds a location for: one pass over
    /// the index, no data read (a hint: [`Store::chunk`] still reads and
    /// re-hashes the bytes, so a stale entry costs one miss later, never a
    /// wrong byte). All `false` when the index is not available here.
    pub fn has_chunks(&self, hashes: &[[u8; 32]]) -> Vec<bool> {
        self.index_catch_up();
        // A location counts only while its file exists (removal leaves index
        // entries behind). They are not dropped here: a query is read-only,
        // one `stat` per distinct file (dropping 250 000 stale entries of a
        // removed GiB would cost seconds); `chunk` and `reindex` drop them.
        let mut exists: std::collections::HashMap<String, bool> = Default::default();
        let mut out = Vec::with_capacity(hashes.len());
        for batch in hashes.chunks(LOOKUP_BATCH) {
            match self.with_index(|ix| ix.get_many(batch)) {
                Some(Ok(all)) => out.extend(all.iter().map(|locs| {
                    locs.iter().any(|(_, loc)| {
                        *exists
                            .entry(loc.file.clone())
                            .or_insert_with(|| self.objects.join(&loc.file).is_file())
                    })
                })),
                _ => out.extend(std::iter::repeat_n(false, batch.len())),
            }
        }
        out
    }

    /// Number of (hash, location) entries in the index, if it is available.
    pub fn index_len(&self) -> Option<u64> {
        self.with_index(|ix| ix.len().ok()).flatten()
    }
}
