//! The emulated testbed measures what it is configured to do: round-trip
//! time, loss within binomial bounds, rate — in whichever emulation the
//! kernel allows (netem, or tbf plus the `granary linkem` relay), and the
//! relay's own rate model. Needs root (see netns/mod.rs).

mod netns;

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use granary_testbed::probe;
use granary_testbed::{Impairment, LinkSpec, RateBy};

fn any() -> SocketAddr {
    "0.0.0.0:0".parse().unwrap()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[test]
fn rtt_matches_configured_delay() {
    let Some((mut tb, _turn)) = netns::testbed(|_| {}) else {
        return;
    };
    let a = tb.add_host("a").unwrap();
    let b = tb.add_host("b").unwrap();
    let spec = LinkSpec {
        ab: Impairment {
            delay: Duration::from_millis(4),
            ..Default::default()
        },
        ba: Impairment {
            delay: Duration::from_millis(16),
            ..Default::default()
        },
        mtu: None,
    };
    let l = tb.link(a, b, spec).unwrap();
    let echo = tb.udp_socket(b, any()).unwrap();
    let port = echo.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let h = probe::echo(echo, stop.clone());
    let client = tb.udp_socket(a, any()).unwrap();

    // Straight to b's address: the delay only applies on the emulated path
    // in relay mode, all traffic under netem.
    let path = tb.udp_path(l, a, port).unwrap();
    let r = probe::rtts(&client, path, 60, Duration::from_secs(1));
    let (min, med, p90) = (
        probe::quantile(&r, 0.0),
        probe::quantile(&r, 0.5),
        probe::quantile(&r, 0.9),
    );
    eprintln!(
        "{:?}: emulated 4 ms + 16 ms: min {:.2} median {:.2} p90 {:.2} ms ({} answers)",
        tb.emulation(),
        ms(min),
        ms(med),
        ms(p90),
        r.len()
    );
    assert_eq!(r.len(), 60, "no loss configured, every probe answered");
    // The emulator never delivers early and is on time when it gets the CPU
    // (min); the median also carries this process's own scheduling, so it
    // only gets a loose bound (measured with three busy loops on 2 cores:
    // min 20.3, median 25.7 ms).
    assert!(ms(min) >= 19.0, "faster than the configured 20 ms: {min:?}");
    assert!(ms(min) <= 21.0, "never on time: min {min:?}");
    assert!(ms(med) <= 30.0, "median {med:?} too far above 20 ms");
    if tb.emulation() == granary_testbed::Emulation::Relay {
        let direct = SocketAddr::new(tb.link_addr(l, b).unwrap().into(), port);
        let r = probe::rtts(&client, direct, 20, Duration::from_secs(1));
        let med = probe::quantile(&r, 0.5);
        eprintln!("direct (no relay): median {:.3} ms", ms(med));
        assert!(ms(med) < 5.0, "the veth itself adds no delay: {med:?}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    h.join().unwrap();
}

/// Sends `n` datagrams one way across the link (a → b, or b → a) and
/// returns how many arrived.
fn one_way(
    tb: &mut granary_testbed::Testbed,
    l: granary_testbed::LinkId,
    from: granary_testbed::HostId,
    to: granary_testbed::HostId,
    n: u64,
) -> u64 {
    let s = tb.udp_socket(to, any()).unwrap();
    let port = s.local_addr().unwrap().port();
    let base = Instant::now();
    let h = probe::sink(s, base, Duration::from_secs(2), Duration::from_secs(10));
    let path = tb.udp_path(l, from, port).unwrap();
    let c = tb.udp_socket(from, any()).unwrap();
    probe::send_paced(&c, path, base, n, 200, 16e6);
    let r = h.join().unwrap();
    assert_eq!(r.packets, r.distinct, "no duplicates");
    r.packets
}

#[test]
fn loss_matches_configured_rate() {
    let Some((mut tb, _turn)) = netns::testbed(|o| o.seed = 42) else {
        return;
    };
    let a = tb.add_host("a").unwrap();
    let b = tb.add_host("b").unwrap();
    let spec = LinkSpec {
        ab: Impairment {
            delay: Duration::from_millis(5),
            loss: 0.05,
            ..Default::default()
        },
        ba: Impairment {
            delay: Duration::from_millis(5),
            loss: 0.005,
            ..Default::default()
        },
        mtu: None,
    };
    let l = tb.link(a, b, spec).unwrap();
    let n = 20_000u64;
    // Binomial(n, p): accept mean ± 5 standard deviations.
    for (from, to, p) in [(a, b, 0.05), (b, a, 0.005)] {
        let got = one_way(&mut tb, l, from, to, n);
        let lost = (n - got) as f64;
        let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
        eprintln!(
            "{:?}: loss {p}: lost {lost} of {n} (expected {mean:.0} ± {:.0})",
            tb.emulation(),
            5.0 * sd
        );
        assert!(
            (lost - mean).abs() <= 5.0 * sd,
            "lost {lost}, expected {mean} ± {}",
            5.0 * sd
        );
    }
    // A clean link loses nothing: the losses above are the emulator's.
    let c = tb.add_host("c").unwrap();
    let l2 = tb
        .link(
            a,
            c,
            LinkSpec::symmetric(None, Duration::from_millis(5), 0.0),
        )
        .unwrap();
    assert_eq!(one_way(&mut tb, l2, a, c, n), n);
}

fn rate_check(rate_by: RateBy) {
    let Some((mut tb, _turn)) = netns::testbed(|o| o.rate_by = rate_by) else {
        return;
    };
    let a = tb.add_host("a").unwrap();
    let b = tb.add_host("b").unwrap();
    let rate = 100_000_000u64;
    // A 2 MB queue (160 ms) keeps the link busy through stalls of this
    // process's paced sender on a loaded machine: a starved sender must not
    // read as a slow link.
    let mut spec = LinkSpec::symmetric(Some(rate), Duration::from_millis(10), 0.0);
    spec.ab.queue_bytes = Some(2_000_000);
    spec.ba.queue_bytes = Some(2_000_000);
    let l = tb.link(a, b, spec).unwrap();
    let s = tb.udp_socket(b, any()).unwrap();
    let port = s.local_addr().unwrap().port();
    let base = Instant::now();
    let h = probe::sink(s, base, Duration::from_secs(2), Duration::from_secs(10));
    let path = tb.udp_path(l, a, port).unwrap();
    let c = tb.udp_socket(a, any()).unwrap();
    // 1.5 s offered at 150 Mbit/s: the link must cut it to its rate.
    let size = 1400;
    let count = (150e6 * 1.5 / 8.0 / size as f64) as u64;
    probe::send_paced(&c, path, base, count, size, 150e6);
    let r = h.join().unwrap();
    let got = r.rate_bps();
    eprintln!(
        "{:?}, rate by {rate_by:?}: configured {} Mbit/s, measured {:.1} Mbit/s ({} of {count} datagrams)",
        tb.emulation(),
        rate / 1_000_000,
        got / 1e6,
        r.packets
    );
    assert!(
        (got - rate as f64).abs() <= 0.08 * rate as f64,
        "measured {:.1} Mbit/s, configured {}",
        got / 1e6,
        rate / 1_000_000
    );
}

#[test]
fn rate_matches_configured_rate_tbf() {
    rate_check(RateBy::Tbf);
}

#[test]
fn rate_matches_configured_rate_relay() {
    rate_check(RateBy::Relay);
}

/// The queue in front of the rate is bounded and tail-drops, on the path a
/// node's Data takes (far side → relay → near side): offered 150 Mbit/s
/// into 100 Mbit/s, no datagram waits longer than delay + queue / rate.
fn queue_check(rate_by: RateBy) -> (f64, Duration, u64, u64) {
    let Some((mut tb, _turn)) = netns::testbed(|o| o.rate_by = rate_by) else {
        return (0.0, Duration::ZERO, 0, 0);
    };
    let a = tb.add_host("a").unwrap();
    let b = tb.add_host("b").unwrap();
    let rate = 100_000_000u64;
    let queue = 250_000u64; // 20 ms at 100 Mbit/s
    let imp = Impairment {
        delay: Duration::from_millis(10),
        loss: 0.0,
        rate_bps: Some(rate),
        queue_bytes: Some(queue),
    };
    let l = tb
        .link(
            a,
            b,
            LinkSpec {
                ab: imp.clone(),
                ba: imp,
                mtu: None,
            },
        )
        .unwrap();
    // b's "node" learns the relay's session address from a's first datagram,
    // then sends to it: b → relay (in b) → veth → a.
    let server = tb.udp_socket(b, any()).unwrap();
    let port = server.local_addr().unwrap().port();
    let path = tb.udp_path(l, a, port).unwrap();
    let client = tb.udp_socket(a, any()).unwrap();
    client.send_to(b"hello", path).unwrap();
    server
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 64];
    let (_, session) = server.recv_from(&mut buf).unwrap();
    let base = Instant::now();
    let h = probe::sink(
        client,
        base,
        Duration::from_secs(2),
        Duration::from_secs(10),
    );
    let size = 1400;
    let count = (150e6 * 1.5 / 8.0 / size as f64) as u64;
    probe::send_paced(&server, session, base, count, size, 150e6);
    let r = h.join().unwrap();
    let p50 = probe::quantile(&r.delays, 0.5);
    let p99 = probe::quantile(&r.delays, 0.99);
    eprintln!(
        "{:?}, rate by {rate_by:?}: far → near at 150 Mbit/s into 100 Mbit/s, 10 ms, 250 kB queue: \
         {:.1} Mbit/s, {} of {count} delivered, one-way delay p50 {:.1} ms p99 {:.1} ms",
        tb.emulation(),
        r.rate_bps() / 1e6,
        r.packets,
        ms(p50),
        ms(p99)
    );
    (r.rate_bps(), p50, r.packets, count)
}

#[test]
fn queue_is_bounded_and_tail_drops() {
    let (rate, p50, got, sent) = queue_check(RateBy::Relay);
    if sent == 0 {
        return;
    }
    assert!((rate - 100e6).abs() <= 8e6, "rate {rate}");
    // delay 10 ms + a full queue (250 kB / 12.5 MB/s = 20 ms) = 30 ms (with
    // tbf in its place: p50 415 ms, p99 816 ms; the tail also carries this
    // process's scheduling on a loaded machine, so the median is checked).
    assert!(
        (29.0..=35.0).contains(&ms(p50)),
        "median one-way delay {p50:?}: expected ≈ 30 ms (queue bounded)"
    );
    assert!(
        got < sent * 3 / 4,
        "excess must be dropped: {got} of {sent}"
    );
}

/// Measurement behind the default (`RateBy::Relay`): with tbf in the kernel
/// the relay's own socket is slowed by the full qdisc (UDP send blocks once
/// its send buffer is queued), so excess waits in the relay instead of being
/// dropped. Run with `--ignored --nocapture` to see the figures.
#[test]
#[ignore]
fn queue_with_tbf_for_comparison() {
    queue_check(RateBy::Tbf);
}

/// carepo's Fig. 3 (server —slow link— gateway — LAN of clients), as the
/// content-addressable distribution tests will use it: rates and delay of
/// the slow link each way, the LAN fast, and an NDN fetch from a client
/// through the gateway to the server's repository.
#[test]
fn carepo_fig3_four_hosts() {
    use granary_testbed::topology::CarepoFig3;
    let Some((mut tb, _turn)) = netns::testbed(|_| {}) else {
        return;
    };
    let t = CarepoFig3::build(&mut tb, 2).unwrap();
    let (c1, c2) = (t.clients[0], t.clients[1]);

    // Gateway → server (up, 0.5 Mbit/s) with the relay on the server side.
    let s = tb.udp_socket(t.server, any()).unwrap();
    let port = s.local_addr().unwrap().port();
    let base = Instant::now();
    let h = probe::sink(
        s.try_clone().unwrap(),
        base,
        Duration::from_secs(2),
        Duration::from_secs(10),
    );
    let path = tb.udp_path(t.wan, t.gateway, port).unwrap();
    let g = tb.udp_socket(t.gateway, any()).unwrap();
    probe::send_paced(&g, path, base, 180, 1400, 1e6);
    let up = h.join().unwrap();
    // Server → gateway (down, 2.5 Mbit/s): the server answers the session.
    g.send_to(b"hello", path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 2048];
    let session = loop {
        let (n, a) = s.recv_from(&mut b).unwrap();
        if n == 5 {
            break a;
        }
    };
    let h = probe::sink(
        g.try_clone().unwrap(),
        base,
        Duration::from_secs(2),
        Duration::from_secs(10),
    );
    probe::send_paced(&s, session, base, 500, 1400, 4e6);
    let down = h.join().unwrap();
    // Round trip gateway → server → gateway: 20 ms each way.
    let stop = Arc::new(AtomicBool::new(false));
    let es = tb.udp_socket(t.server, any()).unwrap();
    let echo_port = es.local_addr().unwrap().port();
    probe::echo(es, stop.clone());
    let epath = tb.udp_path(t.wan, t.gateway, echo_port).unwrap();
    let rtts = probe::rtts(&g, epath, 30, Duration::from_secs(2));
    let (rtt, rtt_med) = (probe::quantile(&rtts, 0.0), probe::quantile(&rtts, 0.5));
    // LAN: client1 → client2 directly, no emulation.
    let s2 = tb.udp_socket(c2, any()).unwrap();
    let p2 = s2.local_addr().unwrap().port();
    probe::echo(s2, stop.clone());
    let c1s = tb.udp_socket(c1, any()).unwrap();
    let lan_addr = SocketAddr::new(tb.lan_addr(t.lan, c2).unwrap().into(), p2);
    let lan_rtt = probe::quantile(
        &probe::rtts(&c1s, lan_addr, 10, Duration::from_secs(1)),
        0.5,
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "carepo Fig. 3 ({:?}): down {:.2} Mbit/s, up {:.2} Mbit/s, WAN RTT min {:.1} ms, LAN RTT {:.3} ms",
        tb.emulation(),
        down.rate_bps() / 1e6,
        up.rate_bps() / 1e6,
        ms(rtt),
        ms(lan_rtt)
    );
    assert!(
        (down.rate_bps() - 2.5e6).abs() <= 0.12 * 2.5e6,
        "down {}",
        down.rate_bps()
    );
    assert!(
        (up.rate_bps() - 0.5e6).abs() <= 0.12 * 0.5e6,
        "up {}",
        up.rate_bps()
    );
    assert!((39.0..=43.0).contains(&ms(rtt)), "WAN RTT min {rtt:?}");
    assert!(ms(rtt_med) <= 46.0, "WAN RTT median {rtt_med:?}");
    assert!(ms(lan_rtt) < 5.0, "LAN RTT {lan_rtt:?}");

    // NDN across it: client1 → gateway (LAN) → server (slow link).
    let server = netns::Node::start(&mut tb, t.server, &[]);
    let gw = netns::Node::start(&mut tb, t.gateway, &[]);
    let client = netns::Node::start(&mut tb, c1, &[]);
    let to_server = tb.udp_path(t.wan, t.gateway, 6363).unwrap();
    let gw_lan = tb.lan_addr(t.lan, t.gateway).unwrap();
    gw.ok(&["route", "add", "/carepo", &format!("udp4://{to_server}")]);
    client.ok(&["route", "add", "/carepo", &format!("udp4://{gw_lan}:6363")]);
    let file = server.dir.path().join("f.bin");
    // Bytes with no repeated chunk (a repeated chunk is fetched once).
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let data: Vec<u8> = (0..300_000u32)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&file, &data).unwrap();
    server.ok(&[
        "put",
        file.to_str().unwrap(),
        "/carepo/f",
        "--sign",
        "digest",
    ]);
    let out = client.dir.path().join("f.out");
    let t0 = Instant::now();
    client.ok(&[
        "get",
        "/carepo/f",
        "--integrity-only",
        "-o",
        out.to_str().unwrap(),
    ]);
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(std::fs::read(&out).unwrap(), data);
    // 300 kB over 2.5 Mbit/s takes ≥ 0.96 s: the data crossed the slow link.
    eprintln!("client1 fetched 300 kB through the gateway in {secs:.2} s");
    assert!(secs >= 0.9, "too fast for a 2.5 Mbit/s link: {secs} s");
}
