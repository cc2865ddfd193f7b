//! `granary federation status|check|locate`: the location catalog as an operator
//! sees it (docs/federation.md).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use granary_catalog::Catalog;
use granary_packet::Name;
use granary_transfer::{discover, Config, Engine, OpenOptions, Trust, UnixLink};

/// `granary federation …`.
#[derive(clap::Subcommand)]
pub enum FederationCmd {
    /// Nodes up and down (last heartbeat), versions held per node, and names
    /// below their `[[replication]] prefix, replicas` (from --config) on fewer
    /// up nodes than asked.
    Status {
        /// Daemon config file whose `[[replication]]` tables (prefix,
        /// replicas) say how many up nodes each name should be on.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// A node silent for longer than this (seconds) is down (default:
        /// the config's node_timeout, else 60).
        #[arg(long, value_name = "SECONDS")]
        node_timeout: Option<f64>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Fetches the signed manifest root of a sample of each up node's
    /// locations with Interests hinted to that node, and flags the
    /// locations whose node does not serve what it claims. Exit status 1
    /// when one is flagged.
    Check {
        /// Locations sampled per node.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=100_000))]
        sample: u64,
        /// Only this node.
        #[arg(long, value_name = "PREFIX")]
        node: Option<String>,
        /// Per-Interest lifetime (ms).
        #[arg(long, default_value_t = 1000)]
        lifetime: u64,
        /// Seconds of silence after which a node is down (default 60).
        #[arg(long, value_name = "SECONDS")]
        node_timeout: Option<f64>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The up nodes holding NAME (its latest version an up node holds, or
    /// --version), from the shared catalog or over NDN (--at).
    Locate {
        /// File name (without version).
        name: String,
        /// This version.
        #[arg(long)]
        version: Option<u64>,
        /// Ask this catalog over NDN (e.g. /site/a/catalog; default: the
        /// shared catalog when --catalog is a postgres:// URL, else this
        /// node's).
        #[arg(long, value_name = "PREFIX")]
        at: Option<String>,
        /// Seconds of silence after which a node is down.
        #[arg(long, value_name = "SECONDS")]
        node_timeout: Option<f64>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn timeout(s: Option<f64>) -> anyhow::Result<Option<Duration>> {
    match s {
        None => Ok(None),
        Some(s) if s.is_finite() && (0.001..=30.0 * 86400.0).contains(&s) => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Some(s) => anyhow::bail!("--node-timeout {s}: out of range (0.001 s to 30 days)"),
    }
}

/// The location catalog: the shared one (`--catalog postgres://…`), or this
/// data directory's. Its search index is not loaded.
fn open(data_dir: &Path, catalog: Option<&str>) -> anyhow::Result<Catalog> {
    let spec = match catalog {
        Some(c) => c.to_string(),
        None => granary_search::default_catalog_dir(data_dir)
            .to_string_lossy()
            .into_owned(),
    };
    Catalog::open_unindexed(&spec)
        .map_err(|e| anyhow::anyhow!("catalog {}: {e}", granary_node::locate::redact(&spec)))
}

/// `[[replication]]` rules (prefix, replicas) and `node_timeout` of a config file.
type Rules = (Vec<(String, u64)>, Option<Duration>);

/// `[[replication]] prefix, replicas` of a daemon config file.
fn replication_rules(config: &Path) -> anyhow::Result<Rules> {
    let text = std::fs::read_to_string(config)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", config.display()))?;
    let t: toml::Table =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", config.display()))?;
    let nt = match t.get("node_timeout") {
        Some(v) => Some(
            granary_node::locate::parse_node_timeout(v)
                .map_err(|e| anyhow::anyhow!("{}: {e}", config.display()))?,
        ),
        None => None,
    };
    let mut rules = Vec::new();
    if let Some(v) = t.get("replication") {
        let arr = v.as_array().ok_or_else(|| {
            anyhow::anyhow!(
                "{}: replication: expected [[replication]] tables",
                config.display()
            )
        })?;
        for r in arr {
            let prefix = r.get("prefix").and_then(|p| p.as_str());
            let n = r.get("replicas").and_then(|p| p.as_integer());
            match (prefix, n) {
                (Some(p), Some(n)) if p.starts_with('/') && n >= 1 => {
                    rules.push((p.to_string(), n as u64))
                }
                _ => anyhow::bail!(
                    "{}: each [[replication]] needs prefix = \"/…\" and replicas ≥ 1, found {r}",
                    config.display()
                ),
            }
        }
    }
    Ok((rules, nt))
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

/// Runs `granary federation …`.
pub fn run(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    cmd: FederationCmd,
) -> anyhow::Result<()> {
    match cmd {
        FederationCmd::Status {
            config,
            node_timeout,
            json,
        } => {
            let (rules, cfg_timeout) = match &config {
                Some(c) => replication_rules(c)?,
                None => (Vec::new(), None),
            };
            let t = timeout(node_timeout)?
                .or(cfg_timeout)
                .unwrap_or(granary_catalog::DEFAULT_NODE_TIMEOUT);
            let cat = open(data_dir, catalog)?;
            let nodes = cat.nodes(t).map_err(|e| anyhow::anyhow!("{e}"))?;
            let mut under = Vec::new();
            for (prefix, want) in &rules {
                for r in cat
                    .replicas(prefix, t)
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                {
                    if r.up < *want {
                        under.push(serde_json::json!({
                            "name": r.name, "version": r.version, "up": r.up,
                            "total": r.total, "wanted": want, "rule": prefix,
                        }));
                    }
                }
            }
            if json {
                let v = serde_json::json!({
                    "node_timeout_ms": t.as_millis() as u64,
                    "nodes": nodes,
                    "under_replicated": under,
                    "rules": rules.iter().map(|(p, n)| serde_json::json!({"prefix": p, "replicas": n})).collect::<Vec<_>>(),
                });
                println!("{v}");
                return Ok(());
            }
            println!(
                "{} node(s), node timeout {:.1} s",
                nodes.len(),
                t.as_secs_f64()
            );
            for n in &nodes {
                println!(
                    "  {:<32} {:<4} last seen {:.1} s ago  {} version(s)",
                    n.prefix,
                    if n.up { "up" } else { "DOWN" },
                    n.age_ms as f64 / 1e3,
                    n.locations
                );
            }
            if !rules.is_empty() {
                println!("{} under-replicated name(s)", under.len());
                for u in &under {
                    println!(
                        "  {} v={}: on {} up node(s) of {}, {} wanted ({})",
                        u["name"].as_str().unwrap_or_default(),
                        u["version"],
                        u["up"],
                        u["total"],
                        u["wanted"],
                        u["rule"].as_str().unwrap_or_default()
                    );
                }
            }
            Ok(())
        }
        FederationCmd::Locate {
            name,
            version,
            at,
            node_timeout,
            json,
        } => {
            let t = timeout(node_timeout)?;
            let locs = if at.is_none() && catalog.is_some() {
                let cat = open(data_dir, catalog)?;
                let t = t.unwrap_or(granary_catalog::DEFAULT_NODE_TIMEOUT);
                cat.locate(&name, version, t)
                    .map_err(|e| anyhow::anyhow!("{e}"))?
            } else {
                {
                    let uri = at
                        .as_deref()
                        .unwrap_or(granary_search::protocol::LOCAL_PREFIX);
                    let prefix =
                        Name::from_uri(uri).map_err(|e| anyhow::anyhow!("--at {uri:?}: {e}"))?;
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    rt.block_on(granary_node::locate::locate_ndn(
                        socket, &prefix, &name, version, t,
                    ))
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                }
            };
            if json {
                println!("{}", serde_json::json!({"name": name, "locations": locs}));
            } else if locs.is_empty() {
                anyhow::bail!("{name}: no up node holds it");
            } else {
                for l in &locs {
                    println!(
                        "{} v={} {} manifest {}",
                        l.name,
                        l.version,
                        l.node,
                        l.manifest_digest.as_deref().unwrap_or("?")
                    );
                }
            }
            Ok(())
        }
        FederationCmd::Check {
            sample,
            node,
            lifetime,
            node_timeout,
            json,
        } => {
            let t = timeout(node_timeout)?.unwrap_or(granary_catalog::DEFAULT_NODE_TIMEOUT);
            let cat = open(data_dir, catalog)?;
            let nodes = cat.nodes(t).map_err(|e| anyhow::anyhow!("{e}"))?;
            let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
            let trust = Arc::new(Trust::from_keychain(&kc)?);
            let mut results = Vec::new();
            let mut skipped = Vec::new();
            let mut todo = Vec::new();
            for n in &nodes {
                if node.as_deref().is_some_and(|p| p != n.prefix) {
                    continue;
                }
                if !n.up {
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
                let mut probed: std::collections::HashMap<String, std::time::Instant> =
                    Default::default();
                for (prefix, locs) in &todo {
                    let hint =
                        Name::from_uri(prefix).map_err(|e| anyhow::anyhow!("{prefix}: {e}"))?;
                    let mut engine = Engine::new(Config {
                        forwarding_hint: vec![hint],
                        lifetime: Duration::from_millis(lifetime.max(1)),
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
                            Ok(v) => {
                                probe(&mut engine, &mut link, &v, l.version, trust.clone()).await
                            }
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
            let bad = results.iter().filter(|r| r["ok"] != true).count();
            if json {
                println!(
                    "{}",
                    serde_json::json!({"checked": results, "bad": bad, "down_skipped": skipped})
                );
            } else {
                for r in &results {
                    let ok = r["ok"] == true;
                    println!(
                        "{} {} v={} at {}: {}",
                        if ok { "ok  " } else { "BAD " },
                        r["name"].as_str().unwrap_or_default(),
                        r["version"],
                        r["node"].as_str().unwrap_or_default(),
                        r["detail"].as_str().unwrap_or_default()
                    );
                }
                for s in &skipped {
                    println!("down {s}: not checked");
                }
                println!("{} location(s) checked, {bad} bad", results.len());
            }
            if bad > 0 {
                anyhow::bail!("{bad} location(s) not served by the node that claims them");
            }
            Ok(())
        }
    }
}
