//! # granary-face
//!
//! Faces: the forwarder's links. Unix stream and TCP faces frame TLVs out of a
//! byte stream; UDP faces carry one packet per datagram with NDNLPv2
//! fragmentation and reassembly; in-process faces connect components of the
//! daemon without a socket. Every face decodes what it receives on its own
//! task (so decoding runs on all cores), hands whole network-layer packets to
//! the forwarder — a batch per read through the forwarder's [`PacketSink`]
//! once the forwarder knows the face, else through one bounded channel — and
//! drains a bounded send queue of its own, writing many packets per system
//! call (`writev` of the packets' own buffers on stream faces).
//!
//! A face that sends garbage or oversized packets is closed (stream faces
//! cannot resynchronise) or has the datagram dropped (UDP); nothing else is
//! disturbed. Queues are bounded: a slow consumer loses packets (counted), it
//! does not grow memory.
//!
//! Depends only on `granary-packet`. Knows nothing of PIT, FIB or CS.
#![deny(unsafe_code)]

pub mod accept;
pub mod framing;
pub mod internal;
pub mod link;
pub mod reliability;
pub mod stream;
mod sys;
pub mod udp;
pub mod ws;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use granary_packet::{Data, Interest};
use tokio::sync::mpsc;

/// Face identifier. 0 is invalid; 1 is reserved for the management face.
pub type FaceId = u64;

/// Where a face leads: local faces may carry `/localhost` traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Same host (Unix sockets, in-process faces).
    Local,
    /// Another host (TCP, UDP).
    NonLocal,
}

/// NFD FacePersistency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistency {
    /// Created on accept; closed when idle or on error.
    OnDemand = 0,
    /// Created by command; closed on error.
    Persistent = 1,
    /// Kept up.
    Permanent = 2,
}

/// Static facts about a face.
#[derive(Debug, Clone)]
pub struct FaceInfo {
    /// Face id.
    pub id: FaceId,
    /// Remote URI (`unix:///…`, `tcp4://1.2.3.4:6363`, `udp4://…`, `internal://…`).
    pub remote_uri: String,
    /// Local URI.
    pub local_uri: String,
    /// Scope.
    pub scope: Scope,
    /// Persistency.
    pub persistency: Persistency,
    /// MTU for datagram faces (packets above it are fragmented); `None` for streams.
    pub mtu: Option<usize>,
    /// The user id of the process at the other end of an accepted Unix
    /// socket (`SO_PEERCRED`), so that commands acting with the node's
    /// rights can be kept to its own user; `None` for every other face.
    pub peer_uid: Option<u32>,
}

/// Default BaseCongestionMarkingInterval (NFD's): 100 ms.
pub const DEFAULT_MARKING_INTERVAL_NS: u64 = 100_000_000;
/// Default DefaultCongestionThreshold (NFD's): 64 KiB queued.
pub const DEFAULT_MARKING_THRESHOLD: u64 = 65_536;

/// Traffic counters, shared between a face's tasks and the forwarder.
#[derive(Debug, Default)]
pub struct Counters {
    /// Congestion marking on the send queue (CongestionMarkingEnabled; on
    /// by default for stream faces, as NFD's local faces).
    pub marking: AtomicBool,
    /// BaseCongestionMarkingInterval in ns (0: [`DEFAULT_MARKING_INTERVAL_NS`]).
    pub marking_interval_ns: AtomicU64,
    /// DefaultCongestionThreshold in bytes (0: [`DEFAULT_MARKING_THRESHOLD`]).
    pub marking_threshold: AtomicU64,
    /// Bytes waiting in the send queue (counted while marking is on; the
    /// stream writer or the in-process application drains it).
    pub queued_bytes: AtomicU64,
    /// The kernel's send queue in bytes when the stream writer last read it
    /// (once per write batch; while marking is on).
    pub kernel_queued: AtomicU64,
    /// Interests received.
    pub in_interests: AtomicU64,
    /// Data received.
    pub in_data: AtomicU64,
    /// Nacks received.
    pub in_nacks: AtomicU64,
    /// Interests sent.
    pub out_interests: AtomicU64,
    /// Data sent.
    pub out_data: AtomicU64,
    /// Nacks sent.
    pub out_nacks: AtomicU64,
    /// Bytes received.
    pub in_bytes: AtomicU64,
    /// Bytes sent.
    pub out_bytes: AtomicU64,
    /// Packets dropped because the send queue was full.
    pub out_dropped: AtomicU64,
    /// Malformed packets received.
    pub in_errors: AtomicU64,
    /// Packets sent with a congestion mark.
    pub out_marked: AtomicU64,
    /// Link reliability is on for this face (LpReliabilityEnabled).
    pub lp_reliable: AtomicBool,
    /// Link reliability: frames sent with a TxSequence.
    pub lp_frames: AtomicU64,
    /// Link reliability: frames retransmitted.
    pub lp_retransmitted: AtomicU64,
    /// Link reliability: frames given up (retry limit or buffer full).
    pub lp_given_up: AtomicU64,
    /// Link reliability: frames acknowledged by the peer.
    pub lp_acked: AtomicU64,
    /// Link reliability: duplicate frames received and dropped.
    pub lp_duplicates: AtomicU64,
}

impl Counters {
    /// Adds one to a counter.
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    /// Adds `n` to a counter.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
    /// Reads a counter.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    /// The face's marking interval and threshold: its own when set, else
    /// `default_interval` and [`DEFAULT_MARKING_THRESHOLD`].
    pub fn marking_settings(
        &self,
        default_interval: std::time::Duration,
    ) -> (std::time::Duration, u64) {
        let interval = match self.marking_interval_ns.load(Ordering::Relaxed) {
            0 => default_interval,
            ns => std::time::Duration::from_nanos(ns),
        };
        let threshold = match self.marking_threshold.load(Ordering::Relaxed) {
            0 => DEFAULT_MARKING_THRESHOLD,
            b => b,
        };
        (interval, threshold)
    }
    /// Copies the link reliability counters.
    pub fn set_link(&self, s: &reliability::ReliabilityStats) {
        self.lp_frames.store(s.frames, Ordering::Relaxed);
        self.lp_retransmitted
            .store(s.retransmitted, Ordering::Relaxed);
        self.lp_given_up.store(s.given_up, Ordering::Relaxed);
        self.lp_acked.store(s.acked, Ordering::Relaxed);
        self.lp_duplicates.store(s.duplicates, Ordering::Relaxed);
    }
}

/// A network-layer packet as it arrived, with its link-layer fields.
#[derive(Debug, Clone)]
pub enum NetPacket {
    /// An Interest.
    Interest(Interest),
    /// A Data.
    Data(Data),
    /// A Nack: the Interest it refers to and the reason.
    Nack(Interest, u64),
}

/// Link-layer fields that travel with a packet.
#[derive(Debug, Clone, Default)]
pub struct LinkFields {
    /// PitToken, echoed on the reply.
    pub pit_token: Option<Bytes>,
    /// CongestionMark.
    pub congestion_mark: Option<u64>,
    /// NextHopFaceId (honoured from local faces only).
    pub next_hop_face_id: Option<u64>,
    /// CachePolicyType of a Data ([`CACHE_POLICY_NO_CACHE`]: do not put it
    /// in the content store; honoured from local faces only, as NFD does).
    pub cache_policy: Option<u64>,
}

/// NDNLPv2 CachePolicyType NoCache.
pub const CACHE_POLICY_NO_CACHE: u64 = 1;

/// What faces tell the forwarder.
// Packets are the common case; boxing them would cost an allocation each.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum FaceEvent {
    /// A new face (accepted connection, new UDP endpoint, created by command).
    Created(FaceHandle),
    /// A packet arrived on `face`.
    Packet {
        /// Incoming face.
        face: FaceId,
        /// The packet.
        packet: NetPacket,
        /// Its link-layer fields.
        link: LinkFields,
    },
    /// The face went down (peer closed, error, or garbage).
    Closed {
        /// The face.
        face: FaceId,
        /// Why.
        reason: String,
    },
    /// A packet for the forwarder to send on `face` once it has handled the
    /// events queued before this one: a management answer that must not
    /// overtake the [`FaceEvent::Created`] of the face it announces (faces
    /// that are known deliver their packets straight to the forwarder, so a
    /// command sent after such an answer could otherwise arrive first).
    Send {
        /// The face to send on.
        face: FaceId,
        /// The packet.
        packet: OutPacket,
    },
}

/// A packet for a face to send.
#[derive(Debug, Clone)]
pub struct OutPacket {
    /// Network-layer wire (Interest or Data TLV).
    pub wire: Bytes,
    /// Kind, for counters and Nack encoding.
    pub kind: OutKind,
    /// PitToken to attach.
    pub pit_token: Option<Bytes>,
    /// CongestionMark to attach.
    pub congestion_mark: Option<u64>,
}

/// What an [`OutPacket`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutKind {
    /// Interest.
    Interest,
    /// Data.
    Data,
    /// Nack with this reason (the wire is the Interest).
    Nack(u64),
}

/// Limits applied to every face.
#[derive(Debug, Clone)]
pub struct FaceLimits {
    /// Largest network-layer packet accepted or sent (default 8800, as NFD).
    pub max_packet: usize,
    /// Send-queue length in packets (default 4096).
    pub send_queue: usize,
    /// Reassembly: partial packets kept at once per face (default 64).
    pub reassembly_slots: usize,
    /// Reassembly timeout in ms (default 1000).
    pub reassembly_timeout_ms: u64,
    /// CoDel target sojourn time in ms (default 5).
    pub codel_target_ms: u64,
    /// CoDel interval in ms (default 100).
    pub codel_interval_ms: u64,
}

impl Default for FaceLimits {
    fn default() -> Self {
        FaceLimits {
            max_packet: 8800,
            send_queue: 4096,
            reassembly_slots: 64,
            reassembly_timeout_ms: 1000,
            codel_target_ms: 5,
            codel_interval_ms: 100,
        }
    }
}

/// Takes a face's decoded packets at once, on the face's own task: the
/// forwarder installs one in every face it knows ([`FaceHandle::set_sink`]),
/// so that packets skip the event channel and the hop to another task.
pub trait PacketSink: Send + Sync {
    /// Processes (and empties) `batch`, all received on `face`.
    fn deliver(&self, face: FaceId, batch: &mut Vec<(NetPacket, LinkFields)>);

    /// Processes one packet received on `face`.
    fn deliver_one(&self, face: FaceId, packet: NetPacket, link: LinkFields) {
        self.deliver(face, &mut vec![(packet, link)]);
    }
}

/// Where a face hands its packets once the forwarder has announced a sink.
#[derive(Default)]
pub(crate) struct SinkSlot(std::sync::OnceLock<std::sync::Weak<dyn PacketSink>>);

impl std::fmt::Debug for SinkSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "SinkSlot(set)"
        } else {
            "SinkSlot(unset)"
        })
    }
}

impl SinkSlot {
    /// Hands `batch` to the forwarder: straight to its sink when it has
    /// installed one (the face is known to it), else one event per packet
    /// through the channel. Err: the forwarder is gone.
    pub(crate) async fn deliver(
        &self,
        events: &EventSender,
        face: FaceId,
        batch: &mut Vec<(NetPacket, LinkFields)>,
    ) -> Result<(), ()> {
        if let Some(sink) = self.0.get().and_then(|w| w.upgrade()) {
            sink.deliver(face, batch);
            batch.clear();
            return Ok(());
        }
        for (packet, link) in batch.drain(..) {
            events
                .send(FaceEvent::Packet { face, packet, link })
                .await
                .map_err(|_| ())?;
        }
        Ok(())
    }

    /// [`SinkSlot::deliver`] for one packet.
    pub(crate) async fn deliver_one(
        &self,
        events: &EventSender,
        face: FaceId,
        packet: NetPacket,
        link: LinkFields,
    ) -> Result<(), ()> {
        if let Some(sink) = self.0.get().and_then(|w| w.upgrade()) {
            sink.deliver_one(face, packet, link);
            return Ok(());
        }
        events
            .send(FaceEvent::Packet { face, packet, link })
            .await
            .map_err(|_| ())
    }
}

/// The forwarder's handle on a face: its facts, counters and send queue.
#[derive(Debug, Clone)]
pub struct FaceHandle {
    /// Facts.
    pub info: FaceInfo,
    /// Counters.
    pub counters: Arc<Counters>,
    tx: mpsc::Sender<Queued>,
    closer: Arc<tokio::sync::Notify>,
    sink: Arc<SinkSlot>,
}

impl FaceHandle {
    /// Queues a packet; drops it (and counts) when the queue is full or the
    /// face is gone. Never blocks.
    pub fn send(&self, p: OutPacket) -> bool {
        self.send_at(p, tokio::time::Instant::now())
    }

    /// [`FaceHandle::send`] with the enqueue time given (a caller sending a
    /// batch reads the clock once).
    pub fn send_at(&self, p: OutPacket, now: tokio::time::Instant) -> bool {
        let len = p.wire.len() as u64;
        // Only marking faces (stream and in-process) count and drain this.
        // The send queue as NFD reads it when a packet enters it: the face's
        // bytes ahead of it plus the kernel's.
        let c = &self.counters;
        let marking = c.marking.load(Ordering::Relaxed);
        let ahead = if marking {
            c.queued_bytes.fetch_add(len, Ordering::Relaxed)
                + c.kernel_queued.load(Ordering::Relaxed)
        } else {
            0
        };
        match self.tx.try_send((p, now, ahead)) {
            Ok(()) => true,
            Err(_) => {
                if marking {
                    c.queued_bytes.fetch_sub(len, Ordering::Relaxed);
                }
                Counters::inc(&c.out_dropped);
                false
            }
        }
    }

    /// From now on the face hands its packets to `sink` on its own task
    /// instead of sending events (set once; later calls do nothing). The
    /// forwarder calls it when it learns of the face, so no packet can reach
    /// it before the face's [`FaceEvent::Created`].
    pub fn set_sink(&self, sink: std::sync::Weak<dyn PacketSink>) {
        let _ = self.sink.0.set(sink);
    }

    /// Packets waiting in the send queue.
    pub fn queue_len(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    /// Asks the face's tasks to stop.
    pub fn close(&self) {
        self.closer.notify_waiters();
        self.closer.notify_one();
    }
}

/// Sender half the forwarder gives to every face.
pub type EventSender = mpsc::Sender<FaceEvent>;

/// Allocates face ids.
#[derive(Debug)]
pub struct FaceIds(AtomicU64);

impl Default for FaceIds {
    fn default() -> Self {
        // 1..=255 are reserved (NFD: 1 internal, 254 content store, 255 null).
        FaceIds(AtomicU64::new(256))
    }
}

impl FaceIds {
    /// Next free id.
    pub fn next(&self) -> FaceId {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// A packet in a face's send queue, with when it entered and the send queue
/// in bytes ahead of it then (the face's own and the kernel's; 0 unless the
/// face marks).
pub(crate) type Queued = (OutPacket, tokio::time::Instant, u64);

pub(crate) fn new_handle(
    info: FaceInfo,
    limits: &FaceLimits,
) -> (FaceHandle, mpsc::Receiver<Queued>, Arc<tokio::sync::Notify>) {
    let (tx, rx) = mpsc::channel(limits.send_queue.max(1));
    let closer = Arc::new(tokio::sync::Notify::new());
    (
        FaceHandle {
            info,
            counters: Arc::new(Counters::default()),
            tx,
            closer: closer.clone(),
            sink: Arc::new(SinkSlot::default()),
        },
        rx,
        closer,
    )
}
