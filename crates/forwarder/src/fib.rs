//! RIB (routes registered by apps and commands) and the FIB computed from
//! it: longest-prefix match over names, next hops with costs.

use std::collections::HashMap;

use granary_face::FaceId;
use granary_packet::Name;
use hashbrown::HashTable;
use tokio::time::Instant;

use crate::namehash::{hash_name, NameHashes};

/// Route flag: child prefixes inherit this route.
pub const CHILD_INHERIT: u64 = 1;
/// Route flag: longer routes below do not inherit ancestors' routes.
pub const CAPTURE: u64 = 2;

/// One route in the RIB.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// Next-hop face.
    pub face: FaceId,
    /// Origin (0 app, 64 static, 255 client, …).
    pub origin: u64,
    /// Cost.
    pub cost: u64,
    /// Flags (CHILD_INHERIT, CAPTURE).
    pub flags: u64,
    /// When the route expires.
    pub expires: Option<Instant>,
}

/// A next hop of a FIB entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    /// Face.
    pub face: FaceId,
    /// Cost.
    pub cost: u64,
}

/// One FIB entry: its name's hash ([`crate::namehash`]), name, next hops.
type FibEntry = (u64, Name, Vec<NextHop>);

/// RIB and FIB together; the FIB is recomputed when the RIB changes.
#[derive(Debug, Default, Clone)]
pub struct Tables {
    rib: HashMap<Name, Vec<Route>>,
    fib: HashTable<FibEntry>,
    max_len: usize,
}

impl Tables {
    /// Adds or updates a route (same name, face and origin replace).
    pub fn register(&mut self, name: Name, route: Route) {
        let routes = self.rib.entry(name).or_default();
        routes.retain(|r| !(r.face == route.face && r.origin == route.origin));
        routes.push(route);
        self.rebuild();
    }

    /// Removes a route; true if there was one.
    pub fn unregister(&mut self, name: &Name, face: FaceId, origin: u64) -> bool {
        let mut removed = false;
        if let Some(routes) = self.rib.get_mut(name) {
            let before = routes.len();
            routes.retain(|r| !(r.face == face && r.origin == origin));
            removed = routes.len() != before;
            if routes.is_empty() {
                self.rib.remove(name);
            }
        }
        if removed {
            self.rebuild();
        }
        removed
    }

    /// Removes every route through `face` (face went down).
    pub fn remove_face(&mut self, face: FaceId) {
        for routes in self.rib.values_mut() {
            routes.retain(|r| r.face != face);
        }
        self.rib.retain(|_, r| !r.is_empty());
        self.rebuild();
    }

    /// Drops expired routes; true if any.
    pub fn expire(&mut self, now: Instant) -> bool {
        let mut any = false;
        for routes in self.rib.values_mut() {
            let before = routes.len();
            routes.retain(|r| r.expires.is_none_or(|e| e > now));
            any |= routes.len() != before;
        }
        if any {
            self.rib.retain(|_, r| !r.is_empty());
            self.rebuild();
        }
        any
    }

    /// Recomputes the FIB. Next hops are ordered by cost, then — at equal
    /// cost — routes registered for a longer prefix first (a prefix's own
    /// routes before inherited ones: an app that registered `/` with
    /// ChildInherit must not win ties against the app that registered the
    /// prefix itself), then by face id so the order is deterministic.
    fn rebuild(&mut self) {
        self.fib.clear();
        self.max_len = 0;
        for name in self.rib.keys() {
            // (hop, length of the prefix whose route gave its cost)
            let mut hops: Vec<(NextHop, usize)> = Vec::new();
            let mut add =
                |r: &Route, depth: usize| match hops.iter_mut().find(|h| h.0.face == r.face) {
                    Some(h) => {
                        if (r.cost, std::cmp::Reverse(depth)) < (h.0.cost, std::cmp::Reverse(h.1)) {
                            *h = (
                                NextHop {
                                    face: r.face,
                                    cost: r.cost,
                                },
                                depth,
                            );
                        }
                    }
                    None => hops.push((
                        NextHop {
                            face: r.face,
                            cost: r.cost,
                        },
                        depth,
                    )),
                };
            let own = &self.rib[name];
            own.iter().for_each(|r| add(r, name.len()));
            if !own.iter().any(|r| r.flags & CAPTURE != 0) {
                // Ancestors' routes with ChildInherit, nearest first, until a Capture.
                for len in (0..name.len()).rev() {
                    if let Some(routes) = self.rib.get(&name.prefix(len as isize)) {
                        routes
                            .iter()
                            .filter(|r| r.flags & CHILD_INHERIT != 0)
                            .for_each(|r| add(r, len));
                        if routes.iter().any(|r| r.flags & CAPTURE != 0) {
                            break;
                        }
                    }
                }
            }
            hops.sort_by_key(|(h, depth)| (h.cost, std::cmp::Reverse(*depth), h.face));
            self.max_len = self.max_len.max(name.len());
            let hash = hash_name(name);
            self.fib.insert_unique(
                hash,
                (
                    hash,
                    name.clone(),
                    hops.into_iter().map(|(h, _)| h).collect(),
                ),
                |e| e.0,
            );
        }
    }

    /// Longest-prefix match: the FIB entry name and its next hops.
    pub fn lookup(&self, name: &Name) -> Option<(&Name, &[NextHop])> {
        self.lookup_hashed(name, &NameHashes::of(name))
    }

    /// [`Tables::lookup`] with the name's prefix hashes already computed.
    pub fn lookup_hashed(&self, name: &Name, h: &NameHashes) -> Option<(&Name, &[NextHop])> {
        let n = h.len().min(self.max_len);
        for len in (0..=n).rev() {
            let bytes = h.prefix_bytes(name, len);
            if let Some(e) = self.fib.find(h.hash(len), |e| &e.1.value()[..] == bytes) {
                return Some((&e.1, &e.2));
            }
        }
        None
    }

    /// FIB entries.
    pub fn fib(&self) -> impl Iterator<Item = (&Name, &Vec<NextHop>)> {
        self.fib.iter().map(|e| (&e.1, &e.2))
    }

    /// RIB entries.
    pub fn rib(&self) -> impl Iterator<Item = (&Name, &Vec<Route>)> {
        self.rib.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::from_uri(s).unwrap()
    }
    fn r(face: FaceId, cost: u64, flags: u64) -> Route {
        Route {
            face,
            origin: 0,
            cost,
            flags,
            expires: None,
        }
    }

    #[test]
    fn longest_prefix_match_and_inheritance() {
        let mut t = Tables::default();
        t.register(n("/a"), r(300, 10, CHILD_INHERIT));
        t.register(n("/a/b"), r(301, 5, CHILD_INHERIT));
        let (k, hops) = t.lookup(&n("/a/b/c")).unwrap();
        assert_eq!(k, &n("/a/b"));
        assert_eq!(
            hops,
            &[
                NextHop { face: 301, cost: 5 },
                NextHop {
                    face: 300,
                    cost: 10
                }
            ]
        );
        assert_eq!(
            t.lookup(&n("/a/x")).unwrap().1,
            &[NextHop {
                face: 300,
                cost: 10
            }]
        );
        assert!(t.lookup(&n("/z")).is_none());
        t.register(n("/a/b"), r(302, 1, CAPTURE));
        let hops = t.lookup(&n("/a/b")).unwrap().1;
        assert!(
            hops.iter().all(|h| h.face != 300),
            "capture blocks inheritance"
        );
        t.remove_face(301);
        t.remove_face(302);
        assert_eq!(t.lookup(&n("/a/b")).unwrap().0, &n("/a"));
        assert!(t.unregister(&n("/a"), 300, 0));
        assert!(t.lookup(&n("/a/b")).is_none());
    }

    #[test]
    fn equal_cost_prefers_own_route_over_inherited() {
        // An app on face 260 registers `/` with ChildInherit at cost 0; the app
        // on face 263 registers its own prefix at cost 0. Interests for that
        // prefix go to 263 first, whatever the face ids.
        let mut t = Tables::default();
        t.register(n("/"), r(260, 0, CHILD_INHERIT));
        t.register(n("/client/x"), r(263, 0, CHILD_INHERIT));
        let hops = t.lookup(&n("/client/x/msg/1")).unwrap().1;
        assert_eq!(
            hops,
            &[
                NextHop { face: 263, cost: 0 },
                NextHop { face: 260, cost: 0 }
            ]
        );
        // Cost still comes first: a cheaper inherited route wins.
        t.register(n("/"), r(261, 0, CHILD_INHERIT));
        t.register(n("/client/x"), r(263, 5, CHILD_INHERIT));
        let hops = t.lookup(&n("/client/x")).unwrap().1;
        assert_eq!(hops[0], NextHop { face: 260, cost: 0 });
        assert_eq!(hops[1], NextHop { face: 261, cost: 0 });
        assert_eq!(hops[2], NextHop { face: 263, cost: 5 });
    }

    #[test]
    fn routes_expire() {
        let mut t = Tables::default();
        let now = Instant::now();
        t.register(
            n("/e"),
            Route {
                expires: Some(now + std::time::Duration::from_secs(1)),
                ..r(300, 0, 1)
            },
        );
        assert!(!t.expire(now));
        assert!(t.expire(now + std::time::Duration::from_secs(2)));
        assert!(t.lookup(&n("/e")).is_none());
    }
}
