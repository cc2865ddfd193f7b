//! `GET /ndn` (WebSocket upgrade): the node's WebSocket face on the gateway's
//! port, so a page reaches NDN with no second port. The gateway only upgrades
//! and pumps messages; the face is granary-face's ([`granary_face::ws`]).

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State as St};
use axum::response::Response;
use bytes::Bytes;
use granary_face::ws::Incoming;
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
    let (out_tx, out_rx) = mpsc::channel::<Bytes>(granary_face::ws::MESSAGE_QUEUE);
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
    granary_face::ws::pump(socket, in_tx, out_rx, Message::Binary, |m| match m {
        Message::Binary(b) => Incoming::Packet(b),
        Message::Close(_) => Incoming::Close,
        _ => Incoming::Other,
    })
    .await
}

fn node_local(node: &State) -> String {
    node.local
        .get()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "gateway".into())
}
