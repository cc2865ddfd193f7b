//! Transfer over an emulated WAN: namespaces consumer — router — producer,
//! a `granary daemon` in each with UDP faces and routes added through the
//! CLI; the consumer—router link is 100 Mbit/s, 20 ms RTT, 0.5% loss each
//! way (netem when the kernel has it, else the `granary linkem` relay: see
//! crates/testbed/README.md); router—producer is a clean veth. The producer
//! is the daemon's repository with a published 200 MiB random file.
//!
//! CUBIC and AIMD must each reach ≥ 70% of the link rate, byte-identical;
//! a fixed window of 1 must be far slower (ordering and a floor, no timing
//! constants). One test function so the fetches do not share the CPU.
//! Needs root (see netns/mod.rs).

mod netns;

use std::path::Path;
use std::time::Duration;

use granary_testbed::LinkSpec;
use netns::Node;

const RATE: u64 = 100_000_000;

fn random_file(p: &Path, len: usize, seed: u64) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(p).unwrap());
    let mut x = seed | 1;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        for c in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c.copy_from_slice(&x.to_le_bytes()[..c.len()]);
        }
        let n = left.min(buf.len());
        f.write_all(&buf[..n]).unwrap();
        left -= n;
    }
    f.flush().unwrap();
}

/// `granary get` with `flags`; returns goodput in bit/s from its statistics.
fn fetch(consumer: &Node, name: &str, out: &Path, flags: &[&str]) -> (f64, serde_json::Value) {
    let mut args = vec!["get", name, "-o", out.to_str().unwrap(), "--json"];
    args.extend_from_slice(flags);
    let o = consumer.cli(&args);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "granary {args:?} failed:\n{stderr}\n{stdout}"
    );
    let json = stdout
        .lines()
        .chain(stderr.lines())
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .unwrap_or_else(|| panic!("no JSON statistics in:\n{stdout}\n{stderr}"));
    let st = &json["stats"];
    let bits = st["bytes"].as_f64().unwrap() * 8.0;
    let secs = st["seconds"].as_f64().unwrap();
    (bits / secs, json)
}

fn same_file(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert_eq!(x.len(), y.len(), "{} has the wrong size", b.display());
    assert!(x == y, "{} differs from what was published", b.display());
}

#[test]
fn goodput_over_emulated_wan() {
    let Some(mut tb) = netns::testbed(|o| o.seed = 5) else {
        return;
    };
    let c = tb.add_host("consumer").unwrap();
    let r = tb.add_host("router").unwrap();
    let p = tb.add_host("producer").unwrap();
    let wan = tb
        .link(
            c,
            r,
            LinkSpec::symmetric(Some(RATE), Duration::from_millis(10), 0.005),
        )
        .unwrap();
    let lan = tb.link(r, p, LinkSpec::clean()).unwrap();
    let consumer = Node::start(&mut tb, c, &[]);
    let router = Node::start(&mut tb, r, &[]);
    let producer = Node::start(&mut tb, p, &[]);

    let to_router = tb.udp_path(wan, c, 6363).unwrap();
    let to_producer = tb.link_addr(lan, p).unwrap();
    consumer.ok(&["route", "add", "/netns", &format!("udp4://{to_router}")]);
    router.ok(&["route", "add", "/netns", &format!("udp4://{to_producer}:6363")]);

    // The consumer trusts the producer's publisher key.
    producer.ok(&["key", "gen", "/netns/producer", "--type", "ed25519"]);
    let cert = producer.dir.path().join("producer.ndncert");
    std::fs::write(&cert, producer.ok(&["key", "export", "/netns/producer"])).unwrap();
    consumer.ok(&["key", "trust", cert.to_str().unwrap()]);

    // One 200 MiB file published under two names (no cache serves the
    // second fetch), and a 2 MiB one for the window of 1.
    let big = producer.dir.path().join("big.bin");
    random_file(&big, 200 << 20, 0x5eed);
    let small = producer.dir.path().join("small.bin");
    random_file(&small, 2 << 20, 0xbeef);
    for n in ["/netns/cubic", "/netns/aimd"] {
        producer.ok(&["put", big.to_str().unwrap(), n]);
    }
    producer.ok(&["put", small.to_str().unwrap(), "/netns/fixed1"]);

    let out = consumer.dir.path();
    let (cubic, _) = fetch(
        &consumer,
        "/netns/cubic",
        &out.join("cubic"),
        &["--pipeline-type", "cubic"],
    );
    same_file(&big, &out.join("cubic"));
    std::fs::remove_file(out.join("cubic")).unwrap();
    let (aimd, _) = fetch(
        &consumer,
        "/netns/aimd",
        &out.join("aimd"),
        &["--pipeline-type", "aimd"],
    );
    same_file(&big, &out.join("aimd"));
    std::fs::remove_file(out.join("aimd")).unwrap();
    let (fixed1, _) = fetch(
        &consumer,
        "/netns/fixed1",
        &out.join("fixed1"),
        &["--pipeline-type", "fixed", "--pipeline-size", "1"],
    );
    same_file(&small, &out.join("fixed1"));

    eprintln!(
        "{:?}: 100 Mbit/s, 20 ms RTT, 0.5% loss: CUBIC {:.1} Mbit/s, AIMD {:.1} Mbit/s, fixed window 1 {:.2} Mbit/s",
        tb.emulation(),
        cubic / 1e6,
        aimd / 1e6,
        fixed1 / 1e6
    );
    let floor = 0.7 * RATE as f64;
    assert!(cubic >= floor, "CUBIC {:.1} Mbit/s < 70 Mbit/s", cubic / 1e6);
    assert!(aimd >= floor, "AIMD {:.1} Mbit/s < 70 Mbit/s", aimd / 1e6);
    // One 8 KiB segment per 20 ms round trip is at most 3.3 Mbit/s: far
    // slower than either window, but it must still move.
    assert!(
        fixed1 * 5.0 < cubic.min(aimd),
        "a window of 1 ({:.2} Mbit/s) should be far slower",
        fixed1 / 1e6
    );
    assert!(fixed1 > 0.3e6, "window 1 stalled: {:.3} Mbit/s", fixed1 / 1e6);
}
