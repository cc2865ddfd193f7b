//! Transfer over an emulated WAN: namespaces consumer — router — producer,
//! a `granary daemon` in each with UDP faces and routes added through the
//! CLI; the consumer—router link is 100 Mbit/s, 20 ms RTT, 0.5% loss each
//! way (netem when the kernel has it, else the `granary linkem` relay: see
//! crates/testbed/README.md); router—producer is a clean veth. The producer
//! is the daemon's repository with a published 200 MiB random file, in fixed
//! 8 KiB segments (`--chunking fixed`: the repository's default is FastCDC,
//! 3/5/8 KiB, ~6 KiB on average; the figures in bench/RESULTS.md are for 8 KiB).
//!
//! Issue 5 asks CUBIC and AIMD to reach ≥ 70% of the link rate on a 200 MiB
//! file. Without link-layer recovery they cannot: at 0.5% loss per datagram
//! an 8 KiB segment (six 1400-byte fragments plus its Interest) is lost ~4%
//! of the time, and the engine's loss-driven windows settle near
//! 20–30 Mbit/s (bench/RESULTS.md, "netns goodput"). With NDNLPv2 link
//! reliability on the UDP faces (the daemon's default since 2026-11-23: every
//! fragment carries a TxSequence, the receiver Acks it, a lost fragment is
//! sent again by the hop that lost it) the consumer sees almost no loss.
//! `link_reliability_carries_the_adaptive_pipelines` is the transfer
//! (64 MiB; the 70% goal is bench/netns-goodput.sh's figure, not asserted: a
//! loaded machine moves it) with link reliability on (the face lists must
//! show it on). It needs CPU: three debug-build daemons forward ~9,000
//! fragments/s each way. On the shared 2-core development machine it
//! measured CUBIC/AIMD 86/87 and 87/85 Mbit/s at load 5–7 but 69/67 and 31/55 when
//! other agents' builds pushed the load to 9–13 (RTT spikes up to 1.6 s,
//! consumer timeouts); see bench/RESULTS.md.
//! `goodput_over_emulated_wan` turns link reliability off (it is on by
//! default) to keep plain UDP faces (64 MiB): what the
//! windows alone do on that link (byte-identical output, every pipeline far
//! faster than a window of 1; the rates are printed).
//! Each test is one function so its fetches do not share the CPU. Needs
//! root (see netns/mod.rs).

use crate::netns;

use std::path::Path;
use std::time::Duration;

use granary_store::chunking::write_noise;
use granary_testbed::LinkSpec;
use netns::Node;

const RATE: u64 = 100_000_000;

/// `granary get` with `flags`; returns goodput in bit/s from its statistics.
fn fetch(consumer: &Node, name: &str, out: &Path, flags: &[&str]) -> (f64, serde_json::Value) {
    let mut args = vec![
        "get",
        "--no-dedup",
        name,
        "-o",
        out.to_str().unwrap(),
        "--json",
    ];
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

struct Figures {
    emulation: granary_testbed::Emulation,
    cubic: f64,
    aimd: f64,
    fixed1: f64,
}

/// Builds the testbed (UDP faces with NDNLPv2 link reliability when
/// `reliable`), publishes, fetches with CUBIC, AIMD (a `big_mib` file each)
/// and a fixed window of 1 (2 MiB); checks every output.
fn run(big_mib: usize, reliable: bool) -> Option<Figures> {
    let (mut tb, _turn) = netns::testbed(|o| o.seed = 5)?;
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
    // Link reliability is the daemon's default: the reliable run passes no flag.
    let flags: &[&str] = if reliable {
        &[]
    } else {
        &["--udp-reliability", "false"]
    };
    let consumer = Node::start(&mut tb, c, flags);
    let router = Node::start(&mut tb, r, flags);
    let producer = Node::start(&mut tb, p, flags);

    let to_router = tb.udp_path(wan, c, 6363).unwrap();
    let to_producer = tb.link_addr(lan, p).unwrap();
    consumer.ok(&["route", "add", "/netns", &format!("udp4://{to_router}")]);
    router.ok(&[
        "route",
        "add",
        "/netns",
        &format!("udp4://{to_producer}:6363"),
    ]);

    // The consumer trusts the producer's publisher key.
    producer.ok(&["key", "gen", "/netns/producer", "--type", "ed25519"]);
    let cert = producer.dir.path().join("producer.ndncert");
    std::fs::write(&cert, producer.ok(&["key", "export", "/netns/producer"])).unwrap();
    consumer.ok(&["key", "trust", cert.to_str().unwrap()]);

    // One big file published under two names (no cache serves the second
    // fetch), and a 2 MiB one for the window of 1.
    let big = producer.dir.path().join("big.bin");
    write_noise(&big, (big_mib as u64) << 20, 0x5eed).unwrap();
    let small = producer.dir.path().join("small.bin");
    write_noise(&small, 2 << 20, 0xbeef).unwrap();
    for n in ["/netns/cubic", "/netns/aimd"] {
        producer.ok(&["put", big.to_str().unwrap(), n, "--chunking", "fixed"]);
    }
    producer.ok(&[
        "put",
        small.to_str().unwrap(),
        "/netns/fixed1",
        "--chunking",
        "fixed",
    ]);

    let out = consumer.dir.path();
    let mut got = vec![];
    for (name, file, flags) in [
        ("cubic", &big, &["--pipeline-type", "cubic"][..]),
        ("aimd", &big, &["--pipeline-type", "aimd"][..]),
        (
            "fixed1",
            &small,
            &["--pipeline-type", "fixed", "--pipeline-size", "1"][..],
        ),
    ] {
        let dest = out.join(name);
        let (g, json) = fetch(&consumer, &format!("/netns/{name}"), &dest, flags);
        same_file(file, &dest);
        std::fs::remove_file(&dest).unwrap();
        eprintln!("{name}: {:.2} Mbit/s {}", g / 1e6, json["stats"]);
        got.push(g);
    }
    // The WAN faces are reliable exactly when asked (consumer: the face it
    // created; router: the one the consumer's datagrams created).
    for (node, what) in [(&consumer, "consumer"), (&router, "router")] {
        let faces = node.ok(&["face", "list"]);
        let wan_faces: Vec<&str> = faces.lines().filter(|l| l.contains("udp4://")).collect();
        assert!(!wan_faces.is_empty(), "{what}: no UDP face in\n{faces}");
        for l in &wan_faces {
            assert_eq!(l.ends_with(" reliable"), reliable, "{what}: {l}");
        }
    }
    for h in [c, r, p] {
        eprintln!(
            "kernel UDP drops in {} (InErrors, RcvbufErrors, SndbufErrors): {:?}",
            tb.host_name(h),
            tb.udp_kernel_drops(h).unwrap()
        );
    }
    let f = Figures {
        emulation: tb.emulation(),
        cubic: got[0],
        aimd: got[1],
        fixed1: got[2],
    };
    eprintln!(
        "{:?}: 100 Mbit/s, 20 ms RTT, 0.5% loss, {big_mib} MiB: CUBIC {:.1} Mbit/s, AIMD {:.1} Mbit/s, fixed window 1 {:.2} Mbit/s",
        f.emulation,
        f.cubic / 1e6,
        f.aimd / 1e6,
        f.fixed1 / 1e6
    );
    Some(f)
}

#[test]
fn goodput_over_emulated_wan() {
    let Some(f) = run(64, false) else {
        return;
    };
    // One 8 KiB segment per 20 ms round trip is at most 3.3 Mbit/s: a window
    // of 1 must be far slower than either adaptive pipeline, but must move.
    assert!(
        f.fixed1 * 5.0 < f.cubic.min(f.aimd),
        "a window of 1 ({:.2} Mbit/s) should be far slower than CUBIC {:.1} / AIMD {:.1}",
        f.fixed1 / 1e6,
        f.cubic / 1e6,
        f.aimd / 1e6
    );
    eprintln!(
        "plain UDP: CUBIC {:.1}, AIMD {:.1}, window 1 {:.2} Mbit/s (link {} Mbit/s)",
        f.cubic / 1e6,
        f.aimd / 1e6,
        f.fixed1 / 1e6,
        RATE / 1_000_000
    );
}

/// Issue 5's transfer over UDP faces with NDNLPv2 link reliability (see the
/// module docs): the faces are reliable, every pipeline's copy is
/// byte-identical, and the adaptive windows are far faster than a window of
/// one. The goal itself (≥ 70% of the link rate) is a figure, measured by
/// bench/netns-goodput.sh: a loaded machine moves it (31–87 Mbit/s here), so
/// it is printed, not asserted.
#[test]
fn link_reliability_carries_the_adaptive_pipelines() {
    let Some(f) = run(64, true) else {
        return;
    };
    eprintln!(
        "with link reliability: CUBIC {:.1}, AIMD {:.1}, window 1 {:.2} Mbit/s (the goal is 70)",
        f.cubic / 1e6,
        f.aimd / 1e6,
        f.fixed1 / 1e6
    );
    // Relative, so load moves both sides: one segment per round trip is at
    // most 3.3 Mbit/s, the adaptive windows many times that.
    assert!(
        f.fixed1 * 5.0 < f.cubic.min(f.aimd),
        "a window of 1 ({:.2} Mbit/s) should be far slower than CUBIC {:.1} / AIMD {:.1}",
        f.fixed1 / 1e6,
        f.cubic / 1e6,
        f.aimd / 1e6
    );
}
