//! The storage back ends behind one interface, and what they share.

use crate::error::{Error, Result};
use crate::index::IndexRow;
use crate::record::{Prepared, Record};

/// What `changes` found: the (epoch, seq) of its snapshot and the removed record ids
/// (rows went to the sink); `None` when the epoch was not the expected one.
pub(crate) type Changes = Option<((i64, i64), Vec<i64>)>;

/// Receives the rows of the change feed, one at a time.
pub(crate) type Sink<'a> = &'a mut dyn FnMut(IndexRow);

/// Gives the records of an upsert a chunk at a time, `None` at the end.
pub(crate) type Chunks<'a> = &'a mut dyn FnMut() -> Result<Option<Vec<Prepared>>>;

pub(crate) enum Store {
    Sqlite(crate::sqlite::Sqlite),
    Pg(Box<crate::pg::Pg>),
}

macro_rules! both {
    ($s:expr, $b:ident => $e:expr) => {
        match $s {
            Store::Sqlite($b) => $e,
            Store::Pg($b) => $e,
        }
    };
}

impl Store {
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
            Store::Sqlite(b) => b.upsert_chunks(next),
            Store::Pg(b) => {
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
            Store::Sqlite(b) => b.rename(old, new, seen, ids),
            Store::Pg(b) => b.rename(old, new).map(Some),
        }
    }
    pub fn fetch(&mut self, rids: &[i64]) -> Result<Vec<Record>> {
        both!(self, b => b.fetch(rids))
    }
    /// Ids of the records whose text holds every word, among ids above `after`.
    pub fn text(&mut self, words: &[String], after: i64) -> Result<Vec<i64>> {
        both!(self, b => b.text(words, after))
    }
    pub fn clear(&mut self) -> Result<()> {
        both!(self, b => b.clear())
    }
}

/// Names under `old` as a prefix are `>= old + "/"` and `< old + "0"` ('0' follows '/'),
/// byte-wise: a range, so no LIKE pattern is built from the user's name.
pub(crate) fn renamed_range(old: &str) -> (String, String) {
    (format!("{old}/"), format!("{old}0"))
}

/// Where `name` (equal to `old` or under it) goes.
pub(crate) fn moved_name(old: &str, new: &str, name: &str) -> Result<String> {
    match name.strip_prefix(old) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => Ok(format!("{new}{rest}")),
        _ => Err(Error::Corrupt(format!("{name} is not under {old}"))),
    }
}

/// A name no record can have (valid names hold no control characters), unique per row,
/// used while a rename moves rows so they never collide with each other.
pub(crate) fn temp_name(id: i64) -> String {
    format!("\u{1}mv\u{1}{id}")
}
