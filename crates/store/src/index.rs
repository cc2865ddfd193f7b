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
//!   tried (a hash maps to the last [`MAX_LOCATIONS`] locations seen). Removal therefore needs no
//!   index update; a rename re-indexes the moved versions under their new
//!   path.

use std::path::Path;

use redb::{ReadableTable, ReadableTableMetadata, TableDefinition};

/// hash (32 bytes) → its locations, newest last, each 20 bytes (file id u64
/// BE ‖ offset u64 BE ‖ length u32 BE); at most [`MAX_LOCATIONS`]. A plain
/// table with compact values: a big version's thousands of entries insert
/// quickly and take ~80 bytes each.
const CHUNKS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("chunks");
/// Locations kept per hash (the oldest is dropped beyond).
pub const MAX_LOCATIONS: usize = 8;
/// file id → path of the version file relative to `objects/`.
const FILES: TableDefinition<u64, &str> = TableDefinition::new("files");

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

/// A stored location: which file (by id), where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// File id (see [`Index::file`]).
    pub file: u64,
    /// Byte offset.
    pub offset: u64,
    /// Length.
    pub len: u32,
}

impl Slot {
    fn encode(&self) -> [u8; 20] {
        let mut v = [0u8; 20];
        v[..8].copy_from_slice(&self.file.to_be_bytes());
        v[8..16].copy_from_slice(&self.offset.to_be_bytes());
        v[16..].copy_from_slice(&self.len.to_be_bytes());
        v
    }

    fn decode(b: &[u8]) -> Option<Slot> {
        Some(Slot {
            file: u64::from_be_bytes(b.get(..8)?.try_into().ok()?),
            offset: u64::from_be_bytes(b.get(8..16)?.try_into().ok()?),
            len: u32::from_be_bytes(b.get(16..20)?.try_into().ok()?),
        })
    }
}

/// An open index.
pub struct Index {
    db: redb::Database,
    /// Ingests with an open write transaction (others that would wait for
    /// it — catch-up and stale-entry removal on the serving path — skip).
    writers: std::sync::Arc<std::sync::atomic::AtomicUsize>,
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
        // A small page cache: the index is written once per version and
        // read a chunk at a time; redb's default (1 GiB) would let a large
        // ingest grow the process.
        match redb::Builder::new().set_cache_size(16 << 20).create(path) {
            Ok(db) => {
                let ix = Index {
                    db,
                    writers: Default::default(),
                };
                // Make sure the table exists (readers expect it).
                let tx = ix.db.begin_write().map_err(|e| OpenError::Other(err(e)))?;
                tx.open_table(CHUNKS)
                    .map_err(|e| OpenError::Other(err(e)))?;
                tx.open_table(FILES).map_err(|e| OpenError::Other(err(e)))?;
                tx.commit().map_err(|e| OpenError::Other(err(e)))?;
                Ok(ix)
            }
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => Err(OpenError::Busy),
            Err(e) => Err(OpenError::Other(err(e))),
        }
    }

    /// Adds the segments of one version file in one transaction:
    /// `(hash, offset, length)` each.
    pub fn insert(
        self: &std::sync::Arc<Self>,
        file: &str,
        items: &mut [([u8; 32], u64, u32)],
    ) -> Result<(), String> {
        let mut w = self.writer(file)?;
        w.add(items)?;
        w.commit()
    }

    /// A write transaction for the segments of one version file, fed in
    /// batches while the file is ingested and committed once it is durable
    /// (dropped uncommitted, it leaves the index unchanged).
    pub fn writer(self: &std::sync::Arc<Self>, file: &str) -> Result<Writer, String> {
        self.writers
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let guard = WriterCount(self.writers.clone());
        let tx = self.db.begin_write().map_err(err)?;
        let id = {
            let mut files = tx.open_table(FILES).map_err(err)?;
            let id = files.last().map_err(err)?.map_or(0, |(k, _)| k.value() + 1);
            files.insert(id, file).map_err(err)?;
            id
        };
        Ok(Writer {
            ix: self.clone(),
            tx: Some(tx),
            id,
            pending: 0,
            _count: guard,
        })
    }

    /// True while an ingest holds a write transaction.
    pub fn writing(&self) -> bool {
        self.writers.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    /// Every location of a hash.
    pub fn get(&self, h: &[u8; 32]) -> Result<Vec<(Slot, Location)>, String> {
        let tx = self.db.begin_read().map_err(err)?;
        let t = tx.open_table(CHUNKS).map_err(err)?;
        let files = tx.open_table(FILES).map_err(err)?;
        let mut out = Vec::new();
        let Some(v) = t.get(&h[..]).map_err(err)? else {
            return Ok(out);
        };
        for raw in v.value().chunks(20) {
            let Some(slot) = Slot::decode(raw) else {
                continue;
            };
            if let Some(path) = files.get(slot.file).map_err(err)? {
                out.push((
                    slot,
                    Location {
                        file: path.value().to_string(),
                        offset: slot.offset,
                        len: slot.len,
                    },
                ));
            }
        }
        Ok(out)
    }

    /// Drops one location of a hash.
    pub fn remove(&self, h: &[u8; 32], slot: &Slot) -> Result<(), String> {
        let tx = self.db.begin_write().map_err(err)?;
        {
            let mut t = tx.open_table(CHUNKS).map_err(err)?;
            let enc = slot.encode();
            let v: Option<Vec<u8>> = t.get(&h[..]).map_err(err)?.map(|cur| {
                cur.value()
                    .chunks(20)
                    .filter(|c| *c != enc)
                    .flatten()
                    .copied()
                    .collect()
            });
            match v {
                Some(v) if v.is_empty() => {
                    t.remove(&h[..]).map_err(err)?;
                }
                Some(v) => {
                    t.insert(&h[..], &v[..]).map_err(err)?;
                }
                None => {}
            }
        }
        tx.commit().map_err(err)
    }

    /// Empties the index.
    pub fn clear(&self) -> Result<(), String> {
        let tx = self.db.begin_write().map_err(err)?;
        tx.delete_table(CHUNKS).map_err(err)?;
        tx.delete_table(FILES).map_err(err)?;
        tx.open_table(CHUNKS).map_err(err)?;
        tx.open_table(FILES).map_err(err)?;
        tx.commit().map_err(err)
    }

    /// Number of distinct hashes.
    pub fn len(&self) -> Result<u64, String> {
        let tx = self.db.begin_read().map_err(err)?;
        let t = tx.open_table(CHUNKS).map_err(err)?;
        t.len().map_err(err)
    }

    /// True when empty.
    pub fn is_empty(&self) -> Result<bool, String> {
        Ok(self.len()? == 0)
    }
}

struct WriterCount(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for WriterCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// One version file's index entries in one write transaction.
///
/// Memory stays bounded: every [`FLUSH_ENTRIES`] entries the transaction is
/// committed without waiting for the disk (redb's `Durability::Eventual`,
/// which also lets redb reuse freed pages: with `None` the file grew to
/// 1 GB for a 4 GiB version) and a new one begun; the final
/// [`Writer::commit`] is durable. Entries visible before their file appears are harmless:
/// lookups re-read the bytes, and drop nothing while an ingest is writing.
pub struct Writer {
    ix: std::sync::Arc<Index>,
    tx: Option<redb::WriteTransaction>,
    id: u64,
    pending: usize,
    _count: WriterCount,
}

/// Entries per intermediate (non-durable) commit.
pub const FLUSH_ENTRIES: usize = 64 * 1024;

impl Writer {
    /// Adds `(hash, offset, length)` entries.
    pub fn add(&mut self, items: &mut [([u8; 32], u64, u32)]) -> Result<(), String> {
        // Sorted keys insert faster into the B-tree.
        items.sort_unstable_by_key(|a| a.0);
        if self.pending >= FLUSH_ENTRIES {
            let mut tx = self.tx.take().ok_or("transaction already committed")?;
            tx.set_durability(redb::Durability::Eventual);
            tx.commit().map_err(err)?;
            self.tx = Some(self.ix.db.begin_write().map_err(err)?);
            self.pending = 0;
        }
        self.pending += items.len();
        let tx = self.tx.as_ref().ok_or("transaction already committed")?;
        let mut t = tx.open_table(CHUNKS).map_err(err)?;
        for (h, offset, len) in items.iter() {
            let enc = Slot {
                file: self.id,
                offset: *offset,
                len: *len,
            }
            .encode();
            // One B-tree operation for a new hash (the usual case); a hash
            // seen before gets its location list merged and written again.
            let old = t
                .insert(&h[..], &enc[..])
                .map_err(err)?
                .map(|g| g.value().to_vec());
            if let Some(mut v) = old {
                if v.chunks(20).any(|c| c == enc) {
                    t.insert(&h[..], &v[..]).map_err(err)?;
                    continue;
                }
                if v.len() >= MAX_LOCATIONS * 20 {
                    v.drain(..20);
                }
                v.extend_from_slice(&enc);
                t.insert(&h[..], &v[..]).map_err(err)?;
            }
        }
        Ok(())
    }

    /// Makes the entries durable.
    pub fn commit(mut self) -> Result<(), String> {
        match self.tx.take() {
            Some(tx) => tx.commit().map_err(err),
            None => Ok(()),
        }
    }
}
