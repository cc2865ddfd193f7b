//! Where `granary replicate --replicas N` puts copies: the placement policy
//! over the federation's location catalog.

use std::path::Path;
use std::time::Duration;

/// The targets `--replicas N` picks, the version they are to copy, and
/// how many of the N asked no up node is left for.
#[derive(Debug, PartialEq, Eq)]
pub struct Choice {
    /// The version to copy.
    pub version: u64,
    /// Node prefixes to hold the copies.
    pub targets: Vec<String>,
    /// How many of those asked no up node was left for.
    pub shortfall: u32,
    /// The up holders of the version (the targets' forwarding hints when
    /// this node holds none).
    pub sources: Vec<String>,
    /// This node's prefix (left out of the targets).
    pub me: String,
}

/// Picks up to `n` targets for `name` from the location catalog: up nodes
/// other than `me` that hold no copy of the version (up or down: a down
/// holder still has it on disk and counts again when it is back), those
/// holding the fewest versions first, then by prefix. The version is
/// `version`, else the newest `me` holds, else the newest an up node holds.
pub fn choose(
    cat: &granary_catalog::Catalog,
    name: &str,
    version: Option<u64>,
    me: &str,
    n: u32,
    node_timeout: Duration,
) -> anyhow::Result<Choice> {
    let all = cat
        .locations(name, node_timeout)
        .map_err(|e| anyhow::anyhow!("location catalog: {e}"))?;
    let version = match version {
        Some(v) => v,
        None => all
            .iter()
            .filter(|l| l.node == me)
            .map(|l| l.version)
            .max()
            .or_else(|| all.iter().filter(|l| l.up).map(|l| l.version).max())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "the location catalog has no location of {name} on an up node (give --version, or publish it first)"
                )
            })?,
    };
    let holders: std::collections::BTreeSet<&str> = all
        .iter()
        .filter(|l| l.version == version)
        .map(|l| l.node.as_str())
        .collect();
    let mut free: Vec<granary_catalog::NodeStatus> = cat
        .nodes(node_timeout)
        .map_err(|e| anyhow::anyhow!("location catalog: {e}"))?
        .into_iter()
        .filter(|s| s.up && s.prefix != me && !holders.contains(s.prefix.as_str()))
        .collect();
    free.sort_by(|a, b| a.locations.cmp(&b.locations).then(a.prefix.cmp(&b.prefix)));
    let targets: Vec<String> = free
        .into_iter()
        .take(n as usize)
        .map(|s| s.prefix)
        .collect();
    let shortfall = n - targets.len() as u32;
    let sources = cat
        .locate(name, Some(version), node_timeout)
        .map_err(|e| anyhow::anyhow!("location catalog: {e}"))?
        .into_iter()
        .map(|l| l.node)
        .collect();
    Ok(Choice {
        version,
        targets,
        shortfall,
        sources,
        me: me.to_string(),
    })
}

/// [`choose`] over the shared location catalog `catalog` (a `postgres://`
/// URL; anything else is refused), for this data directory's node.
pub fn choose_replicas(
    data_dir: &Path,
    catalog: Option<&str>,
    name: &str,
    version: Option<u64>,
    n: u32,
    node_timeout: Option<Duration>,
) -> anyhow::Result<Choice> {
    let spec = catalog
        .filter(|c| crate::locate::is_shared_spec(c))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--replicas chooses among the up nodes of the federation's location catalog: give it with --catalog postgres://…, or name the target nodes with --to NODE_PREFIX"
            )
        })?;
    let t = node_timeout.unwrap_or(granary_catalog::DEFAULT_NODE_TIMEOUT);
    let cat = granary_catalog::Catalog::open_unindexed(spec)
        .map_err(|e| anyhow::anyhow!("location catalog {}: {e}", crate::locate::redact(spec)))?;
    let me = crate::identity::node_prefix(data_dir)?.to_string();
    choose(&cat, name, version, &me, n, t)
}
