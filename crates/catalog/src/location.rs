//! The location catalog (federation): which nodes hold which version of a name, and
//! which nodes are alive.
//!
//! Two tables beside the records, in both back ends:
//! - `locations (name, version, node, manifest_digest, seen)`, one row per node holding
//!   a version, `seen` being the database server's clock when the node registered it;
//! - `nodes (prefix, last_seen, started)`, one row per node, its heartbeat.
//!
//! Location writes do not touch the records' change sequence (`catalog_meta`): a
//! node registering copies it holds writes only its own rows, so 20 nodes registering
//! at once do not queue on one row. A record goes when its last location goes. Times
//! are the server's (`now()`), in milliseconds since the Unix epoch; a node is *up*
//! when its last heartbeat is younger than the caller's `node_timeout`, measured on
//! the server's clock too (nodes' clocks may disagree).

use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result};
use crate::record::{check_int, check_name, check_plain, MAX_KEY};

/// A location to register: `node` holds `version` of `name`, whose signed manifest root
/// has `manifest_digest`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewLocation {
    /// NDN URI of the file, without version.
    pub name: String,
    /// Repository version.
    pub version: u64,
    /// The holding node's prefix.
    pub node: String,
    /// Digest of the version's signed manifest root (as `Record::manifest_digest`).
    pub manifest_digest: Option<String>,
}

/// A registered location.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// NDN URI of the file, without version.
    pub name: String,
    /// Repository version.
    pub version: u64,
    /// The holding node's prefix.
    pub node: String,
    /// Digest of the version's signed manifest root, when registered with one.
    pub manifest_digest: Option<String>,
    /// Server time of the registration (ms since the Unix epoch).
    pub seen_ms: i64,
    /// The node's last heartbeat (server time, ms), if it ever sent one.
    pub last_seen_ms: Option<i64>,
    /// True when the node's last heartbeat is younger than the timeout asked with.
    pub up: bool,
    /// The node's load as its last heartbeat reported it: the number of versions it
    /// holds (its location rows). `None` from a node that never reported one.
    #[serde(default)]
    pub load: Option<u64>,
    /// The holding node's role as its last heartbeat gave it (`None`: it never sent
    /// one). A location on a node that is not [`Role::Storage`] is a *cache*: shown,
    /// offered to consumers after every storage holder, never counted as a replica
    /// nor used as a replication source.
    #[serde(default)]
    pub role: Option<Role>,
}

impl Location {
    /// True when the holder is a router or a client: its copy is a cache, not a
    /// replica (a node that never sent a heartbeat counts as storage).
    pub fn is_cache(&self) -> bool {
        self.role.is_some_and(|r| r != Role::Storage)
    }
}

/// What a node is for in the federation (`role` in its config, `daemon --role`),
/// recorded with its heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Holds data for the federation: a replica target and source.
    #[default]
    Storage,
    /// Forwards between sites; what it keeps is a cache.
    Router,
    /// A consumer's node; what it keeps is a cache.
    Client,
}

impl Role {
    /// The name stored in the catalog and written in configs.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Storage => "storage",
            Role::Router => "router",
            Role::Client => "client",
        }
    }

    /// A stored or configured role; unknown text is an error naming the choices.
    pub fn parse(s: &str) -> Result<Role> {
        match s {
            "storage" => Ok(Role::Storage),
            "router" => Ok(Role::Router),
            "client" => Ok(Role::Client),
            other => invalid(format!(
                "role {other:?}: expected \"storage\", \"router\" or \"client\""
            )),
        }
    }

    /// A role read from the catalog (`NULL`: a node from before roles, storage;
    /// unknown text from a newer node: not storage, so never a target).
    pub(crate) fn stored(s: Option<&str>) -> Role {
        match s {
            None => Role::Storage,
            Some(s) => Role::parse(s).unwrap_or(Role::Client),
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Orders locations for a consumer: nearest first (`distance` of the node prefix, e.g.
/// the consumer's route cost to it; `None`, unknown or no route, goes last), then least
/// loaded (a node that reported no load after those that did), then the longest
/// registered (the publisher before its replicas), then by prefix; caches (holders that
/// are not storage nodes, [`Location::is_cache`]) after every replica. The catalog, which
/// knows no consumer's distances, orders with `|_| None` (load first); a consumer
/// orders its answer again with its own distances.
pub fn order_nearest(locs: &mut [Location], distance: impl Fn(&str) -> Option<u64>) {
    locs.sort_by_cached_key(|l| {
        (
            l.is_cache(),
            distance(&l.node).unwrap_or(u64::MAX),
            l.load.unwrap_or(u64::MAX),
            l.seen_ms,
            l.node.clone(),
        )
    });
}

/// A node of the federation, as its heartbeats show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// The node's prefix.
    pub prefix: String,
    /// Its last heartbeat (server time, ms since the Unix epoch).
    pub last_seen_ms: i64,
    /// How long ago that was, on the server's clock (ms).
    pub age_ms: i64,
    /// When the node (its current daemon) first sent a heartbeat (server time, ms).
    pub started_ms: i64,
    /// True when `age_ms` is below the timeout asked with.
    pub up: bool,
    /// Number of versions it holds (its location rows).
    pub locations: u64,
    /// Its role, as its last heartbeat gave it.
    #[serde(default)]
    pub role: Role,
}

/// A node's liveness alone, read without counting its locations (cheap enough
/// to read every heartbeat period on every node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Liveness {
    /// The node's prefix.
    pub prefix: String,
    /// When its current daemon first sent a heartbeat (server time, ms).
    pub started_ms: i64,
    /// True when its last heartbeat is younger than the timeout asked with.
    pub up: bool,
    /// Its role, as its last heartbeat gave it.
    pub role: Role,
}

/// How many up storage nodes hold a name's latest version (for replication targets;
/// caches on routers and clients are not counted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replicas {
    /// NDN URI of the file.
    pub name: String,
    /// Its highest registered version.
    pub version: u64,
    /// Nodes holding that version whose heartbeat is recent.
    pub up: u64,
    /// Nodes holding that version, up or not.
    pub total: u64,
}

/// A location as the back ends write it (checked).
pub(crate) struct Loc {
    pub name: String,
    pub version: i64,
    pub node: String,
    pub digest: Option<String>,
}

impl NewLocation {
    pub(crate) fn check(&self) -> Result<Loc> {
        check_name("location name", &self.name)?;
        check_node(&self.node)?;
        if let Some(d) = &self.manifest_digest {
            check_plain("manifest_digest", d, MAX_KEY)?;
        }
        Ok(Loc {
            name: self.name.clone(),
            version: check_int("version", self.version)?,
            node: self.node.clone(),
            digest: self.manifest_digest.clone(),
        })
    }
}

/// A node prefix: a non-empty NDN URI (starts with `/`), short, no control characters.
pub(crate) fn check_node(node: &str) -> Result<()> {
    check_name("node prefix", node)?;
    check_plain("node prefix", node, MAX_KEY)?;
    if !node.starts_with('/') {
        return invalid(format!("node prefix {node:?} does not start with /"));
    }
    Ok(())
}

/// The node timeout in milliseconds, checked (1 ms to 30 days).
pub(crate) fn timeout_ms(t: std::time::Duration) -> Result<i64> {
    let ms = t.as_millis();
    if ms == 0 || ms > 30 * 86_400_000 {
        return invalid(format!(
            "node timeout {} ms is out of range (1 ms to 30 days)",
            ms
        ));
    }
    Ok(ms as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(node: &str, load: Option<u64>, seen_ms: i64) -> Location {
        Location {
            name: "/p/f".into(),
            version: 1,
            node: node.into(),
            manifest_digest: None,
            seen_ms,
            last_seen_ms: Some(seen_ms),
            up: true,
            load,
            role: None,
        }
    }

    fn nodes(l: &[Location]) -> Vec<&str> {
        l.iter().map(|l| l.node.as_str()).collect()
    }

    #[test]
    fn nearest_then_least_loaded_then_oldest() {
        let all = vec![
            loc("/a", Some(5), 1), // the publisher: first registered, most loaded
            loc("/b", Some(2), 3),
            loc("/c", Some(2), 2),
            loc("/d", None, 0), // reported no load
            loc("/e", Some(0), 4),
        ];
        // No distances (the catalog's order): least loaded, then oldest, unknown last.
        let mut l = all.clone();
        order_nearest(&mut l, |_| None);
        assert_eq!(nodes(&l), ["/e", "/c", "/b", "/a", "/d"]);
        // Distances first; no route (None) after every known distance.
        let mut l = all.clone();
        order_nearest(&mut l, |n| match n {
            "/a" | "/d" => Some(1),
            "/b" => Some(7),
            "/c" => Some(7),
            _ => None,
        });
        assert_eq!(nodes(&l), ["/a", "/d", "/c", "/b", "/e"]);
        // Equal in everything but the prefix: by prefix, so the order is stable.
        let mut l = vec![loc("/y", Some(1), 5), loc("/x", Some(1), 5)];
        order_nearest(&mut l, |_| Some(3));
        assert_eq!(nodes(&l), ["/x", "/y"]);
    }
}
