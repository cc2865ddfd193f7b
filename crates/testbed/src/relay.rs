//! A user-space link emulator for UDP: a relay that sits on a link and, per
//! direction, applies Bernoulli loss, an optional rate (a bottleneck with a
//! bounded tail-drop queue) and a fixed one-way delay.
//!
//! Model, per direction, decided when a datagram arrives at time `t`:
//! 1. lost with probability `loss` (seeded RNG; as netem's `loss`, at enqueue);
//! 2. with a rate, the datagram is serialised after the ones before it:
//!    `start = max(t, link_free)`, `link_free = start + size / rate`; if the
//!    bytes still waiting (`(link_free - t) · rate`) would exceed the queue,
//!    it is tail-dropped instead;
//! 3. it is delivered at `link_free + delay` (or `t + delay` without a rate).
//!
//! Delivery times never decrease, so each direction is one FIFO drained by
//! one sender thread. Receiving is tokio; sending is a plain thread that
//! sleeps until each deadline (`nanosleep`, ~0.1 ms late at most on an idle
//! machine), because tokio's timer wheel has 1 ms granularity and measured
//! round trips came out 1.5–2 ms long with it.
//!
//! Clients are told apart by source address: each gets its own upstream
//! socket (so the far side sees one peer per client), up to
//! [`MAX_SESSIONS`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::UdpSocket;
use tokio::time::Instant;

/// At most this many clients per relay; datagrams from further ones are dropped.
pub const MAX_SESSIONS: usize = 1024;

/// Largest datagram relayed.
const MAX_DATAGRAM: usize = 65_536;

/// Bytes a direction may hold in its delay line regardless of the queue
/// setting (memory bound when there is no rate).
const MAX_DELAY_LINE_BYTES: u64 = 256 << 20;

/// What one direction of a link does to datagrams.
#[derive(Clone, Debug, PartialEq)]
pub struct Impairment {
    /// One-way delay.
    pub delay: Duration,
    /// Loss probability in [0, 1].
    pub loss: f64,
    /// Rate in bits per second (None: unlimited).
    pub rate_bps: Option<u64>,
    /// Queue in front of the rate, in bytes (tail drop). None: one
    /// bandwidth-delay product of 50 ms at the rate, at least 16 KiB.
    pub queue_bytes: Option<u64>,
}

impl Default for Impairment {
    fn default() -> Self {
        Impairment {
            delay: Duration::ZERO,
            loss: 0.0,
            rate_bps: None,
            queue_bytes: None,
        }
    }
}

impl Impairment {
    /// The queue limit actually used with a rate.
    pub fn effective_queue(&self) -> u64 {
        match (self.queue_bytes, self.rate_bps) {
            (Some(q), _) => q,
            (None, Some(r)) => (r / 8 / 20).max(16 << 10),
            (None, None) => MAX_DELAY_LINE_BYTES,
        }
    }
}

/// Counters of one direction.
#[derive(Default, Debug)]
pub struct DirStats {
    /// Datagrams received for this direction.
    pub received: AtomicU64,
    /// Dropped by the random loss.
    pub lost: AtomicU64,
    /// Dropped because the queue was full.
    pub queue_drops: AtomicU64,
    /// Datagrams sent on.
    pub sent: AtomicU64,
    /// Bytes sent on.
    pub sent_bytes: AtomicU64,
}

impl DirStats {
    fn json(&self) -> String {
        format!(
            "{{\"received\":{},\"lost\":{},\"queue_drops\":{},\"sent\":{},\"sent_bytes\":{}}}",
            self.received.load(Ordering::Relaxed),
            self.lost.load(Ordering::Relaxed),
            self.queue_drops.load(Ordering::Relaxed),
            self.sent.load(Ordering::Relaxed),
            self.sent_bytes.load(Ordering::Relaxed)
        )
    }
}

/// Counters of both directions.
#[derive(Default, Debug)]
pub struct RelayStats {
    /// Client → upstream.
    pub up: DirStats,
    /// Upstream → client.
    pub down: DirStats,
    /// Clients seen.
    pub sessions: AtomicU64,
}

impl RelayStats {
    /// One JSON object (what `granary linkem` prints when it stops).
    pub fn json(&self) -> String {
        format!(
            "{{\"sessions\":{},\"up\":{},\"down\":{}}}",
            self.sessions.load(Ordering::Relaxed),
            self.up.json(),
            self.down.json()
        )
    }
}

struct Item {
    due: Instant,
    data: Bytes,
    socket: Arc<std::net::UdpSocket>,
    to: SocketAddr,
}

/// A socket for tokio's receive side and a clone of it for a sender thread.
fn bind_pair(addr: SocketAddr) -> std::io::Result<(Arc<UdpSocket>, Arc<std::net::UdpSocket>)> {
    let s = std::net::UdpSocket::bind(addr)?;
    s.set_nonblocking(true)?;
    // Bursts of fragments arrive at link speed (capped by net.core.rmem_max).
    let sr = socket2::SockRef::from(&s);
    let _ = sr.set_recv_buffer_size(4 << 20);
    let _ = sr.set_send_buffer_size(4 << 20);
    let clone = s.try_clone()?;
    Ok((Arc::new(UdpSocket::from_std(s)?), Arc::new(clone)))
}

/// Sends on a non-blocking socket, waiting out a full send buffer.
fn send_blocking(s: &std::net::UdpSocket, data: &[u8], to: SocketAddr) -> bool {
    for _ in 0..20_000 {
        match s.send_to(data, to) {
            Ok(_) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_micros(50))
            }
            Err(_) => return false,
        }
    }
    false
}

/// The admission decision of one direction (pure, so it can be unit-tested).
#[derive(Debug)]
pub struct Shaper {
    imp: Impairment,
    queue: u64,
    rng: fastrand::Rng,
    link_free: Option<Instant>,
}

/// What happens to one datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Deliver at this time.
    Deliver(Instant),
    /// Random loss.
    Lost,
    /// Queue full.
    QueueDrop,
}

impl Shaper {
    /// A shaper for one direction.
    pub fn new(imp: Impairment, seed: u64) -> Shaper {
        let queue = imp.effective_queue();
        Shaper {
            imp,
            queue,
            rng: fastrand::Rng::with_seed(seed),
            link_free: None,
        }
    }

    /// Decides the fate of a datagram of `len` bytes arriving at `now`.
    pub fn admit(&mut self, now: Instant, len: usize) -> Verdict {
        if self.imp.loss > 0.0 && self.rng.f64() < self.imp.loss {
            return Verdict::Lost;
        }
        let Some(rate) = self.imp.rate_bps.filter(|r| *r > 0) else {
            return Verdict::Deliver(now + self.imp.delay);
        };
        let free = self.link_free.filter(|f| *f > now).unwrap_or(now);
        let backlog = (free - now).as_secs_f64() * rate as f64 / 8.0;
        if backlog + len as f64 > self.queue as f64 {
            return Verdict::QueueDrop;
        }
        let tx = Duration::from_secs_f64(len as f64 * 8.0 / rate as f64);
        let done = free + tx;
        self.link_free = Some(done);
        Verdict::Deliver(done + self.imp.delay)
    }
}

/// One direction: admission under a lock, then a FIFO to its sender task.
struct Pipe {
    shaper: Mutex<Shaper>,
    tx: Mutex<std::sync::mpsc::Sender<Item>>,
    held: Arc<AtomicU64>,
    stats: Arc<RelayStats>,
    up: bool,
}

impl Pipe {
    fn new(imp: Impairment, seed: u64, stats: Arc<RelayStats>, up: bool) -> Arc<Pipe> {
        let (tx, rx) = std::sync::mpsc::channel::<Item>();
        let held = Arc::new(AtomicU64::new(0));
        let pipe = Arc::new(Pipe {
            shaper: Mutex::new(Shaper::new(imp, seed)),
            tx: Mutex::new(tx),
            held: held.clone(),
            stats: stats.clone(),
            up,
        });
        // Ends when the pipe (and with it the sending half) is dropped.
        std::thread::spawn(move || {
            while let Ok(it) = rx.recv() {
                let now = Instant::now();
                if it.due > now {
                    std::thread::sleep(it.due - now);
                }
                held.fetch_sub(it.data.len() as u64, Ordering::Relaxed);
                let d = if up { &stats.up } else { &stats.down };
                if send_blocking(&it.socket, &it.data, it.to) {
                    d.sent.fetch_add(1, Ordering::Relaxed);
                    d.sent_bytes
                        .fetch_add(it.data.len() as u64, Ordering::Relaxed);
                }
            }
        });
        pipe
    }

    fn push(&self, data: Bytes, socket: Arc<std::net::UdpSocket>, to: SocketAddr) {
        let d = if self.up {
            &self.stats.up
        } else {
            &self.stats.down
        };
        d.received.fetch_add(1, Ordering::Relaxed);
        let len = data.len() as u64;
        if self.held.load(Ordering::Relaxed) + len > MAX_DELAY_LINE_BYTES {
            d.queue_drops.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let verdict = match self.shaper.lock() {
            Ok(mut s) => s.admit(Instant::now(), data.len()),
            Err(_) => return,
        };
        match verdict {
            Verdict::Lost => {
                d.lost.fetch_add(1, Ordering::Relaxed);
            }
            Verdict::QueueDrop => {
                d.queue_drops.fetch_add(1, Ordering::Relaxed);
            }
            Verdict::Deliver(due) => {
                self.held.fetch_add(len, Ordering::Relaxed);
                if let Ok(tx) = self.tx.lock() {
                    let _ = tx.send(Item {
                        due,
                        data,
                        socket,
                        to,
                    });
                }
            }
        }
    }
}

/// Relay configuration.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// Where clients send.
    pub listen: SocketAddr,
    /// Where datagrams go on.
    pub upstream: SocketAddr,
    /// Client → upstream.
    pub up: Impairment,
    /// Upstream → client.
    pub down: Impairment,
    /// RNG seed (each direction derives its own).
    pub seed: u64,
}

/// A running relay.
pub struct Relay {
    local: SocketAddr,
    stats: Arc<RelayStats>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Binds the listen address and starts relaying (on the current tokio
    /// runtime).
    pub async fn start(cfg: RelayConfig) -> std::io::Result<Relay> {
        let (listen, listen_tx) = bind_pair(cfg.listen)?;
        let local = listen.local_addr()?;
        let stats = Arc::new(RelayStats::default());
        let up = Pipe::new(cfg.up.clone(), cfg.seed, stats.clone(), true);
        let down = Pipe::new(
            cfg.down.clone(),
            cfg.seed ^ 0xD0D0_D0D0_D0D0_D0D0,
            stats.clone(),
            false,
        );
        let task = tokio::spawn(run(cfg, listen, listen_tx, up, down, stats.clone()));
        Ok(Relay { local, stats, task })
    }

    /// The bound listen address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Counters.
    pub fn stats(&self) -> &Arc<RelayStats> {
        &self.stats
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(
    cfg: RelayConfig,
    listen: Arc<UdpSocket>,
    listen_tx: Arc<std::net::UdpSocket>,
    up: Arc<Pipe>,
    down: Arc<Pipe>,
    stats: Arc<RelayStats>,
) {
    type Session = (Arc<UdpSocket>, Arc<std::net::UdpSocket>);
    let sessions: Arc<Mutex<HashMap<SocketAddr, Session>>> = Arc::default();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    // Session receivers live in this set: when the relay stops (this task is
    // aborted), dropping the set aborts them too.
    let mut receivers = tokio::task::JoinSet::new();
    let bind_any: SocketAddr = if cfg.upstream.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal")
    } else {
        "[::]:0".parse().expect("literal")
    };
    loop {
        let (n, from) = match listen.recv_from(&mut buf).await {
            Ok(x) => x,
            // ICMP errors surface here on some kernels; keep going.
            Err(_) => continue,
        };
        let data = Bytes::copy_from_slice(&buf[..n]);
        let existing = sessions.lock().ok().and_then(|m| m.get(&from).cloned());
        let sock = match existing {
            Some((_, tx)) => tx,
            None => {
                if sessions.lock().map(|m| m.len()).unwrap_or(MAX_SESSIONS) >= MAX_SESSIONS {
                    continue;
                }
                let (s, s_tx) = match bind_pair(bind_any) {
                    Ok(p) => p,
                    Err(_) => continue,
                };
                if let Ok(mut m) = sessions.lock() {
                    m.insert(from, (s.clone(), s_tx.clone()));
                }
                stats.sessions.fetch_add(1, Ordering::Relaxed);
                let (s2, down2, listen2) = (s, down.clone(), listen_tx.clone());
                receivers.spawn(async move {
                    let mut b = vec![0u8; MAX_DATAGRAM];
                    loop {
                        match s2.recv_from(&mut b).await {
                            Ok((n, src)) if src == cfg.upstream => {
                                down2.push(Bytes::copy_from_slice(&b[..n]), listen2.clone(), from)
                            }
                            Ok(_) => {}
                            Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                        }
                    }
                });
                s_tx
            }
        };
        up.push(data, sock, cfg.upstream);
    }
}

/// Parses a duration: `20ms`, `1.5s`, `250us`, `0`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, mul) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if s == "0" {
        ("0", 1.0)
    } else {
        return Err(format!("{s:?}: give a unit (e.g. 10ms, 1.5s, 250us)"));
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: not a duration"))?;
    if !v.is_finite() || !(0.0..=3600.0).contains(&(v * mul)) {
        return Err(format!("{s:?}: out of range (0 … 1 h)"));
    }
    Ok(Duration::from_secs_f64(v * mul))
}

/// Parses a loss probability: `0.5%` or `0.005`.
pub fn parse_loss(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let v = if let Some(p) = s.strip_suffix('%') {
        p.trim().parse::<f64>().map(|x| x / 100.0)
    } else {
        s.parse::<f64>()
    }
    .map_err(|_| format!("{s:?}: not a loss rate (e.g. 0.5% or 0.005)"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("{s:?}: loss must be between 0 and 100%"));
    }
    Ok(v)
}

/// Parses a rate as tc does: `100mbit`, `2.5mbit`, `500kbit`, `1gbit`,
/// `12500000` (bits/s).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mul) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(suf, m)| t.strip_suffix(suf).map(|n| (n.to_string(), *m)))
        .unwrap_or((t.clone(), 1.0));
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: not a rate (e.g. 100mbit, 500kbit)"))?;
    let bps = v * mul;
    if !bps.is_finite() || !(1000.0..=1e12).contains(&bps) {
        return Err(format!("{s:?}: rate out of range (1kbit … 1000gbit)"));
    }
    Ok(bps as u64)
}

/// Parses a size: `256k`, `1m`, `64000` (bytes; k/m are 1024-based).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let (num, mul) = if let Some(n) = t.strip_suffix('k') {
        (n, 1u64 << 10)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 1 << 20)
    } else {
        (t, 1)
    };
    let v: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: not a size (e.g. 256k, 1m)"))?;
    v.checked_mul(mul)
        .filter(|b| *b >= 1500)
        .ok_or_else(|| format!("{s:?}: size out of range (at least 1500 bytes)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        assert_eq!(parse_duration("10ms").unwrap(), Duration::from_millis(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("xms").is_err());
        assert_eq!(parse_loss("0.5%").unwrap(), 0.005);
        assert_eq!(parse_loss("0.25").unwrap(), 0.25);
        assert!(parse_loss("120%").is_err());
        assert!(parse_loss("-0.1").is_err());
        assert_eq!(parse_rate("100mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate("2.5Mbit").unwrap(), 2_500_000);
        assert_eq!(parse_rate("500kbit").unwrap(), 500_000);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0").is_err());
        assert_eq!(parse_size("256k").unwrap(), 262_144);
        assert!(parse_size("1").is_err());
    }

    #[test]
    fn shaper_serialises_at_the_rate_and_tail_drops() {
        let imp = Impairment {
            delay: Duration::from_millis(10),
            loss: 0.0,
            rate_bps: Some(8_000_000), // 1 MB/s: 1000 B take 1 ms
            queue_bytes: Some(5000),
        };
        let mut s = Shaper::new(imp, 1);
        let t0 = Instant::now();
        let mut due = vec![];
        let mut drops = 0;
        for _ in 0..10 {
            match s.admit(t0, 1000) {
                Verdict::Deliver(d) => due.push(d - t0),
                Verdict::QueueDrop => drops += 1,
                Verdict::Lost => unreachable!("no loss configured"),
            }
        }
        // 5000 B of queue: five datagrams fit, the rest are tail-dropped.
        assert_eq!(due.len(), 5);
        assert_eq!(drops, 5);
        for (i, d) in due.iter().enumerate() {
            let want = Duration::from_millis(10 + i as u64 + 1);
            assert!(d.abs_diff(want) < Duration::from_micros(5), "{i}: {d:?}");
        }
        // Once the queue drains, datagrams are admitted again.
        assert!(matches!(
            s.admit(t0 + Duration::from_millis(5), 1000),
            Verdict::Deliver(_)
        ));
    }

    #[test]
    fn shaper_loss_is_bernoulli_and_seeded() {
        let imp = Impairment {
            loss: 0.1,
            ..Default::default()
        };
        let run = |seed| {
            let mut s = Shaper::new(imp.clone(), seed);
            let t = Instant::now();
            (0..100_000)
                .filter(|_| s.admit(t, 100) == Verdict::Lost)
                .count()
        };
        let a = run(7);
        assert_eq!(a, run(7), "same seed, same losses");
        // Binomial(100000, 0.1): sd ≈ 95; 5 sd either side.
        assert!((9_525..=10_475).contains(&a), "{a}");
    }

    #[tokio::test]
    async fn relays_both_ways_with_delay() {
        let echo = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let mut b = [0u8; 2048];
            while let Ok((n, a)) = echo.recv_from(&mut b).await {
                let _ = echo.send_to(&b[..n], a).await;
            }
        });
        let d = Impairment {
            delay: Duration::from_millis(15),
            ..Default::default()
        };
        let r = Relay::start(RelayConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: echo_addr,
            up: d.clone(),
            down: d,
            seed: 1,
        })
        .await
        .unwrap();
        let c = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut b = [0u8; 64];
        for i in 0..5u8 {
            let t = Instant::now();
            c.send_to(&[i; 10], r.local_addr()).await.unwrap();
            let (n, from) = c.recv_from(&mut b).await.unwrap();
            let rtt = t.elapsed();
            assert_eq!((n, from, b[0]), (10, r.local_addr(), i));
            // 15 ms each way: never sooner (a lower bound only; a loaded
            // machine makes it later, never earlier).
            assert!(rtt >= Duration::from_millis(29), "rtt {rtt:?}");
        }
        // A datagram is counted just after it is sent, so the last reply
        // can arrive before its count: wait for it (briefly).
        let t = Instant::now();
        while r.stats().down.sent.load(Ordering::Relaxed) < 5 && t.elapsed().as_secs() < 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(r.stats().up.sent.load(Ordering::Relaxed), 5);
        assert_eq!(r.stats().down.sent.load(Ordering::Relaxed), 5);
    }
}
