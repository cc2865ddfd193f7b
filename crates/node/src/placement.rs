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
    /// Node prefixes to hold the copies (the first N candidates).
    pub targets: Vec<String>,
    /// Every up storage node without the version, in the order tried: a
    /// target that refuses or fails passes its copy to the next.
    pub candidates: Vec<String>,
    /// How many of those asked no up node was left for.
    pub shortfall: u32,
    /// The up holders of the version (the targets' forwarding hints when
    /// this node holds none).
    pub sources: Vec<String>,
    /// This node's prefix (left out of the targets).
    pub me: String,
}

/// Picks up to `n` targets for `name` from the location catalog: up
/// storage nodes other than `me` that hold no copy of the version (up or
/// down: a down holder still has it on disk and counts again when it is
/// back), those holding the fewest versions first, then by prefix; routers
/// and clients are never chosen. The version is `version`, else the newest
/// `me` holds, else the newest an up storage node holds. The sources are
/// the up storage holders (a router's or client's cache is not one).
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
            .or_else(|| {
                all.iter()
                    .filter(|l| l.up && !l.is_cache())
                    .map(|l| l.version)
                    .max()
            })
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
        .filter(|s| {
            s.up && s.role == granary_catalog::Role::Storage
                && s.prefix != me
                && !holders.contains(s.prefix.as_str())
        })
        .collect();
    free.sort_by(|a, b| a.locations.cmp(&b.locations).then(a.prefix.cmp(&b.prefix)));
    let candidates: Vec<String> = free.into_iter().map(|s| s.prefix).collect();
    let targets: Vec<String> = candidates.iter().take(n as usize).cloned().collect();
    let shortfall = n - targets.len() as u32;
    let sources = cat
        .locate(name, Some(version), node_timeout)
        .map_err(|e| anyhow::anyhow!("location catalog: {e}"))?
        .into_iter()
        .filter(|l| !l.is_cache())
        .map(|l| l.node)
        .collect();
    Ok(Choice {
        version,
        targets,
        candidates,
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
    let cat = granary_catalog::Catalog::open_unindexed(spec)
        .map_err(|e| anyhow::anyhow!("location catalog {}: {e}", crate::locate::redact(spec)))?;
    let t = node_timeout
        .or_else(|| cat.federation_node_timeout().ok().flatten())
        .unwrap_or(granary_catalog::DEFAULT_NODE_TIMEOUT);
    let me = crate::identity::node_prefix(data_dir)?.to_string();
    choose(&cat, name, version, &me, n, t)
}

/// One candidate's outcome in [`replicate_until`].
pub enum Outcome {
    /// It holds the copy now (or accepted it, with `no_wait`): the job's
    /// final state (JSON with `state`).
    Made(serde_json::Value),
    /// It refused the command, failed the copy or did not answer; the copy
    /// goes to the next candidate.
    Failed(String),
}

/// `--replicas N`: asks the candidates of `choice` in order to hold a copy
/// (`req`), a refusal or failure passing the copy to the next, until `n`
/// copies are made or no candidate remains. Calls `each` with every
/// candidate's outcome; returns how many copies were made.
pub async fn replicate_until(
    socket: &Path,
    data_dir: &Path,
    choice: &Choice,
    n: u32,
    req: &crate::replicate::Request,
    no_wait: bool,
    mut each: impl FnMut(&str, &Outcome),
) -> u32 {
    let mut made = 0;
    for c in &choice.candidates {
        if made >= n {
            break;
        }
        let o = match granary_packet::Name::from_uri(c) {
            Err(e) => Outcome::Failed(format!("catalog node {c:?}: {e}")),
            Ok(t) => match crate::replicate::replicate_to(socket, data_dir, &t, req, no_wait).await
            {
                Ok(v) if v["state"] == "done" || v["state"] == "running" => Outcome::Made(v),
                Ok(v) => Outcome::Failed(
                    v["error"]
                        .as_str()
                        .unwrap_or("failed, no reason given")
                        .to_string(),
                ),
                Err(e) => Outcome::Failed(format!("{e:#}")),
            },
        };
        if matches!(o, Outcome::Made(_)) {
            made += 1;
        }
        each(c, &o);
    }
    made
}
