//! put → get through a running daemon: files stay files, are served at once,
//! renamed in O(1), removed; hostile names are refused.

use crate::common;

use common::*;

/// `granary put - NAME` with its standard input piped.
fn put_from_stdin(d: &Daemon, name: &str) -> std::process::Child {
    granary()
        .args([
            "--data-dir",
            d.dir.path().to_str().unwrap(),
            "put",
            "-",
            name,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

#[test]
fn put_get_round_trips_at_segment_boundaries() {
    let d = Daemon::start(&[]);
    for len in [0usize, 1, 8191, 8192, 8193, 100 << 20] {
        let src = d.dir.path().join(format!("in{len}"));
        std::fs::write(&src, data(len)).unwrap();
        let name = format!("/files/f{len}");
        let out = d.ok(&["put", src.to_str().unwrap(), &name]);
        assert!(out.starts_with(&format!("{name}/v=")), "{out}");
        let dst = d.dir.path().join(format!("out{len}"));
        d.ok(&["get", &name, "-o", dst.to_str().unwrap()]);
        assert_eq!(
            std::fs::read(&dst).unwrap(),
            data(len),
            "round trip of {len} bytes"
        );
    }
    let ls = d.ok(&["ls", "/files"]);
    assert_eq!(ls.lines().count(), 6, "{ls}");
    let stat = d.ok(&["stat", "/files/f8193"]);
    assert!(
        stat.contains("\"size\": 8193") && stat.contains("\"segment_size\": 8192"),
        "{stat}"
    );
    // The published file is a regular file with the same bytes.
    let path = stat.lines().find_map(|l| l.strip_prefix("path ")).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), data(8193));
}

#[test]
fn rename_serves_under_the_new_name_only() {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("in");
    std::fs::write(&src, data(100_000)).unwrap();
    let versioned = d
        .ok(&["put", src.to_str().unwrap(), "/old/name"])
        .trim()
        .to_string();
    // Fetch once so the node's cache holds the old name's packets.
    d.ok(&[
        "get",
        "/old/name",
        "-o",
        d.dir.path().join("warm").to_str().unwrap(),
    ]);
    assert!(d.cs_stat("entries") > 0);
    d.ok(&["mv", "/old/name", "/new/name"]);
    // The old name no longer answers, not even from the cache.
    let o = d.cli(&["peek", &format!("{versioned}/seg=0"), "--lifetime", "1000"]);
    assert!(!o.status.success(), "old versioned name still served");
    let dst = d.dir.path().join("out");
    d.ok(&["get", "/new/name", "-o", dst.to_str().unwrap()]);
    assert_eq!(std::fs::read(&dst).unwrap(), data(100_000));
    let o = d.cli(&["get", "/old/name", "-o", dst.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not found"));
    // Remove.
    d.ok(&["rm", "/new/name"]);
    assert!(!d.cli(&["get", "/new/name"]).status.success());
    assert!(d.ok(&["ls"]).is_empty());
}

#[test]
fn publish_from_stdin_and_refuse_hostile_names() {
    let d = Daemon::start(&[]);
    let mut child = put_from_stdin(&d, "/stdin/file");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&data(20_000))
        .unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
    let dst = d.dir.path().join("o");
    d.ok(&["get", "/stdin/file", "-o", dst.to_str().unwrap()]);
    assert_eq!(std::fs::read(&dst).unwrap(), data(20_000));
    let src = d.dir.path().join("x");
    std::fs::write(&src, b"x").unwrap();
    let many = "/c".repeat(10_000);
    let o = d.cli(&["put", src.to_str().unwrap(), &many]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("components"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = d.cli(&["put", src.to_str().unwrap(), "/a/v=3"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("version"));
    // Traversal attempts stay inside the repository.
    d.ok(&["put", src.to_str().unwrap(), "/..%2F..%2Fescape"]);
    assert!(
        !d.dir.path().join("escape").exists()
            && !d.dir.path().parent().unwrap().join("escape").exists()
    );
}

/// `kill -9` in the middle of a large ingest: nothing partial becomes
/// visible, what was published before is intact, leftovers are cleaned.
#[test]
fn kill_dash_nine_mid_ingest_loses_nothing_acknowledged() {
    use std::io::Write;
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("a");
    std::fs::write(&src, data(300_000)).unwrap();
    d.ok(&["put", src.to_str().unwrap(), "/safe/a"]);
    let mut child = put_from_stdin(&d, "/safe/big");
    let mut stdin = child.stdin.take().unwrap();
    let chunk = vec![0x5Au8; 1 << 20];
    // Stream part of a 2 GiB file, then kill the ingest mid-way.
    for _ in 0..128 {
        stdin.write_all(&chunk).unwrap();
    }
    let tmp = d.dir.path().join("repo/tmp");
    assert!(
        std::fs::read_dir(&tmp).unwrap().count() > 0,
        "ingest in progress"
    );
    std::process::Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    let _ = child.wait();
    drop(stdin);
    // Not visible, not served; the earlier file is intact and verifies.
    assert_eq!(d.ok(&["ls"]).lines().count(), 1);
    assert!(!d.cli(&["get", "/safe/big"]).status.success());
    let out = d.dir.path().join("a.out");
    d.ok(&["get", "/safe/a", "-o", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), data(300_000));
    // The next store open (here: `ls`) removed the dead ingest's temp files.
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
}

/// Every signing policy round-trips with verification; a byte changed on
/// disk after publishing is caught and never written out as good.
#[test]
fn signing_policies_and_tampering() {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("in");
    std::fs::write(&src, data(200_000)).unwrap();
    d.ok(&["key", "gen", "/lab/ec", "--type", "ecdsa"]);
    for (policy, extra) in [
        ("manifest", vec![]),
        ("digest", vec![]),
        ("ecdsa", vec!["--key", "/lab/ec"]),
    ] {
        let name = format!("/pol/{policy}");
        let mut args = vec!["put", src.to_str().unwrap(), &name, "--sign", policy];
        args.extend(extra.iter().copied());
        d.ok(&args);
        let dst = d.dir.path().join(format!("out-{policy}"));
        let mut get = vec!["get", &name, "-o", dst.to_str().unwrap()];
        if policy == "digest" {
            // A DigestSha256 manifest proves no origin: refused without
            // --integrity-only, which then says so.
            let o = d.cli(&get);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "{policy}: accepted: {err}");
            assert!(err.contains("--integrity-only"), "{err}");
            assert!(!dst.exists());
            get.push("--integrity-only");
        }
        let o = d.cli(&get);
        assert!(
            o.status.success(),
            "{policy}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let how = String::from_utf8_lossy(&o.stderr).to_string();
        match policy {
            "manifest" => assert!(how.contains("the manifest signed by /lab/ec/KEY/"), "{how}"),
            "digest" => assert!(
                how.contains("DigestSha256") && how.contains("integrity only"),
                "{how}"
            ),
            _ => assert!(how.contains("manifest signed by /lab/ec"), "{how}"),
        }
        assert_eq!(std::fs::read(&dst).unwrap(), data(200_000));
    }
    // Tamper with the stored bytes of a fresh file (not yet in any cache).
    // Fixed 8 KiB segments, so that byte 100,000 is in segment 12.
    d.ok(&[
        "put",
        src.to_str().unwrap(),
        "/pol/tampered",
        "--chunking",
        "fixed",
    ]);
    let stat = d.ok(&["stat", "/pol/tampered"]);
    let path = stat
        .lines()
        .find_map(|l| l.strip_prefix("path "))
        .unwrap()
        .to_string();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100_000] ^= 0xFF; // inside segment 12
    std::fs::write(&path, &bytes).unwrap();
    let dst = d.dir.path().join("out-tampered");
    let o = d.cli(&[
        "get",
        "--no-dedup",
        "/pol/tampered",
        "-o",
        dst.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    // The repository itself refuses to vouch for the changed segment (it
    // no longer matches the hash taken at ingest: tests/integrity.rs); the
    // consumer's own manifest check is tested with NullSignature segments,
    // which the repository does not re-hash (tests/transfer.rs).
    assert!(err.contains("seg=12: Nack"), "{err}");
    // Nothing is published under the output name; the partial file holds
    // only verified segments: the bad one's bytes are never written.
    assert!(!dst.exists(), "no output file after a failed verification");
    let part = std::fs::read(d.dir.path().join("out-tampered.part")).unwrap();
    assert_eq!(part.len(), 200_000);
    assert!(
        part[12 * 8192..13 * 8192].iter().all(|b| *b == 0),
        "the bad segment's bytes were written"
    );
    for seg in (0..25).filter(|s| *s != 12) {
        let r = seg * 8192..((seg + 1) * 8192).min(200_000);
        let got = &part[r.clone()];
        assert!(
            got == &data(200_000)[r] || got.iter().all(|b| *b == 0),
            "segment {seg} is neither verified bytes nor unwritten"
        );
    }
}

/// A consumer that does not know the publisher's key refuses the data until
/// it trusts the publisher's certificate.
#[test]
fn unknown_publisher_is_refused_until_trusted() {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("in");
    std::fs::write(&src, data(50_000)).unwrap();
    d.ok(&["key", "gen", "/pub/alice"]);
    d.ok(&["put", src.to_str().unwrap(), "/shared/file"]);
    let consumer = tempfile::tempdir().unwrap();
    let cd = consumer.path().to_str().unwrap();
    let sock = d.socket.to_str().unwrap();
    let get = || {
        granary()
            .args(["--data-dir", cd, "--socket", sock, "get", "/shared/file"])
            .output()
            .unwrap()
    };
    let o = get();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not in the keychain"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let cert = consumer.path().join("alice.ndncert");
    std::fs::write(&cert, d.ok(&["key", "export", "/pub/alice"])).unwrap();
    let t = granary()
        .args(["--data-dir", cd, "key", "trust", cert.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(t.status.success());
    let o = get();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout, data(50_000));
}

/// `<prefix>/32=ls` lists a prefix's children, as the NDN-DPDK file server does.
#[test]
fn directory_listing() {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("x");
    std::fs::write(&src, b"x").unwrap();
    for n in [
        "/dir/a.nc",
        "/dir/sub/b.nc",
        "/dir/sub/c.nc",
        "/dir/both",
        "/dir/both/inner",
    ] {
        d.ok(&["put", src.to_str().unwrap(), n]);
    }
    let o = d.cli(&["peek", "/dir/32=ls", "--prefix", "--fresh"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "a.nc\nboth\nboth/\nsub/\n"
    );
    let o = d.cli(&["peek", "/dir/sub/32=ls", "--prefix", "--fresh"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "b.nc\nc.nc\n");
    assert!(!d
        .cli(&["peek", "/nothing/here/32=ls", "--prefix", "--fresh"])
        .status
        .success());
}

#[test]
fn versions_kept_per_policy() {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("x");
    for i in 0..4u8 {
        std::fs::write(&src, [i; 10]).unwrap();
        d.ok(&[
            "put",
            src.to_str().unwrap(),
            "/kept",
            "--version",
            &(i as u64 + 1).to_string(),
            "--keep",
            "2",
        ]);
    }
    let ls = d.ok(&["ls", "/kept"]);
    assert_eq!(ls, "/kept/v=3 10 bytes\n/kept/v=4 10 bytes\n");
    let o = d.cli(&["get", "/kept"]);
    assert_eq!(o.stdout, vec![3u8; 10], "latest version served");
    assert!(!d.cli(&["get", "/kept/v=1"]).status.success());
}

/// `granary put FILE` is streamed in by the running daemon; `kill -9` of the
/// daemon in the middle of a 2 GiB ingest loses nothing acknowledged and
/// leaves nothing partial after a restart.
#[test]
fn daemon_streams_put_and_survives_kill_dash_nine() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    std::fs::create_dir(&data_dir).unwrap();
    let small = dir.path().join("small");
    std::fs::write(&small, data(70_000)).unwrap();
    let big = dir.path().join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(2 << 30)
        .unwrap(); // sparse 2 GiB
    let d = Daemon::start_at(tempfile::tempdir().unwrap(), data_dir.clone(), &[]);
    let o = d.cli(&["put", small.to_str().unwrap(), "/kill/small"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("streamed in by the daemon"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let put = granary()
        .args([
            "--data-dir",
            data_dir.to_str().unwrap(),
            "--socket",
            d.socket.to_str().unwrap(),
            "put",
            big.to_str().unwrap(),
            "/kill/big",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the daemon has started writing, then kill it hard.
    let tmp = data_dir.join("repo/tmp");
    let t = std::time::Instant::now();
    while std::fs::read_dir(&tmp).map(|r| r.count()).unwrap_or(0) == 0 {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "ingest never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    std::process::Command::new("kill")
        .args(["-9", &d.child.id().to_string()])
        .status()
        .unwrap();
    let out = put.wait_with_output().unwrap();
    assert!(
        !out.status.success(),
        "the interrupted put must not report success"
    );
    assert!(
        std::fs::read_dir(&tmp).unwrap().count() > 0,
        "a partial temp file was left by the crash"
    );
    // Restart on the same data directory.
    drop(d);
    let d2 = Daemon::start_at(tempfile::tempdir().unwrap(), data_dir.clone(), &[]);
    assert!(d2.ok(&["ls"]).starts_with("/kill/small/v="));
    assert_eq!(d2.ok(&["ls"]).lines().count(), 1, "no partial file visible");
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "leftovers cleaned on restart"
    );
    let o = d2.cli(&["get", "/kill/small"]);
    assert!(o.status.success());
    assert_eq!(
        o.stdout,
        data(70_000),
        "the acknowledged file is intact and verifies"
    );
}

/// mv of a 1 GiB file: O(1) (same inode, and under a tenth of the time the
/// `put` of the same file took, which read and hashed it; typically 1–3 ms,
/// 20–120 ms on a loaded machine, against seconds for the put),
/// fetched and verified under the new name; the old name no longer answers.
#[test]
fn rename_of_a_one_gib_file() {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("big");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&src).unwrap());
        let block: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        for _ in 0..1024 {
            f.write_all(&block).unwrap();
        }
    }
    let t = std::time::Instant::now();
    let versioned = d
        .ok(&["put", src.to_str().unwrap(), "/big/old"])
        .trim()
        .to_string();
    let put_ms = t.elapsed().as_secs_f64() * 1e3;
    let ino = |n: &str| {
        use std::os::unix::fs::MetadataExt;
        let stat = d.ok(&["stat", n]);
        let path = stat
            .lines()
            .find_map(|l| l.strip_prefix("path "))
            .unwrap()
            .to_string();
        std::fs::metadata(path).unwrap().ino()
    };
    let before = ino("/big/old");
    let o = d.cli(&["mv", "/big/old", "/big/new"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let ms: f64 = err
        .lines()
        .find_map(|l| l.strip_prefix("renamed in "))
        .unwrap()
        .trim_end_matches(" ms")
        .parse()
        .unwrap();
    // O(1), not O(size): the file itself is renamed, its bytes neither
    // copied nor read again (the times are printed, not compared).
    eprintln!("rename took {ms} ms, the put {put_ms} ms");
    assert_eq!(ino("/big/new"), before, "no data copied");
    let dst = d.dir.path().join("out");
    let o = d.cli(&["get", "/big/new", "-o", dst.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("verified against the manifest signed by"));
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), 1 << 30);
    assert_eq!(
        granary_packet::sha256(&std::fs::read(&dst).unwrap()),
        granary_packet::sha256(&std::fs::read(&src).unwrap())
    );
    assert!(!d.cli(&["get", "/big/old"]).status.success());
    assert!(!d
        .cli(&["peek", &format!("{versioned}/seg=0"), "--lifetime", "1000"])
        .status
        .success());
}

/// Segments the repository rebuilds for one SHA-256 (DigestSha256: manifest
/// and digest policies) come with NDNLPv2 CachePolicy NoCache and stay out
/// of the content store; per-packet signed ones (ed25519) are cached, as a
/// signature costs far more than a lookup.
#[test]
fn cheap_segments_are_rebuilt_not_cached() {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("in");
    std::fs::write(&src, data(100_000)).unwrap(); // 13 segments of 8 KiB
    d.ok(&["key", "gen", "/lab/ed", "--type", "ed25519"]);
    let fetch = |name: &str| {
        let dst = d.dir.path().join("out");
        // (`/nc/digest`: a DigestSha256 manifest, integrity only.)
        d.ok(&[
            "get",
            "--no-dedup",
            "--integrity-only",
            name,
            "-o",
            dst.to_str().unwrap(),
        ]);
        assert_eq!(std::fs::read(&dst).unwrap(), data(100_000), "{name}");
    };
    let s = src.to_str().unwrap();
    d.ok(&[
        "put",
        s,
        "/nc/digest",
        "--sign",
        "digest",
        "--chunking",
        "fixed",
    ]);
    let before = d.cs_stat("entries");
    fetch("/nc/digest");
    fetch("/nc/digest"); // served again, by the repository
    assert_eq!(
        d.cs_stat("entries"),
        before,
        "digest-signed segments cached"
    );
    d.ok(&[
        "put",
        s,
        "/nc/ed",
        "--sign",
        "ed25519",
        "--key",
        "/lab/ed",
        "--chunking",
        "fixed",
    ]);
    let before = d.cs_stat("entries");
    fetch("/nc/ed");
    assert!(
        d.cs_stat("entries") >= before + 13,
        "ed25519-signed segments not cached"
    );
}

/// `repo config --segment-signature null`: a running daemon at once serves
/// the versioned segments of `manifest` versions with a NullSignature
/// (no per-segment SHA-256), kept out of the content store; `granary get`
/// still verifies every segment through the manifest, and refuses them
/// without it. Segments asked for without a version and `--sign digest`
/// versions keep DigestSha256; `digest` brings DigestSha256 back.
#[test]
fn null_signed_segments_when_configured() {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("in");
    std::fs::write(&src, data(100_000)).unwrap();
    let s = src.to_str().unwrap();
    d.ok(&["put", s, "/ns/m", "--chunking", "fixed"]);
    d.ok(&["put", s, "/ns/d", "--sign", "digest", "--chunking", "fixed"]);
    let version = |n: &str| -> u64 {
        let out = d.ok(&["stat", n]);
        let v: serde_json::Value =
            serde_json::from_str(&out[..out.rfind("path ").unwrap()]).unwrap();
        v["version"].as_u64().unwrap()
    };
    let (vm, vd) = (version("/ns/m"), version("/ns/d"));
    let sig = |uri: &str| -> String {
        let o = d.cli(&["peek", uri]);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{uri}: {err}");
        ["SignatureNull", "DigestSha256"]
            .into_iter()
            .find(|t| err.contains(&format!(", {t}, ")))
            .unwrap_or_else(|| panic!("{uri}: {err}"))
            .to_string()
    };
    let seg3 = format!("/ns/m/v={vm}/seg=3");
    assert_eq!(sig(&seg3), "DigestSha256", "the default");
    assert!(d
        .ok(&["repo", "config"])
        .contains("segment_signature = digest"));

    d.ok(&["repo", "config", "--segment-signature", "null"]);
    assert!(d
        .ok(&["repo", "config"])
        .contains("segment_signature = null"));
    assert_eq!(sig(&seg3), "SignatureNull");
    assert_eq!(
        sig("/ns/m/seg=3"),
        "DigestSha256",
        "no version: no manifest"
    );
    assert_eq!(sig(&format!("/ns/d/v={vd}/seg=3")), "DigestSha256");

    let dst = d.dir.path().join("out");
    let mut before = d.cs_stat("entries");
    for round in 0..2 {
        let o = d.cli(&["get", "--no-dedup", "/ns/m", "-o", dst.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{err}");
        assert!(err.contains("the manifest signed by"), "{err}");
        assert_eq!(std::fs::read(&dst).unwrap(), data(100_000));
        // The first fetch caches the key-signed manifest root only.
        assert!(
            d.cs_stat("entries") <= before + 1,
            "Null-signed segments cached"
        );
        if round == 0 {
            before = d.cs_stat("entries");
        } else {
            assert_eq!(d.cs_stat("entries"), before, "Null-signed segments cached");
        }
    }
    // Without the manifest nothing vouches for them.
    std::fs::remove_file(&dst).unwrap();
    let o = d.cli(&[
        "get",
        "--no-dedup",
        "--no-manifest",
        "/ns/m",
        "-o",
        dst.to_str().unwrap(),
    ]);
    assert!(
        !o.status.success(),
        "Null segments accepted without a manifest"
    );
    assert!(!dst.exists() || std::fs::read(&dst).unwrap() != data(100_000));

    d.ok(&["repo", "config", "--segment-signature", "digest"]);
    assert_eq!(sig(&seg3), "DigestSha256");
    // Values outside the two are refused, on the command line and in the file.
    assert!(!d
        .cli(&["repo", "config", "--segment-signature", "none"])
        .status
        .success());
    std::fs::write(
        d.data.join("repo/config.toml"),
        "segment_signature = \"nul\"\n",
    )
    .unwrap();
    let o = d.cli(&["repo", "config"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("segment_signature \"nul\""));
}

/// Eight writers of one version at once, each with other content: exactly
/// one is told "published", the others get "already exists", and the
/// stored version is wholly the winner's (its data and its manifest), through
/// the daemon and without it (each `put` then ingests in its own process).
#[test]
fn one_writer_per_version_through_the_daemon_and_across_processes() {
    let d = Daemon::start(&[]);
    for (round, via_daemon) in [(0u64, true), (1, false)] {
        let version = (4242 + round).to_string();
        let name = format!("/race/r{round}");
        let inputs: Vec<_> = (0..8u64)
            .map(|w| {
                let p = d.dir.path().join(format!("race{round}-{w}"));
                std::fs::write(&p, noise(300_000 + w as usize * 977, round * 100 + w + 1)).unwrap();
                p
            })
            .collect();
        let children: Vec<_> = inputs
            .iter()
            .map(|p| {
                let mut c = if via_daemon {
                    d.command(&[])
                } else {
                    // No daemon at this socket: the put ingests here.
                    let mut c = granary();
                    c.args([
                        "--data-dir",
                        d.data.to_str().unwrap(),
                        "--socket",
                        d.dir.path().join("nobody.sock").to_str().unwrap(),
                    ]);
                    c
                };
                c.args(["put", p.to_str().unwrap(), &name, "--version", &version])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let winners: Vec<usize> = (0..8).filter(|i| outs[*i].status.success()).collect();
        assert_eq!(
            winners.len(),
            1,
            "round {round}: {} writers told \"published\"",
            winners.len()
        );
        for (i, o) in outs.iter().enumerate() {
            if i != winners[0] {
                let e = String::from_utf8_lossy(&o.stderr);
                assert!(e.contains("already exists"), "writer {i}: {e}");
                assert!(!e.contains("panicked"), "{e}");
            }
        }
        // Another application fetches it (manifest-verified): the winner's bytes.
        let got = d.dir.path().join(format!("got{round}"));
        let other = other_app(&d.data, d.dir.path());
        let o = get_as(
            other.path(),
            &d.socket,
            &format!("{name}/v={version}"),
            &got,
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            std::fs::read(&got).unwrap(),
            std::fs::read(&inputs[winners[0]]).unwrap(),
            "round {round}: the stored version is not the winner's"
        );
        // Nothing left behind by the losers: the scrub finds one clean version.
        let s = d.ok(&["repo", "scrub", &name]);
        assert!(
            s.contains("scrubbed 1 version(s)") && s.contains("0 damaged"),
            "{s}"
        );
    }
}

/// A version whose files cannot even be checked (a truncated `.offsets`)
/// is reported damaged, and the scrub goes on to check the others.
#[test]
fn scrub_reports_an_uncheckable_version_and_goes_on() {
    let d = Daemon::start(&[]);
    for i in 0..3 {
        let p = d.dir.path().join(format!("in{i}"));
        std::fs::write(&p, noise(200_000, i + 7)).unwrap();
        d.ok(&[
            "put",
            p.to_str().unwrap(),
            &format!("/scrub/f{i}"),
            "--chunking",
            "fastcdc",
        ]);
    }
    let stat = d.ok(&["stat", "/scrub/f0"]);
    let path = stat.lines().find_map(|l| l.strip_prefix("path ")).unwrap();
    let offsets = format!("{path}.offsets");
    let len = std::fs::metadata(&offsets).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&offsets)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let o = d.cli(&["repo", "scrub", "--json"]);
    assert!(!o.status.success(), "damage must fail the scrub");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["versions"], 3, "{v}");
    assert_eq!(v["damaged"], 1, "{v}");
    assert_eq!(v["reports"][0]["name"], "/scrub/f0", "{v}");
    // Recorded: `stat` shows it.
    assert!(d.ok(&["stat", "/scrub/f0"]).contains("DAMAGED"));
}

/// A `mv` killed between moving the files and signing the manifest roots
/// again is completed by the next start of the daemon: every version is
/// served, verified, under the new name.
#[test]
fn a_killed_rename_is_completed_at_start() {
    let outer = tempfile::tempdir().unwrap();
    let data_dir = outer.path().join("data");
    std::fs::create_dir(&data_dir).unwrap();
    let d = Daemon::start_at(tempfile::tempdir().unwrap(), data_dir.clone(), &[]);
    let src = outer.path().join("in");
    std::fs::write(&src, noise(150_000, 3)).unwrap();
    for v in ["1", "2"] {
        d.ok(&["put", src.to_str().unwrap(), "/mv/a", "--version", v]);
    }
    // The state a `mv` killed midway leaves: its intent recorded, the files
    // moved, the manifest roots still naming the old name.
    let repo = d.data.join("repo");
    let store = granary_store::Store::open(&repo).unwrap();
    let (a, b) = (
        granary_packet::Name::from_uri("/mv/a").unwrap(),
        granary_packet::Name::from_uri("/mv/b").unwrap(),
    );
    std::fs::create_dir_all(repo.join("renames")).unwrap();
    std::fs::write(
        repo.join("renames/999999999-1.json"),
        r#"{"old":"/mv/a","new":"/mv/b"}"#,
    )
    .unwrap();
    store.rename(&a, &b).unwrap();
    // A second one killed earlier: one file beside /mv/c v=3 moved, its
    // data file not yet.
    d.ok(&["put", src.to_str().unwrap(), "/mv/c", "--version", "3"]);
    std::fs::write(
        repo.join("renames/999999999-2.json"),
        r#"{"old":"/mv/c","new":"/mv/d"}"#,
    )
    .unwrap();
    let c_dir = store
        .get(&granary_packet::Name::from_uri("/mv/c").unwrap(), Some(3))
        .unwrap()
        .path
        .parent()
        .unwrap()
        .to_path_buf();
    let d_dir = c_dir.parent().unwrap().join("d");
    std::fs::create_dir_all(&d_dir).unwrap();
    std::fs::rename(c_dir.join("@3.hashes"), d_dir.join("@3.hashes")).unwrap();
    drop(store);
    let other = other_app(&data_dir, outer.path());
    let socket = d.socket.clone();
    let get = |dst: &std::path::Path| get_as(other.path(), &socket, "/mv/b/v=2", dst);
    let dst = outer.path().join("out");
    // The name the stored manifest root of /mv/b v=2 carries.
    let root_name = || {
        let s = granary_store::Store::open(&repo).unwrap();
        let e = s.get(&b, Some(2)).unwrap();
        let wire = s.read_extra(&e, "manifest").unwrap();
        granary_packet::Data::decode(bytes::Bytes::from(wire))
            .unwrap()
            .name()
            .to_string()
    };
    // Half renamed: the manifest root still names /mv/a.
    assert!(root_name().starts_with("/mv/a/"), "{}", root_name());
    drop(d);
    let d = Daemon::start_at(tempfile::tempdir().unwrap(), data_dir, &[]);
    let o = get(&dst);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&dst).unwrap(), noise(150_000, 3));
    assert!(root_name().starts_with("/mv/b/"), "{}", root_name());
    let o = get_as(other.path(), &socket, "/mv/d/v=3", &dst);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&dst).unwrap(), noise(150_000, 3));
    assert!(d.ok(&["ls", "/mv/c"]).is_empty(), "/mv/c still listed");
    assert!(!d.data.join("repo/renames/999999999-1.json").exists());
}

/// `granary key export -o cert` of the publisher key in `data_dir`.
fn export_key(data_dir: &std::path::Path, cert: &std::path::Path) {
    let export = granary()
        .args([
            "--data-dir",
            data_dir.to_str().unwrap(),
            "key",
            "export",
            "-o",
        ])
        .arg(cert)
        .output()
        .unwrap();
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
}

/// Another application on the node: a data directory of its own that
/// trusts the node's publisher key (exported from `data_dir` into `tmp`).
fn other_app(data_dir: &std::path::Path, tmp: &std::path::Path) -> tempfile::TempDir {
    let other = tempfile::tempdir().unwrap();
    let cert = tmp.join(format!("publisher-{}.ndncert", std::process::id()));
    export_key(data_dir, &cert);
    let trust = granary()
        .args(["--data-dir", other.path().to_str().unwrap(), "key", "trust"])
        .arg(&cert)
        .arg("--yes")
        .output()
        .unwrap();
    assert!(
        trust.status.success(),
        "{}",
        String::from_utf8_lossy(&trust.stderr)
    );
    other
}

/// The first line of `out` that is a JSON object (`--json` output among
/// other lines), or null.
fn first_json_line(out: &[u8]) -> serde_json::Value {
    out.split(|b| *b == b'\n')
        .find(|l| l.starts_with(b"{"))
        .map(|l| serde_json::from_slice(l).unwrap())
        .unwrap_or_default()
}

/// 400 kB of noise (from `seed`) the node `d` publishes as `name`, and
/// another application's data directory (in the returned temporary
/// directory) that trusts the node's key: (bytes, outer directory, data
/// directory).
fn held_and_another_app(
    d: &Daemon,
    name: &str,
    seed: u64,
) -> (Vec<u8>, tempfile::TempDir, tempfile::TempDir) {
    let src = d.dir.path().join("f");
    let data = noise(400_000, seed);
    std::fs::write(&src, &data).unwrap();
    d.ok(&["put", src.to_str().unwrap(), name]);
    let outer = tempfile::tempdir().unwrap();
    let other = other_app(&d.data, outer.path());
    (data, outer, other)
}

/// `granary get URI -o DST` as the application whose data directory is
/// `other`, through the node at `socket`.
fn get_as(
    other: &std::path::Path,
    socket: &std::path::Path,
    uri: &str,
    dst: &std::path::Path,
) -> std::process::Output {
    granary()
        .args([
            "--data-dir",
            other.to_str().unwrap(),
            "--socket",
            socket.to_str().unwrap(),
        ])
        .args(["get", uri, "-o", dst.to_str().unwrap()])
        .output()
        .unwrap()
}

/// A put of a version that is stored already is refused before any byte is
/// read: fed by a standard input that never ends, it still exits at once.
#[test]
fn a_stored_version_is_refused_before_reading() {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("in");
    std::fs::write(&src, noise(10_000, 4)).unwrap();
    d.ok(&["put", src.to_str().unwrap(), "/once/f", "--version", "5"]);
    let mut c = d
        .command(&["put", "-", "/once/f", "--version", "5"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(s) = c.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed().as_secs() < 10, "the put waited for its input");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(err.contains("already exists"), "{err}");
}

/// Another application on the node fetches a version the node's repository
/// holds by name (the whole file in the by-name pipeline), not one hash
/// request per chunk from the same store; and does not keep it again.
#[test]
fn another_application_gets_what_the_node_holds_by_name() {
    // A second Unix listener, as NFD's socket (`--nfd-socket`) is: an
    // application that reaches the node there gets the file too.
    let sockdir = tempfile::tempdir().unwrap();
    let extra = sockdir.path().join("nfd.sock");
    let d = Daemon::start(&["--listen", &format!("unix://{}", extra.display())]);
    let (data, outer, other) = held_and_another_app(&d, "/held/f", 9);
    let dst = outer.path().join("out");
    let get = |socket: &std::path::Path, extra: &[&str]| {
        let _ = std::fs::remove_file(&dst);
        let o = granary()
            .args([
                "--data-dir",
                other.path().to_str().unwrap(),
                "--socket",
                socket.to_str().unwrap(),
            ])
            .args(["get", "/held/f", "-o", dst.to_str().unwrap(), "--json"])
            .args(extra)
            .output()
            .unwrap();
        let v = first_json_line(&o.stdout);
        (o, v)
    };
    // By default: the node's file, passed over the file socket beside
    // whichever socket the application uses, every segment checked against
    // the signed manifest (decision 0100).
    for socket in [&d.socket, &extra] {
        let (o, v) = get(socket, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert_eq!(std::fs::read(&dst).unwrap(), data);
        assert_eq!(v["local"].as_array().map(|a| a.len()), Some(1), "{v}");
        assert_eq!(
            v["local"][0]["from_node"],
            true,
            "{}: {v}",
            socket.display()
        );
        let files = format!("{}.files", socket.display());
        assert_eq!(
            v["local"][0]["local_copy"]["source"].as_str(),
            Some(files.as_str()),
            "{v}"
        );
        assert!(
            v["local"][0]["local_copy"]["verified_by"]
                .as_str()
                .is_some(),
            "{v}"
        );
        // How the bytes were read (direct I/O or the page cache: which one
        // depends on what is cached, so only its range is checked).
        assert!(
            v["local"][0]["local_copy"]["read_direct"]
                .as_u64()
                .is_some_and(|n| n <= data.len() as u64),
            "{v}"
        );
        assert!(err.contains("(read "), "{err}");
        assert!(!err.contains("being kept"), "kept again: {err}");
    }
    // Without the local copy (--no-dedup): by name over NDN, no chunk asked
    // by hash, not kept again either.
    let (o, v) = get(&d.socket, &["--no-dedup"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(std::fs::read(&dst).unwrap(), data);
    assert!(
        v["dedup"].as_array().is_none_or(|a| a.is_empty()),
        "fetched by hash: {v}"
    );
    assert_eq!(v["objects"].as_array().map(|a| a.len()), Some(1), "{v}");
    assert!(v["local"].as_array().is_none_or(|a| a.is_empty()), "{v}");
    assert!(!err.contains("being kept"), "kept again: {err}");
    // A node file damaged on disk: the passed copy stops at the bad segment
    // before writing it, the fetch goes on by name, and the node withholds
    // that segment; wrong bytes never reach the output.
    let repo = d.data.join("repo");
    let stored = files_under(&repo)
        .into_iter()
        .map(|p| repo.join(p))
        .find(|p| std::fs::read(p).is_ok_and(|b| b == data))
        .expect("the node's data file");
    let mut bad = data.clone();
    bad[200_000] ^= 0xff;
    std::fs::write(&stored, &bad).unwrap();
    let (o, _) = get(&d.socket, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot be used"), "{err}");
    if o.status.success() {
        assert_eq!(std::fs::read(&dst).unwrap(), data, "{err}");
    } else {
        assert!(std::fs::read(&dst).map_or(true, |b| b != bad), "{err}");
    }
    // A node that does not hold it (only a route to the holder) still uses
    // the dedup path and keeps the copy: covered by tests/dedup.rs.
}

/// Another Unix user on the node (the daemon runs as root, the consumer as
/// `nobody`, as NFD's socket allows): it connects to the node's socket and
/// gets a held version from the node's own file; it cannot make the daemon
/// publish a file with the daemon's rights, neither with `granary put` (a
/// clear error) nor with a raw command (`granary peek -P`: a Nack), while
/// the same raw command from the node's own user is taken.
#[test]
fn another_user_fetches_from_the_node_but_cannot_command_it() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !rustix::process::geteuid().is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "this test runs a client as another user: it needs root (CI runs as root)"
        );
        eprintln!("*** skipped: running a client as another user needs root ***");
        return;
    }
    const NOBODY: u32 = 65534;
    // Everything `nobody` touches lives under /tmp (always 1777), whatever
    // TMPDIR and the checkout's directories allow: the node's directory,
    // the other user's, and a copy of the binary.
    let in_tmp = |prefix: &str| {
        let t = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in("/tmp")
            .unwrap();
        std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        t
    };
    let node_dir = in_tmp("granary-node-");
    let node_data = node_dir.path().to_path_buf();
    let d = Daemon::start_at(node_dir, node_data, &[]);
    let files_socket = {
        let mut s = d.socket.as_os_str().to_owned();
        s.push(".files");
        std::path::PathBuf::from(s)
    };
    for s in [&d.socket, &files_socket] {
        let mode = std::fs::metadata(s).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666, "{}: {mode:o}", s.display());
    }
    let src = d.dir.path().join("f");
    let data = noise(400_000, 11);
    std::fs::write(&src, &data).unwrap();
    d.ok(&["put", src.to_str().unwrap(), "/held/u"]);
    // The other user's directory: its data directory, its file, the
    // node's certificate and the binary it runs.
    let outer = in_tmp("granary-user-");
    let other = outer.path().join("data");
    let mine = outer.path().join("mine");
    std::fs::write(&mine, b"the other user's file").unwrap();
    let cert = outer.path().join("node.ndncert");
    export_key(&d.data, &cert);
    let bin = outer.path().join("granary");
    std::fs::copy(env!("CARGO_BIN_EXE_granary"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let st = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(outer.path())
        .status()
        .unwrap();
    assert!(st.success());
    let as_nobody = |mut c: std::process::Command| {
        c.uid(NOBODY).gid(NOBODY).env("HOME", outer.path());
        c.output().unwrap()
    };
    let as_other = |args: &[&str]| {
        let mut c = std::process::Command::new(&bin);
        c.args([
            "--data-dir",
            other.to_str().unwrap(),
            "--socket",
            d.socket.to_str().unwrap(),
        ])
        .args(args);
        as_nobody(c)
    };
    let o = as_other(&["key", "trust", cert.to_str().unwrap(), "--yes"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A fetch, from the node's file passed over its file socket.
    let dst = outer.path().join("out");
    let o = as_other(&["get", "/held/u", "-o", dst.to_str().unwrap(), "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(std::fs::read(&dst).unwrap(), data);
    let v = first_json_line(&o.stdout);
    assert_eq!(v["local"][0]["from_node"], true, "{v}");
    // `put` through the node: refused before anything is sent, and why.
    let o = as_other(&["put", mine.to_str().unwrap(), "/nobody/mine"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("takes files only from that user or root"),
        "{err}"
    );
    // A raw put command (`granary peek -P`, past the client's check) naming
    // a file only root may read: a Nack, nothing published. The same
    // command from root is taken, so the Nack is the owner check.
    let secret = d.dir.path().join("secret");
    std::fs::write(&secret, b"root only").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let params = |name: &str| {
        let p = outer
            .path()
            .join(format!("params-{}", name.replace('/', "_")));
        let v = serde_json::json!({
            "path": secret.to_str().unwrap(), "name": name, "sign": "digest",
        });
        std::fs::write(&p, v.to_string()).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        p
    };
    let raw = ["peek", "/localhost/granary/repo/put", "-P"];
    let p = params("/stolen/secret");
    let o = as_other(&[&raw[..], &[p.to_str().unwrap()]].concat());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("nack NoRoute"), "{err}");
    assert!(!d.ok(&["ls"]).contains("stolen"));
    let p = params("/root/secret");
    let out = d.ok(&[&raw[..], &[p.to_str().unwrap()]].concat());
    assert!(out.contains("\"ok\":true"), "{out}");
    assert!(d.ok(&["ls"]).contains("/root/secret"));
}

/// The repository's `holds` local command takes bad parameters without harm:
/// anything but a name and a numeric version of a stored file answers
/// `{"holds": false}`, and the node serves on.
#[test]
fn holds_answers_false_to_bad_parameters() {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("f");
    std::fs::write(&src, noise(10_000, 4)).unwrap();
    d.ok(&["put", src.to_str().unwrap(), "/held/g", "--version", "7"]);
    let v = 7;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ask = |params: Option<&[u8]>| -> Option<bool> {
        rt.block_on(async {
            let mut c = granary_app::Client::connect(&d.socket).await.unwrap();
            let mut f = granary_packet::InterestFields::new(
                granary_packet::Name::from_uri("/localhost/granary/repo/holds").unwrap(),
            );
            f.app_params = params.map(bytes::Bytes::copy_from_slice);
            f.lifetime = Some(2_000);
            match c.express(f).await.unwrap() {
                granary_app::Reply::Data(d) => {
                    serde_json::from_slice::<serde_json::Value>(d.content()).unwrap()["holds"]
                        .as_bool()
                }
                other => panic!("{other:?}"),
            }
        })
    };
    let good = format!(r#"{{"name":"/held/g","version":{v}}}"#);
    assert_eq!(ask(Some(good.as_bytes())), Some(true));
    for bad in [
        None,
        Some(&b"not json"[..]),
        Some(br#"{"name":5,"version":1}"#),
        Some(br#"{"name":"/held/g","version":"x"}"#),
        Some(br#"{"name":"/held/g"}"#),
        Some(br#"{"name":"%%%","version":1}"#),
        Some(br#"{"name":"/held/g","version":1}"#),
        Some(&[0xff, 0xfe, 0x00][..]),
    ] {
        assert_eq!(
            ask(bad),
            Some(false),
            "{:?}",
            bad.map(String::from_utf8_lossy)
        );
    }
    assert_eq!(ask(Some(good.as_bytes())), Some(true), "still serving");
}
