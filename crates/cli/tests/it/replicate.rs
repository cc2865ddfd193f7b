//! `granary replicate` with real daemons on loopback: a site A (/site/a)
//! that publishes, a site B (/site/b) that is asked to hold a copy, and a
//! consumer C that trusts only A's key. B's copy carries A's signature (the
//! manifest root byte for byte), B serves it when A is gone, commands that
//! are unsigned or signed by a key B does not trust are refused, and chunks
//! B already holds are not fetched again.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::*;
use serde_json::Value;

/// `from` routes `prefix` to `to`'s TCP listener.
fn route(from: &Daemon, prefix: &str, to: &Daemon) {
    from.ok(&["route", "add", prefix, &tcp(to)]);
}

/// The stored manifest root file of the only version of the name whose
/// last component is `last` in `d`'s repository (`…/@<version>.manifest`).
fn manifest_file(d: &Daemon, last: &str) -> PathBuf {
    let found = manifests(d, last);
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}

fn manifests(d: &Daemon, last: &str) -> Vec<PathBuf> {
    let repo = d.data.join("repo");
    files_under(&repo)
        .into_iter()
        .filter(|p| {
            let s = p.to_string_lossy();
            s.ends_with(".manifest") && p.parent().is_some_and(|d| d.ends_with(last))
        })
        .map(|p| repo.join(p))
        .collect()
}

fn replicate(from: &Daemon, args: &[&str]) -> (Output, Option<Value>) {
    let mut a = vec!["replicate", "--json"];
    a.extend_from_slice(args);
    let o = run_within(from.command(&a), Duration::from_secs(120));
    let v = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok());
    (o, v)
}

fn write(p: &Path, bytes: &[u8]) -> String {
    std::fs::write(p, bytes).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn a_replica_keeps_the_publishers_signature_and_serves_when_the_publisher_is_gone() {
    let work = tempfile::tempdir().unwrap();
    let mut a = site("/site/a", &[]);
    let b = site("/site/b", &[]);
    route(&a, "/site/b", &b);
    route(&b, "/site/a", &a);
    let bytes = granary_store::chunking::noise(300_000, 11);
    a.ok(&[
        "put",
        &write(&work.path().join("x.bin"), &bytes),
        "/cmip6/x",
    ]);
    // B checks A's manifest (and A's command) against A's certificate.
    trust(&a, &b);

    let (o, v) = replicate(&a, &["/cmip6/x", "--to", "/site/b"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = v.expect("a JSON outcome");
    assert_eq!(v["state"], "done", "{v}");
    // B's ingest took the segments as fetched (no second cut and hash).
    assert_eq!(v["ingest"], "segments as fetched (CRC-32 compared)", "{v}");
    assert!(
        v["signer"].as_str().unwrap().starts_with("/site/a/KEY/"),
        "{v}"
    );
    // The manifest root B serves is A's, byte for byte (A's signature).
    let ma = std::fs::read(manifest_file(&a, "x")).unwrap();
    let mb = std::fs::read(manifest_file(&b, "x")).unwrap();
    assert_eq!(ma, mb, "B's manifest root differs from A's");
    // Nothing of the fetch is left behind.
    assert_eq!(
        std::fs::read_dir(b.data.join("replicating"))
            .unwrap()
            .count(),
        0
    );
    // B has its own key from its first start, but signed nothing of the copy
    // (the root above is A's, byte for byte).
    // Asked again: held already, nothing fetched.
    let (o, v) = replicate(&a, &["/cmip6/x", "--to", "/site/b"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(v.unwrap()["already"], true);

    // C trusts only A's key and routes everything to B.
    let c = Daemon::start(&[]);
    route(&c, "/", &b);
    trust(&a, &c);
    // A is gone: C's get is served by B, verified against A's signature.
    let _ = Command::new("kill").arg(a.child.id().to_string()).status();
    let _ = a.child.wait();
    let out = work.path().join("x.out");
    let o = run_within(
        c.command(&["get", "/cmip6/x", "-o", out.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
    assert!(err.contains("signed by /site/a/KEY/"), "{err}");
    // The copy C's get keeps (in the background) keeps A's root too, not a
    // root signed by C.
    let t = std::time::Instant::now();
    let kept = loop {
        if let [m] = &manifests(&c, "x")[..] {
            break m.clone();
        }
        assert!(t.elapsed() < Duration::from_secs(30), "C kept no copy");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        std::fs::read(kept).unwrap(),
        ma,
        "C's kept copy was re-signed"
    );
}

#[test]
fn unsigned_and_untrusted_replicate_commands_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let a = site("/site/a", &[]);
    let b = site("/site/b", &[]);
    route(&a, "/site/b", &b);
    route(&b, "/site/a", &a);
    a.ok(&[
        "put",
        &write(
            &work.path().join("y.bin"),
            &granary_store::chunking::noise(50_000, 5),
        ),
        "/cmip6/y",
    ]);
    // B does not trust A's key: A's command is refused, nothing stored.
    let (o, _) = replicate(&a, &["/cmip6/y", "--to", "/site/b"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("refused") && err.contains("not a trusted key"),
        "{err}"
    );
    assert!(!b.data.join("repo/cmip6/y").exists());

    // Signed with a DigestSha256 only (python-ndn): it names no key, refused.
    let mut cmd = python_script("consumer.py");
    cmd.args([
        a.socket.to_str().unwrap(),
        "/site/b/granary/replicate",
        "--app-param",
        r#"{"name": "/cmip6/y", "fwhint": ["/site/a"]}"#,
    ]);
    let o = run_within(cmd, Duration::from_secs(30));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["status"], "data", "{v}");
    let answer: Value =
        serde_json::from_slice(&hex::decode(v["content_hex"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(answer["ok"], false, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("names no key"),
        "{answer}"
    );

    // Now B trusts A; a command signed by a third node's key is still refused.
    trust(&a, &b);
    let d = site("/site/d", &[]);
    route(&d, "/site/b", &b);
    d.ok(&[
        "put",
        &write(&work.path().join("z.bin"), b"d's own key"),
        "/site/d/z",
    ]);
    let (o, _) = replicate(&d, &["/cmip6/y", "--to", "/site/b", "--from", "/site/a"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/site/d/KEY/") && err.contains("not a trusted key"),
        "{err}"
    );
    assert!(!b.data.join("repo/cmip6/y").exists());
    // A node nobody has a route to: a clear error, at once.
    let (o, _) = replicate(&a, &["/cmip6/y", "--to", "/site/nowhere"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/site/nowhere") && err.contains("no route"),
        "{err}"
    );
    // Bad arguments.
    for bad in [
        &["/cmip6/y", "--to", "/"][..],
        &["/cmip6/y", "--replicas", "2"],
        &["/cmip6/y"],
    ] {
        let (o, _) = replicate(&a, bad);
        assert!(!o.status.success(), "{bad:?}");
        assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
    }
    // A's own command goes through.
    let (o, v) = replicate(&a, &["/cmip6/y", "--to", "/site/b"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(v.unwrap()["state"], "done");
}

#[test]
fn chunks_the_target_holds_are_not_fetched_again() {
    let work = tempfile::tempdir().unwrap();
    let a = site("/site/a", &[]);
    let b = site("/site/b", &[]);
    route(&a, "/site/b", &b);
    route(&b, "/site/a", &a);
    const SEG: usize = 8192;
    let h1 = granary_store::chunking::noise(40 * SEG, 1);
    let h2 = granary_store::chunking::noise(40 * SEG, 2);
    let h3 = granary_store::chunking::noise(40 * SEG, 3);
    // B publishes a file with the same first half.
    let y = [h1.clone(), h3].concat();
    let fixed = ["--chunking", "fixed:8192"];
    b.ok(&[
        &["put", &write(&work.path().join("y.bin"), &y), "/b/y"][..],
        &fixed,
    ]
    .concat());
    let x = [h1, h2].concat();
    a.ok(&[
        &["put", &write(&work.path().join("x.bin"), &x), "/cmip6/x"][..],
        &fixed,
    ]
    .concat());
    trust(&a, &b);
    let (o, v) = replicate(&a, &["/cmip6/x", "--to", "/site/b"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = v.unwrap();
    assert_eq!(v["state"], "done", "{v}");
    let d = &v["dedup"];
    assert_eq!(d["local"]["chunks"], 40, "{v}");
    assert_eq!(d["producer"]["chunks"], 40, "{v}");
    assert_eq!(d["local"]["bytes"], 40 * SEG, "{v}");
    assert_eq!(v["ingest"], "segments as fetched (CRC-32 compared)", "{v}");
    // And the copy is whole: B's bytes are A's.
    let out = work.path().join("x.out");
    let o = run_within(
        b.command(&[
            "get",
            "/cmip6/x",
            "-o",
            out.to_str().unwrap(),
            "--no-publish",
        ]),
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), x);
    let ma = std::fs::read(manifest_file(&a, "x")).unwrap();
    let mb = std::fs::read(manifest_file(&b, "x")).unwrap();
    assert_eq!(ma, mb);
}

#[test]
fn replicas_n_chooses_up_nodes_without_the_version_fewest_holdings_first() {
    let work = tempfile::tempdir().unwrap();
    let fed = SharedCatalog::start("replicas", "");
    let a = fed.site("/site/a", &[]);
    let b = fed.site("/site/b", &[]);
    let c = fed.site("/site/c", &[]);
    for (t, p) in [(&b, "/site/b"), (&c, "/site/c")] {
        route(&a, p, t);
        route(t, "/site/a", &a);
    }
    // B holds a version of its own; C none.
    b.ok(&[
        "put",
        &write(&work.path().join("y.bin"), b"b's own file"),
        "/b/y",
    ]);
    let bytes = granary_store::chunking::noise(40_000, 9);
    a.ok(&[
        "put",
        &write(&work.path().join("x.bin"), &bytes),
        "/cmip6/x",
    ]);
    trust(&a, &b);
    trust(&a, &c);
    let replicas = |n: &str| {
        let o = run_within(
            a.command(&[
                "--catalog",
                &fed.url,
                "replicate",
                "/cmip6/x",
                "--replicas",
                n,
                "--json",
            ]),
            Duration::from_secs(120),
        );
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).to_string(),
            o,
        )
    };
    // C holds the fewest versions: chosen first.
    let (ok, err, o) = replicas("1");
    assert!(ok, "{err}");
    assert!(err.contains("chose /site/c for /cmip6/x"), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["state"], "done", "{v}");
    assert_eq!(
        std::fs::read(manifest_file(&a, "x")).unwrap(),
        std::fs::read(manifest_file(&c, "x")).unwrap()
    );
    // Then B, the only up node without it.
    let (ok, err, _) = replicas("1");
    assert!(ok, "{err}");
    assert!(err.contains("chose /site/b for /cmip6/x"), "{err}");
    // Every up node holds it: nothing done, non-zero exit.
    let (ok, err, _) = replicas("2");
    assert!(!ok);
    assert!(err.contains("nothing done"), "{err}");
    // Bad counts are refused before anything is asked.
    for bad in ["0", "many"] {
        let (ok, err, _) = replicas(bad);
        assert!(!ok, "--replicas {bad}");
        assert!(err.contains("--replicas"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // A catalog that is not there: a clear error naming it.
    let bad = fed.url.replace("/replicas", "/no_such_db");
    let o = run_within(
        a.command(&[
            "--catalog",
            &bad,
            "replicate",
            "/cmip6/x",
            "--replicas",
            "1",
        ]),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("location catalog") && err.contains("no_such_db"),
        "{err}"
    );
    let cat = granary_catalog::Catalog::open_unindexed(&fed.url).unwrap();
    let held: Vec<String> = cat
        .locate("/cmip6/x", None, Duration::from_secs(60))
        .unwrap()
        .into_iter()
        .map(|l| l.node)
        .collect();
    assert_eq!(held, ["/site/a", "/site/c", "/site/b"]);
}
