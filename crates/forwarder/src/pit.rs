//! Pending Interest Table and dead-nonce list.
//!
//! Entries are keyed by (name, CanBePrefix, MustBeFresh), as NFD does. A
//! Data is matched by looking up every prefix of its name (names are shared
//! slices, so this costs hashing, not copying).

use std::cmp::Reverse;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::Duration;

use bytes::Bytes;
use granary_face::FaceId;
use granary_packet::types::COMP_IMPLICIT_DIGEST;
use granary_packet::{Data, Interest, Name};
use tokio::time::Instant;

/// PIT entry key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PitKey {
    /// Interest name.
    pub name: Name,
    /// CanBePrefix.
    pub can_be_prefix: bool,
    /// MustBeFresh.
    pub must_be_fresh: bool,
}

impl PitKey {
    /// The key of an Interest.
    pub fn of(i: &Interest) -> PitKey {
        PitKey {
            name: i.name.clone(),
            can_be_prefix: i.can_be_prefix,
            must_be_fresh: i.must_be_fresh,
        }
    }
}

/// A downstream that asked.
#[derive(Debug, Clone)]
pub struct InRecord {
    /// Face.
    pub face: FaceId,
    /// Its nonce.
    pub nonce: u32,
    /// When it stops waiting.
    pub expiry: Instant,
    /// PitToken to echo.
    pub pit_token: Option<Bytes>,
    /// Its Interest (for Nacks).
    pub interest: Interest,
}

/// An upstream we asked.
#[derive(Debug, Clone)]
pub struct OutRecord {
    /// Face.
    pub face: FaceId,
    /// Nonce sent.
    pub nonce: u32,
    /// When.
    pub sent: Instant,
    /// Nack received from it.
    pub nack: Option<u64>,
}

/// One PIT entry.
#[derive(Debug, Clone)]
pub struct PitEntry {
    /// Key.
    pub key: PitKey,
    /// Downstreams.
    pub in_records: Vec<InRecord>,
    /// Upstreams.
    pub out_records: Vec<OutRecord>,
    /// Latest in-record expiry.
    pub expiry: Instant,
    /// Retransmissions before this time are suppressed.
    pub suppress_until: Instant,
    /// Current suppression interval.
    pub suppress_interval: Duration,
}

/// The PIT.
#[derive(Debug)]
pub struct Pit {
    entries: HashMap<PitKey, PitEntry>,
    by_name: HashMap<Name, Vec<PitKey>>,
    timers: BinaryHeap<Reverse<(Instant, u64, PitKey)>>,
    timer_seq: u64,
    digest_entries: usize,
    max_entries: usize,
}

impl Pit {
    /// A PIT holding at most `max_entries`.
    pub fn new(max_entries: usize) -> Self {
        Pit {
            entries: HashMap::new(),
            by_name: HashMap::new(),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            digest_entries: 0,
            max_entries: max_entries.max(1),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// True when full.
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    /// The entry for `key`.
    pub fn get_mut(&mut self, key: &PitKey) -> Option<&mut PitEntry> {
        self.entries.get_mut(key)
    }

    /// The entry for `key`, created if absent (`None` when full).
    pub fn get_or_insert(&mut self, key: &PitKey, now: Instant) -> Option<(&mut PitEntry, bool)> {
        if !self.entries.contains_key(key) {
            if self.is_full() {
                return None;
            }
            if key
                .name
                .last()
                .is_some_and(|c| c.typ == COMP_IMPLICIT_DIGEST)
            {
                self.digest_entries += 1;
            }
            self.by_name
                .entry(key.name.clone())
                .or_default()
                .push(key.clone());
            self.entries.insert(
                key.clone(),
                PitEntry {
                    key: key.clone(),
                    in_records: Vec::new(),
                    out_records: Vec::new(),
                    expiry: now,
                    suppress_until: now,
                    suppress_interval: Duration::from_millis(10),
                },
            );
            return self.entries.get_mut(key).map(|e| (e, true));
        }
        self.entries.get_mut(key).map(|e| (e, false))
    }

    /// Arms the expiry timer of an entry.
    pub fn schedule(&mut self, key: &PitKey, at: Instant) {
        self.timer_seq += 1;
        self.timers.push(Reverse((at, self.timer_seq, key.clone())));
    }

    /// Removes an entry.
    pub fn remove(&mut self, key: &PitKey) -> Option<PitEntry> {
        let e = self.entries.remove(key)?;
        if let Some(v) = self.by_name.get_mut(&key.name) {
            v.retain(|k| k != key);
            if v.is_empty() {
                self.by_name.remove(&key.name);
            }
        }
        if key
            .name
            .last()
            .is_some_and(|c| c.typ == COMP_IMPLICIT_DIGEST)
        {
            self.digest_entries -= 1;
        }
        Some(e)
    }

    /// Keys of entries a Data satisfies.
    pub fn matches(&self, data: &Data) -> Vec<PitKey> {
        let mut out = Vec::new();
        let name = data.name();
        let n = name.len();
        for len in 0..=n {
            let p = if len == n {
                name.clone()
            } else {
                name.prefix(len as isize)
            };
            if let Some(keys) = self.by_name.get(&p) {
                out.extend(keys.iter().filter(|k| len == n || k.can_be_prefix).cloned());
            }
        }
        if self.digest_entries > 0 {
            if let Some(keys) = self.by_name.get(&data.full_name()) {
                out.extend(keys.iter().cloned());
            }
        }
        out
    }

    /// Pops entries whose expiry has passed (stale timers are skipped).
    pub fn expired(&mut self, now: Instant) -> Vec<PitEntry> {
        let mut out = Vec::new();
        while let Some(Reverse((at, _, _))) = self.timers.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((_, _, key))) = self.timers.pop() else {
                break;
            };
            if self.entries.get(&key).is_some_and(|e| e.expiry <= now) {
                if let Some(e) = self.remove(&key) {
                    out.push(e);
                }
            }
        }
        out
    }

    /// When the next timer fires.
    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((at, _, _))| *at)
    }
}

/// Remembers (name, nonce) pairs of finished Interests for a while, to
/// detect loops after the PIT entry is gone. Bounded.
#[derive(Debug)]
pub struct DeadNonceList {
    set: HashSet<u64>,
    order: VecDeque<(Instant, u64)>,
    lifetime: Duration,
    capacity: usize,
}

impl DeadNonceList {
    /// A list keeping entries for `lifetime`, at most `capacity`.
    pub fn new(lifetime: Duration, capacity: usize) -> Self {
        DeadNonceList {
            set: HashSet::new(),
            order: VecDeque::new(),
            lifetime,
            capacity: capacity.max(1),
        }
    }

    fn key(name: &Name, nonce: u32) -> u64 {
        let mut h = DefaultHasher::new();
        name.hash(&mut h);
        nonce.hash(&mut h);
        h.finish()
    }

    /// Records a pair.
    pub fn add(&mut self, name: &Name, nonce: u32, now: Instant) {
        self.evict(now);
        let k = Self::key(name, nonce);
        if self.set.insert(k) {
            self.order.push_back((now, k));
        }
    }

    /// True if the pair was seen recently.
    pub fn contains(&mut self, name: &Name, nonce: u32, now: Instant) -> bool {
        self.evict(now);
        self.set.contains(&Self::key(name, nonce))
    }

    fn evict(&mut self, now: Instant) {
        while let Some(&(t, k)) = self.order.front() {
            if t + self.lifetime < now || self.order.len() > self.capacity {
                self.order.pop_front();
                self.set.remove(&k);
            } else {
                break;
            }
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_packet::{DataBuilder, InterestFields};

    fn interest(uri: &str, cbp: bool) -> Interest {
        let mut f = InterestFields::new(Name::from_uri(uri).unwrap());
        f.can_be_prefix = cbp;
        f.encode()
    }

    fn data(uri: &str) -> Data {
        DataBuilder::new(Name::from_uri(uri).unwrap())
            .encode_with_signature(Bytes::from_static(&[0; 32]))
    }

    #[test]
    fn data_matches_exact_prefix_and_digest_entries() {
        let mut pit = Pit::new(100);
        let now = Instant::now();
        let d = data("/a/b/c");
        let keys = [
            PitKey::of(&interest("/a/b/c", false)),
            PitKey::of(&interest("/a/b", true)),
            PitKey::of(&interest("/a/b", false)),
            PitKey::of(&interest("/x", true)),
        ];
        for k in &keys {
            pit.get_or_insert(k, now).unwrap();
        }
        let full = PitKey {
            name: d.full_name(),
            can_be_prefix: false,
            must_be_fresh: false,
        };
        pit.get_or_insert(&full, now).unwrap();
        let m = pit.matches(&d);
        assert!(m.contains(&keys[0]) && m.contains(&keys[1]) && m.contains(&full));
        assert!(!m.contains(&keys[2]) && !m.contains(&keys[3]));
        for k in m {
            pit.remove(&k);
        }
        assert_eq!(pit.len(), 2);
    }

    #[test]
    fn bounded_and_timers() {
        let mut pit = Pit::new(2);
        let now = Instant::now();
        for (i, u) in ["/1", "/2"].iter().enumerate() {
            let k = PitKey::of(&interest(u, false));
            let (e, new) = pit.get_or_insert(&k, now).unwrap();
            assert!(new);
            e.expiry = now + Duration::from_millis(10 * (i as u64 + 1));
            let exp = e.expiry;
            pit.schedule(&k, exp);
        }
        assert!(
            pit.get_or_insert(&PitKey::of(&interest("/3", false)), now)
                .is_none(),
            "full"
        );
        assert_eq!(pit.expired(now + Duration::from_millis(15)).len(), 1);
        assert_eq!(pit.expired(now + Duration::from_millis(25)).len(), 1);
        assert!(pit.is_empty());
    }

    #[test]
    fn dead_nonces_expire_and_are_bounded() {
        let mut d = DeadNonceList::new(Duration::from_secs(1), 3);
        let now = Instant::now();
        let n = Name::from_uri("/a").unwrap();
        d.add(&n, 1, now);
        assert!(d.contains(&n, 1, now));
        assert!(!d.contains(&n, 2, now));
        assert!(!d.contains(&n, 1, now + Duration::from_secs(2)));
        for i in 0..10 {
            d.add(&n, i, now);
        }
        assert!(d.len() <= 4);
    }
}
