//! What the storage back ends and the facet index exchange: a row of the change feed,
//! the callbacks that receive it, and the chunks an upsert is written in. A leaf: the
//! back ends, their switch and the index all use it, and it uses none of them.

use crate::error::Result;
use crate::record::Prepared;

/// One stored record as the index needs it (a row of the change feed).
pub(crate) struct IndexRow {
    pub rid: i64,
    pub name: String,
    pub version: u64,
    pub size: u64,
    pub time_start: Option<String>,
    pub time_end: Option<String>,
    pub facets: String,
    /// The words free text matches the record by, separated by single spaces, when the
    /// back end hands them to the index (PostgreSQL: the lexemes of the record's text
    /// vector). `None`: the back end answers free text itself (SQLite's FTS5).
    pub words: Option<String>,
}

/// What `changes` found: the (epoch, seq) of its snapshot and the removed record ids
/// (rows went to the sink); `None` when the epoch was not the expected one.
pub(crate) type Changes = Option<((i64, i64), Vec<i64>)>;

/// Receives the rows of the change feed, one at a time.
pub(crate) type Sink<'a> = &'a mut dyn FnMut(IndexRow);

/// Gives the records of an upsert a chunk at a time, `None` at the end.
pub(crate) type Chunks<'a> = &'a mut dyn FnMut() -> Result<Option<Vec<Prepared>>>;
