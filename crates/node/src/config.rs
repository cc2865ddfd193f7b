//! The node's configuration file (`granary daemon --config FILE`, TOML), read
//! into one typed struct, [`NodeConfig`], by the daemon and by every client
//! command that reads a config file (`federation status --config`). Every key
//! the daemon takes is a field here: who the node is (`node_prefix`, `role`),
//! the federation-wide settings (`node_timeout`, `[[replication]]`,
//! `replication_period`, `replication_retry`, `replication_attempts`) and
//! whether the file publishes them to the catalog (`federation_settings`), the
//! HTTP gateway's keys, and the forwarder's ([`DaemonConfig`], flattened: its
//! keys sit at the top level). A key none of them knows is an error naming it;
//! so is a value of the wrong type or out of range, and the error names the
//! file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use granary_catalog::{FederationSettings, Role};
use granary_forwarder::daemon::DaemonConfig;
use granary_packet::Name;
use serde::{Deserialize, Deserializer};

use crate::policy::Rule;

/// What a node does with the federation-wide keys of its config file
/// (`federation_settings = "local" | "publish"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SettingsMode {
    /// The file's keys override the catalog's on this node only (the default).
    #[default]
    Local,
    /// The file's keys are written to the catalog at start, for every node and
    /// command on it; this node then follows the catalog like the others (a later
    /// `granary federation settings set` changes it too, until its next start).
    Publish,
}

/// The daemon's config file, typed.
#[derive(Debug, Default, Deserialize)]
pub struct NodeConfig {
    /// The node prefix (`--node-prefix` overrides it).
    pub node_prefix: Option<String>,
    /// The node's role (`--role` overrides it; default storage).
    pub role: Option<Role>,
    /// What the federation-wide keys below are for ([`SettingsMode`]).
    pub federation_settings: Option<SettingsMode>,
    /// Seconds of silence after which a node is down (federation-wide).
    pub node_timeout: Option<f64>,
    /// `[[replication]] prefix, replicas` (federation-wide).
    pub replication: Option<Vec<Rule>>,
    /// Seconds between replication rounds (federation-wide).
    pub replication_period: Option<f64>,
    /// Seconds before a failed copy is tried again (federation-wide).
    pub replication_retry: Option<f64>,
    /// Tries of one copy at one target (federation-wide).
    pub replication_attempts: Option<u32>,
    /// The gateway's `IP:PORT`, a port, or `"off"`/`false`.
    #[serde(default, deserialize_with = "addr")]
    pub http: Option<String>,
    /// HTTPS: `IP:PORT`, a port, or `"off"`/`false`.
    #[serde(default, deserialize_with = "addr")]
    pub https: Option<String>,
    /// PEM certificate chain for HTTPS.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for HTTPS.
    pub tls_key: Option<PathBuf>,
    /// Most connections with a request in progress (1 to 1000000).
    pub http_max_conns: Option<u64>,
    /// Most open connections from one IP address (1 to 1000000).
    pub http_max_conns_per_client: Option<u64>,
    /// Most WebSocket faces (1 to 1000000).
    pub http_max_websockets: Option<u64>,
    /// Seconds to send a request head (0.1 to 86400).
    pub http_header_timeout: Option<f64>,
    /// Seconds an HTTP/2 connection or WebSocket face may stay idle (0.1 to 86400).
    pub http_idle_timeout: Option<f64>,
    /// Seconds a request may work before it is answered 503 (0.1 to 86400).
    pub http_deadline: Option<f64>,
    /// The forwarder's keys (`socket`, `listen`, `cs_capacity`, `[[route]]`, …);
    /// any other key is refused here, by name.
    #[serde(flatten, deserialize_with = "forwarder")]
    pub forwarder: DaemonConfig,
}

/// `http`/`https`: a string, a port number, or `false` (off).
fn addr<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    use serde::de::Error;
    Ok(match toml::Value::deserialize(d)? {
        toml::Value::String(s) => Some(s),
        toml::Value::Boolean(false) => Some("off".into()),
        toml::Value::Integer(p) => Some(p.to_string()),
        other => {
            return Err(D::Error::custom(format!(
                "{other}: expected \"IP:PORT\", a port or \"off\""
            )))
        }
    })
}

/// The keys left when the others are taken: the forwarder's, whose own struct
/// refuses any key it does not know.
fn forwarder<'de, D: Deserializer<'de>>(d: D) -> Result<DaemonConfig, D::Error> {
    use serde::de::Error;
    let rest = toml::Table::deserialize(d)?;
    DaemonConfig::deserialize(rest).map_err(|e| {
        let e = e.to_string();
        // The forwarder's list of keys is not the file's: say which key instead.
        match e.strip_prefix("unknown field ") {
            Some(tail) => D::Error::custom(format!(
                "unknown key {} (see docs/federation.md and `granary daemon --help` for the keys)",
                tail.split(',').next().unwrap_or(tail)
            )),
            None => D::Error::custom(e),
        }
    })
}

impl NodeConfig {
    /// Reads and checks `path`; an error names the file and the key.
    pub fn load(path: &Path) -> anyhow::Result<NodeConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// Parses and checks a config file's text.
    pub fn parse(text: &str) -> Result<NodeConfig, String> {
        let c: NodeConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        c.check()?;
        Ok(c)
    }

    /// Checks the values serde cannot: ranges, names, rules.
    pub fn check(&self) -> Result<(), String> {
        // The federation-wide keys: the catalog's own checks (what is stored
        // there must be what a file may say), then each rule's prefix as a name.
        for (k, v) in self.federation().pairs() {
            granary_catalog::settings::check_setting(k, &v).map_err(|e| plain(k, e))?;
        }
        for r in self.replication.iter().flatten() {
            Name::from_uri(&r.prefix)
                .map_err(|e| format!("[[replication]] prefix {:?}: {e}", r.prefix))?;
        }
        let counts = [
            ("http_max_conns", self.http_max_conns),
            ("http_max_conns_per_client", self.http_max_conns_per_client),
            ("http_max_websockets", self.http_max_websockets),
        ];
        for (k, v) in counts {
            if let Some(n) = v.filter(|n| !(1..=1_000_000).contains(n)) {
                return Err(format!("{k} = {n}: expected a number from 1 to 1000000"));
            }
        }
        let seconds = [
            ("http_header_timeout", self.http_header_timeout),
            ("http_idle_timeout", self.http_idle_timeout),
            ("http_deadline", self.http_deadline),
        ];
        for (k, v) in seconds {
            if let Some(s) = v.filter(|s| !(0.1..=86400.0).contains(s)) {
                return Err(format!("{k} = {s}: expected seconds from 0.1 to 86400"));
            }
        }
        Ok(())
    }

    /// The federation-wide keys the file sets.
    pub fn federation(&self) -> FederationSettings {
        FederationSettings {
            node_timeout: self.node_timeout,
            replication: self.replication.clone(),
            replication_period: self.replication_period,
            replication_retry: self.replication_retry,
            replication_attempts: self.replication_attempts,
        }
    }

    /// The file's `node_timeout`, if it sets one.
    pub fn node_timeout(&self) -> Option<Duration> {
        self.node_timeout.map(Duration::from_secs_f64)
    }

    /// The gateway's keys, as [`crate::gateway::Flags`] (which the flags override).
    pub fn http_flags(&self) -> crate::gateway::Flags {
        crate::gateway::Flags {
            http: self.http.clone(),
            https: self.https.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            http_max_conns: self.http_max_conns,
            http_max_conns_per_client: self.http_max_conns_per_client,
            http_max_websockets: self.http_max_websockets,
            http_header_timeout: self.http_header_timeout,
            http_idle_timeout: self.http_idle_timeout,
            http_deadline: self.http_deadline,
        }
    }
}

/// A catalog check's message for a config file: `[[replication]]` for the rules
/// (as the file spells them), without the catalog's "invalid input" prefix.
fn plain(key: &str, e: granary_catalog::Error) -> String {
    let msg = match e {
        granary_catalog::Error::Invalid(m) => m,
        e => e.to_string(),
    };
    if key == "replication" {
        let msg = msg
            .strip_prefix("replication: ")
            .or_else(|| msg.strip_prefix("replication "))
            .unwrap_or(&msg);
        format!("[[replication]] {msg}")
    } else {
        msg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_typed_and_an_unknown_one_is_named() {
        let c = NodeConfig::parse(
            "node_prefix = \"/site/a\"\nrole = \"router\"\nfederation_settings = \"publish\"\n\
             node_timeout = 5\nreplication_period = 2\nreplication_retry = 0.5\nreplication_attempts = 4\n\
             http = false\nhttps = 8443\nhttp_max_conns = 9\nhttp_header_timeout = 2.5\n\
             cs_capacity = 1000\nlisten = [\"tcp://127.0.0.1:0\"]\n\
             [[replication]]\nprefix = \"/cmip6\"\nreplicas = 2\n\
             [[route]]\nprefix = \"/x\"\nface = \"tcp4://127.0.0.1:6363\"\n",
        )
        .unwrap();
        assert_eq!(c.node_prefix.as_deref(), Some("/site/a"));
        assert_eq!(c.role, Some(Role::Router));
        assert_eq!(c.federation_settings, Some(SettingsMode::Publish));
        assert_eq!(c.node_timeout(), Some(Duration::from_secs(5)));
        assert_eq!(c.replication_attempts, Some(4));
        let f = c.federation();
        assert_eq!(f.replication.as_ref().map(Vec::len), Some(1));
        assert_eq!(f.replication_retry, Some(0.5));
        let h = c.http_flags();
        assert_eq!(
            (h.http.as_deref(), h.https.as_deref(), h.http_max_conns),
            (Some("off"), Some("8443"), Some(9))
        );
        assert_eq!(c.forwarder.cs_capacity, 1000);
        assert_eq!(c.forwarder.listen, ["tcp://127.0.0.1:0"]);
        assert_eq!(c.forwarder.route.len(), 1);
        // Nothing set: every default.
        let c = NodeConfig::parse("").unwrap();
        assert!(c.federation().is_empty());
        assert_eq!(c.forwarder.cs_capacity, DaemonConfig::default().cs_capacity);
        for (bad, says) in [
            ("node_timout = 5\n", "node_timout"),
            ("node_prefix = 3\n", "node_prefix"),
            ("role = \"boss\"\n", "boss"),
            ("federation_settings = \"shout\"\n", "shout"),
            ("node_timeout = 0\n", "node_timeout"),
            ("node_timeout = \"soon\"\n", "node_timeout"),
            ("replication_period = 0\n", "replication_period"),
            ("replication_retry = \"soon\"\n", "replication_retry"),
            ("replication_attempts = 0\n", "replication_attempts"),
            ("replication_attempts = 1.5\n", "replication_attempts"),
            ("http_max_conns = 0\n", "http_max_conns"),
            ("http_header_timeout = 0\n", "http_header_timeout"),
            ("http = true\n", "IP:PORT"),
            ("cs_capacity = \"big\"\n", "big"),
            ("[[route]]\nprefix = \"/x\"\n", "missing field `face`"),
        ] {
            let e = NodeConfig::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_rules_are_refused_with_the_reason() {
        let parse = |s: &str| NodeConfig::parse(s).map(|c| c.replication.unwrap_or_default());
        assert_eq!(
            parse("[[replication]]\nprefix = \"/cmip6\"\nreplicas = 2\n").unwrap(),
            [Rule {
                prefix: "/cmip6".into(),
                replicas: 2
            }]
        );
        assert!(parse("x_unknown = 1\n").is_err());
        for (bad, says) in [
            ("[[replication]]\nprefix = \"/a\"\nreplicas = 0\n", "at least 1"),
            ("[[replication]]\nprefix = \"/a\"\n", "replicas"),
            ("[[replication]]\nprefix = \"/a\"\nreplicas = 1\ncopies = 2\n", "copies"),
            (
                "[[replication]]\nprefix = \"/a\"\nreplicas = 1\n[[replication]]\nprefix = \"/a/\"\nreplicas = 2\n",
                "twice",
            ),
            ("replication = 3\n", "replication"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
