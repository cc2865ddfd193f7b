//! `GET /ndn` (WebSocket upgrade): the node's WebSocket face on the gateway's
//! port, so a page reaches NDN with no second port. The gateway only upgrades
//! and pumps messages; the face is granary-face's ([`granary_face::ws`]).

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State as St};
use axum::response::Response;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use granary_face::{FaceInfo, Persistency, Scope};
use tokio::sync::mpsc;

use crate::{Peer, State};

pub async fn websocket(
    St(node): St<State>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    ws: WebSocketUpgrade,
) -> Response {
    let max = node.limits.max_packet + 1024;
    ws.max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| serve(socket, node, peer))
}

async fn serve(socket: WebSocket, node: State, peer: Peer) {
    let (in_tx, in_rx) = mpsc::channel::<Bytes>(granary_face::ws::MESSAGE_QUEUE);
    let (out_tx, mut out_rx) = mpsc::channel::<Bytes>(granary_face::ws::MESSAGE_QUEUE);
    let info = FaceInfo {
        id: node.ids.next(),
        remote_uri: format!("ws://{}", peer.0),
        local_uri: format!("ws://{}/ndn", node_local(&node)),
        scope: Scope::NonLocal,
        persistency: Persistency::OnDemand,
        mtu: None,
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
    while let Some(Ok(m)) = stream.next().await {
        let b = match m {
            Message::Binary(b) => b,
            Message::Close(_) => break,
            // Text, ping, pong: not packets (pings are answered by the library).
            _ => continue,
        };
        if in_tx.send(b).await.is_err() {
            break;
        }
    }
    drop(in_tx);
    writer.abort();
}

fn node_local(node: &State) -> String {
    node.local
        .get()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "gateway".into())
}
