//! Trust between nodes: every node publishes under its own identity (its
//! node prefix), serves its certificate, and another node trusts it in one
//! step with `granary key trust --fetch`, pinned by fingerprint.

use crate::common;
use common::*;

/// The default key and its fingerprint, from `granary key list`.
fn default_key(d: &Daemon) -> (String, String) {
    let list = d.ok(&["key", "list"]);
    let line = list
        .lines()
        .find(|l| l.starts_with("* "))
        .unwrap_or_else(|| panic!("no default key: {list}"));
    let key = line.split_whitespace().nth(1).unwrap().to_string();
    let fp = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("sha256="))
        .unwrap()
        .to_string();
    (key, fp)
}

fn node_prefix(d: &Daemon) -> String {
    let t = std::fs::read_to_string(d.data.join("node.toml")).unwrap();
    t.split('"').nth(1).unwrap().to_string()
}

#[test]
fn key_trust_fetch_between_two_daemons() {
    let a = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let b = Daemon::start(&[]);
    let body = noise(100_000, 5);
    let f = a.dir.path().join("f");
    std::fs::write(&f, &body).unwrap();
    a.ok(&["put", f.to_str().unwrap(), "/trust/file"]);
    // The key was made under A's own node prefix, not /granary/publisher.
    let (key, fp) = default_key(&a);
    let prefix = node_prefix(&a);
    assert!(
        key.starts_with(&format!("{prefix}/KEY/")),
        "{key} vs {prefix}"
    );
    assert_ne!(node_prefix(&a), node_prefix(&b));
    // `key export` with no name: the default key's certificate.
    let exported = a.ok(&["key", "export"]);
    let cert = a.dir.path().join("a.ndncert");
    std::fs::write(&cert, &exported).unwrap();

    // B reaches A for the data and for A's node prefix.
    let a_uri = format!("tcp://{}", a.tcp.as_ref().unwrap());
    b.ok(&["route", "add", "/trust", &a_uri]);
    b.ok(&["route", "add", &prefix, &a_uri]);
    let out = b.dir.path().join("out");
    let o = b.cli(&["get", "/trust/file", "-o", out.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("granary key trust --fetch {key}"))
            && err.contains("granary key export"),
        "{err}"
    );

    // A wrong pin is refused, and nothing is trusted.
    let wrong = "00".repeat(32);
    let o = b.cli(&["key", "trust", "--fetch", &key, "--fingerprint", &wrong]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("fingerprint mismatch"), "{err}");
    assert!(err.contains(&fp), "{err}");
    assert!(!b.ok(&["key", "list"]).contains("anchor"));
    // Without a terminal, neither --yes nor --fingerprint: refused.
    let o = b
        .command(&["key", "trust", "--fetch", &key])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--yes"));
    // The right pin (colons or not, any case): trusted, and the fetch works.
    let o = b.cli(&[
        "key",
        "trust",
        "--fetch",
        &key,
        "--fingerprint",
        &fp.replace(':', "").to_lowercase(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("key type     ed25519") && err.contains(&fp),
        "{err}"
    );
    assert!(b.ok(&["key", "list"]).contains(&format!("sha256={fp}")));
    b.ok(&["get", "/trust/file", "-o", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), body);
    // The exported file is the same certificate.
    let o = b.ok(&["key", "trust", cert.to_str().unwrap()]);
    assert!(o.starts_with(&format!("{key}/")), "{o}");
}

#[test]
fn key_trust_of_a_non_certificate_says_so() {
    let d = Daemon::start(&[]);
    let empty = d.dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let text = d.dir.path().join("text");
    std::fs::write(&text, b"hello, this is not a certificate\n").unwrap();
    for (f, want) in [(&empty, "is empty"), (&text, "")] {
        let o = d.cli(&["key", "trust", f.to_str().unwrap(), "--yes"]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("not an NDN certificate: ") && err.contains(want),
            "{err}"
        );
    }
    // An existing data directory's /granary/publisher key keeps working:
    // a default key, whatever its name, is used. (The daemon made a key of
    // its own at first start; an older data directory had this one as its
    // default instead.)
    d.ok(&["key", "gen", "/granary/publisher"]);
    d.ok(&["key", "default", "/granary/publisher"]);
    let f = d.dir.path().join("f");
    std::fs::write(&f, b"bytes").unwrap();
    d.ok(&["put", f.to_str().unwrap(), "/old/key", "--sign", "ed25519"]);
    let s = d.ok(&["stat", "/old/key"]);
    assert!(s.contains("/granary/publisher/KEY/"), "{s}");
    let out = d.dir.path().join("out");
    d.ok(&["get", "/old/key", "-o", out.to_str().unwrap()]);
}

#[test]
fn put_says_which_data_directory_and_key_the_daemon_used() {
    let d = Daemon::start(&[]);
    let other = tempfile::tempdir().unwrap();
    let f = d.dir.path().join("f");
    std::fs::write(&f, b"some bytes").unwrap();
    let o = granary()
        .args([
            "--data-dir",
            other.path().to_str().unwrap(),
            "--socket",
            d.socket.to_str().unwrap(),
            "put",
            f.to_str().unwrap(),
            "/dd/file",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("uses the data directory {}", d.data.display()))
            && err.contains("signed with its key /granary/"),
        "{err}"
    );
    // The same data directory: no note.
    let err = d.cli(&["put", f.to_str().unwrap(), "/dd/file2"]).stderr;
    assert!(!String::from_utf8_lossy(&err).contains("note:"));
}
