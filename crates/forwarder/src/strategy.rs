//! Forwarding strategies and the per-prefix strategy choice table.

use std::collections::HashMap;
use std::time::Duration;

use granary_packet::Name;

/// A forwarding strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Lowest-cost next hop; retransmissions go to the next unused one after
    /// a suppression interval (10 ms doubling to 250 ms), as NFD's best-route.
    BestRoute,
    /// Every eligible next hop, with the same retransmission suppression.
    Multicast,
    /// VIP backpressure: the next hop with the largest VIP-count
    /// differential (see [`crate::vip`]).
    Vip,
}

/// Initial retransmission-suppression interval.
pub const SUPPRESS_INITIAL: Duration = Duration::from_millis(10);
/// Largest retransmission-suppression interval.
pub const SUPPRESS_MAX: Duration = Duration::from_millis(250);

impl Strategy {
    /// Canonical name, as NFD reports it (`/localhost/nfd/strategy/best-route/v=5`).
    pub fn name(self) -> Name {
        let uri = match self {
            Strategy::BestRoute => "/localhost/nfd/strategy/best-route/v=5",
            Strategy::Multicast => "/localhost/nfd/strategy/multicast/v=4",
            Strategy::Vip => "/localhost/nfd/strategy/vip/v=1",
        };
        Name::from_uri(uri).unwrap_or_default()
    }

    /// Resolves a strategy name (with or without version).
    pub fn from_name(n: &Name) -> Option<Strategy> {
        let s = n.to_string();
        let base = s.split("/v=").next().unwrap_or("");
        match base {
            "/localhost/nfd/strategy/best-route" => Some(Strategy::BestRoute),
            "/localhost/nfd/strategy/multicast" => Some(Strategy::Multicast),
            "/localhost/nfd/strategy/vip" => Some(Strategy::Vip),
            _ => None,
        }
    }
}

/// Strategy per name prefix; longest prefix wins; `/` is best-route.
#[derive(Debug, Clone)]
pub struct StrategyChoice {
    table: HashMap<Name, Strategy>,
    /// The same choices by name hash ([`crate::namehash`]), for the data path.
    hashed: hashbrown::HashTable<(u64, Name, Strategy)>,
    max_len: usize,
}

impl Default for StrategyChoice {
    fn default() -> Self {
        let mut sc = StrategyChoice {
            table: HashMap::new(),
            hashed: hashbrown::HashTable::new(),
            max_len: 0,
        };
        sc.set(Name::new(), Strategy::BestRoute);
        sc
    }
}

impl StrategyChoice {
    /// Sets the strategy of a prefix.
    pub fn set(&mut self, prefix: Name, s: Strategy) {
        self.table.insert(prefix, s);
        self.reindex();
    }

    /// Removes a choice (not the root's); true if there was one.
    pub fn unset(&mut self, prefix: &Name) -> bool {
        let removed = !prefix.is_empty() && self.table.remove(prefix).is_some();
        self.reindex();
        removed
    }

    fn reindex(&mut self) {
        self.hashed.clear();
        self.max_len = 0;
        for (n, s) in &self.table {
            let h = crate::namehash::hash_name(n);
            self.hashed.insert_unique(h, (h, n.clone(), *s), |e| e.0);
            self.max_len = self.max_len.max(n.len());
        }
    }

    /// [`StrategyChoice::find`] with the name's prefix hashes already computed.
    pub fn find_hashed(&self, name: &Name, h: &crate::namehash::NameHashes) -> Strategy {
        for len in (0..=h.len().min(self.max_len)).rev() {
            let bytes = h.prefix_bytes(name, len);
            if let Some(e) = self.hashed.find(h.hash(len), |e| &e.1.value()[..] == bytes) {
                return e.2;
            }
        }
        Strategy::BestRoute
    }

    /// The strategy for a name.
    pub fn find(&self, name: &Name) -> Strategy {
        for len in (0..=name.len()).rev() {
            if let Some(s) = self.table.get(&name.prefix(len as isize)) {
                return *s;
            }
        }
        Strategy::BestRoute
    }

    /// All choices.
    pub fn iter(&self) -> impl Iterator<Item = (&Name, &Strategy)> {
        self.table.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_lookup() {
        assert_eq!(
            Strategy::from_name(&Strategy::BestRoute.name()),
            Some(Strategy::BestRoute)
        );
        assert_eq!(
            Strategy::from_name(&Name::from_uri("/localhost/nfd/strategy/multicast").unwrap()),
            Some(Strategy::Multicast)
        );
        assert_eq!(
            Strategy::from_name(&Name::from_uri("/localhost/nfd/strategy/vip").unwrap()),
            Some(Strategy::Vip)
        );
        assert_eq!(
            Strategy::from_name(&Name::from_uri("/localhost/nfd/strategy/asf").unwrap()),
            None
        );
        let mut sc = StrategyChoice::default();
        sc.set(Name::from_uri("/m").unwrap(), Strategy::Multicast);
        assert_eq!(
            sc.find(&Name::from_uri("/m/x").unwrap()),
            Strategy::Multicast
        );
        assert_eq!(sc.find(&Name::from_uri("/y").unwrap()), Strategy::BestRoute);
        assert!(sc.unset(&Name::from_uri("/m").unwrap()));
        assert!(!sc.unset(&Name::new()));
    }
}
