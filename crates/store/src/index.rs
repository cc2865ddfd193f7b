//! The hash index: SHA-256 of a segment's bytes → where those bytes are
//! (version file, offset, length), in a `redb` database at
//! `<root>/index.redb`, so a chunk can be served whatever file holds it.
//!
//! - **Written in batches**: one write transaction per published version,
//!   after the version is durable.
//! - **Crash-safe**: before a version's data file is renamed into place, a
//!   mark naming it is written to `<root>/index-pending/`; the mark is
//!   removed only after the index transaction commits. Whoever opens the
//!   index next indexes every marked file, so a crash between the two steps
//!   loses nothing. redb itself is ACID.
//! - **Shared**: redb locks the file for one process. The process holding it
//!   (the daemon) picks up marks left by others (`granary put` from stdin,
//!   `granary mv`) at most once a second, when it looks a chunk up.
//! - **Rebuildable** from the `.hashes` and `.offsets` files: automatically
//!   when the database is missing, or with [`crate::Store::reindex`].
//! - **Validated on lookup**: the bytes are read and hashed; an entry whose
//!   file is gone, renamed or changed is dropped and the next location is
//!   tried (a hash maps to every location seen). Removal therefore needs no
//!   index update; a rename re-indexes the moved versions under their new
//!   path.

use std::path::Path;

use redb::{MultimapTableDefinition, ReadableTableMetadata};

/// hash (32 bytes) → location (offset u64 BE ‖ length u32 BE ‖ path of the
/// version file relative to `objects/`, UTF-8).
const CHUNKS: MultimapTableDefinition<&[u8], &[u8]> = MultimapTableDefinition::new("chunks");

/// Where a chunk is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Version file, relative to the store's `objects/` directory.
    pub file: String,
    /// Byte offset in it.
    pub offset: u64,
    /// Length.
    pub len: u32,
}

impl Location {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(12 + self.file.len());
        v.extend_from_slice(&self.offset.to_be_bytes());
        v.extend_from_slice(&self.len.to_be_bytes());
        v.extend_from_slice(self.file.as_bytes());
        v
    }

    fn decode(b: &[u8]) -> Option<Location> {
        Some(Location {
            offset: u64::from_be_bytes(b.get(..8)?.try_into().ok()?),
            len: u32::from_be_bytes(b.get(8..12)?.try_into().ok()?),
            file: std::str::from_utf8(b.get(12..)?).ok()?.to_string(),
        })
    }
}

/// An open index.
pub struct Index {
    db: redb::Database,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Index")
    }
}

/// Why the index could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// Another process holds it.
    Busy,
    /// Anything else.
    Other(String),
}

fn err(e: impl std::fmt::Display) -> String {
    format!("hash index: {e}")
}

impl Index {
    /// Opens (creating) the database; `Busy` when another process has it.
    pub fn open(path: &Path) -> Result<Index, OpenError> {
        match redb::Database::create(path) {
            Ok(db) => {
                let ix = Index { db };
                // Make sure the table exists (readers expect it).
                ix.insert(&[]).map_err(OpenError::Other)?;
                Ok(ix)
            }
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => Err(OpenError::Busy),
            Err(e) => Err(OpenError::Other(err(e))),
        }
    }

    /// Adds locations in one transaction.
    pub fn insert(&self, items: &[([u8; 32], Location)]) -> Result<(), String> {
        let tx = self.db.begin_write().map_err(err)?;
        {
            let mut t = tx.open_multimap_table(CHUNKS).map_err(err)?;
            for (h, loc) in items {
                t.insert(&h[..], &loc.encode()[..]).map_err(err)?;
            }
        }
        tx.commit().map_err(err)
    }

    /// Every location of a hash.
    pub fn get(&self, h: &[u8; 32]) -> Result<Vec<Location>, String> {
        let tx = self.db.begin_read().map_err(err)?;
        let t = tx.open_multimap_table(CHUNKS).map_err(err)?;
        let mut out = Vec::new();
        for v in t.get(&h[..]).map_err(err)? {
            if let Some(l) = Location::decode(v.map_err(err)?.value()) {
                out.push(l);
            }
        }
        Ok(out)
    }

    /// Drops one location of a hash.
    pub fn remove(&self, h: &[u8; 32], loc: &Location) -> Result<(), String> {
        let tx = self.db.begin_write().map_err(err)?;
        {
            let mut t = tx.open_multimap_table(CHUNKS).map_err(err)?;
            t.remove(&h[..], &loc.encode()[..]).map_err(err)?;
        }
        tx.commit().map_err(err)
    }

    /// Empties the index.
    pub fn clear(&self) -> Result<(), String> {
        let tx = self.db.begin_write().map_err(err)?;
        tx.delete_multimap_table(CHUNKS).map_err(err)?;
        tx.open_multimap_table(CHUNKS).map_err(err)?;
        tx.commit().map_err(err)
    }

    /// Number of distinct hashes.
    pub fn len(&self) -> Result<u64, String> {
        let tx = self.db.begin_read().map_err(err)?;
        let t = tx.open_multimap_table(CHUNKS).map_err(err)?;
        t.len().map_err(err)
    }

    /// True when empty.
    pub fn is_empty(&self) -> Result<bool, String> {
        Ok(self.len()? == 0)
    }
}
