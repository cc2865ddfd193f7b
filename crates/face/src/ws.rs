//! WebSocket faces, as NFD's: one NDN packet (or NDNLPv2 LpPacket) per binary
//! message, no TLV framing across messages. Browsers (NDNts `WsTransport`) reach
//! the node this way.
//!
//! The face itself ([`spawn`]) works on two channels of whole messages, so any
//! WebSocket implementation can carry it: [`listen_ws`] (`--listen ws://…`,
//! tokio-tungstenite) here, and the HTTP gateway's `/ndn` (axum) pump their
//! sockets into those channels.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use crate::link::{decode_incoming, encode_outgoing, Reassembler};
use crate::stream::{count_in, count_out};
use crate::{new_handle, Counters, EventSender, FaceEvent, FaceHandle, FaceInfo, FaceLimits};

/// Messages queued between the socket and the face, each way.
pub const MESSAGE_QUEUE: usize = 256;

/// Starts a WebSocket face on two channels of whole messages: `incoming` (what the
/// peer sent) and `outgoing` (what to send it). The face closes when `incoming`
/// ends or `outgoing` is closed; dropping the returned channels' other ends is
/// how the socket side says it is gone. The face is announced to the forwarder
/// before its first packet can be.
pub async fn spawn(
    info: FaceInfo,
    mut incoming: mpsc::Receiver<Bytes>,
    outgoing: mpsc::Sender<Bytes>,
    limits: FaceLimits,
    events: EventSender,
) -> FaceHandle {
    let (handle, mut rx, closer) = new_handle(info, &limits);
    let id = handle.info.id;
    let _ = events.send(FaceEvent::Created(handle.clone())).await;
    let counters = handle.counters.clone();
    let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let close = {
        let events = events.clone();
        let closed = closed.clone();
        let closer = closer.clone();
        move |reason: String| {
            let events = events.clone();
            let closed = closed.clone();
            let closer = closer.clone();
            async move {
                if !closed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    tracing::debug!(face = id, "WebSocket face closed: {reason}");
                    let _ = events.send(FaceEvent::Closed { face: id, reason }).await;
                }
                closer.notify_waiters();
                closer.notify_one();
            }
        }
    };
    // Peer → forwarder.
    {
        let counters = counters.clone();
        let closer = closer.clone();
        let close = close.clone();
        let limits = limits.clone();
        tokio::spawn(async move {
            let mut reasm = Reassembler::new(
                limits.reassembly_slots,
                Duration::from_millis(limits.reassembly_timeout_ms),
                limits.max_packet,
            );
            let reason = loop {
                let m = tokio::select! {
                    m = incoming.recv() => match m { Some(m) => m, None => break "peer closed".to_string() },
                    _ = closer.notified() => break "closed".to_string(),
                };
                Counters::add(&counters.in_bytes, m.len() as u64);
                if m.len() > limits.max_packet {
                    Counters::inc(&counters.in_errors);
                    break format!(
                        "protocol error: a message of {} bytes, more than {}",
                        m.len(),
                        limits.max_packet
                    );
                }
                match decode_incoming(m, &mut reasm, Instant::now()) {
                    Ok(Some((packet, link))) => {
                        count_in(&counters, &packet);
                        if events
                            .send(FaceEvent::Packet {
                                face: id,
                                packet,
                                link,
                            })
                            .await
                            .is_err()
                        {
                            break "forwarder gone".to_string();
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        // One bad message is dropped, as NFD's WebSocket
                        // transport does; the face stays up.
                        Counters::inc(&counters.in_errors);
                        tracing::debug!(face = id, "WebSocket message dropped: {e}");
                    }
                }
            };
            close(reason).await;
        });
    }
    // Forwarder → peer.
    tokio::spawn(async move {
        let mut codel = Codel::default();
        let target = Duration::from_millis(limits.codel_target_ms);
        let interval = Duration::from_millis(limits.codel_interval_ms);
        let mut seq = 0u64;
        let mut frames = Vec::with_capacity(4);
        let reason = loop {
            let (mut p, enq, _) = tokio::select! {
                p = rx.recv() => match p { Some(p) => p, None => break "forwarder gone".to_string() },
                _ = closer.notified() => break "closed".to_string(),
            };
            let now = tokio::time::Instant::now();
            if codel.should_mark(now, now.saturating_duration_since(enq), target, interval)
                && p.congestion_mark.is_none()
            {
                p.congestion_mark = Some(1);
                Counters::inc(&counters.out_marked);
            }
            count_out(&counters, &p);
            frames.clear();
            encode_outgoing(&p, None, &mut seq, &mut frames);
            let mut gone = false;
            for f in frames.drain(..) {
                Counters::add(&counters.out_bytes, f.len() as u64);
                if outgoing.send(f).await.is_err() {
                    gone = true;
                    break;
                }
            }
            if gone {
                break "peer closed".to_string();
            }
        };
        close(reason).await;
    });
    handle
}

fn ws_uri(a: &std::net::SocketAddr) -> String {
    format!("ws://{a}")
}

/// Serves one accepted WebSocket connection (after the handshake) as a face
/// until either side closes.
pub async fn serve_socket<S>(
    ws: tokio_tungstenite::WebSocketStream<S>,
    info: FaceInfo,
    limits: FaceLimits,
    events: EventSender,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (in_tx, in_rx) = mpsc::channel::<Bytes>(MESSAGE_QUEUE);
    let (out_tx, out_rx) = mpsc::channel::<Bytes>(MESSAGE_QUEUE);
    spawn(info, in_rx, out_tx, limits, events).await;
    pump(ws, in_tx, out_rx, Message::Binary, |m| match m {
        Message::Binary(b) => Incoming::Packet(b),
        Message::Close(_) => Incoming::Close,
        _ => Incoming::Other,
    })
    .await
}

/// What a received WebSocket message is to a face.
pub enum Incoming {
    /// A binary message: one NDN packet (or NDNLPv2 frame).
    Packet(Bytes),
    /// The peer closes.
    Close,
    /// Text, ping, pong: not packets (pings are answered by the library).
    Other,
}

/// Pumps one WebSocket connection, whichever library's (this crate's
/// listener, or the gateway's `/ndn` upgrade), between the socket and a face
/// made by [`spawn`]: binary messages in to `in_tx`, `out_rx` out as binary
/// messages (`wrap`), until either side closes.
pub async fn pump<S, M, E>(
    ws: S,
    in_tx: mpsc::Sender<Bytes>,
    mut out_rx: mpsc::Receiver<Bytes>,
    wrap: fn(Bytes) -> M,
    read: fn(M) -> Incoming,
) where
    S: futures_util::Sink<M> + futures_util::Stream<Item = Result<M, E>> + Send + 'static,
    M: Send + 'static,
{
    let (mut sink, mut stream) = ws.split();
    let writer = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            if sink.send(wrap(m)).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    while let Some(Ok(m)) = stream.next().await {
        let b = match read(m) {
            Incoming::Packet(b) => b,
            Incoming::Close => break,
            Incoming::Other => continue,
        };
        if in_tx.send(b).await.is_err() {
            break;
        }
    }
    drop(in_tx);
    writer.abort();
}

/// Listens for WebSocket connections (`ws://IP:PORT`, any path) and serves each
/// as a non-local, on-demand face. Returns the bound address.
pub async fn listen_ws(
    addr: std::net::SocketAddr,
    limits: FaceLimits,
    events: EventSender,
    ids: Arc<crate::FaceIds>,
) -> std::io::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(crate::accept::accept_loop(
        listener,
        "ws listener",
        move |sock, peer| {
            let _ = sock.set_nodelay(true);
            let limits = limits.clone();
            let events = events.clone();
            let id = ids.next();
            tokio::spawn(async move {
                let cfg = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
                    .max_message_size(Some(limits.max_packet + 1024))
                    .max_frame_size(Some(limits.max_packet + 1024));
                let ws = match tokio::time::timeout(
                    Duration::from_secs(10),
                    tokio_tungstenite::accept_async_with_config(sock, Some(cfg)),
                )
                .await
                {
                    Ok(Ok(ws)) => ws,
                    Ok(Err(e)) => {
                        tracing::debug!("WebSocket handshake from {peer} failed: {e}");
                        return;
                    }
                    Err(_) => return,
                };
                let info = FaceInfo {
                    id,
                    remote_uri: ws_uri(&peer),
                    local_uri: ws_uri(&bound),
                    scope: crate::Scope::NonLocal,
                    persistency: crate::Persistency::OnDemand,
                    mtu: None,
                    peer_uid: None,
                };
                serve_socket(ws, info, limits, events).await;
            });
            std::future::ready(())
        },
    ));
    Ok(bound)
}

/// CoDel-style marking state for one send queue.
#[derive(Debug, Default)]
pub(crate) struct Codel {
    first_above: Option<tokio::time::Instant>,
    marking: bool,
    count: u32,
    next_mark: Option<tokio::time::Instant>,
}

impl Codel {
    /// Decides whether the packet dequeued now after `sojourn` is marked.
    pub(crate) fn should_mark(
        &mut self,
        now: tokio::time::Instant,
        sojourn: Duration,
        target: Duration,
        interval: Duration,
    ) -> bool {
        if sojourn < target {
            self.first_above = None;
            self.marking = false;
            return false;
        }
        let Some(fa) = self.first_above else {
            self.first_above = Some(now + interval);
            return false;
        };
        if now < fa {
            return false;
        }
        if !self.marking {
            self.marking = true;
            self.count = 1;
            self.next_mark = Some(now);
        }
        match self.next_mark {
            Some(t) if now >= t => {
                self.count += 1;
                let gap = interval.as_secs_f64() / (self.count as f64).sqrt();
                self.next_mark = Some(now + Duration::from_secs_f64(gap));
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod codel_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn codel_marks_only_after_an_interval_above_target() {
        let mut c = Codel::default();
        let t0 = tokio::time::Instant::now();
        let (tgt, iv) = (Duration::from_millis(5), Duration::from_millis(100));
        assert!(!c.should_mark(t0, Duration::from_millis(1), tgt, iv));
        assert!(!c.should_mark(t0, Duration::from_millis(20), tgt, iv));
        assert!(!c.should_mark(
            t0 + Duration::from_millis(50),
            Duration::from_millis(20),
            tgt,
            iv
        ));
        assert!(c.should_mark(
            t0 + Duration::from_millis(101),
            Duration::from_millis(20),
            tgt,
            iv
        ));
        assert!(
            !c.should_mark(
                t0 + Duration::from_millis(102),
                Duration::from_millis(20),
                tgt,
                iv
            ),
            "spaced"
        );
        assert!(c.should_mark(
            t0 + Duration::from_millis(200),
            Duration::from_millis(20),
            tgt,
            iv
        ));
        assert!(
            !c.should_mark(
                t0 + Duration::from_millis(201),
                Duration::from_millis(1),
                tgt,
                iv
            ),
            "queue drained"
        );
    }
}
