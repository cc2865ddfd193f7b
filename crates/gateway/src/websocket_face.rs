//! `GET /ndn` (WebSocket upgrade): the node's WebSocket face on the gateway's
//! port, so a page reaches NDN with no second port. The gateway upgrades and
//! pumps messages; the face is granary-face's ([`granary_face::ws`]), non-local.
//!
//! Limits: at most `--http-max-websockets` faces (beyond: 503 JSON before
//! the upgrade); a face that receives nothing for `--http-idle-timeout` is
//! closed; an Interest for `/localhost` or `/localhop` never reaches the
//! forwarder (dropped here, and the forwarder would drop it from a non-local
//! face too), nor does an NDNLPv2 fragment (a WebSocket message carries a
//! whole packet, and a fragment's name cannot be checked).

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State as St};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use granary_face::{FaceInfo, Persistency, Scope};
use granary_packet::Packet;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::serve::ConnCtx;
use crate::{error, Peer, State};

pub async fn websocket(
    St(node): St<State>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    ctx: Option<Extension<ConnCtx>>,
    ws: WebSocketUpgrade,
) -> Response {
    let (slot, idle, ctx) = match ctx {
        Some(Extension(ctx)) => match ctx.shared.websockets.clone().try_acquire_owned() {
            Ok(p) => (Some(p), ctx.shared.limits.idle_timeout, Some(ctx)),
            Err(_) => {
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "too many WebSocket faces (at most {})",
                        ctx.shared.limits.max_websockets
                    ),
                )
            }
        },
        None => (None, crate::DEFAULT_IDLE_TIMEOUT, None),
    };
    let max = node.limits.max_packet + 1024;
    ws.max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| serve(socket, node, peer, idle, (slot, ctx)))
}

async fn serve(
    socket: WebSocket,
    node: State,
    peer: Peer,
    idle: std::time::Duration,
    // Held until the face closes: its slot, and its client's count.
    _hold: (Option<OwnedSemaphorePermit>, Option<ConnCtx>),
) {
    let (in_tx, in_rx) = mpsc::channel::<Bytes>(granary_face::ws::MESSAGE_QUEUE);
    let (out_tx, mut out_rx) = mpsc::channel::<Bytes>(granary_face::ws::MESSAGE_QUEUE);
    let info = FaceInfo {
        id: node.ids.next(),
        remote_uri: format!("ws://{}", peer.0),
        local_uri: format!("ws://{}/ndn", node_local(&node)),
        scope: Scope::NonLocal,
        persistency: Persistency::OnDemand,
        mtu: None,
        peer_uid: None,
    };
    granary_face::ws::spawn(
        info,
        in_rx,
        out_tx,
        node.limits.clone(),
        node.events.clone(),
    )
    .await;
    let (mut sink, mut stream) = socket.split();
    let writer = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            if sink.send(Message::Binary(m)).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    loop {
        let m = match tokio::time::timeout(idle, stream.next()).await {
            Ok(Some(Ok(m))) => m,
            Ok(_) => break,
            Err(_) => {
                tracing::debug!("WebSocket face {}: idle for {idle:?}, closed", peer.0);
                break;
            }
        };
        let b = match m {
            Message::Binary(b) => b,
            Message::Close(_) => break,
            _ => continue,
        };
        if !admissible(&b) {
            continue;
        }
        if in_tx.send(b).await.is_err() {
            break;
        }
    }
    drop(in_tx);
    writer.abort();
}

/// A message the face may take: a packet that decodes, is not an NDNLPv2
/// fragment of a larger one, and is not an Interest for `/localhost` or
/// `/localhop` (bare or in an LpPacket).
fn admissible(b: &Bytes) -> bool {
    match Packet::decode(b.clone()) {
        Ok(Packet::Interest(i)) => !crate::scoped_name(&i.name),
        Ok(Packet::Data(_)) => true,
        Ok(Packet::Lp(lp)) => {
            if lp.frag_count.is_some_and(|n| n > 1) {
                return false;
            }
            match lp.fragment {
                None => true,
                Some(f) => match Packet::decode(f) {
                    Ok(Packet::Interest(i)) => !crate::scoped_name(&i.name),
                    Ok(Packet::Data(_)) => true,
                    _ => false,
                },
            }
        }
        Err(_) => false,
    }
}

fn node_local(node: &State) -> String {
    node.local
        .get()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "gateway".into())
}
