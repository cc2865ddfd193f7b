//! The shared replication work queue on a real PostgreSQL: concurrent
//! claimers (threads with their own connections, as nodes have) each get a
//! copy at most once while its lease runs, only their own node's copies,
//! and a copy whose claimer vanished is claimed again after the lease.

use crate::common::pgcluster;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use granary_catalog::replication::WorkQueue;

#[test]
fn copies_are_claimed_once_by_their_target_and_again_after_a_lost_lease() {
    let pg = pgcluster::PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = pg.create_db("replication_work");
    let mut planner = WorkQueue::connect(&url).unwrap();
    // Two planners offering the same copies: each is there once.
    let mut other = WorkQueue::connect(&url).unwrap();
    let mut new = 0;
    for k in 0..200u64 {
        for q in [&mut planner, &mut other] {
            if q.offer(
                &format!("/d/f{k}"),
                k + 1,
                "/site/c",
                Some("/site/a"),
                "/site/a",
            )
            .unwrap()
            {
                new += 1;
            }
        }
    }
    assert_eq!(new, 200);
    assert!(planner
        .offer("/d/g", 1, "/site/b", None, "/site/a")
        .unwrap());

    // Eight claimers of /site/c at once: every copy exactly once.
    let got = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (url, got) = (url.clone(), got.clone());
            std::thread::spawn(move || {
                let mut q = WorkQueue::connect(&url).unwrap();
                while let Some(w) = q.claim("/site/c", Duration::from_secs(600)).unwrap() {
                    assert_eq!(w.target, "/site/c");
                    assert_eq!(w.source.as_deref(), Some("/site/a"));
                    got.lock().unwrap().push((w.name.clone(), w.version));
                    q.done(w.id).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let got = got.lock().unwrap();
    let distinct: HashSet<_> = got.iter().cloned().collect();
    assert_eq!(got.len(), 200, "a copy was claimed twice or lost");
    assert_eq!(distinct.len(), 200);
    // /site/b's copy is still there, untouched by /site/c's claimers.
    assert_eq!(
        planner.pending().unwrap(),
        [("/d/g".to_string(), 1, "/site/b".to_string())]
    );

    // A claimer that dies (its lease 1 s, never done): nobody else gets the
    // copy while the lease runs; after it, the copy is claimed again.
    let w = planner
        .claim("/site/b", Duration::from_secs(1))
        .unwrap()
        .unwrap();
    assert_eq!(w.attempts, 0);
    assert_eq!(
        other.claim("/site/b", Duration::from_secs(1)).unwrap(),
        None
    );
    std::thread::sleep(Duration::from_millis(1500));
    let again = other
        .claim("/site/b", Duration::from_secs(60))
        .unwrap()
        .unwrap();
    assert_eq!((again.id, again.attempts), (w.id, 1));
    // A failure puts it back for later, with the reason.
    other
        .failed(again.id, "source down", Duration::from_secs(3600))
        .unwrap();
    assert_eq!(
        planner.claim("/site/b", Duration::from_secs(1)).unwrap(),
        None
    );
    // A target found down loses its offers.
    assert_eq!(planner.withdraw("/site/b").unwrap(), 1);
    assert!(planner.pending().unwrap().is_empty());
    // A copy that keeps failing is abandoned: never claimed again, not
    // pending, listed for the planners (another target), offered again to
    // the same target only once forgotten.
    assert!(planner.offer("/d/k", 1, "/site/b", None, "x").unwrap());
    let w = planner
        .claim("/site/b", Duration::from_secs(60))
        .unwrap()
        .unwrap();
    planner.abandon(w.id, "verification failed").unwrap();
    assert!(planner.pending().unwrap().is_empty());
    assert_eq!(
        planner.claim("/site/b", Duration::from_secs(60)).unwrap(),
        None
    );
    assert_eq!(
        planner.abandoned().unwrap(),
        [(
            "/d/k".to_string(),
            1,
            "/site/b".to_string(),
            "verification failed".to_string()
        )]
    );
    assert!(!planner.offer("/d/k", 1, "/site/b", None, "x").unwrap());
    // An offer its target never claims is abandoned too.
    assert!(planner.offer("/d/k", 1, "/site/z", None, "x").unwrap());
    std::thread::sleep(Duration::from_millis(300));
    let (a, f) = planner
        .forget_abandoned(Duration::from_millis(100), Duration::from_secs(3600))
        .unwrap();
    assert_eq!((a, f), (1, 0));
    assert_eq!(planner.abandoned().unwrap().len(), 2);
    let (_, f) = planner
        .forget_abandoned(Duration::from_secs(3600), Duration::ZERO)
        .unwrap();
    assert_eq!(f, 2);
    assert!(planner.offer("/d/k", 1, "/site/b", None, "x").unwrap());
    // Bad input: a version too large for the column is an error, no panic.
    assert!(planner
        .offer("/d/h", u64::MAX, "/site/c", None, "x")
        .is_err());
    assert!(WorkQueue::connect("/not/a/url").is_err());
}
