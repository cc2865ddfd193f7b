//! `granary federation status|check|locate`: the location catalog as an
//! operator sees it (docs/federation.md). `status` counts holders against the
//! `[[replication]]` rules (the daemon config's, read by [`crate::config`],
//! else the catalog's federation settings); `check` asks each up node, with
//! hinted Interests, for a sample of the versions it claims and verifies
//! their signed manifest roots.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use granary_catalog::{Catalog, NodeStatus};
use granary_packet::Name;
use granary_transfer::{discover, Config, Engine, OpenOptions, Trust, UnixLink};

pub use granary_catalog::Location;

use crate::policy::Rule;

/// A `--node-timeout` in seconds, checked (0.001 s to 30 days); without
/// one, the node timeout of this data directory's daemon
/// ([`crate::catalog::default_node_timeout`]), if it gave one.
pub fn node_timeout(s: Option<f64>) -> anyhow::Result<Option<Duration>> {
    match s {
        None => Ok(crate::catalog::default_node_timeout()),
        Some(s) if s.is_finite() && (0.001..=30.0 * 86400.0).contains(&s) => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Some(s) => anyhow::bail!("--node-timeout {s}: out of range (0.001 s to 30 days)"),
    }
}

/// The location catalog: the shared one (`--catalog postgres://…`), or this
/// data directory's. Its search index is not loaded.
pub fn open(data_dir: &Path, catalog: Option<&str>) -> anyhow::Result<Catalog> {
    let spec = match catalog {
        Some(c) => c.to_string(),
        None => granary_search::default_catalog_dir(data_dir)
            .to_string_lossy()
            .into_owned(),
    };
    Catalog::open_unindexed(&spec)
        .map_err(|e| anyhow::anyhow!("catalog {}: {e}", crate::locate::redact(&spec)))
}

/// The `[[replication]]` rules and `node_timeout` of a daemon config file,
/// read and checked as the daemon reads it ([`crate::config::NodeConfig`]).
pub fn config_rules(config: &Path) -> anyhow::Result<(Option<Vec<Rule>>, Option<Duration>)> {
    let c = crate::config::NodeConfig::load(config)?;
    Ok((c.replication.clone(), c.node_timeout()))
}

/// What `federation status` shows.
pub struct Status {
    /// The node timeout used.
    pub node_timeout: Duration,
    /// Every node, up or down.
    pub nodes: Vec<NodeStatus>,
    /// The rules of the config file.
    pub rules: Vec<Rule>,
    /// Versions below a rule's prefix on fewer up nodes than it asks (name,
    /// version, up, total, wanted, rule).
    pub under_replicated: Vec<serde_json::Value>,
}

impl Status {
    /// `federation status --json`'s answer.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "node_timeout_ms": self.node_timeout.as_millis() as u64,
            "nodes": self.nodes,
            "under_replicated": self.under_replicated,
            "rules": self.rules.iter().map(|r| serde_json::json!({"prefix": r.prefix, "replicas": r.replicas})).collect::<Vec<_>>(),
        })
    }

    /// `federation status`' text: one line per node, then (with rules) the
    /// under-replicated names.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{} node(s), node timeout {:.1} s\n",
            self.nodes.len(),
            self.node_timeout.as_secs_f64()
        );
        for n in &self.nodes {
            out += &format!(
                "  {:<32} {:<4} {:<7} last seen {:.1} s ago  {} version(s){}\n",
                n.prefix,
                if n.up { "up" } else { "DOWN" },
                n.role.as_str(),
                n.age_ms as f64 / 1e3,
                n.locations,
                if n.role == granary_catalog::Role::Storage {
                    ""
                } else {
                    " (caches)"
                }
            );
        }
        if !self.rules.is_empty() {
            out += &format!("{} under-replicated name(s)\n", self.under_replicated.len());
            for u in &self.under_replicated {
                out += &format!(
                    "  {} v={}: on {} up node(s) of {}, {} wanted ({})\n",
                    u["name"].as_str().unwrap_or_default(),
                    u["version"],
                    u["up"],
                    u["total"],
                    u["wanted"],
                    u["rule"].as_str().unwrap_or_default()
                );
            }
        }
        out
    }
}

/// `federation status`: nodes, and the versions under the rules held by
/// fewer up nodes than asked. The rules and the node timeout: `flag`
/// (`--node-timeout`, seconds) over `config` (a config file; without one,
/// this data directory's daemon's own) over the catalog's federation
/// settings over the defaults.
pub fn status(
    data_dir: &Path,
    catalog: Option<&str>,
    config: Option<&Path>,
    flag: Option<f64>,
) -> anyhow::Result<Status> {
    let flag = match flag {
        Some(s) => node_timeout(Some(s))?,
        None => None,
    };
    // Without --config: the rules and timeout of this data directory's
    // daemon; where neither gives them, the catalog's federation settings.
    let (rules, cfg_timeout) = match config {
        Some(c) => config_rules(c)?,
        None => (
            crate::catalog::daemon_settings(data_dir).replication,
            crate::catalog::daemon_node_timeout(),
        ),
    };
    let cat = open(data_dir, catalog)?;
    let fed = cat
        .federation_settings()
        .map(|s| s.settings)
        .unwrap_or_default();
    let rules = rules.or(fed.replication.clone()).unwrap_or_default();
    let t = flag
        .or(cfg_timeout)
        .or(fed.node_timeout())
        .unwrap_or(granary_catalog::DEFAULT_NODE_TIMEOUT);
    let nodes = cat.nodes(t).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut under = Vec::new();
    for rule in &rules {
        let want = u64::from(rule.replicas);
        for r in cat
            .replicas(&rule.prefix, t)
            .map_err(|e| anyhow::anyhow!("{e}"))?
        {
            if r.up < want {
                under.push(serde_json::json!({
                    "name": r.name, "version": r.version, "up": r.up,
                    "total": r.total, "wanted": want, "rule": rule.prefix,
                }));
            }
        }
    }
    Ok(Status {
        node_timeout: t,
        nodes,
        rules,
        under_replicated: under,
    })
}

/// `federation locate`: the up nodes holding `name` (its newest version an
/// up node holds, or `version`), from the shared catalog when one is given
/// and `at` is not, else over NDN from the catalog at `at` (default: this
/// node's).
pub fn locate(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    name: &str,
    version: Option<u64>,
    at: Option<&str>,
    node_timeout: Option<Duration>,
) -> anyhow::Result<Vec<Location>> {
    if at.is_none() && catalog.is_some() {
        let cat = open(data_dir, catalog)?;
        let t = node_timeout
            .or_else(|| cat.federation_node_timeout().ok().flatten())
            .unwrap_or(granary_catalog::DEFAULT_NODE_TIMEOUT);
        return cat
            .locate(name, version, t)
            .map_err(|e| anyhow::anyhow!("{e}"));
    }
    let uri = at.unwrap_or(granary_search::protocol::LOCAL_PREFIX);
    let prefix = Name::from_uri(uri).map_err(|e| anyhow::anyhow!("--at {uri:?}: {e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(crate::locate::locate_ndn(
        socket,
        &prefix,
        name,
        version,
        node_timeout,
    ))
    .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Does the node the engine's hint names hold `versioned` (`version`)? Its
/// RDR metadata first, asked with MustBeFresh (the repository makes it fresh
/// for 1 ms, so no cache on the way answers: the node itself says which
/// version it holds); then the version's signed manifest root, verified.
async fn probe(
    engine: &mut Engine,
    link: &mut UnixLink,
    versioned: &Name,
    version: u64,
    trust: Arc<Trust>,
) -> Result<String, String> {
    let name = versioned.prefix(-1);
    let mut r = granary_transfer::Request::new(
        name.append(&granary_packet::Component::keyword(b"metadata")),
    );
    r.can_be_prefix = true;
    r.must_be_fresh = true;
    r.retries = Some(1);
    let d = granary_transfer::fetch_one(engine, link, r)
        .await
        .map_err(|e| format!("no answer for the name: {e}"))?;
    let m = granary_transfer::object::parse_metadata(&bytes::Bytes::copy_from_slice(d.content()))
        .map_err(|e| format!("bad metadata: {e}"))?;
    let latest = m.versioned.last().and_then(|c| c.as_version());
    let newer = match latest {
        Some(l) if l == version => false,
        Some(l) if l > version => true,
        Some(l) => return Err(format!("its latest version is v={l}, older than claimed")),
        None => return Err(format!("its metadata names {}", m.versioned)),
    };
    let info = discover(engine, link, versioned, trust, &OpenOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    if &info.versioned != versioned {
        return Err(format!("served {} instead", info.versioned));
    }
    Ok(if newer {
        format!("{} (it holds a newer version too)", info.verified_by)
    } else {
        info.verified_by
    })
}

/// Between two probes of one name: well past the repository's metadata
/// freshness (1 ms), so the second is never answered by a cache.
const FRESH_GAP: Duration = Duration::from_millis(20);

/// What `federation check` found.
pub struct Check {
    /// One row per location probed: node, name, version, ok, detail.
    pub checked: Vec<serde_json::Value>,
    /// Nodes down, not checked.
    pub down_skipped: Vec<String>,
    /// The silence after which a node counted as down.
    pub node_timeout: Duration,
}

impl Check {
    /// Locations not served by the node that claims them.
    pub fn bad(&self) -> usize {
        self.checked.iter().filter(|r| r["ok"] != true).count()
    }

    /// `federation check --json`'s answer.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"checked": self.checked, "bad": self.bad(), "down_skipped": self.down_skipped, "node_timeout_ms": self.node_timeout.as_millis() as u64})
    }

    /// `federation check`'s text: one line per location probed and per node
    /// down, then the count.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for r in &self.checked {
            out += &format!(
                "{} {} v={} at {}: {}\n",
                if r["ok"] == true { "ok  " } else { "BAD " },
                r["name"].as_str().unwrap_or_default(),
                r["version"],
                r["node"].as_str().unwrap_or_default(),
                r["detail"].as_str().unwrap_or_default()
            );
        }
        for s in &self.down_skipped {
            out += &format!("down {s}: not checked\n");
        }
        out + &format!(
            "{} location(s) checked, {} bad\n",
            self.checked.len(),
            self.bad()
        )
    }
}

/// `federation check`: up to `sample` locations of each up node (or only
/// `only`), each probed with Interests hinted to its node through the
/// daemon at `socket` (`lifetime` per Interest).
pub fn check(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    sample: u64,
    only: Option<&str>,
    lifetime: Duration,
    node_timeout: Option<Duration>,
) -> anyhow::Result<Check> {
    let cat = open(data_dir, catalog)?;
    // As every command judges liveness: the flag or this data directory's
    // daemon config, else the catalog's federation setting, else the default.
    let node_timeout = node_timeout
        .or_else(|| cat.federation_node_timeout().ok().flatten())
        .unwrap_or(granary_catalog::DEFAULT_NODE_TIMEOUT);
    let nodes = cat
        .nodes(node_timeout)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    let trust = Arc::new(Trust::from_keychain(&kc)?);
    let mut results = Vec::new();
    let mut skipped = Vec::new();
    let mut todo = Vec::new();
    for n in &nodes {
        if only.is_some_and(|p| p != n.prefix) {
            continue;
        }
        // Down nodes, and routers' and clients' caches (not locations that
        // count, and often not reachable from here), are not probed.
        if !n.up || n.role != granary_catalog::Role::Storage {
            skipped.push(n.prefix.clone());
            continue;
        }
        let locs = cat
            .sample_locations(&n.prefix, sample)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        todo.push((n.prefix.clone(), locs));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut link = UnixLink::connect(socket).await?;
        // When each name was last probed: the metadata answer is fresh
        // for 1 ms in every cache on the way, so the same name asked of
        // the next node within that time could be answered by a cache.
        let mut probed: std::collections::HashMap<String, std::time::Instant> = Default::default();
        for (prefix, locs) in &todo {
            let hint = Name::from_uri(prefix).map_err(|e| anyhow::anyhow!("{prefix}: {e}"))?;
            let mut engine = Engine::new(Config {
                forwarding_hint: vec![hint],
                lifetime: lifetime.max(Duration::from_millis(1)),
                retries: 1,
                ..Config::default()
            });
            for l in locs {
                let versioned = Name::from_uri(&l.name)
                    .map(|n| n.append(&granary_packet::Component::version(l.version)));
                if let Some(t) = probed.get(&l.name) {
                    let wait = FRESH_GAP.saturating_sub(t.elapsed());
                    tokio::time::sleep(wait).await;
                }
                let outcome = match versioned {
                    Err(e) => Err(format!("bad name: {e}")),
                    Ok(v) => probe(&mut engine, &mut link, &v, l.version, trust.clone()).await,
                };
                probed.insert(l.name.clone(), std::time::Instant::now());
                results.push(serde_json::json!({
                    "node": prefix, "name": l.name, "version": l.version,
                    "ok": outcome.is_ok(),
                    "detail": match &outcome { Ok(s) | Err(s) => s },
                }));
            }
        }
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(Check {
        checked: results,
        down_skipped: skipped,
        node_timeout,
    })
}
