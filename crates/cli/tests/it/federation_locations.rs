//! The location catalog end to end: two sites A and B sharing one PostgreSQL
//! catalog (a throw-away cluster), a router R with static routes to both and none
//! for /cmip6, and a consumer C routing everything to R. C has no route for the
//! names: it finds them through the catalog (directly, or with `locate` over NDN)
//! and fetches with hinted Interests; when A dies mid-file the fetch fails over to
//! B without fetching a verified segment twice; a node that claims a location it
//! does not hold is flagged by `federation check` and skipped by consumers.

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// `get NAME -o OUT --json --no-dedup --no-publish` by C: (output, JSON).
fn get(c: &Daemon, name: &str, out: &Path, extra: &[&str]) -> (Output, serde_json::Value) {
    let mut args = vec![
        "get",
        name,
        "-o",
        out.to_str().unwrap(),
        "--no-publish",
        "--no-dedup",
        "--quiet",
        "--json",
    ];
    args.extend_from_slice(extra);
    let o = run_within(c.command(&args), Duration::from_secs(120));
    let v = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (o, v)
}

#[test]
fn consumers_find_names_through_the_location_catalog_and_fail_over() {
    // A short node timeout: a killed node is down within seconds.
    let fed = SharedCatalog::start("federation", "node_timeout = 3\n");
    let url = fed.url.clone();
    let work = tempfile::tempdir().unwrap();
    let a = fed.site("/site/a", &["--http", "127.0.0.1:0"]);
    let b = fed.site("/site/b", &["--http", "127.0.0.1:0"]);
    // R: static routes to both sites, nothing for /cmip6.
    let rconf = work.path().join("r.toml");
    std::fs::write(
        &rconf,
        format!(
            "listen = [\"tcp://127.0.0.1:0\"]\nnode_prefix = \"/site/r\"\n\n[[route]]\nprefix = \"/site/a\"\nface = \"{}\"\n\n[[route]]\nprefix = \"/site/b\"\nface = \"{}\"\n",
            tcp(&a),
            tcp(&b)
        ),
    )
    .unwrap();
    let r = Daemon::start(&["--config", rconf.to_str().unwrap()]);
    // C: its own catalog, everything to R, A's and B's keys trusted.
    let c = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    c.ok(&["route", "add", "/", &tcp(&r)]);
    let st = c.ok(&["status"]);
    assert!(st.contains("hinted"), "{st}");

    // A publishes; the catalog holds its location.
    let small = noise(300_000, 1);
    let f = work.path().join("x.bin");
    std::fs::write(&f, &small).unwrap();
    a.ok(&["put", f.to_str().unwrap(), "/cmip6/x"]);
    trust(&a, &c);
    let o = c.cli(&[
        "--catalog",
        &url,
        "federation",
        "locate",
        "/cmip6/x",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["locations"][0]["node"], "/site/a", "{v}");
    // The gateway's record of the file names its holders.
    let o = Command::new("curl")
        .args([
            "-sf",
            &format!("http://{}/api/file/cmip6/x", b.http.as_deref().unwrap()),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["held_by"][0]["node"], "/site/a", "{v}");
    assert_eq!(v["held_by"][0]["up"], true, "{v}");

    // Without the lookup: NoRoute, as before.
    let (o, _) = get(&c, "/cmip6/x", &work.path().join("n"), &["--no-locate"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("NoRoute"));
    let h0 = hinted(&r);

    // Direct lookup in the shared catalog, then hinted Interests through R.
    let out = work.path().join("x1");
    let (o, v) = get(&c, "/cmip6/x", &out, &["--catalog", &url]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), small);
    assert_eq!(v["located"]["lookups"], 1, "{v}");
    assert_eq!(v["located"]["refetched"], 0, "{v}");
    // The fetch statistics count the same lookup (made while discovering).
    assert_eq!(v["stats"]["lookups"], v["located"]["lookups"], "{v}");
    let h1 = hinted(&r);
    assert!(h1 > h0, "R forwarded no hinted Interest");

    // `locate` over NDN: A's catalog, reached through R by A's prefix.
    let a_small = noise(120_000, 2);
    let f = work.path().join("y.bin");
    std::fs::write(&f, &a_small).unwrap();
    a.ok(&["put", f.to_str().unwrap(), "/cmip6/y"]);
    let out = work.path().join("y1");
    let (o, v) = get(&c, "/cmip6/y", &out, &["--locate-at", "/site/a/catalog"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), a_small);
    assert_eq!(v["located"]["lookups"], 1, "{v}");
    assert!(hinted(&r) > h1);

    // A node that claims what it does not hold: B registers /cmip6/w before A
    // publishes it (so B is offered first). `federation check` flags it, and a
    // consumer falls back to A.
    let w = noise(90_000, 3);
    let f = work.path().join("w.bin");
    std::fs::write(&f, &w).unwrap();
    let wv = 1_700_000_000_000_000u64;
    {
        let cat = granary_catalog::Catalog::open_unindexed(&url).unwrap();
        cat.register_location("/cmip6/w", wv, "/site/b", None)
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    a.ok(&[
        "put",
        f.to_str().unwrap(),
        "/cmip6/w",
        "--version",
        &wv.to_string(),
    ]);
    // The catalog offers the least loaded holder first: B (one location) once
    // A's heartbeat has reported its three. Under load a heartbeat can lag the
    // puts; wait for the order this part is about rather than assume it.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let o = c.cli(&[
            "--catalog",
            &url,
            "federation",
            "locate",
            "/cmip6/w",
            "--json",
        ]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        if v["locations"][0]["node"] == "/site/b" && v["locations"][1]["node"] == "/site/a" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the catalog never offered B before A: {v}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = work.path().join("w1");
    let (o, v) = get(&c, "/cmip6/w", &out, &["--catalog", &url]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), w);
    assert_eq!(v["located"]["hint_switches"], 2, "B first, then A: {v}");
    let o = c.cli(&["--catalog", &url, "federation", "check", "--json"]);
    assert!(
        !o.status.success(),
        "a bad location is an error: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["bad"], 1, "{v}");
    let bad: Vec<&serde_json::Value> = v["checked"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["ok"] != true)
        .collect();
    assert_eq!(bad[0]["node"], "/site/b");
    assert_eq!(bad[0]["name"], "/cmip6/w");
    assert!(v["checked"].as_array().unwrap().len() >= 4, "{v}");

    // A hint naming a node nobody routes: Nack, not a hang.
    let (o, _) = get(
        &c,
        "/cmip6/nothing",
        &work.path().join("u"),
        &["--fwhint", "/site/nowhere"],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("NoRoute"));

    // A wrong catalog URL: a clear error at start, nothing fetched.
    let bad_url = url.replace("/federation", "/no_such_db");
    let t = Instant::now();
    let (o, _) = get(
        &c,
        "/cmip6/x",
        &work.path().join("e"),
        &["--catalog", &bad_url],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("location catalog") && err.contains("no_such_db"),
        "{err}"
    );
    assert!(!work.path().join("e").exists());
    assert!(t.elapsed() < Duration::from_secs(20));
    // And a daemon given it does not start.
    let o = run_within(
        {
            let d = tempfile::tempdir().unwrap();
            let mut cmd = granary();
            cmd.args([
                "--data-dir",
                d.path().to_str().unwrap(),
                "--catalog",
                &bad_url,
                "daemon",
                "--http",
                "off",
            ]);
            std::mem::forget(d);
            cmd
        },
        Duration::from_secs(20),
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no_such_db"));

    // Failover mid-file. B keeps a copy of A's file (same version, same
    // segments); C's fetch goes to A first; A is killed mid-file.
    let big = noise(24 << 20, 4);
    let f = work.path().join("big.bin");
    std::fs::write(&f, &big).unwrap();
    a.ok(&["put", f.to_str().unwrap(), "/cmip6/big"]);
    let cat = granary_catalog::Catalog::open_unindexed(&url).unwrap();
    let v = cat
        .locations("/cmip6/big", Duration::from_secs(60))
        .unwrap()[0]
        .version;
    b.ok(&["route", "add", "/site/a", &tcp(&a)]);
    trust(&a, &b);
    let o = run_within(
        b.command(&[
            "get",
            "/cmip6/big",
            "--fwhint",
            "/site/a",
            "-o",
            work.path().join("b-copy").to_str().unwrap(),
            "--quiet",
        ]),
        Duration::from_secs(120),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let end = Instant::now() + Duration::from_secs(20);
    let mut holders: Vec<String>;
    loop {
        holders = cat
            .locate("/cmip6/big", Some(v), Duration::from_secs(60))
            .unwrap()
            .into_iter()
            .map(|l| l.node)
            .collect();
        if holders.len() == 2 || Instant::now() > end {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        holders,
        ["/site/b", "/site/a"],
        "the catalog offers the least loaded first: B (2 versions) before A (4)"
    );
    // The gateway orders them as `get` does, nearest by its node's RIB
    // first: D routes /site/a at cost 10 and /site/b at 20, so its /data
    // fetch goes to A although the catalog offers B first.
    let d = fed.site("/site/d", &["--http", "127.0.0.1:0"]);
    d.ok(&["route", "add", "/site/a", &tcp(&a), "--cost", "10"]);
    d.ok(&["route", "add", "/site/b", &tcp(&b), "--cost", "20"]);
    trust(&a, &d);
    let (ia, ib) = (status_count(&a, "interests"), status_count(&b, "interests"));
    let o = Command::new("curl")
        .args([
            "-sf",
            "-r",
            "0-199999",
            &format!("http://{}/data/cmip6/big", d.http.as_deref().unwrap()),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout, big[..200_000], "the gateway's bytes");
    let (ia, ib) = (
        status_count(&a, "interests") - ia,
        status_count(&b, "interests") - ib,
    );
    assert!(
        ia >= 20 && ib < 5,
        "A (nearer) served it: A got {ia} Interests, B {ib}"
    );
    drop(d);
    // C is nearer to A (route cost 10) than to B (20): C tries A first.
    c.ok(&["route", "add", "/site/a", &tcp(&r), "--cost", "10"]);
    c.ok(&["route", "add", "/site/b", &tcp(&r), "--cost", "20"]);
    let out = work.path().join("big1");
    let h_before = hinted(&r);
    let child = c
        .command(&[
            "get",
            "/cmip6/big",
            "-o",
            out.to_str().unwrap(),
            "--no-publish",
            "--no-dedup",
            "--quiet",
            "--json",
            "--catalog",
            &url,
            "--pipeline-type",
            "fixed",
            "--pipeline-size",
            "4",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once R has forwarded a few hundred of its hinted Interests (a fraction
    // of the file's segments), A dies.
    let end = Instant::now() + Duration::from_secs(60);
    while hinted(&r) < h_before + 300 {
        assert!(Instant::now() < end, "the fetch did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(a);
    let t = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    eprintln!("finished {:?} after A was killed", t.elapsed());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), big, "identical bytes");
    let loc = &v["located"];
    assert_eq!(loc["lookups"], 1, "{v}");
    assert_eq!(loc["hint_switches"], 2, "A, then B: {v}");
    assert_eq!(
        loc["refetched"], 0,
        "no verified segment fetched twice: {v}"
    );
    let st = &v["stats"];
    eprintln!(
        "failover: {} segments, {} retransmissions, {} timeouts, {} Nacks",
        st["segments"], st["retransmissions"], st["timeouts"], st["nacks_other"]
    );

    // A is silent: after node_timeout it is down, and `federation status` says so.
    std::thread::sleep(Duration::from_secs(4));
    let o = c.cli(&[
        "--catalog",
        &url,
        "federation",
        "status",
        "--json",
        "--node-timeout",
        "3",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        common::nodes_up(&s),
        [
            ("/site/a".to_string(), false),
            ("/site/b".to_string(), true),
            // The gateway's node above, stopped since.
            ("/site/d".to_string(), false)
        ]
    );
    let l = cat
        .locate("/cmip6/x", None, Duration::from_secs(3))
        .unwrap();
    assert!(l.is_empty(), "a down node is not offered: {l:?}");
    drop((b, c, r));
}
