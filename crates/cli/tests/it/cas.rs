//! Content-defined chunking, the hash index and hash requests through real
//! daemons: CDC put/get round trips, `granary dedup`, index rebuild, and
//! hash requests that stay within one hop.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn stat(d: &Daemon, name: &str) -> (Value, std::path::PathBuf) {
    let out = d.ok(&["stat", name]);
    let (json, path) = out.rsplit_once("\npath ").unwrap();
    (
        serde_json::from_str(json).unwrap(),
        std::path::PathBuf::from(path.trim()),
    )
}

/// The stored segment hashes of a version (its `.hashes` file).
fn hashes(path: &std::path::Path) -> Vec<[u8; 32]> {
    let raw = std::fs::read(format!("{}.hashes", path.display())).unwrap();
    raw.chunks(32).map(|c| c.try_into().unwrap()).collect()
}

#[test]
fn cdc_put_get_round_trips_through_the_daemon_and_locally() {
    let d = Daemon::start(&[]);
    let sizes = [0usize, 1, 1023, 1024, 8192, 8193, 5 << 20];
    for (scheme, via_stdin) in [
        ("fastcdc", false),
        ("rabin", true),
        ("fastcdc:512:2048:4096", false),
    ] {
        for &len in &sizes {
            let bytes = noise(len, len as u64 + 3);
            let src = d.dir.path().join(format!("in-{len}"));
            std::fs::write(&src, &bytes).unwrap();
            let name = format!("/cdc/{}/f{len}", scheme.replace(':', "-"));
            let o = if via_stdin {
                // Ingested by the CLI itself (the daemon holds the index:
                // the CLI leaves a mark the daemon catches up on).
                let mut c = d
                    .command(&["put", "-", &name, "--chunking", scheme])
                    .stdin(std::fs::File::open(&src).unwrap())
                    .output()
                    .unwrap();
                assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
                std::mem::take(&mut c.stdout)
            } else {
                d.ok(&["put", src.to_str().unwrap(), &name, "--chunking", scheme])
                    .into_bytes()
            };
            assert!(String::from_utf8_lossy(&o).starts_with(&name));
            let (meta, path) = stat(&d, &name);
            assert!(
                meta["chunking"]
                    .as_str()
                    .unwrap()
                    .starts_with(scheme.split(':').next().unwrap()),
                "{meta}"
            );
            let dst = d.dir.path().join(format!("out-{len}"));
            let got = d.cli(&["get", &name, "-o", dst.to_str().unwrap()]);
            assert!(
                got.status.success(),
                "{}",
                String::from_utf8_lossy(&got.stderr)
            );
            let err = String::from_utf8_lossy(&got.stderr);
            assert!(
                err.contains("every segment verified against the manifest"),
                "{err}"
            );
            assert_eq!(std::fs::read(&dst).unwrap(), bytes, "{scheme} {len}");
            if len == 5 << 20 && !via_stdin {
                // Byte ranges of content-defined segments (offsets from
                // the format-2 manifest): across boundaries, inside one
                // segment, up to the end.
                for (off, n) in [(0usize, 1usize), (4000, 9000), (123_457, 1), (len - 10, 10)] {
                    let o = d.cli(&[
                        "cat",
                        &name,
                        "--offset",
                        &off.to_string(),
                        "--length",
                        &n.to_string(),
                    ]);
                    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                    assert_eq!(o.stdout, &bytes[off..off + n], "cat {off}+{n}");
                }
            }
            if len == 5 << 20 {
                let segs = meta["segments"].as_u64().unwrap();
                // Content-defined: more, smaller segments than 8 KiB fixed.
                assert!(segs > (len / 8192) as u64 + 10, "{segs}");
                assert_eq!(hashes(&path).len() as u64, segs);
            }
        }
    }
    // Bad chunking flags are refused clearly.
    let src = d.dir.path().join("in-1");
    let o = d.cli(&[
        "put",
        src.to_str().unwrap(),
        "/cdc/bad",
        "--chunking",
        "zip",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown chunking"));
    let o = d.cli(&[
        "put",
        src.to_str().unwrap(),
        "/cdc/bad",
        "--chunking",
        "fastcdc",
        "--chunk-max",
        "65536",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("max <= 8192"));
}

#[test]
fn repo_config_sets_the_default_chunking() {
    let d = Daemon::start(&[]);
    assert!(d
        .ok(&["repo", "config"])
        .contains("chunking = fastcdc:3072:5120:8192"));
    assert!(d
        .ok(&["repo", "config", "--chunking", "rabin"])
        .contains("chunking = rabin:3072:5120:8192"));
    let src = d.dir.path().join("x");
    std::fs::write(&src, noise(100_000, 1)).unwrap();
    d.ok(&["put", src.to_str().unwrap(), "/cfg/x"]);
    assert_eq!(stat(&d, "/cfg/x").0["chunking"], "rabin:3072:5120:8192");
    d.ok(&[
        "put",
        src.to_str().unwrap(),
        "/cfg/y",
        "--chunking",
        "fixed",
    ]);
    assert_eq!(stat(&d, "/cfg/y").0["chunking"], "fixed:8192");
}

/// The carepo case through the command line: bytes inserted near the start.
#[test]
fn dedup_reports_shared_chunks_cdc_vs_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let a = noise(4 << 20, 21);
    let mut b = a.clone();
    b.splice(1000..1000, b"a few inserted bytes".iter().copied());
    let (pa, pb) = (dir.path().join("a.bin"), dir.path().join("b.bin"));
    std::fs::write(&pa, &a).unwrap();
    std::fs::write(&pb, &b).unwrap();
    let o = granary()
        .args([
            "dedup",
            pa.to_str().unwrap(),
            pb.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let schemes = v["schemes"].as_array().unwrap();
    assert_eq!(schemes.len(), 3);
    for s in schemes {
        let c = s["chunking"].as_str().unwrap();
        let f = &s["files"][1];
        let total = &s["total"];
        let chunks_b = f["chunks"].as_u64().unwrap() as f64;
        // Chunks of b also in a = chunks counted once across both, minus a's.
        let shared = total["shared_chunks"].as_u64().unwrap() as f64;
        let frac = shared / chunks_b;
        assert_eq!(total["bytes"].as_u64().unwrap(), (a.len() + b.len()) as u64);
        if c.starts_with("fixed") {
            assert!(frac < 0.01, "{c}: {frac}");
            assert!(total["saving_percent"].as_f64().unwrap() < 1.0);
        } else {
            assert!(frac >= 0.90, "{c}: {frac}");
            assert!(total["saving_percent"].as_f64().unwrap() > 45.0, "{s}");
        }
    }
    // Text output names every scheme.
    let o = granary()
        .args(["dedup", pa.to_str().unwrap(), pb.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    for c in [
        "fixed:8192",
        "fastcdc:3072:5120:8192",
        "rabin:3072:5120:8192",
    ] {
        assert!(text.contains(c), "{text}");
    }
    // A missing file is an error, not a partial report.
    let o = granary()
        .args(["dedup", pa.to_str().unwrap(), "/nonexistent/file"])
        .output()
        .unwrap();
    assert!(!o.status.success());
}

fn hash_uri(h: &[u8; 32]) -> String {
    granary_repo::hash_request_name(h).to_string()
}

fn peek(d: &Daemon, uri: &str) -> std::process::Output {
    d.cli(&["peek", uri, "--hex", "--lifetime", "1000"])
}

/// A —TCP— B —TCP— C. A hash request from A is answered by B's repository
/// from its hash index; one for a chunk only C holds is not forwarded to C
/// (even with B routing /localhop to C), so it fails at once.
#[test]
fn hash_requests_are_answered_one_hop_away_and_go_no_further() {
    let c = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let b = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    // A has a repository of its own: its apps' hash requests still go to
    // the neighbour first (the repository's route for the prefix costs more).
    let a = Daemon::start(&[]);
    let b_tcp = format!("tcp4://{}", b.tcp.as_ref().unwrap());
    let c_tcp = format!("tcp4://{}", c.tcp.as_ref().unwrap());
    a.ok(&["route", "add", granary_repo::HASH_PREFIX, &b_tcp]);
    a.ok(&["route", "add", "/ctl", &b_tcp]);
    // B would send hash requests to C too (same prefix as its repository,
    // multicast) if scope did not stop them.
    b.ok(&["route", "add", granary_repo::HASH_PREFIX, &c_tcp]);
    b.ok(&["route", "add", "/localhop", &c_tcp]);
    b.ok(&["strategy", "set", granary_repo::HASH_PREFIX, "multicast"]);
    b.ok(&["route", "add", "/ctl", &c_tcp]);
    // C answers anything under the hash prefix (a synthetic producer), and /ctl.
    let trap = c.serve(granary_repo::HASH_PREFIX, &["--size", "100"]);
    let _ctl = c.serve("/ctl", &["--size", "100"]);

    let on_b = noise(200_000, 5);
    let on_c = noise(200_000, 6);
    for (d, bytes, name) in [(&b, &on_b, "/h/b"), (&c, &on_c, "/h/c")] {
        let src = d.dir.path().join("f");
        std::fs::write(&src, bytes).unwrap();
        d.ok(&["put", src.to_str().unwrap(), name, "--chunking", "fastcdc"]);
    }
    // The chain works for ordinary names.
    assert!(peek(&a, "/ctl/x").status.success());

    let (_, pb) = stat(&b, "/h/b");
    let hb = hashes(&pb);
    let spans: Vec<u64> = std::fs::read(format!("{}.offsets", pb.display()))
        .unwrap()
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for i in [0usize, 7, hb.len() - 1] {
        let o = peek(&a, &hash_uri(&hb[i]));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let want = &on_b[spans[i] as usize..spans[i + 1] as usize];
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), hex::encode(want));
        // The Data is named after the request.
        assert!(String::from_utf8_lossy(&o.stderr).contains("/localhop/granary/sha256/"));
    }

    // After a rename by the command line (the daemon holds the index and
    // picks up the new path), the chunk is still served.
    b.ok(&["mv", "/h/b", "/h/b-renamed"]);
    let o = peek(&a, &hash_uri(&hb[5]));
    assert!(
        o.status.success(),
        "after mv: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // After removal, a miss (never stale bytes).
    b.ok(&["rm", "/h/b-renamed"]);
    assert!(!peek(&a, &hash_uri(&hb[6])).status.success());

    let (_, pc) = stat(&c, "/h/c");
    let hc = hashes(&pc);
    let o = peek(&a, &hash_uri(&hc[3]));
    assert!(
        !o.status.success(),
        "a chunk two hops away must not be reachable"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("nack"),
        "a miss is answered at once, by a Nack (not a timeout): {err}"
    );
    assert_eq!(trap.served(), 0, "the hash request reached C");
    // And C itself answers it for its own apps (the name is right).
    assert!(peek(&c, &hash_uri(&hc[3])).status.success());
}

#[test]
fn index_is_rebuilt_when_deleted_and_by_reindex() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    let bytes = noise(300_000, 9);
    let src = data.join("f");
    std::fs::write(&src, &bytes).unwrap();
    let run = |args: &[&str]| {
        let o = granary()
            .args(["--data-dir", data.to_str().unwrap(), "--socket"])
            .arg(data.join("none.sock"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    // Published with no daemon running.
    run(&["put", src.to_str().unwrap(), "/r/f", "--chunking", "rabin"]);
    run(&["put", src.to_str().unwrap(), "/r/g"]);
    let out = run(&["repo", "reindex"]);
    assert!(out.contains("of 2 versions"), "{out}");
    std::fs::remove_dir_all(data.join("repo/index")).unwrap();
    let d = Daemon::start_at(dir, data.clone(), &[]);
    let out = d.ok(&["stat", "/r/f"]);
    let path = std::path::PathBuf::from(out.rsplit_once("\npath ").unwrap().1.trim());
    for h in hashes(&path).iter().take(5) {
        let o = peek(&d, &hash_uri(h));
        assert!(o.status.success(), "rebuilt index serves the chunk");
    }
    // The daemon holds the index: reindex says so instead of blocking.
    let o = d.cli(&["repo", "reindex"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("in use by another process"));
}

/// Versions published beside a running daemon (by the command line, from
/// standard input, while the daemon holds the hash index) are indexed by
/// the daemon on its own, within a fraction of a second: no hash request
/// waits for, or has to trigger, their indexing.
#[test]
fn versions_published_beside_the_daemon_are_indexed_in_the_background() {
    let d = Daemon::start(&[]);
    // A lookup: the daemon has the index open from here on (it would have
    // opened it on its first lookup anyway).
    assert!(!peek(&d, &hash_uri(&[7u8; 32])).status.success());
    let bytes = noise(400_000, 11);
    let mut put = d.command(&["put", "-", "/bg/x", "--chunking", "fastcdc"]);
    let mut child = put
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The CLI could not index it (the daemon holds the index): a mark.
    let pending = d.data.join("repo/index-pending");
    let marks = || std::fs::read_dir(&pending).map_or(0, |r| r.count());
    let t = Instant::now();
    while marks() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the daemon did not index the new version by itself"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // And its chunks are served at once.
    let (_, path) = stat(&d, "/bg/x");
    for h in hashes(&path).iter().take(3) {
        assert!(peek(&d, &hash_uri(h)).status.success());
    }
}
