//! The switch between the storage back ends (SQLite, PostgreSQL): one interface over
//! both, dispatching each call to the back end in use. It depends on the back ends; they
//! do not depend on it (what they share is in `feed` and `rename`).

use crate::error::{Error, Result};
use crate::feed::{Changes, Chunks, Sink};
use crate::location::{Loc, Location, NodeStatus, Replicas};
use crate::record::Record;

pub(crate) enum Backend {
    Sqlite(crate::sqlite::Sqlite),
    Pg(Box<crate::pg::Pg>),
}

macro_rules! both {
    ($s:expr, $b:ident => $e:expr) => {
        match $s {
            Backend::Sqlite($b) => $e,
            Backend::Pg($b) => $e,
        }
    };
}

impl Backend {
    pub fn head(&mut self) -> Result<(i64, i64)> {
        both!(self, b => b.head())
    }
    /// Everything written after `since`, read in one snapshot: rows (in record-id order
    /// when `since` is 0) to `sink`, then the removed ids. With `epoch`, nothing is read
    /// unless the snapshot is in that epoch.
    pub fn changes(&mut self, since: i64, epoch: Option<i64>, sink: Sink) -> Result<Changes> {
        both!(self, b => b.changes(since, epoch, sink))
    }
    /// Writes the chunks `next` gives (until `None`) in one transaction; an error
    /// from `next` rolls it back.
    pub fn upsert_chunks(&mut self, next: Chunks) -> Result<()> {
        match self {
            Backend::Sqlite(b) => b.upsert_chunks(next),
            Backend::Pg(b) => {
                // One statement per batch over every record (the last write of a
                // name and version wins): collected first.
                let mut all = Vec::new();
                while let Some(c) = next()? {
                    all.extend(c);
                }
                b.upsert_many(&all)
            }
        }
    }
    pub fn remove(&mut self, name: &str, version: Option<i64>) -> Result<usize> {
        both!(self, b => b.remove(name, version))
    }
    /// Renames `old` and the names under it. `ids` are their record ids as the index saw
    /// them at `seen` (epoch, seq): SQLite uses them, and returns `None` (nothing done)
    /// if the catalog moved on since; PostgreSQL finds the names itself.
    pub fn rename(
        &mut self,
        old: &str,
        new: &str,
        seen: (i64, i64),
        ids: &[i64],
    ) -> Result<Option<usize>> {
        match self {
            Backend::Sqlite(b) => b.rename(old, new, seen, ids),
            Backend::Pg(b) => b.rename(old, new).map(Some),
        }
    }
    pub fn fetch(&mut self, rids: &[i64]) -> Result<Vec<Record>> {
        both!(self, b => b.fetch(rids))
    }
    /// Ids of the records whose text holds every word, among ids above `after`:
    /// SQLite's FTS5. PostgreSQL's index visits a table row per match (seconds for a
    /// frequent word at CMIP6 scale), so its records' words go to the in-memory index
    /// with the change feed instead and it is never asked.
    pub fn text(&mut self, words: &[String], after: i64) -> Result<Vec<i64>> {
        match self {
            Backend::Sqlite(b) => b.text(words, after),
            Backend::Pg(_) => Err(Error::Invalid(
                "free text on PostgreSQL is answered by the in-memory index".into(),
            )),
        }
    }
    pub fn clear(&mut self) -> Result<()> {
        both!(self, b => b.clear())
    }
}

impl Backend {
    /// Stores the chunk index (JSON) of `(name, version)`.
    pub fn put_chunk_refs(&mut self, name: &str, version: i64, refs: &str) -> Result<()> {
        both!(self, b => b.put_chunk_refs(name, version, refs))
    }
    /// The chunk index of `(name, version)`, if stored.
    pub fn chunk_refs(&mut self, name: &str, version: i64) -> Result<Option<String>> {
        both!(self, b => b.chunk_refs(name, version))
    }
}

/// The location catalog (see `location.rs`).
impl Backend {
    pub fn register_locations(&mut self, locs: &[Loc]) -> Result<()> {
        both!(self, b => b.register_locations(locs))
    }
    /// Removes `node`'s locations of `name` (one version or all), then the records
    /// left with no location; returns the locations removed.
    pub fn remove_located(
        &mut self,
        node: &str,
        name: &str,
        version: Option<i64>,
    ) -> Result<usize> {
        both!(self, b => b.remove_located(node, name, version))
    }
    /// Removes every location of `node`, then every record left with no location.
    pub fn clear_node(&mut self, node: &str) -> Result<usize> {
        both!(self, b => b.clear_node(node))
    }
    pub fn locations_of(&mut self, name: &str, timeout_ms: i64) -> Result<Vec<Location>> {
        both!(self, b => b.locations_of(name, timeout_ms))
    }
    pub fn node_locations(&mut self, node: &str) -> Result<Vec<(String, u64, Option<String>)>> {
        both!(self, b => b.node_locations(node))
    }
    pub fn sample_locations(&mut self, node: &str, n: i64) -> Result<Vec<Location>> {
        both!(self, b => b.sample_locations(node, n))
    }
    pub fn heartbeat(&mut self, node: &str, restarted: bool, role: crate::Role) -> Result<()> {
        both!(self, b => b.heartbeat(node, restarted, role))
    }
    pub fn liveness(&mut self, timeout_ms: i64) -> Result<Vec<crate::Liveness>> {
        both!(self, b => b.liveness(timeout_ms))
    }
    pub fn nodes(&mut self, timeout_ms: i64) -> Result<Vec<NodeStatus>> {
        both!(self, b => b.nodes(timeout_ms))
    }
    pub fn replicas(&mut self, prefix: &str, timeout_ms: i64) -> Result<Vec<Replicas>> {
        both!(self, b => b.replicas(prefix, timeout_ms))
    }
}

/// Federation-wide settings (see `settings.rs`).
impl Backend {
    pub fn settings_rows(&mut self) -> Result<Vec<crate::settings::Row>> {
        both!(self, b => b.settings_rows())
    }
    pub fn settings_gen(&mut self) -> Result<i64> {
        both!(self, b => b.settings_gen())
    }
    /// Writes `(key, JSON value or None to unset)` rows under one new generation,
    /// writers serialised; returns it.
    pub fn settings_write(&mut self, rows: &[(String, Option<String>)], by: &str) -> Result<i64> {
        both!(self, b => b.settings_write(rows, by))
    }
}
