//! Measuring a path: UDP echo for round-trip times, a paced sender and a
//! counting sink for loss and rate. Plain blocking sockets (made in a
//! namespace with [`crate::Testbed::udp_socket`]) on their own threads.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Raises the calling thread's priority (nice -10; best effort, needs
/// root): a probe's own wake-ups are part of what it measures, and tests run
/// beside busy nodes and builds.
pub fn boost_this_thread() {
    let Ok(link) = std::fs::read_link("/proc/thread-self") else {
        return;
    };
    let Some(tid) = link.file_name().and_then(|t| t.to_str()).map(str::to_owned) else {
        return;
    };
    let _ = std::process::Command::new("renice")
        .args(["-n", "-10", "-p", &tid])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// Echoes every datagram back until `stop` is set.
pub fn echo(sock: UdpSocket, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        boost_this_thread();
        let _ = sock.set_read_timeout(Some(Duration::from_millis(50)));
        let mut b = vec![0u8; 65_536];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, a)) = sock.recv_from(&mut b) {
                let _ = sock.send_to(&b[..n], a);
            }
        }
    })
}

/// Sends `n` numbered probes to an echo, one at a time, and returns each
/// round-trip time (a probe unanswered within `timeout` is left out).
pub fn rtts(sock: &UdpSocket, to: SocketAddr, n: u32, timeout: Duration) -> Vec<Duration> {
    boost_this_thread();
    let _ = sock.set_read_timeout(Some(timeout));
    let mut out = vec![];
    let mut b = [0u8; 64];
    for i in 0..n {
        let t = Instant::now();
        if sock.send_to(&i.to_be_bytes(), to).is_err() {
            continue;
        }
        loop {
            match sock.recv_from(&mut b) {
                Ok((4, _)) if b[..4] == i.to_be_bytes() => {
                    out.push(t.elapsed());
                    break;
                }
                Ok(_) => continue, // a late answer to an earlier probe
                Err(_) => break,
            }
        }
    }
    out
}

/// What a sink saw.
#[derive(Debug, Clone, Default)]
pub struct SinkReport {
    /// Datagrams received.
    pub packets: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Arrival of the first and last datagram.
    pub first: Option<Instant>,
    /// Arrival of the last datagram.
    pub last: Option<Instant>,
    /// Distinct sequence numbers seen (first 8 bytes of each datagram).
    pub distinct: u64,
    /// One-way delay of each datagram (from the send time in bytes 8..16,
    /// nanoseconds since the `base` both sides share).
    pub delays: Vec<Duration>,
}

impl SinkReport {
    /// Received bits per second between the first and last arrival.
    pub fn rate_bps(&self) -> f64 {
        match (self.first, self.last) {
            (Some(a), Some(b)) if b > a && self.packets > 1 => {
                // The first datagram's bytes arrived before the window opened.
                let per = self.bytes as f64 / self.packets as f64;
                (self.bytes as f64 - per) * 8.0 / (b - a).as_secs_f64()
            }
            _ => 0.0,
        }
    }
}

/// Counts datagrams until nothing arrives for `idle` after the first one
/// (or `max_wait` passes with nothing at all).
pub fn sink(
    sock: UdpSocket,
    base: Instant,
    idle: Duration,
    max_wait: Duration,
) -> JoinHandle<SinkReport> {
    std::thread::spawn(move || {
        boost_this_thread();
        let mut r = SinkReport::default();
        let mut seen = std::collections::HashSet::new();
        let mut b = vec![0u8; 65_536];
        let start = Instant::now();
        loop {
            let wait = if r.first.is_some() {
                idle
            } else {
                max_wait
                    .saturating_sub(start.elapsed())
                    .max(Duration::from_millis(1))
            };
            let _ = sock.set_read_timeout(Some(wait));
            match sock.recv_from(&mut b) {
                Ok((n, _)) => {
                    let now = Instant::now();
                    r.first.get_or_insert(now);
                    r.last = Some(now);
                    r.packets += 1;
                    r.bytes += n as u64;
                    if n >= 8 {
                        seen.insert(u64::from_be_bytes(b[..8].try_into().expect("8 bytes")));
                    }
                    if n >= 16 {
                        let ns = u64::from_be_bytes(b[8..16].try_into().expect("8 bytes"));
                        let sent = base + Duration::from_nanos(ns);
                        r.delays.push(now.saturating_duration_since(sent));
                    }
                }
                Err(_) => {
                    if r.first.is_some() || start.elapsed() >= max_wait {
                        break;
                    }
                }
            }
        }
        r.distinct = seen.len() as u64;
        r
    })
}

/// Sends `count` datagrams of `size` bytes (≥ 16: a sequence number, then
/// the send time in ns since `base`) at `rate_bps`, paced in 1 ms batches.
/// Returns when done.
pub fn send_paced(
    sock: &UdpSocket,
    to: SocketAddr,
    base: Instant,
    count: u64,
    size: usize,
    rate_bps: f64,
) {
    boost_this_thread();
    let mut buf = vec![0u8; size.max(16)];
    let per_ms = (rate_bps / 8.0 / 1000.0 / buf.len() as f64).max(0.01);
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < count {
        let due = (start.elapsed().as_secs_f64() * 1000.0 * per_ms) as u64 + 1;
        while sent < count && sent < due {
            buf[..8].copy_from_slice(&sent.to_be_bytes());
            let t = base.elapsed().as_nanos() as u64;
            buf[8..16].copy_from_slice(&t.to_be_bytes());
            let _ = sock.send_to(&buf, to);
            sent += 1;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// The `q`-quantile (0..=1) of some durations.
pub fn quantile(v: &[Duration], q: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    let mut s = v.to_vec();
    s.sort();
    s[((s.len() - 1) as f64 * q).round() as usize]
}
