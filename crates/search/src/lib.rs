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
pub mod record;
pub mod service;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use granary_catalog::Catalog;
use granary_packet::Name;
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
        let catalog = Catalog::open(&spec).map_err(|e| format!("catalog {spec}: {e}"))?;
        Ok(Indexer {
            catalog: Arc::new(catalog),
            translator: Arc::new(translator(s)?),
            node: s.node.clone(),
        })
    }

    /// Catalogs `e` (replacing what the catalog had for that version).
    pub fn add(&self, e: &Entry) -> Result<(), String> {
        let r = record::record_for(&self.translator, e, self.node.as_deref());
        self.catalog.upsert(&r).map_err(|x| x.to_string())
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
        self.catalog.clear().map_err(|e| e.to_string())?;
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
    fn published(&self, _store: &Store, e: &Entry) {
        if let Err(why) = self.add(e) {
            tracing::warn!(
                "catalog: {}/v={} not catalogued: {why} (`granary catalog rebuild` repairs it)",
                e.meta.name,
                e.meta.version
            );
        }
    }

    fn removed(&self, name: &Name, version: Option<u64>) {
        if let Err(why) = self.catalog.remove(&name.to_string(), version) {
            tracing::warn!("catalog: removal of {name} not recorded: {why}");
        }
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
