//! Group commit: versions ingested with [`crate::PutOptions::staged`] wait
//! complete in the temp directory; [`Store::commit`] publishes a batch of
//! them with one `syncfs` before any appears and one after (instead of the
//! five or so `fsync`s of each [`Store::put`]).
//!
//! Crash safety is the same as `put`'s: a version appears only by the
//! rename of its data file, and that happens only once its data, hashes,
//! offsets, manifest and metadata are durable (the first `syncfs`); so after
//! a crash each version of the batch is there complete or not at all (its
//! temp files, named after the dead process, are removed by the next
//! [`Store::open`]).

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::{meta, path, Entry, Error, Result, Store};

impl Store {
    /// True when `e` is a staged version (its data file in the temp
    /// directory).
    pub fn is_staged(&self, e: &Entry) -> bool {
        e.path.starts_with(&self.tmp)
    }

    /// Publishes staged versions ([`crate::PutOptions::staged`]) together: a
    /// `syncfs` makes everything they hold durable, then each is moved into
    /// place (files beside it first, the data file last: the moment it
    /// appears), then a second `syncfs` makes the moves durable. With
    /// `index`, each gets an index-pending mark before it appears and is
    /// indexed here if this process holds the hash index (else by whoever
    /// does). Returns each version's entry as published, in order; one that
    /// cannot be published (e.g. its version exists) is an error and its
    /// staged files are removed.
    pub fn commit(&self, staged: Vec<Entry>, index: bool) -> Vec<Result<Entry>> {
        if staged.is_empty() {
            return Vec::new();
        }
        // The files beside each staged data file, found in one listing.
        let mut beside: HashMap<PathBuf, Vec<(PathBuf, String)>> = HashMap::new();
        let names: HashMap<String, PathBuf> = staged
            .iter()
            .filter_map(|e| Some((e.path.file_name()?.to_str()?.to_string(), e.path.clone())))
            .collect();
        if let Ok(rd) = fs::read_dir(&self.tmp) {
            for f in rd.flatten() {
                let n = f.file_name();
                let Some(n) = n.to_str() else { continue };
                // `<pid>-<id>.data.<suffix>`
                let Some((data, suffix)) = n.split_once(".data.") else {
                    continue;
                };
                if let Some(p) = names.get(&format!("{data}.data")) {
                    beside
                        .entry(p.clone())
                        .or_default()
                        .push((f.path(), suffix.to_string()));
                }
            }
        }
        let mut out: Vec<Result<(Entry, PathBuf)>> = staged
            .into_iter()
            .map(|e| {
                if !self.is_staged(&e) {
                    return Err(Error::Corrupt(format!(
                        "{} is not a staged version",
                        e.path.display()
                    )));
                }
                let name = e.meta.name()?;
                let dir = self.objects.join(path::object_dir(&name)?);
                let final_data = dir.join(format!("@{}", e.meta.version));
                Ok((e, final_data))
            })
            .collect();
        // Marks first (made durable with everything else).
        let mut marks: Vec<Option<PathBuf>> = vec![None; out.len()];
        if index {
            for (i, r) in out.iter().enumerate() {
                if let Ok((_, final_data)) = r {
                    marks[i] = self.mark(final_data, false).ok();
                }
            }
        }
        let synced = self.syncfs();
        let mut dirs: Vec<PathBuf> = Vec::new();
        // One writer per version: every check-and-move under the publish
        // lock (see `PublishLock`).
        let lock = self.publish_lock();
        if let Err(e) = &lock {
            let why = e.to_string();
            for r in out.iter_mut() {
                if let Ok((e, _)) = &*r {
                    self.discard(e);
                }
                *r = Err(Error::Corrupt(format!("publish lock: {why}")));
            }
            for m in marks.iter_mut().filter_map(Option::take) {
                let _ = fs::remove_file(m);
            }
        }
        for (i, r) in out.iter_mut().enumerate() {
            let step = match (&synced, &*r) {
                (Err(e), _) => Err(Error::Corrupt(format!("syncfs: {e}"))),
                (Ok(()), Ok((e, final_data))) => {
                    self.move_into_place(e, final_data, beside.get(&e.path), &mut dirs)
                }
                (Ok(()), Err(_)) => Ok(()),
            };
            if let Err(err) = step {
                if let Ok((e, _)) = &*r {
                    let _ = fs::remove_file(&e.path);
                    for (p, _) in beside.get(&e.path).into_iter().flatten() {
                        let _ = fs::remove_file(p);
                    }
                }
                if let Some(m) = marks[i].take() {
                    let _ = fs::remove_file(m);
                }
                *r = Err(err);
            }
        }
        drop(lock);
        // The moves (and the directories made for them) durable.
        let _ = self.syncfs();
        self.forget();
        if index {
            if let Some(ix) = self.index_handle().filter(|ix| !ix.writing()) {
                self.catch_up_into(&ix, true);
            }
        }
        out.into_iter()
            .map(|r| {
                let (e, final_data) = r?;
                Ok(Entry {
                    meta: meta::read(self.backend, &final_data).unwrap_or(e.meta),
                    path: final_data,
                    file: None,
                    offsets: None,
                    hashes: None,
                    crcs: None,
                })
            })
            .collect()
    }

    fn move_into_place(
        &self,
        e: &Entry,
        final_data: &Path,
        beside: Option<&Vec<(PathBuf, String)>>,
        dirs: &mut Vec<PathBuf>,
    ) -> Result<()> {
        let dir = final_data
            .parent()
            .ok_or_else(|| Error::Corrupt("a version path has no directory".into()))?;
        if !dirs.iter().any(|d| d == dir) {
            fs::create_dir_all(dir).map_err(Error::io(dir))?;
            dirs.push(dir.to_path_buf());
        }
        if final_data.exists() {
            return Err(Error::Exists(format!(
                "{} version {}",
                e.meta.name, e.meta.version
            )));
        }
        for (p, suffix) in beside.into_iter().flatten() {
            let to = crate::extra_path(final_data, suffix);
            fs::rename(p, &to).map_err(Error::io(&to))?;
        }
        fs::rename(&e.path, final_data).map_err(Error::io(final_data))
    }

    /// `syncfs` of the store's file system.
    fn syncfs(&self) -> std::io::Result<()> {
        let d = fs::File::open(&self.root)?;
        rustix::fs::syncfs(&d).map_err(std::io::Error::from)
    }
}

impl Store {
    /// Removes a staged version that will not be committed (its data file
    /// and every file beside it).
    pub fn discard(&self, e: &Entry) {
        if !self.is_staged(e) {
            return;
        }
        let Some(base) = e.path.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        let dotted = format!("{base}.");
        if let Ok(rd) = fs::read_dir(&self.tmp) {
            for f in rd.flatten() {
                if f.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(&dotted))
                {
                    let _ = fs::remove_file(f.path());
                }
            }
        }
        let _ = fs::remove_file(&e.path);
    }
}
