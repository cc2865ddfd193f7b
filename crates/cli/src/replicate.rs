//! `granary replicate NAME [--version V] (--to NODE_PREFIX | --replicas N)`:
//! asks other nodes to hold a copy of a version that keeps the publisher's
//! signature (`granary_node::replicate`).

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
    /// Copies wanted on other nodes, chosen among the up nodes of the
    /// location catalog (needs the federation's location catalog; without
    /// one, name the nodes with --to).
    #[arg(long, value_name = "N", conflicts_with = "to")]
    pub replicas: Option<u32>,
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
pub fn run(socket: &Path, data_dir: &Path, a: &ReplicateArgs) -> anyhow::Result<()> {
    Name::from_uri(&a.name).map_err(|e| anyhow::anyhow!("{}: {e}", a.name))?;
    if a.replicas.is_some() {
        anyhow::bail!(
            "--replicas needs the federation's location catalog (which nodes are up), which this node does not have; name the target nodes with --to NODE_PREFIX"
        );
    }
    let targets =
        a.to.iter()
            .map(|t| {
                let n = Name::from_uri(t).map_err(|e| anyhow::anyhow!("--to {t:?}: {e}"))?;
                if n.is_empty() {
                    anyhow::bail!("--to {t:?}: a node prefix such as /site/b, not /");
                }
                Ok(n)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
    let fwhint = if a.from.is_empty() {
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
        version: a.version,
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
    Ok(())
}
