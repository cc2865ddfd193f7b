//! # granary-search
//!
//! The catalog service of a node: it builds catalog records from published
//! versions ([`record`]: DRS translation of the name + the file's netCDF
//! header), keeps the catalog in step with the repository ([`Indexer`], the
//! repository's [`granary_repo::Observer`]), serves search over NDN
//! ([`service`], protocol in [`protocol`] and docs/catalog-protocol.md) and
//! asks remote catalogs ([`client`]).
//!
//! The files stay the truth: the catalog can always be rebuilt from them
//! ([`Indexer::rebuild`]).
#![forbid(unsafe_code)]

pub mod client;
pub mod protocol;
pub mod queue;
pub mod record;
pub mod service;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use granary_catalog::{Catalog, Record};
use granary_packet::Name;
use granary_repo::Noted;
use granary_science::drs::{Config, Translator, Trust};
use granary_store::{Entry, Store};

/// Where the embedded catalog lives in a data directory.
pub fn default_catalog_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("catalog")
}

/// How to open a node's catalog.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// `postgres://…` or a directory; default `<data-dir>/catalog`.
    pub catalog: Option<String>,
    /// User DRS rules files (TOML), tried before CMIP6/CMIP5.
    pub rules: Vec<PathBuf>,
    /// Which side wins when attributes disagree with the name.
    pub trust: Trust,
    /// This node's prefix, recorded with each record (federation).
    pub node: Option<String>,
}

/// A catalog and the translator that fills it.
pub struct Indexer {
    /// The catalog.
    pub catalog: Arc<Catalog>,
    /// The DRS translator.
    pub translator: Arc<Translator>,
    node: Option<String>,
    /// Changes waiting for the catalog (`<data-dir>/catalog-queue/`).
    pub queue: queue::Queue,
}

/// What [`Indexer::check`] found (and repaired).
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Check {
    /// Versions stored (the files).
    pub files: u64,
    /// Records in the catalog (before any repair), every node's.
    pub catalogued: u64,
    /// This node's locations in the catalog (before any repair).
    pub located: u64,
    /// Stored versions the catalog lacked (the record, or this node's
    /// location of it): `(name, version)`.
    pub missing: Vec<(String, u64)>,
    /// This node's records and locations whose version is not stored.
    pub extra: Vec<(String, u64)>,
    /// Queued changes applied first.
    pub queue_applied: usize,
    /// Queued changes still waiting (the catalog is unavailable).
    pub queue_left: usize,
    /// True when `missing` and `extra` were put right.
    pub repaired: bool,
}

impl Check {
    /// True when files and catalog agree and nothing waits in the queue.
    pub fn clean(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty() && self.queue_left == 0
    }
}

impl Indexer {
    /// Opens (creating) the catalog of `data_dir` as `s` says.
    pub fn open(data_dir: &Path, s: &Settings) -> Result<Indexer, String> {
        let spec = match &s.catalog {
            Some(c) => c.clone(),
            None => {
                let d = default_catalog_dir(data_dir);
                std::fs::create_dir_all(&d)
                    .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
                d.to_string_lossy().into_owned()
            }
        };
        let catalog = Catalog::open(&spec)
            .map_err(|e| format!("catalog {}: {e}", granary_catalog::redact(&spec)))?;
        Ok(Indexer {
            catalog: Arc::new(catalog),
            translator: Arc::new(translator(s)?),
            node: s.node.clone(),
            queue: queue::Queue::new(queue::queue_dir(data_dir)),
        })
    }

    /// This node's prefix, as its records carry it.
    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }

    /// The record of `e`.
    pub fn record(&self, e: &Entry) -> Record {
        record::record_for(&self.translator, e, self.node.as_deref())
    }

    /// Applies `op` now, or queues it durably when the catalog cannot take
    /// it (or earlier changes are still queued: they go first). With
    /// `store`, the queue is drained at once when it can be.
    pub fn apply_or_queue(&self, op: queue::Op, store: Option<&Store>) -> Noted {
        let why = if self.queue.is_empty() {
            match op.apply(&self.catalog, store) {
                Ok(()) => return Noted::Done,
                Err(e) if !queue::retryable(&e) => return Noted::Failed(e.to_string()),
                Err(e) => e.to_string(),
            }
        } else {
            "earlier catalog changes are still queued".to_string()
        };
        if let Err(e) = self.queue.push(&op) {
            return Noted::Failed(format!(
                "{why}; and it could not be queued in {}: {e}",
                self.queue.dir().display()
            ));
        }
        if let Some(s) = store {
            if self.drain(s).left == 0 {
                return Noted::Done;
            }
        }
        Noted::Queued(why)
    }

    /// Applies the queued changes the catalog can take now, logging what it did.
    pub fn drain(&self, store: &Store) -> queue::Drained {
        let d = self.queue.drain(&self.catalog, Some(store));
        if d.applied + d.failed > 0 {
            tracing::info!(
                "catalog queue: {} change(s) applied, {} set aside, {} waiting",
                d.applied,
                d.failed,
                d.left
            );
        }
        d
    }

    /// Compares the files with the catalog (after applying the queue); with
    /// `repair`, catalogs the stored versions it lacks and removes the
    /// records of versions not stored. The files are the truth.
    pub fn check(&self, store: &Store, repair: bool) -> Result<Check, String> {
        let d = self.drain(store);
        let mut c = Check {
            queue_applied: d.applied,
            queue_left: d.left,
            ..Check::default()
        };
        let stored = store.list(&Name::new()).map_err(|e| e.to_string())?;
        let files: std::collections::BTreeSet<(String, u64)> =
            stored.iter().map(|m| (m.name.clone(), m.version)).collect();
        let cat: std::collections::BTreeSet<(String, u64)> = self
            .catalog
            .keys()
            .map_err(|e| e.to_string())?
            .into_iter()
            .collect();
        // With a node prefix, the locations are reconciled too: a version this
        // node stores but has no location for is registered; a location of it
        // with no file goes (other nodes' rows are not touched).
        let mine: Option<std::collections::BTreeSet<(String, u64)>> = match &self.node {
            Some(n) => Some(
                self.catalog
                    .node_locations(n)
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .map(|(n, v, _)| (n, v))
                    .collect(),
            ),
            None => None,
        };
        c.files = files.len() as u64;
        c.catalogued = cat.len() as u64;
        c.located = mine.as_ref().map_or(0, |m| m.len() as u64);
        c.missing = files
            .iter()
            .filter(|k| !cat.contains(*k) || mine.as_ref().is_some_and(|m| !m.contains(*k)))
            .cloned()
            .collect();
        // A record without a file here is this node's to remove only if it is
        // this node's record: a shared (PostgreSQL) catalog holds other nodes'
        // too. A record naming no node counts as ours in a catalog of our own.
        let unfiled: Vec<(String, u64)> = cat.difference(&files).cloned().collect();
        if !unfiled.is_empty() {
            let shared = self.catalog.is_shared().map_err(|e| e.to_string())?;
            let ours = |n: &Option<String>| match n {
                Some(n) => Some(n.as_str()) == self.node.as_deref(),
                None => !shared || self.node.is_none(),
            };
            c.extra = self
                .catalog
                .get_many(&unfiled)
                .map_err(|e| e.to_string())?
                .into_iter()
                .filter(|r| ours(&r.node))
                .map(|r| (r.name, r.version))
                .collect();
        }
        if let Some(m) = &mine {
            c.extra.extend(m.difference(&files).cloned());
        }
        c.extra.sort();
        c.extra.dedup();
        if repair && (!c.missing.is_empty() || !c.extra.is_empty()) {
            let mut batch = Vec::with_capacity(512);
            for (n, v) in &c.missing {
                let Ok(name) = Name::from_uri(n) else {
                    continue;
                };
                let Ok(e) = store.get(&name, Some(*v)) else {
                    continue; // removed meanwhile
                };
                batch.push(self.record(&e));
                if batch.len() == 512 {
                    self.catalog
                        .upsert_many(&batch)
                        .map_err(|e| e.to_string())?;
                    batch.clear();
                }
            }
            self.catalog
                .upsert_many(&batch)
                .map_err(|e| e.to_string())?;
            for (n, v) in &c.extra {
                match &self.node {
                    Some(node) => self.catalog.remove_for(node, n, Some(*v)),
                    None => self.catalog.remove(n, Some(*v)),
                }
                .map_err(|e| e.to_string())?;
            }
            c.repaired = true;
        }
        Ok(c)
    }

    /// Catalogs `e` (replacing what the catalog had for that version).
    pub fn add(&self, e: &Entry) -> Result<(), String> {
        self.catalog
            .upsert(&self.record(e))
            .map_err(|x| x.to_string())
    }

    /// Empties the catalog and catalogs every stored version again, reporting
    /// progress as (done, total). Returns the number of records.
    pub fn rebuild(
        &self,
        store: &Store,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<u64, String> {
        let all = store.list(&Name::new()).map_err(|e| e.to_string())?;
        let total = all.len() as u64;
        // This node's locations only (and the records no other node holds); a
        // node without a prefix owns the whole catalog.
        match &self.node {
            Some(n) => self.catalog.clear_node(n).map(|_| ()),
            None => self.catalog.clear(),
        }
        .map_err(|e| e.to_string())?;
        let mut batch = Vec::with_capacity(512);
        let mut done = 0;
        for m in all {
            let Ok(n) = m.name() else { continue };
            let Ok(e) = store.get(&n, Some(m.version)) else {
                continue;
            };
            batch.push(record::record_for(
                &self.translator,
                &e,
                self.node.as_deref(),
            ));
            done += 1;
            if batch.len() == 512 {
                self.catalog
                    .upsert_many(&batch)
                    .map_err(|e| e.to_string())?;
                batch.clear();
                progress(done, total);
            }
        }
        self.catalog
            .upsert_many(&batch)
            .map_err(|e| e.to_string())?;
        progress(done, total);
        Ok(done)
    }
}

impl granary_repo::Observer for Indexer {
    fn published(&self, store: &Store, e: &Entry) -> Noted {
        let op = queue::Op::Upsert {
            records: vec![self.record(e)],
        };
        let n = self.apply_or_queue(op, Some(store));
        match &n {
            Noted::Done => {}
            Noted::Queued(why) => tracing::warn!(
                "catalog: {}/v={} queued ({why}); catalogued when the catalog is back",
                e.meta.name,
                e.meta.version
            ),
            Noted::Failed(why) => tracing::warn!(
                "catalog: {}/v={} not catalogued: {why} (`granary catalog check --repair` repairs it)",
                e.meta.name,
                e.meta.version
            ),
        }
        n
    }

    fn removed(&self, name: &Name, version: Option<u64>) -> Noted {
        let op = queue::Op::Remove {
            name: name.to_string(),
            version,
            node: self.node.clone(),
        };
        let n = self.apply_or_queue(op, None);
        match &n {
            Noted::Done => {}
            Noted::Queued(why) => tracing::warn!("catalog: removal of {name} queued ({why})"),
            Noted::Failed(why) => tracing::warn!(
                "catalog: removal of {name} not recorded: {why} (`granary catalog check --repair` repairs it)"
            ),
        }
        n
    }
}

/// The DRS translator for `s` (its rules files loaded).
pub fn translator(s: &Settings) -> Result<Translator, String> {
    let mut cfg = Config {
        trust: s.trust,
        ..Config::default()
    };
    for p in &s.rules {
        cfg.rules
            .push(Translator::load_rules(p).map_err(|e| format!("{}: {e}", p.display()))?);
    }
    Translator::new(cfg).map_err(|e| e.to_string())
}
