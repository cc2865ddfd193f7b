//! NDNLPv2 link reliability (NFD's "LpReliability") for datagram faces.
//!
//! Sender: every LpPacket (fragment) sent on a reliable face carries a
//! TxSequence and is kept, without its piggybacked Acks, in a bounded buffer
//! until the peer acknowledges it. A frame is lost when `loss_threshold`
//! frames sent after it have been acknowledged (the peer is a FIFO link, so
//! later Acks overtaking a frame mean it is gone), or when it has waited for
//! its Ack longer than the link's RTO (RFC 6298 over Ack round trips, Karn's
//! rule). A lost frame is sent again with the same TxSequence, at most
//! `max_retx` times; then it is given up (the network layer recovers, e.g. the
//! consumer retransmits its Interest). Frames are only retransmitted to a peer
//! that has acknowledged something: a peer that ignores TxSequence (python-ndn,
//! NDNts, an NFD face without reliability) never sees duplicates.
//!
//! Receiver (always on): every received TxSequence is acknowledged, on
//! LpPackets going the other way when there are any (as many Acks as fit in
//! the MTU) or else in an IDLE LpPacket after `idle_ack_delay`; a frame whose
//! TxSequence was recently seen is a retransmission of a frame that arrived
//! (its Ack was lost): it is acknowledged again and dropped, so the network
//! layer never sees a duplicate.
//!
//! Everything is bounded: unacknowledged frames (`max_unacked`, the oldest is
//! given up), Acks waiting (`max_pending_acks`, the oldest are dropped: the
//! sender's RTO covers them), and the duplicate-detection history
//! (`recent_window` TxSequences). The state machine has no clock or socket
//! of its own: the UDP face calls it with `now` and sends what it returns.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use granary_packet::LpPacket;

/// Frames kept for a peer that has not acknowledged anything yet.
const NO_ACK_CAP: usize = 256;

/// Pending Acks that make the face's sender worth waking at once.
const WAKE_ACKS: usize = 100;

/// Size of one Ack or TxSequence field on the wire (3-byte type, 1-byte
/// length, 8-byte value).
pub const FIELD_LEN: usize = 12;

/// Link reliability parameters.
#[derive(Debug, Clone)]
pub struct ReliabilityConfig {
    /// Frames acknowledged after a frame that make it lost (NFD: 3).
    pub loss_threshold: u32,
    /// Retransmissions of a frame before it is given up (NFD: 3).
    pub max_retx: u32,
    /// Unacknowledged frames kept; beyond, the oldest is given up.
    pub max_unacked: usize,
    /// Delay before pending Acks go out in an IDLE packet (NFD: 5 ms).
    pub idle_ack_delay: Duration,
    /// Acks kept waiting for a packet to ride on; the oldest are dropped.
    pub max_pending_acks: usize,
    /// TxSequences remembered for duplicate detection.
    pub recent_window: usize,
    /// RTO before the first Ack round trip is measured.
    pub initial_rto: Duration,
    /// Smallest RTO.
    pub min_rto: Duration,
    /// Largest RTO.
    pub max_rto: Duration,
}

impl Default for ReliabilityConfig {
    fn default() -> Self {
        ReliabilityConfig {
            loss_threshold: 3,
            max_retx: 3,
            max_unacked: 16_384,
            idle_ack_delay: Duration::from_millis(5),
            max_pending_acks: 4096,
            recent_window: 65_536,
            initial_rto: Duration::from_millis(300),
            min_rto: Duration::from_millis(60),
            max_rto: Duration::from_secs(2),
        }
    }
}

/// Counters of the reliability layer.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReliabilityStats {
    /// Frames sent with a TxSequence (first transmissions).
    pub frames: u64,
    /// Frames sent again.
    pub retransmitted: u64,
    /// Frames given up (retry limit, buffer full, or a peer that never acks).
    pub given_up: u64,
    /// Frames acknowledged by the peer.
    pub acked: u64,
    /// Acks sent (piggybacked or in IDLE packets).
    pub acks_sent: u64,
    /// Received frames dropped as duplicates.
    pub duplicates: u64,
}

struct Frame {
    /// The frame without Acks; its TxSequence is set.
    packet: LpPacket,
    sent: Instant,
    /// Position in send order (key of `order`); `None` while queued for
    /// retransmission.
    order: Option<u64>,
    /// Frames sent after this one that have been acknowledged.
    later: u32,
    retx: u32,
}

/// The reliability state of one face (both directions).
pub struct Reliability {
    cfg: ReliabilityConfig,
    /// Sender side on: frames get TxSequences and are retransmitted.
    enabled: bool,
    /// The peer has acknowledged at least one frame.
    peer_acks: bool,
    next_tx: u64,
    next_order: u64,
    unacked: HashMap<u64, Frame>,
    /// Send order → TxSequence of frames waiting for their Ack.
    order: BTreeMap<u64, u64>,
    retransmit: VecDeque<u64>,
    srtt: Option<f64>,
    rttvar: f64,
    rto: f64,
    /// When the peer last acknowledged a frame we were waiting for.
    last_ack: Option<Instant>,
    pending_acks: VecDeque<u64>,
    first_pending: Option<Instant>,
    recent: HashSet<u64>,
    recent_order: VecDeque<u64>,
    /// Counters.
    pub stats: ReliabilityStats,
}

impl Reliability {
    /// A reliability state; `enabled` turns the sender side on (the
    /// receiver side, acknowledging TxSequences, is always on). `first_tx`
    /// is the first TxSequence (random per face in practice).
    pub fn new(cfg: ReliabilityConfig, enabled: bool, first_tx: u64) -> Self {
        let rto = cfg.initial_rto.as_secs_f64();
        Reliability {
            cfg,
            enabled,
            peer_acks: false,
            next_tx: first_tx,
            next_order: 0,
            unacked: HashMap::new(),
            order: BTreeMap::new(),
            retransmit: VecDeque::new(),
            srtt: None,
            rttvar: 0.0,
            rto,
            last_ack: None,
            pending_acks: VecDeque::new(),
            first_pending: None,
            recent: HashSet::new(),
            recent_order: VecDeque::new(),
            stats: ReliabilityStats::default(),
        }
    }

    /// Turns the sender side on or off for frames sent from now on.
    pub fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
    }

    /// True when outgoing frames carry TxSequences.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Frames waiting for an Ack (including those queued for retransmission).
    pub fn unacked(&self) -> usize {
        self.unacked.len()
    }

    /// Acks waiting to be sent.
    pub fn pending_acks(&self) -> usize {
        self.pending_acks.len()
    }

    /// The current link RTO.
    pub fn rto(&self) -> Duration {
        Duration::from_secs_f64(self.rto)
    }

    /// Bytes an outgoing frame must leave free for the reliability fields
    /// (its TxSequence) when fragmenting.
    pub fn reserve(&self) -> usize {
        if self.enabled {
            FIELD_LEN
        } else {
            0
        }
    }

    /// Prepares a new outgoing LpPacket for the wire: assigns a TxSequence
    /// and keeps it for retransmission (sender side on), piggybacks as many
    /// pending Acks as fit in `mtu`, and encodes it.
    pub fn send(&mut self, mut packet: LpPacket, mtu: usize, now: Instant) -> Bytes {
        if self.enabled {
            let tx = self.next_tx;
            self.next_tx = self.next_tx.wrapping_add(1);
            packet.tx_sequence = Some(tx);
            packet.acks.clear();
            // A peer that has never acknowledged anything may ignore
            // TxSequence altogether: keep only a few frames for it.
            let cap = if self.peer_acks {
                self.cfg.max_unacked
            } else {
                self.cfg.max_unacked.min(NO_ACK_CAP)
            };
            while self.unacked.len() >= cap {
                let Some((_, oldest)) = self.order.pop_first() else {
                    break;
                };
                self.unacked.remove(&oldest);
                self.stats.given_up += 1;
            }
            let order = self.next_order;
            self.next_order += 1;
            self.order.insert(order, tx);
            self.unacked.insert(
                tx,
                Frame {
                    packet: packet.clone(),
                    sent: now,
                    order: Some(order),
                    later: 0,
                    retx: 0,
                },
            );
            self.stats.frames += 1;
        }
        self.piggyback(&mut packet, mtu);
        packet.encode()
    }

    fn piggyback(&mut self, packet: &mut LpPacket, mtu: usize) {
        if self.pending_acks.is_empty() {
            return;
        }
        let room = mtu.saturating_sub(packet.encoded_len() + 4) / FIELD_LEN;
        let n = room.min(self.pending_acks.len());
        packet.acks.extend(self.pending_acks.drain(..n));
        self.stats.acks_sent += n as u64;
        if self.pending_acks.is_empty() {
            self.first_pending = None;
        }
    }

    /// The next frame to send again, encoded with fresh Acks, or `None`.
    pub fn retransmission(&mut self, mtu: usize, now: Instant) -> Option<Bytes> {
        while let Some(tx) = self.retransmit.pop_front() {
            let Some(f) = self.unacked.get_mut(&tx) else {
                continue;
            };
            if f.order.is_some() {
                continue;
            }
            let order = self.next_order;
            self.next_order += 1;
            f.order = Some(order);
            f.sent = now;
            f.later = 0;
            f.retx += 1;
            self.order.insert(order, tx);
            let mut p = f.packet.clone();
            self.stats.retransmitted += 1;
            self.piggyback(&mut p, mtu);
            return Some(p.encode());
        }
        None
    }

    /// Pending Acks in an IDLE LpPacket when they have waited long enough
    /// (or fill a packet), else `None`. Call until `None`.
    pub fn idle_acks(&mut self, mtu: usize, now: Instant) -> Option<Bytes> {
        let first = self.first_pending?;
        let per_packet = (mtu.saturating_sub(8) / FIELD_LEN).max(1);
        if now < first + self.cfg.idle_ack_delay && self.pending_acks.len() < per_packet {
            return None;
        }
        let mut p = LpPacket::default();
        self.piggyback(&mut p, mtu);
        Some(p.encode())
    }

    /// A received LpPacket: takes its Acks, and queues an Ack for its
    /// TxSequence. Returns false when the packet is a duplicate (already
    /// received) and must be dropped.
    pub fn receive(&mut self, packet: &LpPacket, now: Instant) -> bool {
        for &a in &packet.acks {
            self.on_ack(a, now);
        }
        let Some(tx) = packet.tx_sequence else {
            return true;
        };
        if self.pending_acks.len() >= self.cfg.max_pending_acks {
            self.pending_acks.pop_front();
        }
        self.pending_acks.push_back(tx);
        self.first_pending.get_or_insert(now);
        if self.recent.contains(&tx) {
            self.stats.duplicates += 1;
            return false;
        }
        if self.recent_order.len() >= self.cfg.recent_window {
            if let Some(old) = self.recent_order.pop_front() {
                self.recent.remove(&old);
            }
        }
        self.recent.insert(tx);
        self.recent_order.push_back(tx);
        true
    }

    fn on_ack(&mut self, tx: u64, now: Instant) {
        self.peer_acks = true;
        let Some(f) = self.unacked.remove(&tx) else {
            return;
        };
        self.stats.acked += 1;
        self.last_ack = Some(now);
        let Some(order) = f.order else {
            // Acked while queued for retransmission: no longer needed.
            return;
        };
        self.order.remove(&order);
        if f.retx == 0 {
            self.rtt_sample(now.saturating_duration_since(f.sent).as_secs_f64());
        }
        let mut lost = Vec::new();
        for (&o, &t) in self.order.range(..order) {
            if let Some(g) = self.unacked.get_mut(&t) {
                g.later += 1;
                if g.later >= self.cfg.loss_threshold {
                    lost.push((o, t));
                }
            }
        }
        for (o, t) in lost {
            self.lose(o, t);
        }
    }

    fn rtt_sample(&mut self, r: f64) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r).abs();
                self.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
        let s = self.srtt.unwrap_or(r);
        self.rto = (s + 4.0 * self.rttvar + self.cfg.idle_ack_delay.as_secs_f64()).clamp(
            self.cfg.min_rto.as_secs_f64(),
            self.cfg.max_rto.as_secs_f64(),
        );
    }

    /// Frame `t` (at send position `o`) is lost: queue it for
    /// retransmission, or give it up.
    fn lose(&mut self, o: u64, t: u64) {
        self.order.remove(&o);
        let give_up = match self.unacked.get_mut(&t) {
            Some(f) if self.peer_acks && f.retx < self.cfg.max_retx => {
                f.order = None;
                self.retransmit.push_back(t);
                false
            }
            Some(_) => true,
            None => false,
        };
        if give_up {
            self.unacked.remove(&t);
            self.stats.given_up += 1;
        }
    }

    /// Frames whose Ack is overdue are lost: as TCP's retransmission timer,
    /// the RTO runs from a frame's transmission or from the last Ack of a
    /// frame, whichever is later, so it only fires when Acks stop coming
    /// (losses within a flow are found by later Acks). The RTO then doubles (up to the maximum) until an Ack of a frame sent once
    /// gives a new sample: a sudden rise of the link's delay (a queue
    /// filling) must not make every frame in flight "lost" and sent again
    /// and again (Karn's rule leaves no sample to learn from then).
    pub fn check_timeouts(&mut self, now: Instant) {
        let rto = self.rto();
        let mut lost = Vec::new();
        for (&o, &t) in &self.order {
            match self.unacked.get(&t) {
                Some(f) if self.timer_base(f.sent) + rto <= now => lost.push((o, t)),
                Some(_) => break,
                None => lost.push((o, t)),
            }
        }
        if !lost.is_empty() {
            self.rto = (self.rto * 2.0).min(self.cfg.max_rto.as_secs_f64());
        }
        for (o, t) in lost {
            self.lose(o, t);
        }
    }

    fn timer_base(&self, sent: Instant) -> Instant {
        self.last_ack.map_or(sent, |a| a.max(sent))
    }

    /// True when the face's sending task should be woken after a receive:
    /// a frame to send again, the first pending Ack (to arm the idle-Ack
    /// timer), or enough Acks for an IDLE packet of their own.
    pub fn wants_service(&self) -> bool {
        !self.retransmit.is_empty()
            || self.pending_acks.len() == 1
            || self.pending_acks.len() >= WAKE_ACKS
    }

    /// True when something is ready to send now (a retransmission).
    pub fn has_retransmissions(&self) -> bool {
        !self.retransmit.is_empty()
    }

    /// When the face should next call [`check_timeouts`](Self::check_timeouts)
    /// and [`idle_acks`](Self::idle_acks).
    pub fn next_deadline(&self) -> Option<Instant> {
        let ack = self.first_pending.map(|t| t + self.cfg.idle_ack_delay);
        let rto = self.order.first_key_value().and_then(|(_, t)| {
            self.unacked
                .get(t)
                .map(|f| self.timer_base(f.sent) + Duration::from_secs_f64(self.rto))
        });
        match (ack, rto) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: usize = 1400;

    fn frag(n: u8) -> LpPacket {
        LpPacket {
            sequence: Some(n as u64),
            fragment: Some(Bytes::from(vec![n; 100])),
            ..Default::default()
        }
    }

    fn pair() -> (Reliability, Reliability) {
        (
            Reliability::new(ReliabilityConfig::default(), true, 1000),
            Reliability::new(ReliabilityConfig::default(), true, 5000),
        )
    }

    /// Delivers `wire` to `to`; returns the fragment byte if delivered.
    fn deliver(to: &mut Reliability, wire: &Bytes, now: Instant) -> Option<u8> {
        let p = LpPacket::decode(wire.clone()).unwrap();
        if to.receive(&p, now) {
            p.fragment.map(|f| f[0])
        } else {
            None
        }
    }

    #[test]
    fn every_frame_gets_a_tx_sequence_and_is_acked() {
        let (mut a, mut b) = pair();
        let now = Instant::now();
        let mut got = vec![];
        for i in 0..5 {
            let w = a.send(frag(i), MTU, now);
            assert!(w.len() <= MTU);
            let p = LpPacket::decode(w.clone()).unwrap();
            assert_eq!(p.tx_sequence, Some(1000 + i as u64));
            got.extend(deliver(&mut b, &w, now));
        }
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert_eq!((a.unacked(), b.pending_acks()), (5, 5));
        // No traffic back: the Acks wait for the idle delay, then go in IDLE.
        assert!(b.idle_acks(MTU, now).is_none());
        let later = now + Duration::from_millis(5);
        let idle = b.idle_acks(MTU, later).expect("idle ack");
        assert!(LpPacket::decode(idle.clone()).unwrap().is_idle());
        assert!(b.idle_acks(MTU, later).is_none());
        assert_eq!(deliver(&mut a, &idle, later), None);
        assert_eq!(a.unacked(), 0);
        assert_eq!(a.stats.acked, 5);
        assert_eq!(a.stats.retransmitted, 0);
        // The RTT sample (5 ms) sets the RTO: srtt + 4 rttvar + 5 ms, at
        // least the minimum.
        assert_eq!(a.rto(), Duration::from_millis(60));
    }

    #[test]
    fn acks_piggyback_on_traffic_the_other_way() {
        let (mut a, mut b) = pair();
        let now = Instant::now();
        for i in 0..3 {
            let w = a.send(frag(i), MTU, now);
            deliver(&mut b, &w, now);
        }
        let back = b.send(frag(9), MTU, now);
        let p = LpPacket::decode(back.clone()).unwrap();
        assert_eq!(p.acks, vec![1000, 1001, 1002]);
        assert_eq!(b.pending_acks(), 0);
        assert!(
            b.next_deadline().is_some(),
            "b's own frame waits for its ack"
        );
        assert_eq!(deliver(&mut a, &back, now), Some(9));
        assert_eq!(a.unacked(), 0);
    }

    #[test]
    fn a_loss_is_repaired_after_three_later_acks() {
        let (mut a, mut b) = pair();
        let now = Instant::now();
        // Establish that b acks (a retransmits only to a peer that acks).
        let w = a.send(frag(0), MTU, now);
        deliver(&mut b, &w, now);
        let ack = b.idle_acks(MTU, now + Duration::from_millis(5)).unwrap();
        deliver(&mut a, &ack, now);
        let lost = a.send(frag(1), MTU, now);
        let mut acks = vec![];
        for i in 2..5 {
            let w = a.send(frag(i), MTU, now);
            deliver(&mut b, &w, now);
            acks.push(b.send(frag(100 + i), MTU, now));
        }
        // Two later acks: not yet lost (could be reordering).
        deliver(&mut a, &acks[0], now);
        deliver(&mut a, &acks[1], now);
        assert!(!a.has_retransmissions());
        deliver(&mut a, &acks[2], now);
        assert!(a.has_retransmissions());
        let again = a.retransmission(MTU, now).unwrap();
        let p = LpPacket::decode(again.clone()).unwrap();
        let orig = LpPacket::decode(lost).unwrap();
        assert_eq!(p.tx_sequence, orig.tx_sequence, "same TxSequence");
        assert_eq!(p.fragment, orig.fragment);
        assert_eq!(deliver(&mut b, &again, now), Some(1));
        assert_eq!(a.stats.retransmitted, 1);
        assert!(a.retransmission(MTU, now).is_none());
    }

    #[test]
    fn a_lost_ack_makes_a_duplicate_that_is_dropped_and_acked_again() {
        let (mut a, mut b) = pair();
        let t0 = Instant::now();
        let w = a.send(frag(0), MTU, t0);
        assert_eq!(deliver(&mut b, &w, t0), Some(0));
        let _lost_ack = b.idle_acks(MTU, t0 + Duration::from_millis(5)).unwrap();
        // a never hears back: its RTO (initial 300 ms) fires, but a peer that
        // never acked gets no retransmission; a later ack makes it eligible.
        let w1 = a.send(frag(1), MTU, t0);
        deliver(&mut b, &w1, t0);
        let ack1 = b.idle_acks(MTU, t0 + Duration::from_millis(5)).unwrap();
        deliver(&mut a, &ack1, t0 + Duration::from_millis(6));
        assert_eq!(a.unacked(), 1, "frame 0 still waits");
        let late = t0 + Duration::from_millis(400);
        a.check_timeouts(late);
        let again = a.retransmission(MTU, late).expect("retransmitted on RTO");
        assert_eq!(deliver(&mut b, &again, late), None, "duplicate dropped");
        assert_eq!(b.stats.duplicates, 1);
        let ack = b.idle_acks(MTU, late + Duration::from_millis(5)).unwrap();
        deliver(&mut a, &ack, late);
        assert_eq!(a.unacked(), 0);
    }

    #[test]
    fn reordered_frames_are_delivered_once() {
        let (mut a, mut b) = pair();
        let now = Instant::now();
        let ws: Vec<Bytes> = (0..4).map(|i| a.send(frag(i), MTU, now)).collect();
        let mut got = vec![];
        for i in [2, 0, 3, 1, 2, 0] {
            got.extend(deliver(&mut b, &ws[i], now));
        }
        assert_eq!(got, vec![2, 0, 3, 1]);
        assert_eq!(b.stats.duplicates, 2);
        assert_eq!(b.pending_acks(), 6, "duplicates are acked again");
    }

    #[test]
    fn retry_limit_gives_up() {
        let (mut a, mut b) = pair();
        let mut now = Instant::now();
        let w = a.send(frag(0), MTU, now);
        deliver(&mut b, &w, now);
        let ack = b.idle_acks(MTU, now + Duration::from_millis(5)).unwrap();
        deliver(&mut a, &ack, now + Duration::from_millis(5));
        a.send(frag(1), MTU, now); // never delivered
        let mut sent = 0;
        for _ in 0..10 {
            now += Duration::from_secs(3);
            a.check_timeouts(now);
            while a.retransmission(MTU, now).is_some() {
                sent += 1;
            }
        }
        assert_eq!(sent, 3, "max_retx retransmissions");
        assert_eq!(a.stats.given_up, 1);
        assert_eq!(a.unacked(), 0);
        assert!(a.next_deadline().is_none());
    }

    #[test]
    fn rto_backs_off_until_a_new_sample() {
        let (mut a, mut b) = pair();
        let t0 = Instant::now();
        let w = a.send(frag(0), MTU, t0);
        deliver(&mut b, &w, t0);
        let ack = b.idle_acks(MTU, t0 + Duration::from_millis(5)).unwrap();
        deliver(&mut a, &ack, t0 + Duration::from_millis(5));
        assert_eq!(a.rto(), Duration::from_millis(60));
        // The link's delay rises: frames in flight are not acked within the
        // RTO. One timeout round doubles it, so the retransmissions are not
        // themselves declared lost at the old RTO.
        let t1 = t0 + Duration::from_millis(10);
        for i in 1..4 {
            a.send(frag(i), MTU, t1);
        }
        let t2 = t1 + Duration::from_millis(61);
        a.check_timeouts(t2);
        assert_eq!(a.rto(), Duration::from_millis(120));
        let mut n = 0;
        while a.retransmission(MTU, t2).is_some() {
            n += 1;
        }
        assert_eq!(n, 3);
        a.check_timeouts(t2 + Duration::from_millis(100));
        assert!(!a.has_retransmissions(), "not lost again before 120 ms");
        // A fresh sample (a frame sent once) brings the RTO back.
        let t3 = t2 + Duration::from_millis(110);
        let w = a.send(frag(9), MTU, t3);
        deliver(&mut b, &w, t3);
        let ack = b.idle_acks(MTU, t3 + Duration::from_millis(5)).unwrap();
        deliver(&mut a, &ack, t3 + Duration::from_millis(5));
        assert_eq!(a.rto(), Duration::from_millis(60));
    }

    #[test]
    fn bounded_buffers() {
        let cfg = ReliabilityConfig {
            max_unacked: 8,
            max_pending_acks: 4,
            recent_window: 16,
            ..Default::default()
        };
        let mut a = Reliability::new(cfg.clone(), true, 0);
        let mut b = Reliability::new(cfg, true, 0);
        let now = Instant::now();
        for i in 0..100u8 {
            let w = a.send(frag(i), MTU, now);
            deliver(&mut b, &w, now);
        }
        assert_eq!(a.unacked(), 8);
        assert_eq!(a.stats.given_up, 92);
        assert_eq!(b.pending_acks(), 4);
        assert!(b.recent.len() <= 16 && b.recent_order.len() <= 16);
        // A peer that never acknowledges (it ignores TxSequence) gets only a
        // few frames kept, and never a retransmission.
        let mut d = Reliability::new(ReliabilityConfig::default(), true, 0);
        for i in 0..1000u32 {
            d.send(frag(i as u8), MTU, now);
        }
        assert_eq!(d.unacked(), NO_ACK_CAP);
        d.check_timeouts(now + Duration::from_secs(5));
        assert!(d.retransmission(MTU, now).is_none());
        assert_eq!(d.unacked(), 0);
        // A full IDLE packet's worth never exceeds the MTU.
        let mut c = Reliability::new(ReliabilityConfig::default(), false, 0);
        for t in 0..1000 {
            let p = LpPacket {
                tx_sequence: Some(t),
                fragment: Some(Bytes::from_static(b"x")),
                ..Default::default()
            };
            c.receive(&p, now);
        }
        let mut n = 0;
        while let Some(w) = c.idle_acks(MTU, now) {
            assert!(w.len() <= MTU, "{}", w.len());
            n += LpPacket::decode(w).unwrap().acks.len();
        }
        assert!(n >= 1000 - 115 && c.pending_acks() < 115, "{n}");
    }

    #[test]
    fn sender_side_off_sends_no_tx_sequence_but_still_acks() {
        let mut a = Reliability::new(ReliabilityConfig::default(), false, 0);
        let now = Instant::now();
        let w = a.send(frag(1), MTU, now);
        let p = LpPacket::decode(w).unwrap();
        assert_eq!(p.tx_sequence, None);
        assert_eq!(a.unacked(), 0);
        assert_eq!(a.reserve(), 0);
        let incoming = LpPacket {
            tx_sequence: Some(42),
            fragment: Some(Bytes::from_static(b"x")),
            ..Default::default()
        };
        assert!(a.receive(&incoming, now));
        let back = a.send(frag(2), MTU, now);
        assert_eq!(LpPacket::decode(back).unwrap().acks, vec![42]);
    }
}
