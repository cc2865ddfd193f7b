//! VIP: joint dynamic forwarding and caching (Yeh et al., "VIP: a framework
//! for joint dynamic forwarding and caching in named data networks", ICN
//! 2014; the SANDIE seed).
//!
//! # Model
//!
//! Each node keeps a *VIP count* `V_k` per data object `k` — a virtual queue
//! of "interest packets" that measures the demand for `k` seen at this node
//! and not yet served. A data object is a name without its trailing
//! segment, byte-offset and digest components ([`object_of`]), so every
//! segment of one file counts towards one object.
//!
//! Every period (default 100 ms) a node, for each object:
//!
//! 1. **exchanges**: sends each non-local neighbour a beacon — an Interest
//!    `/localhop/granary/vip/<seq>` whose ApplicationParameters carry its
//!    largest counts and the VIPs it transmits to that neighbour this period
//!    ([`encode_beacon`]); beacons are link-local and never forwarded;
//! 2. **forwards VIPs** (backpressure): on each upstream face `b` (a FIB next
//!    hop of the object) it picks the object with the largest positive
//!    differential `V_k(self) − V_k(b)` and moves up to `link_capacity` VIPs
//!    of it to `b` (announced in the beacon, added to `b`'s count on receipt);
//! 3. **caches**: the `cache_slots` objects with the highest *cache score*
//!    form the cache set; each cached object drains `cache_drain` VIPs (a
//!    cache serves its demand). The score is the VIP flow into the node for
//!    the object (local requests plus VIPs received from neighbours), summed
//!    with an exponential decay over time (`score · e^(−k·T) + inflow` each
//!    period of T seconds, k = [`SCORE_DECAY_PER_S`] = 0.01/s, a memory of
//!    100 s, as in the authors' NFD implementation; decision 0104) — the
//!    stable form of "cache the highest
//!    VIP counts" of Yeh et al.'s practical algorithm: raw counts fall as soon
//!    as an object is cached (it drains them), so caching on them oscillates;
//! 4. **drains at the source**: counts of objects this node produces (a FIB
//!    next hop is a local app face) are zero;
//! 5. **adds arrivals**: each Interest from a local (consumer) face adds one
//!    VIP ([`Vip::on_request`]).
//!
//! Real Interests follow the VIPs, as in the paper's forwarding rule: the
//! strategy sends an Interest for `k` to the eligible next hop with the
//! largest *average VIP flow* of `k` (an EWMA, weight 0.2, of the VIPs of `k`
//! moved to it per period), and only when no VIP of `k` has moved yet to the
//! one with the largest differential `V_k(self) − V_k(b)` ([`Vip::choose`]);
//! a local producer face wins outright, and faces never heard from rank last.
//! Following the flow, not the differential, is what keeps Interests off a
//! slow link: backpressure moves few VIPs over it, so the neighbour behind
//! it keeps a *low* count and the differential towards it stays *high*.
//!
//! # Virtual link capacities
//!
//! A face carries at most `C_b` VIPs per period, the paper's `C_ba / z`: the
//! Data rate of the link (bits/s, the direction Data flows, towards this
//! node) times the slot length, over the size of one data object in bits:
//!
//! `C_b = max(1, ⌊rate · period / (8 · object_bytes)⌋)` ([`vips_per_slot`]).
//!
//! The rate is the face's configured rate ([`Vip::set_face_rate`]) or, when
//! none is configured, the measured Data throughput into the face (bytes
//! received per period, EWMA weight 0.2, [`Vip::observe_face_bytes`]) with
//! 25% headroom so that a link below its capacity can show more; a face
//! with neither has `link_capacity`. A VIP transfer received from a
//! neighbour is capped at that face's capacity. The CS policy `vip` admits only Data of objects in
//! VIP admission rule ([`Admission`], [`Vip::admit`]): by default Yeh et
//! al.'s stable caching (cache while there is room, else replace the
//! lowest-scored cached object if the new one scores higher).
//!
//! # Bounded state
//!
//! At most `max_objects` counts (the smallest are dropped each period, and new
//! objects are not tracked between periods once 2× that is reached), at most
//! `beacon_entries` counts per beacon and per neighbour, neighbours not heard
//! from for 10 periods are forgotten.
//!
//! Everything here is pure bookkeeping: no I/O, no clock (callers pass
//! `now`), no panics on bad beacons (they are counted and ignored).

use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use granary_face::FaceId;
use granary_packet::tlv::{self, Reader};
use granary_packet::types::{
    COMP_BYTE_OFFSET, COMP_GENERIC, COMP_IMPLICIT_DIGEST, COMP_PARAMS_DIGEST, COMP_SEGMENT, NAME,
};
use granary_packet::Name;

/// Prefix of the Strategy element that carries a CS replacement policy in
/// cs/config (a Granary extension: `granary cs config --policy vip`).
pub const CS_POLICY_PREFIX: &str = "/localhost/granary/cs-policy";

/// The link-local prefix of VIP beacons.
pub const BEACON_PREFIX: &str = "/localhop/granary/vip";

/// TLV type of one count in a beacon: Name, VipValue.
const TT_COUNT: u64 = 0xC8;
/// TLV type of one transfer in a beacon: Name, VipValue.
const TT_TRANSFER: u64 = 0xCA;
/// TLV type of a count or an amount (NonNegativeInteger).
const TT_VALUE: u64 = 0xC9;

/// Maps of the per-object state: a fixed hasher (fast, and the same order
/// in every run; nothing here depends on the iteration order).
type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
type Set<K> = std::collections::HashSet<K, foldhash::fast::FixedState>;

/// What VIP keys its per-object state by: a [`Name`] in the forwarder (a
/// request's name counts towards its data object, [`object_of`]), a plain
/// object number in a simulator (`u32`: every request is for a whole
/// object). The state and the algorithm are the same for both.
pub trait VipKey: Clone + Eq + Hash + Ord + std::fmt::Debug {
    /// The data object a request or beacon entry for `self` counts towards.
    fn object(&self) -> Self;
}

impl VipKey for Name {
    fn object(&self) -> Name {
        object_of(self)
    }
}

impl VipKey for u32 {
    fn object(&self) -> u32 {
        *self
    }
}

/// The default decay of cache scores, per second: Yeh et al.'s NFD
/// implementation's `kDecayParam` with its 1 s slot (a memory of 100 s).
pub const SCORE_DECAY_PER_S: f64 = 0.01;

/// VIP parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct VipConfig {
    /// Length of a slot: counts are exchanged and updated once per period.
    pub period: Duration,
    /// VIPs a link carries per period when its rate is neither configured
    /// nor measured (the paper's C_ab / z).
    pub link_capacity: u64,
    /// Size of one data object in bytes (the paper's z), to turn a link's
    /// rate into VIPs per period.
    pub object_bytes: u64,
    /// VIPs a cached object drains per period (the paper's r_n).
    pub cache_drain: u64,
    /// Most objects whose counts are kept.
    pub max_objects: usize,
    /// Most counts per beacon (the largest are sent).
    pub beacon_entries: usize,
    /// A link carries VIPs of several objects in one period, largest
    /// differential first, until its capacity is used (false: of the one
    /// object with the largest differential, the paper's rule).
    pub fill_links: bool,
    /// Which Data the `vip` CS policy admits ([`Vip::admit`]).
    pub admission: Admission,
    /// How a cache score forgets: `Some(k)`, Yeh et al.'s NFD
    /// implementation's exponentially decaying sum, `score · e^(−k·T) +
    /// inflow` per period of T seconds (their `kDecayParam`, 0.01 or 0.001
    /// per second: a memory of 100–1000 s; the default is
    /// [`SCORE_DECAY_PER_S`], decision 0104); `None`, an EWMA of the VIP
    /// inflow with weight 0.2 per period (a memory of about five periods,
    /// the rule before).
    pub score_decay_per_s: Option<f64>,
}

/// Which Data the CS admits under the `vip` policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Yeh et al.'s stable caching rule (their NFD implementation,
    /// cs-policy-VIP): an arriving object is cached while the cache has
    /// room, else it replaces the cached object with the lowest cache score
    /// if its own score is higher. Cached objects stay when the cache set
    /// changes.
    Replace,
    /// Only objects of the VIP cache set (the top cache scores); objects
    /// leaving the set are erased ([`Vip::take_evicted`]). Leaves slots
    /// empty while a set object's Data does not pass (an ablation; the
    /// rule before decision 0099).
    Set,
}

impl Default for VipConfig {
    fn default() -> Self {
        VipConfig {
            period: Duration::from_millis(100),
            link_capacity: 200,
            object_bytes: 8192,
            cache_drain: 200,
            max_objects: 4096,
            beacon_entries: 64,
            fill_links: false,
            admission: Admission::Replace,
            score_decay_per_s: Some(SCORE_DECAY_PER_S),
        }
    }
}

/// Counters for `vip` status and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct VipStats {
    /// Beacons sent.
    pub beacons_out: u64,
    /// Beacons received and applied.
    pub beacons_in: u64,
    /// Beacons that did not decode (ignored).
    pub bad_beacons: u64,
    /// VIPs moved to neighbours.
    pub vips_sent: u64,
    /// VIPs received from neighbours.
    pub vips_received: u64,
    /// VIPs drained by the cache.
    pub vips_cached: u64,
    /// VIPs from local requests.
    pub arrivals: u64,
}

/// Where a face's VIP capacity comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapacitySource {
    /// The face's configured rate.
    Configured,
    /// The measured Data throughput into the face (EWMA).
    Measured,
    /// Neither: [`VipConfig::link_capacity`].
    Default,
}

/// A link's Data rate, as configured or measured.
#[derive(Debug, Default, Clone, Copy)]
struct LinkRate {
    configured_bps: Option<u64>,
    /// EWMA of the bytes received per period.
    measured_bytes: f64,
    /// The face's byte counter at the last observation.
    last_total: Option<u64>,
    /// Periods the face has been absent from the neighbours since its rate
    /// was configured, before it was ever seen (a TCP face being created).
    unseen: u32,
    /// The face has been a neighbour.
    seen: bool,
}

/// Periods a configured rate waits for its face to come up (a TCP face
/// created with a FaceRate connects after the command is answered).
const RATE_WAITS_PERIODS: u32 = 600;

/// A link rate (bits/s) in VIPs per period: `max(1, ⌊rate · period / (8 ·
/// object_bytes)⌋)`; 0 when the rate is 0.
pub fn vips_per_slot(rate_bps: u64, period: Duration, object_bytes: u64) -> u64 {
    if rate_bps == 0 {
        return 0;
    }
    let bits = rate_bps as u128 * period.as_nanos() / 1_000_000_000;
    let per_object = 8 * object_bytes.max(1) as u128;
    ((bits / per_object) as u64).max(1)
}

/// The counts a node announces in one period's beacons (one copy shared by
/// the beacons to all its neighbours).
#[derive(Debug, Clone, PartialEq)]
pub struct Counts<K: VipKey> {
    map: Map<K, u64>,
    /// Sum of the counts (the sender's backlog).
    total: u64,
}

impl<K: VipKey> Counts<K> {
    /// Counts from (object, count) pairs; a later pair for the same object
    /// replaces an earlier one.
    pub fn new(pairs: impl IntoIterator<Item = (K, u64)>) -> Counts<K> {
        let map: Map<K, u64> = pairs.into_iter().collect();
        Counts::from_map(map)
    }

    fn from_map(map: Map<K, u64>) -> Counts<K> {
        let total = map.values().fold(0u64, |a, v| a.saturating_add(*v));
        Counts { map, total }
    }

    /// The count of an object (0: not announced).
    pub fn get(&self, k: &K) -> u64 {
        self.map.get(k).copied().unwrap_or(0)
    }

    /// Number of objects announced.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no object is announced.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The counts, largest first (ties by object).
    pub fn sorted(&self) -> Vec<(K, u64)> {
        let mut v: Vec<(K, u64)> = self.map.iter().map(|(k, c)| (k.clone(), *c)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }
}

/// One beacon as VIP state: the sender's counts and the VIPs it moves to
/// the receiver this period. [`Beacon::encode`] gives the wire form.
#[derive(Debug, Clone, PartialEq)]
pub struct Beacon<K: VipKey> {
    pub counts: Arc<Counts<K>>,
    pub transfers: Vec<(K, u64)>,
}

impl Beacon<Name> {
    /// The beacon's ApplicationParameters ([`encode_beacon`]): the counts
    /// largest first, then the transfers.
    pub fn encode(&self) -> Bytes {
        encode_beacon(&self.counts.sorted(), &self.transfers)
    }
}

#[derive(Debug)]
struct Neighbour<K: VipKey> {
    counts: Arc<Counts<K>>,
    heard: Option<Instant>,
}

impl<K: VipKey> Default for Neighbour<K> {
    fn default() -> Self {
        Neighbour {
            counts: Arc::new(Counts::new([])),
            heard: None,
        }
    }
}

/// One node's VIP state, per object key `K` ([`VipKey`]; the forwarder's is
/// [`Name`]).
#[derive(Debug)]
pub struct Vip<K: VipKey = Name> {
    cfg: VipConfig,
    counts: Map<K, u64>,
    /// VIPs that arrived this period (requests and transfers), per object.
    inflow: Map<K, u64>,
    /// Cache score: EWMA of the per-period inflow.
    scores: Map<K, f64>,
    neighbours: Map<FaceId, Neighbour<K>>,
    cache_set: Set<K>,
    /// Objects the CS was told to hold ([`Admission::Replace`]), each with
    /// the score it is indexed under in `held_by_score`.
    held: Map<K, f64>,
    /// The held objects by (score, then greater key first): the first is
    /// the one an arriving object replaces. Re-indexed when scores change
    /// (once a period), so [`Vip::admit`] is O(log held).
    held_by_score: std::collections::BTreeSet<(ScoreKey, std::cmp::Reverse<K>)>,
    evicted: Vec<K>,
    /// Per face: configured or measured Data rate.
    rates: Map<FaceId, LinkRate>,
    /// Average VIP flow (EWMA of VIPs moved per period) per face and object.
    flows: Map<(FaceId, K), f64>,
    seq: u64,
    stats: VipStats,
    /// Whether any prefix uses VIP (refreshed each period), so the packet
    /// path skips the strategy lookup when none does.
    active: bool,
}

/// A cache score ordered by [`f64::total_cmp`] (an index key).
#[derive(Debug, Clone, Copy)]
struct ScoreKey(f64);

impl PartialEq for ScoreKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0).is_eq()
    }
}

impl Eq for ScoreKey {}

impl PartialOrd for ScoreKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ScoreKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The data object a name belongs to: the name without trailing segment,
/// byte-offset and digest components.
pub fn object_of(name: &Name) -> Name {
    let mut len = name.len();
    while len > 0 {
        match name.get(len as isize - 1).map(|c| c.typ) {
            Some(COMP_SEGMENT | COMP_BYTE_OFFSET | COMP_IMPLICIT_DIGEST | COMP_PARAMS_DIGEST) => {
                len -= 1
            }
            _ => break,
        }
    }
    name.prefix(len as isize)
}

/// Whether a name is a VIP beacon (`/localhop/granary/vip/…`).
pub fn is_beacon(name: &Name) -> bool {
    let want: [&[u8]; 3] = [b"localhop", b"granary", b"vip"];
    name.len() > 3
        && want.iter().enumerate().all(|(i, w)| {
            name.get(i as isize)
                .is_some_and(|c| c.typ == COMP_GENERIC && c.value == *w)
        })
}

/// Encodes a beacon's ApplicationParameters: `counts` then `transfers`.
pub fn encode_beacon(counts: &[(Name, u64)], transfers: &[(Name, u64)]) -> Bytes {
    let mut out = BytesMut::new();
    for (typ, list) in [(TT_COUNT, counts), (TT_TRANSFER, transfers)] {
        for (n, v) in list {
            let mut inner = BytesMut::new();
            n.encode_to(&mut inner);
            tlv::put_nni_tlv(&mut inner, TT_VALUE, *v);
            tlv::put_tlv(&mut out, typ, &inner);
        }
    }
    out.freeze()
}

/// A decoded beacon: counts, transfers.
pub type WireBeacon = (Vec<(Name, u64)>, Vec<(Name, u64)>);

/// Decodes a beacon's ApplicationParameters; unknown elements are an error.
pub fn decode_beacon(params: &Bytes) -> Result<WireBeacon, String> {
    let mut counts = Vec::new();
    let mut transfers = Vec::new();
    let mut r = Reader::new(params);
    while !r.is_empty() {
        let el = r.read().map_err(|e| e.to_string())?;
        let list = match el.typ {
            TT_COUNT => &mut counts,
            TT_TRANSFER => &mut transfers,
            t => return Err(format!("unexpected TLV type {t} in a VIP beacon")),
        };
        let mut inner = Reader::inside(params, &el);
        let n = inner.read().map_err(|e| e.to_string())?;
        if n.typ != NAME {
            return Err("VIP entry without a Name".into());
        }
        let name = Name::decode_element(&inner, &n).map_err(|e| e.to_string())?;
        let v = inner.read().map_err(|e| e.to_string())?;
        if v.typ != TT_VALUE {
            return Err("VIP entry without a value".into());
        }
        let value = inner.nni(&v).map_err(|e| e.to_string())?;
        list.push((name, value));
    }
    Ok((counts, transfers))
}

/// What a period's [`Vip::tick`] needs to know of the forwarder.
///
/// The two lookups are type parameters, not trait objects: `tick` calls
/// them for every object with state, each period, and a simulator's are a
/// table lookup that inlines.
/// `U`: `Fn(&K, &mut Vec<FaceId>)`, `S`: `Fn(&K) -> bool` (bounds on
/// [`Vip::tick`]).
pub struct TickInput<'a, U: ?Sized, S: ?Sized> {
    /// Non-local faces (neighbours) that get a beacon.
    pub neighbours: &'a [FaceId],
    /// The non-local FIB next hops of an object (where its VIPs may go),
    /// appended to the (empty) vector.
    pub upstreams: &'a U,
    /// Whether this node produces an object (a local app face serves it).
    pub is_source: &'a S,
    /// How many objects the cache holds (0: no VIP caching).
    pub cache_slots: usize,
}

impl<K: VipKey> Vip<K> {
    /// Empty state.
    pub fn new(cfg: VipConfig) -> Vip<K> {
        Vip {
            cfg,
            counts: Map::default(),
            inflow: Map::default(),
            scores: Map::default(),
            neighbours: Map::default(),
            cache_set: Set::default(),
            held: Map::default(),
            held_by_score: std::collections::BTreeSet::new(),
            evicted: Vec::new(),
            rates: Map::default(),
            flows: Map::default(),
            seq: 0,
            stats: VipStats::default(),
            active: false,
        }
    }

    /// Whether the forwarder uses VIP for some prefix (as of the last
    /// period).
    pub fn active(&self) -> bool {
        self.active
    }

    /// Records whether the forwarder uses VIP for some prefix (each period).
    pub fn set_active(&mut self, active: bool) {
        self.active = active;
    }

    /// The objects with a count.
    pub fn objects(&self) -> impl Iterator<Item = &K> {
        self.counts.keys()
    }

    /// The sequence number of this period's beacons.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The parameters.
    pub fn config(&self) -> &VipConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> VipStats {
        self.stats
    }

    /// Configures a face's Data rate in bits/s (None: measure it).
    pub fn set_face_rate(&mut self, face: FaceId, rate_bps: Option<u64>) {
        self.rates.entry(face).or_default().configured_bps = rate_bps;
    }

    /// A face's configured Data rate in bits/s.
    pub fn face_rate(&self, face: FaceId) -> Option<u64> {
        self.rates.get(&face).and_then(|r| r.configured_bps)
    }

    /// Records a face's received-byte counter (cumulative) once per period:
    /// the difference since the last call feeds the measured rate.
    pub fn observe_face_bytes(&mut self, face: FaceId, total_in_bytes: u64) {
        let r = self.rates.entry(face).or_default();
        if let Some(last) = r.last_total {
            let d = total_in_bytes.saturating_sub(last) as f64;
            r.measured_bytes = 0.8 * r.measured_bytes + 0.2 * d;
        }
        r.last_total = Some(total_in_bytes);
    }

    /// The VIPs a face carries per period, and where the figure comes from.
    pub fn face_capacity(&self, face: FaceId) -> (u64, CapacitySource) {
        let r = self.rates.get(&face);
        if let Some(bps) = r.and_then(|r| r.configured_bps) {
            return (
                vips_per_slot(bps, self.cfg.period, self.cfg.object_bytes),
                CapacitySource::Configured,
            );
        }
        match r {
            Some(r) if r.measured_bytes >= 1.0 => {
                let per_s = r.measured_bytes * 1.25 / self.cfg.period.as_secs_f64().max(1e-9);
                (
                    vips_per_slot((per_s * 8.0) as u64, self.cfg.period, self.cfg.object_bytes),
                    CapacitySource::Measured,
                )
            }
            _ => (self.cfg.link_capacity, CapacitySource::Default),
        }
    }

    /// The average VIP flow of an object towards a face (VIPs per period).
    pub fn flow(&self, face: FaceId, object: &K) -> f64 {
        self.flows
            .get(&(face, object.clone()))
            .copied()
            .unwrap_or(0.0)
    }

    /// An object's cache score: the EWMA of its VIP inflow per period (0:
    /// none seen), as of the last period.
    pub fn score(&self, object: &K) -> f64 {
        self.scores.get(object).copied().unwrap_or(0.0)
    }

    /// This node's count of an object.
    pub fn count(&self, object: &K) -> u64 {
        self.counts.get(object).copied().unwrap_or(0)
    }

    /// The count a neighbour last announced (None: never heard from it).
    pub fn neighbour_count(&self, face: FaceId, object: &K) -> Option<u64> {
        let n = self.neighbours.get(&face)?;
        n.heard?;
        Some(n.counts.get(object))
    }

    /// Number of objects with a count.
    pub fn tracked(&self) -> usize {
        self.counts.len()
    }

    /// A request for `name` arrived from a local consumer: one VIP.
    pub fn on_request(&mut self, name: &K) {
        let obj = name.object();
        if let Some(c) = self.counts.get_mut(&obj) {
            *c = c.saturating_add(1);
        } else if self.counts.len() < 2 * self.cfg.max_objects {
            self.counts.insert(obj.clone(), 1);
        } else {
            return;
        }
        *self.inflow.entry(obj).or_default() += 1;
        self.stats.arrivals += 1;
    }

    /// Applies a beacon received on `face`. Only the first
    /// `beacon_entries` counts (largest first) and transfers are taken.
    pub fn apply_beacon(&mut self, face: FaceId, beacon: Beacon<K>, now: Instant) {
        let Beacon {
            mut counts,
            transfers,
        } = beacon;
        if counts.len() > self.cfg.beacon_entries {
            counts = Arc::new(Counts::new(
                counts.sorted().into_iter().take(self.cfg.beacon_entries),
            ));
        }
        let cap = self.face_capacity(face).0;
        let n = self.neighbours.entry(face).or_default();
        n.heard = Some(now);
        n.counts = counts;
        for (k, v) in transfers.into_iter().take(self.cfg.beacon_entries) {
            let k = k.object();
            // A neighbour cannot send more than a link carries.
            let v = v.min(cap);
            if let Some(c) = self.counts.get_mut(&k) {
                *c = c.saturating_add(v);
            } else if self.counts.len() < 2 * self.cfg.max_objects {
                self.counts.insert(k.clone(), v);
            } else {
                continue;
            }
            *self.inflow.entry(k).or_default() += v;
            self.stats.vips_received += v;
        }
        self.stats.beacons_in += 1;
    }

    /// Backpressure differential of `object` towards `face` (None: the
    /// neighbour was never heard from).
    pub fn differential(&self, face: FaceId, object: &K) -> Option<i128> {
        let theirs = self.neighbour_count(face, object)?;
        Some(self.count(object) as i128 - theirs as i128)
    }

    /// Forwarding decision for an Interest `name` among eligible next hops
    /// (`(face, is_local)`, in FIB cost order): a local face (the producer)
    /// first, else the largest differential, ties and faces never heard
    /// from in FIB order. None only when `hops` is empty.
    pub fn choose(&self, name: &K, hops: &[(FaceId, bool)]) -> Option<FaceId> {
        if let Some((f, _)) = hops.iter().find(|(_, local)| *local) {
            return Some(*f);
        }
        let obj = name.object();
        // The paper's rule: the largest average VIP flow of the object;
        // equal flows (none yet, or an even split) go by backpressure's
        // weight, differential × capacity; then the neighbour with the
        // smaller backlog (sum of its counts); then FIB order.
        let mut best: Option<((f64, i128, i128), FaceId)> = None;
        for (f, _) in hops {
            let Some(d) = self.differential(*f, &obj) else {
                continue;
            };
            let backlog = self.neighbours.get(f).map_or(0, |n| n.counts.total) as i128;
            let key = (
                self.flow(*f, &obj),
                d * self.face_capacity(*f).0.max(1) as i128,
                -backlog,
            );
            if best.is_none_or(|(bk, _)| {
                key.0 > bk.0 || (key.0 == bk.0 && (key.1, key.2) > (bk.1, bk.2))
            }) {
                best = Some((key, *f));
            }
        }
        best.map(|(_, f)| f)
            .or_else(|| hops.first().map(|(f, _)| *f))
    }

    /// Whether the CS should admit Data of `name` (its object is in the
    /// cache set).
    pub fn should_cache(&self, name: &K) -> bool {
        self.cache_set.contains(&name.object())
    }

    /// Whether the CS (room for `slots` objects) should admit Data of
    /// `name`, and which object it must erase first. [`Admission::Set`]:
    /// [`Vip::should_cache`], nothing to erase here (objects leaving the set
    /// come from [`Vip::take_evicted`]). [`Admission::Replace`]: an object
    /// already held is admitted (its other segments); a new one while fewer
    /// than `slots` are held; else it replaces the held object with the
    /// lowest score (ties: the greater key) if its own score is higher.
    /// Under both rules a node does not cache what it produces (`own`: the
    /// Data comes from a local producer), as it holds no VIPs for it.
    pub fn admit(&mut self, name: &K, slots: usize, own: bool) -> (bool, Option<K>) {
        let obj = name.object();
        if own {
            return (false, None);
        }
        if self.cfg.admission == Admission::Set {
            return (self.cache_set.contains(&obj), None);
        }
        if self.held.contains_key(&obj) {
            return (true, None);
        }
        if slots == 0 {
            return (false, None);
        }
        let score = self.score(&obj);
        if self.held.len() < slots {
            self.hold(obj, score);
            return (true, None);
        }
        match self.held_by_score.first() {
            Some((low, victim)) if score > low.0 => {
                let victim = victim.0.clone();
                self.unhold(&victim);
                self.hold(obj, score);
                (true, Some(victim))
            }
            _ => (false, None),
        }
    }

    fn hold(&mut self, obj: K, score: f64) {
        self.held_by_score
            .insert((ScoreKey(score), std::cmp::Reverse(obj.clone())));
        self.held.insert(obj, score);
    }

    fn unhold(&mut self, obj: &K) {
        if let Some(sc) = self.held.remove(obj) {
            self.held_by_score
                .remove(&(ScoreKey(sc), std::cmp::Reverse(obj.clone())));
        }
    }

    /// Re-indexes the held objects whose score changed.
    fn reindex_held(&mut self) {
        for (k, sc) in self.held.iter_mut() {
            let now = self.scores.get(k).copied().unwrap_or(0.0);
            if now.to_bits() != sc.to_bits() {
                let key = std::cmp::Reverse(k.clone());
                self.held_by_score.remove(&(ScoreKey(*sc), key.clone()));
                self.held_by_score.insert((ScoreKey(now), key));
                *sc = now;
            }
        }
    }

    /// The object [`Vip::admit`] would replace next: the held one with the
    /// lowest score (ties: the greater key).
    pub fn next_victim(&self) -> Option<&K> {
        self.held_by_score.first().map(|(_, k)| &k.0)
    }

    /// Keeps only the held objects the CS still has (it evicts by its own
    /// packet limit too), so that gone objects do not take slots.
    pub fn retain_held(&mut self, mut in_cs: impl FnMut(&K) -> bool) {
        let gone: Vec<K> = self.held.keys().filter(|k| !in_cs(k)).cloned().collect();
        for k in gone {
            self.unhold(&k);
        }
    }

    /// The current cache set.
    pub fn cache_set(&self) -> impl Iterator<Item = &K> {
        self.cache_set.iter()
    }

    /// Objects that left the cache set since the last call (to erase from
    /// the CS).
    pub fn take_evicted(&mut self) -> Vec<K> {
        std::mem::take(&mut self.evicted)
    }

    /// One period: chooses VIP transfers, the cache set, drains, and
    /// returns the beacon for each neighbour ([`Beacon::encode`] gives its
    /// ApplicationParameters).
    pub fn tick<U, S>(
        &mut self,
        now: Instant,
        input: &TickInput<'_, U, S>,
    ) -> Vec<(FaceId, Beacon<K>)>
    where
        U: Fn(&K, &mut Vec<FaceId>) + ?Sized,
        S: Fn(&K) -> bool + ?Sized,
    {
        // Forget neighbours silent for 10 periods, and faces that are gone.
        let stale = self.cfg.period * 10;
        self.neighbours.retain(|f, n| {
            input.neighbours.contains(f) && n.heard.is_some_and(|t| now.duration_since(t) < stale)
        });
        // A face that is gone loses its rate; a configured one not seen yet
        // (still connecting) keeps it for a while.
        self.rates.retain(|f, r| {
            if input.neighbours.contains(f) {
                r.seen = true;
                return true;
            }
            r.unseen += 1;
            !r.seen && r.configured_bps.is_some() && r.unseen <= RATE_WAITS_PERIODS
        });
        // The neighbours heard from, looked up once for all objects.
        let heard: Vec<(FaceId, Arc<Counts<K>>)> = self
            .neighbours
            .iter()
            .filter(|(_, n)| n.heard.is_some())
            .map(|(f, n)| (*f, n.counts.clone()))
            .collect();
        let is_source = input.is_source;
        let fill = self.cfg.fill_links;

        // 1. VIP forwarding: per upstream face, the object with the largest
        // positive differential (ties: the smaller object). One pass over
        // the counts, which also drops those of objects this node produces
        // (sources hold no VIPs).
        let mut best: Vec<(FaceId, i128, K)> = Vec::new();
        // With `fill_links`: every positive differential, per face.
        let mut all: Map<FaceId, Vec<(i128, K)>> = Map::default();
        // Counts that are zero (dropped at the end of the period).
        let mut zeros: Vec<K> = Vec::new();
        let mut ups: Vec<FaceId> = Vec::new();
        // Once every neighbour heard from has a best object: the one easiest
        // to beat (lowest differential, then greatest key). A count that
        // cannot beat it beats no face's best (the differential is at most
        // the count), so the object is passed over without looking up its
        // upstreams: most are, after the first few.
        let mut floor: Option<(i128, K)> = None;
        self.counts.retain(|k, v| {
            if is_source(k) {
                return false;
            }
            let v = *v;
            if v == 0 {
                zeros.push(k.clone());
                return true;
            }
            if let Some((fv, fk)) = &floor {
                if (v as i128) < *fv || (v as i128 == *fv && k > fk) {
                    return true;
                }
            }
            let mut improved = false;
            ups.clear();
            (input.upstreams)(k, &mut ups);
            for &f in &ups {
                let Some((_, counts)) = heard.iter().find(|(h, _)| *h == f) else {
                    continue;
                };
                // The differential is at most the count: a count below the
                // face's best differential (or equal, with a greater key)
                // cannot win, whatever the neighbour's count.
                if !fill {
                    if let Some(b) = best.iter().find(|b| b.0 == f) {
                        let bv = b.1;
                        if (v as i128) < bv || (v as i128 == bv && *k > b.2) {
                            continue;
                        }
                    }
                }
                let d = v as i128 - counts.get(k) as i128;
                if d <= 0 {
                    continue;
                }
                if fill {
                    all.entry(f).or_default().push((d, k.clone()));
                } else {
                    match best.iter_mut().find(|b| b.0 == f) {
                        None => {
                            best.push((f, d, k.clone()));
                            improved = true;
                        }
                        Some(b) => {
                            if d > b.1 || (d == b.1 && *k < b.2) {
                                b.1 = d;
                                b.2 = k.clone();
                                improved = true;
                            }
                        }
                    }
                }
            }
            if improved && best.len() == heard.len() {
                floor = best
                    .iter()
                    .min_by(|a, b| a.1.cmp(&b.1).then_with(|| b.2.cmp(&a.2)))
                    .map(|b| (b.1, b.2.clone()));
            }
            true
        });
        // Faces that chose the same object share its count (all links'
        // transfers are computed from the same counts), in proportion to
        // their capacities; the face with the larger differential (then
        // capacity) first, rounding up. Objects in key order.
        let mut transfers: Map<FaceId, Vec<(K, u64)>> = Map::default();
        // The objects whose count went down this period (to drop at zero).
        let mut touched: Vec<K> = Vec::new();
        best.sort_by(|a, b| a.2.cmp(&b.2));
        self.flows.retain(|_, fl| {
            *fl *= 0.8;
            *fl >= 0.01
        });
        // With `fill_links` (an ablation of the paper's one object per link):
        // each face in turn takes its objects by differential until its
        // capacity is used.
        let mut faces: Vec<(FaceId, Vec<(i128, K)>)> = all.into_iter().collect();
        faces.sort_by_key(|f| f.0);
        for (f, mut cands) in faces {
            cands.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            let mut room = self.face_capacity(f).0;
            for (_, k) in cands {
                if room == 0 {
                    break;
                }
                let Some(c) = self.counts.get_mut(&k) else {
                    continue;
                };
                let mu = room.min(*c);
                if mu == 0 {
                    continue;
                }
                *c -= mu;
                room -= mu;
                *self.flows.entry((f, k.clone())).or_default() += 0.2 * mu as f64;
                self.stats.vips_sent += mu;
                touched.push(k.clone());
                transfers.entry(f).or_default().push((k, mu));
            }
        }
        // Per object: (differential, face, capacity) of the faces that chose it.
        let mut group: Vec<(i128, FaceId, u64)> = Vec::new();
        let mut i = 0;
        while i < best.len() {
            let k = best[i].2.clone();
            group.clear();
            while i < best.len() && best[i].2 == k {
                let (f, d) = (best[i].0, best[i].1);
                group.push((d, f, self.face_capacity(f).0));
                i += 1;
            }
            group.sort_by_key(|&(d, f, cap)| (std::cmp::Reverse(d), std::cmp::Reverse(cap), f));
            let total_cap: u64 = group.iter().map(|g| g.2).sum::<u64>().max(1);
            let c = self.counts.get_mut(&k).expect("chosen from counts");
            let count = *c;
            for &(_, f, cap) in &group {
                let share = (count as u128 * cap as u128).div_ceil(total_cap as u128) as u64;
                let mu = share.min(cap).min(*c);
                if mu == 0 {
                    continue;
                }
                *c -= mu;
                *self.flows.entry((f, k.clone())).or_default() += 0.2 * mu as f64;
                self.stats.vips_sent += mu;
                transfers.entry(f).or_default().push((k.clone(), mu));
            }
            touched.push(k);
        }

        // 2. Caching: the objects with the highest scores (EWMA of inflow),
        // sources excluded.
        // (keep, weight): score = keep · score + weight · inflow; scores
        // under 0.01 are dropped.
        let (keep, weight) = match self.cfg.score_decay_per_s {
            None => (0.8, 0.2),
            Some(k) => ((-k * self.cfg.period.as_secs_f64()).exp(), 1.0),
        };
        let inflow = &mut self.inflow;
        self.scores.retain(|k, sc| {
            let add = inflow.remove(k).unwrap_or(0) as f64;
            if is_source(k) {
                return false;
            }
            *sc = keep * *sc + weight * add;
            *sc >= 0.01
        });
        for (k, add) in self.inflow.drain() {
            let sc = weight * add as f64;
            if sc >= 0.01 && !is_source(&k) {
                self.scores.insert(k, sc);
            }
        }
        if self.scores.len() > self.cfg.max_objects {
            let mut all: Vec<(K, f64)> = self.scores.drain().collect();
            all.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            all.truncate(self.cfg.max_objects);
            self.scores = all.into_iter().collect();
        }
        self.reindex_held();
        let kept = top_scores(&self.scores, input.cache_slots);
        if self.cfg.admission == Admission::Set {
            for k in &self.cache_set {
                if !kept.contains(k) {
                    self.evicted.push(k.clone());
                }
            }
        }
        self.cache_set = kept;
        for k in &self.cache_set {
            if let Some(c) = self.counts.get_mut(k) {
                let r = (*c).min(self.cfg.cache_drain);
                *c -= r;
                self.stats.vips_cached += r;
                touched.push(k.clone());
            }
        }

        // Bounded state: keep the largest counts.
        if self.counts.len() > self.cfg.max_objects {
            let mut all: Vec<(K, u64)> = self.counts.drain().collect();
            all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            all.truncate(self.cfg.max_objects);
            self.counts = all.into_iter().collect();
        }
        // Zero counts are dropped (the scores remember demand): only those
        // that were zero or went down can be.
        for k in zeros.iter().chain(&touched) {
            if self.counts.get(k) == Some(&0) {
                self.counts.remove(k);
            }
        }

        // 3. Beacons: the largest counts, plus this period's transfers.
        // One copy of the counts for all neighbours.
        let top = if self.counts.len() <= self.cfg.beacon_entries {
            Counts::from_map(self.counts.clone())
        } else {
            let mut all: Vec<(K, u64)> = self.counts.iter().map(|(k, v)| (k.clone(), *v)).collect();
            let n = self.cfg.beacon_entries;
            if n > 0 {
                all.select_nth_unstable_by(n - 1, |a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            }
            all.truncate(n);
            Counts::new(all)
        };
        let top = Arc::new(top);
        self.seq += 1;
        input
            .neighbours
            .iter()
            .map(|f| {
                let t = transfers.remove(f).unwrap_or_default();
                self.stats.beacons_out += 1;
                (
                    *f,
                    Beacon {
                        counts: top.clone(),
                        transfers: t,
                    },
                )
            })
            .collect()
    }

    /// The beacon Interest name of this period.
    pub fn beacon_name(&self) -> Name {
        Name::from_uri(&format!("{BEACON_PREFIX}/{}", self.seq)).unwrap_or_default()
    }
}

/// The `n` objects with the highest scores (ties: the smaller key): a
/// bounded heap whose top is the worst kept, O(len · log n).
fn top_scores<K: VipKey>(scores: &Map<K, f64>, n: usize) -> Set<K> {
    if n >= scores.len() {
        return scores.keys().cloned().collect();
    }
    /// Ordered worst last: a lower score, then a greater key, is greater.
    struct Rank<'a, K>(f64, &'a K);
    impl<K: Ord> PartialEq for Rank<'_, K> {
        fn eq(&self, o: &Self) -> bool {
            self.cmp(o).is_eq()
        }
    }
    impl<K: Ord> Eq for Rank<'_, K> {}
    impl<K: Ord> PartialOrd for Rank<'_, K> {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl<K: Ord> Ord for Rank<'_, K> {
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            o.0.total_cmp(&self.0).then_with(|| self.1.cmp(o.1))
        }
    }
    let mut heap: std::collections::BinaryHeap<Rank<'_, K>> =
        std::collections::BinaryHeap::with_capacity(n + 1);
    for (k, &sc) in scores {
        let r = Rank(sc, k);
        if heap.len() < n {
            heap.push(r);
        } else if heap.peek().is_some_and(|w| r < *w) {
            heap.pop();
            heap.push(r);
        }
    }
    heap.into_iter().map(|r| r.1.clone()).collect()
}

impl Vip<Name> {
    /// Applies a beacon (its ApplicationParameters) received on `face`.
    pub fn on_beacon(&mut self, face: FaceId, params: &Bytes, now: Instant) -> Result<(), String> {
        let (counts, transfers) = match decode_beacon(params) {
            Ok(b) => b,
            Err(e) => {
                self.stats.bad_beacons += 1;
                return Err(e);
            }
        };
        let counts = Counts::new(
            counts
                .into_iter()
                .take(self.cfg.beacon_entries)
                .map(|(k, v)| (object_of(&k), v)),
        );
        self.apply_beacon(
            face,
            Beacon {
                counts: Arc::new(counts),
                transfers,
            },
            now,
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(u: &str) -> Name {
        Name::from_uri(u).unwrap()
    }

    fn cfg() -> VipConfig {
        VipConfig {
            link_capacity: 10,
            cache_drain: 5,
            max_objects: 8,
            beacon_entries: 4,
            ..VipConfig::default()
        }
    }

    type Up<'a> = dyn Fn(&Name, &mut Vec<FaceId>) + 'a;
    type Src<'a> = dyn Fn(&Name) -> bool + 'a;

    fn input<'a>(
        neighbours: &'a [FaceId],
        up: &'a Up<'a>,
        src: &'a Src<'a>,
        slots: usize,
    ) -> TickInput<'a, Up<'a>, Src<'a>> {
        TickInput {
            neighbours,
            upstreams: up,
            is_source: src,
            cache_slots: slots,
        }
    }

    #[test]
    fn objects_strip_segments_and_digests() {
        assert_eq!(object_of(&n("/d/f/v=3/seg=7")), n("/d/f/v=3"));
        assert_eq!(object_of(&n("/d/f")), n("/d/f"));
        assert_eq!(object_of(&n("/seg=1")), Name::new());
        assert!(is_beacon(&n("/localhop/granary/vip/12")));
        assert!(!is_beacon(&n("/localhop/granary/vip")));
        assert!(!is_beacon(&n("/localhop/nfd/rib/register")));
    }

    #[test]
    fn counts_add_requests_and_drain_by_cache_and_source() {
        let mut v = Vip::new(VipConfig {
            admission: Admission::Set,
            ..cfg()
        });
        for _ in 0..12 {
            v.on_request(&n("/a/seg=1"));
        }
        for _ in 0..3 {
            v.on_request(&n("/b"));
        }
        v.on_request(&n("/own/x"));
        assert_eq!(v.count(&n("/a")), 12);
        assert_eq!(v.stats().arrivals, 16);
        let none = |_: &Name, _: &mut Vec<FaceId>| {};
        let src = |k: &Name| k.to_string().starts_with("/own");
        // One cache slot: /a (highest) is cached and drains 5; /b keeps 3;
        // the source's own object is zero.
        let out = v.tick(Instant::now(), &input(&[], &none, &src, 1));
        assert!(out.is_empty());
        assert_eq!(v.count(&n("/a")), 7);
        assert_eq!(v.count(&n("/b")), 3);
        assert_eq!(v.count(&n("/own/x")), 0);
        assert!(v.should_cache(&n("/a/seg=9")));
        assert!(!v.should_cache(&n("/b")));
        // /b overtakes /a: /a is evicted.
        for _ in 0..20 {
            v.on_request(&n("/b"));
        }
        v.tick(Instant::now(), &input(&[], &none, &src, 1));
        assert!(v.should_cache(&n("/b")));
        assert_eq!(v.take_evicted(), vec![n("/a")]);
        assert_eq!(v.count(&n("/b")), 23 - 5);
        assert_eq!(v.count(&n("/a")), 7);
    }

    #[test]
    fn replace_admission_keeps_the_higher_scores_and_fills_free_slots() {
        // Scores: /1 gets 5 VIPs a period, /2 3, /3 1; /9 none.
        let mut v = Vip::new(cfg());
        for (k, c) in [("/1", 5), ("/2", 3), ("/3", 1)] {
            for _ in 0..c {
                v.on_request(&n(k));
            }
        }
        let none = |_: &Name, _: &mut Vec<FaceId>| {};
        let src = |_: &Name| false;
        // The cache set (1 slot) is /1 alone; replace admits beyond it.
        v.tick(Instant::now(), &input(&[], &none, &src, 1));
        assert!(v.score(&n("/1")) > v.score(&n("/2")) && v.score(&n("/2")) > v.score(&n("/3")));
        // Room for 2: anything is admitted, whatever its score (here /9, 0).
        assert_eq!(v.admit(&n("/3/seg=0"), 2, false), (true, None));
        assert_eq!(v.admit(&n("/9"), 2, false), (true, None));
        // Another segment of a held object is admitted.
        assert_eq!(v.admit(&n("/9/seg=1"), 2, false), (true, None));
        // Full: /2 replaces the lowest (/9), /1 then replaces /3; /3 no
        // longer beats anything held.
        assert_eq!(v.admit(&n("/2"), 2, false), (true, Some(n("/9"))));
        assert_eq!(v.admit(&n("/1/seg=4"), 2, false), (true, Some(n("/3"))));
        assert_eq!(v.admit(&n("/3"), 2, false), (false, None));
        // The cache set changing evicts nothing under replace.
        v.tick(Instant::now(), &input(&[], &none, &src, 1));
        assert!(v.take_evicted().is_empty());
        // An object the CS dropped by itself frees its slot.
        v.retain_held(|k| *k != n("/2"));
        assert_eq!(v.admit(&n("/3"), 2, false), (true, None));
        // The set rule admits only the cache set.
        let mut s = Vip::new(VipConfig {
            admission: Admission::Set,
            ..cfg()
        });
        s.on_request(&n("/1"));
        s.tick(Instant::now(), &input(&[], &none, &src, 1));
        assert_eq!(s.admit(&n("/1"), 5, false), (true, None));
        assert_eq!(s.admit(&n("/2"), 5, false), (false, None));
        // Never what the node produces.
        assert_eq!(s.admit(&n("/1"), 5, true), (false, None));
        assert_eq!(v.admit(&n("/9"), 2, true), (false, None));
    }

    #[test]
    fn the_score_index_picks_the_victim_the_full_scan_picks() {
        // Random demand over 40 objects (many equal scores), random cache
        // sizes, admissions and CS drops: every admission replaces what a
        // scan of all held objects picks (lowest score, ties the greater
        // key), and admits exactly when that scan says so.
        let mut rng = fastrand::Rng::with_seed(30);
        let none = |_: &u32, _: &mut Vec<FaceId>| {};
        let src = |_: &u32| false;
        for round in 0..40 {
            let mut v: Vip<u32> = Vip::new(VipConfig {
                max_objects: 64,
                ..cfg()
            });
            let slots = rng.usize(1..12);
            for period in 0..30 {
                for _ in 0..rng.usize(0..30) {
                    v.on_request(&rng.u32(0..40));
                }
                v.tick(
                    Instant::now(),
                    &TickInput {
                        neighbours: &[],
                        upstreams: &none,
                        is_source: &src,
                        cache_slots: slots,
                    },
                );
                for _ in 0..rng.usize(0..20) {
                    let k = rng.u32(0..40);
                    let scan = v
                        .held
                        .keys()
                        .map(|h| (v.score(h), *h))
                        .min_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(&a.1)));
                    let want = if v.held.contains_key(&k) || v.held.len() < slots {
                        (true, None)
                    } else {
                        match scan {
                            Some((sc, h)) if v.score(&k) > sc => (true, Some(h)),
                            _ => (false, None),
                        }
                    };
                    assert_eq!(v.next_victim().copied(), scan.map(|s| s.1));
                    assert_eq!(
                        v.admit(&k, slots, false),
                        want,
                        "round {round} period {period}"
                    );
                    assert!(v.held.len() <= slots);
                    assert_eq!(v.held.len(), v.held_by_score.len());
                }
                if rng.u8(0..4) == 0 {
                    let drop = rng.u32(0..40);
                    v.retain_held(|k| *k != drop);
                }
            }
        }
    }

    #[test]
    fn a_configured_rate_waits_for_its_face_to_come_up() {
        // Face 7's rate is configured before the face exists (faces/create
        // over TCP answers before it connects): it survives the periods
        // until the face shows up, and goes with the face.
        let mut v: Vip = Vip::new(cfg());
        v.set_face_rate(7, Some(40_000_000));
        v.set_face_rate(8, Some(40_000_000));
        let none = |_: &Name, _: &mut Vec<FaceId>| {};
        let src = |_: &Name| false;
        for _ in 0..5 {
            v.tick(Instant::now(), &input(&[], &none, &src, 0));
        }
        assert_eq!(v.face_rate(7), Some(40_000_000));
        v.tick(Instant::now(), &input(&[7], &none, &src, 0));
        assert_eq!(v.face_capacity(7), (61, CapacitySource::Configured));
        v.tick(Instant::now(), &input(&[], &none, &src, 0));
        assert_eq!(v.face_rate(7), None, "gone with its face");
        // One that never comes up is forgotten after the wait.
        for _ in 0..RATE_WAITS_PERIODS {
            v.tick(Instant::now(), &input(&[], &none, &src, 0));
        }
        assert_eq!(v.face_rate(8), None);
    }

    #[test]
    fn a_filled_link_carries_several_objects_up_to_its_capacity() {
        // One upstream face (capacity 10, heard from with zero counts);
        // counts /a 4, /b 3, /c 5. The paper's rule moves only the largest
        // differential's object (/c, 5 VIPs); `fill_links` goes on by
        // differential until the link's 10 are used: /c 5, /a 4, /b 1.
        for (fill, want) in [
            (false, vec![(n("/c"), 5)]),
            (true, vec![(n("/c"), 5), (n("/a"), 4), (n("/b"), 1)]),
        ] {
            let mut v = Vip::new(VipConfig {
                fill_links: fill,
                ..cfg()
            });
            let now = Instant::now();
            v.on_beacon(1, &encode_beacon(&[], &[]), now).unwrap();
            for (k, c) in [("/a", 4), ("/b", 3), ("/c", 5)] {
                for _ in 0..c {
                    v.on_request(&n(k));
                }
            }
            let up = |_: &Name, out: &mut Vec<FaceId>| out.push(1);
            let src = |_: &Name| false;
            let out = v.tick(now, &input(&[1], &up, &src, 0));
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].1.transfers, want, "fill_links {fill}");
            let moved: u64 = want.iter().map(|t| t.1).sum();
            assert_eq!(v.stats().vips_sent, moved);
            assert_eq!(v.count(&n("/b")), if fill { 2 } else { 3 });
        }
    }

    #[test]
    fn cached_objects_stay_while_their_demand_lasts() {
        // /hot gets 6 requests a period, /warm 4: the cache (1 slot) keeps
        // /hot every period although caching drains /hot's count to 0
        // (raw counts would let /warm's backlog take the slot in turn).
        let mut v = Vip::new(VipConfig {
            cache_drain: 100,
            ..cfg()
        });
        let none = |_: &Name, _: &mut Vec<FaceId>| {};
        let src = |_: &Name| false;
        let t = Instant::now();
        for p in 0..20 {
            for _ in 0..6 {
                v.on_request(&n("/hot"));
            }
            for _ in 0..4 {
                v.on_request(&n("/warm"));
            }
            v.tick(t, &input(&[], &none, &src, 1));
            assert!(v.should_cache(&n("/hot")), "period {p}");
            assert_eq!(v.count(&n("/hot")), 0);
        }
        assert_eq!(v.count(&n("/warm")), 80);
        assert!(v.take_evicted().is_empty());
    }

    #[test]
    fn beacons_round_trip_and_bad_ones_are_refused() {
        let counts = vec![(n("/a"), 5), (n("/b/c"), 0)];
        let transfers = vec![(n("/a"), 3)];
        let p = encode_beacon(&counts, &transfers);
        assert_eq!(decode_beacon(&p).unwrap(), (counts, transfers));
        let mut v = Vip::new(cfg());
        assert!(v
            .on_beacon(1, &Bytes::from_static(&[0x07, 0x05, 1]), Instant::now())
            .is_err());
        assert!(v
            .on_beacon(1, &Bytes::from_static(&[0xFD, 0x01]), Instant::now())
            .is_err());
        assert_eq!(v.stats().bad_beacons, 2);
        assert_eq!(v.neighbour_count(1, &n("/a")), None);
    }

    #[test]
    fn exchange_moves_vips_by_largest_differential() {
        // Node A (upstreams: face 1 to B, face 2 to C) and its neighbours.
        let mut a = Vip::new(cfg());
        for _ in 0..30 {
            a.on_request(&n("/x"));
        }
        for _ in 0..8 {
            a.on_request(&n("/y"));
        }
        let now = Instant::now();
        // B announces 25 for /x, 0 for /y; C announces 2 for /x.
        a.on_beacon(1, &encode_beacon(&[(n("/x"), 25)], &[]), now)
            .unwrap();
        a.on_beacon(2, &encode_beacon(&[(n("/x"), 2)], &[]), now)
            .unwrap();
        assert_eq!(a.differential(1, &n("/x")), Some(5));
        assert_eq!(a.differential(2, &n("/x")), Some(28));
        assert_eq!(a.differential(3, &n("/x")), None);
        let up = |_: &Name, o: &mut Vec<FaceId>| o.extend([1, 2]);
        let src = |_: &Name| false;
        let beacons = a.tick(now, &input(&[1, 2], &up, &src, 0));
        // Face 1: /y (8 − 0) beats /x (30 − 25); face 2: /x (28). Both
        // chosen from the counts before the move; each moves ≤ capacity 10.
        let by_face: std::collections::HashMap<FaceId, WireBeacon> = beacons
            .into_iter()
            .map(|(f, p)| (f, decode_beacon(&p.encode()).unwrap()))
            .collect();
        assert_eq!(by_face[&1].1, vec![(n("/y"), 8)]);
        assert_eq!(by_face[&2].1, vec![(n("/x"), 10)]);
        assert_eq!(a.count(&n("/x")), 20);
        assert_eq!(a.count(&n("/y")), 0);
        // The counts announced are after the move.
        assert_eq!(by_face[&1].0, vec![(n("/x"), 20)]);
        // The receiver adds what was sent to it (at most a link's capacity).
        let mut b = Vip::new(cfg());
        b.on_beacon(9, &encode_beacon(&[], &[(n("/x"), 10), (n("/z"), 99)]), now)
            .unwrap();
        assert_eq!(b.count(&n("/x")), 10);
        assert_eq!(b.count(&n("/z")), 10);
        assert_eq!(b.stats().vips_received, 20);
    }

    #[test]
    fn forwarding_follows_the_largest_differential() {
        let mut v = Vip::new(cfg());
        for _ in 0..10 {
            v.on_request(&n("/x/seg=0"));
        }
        let now = Instant::now();
        v.on_beacon(1, &encode_beacon(&[(n("/x"), 9)], &[]), now)
            .unwrap();
        v.on_beacon(2, &encode_beacon(&[(n("/x"), 1)], &[]), now)
            .unwrap();
        // Face 2 has the larger differential (9 vs 1), whatever FIB order.
        assert_eq!(v.choose(&n("/x/seg=3"), &[(1, false), (2, false)]), Some(2));
        // A local producer face wins.
        assert_eq!(
            v.choose(&n("/x/seg=3"), &[(1, false), (7, true), (2, false)]),
            Some(7)
        );
        // Neighbours never heard from: FIB order.
        assert_eq!(v.choose(&n("/x"), &[(5, false), (6, false)]), Some(5));
        // Heard beats unheard even with a negative differential.
        v.on_beacon(3, &encode_beacon(&[(n("/x"), 50)], &[]), now)
            .unwrap();
        assert_eq!(v.choose(&n("/x"), &[(5, false), (3, false)]), Some(3));
        assert_eq!(v.choose(&n("/x"), &[]), None);
    }

    #[test]
    fn capacity_is_the_link_rate_in_objects_per_slot() {
        // 500 Mb/s, 1 s slots, 5 MB objects: 500e6 / (8 · 5e6) = 12.5 → 12.
        assert_eq!(
            vips_per_slot(500_000_000, Duration::from_secs(1), 5_000_000),
            12
        );
        // 20 Mb/s, 100 ms slots, 2000-byte objects: 2e6 / 16000 = 125.
        assert_eq!(
            vips_per_slot(20_000_000, Duration::from_millis(100), 2000),
            125
        );
        // A slow link still carries one VIP a slot; no rate carries none.
        assert_eq!(vips_per_slot(1000, Duration::from_millis(100), 8192), 1);
        assert_eq!(vips_per_slot(0, Duration::from_secs(1), 1), 0);
        let mut v = Vip::new(VipConfig {
            object_bytes: 2000,
            ..cfg()
        });
        assert_eq!(v.face_capacity(1), (10, CapacitySource::Default));
        v.set_face_rate(1, Some(4_000_000));
        assert_eq!(v.face_capacity(1), (25, CapacitySource::Configured));
        // Measured: 20,000 bytes a period (EWMA from the first difference
        // on), with 25% headroom: 0.2 · 20000 · 1.25 / 2000 = 2.5 → 2.
        v.observe_face_bytes(2, 1_000);
        assert_eq!(v.face_capacity(2).1, CapacitySource::Default);
        v.observe_face_bytes(2, 21_000);
        assert_eq!(v.face_capacity(2), (2, CapacitySource::Measured));
        for i in 2..60 {
            v.observe_face_bytes(2, 1_000 + 20_000 * i);
        }
        // Converged: 20000 · 1.25 / 2000 = 12.5 → 12.
        assert_eq!(v.face_capacity(2), (12, CapacitySource::Measured));
        // A transfer announced above a face's capacity is capped at it.
        v.on_beacon(2, &encode_beacon(&[], &[(n("/x"), 99)]), Instant::now())
            .unwrap();
        assert_eq!(v.count(&n("/x")), 12);
    }

    #[test]
    fn unequal_capacities_keep_interests_off_the_slow_link() {
        // A reaches the source over B (fast: 10 VIPs a period) and C (slow:
        // 1). Both neighbours start at 0 and drain what they get (they pass
        // it on to the source). Backpressure moves 10 a period to B and 1 to
        // C; the Interests follow the VIP flow, so they go to B, although
        // the differential towards C (never filled) is the larger.
        let mut a = Vip::new(VipConfig {
            link_capacity: 10,
            ..cfg()
        });
        a.set_face_rate(1, Some(10 * 8 * 8192 * 10));
        a.set_face_rate(2, Some(8 * 8192 * 10));
        assert_eq!(a.face_capacity(1).0, 10);
        assert_eq!(a.face_capacity(2).0, 1);
        let up = |_: &Name, o: &mut Vec<FaceId>| o.extend([1, 2]);
        let src = |_: &Name| false;
        let t = Instant::now();
        let (mut to_b, mut to_c) = (0, 0);
        for _ in 0..20 {
            for _ in 0..11 {
                a.on_request(&n("/x"));
            }
            // B holds a little backlog (it is loaded more), C none.
            a.on_beacon(1, &encode_beacon(&[(n("/x"), 3)], &[]), t)
                .unwrap();
            a.on_beacon(2, &encode_beacon(&[], &[]), t).unwrap();
            for (f, p) in a.tick(t, &input(&[1, 2], &up, &src, 0)) {
                let moved: u64 = decode_beacon(&p.encode())
                    .unwrap()
                    .1
                    .iter()
                    .map(|x| x.1)
                    .sum();
                if f == 1 {
                    to_b += moved;
                } else {
                    to_c += moved;
                }
            }
        }
        assert!(to_b > 5 * to_c, "{to_b} VIPs to B, {to_c} to C");
        assert!(a.differential(2, &n("/x")) > a.differential(1, &n("/x")));
        assert!(a.flow(1, &n("/x")) > a.flow(2, &n("/x")));
        assert_eq!(a.choose(&n("/x/seg=0"), &[(2, false), (1, false)]), Some(1));
    }

    #[test]
    fn state_is_bounded() {
        let mut v = Vip::new(cfg());
        for i in 0..100 {
            for _ in 0..=i {
                v.on_request(&n(&format!("/o/{i}")));
            }
        }
        // Between periods at most 2 × max_objects are tracked…
        assert_eq!(v.tracked(), 16);
        let none = |_: &Name, _: &mut Vec<FaceId>| {};
        let src = |_: &Name| false;
        let b = v.tick(Instant::now(), &input(&[4], &none, &src, 0));
        // …and after a period max_objects, the largest; beacons carry at
        // most beacon_entries.
        assert_eq!(v.tracked(), 8);
        assert_eq!(v.count(&n("/o/15")), 16);
        assert_eq!(v.count(&n("/o/0")), 0);
        assert_eq!(decode_beacon(&b[0].1.encode()).unwrap().0.len(), 4);
        // Silent neighbours are forgotten after 10 periods.
        let t0 = Instant::now();
        v.on_beacon(4, &encode_beacon(&[(n("/o/15"), 1)], &[]), t0)
            .unwrap();
        v.tick(t0, &input(&[4], &none, &src, 0));
        assert!(v.neighbour_count(4, &n("/o/15")).is_some());
        v.tick(t0 + Duration::from_secs(2), &input(&[4], &none, &src, 0));
        assert_eq!(v.neighbour_count(4, &n("/o/15")), None);
    }
}
