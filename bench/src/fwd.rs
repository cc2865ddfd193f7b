//! Forwarder throughput tool: a pipelined consumer and a producer of 8 KiB
//! Data, over Unix sockets, either through a forwarder or directly.
//!
//!   granary-bench-fwd producer --listen PATH [--size N]          (direct)
//!   granary-bench-fwd producer --connect PATH --prefix /p [--size N] [--silent]
//!   granary-bench-fwd consumer --connect PATH --prefix /p [--window W] [--flows F] [--secs S] [--repeat [--names N]]
//!                              [--count N [--hold S]] [--lifetime MS]
//!
//! The consumer prints `exchanges_per_sec<TAB>gbit_per_sec<TAB>sent<TAB>received<TAB>bytes_per_data`.
//! `--silent`: the producer registers its prefix and never answers (Interests
//! stay in the forwarder's PIT). `--count N`: the consumer sends N Interests
//! (unique names), waits until they are answered (or 2 s without an answer),
//! keeps its face open `--hold` seconds more and prints totals; used to fill
//! the PIT or the CS to a known number of entries.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use granary_face::framing::next_frame;
use granary_mgmt::{make_command, ControlParameters};
use granary_packet::{Component, DataBuilder, Interest, InterestFields, Name};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

#[derive(clap::Parser)]
#[command(
    about = "Forwarder throughput tool: a pipelined consumer and a producer of Data over Unix sockets"
)]
enum Cli {
    /// Answer every Interest with a Data of --size bytes of content.
    Producer {
        /// Listen on this socket (a direct producer, no forwarder).
        #[arg(long, conflicts_with = "connect", required_unless_present = "connect")]
        listen: Option<String>,
        /// Connect to a forwarder's socket and register --prefix there.
        #[arg(long)]
        connect: Option<String>,
        /// Prefix registered with the forwarder.
        #[arg(long, default_value = "/bench")]
        prefix: String,
        /// Content bytes per Data.
        #[arg(long, default_value_t = 8192)]
        size: usize,
        /// Register and never answer (Interests stay in the forwarder's PIT).
        #[arg(long)]
        silent: bool,
    },
    /// Fetch pipelined and print
    /// `exchanges_per_sec<TAB>gbit_per_sec<TAB>sent<TAB>received<TAB>bytes_per_data`.
    Consumer {
        /// The socket of the forwarder (or of a direct producer).
        #[arg(long)]
        connect: String,
        /// Names are <prefix>/<run and flow>/<segment>.
        #[arg(long, default_value = "/bench")]
        prefix: String,
        /// Interests outstanding per flow.
        #[arg(long, default_value_t = 64)]
        window: usize,
        /// Flows, each on its own connection.
        #[arg(long, default_value_t = 1)]
        flows: usize,
        /// Seconds measured (after half a second of warm-up).
        #[arg(long, default_value_t = 5.0)]
        secs: f64,
        /// Ask for --names names over and over (CS hits after the first round).
        #[arg(long)]
        repeat: bool,
        /// Distinct names per flow with --repeat.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
        names: u64,
        /// Send this many Interests (unique names), wait for the answers (or
        /// 2 s without one) and print totals; fills the PIT or the CS.
        #[arg(long)]
        count: Option<u64>,
        /// With --count: seconds the face stays open afterwards.
        #[arg(long, default_value_t = 0.0)]
        hold: f64,
        /// InterestLifetime in ms.
        #[arg(long, default_value_t = 2000)]
        lifetime: u64,
    },
}

/// Ends the tool with a message (bad input, a socket that is not there).
fn fail(what: impl std::fmt::Display) -> ! {
    eprintln!("granary-bench-fwd: {what}");
    std::process::exit(1)
}

async fn serve_conn(sock: UnixStream, size: usize, silent: bool) {
    let (mut r, mut w) = sock.into_split();
    let content = Bytes::from(vec![0xABu8; size]);
    let mut buf = BytesMut::with_capacity(1 << 20);
    let mut out = BytesMut::with_capacity(1 << 20);
    loop {
        match r.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        out.clear();
        while let Ok(Some(frame)) = next_frame(&mut buf, 9000) {
            if silent {
                continue;
            }
            if let Ok(i) = Interest::decode(frame) {
                let d = DataBuilder::new(i.name.clone())
                    .content(content.clone())
                    .freshness_period(1000)
                    .encode_with_signature(Bytes::from_static(&[0u8; 32]));
                out.extend_from_slice(d.wire());
            }
        }
        if !out.is_empty() && w.write_all(&out).await.is_err() {
            return;
        }
    }
}

async fn producer(
    listen: Option<String>,
    connect: Option<String>,
    prefix: String,
    size: usize,
    silent: bool,
) {
    if let Some(path) = listen {
        let _ = std::fs::remove_file(&path);
        let l = UnixListener::bind(&path).unwrap_or_else(|e| fail(format!("{path}: {e}")));
        println!("ready");
        loop {
            match l.accept().await {
                Ok((s, _)) => drop(tokio::spawn(serve_conn(s, size, false))),
                Err(e) => fail(format!("{path}: {e}")),
            }
        }
    }
    let path = connect.unwrap_or_else(|| fail("--connect or --listen is needed"));
    let prefix = Name::from_uri(&prefix).unwrap_or_else(|e| fail(format!("{prefix}: {e}")));
    let mut s = UnixStream::connect(&path)
        .await
        .unwrap_or_else(|e| fail(format!("{path}: {e}")));
    let mut p = ControlParameters::new();
    p.name = Some(prefix);
    let cmd = make_command(
        &Name::from_uri("/localhost/nfd").unwrap(),
        "rib",
        "register",
        &p,
    )
    .encode();
    let mut buf = vec![0u8; 65536];
    if let Err(e) = async {
        s.write_all(cmd.wire()).await?;
        s.read(&mut buf).await
    }
    .await
    {
        fail(format!("registering {}: {e}", p.name.unwrap_or_default()));
    }
    println!("ready");
    serve_conn(s, size, silent).await;
}

#[allow(clippy::too_many_arguments)]
async fn flow(
    path: String,
    prefix: Name,
    flow: usize,
    window: usize,
    deadline: Instant,
    repeat: Option<u64>,
    count: Option<u64>,
    lifetime: u64,
    hold: Duration,
    sent: Arc<AtomicU64>,
    recv: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
) {
    let s = UnixStream::connect(&path)
        .await
        .unwrap_or_else(|e| fail(format!("{path}: {e}")));
    let (mut r, mut w) = s.into_split();
    // Names unique to this run: a run right after another must not meet the
    // dead-nonce list with the previous run's names and nonces (it answers
    // those with Nacks, which would count as fast exchanges).
    let base = prefix.append(&Component::generic(
        format!("p{}f{flow}", std::process::id()).as_bytes(),
    ));
    let outstanding = Arc::new(tokio::sync::Semaphore::new(window));
    let o2 = outstanding.clone();
    let (recv2, bytes2) = (recv.clone(), bytes.clone());
    let reader = tokio::spawn(async move {
        let mut buf = BytesMut::with_capacity(1 << 20);
        loop {
            match r.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            while let Ok(Some(frame)) = next_frame(&mut buf, 9000) {
                // Only Data count as exchanges; a Nack (or anything else)
                // frees its window slot and is reported apart.
                if frame.first() == Some(&0x06) {
                    recv2.fetch_add(1, Ordering::Relaxed);
                    bytes2.fetch_add(frame.len() as u64, Ordering::Relaxed);
                } else {
                    OTHER.fetch_add(1, Ordering::Relaxed);
                }
                o2.add_permits(1);
            }
        }
    });
    let mut seq: u64 = 0;
    let mut out = BytesMut::with_capacity(64 * 1024);
    while Instant::now() < deadline && count.is_none_or(|c| seq < c) {
        let Ok(permit) = tokio::time::timeout(
            Duration::from_millis(500),
            outstanding.clone().acquire_many_owned(1),
        )
        .await
        else {
            // Lost packets: release the window and go on.
            outstanding.add_permits(1);
            continue;
        };
        let Ok(p) = permit else { break };
        p.forget();
        let mut n = 1;
        let cap = count.map_or(64, |c| (c - seq).min(64)) as usize;
        while n < cap {
            match outstanding.try_acquire() {
                Ok(p) => {
                    p.forget();
                    n += 1;
                }
                Err(_) => break,
            }
        }
        out.clear();
        for _ in 0..n {
            let s = repeat.map_or(seq, |names| seq % names);
            let mut f = InterestFields::new(base.append(&Component::segment(s)));
            f.nonce = Some(seq as u32 ^ (flow as u32) << 24);
            f.lifetime = Some(lifetime);
            out.extend_from_slice(f.encode().wire());
            seq += 1;
        }
        sent.fetch_add(n as u64, Ordering::Relaxed);
        if w.write_all(&out).await.is_err() {
            break;
        }
    }
    if let Some(c) = count {
        // Wait for the answers (none come from a silent producer), then keep
        // the face open while the caller measures.
        let mut last = (recv.load(Ordering::Relaxed), Instant::now());
        while recv.load(Ordering::Relaxed) < c && last.1.elapsed() < Duration::from_secs(2) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let r = recv.load(Ordering::Relaxed);
            if r != last.0 {
                last = (r, Instant::now());
            }
        }
        let _keep = w;
        tokio::time::sleep(hold).await;
    }
    reader.abort();
}

/// Frames other than Data the consumer received (Nacks).
static OTHER: AtomicU64 = AtomicU64::new(0);

#[allow(clippy::too_many_arguments)]
async fn consumer(
    path: String,
    prefix: String,
    window: usize,
    flows: usize,
    secs: f64,
    repeat: Option<u64>,
    count: Option<u64>,
    lifetime: u64,
    hold: f64,
) {
    let prefix = Name::from_uri(&prefix).unwrap_or_else(|e| fail(format!("{prefix}: {e}")));
    if !(secs.is_finite() && secs > 0.0 && hold.is_finite() && hold >= 0.0) {
        fail("--secs must be above 0 and --hold at least 0");
    }
    let hold = Duration::from_secs_f64(hold);
    let (sent, recv, bytes) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    // Warm-up second not counted.
    let warm = Instant::now() + Duration::from_millis(500);
    let start = warm;
    let deadline = start + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for f in 0..flows {
        tasks.push(tokio::spawn(flow(
            path.clone(),
            prefix.clone(),
            f,
            window,
            deadline,
            repeat,
            count,
            lifetime,
            hold,
            sent.clone(),
            recv.clone(),
            bytes.clone(),
        )));
    }
    if count.is_some() {
        // A fixed number of Interests: run to the end, report totals.
        let t0 = Instant::now();
        for t in tasks {
            let _ = t.await;
        }
        let (received, all_bytes) = (recv.load(Ordering::Relaxed), bytes.load(Ordering::Relaxed));
        let el = t0.elapsed().as_secs_f64();
        println!(
            "{:.0}\t{:.3}\t{}\t{received}\t{}",
            received as f64 / el,
            all_bytes as f64 * 8.0 / el / 1e9,
            sent.load(Ordering::Relaxed),
            all_bytes.checked_div(received).unwrap_or(0)
        );
        report_other();
        return;
    }
    tokio::time::sleep_until(warm.into()).await;
    let (r0, b0) = (recv.load(Ordering::Relaxed), bytes.load(Ordering::Relaxed));
    tokio::time::sleep_until(deadline.into()).await;
    let (r1, b1) = (recv.load(Ordering::Relaxed), bytes.load(Ordering::Relaxed));
    let el = secs;
    let ex = (r1 - r0) as f64 / el;
    let gbps = (b1 - b0) as f64 * 8.0 / el / 1e9;
    let (received, all_bytes) = (recv.load(Ordering::Relaxed), bytes.load(Ordering::Relaxed));
    println!(
        "{ex:.0}\t{gbps:.3}\t{}\t{received}\t{}",
        sent.load(Ordering::Relaxed),
        all_bytes.checked_div(received).unwrap_or(0)
    );
    for t in tasks {
        t.abort();
    }
    report_other();
}

fn report_other() {
    let other = OTHER.load(Ordering::Relaxed);
    if other > 0 {
        eprintln!("consumer: {other} answers were not Data (Nacks), not counted");
    }
}

fn main() {
    let cli = <Cli as clap::Parser>::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(e));
    match cli {
        Cli::Producer {
            listen,
            connect,
            prefix,
            size,
            silent,
        } => rt.block_on(producer(listen, connect, prefix, size, silent)),
        Cli::Consumer {
            connect,
            prefix,
            window,
            flows,
            secs,
            repeat,
            names,
            count,
            hold,
            lifetime,
        } => rt.block_on(consumer(
            connect,
            prefix,
            window,
            flows,
            secs,
            repeat.then_some(names),
            count,
            lifetime,
            hold,
        )),
    }
}
