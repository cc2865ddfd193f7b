//! UDP unicast faces: one socket per listener, one face per remote endpoint,
//! one LpPacket (or bare packet) per datagram, NDNLPv2 fragmentation to the
//! MTU and reassembly. A bad datagram is dropped and counted; the face stays.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use crate::link::{encode_outgoing, Reassembler};
use crate::stream::count_out;
use crate::{
    new_handle, Counters, EventSender, FaceEvent, FaceHandle, FaceIds, FaceInfo, FaceLimits,
    OutPacket, Persistency, Scope,
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
        };
        tokio::spawn(ch.clone().rx_loop());
        Ok(ch)
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The face for `remote`, created (persistent) if there is none yet.
    /// Returns the handle and whether it is new.
    pub fn connect(&self, remote: SocketAddr, persistency: Persistency) -> (FaceHandle, bool) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = peers.get(&remote) {
            return (p.handle.clone(), false);
        }
        let info = FaceInfo {
            id: self.ids.next(),
            remote_uri: uri(&remote),
            local_uri: uri(&self.local),
            scope: Scope::NonLocal,
            persistency,
            mtu: Some(self.mtu),
        };
        let (handle, rx, closer) = new_handle(info, &self.limits);
        tokio::spawn(tx_loop(
            self.socket.clone(),
            remote,
            rx,
            handle.counters.clone(),
            self.mtu,
            closer,
            self.peers.clone(),
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
                        crate::link::decode_incoming(dgram, &mut p.reasm, std::time::Instant::now())
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

async fn tx_loop(
    socket: Arc<UdpSocket>,
    remote: SocketAddr,
    mut rx: mpsc::Receiver<(OutPacket, tokio::time::Instant)>,
    counters: Arc<Counters>,
    mtu: usize,
    closer: Arc<tokio::sync::Notify>,
    peers: Arc<Mutex<HashMap<SocketAddr, Peer>>>,
) {
    let mut seq: u64 = rand_seed(&remote);
    let mut frames = Vec::new();
    loop {
        let (p, _) = tokio::select! {
            p = rx.recv() => match p { Some(p) => p, None => break },
            _ = closer.notified() => break,
        };
        count_out(&counters, &p);
        frames.clear();
        encode_outgoing(&p, Some(mtu), &mut seq, &mut frames);
        for f in &frames {
            match socket.send_to(f, remote).await {
                Ok(n) => Counters::add(&counters.out_bytes, n as u64),
                Err(e) => tracing::debug!("udp send to {remote}: {e}"),
            }
        }
    }
    peers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&remote);
}

fn rand_seed(a: &SocketAddr) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    t ^ (a.port() as u64) << 48
}
