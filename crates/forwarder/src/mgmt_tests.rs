//! What management reports of a face (faces/list): NFD's counters and
//! Granary's congestion-mark count.

use granary_face::Counters;

use crate::forwarder::ForwarderConfig;
use crate::mgmt::{face_statuses, Managed};
use crate::test_faces::forwarder_with_faces;

#[tokio::test]
async fn face_list_counts_the_marks_a_face_sent_and_omits_none() {
    let (fw, _apps) = forwarder_with_faces(ForwarderConfig::default(), &[None, None]);
    let face = fw.faces().get(&2).expect("face 2");
    for _ in 0..3 {
        Counters::inc(&face.counters.out_marked);
    }
    let v = face_statuses(&fw);
    let marks: Vec<(u64, Option<u64>)> = v
        .iter()
        .map(|f| (f.face_id, f.n_out_congestion_marks))
        .collect();
    // Face 1 never marked: the element is NFD's, without the extension.
    assert_eq!(marks, vec![(1, None), (2, Some(3))]);
}

#[tokio::test]
async fn face_list_counts_the_packets_a_full_queue_dropped() {
    let (fw, _apps) = forwarder_with_faces(ForwarderConfig::default(), &[None, None]);
    let face = fw.faces().get(&1).expect("face 1");
    Counters::inc(&face.counters.out_dropped);
    Counters::inc(&face.counters.out_dropped);
    let v = face_statuses(&fw);
    let drops: Vec<(u64, Option<u64>)> =
        v.iter().map(|f| (f.face_id, f.n_out_queue_drops)).collect();
    assert_eq!(drops, vec![(1, Some(2)), (2, None)]);
}
