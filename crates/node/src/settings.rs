//! The federation-wide settings a node and its commands use (`node_timeout` and
//! the replication policy), and where each comes from. Precedence, highest first:
//! a command-line flag (`--node-timeout`), the node's config file (when it keeps
//! them to itself: `federation_settings = "local"`, the default), the catalog's
//! federation settings ([`granary_catalog::settings`]), the built-in default.
//!
//! A daemon follows the catalog while it runs ([`Follower`]): it compares the
//! settings' generation with the one it applied at every heartbeat period (one
//! small query) and, when it moved, reads them again and applies the change to
//! its liveness judgement (the catalog handle's node timeout, which the
//! heartbeat, the location lookups it answers and the planner use) and to its
//! replication policy, without a restart; each change is logged. A daemon whose
//! file says `federation_settings = "publish"` writes the file's keys to the
//! catalog at start (and as soon as the catalog answers, if it does not yet).

use std::sync::Arc;
use std::time::Duration;

use granary_catalog::{Catalog, FederationSettings};

use crate::policy::{Policy, Settings, SharedPolicy};

/// Each key from `local` when it sets it, else from `catalog`.
pub fn overlay(local: &FederationSettings, catalog: &FederationSettings) -> FederationSettings {
    FederationSettings {
        node_timeout: local.node_timeout.or(catalog.node_timeout),
        replication: local
            .replication
            .clone()
            .or_else(|| catalog.replication.clone()),
        replication_period: local.replication_period.or(catalog.replication_period),
        replication_retry: local.replication_retry.or(catalog.replication_retry),
        replication_attempts: local.replication_attempts.or(catalog.replication_attempts),
    }
}

/// The node timeout settings give (unset: the built-in default).
pub fn node_timeout(s: &FederationSettings) -> Duration {
    s.node_timeout.filter(|t| t.is_finite() && *t > 0.0).map_or(
        granary_catalog::DEFAULT_NODE_TIMEOUT,
        Duration::from_secs_f64,
    )
}

/// The replication policy settings give (unset: no rules, default timing).
pub fn policy(s: &FederationSettings) -> Policy {
    Policy {
        rules: s.replication.clone().unwrap_or_default(),
        settings: Settings::from_federation(s),
    }
}

/// A setting's value for a log line.
fn value_of(key: &str, s: &FederationSettings) -> String {
    s.pairs()
        .into_iter()
        .find(|(k, _)| *k == key)
        .map_or_else(|| "default".to_string(), |(_, v)| v.to_string())
}

/// Keeps a daemon's node timeout and replication policy with the catalog's
/// federation settings (see the module's documentation).
pub struct Follower {
    catalog: Arc<Catalog>,
    /// The config file's keys that override the catalog's on this node.
    local: FederationSettings,
    /// The config file's keys still to be written to the catalog.
    publish: Option<FederationSettings>,
    /// This node (who published).
    me: String,
    policy: Arc<SharedPolicy>,
    /// The generation applied (-1: none read yet).
    gen: i64,
    /// What is applied now (local over catalog).
    applied: FederationSettings,
    last_warning: String,
}

impl Follower {
    /// Applies `local` (the file's overriding keys) over the catalog's settings to
    /// `catalog`'s node timeout and to `policy`, publishing `publish` first. A
    /// catalog that cannot be read now leaves the file's values and the defaults
    /// applied (logged); [`Follower::spawn`] tries again.
    pub fn start(
        catalog: Arc<Catalog>,
        local: FederationSettings,
        publish: Option<FederationSettings>,
        me: String,
        policy: Arc<SharedPolicy>,
    ) -> Follower {
        let mut f = Follower {
            catalog,
            applied: local.clone(),
            local,
            publish: publish.filter(|p| !p.is_empty()),
            me,
            policy,
            gen: -1,
            last_warning: String::new(),
        };
        f.apply(f.applied.clone(), None);
        f.tick();
        f
    }

    /// Follows the catalog on a thread of its own, for as long as the daemon runs.
    pub fn spawn(mut self) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("federation-settings".into())
            .spawn(move || loop {
                std::thread::sleep(crate::locate::heartbeat_period(self.catalog.node_timeout()));
                self.tick();
            })
            .map(|_| ())
    }

    /// One look at the catalog: publishes what is to be published, then applies
    /// the settings if their generation moved. Failures are logged once each.
    pub fn tick(&mut self) {
        if let Err(e) = self.try_tick() {
            if e != self.last_warning {
                tracing::warn!(
                    "federation settings: {e}; the values applied stay until the catalog answers"
                );
                self.last_warning = e;
            }
        } else {
            self.last_warning.clear();
        }
    }

    fn try_tick(&mut self) -> Result<(), String> {
        if let Some(p) = &self.publish {
            // What the catalog holds already is not written again (every site
            // may publish the same file at each start).
            let now = self
                .catalog
                .federation_settings()
                .map_err(|e| format!("not published to the catalog yet ({e})"))?
                .settings;
            if overlay(p, &now) == now {
                tracing::info!("federation settings: the catalog holds the config file's already");
                self.publish = None;
            }
        }
        if let Some(p) = &self.publish {
            let gen = self
                .catalog
                .set_federation_settings(p, &self.me)
                .map_err(|e| format!("not published to the catalog yet ({e})"))?;
            let keys: Vec<&str> = p.pairs().into_iter().map(|(k, _)| k).collect();
            tracing::info!(
                "federation settings: published {} to the catalog (generation {gen}) from the config file",
                keys.join(", ")
            );
            self.publish = None;
        }
        let Some(stored) = self
            .catalog
            .federation_settings_since(self.gen)
            .map_err(|e| format!("cannot read the catalog's ({e})"))?
        else {
            return Ok(());
        };
        self.gen = stored.gen;
        let merged = overlay(&self.local, &stored.settings);
        self.apply(merged, Some(&stored));
        Ok(())
    }

    /// Applies `merged`, logging each key that changed (and who changed it in the
    /// catalog).
    fn apply(
        &mut self,
        merged: FederationSettings,
        stored: Option<&granary_catalog::StoredSettings>,
    ) {
        for key in granary_catalog::SETTING_KEYS {
            let (old, new) = (value_of(key, &self.applied), value_of(key, &merged));
            let first = stored.is_none();
            if old == new && !first {
                continue;
            }
            let from = if self.local.pairs().iter().any(|(k, _)| k == key) {
                "the config file".to_string()
            } else if let Some(c) =
                stored.and_then(|s| s.changes.iter().find(|c| c.key == *key && c.set))
            {
                format!("the catalog, generation {}, set by {}", c.gen, c.changed_by)
            } else {
                "built in".to_string()
            };
            if first {
                tracing::info!("federation setting {key} = {new} ({from})");
            } else {
                tracing::info!("federation setting {key} changed: {old} -> {new} ({from})");
            }
        }
        if let Err(e) = self.catalog.set_node_timeout(node_timeout(&merged)) {
            tracing::warn!("federation settings: node_timeout not applied: {e}");
        }
        self.policy.set(policy(&merged));
        self.applied = merged;
    }
}

/// A value as an operator types it (`granary federation settings set KEY VALUE`):
/// JSON (`5`, `[{"prefix": "/cmip6", "replicas": 2}]`), else a TOML value
/// (`[{prefix = "/cmip6", replicas = 2}]`), as a config file would say it.
pub fn parse_value(text: &str) -> anyhow::Result<serde_json::Value> {
    if let Ok(v) = serde_json::from_str(text) {
        return Ok(v);
    }
    let t: toml::Table = toml::from_str(&format!("v = {text}"))
        .map_err(|_| anyhow::anyhow!("{text:?}: not a JSON or TOML value"))?;
    let v = t.get("v").cloned().unwrap_or(toml::Value::Boolean(false));
    Ok(serde_json::to_value(v)?)
}

/// Sets `key` to `text` ([`parse_value`]) in `cat`'s federation settings, with the
/// checks a config file gets (the catalog's, and each rule's prefix read as a
/// name); `by` says who. Returns the new generation.
pub fn set(cat: &Catalog, key: &str, text: &str, by: &str) -> anyhow::Result<i64> {
    let v = parse_value(text)?;
    if key == "replication" {
        if let Ok(rules) = serde_json::from_value::<Vec<crate::policy::Rule>>(v.clone()) {
            for r in &rules {
                granary_packet::Name::from_uri(&r.prefix)
                    .map_err(|e| anyhow::anyhow!("replication prefix {:?}: {e}", r.prefix))?;
            }
        }
    }
    cat.set_federation_setting(key, &v, by)
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// What `granary federation settings show` reports: the catalog's settings, and
/// the keys this data directory's daemon keeps to itself (its config file's,
/// `federation_settings = "local"`), which override them here.
pub struct Shown {
    /// The catalog's settings, generation and last changes.
    pub stored: granary_catalog::StoredSettings,
    /// Keys this node's config file overrides.
    pub overridden_here: Vec<&'static str>,
}

/// Reads [`Shown`] from `cat` for the node of `data_dir`.
pub fn show(cat: &Catalog, data_dir: &std::path::Path) -> anyhow::Result<Shown> {
    let stored = cat
        .federation_settings()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let own = crate::catalog::daemon_settings(data_dir);
    let mut overridden_here = Vec::new();
    if own.node_timeout.is_some() {
        overridden_here.push("node_timeout");
    }
    if own.replication.is_some() {
        overridden_here.push("replication");
    }
    Ok(Shown {
        stored,
        overridden_here,
    })
}

impl Shown {
    /// The JSON answer (`--json`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "generation": self.stored.gen,
            "settings": self.stored.settings,
            "changes": self.stored.changes,
            "overridden_here": self.overridden_here,
        })
    }

    /// The text: the generation, then each key's value and who set it.
    pub fn text(&self) -> String {
        let s = &self.stored;
        let mut out = format!("generation {}\n", s.gen);
        let set = s.settings.pairs();
        for key in granary_catalog::SETTING_KEYS {
            match set.iter().find(|(k, _)| k == key) {
                Some((_, v)) => {
                    out.push_str(&format!("{key} = {v}"));
                    if let Some(c) = s.changes.iter().find(|c| c.key == *key) {
                        out.push_str(&format!(
                            "  (generation {}, set by {})",
                            c.gen, c.changed_by
                        ));
                    }
                    out.push('\n');
                }
                None => out.push_str(&format!(
                    "{key}: not set (each node's own value, else the default)\n"
                )),
            }
        }
        if !self.overridden_here.is_empty() {
            out.push_str(&format!(
                "this node's config file overrides: {} (federation_settings = \"local\")\n",
                self.overridden_here.join(", ")
            ));
        }
        out
    }
}

/// Who changes a setting from `data_dir`'s node: the command and the node.
pub fn changed_by(data_dir: &std::path::Path) -> String {
    crate::identity::node_prefix(data_dir)
        .map(|n| format!("granary federation settings at {n}"))
        .unwrap_or_else(|_| "granary federation settings".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_catalog::ReplicationRule;

    #[test]
    fn the_file_overrides_the_catalog_key_by_key() {
        let file = FederationSettings {
            node_timeout: Some(5.0),
            ..Default::default()
        };
        let cat = FederationSettings {
            node_timeout: Some(30.0),
            replication: Some(vec![ReplicationRule {
                prefix: "/cmip6".into(),
                replicas: 2,
            }]),
            replication_attempts: Some(7),
            ..Default::default()
        };
        let m = overlay(&file, &cat);
        assert_eq!(node_timeout(&m), Duration::from_secs(5));
        let p = policy(&m);
        assert_eq!((p.rules.len(), p.settings.attempts), (1, 7));
        assert_eq!(p.settings.period, crate::policy::PERIOD);
        // Nothing anywhere: the built-in defaults.
        let none = overlay(&Default::default(), &Default::default());
        assert_eq!(node_timeout(&none), granary_catalog::DEFAULT_NODE_TIMEOUT);
        assert_eq!(policy(&none), Policy::default());
    }

    #[test]
    fn a_follower_publishes_then_follows_the_catalog() {
        let d = tempfile::tempdir().unwrap();
        let cat = Arc::new(Catalog::open_unindexed(d.path().to_str().unwrap()).unwrap());
        let file = FederationSettings {
            node_timeout: Some(4.0),
            replication: Some(vec![ReplicationRule {
                prefix: "/cmip6".into(),
                replicas: 2,
            }]),
            ..Default::default()
        };
        let shared = SharedPolicy::new(Policy::default());
        // Publishing: the file's keys go to the catalog; the node follows it.
        let mut f = Follower::start(
            cat.clone(),
            FederationSettings::default(),
            Some(file.clone()),
            "/site/a".into(),
            shared.clone(),
        );
        assert_eq!(cat.federation_settings().unwrap().settings, file);
        assert_eq!(cat.node_timeout(), Duration::from_secs(4));
        assert_eq!(shared.get().1.rules.len(), 1);
        // A change in the catalog (another command, another node) applies at
        // the next look, without a restart.
        let other = Catalog::open_unindexed(d.path().to_str().unwrap()).unwrap();
        other
            .set_federation_setting("node_timeout", &serde_json::json!(9), "operator")
            .unwrap();
        other
            .set_federation_setting("replication", &serde_json::json!([]), "operator")
            .unwrap();
        f.tick();
        assert_eq!(cat.node_timeout(), Duration::from_secs(9));
        assert!(shared.get().1.rules.is_empty());
        assert_eq!(shared.get().0, 2);
        // A node that keeps its own value (local) is not moved by the catalog's.
        let mine = SharedPolicy::new(Policy::default());
        let cat2 = Arc::new(Catalog::open_unindexed(d.path().to_str().unwrap()).unwrap());
        let mut g = Follower::start(
            cat2.clone(),
            FederationSettings {
                node_timeout: Some(2.0),
                ..Default::default()
            },
            None,
            "/site/b".into(),
            mine,
        );
        assert_eq!(cat2.node_timeout(), Duration::from_secs(2));
        other
            .set_federation_setting("node_timeout", &serde_json::json!(11), "operator")
            .unwrap();
        g.tick();
        assert_eq!(cat2.node_timeout(), Duration::from_secs(2));
    }

    #[test]
    fn values_are_typed_as_json_or_toml_and_checked() {
        assert_eq!(parse_value("5").unwrap(), serde_json::json!(5));
        let want = serde_json::json!([{"prefix": "/cmip6", "replicas": 2}]);
        assert_eq!(
            parse_value(r#"[{"prefix": "/cmip6", "replicas": 2}]"#).unwrap(),
            want
        );
        assert_eq!(
            parse_value(r#"[{prefix = "/cmip6", replicas = 2}]"#).unwrap(),
            want
        );
        assert!(parse_value("five seconds").is_err());
        let d = tempfile::tempdir().unwrap();
        let cat = Catalog::open_unindexed(d.path().to_str().unwrap()).unwrap();
        assert_eq!(set(&cat, "node_timeout", "5", "test").unwrap(), 1);
        for (k, v) in [
            ("node_timeout", "-5"),
            ("replication", r#"[{prefix = "/a", replicas = 0}]"#),
            ("replicas", "2"),
        ] {
            assert!(set(&cat, k, v, "test").is_err(), "{k} = {v}");
        }
        assert_eq!(cat.federation_settings_gen().unwrap(), 1);
        let shown = show(&cat, d.path()).unwrap();
        let text = shown.text();
        assert!(text.starts_with("generation 1\n"), "{text}");
        assert!(
            text.contains("node_timeout = 5.0  (generation 1, set by test)"),
            "{text}"
        );
        assert!(text.contains("replication: not set"), "{text}");
        assert_eq!(shown.json()["settings"]["node_timeout"], 5.0);
    }
}
