//! Helpers of the pipeline tests: a forwarder with in-process faces, and
//! what one of them received.

use std::sync::Arc;
use std::time::Duration;

use granary_face::internal::{pair, AppFace};
use granary_face::{FaceIds, FaceLimits, NetPacket};

use crate::forwarder::{FaceContext, Forwarder, ForwarderConfig};

/// A forwarder made with `cfg` and one in-process face per entry of
/// `peer_uids` (ids 1, 2, …), each with that peer user id. Its event
/// receiver is dropped: the tests call the pipelines directly.
pub(crate) fn forwarder_with_faces(
    cfg: ForwarderConfig,
    peer_uids: &[Option<u32>],
) -> (Forwarder, Vec<AppFace>) {
    let (tx, _rx) = tokio::sync::mpsc::channel(64);
    let ctx = FaceContext {
        events: tx.clone(),
        ids: Arc::new(FaceIds::default()),
        limits: FaceLimits::default(),
        udp: None,
    };
    let mut fw = Forwarder::new(cfg, ctx);
    let mut apps = Vec::new();
    for (i, uid) in peer_uids.iter().enumerate() {
        let id = i as u64 + 1;
        let (mut h, app) = pair(id, &format!("f{id}"), &FaceLimits::default(), tx.clone());
        h.info.peer_uid = *uid;
        fw.add_face(h);
        apps.push(app);
    }
    (fw, apps)
}

/// What face `app` received, if anything (the pipelines have already run).
pub(crate) async fn got(app: &mut AppFace) -> Option<NetPacket> {
    tokio::time::timeout(Duration::from_millis(20), app.recv())
        .await
        .ok()
        .flatten()
        .map(|(p, _)| p)
}
