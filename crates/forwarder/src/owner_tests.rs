//! Owner-only prefixes (decision 0103): an Interest under one is taken from
//! the forwarder's own user, root and in-process faces, and refused with
//! Nack NoRoute from a Unix face whose peer is another user.

use granary_face::internal::AppFace;
use granary_face::{LinkFields, NetPacket};
use granary_packet::types::nack_reason;
use granary_packet::{InterestFields, Name};
use tokio::time::Instant;

use crate::forwarder::{Forwarder, ForwarderConfig};
use crate::test_faces::{forwarder_with_faces, got};

fn n(u: &str) -> Name {
    Name::from_uri(u).unwrap()
}

/// Face 1 has no peer user id (in-process), 2 is root, 3 the forwarder's
/// own user, 4 another user; face 5 is the command's producer.
fn setup() -> (Forwarder, Vec<AppFace>) {
    let cfg = ForwarderConfig {
        owner_only: vec![n("/localhost/granary/repo/put")],
        ..Default::default()
    };
    let me = rustix::process::geteuid().as_raw();
    let other = if me == 4242 { 4243 } else { 4242 };
    let (mut fw, apps) = forwarder_with_faces(cfg, &[None, Some(0), Some(me), Some(other), None]);
    fw.add_route(n("/localhost/granary/repo"), 5, 0);
    (fw, apps)
}

#[tokio::test]
async fn owner_only_prefixes_are_taken_from_the_owner_and_refused_from_other_users() {
    let (mut fw, mut apps) = setup();
    let send = |fw: &mut Forwarder, face: u64, name: &str, nonce: u32| {
        let mut f = InterestFields::new(n(name));
        f.nonce = Some(nonce);
        f.lifetime = Some(1000);
        let p = NetPacket::Interest(f.encode());
        fw.on_packet(face, &p, &LinkFields::default(), Instant::now());
    };
    // In-process, root and the own user: forwarded to the producer.
    for face in 1..=3u64 {
        send(
            &mut fw,
            face,
            &format!("/localhost/granary/repo/put/{face}"),
            face as u32,
        );
        match got(&mut apps[4]).await {
            Some(NetPacket::Interest(i)) => {
                assert_eq!(i.name, n(&format!("/localhost/granary/repo/put/{face}")))
            }
            other => panic!("face {face}: not forwarded: {other:?}"),
        }
    }
    // Another user: Nack NoRoute back, nothing reaches the producer.
    send(&mut fw, 4, "/localhost/granary/repo/put/4", 4);
    match got(&mut apps[3]).await {
        Some(NetPacket::Nack(_, r)) => assert_eq!(r, nack_reason::NO_ROUTE),
        other => panic!("another user's command was not refused: {other:?}"),
    }
    assert!(got(&mut apps[4]).await.is_none());
    assert_eq!(fw.stats.not_owner, 1);
    // The same user's Interests elsewhere under the prefix's parent pass.
    send(&mut fw, 4, "/localhost/granary/repo/holds", 5);
    assert!(matches!(
        got(&mut apps[4]).await,
        Some(NetPacket::Interest(_))
    ));
}
