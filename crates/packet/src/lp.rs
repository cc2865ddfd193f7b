//! NDNLPv2 link-layer packets.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{Error, ErrorKind, Result};
use crate::tlv::{self, Element, Reader};
use crate::types::*;

/// An LpPacket. `None`/empty fields are absent. An LpPacket with nothing in
/// it is an IDLE packet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LpPacket {
    /// Sequence (fixed-width 8 bytes on the wire).
    pub sequence: Option<u64>,
    /// FragIndex.
    pub frag_index: Option<u64>,
    /// FragCount.
    pub frag_count: Option<u64>,
    /// PitToken (opaque, 1–32 bytes).
    pub pit_token: Option<Bytes>,
    /// Nack: `Some(reason)`; reason 0 means a Nack without NackReason.
    pub nack: Option<u64>,
    /// IncomingFaceId.
    pub incoming_face_id: Option<u64>,
    /// NextHopFaceId.
    pub next_hop_face_id: Option<u64>,
    /// CachePolicy's CachePolicyType.
    pub cache_policy: Option<u64>,
    /// CongestionMark.
    pub congestion_mark: Option<u64>,
    /// Acks (fixed-width 8 bytes each).
    pub acks: Vec<u64>,
    /// TxSequence (fixed-width 8 bytes).
    pub tx_sequence: Option<u64>,
    /// NonDiscovery.
    pub non_discovery: bool,
    /// PrefixAnnouncement (a Data, kept opaque).
    pub prefix_announcement: Option<Bytes>,
    /// Fragment: a network-layer packet or a piece of one.
    pub fragment: Option<Bytes>,
}

fn fixed_u64(r: &Reader<'_>, e: &Element) -> Result<u64> {
    let v = r.value_ref(e);
    if v.is_empty() || v.len() > 8 {
        return Err(Error::new(
            e.start,
            ErrorKind::Invalid("fixed-width integer must be 1-8 bytes"),
        )
        .with_type(e.typ));
    }
    Ok(v.iter().fold(0u64, |a, b| (a << 8) | *b as u64))
}

impl LpPacket {
    /// True when this is an IDLE packet (no fragment).
    pub fn is_idle(&self) -> bool {
        self.fragment.is_none()
    }

    /// Decodes an LpPacket TLV; `wire` must hold exactly one.
    pub fn decode(wire: Bytes) -> Result<LpPacket> {
        let el = tlv::read_single(&wire)?;
        let r = Reader::new(&wire);
        Self::decode_element(&r, &el)
    }

    /// Decodes the LpPacket element `el`.
    ///
    /// Unknown header fields in 800..=959 whose two low bits are 0 are
    /// ignored; any other unknown field is an error, as NDNLPv2 requires.
    pub fn decode_element(r: &Reader<'_>, el: &Element) -> Result<LpPacket> {
        el.expect(LP_PACKET)?;
        let mut inner = Reader::inside(r.buffer(), el);
        let mut p = LpPacket::default();
        while !inner.is_empty() {
            let e = inner.read()?;
            if p.fragment.is_some() {
                return Err(
                    Error::new(e.start, ErrorKind::Invalid("field after Fragment"))
                        .with_type(e.typ),
                );
            }
            match e.typ {
                LP_FRAGMENT => p.fragment = Some(inner.value(&e)),
                LP_SEQUENCE => p.sequence = Some(fixed_u64(&inner, &e)?),
                LP_FRAG_INDEX => p.frag_index = Some(inner.nni(&e)?),
                LP_FRAG_COUNT => p.frag_count = Some(inner.nni(&e)?),
                LP_PIT_TOKEN => p.pit_token = Some(inner.value(&e)),
                LP_NACK => {
                    let mut n = Reader::inside(inner.buffer(), &e);
                    let mut reason = nack_reason::NONE;
                    while !n.is_empty() {
                        let x = n.read()?;
                        if x.typ == LP_NACK_REASON {
                            reason = n.nni(&x)?;
                        } else {
                            n.unknown(&x, LP_NACK)?;
                        }
                    }
                    p.nack = Some(reason);
                }
                LP_INCOMING_FACE_ID => p.incoming_face_id = Some(inner.nni(&e)?),
                LP_NEXT_HOP_FACE_ID => p.next_hop_face_id = Some(inner.nni(&e)?),
                LP_CACHE_POLICY => {
                    let mut c = Reader::inside(inner.buffer(), &e);
                    let x = c.read()?;
                    if x.typ != LP_CACHE_POLICY_TYPE {
                        return Err(Error::new(
                            x.start,
                            ErrorKind::Missing {
                                element: LP_CACHE_POLICY_TYPE,
                            },
                        ));
                    }
                    p.cache_policy = Some(c.nni(&x)?);
                }
                LP_CONGESTION_MARK => p.congestion_mark = Some(inner.nni(&e)?),
                LP_ACK => p.acks.push(fixed_u64(&inner, &e)?),
                LP_TX_SEQUENCE => p.tx_sequence = Some(fixed_u64(&inner, &e)?),
                LP_NON_DISCOVERY => p.non_discovery = true,
                LP_PREFIX_ANNOUNCEMENT => p.prefix_announcement = Some(inner.value(&e)),
                t if (800..=959).contains(&t) && t & 3 == 0 => {}
                t => {
                    return Err(Error::new(
                        e.start,
                        ErrorKind::UnknownCritical { context: LP_PACKET },
                    )
                    .with_type(t))
                }
            }
        }
        Ok(p)
    }

    fn value_len(&self) -> usize {
        let fixed = |v: &Option<u64>, t| v.map_or(0, |_| tlv::tlv_len(t, 8));
        let nni = |v: &Option<u64>, t| v.map_or(0, |n| tlv::nni_tlv_len(t, n));
        fixed(&self.sequence, LP_SEQUENCE)
            + nni(&self.frag_index, LP_FRAG_INDEX)
            + nni(&self.frag_count, LP_FRAG_COUNT)
            + self
                .pit_token
                .as_ref()
                .map_or(0, |t| tlv::tlv_len(LP_PIT_TOKEN, t.len()))
            + self
                .nack
                .map_or(0, |r| tlv::tlv_len(LP_NACK, nack_value_len(r)))
            + nni(&self.incoming_face_id, LP_INCOMING_FACE_ID)
            + nni(&self.next_hop_face_id, LP_NEXT_HOP_FACE_ID)
            + self.cache_policy.map_or(0, |c| {
                tlv::tlv_len(LP_CACHE_POLICY, tlv::nni_tlv_len(LP_CACHE_POLICY_TYPE, c))
            })
            + nni(&self.congestion_mark, LP_CONGESTION_MARK)
            + self.acks.len() * tlv::tlv_len(LP_ACK, 8)
            + fixed(&self.tx_sequence, LP_TX_SEQUENCE)
            + if self.non_discovery {
                tlv::tlv_len(LP_NON_DISCOVERY, 0)
            } else {
                0
            }
            + self
                .prefix_announcement
                .as_ref()
                .map_or(0, |p| tlv::tlv_len(LP_PREFIX_ANNOUNCEMENT, p.len()))
            + self
                .fragment
                .as_ref()
                .map_or(0, |f| tlv::tlv_len(LP_FRAGMENT, f.len()))
    }

    /// Size of the encoded LpPacket.
    pub fn encoded_len(&self) -> usize {
        tlv::tlv_len(LP_PACKET, self.value_len())
    }

    /// Writes the LpPacket (header fields in increasing type order, Fragment last).
    pub fn encode_to(&self, buf: &mut impl BufMut) {
        tlv::put_header(buf, LP_PACKET, self.value_len());
        if let Some(s) = self.sequence {
            tlv::put_header(buf, LP_SEQUENCE, 8);
            buf.put_u64(s);
        }
        if let Some(i) = self.frag_index {
            tlv::put_nni_tlv(buf, LP_FRAG_INDEX, i);
        }
        if let Some(c) = self.frag_count {
            tlv::put_nni_tlv(buf, LP_FRAG_COUNT, c);
        }
        if let Some(t) = &self.pit_token {
            tlv::put_tlv(buf, LP_PIT_TOKEN, t);
        }
        if let Some(r) = self.nack {
            tlv::put_header(buf, LP_NACK, nack_value_len(r));
            if r != nack_reason::NONE {
                tlv::put_nni_tlv(buf, LP_NACK_REASON, r);
            }
        }
        if let Some(f) = self.incoming_face_id {
            tlv::put_nni_tlv(buf, LP_INCOMING_FACE_ID, f);
        }
        if let Some(f) = self.next_hop_face_id {
            tlv::put_nni_tlv(buf, LP_NEXT_HOP_FACE_ID, f);
        }
        if let Some(c) = self.cache_policy {
            tlv::put_header(
                buf,
                LP_CACHE_POLICY,
                tlv::nni_tlv_len(LP_CACHE_POLICY_TYPE, c),
            );
            tlv::put_nni_tlv(buf, LP_CACHE_POLICY_TYPE, c);
        }
        if let Some(m) = self.congestion_mark {
            tlv::put_nni_tlv(buf, LP_CONGESTION_MARK, m);
        }
        for a in &self.acks {
            tlv::put_header(buf, LP_ACK, 8);
            buf.put_u64(*a);
        }
        if let Some(s) = self.tx_sequence {
            tlv::put_header(buf, LP_TX_SEQUENCE, 8);
            buf.put_u64(s);
        }
        if self.non_discovery {
            tlv::put_header(buf, LP_NON_DISCOVERY, 0);
        }
        if let Some(p) = &self.prefix_announcement {
            tlv::put_tlv(buf, LP_PREFIX_ANNOUNCEMENT, p);
        }
        if let Some(f) = &self.fragment {
            tlv::put_tlv(buf, LP_FRAGMENT, f);
        }
    }

    /// The encoded LpPacket.
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(self.encoded_len());
        self.encode_to(&mut b);
        b.freeze()
    }
}

fn nack_value_len(reason: u64) -> usize {
    if reason == nack_reason::NONE {
        0
    } else {
        tlv::nni_tlv_len(LP_NACK_REASON, reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_all_fields() {
        let p = LpPacket {
            sequence: Some(7),
            frag_index: Some(1),
            frag_count: Some(3),
            pit_token: Some(Bytes::from_static(b"tok")),
            nack: Some(nack_reason::NO_ROUTE),
            incoming_face_id: Some(300),
            next_hop_face_id: Some(4),
            cache_policy: Some(1),
            congestion_mark: Some(1),
            acks: vec![1, 2],
            tx_sequence: Some(99),
            non_discovery: true,
            prefix_announcement: None,
            fragment: Some(Bytes::from_static(&[5, 2, 7, 0])),
        };
        let w = p.encode();
        assert_eq!(LpPacket::decode(w).unwrap(), p);
    }

    #[test]
    fn idle_and_unknown_fields() {
        let idle = LpPacket::decode(Bytes::from_static(&[100, 0])).unwrap();
        assert!(idle.is_idle());
        // Unknown ignorable header field 804 (low bits 00).
        let w = Bytes::from_static(&[100, 4, 0xFD, 0x03, 0x24, 0]);
        assert!(LpPacket::decode(w).is_ok());
        // Unknown non-ignorable header field 805.
        let w = Bytes::from_static(&[100, 4, 0xFD, 0x03, 0x25, 0]);
        assert!(LpPacket::decode(w).is_err());
    }
}
