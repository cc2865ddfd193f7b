//! Forwarding hints through the pipelines (NFD 24.07's semantics): the
//! region strips, the first hint name with next hops picks the FIB entry,
//! the CS answers by name first, the PIT ignores hints.

use granary_face::internal::AppFace;
use granary_face::{LinkFields, NetPacket};
use granary_packet::types::nack_reason;
use granary_packet::{DataBuilder, Interest, InterestFields, Name};
use tokio::time::Instant;

use crate::forwarder::{Forwarder, ForwarderConfig};
use crate::test_faces::{forwarder_with_faces, got};

fn n(u: &str) -> Name {
    Name::from_uri(u).unwrap()
}

/// A forwarder with faces 1 (consumer), 2, 3 and 4 (upstreams).
fn setup(region: &[&str]) -> (Forwarder, Vec<AppFace>) {
    let cfg = ForwarderConfig {
        network_region: region.iter().map(|r| n(r)).collect(),
        ..Default::default()
    };
    forwarder_with_faces(cfg, &[None; 4])
}

fn interest(name: &str, hint: &[&str], nonce: u32) -> Interest {
    let mut f = InterestFields::new(n(name));
    f.forwarding_hint = hint.iter().map(|h| n(h)).collect();
    f.nonce = Some(nonce);
    f.lifetime = Some(1000);
    f.encode()
}

fn data(name: &str) -> granary_packet::Data {
    DataBuilder::new(n(name))
        .content(&b"x"[..])
        .freshness_period(10_000)
        .encode_with_signature(bytes::Bytes::from_static(&[0; 32]))
}

fn send(fw: &mut Forwarder, face: u64, p: NetPacket) {
    fw.on_packet(face, &p, &LinkFields::default(), Instant::now());
}

#[tokio::test]
async fn first_hint_with_next_hops_is_used_and_the_name_is_not_looked_up() {
    let (mut fw, mut apps) = setup(&[]);
    fw.add_route(n("/cmip6"), 2, 0);
    fw.add_route(n("/site/b"), 3, 0);
    fw.add_route(n("/site/c"), 4, 0);
    // /site/a has no route: the second hint name's entry is used, not the
    // Interest name's, and the hint travels on unchanged.
    send(
        &mut fw,
        1,
        NetPacket::Interest(interest(
            "/cmip6/x",
            &["/site/a", "/site/b/n1", "/site/c"],
            1,
        )),
    );
    match got(&mut apps[2]).await {
        Some(NetPacket::Interest(i)) => {
            assert_eq!(i.name, n("/cmip6/x"));
            assert_eq!(i.forwarding_hint.len(), 3);
        }
        other => panic!("face 3 got {other:?}"),
    }
    assert!(got(&mut apps[1]).await.is_none(), "by-name route used");
    assert!(got(&mut apps[3]).await.is_none(), "later hint used");
    assert_eq!(fw.stats.hinted, 1);
    assert_eq!(fw.stats.hint_stripped, 0);
}

#[tokio::test]
async fn no_hint_name_with_next_hops_is_no_route() {
    let (mut fw, mut apps) = setup(&[]);
    fw.add_route(n("/cmip6"), 2, 0);
    send(
        &mut fw,
        1,
        NetPacket::Interest(interest("/cmip6/x", &["/unknown"], 2)),
    );
    match got(&mut apps[0]).await {
        Some(NetPacket::Nack(_, r)) => assert_eq!(r, nack_reason::NO_ROUTE),
        other => panic!("consumer got {other:?}"),
    }
    assert!(got(&mut apps[1]).await.is_none());
    assert_eq!(fw.stats.hinted, 0);
    assert_eq!(fw.stats.no_route, 1);
}

#[tokio::test]
async fn default_route_matches_every_hint() {
    // NFD: in the consumer region the default route `/` is the entry found.
    let (mut fw, mut apps) = setup(&[]);
    fw.add_route(Name::new(), 2, 0);
    send(
        &mut fw,
        1,
        NetPacket::Interest(interest("/x", &["/site/z"], 3)),
    );
    assert!(
        matches!(got(&mut apps[1]).await, Some(NetPacket::Interest(i)) if i.forwarding_hint == vec![n("/site/z")])
    );
    assert_eq!(fw.stats.hinted, 1);
}

#[tokio::test]
async fn hint_in_the_region_is_stripped_and_the_name_is_used() {
    // Region /site/a/n1: a hint /site/a is a prefix of it (NFD's test);
    // /site/a/n1/more is not.
    let (mut fw, mut apps) = setup(&["/site/a/n1"]);
    fw.add_route(n("/cmip6"), 2, 0);
    fw.add_route(n("/site/a"), 3, 0);
    send(
        &mut fw,
        1,
        NetPacket::Interest(interest("/cmip6/x", &["/site/q", "/site/a"], 4)),
    );
    match got(&mut apps[1]).await {
        Some(NetPacket::Interest(i)) => {
            assert_eq!(i.name, n("/cmip6/x"));
            assert!(i.forwarding_hint.is_empty(), "hint sent on");
            assert_eq!(i.nonce, Some(4));
        }
        other => panic!("face 2 got {other:?}"),
    }
    assert!(got(&mut apps[2]).await.is_none());
    assert_eq!(fw.stats.hint_stripped, 1);
    assert_eq!(fw.stats.hinted, 0);

    assert!(!fw.in_producer_region(&[n("/site/a/n1/more")]));
    assert!(fw.in_producer_region(&[n("/site/a/n1")]));
    assert!(fw.in_producer_region(&[n("/")]));
}

#[tokio::test]
async fn cs_answers_by_name_before_the_hint() {
    let (mut fw, mut apps) = setup(&[]);
    fw.add_route(n("/site/a"), 2, 0);
    send(
        &mut fw,
        1,
        NetPacket::Interest(interest("/d/1", &["/site/a"], 5)),
    );
    assert!(matches!(
        got(&mut apps[1]).await,
        Some(NetPacket::Interest(_))
    ));
    let d = data("/d/1");
    send(&mut fw, 2, NetPacket::Data(d.clone()));
    assert!(matches!(got(&mut apps[0]).await, Some(NetPacket::Data(_))));
    // Another hint, or none: answered from the CS, nothing goes upstream.
    send(
        &mut fw,
        3,
        NetPacket::Interest(interest("/d/1", &["/site/zz"], 6)),
    );
    assert!(matches!(got(&mut apps[2]).await, Some(NetPacket::Data(x)) if x.name() == d.name()));
    assert!(got(&mut apps[1]).await.is_none());
}

#[tokio::test]
async fn pit_ignores_hints() {
    // Two Interests for one name with different hints share a PIT entry:
    // the second is aggregated (not forwarded) and both get the Data.
    let (mut fw, mut apps) = setup(&[]);
    fw.add_route(n("/site/a"), 2, 0);
    fw.add_route(n("/site/b"), 3, 0);
    send(
        &mut fw,
        1,
        NetPacket::Interest(interest("/d/2", &["/site/a"], 7)),
    );
    send(
        &mut fw,
        4,
        NetPacket::Interest(interest("/d/2", &["/site/b"], 8)),
    );
    assert!(matches!(
        got(&mut apps[1]).await,
        Some(NetPacket::Interest(_))
    ));
    assert_eq!(fw.pit.len(), 1);
    let d = data("/d/2");
    send(&mut fw, 2, NetPacket::Data(d));
    assert!(matches!(got(&mut apps[0]).await, Some(NetPacket::Data(_))));
    assert!(matches!(got(&mut apps[3]).await, Some(NetPacket::Data(_))));
}

#[tokio::test]
async fn a_looping_hinted_interest_is_nacked_duplicate() {
    let (mut fw, mut apps) = setup(&[]);
    fw.add_route(n("/site/a"), 2, 0);
    send(
        &mut fw,
        1,
        NetPacket::Interest(interest("/d/3", &["/site/a"], 9)),
    );
    assert!(matches!(
        got(&mut apps[1]).await,
        Some(NetPacket::Interest(_))
    ));
    // The same nonce comes back from the upstream: a loop.
    send(
        &mut fw,
        2,
        NetPacket::Interest(interest("/d/3", &["/site/a"], 9)),
    );
    match got(&mut apps[1]).await {
        Some(NetPacket::Nack(_, r)) => assert_eq!(r, nack_reason::DUPLICATE),
        other => panic!("upstream got {other:?}"),
    }
    assert_eq!(fw.stats.loops, 1);
}
