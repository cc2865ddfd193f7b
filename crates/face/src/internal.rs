//! In-process faces: a component of the daemon (repository, tools, tests)
//! talks to the forwarder through channels instead of a socket.

use tokio::sync::mpsc;

use crate::stream::count_in;
use crate::{
    new_handle, EventSender, FaceHandle, FaceInfo, FaceLimits, LinkFields, NetPacket, OutPacket,
    Persistency, Scope,
};

/// The application's end of an in-process face.
pub struct AppFace {
    id: u64,
    events: EventSender,
    rx: mpsc::Receiver<(OutPacket, tokio::time::Instant)>,
    handle: FaceHandle,
}

/// Creates an in-process face with id `id`. The returned handle must be
/// announced to the forwarder ([`FaceEvent::Created`]); the [`AppFace`] is
/// the application's end.
pub fn pair(
    id: u64,
    name: &str,
    limits: &FaceLimits,
    events: EventSender,
) -> (FaceHandle, AppFace) {
    let info = FaceInfo {
        id,
        remote_uri: format!("internal://{name}"),
        local_uri: "internal://".into(),
        scope: Scope::Local,
        persistency: Persistency::Permanent,
        mtu: None,
        peer_uid: None,
    };
    let (handle, rx, _closer) = new_handle(info, limits);
    (
        handle.clone(),
        AppFace {
            id,
            events,
            rx,
            handle,
        },
    )
}

impl AppFace {
    /// Face id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Sends a packet into the forwarder.
    pub async fn send(&self, packet: NetPacket, link: LinkFields) -> bool {
        count_in(&self.handle.counters, &packet);
        self.handle
            .sink
            .deliver_one(&self.events, self.id, packet, link)
            .await
            .is_ok()
    }

    /// Next packet the forwarder sent to this face, decoded.
    pub async fn recv(&mut self) -> Option<(NetPacket, LinkFields)> {
        loop {
            let (p, _) = self.rx.recv().await?;
            let link = LinkFields {
                pit_token: p.pit_token.clone(),
                congestion_mark: p.congestion_mark,
                next_hop_face_id: None,
                cache_policy: None,
            };
            let packet = match p.kind {
                crate::OutKind::Interest => {
                    granary_packet::Interest::decode(p.wire).map(NetPacket::Interest)
                }
                crate::OutKind::Data => granary_packet::Data::decode(p.wire).map(NetPacket::Data),
                crate::OutKind::Nack(r) => {
                    granary_packet::Interest::decode(p.wire).map(|i| NetPacket::Nack(i, r))
                }
            };
            if let Ok(packet) = packet {
                return Some((packet, link));
            }
        }
    }
}
