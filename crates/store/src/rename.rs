//! Rename and removal: [`Store::rename`] (O(1), all versions) and
//! [`Store::remove`], with every file beside a version.

use std::fs;
use std::path::{Path, PathBuf};

use granary_packet::Name;

use crate::{meta, path, sync_dir, Error, Result, Store};

impl Store {
    /// Renames an object (all its versions) in O(1): one directory rename
    /// and a metadata update per version; no data is read or rewritten.
    /// Under the publish lock (a put of either name waits). Not atomic
    /// across versions by itself: a caller that may be killed midway
    /// records its intent first and completes it with
    /// [`Store::finish_rename`] (granary-repo's `rename` does).
    pub fn rename(&self, old: &Name, new: &Name) -> Result<()> {
        self.forget();
        let _lock = self.publish_lock()?;
        let versions = self.versions(old)?;
        if versions.is_empty() {
            return Err(Error::NotFound(old.to_string()));
        }
        if !self.versions(new)?.is_empty() {
            return Err(Error::Exists(new.to_string()));
        }
        self.move_versions(old, new, &versions)
    }

    /// Completes a rename of `old` to `new` that was interrupted: moves
    /// the versions still under `old` (that `new` does not hold) and sets
    /// the name in the metadata of every version under `new`. Idempotent.
    /// Returns the versions under `new`.
    pub fn finish_rename(&self, old: &Name, new: &Name) -> Result<Vec<u64>> {
        self.forget();
        let _lock = self.publish_lock()?;
        // Every version whose data file is still under `old`: its files
        // already moved (the same files) are replaced by the rest.
        let left = self.versions(old)?;
        if !left.is_empty() {
            self.move_versions(old, new, &left)?;
        }
        let to = self.objects.join(path::object_dir(new)?);
        let all = self.versions(new)?;
        let want = new.to_string();
        for v in &all {
            let p = to.join(format!("@{v}"));
            let mut m = meta::read(self.backend, &p)?;
            if m.name != want {
                m.name = want.clone();
                meta::write(self.backend, &p, &m)?;
            }
        }
        self.forget();
        Ok(all)
    }

    fn move_versions(&self, old: &Name, new: &Name, versions: &[u64]) -> Result<()> {
        let from = self.objects.join(path::object_dir(old)?);
        let to = self.objects.join(path::object_dir(new)?);
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent).map_err(Error::io(parent))?;
        }
        // Move the versions (children objects under `old` stay where they are).
        fs::create_dir_all(&to).map_err(Error::io(&to))?;
        for v in versions {
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
        for v in versions {
            let _ = self.mark(&to.join(format!("@{v}")), false);
        }
        let _ = fs::remove_dir(&from);
        self.forget();
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
