//! The same query suite on PostgreSQL, in a throw-away cluster.

mod common;

use common::pgcluster::PgCluster;

#[test]
fn suite_on_postgres() {
    let pg = PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
    type Suite = (&'static str, fn(&str));
    let suites: [Suite; 11] = [
        ("facets", common::facet_counts_match_brute_force),
        ("latest", common::latest_only_and_versions),
        ("time", common::time_overlap_and_exclusions),
        ("autocomplete", common::autocomplete),
        ("second", common::second_handle_sees_writes),
        ("rename", common::rename_conflicts_and_nesting),
        ("hostile", common::hostile_strings),
        ("words", common::word_cache_follows_changes),
        ("datasets", common::dataset_latest_and_name_children),
        ("bulk", common::bulk_upsert_in_chunks),
        ("roundtrip", common::records_round_trip),
    ];
    for (name, f) in suites {
        let url = pg.create_db(&format!("t_{name}"));
        f(&url);
    }
}

#[test]
fn two_nodes_share_one_catalog() {
    let pg = PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = pg.create_db("federation");
    let node_a = granary_catalog::Catalog::open(&url).unwrap();
    let node_b = granary_catalog::Catalog::open(&url).unwrap();
    let mut recs = common::random_records(200, 21);
    for r in &mut recs[..100] {
        r.node = Some("a".into());
    }
    for r in &mut recs[100..] {
        r.node = Some("b".into());
    }
    std::thread::scope(|s| {
        s.spawn(|| node_a.upsert_many(&recs[..100]).unwrap());
        s.spawn(|| {
            for r in &recs[100..] {
                node_b.upsert(r).unwrap();
            }
        });
    });
    for cat in [&node_a, &node_b] {
        assert_eq!(cat.len().unwrap(), 200);
        let q = granary_catalog::Query {
            latest_only: false,
            limit: 10_000,
            ..Default::default()
        };
        let p = cat.query(&q).unwrap();
        assert_eq!(
            p.hits
                .iter()
                .filter(|r| r.node.as_deref() == Some("a"))
                .count(),
            100
        );
        assert_eq!(
            p.hits
                .iter()
                .filter(|r| r.node.as_deref() == Some("b"))
                .count(),
            100
        );
    }
    node_a
        .remove(&recs[150].name, Some(recs[150].version))
        .unwrap();
    assert!(node_b
        .get(&recs[150].name, Some(recs[150].version))
        .unwrap()
        .is_none());
    assert_eq!(node_b.len().unwrap(), 199);
}
