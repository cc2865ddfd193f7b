//! `granary perf` against itself and against a python-ndn consumer that
//! checks signatures; `granary sim cache` end to end.

use crate::common;

use std::io::BufRead;
use std::process::{Command, Stdio};

use common::{granary, python_script, Daemon};
use serde_json::Value;

/// `perf serve` as a child; its stdout lines are collected by a thread.
struct Serve {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Serve {
    fn start(d: &Daemon, prefix: &str, extra: &[&str]) -> Serve {
        let mut child = d
            .command(&["perf", "serve", prefix, "--json"])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let first = lines
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("perf serve did not get ready");
        let v: Value = serde_json::from_str(&first).unwrap();
        assert_eq!(v["ready"], true, "{first}");
        Serve { child, lines }
    }

    /// Interrupts the producer and returns its final report.
    fn stop(mut self) -> Value {
        Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        self.child.wait().unwrap();
        // The reader thread ends at the end of the output (the producer has
        // exited) and so closes the channel: every line is in by then.
        let last = self.lines.iter().last().expect("no report from perf serve");
        serde_json::from_str(&last).unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn perf_fetch_against_perf_serve() {
    let d = Daemon::start(&[]);
    let s = Serve::start(
        &d,
        "/perf",
        &["--sign", "ed25519", "--payload", "2000", "--threads", "2"],
    );
    let out = d.ok(&[
        "perf", "fetch", "/perf", "--count", "300", "--window", "8", "--json",
    ]);
    let last: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["final"], true);
    assert_eq!(last["data"], 300, "{last}");
    assert_eq!(last["interests"], 300);
    assert_eq!(last["timeouts"], 0);
    assert_eq!(last["payload_bytes"], 300 * 2000);
    let lat = &last["latency_ms"];
    assert!(lat["p50"].as_f64().unwrap() > 0.0);
    assert!(
        lat["p50"].as_f64() <= lat["p99"].as_f64() && lat["p99"].as_f64() <= lat["max"].as_f64()
    );
    assert!(last["mbit_per_s"].as_f64().unwrap() > 0.0);

    let served = s.stop();
    assert_eq!(served["final"], true);
    assert_eq!(served["data"], 300, "{served}");
    assert!(served["producer_us_per_packet"].as_f64().unwrap() > 0.0);

    // Rate mode, by duration; nothing serves /nothing, so fetch fails clearly.
    let o = d.cli(&[
        "perf",
        "fetch",
        "/nothing",
        "--rate",
        "50",
        "--duration",
        "0.3",
        "--lifetime",
        "200",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no Data received"));
}

#[test]
fn python_ndn_checks_perf_serve_signatures() {
    let d = Daemon::start(&[]);
    for sign in ["ecdsa", "rsa", "ed25519", "hmac", "sha256"] {
        let key = d.data.join(format!("{sign}.key"));
        let prefix = format!("/perf/{sign}");
        let s = Serve::start(
            &d,
            &prefix,
            &[
                "--sign",
                sign,
                "--payload",
                "1500",
                "--key-out",
                key.to_str().unwrap(),
            ],
        );
        let mut c = python_script("perf_check.py");
        c.args([
            d.socket.to_str().unwrap(),
            &prefix,
            sign,
            key.to_str().unwrap(),
        ])
        .args(["--count", "8", "--payload", "1500"]);
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "{sign}: {} {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["verified"], 8, "{sign}: {v}");
        assert_eq!(s.stop()["data"], 8);
    }
}

#[test]
fn perf_serve_refuses_bad_options() {
    let d = Daemon::start(&[]);
    let o = d.cli(&["perf", "serve", "/p", "--payload", "100000000"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--payload"));
    let o = d.cli(&["perf", "serve", "/p", "--threads", "0"]);
    assert!(!o.status.success());
}

#[test]
fn sim_cache_writes_csv_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let o = granary()
        .args([
            "sim",
            "cache",
            "--objects",
            "500",
            "--cache",
            "10,50",
            "--requests",
            "20000",
        ])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("cache.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert!(rows[0].starts_with("policy,alpha,objects"));
    assert_eq!(rows.len(), 1 + 2 * 4, "{csv}");
    for r in &rows[1..] {
        let f: Vec<&str> = r.split(',').collect();
        let hit: f64 = f[8].parse().unwrap();
        assert!((0.0..=1.0).contains(&hit) && hit > 0.05, "{r}");
        assert!(!f[9].is_empty(), "Che column missing: {r}");
    }
    let svg = std::fs::read_to_string(out.join("cache.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    assert_eq!(svg.matches("<polyline").count(), 4);

    // A trace: one name per line.
    let trace = dir.path().join("trace.txt");
    std::fs::write(&trace, "/a\n/b\n/a\n/c\n/a\n").unwrap();
    let o = granary()
        .args([
            "sim",
            "cache",
            "--trace",
            trace.to_str().unwrap(),
            "--cache",
            "2",
            "--policy",
            "lru",
            "--warmup",
            "0",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    // /a miss, /b miss, /a hit, /c miss (evicts /b), /a hit.
    assert!(
        s.lines()
            .nth(1)
            .unwrap()
            .starts_with("lru,NaN,3,1,1,2,5,2,"),
        "{s}"
    );

    let o = granary()
        .args(["sim", "cache", "--alpha=-1"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--alpha"));
}
