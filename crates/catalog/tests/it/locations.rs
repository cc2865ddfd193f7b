//! The location catalog on both back ends (SQLite; PostgreSQL in a throw-away cluster).

use crate::common;

use common::locations as l;
use common::pgcluster::PgCluster;

#[test]
fn locations_on_sqlite() {
    for f in [
        l::per_node_changes,
        l::node_timeout,
        l::concurrent_last_locations,
        l::least_loaded_first,
        l::roles,
    ] {
        let d = tempfile::tempdir().unwrap();
        f(&d.path().join("cat").display().to_string());
    }
}

#[test]
fn locations_on_postgres() {
    let pg = PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
    type Suite = (&'static str, fn(&str));
    let suites: [Suite; 5] = [
        ("per_node", l::per_node_changes),
        ("timeout", l::node_timeout),
        ("concurrent", l::concurrent_last_locations),
        ("load", l::least_loaded_first),
        ("roles", l::roles),
    ];
    for (name, f) in suites {
        f(&pg.create_db(&format!("l_{name}")));
    }
}
