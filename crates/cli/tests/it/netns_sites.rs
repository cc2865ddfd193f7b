//! Three sites on one location catalog, across network namespaces: sites
//! A, B and C (one node each, `--node-prefix /site/a` …), a router R with
//! static routes to the three site prefixes and none for /cmip6, and a
//! consumer Q routing everything to R. One throw-away PostgreSQL serves the
//! federation's catalog on a Unix socket in a temporary directory: network
//! namespaces share the file system, so every node reaches it at the same
//! path while no site needs an address route to any other (the catalog
//! traffic is not on the emulated links, like a management network).
//! Needs root (see netns/mod.rs) and PostgreSQL (scripts/setup-test-deps.sh).
//!
//! One test, in steps that build on each other (one cluster, one testbed):
//! a. Q finds a file published at A through the catalog and fetches it with
//!    hinted Interests that R forwards to A (R's counters show them);
//!    `replicate --replicas N` picks the up nodes without a copy.
//! b. `replicate --to /site/b`: B serves A's manifest root byte for byte;
//!    A is killed while a fetch of Q is in flight: it completes from B with
//!    no verified segment fetched twice, and Q's next fetch too.
//! c. The `[[replication]]` policy (`/cmip6/kept`, 2 replicas) copies to C
//!    once A is down; A restarted reconciles its files into the catalog
//!    and is offered again.

use crate::common;
use crate::netns;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{files_under, hinted, noise, pgcluster, run_within, trust};
use granary_testbed::LinkSpec;
use netns::Node;
use serde_json::Value;

/// A silent node is down after this (seconds): short, so the test does not
/// wait long for it.
const NODE_TIMEOUT: u64 = 3;

fn command(n: &Node, args: &[&str]) -> Command {
    let mut c = netns::granary();
    c.args([
        "--data-dir",
        n.data.to_str().unwrap(),
        "--socket",
        n.socket.to_str().unwrap(),
    ])
    .args(args);
    c
}

impl common::Cli for Node {
    fn run_ok(&self, args: &[&str]) -> String {
        self.ok(args)
    }
    fn scratch(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// Interests the router sent on its face to `remote` (`face list`'s
/// `out=<N>i`).
fn sent_to(r: &Node, remote: SocketAddr) -> u64 {
    let faces = r.ok(&["face", "list"]);
    let line = faces
        .lines()
        .find(|l| l.contains(&format!("remote=udp4://{remote} ")))
        .unwrap_or_else(|| panic!("no face to {remote}: {faces}"));
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("out="))
        .and_then(|w| w.split('i').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no out counter in {line}"))
}

/// Q's fetch of `name` to `out`, located through the shared catalog, with
/// the JSON report.
fn get(q: &Node, name: &str, out: &Path, url: &str) -> Command {
    command(
        q,
        &[
            "--catalog",
            url,
            "get",
            name,
            "-o",
            out.to_str().unwrap(),
            "--no-publish",
            "--no-dedup",
            "--quiet",
            "--json",
        ],
    )
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The stored manifest root of the only version of the name whose last
/// component is `last` in `n`'s repository.
fn manifest(n: &Node, last: &str) -> Vec<u8> {
    let repo = n.data.join("repo");
    let found: Vec<PathBuf> = files_under(&repo)
        .into_iter()
        .filter(|p| {
            p.to_string_lossy().ends_with(".manifest")
                && p.parent().is_some_and(|d| d.ends_with(last))
        })
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    std::fs::read(repo.join(&found[0])).unwrap()
}

/// The up nodes the catalog offers for `name` (newest version), sorted.
fn holders(cat: &granary_catalog::Catalog, name: &str) -> Vec<String> {
    // Sorted: which nodes hold it is checked here; the order `locate`
    // offers them in (least loaded first, decision 0098) is tested in the
    // catalog's own tests.
    let mut h: Vec<String> = cat
        .locate(name, None, Duration::from_secs(NODE_TIMEOUT))
        .unwrap()
        .into_iter()
        .map(|l| l.node)
        .collect();
    h.sort();
    h
}

/// Polls `f` until it gives Some, for at most `limit`.
fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn three_sites_share_a_location_catalog_replicate_and_survive_a_site() {
    let Some((mut tb, _turn)) = netns::testbed(|_| {}) else {
        return;
    };
    let pg = pgcluster::PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
    pg.create_db("sites");
    let url = format!(
        "postgres://postgres@/sites?host={}&port={}",
        pg.socket_dir().display(),
        pg.port()
    );
    let cat = granary_catalog::Catalog::open_unindexed(&url).unwrap();

    let ha = tb.add_host("a").unwrap();
    let hb = tb.add_host("b").unwrap();
    let hc = tb.add_host("c").unwrap();
    let hr = tb.add_host("r").unwrap();
    let hq = tb.add_host("q").unwrap();
    // A's link has a 5 ms one-way delay: a fetch from A takes long enough
    // to kill A in the middle of it.
    let la = tb
        .link(
            hr,
            ha,
            LinkSpec::symmetric(None, Duration::from_millis(5), 0.0),
        )
        .unwrap();
    let lb = tb.link(hr, hb, LinkSpec::clean()).unwrap();
    let lc = tb.link(hr, hc, LinkSpec::clean()).unwrap();
    let lq = tb.link(hq, hr, LinkSpec::clean()).unwrap();

    let work = tempfile::tempdir().unwrap();
    let conf = work.path().join("site.toml");
    std::fs::write(
        &conf,
        format!(
            "node_timeout = {NODE_TIMEOUT}\n\n[[replication]]\nprefix = \"/cmip6/kept\"\nreplicas = 2\n"
        ),
    )
    .unwrap();
    let site_flags = |prefix: &'static str| -> Vec<String> {
        vec![
            "--node-prefix".into(),
            prefix.into(),
            "--catalog".into(),
            url.clone(),
            "--config".into(),
            conf.to_str().unwrap().into(),
        ]
    };
    let flags_a = site_flags("/site/a");
    let flags_a: Vec<&str> = flags_a.iter().map(|s| s.as_str()).collect();
    let mut a = Node::start(&mut tb, ha, &flags_a);
    let b = Node::start(
        &mut tb,
        hb,
        &site_flags("/site/b")
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>(),
    );
    let c = Node::start(
        &mut tb,
        hc,
        &site_flags("/site/c")
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>(),
    );
    // R: a static route to each site's prefix, nothing for /cmip6.
    let to_a = tb.udp_path(la, hr, 6363).unwrap();
    let to_b = tb.udp_path(lb, hr, 6363).unwrap();
    let to_c = tb.udp_path(lc, hr, 6363).unwrap();
    let rconf = work.path().join("r.toml");
    let mut r_toml = "node_prefix = \"/site/r\"\n".to_string();
    for (p, f) in [("a", to_a), ("b", to_b), ("c", to_c)] {
        r_toml +=
            &format!("\n[[route]]\nprefix = \"/site/{p}\"\nface = \"udp4://{f}\"\ncost = 1\n");
    }
    std::fs::write(&rconf, r_toml).unwrap();
    let r = Node::start(&mut tb, hr, &["--config", rconf.to_str().unwrap()]);
    // Each site has a default route to R, as a site behind one gateway
    // would (a hint naming the site itself follows the site's captured
    // node-prefix route to its repository, not `/` back to R); Q sends
    // everything to R.
    let q = Node::start(&mut tb, hq, &[]);
    for (n, l, h) in [(&a, la, ha), (&b, lb, hb), (&c, lc, hc)] {
        let to_r = format!("udp4://{}", tb.udp_path(l, h, 6363).unwrap());
        n.ok(&["route", "add", "/", &to_r]);
    }
    let to_r = tb.udp_path(lq, hq, 6363).unwrap();
    q.ok(&["route", "add", "/", &format!("udp4://{to_r}")]);
    // Q knows B and C as farther than A (a higher route cost): locations are
    // offered nearest first (decision 0098), so a fetch of what A and B both
    // hold starts at A, the site this test kills.
    for far in ["/site/b", "/site/c"] {
        q.ok(&[
            "route",
            "add",
            far,
            &format!("udp4://{to_r}"),
            "--cost",
            "10",
        ]);
    }

    // A publishes; B, C and Q trust A's key.
    let x = noise(1 << 20, 1);
    let kept = noise(200_000, 2);
    let rep = noise(150_000, 3);
    let big = noise(6 << 20, 4);
    for (bytes, name) in [
        (&x, "/cmip6/x"),
        (&kept, "/cmip6/kept/p"),
        (&rep, "/cmip6/r"),
        (&big, "/cmip6/big"),
    ] {
        let f = work.path().join("in.bin");
        std::fs::write(&f, bytes).unwrap();
        a.ok(&["put", f.to_str().unwrap(), name]);
    }
    for n in [&b, &c, &q] {
        trust(&a, n);
    }
    assert_eq!(holders(&cat, "/cmip6/x"), ["/site/a"]);

    // a. Q has no route for /cmip6: by name, R answers NoRoute.
    let o = run_within(
        command(&q, &["get", "/cmip6/x", "-o", "/dev/null", "--no-locate"]),
        Duration::from_secs(60),
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("NoRoute"));
    // Through the catalog: one lookup, hinted Interests that R sends to A.
    let (h0, a0) = (hinted(&r), sent_to(&r, to_a));
    let out = work.path().join("x1");
    let o = run_within(get(&q, "/cmip6/x", &out, &url), Duration::from_secs(120));
    if !o.status.success() {
        for (n, nd) in [("r", &r), ("a", &a), ("q", &q)] {
            eprintln!(
                "after the failed get, {n}'s routes:\n{}\nfaces:\n{}",
                nd.ok(&["route", "list"]),
                nd.ok(&["face", "list"])
            );
        }
    }
    ok(&o);
    let v = json(&o);
    assert_eq!(std::fs::read(&out).unwrap(), x);
    assert_eq!(v["located"]["lookups"], 1, "{v}");
    assert_eq!(v["located"]["hint_switches"], 1, "{v}");
    let segments = v["stats"]["segments"].as_u64().unwrap();
    let (h1, a1) = (hinted(&r), sent_to(&r, to_a));
    assert!(
        h1 - h0 >= segments,
        "R forwarded {} hinted Interests for {segments} segments",
        h1 - h0
    );
    assert!(a1 - a0 >= segments, "R sent {} Interests to A", a1 - a0);
    eprintln!(
        "a: {segments} segments located through the catalog; R forwarded {} hinted Interests, {} to A",
        h1 - h0,
        a1 - a0
    );

    // `replicate --replicas 3` from A: only B and C are up without a copy,
    // both get one, and the shortfall fails the command.
    let o = run_within(
        command(
            &a,
            &[
                "--catalog",
                &url,
                "replicate",
                "/cmip6/r",
                "--replicas",
                "3",
                "--json",
            ],
        ),
        Duration::from_secs(120),
    );
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success(), "a shortfall is an error: {err}");
    let chose = err
        .lines()
        .find(|l| l.contains("chose"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        chose.contains("/site/b") && chose.contains("/site/c") && !chose.contains("/site/a"),
        "{chose}"
    );
    assert!(err.contains("2 copies made, 1 short"), "{err}");
    let outcomes: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert!(
        outcomes.iter().all(|v| v["state"] == "done"),
        "{outcomes:?}"
    );
    let held: BTreeSet<String> = holders(&cat, "/cmip6/r").into_iter().collect();
    assert_eq!(held, set(&["/site/a", "/site/b", "/site/c"]));
    // Asked again: every up node holds it; nothing to do, said so.
    let o = run_within(
        command(
            &a,
            &[
                "--catalog",
                &url,
                "replicate",
                "/cmip6/r",
                "--replicas",
                "1",
            ],
        ),
        Duration::from_secs(60),
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nothing done"), "{err}");

    // b. B keeps a copy of x and of big: A's manifest roots, byte for byte.
    for name in ["/cmip6/x", "/cmip6/big"] {
        let o = run_within(
            command(&a, &["replicate", name, "--to", "/site/b", "--json"]),
            Duration::from_secs(120),
        );
        ok(&o);
        let v = json(&o);
        assert_eq!(v["state"], "done", "{v}");
        assert!(
            v["signer"].as_str().unwrap().starts_with("/site/a/KEY/"),
            "{v}"
        );
    }
    assert_eq!(manifest(&a, "x"), manifest(&b, "x"));
    assert_eq!(manifest(&a, "big"), manifest(&b, "big"));
    // (B has its own key from its first start; the roots above are A's.)
    assert_eq!(holders(&cat, "/cmip6/big"), ["/site/a", "/site/b"]);
    // The policy has made its second copy of /cmip6/kept/p meanwhile.
    let first = wait_for("the policy's first copy", Duration::from_secs(40), || {
        let h = holders(&cat, "/cmip6/kept/p");
        (h.len() == 2).then(|| h[1].clone())
    });
    let third = if first == "/site/b" {
        "/site/c"
    } else {
        "/site/b"
    };
    assert_eq!(
        manifest(&a, "p"),
        manifest(if first == "/site/b" { &b } else { &c }, "p")
    );

    // Q fetches big from A (first in the catalog) four segments at a time;
    // A is killed once R has forwarded a part of it.
    let out = work.path().join("big1");
    let mut cmd = get(&q, "/cmip6/big", &out, &url);
    cmd.args(["--pipeline-type", "fixed", "--pipeline-size", "4"]);
    // B's copy came through R: R's cache (and Q's) would answer instead of
    // A and B.
    let uncache = || {
        for n in [&r, &q] {
            n.ok(&["cs", "erase", "/cmip6"]);
        }
    };
    uncache();
    let (h0, b0) = (hinted(&r), sent_to(&r, to_b));
    let fetch = std::thread::spawn(move || run_within(cmd, Duration::from_secs(120)));
    wait_for("the fetch's start", Duration::from_secs(60), || {
        (hinted(&r) >= h0 + 150).then_some(())
    });
    a.kill();
    let killed = Instant::now();
    let o = fetch.join().unwrap();
    ok(&o);
    let took = killed.elapsed();
    let v = json(&o);
    assert_eq!(std::fs::read(&out).unwrap(), big, "identical bytes");
    let loc = &v["located"];
    assert_eq!(loc["lookups"], 1, "{v}");
    assert_eq!(loc["hint_switches"], 2, "A, then B: {v}");
    assert_eq!(loc["refetched"], 0, "no verified segment twice: {v}");
    let from_b = sent_to(&r, to_b) - b0;
    let segments = v["stats"]["segments"].as_u64().unwrap();
    assert!(
        from_b > 0 && from_b < segments,
        "B served the rest, not all: {from_b} of {segments}"
    );
    eprintln!(
        "b: A killed mid-file; finished from B {took:?} later, {from_b} Interests to B for {segments} segments, {} timeouts, {} retransmissions",
        v["stats"]["timeouts"], v["stats"]["retransmissions"]
    );
    // Q's next fetch: from B (A is dead), the same bytes.
    uncache();
    let b0 = sent_to(&r, to_b);
    let out = work.path().join("x2");
    let o = run_within(get(&q, "/cmip6/x", &out, &url), Duration::from_secs(120));
    ok(&o);
    let v = json(&o);
    assert_eq!(std::fs::read(&out).unwrap(), x);
    let segments = v["stats"]["segments"].as_u64().unwrap();
    assert!(sent_to(&r, to_b) - b0 >= segments, "{v}");

    // c. A is down after NODE_TIMEOUT: the policy copies kept/p to the
    // third site, from the holder that is up.
    let now = wait_for(
        "the policy's copy to the third site",
        Duration::from_secs(60),
        || {
            let h: BTreeSet<String> = holders(&cat, "/cmip6/kept/p").into_iter().collect();
            (h == set(&["/site/b", "/site/c"])).then_some(h)
        },
    );
    eprintln!("c: after A went down, /cmip6/kept/p is on {now:?} (copied to {third})");
    assert_eq!(manifest(&b, "p"), manifest(&c, "p"));
    // `--replicas` does not choose a down node: B publishes d while A is
    // down; of two copies asked, C makes one, and A is not tried.
    let f = work.path().join("d.bin");
    std::fs::write(&f, noise(60_000, 5)).unwrap();
    b.ok(&["put", f.to_str().unwrap(), "/cmip6/d"]);
    trust(&b, &c);
    let o = run_within(
        command(
            &b,
            &[
                "--catalog",
                &url,
                "replicate",
                "/cmip6/d",
                "--replicas",
                "2",
                "--node-timeout",
                &NODE_TIMEOUT.to_string(),
            ],
        ),
        Duration::from_secs(120),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("chose /site/c for /cmip6/d"), "{err}");
    assert!(err.contains("1 copy made, 1 short"), "{err}");
    assert!(!err.contains("/site/a"), "{err}");
    assert_eq!(holders(&cat, "/cmip6/d"), ["/site/b", "/site/c"]);
    // While A is down its location of x is lost from the catalog; A
    // restarted reconciles its files (the truth) and is offered again.
    assert_eq!(cat.remove_for("/site/a", "/cmip6/x", None).unwrap(), 1);
    a.restart(&mut tb, ha, &flags_a);
    wait_for("A offered again", Duration::from_secs(30), || {
        let h = holders(&cat, "/cmip6/x");
        h.contains(&"/site/a".to_string()).then_some(())
    });
    let o = run_within(
        command(
            &q,
            &[
                "--catalog",
                &url,
                "federation",
                "status",
                "--json",
                "--node-timeout",
                &NODE_TIMEOUT.to_string(),
            ],
        ),
        Duration::from_secs(30),
    );
    ok(&o);
    let s = json(&o);
    assert_eq!(
        common::nodes_up(&s),
        [
            ("/site/a".to_string(), true),
            ("/site/b".to_string(), true),
            ("/site/c".to_string(), true)
        ]
    );
    let o = run_within(
        command(
            &q,
            &[
                "--catalog",
                &url,
                "federation",
                "locate",
                "/cmip6/kept/p",
                "--json",
                "--node-timeout",
                &NODE_TIMEOUT.to_string(),
            ],
        ),
        Duration::from_secs(30),
    );
    ok(&o);
    let v = json(&o);
    let offered: BTreeSet<String> = v["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["node"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(offered, set(&["/site/a", "/site/b", "/site/c"]), "{v}");
    drop((a, b, c, q, r));
    drop(tb);
}
