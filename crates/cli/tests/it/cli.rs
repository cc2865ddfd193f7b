//! The `granary` binary as a user runs it: keys, dissect, selfcheck, errors.

use crate::common;

use common::granary;

fn ok(args: &[&str], dir: &std::path::Path) -> String {
    let out = granary()
        .args(args)
        .env("GRANARY_DATA_DIR", dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "granary {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str], dir: &std::path::Path) -> String {
    let out = granary()
        .args(args)
        .env("GRANARY_DATA_DIR", dir)
        .output()
        .unwrap();
    assert!(!out.status.success(), "granary {args:?} should fail");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        !err.contains("panicked"),
        "panic instead of an error: {err}"
    );
    err
}

#[test]
fn key_lifecycle() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let cert = ok(&["key", "gen", "/lab/alice", "--type", "ecdsa"], d);
    assert!(
        cert.starts_with("/lab/alice/KEY/") && cert.contains("/self/v="),
        "{cert}"
    );
    ok(&["key", "gen", "/lab/bob"], d);
    ok(&["key", "gen", "/lab/mac", "-t", "hmac"], d);
    let list = ok(&["key", "list"], d);
    assert_eq!(list.lines().count(), 3, "{list}");
    assert!(
        list.lines()
            .any(|l| l.starts_with("* /lab/alice/KEY/") && l.contains("ecdsa")),
        "{list}"
    );
    ok(&["key", "default", "/lab/bob"], d);
    assert!(ok(&["key", "default"], d).starts_with("/lab/bob/KEY/"));

    // Export the certificate (base64) and dissect it.
    let exported = ok(&["key", "export", "/lab/alice"], d);
    let f = d.join("alice.ndncert");
    std::fs::write(&f, &exported).unwrap();
    let text = ok(&["dissect", "--base64", f.to_str().unwrap()], d);
    assert!(
        text.contains("6 (Data)") && text.contains("253 (ValidityPeriod)"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(ok(&["dissect", "--base64", "--json", f.to_str().unwrap()], d).trim())
            .unwrap();
    assert_eq!(json["signature"]["type"], 3);
    assert_eq!(json["fields"]["content_type"], 2);
    assert!(
        json["signature"]["validity"]["not_after"]
            .as_str()
            .unwrap()
            .len()
            == 15
    );

    // Private export needs -o, then imports into another keychain.
    assert!(fails(&["key", "export", "/lab/alice", "--private"], d).contains("-o FILE"));
    let bag = d.join("alice.bag");
    ok(
        &[
            "key",
            "export",
            "/lab/alice",
            "--private",
            "-o",
            bag.to_str().unwrap(),
        ],
        d,
    );
    let other = tempfile::tempdir().unwrap();
    let imported = ok(&["key", "import", bag.to_str().unwrap()], other.path());
    assert!(imported.starts_with("/lab/alice/KEY/"));
    assert!(
        fails(&["key", "import", bag.to_str().unwrap()], other.path()).contains("already exists")
    );
    // A certificate of an unknown key is refused by import, accepted by trust.
    let bob = d.join("bob.ndncert");
    std::fs::write(&bob, ok(&["key", "export", "/lab/bob"], d)).unwrap();
    assert!(fails(&["key", "import", bob.to_str().unwrap()], other.path()).contains("key trust"));
    ok(&["key", "trust", bob.to_str().unwrap()], other.path());
    assert!(ok(&["key", "list"], other.path()).contains("anchor /lab/bob/KEY/"));

    // Clear errors.
    assert!(fails(&["key", "gen", "not-a-name"], d).contains("does not start with '/'"));
    assert!(fails(&["key", "export", "/nobody"], d).contains("no key"));
}

#[test]
fn dissect_reports_errors_with_offsets_and_never_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let f = d.join("bad.bin");
    std::fs::write(&f, [6u8, 9, 7, 0]).unwrap();
    let err = fails(&["dissect", f.to_str().unwrap()], d);
    assert!(
        err.contains("offset 0") && err.contains("truncated"),
        "{err}"
    );
    // Hex input; nested damage is reported inside the tree, not fatal.
    let f = d.join("pkt.hex");
    std::fs::write(&f, "06 04 07 02 08 05\n").unwrap();
    let text = ok(&["dissect", "--hex", f.to_str().unwrap()], d);
    assert!(text.contains("!!") && text.contains("truncated"), "{text}");
    let json = ok(&["dissect", "--hex", "--json", f.to_str().unwrap()], d);
    assert!(json.contains("\"error\""), "{json}");
    assert!(
        fails(&["dissect", "--hex", f.to_str().unwrap(), "--base64"], d).contains("cannot be used")
    );
    // Random garbage: an error or a tree, never a crash.
    let mut x: u32 = 12345;
    for i in 0..50 {
        let bytes: Vec<u8> = (0..(i * 7 + 1))
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        let f = d.join(format!("g{i}"));
        std::fs::write(&f, &bytes).unwrap();
        let out = granary()
            .args(["dissect", "--json", f.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.code().is_some_and(|c| c == 0 || c == 1),
            "crash on garbage {i}"
        );
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
}

#[test]
fn selfcheck_passes_and_help_explains() {
    let tmp = tempfile::tempdir().unwrap();
    let out = ok(&["selfcheck"], tmp.path());
    assert!(out.contains("all checks passed"), "{out}");
    for alg in ["ed25519", "ecdsa", "rsa", "hmac", "digest"] {
        assert!(out.contains(alg), "{out}");
    }
    let help = ok(&["dissect", "--help"], tmp.path());
    assert!(help.contains("--json") && help.contains("hexadecimal"));
}
