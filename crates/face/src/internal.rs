//! In-process faces: a component of the daemon (repository, tools, tests)
//! talks to the forwarder through channels instead of a socket.

use std::sync::atomic::Ordering;

use tokio::sync::mpsc;

use crate::stream::NfdMarker;

use crate::stream::count_in;
use crate::{
    new_handle, Counters, EventSender, FaceHandle, FaceInfo, FaceLimits, LinkFields, NetPacket,
    Persistency, Scope,
};

/// The application's end of an in-process face.
pub struct AppFace {
    id: u64,
    events: EventSender,
    rx: mpsc::Receiver<crate::Queued>,
    handle: FaceHandle,
    marker: NfdMarker,
    interval: std::time::Duration,
}

/// Packets an in-process face holds for its application. NFD's queue
/// towards a producer is unbounded (a Unix socket behind an unbounded
/// transport queue): this one must hold what a consumer's slow start sends
/// during the base marking interval before its first mark (at 80,000
/// segments/s, 8,000 Interests in 100 ms) without dropping. Interests are
/// ~100 bytes; an application's Data are bounded by its own window.
pub const IN_PROCESS_QUEUE: usize = 32_768;

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
    let limits = FaceLimits {
        send_queue: limits.send_queue.max(IN_PROCESS_QUEUE),
        ..limits.clone()
    };
    let (handle, rx, _closer) = new_handle(info, &limits);
    // The application's queue is the node's: it is marked as a stream
    // face's is (NFD marks the packets it queues towards a producer's
    // socket), so a producer that echoes the mark (the repository) tells
    // consumers when it cannot keep up.
    handle.counters.marking.store(true, Ordering::Relaxed);
    (
        handle.clone(),
        AppFace {
            id,
            events,
            rx,
            handle,
            marker: NfdMarker::eager(),
            interval: std::time::Duration::from_millis(limits.codel_interval_ms),
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
            let (p, enq, ahead) = self.rx.recv().await?;
            let c = &self.handle.counters;
            let len = p.wire.len() as u64;
            let _ = c
                .queued_bytes
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| {
                    Some(q.saturating_sub(len))
                });
            let mut mark = p.congestion_mark;
            if mark.is_none() && c.marking.load(Ordering::Relaxed) {
                let (interval, threshold) = c.marking_settings(self.interval);
                if self
                    .marker
                    .should_mark(enq.into_std(), ahead, threshold, interval)
                {
                    mark = Some(1);
                    Counters::inc(&c.out_marked);
                }
            }
            let link = LinkFields {
                pit_token: p.pit_token.clone(),
                congestion_mark: mark,
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::{FaceLimits, NetPacket, OutKind, OutPacket};

    fn interest(n: u32) -> OutPacket {
        let name = granary_packet::Name::from_uri(&format!("/q/{n}")).unwrap();
        OutPacket {
            wire: granary_packet::InterestFields::new(name)
                .encode()
                .wire()
                .clone(),
            kind: OutKind::Interest,
            pit_token: None,
            congestion_mark: None,
        }
    }

    /// The queue towards an in-process application is marked: the first
    /// packet that finds more than the threshold ahead of it at once, then
    /// not again within the interval; a short queue never. It holds far more
    /// than a stream face's queue without dropping.
    #[tokio::test]
    async fn the_applications_queue_is_marked_when_long_and_holds_a_slow_start() {
        let (tx, _events) = tokio::sync::mpsc::channel(8);
        let (handle, mut app) = super::pair(7, "app", &FaceLimits::default(), tx);
        let one = interest(0).wire.len() as u64;
        handle
            .counters
            .marking_threshold
            .store(10 * one, Ordering::Relaxed);
        let n = 2 * FaceLimits::default().send_queue as u32;
        let t = std::time::Instant::now();
        for k in 0..n {
            assert!(handle.send(interest(k)), "packet {k} dropped");
        }
        let mut marked = Vec::new();
        for k in 0..n {
            let (p, link) = app.recv().await.unwrap();
            assert!(matches!(p, NetPacket::Interest(_)));
            if link.congestion_mark.is_some() {
                marked.push(k);
            }
        }
        let enqueued = t.elapsed();
        // The first packet with more than ten ahead of it (the 12th) is
        // marked at once; later marks follow NFD's schedule, at least
        // interval/√(n+1) ≥ 10 ms apart for the first hundred, so how many
        // more depends only on how long the enqueueing took (a loaded machine
        // may take longer than the 100 ms interval; a quiet one marks once).
        assert_eq!(marked.first(), Some(&11), "{marked:?}");
        let most = 1 + enqueued.as_millis() as usize / 10;
        assert!(
            marked.len() <= most,
            "{} marks in {enqueued:?}: {marked:?}",
            marked.len()
        );
        assert_eq!(
            handle.counters.out_marked.load(Ordering::Relaxed),
            marked.len() as u64
        );
        assert_eq!(handle.counters.queued_bytes.load(Ordering::Relaxed), 0);
        // One at a time: never above the threshold, never marked.
        for k in 0..100 {
            assert!(handle.send(interest(k)));
            assert_eq!(app.recv().await.unwrap().1.congestion_mark, None);
        }
    }
}
