//! One configuration for the federation: `node_timeout` and the replication
//! policy live in the catalog's federation settings. A site whose config
//! file says `federation_settings = "publish"` writes them there; every node
//! and client command on the catalog reads them; a change made with
//! `granary federation settings set` reaches running daemons (their planner
//! and liveness) without a restart; flag > config file > catalog > default.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use granary_catalog::Catalog;
use serde_json::Value;

/// Waits (at most `limit`, a hang guard) until `done` holds; panics with
/// `what` when it never does.
fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < end, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn json(d: &Daemon, args: &[&str]) -> Value {
    let out = d.ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON: {out:?}: {e}"))
}

/// A site on the shared catalog whose standard error (its log, with the
/// federation settings' lines) goes to `log`.
fn logged_site(fed: &SharedCatalog, prefix: &str, log: &Path) -> Daemon {
    let f = std::fs::File::create(log).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    Daemon::start_with_stderr(
        dir,
        data,
        &[
            "--listen",
            "tcp://127.0.0.1:0",
            "--node-prefix",
            prefix,
            "--catalog",
            fed.url.as_str(),
            "--config",
            fed.config.to_str().unwrap(),
            "--log",
            "warn,granary_node::settings=info",
        ],
        std::process::Stdio::from(f),
    )
}

#[test]
fn a_running_federation_follows_the_catalogs_settings_without_a_restart() {
    let work = tempfile::tempdir().unwrap();
    // The sites' config publishes its federation-wide keys; no rules yet.
    let fed = SharedCatalog::start(
        "fedsettings",
        "federation_settings = \"publish\"\nnode_timeout = 30\n",
    );
    let a_log = work.path().join("a.log");
    let a = logged_site(&fed, "/site/a", &a_log);
    let b = fed.site("/site/b", &[]);
    a.ok(&["route", "add", "/site/b", &tcp(&b)]);
    b.ok(&["route", "add", "/site/a", &tcp(&a)]);
    trust(&a, &b);
    trust(&b, &a);

    // Published: the catalog holds it, and client commands on either site
    // (no --catalog, no --node-timeout) use it. B, started after, found the
    // same values there and wrote nothing.
    let s = json(&a, &["federation", "settings", "show", "--json"]);
    assert_eq!(s["settings"]["node_timeout"], 30.0, "{s}");
    assert_eq!(s["changes"][0]["changed_by"], "/site/a", "{s}");
    let st = json(&b, &["federation", "status", "--json"]);
    assert_eq!(st["node_timeout_ms"], 30_000, "{st}");
    assert_eq!(st["rules"], serde_json::json!([]), "{st}");

    let x = work.path().join("x.bin");
    std::fs::write(&x, noise(50_000, 7)).unwrap();
    a.ok(&["put", x.to_str().unwrap(), "/cmip6/x"]);

    // A bad value is refused and nothing is stored.
    let o = b.cli(&["federation", "settings", "set", "node_timeout", "-3"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("node_timeout") && err.contains("out of range"),
        "{err}"
    );
    let o = b.cli(&["federation", "settings", "set", "replicas", "2"]);
    assert!(!o.status.success());
    let gen = json(&b, &["federation", "settings", "show", "--json"])["generation"].clone();

    // The operator changes the policy on the catalog, from B: a rule, a
    // short period, a shorter node timeout. The running daemons apply it.
    for (k, v) in [
        ("node_timeout", "7"),
        ("replication_period", "0.5"),
        ("replication", "[{prefix = \"/cmip6\", replicas = 2}]"),
    ] {
        b.ok(&["federation", "settings", "set", k, v]);
    }
    let s = json(&a, &["federation", "settings", "show", "--json"]);
    assert_eq!(s["generation"], gen.as_i64().unwrap() + 3, "{s}");
    // A's planner, started without rules, offers the copy; B makes it.
    let cat = Catalog::open_unindexed(&fed.url).unwrap();
    wait_for(Duration::from_secs(120), "B holds /cmip6/x", || {
        let mut holders: Vec<String> = cat
            .locations("/cmip6/x", Duration::from_secs(60))
            .unwrap()
            .into_iter()
            .map(|l| l.node)
            .collect();
        holders.sort();
        holders == ["/site/a", "/site/b"]
    });
    // A says what changed, and its liveness judgement follows.
    wait_for(
        Duration::from_secs(60),
        "A logs the new node_timeout",
        || {
            std::fs::read_to_string(&a_log)
                .unwrap_or_default()
                .contains("federation setting node_timeout changed: 30.0 -> 7.0")
        },
    );
    let log = std::fs::read_to_string(&a_log).unwrap();
    assert!(
        log.contains("federation setting replication changed"),
        "{log}"
    );
    // Client commands see the catalog's values now.
    let st = json(&a, &["federation", "status", "--json"]);
    assert_eq!(st["node_timeout_ms"], 7000, "{st}");
    assert_eq!(st["rules"][0]["prefix"], "/cmip6", "{st}");
    assert_eq!(st["under_replicated"], serde_json::json!([]), "{st}");
    let loc = json(&a, &["federation", "locate", "/cmip6/x", "--json"]);
    assert_eq!(loc["locations"].as_array().unwrap().len(), 2, "{loc}");
    // `federation check` judges liveness by the catalog's value too, from a
    // site and from an operator's own data directory where no daemon ever ran
    // (there it took 60 s whatever the catalog said).
    let ck = json(&b, &["federation", "check", "--json"]);
    assert_eq!(ck["node_timeout_ms"], 7000, "{ck}");
    assert_eq!(ck["bad"], 0, "{ck}");
    let operator = work.path().join("operator");
    let out = granary()
        .arg("--data-dir")
        .arg(&operator)
        .arg("--socket")
        .arg(&b.socket)
        .args([
            "--catalog",
            fed.url.as_str(),
            "federation",
            "check",
            "--json",
        ])
        .output()
        .unwrap();
    let ck: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "operator's check: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(ck["node_timeout_ms"], 7000, "{ck}");

    // Precedence: a flag over a config file over the catalog.
    let st = json(
        &a,
        &["federation", "status", "--json", "--node-timeout", "3"],
    );
    assert_eq!(st["node_timeout_ms"], 3000, "{st}");
    let own = work.path().join("own.toml");
    std::fs::write(
        &own,
        "node_timeout = 11\n[[replication]]\nprefix = \"/cordex\"\nreplicas = 1\n",
    )
    .unwrap();
    let st = json(
        &a,
        &[
            "federation",
            "status",
            "--json",
            "--config",
            own.to_str().unwrap(),
        ],
    );
    assert_eq!(st["node_timeout_ms"], 11_000, "{st}");
    assert_eq!(st["rules"][0]["prefix"], "/cordex", "{st}");
}
