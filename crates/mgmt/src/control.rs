//! ControlParameters (TLV 104) and ControlResponse (TLV 101).

use bytes::{BufMut, Bytes};
use granary_packet::tlv::{self, Element, Reader};
use granary_packet::types::NAME;
use granary_packet::{Error, ErrorKind, Name, Result};

use crate::codec::*;
use crate::tlv_types::*;

/// Arguments of a control command, and the body of most responses.
///
/// Every field NFD defines; `None` is absent on the wire. Encoding follows the
/// element order of the current NFD ControlCommand specification (the order
/// of the fields below, which python-ndn also writes). Decoding accepts the
/// known elements in any order, as NFD (ndn-cxx) does — ndn-cxx itself writes
/// FacePersistency, BaseCongestionMarkingInterval, DefaultCongestionThreshold
/// and Mtu after ExpirationPeriod — but rejects a repeated element; unknown
/// non-critical elements are skipped and unknown critical ones rejected.
/// Re-encoding a decoded value therefore reproduces the input byte for byte
/// when the input was in specification order with no unknown elements.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ControlParameters {
    /// Name (a prefix for FIB/RIB/strategy/CS commands).
    pub name: Option<Name>,
    /// FaceId.
    pub face_id: Option<u64>,
    /// Uri: the remote FaceUri.
    pub uri: Option<String>,
    /// LocalUri.
    pub local_uri: Option<String>,
    /// Origin of a route (see [`crate::values::route_origin`]).
    pub origin: Option<u64>,
    /// Cost.
    pub cost: Option<u64>,
    /// Capacity (CS entries).
    pub capacity: Option<u64>,
    /// Count (cs/erase limit).
    pub count: Option<u64>,
    /// BaseCongestionMarkingInterval in nanoseconds.
    pub base_congestion_marking_interval: Option<u64>,
    /// DefaultCongestionThreshold in bytes.
    pub default_congestion_threshold: Option<u64>,
    /// Mtu in bytes.
    pub mtu: Option<u64>,
    /// Flags (face, route or CS flags depending on the command).
    pub flags: Option<u64>,
    /// Mask: which bits of Flags are meaningful.
    pub mask: Option<u64>,
    /// Strategy: the strategy instance name (wrapped in a Strategy element).
    pub strategy: Option<Name>,
    /// ExpirationPeriod in milliseconds.
    pub expiration_period: Option<u64>,
    /// FacePersistency (see [`crate::values::face_persistency`]).
    pub face_persistency: Option<u64>,
    /// FaceRate: the face's Data rate in bits/s, VIP's capacity source
    /// (Granary extension, TLV 206, non-critical; after FacePersistency).
    pub face_rate: Option<u64>,
}

/// ControlParameters element types in encoding order.
const CP_ORDER: [u64; 17] = [
    NAME,
    FACE_ID,
    URI,
    LOCAL_URI,
    ORIGIN,
    COST,
    CAPACITY,
    COUNT,
    BASE_CONGESTION_MARKING_INTERVAL,
    DEFAULT_CONGESTION_THRESHOLD,
    MTU,
    FLAGS,
    MASK,
    STRATEGY,
    EXPIRATION_PERIOD,
    FACE_PERSISTENCY,
    FACE_RATE,
];

impl ControlParameters {
    /// Empty parameters (encodes as `68 00`).
    pub fn new() -> Self {
        Self::default()
    }

    /// The NonNegativeInteger fields between LocalUri and Strategy, in
    /// encoding order.
    fn nnis_mid(&self) -> [(u64, Option<u64>); 9] {
        [
            (ORIGIN, self.origin),
            (COST, self.cost),
            (CAPACITY, self.capacity),
            (COUNT, self.count),
            (
                BASE_CONGESTION_MARKING_INTERVAL,
                self.base_congestion_marking_interval,
            ),
            (
                DEFAULT_CONGESTION_THRESHOLD,
                self.default_congestion_threshold,
            ),
            (MTU, self.mtu),
            (FLAGS, self.flags),
            (MASK, self.mask),
        ]
    }

    /// True when the given bit of Flags is set (Flags absent: false).
    pub fn flag_bit(&self, bit: u64) -> bool {
        self.flags.is_some_and(|f| f & bit != 0)
    }

    /// True when Mask includes the given bit (Mask absent: false).
    pub fn has_flag_bit(&self, bit: u64) -> bool {
        self.mask.is_some_and(|m| m & bit != 0)
    }

    /// Sets (or clears) a Flags bit and, with `want_mask`, marks it in Mask.
    pub fn set_flag_bit(&mut self, bit: u64, value: bool, want_mask: bool) -> &mut Self {
        let f = self.flags.unwrap_or(0);
        self.flags = Some(if value { f | bit } else { f & !bit });
        if want_mask {
            self.mask = Some(self.mask.unwrap_or(0) | bit);
        }
        self
    }
}

fn strategy_value_len(n: &Name) -> usize {
    n.encoded_len()
}

impl TlvElement for ControlParameters {
    const TLV_TYPE: u64 = CONTROL_PARAMETERS;

    fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self> {
        expect_type(el, CONTROL_PARAMETERS)?;
        let mut f = Fields::inside(r, el, false);
        let mut cp = ControlParameters::default();
        while let Some((_, e)) = f.next(&CP_ORDER)? {
            match e.typ {
                NAME => cp.name = Some(Name::decode_element(f.reader(), &e)?),
                URI => cp.uri = Some(f.string(&e)?),
                LOCAL_URI => cp.local_uri = Some(f.string(&e)?),
                STRATEGY => cp.strategy = Some(decode_strategy(f.reader(), &e)?),
                t => {
                    let n = Some(f.nni(&e)?);
                    match t {
                        FACE_ID => cp.face_id = n,
                        ORIGIN => cp.origin = n,
                        COST => cp.cost = n,
                        CAPACITY => cp.capacity = n,
                        COUNT => cp.count = n,
                        BASE_CONGESTION_MARKING_INTERVAL => cp.base_congestion_marking_interval = n,
                        DEFAULT_CONGESTION_THRESHOLD => cp.default_congestion_threshold = n,
                        MTU => cp.mtu = n,
                        FLAGS => cp.flags = n,
                        MASK => cp.mask = n,
                        EXPIRATION_PERIOD => cp.expiration_period = n,
                        FACE_RATE => cp.face_rate = n,
                        _ => cp.face_persistency = n,
                    }
                }
            }
        }
        Ok(cp)
    }

    fn value_len(&self) -> usize {
        self.name.as_ref().map_or(0, Name::encoded_len)
            + opt_nni_len(FACE_ID, self.face_id)
            + self.uri.as_deref().map_or(0, |s| str_len(URI, s))
            + self
                .local_uri
                .as_deref()
                .map_or(0, |s| str_len(LOCAL_URI, s))
            + self
                .nnis_mid()
                .iter()
                .map(|&(t, v)| opt_nni_len(t, v))
                .sum::<usize>()
            + self
                .strategy
                .as_ref()
                .map_or(0, |n| tlv::tlv_len(STRATEGY, strategy_value_len(n)))
            + opt_nni_len(EXPIRATION_PERIOD, self.expiration_period)
            + opt_nni_len(FACE_PERSISTENCY, self.face_persistency)
            + opt_nni_len(FACE_RATE, self.face_rate)
    }

    fn encode_value<B: BufMut>(&self, buf: &mut B) {
        if let Some(n) = &self.name {
            n.encode_to(buf);
        }
        put_opt_nni(buf, FACE_ID, self.face_id);
        if let Some(s) = &self.uri {
            tlv::put_tlv(buf, URI, s.as_bytes());
        }
        if let Some(s) = &self.local_uri {
            tlv::put_tlv(buf, LOCAL_URI, s.as_bytes());
        }
        for (t, v) in self.nnis_mid() {
            put_opt_nni(buf, t, v);
        }
        if let Some(n) = &self.strategy {
            tlv::put_header(buf, STRATEGY, strategy_value_len(n));
            n.encode_to(buf);
        }
        put_opt_nni(buf, EXPIRATION_PERIOD, self.expiration_period);
        put_opt_nni(buf, FACE_PERSISTENCY, self.face_persistency);
        put_opt_nni(buf, FACE_RATE, self.face_rate);
    }
}

/// Strategy = STRATEGY-TYPE TLV-LENGTH Name. Unknown non-critical elements
/// after the Name are skipped.
pub(crate) fn decode_strategy(r: &Reader<'_>, el: &Element) -> Result<Name> {
    let mut inner = Reader::inside(r.buffer(), el);
    if inner.is_empty() {
        return Err(Error::new(el.start, ErrorKind::Missing { element: NAME }).with_type(el.typ));
    }
    let first = inner.read()?;
    let name = Name::decode_element(&inner, &first)?;
    while !inner.is_empty() {
        let e = inner.read()?;
        inner.unknown(&e, el.typ)?;
    }
    Ok(name)
}

/// Response to a control command (the Content of the response Data).
///
/// `StatusCode StatusText [body]`: the body is kept as the raw TLVs that
/// follow StatusText (validated as well-formed TLV, not interpreted); for NFD
/// commands it is a ControlParameters, see [`ControlResponse::params`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ControlResponse {
    /// StatusCode (see [`crate::status`]).
    pub status_code: u32,
    /// StatusText.
    pub status_text: String,
    /// Raw TLV elements after StatusText; `None` (or empty) writes nothing.
    pub body: Option<Bytes>,
}

impl ControlResponse {
    /// A response with no body.
    pub fn new(status_code: u32, status_text: impl Into<String>) -> Self {
        ControlResponse {
            status_code,
            status_text: status_text.into(),
            body: None,
        }
    }

    /// A response whose body is `params`.
    pub fn with_params(
        status_code: u32,
        status_text: impl Into<String>,
        params: &ControlParameters,
    ) -> Self {
        ControlResponse {
            body: Some(params.encode()),
            ..Self::new(status_code, status_text)
        }
    }

    /// The body decoded as one ControlParameters element; `None` without a body.
    pub fn params(&self) -> Option<Result<ControlParameters>> {
        self.body
            .as_ref()
            .filter(|b| !b.is_empty())
            .map(ControlParameters::decode)
    }

    /// True for a 2xx status.
    pub fn is_success(&self) -> bool {
        crate::status::is_success(self.status_code)
    }
}

impl TlvElement for ControlResponse {
    const TLV_TYPE: u64 = CONTROL_RESPONSE;

    fn decode_element(r: &Reader<'_>, el: &Element) -> Result<Self> {
        expect_type(el, CONTROL_RESPONSE)?;
        let mut inner = Reader::inside(r.buffer(), el);
        let mut next = |typ: u64| -> Result<Element> {
            if inner.is_empty() {
                return Err(Error::new(el.start, ErrorKind::Missing { element: typ })
                    .with_type(CONTROL_RESPONSE));
            }
            let e = inner.read()?;
            if e.typ != typ {
                return Err(
                    Error::new(e.start, ErrorKind::Unexpected { expected: typ }).with_type(e.typ)
                );
            }
            Ok(e)
        };
        let code_el = next(STATUS_CODE)?;
        let text_el = next(STATUS_TEXT)?;
        let code = inner.nni(&code_el)?;
        let status_code = u32::try_from(code).map_err(|_| {
            Error::new(
                code_el.start,
                ErrorKind::Invalid("StatusCode exceeds 32 bits"),
            )
            .with_type(STATUS_CODE)
        })?;
        let status_text = utf8(&inner, &text_el)?;
        let body_start = inner.position();
        while !inner.is_empty() {
            inner.read()?;
        }
        let body = (body_start < el.end).then(|| r.buffer().slice(body_start..el.end));
        Ok(ControlResponse {
            status_code,
            status_text,
            body,
        })
    }

    fn value_len(&self) -> usize {
        tlv::nni_tlv_len(STATUS_CODE, self.status_code as u64)
            + str_len(STATUS_TEXT, &self.status_text)
            + self.body.as_ref().map_or(0, Bytes::len)
    }

    fn encode_value<B: BufMut>(&self, buf: &mut B) {
        tlv::put_nni_tlv(buf, STATUS_CODE, self.status_code as u64);
        tlv::put_tlv(buf, STATUS_TEXT, self.status_text.as_bytes());
        if let Some(b) = &self.body {
            buf.put_slice(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::*;
    use granary_packet::ErrorKind;

    fn b(hex: &str) -> Bytes {
        Bytes::from(hex::decode(hex.replace(' ', "")).unwrap())
    }

    fn full() -> ControlParameters {
        ControlParameters {
            name: Some(Name::from_uri("/a").unwrap()),
            face_id: Some(1),
            uri: Some("udp4://192.0.2.1:6363".into()),
            local_uri: Some("dev://eth0".into()),
            origin: Some(route_origin::STATIC),
            cost: Some(0x100),
            capacity: Some(0x1_0000),
            count: Some(0x1_0000_0000),
            base_congestion_marking_interval: Some(100_000_000),
            default_congestion_threshold: Some(65536),
            mtu: Some(8800),
            flags: Some(1),
            mask: Some(3),
            strategy: Some(Name::from_uri("/s").unwrap()),
            expiration_period: Some(3_600_000),
            face_persistency: Some(face_persistency::PERMANENT),
            face_rate: None,
        }
    }

    #[test]
    fn face_rate_round_trips_after_face_persistency() {
        let cp = ControlParameters {
            face_id: Some(3),
            face_persistency: Some(face_persistency::PERSISTENT),
            face_rate: Some(5_000_000),
            ..Default::default()
        };
        let w = cp.encode();
        // FaceId, FacePersistency, then FaceRate (TLV 206 = 0xCE, 4 bytes).
        assert_eq!(w, b("680c 690103 850100 ce04004c4b40"));
        assert_eq!(ControlParameters::decode(&w).unwrap(), cp);
        // Any order is read (as NFD reads); twice is refused.
        assert_eq!(
            ControlParameters::decode(&b("680c 690103 ce04004c4b40 850100")).unwrap(),
            cp
        );
        assert!(ControlParameters::decode(&b("680c 690103 ce04004c4b40 ce0101")).is_err());
    }

    #[test]
    fn empty_and_single_field_vectors() {
        assert_eq!(ControlParameters::new().encode().as_ref(), &[0x68, 0x00]);
        let cp = ControlParameters {
            face_id: Some(300),
            ..Default::default()
        };
        let w = cp.encode();
        assert_eq!(w, b("6804 6902012c"));
        assert_eq!(ControlParameters::decode(&w).unwrap(), cp);
        let cp = ControlParameters {
            name: Some(Name::new()),
            ..Default::default()
        };
        assert_eq!(cp.encode(), b("6802 0700"));
    }

    #[test]
    fn every_field_byte_exact() {
        let expected = b(concat!(
            "6868",
            "0703080161",
            "690101",
            "7215",
            "756470343a2f2f3139322e302e322e313a36333633",
            "810a",
            "6465763a2f2f65746830",
            "6f01ff",
            "6a020100",
            "830400010000",
            "84080000000100000000",
            "870405f5e100",
            "880400010000",
            "89022260",
            "6c0101",
            "700103",
            "6b05",
            "0703080173",
            "6d040036ee80",
            "850102",
        ));
        let cp = full();
        assert_eq!(cp.encoded_len(), expected.len());
        assert_eq!(cp.encode(), expected);
        assert_eq!(ControlParameters::decode(&expected).unwrap(), cp);
    }

    #[test]
    fn ndn_cxx_order_is_accepted() {
        // ndn-cxx writes FacePersistency, BaseCongestionMarkingInterval,
        // DefaultCongestionThreshold and Mtu after ExpirationPeriod.
        let w = b("6815 690107 6c0101 6d0164 850101 870101 880102 890103");
        let cp = ControlParameters::decode(&w).unwrap();
        assert_eq!(cp.face_id, Some(7));
        assert_eq!(cp.face_persistency, Some(1));
        assert_eq!(cp.mtu, Some(3));
        assert_eq!(cp.expiration_period, Some(100));
        // Re-encoded in specification order.
        assert_eq!(
            cp.encode(),
            b("6815 690107 870101 880102 890103 6c0101 6d0164 850101")
        );
    }

    #[test]
    fn repeated_unknown_and_bad_elements() {
        let e = ControlParameters::decode(&b("6806 690101 690102")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfOrder);
        assert_eq!(e.offset, 5);
        // Unknown non-critical (0xFC) skipped; unknown critical (0xFB) rejected.
        let cp = ControlParameters::decode(&b("6806 fc0100 690109")).unwrap();
        assert_eq!(cp.face_id, Some(9));
        let e = ControlParameters::decode(&b("6806 fb0100 690109")).unwrap_err();
        assert!(matches!(
            e.kind,
            ErrorKind::UnknownCritical { context: 104 }
        ));
        // NNI of 3 bytes.
        let e = ControlParameters::decode(&b("6805 6903000001")).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::BadNni { length: 3 }));
        // Invalid UTF-8 in Uri.
        let e = ControlParameters::decode(&b("6803 7201ff")).unwrap_err();
        assert_eq!(e.tlv_type, Some(URI));
        // Strategy without a Name, Strategy holding something else.
        assert!(ControlParameters::decode(&b("6802 6b00")).is_err());
        assert!(ControlParameters::decode(&b("6805 6b03 690101")).is_err());
        // Wrong outer type, trailing bytes, truncation.
        assert!(ControlParameters::decode(&b("6900")).is_err());
        assert_eq!(
            ControlParameters::decode(&b("6800 00")).unwrap_err().kind,
            ErrorKind::Trailing
        );
        assert!(ControlParameters::decode(&b("6805 6901")).is_err());
    }

    #[test]
    fn strategy_skips_noncritical_after_name() {
        let cp = ControlParameters::decode(&b("6806 6b04 0700 fc00")).unwrap();
        assert_eq!(cp.strategy, Some(Name::new()));
    }

    #[test]
    fn flag_bits() {
        let mut cp = ControlParameters::new();
        cp.set_flag_bit(face_flags::CONGESTION_MARKING_ENABLED, true, true);
        assert_eq!((cp.flags, cp.mask), (Some(4), Some(4)));
        assert!(cp.flag_bit(face_flags::CONGESTION_MARKING_ENABLED));
        assert!(cp.has_flag_bit(face_flags::CONGESTION_MARKING_ENABLED));
        cp.set_flag_bit(face_flags::LOCAL_FIELDS_ENABLED, false, true);
        assert_eq!((cp.flags, cp.mask), (Some(4), Some(5)));
        assert!(!cp.flag_bit(face_flags::LOCAL_FIELDS_ENABLED));
        assert!(cp.has_flag_bit(face_flags::LOCAL_FIELDS_ENABLED));
    }

    #[test]
    fn control_response_vectors() {
        let r = ControlResponse::new(200, "OK");
        let w = r.encode();
        assert_eq!(w, b("6507 6601c8 67024f4b"));
        assert_eq!(ControlResponse::decode(&w).unwrap(), r);
        assert!(r.params().is_none());

        let cp = ControlParameters {
            face_id: Some(1),
            ..Default::default()
        };
        let r = ControlResponse::with_params(409, "conflict", &cp);
        let w = r.encode();
        assert_eq!(w, b("6513 66020199 6708636f6e666c696374 6803690101"));
        let d = ControlResponse::decode(&w).unwrap();
        assert_eq!(d, r);
        assert_eq!(d.params().unwrap().unwrap(), cp);
        assert!(!d.is_success());

        // Code wider than 32 bits; missing StatusText; fields out of order.
        assert!(ControlResponse::decode(&b("650a 66080000000100000000")).is_err());
        let e = ControlResponse::decode(&b("6503 6601c8")).unwrap_err();
        assert_eq!(
            e.kind,
            ErrorKind::Missing {
                element: STATUS_TEXT
            }
        );
        assert!(ControlResponse::decode(&b("6507 67024f4b 6601c8")).is_err());
        // A malformed body is an error; any well-formed TLVs are a body.
        assert!(ControlResponse::decode(&b("6509 6601c8 6700 6803 6901")).is_err());
        let d = ControlResponse::decode(&b("650b 6601c8 6700 fd0100 00 fc00")).unwrap();
        assert_eq!(d.body.unwrap(), b("fd010000 fc00"));
    }
}
