//! The federation's location catalog as the node uses it: the daemon's heartbeat,
//! the `node_timeout` setting, and the locator the fetch engine asks when a name has
//! no route (the shared catalog directly, or a catalog over NDN with `locate`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use granary_app::Client;
use granary_catalog::{Catalog, Location};
pub use granary_mgmt::dataset::rib_distance;
use granary_packet::Name;
use granary_transfer::{LocateFuture, Locator, LocatorRef};
use serde_json::json;

/// True for a catalog location other nodes can share (a PostgreSQL URL).
pub fn is_shared_spec(spec: &str) -> bool {
    spec.starts_with("postgres://") || spec.starts_with("postgresql://")
}

/// How often the daemon sends its heartbeat: a quarter of the node timeout
/// (so that three in a row may fail before it is taken for down), within
/// 0.1 s to 15 s.
pub fn heartbeat_period(node_timeout: Duration) -> Duration {
    (node_timeout / 4).clamp(Duration::from_millis(100), Duration::from_secs(15))
}

/// Starts the daemon's heartbeat: its row in `nodes` (server time), at once
/// (marking a restart) and then every [`heartbeat_period`], on a thread of
/// its own (the catalog is synchronous). A failure (catalog down) is logged
/// when it starts and when it ends. The row carries the node's `role`: only
/// storage nodes are replica targets and sources.
pub fn heartbeat(
    ix: Arc<granary_search::Indexer>,
    node: String,
    role: granary_catalog::Role,
) -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("heartbeat".into())
        .spawn(move || {
            let mut restarted = true;
            let mut failing = false;
            loop {
                let period = heartbeat_period(ix.catalog.node_timeout());
                match ix.catalog.heartbeat_as(&node, restarted, role) {
                    Ok(()) => {
                        if failing {
                            tracing::info!("location catalog: heartbeat of {node} sent again");
                        }
                        failing = false;
                        restarted = false;
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!(
                                "location catalog: heartbeat of {node} not recorded: {e}; other nodes take this node for down after {:?}",
                                ix.catalog.node_timeout()
                            );
                        }
                        failing = true;
                    }
                }
                std::thread::sleep(period);
            }
        })?;
    Ok(())
}

/// Watches the federation's heartbeats, on a thread of its own: when another
/// node comes back (its heartbeat returns after it was taken for down, or
/// its daemon restarted), this node's forwarder dials its permanent faces
/// that are down at once (`faces/redial`) instead of waiting out their
/// back-off (up to 30 s), so that the routes to that node work as soon as
/// it answers. Catalog errors are passed over (tried again next period).
pub fn redial_on_return(
    catalog: Arc<Catalog>,
    me: String,
    socket: PathBuf,
    rt: tokio::runtime::Handle,
) -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("heartbeat-watch".into())
        .spawn(move || {
            let mut seen: std::collections::HashMap<String, (i64, bool)> = Default::default();
            loop {
                let t = catalog.node_timeout();
                if let Ok(nodes) = catalog.liveness(t) {
                    let mut back = Vec::new();
                    for n in nodes.into_iter().filter(|n| n.prefix != me) {
                        let was = seen.insert(n.prefix.clone(), (n.started_ms, n.up));
                        if let Some((started, up)) = was {
                            if n.up && (!up || started != n.started_ms) {
                                back.push(n.prefix);
                            }
                        }
                    }
                    if !back.is_empty() {
                        match rt.block_on(redial(&socket)) {
                            Ok(()) => tracing::info!(
                                "{} back (heartbeat): permanent faces that were down dialled now",
                                back.join(", ")
                            ),
                            Err(e) => tracing::warn!("faces/redial: {e:#}"),
                        }
                    }
                }
                std::thread::sleep(heartbeat_period(t));
            }
        })?;
    Ok(())
}

/// Asks the forwarder at `socket` to dial its down permanent faces now.
async fn redial(socket: &Path) -> anyhow::Result<()> {
    let mut c = Client::connect(socket).await?;
    c.command(
        &crate::control::nfd(),
        "faces",
        "redial",
        &granary_mgmt::ControlParameters::new(),
    )
    .await?;
    Ok(())
}

/// Where the locator looks names up.
enum Source {
    /// The shared catalog itself (`--catalog postgres://…`).
    Direct(Arc<Catalog>, Duration),
    /// A catalog over NDN (`locate`), through the daemon at `socket`.
    Ndn {
        socket: PathBuf,
        catalog: Name,
        timeout: Option<Duration>,
    },
}

/// The fetch engine's [`Locator`] for this node.
pub struct CatalogLocator {
    source: Source,
    /// The node's management socket: its RIB gives the distances.
    socket: PathBuf,
}

/// What a lookup found, as the nodes to hint, in order.
fn prefixes(locs: &[Location]) -> Vec<Name> {
    locs.iter()
        .filter_map(|l| Name::from_uri(&l.node).ok())
        .collect()
}

/// Orders `locs` nearest first by this node's RIB (its route cost to each node
/// prefix, [`rib_distance`]), least loaded at equal cost
/// ([`granary_catalog::order_nearest`]). When the RIB cannot be read, the catalog's
/// order (least loaded first) stays.
pub async fn nearest_first(socket: &Path, locs: &mut [Location]) {
    if locs.len() < 2 {
        return;
    }
    let Ok(mut c) = Client::connect(socket).await else {
        return;
    };
    let Ok(raw) = crate::control::dataset(&mut c, "/localhost/nfd/rib/list").await else {
        return;
    };
    let Ok(rib) = granary_mgmt::decode_dataset::<granary_mgmt::RibEntry>(&raw) else {
        return;
    };
    granary_catalog::order_nearest(locs, |node| {
        Name::from_uri(node)
            .ok()
            .and_then(|n| rib_distance(&rib, &n))
    });
}

/// Asks the catalog at `catalog` (over NDN, through the daemon at `socket`)
/// where `name` (`version`, or the latest an up node holds) is.
pub async fn locate_ndn(
    socket: &Path,
    catalog: &Name,
    name: &str,
    version: Option<u64>,
    timeout: Option<Duration>,
) -> Result<Vec<Location>, String> {
    let mut c = Client::connect(socket)
        .await
        .map_err(|e| format!("cannot reach the node at {}: {e}", socket.display()))?;
    let mut req = json!({ "name": name });
    if let Some(v) = version {
        req["version"] = json!(v);
    }
    if let Some(t) = timeout {
        req["node_timeout_ms"] = json!(t.as_millis() as u64);
    }
    let v = granary_search::client::ask(
        &mut c,
        catalog,
        granary_search::protocol::VERB_LOCATE,
        &req,
        4000,
    )
    .await
    .map_err(|e| format!("locate at {catalog}: {e}"))?;
    serde_json::from_value(v["locations"].clone())
        .map_err(|e| format!("locate at {catalog}: bad answer: {e}"))
}

impl Locator for CatalogLocator {
    fn locate(&self, object: &Name) -> LocateFuture {
        let name = object.to_string();
        let here = self.socket.clone();
        match &self.source {
            Source::Direct(cat, t) => {
                let (cat, t) = (cat.clone(), *t);
                Box::pin(async move {
                    let r = tokio::task::spawn_blocking(move || cat.locate(&name, None, t))
                        .await
                        .map_err(|e| e.to_string())?;
                    let mut locs = r.map_err(|e| format!("location catalog: {e}"))?;
                    nearest_first(&here, &mut locs).await;
                    Ok(prefixes(&locs))
                })
            }
            Source::Ndn {
                socket,
                catalog,
                timeout,
            } => {
                let (socket, catalog, timeout) = (socket.clone(), catalog.clone(), *timeout);
                Box::pin(async move {
                    let mut locs = locate_ndn(&socket, &catalog, &name, None, timeout).await?;
                    nearest_first(&here, &mut locs).await;
                    Ok(prefixes(&locs))
                })
            }
        }
    }
}

/// The locator of a consumer: the shared catalog `catalog` directly when it is a
/// PostgreSQL URL (checked now: a wrong or unreachable URL is an error here, before
/// anything is fetched), else the catalog over NDN at `locate_at` (default: this
/// node's, `/localhost/granary/catalog`). Call it outside a tokio runtime.
pub fn locator(
    socket: &Path,
    catalog: Option<&str>,
    locate_at: Option<&str>,
    node_timeout: Option<Duration>,
) -> anyhow::Result<LocatorRef> {
    let source = match (catalog.filter(|c| is_shared_spec(c)), locate_at) {
        (Some(url), None) => {
            let cat = Catalog::open_unindexed(url)
                .map_err(|e| anyhow::anyhow!("location catalog {}: {e}", redact(url)))?;
            let t = node_timeout
                .or_else(|| cat.federation_node_timeout().ok().flatten())
                .unwrap_or(granary_catalog::DEFAULT_NODE_TIMEOUT);
            cat.set_node_timeout(t)
                .map_err(|e| anyhow::anyhow!("--node-timeout: {e}"))?;
            Source::Direct(Arc::new(cat), t)
        }
        (_, at) => {
            let uri = at.unwrap_or(granary_search::protocol::LOCAL_PREFIX);
            let catalog =
                Name::from_uri(uri).map_err(|e| anyhow::anyhow!("--locate-at {uri:?}: {e}"))?;
            if catalog.is_empty() {
                anyhow::bail!("--locate-at: a catalog prefix, not /");
            }
            Source::Ndn {
                socket: socket.to_path_buf(),
                catalog,
                timeout: node_timeout,
            }
        }
    };
    Ok(LocatorRef(Arc::new(CatalogLocator {
        source,
        socket: socket.to_path_buf(),
    })))
}

/// A catalog URL without its password, for messages.
pub fn redact(url: &str) -> String {
    granary_catalog::redact(url)
}
