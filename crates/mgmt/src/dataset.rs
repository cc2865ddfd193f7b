//! Status dataset items: FaceStatus, FibEntry, RibEntry, StrategyChoice,
//! CsInfo (each one TLV 128, concatenated in a dataset payload), and
//! GeneralStatus (the ForwarderStatus payload: bare fields, no outer TLV).
//!
//! Elements must appear in the order the NFD specification lists them (as
//! ndn-cxx requires); unknown non-critical elements are skipped anywhere and
//! unknown critical ones rejected.

use bytes::{BufMut, Bytes, BytesMut};
use granary_packet::tlv::{self, Element, Reader};
use granary_packet::types::{CONTENT, NAME};
use granary_packet::{Error, ErrorKind, Name, Result};

use crate::codec::*;
use crate::control::decode_strategy;
use crate::tlv_types::*;

/// Decodes a dataset payload: consecutive `T` elements. Unknown non-critical
/// elements between items are skipped.
pub fn decode_dataset<T: TlvElement>(payload: &Bytes) -> Result<Vec<T>> {
    let mut r = Reader::new(payload);
    let mut items = Vec::new();
    while !r.is_empty() {
        let el = r.read()?;
        if el.typ != T::TLV_TYPE {
            r.unknown(&el, CONTENT)?;
            continue;
        }
        items.push(T::decode_element(&r, &el)?);
    }
    Ok(items)
}

/// Encodes `items` back to back (a dataset payload), in one buffer.
pub fn encode_dataset<T: TlvElement>(items: &[T]) -> Bytes {
    let mut b = BytesMut::with_capacity(items.iter().map(T::encoded_len).sum());
    for i in items {
        i.encode_to(&mut b);
    }
    b.freeze()
}

/// One face (faces/list, faces/query dataset item).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FaceStatus {
    /// FaceId.
    pub face_id: u64,
    /// Uri (remote FaceUri).
    pub uri: String,
    /// LocalUri.
    pub local_uri: String,
    /// ExpirationPeriod in ms (absent: the face does not expire).
    pub expiration_period: Option<u64>,
    /// FaceScope (see [`crate::values::face_scope`]).
    pub face_scope: u64,
    /// FacePersistency (see [`crate::values::face_persistency`]).
    pub face_persistency: u64,
    /// LinkType (see [`crate::values::link_type`]).
    pub link_type: u64,
    /// BaseCongestionMarkingInterval in ns.
    pub base_congestion_marking_interval: Option<u64>,
    /// DefaultCongestionThreshold in bytes.
    pub default_congestion_threshold: Option<u64>,
    /// Mtu in bytes.
    pub mtu: Option<u64>,
    /// NInInterests.
    pub n_in_interests: u64,
    /// NInData.
    pub n_in_data: u64,
    /// NInNacks.
    pub n_in_nacks: u64,
    /// NOutInterests.
    pub n_out_interests: u64,
    /// NOutData.
    pub n_out_data: u64,
    /// NOutNacks.
    pub n_out_nacks: u64,
    /// NInBytes.
    pub n_in_bytes: u64,
    /// NOutBytes.
    pub n_out_bytes: u64,
    /// Flags (see [`crate::values::face_flags`]).
    pub flags: u64,
    /// VipCapacity: VIPs the face carries per VIP period (Granary
    /// extension; None unless the forwarder uses VIP).
    pub vip_capacity: Option<u64>,
    /// NOutCongestionMarks: Data this face sent with a CongestionMark
    /// (Granary extension; absent while none was, so that the element is
    /// otherwise NFD's).
    pub n_out_congestion_marks: Option<u64>,
    /// NOutQueueDrops: packets this face dropped because its send queue was
    /// full (Granary extension; absent while none was).
    pub n_out_queue_drops: Option<u64>,
}

const FACE_STATUS_ORDER: [u64; 22] = [
    FACE_ID,
    URI,
    LOCAL_URI,
    EXPIRATION_PERIOD,
    FACE_SCOPE,
    FACE_PERSISTENCY,
    LINK_TYPE,
    BASE_CONGESTION_MARKING_INTERVAL,
    DEFAULT_CONGESTION_THRESHOLD,
    MTU,
    N_IN_INTERESTS,
    N_IN_DATA,
    N_IN_NACKS,
    N_OUT_INTERESTS,
    N_OUT_DATA,
    N_OUT_NACKS,
    N_IN_BYTES,
    N_OUT_BYTES,
    FLAGS,
    VIP_CAPACITY,
    N_OUT_CONGESTION_MARKS,
    N_OUT_QUEUE_DROPS,
];

impl FaceStatus {
    fn head_nnis(&self) -> [(u64, u64); 3] {
        [
            (FACE_SCOPE, self.face_scope),
            (FACE_PERSISTENCY, self.face_persistency),
            (LINK_TYPE, self.link_type),
        ]
    }

    fn opt_nnis(&self) -> [(u64, Option<u64>); 3] {
        [
            (
                BASE_CONGESTION_MARKING_INTERVAL,
                self.base_congestion_marking_interval,
            ),
            (
                DEFAULT_CONGESTION_THRESHOLD,
                self.default_congestion_threshold,
            ),
            (MTU, self.mtu),
        ]
    }

    fn counters(&self) -> [(u64, u64); 9] {
        [
            (N_IN_INTERESTS, self.n_in_interests),
            (N_IN_DATA, self.n_in_data),
            (N_IN_NACKS, self.n_in_nacks),
            (N_OUT_INTERESTS, self.n_out_interests),
            (N_OUT_DATA, self.n_out_data),
            (N_OUT_NACKS, self.n_out_nacks),
            (N_IN_BYTES, self.n_in_bytes),
            (N_OUT_BYTES, self.n_out_bytes),
            (FLAGS, self.flags),
        ]
    }
}

impl TlvElement for FaceStatus {
    const TLV_TYPE: u64 = FACE_STATUS;

    fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self> {
        expect_type(el, FACE_STATUS)?;
        let mut f = Fields::inside(r, el, true);
        let mut fs = FaceStatus::default();
        let (mut uri, mut local_uri) = (None, None);
        let mut nnis: [Option<u64>; 22] = [None; 22];
        while let Some((i, e)) = f.next(&FACE_STATUS_ORDER)? {
            match e.typ {
                URI => uri = Some(f.string(&e)?),
                LOCAL_URI => local_uri = Some(f.string(&e)?),
                _ => nnis[i] = Some(f.nni(&e)?),
            }
        }
        let req = |i: usize| required(nnis[i], FACE_STATUS_ORDER[i], el);
        fs.face_id = req(0)?;
        fs.uri = required(uri, URI, el)?;
        fs.local_uri = required(local_uri, LOCAL_URI, el)?;
        fs.expiration_period = nnis[3];
        fs.face_scope = req(4)?;
        fs.face_persistency = req(5)?;
        fs.link_type = req(6)?;
        fs.base_congestion_marking_interval = nnis[7];
        fs.default_congestion_threshold = nnis[8];
        fs.mtu = nnis[9];
        fs.n_in_interests = req(10)?;
        fs.n_in_data = req(11)?;
        fs.n_in_nacks = req(12)?;
        fs.n_out_interests = req(13)?;
        fs.n_out_data = req(14)?;
        fs.n_out_nacks = req(15)?;
        fs.n_in_bytes = req(16)?;
        fs.n_out_bytes = req(17)?;
        fs.flags = req(18)?;
        fs.vip_capacity = nnis[19];
        fs.n_out_congestion_marks = nnis[20];
        fs.n_out_queue_drops = nnis[21];
        Ok(fs)
    }

    fn value_len(&self) -> usize {
        tlv::nni_tlv_len(FACE_ID, self.face_id)
            + str_len(URI, &self.uri)
            + str_len(LOCAL_URI, &self.local_uri)
            + opt_nni_len(EXPIRATION_PERIOD, self.expiration_period)
            + nnis_len(&self.head_nnis())
            + self
                .opt_nnis()
                .iter()
                .map(|&(t, v)| opt_nni_len(t, v))
                .sum::<usize>()
            + nnis_len(&self.counters())
            + opt_nni_len(VIP_CAPACITY, self.vip_capacity)
            + opt_nni_len(N_OUT_CONGESTION_MARKS, self.n_out_congestion_marks)
            + opt_nni_len(N_OUT_QUEUE_DROPS, self.n_out_queue_drops)
    }

    fn encode_value<B: BufMut>(&self, buf: &mut B) {
        tlv::put_nni_tlv(buf, FACE_ID, self.face_id);
        tlv::put_tlv(buf, URI, self.uri.as_bytes());
        tlv::put_tlv(buf, LOCAL_URI, self.local_uri.as_bytes());
        put_opt_nni(buf, EXPIRATION_PERIOD, self.expiration_period);
        put_nnis(buf, &self.head_nnis());
        for (t, v) in self.opt_nnis() {
            put_opt_nni(buf, t, v);
        }
        put_nnis(buf, &self.counters());
        put_opt_nni(buf, VIP_CAPACITY, self.vip_capacity);
        put_opt_nni(buf, N_OUT_CONGESTION_MARKS, self.n_out_congestion_marks);
        put_opt_nni(buf, N_OUT_QUEUE_DROPS, self.n_out_queue_drops);
    }
}

/// A FIB nexthop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NextHopRecord {
    /// FaceId.
    pub face_id: u64,
    /// Cost.
    pub cost: u64,
}

impl NextHopRecord {
    fn fields(&self) -> [(u64, u64); 2] {
        [(FACE_ID, self.face_id), (COST, self.cost)]
    }
}

impl TlvElement for NextHopRecord {
    const TLV_TYPE: u64 = NEXT_HOP_RECORD;

    fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self> {
        expect_type(el, NEXT_HOP_RECORD)?;
        const ORDER: [u64; 2] = [FACE_ID, COST];
        let mut f = Fields::inside(r, el, true);
        let mut v = [None; 2];
        while let Some((i, e)) = f.next(&ORDER)? {
            v[i] = Some(f.nni(&e)?);
        }
        Ok(NextHopRecord {
            face_id: required(v[0], FACE_ID, el)?,
            cost: required(v[1], COST, el)?,
        })
    }

    fn value_len(&self) -> usize {
        nnis_len(&self.fields())
    }

    fn encode_value<B: BufMut>(&self, buf: &mut B) {
        put_nnis(buf, &self.fields());
    }
}

/// One FIB entry (fib/list dataset item).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FibEntry {
    /// The prefix.
    pub name: Name,
    /// Nexthops, in wire order.
    pub next_hops: Vec<NextHopRecord>,
}

/// Decodes `Name Item*` (FibEntry, RibEntry).
fn decode_name_and_list<T: TlvElement>(r: &Reader<'_>, el: &Element) -> Result<(Name, Vec<T>)> {
    let mut inner = Reader::inside(r.buffer(), el);
    if inner.is_empty() {
        return Err(Error::new(el.start, ErrorKind::Missing { element: NAME }).with_type(el.typ));
    }
    let first = inner.read()?;
    let name = Name::decode_element(&inner, &first)?;
    let mut items = Vec::new();
    while !inner.is_empty() {
        let e = inner.read()?;
        if e.typ == T::TLV_TYPE {
            items.push(T::decode_element(&inner, &e)?);
        } else {
            inner.unknown(&e, el.typ)?;
        }
    }
    Ok((name, items))
}

impl TlvElement for FibEntry {
    const TLV_TYPE: u64 = FIB_ENTRY;

    fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self> {
        expect_type(el, FIB_ENTRY)?;
        let (name, next_hops) = decode_name_and_list(r, el)?;
        Ok(FibEntry { name, next_hops })
    }

    fn value_len(&self) -> usize {
        self.name.encoded_len()
            + self
                .next_hops
                .iter()
                .map(NextHopRecord::encoded_len)
                .sum::<usize>()
    }

    fn encode_value<B: BufMut>(&self, buf: &mut B) {
        self.name.encode_to(buf);
        for h in &self.next_hops {
            h.encode_to(buf);
        }
    }
}

/// A RIB route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Route {
    /// FaceId.
    pub face_id: u64,
    /// Origin (see [`crate::values::route_origin`]).
    pub origin: u64,
    /// Cost.
    pub cost: u64,
    /// Flags (see [`crate::values::route_flags`]).
    pub flags: u64,
    /// ExpirationPeriod in ms (absent: never expires).
    pub expiration_period: Option<u64>,
}

impl Route {
    fn fields(&self) -> [(u64, u64); 4] {
        [
            (FACE_ID, self.face_id),
            (ORIGIN, self.origin),
            (COST, self.cost),
            (FLAGS, self.flags),
        ]
    }
}

impl TlvElement for Route {
    const TLV_TYPE: u64 = ROUTE;

    fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self> {
        expect_type(el, ROUTE)?;
        const ORDER: [u64; 5] = [FACE_ID, ORIGIN, COST, FLAGS, EXPIRATION_PERIOD];
        let mut f = Fields::inside(r, el, true);
        let mut v = [None; 5];
        while let Some((i, e)) = f.next(&ORDER)? {
            v[i] = Some(f.nni(&e)?);
        }
        Ok(Route {
            face_id: required(v[0], FACE_ID, el)?,
            origin: required(v[1], ORIGIN, el)?,
            cost: required(v[2], COST, el)?,
            flags: required(v[3], FLAGS, el)?,
            expiration_period: v[4],
        })
    }

    fn value_len(&self) -> usize {
        nnis_len(&self.fields()) + opt_nni_len(EXPIRATION_PERIOD, self.expiration_period)
    }

    fn encode_value<B: BufMut>(&self, buf: &mut B) {
        put_nnis(buf, &self.fields());
        put_opt_nni(buf, EXPIRATION_PERIOD, self.expiration_period);
    }
}

/// One RIB entry (rib/list dataset item).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RibEntry {
    /// The prefix.
    pub name: Name,
    /// Routes, in wire order.
    pub routes: Vec<Route>,
}

/// The node's distance to `node`: the lowest cost among the routes of the longest
/// RIB entry that is a prefix of it (the costs the operator or the routing protocol
/// gave; the FIB's next-hop costs are not used, as a child-inherited route on the
/// same face can lower them), `None` without such an entry.
pub fn rib_distance(rib: &[RibEntry], node: &Name) -> Option<u64> {
    rib.iter()
        .filter(|e| !e.routes.is_empty() && e.name.is_prefix_of(node))
        .max_by_key(|e| e.name.len())
        .and_then(|e| e.routes.iter().map(|r| r.cost).min())
}

impl TlvElement for RibEntry {
    const TLV_TYPE: u64 = RIB_ENTRY;

    fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self> {
        expect_type(el, RIB_ENTRY)?;
        let (name, routes) = decode_name_and_list(r, el)?;
        Ok(RibEntry { name, routes })
    }

    fn value_len(&self) -> usize {
        self.name.encoded_len() + self.routes.iter().map(Route::encoded_len).sum::<usize>()
    }

    fn encode_value<B: BufMut>(&self, buf: &mut B) {
        self.name.encode_to(buf);
        for r in &self.routes {
            r.encode_to(buf);
        }
    }
}

/// The strategy chosen for a namespace (strategy-choice/list dataset item).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StrategyChoice {
    /// The namespace.
    pub name: Name,
    /// The strategy instance name (inside a Strategy element).
    pub strategy: Name,
}

impl TlvElement for StrategyChoice {
    const TLV_TYPE: u64 = STRATEGY_CHOICE;

    fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self> {
        expect_type(el, STRATEGY_CHOICE)?;
        let mut f = Fields::inside(r, el, true);
        let (mut name, mut strategy) = (None, None);
        while let Some((_, e)) = f.next(&[NAME, STRATEGY])? {
            if e.typ == NAME {
                name = Some(Name::decode_element(f.reader(), &e)?);
            } else {
                strategy = Some(decode_strategy(f.reader(), &e)?);
            }
        }
        Ok(StrategyChoice {
            name: required(name, NAME, el)?,
            strategy: required(strategy, STRATEGY, el)?,
        })
    }

    fn value_len(&self) -> usize {
        self.name.encoded_len() + tlv::tlv_len(STRATEGY, self.strategy.encoded_len())
    }

    fn encode_value<B: BufMut>(&self, buf: &mut B) {
        self.name.encode_to(buf);
        tlv::put_header(buf, STRATEGY, self.strategy.encoded_len());
        self.strategy.encode_to(buf);
    }
}

/// Content store information (cs/info dataset: a single item).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CsInfo {
    /// Capacity (maximum number of entries).
    pub capacity: u64,
    /// Flags (see [`crate::values::cs_flags`]).
    pub flags: u64,
    /// NCsEntries: current number of entries.
    pub n_entries: u64,
    /// NHits.
    pub n_hits: u64,
    /// NMisses.
    pub n_misses: u64,
}

const CS_INFO_ORDER: [u64; 5] = [CAPACITY, FLAGS, N_CS_ENTRIES, N_HITS, N_MISSES];

impl CsInfo {
    fn fields(&self) -> [(u64, u64); 5] {
        [
            (CAPACITY, self.capacity),
            (FLAGS, self.flags),
            (N_CS_ENTRIES, self.n_entries),
            (N_HITS, self.n_hits),
            (N_MISSES, self.n_misses),
        ]
    }
}

impl TlvElement for CsInfo {
    const TLV_TYPE: u64 = CS_INFO;

    fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self> {
        expect_type(el, CS_INFO)?;
        let mut f = Fields::inside(r, el, true);
        let mut v = [None; 5];
        while let Some((i, e)) = f.next(&CS_INFO_ORDER)? {
            v[i] = Some(f.nni(&e)?);
        }
        let req = |i: usize| required(v[i], CS_INFO_ORDER[i], el);
        Ok(CsInfo {
            capacity: req(0)?,
            flags: req(1)?,
            n_entries: req(2)?,
            n_hits: req(3)?,
            n_misses: req(4)?,
        })
    }

    fn value_len(&self) -> usize {
        nnis_len(&self.fields())
    }

    fn encode_value<B: BufMut>(&self, buf: &mut B) {
        put_nnis(buf, &self.fields());
    }
}

/// Forwarder status (status/general dataset). Unlike the other datasets its
/// fields are the payload itself, with no enclosing TLV.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GeneralStatus {
    /// NfdVersion.
    pub nfd_version: String,
    /// StartTimestamp, ms since the Unix epoch.
    pub start_timestamp: u64,
    /// CurrentTimestamp, ms since the Unix epoch.
    pub current_timestamp: u64,
    /// NNameTreeEntries.
    pub n_name_tree_entries: u64,
    /// NFibEntries.
    pub n_fib_entries: u64,
    /// NPitEntries.
    pub n_pit_entries: u64,
    /// NMeasurementsEntries.
    pub n_measurements_entries: u64,
    /// NCsEntries.
    pub n_cs_entries: u64,
    /// NInInterests.
    pub n_in_interests: u64,
    /// NInData.
    pub n_in_data: u64,
    /// NInNacks.
    pub n_in_nacks: u64,
    /// NOutInterests.
    pub n_out_interests: u64,
    /// NOutData.
    pub n_out_data: u64,
    /// NOutNacks.
    pub n_out_nacks: u64,
    /// NSatisfiedInterests.
    pub n_satisfied_interests: u64,
    /// NUnsatisfiedInterests.
    pub n_unsatisfied_interests: u64,
}

const GENERAL_STATUS_ORDER: [u64; 16] = [
    NFD_VERSION,
    START_TIMESTAMP,
    CURRENT_TIMESTAMP,
    N_NAME_TREE_ENTRIES,
    N_FIB_ENTRIES,
    N_PIT_ENTRIES,
    N_MEASUREMENTS_ENTRIES,
    N_CS_ENTRIES,
    N_IN_INTERESTS,
    N_IN_DATA,
    N_IN_NACKS,
    N_OUT_INTERESTS,
    N_OUT_DATA,
    N_OUT_NACKS,
    N_SATISFIED_INTERESTS,
    N_UNSATISFIED_INTERESTS,
];

impl GeneralStatus {
    fn nnis(&self) -> [(u64, u64); 15] {
        [
            (START_TIMESTAMP, self.start_timestamp),
            (CURRENT_TIMESTAMP, self.current_timestamp),
            (N_NAME_TREE_ENTRIES, self.n_name_tree_entries),
            (N_FIB_ENTRIES, self.n_fib_entries),
            (N_PIT_ENTRIES, self.n_pit_entries),
            (N_MEASUREMENTS_ENTRIES, self.n_measurements_entries),
            (N_CS_ENTRIES, self.n_cs_entries),
            (N_IN_INTERESTS, self.n_in_interests),
            (N_IN_DATA, self.n_in_data),
            (N_IN_NACKS, self.n_in_nacks),
            (N_OUT_INTERESTS, self.n_out_interests),
            (N_OUT_DATA, self.n_out_data),
            (N_OUT_NACKS, self.n_out_nacks),
            (N_SATISFIED_INTERESTS, self.n_satisfied_interests),
            (N_UNSATISFIED_INTERESTS, self.n_unsatisfied_interests),
        ]
    }

    /// Decodes a ForwarderStatus payload (the Content value of the
    /// status/general dataset, reassembled). Error offsets are into `payload`.
    pub fn decode(payload: &Bytes) -> Result<Self> {
        let mut f = Fields::over(payload, CONTENT, true);
        let mut version = None;
        let mut v: [Option<u64>; 16] = [None; 16];
        while let Some((i, e)) = f.next(&GENERAL_STATUS_ORDER)? {
            if i == 0 {
                version = Some(f.string(&e)?);
            } else {
                v[i] = Some(f.nni(&e)?);
            }
        }
        let missing = |element| Error::new(payload.len(), ErrorKind::Missing { element });
        let req = |i: usize| v[i].ok_or_else(|| missing(GENERAL_STATUS_ORDER[i]));
        Ok(GeneralStatus {
            nfd_version: version.ok_or_else(|| missing(NFD_VERSION))?,
            start_timestamp: req(1)?,
            current_timestamp: req(2)?,
            n_name_tree_entries: req(3)?,
            n_fib_entries: req(4)?,
            n_pit_entries: req(5)?,
            n_measurements_entries: req(6)?,
            n_cs_entries: req(7)?,
            n_in_interests: req(8)?,
            n_in_data: req(9)?,
            n_in_nacks: req(10)?,
            n_out_interests: req(11)?,
            n_out_data: req(12)?,
            n_out_nacks: req(13)?,
            n_satisfied_interests: req(14)?,
            n_unsatisfied_interests: req(15)?,
        })
    }

    /// Size of the payload.
    pub fn encoded_len(&self) -> usize {
        str_len(NFD_VERSION, &self.nfd_version) + nnis_len(&self.nnis())
    }

    /// Writes the payload (no enclosing TLV).
    pub fn encode_to<B: BufMut>(&self, buf: &mut B) {
        tlv::put_tlv(buf, NFD_VERSION, self.nfd_version.as_bytes());
        put_nnis(buf, &self.nnis());
    }

    /// The payload in a new buffer.
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(self.encoded_len());
        self.encode_to(&mut b);
        b.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::*;

    fn entry(prefix: &str, costs: &[u64]) -> RibEntry {
        RibEntry {
            name: Name::from_uri(prefix).unwrap(),
            routes: costs
                .iter()
                .enumerate()
                .map(|(i, &cost)| Route {
                    face_id: 300 + i as u64,
                    origin: 255,
                    cost,
                    flags: 1,
                    expiration_period: None,
                })
                .collect(),
        }
    }

    #[test]
    fn distance_is_the_longest_rib_prefix_cheapest_route() {
        let rib = vec![
            entry("/", &[0]),
            entry("/site/a", &[10]),
            entry("/site/b", &[30, 20]),
            entry("/site", &[]),
        ];
        let d = |n: &str| rib_distance(&rib, &Name::from_uri(n).unwrap());
        // Its own route, not the cheaper default route it would inherit.
        assert_eq!(d("/site/a"), Some(10));
        assert_eq!(d("/site/a/x"), Some(10));
        assert_eq!(d("/site/b"), Some(20));
        // A prefix with only the default route: the default's cost.
        assert_eq!(d("/site/c"), Some(0));
        assert_eq!(
            rib_distance(&rib[1..], &Name::from_uri("/other").unwrap()),
            None
        );
        // Component-wise: /site/ab is not under /site/a.
        assert_eq!(
            rib_distance(&rib[1..2], &Name::from_uri("/site/ab").unwrap()),
            None
        );
    }

    fn b(hex: &str) -> Bytes {
        Bytes::from(hex::decode(hex.replace(' ', "")).unwrap())
    }

    fn face() -> FaceStatus {
        FaceStatus {
            face_id: 300,
            uri: "udp4://192.0.2.1:6363".into(),
            local_uri: "udp4://192.0.2.2:6363".into(),
            expiration_period: None,
            face_scope: face_scope::NON_LOCAL,
            face_persistency: face_persistency::PERMANENT,
            link_type: link_type::POINT_TO_POINT,
            base_congestion_marking_interval: Some(100_000_000),
            default_congestion_threshold: Some(65536),
            mtu: Some(8800),
            n_in_interests: 1,
            n_in_data: 2,
            n_in_nacks: 3,
            n_out_interests: 4,
            n_out_data: 5,
            n_out_nacks: 6,
            n_in_bytes: 0x1_0000_0000,
            n_out_bytes: 0xFFFF,
            flags: face_flags::CONGESTION_MARKING_ENABLED,
            vip_capacity: None,
            n_out_congestion_marks: None,
            n_out_queue_drops: None,
        }
    }

    /// Granary's extensions (VipCapacity 204, NOutCongestionMarks 208,
    /// NOutQueueDrops 210)
    /// round-trip; without them the element is NFD's, byte for byte.
    #[test]
    fn face_status_extensions_round_trip() {
        let vip = FaceStatus {
            vip_capacity: Some(12),
            ..face()
        };
        let marks = FaceStatus {
            n_out_congestion_marks: Some(300),
            ..face()
        };
        let drops = FaceStatus {
            n_out_queue_drops: Some(5),
            ..face()
        };
        let all = FaceStatus {
            vip_capacity: Some(12),
            n_out_congestion_marks: Some(300),
            n_out_queue_drops: Some(5),
            ..face()
        };
        // Type, length and value: 3 bytes for 12 or 5, 4 for 300.
        for (f, extra) in [(vip, 3), (marks, 4), (drops, 3), (all, 10)] {
            let wire = f.encode();
            assert_eq!(FaceStatus::decode(&wire).unwrap(), f);
            assert_eq!(face().encode().len() + extra, wire.len());
        }
    }

    #[test]
    fn face_status_vector() {
        let expected = b(concat!(
            "806e",
            "6902012c",
            "7215",
            "756470343a2f2f3139322e302e322e313a36333633",
            "8115",
            "756470343a2f2f3139322e302e322e323a36333633",
            "840100",
            "850102",
            "860100",
            "870405f5e100",
            "880400010000",
            "89022260",
            "900101",
            "910102",
            "970103",
            "920104",
            "930105",
            "980106",
            "94080000000100000000",
            "9502ffff",
            "6c0104",
        ));
        let fs = face();
        assert_eq!(fs.encode(), expected);
        assert_eq!(FaceStatus::decode(&expected).unwrap(), fs);
    }

    #[test]
    fn face_status_errors() {
        let w = face().encode();
        // Drop the trailing Flags: missing required field.
        let mut v = w.to_vec();
        v.truncate(v.len() - 3);
        v[1] -= 3;
        let e = FaceStatus::decode(&Bytes::from(v)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Missing { element: FLAGS });
        // Uri before FaceId: out of order.
        let swapped = b("8008 720161 690101 8100");
        assert_eq!(
            FaceStatus::decode(&swapped).unwrap_err().kind,
            ErrorKind::OutOfOrder
        );
    }

    #[test]
    fn fib_entry_vector_and_dataset() {
        let e = FibEntry {
            name: Name::from_uri("/a").unwrap(),
            next_hops: vec![
                NextHopRecord {
                    face_id: 1,
                    cost: 0,
                },
                NextHopRecord {
                    face_id: 260,
                    cost: 10,
                },
            ],
        };
        let w = e.encode();
        assert_eq!(
            w,
            b("8016 0703080161 8106 690101 6a0100 8107 69020104 6a010a")
        );
        assert_eq!(FibEntry::decode(&w).unwrap(), e);
        let empty = FibEntry {
            name: Name::new(),
            next_hops: vec![],
        };
        assert_eq!(empty.encode(), b("8002 0700"));
        let payload = encode_dataset(&[e.clone(), empty.clone()]);
        assert_eq!(
            decode_dataset::<FibEntry>(&payload).unwrap(),
            vec![e, empty]
        );
        assert!(decode_dataset::<FibEntry>(&Bytes::new())
            .unwrap()
            .is_empty());
        // Non-critical junk between items is skipped, critical junk is not.
        assert_eq!(
            decode_dataset::<FibEntry>(&b("fc00 80020700"))
                .unwrap()
                .len(),
            1
        );
        assert!(decode_dataset::<FibEntry>(&b("fd00ff00 80020700")).is_err());
        // Missing Name; NextHopRecord missing Cost.
        assert!(FibEntry::decode(&b("8000")).is_err());
        assert!(FibEntry::decode(&b("8007 0700 8103 690101")).is_err());
    }

    #[test]
    fn rib_entry_vector() {
        let e = RibEntry {
            name: Name::from_uri("/a").unwrap(),
            routes: vec![
                Route {
                    face_id: 1,
                    origin: route_origin::STATIC,
                    cost: 0,
                    flags: route_flags::CHILD_INHERIT,
                    expiration_period: None,
                },
                Route {
                    face_id: 2,
                    origin: route_origin::APP,
                    cost: 5,
                    flags: route_flags::CAPTURE,
                    expiration_period: Some(1000),
                },
            ],
        };
        let w = e.encode();
        assert_eq!(
            w,
            b(concat!(
                "8025 0703080161",
                "810c 690101 6f01ff 6a0100 6c0101",
                "8110 690102 6f0100 6a0105 6c0102 6d0203e8"
            ))
        );
        assert_eq!(RibEntry::decode(&w).unwrap(), e);
        // A Route without Origin, Cost and Flags.
        assert!(RibEntry::decode(&b("8007 0700 8103 690101")).is_err());
    }

    #[test]
    fn strategy_choice_vector() {
        let sc = StrategyChoice {
            name: Name::from_uri("/").unwrap(),
            strategy: Name::from_uri("/s/v=5").unwrap(),
        };
        let w = sc.encode();
        assert_eq!(w, b("800c 0700 6b08 0706 080173 360105"));
        assert_eq!(StrategyChoice::decode(&w).unwrap(), sc);
        assert!(StrategyChoice::decode(&b("8002 0700")).is_err());
        assert!(StrategyChoice::decode(&b("8006 6b02 0700 0700")).is_err());
    }

    #[test]
    fn cs_info_vector() {
        let ci = CsInfo {
            capacity: 65536,
            flags: cs_flags::ENABLE_ADMIT | cs_flags::ENABLE_SERVE,
            n_entries: 10,
            n_hits: 0x100,
            n_misses: 0,
        };
        let w = ci.encode();
        assert_eq!(w, b("8013 830400010000 6c0103 87010a 81020100 820100"));
        assert_eq!(CsInfo::decode(&w).unwrap(), ci);
        assert_eq!(decode_dataset::<CsInfo>(&w).unwrap(), vec![ci]);
    }

    #[test]
    fn general_status_vector() {
        let gs = GeneralStatus {
            nfd_version: "22.12".into(),
            start_timestamp: 1_700_000_000_000,
            current_timestamp: 1_700_000_123_456,
            n_name_tree_entries: 1,
            n_fib_entries: 2,
            n_pit_entries: 3,
            n_measurements_entries: 4,
            n_cs_entries: 5,
            n_in_interests: 6,
            n_in_data: 7,
            n_in_nacks: 8,
            n_out_interests: 9,
            n_out_data: 10,
            n_out_nacks: 11,
            n_satisfied_interests: 12,
            n_unsatisfied_interests: 13,
        };
        let w = gs.encode();
        assert_eq!(
            w,
            b(concat!(
                "8005 32322e3132",
                "8108 0000018bcfe56800",
                "8208 0000018bcfe74a40",
                "830101 840102 850103 860104 870105",
                "900106 910107 970108 920109 93010a 98010b 99010c 9a010d",
            ))
        );
        assert_eq!(w.len(), gs.encoded_len());
        assert_eq!(GeneralStatus::decode(&w).unwrap(), gs);
        // Trailing non-critical extension (DNMP's 0xc8) is skipped; an odd one
        // (0xc9) is critical and rejected.
        let mut v = w.to_vec();
        v.extend_from_slice(&[0xc8, 1, 0]);
        assert_eq!(GeneralStatus::decode(&Bytes::from(v.clone())).unwrap(), gs);
        v.extend_from_slice(&[0xc9, 1, 0]);
        assert!(GeneralStatus::decode(&Bytes::from(v)).is_err());
        // Missing fields.
        let e = GeneralStatus::decode(&w.slice(..w.len() - 3)).unwrap_err();
        assert_eq!(
            e.kind,
            ErrorKind::Missing {
                element: N_UNSATISFIED_INTERESTS
            }
        );
        assert!(GeneralStatus::decode(&Bytes::new()).is_err());
    }
}

/// A faces/query filter (FaceQueryFilter): every field present must match.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FaceQueryFilter {
    /// FaceId.
    pub face_id: Option<u64>,
    /// UriScheme: matches the scheme of the remote or the local URI.
    pub uri_scheme: Option<String>,
    /// Uri (remote).
    pub uri: Option<String>,
    /// LocalUri.
    pub local_uri: Option<String>,
    /// FaceScope.
    pub face_scope: Option<u64>,
    /// FacePersistency.
    pub face_persistency: Option<u64>,
    /// LinkType.
    pub link_type: Option<u64>,
}

const FACE_QUERY_FILTER_ORDER: [u64; 7] = [
    FACE_ID,
    URI_SCHEME,
    URI,
    LOCAL_URI,
    FACE_SCOPE,
    FACE_PERSISTENCY,
    LINK_TYPE,
];

impl FaceQueryFilter {
    /// True when `f` passes every field of the filter.
    pub fn matches(&self, f: &FaceStatus) -> bool {
        let scheme = |u: &str| u.split("://").next().map(str::to_string);
        self.face_id.is_none_or(|v| v == f.face_id)
            && self.uri_scheme.as_ref().is_none_or(|s| {
                scheme(&f.uri).as_ref() == Some(s) || scheme(&f.local_uri).as_ref() == Some(s)
            })
            && self.uri.as_ref().is_none_or(|u| *u == f.uri)
            && self.local_uri.as_ref().is_none_or(|u| *u == f.local_uri)
            && self.face_scope.is_none_or(|v| v == f.face_scope)
            && self
                .face_persistency
                .is_none_or(|v| v == f.face_persistency)
            && self.link_type.is_none_or(|v| v == f.link_type)
    }
}

impl TlvElement for FaceQueryFilter {
    const TLV_TYPE: u64 = FACE_QUERY_FILTER;

    fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self> {
        expect_type(el, FACE_QUERY_FILTER)?;
        let mut f = Fields::inside(r, el, true);
        let mut q = FaceQueryFilter::default();
        while let Some((_, e)) = f.next(&FACE_QUERY_FILTER_ORDER)? {
            match e.typ {
                FACE_ID => q.face_id = Some(f.nni(&e)?),
                URI_SCHEME => q.uri_scheme = Some(f.string(&e)?),
                URI => q.uri = Some(f.string(&e)?),
                LOCAL_URI => q.local_uri = Some(f.string(&e)?),
                FACE_SCOPE => q.face_scope = Some(f.nni(&e)?),
                FACE_PERSISTENCY => q.face_persistency = Some(f.nni(&e)?),
                _ => q.link_type = Some(f.nni(&e)?),
            }
        }
        Ok(q)
    }

    fn value_len(&self) -> usize {
        let s = |t: u64, v: &Option<String>| v.as_ref().map_or(0, |v| str_len(t, v));
        opt_nni_len(FACE_ID, self.face_id)
            + s(URI_SCHEME, &self.uri_scheme)
            + s(URI, &self.uri)
            + s(LOCAL_URI, &self.local_uri)
            + opt_nni_len(FACE_SCOPE, self.face_scope)
            + opt_nni_len(FACE_PERSISTENCY, self.face_persistency)
            + opt_nni_len(LINK_TYPE, self.link_type)
    }

    fn encode_value<B: BufMut>(&self, buf: &mut B) {
        put_opt_nni(buf, FACE_ID, self.face_id);
        for (t, v) in [
            (URI_SCHEME, &self.uri_scheme),
            (URI, &self.uri),
            (LOCAL_URI, &self.local_uri),
        ] {
            if let Some(v) = v {
                tlv::put_tlv(buf, t, v.as_bytes());
            }
        }
        put_opt_nni(buf, FACE_SCOPE, self.face_scope);
        put_opt_nni(buf, FACE_PERSISTENCY, self.face_persistency);
        put_opt_nni(buf, LINK_TYPE, self.link_type);
    }
}

/// One listening channel (faces/channels dataset item).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChannelStatus {
    /// LocalUri: where the channel listens (`tcp4://0.0.0.0:6363`, `unix:///…`).
    pub local_uri: String,
}

impl TlvElement for ChannelStatus {
    const TLV_TYPE: u64 = CHANNEL_STATUS;

    fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self> {
        expect_type(el, CHANNEL_STATUS)?;
        let mut f = Fields::inside(r, el, true);
        let mut uri = None;
        while let Some((_, e)) = f.next(&[LOCAL_URI])? {
            uri = Some(f.string(&e)?);
        }
        Ok(ChannelStatus {
            local_uri: required(uri, LOCAL_URI, el)?,
        })
    }

    fn value_len(&self) -> usize {
        str_len(LOCAL_URI, &self.local_uri)
    }

    fn encode_value<B: BufMut>(&self, buf: &mut B) {
        tlv::put_tlv(buf, LOCAL_URI, self.local_uri.as_bytes());
    }
}
