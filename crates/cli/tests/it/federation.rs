//! Federation basics with three real daemons on loopback: a site A that
//! publishes under its node prefix /site/a, a router R whose only route to A
//! is a static `[[route]]` of its config file (a permanent face), and a
//! consumer C that routes everything to R. Forwarding hints carry the
//! Interests for /cmip6/… through R, which has no route for /cmip6.

use crate::common;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use common::*;

/// The `face list` line of the face to `uri`.
fn face_line(d: &Daemon, uri: &str) -> Option<String> {
    d.ok(&["face", "list"])
        .lines()
        .find(|l| l.contains(&format!("remote={uri} ")))
        .map(str::to_string)
}

/// Waits until R's face to `uri` is listed with `state`.
fn wait_face(d: &Daemon, uri: &str, state: &str, limit: Duration) -> String {
    let end = Instant::now() + limit;
    loop {
        let line = face_line(d, uri);
        if let Some(l) = &line {
            if l.contains(&format!("state={state}")) {
                return l.clone();
            }
        }
        assert!(
            Instant::now() < end,
            "face {uri} not {state} after {limit:?}: {line:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn get(c: &Daemon, name: &str, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "get",
        name,
        "-o",
        out.to_str().unwrap(),
        "--no-publish",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    run_within(c.command(&args), Duration::from_secs(60))
}

#[test]
fn hinted_interests_cross_a_router_with_no_route_for_the_name() {
    federation_through_router(&[]);
}

/// The same with a sharded router: hinted Interests are forwarded by the
/// data shards, the permanent face's routes kept on every shard.
#[test]
fn hinted_interests_cross_a_sharded_router() {
    federation_through_router(&["--shards", "2"]);
}

fn federation_through_router(r_extra: &[&str]) {
    let work = tempfile::tempdir().unwrap();
    // A: a site publishing under its node prefix.
    let a = site("/site/a", &[]);
    let a_addr = a.tcp.clone().unwrap();
    let a_uri = format!("tcp4://{a_addr}");
    let src = work.path().join("x.bin");
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&src, &bytes).unwrap();
    a.ok(&["put", src.to_str().unwrap(), "/cmip6/x"]);
    // A second file, fetched only after the failures below (caches along
    // the way hold /cmip6/x by then, and a CS answers by name first).
    let src_y = work.path().join("y.bin");
    let bytes_y: Vec<u8> = (0..200_000u32).map(|i| (i * 13 % 253) as u8).collect();
    std::fs::write(&src_y, &bytes_y).unwrap();
    a.ok(&["put", src_y.to_str().unwrap(), "/cmip6/y"]);
    // Its catalog and key are named after the prefix.
    assert!(a.ok(&["key", "list"]).contains("/site/a/KEY/"));

    // R: a static route to A in its config file, nothing for /cmip6.
    let conf = work.path().join("r.toml");
    std::fs::write(
        &conf,
        format!(
            "listen = [\"tcp://127.0.0.1:0\"]\nnode_prefix = \"/site/r\"\n\n[[route]]\nprefix = \"/site/a\"\nface = \"{a_uri}\"\ncost = 10\n"
        ),
    )
    .unwrap();
    let mut r_args = vec!["--config", conf.to_str().unwrap()];
    r_args.extend_from_slice(r_extra);
    let r = Daemon::start(&r_args);
    let line = wait_face(&r, &a_uri, "up", Duration::from_secs(10));
    assert!(line.contains("persistency=permanent"), "{line}");
    assert!(r
        .ok(&["route", "list"])
        .lines()
        .any(|l| l.starts_with("route /site/a ")
            && l.contains("origin=255")
            && l.contains("cost=10")));

    // C: everything to R.
    let c = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    c.ok(&["route", "add", "/", &tcp(&r)]);
    trust(&a, &c);

    // Without a hint: R has no route for /cmip6, a Nack with a clear error.
    let t = Instant::now();
    let o = get(&c, "/cmip6/x", &work.path().join("none"), &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("{err}");
    assert!(err.contains("NoRoute") || err.contains("no route"), "{err}");
    assert!(err.contains("--fwhint"), "the error suggests a hint: {err}");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert_eq!(hinted(&r), 0);

    // With the hint: through R by its route for /site/a, byte for byte.
    let out1 = work.path().join("x1");
    let o = get(&c, "/cmip6/x", &out1, &["--fwhint", "/site/a"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&out1).unwrap(), bytes);
    let h1 = hinted(&r);
    assert!(h1 > 0, "R forwarded no hinted Interest");
    // A followed the hint naming itself to its node prefix's route (its
    // repository): hinted Interests forwarded, none stripped (its prefix is
    // not in its region unless configured).
    let a_status = a.ok(&["status"]);
    assert!(
        hinted(&a) > 0 && a_status.contains("stripped in region 0\n"),
        "{a_status}"
    );
    // peek, with ndnpeek's flag, through the same path.
    let o = run_within(
        c.command(&["peek", "/cmip6/x", "--prefix", "--fwhint", "/site/a"]),
        Duration::from_secs(20),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // python-ndn's Interests with a ForwardingHint, through C and R to A
    // (/cmip6/z is fetched by nothing else, so no cache on the way has it).
    let src_z = work.path().join("z.bin");
    std::fs::write(&src_z, b"zzz").unwrap();
    a.ok(&["put", src_z.to_str().unwrap(), "/cmip6/z"]);
    let python = |hint: &[&str]| -> serde_json::Value {
        let mut cmd = python_script("consumer.py");
        cmd.args([c.socket.to_str().unwrap(), "/cmip6/z", "--can-be-prefix"]);
        for h in hint {
            cmd.args(["--forwarding-hint", h]);
        }
        let o = run_within(cmd, Duration::from_secs(30));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let before = hinted(&r);
    let v = python(&[]);
    assert_eq!(v["status"], "nack", "{v}");
    let v = python(&["/site/a"]);
    assert_eq!(v["status"], "data", "{v}");
    assert!(
        v["data_name"].as_str().unwrap().starts_with("/cmip6/z"),
        "{v}"
    );
    assert!(hinted(&r) > before);

    // A hint naming a prefix nobody has: a Nack, never a hang.
    let o = get(
        &c,
        "/cmip6/y",
        &work.path().join("u"),
        &["--fwhint", "/site/nowhere"],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("{err}");
    assert!(err.contains("Nack NoRoute"), "{err}");

    // A looping hint: R and C route /site/loop to each other. The loop is
    // caught by nonce (Nack Duplicate) and the get ends.
    r.ok(&["route", "add", "/site/loop", &tcp(&c), "--permanent"]);
    let line = face_line(&r, &tcp(&c)).expect("R's face to C");
    assert!(line.contains("persistency=permanent state=up"), "{line}");
    // A permanent face whose first connection fails is refused, not kept.
    let o = r.cli(&["face", "create", "tcp4://127.0.0.1:1", "--permanent"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot connect"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(face_line(&r, "tcp4://127.0.0.1:1").is_none());
    let o = get(
        &c,
        "/cmip6/y",
        &work.path().join("l"),
        &["--fwhint", "/site/loop", "-r", "3"],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("{err}");
    assert!(err.contains("Nack Duplicate"), "{err}");

    // A goes away: R's permanent face goes down, its route stays.
    let a_data = a.data.clone();
    let mut a = a;
    let a_dir = std::mem::replace(&mut a.dir, tempfile::tempdir().unwrap());
    drop(a);
    let line = wait_face(&r, &a_uri, "down", Duration::from_secs(10));
    assert!(line.contains("persistency=permanent"), "{line}");
    assert!(r.ok(&["route", "list"]).contains("route /site/a "));
    // Meanwhile a hinted get is Nacked at once (no next hop up at R).
    let o = get(
        &c,
        "/cmip6/y",
        &work.path().join("d"),
        &["--fwhint", "/site/a"],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("{err}");
    assert!(err.contains("NoRoute"), "{err}");

    // A comes back on the same port: R re-dials by itself.
    let listen = format!("tcp://{a_addr}");
    let a = Daemon::start_at(
        a_dir,
        a_data.clone(),
        &["--listen", &listen, "--node-prefix", "/site/a"],
    );
    let t = Instant::now();
    wait_face(&r, &a_uri, "up", Duration::from_secs(45));
    eprintln!(
        "R's permanent face up {:?} after A was ready again",
        t.elapsed()
    );
    let out2 = work.path().join("y2");
    let o = get(&c, "/cmip6/y", &out2, &["--fwhint", "/site/a"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&out2).unwrap(), bytes_y);
    assert!(hinted(&r) > h1);

    // The node prefix cannot change under A's keys without --force.
    let mut a = a;
    let a_dir = std::mem::replace(&mut a.dir, tempfile::tempdir().unwrap());
    drop(a);
    let o = run_within(
        {
            let mut c = granary();
            c.args([
                "--data-dir",
                a_data.to_str().unwrap(),
                "--socket",
                a_data.join("g.sock").to_str().unwrap(),
                "daemon",
                "--http",
                "off",
                "--node-prefix",
                "/site/b",
            ]);
            c
        },
        Duration::from_secs(20),
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("{err}");
    assert!(
        err.contains("refusing to change the node prefix from /site/a to /site/b")
            && err.contains("--force"),
        "{err}"
    );
    let b = Daemon::start_at(
        a_dir,
        a_data.clone(),
        &["--node-prefix", "/site/b", "--force"],
    );
    let toml = std::fs::read_to_string(a_data.join("node.toml")).unwrap();
    assert!(toml.contains("\"/site/b\""), "{toml}");
    drop(b);
}

/// The next hops of `prefix`'s FIB entry (`route list`'s `fib` line).
fn fib_nexthops(d: &Daemon, prefix: &str) -> Vec<String> {
    let list = d.ok(&["route", "list"]);
    let line = list
        .lines()
        .find(|l| l.starts_with(&format!("fib {prefix} ")))
        .unwrap_or_else(|| panic!("no FIB entry {prefix}: {list}"));
    line.split("nexthops=")
        .nth(1)
        .unwrap()
        .split(',')
        .map(|h| h.split('(').next().unwrap().to_string())
        .collect()
}

/// A site with a default route to its gateway still keeps its own prefix
/// (and the replicate and catalog services under it) to itself: the node
/// prefix's route captures, so `/`'s next hop is not inherited under it.
#[test]
fn a_default_route_is_not_inherited_under_the_node_prefix() {
    let gw = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let a = site("/site/a", &[]);
    let before = fib_nexthops(&a, "/site/a/granary/replicate");
    a.ok(&["route", "add", "/", &tcp(&gw)]);
    let list = a.ok(&["route", "list"]);
    let gw_face = list
        .lines()
        .find(|l| l.starts_with("route / ") && l.contains("cost=0"))
        .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("face=")))
        .unwrap_or_else(|| panic!("no default route: {list}"))
        .to_string();
    assert!(fib_nexthops(&a, "/").contains(&gw_face), "{list}");
    for p in ["/site/a", "/site/a/granary/replicate", "/site/a/catalog"] {
        let hops = fib_nexthops(&a, p);
        assert!(
            !hops.contains(&gw_face),
            "{p} inherits the default route: {list}"
        );
    }
    assert_eq!(
        fib_nexthops(&a, "/site/a/granary/replicate"),
        before,
        "{list}"
    );
}

#[test]
fn bad_static_routes_and_regions_are_refused_at_start() {
    let work = tempfile::tempdir().unwrap();
    for (conf, want) in [
        (
            "[[route]]\nprefix = \"/x\"\nface = \"tcp4://host.example:6363\"\n",
            "host names are not resolved",
        ),
        (
            "[[route]]\nprefix = \"/x\"\nface = \"udp4://127.0.0.1:6363\"\n",
            "no UDP listener",
        ),
        ("[[route]]\nprefix = \"/x\"\n", "missing field `face`"),
        ("network_region = [\"no-slash\"]\n", "network_region"),
        ("node_prefix = 3\n", "node_prefix"),
    ] {
        let f = work.path().join("bad.toml");
        std::fs::write(&f, conf).unwrap();
        let data = work.path().join("d");
        let o = run_within(
            {
                let mut c = granary();
                c.args([
                    "--data-dir",
                    data.to_str().unwrap(),
                    "--socket",
                    data.join("g.sock").to_str().unwrap(),
                    "daemon",
                    "--http",
                    "off",
                    "--config",
                    f.to_str().unwrap(),
                ]);
                c
            },
            Duration::from_secs(20),
        );
        assert!(!o.status.success(), "{conf} was accepted");
        let err = String::from_utf8_lossy(&o.stderr);
        eprintln!("{err}");
        assert!(err.contains(want), "{conf}: {err}");
    }
}
