//! `granary replicate NAME [--version V] (--to NODE_PREFIX | --replicas N)`:
//! asks other nodes to hold a copy of a version that keeps the publisher's
//! signature (`granary_node::replicate`; `--replicas` placement is
//! `granary_node::placement`).

use std::path::Path;

use granary_node::replicate::{replicate_to, Request};
use granary_packet::Name;

/// `granary replicate`'s flags.
#[derive(clap::Args, Debug, Clone)]
pub struct ReplicateArgs {
    /// The name (without version; see --version).
    pub name: String,
    /// The version to replicate (default: the newest the source holds).
    #[arg(long)]
    pub version: Option<u64>,
    /// The node prefix of the node that is to hold the copy (e.g. /site/b);
    /// this node needs a route to it. Repeatable.
    #[arg(
        long = "to",
        value_name = "NODE_PREFIX",
        required_unless_present = "replicas"
    )]
    pub to: Vec<String>,
    /// Make N more copies, on up nodes of the federation's location catalog
    /// (--catalog postgres://…) that do not hold the version yet (this node
    /// and the current holders are left out; the nodes holding the fewest
    /// versions are chosen first). When fewer such nodes are up, the copies
    /// that can be made are made and the command fails naming the shortfall.
    #[arg(long, value_name = "N", conflicts_with = "to", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub replicas: Option<u32>,
    /// With --replicas: a node whose last heartbeat is older than this
    /// (seconds) is down and not chosen (default 60, the daemons' default
    /// node_timeout).
    #[arg(long, value_name = "SECONDS", requires = "replicas")]
    pub node_timeout: Option<f64>,
    /// Node prefix(es) the target fetches from, put in its Interests'
    /// ForwardingHint (default: this node's prefix).
    #[arg(long = "from", value_name = "NODE_PREFIX")]
    pub from: Vec<String>,
    /// Return once the target accepted the command, without waiting for
    /// the copy.
    #[arg(long)]
    pub no_wait: bool,
    /// Print each target's outcome as one JSON line.
    #[arg(long)]
    pub json: bool,
}

/// Runs `granary replicate`.
pub fn run(
    socket: &Path,
    data_dir: &Path,
    catalog: Option<&str>,
    a: &ReplicateArgs,
) -> anyhow::Result<()> {
    Name::from_uri(&a.name).map_err(|e| anyhow::anyhow!("{}: {e}", a.name))?;
    let mut version = a.version;
    let mut shortfall = 0;
    let mut sources = Vec::new();
    let targets = if let Some(n) = a.replicas {
        let t = granary_node::federation::node_timeout(a.node_timeout)?;
        let c =
            granary_node::placement::choose_replicas(data_dir, catalog, &a.name, a.version, n, t)?;
        let me = &c.me;
        version = Some(c.version);
        shortfall = c.shortfall;
        if !c.sources.contains(me) {
            sources = c.sources.clone();
        }
        if c.targets.is_empty() {
            anyhow::bail!(
                "--replicas {n}: no up node of the location catalog is without {} v={} (this node {me} and the holders are left out); nothing done",
                a.name,
                c.version
            );
        }
        eprintln!(
            "--replicas {n}: chose {} for {} v={}{}",
            c.targets.join(", "),
            a.name,
            c.version,
            if shortfall > 0 {
                format!(" ({shortfall} short: no other up node is without it)")
            } else {
                String::new()
            }
        );
        c.targets
            .iter()
            .map(|t| Name::from_uri(t).map_err(|e| anyhow::anyhow!("catalog node {t:?}: {e}")))
            .collect::<anyhow::Result<Vec<_>>>()?
    } else {
        a.to.iter()
            .map(|t| {
                let n = Name::from_uri(t).map_err(|e| anyhow::anyhow!("--to {t:?}: {e}"))?;
                if n.is_empty() {
                    anyhow::bail!("--to {t:?}: a node prefix such as /site/b, not /");
                }
                Ok(n)
            })
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    let fwhint = if a.from.is_empty() && !sources.is_empty() {
        sources
    } else if a.from.is_empty() {
        vec![granary_node::identity::node_prefix(data_dir)?.to_string()]
    } else {
        for f in &a.from {
            let n = Name::from_uri(f).map_err(|e| anyhow::anyhow!("--from {f:?}: {e}"))?;
            if n.is_empty() {
                anyhow::bail!("--from {f:?}: a node prefix such as /site/a, not /");
            }
        }
        a.from.clone()
    };
    let req = Request {
        name: a.name.clone(),
        version,
        fwhint,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut failed = 0;
    for t in &targets {
        let r = rt.block_on(replicate_to(socket, data_dir, t, &req, a.no_wait));
        match r {
            Ok(v) if a.json => {
                println!("{v}");
                if v["state"] == "failed" {
                    failed += 1;
                }
            }
            Ok(v) if v["state"] == "done" => {
                let how = match (&v["dedup"], &v["by_name"]) {
                    (d, _) if d.is_object() => format!(
                        "{} chunks from its own store, {} from neighbours, {} fetched by name",
                        d["local"]["chunks"], d["neighbours"]["chunks"], d["producer"]["chunks"]
                    ),
                    (_, b) if b.is_object() => {
                        format!("{} segments fetched by name", b["segments"])
                    }
                    _ if v["already"] == true => "held already".to_string(),
                    _ => String::new(),
                };
                eprintln!(
                    "{t}: holds {} ({} bytes), manifest signed by {} kept as received; {how}; {:.2} s",
                    v["versioned"].as_str().unwrap_or("?"),
                    v["size"],
                    v["signer"].as_str().unwrap_or("?"),
                    v["seconds"].as_f64().unwrap_or(0.0)
                );
            }
            Ok(v) if v["state"] == "running" => {
                eprintln!(
                    "{t}: replication {} accepted (not waiting)",
                    v["id"].as_str().unwrap_or("?")
                )
            }
            Ok(v) => {
                failed += 1;
                eprintln!(
                    "{t}: FAILED: {}",
                    v["error"].as_str().unwrap_or("no reason given")
                );
            }
            Err(e) => {
                failed += 1;
                eprintln!("{t}: FAILED: {e:#}");
            }
        }
    }
    if failed > 0 {
        anyhow::bail!("{failed} of {} replication(s) failed", targets.len());
    }
    if shortfall > 0 {
        anyhow::bail!(
            "--replicas {}: {} cop{} made, {shortfall} short: the location catalog has no other up node without the version",
            a.replicas.unwrap_or(0),
            targets.len(),
            if targets.len() == 1 { "y" } else { "ies" }
        );
    }
    Ok(())
}
