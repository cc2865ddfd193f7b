//! `granary federation status|check|locate`: the location catalog as an operator
//! sees it (docs/federation.md); the work is `granary_node::federation`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use granary_node::federation::node_timeout as timeout;

/// `granary federation …`.
#[derive(clap::Subcommand)]
pub enum FederationCmd {
    /// Nodes up and down (last heartbeat), versions held per node, and names
    /// below their `[[replication]] prefix, replicas` (from --config, else the
    /// daemon's config, else the catalog's federation settings) on fewer up
    /// nodes than asked.
    Status {
        /// Daemon config file whose `[[replication]]` tables (prefix,
        /// replicas) say how many up nodes each name should be on.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// A node silent for longer than this (seconds) is down (default:
        /// the config's node_timeout, else the catalog's, else 60).
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
        /// Seconds of silence after which a node is down (default: the
        /// catalog's node_timeout, else 60).
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
    /// The federation-wide settings in the catalog (node_timeout, replication policy): show, set, unset.
    Settings(crate::settings::SettingsArgs),
}

/// Runs `granary federation …`.
pub fn run(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    cmd: FederationCmd,
) -> anyhow::Result<()> {
    match cmd {
        FederationCmd::Settings(a) => crate::settings::run(data_dir, catalog, a),
        FederationCmd::Status {
            config,
            node_timeout,
            json,
        } => {
            let s = granary_node::federation::status(
                data_dir,
                catalog,
                config.as_deref(),
                node_timeout,
            )?;
            if json {
                println!("{}", s.json());
            } else {
                print!("{}", s.text());
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
            let locs = granary_node::federation::locate(
                data_dir,
                socket,
                catalog,
                &name,
                version,
                at.as_deref(),
                timeout(node_timeout)?,
            )?;
            if json {
                println!("{}", serde_json::json!({"name": name, "locations": locs}));
            } else if locs.is_empty() {
                anyhow::bail!("{name}: no up node holds it");
            } else {
                for l in &locs {
                    println!(
                        "{} v={} {} manifest {}{}",
                        l.name,
                        l.version,
                        l.node,
                        l.manifest_digest.as_deref().unwrap_or("?"),
                        if l.is_cache() { " (cache)" } else { "" }
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
            let t = timeout(node_timeout)?;
            let c = granary_node::federation::check(
                data_dir,
                socket,
                catalog,
                sample,
                node.as_deref(),
                Duration::from_millis(lifetime),
                t,
            )?;
            let bad = c.bad();
            if json {
                crate::out::json_answer(&c.json());
            } else {
                print!("{}", c.text());
            }
            if bad > 0 {
                anyhow::bail!("{bad} location(s) not served by the node that claims them");
            }
            Ok(())
        }
    }
}
