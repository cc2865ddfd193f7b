//! python-ndn and NDNts consumers fetch files published in Granary's
//! repository: RDR version discovery, every segment's signature verified by
//! the library, bytes identical.

use crate::common;

use common::*;
use serde_json::Value;

/// The last line a client printed, and it as JSON (null if it is not).
fn last_json(o: &std::process::Output) -> (String, Value) {
    let line = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap_or("{}")
        .to_string();
    let v = serde_json::from_str(&line).unwrap_or(Value::Null);
    (line, v)
}

fn fetch(mut c: std::process::Command, d: &Daemon, name: &str, out: &std::path::Path) -> Value {
    c.args([d.socket.to_str().unwrap(), name, out.to_str().unwrap()]);
    let o = c.output().unwrap();
    let (line, v) = last_json(&o);
    assert!(
        o.status.success(),
        "fetch of {name} failed: {line} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    v
}

#[test]
fn libraries_fetch_and_verify_published_files() {
    let d = Daemon::start(&[]);
    for len in [0usize, 8193, 3 << 20] {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 253) as u8).collect();
        let src = d.dir.path().join(format!("f{len}"));
        std::fs::write(&src, &bytes).unwrap();
        let name = format!("/lib/f{len}");
        d.ok(&["put", src.to_str().unwrap(), &name, "--sign", "digest"]);
        let want = hex::encode(granary_packet::sha256(&bytes));
        for (lib, cmd) in [
            ("python-ndn", python_script("fetch.py")),
            ("NDNts", node_script("fetch.mjs")),
        ] {
            let out = d.dir.path().join(format!("{lib}-{len}"));
            let v = fetch(cmd, &d, &name, &out);
            assert_eq!(v["verified"], true, "{lib} {name}: {v}");
            assert_eq!(v["sha256"], want.as_str(), "{lib} {name}");
            assert_eq!(v["bytes"], len as u64);
            assert!(
                v["versioned"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{name}/v="))
                    || v["versioned"].as_str().unwrap().contains("54=")
            );
            assert_eq!(std::fs::read(&out).unwrap(), bytes, "{lib} wrote the file");
        }
    }
    // A missing name fails promptly in both: the discovery Interest is
    // answered with a Nack (exit 1, "no such object"), not left to time
    // out (a timeout message, or exit 3 past the overall deadline).
    for (lib, cmd) in [
        ("python-ndn", python_script("fetch.py")),
        ("NDNts", node_script("fetch.mjs")),
    ] {
        let mut cmd = cmd;
        cmd.args([
            d.socket.to_str().unwrap(),
            "/lib/missing",
            d.dir.path().join("m").to_str().unwrap(),
        ]);
        let o = cmd.output().unwrap();
        let (line, v) = last_json(&o);
        assert_eq!(o.status.code(), Some(1), "{lib}: {line}");
        let error = v["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with("no such object") && error.contains("Nack"),
            "{lib}: the missing name was not answered with a Nack: {line}"
        );
    }
}

/// A consumer that reacts to congestion marks (NDNts's fetch, CUBIC by
/// default) fetching 64 MB straight from the repository over its Unix
/// face: the whole file arrives and verifies. How many segments it asked
/// again and how many marks it saw are printed, not asserted: on a loaded
/// machine a consumer starved of CPU times out with no queue behind it, so
/// neither says anything about the face. The marking itself is the subject
/// of granary-face's unit tests (`internal`: the application's queue marked
/// when long; `stream`: NFD 24.07's marking rule).
#[test]
fn marked_local_face_keeps_an_ndnts_fetch_clean() {
    let d = Daemon::start(&[]);
    let len = 64usize << 20;
    let mut bytes = vec![0u8; len];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for b in bytes.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let src = d.dir.path().join("big");
    std::fs::write(&src, &bytes).unwrap();
    d.ok(&["put", src.to_str().unwrap(), "/lib/big"]);
    let out = d.dir.path().join("big.out");
    let mut cmd = node_script("fetch.mjs");
    cmd.args(["--timeout", "300"]);
    let v = fetch(cmd, &d, "/lib/big", &out);
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["bytes"], len as u64);
    let segments = v["segments"].as_u64().unwrap();
    let interests = v["segment_interests"].as_u64().unwrap();
    eprintln!(
        "NDNts 64 MB: {segments} segments, {interests} segment Interests, {} congestion marks",
        v["congestion_marks"]
    );
    assert!(interests >= segments, "{v}");
}
