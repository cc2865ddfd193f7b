//! The forwarding pipelines alone, in one process: consumers and producers
//! on in-process faces (no sockets, no system calls per packet), so what
//! scales or not with threads is the forwarder's table work and its locks.
//!
//!   granary-bench-fwd-core [--threads W] [--shards S] [--flows F] [--window N] [--secs T] [--size B]
//!
//! W tokio workers (run it under `taskset` with as many cores), S forwarding
//! shards (`granary daemon --shards`), F flows of N pipelined Interests for
//! unique names, B-byte Data (default 8192), the CS off. Each flow is a
//! consumer face and a producer face; the producer answers every Interest.
//! Prints `exchanges_per_sec<TAB>cpu_us_per_exchange` (the whole process's
//! CPU: consumers, producers and forwarder) after a 0.5 s warm-up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use granary_face::internal::AppFace;
use granary_face::{FaceIds, FaceLimits, LinkFields, NetPacket};
use granary_forwarder::cs::CsConfig;
use granary_forwarder::forwarder::{FaceContext, Forwarder, ForwarderConfig};
use granary_packet::{Component, DataBuilder, InterestFields, Name};
use tokio::sync::{mpsc, Notify};

fn arg<T: std::str::FromStr>(args: &[String], key: &str, default: T) -> T {
    args.iter()
        .position(|a| a == key)
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds of this process so far (utime + stime; /proc reports them
/// in USER_HZ, 100 on Linux).
fn cpu_secs() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|x| x.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|x| x.parse().ok()).unwrap_or(0);
    ticks as f64 / 100.0
}

async fn producer(mut face: AppFace, content: Bytes) {
    while let Some((p, _)) = face.recv().await {
        if let NetPacket::Interest(i) = p {
            let d = DataBuilder::new(i.name.clone())
                .content(content.clone())
                .freshness_period(1000)
                .encode_with_signature(Bytes::from_static(&[0u8; 32]));
            face.send(NetPacket::Data(d), LinkFields::default()).await;
        }
    }
}

async fn consumer(mut face: AppFace, base: Name, window: usize, done: Arc<AtomicU64>) {
    let mut seq: u64 = 0;
    let next = |seq: &mut u64| {
        let mut f = InterestFields::new(base.append(&Component::segment(*seq)));
        f.nonce = Some(*seq as u32);
        *seq += 1;
        NetPacket::Interest(f.encode())
    };
    for _ in 0..window {
        let i = next(&mut seq);
        face.send(i, LinkFields::default()).await;
    }
    while let Some((p, _)) = face.recv().await {
        if matches!(p, NetPacket::Data(_)) {
            done.fetch_add(1, Ordering::Relaxed);
        }
        let i = next(&mut seq);
        face.send(i, LinkFields::default()).await;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = arg(&args, "--threads", 1);
    let shards: usize = arg(&args, "--shards", 1);
    let flows: usize = arg(&args, "--flows", 4);
    let window: usize = arg(&args, "--window", 64);
    let secs: f64 = arg(&args, "--secs", 3.0);
    let size: usize = arg(&args, "--size", 8192);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let (events, events_rx) = mpsc::channel(8192);
        let limits = FaceLimits::default();
        let cfg = ForwarderConfig {
            cs: CsConfig {
                max_packets: 0,
                ..Default::default()
            },
            shards,
            ..Default::default()
        };
        let ctx = FaceContext {
            events: events.clone(),
            ids: Arc::new(FaceIds::default()),
            limits: limits.clone(),
            udp: None,
        };
        let mut fw = Forwarder::new(cfg, ctx);
        let done = Arc::new(AtomicU64::new(0));
        let content = Bytes::from(vec![0xAB; size]);
        let mut apps = Vec::new();
        for f in 0..flows {
            let prefix = Name::from_uri(&format!("/bench/f{f}")).expect("name");
            let (ch, c) = granary_face::internal::pair(
                1000 + 2 * f as u64,
                "consumer",
                &limits,
                events.clone(),
            );
            let (ph, p) = granary_face::internal::pair(
                1001 + 2 * f as u64,
                "producer",
                &limits,
                events.clone(),
            );
            fw.add_face(ch);
            fw.add_face(ph);
            fw.add_route(prefix.clone(), p.id(), 0);
            apps.push((prefix, c, p));
        }
        let shutdown = Arc::new(Notify::new());
        tokio::spawn(fw.run(events_rx, shutdown.clone()));
        // Let the forwarder install its sink in the faces before traffic.
        tokio::time::sleep(Duration::from_millis(100)).await;
        for (prefix, c, p) in apps {
            tokio::spawn(producer(p, content.clone()));
            tokio::spawn(consumer(c, prefix, window, done.clone()));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (n0, c0, t0) = (done.load(Ordering::Relaxed), cpu_secs(), Instant::now());
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        let (n1, c1, el) = (
            done.load(Ordering::Relaxed),
            cpu_secs(),
            t0.elapsed().as_secs_f64(),
        );
        let n = (n1 - n0).max(1) as f64;
        println!("{:.0}\t{:.2}", n / el, (c1 - c0) * 1e6 / n);
        shutdown.notify_one();
        drop(events);
    });
    // The flows' tasks run forever; leave without waiting for them.
    rt.shutdown_timeout(Duration::from_millis(100));
}
