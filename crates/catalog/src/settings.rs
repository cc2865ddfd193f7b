//! Federation-wide settings kept in the catalog, so that every node and every
//! client command on one catalog sees the same ones: `node_timeout` and the
//! replication policy (`replication` rules, `replication_period`,
//! `replication_retry`, `replication_attempts`).
//!
//! One table in both back ends, `federation_settings (key, value, gen, changed,
//! changed_by)`: one row per key, its value as JSON (`NULL`: unset), stamped with
//! a generation number (one more than the highest before it, writers serialised),
//! the server's time and who set it. The highest `gen` is the settings'
//! generation: a node compares it with the one it last read ([`Catalog::federation_settings_gen`],
//! one small query) and reads the settings again only when it moved. The table is
//! made by the first write, so catalogs made before it need no migration; a catalog
//! without it has no settings (generation 0).
//!
//! Every value is checked before anything is written ([`check_setting`]): a bad
//! value or an unknown key is refused with an error naming it, and nothing of the
//! call is stored.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{invalid, Error, Result};
use crate::record::{check_name, check_plain, MAX_KEY};
use crate::Catalog;

/// The federation-wide settings' keys, in the order they are shown.
pub const SETTING_KEYS: &[&str] = &[
    "node_timeout",
    "replication",
    "replication_period",
    "replication_retry",
    "replication_attempts",
];

/// One replication rule: names under `prefix` are to be held by `replicas`
/// up storage nodes (`[[replication]]` in a node's config file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicationRule {
    /// Names under this prefix…
    pub prefix: String,
    /// …are to be held by this many up storage nodes (at least 1).
    pub replicas: u32,
}

/// The federation-wide settings; `None`: not set (the node's own value, or the
/// built-in default, applies).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FederationSettings {
    /// Seconds after its last heartbeat a node is taken for down (0.001 to 30 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_timeout: Option<f64>,
    /// The replication rules (an empty list is a setting too: no rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<Vec<ReplicationRule>>,
    /// Seconds between replication rounds (0.1 to 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_period: Option<f64>,
    /// Seconds before a failed copy is tried again (0.1 to 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_retry: Option<f64>,
    /// Tries of one copy at one target before it goes to the next (1 to 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_attempts: Option<u32>,
}

impl FederationSettings {
    /// The set keys and their values (JSON), in [`SETTING_KEYS`] order.
    pub fn pairs(&self) -> Vec<(&'static str, Value)> {
        let Ok(Value::Object(m)) = serde_json::to_value(self) else {
            return Vec::new();
        };
        SETTING_KEYS
            .iter()
            .filter_map(|k| m.get(*k).map(|v| (*k, v.clone())))
            .collect()
    }

    /// The node timeout, when set (and within its range).
    pub fn node_timeout(&self) -> Option<std::time::Duration> {
        self.node_timeout
            .filter(|t| t.is_finite() && (0.001..=30.0 * 86400.0).contains(t))
            .map(std::time::Duration::from_secs_f64)
    }

    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        self == &FederationSettings::default()
    }

    /// Checks every set value ([`check_setting`]).
    pub fn check(&self) -> Result<()> {
        for (k, v) in self.pairs() {
            check_setting(k, &v)?;
        }
        Ok(())
    }
}

/// When and by whom one setting was last changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingChange {
    /// The key.
    pub key: String,
    /// The generation that wrote it.
    pub gen: i64,
    /// Server time of the change (ms since the Unix epoch).
    pub changed_ms: i64,
    /// Who changed it (a node prefix, or the command that did).
    pub changed_by: String,
    /// False when the change unset it.
    pub set: bool,
}

/// The settings as stored, with their generation and history of last changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredSettings {
    /// The values.
    pub settings: FederationSettings,
    /// The highest generation written (0: never written).
    pub gen: i64,
    /// The last change of each key ever written.
    pub changes: Vec<SettingChange>,
}

/// A stored row: key, value (JSON text; `None`: unset), generation, server time
/// (ms), who.
pub(crate) type Row = (String, Option<String>, i64, i64, String);

/// Checks one setting and returns its value normalised (as stored). An unknown key,
/// a value of the wrong type or out of range is an error naming the key.
pub fn check_setting(key: &str, value: &Value) -> Result<Value> {
    let secs = |lo: f64, hi: f64, range: &str| -> Result<Value> {
        match value.as_f64() {
            Some(s) if s.is_finite() && (lo..=hi).contains(&s) => Ok(Value::from(s)),
            Some(s) => invalid(format!("{key}: {s} s is out of range ({range})")),
            None => invalid(format!("{key}: expected seconds (a number), found {value}")),
        }
    };
    match key {
        "node_timeout" => secs(0.001, 30.0 * 86400.0, "0.001 s to 30 days"),
        "replication_period" | "replication_retry" => secs(0.1, 86400.0, "0.1 s to 1 day"),
        "replication_attempts" => match value.as_u64() {
            Some(n) if (1..=100).contains(&n) => Ok(Value::from(n)),
            _ => invalid(format!("{key}: expected 1 to 100, found {value}")),
        },
        "replication" => {
            let rules: Vec<ReplicationRule> =
                serde_json::from_value(value.clone()).map_err(|e| {
                    Error::Invalid(format!(
                        "replication: {e} (a list of {{\"prefix\": \"/…\", \"replicas\": N}})"
                    ))
                })?;
            check_rules(&rules)?;
            Ok(serde_json::to_value(rules)?)
        }
        other => invalid(format!(
            "unknown federation setting {other:?} (known: {})",
            SETTING_KEYS.join(", ")
        )),
    }
}

/// Checks replication rules: each prefix a name (starts with `/`, no control
/// characters), `replicas` at least 1, no prefix given twice (`/a` and `/a/` are one).
pub fn check_rules(rules: &[ReplicationRule]) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for r in rules {
        check_name("replication prefix", &r.prefix)?;
        check_plain("replication prefix", &r.prefix, MAX_KEY)?;
        if !r.prefix.starts_with('/') {
            return invalid(format!(
                "replication prefix {:?} does not start with /",
                r.prefix
            ));
        }
        if r.replicas == 0 {
            return invalid(format!(
                "replication prefix {:?}: replicas must be at least 1",
                r.prefix
            ));
        }
        let key = r.prefix.trim_end_matches('/');
        if !seen.insert(if key.is_empty() { "/" } else { key }) {
            return invalid(format!("replication prefix {:?} is given twice", r.prefix));
        }
    }
    Ok(())
}

/// Who changed a setting: a node prefix or a short label, checked.
fn check_by(by: &str) -> Result<()> {
    check_name("changed_by", by)?;
    check_plain("changed_by", by, MAX_KEY)
}

impl StoredSettings {
    pub(crate) fn from_rows(rows: Vec<Row>) -> Result<StoredSettings> {
        let mut obj = serde_json::Map::new();
        let mut out = StoredSettings::default();
        for (key, value, gen, changed_ms, changed_by) in rows {
            out.gen = out.gen.max(gen);
            // A key this version does not know (written by a newer one) is kept in
            // the table and left out here.
            if !SETTING_KEYS.contains(&key.as_str()) {
                continue;
            }
            if let Some(v) = &value {
                let v: Value = serde_json::from_str(v)?;
                let v = check_setting(&key, &v)
                    .map_err(|e| Error::Corrupt(format!("stored federation setting: {e}")))?;
                obj.insert(key.clone(), v);
            }
            out.changes.push(SettingChange {
                key,
                gen,
                changed_ms,
                changed_by,
                set: value.is_some(),
            });
        }
        out.settings = serde_json::from_value(Value::Object(obj))?;
        out.changes.sort_by_key(|c| {
            SETTING_KEYS
                .iter()
                .position(|k| *k == c.key)
                .unwrap_or(usize::MAX)
        });
        Ok(out)
    }
}

/// Federation-wide settings (see [`crate::settings`]).
impl Catalog {
    /// The federation settings, their generation and last changes.
    pub fn federation_settings(&self) -> Result<StoredSettings> {
        let rows = self.lock()?.backend.settings_rows()?;
        StoredSettings::from_rows(rows)
    }

    /// The federation's `node_timeout`, when its settings set one.
    pub fn federation_node_timeout(&self) -> Result<Option<std::time::Duration>> {
        Ok(self.federation_settings()?.settings.node_timeout())
    }

    /// The settings' generation alone (0: never written): one small query, cheap
    /// enough for every heartbeat.
    pub fn federation_settings_gen(&self) -> Result<i64> {
        self.lock()?.backend.settings_gen()
    }

    /// The settings when their generation is above `gen`, else `None`.
    pub fn federation_settings_since(&self, gen: i64) -> Result<Option<StoredSettings>> {
        if self.federation_settings_gen()? <= gen {
            return Ok(None);
        }
        self.federation_settings().map(Some)
    }

    /// Sets one setting (`value` JSON), checked first: a bad key or value is an
    /// error and nothing is stored. `by` says who (a node prefix, a command).
    /// Returns the new generation.
    pub fn set_federation_setting(&self, key: &str, value: &Value, by: &str) -> Result<i64> {
        let v = check_setting(key, value)?;
        check_by(by)?;
        let text = serde_json::to_string(&v)?;
        self.lock()?
            .backend
            .settings_write(&[(key.to_string(), Some(text))], by)
    }

    /// Sets every setting `s` sets (one transaction; all checked first). Returns the
    /// new generation (the old one when `s` sets nothing).
    pub fn set_federation_settings(&self, s: &FederationSettings, by: &str) -> Result<i64> {
        let mut rows = Vec::new();
        for (k, v) in s.pairs() {
            let v = check_setting(k, &v)?;
            rows.push((k.to_string(), Some(serde_json::to_string(&v)?)));
        }
        check_by(by)?;
        if rows.is_empty() {
            return self.federation_settings_gen();
        }
        self.lock()?.backend.settings_write(&rows, by)
    }

    /// Unsets a setting (nodes fall back to their own value or the default).
    /// Returns the new generation.
    pub fn unset_federation_setting(&self, key: &str, by: &str) -> Result<i64> {
        if !SETTING_KEYS.contains(&key) {
            return invalid(format!(
                "unknown federation setting {key:?} (known: {})",
                SETTING_KEYS.join(", ")
            ));
        }
        check_by(by)?;
        self.lock()?
            .backend
            .settings_write(&[(key.to_string(), None)], by)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_checked_and_normalised() {
        assert_eq!(
            check_setting("node_timeout", &json!(5)).unwrap(),
            json!(5.0)
        );
        assert_eq!(
            check_setting("replication_attempts", &json!(3)).unwrap(),
            json!(3)
        );
        let rules = json!([{"prefix": "/cmip6", "replicas": 2}]);
        assert_eq!(check_setting("replication", &rules).unwrap(), rules);
        assert_eq!(check_setting("replication", &json!([])).unwrap(), json!([]));
        for (k, v, says) in [
            ("node_timeout", json!(0), "out of range"),
            ("node_timeout", json!("soon"), "expected seconds"),
            ("replication_period", json!(0.01), "out of range"),
            ("replication_attempts", json!(0), "1 to 100"),
            ("replication_attempts", json!(1.5), "1 to 100"),
            (
                "replication",
                json!([{"prefix": "/a", "replicas": 0}]),
                "at least 1",
            ),
            (
                "replication",
                json!([{"prefix": "a", "replicas": 1}]),
                "start with /",
            ),
            ("replication", json!([{"prefix": "/a"}]), "replicas"),
            (
                "replication",
                json!([{"prefix": "/a", "replicas": 1, "copies": 2}]),
                "copies",
            ),
            (
                "replication",
                json!([{"prefix": "/a", "replicas": 1}, {"prefix": "/a/", "replicas": 2}]),
                "twice",
            ),
            ("replication", json!(3), "replication"),
            (
                "node_timout",
                json!(5),
                "unknown federation setting \"node_timout\"",
            ),
        ] {
            let e = check_setting(k, &v).unwrap_err().to_string();
            assert!(e.contains(says), "{k} = {v}: {e}");
        }
    }

    #[test]
    fn pairs_follow_the_key_order() {
        let s = FederationSettings {
            replication_attempts: Some(4),
            node_timeout: Some(2.0),
            ..Default::default()
        };
        let keys: Vec<&str> = s.pairs().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["node_timeout", "replication_attempts"]);
        assert!(!s.is_empty());
        assert!(FederationSettings::default().is_empty());
    }
}
