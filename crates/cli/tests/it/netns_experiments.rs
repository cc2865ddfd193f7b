//! The shipped experiment files (experiments/*.toml) run at tiny scale by
//! `granary testbed run --tiny`: each must write its report, CSV and plots
//! with the expected rows, and what they measure must show the effect the
//! experiment is about. One more run is interrupted with SIGINT and must
//! leave no namespace behind. Needs root and iproute2 (network namespaces),
//! nginx, vsftpd and curl (scripts/setup-test-deps.sh); only
//! `GRANARY_SKIP_NETNS=1` skips, loudly.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn skip() -> bool {
    if std::env::var("GRANARY_SKIP_NETNS").as_deref() == Ok("1") {
        eprintln!(
            "\n!!!!!!!! SKIPPED: netns experiment test (GRANARY_SKIP_NETNS=1); nothing was tested !!!!!!!!\n"
        );
        return true;
    }
    false
}

/// The binary that runs the experiment (and its nodes):
/// `GRANARY_NETNS_BIN` when set (another build to try), else this test build's
/// (optimised: decision 0112).
fn bin() -> std::ffi::OsString {
    std::env::var_os("GRANARY_NETNS_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_granary").into())
}

fn experiment(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../experiments/{name}.toml"))
}

/// Runs an experiment with --tiny; returns its output directory and the
/// rows of `csv` (header first).
fn run(name: &str, csv: &str, plots: &[&str]) -> (tempfile::TempDir, Vec<Vec<String>>) {
    let _turn = crate::netns::TURN.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(bin())
        .args(["testbed", "run"])
        .arg(experiment(name))
        .arg("--out")
        .arg(out.path())
        .arg("--tiny")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "testbed run {name} failed (needs root, iproute2, nginx, vsftpd, curl; \
         GRANARY_SKIP_NETNS=1 skips):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    for section in [
        "## Set-up",
        "## Results",
        "## The seed's figure",
        "## Granary against the seed",
    ] {
        assert!(report.contains(section), "{name}: report lacks {section}");
    }
    for p in plots {
        let svg = std::fs::read_to_string(out.path().join(format!("{p}.svg"))).unwrap();
        assert!(svg.contains("<polyline"), "{name}: {p}.svg has no line");
        let png = std::fs::read(out.path().join(format!("{p}.png"))).unwrap();
        assert_eq!(&png[1..4], b"PNG", "{name}: {p}.png");
        assert!(
            report.contains(&format!("({p}.png)")),
            "{name}: report lacks {p}.png"
        );
    }
    let text = std::fs::read_to_string(out.path().join(format!("{csv}.csv"))).unwrap();
    let rows = text
        .lines()
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (out, rows)
}

fn col(rows: &[Vec<String>], name: &str) -> usize {
    rows[0]
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {:?}", rows[0]))
}

fn num(row: &[String], i: usize) -> f64 {
    row[i].parse().unwrap()
}

#[test]
fn pipeline_experiment() {
    if skip() {
        return;
    }
    let (_d, rows) = run("pipeline", "pipeline", &["goodput"]);
    // 1 segment size × (windows 4, 16 + CUBIC).
    assert_eq!(rows.len(), 1 + 3, "{rows:?}");
    let (p, g, b) = (
        col(&rows, "pipeline"),
        col(&rows, "goodput_mbps"),
        col(&rows, "file_bytes"),
    );
    let by = |k: &str, w: &str| {
        rows[1..]
            .iter()
            .find(|r| r[p] == k && r[col(&rows, "window")] == w)
            .unwrap_or_else(|| panic!("no {k} {w} row"))
    };
    assert_eq!(by("fixed", "4")[b], "262144");
    assert_eq!(by("cubic", "0")[b], "1048576");
    // A larger window moves more per RTT; nothing exceeds the 100 Mbit/s link
    // (which also shows no run was served from a cache).
    assert!(
        num(by("fixed", "16"), g) > num(by("fixed", "4"), g),
        "{rows:?}"
    );
    for r in &rows[1..] {
        assert!(num(r, g) > 0.5 && num(r, g) < 100.0, "{r:?}");
    }
}

#[test]
fn caching_vs_http_experiment() {
    if skip() {
        return;
    }
    let (_d, rows) = run("caching-vs-http", "caching", &["throughput"]);
    assert_eq!(rows.len(), 1 + 16, "{rows:?}");
    let (m, s, b) = (
        col(&rows, "method"),
        col(&rows, "seconds"),
        col(&rows, "bytes"),
    );
    for method in ["ndn-nocache", "ndn-cache", "http", "ftp"] {
        let mine: Vec<&Vec<String>> = rows[1..].iter().filter(|r| r[m] == method).collect();
        assert_eq!(mine.len(), 4, "{method}");
        assert!(mine.iter().all(|r| r[b] == "2097152"), "{method}: {mine:?}");
    }
    // With the gateway's cache, consumers 2-4 are served at LAN speed:
    // each faster than the first, which crossed the WAN.
    let cached: Vec<f64> = rows[1..]
        .iter()
        .filter(|r| r[m] == "ndn-cache")
        .map(|r| num(r, s))
        .collect();
    for later in &cached[1..] {
        assert!(*later < cached[0] * 0.7, "no cache effect: {cached:?}");
    }
}

#[test]
fn carepo_experiment() {
    if skip() {
        return;
    }
    let (_d, rows) = run("carepo", "carepo", &["carepo"]);
    // One sweep point × 2 modes × 2 clients.
    assert_eq!(rows.len(), 1 + 4, "{rows:?}");
    let (mode, client, nb) = (
        col(&rows, "mode"),
        col(&rows, "client"),
        col(&rows, "bytes_from_neighbours"),
    );
    let dedup2 = rows[1..]
        .iter()
        .find(|r| r[mode] == "dedup" && r[client] == "client2")
        .unwrap();
    // Client 2 took the chunks it shares with client 1's version from it.
    assert!(num(dedup2, nb) > 0.0, "{rows:?}");
}

#[test]
fn vip_experiment() {
    vip_light("vip");
}

#[test]
fn vip_heavy_experiment() {
    // Heavy at full scale; its --tiny run is as light as vip's.
    vip_light("vip-heavy");
}

fn vip_light(name: &str) {
    if skip() {
        return;
    }
    let (_d, rows) = run(name, "vip", &["delay", "hit-ratio", "link-load"]);
    assert_eq!(rows.len(), 1 + 3, "{rows:?}");
    let (v, req, ans) = (
        col(&rows, "variant"),
        col(&rows, "requests"),
        col(&rows, "answered"),
    );
    let names: Vec<&str> = rows[1..].iter().map(|r| r[v].as_str()).collect();
    assert_eq!(names, ["best-route+lru", "best-route+lfu", "vip"]);
    for r in &rows[1..] {
        // Light load: (nearly) every request is answered, by every variant.
        assert!(num(r, req) > 50.0, "{r:?}");
        assert!(num(r, ans) >= 0.95 * num(r, req), "{r:?}");
    }
}

#[test]
fn vip_abilene_experiment() {
    if skip() {
        return;
    }
    // The 11-node Abilene backbone (the topology `sim vip` simulates).
    let (_d, rows) = run("vip-abilene", "vip", &["delay", "hit-ratio", "link-load"]);
    assert_eq!(rows.len(), 1 + 3, "{rows:?}");
    let (v, req, ans, hit) = (
        col(&rows, "variant"),
        col(&rows, "requests"),
        col(&rows, "answered"),
        col(&rows, "hit_ratio"),
    );
    let names: Vec<&str> = rows[1..].iter().map(|r| r[v].as_str()).collect();
    assert_eq!(names, ["best-route+lru", "best-route+lfu", "vip"]);
    for r in &rows[1..] {
        // Light load over up to 5 hops: (nearly) every request is answered.
        assert!(num(r, req) > 100.0, "{r:?}");
        assert!(num(r, ans) >= 0.9 * num(r, req), "{r:?}");
        assert!((0.0..=1.0).contains(&num(r, hit)), "{r:?}");
    }
}

#[test]
fn ctrl_c_removes_every_namespace_and_process() {
    if skip() {
        return;
    }
    let _turn = crate::netns::TURN.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin())
        .args(["testbed", "run"])
        .arg(experiment("vip"))
        .arg("--out")
        .arg(out.path())
        .arg("--tiny")
        .spawn()
        .unwrap();
    let prefix = format!("gtb{}x", child.id());
    let ours = || {
        let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .count()
    };
    // Wait until the run is under way (its namespaces exist).
    let t = Instant::now();
    while ours() < 8 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the run never built its network"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert_eq!(ours(), 0, "namespaces left after Ctrl-C");
    assert!(!out.path().join("report.md").exists());
    // Nothing of the run still runs: no process has the run's work dir or
    // namespaces on its command line.
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    let work = format!("granary-testbed-{}", child.id());
    assert!(
        !ps.lines().any(|l| l.contains(&work) || l.contains(&prefix)),
        "processes left:\n{ps}"
    );
}
