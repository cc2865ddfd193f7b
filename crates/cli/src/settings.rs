//! `granary federation settings [show|set|unset]`: the federation-wide
//! settings kept in the catalog (docs/federation.md); the work is
//! `granary_node::settings` and `granary_catalog::settings`.

use std::path::Path;

/// `granary federation settings …`.
#[derive(clap::Args)]
pub struct SettingsArgs {
    #[command(subcommand)]
    action: Option<Action>,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Print the settings, their generation and who changed each (the
    /// default action).
    Show {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Set KEY to VALUE for every node and command on the catalog. Keys:
    /// node_timeout (seconds, 0.001 to 30 days), replication (the rules, e.g.
    /// '[{prefix = "/cmip6", replicas = 2}]', JSON or TOML), replication_period
    /// and replication_retry (seconds, 0.1 to 86400), replication_attempts (1
    /// to 100). A bad value is refused and nothing is stored. Running daemons
    /// apply it within one heartbeat period, without a restart.
    Set {
        /// The setting.
        key: String,
        /// Its value (JSON, or a TOML value as a config file would write it).
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Unset KEY: each node uses its own config file's value, else the default.
    Unset {
        /// The setting.
        key: String,
    },
}

/// Runs `granary federation settings …` on the catalog the command uses
/// (--catalog, else this data directory's daemon's, else its own).
pub fn run(data_dir: &Path, catalog: Option<&str>, a: SettingsArgs) -> anyhow::Result<()> {
    use granary_node::settings;
    let cat = granary_node::federation::open(data_dir, catalog)?;
    match a.action.unwrap_or(Action::Show { json: false }) {
        Action::Show { json: true } => {
            crate::out::json_answer(&settings::show(&cat, data_dir)?.json())
        }
        Action::Show { json: false } => print!("{}", settings::show(&cat, data_dir)?.text()),
        Action::Set { key, value } => {
            let gen = settings::set(&cat, &key, &value, &settings::changed_by(data_dir))?;
            println!(
                "{key} set (generation {gen}); running daemons apply it within one heartbeat period"
            );
        }
        Action::Unset { key } => {
            let gen = cat
                .unset_federation_setting(&key, &settings::changed_by(data_dir))
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{key} unset (generation {gen})");
        }
    }
    Ok(())
}
