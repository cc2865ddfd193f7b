//! `granary-faults`: runs the fault-injection suite once and prints what it
//! did and found (bench/faults.sh runs it at full size). Exit 1 on any
//! invariant violation.

use std::path::PathBuf;

use clap::Parser;

/// Run a concurrent workload against a real granary daemon while injecting
/// faults, then check the invariants over the recorded history.
#[derive(Parser)]
#[command(name = "granary-faults")]
struct Args {
    /// The granary binary (default: target/release/granary).
    #[arg(long, default_value = "target/release/granary")]
    bin: PathBuf,
    /// Seed (default: from the clock; printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// Operations to run (at least).
    #[arg(long, default_value_t = 2000)]
    ops: usize,
    /// Faults to inject (at least).
    #[arg(long, default_value_t = 40)]
    faults: usize,
    /// Concurrent client threads.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Catalog on a throw-away PostgreSQL cluster, restarted as a fault.
    #[arg(long)]
    pg: bool,
    /// Node on a loop-mounted ext4 that the disk-full fault fills (root).
    #[arg(long)]
    disk: bool,
    /// Bound on the workload phase, in seconds.
    #[arg(long, default_value_t = 1800)]
    max_seconds: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

fn main() {
    let a = Args::parse();
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    eprintln!("granary-faults: seed {seed} (replay with --seed {seed})");
    let cfg = granary_faults::Config {
        bin: a.bin,
        seed,
        ops: a.ops,
        faults: a.faults,
        workers: a.workers,
        pg: a.pg,
        disk: a.disk,
        max_seconds: a.max_seconds,
    };
    match granary_faults::run(&cfg) {
        Ok(r) => {
            if a.json {
                println!("{}", r.to_json());
            } else {
                println!(
                    "seed {}: {} operations, {} faults, {} violations; workload {:.1} s, recovery and check {:.1} s ({} versions verified)",
                    r.seed,
                    r.total_ops(),
                    r.total_faults(),
                    r.violations.len(),
                    r.workload_seconds,
                    r.check_seconds,
                    r.versions_checked
                );
                for (k, c) in &r.ops {
                    println!(
                        "  {k:<12} acked {:>6}  failed {:>5}  unknown {:>4}",
                        c[0], c[1], c[2]
                    );
                }
                for (k, n) in &r.faults {
                    println!("  fault {k:<12} {n}");
                }
                for (k, fs) in &r.failures {
                    for f in fs {
                        println!("  e.g. {k} failed: {}", f.trim_end());
                    }
                }
                for v in &r.violations {
                    println!("VIOLATION {v}");
                }
            }
            if !r.violations.is_empty() {
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("granary-faults: {e}");
            std::process::exit(2);
        }
    }
}
