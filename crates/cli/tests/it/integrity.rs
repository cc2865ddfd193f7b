//! Serve-time integrity and scrub: a stored file changed on disk outside
//! the repository is never vouched for (no Data for the changed segment,
//! to python-ndn, NDNts or `granary get`), `granary repo scrub` names the
//! exact segment, and `scrub --repair-from` another node restores it.
//! Changes made through the repository (put, mv, rm) never trip this.

use crate::common;
use common::*;

use std::os::unix::fs::FileExt;

const SEG: u64 = 8192;
const TAMPER_AT: u64 = 100_000;
const BAD_SEG: u64 = TAMPER_AT / SEG; // fixed 8 KiB segments: 12

/// Overwrites four bytes of the stored file at `at` (as a disk or an
/// operator would: outside the repository).
fn tamper(path: &str, at: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(b"\xde\xad\xbe\xef", at).unwrap();
}

/// The stored version's data file and version, from `granary stat`.
fn stored(d: &Daemon, name: &str) -> (String, u64) {
    let s = d.ok(&["stat", name]);
    let path = s
        .lines()
        .find_map(|l| l.strip_prefix("path "))
        .unwrap()
        .to_string();
    let json_end = s.find("\npath ").unwrap();
    let meta: serde_json::Value = serde_json::from_str(&s[..json_end]).unwrap();
    (path, meta["version"].as_u64().unwrap())
}

/// One Interest from a python-ndn or NDNts consumer: (status, sig_type,
/// digest_ok).
fn consume(script: std::process::Command, d: &Daemon, name: &str) -> serde_json::Value {
    let mut c = script;
    c.args([d.socket.to_str().unwrap(), name, "--lifetime", "1500"]);
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(o.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap()
}

type Script = fn() -> std::process::Command;

fn consumers() -> Vec<(&'static str, Script)> {
    vec![
        ("python-ndn", || python_script("consumer.py")),
        ("NDNts", || node_script("consumer.mjs")),
    ]
}

fn scrub_json(d: &Daemon, extra: &[&str]) -> (bool, serde_json::Value) {
    let mut args = vec!["repo", "scrub", "--json"];
    args.extend_from_slice(extra);
    let o = d.cli(&args);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    (o.status.success(), v)
}

#[test]
fn tampered_segments_are_refused_reported_and_repaired() {
    let data = noise(300_000, 41);
    // (put --sign, segment signature setting)
    for (sign, segsig) in [
        ("digest", "digest"),
        ("ed25519", "digest"),
        ("manifest", "null"),
    ] {
        let a = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
        let b = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
        let file = a.dir.path().join("in.bin");
        std::fs::write(&file, &data).unwrap();
        let name = format!("/integrity/{sign}/file.bin");
        for d in [&a, &b] {
            d.ok(&["repo", "config", "--segment-signature", segsig]);
            d.ok(&[
                "put",
                file.to_str().unwrap(),
                &name,
                "--sign",
                sign,
                "--version",
                "7",
                "--chunking",
                "fixed",
            ]);
        }
        let (path, v) = stored(&a, &name);
        assert_eq!(v, 7);
        // Before: segments are served. (Not the one about to be changed:
        // key-signed segments are cached by the forwarder, and a cached
        // good packet is a fine answer.)
        let seg_name = format!("{name}/v=7/seg={BAD_SEG}");
        let good_name = format!("{name}/v=7/seg={}", BAD_SEG - 1);
        for (lib, script) in consumers() {
            let r = consume(script(), &a, &good_name);
            assert_eq!(r["status"], "data", "{sign} {lib}: {}", r["status"]);
        }
        // A clean repository scrubs clean.
        let (ok, v0) = scrub_json(&a, &[]);
        assert!(ok, "{v0}");
        assert_eq!(v0["damaged"], 0);

        tamper(&path, TAMPER_AT);
        // The daemon resolves versions through a cache with open files:
        // the change is in the same file, so nothing needs forgetting.
        for (lib, script) in consumers() {
            let r = consume(script(), &a, &seg_name);
            if segsig == "null" {
                // A NullSignature vouches for nothing: a consumer that
                // demands DigestSha256 has nothing to accept.
                assert!(
                    r["status"] != "data" || r["digest_ok"] != true,
                    "{sign} {lib}: {} {}",
                    r["status"],
                    r["digest_ok"]
                );
            } else {
                assert_ne!(
                    r["status"], "data",
                    "{sign} {lib}: damaged segment served (sig {})",
                    r["sig_type"]
                );
            }
            // Neighbouring segments are still served.
            let g = consume(script(), &a, &good_name);
            assert_eq!(g["status"], "data", "{sign} {lib}: {}", g["status"]);
            if segsig == "digest" && sign == "digest" {
                assert_eq!(g["digest_ok"], true);
            }
        }
        // granary get, per packet and (null mode) through the manifest: fails.
        let out = a.dir.path().join("out.bin");
        let o = a.cli(&[
            "get",
            &name,
            "--no-manifest",
            "--integrity-only",
            "-o",
            out.to_str().unwrap(),
            "--lifetime",
            "1000",
            "--retries",
            "1",
        ]);
        assert!(!o.status.success(), "{sign}: get --no-manifest succeeded");
        let o = a.cli(&[
            "get",
            &name,
            "--no-dedup",
            "--integrity-only",
            "-o",
            out.to_str().unwrap(),
            "--lifetime",
            "1000",
            "--retries",
            "1",
        ]);
        assert!(!o.status.success(), "{sign}: get succeeded");
        assert!(!out.exists());
        if segsig == "digest" {
            // The serve-time check recorded the damage.
            let s = a.ok(&["stat", &name]);
            assert!(s.contains("DAMAGED v=7"), "{s}");
            assert!(s.contains(&format!("segment {BAD_SEG} bytes")), "{s}");
        }

        // Scrub names the exact segment, exits non-zero.
        let (ok, rep) = scrub_json(&a, &["/integrity"]);
        assert!(!ok);
        assert_eq!(rep["damaged"], 1, "{rep}");
        let bad = &rep["reports"][0]["bad"];
        assert_eq!(bad.as_array().unwrap().len(), 1, "{rep}");
        assert_eq!(bad[0]["segment"], BAD_SEG);
        assert_eq!(bad[0]["offset"], BAD_SEG * SEG);
        assert_eq!(bad[0]["len"], SEG);
        let txt = a.cli(&["repo", "scrub"]);
        let txt = String::from_utf8_lossy(&txt.stdout);
        assert!(
            txt.contains(&format!(
                "DAMAGED  {name}/v=7 segment {BAD_SEG} bytes 98304..106496"
            )),
            "{txt}"
        );

        // Repair from the second node (over TCP, through A's daemon): by
        // face URI, or (ed25519 round) by a prefix A routes to B — B's node
        // prefix.
        let b_uri = format!("tcp://{}", b.tcp.as_ref().unwrap());
        let source = if sign == "ed25519" {
            let t = std::fs::read_to_string(b.data.join("node.toml")).unwrap();
            let b_prefix = t.split('"').nth(1).unwrap().to_string();
            a.ok(&["route", "add", &b_prefix, &b_uri]);
            b_prefix
        } else {
            b_uri
        };
        let (ok, rep) = scrub_json(&a, &["--repair-from", &source]);
        assert!(ok, "{sign}: {rep}");
        assert_eq!(rep["repaired_segments"], 1, "{rep}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            data,
            "{sign}: bytes not restored"
        );
        assert!(!a.ok(&["stat", &name]).contains("DAMAGED"));
        for (lib, script) in consumers() {
            let r = consume(script(), &a, &seg_name);
            assert_eq!(
                r["status"], "data",
                "{sign} {lib} after repair: {}",
                r["status"]
            );
        }
        // (`digest` versions have a DigestSha256 manifest: integrity only.)
        a.ok(&[
            "get",
            &name,
            "--integrity-only",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(std::fs::read(&out).unwrap(), data);

        // Changes through the repository never trip the checks.
        let moved = format!("/integrity/{sign}/moved.bin");
        a.ok(&["mv", &name, &moved]);
        a.ok(&["put", file.to_str().unwrap(), &moved, "--sign", sign]);
        std::fs::remove_file(&out).unwrap();
        a.ok(&[
            "get",
            &moved,
            "--integrity-only",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(std::fs::read(&out).unwrap(), data);
        let (ok, rep) = scrub_json(&a, &[]);
        assert!(ok, "{rep}");
        a.ok(&["rm", &moved]);
        let (ok, rep) = scrub_json(&a, &[]);
        assert!(ok && rep["versions"] == 0, "{rep}");
    }
}

#[test]
fn discovery_skips_a_damaged_version_for_an_older_good_one() {
    let a = Daemon::start(&[]);
    let old = noise(50_000, 1);
    let new = noise(50_000, 2);
    let f = a.dir.path().join("f");
    let name = "/integrity/rdr/file";
    std::fs::write(&f, &old).unwrap();
    a.ok(&["put", f.to_str().unwrap(), name, "--version", "1"]);
    std::fs::write(&f, &new).unwrap();
    a.ok(&["put", f.to_str().unwrap(), name, "--version", "2"]);
    let out = a.dir.path().join("out");
    a.ok(&["get", name, "-o", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), new);
    let (path, v) = stored(&a, name);
    assert_eq!(v, 2);
    tamper(&path, 20_000);
    let (ok, _) = scrub_json(&a, &[]);
    assert!(!ok);
    std::fs::remove_file(&out).unwrap();
    let o = a.ok(&["get", name, "-o", out.to_str().unwrap(), "--json"]);
    assert_eq!(std::fs::read(&out).unwrap(), old, "{o}");
    assert!(o.contains("v=1"), "{o}");
}

#[test]
fn background_scrub_records_damage_at_a_bounded_rate() {
    // Published without a daemon (NullSignature setting: nothing is
    // checked when served), damaged, then a daemon scrubbing at 1 MB/s.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    let cli = |args: &[&str]| {
        let o = granary()
            .args(["--data-dir", data.to_str().unwrap(), "--socket"])
            .arg(data.join("none.sock"))
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    cli(&["repo", "config", "--segment-signature", "null"]);
    let f = data.join("f");
    std::fs::write(&f, noise(2_000_000, 9)).unwrap();
    cli(&[
        "put",
        f.to_str().unwrap(),
        "/bg/file",
        "--chunking",
        "fixed",
    ]);
    let path = cli(&["stat", "/bg/file"])
        .lines()
        .find_map(|l| l.strip_prefix("path ").map(str::to_string))
        .unwrap();
    tamper(&path, 1_500_000);
    let t = std::time::Instant::now();
    let d = Daemon::start_at(dir, data.clone(), &["--scrub-rate", "1"]);
    let mut s = String::new();
    while t.elapsed() < std::time::Duration::from_secs(20) {
        s = d.ok(&["stat", "/bg/file"]);
        if s.contains("DAMAGED") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(s.contains("detected by scrub"), "{s}");
    assert!(
        s.contains(&format!("segment {} bytes", 1_500_000 / SEG)),
        "{s}"
    );
    // 2 MB at 1 MB/s: not before about 1.5 s (the damage is 3/4 in).
    assert!(
        t.elapsed() >= std::time::Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
}

/// A segment recorded as damaged is withheld whatever its signature: in
/// NullSignature mode the repository checks nothing when it serves (the
/// consumer's manifest does), and python-ndn's default validator takes a
/// NullSignature packet, so without the record's say the changed bytes
/// would go out. `repo scrub` run beside the daemon takes effect at once,
/// a restart keeps it, the other segments are served throughout, and a
/// repair brings the segment back.
#[test]
fn a_recorded_damaged_segment_is_withheld_in_null_mode_across_restarts() {
    let data = noise(300_000, 43);
    let mut a = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let b = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let file = a.dir.path().join("in.bin");
    std::fs::write(&file, &data).unwrap();
    let name = "/withheld/null/file.bin";
    for d in [&a, &b] {
        d.ok(&["repo", "config", "--segment-signature", "null"]);
        d.ok(&[
            "put",
            file.to_str().unwrap(),
            name,
            "--version",
            "7",
            "--chunking",
            "fixed",
        ]);
    }
    let (path, _) = stored(&a, name);
    let bad = format!("{name}/v=7/seg={BAD_SEG}");
    let good = format!("{name}/v=7/seg={}", BAD_SEG + 1);
    let peek = |d: &Daemon, n: &str| d.cli(&["peek", n, "--lifetime", "1000"]);
    let python = |d: &Daemon, n: &str| consume(python_script("consumer.py"), d, n);
    // Served (NullSignature) before; the lookup is now cached.
    let o = peek(&a, &bad);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("SignatureNull"));
    tamper(&path, TAMPER_AT);
    // Not yet recorded: a NullSignature segment is not re-hashed when served.
    assert!(peek(&a, &bad).status.success());
    let (ok, rep) = scrub_json(&a, &[]);
    assert!(!ok && rep["damaged"] == 1, "{rep}");
    let withheld = |d: &Daemon, when: &str| {
        let o = peek(d, &bad);
        assert!(
            !o.status.success(),
            "{when}: granary peek got the damaged segment: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r = python(d, &bad);
        assert_ne!(r["status"], "data", "{when}: python-ndn got it: {r}");
        let g = python(d, &good);
        assert_eq!(g["status"], "data", "{when}: the next segment: {g}");
        assert!(peek(d, &good).status.success(), "{when}");
    };
    withheld(&a, "after scrub");
    // The whole file cannot be had from this node either.
    let out = a.dir.path().join("out.bin");
    let o = a.cli(&[
        "get",
        name,
        "--no-dedup",
        "-o",
        out.to_str().unwrap(),
        "--lifetime",
        "500",
        "--retries",
        "1",
    ]);
    assert!(!o.status.success());
    assert!(!out.exists());

    // A restart keeps the record.
    let dir = std::mem::replace(&mut a.dir, tempfile::tempdir().unwrap());
    let data_dir = a.data.clone();
    drop(a);
    let a = Daemon::start_at(dir, data_dir, &["--listen", "tcp://127.0.0.1:0"]);
    withheld(&a, "after a restart");

    // Repaired from B: served again, the file verifies.
    let b_uri = format!("tcp://{}", b.tcp.as_ref().unwrap());
    let (ok, rep) = scrub_json(&a, &["--repair-from", &b_uri]);
    assert!(ok, "{rep}");
    assert_eq!(rep["repaired_segments"], 1, "{rep}");
    let o = peek(&a, &bad);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(python(&a, &bad)["status"], "data");
    a.ok(&["get", name, "--no-dedup", "-o", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), data);
}
