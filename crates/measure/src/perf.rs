//! The tool behind `granary perf serve` and `granary perf fetch`: producer signing
//! throughput, with ndnperf's semantics (issue 18, item 1).
//!
//! `serve` is `granary serve`'s synthetic producer made measurable: it
//! registers a prefix on the node and answers every Interest with a Data
//! signed on demand by one of `--threads` signing workers. `fetch` asks
//! unique names (`/PREFIX/<run>/<seq>`, so no cache ever answers) with a
//! fixed window or at a fixed rate.
//!
//! Both print a line each second and a summary at the end: Data/s, Mbit/s
//! of payload, latency percentiles, the producer's processing time per
//! packet (Interest taken by a worker → signed Data ready) and its CPU use.
//! The producer tells the consumer its figures in the first 16 bytes of
//! each payload (mean processing ns and CPU permille over the previous
//! second, big-endian u64 each), so `fetch` reports them too.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use granary_app::Client;
use granary_face::NetPacket;
use granary_packet::types::sig_type;
use granary_packet::{Component, Data, DataBuilder, InterestFields, Name, SignatureInfo};
use granary_security::key::{KeyType, PrivateKey, Signer};

/// Largest payload: the client's frame limit minus room for name and
/// signature (the node's own `--max-packet`, 8800 by default, may be lower).
pub const MAX_PAYLOAD: usize = 8800 * 8 - 1024;

/// Bytes of producer figures at the start of each payload.
const HEADER: usize = 16;

/// How `perf serve` signs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SignMode {
    /// DigestSha256 (no key, no authentication).
    Sha256,
    /// ECDSA P-256 with SHA-256.
    Ecdsa,
    /// RSA-2048 PKCS#1 v1.5 with SHA-256.
    Rsa,
    /// Ed25519.
    Ed25519,
    /// HMAC-SHA256 with a 32-byte secret.
    Hmac,
    /// NullSignature (type 200, empty value): the cost of everything but
    /// signing.
    Null,
}

impl SignMode {
    fn key_type(self) -> Option<KeyType> {
        match self {
            SignMode::Ecdsa => Some(KeyType::Ecdsa),
            SignMode::Rsa => Some(KeyType::Rsa),
            SignMode::Ed25519 => Some(KeyType::Ed25519),
            SignMode::Hmac => Some(KeyType::Hmac),
            SignMode::Sha256 | SignMode::Null => None,
        }
    }
}

/// `granary perf serve` options.
#[derive(Debug)]
pub struct ServeParams {
    /// Name prefix to register and serve.
    pub prefix: String,
    /// Signature of every Data.
    pub sign: SignMode,
    /// Payload (Content) bytes per Data.
    pub payload: usize,
    /// Signing worker threads.
    pub threads: usize,
    /// FreshnessPeriod of every Data, in ms.
    pub freshness: u64,
    /// Parse the private key again for every packet (reproduces ndnperf's
    /// per-packet key lookup cost).
    pub no_key_cache: bool,
    /// Stop after this many seconds (default: run until interrupted).
    pub duration: Option<f64>,
    /// Write the public key (SubjectPublicKeyInfo DER; the raw secret for
    /// hmac) to FILE, for consumers that check signatures.
    pub key_out: Option<PathBuf>,
    /// One JSON object per line instead of text.
    pub json: bool,
}

/// `granary perf fetch` options.
#[derive(Debug)]
pub struct FetchParams {
    /// Name prefix served by `perf serve`.
    pub prefix: String,
    /// Interests kept outstanding.
    pub window: usize,
    /// Send Interests at this rate (per second) instead of with a window.
    pub rate: Option<f64>,
    /// Stop sending after this many seconds.
    pub duration: f64,
    /// Stop after this many Data (overrides --duration).
    pub count: Option<u64>,
    /// InterestLifetime in ms; an Interest unanswered for this long counts
    /// as a timeout.
    pub lifetime: u64,
    /// One JSON object per line instead of text.
    pub json: bool,
}

/// CPU time of this process (user + system), from /proc/self/stat.
fn cpu_time() -> Duration {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // Fields after the parenthesised command: state is field 3, utime 14,
    // stime 15 (1-based); clock ticks are 100 Hz on Linux.
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    Duration::from_millis(f.iter().sum::<u64>() * 10)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Latency (and processing-time) samples, in microseconds.
#[derive(Default)]
struct Samples(Vec<u64>);

impl Samples {
    fn push(&mut self, d: Duration) {
        self.0.push(d.as_micros().min(u128::from(u64::MAX)) as u64);
    }

    /// p50, p90, p99, max in ms.
    fn percentiles(&mut self) -> [f64; 4] {
        if self.0.is_empty() {
            return [0.0; 4];
        }
        self.0.sort_unstable();
        let at = |q: f64| {
            let i = ((self.0.len() as f64 * q).ceil() as usize).clamp(1, self.0.len()) - 1;
            self.0[i] as f64 / 1000.0
        };
        [
            at(0.5),
            at(0.9),
            at(0.99),
            self.0[self.0.len() - 1] as f64 / 1000.0,
        ]
    }
}

/// Counters over one interval (or the whole run).
#[derive(Default)]
struct Window {
    data: u64,
    payload_bytes: u64,
    latency: Samples,
    proc_ns: u64,
    proc_n: u64,
    timeouts: u64,
    nacks: u64,
    /// Producer figures carried in payloads: (mean ns, CPU permille).
    producer: Option<(u64, u64)>,
}

/// One report line.
#[allow(clippy::too_many_arguments)]
fn report(
    json: bool,
    role: &str,
    final_: bool,
    secs: f64,
    w: &mut Window,
    cpu: Duration,
    extra: &[(&str, u64)],
) {
    let secs = secs.max(1e-9);
    let rate = w.data as f64 / secs;
    let mbit = w.payload_bytes as f64 * 8.0 / secs / 1e6;
    let [p50, p90, p99, max] = w.latency.percentiles();
    let cpu_pct = cpu.as_secs_f64() / secs * 100.0;
    let per_core = cpu_pct / cores() as f64;
    let proc_us = if w.proc_n > 0 {
        Some(w.proc_ns as f64 / w.proc_n as f64 / 1000.0)
    } else {
        w.producer.map(|(ns, _)| ns as f64 / 1000.0)
    };
    let producer_cpu = w.producer.map(|(_, pm)| pm as f64 / 10.0);
    if json {
        let mut v = serde_json::json!({
            "role": role,
            "final": final_,
            "seconds": secs,
            "data": w.data,
            "data_per_s": rate,
            "mbit_per_s": mbit,
            "payload_bytes": w.payload_bytes,
            "latency_ms": {"p50": p50, "p90": p90, "p99": p99, "max": max},
            "producer_us_per_packet": proc_us,
            "cpu_percent": cpu_pct,
            "cpu_percent_per_core": per_core,
            "cores": cores(),
            "timeouts": w.timeouts,
            "nacks": w.nacks,
        });
        if let Some(pc) = producer_cpu {
            v["producer_cpu_percent"] = pc.into();
        }
        for (k, n) in extra {
            v[*k] = (*n).into();
        }
        println!("{v}");
    } else {
        let mut line = format!(
            "{}{role} {:>6.1}s  {:>9.0} Data/s  {:>8.1} Mbit/s  latency ms p50 {p50:.3} p90 {p90:.3} p99 {p99:.3} max {max:.3}",
            if final_ { "total " } else { "" },
            secs,
            rate,
            mbit
        );
        if let Some(us) = proc_us {
            line.push_str(&format!("  producer {us:.1} µs/packet"));
        }
        if let Some(pc) = producer_cpu {
            line.push_str(&format!(" cpu {pc:.0}%"));
        }
        line.push_str(&format!(
            "  {role} cpu {cpu_pct:.0}% ({per_core:.0}%/core of {})",
            cores()
        ));
        if w.timeouts > 0 || w.nacks > 0 {
            line.push_str(&format!("  timeouts {} nacks {}", w.timeouts, w.nacks));
        }
        for (k, n) in extra {
            line.push_str(&format!("  {k} {n}"));
        }
        println!("{line}");
    }
}

/// How a worker signs: a cached signer, or the key's secret to parse again
/// for every packet.
#[derive(Clone)]
enum SignWith {
    Null,
    Signer(Signer),
    Uncached {
        typ: KeyType,
        secret: Arc<Vec<u8>>,
        locator: Name,
    },
}

impl SignWith {
    fn sign(
        &self,
        b: DataBuilder,
        fill: impl FnOnce(&mut [u8]),
        len: usize,
    ) -> anyhow::Result<Data> {
        let fill = |dst: &mut [u8]| {
            fill(dst);
            Ok::<_, anyhow::Error>(())
        };
        match self {
            SignWith::Null => {
                let mut b = b;
                b.sig_info = SignatureInfo::new(sig_type::NULL);
                b.sign_with_content(len, fill, 0, |_| Ok(Bytes::new()))
            }
            SignWith::Signer(s) => sign_data(s, b, fill, len),
            SignWith::Uncached {
                typ,
                secret,
                locator,
            } => {
                let key = PrivateKey::from_secret(*typ, secret)?;
                let s = Signer::new(Arc::new(key), locator.clone());
                sign_data(&s, b, fill, len)
            }
        }
    }
}

fn sign_data(
    s: &Signer,
    mut b: DataBuilder,
    fill: impl FnOnce(&mut [u8]) -> anyhow::Result<()>,
    len: usize,
) -> anyhow::Result<Data> {
    b.sig_info = s.sig_info();
    b.sign_with_content(len, fill, s.max_sig_len(), |m| Ok(s.sign(m)?))
}

/// Producer figures shared by the workers (for the payload header).
struct Shared {
    /// Mean processing ns over the last interval.
    proc_ns: AtomicU64,
    /// CPU permille over the last interval.
    cpu_permille: AtomicU64,
}

/// `granary perf serve`: runs the producer until interrupted or `duration`.
pub fn serve(socket: &std::path::Path, a: ServeParams) -> anyhow::Result<()> {
    if a.payload > MAX_PAYLOAD {
        bail!(
            "--payload {} is larger than the largest packet allows ({MAX_PAYLOAD})",
            a.payload
        );
    }
    if a.threads == 0 {
        bail!("--threads must be at least 1");
    }
    let prefix =
        Name::from_uri(&a.prefix).map_err(|e| anyhow::anyhow!("bad prefix {:?}: {e}", a.prefix))?;
    let locator = prefix
        .append(&Component::generic(b"KEY"))
        .append(&Component::generic(b"perf"));
    let sign = match a.sign.key_type() {
        None if a.sign == SignMode::Null => SignWith::Null,
        None => SignWith::Signer(Signer::Digest),
        Some(typ) => {
            let key = PrivateKey::generate(typ).context("generating the signing key")?;
            if let Some(path) = &a.key_out {
                let bytes = match typ {
                    KeyType::Hmac => key.secret().to_vec(),
                    _ => key.public_key_spki().unwrap_or_default(),
                };
                std::fs::write(path, bytes)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            if a.no_key_cache {
                SignWith::Uncached {
                    typ,
                    secret: Arc::new(key.secret().to_vec()),
                    locator: locator.clone(),
                }
            } else {
                SignWith::Signer(Signer::new(Arc::new(key), locator.clone()))
            }
        }
    };
    // Random-looking filler, made once and copied into every packet.
    let filler: Arc<Vec<u8>> = Arc::new(
        (0..a.payload as u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
            .collect(),
    );
    let shared = Arc::new(Shared {
        proc_ns: AtomicU64::new(0),
        cpu_permille: AtomicU64::new(0),
    });

    // Workers: Interest names in, signed Data out.
    let (work_tx, work_rx) = mpsc::channel::<(Name, Instant)>();
    let work_rx = Arc::new(Mutex::new(work_rx));
    let (done_tx, mut done_rx) =
        tokio::sync::mpsc::unbounded_channel::<anyhow::Result<(Data, Instant, Duration)>>();
    for _ in 0..a.threads {
        let rx = work_rx.clone();
        let tx = done_tx.clone();
        let sign = sign.clone();
        let filler = filler.clone();
        let shared = shared.clone();
        let (payload, freshness) = (a.payload, a.freshness);
        std::thread::spawn(move || loop {
            let job = rx.lock().map(|r| r.recv());
            let Ok(Ok((name, arrived))) = job else {
                return;
            };
            let t0 = Instant::now();
            let b = DataBuilder::new(name).freshness_period(freshness);
            let fill = |dst: &mut [u8]| {
                dst.copy_from_slice(&filler[..dst.len()]);
                if dst.len() >= HEADER {
                    dst[..8].copy_from_slice(&shared.proc_ns.load(Ordering::Relaxed).to_be_bytes());
                    dst[8..16].copy_from_slice(
                        &shared.cpu_permille.load(Ordering::Relaxed).to_be_bytes(),
                    );
                }
            };
            let r = sign
                .sign(b, fill, payload)
                .map(|d| (d, arrived, t0.elapsed()));
            if tx.send(r).is_err() {
                return;
            }
        });
    }
    drop(done_tx);

    let json = a.json;
    let payload = a.payload as u64;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut c = Client::connect(socket).await?;
        c.register(&prefix).await?;
        // Installed before `ready` is printed, so an interrupt right after it
        // still ends with the final report.
        let mut interrupt =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        if !json {
            println!(
                "ready: serving {prefix} ({:?}, {} B payload, {} thread(s){})",
                a.sign,
                a.payload,
                a.threads,
                if a.no_key_cache { ", no key cache" } else { "" }
            );
        } else {
            println!("{}", serde_json::json!({"role": "serve", "ready": true, "prefix": prefix.to_string()}));
        }
        let start = Instant::now();
        let deadline = a.duration.map(|s| tokio::time::Instant::now() + Duration::from_secs_f64(s.max(0.0)));
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        let (mut win, mut total) = (Window::default(), Window::default());
        let (mut t_win, mut cpu_win) = (Instant::now(), cpu_time());
        let cpu0 = cpu_win;
        let stop = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(stop);
        loop {
            tokio::select! {
                p = c.recv() => {
                    if let NetPacket::Interest(i) = p? {
                        if work_tx.send((i.name.clone(), Instant::now())).is_err() {
                            bail!("signing workers stopped");
                        }
                    }
                }
                r = done_rx.recv() => {
                    let Some(r) = r else { bail!("signing workers stopped") };
                    let (d, arrived, proc) = r?;
                    c.send_raw(d.wire()).await?;
                    for w in [&mut win, &mut total] {
                        w.data += 1;
                        w.payload_bytes += payload;
                        w.latency.push(arrived.elapsed());
                        w.proc_ns += proc.as_nanos() as u64;
                        w.proc_n += 1;
                    }
                }
                _ = tick.tick() => {
                    let cpu = cpu_time();
                    let secs = t_win.elapsed().as_secs_f64();
                    let used = cpu.saturating_sub(cpu_win);
                    if let Some(mean) = win.proc_ns.checked_div(win.proc_n) {
                        shared.proc_ns.store(mean, Ordering::Relaxed);
                    }
                    shared.cpu_permille.store((used.as_secs_f64() / secs.max(1e-9) * 1000.0) as u64, Ordering::Relaxed);
                    if win.data > 0 {
                        report(json, "serve", false, secs, &mut win, used, &[]);
                    }
                    win = Window::default();
                    (t_win, cpu_win) = (Instant::now(), cpu);
                }
                _ = &mut stop => break,
                _ = interrupt.recv() => break,
            }
        }
        let secs = start.elapsed().as_secs_f64();
        report(json, "serve", true, secs, &mut total, cpu_time().saturating_sub(cpu0), &[]);
        Ok(())
    })
}

/// `granary perf fetch`: runs the consumer and prints its reports.
pub fn fetch(socket: &std::path::Path, a: FetchParams) -> anyhow::Result<()> {
    let prefix =
        Name::from_uri(&a.prefix).map_err(|e| anyhow::anyhow!("bad prefix {:?}: {e}", a.prefix))?;
    if a.window == 0 {
        bail!("--window must be at least 1");
    }
    if let Some(r) = a.rate {
        if !(r.is_finite() && r > 0.0) {
            bail!("--rate must be a positive number of Interests per second");
        }
    }
    if !(a.duration.is_finite() && a.duration > 0.0) && a.count.is_none() {
        bail!("--duration must be positive (or give --count)");
    }
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let base = prefix.append(&Component::generic(format!("{run_id:x}").as_bytes()));
    let json = a.json;
    let lifetime = Duration::from_millis(a.lifetime);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (received, timeouts) = rt.block_on(async move {
        let mut c = Client::connect(socket).await?;
        let start = Instant::now();
        let end_send = a.count.map_or(Some(start + Duration::from_secs_f64(a.duration)), |_| None);
        let mut next_seq = 0u64;
        let mut outstanding: HashMap<u64, Instant> = HashMap::new();
        let (mut win, mut total) = (Window::default(), Window::default());
        let (mut t_win, mut cpu_win) = (Instant::now(), cpu_time());
        let cpu0 = cpu_win;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        let gap = a.rate.map(|r| Duration::from_secs_f64(1.0 / r));
        let mut next_send = tokio::time::Instant::now();
        let mut nonces = fastrand::Rng::new();

        let may_send = |next_seq: u64| -> bool {
            match (a.count, end_send) {
                (Some(n), _) => next_seq < n,
                (None, Some(t)) => Instant::now() < t,
                (None, None) => false,
            }
        };
        macro_rules! send_one {
            () => {{
                let mut f = InterestFields::new(base.append(&Component::segment(next_seq)));
                f.lifetime = Some(a.lifetime);
                f.nonce = Some(nonces.u32(..));
                c.send_raw(f.encode().wire()).await?;
                outstanding.insert(next_seq, Instant::now());
                next_seq += 1;
            }};
        }
        if gap.is_none() {
            while outstanding.len() < a.window && may_send(next_seq) {
                send_one!();
            }
        }
        loop {
            let sending = may_send(next_seq);
            if !sending && outstanding.is_empty() {
                break;
            }
            tokio::select! {
                p = c.recv() => {
                    let (seq, is_data, d) = match p? {
                        NetPacket::Data(d) => (d.name().last().and_then(|c| c.as_segment()), true, Some(d)),
                        NetPacket::Nack(i, _) => (i.name.last().and_then(|c| c.as_segment()), false, None),
                        NetPacket::Interest(_) => continue,
                    };
                    let Some(seq) = seq else { continue };
                    let Some(sent) = outstanding.remove(&seq) else { continue };
                    for w in [&mut win, &mut total] {
                        if is_data {
                            w.data += 1;
                            w.latency.push(sent.elapsed());
                        } else {
                            w.nacks += 1;
                        }
                    }
                    if let Some(d) = d {
                        let content = d.content();
                        for w in [&mut win, &mut total] {
                            w.payload_bytes += content.len() as u64;
                            if content.len() >= HEADER {
                                let ns = u64::from_be_bytes(content[..8].try_into().unwrap_or_default());
                                let pm = u64::from_be_bytes(content[8..16].try_into().unwrap_or_default());
                                if ns > 0 {
                                    w.producer = Some((ns, pm));
                                }
                            }
                        }
                    }
                    if gap.is_none() {
                        while outstanding.len() < a.window && may_send(next_seq) {
                            send_one!();
                        }
                    }
                }
                _ = tokio::time::sleep_until(next_send), if gap.is_some() && sending => {
                    send_one!();
                    next_send += gap.unwrap_or_default();
                }
                _ = tick.tick() => {
                    // Expire Interests past their lifetime.
                    let now = Instant::now();
                    let before = outstanding.len();
                    outstanding.retain(|_, t| now.duration_since(*t) < lifetime + Duration::from_millis(200));
                    let expired = (before - outstanding.len()) as u64;
                    win.timeouts += expired;
                    total.timeouts += expired;
                    if gap.is_none() {
                        while outstanding.len() < a.window && may_send(next_seq) {
                            send_one!();
                        }
                    }
                    let cpu = cpu_time();
                    report(json, "fetch", false, t_win.elapsed().as_secs_f64(), &mut win, cpu.saturating_sub(cpu_win), &[]);
                    win = Window::default();
                    (t_win, cpu_win) = (Instant::now(), cpu);
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let (received, timeouts) = (total.data, total.timeouts);
        report(json, "fetch", true, secs, &mut total, cpu_time().saturating_sub(cpu0), &[("interests", next_seq)]);
        Ok::<_, anyhow::Error>((received, timeouts))
    })?;
    if received == 0 {
        bail!("no Data received ({timeouts} timeouts): is `granary perf serve` running on that prefix?");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut s = Samples::default();
        assert_eq!(s.percentiles(), [0.0; 4]);
        for us in (1..=100).rev() {
            s.push(Duration::from_micros(us * 1000));
        }
        assert_eq!(s.percentiles(), [50.0, 90.0, 99.0, 100.0]);
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let before = cpu_time();
        let t = Instant::now();
        let mut x = 0u64;
        // Spin until the kernel has charged at least one tick (10 ms), or
        // give up after 5 s of wall time on a very busy machine.
        while cpu_time() <= before && t.elapsed() < Duration::from_secs(5) {
            for _ in 0..100_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
        }
        std::hint::black_box(x);
        assert!(cpu_time() > before, "no CPU time counted");
    }

    fn make(sign: &SignWith, len: usize) -> Data {
        let b = DataBuilder::new(Name::from_uri("/p/1").unwrap());
        sign.sign(b, |d| d.fill(7), len).unwrap()
    }

    #[test]
    fn every_mode_signs_what_it_says() {
        let null = make(&SignWith::Null, 100);
        assert_eq!(null.sig_info().sig_type, sig_type::NULL);
        assert!(null.sig_value().is_empty());
        assert_eq!(null.content(), &[7u8; 100][..]);

        let digest = make(&SignWith::Signer(Signer::Digest), 10);
        assert_eq!(digest.sig_info().sig_type, sig_type::DIGEST_SHA256);
        assert_eq!(
            digest.sig_value().as_ref(),
            &granary_packet::sha256(digest.signed_portion())[..]
        );

        // Cached and uncached keys make the same kind of signature, and both
        // verify under the key's public half.
        let key = PrivateKey::generate(KeyType::Ed25519).unwrap();
        let spki = key.public_key_spki().unwrap();
        let locator = Name::from_uri("/p/KEY/perf").unwrap();
        let uncached = SignWith::Uncached {
            typ: KeyType::Ed25519,
            secret: Arc::new(key.secret().to_vec()),
            locator: locator.clone(),
        };
        let cached = SignWith::Signer(Signer::new(Arc::new(key), locator));
        for d in [make(&cached, 50), make(&uncached, 50)] {
            assert_eq!(d.sig_info().sig_type, sig_type::ED25519);
            granary_security::verify::Verifier::from_spki(&spki)
                .unwrap()
                .verify_data(&d)
                .unwrap();
        }
    }
}
