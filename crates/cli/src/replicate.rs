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
    /// Make N more copies, on up storage nodes of the federation's location
    /// catalog (--catalog postgres://…) that do not hold the version yet
    /// (this node, the current holders, routers and clients are left out;
    /// the nodes holding the fewest versions are tried first). A node that
    /// refuses or fails passes the copy to the next, until N copies are
    /// made or no candidate remains; then the command fails naming the
    /// shortfall.
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
    if let Some(n) = a.replicas {
        return run_replicas(socket, data_dir, catalog, a, n);
    }
    let targets = granary_node::replicate::targets(&a.to)?;
    let req = request(data_dir, a, a.version, Vec::new())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut failed = 0;
    for t in &targets {
        let r = rt.block_on(replicate_to(socket, data_dir, t, &req, a.no_wait));
        if !report(&t.to_string(), r, a.json) {
            failed += 1;
        }
    }
    if failed > 0 {
        anyhow::bail!("{failed} of {} replication(s) failed", targets.len());
    }
    Ok(())
}

/// The command's parameters (granary_node::replicate::request).
fn request(
    data_dir: &Path,
    a: &ReplicateArgs,
    version: Option<u64>,
    sources: Vec<String>,
) -> anyhow::Result<Request> {
    granary_node::replicate::request(data_dir, &a.name, version, &a.from, sources)
}

/// Prints one target's outcome; false when it failed.
fn report(t: &str, r: anyhow::Result<serde_json::Value>, json: bool) -> bool {
    match r {
        Ok(v) if json => {
            // One JSON line per target is the answer (no error line after).
            crate::out::json_answer(&v);
            v["state"] != "failed"
        }
        Ok(v) => {
            let (line, ok) = granary_node::replicate::outcome_line(t, &v);
            eprintln!("{line}");
            ok
        }
        Err(e) => {
            if json {
                crate::out::json_answer(
                    &serde_json::json!({"node": t, "state": "failed", "error": format!("{e:#}")}),
                );
            }
            eprintln!("{t}: FAILED: {e:#}");
            false
        }
    }
}

/// `--replicas N`: the candidates from the location catalog, tried in
/// order until N copies are made or none remains (granary_node::placement).
fn run_replicas(
    socket: &Path,
    data_dir: &Path,
    catalog: Option<&str>,
    a: &ReplicateArgs,
    n: u32,
) -> anyhow::Result<()> {
    let t = granary_node::federation::node_timeout(a.node_timeout)?;
    let c = granary_node::placement::choose_replicas(data_dir, catalog, &a.name, a.version, n, t)?;
    let me = &c.me;
    let sources = if c.sources.contains(me) {
        Vec::new()
    } else {
        c.sources.clone()
    };
    if c.candidates.is_empty() {
        anyhow::bail!(
            "--replicas {n}: no up storage node of the location catalog is without {} v={} (this node {me}, the holders, routers and clients are left out); nothing done",
            a.name,
            c.version
        );
    }
    let rest = &c.candidates[c.targets.len()..];
    eprintln!(
        "--replicas {n}: chose {} for {} v={}{}",
        c.targets.join(", "),
        a.name,
        c.version,
        if rest.is_empty() {
            String::new()
        } else {
            format!(
                " (next, for a node that refuses or fails: {})",
                rest.join(", ")
            )
        }
    );
    let req = request(data_dir, a, Some(c.version), sources)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let made = rt.block_on(granary_node::placement::replicate_until(
        socket,
        data_dir,
        &c,
        n,
        &req,
        a.no_wait,
        |t, o| {
            let r = match o {
                granary_node::placement::Outcome::Made(v) => Ok(v.clone()),
                granary_node::placement::Outcome::Failed(e) => Err(anyhow::anyhow!(
                    "{e}; passing the copy to the next candidate"
                )),
            };
            report(t, r, a.json);
        },
    ));
    if made < n {
        anyhow::bail!(
            "--replicas {n}: {made} cop{} made, {} short: no candidate remains (every up storage node without the version was tried)",
            if made == 1 { "y" } else { "ies" },
            n - made
        );
    }
    Ok(())
}
