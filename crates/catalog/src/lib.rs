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
use std::sync::Mutex;

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

struct Inner {
    backend: Backend,
    index: Index,
    words: WordCache,
    results: results::Results,
}

/// Positions of the records holding a frequent word, kept between queries: valid within
/// one index generation, and brought up to date by asking the database only for the
/// record ids appended since (the text index answers `rowid >` ranges directly).
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

/// A catalog handle. `Send + Sync`; calls are serialised on one connection. With
/// PostgreSQL, call it from blocking threads (`spawn_blocking`), not on a tokio worker.
pub struct Catalog {
    inner: Mutex<Inner>,
    /// The node timeout this handle judges liveness with by default (ms).
    node_timeout_ms: std::sync::atomic::AtomicU64,
}

/// A node silent for longer than this is down (the default of `node_timeout`).
pub const DEFAULT_NODE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl Inner {
    /// Positions of the records whose text holds `word`.
    fn word(&mut self, word: &str) -> Result<roaring::RoaringBitmap> {
        let (gen, max) = (self.index.gen, self.index.max_rid());
        self.words.tick += 1;
        let tick = self.words.tick;
        if let Some(e) = self.words.map.get_mut(word) {
            if e.gen == gen {
                if e.upto < max {
                    let mut ids = self.backend.text(&[word.to_string()], e.upto)?;
                    e.bits |= self.index.positions(&mut ids);
                    e.upto = max;
                }
                e.used = tick;
                return Ok(e.bits.clone());
            }
        }
        let mut ids = self.backend.text(&[word.to_string()], i64::MIN)?;
        let bits = self.index.positions(&mut ids);
        if bits.len() >= CACHE_MIN_HITS {
            let map = &mut self.words.map;
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
    /// (or the first call) loads everything in one bulk build.
    fn sync(&mut self) -> Result<()> {
        let head = self.backend.head()?;
        if head == (self.index.epoch, self.index.seq) {
            return Ok(());
        }
        if head.0 == self.index.epoch {
            let mut rows = Vec::new();
            let seen = self
                .backend
                .changes(self.index.seq, Some(head.0), &mut |r| rows.push(r))?;
            // None: a clear (new epoch) came in between; fall through to a full load.
            if let Some((head, removed)) = seen {
                self.index.apply(rows, &removed);
                self.index.epoch = head.0;
                self.index.seq = head.1;
                return Ok(());
            }
        }
        let mut b = Builder::new();
        let (head, _) = self
            .backend
            .changes(0, None, &mut |r| b.push(r))?
            .ok_or_else(|| Error::Corrupt("full load refused".into()))?;
        self.index = b.finish();
        self.index.epoch = head.0;
        self.index.seq = head.1;
        Ok(())
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
        let backend = if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
            Backend::Pg(Box::new(pg::Pg::connect(spec)?))
        } else {
            if spec.is_empty() {
                return Err(Error::Invalid("empty catalog location".into()));
            }
            Backend::Sqlite(sqlite::Sqlite::open(Path::new(spec))?)
        };
        let mut inner = Inner {
            backend,
            index: Index::new(),
            words: WordCache::default(),
            results: Default::default(),
        };
        // A PostgreSQL server that cannot be reached now is connected to later (the
        // index loads on the first call that reaches it).
        if load {
            match inner.sync() {
                Err(e) if e.is_unavailable() => {}
                r => r?,
            }
        }
        Ok(Catalog {
            inner: Mutex::new(inner),
            node_timeout_ms: (DEFAULT_NODE_TIMEOUT.as_millis() as u64).into(),
        })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Inner>> {
        self.inner.lock().map_err(|_| Error::Poisoned)
    }

    fn synced(&self) -> Result<std::sync::MutexGuard<'_, Inner>> {
        let mut g = self.lock()?;
        g.sync()?;
        Ok(g)
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
        let mut g = self.lock()?;
        loop {
            // SQLite finds the names under `old` in the index (it keeps no name order
            // of its own); the back end refuses if a write came in after this sync.
            g.sync()?;
            let ids = g.index.ids_under(old);
            let seen = (g.index.epoch, g.index.seq);
            if let Some(n) = g.backend.rename(old, new, seen, &ids)? {
                return Ok(n);
            }
        }
    }

    /// The record of `name` at `version`, or its latest version.
    pub fn get(&self, name: &str, version: Option<u64>) -> Result<Option<Record>> {
        check_plain("name", name, MAX_VALUE)?;
        let mut g = self.synced()?;
        let Some(rid) = g.index.find(name, version) else {
            return Ok(None);
        };
        Ok(g.backend.fetch(&[rid])?.into_iter().next())
    }

    /// True when the catalog has a record of `name` at `version`.
    pub fn has(&self, name: &str, version: u64) -> Result<bool> {
        check_plain("name", name, MAX_VALUE)?;
        Ok(self.synced()?.index.find(name, Some(version)).is_some())
    }

    /// The records of these (name, version) pairs that the catalog holds.
    pub fn get_many(&self, keys: &[(String, u64)]) -> Result<Vec<Record>> {
        let mut g = self.synced()?;
        let rids: Vec<i64> = keys
            .iter()
            .filter_map(|(n, v)| g.index.find(n, Some(*v)))
            .collect();
        let mut out = Vec::with_capacity(rids.len());
        for c in rids.chunks(1000) {
            out.extend(g.backend.fetch(c)?);
        }
        Ok(out)
    }

    /// True when the storage may be shared with other nodes (PostgreSQL).
    pub fn is_shared(&self) -> Result<bool> {
        Ok(matches!(self.lock()?.backend, Backend::Pg(_)))
    }

    /// The facet keys some record holds, sorted.
    pub fn facet_keys(&self) -> Result<Vec<String>> {
        Ok(self.synced()?.index.facet_keys())
    }

    /// Every (name, version) the catalog holds, sorted.
    pub fn keys(&self) -> Result<Vec<(String, u64)>> {
        let mut k = self.synced()?.index.keys();
        k.sort_unstable();
        Ok(k)
    }

    /// Versions of `name`, ascending.
    pub fn versions(&self, name: &str) -> Result<Vec<u64>> {
        check_plain("name", name, MAX_VALUE)?;
        Ok(self.synced()?.index.versions(name))
    }

    fn select(g: &mut Inner, q: &Query) -> Result<facet_index::Selection> {
        q.validate()?;
        let words = q.text.as_deref().map(text::query_words).unwrap_or_default();
        let mut text: Option<roaring::RoaringBitmap> = None;
        for w in &words {
            let b = g.word(w)?;
            text = Some(match text {
                None => b,
                Some(t) => t & b,
            });
            if text.as_ref().is_some_and(|t| t.is_empty()) {
                break;
            }
        }
        Ok(g.index.select(q, text.as_ref()))
    }

    /// One page of matches, the total, and the requested facet counts.
    pub fn query(&self, q: &Query) -> Result<Page> {
        let mut g = self.synced()?;
        q.validate()?;
        let key = serde_json::to_string(q).map_err(|e| Error::Invalid(e.to_string()))?;
        let gen = (g.index.epoch, g.index.seq, g.index.gen);
        let a = match g.results.files(gen, &key) {
            Some(a) => a,
            None => {
                let s = Self::select(&mut g, q)?;
                let a = results::Answer {
                    total: s.m.len(),
                    ids: g.index.page(&s.m, q.sort, q.offset, q.limit),
                    counts: g.index.counts(&s, &q.facets),
                };
                g.results.put_files(gen, key, a.clone());
                a
            }
        };
        let hits = g.backend.fetch(&a.ids)?;
        Ok(Page {
            total: a.total,
            hits,
            facet_counts: a.counts,
        })
    }

    /// Searches answered from the result cache, and computed, since the catalog
    /// was opened.
    pub fn result_cache_stats(&self) -> Result<(u64, u64)> {
        let g = self.lock()?;
        Ok((g.results.hits, g.results.misses))
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
        let (g, m) = self.completing(limit, q)?;
        Ok(g.index.autocomplete(facet, prefix, limit, &m))
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
        let (g, s) = self.completing(limit, q)?;
        Ok(g.index.children(parent, partial, limit, &s.m))
    }

    /// What both autocompletes start with: `limit` checked, then the matches of `q`
    /// (default: all latest versions) on a synced index.
    fn completing(
        &self,
        limit: usize,
        q: Option<&Query>,
    ) -> Result<(std::sync::MutexGuard<'_, Inner>, facet_index::Selection)> {
        if limit > MAX_LIMIT {
            return Err(Error::Invalid(format!(
                "limit {limit} is more than {MAX_LIMIT}"
            )));
        }
        let mut g = self.synced()?;
        let default = Query::default();
        let s = Self::select(&mut g, q.unwrap_or(&default))?;
        Ok((g, s))
    }

    /// One page of datasets (see [`dataset`]): those holding at least one file matching
    /// `dq.query`, in instance-id order, with their facet counts (datasets counted).
    pub fn datasets(&self, dq: &DatasetQuery) -> Result<DatasetPage> {
        dq.validate()?;
        let mut g = self.synced()?;
        // The whole match is kept, not the page: the key leaves paging out.
        let unpaged = Query {
            offset: 0,
            limit: 0,
            ..dq.query.clone()
        };
        let key = serde_json::to_string(&(&unpaged, dq.latest, &dq.ids))
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let gen = (g.index.epoch, g.index.seq, g.index.gen);
        let h = match g.results.datasets(gen, &key) {
            Some(h) => h,
            None => {
                // Members of an older DRS version may be older repository versions
                // of their names: every version is selected, the members among
                // them count.
                let q = Query {
                    latest_only: false,
                    ..dq.query.clone()
                };
                let s = Self::select(&mut g, &q)?;
                let (hit, reps) = g.index.dataset_hits(&s.m, dq);
                let h = results::Hits {
                    hit: std::sync::Arc::new(hit),
                    counts: g.index.dataset_counts(reps, &dq.query.facets),
                };
                g.results.put_datasets(gen, key, h.clone());
                h
            }
        };
        let page = g
            .index
            .dataset_page(&h.hit, dq.query.offset, dq.query.limit);
        let hits = page
            .into_iter()
            .filter_map(|id| g.index.dataset(id, dq.files))
            .collect();
        Ok(DatasetPage {
            total: h.hit.len(),
            hits,
            facet_counts: h.counts,
        })
    }

    /// Number of datasets (latest file versions grouped).
    pub fn dataset_count(&self) -> Result<u64> {
        Ok(self.synced()?.index.dataset_count() as u64)
    }

    /// Removes every record (before a rebuild).
    pub fn clear(&self) -> Result<()> {
        self.lock()?.backend.clear()
    }

    /// Number of records (all versions).
    pub fn len(&self) -> Result<u64> {
        Ok(self.synced()?.index.len())
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
        let mut g = self.lock()?;
        loop {
            g.sync()?;
            let ids = g.index.ids_under(old);
            let seen = (g.index.epoch, g.index.seq);
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
                if g.index.find(&to, Some(r.version)).is_some() {
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
