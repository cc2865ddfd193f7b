//! Chunking throughput in memory: FastCDC, Rabin (31-byte window) and, for
//! scale, SHA-256 over the same buffer (what ingest does to every byte).
//! Usage: `cargo run --release -p granary-store --example chunk_speed [MIB] [ROUNDS]`.
//! Prints one line per scheme: GB/s (best of ROUNDS), chunks, mean chunk.

use std::time::Instant;

use granary_store::Chunking;
use sha2::{Digest, Sha256};

fn main() {
    let mut args = std::env::args().skip(1);
    let mib: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(256);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    // Pseudo-random content (seeded), so boundaries fall as in real data.
    let data = granary_store::chunking::noise(mib << 20, 0x9E37_79B9_7F4A_7C15);
    let gbs = |secs: f64| data.len() as f64 / secs / 1e9;
    for c in [Chunking::fastcdc(), Chunking::rabin()] {
        let k = c.cutter();
        let (mut best, mut n) = (f64::MAX, 0usize);
        for _ in 0..rounds {
            let t = Instant::now();
            n = k.chunks(&data).len();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{:<24} {:>7.3} GB/s  {:>9} chunks  mean {:>6.0} B",
            c.to_string(),
            gbs(best),
            n,
            data.len() as f64 / n as f64
        );
    }
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        let h = Sha256::digest(&data);
        std::hint::black_box(h);
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!("{:<24} {:>7.3} GB/s", "sha256", gbs(best));
}
