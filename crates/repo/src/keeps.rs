//! The copies kept in the background (`Keeps`, held by the [`Repo`]: a
//! detached `put`, as `granary get` asks for) and the removals that
//! overrule them, in memory and durably in `<repo>/removed.log`
//! ([`record_removal`]).

use std::sync::Mutex;

use granary_packet::Name;
use serde_json::{json, Value};

use crate::Repo;

/// The copies being kept in the background, held by the [`Repo`] so that
/// every removal sees them: `granary rm` (the `removed` local command) and
/// a network delete (python_repo).
#[derive(Default)]
pub(crate) struct Keeps(Mutex<Vec<Keep>>, Mutex<Vec<Removal>>);

/// A removal (or rename away) of a name that this node was told of: a
/// copy of it asked to be kept after it — `granary get` fetched it before
/// the removal and asks to keep it after — must not bring it back.
struct Removal {
    name: Name,
    version: Option<u64>,
    at: std::time::Instant,
}

/// How long a removal blocks keeps of what it removed: longer than a fetch
/// that started before it can take to ask.
const REMOVAL_MEMORY: std::time::Duration = std::time::Duration::from_secs(600);

/// The durable record of removals (`<repo>/removed.log`, one JSON line
/// each: name, version, time): written by `rm`, `mv` and rename recovery
/// whether or not a daemon runs, read by the daemon before it keeps a
/// copy, so that a removal survives a daemon restart. Lines older than
/// [`REMOVAL_MEMORY`] are ignored (and dropped when the file is rewritten).
fn removal_log(store: &granary_store::Store) -> std::path::PathBuf {
    store.root().join("removed.log")
}

/// Records that `name` (`version`, or every version) was removed or renamed
/// away, durably, in `<repo>/removed.log`.
pub fn record_removal(
    store: &granary_store::Store,
    name: &Name,
    version: Option<u64>,
) -> std::io::Result<()> {
    use std::io::Write;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let p = removal_log(store);
    // Rewritten without its stale lines once it grows.
    if std::fs::metadata(&p).is_ok_and(|m| m.len() > 1 << 20) {
        let keep: String = std::fs::read_to_string(&p)
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                serde_json::from_str::<Value>(l).is_ok_and(|v| {
                    v["at"]
                        .as_u64()
                        .is_some_and(|t| now.saturating_sub(t) < REMOVAL_MEMORY.as_secs())
                })
            })
            .map(|l| format!("{l}\n"))
            .collect();
        granary_store::write_atomic(&p, keep.as_bytes()).map_err(std::io::Error::other)?;
    }
    let line = json!({"name": name.to_string(), "version": version, "at": now});
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)?;
    f.write_all(format!("{line}\n").as_bytes())?;
    f.sync_data()
}

/// True when [`removal_log`] records a removal of `name` (`version`) in the
/// last [`REMOVAL_MEMORY`].
pub(crate) fn removed_on_disk(
    store: &granary_store::Store,
    name: &Name,
    version: Option<u64>,
) -> bool {
    let Ok(text) = std::fs::read_to_string(removal_log(store)) else {
        return false;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let want = name.to_string();
    text.lines().rev().any(|l| {
        serde_json::from_str::<Value>(l).is_ok_and(|v| {
            v["name"].as_str() == Some(want.as_str())
                && v["at"]
                    .as_u64()
                    .is_some_and(|t| now.saturating_sub(t) < REMOVAL_MEMORY.as_secs())
                && (v["version"].is_null() || version.is_none() || v["version"].as_u64() == version)
        })
    })
}

/// A copy being kept in the background (a detached `put`, as `granary get`
/// asks for), or kept in the last [`KEEP_MEMORY`]: a removal of its name
/// that comes meanwhile must win, whichever of the two commits last.
struct Keep {
    name: Name,
    version: Option<u64>,
    /// Set by a removal of this name (and version) while it was in flight.
    removed: bool,
    /// When its version was committed; `None` while in flight.
    finished: Option<std::time::Instant>,
}

/// How long a finished keep is remembered: longer than a `granary rm`
/// takes between removing the files and telling the daemon.
const KEEP_MEMORY: std::time::Duration = std::time::Duration::from_secs(60);

impl Keeps {
    /// True when no keep is recorded (nothing begun, nothing marked).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.lock().is_ok_and(|k| k.is_empty())
    }

    /// Records a keep of `name` (`version` if asked for) starting now;
    /// forgets those finished longer than [`KEEP_MEMORY`] ago.
    pub(crate) fn begin(&self, name: &Name, version: Option<u64>) {
        if let Ok(mut k) = self.0.lock() {
            k.retain(|k| k.finished.is_none_or(|t| t.elapsed() < KEEP_MEMORY));
            k.push(Keep {
                name: name.clone(),
                version,
                removed: false,
                finished: None,
            });
        }
    }

    /// Marks the keeps of `name` (`version`, or every version) as removed;
    /// returns how many are still in flight (each is dropped when it lands)
    /// and the versions among them already committed (they landed after the
    /// store removed the name, or are gone already: [`drop_kept`] them).
    pub(crate) fn mark_removed(&self, name: &Name, version: Option<u64>) -> (usize, Vec<u64>) {
        if let Ok(mut r) = self.1.lock() {
            r.retain(|r| r.at.elapsed() < REMOVAL_MEMORY);
            r.push(Removal {
                name: name.clone(),
                version,
                at: std::time::Instant::now(),
            });
        }
        let Ok(mut keeps) = self.0.lock() else {
            return (0, Vec::new());
        };
        let (mut in_flight, mut landed) = (0, Vec::new());
        for k in keeps.iter_mut().filter(|k| {
            k.name == *name && (version.is_none() || k.version.is_none() || k.version == version)
        }) {
            k.removed = true;
            match k.finished {
                Some(_) => landed.extend(k.version),
                None => in_flight += 1,
            }
        }
        (in_flight, landed)
    }

    /// True when `name` (`version`) was removed here in the last
    /// [`REMOVAL_MEMORY`]: a keep of it asked for now is refused.
    pub(crate) fn was_removed(&self, name: &Name, version: Option<u64>) -> bool {
        self.1.lock().is_ok_and(|r| {
            r.iter().any(|r| {
                r.at.elapsed() < REMOVAL_MEMORY
                    && r.name == *name
                    && (r.version.is_none() || version.is_none() || r.version == version)
            })
        })
    }

    /// Records that the keep of `name` finished (committing `version`, if
    /// it did); true when a removal of it came meanwhile, so the caller
    /// drops it.
    pub(crate) fn finish(&self, name: &Name, version: Option<u64>) -> bool {
        let Ok(mut keeps) = self.0.lock() else {
            return false;
        };
        let Some(k) = keeps
            .iter_mut()
            .find(|k| k.finished.is_none() && k.name == *name)
        else {
            return false;
        };
        k.finished = Some(std::time::Instant::now());
        if version.is_some() {
            k.version = version;
        }
        k.removed
    }
}

/// Removes `version` of `name`, a kept copy that a removal overtook.
pub(crate) fn drop_kept(repo: &Repo, name: &Name, version: u64) {
    match repo.store.remove(name, Some(version)) {
        Ok(_) => {
            repo.store.forget();
            let _ = repo.notify_removed(name, Some(version));
            tracing::info!(
                "dropped the copy of {name} v={version} being kept: it was removed meanwhile"
            );
        }
        Err(granary_store::Error::NotFound(_)) => {}
        Err(e) => tracing::warn!("could not drop the kept copy of {name} v={version}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A removal recorded on disk blocks keeps of that name (every version
    /// when it named none, else only its version), also for a store opened
    /// afterwards (a restarted daemon); other names are not blocked.
    #[test]
    fn recorded_removals_block_keeps_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let store = granary_store::Store::open(dir.path()).unwrap();
        let (a, b) = (
            Name::from_uri("/rm/a").unwrap(),
            Name::from_uri("/rm/b").unwrap(),
        );
        assert!(!removed_on_disk(&store, &a, Some(1)));
        record_removal(&store, &a, None).unwrap();
        record_removal(&store, &b, Some(7)).unwrap();
        drop(store);
        let store = granary_store::Store::open(dir.path()).unwrap();
        assert!(removed_on_disk(&store, &a, Some(1)));
        assert!(removed_on_disk(&store, &b, Some(7)));
        assert!(!removed_on_disk(&store, &b, Some(8)));
        assert!(!removed_on_disk(
            &store,
            &Name::from_uri("/rm/c").unwrap(),
            None
        ));
        // Stale lines (older than REMOVAL_MEMORY) block nothing.
        std::fs::write(
            removal_log(&store),
            "{\"name\":\"/rm/c\",\"version\":null,\"at\":1}\n",
        )
        .unwrap();
        assert!(!removed_on_disk(
            &store,
            &Name::from_uri("/rm/c").unwrap(),
            None
        ));
    }
}
