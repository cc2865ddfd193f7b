//! The science catalog as the commands and the daemon open it: the global
//! `--catalog` choice, the settings for a data directory, and the catalog
//! that local publishing, `mv` and `rm` report to.

use std::path::{Path, PathBuf};

use granary_science::drs::Trust;
use granary_search::Settings;

static CATALOG_SPEC: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Records the global `--catalog` (once, at start).
pub fn set_catalog_spec(spec: Option<String>) {
    let _ = CATALOG_SPEC.set(spec);
}

/// The global `--catalog`: a `postgres://` URL or a directory; `None` for
/// the embedded default `<data-dir>/catalog`.
pub fn catalog_spec() -> Option<&'static str> {
    CATALOG_SPEC.get().and_then(|s| s.as_deref())
}

/// The settings for this data directory: `--catalog` (or the embedded
/// default), `extra_rules` (the `--rules` files) and the rules in
/// `<data-dir>/catalog/rules/`, and `trust` (`--trust`).
pub fn settings(
    data_dir: &Path,
    catalog: Option<&str>,
    extra_rules: &[PathBuf],
    trust: Trust,
) -> Settings {
    let mut rules = extra_rules.to_vec();
    let dir = granary_search::default_catalog_dir(data_dir).join("rules");
    if let Ok(rd) = std::fs::read_dir(&dir) {
        let mut found: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        found.sort();
        rules.extend(found);
    }
    Settings {
        catalog: catalog.map(str::to_string),
        rules,
        trust,
        node: crate::identity::node_prefix(data_dir)
            .ok()
            .map(|n| n.to_string()),
    }
}

/// `repo`, reporting what it publishes to the data directory's catalog
/// (created if missing; `--catalog` may name another).
pub fn with_catalog(repo: granary_repo::Repo, data_dir: &Path) -> granary_repo::Repo {
    let s = settings(data_dir, catalog_spec(), &[], Trust::Name);
    match granary_search::Indexer::open(data_dir, &s) {
        Ok(ix) => {
            // Changes queued while the catalog was unavailable go first.
            if !ix.queue.is_empty() {
                ix.drain(&repo.store);
            }
            repo.with_observer(std::sync::Arc::new(ix))
        }
        Err(e) => {
            eprintln!("not catalogued ({e}); `granary catalog check --repair` repairs it");
            repo
        }
    }
}

/// The data directory's catalog, when one exists (or `--catalog` names one):
/// changes made beside the repository (`mv`, `rm`) are reported to it.
pub fn catalog_of(data_dir: &Path, catalog: Option<&str>) -> Option<granary_search::Indexer> {
    if catalog.is_none() && !granary_search::default_catalog_dir(data_dir).exists() {
        return None;
    }
    let s = settings(data_dir, catalog, &[], Trust::Name);
    match granary_search::Indexer::open(data_dir, &s) {
        Ok(ix) => Some(ix),
        Err(e) => {
            eprintln!("catalog not updated ({e}); `granary catalog rebuild` repairs it");
            None
        }
    }
}
