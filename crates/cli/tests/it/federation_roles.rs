//! Roles and the converging planner (decision 0107), with real daemons on
//! loopback sharing a throw-away PostgreSQL catalog: routers and clients are
//! never offered copies and what they keep never counts as a replica; a
//! target that refuses passes the copy to the next candidate; a copy that
//! keeps failing at its target is abandoned there and offered to another;
//! a node's publisher key exists from its first start; operator errors name
//! the server's cause without the password; `--json` commands answer JSON
//! when they fail; `stat --json` shows the manifest root's signer.

use crate::common;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use common::*;
use granary_catalog::replication::WorkQueue;
use granary_catalog::Catalog;
use serde_json::Value;

const LONG: Duration = Duration::from_secs(60);

/// `from` routes `prefix` to `to`'s TCP listener.
fn route(from: &Daemon, prefix: &str, to: &Daemon) {
    from.ok(&["route", "add", prefix, &tcp(to)]);
}

fn write(p: &Path, bytes: &[u8]) -> String {
    std::fs::write(p, bytes).unwrap();
    p.to_str().unwrap().to_string()
}

/// Waits (at most `limit`, a hang guard) until `done` holds; panics with
/// `what` when it never does.
fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < end, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The storage nodes that hold `name` (any version) per the catalog.
fn holders(cat: &Catalog, name: &str) -> Vec<String> {
    let mut v: Vec<String> = cat
        .locations(name, LONG)
        .unwrap()
        .into_iter()
        .filter(|l| !l.is_cache())
        .map(|l| l.node)
        .collect();
    v.sort();
    v
}

/// Every target the shared work queue has ever been given that is still
/// listed (pending or abandoned).
fn targets(q: &mut WorkQueue) -> Vec<String> {
    let mut t: Vec<String> = q.pending().unwrap().into_iter().map(|p| p.2).collect();
    t.extend(q.abandoned().unwrap().into_iter().map(|a| a.2));
    t
}

/// `replicate ARGS --json` run by `d` on catalog `url`.
fn replicate(d: &Daemon, url: &str, args: &[&str]) -> Output {
    let mut a = vec!["--catalog", url, "replicate", "--json"];
    a.extend_from_slice(args);
    run_within(d.command(&a), Duration::from_secs(120))
}

/// The JSON lines of `o`'s standard output (each must parse).
fn json_lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

#[test]
fn routers_and_clients_are_never_targets_and_what_they_keep_is_a_cache() {
    let work = tempfile::tempdir().unwrap();
    let fed = SharedCatalog::start(
        "roles",
        "node_timeout = 5\nreplication_period = 0.5\n\n[[replication]]\nprefix = \"/cmip6\"\nreplicas = 3\n",
    );
    let a = fed.site("/site/a", &[]);
    let b = fed.site("/site/b", &[]);
    let r = fed.site("/site/r", &["--role", "router"]);
    let q = fed.site("/user/q", &["--role", "client"]);
    for (x, y, p) in [(&a, &b, "/site/b"), (&b, &a, "/site/a")] {
        route(x, p, y);
    }
    // Everyone reaches everyone: R and Q are left out for their roles.
    for s in [&a, &b] {
        route(s, "/site/r", &r);
        route(s, "/user/q", &q);
    }
    for n in [&r, &q] {
        route(n, "/site/a", &a);
        route(n, "/site/b", &b);
    }
    trust(&a, &b);
    trust(&a, &q);
    let cat = Catalog::open_unindexed(&fed.url).unwrap();
    // The roles are in the nodes' rows.
    wait_for(LONG, "four heartbeats", || {
        cat.nodes(LONG).unwrap().len() == 4
    });
    let roles: Vec<(String, String)> = cat
        .nodes(LONG)
        .unwrap()
        .into_iter()
        .map(|n| (n.prefix, n.role.to_string()))
        .collect();
    assert_eq!(
        roles,
        [
            ("/site/a".to_string(), "storage".to_string()),
            ("/site/b".to_string(), "storage".to_string()),
            ("/site/r".to_string(), "router".to_string()),
            ("/user/q".to_string(), "client".to_string()),
        ]
    );

    // Three replicas wanted, two storage nodes: B gets the copy; R and Q,
    // up and free, are never offered one.
    a.ok(&[
        "put",
        &write(&work.path().join("x.bin"), &noise(60_000, 3)),
        "/cmip6/x",
    ]);
    wait_for(Duration::from_secs(120), "B holds /cmip6/x", || {
        holders(&cat, "/cmip6/x") == ["/site/a", "/site/b"]
    });
    // Q keeps the copy it fetches (a default `get`): a cache, located after
    // the storage holders, not a replica.
    let out = work.path().join("x.out");
    q.ok(&["get", "/cmip6/x", "-o", out.to_str().unwrap(), "--quiet"]);
    wait_for(LONG, "Q's kept copy registered", || {
        cat.locations("/cmip6/x", LONG)
            .unwrap()
            .iter()
            .any(|l| l.node == "/user/q")
    });
    let located = cat.locate("/cmip6/x", None, LONG).unwrap();
    let last = located.last().unwrap();
    assert_eq!(
        (last.node.as_str(), last.is_cache()),
        ("/user/q", true),
        "{located:?}"
    );
    let counts = cat.replicas("/cmip6", LONG).unwrap();
    assert_eq!(counts.len(), 1);
    assert_eq!((counts[0].up, counts[0].total), (2, 2), "{counts:?}");
    // `federation status --json` shows the roles. Without --catalog or
    // --config it uses the daemon's catalog, node timeout and rules.
    let st: Value = serde_json::from_str(&b.ok(&["federation", "status", "--json"])).unwrap();
    assert!(st.to_string().contains("\"router\""), "{st}");
    assert_eq!(nodes_up(&st).len(), 4, "{st}");
    assert_eq!(st["node_timeout_ms"], 5000, "{st}");
    assert_eq!(st["rules"][0]["prefix"], "/cmip6", "{st}");
    assert_eq!(st["under_replicated"][0]["name"], "/cmip6/x", "{st}");
    // `catalog check` too checks B's files against the shared catalog (its
    // replica is registered there), not a new local one.
    let ck: Value = serde_json::from_str(&b.ok(&["catalog", "check", "--json"])).unwrap();
    assert_eq!(ck["clean"], true, "{ck}");
    // Several planning rounds later, nothing was offered to R or Q.
    let mut wq = WorkQueue::connect(&fed.url).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let t = targets(&mut wq);
    assert!(
        !t.iter().any(|t| t == "/site/r" || t == "/user/q"),
        "offered to a router or client: {t:?}"
    );
    // `replicate --replicas` leaves them out too: no storage node is left.
    let o = replicate(&a, &fed.url, &["/cmip6/x", "--replicas", "1"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nothing done"), "{err}");
    let lines = json_lines(&o);
    assert!(
        lines.last().unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("nothing done"),
        "{lines:?}"
    );
}

#[test]
fn a_refusing_target_passes_the_copy_on_and_replicas_n_reaches_n() {
    let work = tempfile::tempdir().unwrap();
    let fed = SharedCatalog::start("converge", "");
    let a = fed.site("/site/a", &[]);
    // B does not trust A: it refuses A's commands. It sorts first.
    let b = fed.site("/site/b", &[]);
    let c = fed.site("/site/c", &[]);
    let d = fed.site("/site/d", &[]);
    for (t, p) in [(&b, "/site/b"), (&c, "/site/c"), (&d, "/site/d")] {
        route(&a, p, t);
        route(t, "/site/a", &a);
    }
    trust(&a, &c);
    trust(&a, &d);
    a.ok(&[
        "put",
        &write(&work.path().join("x.bin"), &noise(50_000, 4)),
        "/cmip6/x",
    ]);
    let cat = Catalog::open_unindexed(&fed.url).unwrap();
    wait_for(LONG, "four heartbeats", || {
        cat.nodes(LONG).unwrap().len() == 4
    });
    // Two copies: B refuses, C and D make them.
    let o = replicate(&a, &fed.url, &["/cmip6/x", "--replicas", "2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("chose /site/b, /site/c for /cmip6/x"), "{err}");
    assert!(
        err.contains("/site/b: FAILED") && err.contains("refused"),
        "{err}"
    );
    let lines = json_lines(&o);
    let states: Vec<(String, String)> = lines
        .iter()
        .map(|v| {
            (
                v["node"].as_str().unwrap_or("?").to_string(),
                v["state"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("/site/b".to_string(), "failed".to_string()),
            ("/site/c".to_string(), "done".to_string()),
            ("/site/d".to_string(), "done".to_string()),
        ]
    );
    assert_eq!(holders(&cat, "/cmip6/x"), ["/site/a", "/site/c", "/site/d"]);
    // The copies carry A's signature: `stat --json` names A's key.
    for n in [&a, &c] {
        let v: Value = serde_json::from_str(&n.ok(&["stat", "/cmip6/x", "--json"])).unwrap();
        let m = &v["manifest"];
        assert!(
            m["signer"].as_str().unwrap().starts_with("/site/a/KEY/"),
            "{v}"
        );
        assert_eq!(m["signature_type"], "SignatureEd25519", "{v}");
        assert!(m["name"].as_str().unwrap().starts_with("/cmip6/x/"), "{v}");
    }
    // One more: only B is left, and it refuses: the command fails saying
    // so; its JSON line says why.
    let o = replicate(&a, &fed.url, &["/cmip6/x", "--replicas", "1"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no candidate remains") && err.contains("1 short"),
        "{err}"
    );
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        (lines[0]["node"].as_str(), lines[0]["state"].as_str()),
        (Some("/site/b"), Some("failed")),
        "{lines:?}"
    );
    assert!(
        lines[0]["error"].as_str().unwrap().contains("refused"),
        "{lines:?}"
    );
}

#[test]
fn a_copy_that_keeps_failing_is_abandoned_and_offered_to_the_next_node() {
    let work = tempfile::tempdir().unwrap();
    let fed = SharedCatalog::start(
        "replan",
        "node_timeout = 5\nreplication_period = 0.5\nreplication_retry = 0.2\nreplication_attempts = 2\n\n[[replication]]\nprefix = \"/cmip6\"\nreplicas = 2\n",
    );
    let a = fed.site("/site/a", &[]);
    // B does not trust A's key: every copy it makes fails verification.
    let b = fed.site("/site/b", &[]);
    let c = fed.site("/site/c", &[]);
    for (t, p) in [(&b, "/site/b"), (&c, "/site/c")] {
        route(&a, p, t);
        route(t, "/site/a", &a);
    }
    route(&b, "/site/c", &c);
    route(&c, "/site/b", &b);
    trust(&a, &c);
    let cat = Catalog::open_unindexed(&fed.url).unwrap();
    wait_for(LONG, "three heartbeats", || {
        cat.nodes(LONG).unwrap().len() == 3
    });
    a.ok(&[
        "put",
        &write(&work.path().join("x.bin"), &noise(40_000, 5)),
        "/cmip6/x",
    ]);
    wait_for(Duration::from_secs(180), "C holds /cmip6/x", || {
        holders(&cat, "/cmip6/x") == ["/site/a", "/site/c"]
    });
    let mut wq = WorkQueue::connect(&fed.url).unwrap();
    let gave_up = wq.abandoned().unwrap();
    assert_eq!(gave_up.len(), 1, "{gave_up:?}");
    assert_eq!(
        (gave_up[0].0.as_str(), gave_up[0].2.as_str()),
        ("/cmip6/x", "/site/b")
    );
    assert!(!gave_up[0].3.is_empty(), "no reason kept");
    assert!(wq.pending().unwrap().is_empty());
    assert_eq!(holders(&cat, "/cmip6/x"), ["/site/a", "/site/c"]);
}

#[test]
fn a_node_has_its_publisher_key_from_its_first_start() {
    let a = site("/site/a", &[]);
    let list = a.ok(&["key", "list"]);
    assert!(list.contains("/site/a/KEY/"), "{list}");
    // Exported before anything is published.
    let cert = a.ok(&["key", "export"]);
    assert!(!cert.trim().is_empty());
    assert!(a.ok(&["ls"]).trim().is_empty());
    // A node started without a prefix gets a key under the made-up one; a
    // prefix given later is not refused for that unused key.
    let first = Daemon::start(&[]);
    assert!(first.ok(&["key", "list"]).contains("/KEY/"));
    let data = first.data.clone();
    let mut first = first;
    let _ = std::process::Command::new("kill")
        .arg(first.child.id().to_string())
        .status();
    let _ = first.child.wait();
    let dir = std::mem::replace(&mut first.dir, tempfile::tempdir().unwrap());
    let again = Daemon::start_at(dir, data, &["--node-prefix", "/site/z"]);
    let list = again.ok(&["key", "list"]);
    assert!(list.contains("/site/z/KEY/"), "{list}");
}

#[test]
fn a_wrong_password_names_the_servers_cause_and_never_the_password() {
    let pg = pgcluster::PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
    let _ = pg.create_db("pw");
    let url = pg.password_login("site", "right-one", "pw");
    let secret = "Wr0ngS3cret";
    let bad = url.replacen("postgres://site@", &format!("postgres://site:{secret}@"), 1);
    let d = tempfile::tempdir().unwrap();
    let mut cmd = granary();
    cmd.args([
        "--data-dir",
        d.path().to_str().unwrap(),
        "--socket",
        d.path().join("g.sock").to_str().unwrap(),
        "--catalog",
        &bad,
        "daemon",
        "--http",
        "off",
    ]);
    let o = run_within(cmd, Duration::from_secs(60));
    assert!(!o.status.success(), "the daemon started on a refused login");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        all.contains("password authentication failed"),
        "the server's reason is missing: {all}"
    );
    assert!(!all.contains(secret), "the password is printed: {all}");
    // A client command with --json: the same, as JSON.
    let mut cmd = granary();
    cmd.args([
        "--data-dir",
        d.path().to_str().unwrap(),
        "--catalog",
        &bad,
        "federation",
        "status",
        "--json",
    ]);
    let o = run_within(cmd, Duration::from_secs(60));
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    let v: Value = serde_json::from_str(out.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    let e = v["error"].as_str().unwrap();
    assert!(e.contains("password authentication failed"), "{e}");
    assert!(!format!("{out}{}", String::from_utf8_lossy(&o.stderr)).contains(secret));
}

/// `d`'s face to `uri` is listed with `state=STATE`.
fn face_state(d: &Daemon, uri: &str, state: &str) -> bool {
    d.ok(&["face", "list"])
        .lines()
        .any(|l| l.contains(&format!("remote={uri} ")) && l.contains(&format!("state={state}")))
}

#[test]
fn a_router_on_the_catalog_redials_a_site_whose_heartbeat_returns() {
    let fed = SharedCatalog::start("redial", "node_timeout = 2\n");
    let a = fed.site("/site/a", &[]);
    let a_uri = tcp(&a);
    let a_listen = format!("tcp://{}", a.tcp.clone().unwrap());
    let work = tempfile::tempdir().unwrap();
    let conf = work.path().join("r.toml");
    std::fs::write(
        &conf,
        format!(
            "node_prefix = \"/site/r\"\nrole = \"router\"\nnode_timeout = 2\n\n[[route]]\nprefix = \"/site/a\"\nface = \"{a_uri}\"\n"
        ),
    )
    .unwrap();
    let log = work.path().join("r.log");
    let rdir = tempfile::tempdir().unwrap();
    let rdata = rdir.path().to_path_buf();
    let r = Daemon::start_with_stderr(
        rdir,
        rdata,
        &[
            "--catalog",
            &fed.url,
            "--config",
            conf.to_str().unwrap(),
            "--log",
            "warn,granary_forwarder=info,granary_node=info",
        ],
        std::process::Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    wait_for(LONG, "R's face to A up", || face_state(&r, &a_uri, "up"));
    let cat = Catalog::open_unindexed(&fed.url).unwrap();
    let short = Duration::from_secs(2);
    // A goes away: R's face goes down and A's heartbeat stops.
    let a_data = a.data.clone();
    let mut a = a;
    let a_dir = std::mem::replace(&mut a.dir, tempfile::tempdir().unwrap());
    drop(a);
    wait_for(LONG, "R's face to A down", || {
        face_state(&r, &a_uri, "down")
    });
    wait_for(LONG, "A taken for down", || {
        cat.nodes(short)
            .unwrap()
            .iter()
            .any(|n| n.prefix == "/site/a" && !n.up)
    });
    // A comes back on the same address: its heartbeat makes R dial at once.
    let _a = Daemon::start_at(
        a_dir,
        a_data,
        &[
            "--listen",
            &a_listen,
            "--node-prefix",
            "/site/a",
            "--catalog",
            &fed.url,
            "--config",
            fed.config.to_str().unwrap(),
        ],
    );
    let t = Instant::now();
    wait_for(LONG, "R's face to A up again", || {
        face_state(&r, &a_uri, "up")
    });
    eprintln!("R's face to A up {:?} after A was ready again", t.elapsed());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("/site/a back (heartbeat)") && text.contains("dialled now"),
        "R did not re-dial on A's heartbeat: {text}"
    );
}
