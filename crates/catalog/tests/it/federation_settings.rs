//! Federation-wide settings: typed values, checked before anything is stored, a
//! generation that moves with every change and that a second handle (another node)
//! sees at once; the same suite on SQLite and on PostgreSQL.

use granary_catalog::{Catalog, FederationSettings, ReplicationRule};
use serde_json::json;

use crate::common::pgcluster::PgCluster;

fn suite(spec: &str) {
    let a = Catalog::open_unindexed(spec).expect("open");
    let b = Catalog::open_unindexed(spec).expect("open a second handle");
    // Nothing written yet: no settings, generation 0 (the table is not there).
    let s = a.federation_settings().expect("read");
    assert_eq!((s.gen, s.settings.is_empty()), (0, true));
    assert_eq!(b.federation_settings_since(0).expect("since"), None);

    let g1 = a
        .set_federation_setting("node_timeout", &json!(7), "/site/a")
        .expect("set node_timeout");
    assert_eq!(g1, 1);
    // The other handle sees the change by its generation alone, then reads it.
    assert_eq!(b.federation_settings_gen().expect("gen"), 1);
    let seen = b
        .federation_settings_since(0)
        .expect("since")
        .expect("moved");
    assert_eq!(seen.settings.node_timeout, Some(7.0));
    assert_eq!(seen.changes.len(), 1);
    assert_eq!(seen.changes[0].changed_by, "/site/a");
    assert!(seen.changes[0].changed_ms > 0);
    assert_eq!(b.federation_settings_since(g1).expect("since"), None);

    // Bad values and unknown keys are refused, with the reason; nothing is stored.
    for (k, v, says) in [
        ("node_timeout", json!(-1), "out of range"),
        (
            "replication",
            json!([{"prefix": "/a", "replicas": 0}]),
            "at least 1",
        ),
        ("replication_attempts", json!("many"), "1 to 100"),
        ("nodes_timeout", json!(5), "unknown federation setting"),
    ] {
        let e = a.set_federation_setting(k, &v, "/site/a").unwrap_err();
        assert!(e.to_string().contains(says), "{k} = {v}: {e}");
    }
    // A batch with one bad value stores none of it.
    let bad = FederationSettings {
        node_timeout: Some(9.0),
        replication_attempts: Some(0),
        ..Default::default()
    };
    assert!(a.set_federation_settings(&bad, "/site/a").is_err());
    let s = b.federation_settings().expect("read");
    assert_eq!((s.gen, s.settings.node_timeout), (1, Some(7.0)));

    // A batch (what a publishing node writes at start): one new generation.
    let rules = vec![
        ReplicationRule {
            prefix: "/cmip6".into(),
            replicas: 2,
        },
        ReplicationRule {
            prefix: "/cordex".into(),
            replicas: 1,
        },
    ];
    let all = FederationSettings {
        node_timeout: Some(3.5),
        replication: Some(rules.clone()),
        replication_period: Some(2.0),
        replication_retry: Some(0.5),
        replication_attempts: Some(4),
    };
    let g2 = b.set_federation_settings(&all, "/site/b").expect("set all");
    assert_eq!(g2, 2);
    let s = a
        .federation_settings_since(g1)
        .expect("since")
        .expect("moved");
    assert_eq!(s.settings, all);
    assert_eq!(s.gen, 2);
    assert_eq!(s.changes.len(), 5);
    assert!(s
        .changes
        .iter()
        .all(|c| c.changed_by == "/site/b" && c.gen == 2));

    // Unset: the key goes back to each node's own value; the generation moves on.
    let g3 = a
        .unset_federation_setting("replication", "granary federation settings")
        .expect("unset");
    assert_eq!(g3, 3);
    let s = b.federation_settings().expect("read");
    assert_eq!(s.settings.replication, None);
    assert_eq!(s.settings.node_timeout, Some(3.5));
    assert!(s
        .changes
        .iter()
        .any(|c| c.key == "replication" && !c.set && c.gen == 3));
    assert!(a.unset_federation_setting("x", "/site/a").is_err());
    assert_eq!(a.federation_settings_gen().expect("gen"), 3);
}

#[test]
fn settings_on_sqlite() {
    let t = tempfile::tempdir().expect("tempdir");
    let spec = t.path().to_str().expect("utf-8");
    // A catalog made before settings existed opens and gains the table on first write.
    drop(Catalog::open(spec).expect("create"));
    suite(spec);
    // They survive reopening.
    let c = Catalog::open(spec).expect("reopen");
    let s = c.federation_settings().expect("read");
    assert_eq!((s.gen, s.settings.replication_attempts), (3, Some(4)));
}

#[test]
fn settings_on_postgres() {
    let pg = PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
    suite(&pg.create_db("settings"));
}
