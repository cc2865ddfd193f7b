//! The link service: NDNLPv2 on the way in (IDLE, PitToken, Nack,
//! CongestionMark, NextHopFaceId, fragment reassembly) and on the way out
//! (LpPacket headers only when needed, fragmentation to the MTU).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use granary_packet::types::{DATA, INTEREST, LP_PACKET};
use granary_packet::{Data, Interest, LpPacket};

use crate::reliability::Reliability;
use crate::{LinkFields, NetPacket, OutKind, OutPacket};

/// Why an incoming element was refused.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// Not a packet.
    #[error("{0}")]
    Decode(#[from] granary_packet::Error),
    /// Not an Interest, Data or LpPacket.
    #[error("TLV type {0} is not an Interest, Data or LpPacket")]
    NotAPacket(u64),
    /// Reassembled or fragment fields inconsistent.
    #[error("bad fragment: {0}")]
    Fragment(&'static str),
    /// Larger than the limit.
    #[error("packet of {0} bytes exceeds the limit")]
    TooLarge(usize),
}

struct Partial {
    pieces: Vec<Option<Bytes>>,
    have: usize,
    bytes: usize,
    first: Option<LpPacket>,
    deadline: Instant,
}

/// Reassembles fragmented LpPackets; bounded in slots and time.
pub struct Reassembler {
    partial: HashMap<u64, Partial>,
    slots: usize,
    timeout: Duration,
    max_packet: usize,
}

impl Reassembler {
    /// A reassembler keeping at most `slots` partial packets for `timeout`.
    pub fn new(slots: usize, timeout: Duration, max_packet: usize) -> Self {
        Reassembler {
            partial: HashMap::new(),
            slots: slots.max(1),
            timeout,
            max_packet,
        }
    }

    /// Partial packets held.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }

    fn add(&mut self, p: LpPacket, now: Instant) -> Result<Option<(Bytes, LpPacket)>, LinkError> {
        let count = p.frag_count.unwrap_or(1);
        let index = p.frag_index.unwrap_or(0);
        let seq = p
            .sequence
            .ok_or(LinkError::Fragment("fragment without Sequence"))?;
        if count == 0 || index >= count || count > 256 {
            return Err(LinkError::Fragment("FragIndex/FragCount out of range"));
        }
        let base = seq.wrapping_sub(index);
        self.partial.retain(|_, v| v.deadline > now);
        if !self.partial.contains_key(&base) && self.partial.len() >= self.slots {
            if let Some(oldest) = self
                .partial
                .iter()
                .min_by_key(|(_, v)| v.deadline)
                .map(|(k, _)| *k)
            {
                self.partial.remove(&oldest);
            }
        }
        let timeout = self.timeout;
        let entry = self.partial.entry(base).or_insert_with(|| Partial {
            pieces: vec![None; count as usize],
            have: 0,
            bytes: 0,
            first: None,
            deadline: now + timeout,
        });
        if entry.pieces.len() != count as usize {
            self.partial.remove(&base);
            return Err(LinkError::Fragment("FragCount differs between fragments"));
        }
        let frag = p.fragment.clone().unwrap_or_default();
        let slot = &mut entry.pieces[index as usize];
        if slot.is_none() {
            entry.have += 1;
            entry.bytes += frag.len();
            *slot = Some(frag);
        }
        if index == 0 {
            entry.first = Some(p);
        }
        if entry.bytes > self.max_packet + 64 {
            self.partial.remove(&base);
            return Err(LinkError::TooLarge(self.max_packet + 1));
        }
        if entry.have < entry.pieces.len() {
            return Ok(None);
        }
        let done = self
            .partial
            .remove(&base)
            .ok_or(LinkError::Fragment("lost partial"))?;
        let mut whole = BytesMut::with_capacity(done.bytes);
        for piece in done.pieces.into_iter().flatten() {
            whole.put_slice(&piece);
        }
        Ok(Some((whole.freeze(), done.first.unwrap_or_default())))
    }
}

/// Decodes one received element into a network packet, or `None` for IDLE
/// packets and incomplete fragments.
pub fn decode_incoming(
    frame: Bytes,
    reasm: &mut Reassembler,
    now: Instant,
) -> Result<Option<(NetPacket, LinkFields)>, LinkError> {
    decode(frame, reasm, None, now)
}

/// [`decode_incoming`] on a face with link reliability: Acks in the
/// LpPacket are taken, its TxSequence is acknowledged, and a duplicate
/// frame (a retransmission of one already received) is dropped.
pub fn decode_incoming_reliable(
    frame: Bytes,
    reasm: &mut Reassembler,
    rel: &mut Reliability,
    now: Instant,
) -> Result<Option<(NetPacket, LinkFields)>, LinkError> {
    decode(frame, reasm, Some(rel), now)
}

fn decode(
    frame: Bytes,
    reasm: &mut Reassembler,
    rel: Option<&mut Reliability>,
    now: Instant,
) -> Result<Option<(NetPacket, LinkFields)>, LinkError> {
    let typ = granary_packet::tlv::read_var_number(&frame, 0)?.0;
    let (wire, lp) = match typ {
        INTEREST | DATA => (frame, None),
        LP_PACKET => {
            let p = LpPacket::decode(frame)?;
            if let Some(rel) = rel {
                if !rel.receive(&p, now) {
                    return Ok(None);
                }
            }
            if p.is_idle() {
                return Ok(None);
            }
            if p.frag_count.unwrap_or(1) > 1 {
                match reasm.add(p, now)? {
                    Some((wire, first)) => (wire, Some(first)),
                    None => return Ok(None),
                }
            } else {
                let wire = p.fragment.clone().unwrap_or_default();
                (wire, Some(p))
            }
        }
        t => return Err(LinkError::NotAPacket(t)),
    };
    let link = lp
        .as_ref()
        .map(|p| LinkFields {
            pit_token: p.pit_token.clone(),
            congestion_mark: p.congestion_mark,
            next_hop_face_id: p.next_hop_face_id,
            cache_policy: p.cache_policy,
        })
        .unwrap_or_default();
    let nack = lp.as_ref().and_then(|p| p.nack);
    let inner = granary_packet::tlv::read_var_number(&wire, 0)?.0;
    let packet = match (inner, nack) {
        (INTEREST, Some(reason)) => NetPacket::Nack(Interest::decode(wire)?, reason),
        (INTEREST, None) => NetPacket::Interest(Interest::decode(wire)?),
        (DATA, None) => NetPacket::Data(Data::decode(wire)?),
        (t, _) => return Err(LinkError::NotAPacket(t)),
    };
    Ok(Some((packet, link)))
}

/// Encodes a packet for the wire: bare when no link fields are needed and it
/// fits, otherwise in LpPackets (fragmented to `mtu` when given). `seq` is the
/// face's LpPacket Sequence counter.
pub fn encode_outgoing(p: &OutPacket, mtu: Option<usize>, seq: &mut u64, out: &mut Vec<Bytes>) {
    let nack = match p.kind {
        OutKind::Nack(r) => Some(r),
        _ => None,
    };
    let needs_lp = nack.is_some() || p.pit_token.is_some() || p.congestion_mark.is_some();
    let fits = mtu.is_none_or(|m| p.wire.len() <= m);
    if !needs_lp && fits {
        out.push(p.wire.clone());
        return;
    }
    let mut frames = Vec::new();
    lp_frames(p, mtu, 0, seq, false, &mut frames);
    out.extend(frames.iter().map(LpPacket::encode));
}

/// Splits a packet into LpPackets for a reliable face: always LpPackets
/// (each will carry a TxSequence), each with a Sequence, fragmented so that
/// every frame plus `reserve` bytes of reliability fields fits in `mtu`.
pub fn encode_outgoing_lp(
    p: &OutPacket,
    mtu: usize,
    reserve: usize,
    seq: &mut u64,
    out: &mut Vec<LpPacket>,
) {
    lp_frames(p, Some(mtu), reserve, seq, true, out);
}

fn lp_frames(
    p: &OutPacket,
    mtu: Option<usize>,
    reserve: usize,
    seq: &mut u64,
    always_seq: bool,
    out: &mut Vec<LpPacket>,
) {
    let nack = match p.kind {
        OutKind::Nack(r) => Some(r),
        _ => None,
    };
    let mut head = LpPacket {
        pit_token: p.pit_token.clone(),
        nack,
        congestion_mark: p.congestion_mark,
        ..Default::default()
    };
    let whole = LpPacket {
        fragment: Some(p.wire.clone()),
        ..head.clone()
    };
    match mtu {
        Some(m) if whole.encoded_len() + reserve + if always_seq { 12 } else { 0 } > m => {
            // Room per fragment: MTU less the LpPacket envelope and headers.
            head.sequence = Some(0);
            head.frag_index = Some(0);
            head.frag_count = Some(0xFF);
            let overhead = head.encoded_len() + 8 + reserve;
            let room = m.saturating_sub(overhead).max(64);
            let count = p.wire.len().div_ceil(room) as u64;
            for (i, chunk) in p.wire.chunks(room).enumerate() {
                let mut f = if i == 0 {
                    head.clone()
                } else {
                    LpPacket::default()
                };
                f.sequence = Some(*seq);
                f.frag_index = Some(i as u64);
                f.frag_count = Some(count);
                f.fragment = Some(p.wire.slice_ref(chunk));
                *seq = seq.wrapping_add(1);
                out.push(f);
            }
        }
        _ => {
            let mut whole = whole;
            if always_seq {
                whole.sequence = Some(*seq);
                *seq = seq.wrapping_add(1);
            }
            out.push(whole);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_packet::{DataBuilder, Name};

    fn data(size: usize) -> Data {
        DataBuilder::new(Name::from_uri("/a/b").unwrap())
            .content(vec![7u8; size])
            .encode_with_signature(Bytes::from_static(&[0; 32]))
    }

    #[test]
    fn fragments_reassemble_in_any_order() {
        let d = data(8192);
        let p = OutPacket {
            wire: d.wire().clone(),
            kind: OutKind::Data,
            pit_token: Some(Bytes::from_static(b"tk")),
            congestion_mark: None,
        };
        let mut seq = 1000;
        let mut frags = Vec::new();
        encode_outgoing(&p, Some(1400), &mut seq, &mut frags);
        assert!(
            frags.len() >= 6 && frags.iter().all(|f| f.len() <= 1400),
            "{}",
            frags.len()
        );
        let mut r = Reassembler::new(4, Duration::from_secs(1), 8800);
        let now = Instant::now();
        let mut got = None;
        for f in frags.iter().rev() {
            if let Some(x) = decode_incoming(f.clone(), &mut r, now).unwrap() {
                got = Some(x);
            }
        }
        let (pkt, link) = got.expect("reassembled");
        match pkt {
            NetPacket::Data(x) => assert_eq!(x.wire(), d.wire()),
            _ => panic!("not data"),
        }
        assert_eq!(link.pit_token.unwrap().as_ref(), b"tk");
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn reliable_frames_fit_the_mtu_and_reassemble_once() {
        use crate::reliability::{Reliability, ReliabilityConfig};
        let now = Instant::now();
        for size in [10, 1200, 1300, 1350, 1400, 8192] {
            let d = data(size);
            let p = OutPacket {
                wire: d.wire().clone(),
                kind: OutKind::Data,
                pit_token: Some(Bytes::from_static(b"tk")),
                congestion_mark: None,
            };
            let mut tx = Reliability::new(ReliabilityConfig::default(), true, 7);
            let mut rx = Reliability::new(ReliabilityConfig::default(), true, 9);
            // Acks waiting on the sender: they ride only where there is room.
            for t in 0..300 {
                tx.receive(
                    &LpPacket {
                        tx_sequence: Some(t),
                        fragment: Some(Bytes::from_static(b"x")),
                        ..Default::default()
                    },
                    now,
                );
            }
            let mut lps = Vec::new();
            encode_outgoing_lp(&p, 1400, tx.reserve(), &mut 100, &mut lps);
            let frames: Vec<Bytes> = lps.into_iter().map(|f| tx.send(f, 1400, now)).collect();
            let mut r = Reassembler::new(4, Duration::from_secs(1), 8800);
            let mut got = Vec::new();
            // Every frame twice: duplicates never reach the network layer.
            for f in frames.iter().chain(frames.iter()) {
                assert!(f.len() <= 1400, "{size}: frame of {}", f.len());
                let lp = LpPacket::decode(f.clone()).unwrap();
                assert!(lp.tx_sequence.is_some() && lp.sequence.is_some());
                if let Some((pkt, link)) =
                    decode_incoming_reliable(f.clone(), &mut r, &mut rx, now).unwrap()
                {
                    assert_eq!(link.pit_token.as_deref(), Some(&b"tk"[..]));
                    got.push(pkt);
                }
            }
            assert_eq!(got.len(), 1, "{size}");
            match &got[0] {
                NetPacket::Data(x) => assert_eq!(x.wire(), d.wire()),
                _ => panic!("not data"),
            }
            assert_eq!(rx.stats.duplicates, frames.len() as u64);
            assert_eq!(rx.pending_acks(), 2 * frames.len());
        }
    }

    #[test]
    fn bare_when_possible_and_idle_ignored() {
        let d = data(10);
        let p = OutPacket {
            wire: d.wire().clone(),
            kind: OutKind::Data,
            pit_token: None,
            congestion_mark: None,
        };
        let mut out = Vec::new();
        encode_outgoing(&p, None, &mut 0, &mut out);
        assert_eq!(out, vec![d.wire().clone()]);
        let mut r = Reassembler::new(4, Duration::from_secs(1), 8800);
        assert!(
            decode_incoming(Bytes::from_static(&[100, 0]), &mut r, Instant::now())
                .unwrap()
                .is_none()
        );
        assert!(decode_incoming(Bytes::from_static(&[7, 0]), &mut r, Instant::now()).is_err());
    }

    #[test]
    fn reassembly_is_bounded_and_expires() {
        let mut r = Reassembler::new(2, Duration::from_millis(10), 8800);
        let now = Instant::now();
        for s in 0..10u64 {
            let f = LpPacket {
                sequence: Some(s * 10),
                frag_index: Some(0),
                frag_count: Some(3),
                fragment: Some(Bytes::from_static(b"x")),
                ..Default::default()
            };
            assert!(decode_incoming(f.encode(), &mut r, now).unwrap().is_none());
            assert!(r.pending() <= 2);
        }
        let f = LpPacket {
            sequence: Some(999),
            frag_index: Some(0),
            frag_count: Some(3),
            fragment: Some(Bytes::from_static(b"x")),
            ..Default::default()
        };
        decode_incoming(f.encode(), &mut r, now + Duration::from_secs(1)).unwrap();
        assert_eq!(r.pending(), 1, "expired partials dropped");
    }
}
