//! The catalog queue: changes the catalog could not take when they were made
//! (PostgreSQL down or restarting), kept durably on the node until it can.
//!
//! One file per change in `<data-dir>/catalog-queue/`, named by the time it
//! was queued (nanoseconds, then the process id and a counter: names sort in
//! the order the changes were made), written whole (a temporary file, fsync,
//! rename, fsync of the directory), so a queued change survives a crash of
//! the process or the machine. [`Queue::drain`] applies them in that order
//! and deletes each one once the catalog has it; the daemon drains in the
//! background, and so does every command that opens the catalog
//! (`granary put`, `catalog check`, …).
//!
//! Applying is idempotent and checked against the files (the truth): a queued
//! record whose version is no longer stored is not catalogued, and applying
//! one twice (two processes draining at once, a crash between the write and
//! the delete) writes the same record twice.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use granary_catalog::{Catalog, Record};
use granary_packet::Name;
use granary_store::Store;
use serde::{Deserialize, Serialize};

/// Directory of the queue in a data directory.
pub fn queue_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("catalog-queue")
}

/// A change for the catalog.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Op {
    /// Insert or replace these records (versions that were published).
    Upsert {
        /// The records.
        records: Vec<Record>,
    },
    /// Records of versions a live process is about to commit (`publish-dir`
    /// writes them before its commit, as a journal, and deletes them once it
    /// has catalogued them itself). While `writer` runs, a drain leaves the
    /// journal, and everything queued after it, where it is: applied then,
    /// the records of not yet committed versions would be dropped as "no
    /// longer stored" and the journal deleted, and a writer killed just
    /// after its commit would leave versions that no catalog lists. Once the
    /// writer is gone it is applied like [`Op::Upsert`].
    Journal {
        /// The records.
        records: Vec<Record>,
        /// The process that wrote it.
        writer: Writer,
    },
    /// `version` of `name` (every version when `None`) was removed.
    Remove {
        /// NDN name.
        name: String,
        /// Version.
        version: Option<u64>,
        /// The node that removed it: only its location goes (and the record
        /// with the last location); `None` (changes queued before locations
        /// existed, or a node without a prefix) removes the record for all.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
    },
}

/// A process, by id and start time (so a reused id is not mistaken for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Writer {
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/<pid>/stat`, field 22).
    pub start: u64,
}

impl Writer {
    /// This process.
    pub fn current() -> Writer {
        let pid = std::process::id();
        Writer {
            pid,
            start: start_time(pid).unwrap_or(0),
        }
    }

    /// True while the process runs.
    pub fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.start)
    }
}

/// Field 22 of `/proc/<pid>/stat` (after the command name, which may hold
/// spaces and parentheses: the fields are counted from its last `)`).
fn start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl Op {
    /// Applies the change. With `store`, records of versions that are no
    /// longer stored (or stored with another manifest) are left out, and
    /// their catalog entries removed (`catalog check --repair` catalogs
    /// what the files hold).
    pub fn apply(&self, cat: &Catalog, store: Option<&Store>) -> granary_catalog::Result<()> {
        match self {
            Op::Upsert { records } | Op::Journal { records, .. } => {
                let mut keep = Vec::with_capacity(records.len());
                for r in records {
                    let stored = match (store, Name::from_uri(&r.name)) {
                        (Some(s), Ok(n)) => s.get(&n, Some(r.version)).ok().map(|e| e.meta),
                        _ => {
                            keep.push(r.clone());
                            continue;
                        }
                    };
                    match stored {
                        // The very content the record describes. A record
                        // queued before its version was signed (publish-dir
                        // queues before the commit) takes the stored
                        // manifest digest: replayed by another process after
                        // the commit, it must not blank the digest the
                        // committing process catalogued.
                        Some(m)
                            if r.manifest_digest.is_none() || m.manifest == r.manifest_digest =>
                        {
                            let mut r = r.clone();
                            r.manifest_digest = m.manifest.clone();
                            keep.push(r)
                        }
                        // Another writer's version of that number: its own
                        // record (or the check) describes it.
                        Some(_) => {}
                        None => {
                            match &r.node {
                                Some(n) => cat.remove_for(n, &r.name, Some(r.version))?,
                                None => cat.remove(&r.name, Some(r.version))?,
                            };
                        }
                    }
                }
                cat.upsert_many(&keep)
            }
            Op::Remove {
                name,
                version,
                node: Some(node),
            } => cat.remove_for(node, name, *version).map(|_| ()),
            Op::Remove {
                name,
                version,
                node: None,
            } => cat.remove(name, *version).map(|_| ()),
        }
    }
}

/// The queue of a data directory.
#[derive(Debug, Clone)]
pub struct Queue {
    dir: PathBuf,
}

/// What [`Queue::drain`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Changes applied (and deleted from the queue).
    pub applied: usize,
    /// Changes the catalog refused for good (bad records): moved to
    /// `failed/` beside the queue, logged.
    pub failed: usize,
    /// Changes still queued (the catalog is unavailable).
    pub left: usize,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Most records written in one transaction by [`Queue::drain`].
pub const GROUP: usize = 2048;

enum Read {
    Op(Op),
    Gone,
    Bad,
}

impl Queue {
    /// The queue in `dir` (created when a change is first queued).
    pub fn new(dir: PathBuf) -> Queue {
        Queue { dir }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The queued changes, oldest first.
    fn entries(&self) -> Vec<PathBuf> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut v: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                !n.starts_with('.') && n.ends_with(".json")
            })
            .map(|e| e.path())
            .collect();
        v.sort();
        v
    }

    /// Number of queued changes.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queues `op` durably (it survives a crash once this returns).
    pub fn push(&self, op: &Op) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let base = format!("{nanos:020}-{:010}-{k:08}.json", std::process::id());
        let tmp = self.dir.join(format!(".{base}.tmp"));
        let fin = self.dir.join(&base);
        let body = serde_json::to_vec(op).map_err(std::io::Error::other)?;
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &fin)?;
        std::fs::File::open(&self.dir)?.sync_all()?;
        Ok(fin)
    }

    /// Applies the queued changes in order, deleting each once applied; stops
    /// at the first one the catalog cannot take now (it stays, with those
    /// after it). `store` (the files) decides what is still published.
    /// Consecutive upserts are written together, up to [`GROUP`] records per
    /// transaction.
    pub fn drain(&self, cat: &Catalog, store: Option<&Store>) -> Drained {
        let mut d = Drained::default();
        let entries = self.entries();
        let mut i = 0;
        'all: while i < entries.len() {
            let start = i;
            let mut group: Vec<&PathBuf> = Vec::new();
            let mut records = Vec::new();
            let mut single = None;
            while let Some(p) = entries.get(i) {
                let op = match self.read(p) {
                    Read::Gone => {
                        i += 1;
                        continue;
                    }
                    Read::Bad => {
                        d.failed += 1;
                        i += 1;
                        continue;
                    }
                    Read::Op(Op::Journal { writer, .. }) if writer.alive() => {
                        // Its writer commits and catalogues it itself; what
                        // was queued after it waits, to keep the order.
                        if group.is_empty() {
                            d.left = entries.len() - i;
                            break 'all;
                        }
                        break;
                    }
                    Read::Op(Op::Journal { records, .. }) => Op::Upsert { records },
                    Read::Op(op) => op,
                };
                match op {
                    Op::Upsert { records: r }
                        if group.is_empty() || records.len() + r.len() <= GROUP =>
                    {
                        records.extend(r);
                        group.push(p);
                        i += 1;
                    }
                    op @ Op::Remove { .. } if group.is_empty() => {
                        single = Some(op);
                        group.push(p);
                        i += 1;
                        break;
                    }
                    _ => break, // read again as the start of the next group
                }
            }
            if group.is_empty() {
                continue;
            }
            let op = single.unwrap_or(Op::Upsert { records });
            match op.apply(cat, store) {
                Ok(()) => {
                    for p in &group {
                        let _ = std::fs::remove_file(p);
                    }
                    d.applied += group.len();
                }
                Err(e) if retryable(&e) => {
                    d.left = entries.len() - start;
                    break;
                }
                Err(_) => {
                    // A bad record among several: each change on its own, the
                    // bad ones set aside.
                    for (k, p) in group.iter().enumerate() {
                        let Read::Op(op) = self.read(p) else { continue };
                        match op.apply(cat, store) {
                            Ok(()) => {
                                let _ = std::fs::remove_file(p);
                                d.applied += 1;
                            }
                            Err(e) if retryable(&e) => {
                                d.left = entries.len() - (start + k);
                                break 'all;
                            }
                            Err(e) => {
                                tracing::warn!(
                                    "catalog queue: {} refused by the catalog ({e}); set aside",
                                    p.display()
                                );
                                self.set_aside(p);
                                d.failed += 1;
                            }
                        }
                    }
                }
            }
        }
        if d.applied + d.failed > 0 {
            if let Ok(f) = std::fs::File::open(&self.dir) {
                let _ = f.sync_all();
            }
        }
        d
    }

    /// One queued change; an unreadable one is set aside (and logged).
    fn read(&self, p: &Path) -> Read {
        match std::fs::read(p)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Op>(&b).map_err(|e| e.to_string()))
        {
            Ok(op) => Read::Op(op),
            // Applied and deleted by another process meanwhile.
            Err(_) if !p.exists() => Read::Gone,
            Err(e) => {
                tracing::warn!("catalog queue: {} unreadable ({e}); set aside", p.display());
                self.set_aside(p);
                Read::Bad
            }
        }
    }

    fn set_aside(&self, p: &Path) {
        let failed = self.dir.join("failed");
        let _ = std::fs::create_dir_all(&failed);
        if let Some(n) = p.file_name() {
            let _ = std::fs::rename(p, failed.join(n));
        }
    }
}

/// True when the same change may succeed later (the database was unreachable,
/// or the embedded one failed for a reason of its own: busy, disk), false when
/// the change itself was refused (a PostgreSQL statement error is the
/// statement's: its connection errors are [`granary_catalog::Error::Unavailable`]).
pub fn retryable(e: &granary_catalog::Error) -> bool {
    use granary_catalog::Error as E;
    matches!(e, E::Unavailable(_) | E::Sqlite(_) | E::Io(_) | E::Poisoned)
}

#[cfg(test)]
mod tests {
    //! The queue on a real SQLite catalog: order kept across upserts and
    //! removals, consecutive upserts grouped, a bad record or an unreadable
    //! file set aside without holding back the rest.

    use super::*;

    fn rec(name: &str, version: u64) -> Record {
        Record {
            name: name.into(),
            version,
            title: "t".into(),
            ..Record::default()
        }
    }

    #[test]
    fn a_record_queued_before_signing_takes_the_stored_digest() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path().join("repo")).unwrap();
        let name = Name::from_uri("/x/f").unwrap();
        let e = store
            .put(&name, &b"hello"[..], &Default::default(), |_| {})
            .unwrap();
        let digest = "ab".repeat(32);
        let mut m = e.meta.clone();
        m.manifest = Some(digest.clone());
        store.set_meta(&e, &m).unwrap();
        let cat = Catalog::open(d.path().join("cat").to_str().unwrap()).unwrap();
        // The committing process catalogued the signed version...
        let signed = Record {
            manifest_digest: Some(digest.clone()),
            ..rec("/x/f", e.meta.version)
        };
        cat.upsert(&signed).unwrap();
        // ...then another replays the record queued before the signing.
        let queued = rec("/x/f", e.meta.version);
        assert!(queued.manifest_digest.is_none());
        Op::Upsert {
            records: vec![queued],
        }
        .apply(&cat, Some(&store))
        .unwrap();
        let got = cat.get("/x/f", Some(e.meta.version)).unwrap().unwrap();
        assert_eq!(got.manifest_digest.as_deref(), Some(digest.as_str()));
        // A record of another manifest for that version is not applied.
        let other = Record {
            manifest_digest: Some("cd".repeat(32)),
            title: "other".into(),
            ..rec("/x/f", e.meta.version)
        };
        Op::Upsert {
            records: vec![other],
        }
        .apply(&cat, Some(&store))
        .unwrap();
        let got = cat.get("/x/f", Some(e.meta.version)).unwrap().unwrap();
        assert_eq!(got.manifest_digest.as_deref(), Some(digest.as_str()));
        assert_eq!(got.title, "t");
    }

    #[test]
    fn drains_in_order_and_sets_bad_changes_aside() {
        let d = tempfile::tempdir().unwrap();
        let cat = Catalog::open(d.path().join("cat").to_str().unwrap()).unwrap();
        let q = Queue::new(d.path().join("queue"));
        assert!(q.is_empty());
        let up = |rs: Vec<Record>| q.push(&Op::Upsert { records: rs }).unwrap();
        up(vec![rec("/a", 1), rec("/a", 2)]);
        up(vec![rec("/b", 1)]);
        q.push(&Op::Remove {
            name: "/a".into(),
            version: Some(1),
            node: None,
        })
        .unwrap();
        up(vec![rec("/a", 1)]); // published again after the removal
        up(vec![rec("/bad\u{1}name", 1), rec("/c", 1)]);
        up(vec![rec("/d", 1)]);
        q.push(&Op::Remove {
            name: "/b".into(),
            version: None,
            node: None,
        })
        .unwrap();
        std::fs::write(q.dir().join("99999999999999999999-x.json"), b"{not json").unwrap();
        assert_eq!(q.len(), 8);
        let r = q.drain(&cat, None);
        assert_eq!(
            r,
            Drained {
                applied: 6,
                failed: 2,
                left: 0
            }
        );
        assert!(q.is_empty());
        let keys = cat.keys().unwrap();
        assert_eq!(
            keys,
            vec![
                ("/a".to_string(), 1),
                ("/a".to_string(), 2),
                ("/d".to_string(), 1)
            ]
        );
        assert_eq!(
            std::fs::read_dir(q.dir().join("failed")).unwrap().count(),
            2
        );
    }

    #[test]
    fn a_live_writers_journal_waits_and_a_dead_writers_is_applied() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path().join("repo")).unwrap();
        let cat = Catalog::open(d.path().join("cat").to_str().unwrap()).unwrap();
        let q = Queue::new(d.path().join("queue"));
        let me = Writer::current();
        assert!(me.alive() && me.start > 0);
        // Written before the commit: the version is not stored yet.
        q.push(&Op::Journal {
            records: vec![rec("/j/f", 7)],
            writer: me,
        })
        .unwrap();
        q.push(&Op::Upsert {
            records: vec![rec("/k", 1)],
        })
        .unwrap();
        let r = q.drain(&cat, Some(&store));
        assert_eq!(
            r,
            Drained {
                applied: 0,
                failed: 0,
                left: 2
            }
        );
        assert_eq!(
            q.len(),
            2,
            "the live writer's journal and what follows stay"
        );
        // The writer commits, then dies before cataloguing: the next drain
        // catalogues the committed version from its journal.
        let e = store
            .put(
                &Name::from_uri("/j/f").unwrap(),
                &b"x"[..],
                &Default::default(),
                |_| {},
            )
            .unwrap();
        for p in q.entries() {
            let Read::Op(Op::Journal { .. }) = q.read(&p) else {
                continue;
            };
            let dead = Writer {
                start: me.start + 1,
                ..me
            };
            assert!(!dead.alive());
            let body = Op::Journal {
                records: vec![rec("/j/f", e.meta.version)],
                writer: dead,
            };
            std::fs::write(&p, serde_json::to_vec(&body).unwrap()).unwrap();
        }
        let r = q.drain(&cat, Some(&store));
        assert_eq!(r.applied, 2);
        assert!(q.is_empty());
        assert!(cat.get("/j/f", Some(e.meta.version)).unwrap().is_some());
        assert!(cat.get("/k", Some(1)).unwrap().is_none(), "not stored");
    }
}
