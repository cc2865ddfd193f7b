//! The hash index: SHA-256 of a segment's bytes → where those bytes are
//! (version file, offset, length), in an LSM tree (`fjall`) in the
//! directory `<root>/index/`, so a chunk can be served whatever file holds
//! it.
//!
//! - **Why an LSM tree**: an ingest adds one entry per segment (262,144
//!   for a GiB of 4 KiB chunks) under random keys. A B-tree (redb, which
//!   held the index before) pays ~2.5 µs of page copying per random
//!   insert, 0.55 s of CPU per GiB; an LSM tree appends to a journal and
//!   writes sorted runs, ~0.7 µs (bench/RESULTS.md, "hash index").
//! - **Keys** are `hash[..16] ‖ file id ‖ offset` (32 bytes), values the length:
//!   adding a location never reads the old ones, and a lookup is a prefix
//!   scan, newest file first, of at most [`MAX_LOCATIONS`] entries.
//! - **Written in batches**: a version's entries are written while it is
//!   ingested and made durable ([`Writer::commit`]) once the version is.
//! - **Crash-safe**: before a version's data file is renamed into place, a
//!   mark naming it is written to `<root>/index-pending/`; the mark is
//!   removed only after the index is durable. Whoever opens the index next
//!   indexes every marked file, so a crash between the two steps loses
//!   nothing; the tree recovers its own journal.
//! - **One process**: an exclusive `flock` on `<root>/index/granary.lock`.
//!   The process holding it picks up marks left by others (`granary put`
//!   from stdin, `granary mv`): a serving daemon on a thread of its own
//!   every 200 ms ([`crate::Store::index_pending`]), any other holder at
//!   most once a second, when it looks a chunk up.
//! - **Rebuildable** from the `.hashes` and `.offsets` files: automatically
//!   when the index is missing or unreadable, or with
//!   [`crate::Store::reindex`].
//! - **Validated on lookup**: the bytes are read and hashed; an entry whose
//!   file is gone, renamed or changed is dropped and the next location is
//!   tried. Removal therefore needs no index update; a rename re-indexes
//!   the moved versions under their new path.

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use fjall::{Config, Keyspace, PartitionCreateOptions, PartitionHandle, PersistMode};

/// Locations a lookup returns at most (the newest files'); older ones stay
/// in the index and come back when newer ones turn out stale.
pub const MAX_LOCATIONS: usize = 8;
/// `hash (first HASH_LEN bytes) ‖ file id (u64 BE) ‖ offset (u64 BE)` →
/// length (u32 BE).
const CHUNKS: &str = "chunks";
/// Bytes of the hash in a key: 128 bits, so that two different chunks
/// share a key prefix with a chance of about n²/2¹²⁹ (nil for any store);
/// and a lookup re-hashes the bytes it finds anyway.
const HASH_LEN: usize = 16;
/// file id (u64 BE) → path of the version file relative to `objects/`.
const FILES: &str = "files";
const KEY_LEN: usize = HASH_LEN + 16;

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
    /// File id.
    pub file: u64,
    /// Byte offset.
    pub offset: u64,
    /// Length.
    pub len: u32,
}

fn key(h: &[u8; 32], file: u64, offset: u64) -> [u8; KEY_LEN] {
    let mut k = [0u8; KEY_LEN];
    k[..HASH_LEN].copy_from_slice(&h[..HASH_LEN]);
    k[HASH_LEN..HASH_LEN + 8].copy_from_slice(&file.to_be_bytes());
    k[HASH_LEN + 8..].copy_from_slice(&offset.to_be_bytes());
    k
}

/// The location a `chunks` entry (key, value) records.
fn slot_of(k: &[u8], v: &[u8]) -> Option<Slot> {
    Some(Slot {
        file: k.get(HASH_LEN..HASH_LEN + 8).and_then(be64)?,
        offset: k.get(HASH_LEN + 8..KEY_LEN).and_then(be64)?,
        len: u32::from_be_bytes(<[u8; 4]>::try_from(v).ok()?),
    })
}

fn be64(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.try_into().ok()?))
}

/// The tree and the lock that keeps other processes out of it.
struct Db {
    keyspace: Keyspace,
    chunks: PartitionHandle,
    files: PartitionHandle,
    /// Declared last: released after the tree is closed.
    _lock: std::fs::File,
}

/// An open index.
pub struct Index {
    /// `Some` until dropped.
    db: Option<Db>,
    /// The next file id.
    next_id: AtomicU64,
    /// Ingests with an uncommitted writer (catch-up and stale-entry
    /// removal on the serving path skip while one runs).
    writers: Arc<AtomicUsize>,
}

/// Indexes of this process being closed in the background (see `Drop`).
static CLOSING: AtomicUsize = AtomicUsize::new(0);

impl Drop for Index {
    /// Closing the tree waits for its background threads, one of which
    /// wakes every 250 ms: a `granary put` would wait for it after its
    /// work is durable. So the tree is closed on a thread of its own; at
    /// process exit that thread simply ends with the process (everything
    /// committed is durable; the tree recovers whatever it was doing). An
    /// open in this process meanwhile waits for the lock
    /// ([`Index::open`]).
    fn drop(&mut self) {
        if let Some(db) = self.db.take() {
            CLOSING.fetch_add(1, Ordering::SeqCst);
            let closed = std::thread::Builder::new()
                .name("index-close".into())
                .spawn(move || {
                    drop(db);
                    CLOSING.fetch_sub(1, Ordering::SeqCst);
                });
            if closed.is_err() {
                // No thread: the closure (and the tree) was dropped here.
                CLOSING.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
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
    /// Opens (creating) the index in directory `path`; `Busy` when another
    /// process has it.
    pub fn open(path: &Path) -> Result<Index, OpenError> {
        let other = |e: String| OpenError::Other(e);
        std::fs::create_dir_all(path)
            .map_err(|e| other(err(format!("{}: {e}", path.display()))))?;
        let lock_path = path.join("granary.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| other(err(format!("{}: {e}", lock_path.display()))))?;
        // Busy while another process holds it, or while this one is still
        // closing an earlier handle (then wait: that takes < 1 s).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        loop {
            match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::WOULDBLOCK)
                    if CLOSING.load(Ordering::SeqCst) > 0
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(rustix::io::Errno::WOULDBLOCK) => return Err(OpenError::Busy),
                Err(e) => return Err(other(err(format!("{}: {e}", lock_path.display())))),
            }
        }
        // Small caches and write buffers (2 MiB memtables, 8 MiB in all):
        // the index is written once per version and read a chunk at a
        // time, and a `granary put` should stay a small process at any
        // size. One flush and one compaction thread.
        let keyspace = Config::new(path.join("tree"))
            .cache_size(4 << 20)
            .max_write_buffer_size(8 << 20)
            .flush_workers(1)
            .compaction_workers(1)
            .open()
            .map_err(|e| other(err(e)))?;
        let opts = || {
            PartitionCreateOptions::default()
                .max_memtable_size(2 << 20)
                // No Bloom filters: lookups are prefix scans, which never
                // consult them, and building one for a compacted run held
                // every key's hash in memory (a 4 GiB ingest peaked at
                // 64 MiB with them, 35 MiB without).
                .bloom_filter_bits(None)
        };
        let chunks = keyspace
            .open_partition(CHUNKS, opts())
            .map_err(|e| other(err(e)))?;
        let files = keyspace
            .open_partition(FILES, opts())
            .map_err(|e| other(err(e)))?;
        let next_id = match files.last_key_value().map_err(|e| other(err(e)))? {
            Some((k, _)) => be64(&k).ok_or_else(|| other(err("bad file id")))? + 1,
            None => 0,
        };
        Ok(Index {
            db: Some(Db {
                keyspace,
                chunks,
                files,
                _lock: lock,
            }),
            next_id: AtomicU64::new(next_id),
            writers: Default::default(),
        })
    }

    fn db(&self) -> Result<&Db, String> {
        self.db.as_ref().ok_or_else(|| err("closed"))
    }

    /// Adds the segments of one version file: `(hash, offset, length)`
    /// each; durable at the next [`Index::persist`].
    pub fn insert(
        self: &Arc<Self>,
        file: &str,
        items: &mut [([u8; 32], u64, u32)],
    ) -> Result<(), String> {
        let mut w = self.writer(file)?;
        w.add(items)
    }

    /// Makes everything inserted so far durable (one sync for many
    /// [`Index::insert`]s).
    pub fn persist(&self) -> Result<(), String> {
        self.db()?
            .keyspace
            .persist(PersistMode::SyncAll)
            .map_err(err)
    }

    /// A writer for the segments of one version file, fed in batches while
    /// the file is ingested and made durable once it is. Entries are
    /// visible as they are added; a writer dropped uncommitted leaves them
    /// (harmless: lookups check the bytes, and the version's pending mark
    /// gets it indexed again).
    pub fn writer(self: &Arc<Self>, file: &str) -> Result<Writer, String> {
        self.writers.fetch_add(1, Ordering::SeqCst);
        let guard = WriterCount(self.writers.clone());
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        self.db()?
            .files
            .insert(id.to_be_bytes(), file.as_bytes())
            .map_err(err)?;
        Ok(Writer {
            ix: self.clone(),
            id,
            _count: guard,
        })
    }

    /// True while an ingest holds an uncommitted writer.
    pub fn writing(&self) -> bool {
        self.writers.load(Ordering::SeqCst) > 0
    }

    /// The locations of a hash, newest file first, at most
    /// [`MAX_LOCATIONS`].
    pub fn get(&self, h: &[u8; 32]) -> Result<Vec<(Slot, Location)>, String> {
        let db = self.db()?;
        let mut out = Vec::new();
        for kv in db.chunks.prefix(&h[..HASH_LEN]).rev() {
            let (k, v) = kv.map_err(err)?;
            let Some(slot) = slot_of(&k, &v) else {
                continue;
            };
            let Slot { file, offset, len } = slot;
            if let Some(path) = db.files.get(file.to_be_bytes()).map_err(err)? {
                out.push((
                    slot,
                    Location {
                        file: String::from_utf8_lossy(&path).into_owned(),
                        offset,
                        len,
                    },
                ));
                if out.len() == MAX_LOCATIONS {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// [`Index::get`] for many hashes (in the order given). A batch that is
    /// large against the index is answered by one pass over the index in
    /// key order (a prefix scan costs a seek in every sorted run of the
    /// tree: ~20 µs each on a tree of a few runs, where stepping over an
    /// entry costs well under one); a small one hash by hash.
    pub fn get_many(&self, hashes: &[[u8; 32]]) -> Result<Vec<Vec<(Slot, Location)>>, String> {
        let db = self.db()?;
        if hashes.len() < 64 || hashes.len().saturating_mul(16) < db.chunks.approximate_len() {
            return hashes.iter().map(|h| self.get(h)).collect();
        }
        let mut order: Vec<usize> = (0..hashes.len()).collect();
        order.sort_unstable_by(|&a, &b| hashes[a][..HASH_LEN].cmp(&hashes[b][..HASH_LEN]));
        let key = |i: usize| &hashes[order[i]][..HASH_LEN];
        let mut out: Vec<Vec<(Slot, Location)>> = vec![Vec::new(); hashes.len()];
        let mut names: std::collections::HashMap<u64, Option<String>> = Default::default();
        let mut k = 0;
        for kv in db.chunks.range(key(0).to_vec()..) {
            let (kb, v) = kv.map_err(err)?;
            let Some(prefix) = kb.get(..HASH_LEN) else {
                continue;
            };
            while k < order.len() && key(k) < prefix {
                k += 1;
            }
            if k == order.len() {
                break;
            }
            if key(k) != prefix {
                continue;
            }
            let Some(Slot { file, offset, len }) = slot_of(&kb, &v) else {
                continue;
            };
            let name = match names.get(&file) {
                Some(n) => n.clone(),
                None => {
                    let n = db
                        .files
                        .get(file.to_be_bytes())
                        .map_err(err)?
                        .map(|p| String::from_utf8_lossy(&p).into_owned());
                    names.insert(file, n.clone());
                    n
                }
            };
            let Some(name) = name else { continue };
            // Every asked hash with this prefix (a hash asked twice).
            let mut j = k;
            while j < order.len() && key(j) == prefix {
                out[order[j]].push((
                    Slot { file, offset, len },
                    Location {
                        file: name.clone(),
                        offset,
                        len,
                    },
                ));
                j += 1;
            }
        }
        // Newest file first, at most MAX_LOCATIONS, as `get` gives them.
        for locs in &mut out {
            locs.reverse();
            locs.truncate(MAX_LOCATIONS);
        }
        Ok(out)
    }

    /// Drops one location of a hash.
    pub fn remove(&self, h: &[u8; 32], slot: &Slot) -> Result<(), String> {
        self.db()?
            .chunks
            .remove(key(h, slot.file, slot.offset))
            .map_err(err)
    }

    /// Empties the index (durably).
    pub fn clear(&self) -> Result<(), String> {
        let db = self.db()?;
        for part in [&db.chunks, &db.files] {
            let mut batch = db.keyspace.batch();
            for k in part.keys() {
                batch.remove(part, k.map_err(err)?);
                if batch.len() >= 64 * 1024 {
                    std::mem::replace(&mut batch, db.keyspace.batch())
                        .commit()
                        .map_err(err)?;
                }
            }
            batch.commit().map_err(err)?;
        }
        db.keyspace.persist(PersistMode::SyncAll).map_err(err)
    }

    /// Number of (hash, location) entries (a full scan).
    pub fn len(&self) -> Result<u64, String> {
        self.db()?.chunks.len().map(|n| n as u64).map_err(err)
    }

    /// True when empty.
    pub fn is_empty(&self) -> Result<bool, String> {
        self.db()?.chunks.is_empty().map_err(err)
    }
}

struct WriterCount(Arc<AtomicUsize>);

impl Drop for WriterCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One version file's index entries.
pub struct Writer {
    ix: Arc<Index>,
    id: u64,
    _count: WriterCount,
}

impl Writer {
    /// Adds `(hash, offset, length)` entries (one write batch; a hash
    /// repeated inside `items` keeps its first location only: any one
    /// serves the bytes).
    pub fn add(&mut self, items: &mut [([u8; 32], u64, u32)]) -> Result<(), String> {
        items.sort_unstable_by_key(|a| (a.0, a.1));
        let db = self.ix.db()?;
        let mut batch = db.keyspace.batch();
        let mut last: Option<&[u8; 32]> = None;
        for (h, offset, len) in items.iter() {
            if last == Some(h) {
                continue;
            }
            last = Some(h);
            batch.insert(&db.chunks, key(h, self.id, *offset), len.to_be_bytes());
        }
        batch.commit().map_err(err)
    }

    /// Makes the entries durable.
    pub fn commit(self) -> Result<(), String> {
        self.ix
            .db()?
            .keyspace
            .persist(PersistMode::SyncAll)
            .map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_many_answers_as_get_does_by_scan_and_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let ix = Arc::new(Index::open(&dir.path().join("index")).unwrap());
        let h = |k: u32| -> [u8; 32] {
            let mut x = [0u8; 32];
            x[..4].copy_from_slice(&k.wrapping_mul(2_654_435_761).to_be_bytes());
            x[31] = k as u8;
            x
        };
        // Three files; hash k in file k % 3, and the first 30 in all three
        // (newest file first); 12 of them in ten places each (beyond MAX_LOCATIONS).
        for (f, name) in ["a/@1", "b/@2", "c/@3"].iter().enumerate() {
            let mut items: Vec<([u8; 32], u64, u32)> = (0..600u32)
                .filter(|k| k % 3 == f as u32 || *k < 30)
                .map(|k| (h(k), k as u64 * 100, 100))
                .collect();
            ix.insert(name, &mut items).unwrap();
        }
        for extra in 0..7 {
            let mut items: Vec<([u8; 32], u64, u32)> =
                (0..12u32).map(|k| (h(k), 7_000 + extra, 50)).collect();
            ix.insert(&format!("d/@{extra}"), &mut items).unwrap();
        }
        // Asked: held hashes, a missing one, one asked twice.
        let mut asked: Vec<[u8; 32]> = (0..600).rev().map(h).collect();
        asked.push([9; 32]);
        asked.push(h(5));
        let one_by_one: Vec<_> = asked.iter().map(|x| ix.get(x).unwrap()).collect();
        // 602 against ~900 entries: by scan.
        assert!(asked.len() * 16 >= ix.db().unwrap().chunks.approximate_len());
        assert_eq!(ix.get_many(&asked).unwrap(), one_by_one);
        assert_eq!(one_by_one[0].len(), 1);
        assert_eq!(one_by_one[600], vec![]);
        assert_eq!(one_by_one[601].len(), MAX_LOCATIONS);
        // A small batch: one by one, the same.
        assert_eq!(ix.get_many(&asked[590..]).unwrap(), one_by_one[590..]);
    }
}
