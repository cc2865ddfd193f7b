//! The catalog: one record per published file version, faceted search.
//!
//! Storage is SQLite (embedded, `<dir>/catalog.sqlite`) or PostgreSQL (`postgres://…`,
//! shared by several nodes). Filters, facet counts, sorting and paging are answered from
//! an in-memory index ([`facet_index`]); free text by the database, as record ids. Every write
//! bumps a change sequence, and every call first applies the changes it has not seen, so
//! several processes and nodes on one storage see each other's writes at once.

mod backend;
pub mod dataset;
mod error;
mod facet_index;
mod feed;
pub mod location;
mod pg;
mod query;
mod record;
mod rename;
pub mod replication;
mod results;
pub mod settings;
mod sqlite;
pub mod text;

use std::path::Path;
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard};

pub use dataset::{Break, Dataset, DatasetFile, DatasetPage, DatasetQuery};
pub use error::{pg_message, redact, Error, Result};
pub use facet_index::DATASET_VERSION_FACET;
pub use location::{order_nearest, Liveness, Location, NewLocation, NodeStatus, Replicas, Role};
pub use query::{check_time, FacetSel, Page, Query, Sort, MAX_LIMIT, MAX_QUERY_TEXT};
pub use record::{Record, MAX_FACETS, MAX_KEY, MAX_TEXT, MAX_VALUE};
pub use settings::{FederationSettings, ReplicationRule, StoredSettings, SETTING_KEYS};

use backend::Backend;
use facet_index::{Builder, Index};
use record::{check_int, check_name, check_plain, Prepared};

/// The database connection. Lock order: the index (read or write) may be held while
/// this is taken, never the other way round, so a search holding the index can read
/// records while no one holding the connection waits for the index.
struct Conn {
    backend: Backend,
}

/// SQLite: positions of the records holding a frequent word, kept between queries: valid
/// within one index generation, and brought up to date by asking the database only for
/// the record ids appended since (the text index answers `rowid >` ranges directly).
/// (PostgreSQL hands the index every record's words: see `facet_index::Words`.)
#[derive(Default)]
struct WordCache {
    map: std::collections::HashMap<String, CachedWord>,
    tick: u64,
}

struct CachedWord {
    gen: u64,
    /// Highest record id the bitmap accounts for.
    upto: i64,
    bits: roaring::RoaringBitmap,
    used: u64,
}

/// Words matching fewer records are not cached (the database answers them quickly).
const CACHE_MIN_HITS: u64 = 2048;
/// Most cached words.
const CACHE_WORDS: usize = 128;

/// Records per chunk of a bulk upsert, prepared on a thread of their own while the
/// chunk before is written.
const PREPARE_CHUNK: usize = 2048;

/// A catalog handle. `Send + Sync`. Searches run side by side on the in-memory index
/// (a reader-writer lock: only applying changes takes it exclusively); database calls
/// are serialised on one connection, each held only for its own statement. With
/// PostgreSQL, call it from blocking threads (`spawn_blocking`), not on a tokio worker.
pub struct Catalog {
    conn: Mutex<Conn>,
    index: RwLock<Index>,
    /// Held while changes are read and applied, so that two callers never apply the
    /// same changes twice (taken before the connection and the index).
    syncing: Mutex<()>,
    words: Mutex<WordCache>,
    results: Mutex<results::Results>,
    /// Searches being computed (see [`results::Flights`]).
    flights: results::Flights,
    /// The node timeout this handle judges liveness with by default (ms).
    node_timeout_ms: std::sync::atomic::AtomicU64,
    /// PostgreSQL: free text is answered by the index alone (it holds every record's
    /// words); SQLite: by FTS5, through the word cache.
    words_in_index: bool,
}

/// A node silent for longer than this is down (the default of `node_timeout`).
pub const DEFAULT_NODE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl Catalog {
    /// Ids above `after` of the records whose text holds `word` (SQLite's FTS5).
    fn text_ids(&self, word: &str, after: i64) -> Result<Vec<i64>> {
        self.lock()?.backend.text(&[word.to_string()], after)
    }

    /// Positions of the records whose text holds `word` (`ix`: the index the caller
    /// reads under).
    fn word(&self, ix: &Index, word: &str) -> Result<roaring::RoaringBitmap> {
        if self.words_in_index {
            return Ok(ix.word(word));
        }
        let (gen, max) = (ix.gen, ix.max_rid());
        let mut words = self.words.lock().map_err(|_| Error::Poisoned)?;
        words.tick += 1;
        let tick = words.tick;
        if let Some(e) = words.map.get_mut(word) {
            if e.gen == gen {
                if e.upto < max {
                    let mut ids = self.text_ids(word, e.upto)?;
                    e.bits |= ix.positions(&mut ids);
                    e.upto = max;
                }
                e.used = tick;
                return Ok(e.bits.clone());
            }
        }
        drop(words);
        let mut ids = self.text_ids(word, i64::MIN)?;
        let bits = ix.positions(&mut ids);
        if bits.len() >= CACHE_MIN_HITS {
            let mut words = self.words.lock().map_err(|_| Error::Poisoned)?;
            let map = &mut words.map;
            map.retain(|_, e| e.gen == gen);
            if map.len() >= CACHE_WORDS {
                if let Some(k) = map
                    .iter()
                    .min_by_key(|(_, e)| e.used)
                    .map(|(k, _)| k.clone())
                {
                    map.remove(&k);
                }
            }
            map.insert(
                word.to_string(),
                CachedWord {
                    gen,
                    upto: max,
                    bits: bits.clone(),
                    used: tick,
                },
            );
        }
        Ok(bits)
    }

    /// Applies every change with a sequence number above the last one seen; a new epoch
    /// (or the first call) loads everything in one bulk build. Readers keep searching
    /// the index while the changes are read; only applying them is exclusive.
    fn sync(&self) -> Result<()> {
        let seen = self.seen()?;
        let head = self.lock()?.backend.head()?;
        if head == seen {
            return Ok(());
        }
        let _one = self.syncing.lock().map_err(|_| Error::Poisoned)?;
        // Another caller may have applied them while this one waited. (Heads are
        // tokens, not ordered: PostgreSQL's are snapshots; so ask again.)
        let seen = self.seen()?;
        let head = self.lock()?.backend.head()?;
        if head == seen {
            return Ok(());
        }
        if head.0 == seen.0 {
            let mut rows = Vec::new();
            let got = self
                .lock()?
                .backend
                .changes(seen.1, Some(head.0), &mut |r| rows.push(r))?;
            // None: a clear (new epoch) came in between; fall through to a full load.
            if let Some((head, removed)) = got {
                let mut ix = self.index.write().map_err(|_| Error::Poisoned)?;
                ix.apply(rows, &removed);
                ix.epoch = head.0;
                ix.seq = head.1;
                return Ok(());
            }
        }
        let mut b = Builder::new();
        let (head, _) = self
            .lock()?
            .backend
            .changes(0, None, &mut |r| b.push(r))?
            .ok_or_else(|| Error::Corrupt("full load refused".into()))?;
        let mut built = b.finish();
        built.epoch = head.0;
        built.seq = head.1;
        *self.index.write().map_err(|_| Error::Poisoned)? = built;
        Ok(())
    }

    /// The (epoch, sequence) the index has applied.
    fn seen(&self) -> Result<(i64, i64)> {
        let ix = self.read()?;
        Ok((ix.epoch, ix.seq))
    }

    fn read(&self) -> Result<RwLockReadGuard<'_, Index>> {
        self.index.read().map_err(|_| Error::Poisoned)
    }

    /// The index, with every change applied first.
    fn synced(&self) -> Result<RwLockReadGuard<'_, Index>> {
        self.sync()?;
        self.read()
    }
}

impl Catalog {
    /// Opens (creating if needed) a catalog: a directory path (SQLite at
    /// `<dir>/catalog.sqlite`) or a `postgres://` / `postgresql://` URL.
    pub fn open(spec: &str) -> Result<Catalog> {
        Self::open_with(spec, true)
    }

    /// Opens a catalog without loading its search index (it loads on the first call
    /// that needs it): for location lookups only, which read the database directly.
    /// A PostgreSQL server that cannot be reached is an error here
    /// ([`Error::Unavailable`]), unlike [`Catalog::open`].
    pub fn open_unindexed(spec: &str) -> Result<Catalog> {
        let c = Self::open_with(spec, false)?;
        c.lock()?.backend.head()?;
        Ok(c)
    }

    fn open_with(spec: &str, load: bool) -> Result<Catalog> {
        let is_pg = spec.starts_with("postgres://") || spec.starts_with("postgresql://");
        let backend = if is_pg {
            Backend::Pg(Box::new(pg::Pg::connect(spec)?))
        } else {
            if spec.is_empty() {
                return Err(Error::Invalid("empty catalog location".into()));
            }
            Backend::Sqlite(sqlite::Sqlite::open(Path::new(spec))?)
        };
        let c = Catalog {
            conn: Mutex::new(Conn { backend }),
            index: RwLock::new(Index::new()),
            syncing: Mutex::new(()),
            words: Mutex::new(WordCache::default()),
            results: Mutex::new(Default::default()),
            flights: Default::default(),
            node_timeout_ms: (DEFAULT_NODE_TIMEOUT.as_millis() as u64).into(),
            words_in_index: is_pg,
        };
        // A PostgreSQL server that cannot be reached now is connected to later (the
        // index loads on the first call that reaches it).
        if load {
            match c.sync() {
                Err(e) if e.is_unavailable() => {}
                r => r?,
            }
        }
        Ok(c)
    }

    /// The database connection (see [`Conn`] for the lock order).
    fn lock(&self) -> Result<MutexGuard<'_, Conn>> {
        self.conn.lock().map_err(|_| Error::Poisoned)
    }

    fn cache(&self) -> Result<MutexGuard<'_, results::Results>> {
        self.results.lock().map_err(|_| Error::Poisoned)
    }

    /// Inserts or replaces the record for `(r.name, r.version)`.
    pub fn upsert(&self, r: &Record) -> Result<()> {
        self.upsert_many(std::slice::from_ref(r))
    }

    /// Inserts or replaces many records in one transaction (the bulk path). Nothing is
    /// written if any record is invalid.
    pub fn upsert_many(&self, rs: &[Record]) -> Result<()> {
        if rs.is_empty() {
            return Ok(());
        }
        if rs.len() < 2 * PREPARE_CHUNK {
            let ps = rs.iter().map(Prepared::new).collect::<Result<Vec<_>>>()?;
            let mut one = Some(ps);
            return self.lock()?.backend.upsert_chunks(&mut || Ok(one.take()));
        }
        // A bulk write: records are checked and prepared (JSON, words, facet column)
        // on a second thread, a chunk at a time, while this one writes the chunk
        // before. Still one transaction: an invalid record anywhere stops the
        // preparing thread, the writer gets its error and rolls everything back.
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Vec<Prepared>>>(2);
            std::thread::Builder::new()
                .name("catalog-prepare".into())
                .spawn_scoped(s, move || {
                    for c in rs.chunks(PREPARE_CHUNK) {
                        let p = c.iter().map(Prepared::new).collect::<Result<Vec<_>>>();
                        let failed = p.is_err();
                        if tx.send(p).is_err() || failed {
                            break;
                        }
                    }
                })
                .map_err(|e| Error::Corrupt(format!("cannot start a thread: {e}")))?;
            let mut g = self.lock()?;
            let mut next = || rx.recv().ok().transpose();
            g.backend.upsert_chunks(&mut next)
        })
    }

    /// Removes one version of `name`, or all of them; returns how many records went.
    pub fn remove(&self, name: &str, version: Option<u64>) -> Result<usize> {
        check_name("name", name)?;
        let v = version.map(|v| check_int("version", v)).transpose()?;
        self.lock()?.backend.remove(name, v)
    }

    /// Renames every version of `old`, and every name under `old/`, to the same place
    /// under `new`; fails with [`Error::Conflict`] (and changes nothing) if a target exists.
    pub fn rename(&self, old: &str, new: &str) -> Result<usize> {
        check_name("old name", old)?;
        check_name("new name", new)?;
        loop {
            // SQLite finds the names under `old` in the index (it keeps no name order
            // of its own); the back end refuses if a write came in after this sync.
            let (ids, seen) = {
                let ix = self.synced()?;
                (ix.ids_under(old), (ix.epoch, ix.seq))
            };
            if let Some(n) = self.lock()?.backend.rename(old, new, seen, &ids)? {
                return Ok(n);
            }
        }
    }

    /// The record of `name` at `version`, or its latest version.
    pub fn get(&self, name: &str, version: Option<u64>) -> Result<Option<Record>> {
        check_plain("name", name, MAX_VALUE)?;
        let Some(rid) = self.synced()?.find(name, version) else {
            return Ok(None);
        };
        Ok(self.lock()?.backend.fetch(&[rid])?.into_iter().next())
    }

    /// True when the catalog has a record of `name` at `version`.
    pub fn has(&self, name: &str, version: u64) -> Result<bool> {
        check_plain("name", name, MAX_VALUE)?;
        Ok(self.synced()?.find(name, Some(version)).is_some())
    }

    /// The records of these (name, version) pairs that the catalog holds.
    pub fn get_many(&self, keys: &[(String, u64)]) -> Result<Vec<Record>> {
        let rids: Vec<i64> = {
            let ix = self.synced()?;
            keys.iter()
                .filter_map(|(n, v)| ix.find(n, Some(*v)))
                .collect()
        };
        let mut out = Vec::with_capacity(rids.len());
        for c in rids.chunks(1000) {
            out.extend(self.lock()?.backend.fetch(c)?);
        }
        Ok(out)
    }

    /// True when the storage may be shared with other nodes (PostgreSQL).
    pub fn is_shared(&self) -> Result<bool> {
        Ok(matches!(self.lock()?.backend, Backend::Pg(_)))
    }

    /// The facet keys some record holds, sorted.
    pub fn facet_keys(&self) -> Result<Vec<String>> {
        Ok(self.synced()?.facet_keys())
    }

    /// Every (name, version) the catalog holds, sorted.
    pub fn keys(&self) -> Result<Vec<(String, u64)>> {
        let mut k = self.synced()?.keys();
        k.sort_unstable();
        Ok(k)
    }

    /// Versions of `name`, ascending.
    pub fn versions(&self, name: &str) -> Result<Vec<u64>> {
        check_plain("name", name, MAX_VALUE)?;
        Ok(self.synced()?.versions(name))
    }

    fn select(&self, ix: &Index, q: &Query) -> Result<facet_index::Selection> {
        q.validate()?;
        let words = q.text.as_deref().map(text::query_words).unwrap_or_default();
        let mut text: Option<roaring::RoaringBitmap> = None;
        for w in &words {
            let b = self.word(ix, w)?;
            text = Some(match text {
                None => b,
                Some(t) => t & b,
            });
            if text.as_ref().is_some_and(|t| t.is_empty()) {
                break;
            }
        }
        Ok(ix.select(q, text.as_ref()))
    }

    /// One page of matches, the total, and the requested facet counts.
    pub fn query(&self, q: &Query) -> Result<Page> {
        q.validate()?;
        let key = serde_json::to_string(q).map_err(|e| Error::Invalid(e.to_string()))?;
        let a = {
            let ix = self.synced()?;
            let gen = (ix.epoch, ix.seq, ix.gen);
            let flight = format!("files {gen:?} {key}");
            loop {
                if let Some(a) = self.cache()?.files(gen, &key) {
                    break a;
                }
                let _lead = match self.flights.turn(&flight) {
                    results::Turn::Wait(f) => {
                        f.wait();
                        continue;
                    }
                    results::Turn::Lead(l) => l,
                };
                let s = self.select(&ix, q)?;
                let a = results::Answer {
                    total: s.m.len(),
                    ids: ix.page(&s.m, q.sort, q.offset, q.limit),
                    counts: ix.counts(&s, &q.facets),
                };
                self.cache()?.put_files(gen, key, a.clone());
                break a;
            }
        };
        let hits = self.lock()?.backend.fetch(&a.ids)?;
        Ok(Page {
            total: a.total,
            hits,
            facet_counts: a.counts,
        })
    }

    /// Searches answered from the result cache, and computed, since the catalog
    /// was opened.
    pub fn result_cache_stats(&self) -> Result<(u64, u64)> {
        let r = self.cache()?;
        Ok((r.hits, r.misses))
    }

    /// Values of `facet` starting with `prefix` (case-insensitive), most frequent first,
    /// counted among the matches of `q` (default: all latest versions).
    pub fn autocomplete(
        &self,
        facet: &str,
        prefix: &str,
        limit: usize,
        q: Option<&Query>,
    ) -> Result<Vec<(String, u64)>> {
        check_plain("facet", facet, MAX_KEY)?;
        check_plain("prefix", prefix, MAX_VALUE)?;
        let (ix, m) = self.completing(limit, q)?;
        Ok(ix.autocomplete(facet, prefix, limit, &m))
    }

    /// Name-level autocomplete (browsing the name tree): the components directly under
    /// `parent` (`"/"` for the top) that start with `partial` (case-insensitive), with
    /// how many matches of `q` (default: all latest versions) lie under each, most
    /// first.
    pub fn name_children(
        &self,
        parent: &str,
        partial: &str,
        limit: usize,
        q: Option<&Query>,
    ) -> Result<Vec<(String, u64)>> {
        check_plain("parent", parent, MAX_VALUE)?;
        check_plain("prefix", partial, MAX_VALUE)?;
        let (ix, s) = self.completing(limit, q)?;
        Ok(ix.children(parent, partial, limit, &s.m))
    }

    /// What both autocompletes start with: `limit` checked, then the matches of `q`
    /// (default: all latest versions) on a synced index.
    fn completing(
        &self,
        limit: usize,
        q: Option<&Query>,
    ) -> Result<(RwLockReadGuard<'_, Index>, facet_index::Selection)> {
        if limit > MAX_LIMIT {
            return Err(Error::Invalid(format!(
                "limit {limit} is more than {MAX_LIMIT}"
            )));
        }
        let ix = self.synced()?;
        let default = Query::default();
        let s = self.select(&ix, q.unwrap_or(&default))?;
        Ok((ix, s))
    }

    /// One page of datasets (see [`dataset`]): those holding at least one file matching
    /// `dq.query`, in instance-id order, with their facet counts (datasets counted).
    pub fn datasets(&self, dq: &DatasetQuery) -> Result<DatasetPage> {
        dq.validate()?;
        let ix = self.synced()?;
        // The whole match is kept, not the page: the key leaves paging out.
        let unpaged = Query {
            offset: 0,
            limit: 0,
            ..dq.query.clone()
        };
        let key = serde_json::to_string(&(&unpaged, dq.latest, &dq.ids))
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let gen = (ix.epoch, ix.seq, ix.gen);
        let flight = format!("datasets {gen:?} {key}");
        let h = loop {
            if let Some(h) = self.cache()?.datasets(gen, &key) {
                break h;
            }
            let _lead = match self.flights.turn(&flight) {
                results::Turn::Wait(f) => {
                    f.wait();
                    continue;
                }
                results::Turn::Lead(l) => l,
            };
            {
                // Members of an older DRS version may be older repository versions
                // of their names: every version is selected, the members among
                // them count.
                let q = Query {
                    latest_only: false,
                    ..dq.query.clone()
                };
                let s = self.select(&ix, &q)?;
                let (hit, reps) = ix.dataset_hits(&s.m, dq);
                let h = results::Hits {
                    hit: std::sync::Arc::new(hit),
                    counts: ix.dataset_counts(reps, &dq.query.facets),
                };
                self.cache()?.put_datasets(gen, key, h.clone());
                break h;
            }
        };
        let page = ix.dataset_page(&h.hit, dq.query.offset, dq.query.limit);
        let hits = page
            .into_iter()
            .filter_map(|id| ix.dataset(id, dq.files))
            .collect();
        Ok(DatasetPage {
            total: h.hit.len(),
            hits,
            facet_counts: h.counts,
        })
    }

    /// Number of datasets (latest file versions grouped).
    pub fn dataset_count(&self) -> Result<u64> {
        Ok(self.synced()?.dataset_count() as u64)
    }

    /// Removes every record (before a rebuild).
    pub fn clear(&self) -> Result<()> {
        self.lock()?.backend.clear()
    }

    /// Number of records (all versions).
    pub fn len(&self) -> Result<u64> {
        Ok(self.synced()?.len())
    }

    /// True when the catalog holds no record.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}

impl Catalog {
    /// Stores the chunk index of a record's file (a JSON document; see
    /// `granary_science::netcdf::ChunkIndex`), kept in its own `chunk_refs` table.
    pub fn put_chunk_refs(&self, name: &str, version: u64, refs: &str) -> Result<()> {
        let v = i64::try_from(version).map_err(|_| Error::Invalid("version too large".into()))?;
        self.lock()?.backend.put_chunk_refs(name, v, refs)
    }

    /// The chunk index stored for `(name, version)`.
    pub fn chunk_refs(&self, name: &str, version: u64) -> Result<Option<String>> {
        let v = i64::try_from(version).map_err(|_| Error::Invalid("version too large".into()))?;
        self.lock()?.backend.chunk_refs(name, v)
    }
}

/// The location catalog (federation; see [`location`]): which nodes hold which
/// versions, and which nodes are up. Records written with a `node` register that
/// node's location in the same transaction; these calls do the rest.
impl Catalog {
    /// Registers that `node` holds `version` of `name` (signed manifest root
    /// `manifest_digest`), stamped with the database server's time. Idempotent: a
    /// second registration refreshes `seen` and the digest. Touches only the location
    /// row (not the records' change sequence), so nodes registering at once do not
    /// wait on one another. The record itself is written by [`Catalog::upsert`] (a
    /// record with `node` set registers its location too).
    pub fn register_location(
        &self,
        name: &str,
        version: u64,
        node: &str,
        manifest_digest: Option<&str>,
    ) -> Result<()> {
        self.register_locations(&[NewLocation {
            name: name.to_string(),
            version,
            node: node.to_string(),
            manifest_digest: manifest_digest.map(str::to_string),
        }])
    }

    /// The node timeout this handle uses by default ([`DEFAULT_NODE_TIMEOUT`] unless
    /// set: the daemon's `node_timeout`).
    pub fn node_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.node_timeout_ms
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Sets the default node timeout (1 ms to 30 days).
    pub fn set_node_timeout(&self, t: std::time::Duration) -> Result<()> {
        let ms = location::timeout_ms(t)?;
        self.node_timeout_ms
            .store(ms as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Registers many locations in one transaction (all or nothing).
    pub fn register_locations(&self, locs: &[NewLocation]) -> Result<()> {
        if locs.is_empty() {
            return Ok(());
        }
        let ls = locs
            .iter()
            .map(NewLocation::check)
            .collect::<Result<Vec<_>>>()?;
        self.lock()?.backend.register_locations(&ls)
    }

    /// `node` no longer holds `name` (`version`, or every version): its locations go,
    /// and a record goes with its last location. Other nodes' locations are kept.
    /// Returns how many locations went.
    pub fn remove_for(&self, node: &str, name: &str, version: Option<u64>) -> Result<usize> {
        location::check_node(node)?;
        check_name("name", name)?;
        let v = version.map(|v| check_int("version", v)).transpose()?;
        self.lock()?.backend.remove_located(node, name, v)
    }

    /// `node` renamed `old` (and the names under it) to `new`. Versions only `node`
    /// holds (or that no node has registered) are renamed in place, in one
    /// transaction, as [`Catalog::rename`] does; when another node holds any of
    /// them, the records are copied to the new names with `node`'s location, and
    /// `node`'s old locations removed (the other nodes keep the old names). Fails
    /// with [`Error::Conflict`] (changing nothing) if a target exists. Returns the
    /// versions renamed.
    pub fn rename_for(&self, node: &str, old: &str, new: &str) -> Result<usize> {
        location::check_node(node)?;
        check_name("old name", old)?;
        check_name("new name", new)?;
        loop {
            // The index is read throughout (lock order: index, then connection); it
            // is let go before syncing again.
            let ix = self.synced()?;
            let mut g = self.lock()?;
            let ids = ix.ids_under(old);
            let seen = (ix.epoch, ix.seq);
            let mut recs = Vec::with_capacity(ids.len());
            for c in ids.chunks(1000) {
                recs.extend(g.backend.fetch(c)?);
            }
            let mut held: std::collections::HashMap<String, Vec<Location>> = Default::default();
            for r in &recs {
                if !held.contains_key(&r.name) {
                    let ls = g.backend.locations_of(&r.name, 1)?;
                    held.insert(r.name.clone(), ls);
                }
            }
            let shared = held.values().flatten().any(|l| l.node != node);
            if !shared {
                if let Some(n) = g.backend.rename(old, new, seen, &ids)? {
                    return Ok(n);
                }
                drop(g);
                drop(ix);
                continue;
            }
            // Only the versions this node holds (or, registered by no node, were
            // recorded as its own) move.
            let ours = |r: &Record| {
                let ls: Vec<&Location> = held[&r.name]
                    .iter()
                    .filter(|l| l.version == r.version)
                    .collect();
                if ls.is_empty() {
                    r.node.as_deref() == Some(node)
                } else {
                    ls.iter().any(|l| l.node == node)
                }
            };
            recs.retain(|r| ours(r));
            // Copies under the new names, then this node's old locations go.
            let mut moved = Vec::with_capacity(recs.len());
            for r in &recs {
                let to = rename::moved_name(old, new, &r.name)?;
                if ix.find(&to, Some(r.version)).is_some() {
                    return Err(Error::Conflict(format!(
                        "{to} version {} exists already",
                        r.version
                    )));
                }
                let mut c = r.clone();
                c.name = to;
                c.node = Some(node.to_string());
                moved.push(c);
            }
            let ps = moved
                .iter()
                .map(Prepared::new)
                .collect::<Result<Vec<_>>>()?;
            let mut one = Some(ps);
            g.backend.upsert_chunks(&mut || Ok(one.take()))?;
            for r in &recs {
                let v = check_int("version", r.version)?;
                g.backend.remove_located(node, &r.name, Some(v))?;
            }
            return Ok(recs.len());
        }
    }

    /// Removes every location of `node` and every record left with no location
    /// (before `node` catalogs its files again: `granary catalog rebuild`). Other
    /// nodes' locations, and the records they hold, are kept. Returns how many
    /// locations went.
    pub fn clear_node(&self, node: &str) -> Result<usize> {
        location::check_node(node)?;
        self.lock()?.backend.clear_node(node)
    }

    /// Every location of `name` (every version, highest first), with the holders'
    /// liveness judged against `node_timeout` on the database server's clock.
    pub fn locations(
        &self,
        name: &str,
        node_timeout: std::time::Duration,
    ) -> Result<Vec<Location>> {
        check_name("name", name)?;
        let t = location::timeout_ms(node_timeout)?;
        self.lock()?.backend.locations_of(name, t)
    }

    /// The nodes that can serve `name` now: the locations of `version` (or, when
    /// `None`, of the highest version that an up node holds) on nodes whose last
    /// heartbeat is younger than `node_timeout`, least loaded first (the load their
    /// heartbeats report), then longest registered ([`order_nearest`] without
    /// distances: a consumer orders them again, nearest first, with its own);
    /// caches (copies on routers and clients) after every storage holder.
    pub fn locate(
        &self,
        name: &str,
        version: Option<u64>,
        node_timeout: std::time::Duration,
    ) -> Result<Vec<Location>> {
        let all = self.locations(name, node_timeout)?;
        let v = match version {
            Some(v) => v,
            None => match all.iter().filter(|l| l.up).map(|l| l.version).max() {
                Some(v) => v,
                None => return Ok(Vec::new()),
            },
        };
        let mut up: Vec<Location> = all.into_iter().filter(|l| l.up && l.version == v).collect();
        location::order_nearest(&mut up, |_| None);
        Ok(up)
    }

    /// `node`'s locations: (name, version, manifest digest), sorted.
    pub fn node_locations(&self, node: &str) -> Result<Vec<(String, u64, Option<String>)>> {
        location::check_node(node)?;
        self.lock()?.backend.node_locations(node)
    }

    /// Up to `n` of `node`'s locations, chosen at random (`federation check`).
    pub fn sample_locations(&self, node: &str, n: u64) -> Result<Vec<Location>> {
        location::check_node(node)?;
        let n = check_int("sample size", n)?;
        self.lock()?.backend.sample_locations(node, n)
    }

    /// Records that `node` is alive (its heartbeat row, stamped with the server's
    /// time; one row per node). `restarted`: its daemon has just started.
    pub fn heartbeat(&self, node: &str, restarted: bool) -> Result<()> {
        self.heartbeat_as(node, restarted, Role::Storage)
    }

    /// [`Catalog::heartbeat`] of a node in `role` (kept in its row: only storage
    /// nodes are replica targets and sources; what others hold are caches).
    pub fn heartbeat_as(&self, node: &str, restarted: bool, role: Role) -> Result<()> {
        location::check_node(node)?;
        self.lock()?.backend.heartbeat(node, restarted, role)
    }

    /// Every node that ever sent a heartbeat, up when its last one is younger than
    /// `node_timeout` (server clock).
    pub fn nodes(&self, node_timeout: std::time::Duration) -> Result<Vec<NodeStatus>> {
        let t = location::timeout_ms(node_timeout)?;
        self.lock()?.backend.nodes(t)
    }

    /// Every node's liveness and role, without counting locations (the daemon's
    /// heartbeat watch reads it every heartbeat period).
    pub fn liveness(&self, node_timeout: std::time::Duration) -> Result<Vec<Liveness>> {
        let t = location::timeout_ms(node_timeout)?;
        self.lock()?.backend.liveness(t)
    }

    /// For every name equal to or under `prefix` (`/`: every name) that storage nodes
    /// hold: its highest version a storage node holds, and how many storage nodes hold
    /// it (up, all). Caches (routers' and clients' copies) are not counted.
    pub fn replicas(
        &self,
        prefix: &str,
        node_timeout: std::time::Duration,
    ) -> Result<Vec<Replicas>> {
        check_name("prefix", prefix)?;
        let t = location::timeout_ms(node_timeout)?;
        let p = if prefix.len() > 1 {
            prefix.trim_end_matches('/')
        } else {
            prefix
        };
        self.lock()?.backend.replicas(p, t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, version: u64, text: &str) -> Record {
        Record {
            name: name.into(),
            version,
            title: name.rsplit('/').next().unwrap_or_default().into(),
            size: 100,
            text: text.into(),
            ..Default::default()
        }
    }

    /// A search holding the index does not hold the others: while one reader keeps
    /// it, another thread's searches, lookups and record reads are answered.
    #[test]
    fn a_search_in_progress_does_not_hold_the_others() {
        let d = tempfile::tempdir().unwrap();
        let c = std::sync::Arc::new(Catalog::open(&d.path().display().to_string()).unwrap());
        let rs: Vec<Record> = (0..50)
            .map(|i| rec(&format!("/a/f{i}"), 1, "tas monthly"))
            .collect();
        c.upsert_many(&rs).unwrap();
        let held = c.synced().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let c2 = c.clone();
        std::thread::spawn(move || {
            let q = Query {
                text: Some("tas".into()),
                limit: 10,
                ..Default::default()
            };
            let total = c2.query(&q).map(|p| p.total);
            let got = c2.get("/a/f7", None).map(|r| r.map(|r| r.version));
            let _ = tx.send((total, got));
        });
        // Generous: a reader that waited on the held index would never answer.
        let (total, got) = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("a search waited on another reader");
        drop(held);
        assert_eq!(total.unwrap(), 50);
        assert_eq!(got.unwrap(), Some(1));
    }

    /// Writers and readers side by side: each writer reads its own write back at
    /// once, whichever thread applied the change, and the index ends with every record.
    #[test]
    fn writers_read_their_own_writes_beside_readers() {
        let d = tempfile::tempdir().unwrap();
        let c = std::sync::Arc::new(Catalog::open(&d.path().display().to_string()).unwrap());
        let mut ts = Vec::new();
        for t in 0..4 {
            let c = c.clone();
            ts.push(std::thread::spawn(move || {
                for i in 0..40 {
                    let name = format!("/w{t}/f{i}");
                    c.upsert(&rec(&name, 1 + i % 3, "pr daily")).unwrap();
                    assert_eq!(
                        c.get(&name, None).unwrap().map(|r| r.version),
                        Some(1 + i % 3),
                        "{name} not seen by its writer"
                    );
                }
            }));
        }
        for _ in 0..2 {
            let c = c.clone();
            ts.push(std::thread::spawn(move || {
                for _ in 0..60 {
                    let q = Query {
                        text: Some("daily".into()),
                        ..Default::default()
                    };
                    c.query(&q).unwrap();
                }
            }));
        }
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(c.len().unwrap(), 160);
        let q = Query {
            text: Some("pr".into()),
            limit: 0,
            ..Default::default()
        };
        assert_eq!(c.query(&q).unwrap().total, 160);
    }
}
