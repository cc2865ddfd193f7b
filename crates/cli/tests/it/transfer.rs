//! The fetch engine end to end: `granary get` / `granary cat` through a real
//! daemon, from Granary's repository (signed manifest), from python-ndn and
//! NDNts producers (per-packet DigestSha256, fetched with `--integrity-only`:
//! a digest proves no origin), with corrupt segments, an interrupted
//! download resumed, and byte ranges.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::*;
use serde_json::Value;

/// A peer producer process that printed `ready`; killed on drop.
struct Peer(Child);

impl Peer {
    fn start(mut c: Command) -> Peer {
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {c:?}: {e}"));
        let out = child.stdout.take().unwrap();
        let mut lines = BufReader::new(out).lines();
        let first = lines.next().map(|l| l.unwrap_or_default());
        assert_eq!(first.as_deref(), Some("ready"), "{c:?} did not get ready");
        std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
        Peer(child)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python_producer(d: &Daemon, prefix: &str, file: &std::path::Path, extra: &[&str]) -> Peer {
    let mut c = python_script("seg_producer.py");
    c.args([d.socket.to_str().unwrap(), prefix, file.to_str().unwrap()])
        .args(extra);
    Peer::start(c)
}

fn ndnts_producer(d: &Daemon, prefix: &str, file: &std::path::Path, extra: &[&str]) -> Peer {
    let mut c = node_script("seg_producer.mjs");
    c.args([d.socket.to_str().unwrap(), prefix, file.to_str().unwrap()])
        .args(extra);
    Peer::start(c)
}

/// `granary get … --json`: (success, JSON summary, stderr).
fn get_json(d: &Daemon, args: &[&str]) -> (bool, Option<Value>, String) {
    let mut a = vec!["get", "--no-dedup", "--json"];
    a.extend_from_slice(args);
    let o = d.cli(&a);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let v = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok());
    (
        o.status.success(),
        v,
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

#[test]
fn corrupt_segment_is_fetched_again_and_the_file_is_right() {
    let d = Daemon::start(&[]);
    let body = noise(100_000, 1);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    // Segment 5 is corrupt in the first answer only.
    let _p = python_producer(&d, "/py/once", &src, &["--corrupt", "5:1"]);
    let out = d.dir.path().join("out");
    let (ok, v, err) = get_json(
        &d,
        &["/py/once", "--integrity-only", "-o", out.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), body);
    let v = v.unwrap();
    assert!(v["stats"]["rejected"].as_u64().unwrap() >= 1, "{v}");
    assert!(err.contains("DigestSha256"), "{err}");
    assert_eq!(v["integrity_only"], true, "{v}");
}

#[test]
fn segment_corrupt_every_time_fails_loudly_and_is_never_written() {
    let d = Daemon::start(&[]);
    let body = noise(100_000, 2);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    let _p = python_producer(&d, "/py/always", &src, &["--corrupt", "5"]);
    let out = d.dir.path().join("out");
    let (ok, _, err) = get_json(
        &d,
        &[
            "/py/always",
            "--integrity-only",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(!ok, "a corrupt segment must fail the run");
    assert!(
        err.contains("segment 5 of /py/always/v=") && err.contains("failed verification"),
        "{err}"
    );
    assert!(!out.exists(), "no output file");
    let part = std::fs::read(d.dir.path().join("out.part")).unwrap();
    assert!(
        part[5 * 8000..6 * 8000].iter().all(|b| *b == 0),
        "bad bytes written"
    );
}

#[test]
fn manifest_tampering_in_the_repo_is_caught() {
    let d = Daemon::start(&[]);
    let body = noise(300_000, 3);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    // NullSignature segments: the repository does not re-hash what it does
    // not vouch for (with DigestSha256 it would refuse the changed segment
    // itself: tests/integrity.rs), so this is the consumer's own check.
    d.ok(&["repo", "config", "--segment-signature", "null"]);
    // Fixed 8 KiB segments: the assertions count and place them.
    d.ok(&[
        "put",
        src.to_str().unwrap(),
        "/repo/t",
        "--chunking",
        "fixed",
    ]);
    let stat = d.ok(&["stat", "/repo/t"]);
    let path = stat.lines().find_map(|l| l.strip_prefix("path ")).unwrap();
    let mut stored = std::fs::read(path).unwrap();
    stored[3 * 8192 + 17] ^= 0x40;
    std::fs::write(path, &stored).unwrap();
    let out = d.dir.path().join("out");
    let (ok, _, err) = get_json(&d, &["/repo/t", "-o", out.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("segment 3 of /repo/t/v=") && err.contains("signed manifest"),
        "{err}"
    );
    assert!(!out.exists());
    let part = std::fs::read(d.dir.path().join("out.part")).unwrap();
    assert!(part[3 * 8192..4 * 8192].iter().all(|b| *b == 0));
}

fn hashes_done(p: &std::path::Path) -> usize {
    std::fs::read(p)
        .map(|b| b.chunks(32).filter(|c| c.iter().any(|x| *x != 0)).count())
        .unwrap_or(0)
}

/// Starts a slow `granary get NAME -o OUT` (fixed window of `window`) and
/// SIGKILLs it once `at_least` segments are recorded in OUT.part.hashes.
/// Returns how many were recorded.
fn get_and_kill_midway(
    d: &Daemon,
    name: &str,
    out: &std::path::Path,
    window: &str,
    at_least: usize,
    extra: &[&str],
) -> u64 {
    let mut child = d
        .command(&[
            "get",
            "--no-dedup",
            name,
            "-o",
            out.to_str().unwrap(),
            "--pipeline-type",
            "fixed",
            "--pipeline-size",
            window,
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let hashes = granary_transfer_part(out, ".part.hashes");
    let t0 = std::time::Instant::now();
    while hashes_done(&hashes) < at_least {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the fetch ended before it could be interrupted"
        );
        assert!(t0.elapsed().as_secs() < 60, "no progress");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!out.exists());
    hashes_done(&hashes) as u64
}

fn granary_transfer_part(out: &std::path::Path, ext: &str) -> std::path::PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(ext);
    s.into()
}

/// Resumes OUT and checks: byte-identical, the damaged segment re-fetched,
/// fewer segments fetched than the whole, side files gone.
fn resume_and_check(
    d: &Daemon,
    name: &str,
    out: &std::path::Path,
    body: &[u8],
    total: u64,
    before: u64,
    extra: &[&str],
) {
    // Damage one completed segment on disk: resume must re-verify and refetch it.
    let part = granary_transfer_part(out, ".part");
    let mut p = std::fs::read(&part).unwrap();
    p[10] ^= 1;
    std::fs::write(&part, &p).unwrap();
    let mut args = vec![name, "-o", out.to_str().unwrap(), "--resume"];
    args.extend_from_slice(extra);
    let (ok, v, err) = get_json(d, &args);
    assert!(ok, "{err}");
    assert!(std::fs::read(out).unwrap() == body, "not byte-identical");
    let v = v.unwrap();
    let fetched = v["stats"]["segments"].as_u64().unwrap();
    let reused = v["objects"][0]["reused_segments"].as_u64().unwrap();
    assert!(reused > 0 && reused < before, "{v}");
    assert_eq!(fetched, total - reused, "{v}");
    assert!(fetched < total, "fetched everything again: {v}");
    assert!(err.contains("already on disk, re-verified"), "{err}");
    for ext in [".part", ".part.state", ".part.hashes"] {
        assert!(
            !granary_transfer_part(out, ext).exists(),
            "{ext} left behind"
        );
    }
}

#[test]
fn interrupted_download_resumes_and_fetches_only_the_rest() {
    let d = Daemon::start(&[]);
    let body = noise(48 << 20, 4);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    // Fixed 8 KiB segments: the assertions count and place them.
    d.ok(&[
        "put",
        src.to_str().unwrap(),
        "/big/r",
        "--chunking",
        "fixed",
    ]);
    let total = (48u64 << 20).div_ceil(8192);
    let out = d.dir.path().join("out");
    let before = get_and_kill_midway(&d, "/big/r", &out, "2", 300, &[]);
    assert!(before < total, "killed too late");
    resume_and_check(&d, "/big/r", &out, &body, total, before, &[]);
}

#[test]
fn interrupted_per_packet_download_resumes_from_recorded_hashes() {
    // No manifest (python-ndn producer): resume trusts only segments whose
    // bytes on disk match the hash recorded when they were verified.
    let d = Daemon::start(&[]);
    let body = noise(3_000_000, 8);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    let _p = python_producer(&d, "/py/resume", &src, &["--version", "3"]);
    let total = 3_000_000u64.div_ceil(8000);
    let out = d.dir.path().join("out");
    let digest = ["--integrity-only"];
    let before = get_and_kill_midway(&d, "/py/resume", &out, "1", 40, &digest);
    assert!(before < total, "killed too late");
    resume_and_check(&d, "/py/resume", &out, &body, total, before, &digest);
}

/// `granary cat NAME --offset OFF --length LEN --stats`: checks the bytes
/// against `body` and returns the number of Data received and stderr.
fn cat_range(d: &Daemon, name: &str, body: &[u8], off: usize, len: usize) -> (u64, String) {
    let o = d.cli(&[
        "cat",
        name,
        "--offset",
        &off.to_string(),
        "--length",
        &len.to_string(),
        "--stats",
    ]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{name} {off}+{len}: {err}");
    let end = (off + len).min(body.len());
    assert_eq!(o.stdout, body[off..end], "{name} {off}+{len}");
    let got = err
        .lines()
        .find_map(|l| l.strip_prefix("Segments received: "))
        .unwrap()
        .parse()
        .unwrap();
    (got, err)
}

#[test]
fn byte_ranges_fetch_only_the_covering_segments() {
    let d = Daemon::start(&[]);
    let size = 10 * 8192 + 100;
    let body = noise(size, 5);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    // Fixed 8 KiB segments: the assertions count and place them.
    d.ok(&[
        "put",
        src.to_str().unwrap(),
        "/ranges/f",
        "--chunking",
        "fixed",
    ]);
    let cases: &[(usize, usize, u64)] = &[
        (0, 8192, 1),            // exactly segment 0
        (8192, 8192, 1),         // exactly segment 1
        (8190, 5, 2),            // across a boundary
        (100, 50, 1),            // inside one segment
        (5 * 8192, 3 * 8192, 3), // three whole segments
        (size - 10, 100, 1),     // past the end: the last 10 bytes
        (size - 100, 100, 1),    // the short last segment exactly
        (size, 10, 0),           // at the end: nothing
    ];
    for &(off, len, segs) in cases {
        let (got, err) = cat_range(&d, "/ranges/f", &body, off, len);
        // metadata + manifest root + the covering segments.
        assert_eq!(got, 2 + segs, "{off}+{len}: {err}");
    }
    let o = d.cli(&["cat", "/ranges/f", "--offset", &(size + 1).to_string()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("beyond the end"));
    // No --length: to the end.
    let o = d.cli(&["cat", "/ranges/f", "--offset", "81000"]);
    assert_eq!(o.stdout, body[81000..]);
    // A reader that stops early (`| head -c 10`) is not an error.
    let mut child = d
        .command(&["cat", "/ranges/f"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    assert_eq!(first, body[..10]);
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "cat into a closed pipe: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Content-defined segments (the repository's default): byte ranges are
/// placed by the offsets in the verified manifest and fetch only a few
/// segments; every range comes back exact.
#[test]
fn byte_ranges_over_content_defined_segments() {
    let d = Daemon::start(&[]);
    let size = 300_000;
    let body = noise(size, 8);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    let err = String::from_utf8_lossy(
        &d.cli(&[
            "put",
            src.to_str().unwrap(),
            "/ranges/cdc",
            "--chunking",
            "fastcdc",
        ])
        .stderr,
    )
    .into_owned();
    assert!(err.contains("fastcdc"), "{err}");
    for (k, &(off, len)) in [
        (0usize, 1usize),
        (1, 100),
        (4095, 2),
        (150_000, 3000),
        (size - 7, 100),
        (0, size),
    ]
    .iter()
    .enumerate()
    {
        let (got, err) = cat_range(&d, "/ranges/cdc", &body, off, len);
        // Chunks are at least 1 KiB (but the last): a small range needs at
        // most 2 data segments, plus metadata and the manifest.
        if len <= 3000 {
            let most = 2 + 1 + (len as u64).div_ceil(1024) + 1;
            assert!(
                got <= most + 2,
                "case {k}: {got} segments for {len} bytes: {err}"
            );
        }
    }
}

#[test]
fn fetch_from_python_ndn_producer_dpdk_naming_and_canbeprefix_discovery() {
    let d = Daemon::start(&[]);
    let body = noise(250_000, 6);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    // RDR metadata with NDN-DPDK FileMetadata fields (name without version + 32=metadata).
    let _a = python_producer(&d, "/py/dpdk/file.nc", &src, &["--version", "5"]);
    // No metadata: version by a CanBePrefix Interest.
    let _b = python_producer(&d, "/py/plain", &src, &["--no-metadata", "--chunk", "4096"]);
    for (name, versioned) in [
        ("/py/dpdk/file.nc", "/py/dpdk/file.nc/v=5"),
        ("/py/plain", "/py/plain/v="),
    ] {
        let out = d.dir.path().join("out");
        let (ok, v, err) = get_json(&d, &[name, "--integrity-only", "-o", out.to_str().unwrap()]);
        assert!(ok, "{name}: {err}");
        assert_eq!(std::fs::read(&out).unwrap(), body, "{name}");
        let v = v.unwrap();
        assert!(
            v["objects"][0]["versioned"]
                .as_str()
                .unwrap()
                .starts_with(versioned),
            "{v}"
        );
        std::fs::remove_file(&out).unwrap();
    }
    // A range from the python producer.
    let o = d.cli(&[
        "cat",
        "/py/dpdk/file.nc",
        "--integrity-only",
        "--offset",
        "7999",
        "--length",
        "2",
    ]);
    assert_eq!(o.stdout, body[7999..8001]);
}

#[test]
fn fetch_from_ndnts_producer_with_and_without_rdr() {
    let d = Daemon::start(&[]);
    let body = noise(333_333, 7);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    let _a = ndnts_producer(&d, "/nts/rdr", &src, &["--rdr", "--version", "11"]);
    let _b = ndnts_producer(
        &d,
        "/nts/plain",
        &src,
        &["--version", "12", "--chunk", "1000"],
    );
    for (name, versioned) in [
        ("/nts/rdr", "/nts/rdr/v=11"),
        ("/nts/plain", "/nts/plain/v=12"),
    ] {
        let out = d.dir.path().join("out");
        let (ok, v, err) = get_json(&d, &[name, "--integrity-only", "-o", out.to_str().unwrap()]);
        assert!(ok, "{name}: {err}");
        assert_eq!(std::fs::read(&out).unwrap(), body, "{name}");
        assert_eq!(v.unwrap()["objects"][0]["versioned"], versioned);
        std::fs::remove_file(&out).unwrap();
    }
}

#[test]
fn several_names_share_one_window() {
    let d = Daemon::start(&[]);
    let mut names = Vec::new();
    for i in 0..3u64 {
        let src = d.dir.path().join(format!("src{i}"));
        std::fs::write(&src, noise(200_000 + i as usize * 1000, 10 + i)).unwrap();
        let n = format!("/multi/f{i}");
        d.ok(&["put", src.to_str().unwrap(), &n]);
        names.push(n);
    }
    let dir = d.dir.path().join("outdir");
    std::fs::create_dir(&dir).unwrap();
    let mut args: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    args.extend(["-o", dir.to_str().unwrap()]);
    let (ok, v, err) = get_json(&d, &args);
    assert!(ok, "{err}");
    for i in 0..3u64 {
        assert_eq!(
            std::fs::read(dir.join(format!("f{i}"))).unwrap(),
            noise(200_000 + i as usize * 1000, 10 + i)
        );
    }
    assert_eq!(v.unwrap()["objects"].as_array().unwrap().len(), 3);
    // Unknown names fail fast and clearly.
    let o = d.cli(&[
        "get",
        "--no-dedup",
        "/no/such/thing",
        "-o",
        dir.join("x").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("/no/such/thing"));
}

/// The library's random-access API over a node's socket.
#[test]
fn remote_file_stat_and_read_at() {
    use granary_transfer::{Config, Engine, OpenOptions, RemoteFile, Trust, UnixLink};
    let d = Daemon::start(&[]);
    let size = 5 * 8192 + 7;
    let body = noise(size, 9);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    // Fixed 8 KiB segments: the assertions count and place them.
    d.ok(&[
        "put",
        src.to_str().unwrap(),
        "/lib/f",
        "--chunking",
        "fixed",
    ]);
    let kc = granary_security::KeyChain::open(d.data.join("keychain")).unwrap();
    let trust = std::sync::Arc::new(Trust::from_keychain(&kc).unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let link = UnixLink::connect(&d.socket).await.unwrap();
        let name = granary_packet::Name::from_uri("/lib/f").unwrap();
        let mut f = RemoteFile::open(
            link,
            Engine::new(Config::default()),
            &name,
            trust,
            &OpenOptions::default(),
        )
        .await
        .unwrap();
        let st = f.stat();
        assert_eq!(st.size, Some(size as u64));
        assert_eq!((st.segment_size, st.segments), (8192, 6));
        assert!(
            st.verified_by.contains("manifest signed by"),
            "{}",
            st.verified_by
        );
        for (off, len) in [
            (0usize, 10usize),
            (8191, 2),
            (8192, 8192),
            (size - 7, 7),
            (size - 3, 100),
            (100, 3 * 8192),
        ] {
            let got = f.read_at(off as u64, len as u64).await.unwrap();
            assert_eq!(got, body[off..(off + len).min(size)], "{off}+{len}");
        }
        assert!(f.read_at(size as u64, 10).await.unwrap().is_empty());
    });
}

#[test]
fn every_pipeline_type_fetches_the_same_bytes() {
    let d = Daemon::start(&[]);
    let body = noise(700_000, 12);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    // Fixed 8 KiB segments: the assertions count and place them.
    d.ok(&[
        "put",
        src.to_str().unwrap(),
        "/pipes/f",
        "--chunking",
        "fixed",
    ]);
    let out = d.dir.path().join("out");
    for flags in [
        &["--pipeline-type", "fixed", "--pipeline-size", "8"][..],
        &[
            "--pipeline-type",
            "aimd",
            "--aimd-step",
            "2",
            "--aimd-beta",
            "0.6",
        ][..],
        &[
            "--pipeline-type",
            "cubic",
            "--cubic-beta",
            "0.8",
            "--enable-fast-conv",
            "--no-hystart",
        ][..],
        &[
            "--init-cwnd",
            "16",
            "--min-rto",
            "50",
            "--max-rto",
            "2000",
            "-l",
            "1000",
            "-r",
            "3",
        ][..],
    ] {
        let mut a = vec!["/pipes/f", "-o", out.to_str().unwrap()];
        a.extend_from_slice(flags);
        let (ok, v, err) = get_json(&d, &a);
        assert!(ok, "{flags:?}: {err}");
        assert_eq!(std::fs::read(&out).unwrap(), body, "{flags:?}");
        let v = v.unwrap();
        assert_eq!(v["stats"]["segments"], 86, "{flags:?}: {v}");
        if flags[1] == "fixed" {
            assert_eq!(v["stats"]["max_cwnd"], 8.0, "{v}");
        }
    }
    // Bad flag values are refused before anything is fetched.
    let o = d.cli(&[
        "get",
        "--no-dedup",
        "/pipes/f",
        "-o",
        out.to_str().unwrap(),
        "--cubic-beta",
        "1.5",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--cubic-beta"));
}

#[test]
fn per_packet_fetch_follows_final_block_id_over_variable_segments() {
    // `get --no-manifest` verifies each packet's own signature and has no
    // layout from a manifest: content-defined segments are placed in
    // order as they come, up to the FinalBlockId.
    let d = Daemon::start(&[]);
    let body = noise(700_000, 12);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    for chunking in ["fastcdc", "rabin"] {
        let name = format!("/pp/{chunking}");
        d.ok(&[
            "put",
            src.to_str().unwrap(),
            &name,
            "--sign",
            "digest",
            "--chunking",
            chunking,
        ]);
        let out = d.dir.path().join(format!("out-{chunking}"));
        let (ok, v, err) = get_json(
            &d,
            &[
                &name,
                "--no-manifest",
                "--integrity-only",
                "-o",
                out.to_str().unwrap(),
            ],
        );
        assert!(ok, "{chunking}: {err}");
        assert_eq!(std::fs::read(&out).unwrap(), body, "{chunking}");
        let v = v.unwrap();
        assert!(
            v["objects"][0]["verified_by"]
                .as_str()
                .unwrap()
                .contains("each segment"),
            "{v}"
        );
        // Standard output and a byte range, per packet.
        let o = d.cli(&[
            "get",
            &name,
            "--no-manifest",
            "--integrity-only",
            "--no-dedup",
            "-q",
        ]);
        assert!(o.status.success());
        assert_eq!(o.stdout, body, "{chunking} to stdout");
        let o = d.cli(&[
            "cat",
            &name,
            "--no-manifest",
            "--integrity-only",
            "--offset",
            "123457",
            "--length",
            "20000",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.stdout, body[123_457..143_457], "{chunking} range");
    }
    // An ndn-cxx-style producer: FinalBlockId only (no metadata), equal
    // segments but a short last one.
    let _p = python_producer(&d, "/pp/cxx", &src, &["--no-metadata", "--chunk", "8000"]);
    assert_ne!(body.len() % 8000, 0);
    let out = d.dir.path().join("out-cxx");
    let (ok, _, err) = get_json(
        &d,
        &[
            "/pp/cxx",
            "--no-manifest",
            "--integrity-only",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), body);
}

/// A forger's producer signs its segments with DigestSha256 only (python-ndn
/// here: anyone can compute a digest, so it proves no origin). `get` and
/// `cat` refuse the content without `--integrity-only`, saying why and
/// naming the flag, and write nothing; with it they take it and every line
/// they print says "integrity only".
#[test]
fn digest_only_content_needs_integrity_only_and_says_so() {
    let d = Daemon::start(&[]);
    let body = noise(120_000, 21);
    let src = d.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    let _p = python_producer(&d, "/forged/file", &src, &["--version", "9"]);
    let out = d.dir.path().join("out");
    // Refused: get (file, standard output), cat.
    for args in [
        &[
            "get",
            "--no-dedup",
            "/forged/file",
            "-o",
            out.to_str().unwrap(),
        ][..],
        &[
            "get",
            "--no-dedup",
            "/forged/file",
            "--no-manifest",
            "-o",
            out.to_str().unwrap(),
        ][..],
        &["get", "--no-dedup", "/forged/file"][..],
        &["cat", "/forged/file"][..],
        &[
            "cat",
            "/forged/file",
            "--offset",
            "100",
            "--length",
            "10",
            "--stats",
        ][..],
    ] {
        let o = d.cli(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} accepted it: {err}");
        assert!(
            err.contains("only with DigestSha256") && err.contains("--integrity-only"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("verified against"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?} wrote bytes");
        assert!(!out.exists());
    }
    // Accepted with the flag; every line printed says so.
    let each_line_says_so = |err: &str| {
        assert!(!err.trim().is_empty());
        for l in err.lines() {
            assert!(
                l.contains("integrity only"),
                "a line without it: {l:?}\n{err}"
            );
        }
    };
    let o = d.cli(&[
        "get",
        "--no-dedup",
        "/forged/file",
        "--integrity-only",
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), body);
    each_line_says_so(&err);
    let o = d.cli(&[
        "cat",
        "/forged/file",
        "--integrity-only",
        "--offset",
        "100",
        "--length",
        "10",
        "--stats",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(o.stdout, body[100..110]);
    each_line_says_so(&err);
    // The repository's own key-signed content is authenticated: no flag
    // needed, and nothing says "integrity only".
    d.ok(&["put", src.to_str().unwrap(), "/signed/file"]);
    std::fs::remove_file(&out).unwrap();
    let o = d.cli(&[
        "get",
        "--no-dedup",
        "/signed/file",
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("integrity only"), "{err}");
    assert!(err.contains("manifest signed by"), "{err}");
}
