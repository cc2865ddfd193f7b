//! Unmodified python-ndn and NDNts applications use Granary as their NDN
//! node: a producer of one library registers a prefix, a consumer of the
//! other fetches through Granary. Only the socket path is configured.

use crate::common;

use std::io::BufRead;
use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

struct Peer(std::process::Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

fn start_producer(mut c: Command) -> Peer {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(out).lines();
    let first = lines.next().expect("producer exited").unwrap();
    assert_eq!(first, "ready", "producer did not register");
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    Peer(child)
}

fn consume(mut c: Command) -> Vec<Value> {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "consumer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn expected_content(uri: &str, size: usize) -> String {
    let seed = granary_packet::sha256(uri.as_bytes());
    hex::encode(seed.iter().copied().cycle().take(size).collect::<Vec<u8>>())
}

fn check(results: &[Value], count: usize, size: usize) {
    assert_eq!(results.len(), count);
    for r in results {
        assert_eq!(r["status"], "data", "{r}");
        let name = r["name"].as_str().unwrap();
        assert_eq!(
            r["content_hex"].as_str().unwrap(),
            expected_content(name, size),
            "content of {name}"
        );
    }
}

#[test]
fn python_producer_ndnts_consumer_through_granary() {
    python_producer_ndnts_consumer(&[]);
}

/// The same through a sharded forwarder (`--shards 2`): the libraries'
/// registration reaches every shard, their Interests spread over them.
#[test]
fn python_producer_ndnts_consumer_through_a_sharded_granary() {
    python_producer_ndnts_consumer(&["--shards", "2"]);
}

fn python_producer_ndnts_consumer(daemon_args: &[&str]) {
    let d = Daemon::start(daemon_args);
    let sock = d.socket.to_str().unwrap();
    let mut p = python_script("producer.py");
    p.args([sock, "/interop/py", "--size", "3000"]);
    let _p = start_producer(p);
    let mut c = node_script("consumer.mjs");
    c.args([sock, "/interop/py/file", "--count", "5"]);
    check(&consume(c), 5, 3000);
}

#[test]
fn ndnts_producer_python_consumer_through_granary() {
    ndnts_producer_python_consumer(&[]);
}

#[test]
fn ndnts_producer_python_consumer_through_a_sharded_granary() {
    ndnts_producer_python_consumer(&["--shards", "3"]);
}

fn ndnts_producer_python_consumer(daemon_args: &[&str]) {
    let d = Daemon::start(daemon_args);
    let sock = d.socket.to_str().unwrap();
    let mut p = node_script("producer.mjs");
    p.args([sock, "/interop/ts", "--size", "8000"]);
    let _p = start_producer(p);
    let mut c = python_script("consumer.py");
    c.args([sock, "/interop/ts/file", "--count", "5"]);
    check(&consume(c), 5, 8000);
}

/// python-ndn and NDNts over UDP to a daemon with default settings, whose
/// UDP faces have NDNLPv2 link reliability on: every frame they get carries
/// a Sequence and a TxSequence (fields they may ignore); they never Ack, so
/// the daemon must not retransmit to them, and each Interest gets its Data
/// exactly once. `--udp-reliability false` turns it off.
#[test]
fn libraries_over_udp_to_a_reliable_daemon() {
    let d = Daemon::start(&["--listen", "udp://127.0.0.1:0"]);
    let sock = d.socket.to_str().unwrap();
    let udp = format!("udp://{}", d.udp.as_ref().unwrap());
    let mut p = python_script("producer.py");
    p.args([sock, "/interop/rel", "--size", "1000"]);
    let _p = start_producer(p);
    for (what, mut c) in [
        ("python", python_script("consumer.py")),
        ("ndnts", node_script("consumer.mjs")),
    ] {
        c.args([&udp, &format!("/interop/rel/{what}"), "--count", "5"]);
        check(&consume(c), 5, 1000);
    }
    let faces = d.ok(&["face", "list"]);
    let udp_faces: Vec<&str> = faces.lines().filter(|l| l.contains("udp4://")).collect();
    assert_eq!(udp_faces.len(), 2, "{faces}");
    for l in udp_faces {
        assert!(l.ends_with(" reliable"), "{l}");
        assert!(l.contains("out=0i/5d/0n"), "five Data each: {l}");
    }
    drop(d);
    let d = Daemon::start(&[
        "--listen",
        "udp://127.0.0.1:0",
        "--udp-reliability",
        "false",
    ]);
    let udp = format!("udp://{}", d.udp.as_ref().unwrap());
    let sock = d.socket.to_str().unwrap();
    let mut p = python_script("producer.py");
    p.args([sock, "/interop/plain", "--size", "1000"]);
    let _p = start_producer(p);
    let mut c = python_script("consumer.py");
    c.args([&udp, "/interop/plain/python", "--count", "2"]);
    check(&consume(c), 2, 1000);
    let faces = d.ok(&["face", "list"]);
    let l = faces
        .lines()
        .find(|l| l.contains("udp4://"))
        .expect("a UDP face");
    assert!(!l.ends_with(" reliable"), "{l}");
}

/// python-ndn's older app API registers with the legacy 4-component signed
/// command; Granary accepts it too.
#[test]
fn legacy_signed_command_form_registers() {
    let d = Daemon::start(&[]);
    let sock = d.socket.to_str().unwrap();
    let mut p = python_script("producer.py");
    p.args([sock, "/interop/legacy", "--api", "app"]);
    let _p = start_producer(p);
    let mut c = python_script("consumer.py");
    c.args([sock, "/interop/legacy/x"]);
    check(&consume(c), 1, 100);
    assert!(d.ok(&["route", "list"]).contains("/interop/legacy"));
}

/// Both libraries see Granary's NoRoute Nack as a Nack, not a timeout.
#[test]
fn libraries_receive_nack_no_route() {
    let d = Daemon::start(&[]);
    let sock = d.socket.to_str().unwrap();
    for mut c in [python_script("consumer.py"), node_script("consumer.mjs")] {
        c.args([sock, "/no/such/prefix", "--lifetime", "3000"]);
        let r = consume(c);
        assert_eq!(r[0]["status"], "nack", "{}", r[0]);
        assert_eq!(r[0]["nack_reason"], 150);
        assert!(r[0]["rtt_ms"].as_f64().unwrap() < 1000.0);
    }
}
