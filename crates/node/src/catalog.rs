//! The science catalog as the commands and the daemon open it: the global
//! `--catalog` choice, the settings for a data directory, and the catalog
//! that local publishing, `mv` and `rm` report to.

use std::path::{Path, PathBuf};

use granary_science::drs::Trust;
use granary_search::Settings;

static CATALOG_SPEC: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// The federation settings a running daemon leaves in its data directory
/// (`<data-dir>/daemon-settings.toml`, mode 0600: the catalog URL may hold
/// a password) so that the client commands on that data directory use the
/// same catalog, node timeout and replication rules without repeating them.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DaemonSettings {
    /// The daemon's `--catalog` (absent: its embedded catalog).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<String>,
    /// Its config file's `node_timeout` (seconds), when the file keeps it to
    /// itself: it overrides the catalog's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_timeout: Option<f64>,
    /// Its role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<granary_catalog::Role>,
    /// Its `[[replication]]` rules, when its config file keeps them to itself
    /// (`federation_settings = "local"`): they override the catalog's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<Vec<crate::policy::Rule>>,
}

/// Where [`DaemonSettings`] are kept.
pub fn daemon_settings_file(data_dir: &Path) -> PathBuf {
    data_dir.join("daemon-settings.toml")
}

/// Writes the daemon's settings (at its start), readable by its user only.
pub fn write_daemon_settings(data_dir: &Path, s: &DaemonSettings) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let text = toml::to_string(s)?;
    let path = daemon_settings_file(data_dir);
    let tmp = path.with_extension("toml.tmp");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(b"# written by `granary daemon` at start: the settings its client commands use\n")?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(())
}

/// The settings the daemon of `data_dir` left (empty when it never ran, or
/// the file cannot be read: a client then uses its own defaults).
pub fn daemon_settings(data_dir: &Path) -> DaemonSettings {
    std::fs::read_to_string(daemon_settings_file(data_dir))
        .ok()
        .and_then(|t| toml::from_str(&t).ok())
        .unwrap_or_default()
}

static DEFAULT_NODE_TIMEOUT: std::sync::OnceLock<Option<std::time::Duration>> =
    std::sync::OnceLock::new();

/// Records the node timeout client commands use when none is given (the
/// daemon's, from [`daemon_settings`]; once, at start).
pub fn set_default_node_timeout(t: Option<std::time::Duration>) {
    let _ = DEFAULT_NODE_TIMEOUT.set(t);
}

/// The node timeout of this data directory's daemon's config file, when the
/// file keeps it to itself (not the catalog's).
pub fn daemon_node_timeout() -> Option<std::time::Duration> {
    DEFAULT_NODE_TIMEOUT.get().copied().flatten()
}

/// The node timeout a client command uses without `--node-timeout`: its
/// daemon's config file's (when the file keeps it to itself), else the
/// catalog's federation settings' ([`crate::settings`]), if either gives one.
pub fn default_node_timeout() -> Option<std::time::Duration> {
    daemon_node_timeout().or_else(|| client_catalog_settings().and_then(|s| s.node_timeout()))
}

static CLIENT_DATA_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
static CLIENT_SETTINGS: std::sync::OnceLock<Option<granary_catalog::FederationSettings>> =
    std::sync::OnceLock::new();

/// Records the data directory of a client command (once, at start): its
/// catalog's federation settings are read from there when no `--catalog` is given.
pub fn set_client_data_dir(data_dir: &Path) {
    let _ = CLIENT_DATA_DIR.set(data_dir.to_path_buf());
}

/// The federation settings of the catalog a client command uses (`--catalog`, the
/// daemon's, or the data directory's when it has one), read once when first asked;
/// `None` when there is no such catalog or it cannot be read now.
pub fn client_catalog_settings() -> Option<granary_catalog::FederationSettings> {
    CLIENT_SETTINGS
        .get_or_init(|| {
            let spec = match catalog_spec() {
                Some(s) => s.to_string(),
                None => {
                    let dir = granary_search::default_catalog_dir(CLIENT_DATA_DIR.get()?);
                    if !dir.exists() {
                        return None;
                    }
                    dir.to_string_lossy().into_owned()
                }
            };
            let cat = granary_catalog::Catalog::open_unindexed(&spec).ok()?;
            cat.federation_settings().ok().map(|s| s.settings)
        })
        .clone()
}

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
