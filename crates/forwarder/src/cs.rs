//! Content Store: an in-memory cache of Data packets with pluggable
//! replacement policies.
//!
//! # Model
//!
//! The store keeps at most one Data per name: inserting a Data whose name is
//! already cached *replaces* the older packet, even when the content (and so
//! the implicit digest) differs. Keeping several packets per name would need
//! the implicit digest (a SHA-256 over the whole packet) on every insertion and
//! a second level in the index; a forwarder almost never sees two different
//! packets under one name, and when it does the newer one is the one worth
//! keeping. Entries live in a slab (`Vec` of slots, ids are `u32`), and the
//! index is a `BTreeMap` from the name's TLV-VALUE (a slice of the cached
//! wire: no `Name` is kept beside the packet) to the id, in NDN canonical
//! order, which makes every Data under a prefix one contiguous range. Names
//! compare with one `memcmp` (see `Name`'s `Ord`). An entry holds the wire,
//! the name's offset and length in it, the freshness deadline, the policy's
//! counters and two `u32` links (96 bytes); LRU and FIFO thread their victim
//! order through those links, so they cost no memory of their own.
//!
//! # Matching ([`ContentStore::find`])
//!
//! - Without CanBePrefix, the Data must have exactly the Interest's name.
//! - With CanBePrefix, any Data whose name starts with the Interest's name
//!   matches; the first match in canonical order is returned, as NFD does
//!   (NFD orders by full name; the two orders agree except for Data names
//!   that themselves contain ImplicitSha256Digest components).
//! - An Interest name ending in an ImplicitSha256DigestComponent matches the
//!   Data named by the rest of the name whose implicit digest equals that
//!   component (the digest is computed once per entry, on first use).
//! - MustBeFresh skips stale Data. A Data is fresh for FreshnessPeriod
//!   milliseconds after its insertion and stale from then on; a missing or
//!   zero FreshnessPeriod makes it stale at once.
//!
//! Every call to `find` counts exactly one hit or one miss (a lookup while
//! `serve` is off is a miss).
//!
//! # Replacement
//!
//! Whenever a limit is exceeded, victims are evicted one at a time until both
//! `max_packets` and `max_bytes` hold. A newly inserted packet is never its own
//! victim: room is made for it among the packets already stored.
//!
//! | policy | next victim | effect of a hit | cost per operation |
//! |---|---|---|---|
//! | [`Policy::Lru`] | least recently inserted or hit | moves to most recent | O(log n) |
//! | [`Policy::Lfu`] | fewest hits, ties: least recently used | count + 1, most recent | O(log n) |
//! | [`Policy::Fifo`] | oldest insertion | none | O(log n) |
//! | [`Policy::Random`] | uniform pick (seeded `fastrand`) | none | O(1) pick, O(log n) index fix-up |
//! | [`Policy::Vip`] | as LFU; admission and erasure follow the VIP cache set ([`crate::vip`]) | as LFU | O(log n) |
//!
//! LRU and FIFO keep a doubly linked list through the entries, in the order
//! of a `(rank, seq)` key derived from the entry (`seq` is a store-wide
//! counter that increases with every insertion and hit, so keys are unique);
//! an insertion or an LRU hit moves the entry to the tail in O(1). LFU and VIP
//! keep an ordered victim map by that key. Random keeps the ids in a `Vec` and
//! each entry remembers its slot, so a removal is a `swap_remove`.
//! Every entry records its insertion sequence, last use and hit count whatever
//! the policy, so [`ContentStore::set_config`] can switch policies and rebuild
//! the victim structure with meaningful history.
//!
//! Re-inserting a name counts as a fresh insertion (newest in LRU and FIFO
//! order, fresh freshness period) and keeps the LFU hit count, which belongs
//! to the name rather than to a particular packet.
//!
//! # Memory accounting
//!
//! Each entry is charged `data.wire().len() + ENTRY_OVERHEAD` bytes (see
//! [`ENTRY_OVERHEAD`]). A packet whose charge alone exceeds `max_bytes` is not
//! admitted (and a cached packet of the same name is left as it was).
//!
//! The store does no I/O and reads no clock: callers pass `now`, which keeps
//! tests deterministic. No operation panics.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;
use std::str::FromStr;
use std::time::{Duration, Instant};

use granary_packet::types::COMP_IMPLICIT_DIGEST;
use granary_packet::{Data, Interest, Name};

/// Bytes charged per entry on top of the packet's wire size.
///
/// What the store really holds per packet on a 64-bit target: a 96-byte slab
/// slot (the packet's wire buffer, not its decoded fields), the index slot (a
/// 32-byte key slicing the wire and a `u32` id), B-tree node slack, the
/// buffer's shared header and the allocator's rounding; LFU adds a 20-byte
/// victim slot. `bench/forwarder.sh` measures the real figure (RSS with the
/// store on minus off, per entry, minus the packet); a unit test checks that
/// this stays above the un-slacked size of those structures.
pub const ENTRY_OVERHEAD: usize = 256;

/// Cache replacement policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Policy {
    /// Least recently used (insertions and hits count as uses).
    #[default]
    Lru,
    /// Least frequently used; ties go to the least recently used.
    Lfu,
    /// First in, first out; hits do not matter.
    Fifo,
    /// Uniformly random victim from a seeded generator; hits do not matter.
    Random,
    /// VIP: the forwarder admits only objects in the VIP cache set (the
    /// highest VIP counts) and erases those that leave it (see
    /// [`crate::vip`]); within the store, victims are picked as by LFU.
    Vip,
}

impl Policy {
    /// Every policy, in declaration order.
    pub const ALL: [Policy; 5] = [
        Policy::Lru,
        Policy::Lfu,
        Policy::Fifo,
        Policy::Random,
        Policy::Vip,
    ];

    /// The lowercase name used by [`fmt::Display`] and [`FromStr`].
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Lru => "lru",
            Policy::Lfu => "lfu",
            Policy::Fifo => "fifo",
            Policy::Random => "random",
            Policy::Vip => "vip",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for a policy name that [`Policy::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown cache policy {0:?} (expected lru, lfu, fifo, random or vip)")]
pub struct ParsePolicyError(pub String);

impl FromStr for Policy {
    type Err = ParsePolicyError;

    /// Parses `lru`, `lfu`, `fifo` or `random` (ASCII case-insensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Policy::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ParsePolicyError(s.to_string()))
    }
}

/// Content Store limits and switches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsConfig {
    /// Maximum number of cached packets (0 disables caching).
    pub max_packets: usize,
    /// Maximum charged bytes (wire sizes plus [`ENTRY_OVERHEAD`] each).
    pub max_bytes: usize,
    /// Replacement policy.
    pub policy: Policy,
    /// Whether [`ContentStore::insert`] admits new Data.
    pub admit: bool,
    /// Whether [`ContentStore::find`] answers from the cache.
    pub serve: bool,
}

impl Default for CsConfig {
    /// 65536 packets, 512 MiB, LRU, admitting and serving.
    fn default() -> Self {
        CsConfig {
            max_packets: 65536,
            max_bytes: 512 << 20,
            policy: Policy::Lru,
            admit: true,
            serve: true,
        }
    }
}

/// Packets up to this size are copied into a buffer of their own when
/// cached: a received packet shares the face's 128 KiB receive buffer, and a
/// small cached packet must not keep all of it alive.
const COPY_BELOW: usize = 2048;

/// The wire a cache entry keeps and where the name's TLV-VALUE lies in it:
/// a slice of the received buffer, or for a packet of at most
/// [`COPY_BELOW`] bytes, a copy of its own (so that nothing keeps the receive
/// buffer alive). `None` only if the wire does not decode.
fn own_buffer(data: &Data) -> Option<(bytes::Bytes, u32, u32)> {
    name_in_wire(data).or_else(|| {
        // A Data built locally keeps the name it was given, not a slice of
        // its wire: decode the wire to find it there.
        name_in_wire(&Data::decode(data.wire().clone()).ok()?)
    })
}

/// [`own_buffer`] for a `Data` whose name is a slice of its wire (every
/// decoded packet).
fn name_in_wire(data: &Data) -> Option<(bytes::Bytes, u32, u32)> {
    let wire = data.wire();
    let name = data.name().value();
    // Where the name lies in the wire (pointer arithmetic on addresses only;
    // the name is a slice of the wire it was decoded from), checked below.
    let at = (name.as_ptr() as usize).wrapping_sub(wire.as_ptr() as usize);
    let end = at.checked_add(name.len())?;
    if end > wire.len() || wire[at..end] != name[..] {
        return None;
    }
    let (at32, len32) = (u32::try_from(at).ok()?, u32::try_from(name.len()).ok()?);
    let wire = if wire.len() > COPY_BELOW {
        wire.clone()
    } else {
        bytes::Bytes::copy_from_slice(wire)
    };
    Some((wire, at32, len32))
}

/// A cached packet: only its wire (the forwarder sends it as is); the
/// decoded fields are rebuilt when a caller asks for a [`Data`].
#[derive(Debug, Clone)]
struct CachedData {
    wire: bytes::Bytes,
}

impl CachedData {
    fn wire(&self) -> &bytes::Bytes {
        &self.wire
    }

    /// The packet, decoded again (it was valid when cached).
    fn decode(&self) -> Option<Data> {
        Data::decode(self.wire.clone()).ok()
    }

    fn implicit_digest(&self) -> [u8; 32] {
        self.decode().map_or([0; 32], |d| d.implicit_digest())
    }

    #[cfg(test)]
    fn full_name(&self) -> Name {
        self.decode().map(|d| d.full_name()).unwrap_or_default()
    }
}

/// "No entry" in the victim list links.
const NIL: u32 = u32::MAX;

/// One cached packet and its bookkeeping (96 bytes on a 64-bit target).
#[derive(Debug, Clone)]
struct Entry {
    data: CachedData,
    /// When the Data becomes stale; `None` if that lies beyond what
    /// `Instant` can represent (never stale).
    stale_at: Option<Instant>,
    /// Implicit digest, computed on the first digest lookup.
    digest: Option<Box<[u8; 32]>>,
    /// Number of hits (kept across re-insertions of the same name).
    hits: u64,
    /// Sequence number of the insertion.
    inserted: u64,
    /// Sequence number of the insertion or of the latest hit.
    last_use: u64,
    /// Where the name's TLV-VALUE lies in `data.wire`.
    name_at: u32,
    name_len: u32,
    /// LRU and FIFO: the previous entry in the victim list (or [`NIL`]);
    /// Random: the entry's position in the victim vector.
    prev: u32,
    /// LRU and FIFO: the next entry in the victim list (or [`NIL`]).
    next: u32,
}

impl Entry {
    /// Bytes charged: wire size plus [`ENTRY_OVERHEAD`].
    fn size(&self) -> usize {
        self.data.wire.len().saturating_add(ENTRY_OVERHEAD)
    }

    /// The name's TLV-VALUE: the key of the entry in the index.
    fn key(&self) -> NameKey {
        let at = self.name_at as usize;
        NameKey(self.data.wire.slice(at..at + self.name_len as usize))
    }

    fn is_stale(&self, now: Instant) -> bool {
        self.stale_at.is_some_and(|t| now >= t)
    }

    fn can_serve(&self, must_be_fresh: bool, now: Instant) -> bool {
        !must_be_fresh || !self.is_stale(now)
    }

    fn digest(&mut self) -> [u8; 32] {
        **self
            .digest
            .get_or_insert_with(|| Box::new(self.data.implicit_digest()))
    }
}

/// An index key: a name's TLV-VALUE (a slice of the entry's wire, so it
/// costs no copy). Byte order is the NDN canonical order (see `Name`'s
/// `Ord`), and a name is a prefix of another exactly when its TLV-VALUE is a
/// byte prefix of the other's (both are sequences of whole TLVs).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct NameKey(bytes::Bytes);

impl std::borrow::Borrow<[u8]> for NameKey {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

/// The entries: a slab of slots (ids are `u32`), and the ordered index
/// from name to id.
#[derive(Debug, Clone, Default)]
struct Entries {
    /// Name → slot, in canonical order.
    order: BTreeMap<NameKey, u32>,
    slab: Vec<Option<Entry>>,
    /// Free slots of `slab`.
    free: Vec<u32>,
}

impl Entries {
    fn len(&self) -> usize {
        self.order.len()
    }

    fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The id of the entry named by the TLV-VALUE `name`.
    fn id(&self, name: &[u8]) -> Option<u32> {
        self.order.get(name).copied()
    }

    fn entry(&self, id: u32) -> Option<&Entry> {
        self.slab.get(id as usize).and_then(Option::as_ref)
    }

    fn entry_mut(&mut self, id: u32) -> Option<&mut Entry> {
        self.slab.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// Stores `entry` (whose name is not indexed yet) and returns its id;
    /// `None` when the `u32` id space is full.
    fn insert(&mut self, entry: Entry) -> Option<u32> {
        let key = entry.key();
        let id = match self.free.pop() {
            Some(id) => {
                self.slab[id as usize] = Some(entry);
                id
            }
            None => {
                let id = u32::try_from(self.slab.len()).ok().filter(|&i| i != NIL)?;
                self.slab.push(Some(entry));
                id
            }
        };
        self.order.insert(key, id);
        Some(id)
    }

    /// Removes entry `id` from the slab and the index.
    fn remove(&mut self, id: u32) -> Option<Entry> {
        let e = self.slab.get_mut(id as usize)?.take()?;
        self.order.remove(&*e.key().0);
        self.free.push(id);
        Some(e)
    }

    /// Ids in canonical name order.
    fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.order.values().copied()
    }

    /// The cached names in canonical order.
    #[cfg(test)]
    fn keys(&self) -> impl Iterator<Item = Name> + '_ {
        self.order
            .keys()
            .map(|k| Name::from_value(k.0.clone()).unwrap_or_default())
    }

    #[cfg(test)]
    fn get(&self, name: &Name) -> Option<&Entry> {
        self.id(name.value()).and_then(|id| self.entry(id))
    }

    #[cfg(test)]
    fn values(&self) -> impl Iterator<Item = &Entry> + '_ {
        self.ids().filter_map(|id| self.entry(id))
    }
}

#[cfg(test)]
impl std::ops::Index<&Name> for Entries {
    type Output = Entry;

    fn index(&self, name: &Name) -> &Entry {
        self.get(name).expect("no cached entry of that name")
    }
}

/// Key of an entry in the ordered victim map: the smallest key is evicted
/// first.
fn victim_key(policy: Policy, e: &Entry) -> (u64, u64) {
    match policy {
        Policy::Lru => (0, e.last_use),
        Policy::Lfu | Policy::Vip => (e.hits, e.last_use),
        Policy::Fifo | Policy::Random => (0, e.inserted),
    }
}

/// The per-policy structure that picks the next victim.
#[derive(Debug, Clone)]
enum Victims {
    /// LRU, FIFO: a doubly linked list through the entries (`prev`, `next`)
    /// in [`victim_key`] order, next victim at the head. An insertion or
    /// (LRU) a hit moves the entry to the tail: O(1), no memory of its own.
    List { head: u32, tail: u32, len: usize },
    /// LFU, VIP: ids ordered by [`victim_key`].
    Ordered(BTreeMap<(u64, u64), u32>),
    /// Random: ids in any order; `Entry::prev` is each one's index.
    Random(Vec<u32>),
}

impl Victims {
    #[cfg(test)]
    fn len(&self) -> usize {
        match self {
            Victims::List { len, .. } => *len,
            Victims::Ordered(m) => m.len(),
            Victims::Random(v) => v.len(),
        }
    }
}

/// Appends entry `id` at the tail of the victim list.
fn list_push(entries: &mut Entries, head: &mut u32, tail: &mut u32, len: &mut usize, id: u32) {
    let old_tail = *tail;
    if let Some(e) = entries.entry_mut(id) {
        e.prev = old_tail;
        e.next = NIL;
    }
    match entries.entry_mut(old_tail) {
        Some(t) => t.next = id,
        None => *head = id,
    }
    *tail = id;
    *len += 1;
}

/// Unlinks entry `id` from the victim list.
fn list_unlink(entries: &mut Entries, head: &mut u32, tail: &mut u32, len: &mut usize, id: u32) {
    let Some((prev, next)) = entries.entry(id).map(|e| (e.prev, e.next)) else {
        return;
    };
    match entries.entry_mut(prev) {
        Some(p) => p.next = next,
        None => *head = next,
    }
    match entries.entry_mut(next) {
        Some(n) => n.prev = prev,
        None => *tail = prev,
    }
    *len = len.saturating_sub(1);
}

/// Removes slot `i` of the Random vector, fixing up the slot of the entry
/// moved into its place. Returns the removed id.
fn random_take(ids: &mut Vec<u32>, entries: &mut Entries, i: usize) -> Option<u32> {
    if i >= ids.len() {
        return None;
    }
    let taken = ids.swap_remove(i);
    if let Some(&moved) = ids.get(i) {
        if let Some(e) = entries.entry_mut(moved) {
            e.prev = i as u32;
        }
    }
    Some(taken)
}

/// The Content Store.
#[derive(Debug, Clone)]
pub struct ContentStore {
    cfg: CsConfig,
    /// All entries, by name in canonical order.
    index: Entries,
    /// Victim selection for `cfg.policy`.
    victims: Victims,
    /// Generator for the Random policy.
    rng: fastrand::Rng,
    /// Store-wide event counter (insertions and hits).
    seq: u64,
    /// Sum of the entries' charged sizes.
    bytes: usize,
    hits: u64,
    misses: u64,
}

impl ContentStore {
    /// An empty store; `seed` drives the Random policy's generator.
    pub fn new(cfg: CsConfig, seed: u64) -> Self {
        let victims = Self::empty_victims(cfg.policy);
        ContentStore {
            cfg,
            index: Entries::default(),
            victims,
            rng: fastrand::Rng::with_seed(seed),
            seq: 0,
            bytes: 0,
            hits: 0,
            misses: 0,
        }
    }

    fn empty_victims(policy: Policy) -> Victims {
        match policy {
            Policy::Random => Victims::Random(Vec::new()),
            Policy::Lru | Policy::Fifo => Victims::List {
                head: NIL,
                tail: NIL,
                len: 0,
            },
            Policy::Lfu | Policy::Vip => Victims::Ordered(BTreeMap::new()),
        }
    }

    fn next_seq(&mut self) -> u64 {
        // 2^64 events cannot happen in practice; wrapping keeps this panic-free.
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Caches `data` received at `now`.
    ///
    /// Replaces a cached Data of the same name. The Data is stale from
    /// `now + FreshnessPeriod` on (at once when the period is 0 or absent).
    /// Other entries are evicted per the policy until both limits hold with
    /// the new one counted. Nothing happens when `admit` is off, when
    /// `max_packets` is 0, or when the packet's charge alone exceeds
    /// `max_bytes`.
    pub fn insert(&mut self, data: &Data, now: Instant) {
        let size = data.wire().len().saturating_add(ENTRY_OVERHEAD);
        if !self.cfg.admit || self.cfg.max_packets == 0 || size > self.cfg.max_bytes {
            return;
        }
        let Some((wire, name_at, name_len)) = own_buffer(data) else {
            return;
        };
        let old = self.index.id(data.name().value());
        let hits = old.and_then(|id| self.remove_id(id)).map_or(0, |e| e.hits);
        // Both subtractions are safe: checked above.
        self.evict_until(self.cfg.max_packets - 1, self.cfg.max_bytes - size);

        let seq = self.next_seq();
        let stale_at = now.checked_add(Duration::from_millis(data.freshness_period()));
        let entry = Entry {
            data: CachedData { wire },
            stale_at,
            digest: None,
            hits,
            inserted: seq,
            last_use: seq,
            name_at,
            name_len,
            prev: NIL,
            next: NIL,
        };
        let key = victim_key(self.cfg.policy, &entry);
        let Some(id) = self.index.insert(entry) else {
            return;
        };
        match &mut self.victims {
            Victims::List { head, tail, len } => list_push(&mut self.index, head, tail, len, id),
            Victims::Ordered(m) => {
                m.insert(key, id);
            }
            Victims::Random(v) => {
                if let Some(e) = self.index.entry_mut(id) {
                    e.prev = v.len() as u32;
                }
                v.push(id);
            }
        }
        self.bytes = self.bytes.saturating_add(size);
    }

    /// Looks up a Data that satisfies `interest` at `now` (see the module
    /// documentation for the matching rules), counting a hit or a miss.
    ///
    /// A hit counts as a use for LRU and LFU; FIFO and Random order is not
    /// affected.
    pub fn find(&mut self, interest: &Interest, now: Instant) -> Option<Data> {
        self.find_entry(interest, now).and_then(|e| e.data.decode())
    }

    /// [`ContentStore::find`], returning only the matching Data's wire (what
    /// the forwarder sends; cheaper than a copy of the decoded packet).
    pub fn find_wire(&mut self, interest: &Interest, now: Instant) -> Option<bytes::Bytes> {
        self.find_entry(interest, now)
            .map(|e| e.data.wire().clone())
    }

    /// Whether a packet of exactly this name is stored (no hit or miss
    /// counted, no policy state touched: a neighbour's view of the store).
    pub fn holds(&self, name: &Name) -> bool {
        self.index.id(name.value()).is_some()
    }

    /// True when [`ContentStore::insert`] may keep a packet (admitting, with
    /// room for at least one).
    pub fn admits(&self) -> bool {
        self.cfg.admit && self.cfg.max_packets > 0
    }

    /// [`ContentStore::find_wire`] that counts a hit but not a miss: for a
    /// caller that looks in several stores in turn and counts one miss
    /// itself when none has the packet ([`ContentStore::count_miss`]).
    pub fn find_wire_or_pass(&mut self, interest: &Interest, now: Instant) -> Option<bytes::Bytes> {
        self.find_entry_counting(interest, now, false)
            .map(|e| e.data.wire().clone())
    }

    /// Counts one lookup that found nothing.
    pub fn count_miss(&mut self) {
        self.misses = self.misses.saturating_add(1);
    }

    fn find_entry(&mut self, interest: &Interest, now: Instant) -> Option<&Entry> {
        self.find_entry_counting(interest, now, true)
    }

    fn find_entry_counting(
        &mut self,
        interest: &Interest,
        now: Instant,
        count_miss: bool,
    ) -> Option<&Entry> {
        let found = if self.cfg.serve && !self.index.is_empty() {
            self.find_match(
                &interest.name,
                interest.can_be_prefix,
                interest.must_be_fresh,
                now,
            )
        } else {
            None
        };
        let Some(id) = found else {
            if count_miss {
                self.count_miss();
            }
            return None;
        };
        self.hits = self.hits.saturating_add(1);
        let seq = self.next_seq();
        let policy = self.cfg.policy;
        let entry = self.index.entry_mut(id)?;
        let old_key = victim_key(policy, entry);
        entry.hits = entry.hits.saturating_add(1);
        entry.last_use = seq;
        let new_key = victim_key(policy, entry);
        if old_key != new_key {
            match &mut self.victims {
                Victims::List { head, tail, len } => {
                    list_unlink(&mut self.index, head, tail, len, id);
                    list_push(&mut self.index, head, tail, len, id);
                }
                Victims::Ordered(m) => {
                    m.remove(&old_key);
                    m.insert(new_key, id);
                }
                Victims::Random(_) => {}
            }
        }
        self.index.entry(id)
    }

    /// The id of the entry that satisfies the Interest, first in canonical
    /// order.
    fn find_match(
        &mut self,
        name: &Name,
        can_be_prefix: bool,
        must_be_fresh: bool,
        now: Instant,
    ) -> Option<u32> {
        // `/prefix/<implicit digest>` names exactly one packet: `/prefix`
        // with that digest. It is also the canonical first match under
        // CanBePrefix (its full name equals the Interest's name).
        if let Some(last) = name.last().filter(|c| c.typ == COMP_IMPLICIT_DIGEST) {
            let base = name.prefix(-1);
            if let Some(id) = self.index.id(base.value()) {
                if let Some(e) = self.index.entry_mut(id) {
                    if e.digest() == last.value && e.can_serve(must_be_fresh, now) {
                        return Some(id);
                    }
                }
            }
        }
        let value: &[u8] = name.value();
        if !can_be_prefix {
            return self.index.id(value).filter(|&id| {
                self.index
                    .entry(id)
                    .is_some_and(|e| e.can_serve(must_be_fresh, now))
            });
        }
        self.index
            .order
            .range::<[u8], _>((Bound::Included(value), Bound::Unbounded))
            .take_while(|(k, _)| k.0.starts_with(value))
            .map(|(_, &id)| id)
            .find(|&id| {
                self.index
                    .entry(id)
                    .is_some_and(|e| e.can_serve(must_be_fresh, now))
            })
    }

    /// Whether some entry's name starts with `prefix`.
    pub fn holds_prefix(&self, prefix: &Name) -> bool {
        let value: &[u8] = prefix.value();
        self.index
            .order
            .range::<[u8], _>((Bound::Included(value), Bound::Unbounded))
            .next()
            .is_some_and(|(k, _)| k.0.starts_with(value))
    }

    /// Removes up to `limit` entries whose names start with `prefix`, in
    /// canonical order, and returns how many were removed.
    pub fn erase_prefix(&mut self, prefix: &Name, limit: usize) -> usize {
        let value: &[u8] = prefix.value();
        let doomed: Vec<u32> = self
            .index
            .order
            .range::<[u8], _>((Bound::Included(value), Bound::Unbounded))
            .take_while(|(k, _)| k.0.starts_with(value))
            .take(limit)
            .map(|(_, &id)| id)
            .collect();
        doomed
            .into_iter()
            .filter(|&id| self.remove_id(id).is_some())
            .count()
    }

    /// Replaces the configuration. A changed policy rebuilds the victim
    /// structure from the entries' recorded history; lower limits evict at
    /// once.
    pub fn set_config(&mut self, cfg: CsConfig) {
        let rebuild = cfg.policy != self.cfg.policy;
        self.cfg = cfg;
        if rebuild {
            self.rebuild_victims();
        }
        self.evict_until(self.cfg.max_packets, self.cfg.max_bytes);
    }

    fn rebuild_victims(&mut self) {
        let policy = self.cfg.policy;
        let ids: Vec<u32> = self.index.ids().collect();
        self.victims = Self::empty_victims(policy);
        match &mut self.victims {
            Victims::List { head, tail, len } => {
                let mut keyed: Vec<((u64, u64), u32)> = ids
                    .iter()
                    .filter_map(|&id| self.index.entry(id).map(|e| (victim_key(policy, e), id)))
                    .collect();
                keyed.sort_unstable();
                for (_, id) in keyed {
                    list_push(&mut self.index, head, tail, len, id);
                }
            }
            Victims::Ordered(m) => {
                *m = ids
                    .iter()
                    .filter_map(|&id| self.index.entry(id).map(|e| (victim_key(policy, e), id)))
                    .collect();
            }
            Victims::Random(v) => {
                for (i, &id) in ids.iter().enumerate() {
                    if let Some(e) = self.index.entry_mut(id) {
                        e.prev = i as u32;
                    }
                }
                *v = ids;
            }
        }
    }

    /// The current configuration.
    pub fn config(&self) -> &CsConfig {
        &self.cfg
    }

    /// Number of cached packets.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Charged bytes: wire sizes plus [`ENTRY_OVERHEAD`] per entry.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Lookups answered from the cache.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Lookups not answered from the cache.
    pub fn misses(&self) -> u64 {
        self.misses
    }

    /// The name of entry `id` (validated when it was cached).
    fn name_of(&self, id: u32) -> Option<Name> {
        self.index
            .entry(id)
            .and_then(|e| Name::from_value(e.key().0).ok())
    }

    /// Every cached name, next victim first: the order in which evictions
    /// would remove them if nothing else happened in between (for Random,
    /// the generator's upcoming picks, without advancing it).
    pub fn names_in_eviction_order(&self) -> Vec<Name> {
        let ids: Vec<u32> = match &self.victims {
            Victims::List { head, len, .. } => {
                let mut ids = Vec::with_capacity(*len);
                let mut at = *head;
                while let Some(e) = self.index.entry(at) {
                    ids.push(at);
                    at = e.next;
                }
                ids
            }
            Victims::Ordered(m) => m.values().copied().collect(),
            Victims::Random(v) => {
                let mut ids = v.clone();
                let mut rng = self.rng.clone();
                let mut order = Vec::with_capacity(ids.len());
                while !ids.is_empty() {
                    let i = rng.usize(..ids.len());
                    order.push(ids.swap_remove(i));
                }
                order
            }
        };
        ids.into_iter().filter_map(|id| self.name_of(id)).collect()
    }

    /// Evicts until at most `max_packets` entries and `max_bytes` bytes
    /// remain.
    fn evict_until(&mut self, max_packets: usize, max_bytes: usize) {
        while self.index.len() > max_packets || self.bytes > max_bytes {
            if !self.evict_one() {
                break;
            }
        }
    }

    /// Evicts the policy's next victim; false when there is none.
    fn evict_one(&mut self) -> bool {
        let victim = match &self.victims {
            Victims::List { head, .. } => Some(*head).filter(|&h| h != NIL),
            Victims::Ordered(m) => m.first_key_value().map(|(_, &id)| id),
            Victims::Random(v) if v.is_empty() => None,
            Victims::Random(v) => v.get(self.rng.usize(..v.len())).copied(),
        };
        victim.is_some_and(|id| self.remove_id(id).is_some())
    }

    /// Removes entry `id` from the index and the victim structure.
    fn remove_id(&mut self, id: u32) -> Option<Entry> {
        let (slot, key) = {
            let e = self.index.entry(id)?;
            (e.prev as usize, victim_key(self.cfg.policy, e))
        };
        match &mut self.victims {
            Victims::List { head, tail, len } => list_unlink(&mut self.index, head, tail, len, id),
            Victims::Ordered(m) => {
                m.remove(&key);
            }
            Victims::Random(v) => {
                random_take(v, &mut self.index, slot);
            }
        }
        let e = self.index.remove(id)?;
        self.bytes = self.bytes.saturating_sub(e.size());
        Some(e)
    }

    /// Checks the internal invariants (tests only).
    #[cfg(test)]
    fn check_invariants(&self) {
        assert_eq!(self.victims.len(), self.index.len());
        assert_eq!(
            self.bytes,
            self.index.values().map(|e| e.size()).sum::<usize>()
        );
        assert!(self.index.len() <= self.cfg.max_packets);
        assert!(self.bytes <= self.cfg.max_bytes);
        assert_eq!(
            self.index.slab.iter().filter(|s| s.is_some()).count(),
            self.index.len()
        );
        match &self.victims {
            Victims::List { head, tail, len } => {
                let (mut at, mut prev, mut n, mut last_key) = (*head, NIL, 0, None);
                while at != NIL {
                    let e = self.index.entry(at).expect("listed entry exists");
                    assert_eq!(e.prev, prev);
                    let k = victim_key(self.cfg.policy, e);
                    assert!(last_key < Some(k), "list in victim order");
                    (last_key, prev, at, n) = (Some(k), at, e.next, n + 1);
                }
                assert_eq!((prev, n), (*tail, *len));
            }
            Victims::Ordered(m) => {
                for (key, &id) in m {
                    let e = self.index.entry(id).expect("ordered entry exists");
                    assert_eq!(*key, victim_key(self.cfg.policy, e));
                }
            }
            Victims::Random(v) => {
                for (i, &id) in v.iter().enumerate() {
                    assert_eq!(self.index.entry(id).map(|e| e.prev), Some(i as u32));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use granary_packet::{DataBuilder, InterestFields};

    fn name(uri: &str) -> Name {
        Name::from_uri(uri).unwrap()
    }

    /// A Data named `uri` with `len` content bytes and a FreshnessPeriod.
    fn data_fp(uri: &str, len: usize, fp: u64) -> Data {
        DataBuilder::new(name(uri))
            .content(vec![0x5a; len])
            .freshness_period(fp)
            .encode_with_signature(Bytes::from_static(&[0; 32]))
    }

    fn data(uri: &str) -> Data {
        data_fp(uri, 10, 10_000)
    }

    fn interest(uri: &str, can_be_prefix: bool, must_be_fresh: bool) -> Interest {
        InterestFields {
            name: name(uri),
            can_be_prefix,
            must_be_fresh,
            ..Default::default()
        }
        .encode()
    }

    fn exact(uri: &str) -> Interest {
        interest(uri, false, false)
    }

    fn cfg(policy: Policy, max_packets: usize) -> CsConfig {
        CsConfig {
            max_packets,
            policy,
            ..CsConfig::default()
        }
    }

    fn order(cs: &ContentStore) -> Vec<String> {
        cs.names_in_eviction_order()
            .iter()
            .map(|n| n.to_string())
            .collect()
    }

    fn names(cs: &ContentStore) -> Vec<String> {
        cs.index.keys().map(|n| n.to_string()).collect()
    }

    fn insert_all(cs: &mut ContentStore, uris: &[&str], now: Instant) {
        for u in uris {
            cs.insert(&data(u), now);
            cs.check_invariants();
        }
    }

    #[test]
    fn policy_parses_and_displays() {
        for p in Policy::ALL {
            assert_eq!(p.to_string().parse::<Policy>(), Ok(p));
        }
        assert_eq!("LRU".parse::<Policy>(), Ok(Policy::Lru));
        assert_eq!(" Random ".parse::<Policy>(), Ok(Policy::Random));
        let e = "mru".parse::<Policy>().unwrap_err();
        assert_eq!(e, ParsePolicyError("mru".into()));
        assert!(e.to_string().contains("mru"));
        assert_eq!(Policy::default(), Policy::Lru);
    }

    /// The default store as documented: admitting and serving, LRU, and
    /// full at 65,536 packets (small ones: the 512 MiB byte budget is not
    /// what binds them), where an insertion evicts the least recently used.
    #[test]
    fn default_store_holds_65536_packets_and_evicts_lru() {
        let t = Instant::now();
        let mut cs = ContentStore::new(CsConfig::default(), 0);
        assert!(cs.admits());
        let full = 65536;
        for k in 0..full {
            cs.insert(&data(&format!("/d/{k}")), t);
        }
        assert_eq!(cs.len(), full, "every packet up to the limit is kept");
        assert!(cs.bytes() < cs.config().max_bytes);
        // Serving: a hit, which makes /d/0 the most recently used.
        assert!(cs.find(&exact("/d/0"), t).is_some());
        assert_eq!((cs.hits(), cs.misses()), (1, 0));
        cs.insert(&data("/d/new"), t);
        assert_eq!(cs.len(), full, "one in, one out");
        assert!(
            cs.find(&exact("/d/1"), t).is_none(),
            "the least recently used went"
        );
        assert!(cs.find(&exact("/d/0"), t).is_some());
        assert!(cs.find(&exact("/d/new"), t).is_some());
        assert!(cs.find(&exact("/d/2"), t).is_some());
        cs.insert(&data("/d/newer"), t);
        assert!(cs.find(&exact("/d/3"), t).is_none(), "then the next one");
        cs.check_invariants();
    }

    #[test]
    fn admits_only_when_admitting_with_room() {
        let with = |max_packets, admit| {
            ContentStore::new(
                CsConfig {
                    max_packets,
                    admit,
                    ..CsConfig::default()
                },
                0,
            )
            .admits()
        };
        assert!(with(1, true));
        assert!(!with(0, true), "no room");
        assert!(!with(1, false), "not admitting");
        assert!(!with(0, false));
    }

    #[test]
    fn lru_evicts_least_recently_used() {
        let t = Instant::now();
        let mut cs = ContentStore::new(cfg(Policy::Lru, 3), 0);
        insert_all(&mut cs, &["/A", "/B", "/C"], t);
        assert_eq!(order(&cs), ["/A", "/B", "/C"]);
        assert!(cs.find(&exact("/A"), t).is_some());
        assert_eq!(order(&cs), ["/B", "/C", "/A"]);
        insert_all(&mut cs, &["/D"], t);
        assert_eq!(names(&cs), ["/A", "/C", "/D"]);
        assert_eq!(order(&cs), ["/C", "/A", "/D"]);
        // Hits on C then A: D is now the least recently used.
        cs.find(&exact("/C"), t);
        cs.find(&exact("/A"), t);
        insert_all(&mut cs, &["/E"], t);
        assert_eq!(names(&cs), ["/A", "/C", "/E"]);
    }

    #[test]
    fn lfu_evicts_least_frequently_used_then_least_recent() {
        let t = Instant::now();
        let mut cs = ContentStore::new(cfg(Policy::Lfu, 3), 0);
        insert_all(&mut cs, &["/A", "/B", "/C"], t);
        for u in ["/A", "/A", "/C"] {
            assert!(cs.find(&exact(u), t).is_some());
        }
        assert_eq!(order(&cs), ["/B", "/C", "/A"]);
        insert_all(&mut cs, &["/D"], t);
        assert_eq!(names(&cs), ["/A", "/C", "/D"]);
        // The newcomer has no hits: it is next, even though it is newest.
        assert_eq!(order(&cs), ["/D", "/C", "/A"]);
        insert_all(&mut cs, &["/E"], t);
        assert_eq!(names(&cs), ["/A", "/C", "/E"]);
        // Tie on count (C:1, E:1 after this hit): C was used longer ago.
        cs.find(&exact("/E"), t);
        assert_eq!(order(&cs), ["/C", "/E", "/A"]);
        // C catches up with A's two hits and was used more recently: E (one
        // hit) goes first, then A.
        cs.find(&exact("/C"), t);
        assert_eq!(order(&cs), ["/E", "/A", "/C"]);
    }

    #[test]
    fn fifo_ignores_hits() {
        let t = Instant::now();
        let mut cs = ContentStore::new(cfg(Policy::Fifo, 3), 0);
        insert_all(&mut cs, &["/A", "/B", "/C"], t);
        for _ in 0..5 {
            assert!(cs.find(&exact("/A"), t).is_some());
        }
        assert_eq!(order(&cs), ["/A", "/B", "/C"]);
        insert_all(&mut cs, &["/D"], t);
        assert_eq!(names(&cs), ["/B", "/C", "/D"]);
        // Re-inserting B is a fresh insertion: it goes to the back.
        insert_all(&mut cs, &["/B"], t);
        assert_eq!(order(&cs), ["/C", "/D", "/B"]);
    }

    #[test]
    fn random_is_reproducible_and_predicted() {
        let t = Instant::now();
        let uris = ["/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h"];
        let run = |seed: u64| {
            let mut cs = ContentStore::new(cfg(Policy::Random, 8), seed);
            insert_all(&mut cs, &uris, t);
            // Hits do not change the order.
            let before = order(&cs);
            cs.find(&exact("/c"), t);
            assert_eq!(order(&cs), before);
            // Each insertion beyond capacity evicts the predicted victim.
            let mut evicted = Vec::new();
            for i in 0..uris.len() {
                let predicted = order(&cs)[0].clone();
                cs.insert(&data(&format!("/new/{i}")), t);
                cs.check_invariants();
                assert!(!names(&cs).contains(&predicted));
                evicted.push(predicted);
            }
            (before, evicted)
        };
        let (order7, evicted7) = run(7);
        assert_eq!(run(7), (order7.clone(), evicted7.clone()));
        assert_ne!(run(8).0, order7, "another seed, another order");
        assert_eq!(evicted7[0], order7[0]);
    }

    #[test]
    fn random_evicts_every_entry_for_some_seed() {
        let t = Instant::now();
        let uris = ["/a", "/b", "/c", "/d"];
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..200 {
            let mut cs = ContentStore::new(cfg(Policy::Random, 4), seed);
            insert_all(&mut cs, &uris, t);
            insert_all(&mut cs, &["/z"], t);
            let left = names(&cs);
            assert_eq!(left.len(), 4);
            assert!(
                left.contains(&"/z".to_string()),
                "newcomer is never the victim"
            );
            for u in uris {
                if !left.contains(&u.to_string()) {
                    seen.insert(u);
                }
            }
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), uris);
    }

    #[test]
    fn eviction_order_predicts_evictions_for_every_policy() {
        let t = Instant::now();
        for policy in Policy::ALL {
            let mut cs = ContentStore::new(cfg(policy, 5), 42);
            insert_all(&mut cs, &["/a", "/b", "/c", "/d", "/e"], t);
            for u in ["/b", "/d", "/b", "/a"] {
                cs.find(&exact(u), t);
            }
            let predicted = order(&cs);
            // Shrink one packet at a time: each step evicts the next
            // predicted victim.
            for (k, victim) in predicted.iter().enumerate() {
                cs.set_config(cfg(policy, 4 - k));
                cs.check_invariants();
                assert!(!names(&cs).contains(victim), "{policy}: {victim}");
                assert_eq!(cs.len(), 4 - k);
            }
            assert!(cs.is_empty());
        }
    }

    #[test]
    fn byte_limit_evicts_until_it_fits() {
        let t = Instant::now();
        let one = data("/a").wire().len() + ENTRY_OVERHEAD;
        let mut cs = ContentStore::new(
            CsConfig {
                max_bytes: 3 * one,
                ..cfg(Policy::Fifo, 100)
            },
            0,
        );
        insert_all(&mut cs, &["/a", "/b", "/c"], t);
        assert_eq!(cs.bytes(), 3 * one);
        insert_all(&mut cs, &["/d"], t);
        assert_eq!(names(&cs), ["/b", "/c", "/d"]);
        assert_eq!(cs.bytes(), 3 * one);
        // A packet almost twice as big needs two victims.
        let big = data_fp("/big", one - 100, 1000);
        assert!(big.wire().len() + ENTRY_OVERHEAD <= 2 * one);
        assert!(big.wire().len() + ENTRY_OVERHEAD > one);
        cs.insert(&big, t);
        cs.check_invariants();
        assert_eq!(names(&cs), ["/d", "/big"]);
    }

    #[test]
    fn entry_is_charged_wire_plus_overhead() {
        let t = Instant::now();
        let mut cs = ContentStore::new(CsConfig::default(), 0);
        let d = data_fp("/a", 1000, 0);
        let w = d.wire().len();
        cs.insert(&d, t);
        assert_eq!(cs.bytes(), w + ENTRY_OVERHEAD);
        // The constant covers at least the structures themselves, unslacked.
        let floor = 2 * std::mem::size_of::<Name>()
            + std::mem::size_of::<Entry>()
            + std::mem::size_of::<(u64, u64)>();
        assert!(ENTRY_OVERHEAD >= floor, "{ENTRY_OVERHEAD} < {floor}");
    }

    #[test]
    fn oversized_packet_is_not_admitted() {
        let t = Instant::now();
        let one = data("/a").wire().len() + ENTRY_OVERHEAD;
        let mut cs = ContentStore::new(
            CsConfig {
                max_bytes: 2 * one,
                ..CsConfig::default()
            },
            0,
        );
        insert_all(&mut cs, &["/a", "/b"], t);
        assert_eq!(cs.bytes(), 2 * one, "filling the limit exactly is fine");
        let huge = data_fp("/huge", 2 * one, 10_000);
        assert!(huge.wire().len() + ENTRY_OVERHEAD > 2 * one);
        cs.insert(&huge, t);
        // An oversized replacement leaves the cached packet alone.
        cs.insert(&data_fp("/b", 2 * one, 10_000), t);
        cs.check_invariants();
        assert_eq!(
            names(&cs),
            ["/a", "/b"],
            "nothing evicted for a packet that cannot fit"
        );
        assert_eq!(cs.find(&exact("/b"), t).unwrap().content().len(), 10);
        // Just one byte over: also refused.
        let mut tight = ContentStore::new(
            CsConfig {
                max_bytes: one,
                ..CsConfig::default()
            },
            0,
        );
        tight.insert(&data_fp("/c", 11, 10_000), t);
        assert!(tight.is_empty());
        tight.insert(&data("/c"), t);
        assert_eq!(tight.len(), 1);
    }

    #[test]
    fn zero_capacity_and_switches() {
        let t = Instant::now();
        let mut cs = ContentStore::new(cfg(Policy::Lru, 0), 0);
        cs.insert(&data("/a"), t);
        assert!(cs.is_empty());

        let mut cs = ContentStore::new(
            CsConfig {
                admit: false,
                ..CsConfig::default()
            },
            0,
        );
        cs.insert(&data("/a"), t);
        assert!(cs.is_empty());
        cs.set_config(CsConfig::default());
        cs.insert(&data("/a"), t);
        assert!(cs.find(&exact("/a"), t).is_some());
        cs.set_config(CsConfig {
            serve: false,
            ..CsConfig::default()
        });
        assert!(cs.find(&exact("/a"), t).is_none());
        assert_eq!((cs.hits(), cs.misses()), (1, 1));
        assert_eq!(cs.len(), 1, "not serving keeps the entries");
    }

    #[test]
    fn same_name_replaces() {
        let t = Instant::now();
        let mut cs = ContentStore::new(cfg(Policy::Lfu, 10), 0);
        let old = data_fp("/a", 10, 1000);
        cs.insert(&old.clone(), t);
        cs.find(&exact("/a"), t);
        let new = data_fp("/a", 500, 1000);
        cs.insert(&new.clone(), t + Duration::from_secs(5));
        cs.check_invariants();
        assert_eq!(cs.len(), 1);
        assert_eq!(cs.bytes(), new.wire().len() + ENTRY_OVERHEAD);
        assert_eq!(cs.index[&name("/a")].hits, 1, "LFU count is kept");
        let later = t + Duration::from_millis(5500);
        let got = cs.find(&interest("/a", false, true), later).unwrap();
        assert_eq!(got, new, "fresh again: freshness restarts at re-insertion");
    }

    #[test]
    fn must_be_fresh_follows_freshness_period() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut cs = ContentStore::new(CsConfig::default(), 0);
        cs.insert(&data_fp("/f", 10, 1000), t);
        cs.insert(&data_fp("/zero", 10, 0), t);
        let none = DataBuilder::new(name("/none"))
            .content(&b"x"[..])
            .encode_with_signature(Bytes::from_static(&[0; 32]));
        cs.insert(&none, t);
        cs.insert(&data_fp("/forever", 10, u64::MAX), t);

        let fresh = |u: &str| interest(u, false, true);
        assert!(cs.find(&fresh("/f"), t).is_some());
        assert!(cs.find(&fresh("/f"), t + ms(999)).is_some());
        assert!(cs.find(&fresh("/f"), t + ms(1000)).is_none());
        assert!(
            cs.find(&exact("/f"), t + ms(1000)).is_some(),
            "stale still serves"
        );
        assert!(cs.find(&fresh("/zero"), t).is_none(), "0 ms: stale at once");
        assert!(cs.find(&exact("/zero"), t).is_some());
        assert!(cs.find(&fresh("/none"), t).is_none(), "absent means 0");
        assert!(cs
            .find(&fresh("/forever"), t + Duration::from_secs(1 << 40))
            .is_some());
        // A `now` before the insertion time is simply fresh.
        if let Some(before) = t.checked_sub(ms(1)) {
            assert!(cs.find(&fresh("/f"), before).is_some());
        }
    }

    #[test]
    fn can_be_prefix_returns_canonical_first() {
        let t = Instant::now();
        let mut cs = ContentStore::new(CsConfig::default(), 0);
        for (u, fp) in [
            ("/a/c", 10_000),
            ("/a/b/x", 10_000),
            ("/a/b", 0),
            ("/ab", 10_000),
            ("/a/seg=0", 10_000),
            ("/b", 10_000),
        ] {
            cs.insert(&data_fp(u, 10, fp), t);
        }
        let got = |cs: &mut ContentStore, u, cbp, mbf| {
            cs.find(&interest(u, cbp, mbf), t)
                .map(|d| d.name().to_string())
        };
        assert_eq!(got(&mut cs, "/a", true, false).as_deref(), Some("/a/b"));
        // /a/b is stale: the next Data under /a in canonical order.
        assert_eq!(got(&mut cs, "/a", true, true).as_deref(), Some("/a/b/x"));
        assert_eq!(got(&mut cs, "/a", false, false), None, "no Data named /a");
        assert_eq!(got(&mut cs, "/a/b", true, false).as_deref(), Some("/a/b"));
        assert_eq!(got(&mut cs, "/a/c", true, false).as_deref(), Some("/a/c"));
        assert_eq!(got(&mut cs, "/a/d", true, false), None);
        // Generic components sort before segment components.
        cs.erase_prefix(&name("/a/b"), usize::MAX);
        cs.erase_prefix(&name("/a/c"), usize::MAX);
        assert_eq!(got(&mut cs, "/a", true, false).as_deref(), Some("/a/seg=0"));
        assert_eq!(got(&mut cs, "/", true, false).as_deref(), Some("/a/seg=0"));
    }

    #[test]
    fn implicit_digest_selects_the_exact_packet() {
        let t = Instant::now();
        let mut cs = ContentStore::new(CsConfig::default(), 0);
        let d = data("/a/b");
        cs.insert(&d.clone(), t);
        cs.insert(&data("/a/b/c"), t);
        let full = d.full_name().to_string();
        assert_eq!(cs.find(&exact(&full), t), Some(d.clone()));
        assert_eq!(cs.find(&interest(&full, true, true), t), Some(d.clone()));
        let wrong = format!("/a/b/sha256digest={}", "00".repeat(32));
        assert_eq!(cs.find(&exact(&wrong), t), None);
        assert_eq!(cs.find(&interest(&wrong, true, false), t), None);
        // Replaced by different content: the old digest no longer matches.
        cs.insert(&data_fp("/a/b", 11, 10_000), t);
        assert_eq!(cs.find(&exact(&full), t), None);
        // A stale packet does not satisfy MustBeFresh by digest either.
        let s = data_fp("/s", 3, 0);
        cs.insert(&s.clone(), t);
        let sf = s.full_name().to_string();
        assert_eq!(cs.find(&interest(&sf, false, true), t), None);
        assert_eq!(cs.find(&exact(&sf), t), Some(s));
    }

    #[test]
    fn erase_prefix_respects_limit() {
        let t = Instant::now();
        for policy in Policy::ALL {
            let mut cs = ContentStore::new(cfg(policy, 100), 3);
            insert_all(&mut cs, &["/a", "/a/1", "/a/2", "/a/3", "/ab", "/b"], t);
            assert_eq!(cs.erase_prefix(&name("/a"), 2), 2);
            cs.check_invariants();
            assert_eq!(names(&cs), ["/a/2", "/a/3", "/b", "/ab"]);
            assert_eq!(cs.erase_prefix(&name("/a"), 0), 0);
            assert_eq!(cs.erase_prefix(&name("/a"), usize::MAX), 2);
            assert_eq!(cs.erase_prefix(&name("/zzz"), usize::MAX), 0);
            assert_eq!(names(&cs), ["/b", "/ab"]);
            assert_eq!(cs.erase_prefix(&Name::new(), usize::MAX), 2);
            cs.check_invariants();
            assert!(cs.is_empty());
            assert_eq!(cs.bytes(), 0);
        }
    }

    #[test]
    fn set_config_shrinks_and_switches_policy() {
        let t = Instant::now();
        let mut cs = ContentStore::new(cfg(Policy::Fifo, 10), 0);
        insert_all(&mut cs, &["/a", "/b", "/c", "/d", "/e"], t);
        cs.find(&exact("/a"), t);
        cs.find(&exact("/a"), t);
        cs.find(&exact("/b"), t);
        // FIFO to LRU: recency recorded under FIFO now decides.
        cs.set_config(cfg(Policy::Lru, 10));
        cs.check_invariants();
        assert_eq!(order(&cs), ["/c", "/d", "/e", "/a", "/b"]);
        // LRU to LFU: hit counts recorded all along.
        cs.set_config(cfg(Policy::Lfu, 10));
        assert_eq!(order(&cs), ["/c", "/d", "/e", "/b", "/a"]);
        // Shrinking evicts at once, per the new policy.
        cs.set_config(cfg(Policy::Lfu, 2));
        cs.check_invariants();
        assert_eq!(names(&cs), ["/a", "/b"]);
        let one = cs.bytes() / 2;
        cs.set_config(CsConfig {
            max_bytes: one,
            ..cfg(Policy::Random, 2)
        });
        cs.check_invariants();
        assert_eq!(cs.len(), 1);
        cs.set_config(cfg(Policy::Fifo, 0));
        assert!(cs.is_empty());
        assert_eq!(cs.bytes(), 0);
    }

    #[test]
    fn hit_and_miss_counters() {
        let t = Instant::now();
        let mut cs = ContentStore::new(CsConfig::default(), 0);
        cs.insert(&data_fp("/a", 1, 0), t);
        assert!(cs.find(&exact("/a"), t).is_some());
        assert!(cs.find(&exact("/b"), t).is_none());
        assert!(cs.find(&interest("/a", false, true), t).is_none());
        assert!(cs.find(&interest("/", true, false), t).is_some());
        assert_eq!((cs.hits(), cs.misses()), (2, 2));
    }

    /// A long deterministic mix of operations on small limits keeps every
    /// invariant under every policy.
    #[test]
    fn random_operations_keep_invariants() {
        let t = Instant::now();
        for policy in Policy::ALL {
            let mut rng = fastrand::Rng::with_seed(policy as u64 + 1);
            let mut cs = ContentStore::new(
                CsConfig {
                    max_packets: 20,
                    max_bytes: 12 * (ENTRY_OVERHEAD + 100),
                    policy,
                    ..CsConfig::default()
                },
                99,
            );
            let mut finds = 0;
            for step in 0..3000u64 {
                let now = t + Duration::from_millis(step);
                let u = format!("/p/{}/{}", rng.usize(..4), rng.usize(..10));
                match rng.usize(..10) {
                    0..=3 => cs.insert(&data_fp(&u, rng.usize(..300), rng.usize(..50) as u64), now),
                    4..=7 => {
                        finds += 1;
                        // Sometimes ask by implicit digest for what is cached.
                        let uri = match cs.index.get(&name(&u)) {
                            Some(e) if rng.usize(..4) == 0 => e.data.full_name().to_string(),
                            _ => u,
                        };
                        let i = interest(&uri, rng.usize(..2) == 0, rng.usize(..2) == 0);
                        if let Some(d) = cs.find(&i, now) {
                            assert!(d.matches_name(&i.name, i.can_be_prefix));
                        }
                    }
                    8 => {
                        cs.erase_prefix(&name(&u).prefix(2), rng.usize(..3));
                    }
                    _ => {
                        let policy = Policy::ALL[rng.usize(..4)];
                        cs.set_config(CsConfig {
                            max_packets: 5 + rng.usize(..20),
                            policy,
                            ..cs.config().clone()
                        });
                    }
                }
                cs.check_invariants();
                assert_eq!(cs.names_in_eviction_order().len(), cs.len());
            }
            assert_eq!(cs.hits() + cs.misses(), finds);
        }
    }
}
