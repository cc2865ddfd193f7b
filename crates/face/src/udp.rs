//! UDP unicast faces: one socket per listener, one face per remote endpoint,
//! one LpPacket (or bare packet) per datagram, NDNLPv2 fragmentation to the
//! MTU and reassembly. A bad datagram is dropped and counted; the face stays.
//!
//! NDNLPv2 link reliability ([`crate::reliability`]): every UDP face
//! acknowledges the TxSequences it receives and drops duplicates; faces of a
//! channel with [`UdpChannel::set_reliability`] on (or created with
//! [`UdpChannel::connect_with`] and `reliable`) also give every outgoing frame a
//! TxSequence and retransmit lost frames.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, Notify};

use crate::link::{encode_outgoing, encode_outgoing_lp, Reassembler};
use crate::reliability::{Reliability, ReliabilityConfig};
use crate::stream::count_out;
use crate::{
    new_handle, Counters, EventSender, FaceEvent, FaceHandle, FaceIds, FaceInfo, FaceLimits,
    Persistency, Scope,
};

/// Default UDP MTU (bytes of LpPacket per datagram).
pub const DEFAULT_MTU: usize = 1400;

/// Socket buffers asked for (the kernel caps them at net.core.rmem_max /
/// wmem_max). The 208 KiB default overflows when a window of 8 KiB Data,
/// six fragments each, arrives at link speed: measured in the netns
/// testbed as thousands of RcvbufErrors at 100 Mbit/s and goodput cut by
/// half with no loss configured.
pub const SOCKET_BUFFER: usize = 4 << 20;

struct Peer {
    handle: FaceHandle,
    reasm: Reassembler,
    rel: Arc<Mutex<Reliability>>,
    /// Wakes the face's sending task (Acks or retransmissions to send).
    wake: Arc<Notify>,
}

/// A UDP listener socket and the faces of its remote endpoints.
#[derive(Clone)]
pub struct UdpChannel {
    socket: Arc<UdpSocket>,
    peers: Arc<Mutex<HashMap<SocketAddr, Peer>>>,
    limits: FaceLimits,
    mtu: usize,
    events: EventSender,
    ids: Arc<FaceIds>,
    local: SocketAddr,
    reliable: Arc<AtomicBool>,
}

fn uri(a: &SocketAddr) -> String {
    match a {
        SocketAddr::V4(_) => format!("udp4://{a}"),
        SocketAddr::V6(_) => format!("udp6://{a}"),
    }
}

impl UdpChannel {
    /// Binds `addr` and starts receiving. Datagrams from unknown endpoints
    /// create on-demand faces, announced with [`FaceEvent::Created`].
    pub async fn bind(
        addr: SocketAddr,
        mtu: usize,
        limits: FaceLimits,
        events: EventSender,
        ids: Arc<FaceIds>,
    ) -> std::io::Result<UdpChannel> {
        let socket = Arc::new(UdpSocket::bind(addr).await?);
        let sr = socket2::SockRef::from(&*socket);
        // Best effort: a smaller buffer still works, only burst tolerance drops.
        let _ = sr.set_recv_buffer_size(SOCKET_BUFFER);
        let _ = sr.set_send_buffer_size(SOCKET_BUFFER);
        let local = socket.local_addr()?;
        let ch = UdpChannel {
            socket,
            peers: Arc::default(),
            limits,
            mtu,
            events,
            ids,
            local,
            reliable: Arc::default(),
        };
        tokio::spawn(ch.clone().rx_loop());
        Ok(ch)
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Link reliability (TxSequence, retransmission of lost frames) for the
    /// faces created from now on without an explicit choice (default off).
    pub fn set_reliability(&self, on: bool) {
        self.reliable.store(on, Ordering::Relaxed);
    }

    /// Whether new faces get link reliability by default.
    pub fn reliability(&self) -> bool {
        self.reliable.load(Ordering::Relaxed)
    }

    /// The face for `remote`, created (persistent) if there is none yet.
    /// Returns the handle and whether it is new.
    pub fn connect(&self, remote: SocketAddr, persistency: Persistency) -> (FaceHandle, bool) {
        self.connect_with(remote, persistency, None)
    }

    /// [`connect`](Self::connect) choosing link reliability for the face
    /// (`None`: the channel's default). An existing face turns reliability
    /// on when asked (never off: frames in flight would be orphaned).
    pub fn connect_with(
        &self,
        remote: SocketAddr,
        persistency: Persistency,
        reliable: Option<bool>,
    ) -> (FaceHandle, bool) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = peers.get(&remote) {
            if reliable == Some(true) {
                p.rel
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .set_enabled(true);
                p.handle.counters.lp_reliable.store(true, Ordering::Relaxed);
            }
            return (p.handle.clone(), false);
        }
        let reliable = reliable.unwrap_or_else(|| self.reliability());
        let info = FaceInfo {
            id: self.ids.next(),
            remote_uri: uri(&remote),
            local_uri: uri(&self.local),
            scope: Scope::NonLocal,
            persistency,
            mtu: Some(self.mtu),
            peer_uid: None,
        };
        let (handle, rx, closer) = new_handle(info, &self.limits);
        handle
            .counters
            .lp_reliable
            .store(reliable, Ordering::Relaxed);
        let seed = rand_seed(&remote);
        let rel = Arc::new(Mutex::new(Reliability::new(
            ReliabilityConfig::default(),
            reliable,
            seed.rotate_left(17),
        )));
        let wake = Arc::new(Notify::new());
        tokio::spawn(tx_loop(
            TxFace {
                socket: self.socket.clone(),
                remote,
                counters: handle.counters.clone(),
                mtu: self.mtu,
                closer,
                peers: self.peers.clone(),
                rel: rel.clone(),
                wake: wake.clone(),
            },
            rx,
            seed,
        ));
        let reasm = Reassembler::new(
            self.limits.reassembly_slots,
            Duration::from_millis(self.limits.reassembly_timeout_ms),
            self.limits.max_packet,
        );
        peers.insert(
            remote,
            Peer {
                handle: handle.clone(),
                reasm,
                rel,
                wake,
            },
        );
        (handle, true)
    }

    async fn rx_loop(self) {
        let mut buf = vec![0u8; 65536];
        loop {
            let (n, from) = match self.socket.recv_from(&mut buf).await {
                Ok(x) => x,
                Err(e) => {
                    // ICMP port unreachable and the like surface here; keep going.
                    tracing::debug!("udp recv: {e}");
                    continue;
                }
            };
            let dgram = Bytes::copy_from_slice(&buf[..n]);
            let (handle, new) = self.connect(from, Persistency::OnDemand);
            if new
                && self
                    .events
                    .send(FaceEvent::Created(handle.clone()))
                    .await
                    .is_err()
            {
                return;
            }
            Counters::add(&handle.counters.in_bytes, n as u64);
            let decoded = {
                let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
                match peers.get_mut(&from) {
                    Some(p) => {
                        let mut rel = p.rel.lock().unwrap_or_else(|e| e.into_inner());
                        let r = crate::link::decode_incoming_reliable(
                            dgram,
                            &mut p.reasm,
                            &mut rel,
                            Instant::now(),
                        );
                        if rel.wants_service() {
                            p.wake.notify_one();
                        }
                        r
                    }
                    None => continue,
                }
            };
            match decoded {
                Ok(Some((packet, link))) => {
                    crate::stream::count_in(&handle.counters, &packet);
                    if self
                        .events
                        .send(FaceEvent::Packet {
                            face: handle.info.id,
                            packet,
                            link,
                        })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    Counters::inc(&handle.counters.in_errors);
                    tracing::debug!(face = handle.info.id, "dropped bad datagram: {e}");
                }
            }
        }
    }
}

struct TxFace {
    socket: Arc<UdpSocket>,
    remote: SocketAddr,
    counters: Arc<Counters>,
    mtu: usize,
    closer: Arc<Notify>,
    peers: Arc<Mutex<HashMap<SocketAddr, Peer>>>,
    rel: Arc<Mutex<Reliability>>,
    wake: Arc<Notify>,
}

impl TxFace {
    fn rel(&self) -> std::sync::MutexGuard<'_, Reliability> {
        self.rel.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn send(&self, frames: &mut Vec<Bytes>) {
        for f in frames.drain(..) {
            match self.socket.send_to(&f, self.remote).await {
                Ok(n) => Counters::add(&self.counters.out_bytes, n as u64),
                Err(e) => tracing::debug!("udp send to {}: {e}", self.remote),
            }
        }
    }
}

async fn tx_loop(face: TxFace, mut rx: mpsc::Receiver<crate::Queued>, mut seq: u64) {
    let mut frames = Vec::new();
    let mut lps = Vec::new();
    let mut last_log = Instant::now();
    let mut last_stats = Default::default();
    loop {
        // Link-layer work first: lost frames, then Acks that waited long enough.
        let deadline = {
            let now = Instant::now();
            let mut r = face.rel();
            r.check_timeouts(now);
            while let Some(f) = r.retransmission(face.mtu, now) {
                frames.push(f);
            }
            while let Some(f) = r.idle_acks(face.mtu, now) {
                frames.push(f);
            }
            face.counters.set_link(&r.stats);
            if r.stats != last_stats && last_log.elapsed() >= Duration::from_secs(1) {
                last_log = Instant::now();
                last_stats = r.stats;
                tracing::debug!(
                    "udp {} link reliability: {:?} rto={:?} unacked={}",
                    face.remote,
                    r.stats,
                    r.rto(),
                    r.unacked()
                );
            }
            r.next_deadline()
        };
        face.send(&mut frames).await;
        let wait = tokio::time::Instant::from_std(
            deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600)),
        );
        let (p, _, _) = tokio::select! {
            p = rx.recv() => match p { Some(p) => p, None => break },
            _ = face.wake.notified() => continue,
            _ = tokio::time::sleep_until(wait), if deadline.is_some() => continue,
            _ = face.closer.notified() => break,
        };
        count_out(&face.counters, &p);
        {
            let now = Instant::now();
            let mut r = face.rel();
            if r.enabled() {
                lps.clear();
                encode_outgoing_lp(&p, face.mtu, r.reserve(), &mut seq, &mut lps);
                for lp in lps.drain(..) {
                    frames.push(r.send(lp, face.mtu, now));
                }
            } else {
                encode_outgoing(&p, Some(face.mtu), &mut seq, &mut frames);
            }
        }
        face.send(&mut frames).await;
    }
    face.peers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&face.remote);
}

fn rand_seed(a: &SocketAddr) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    t ^ (a.port() as u64) << 48
}
