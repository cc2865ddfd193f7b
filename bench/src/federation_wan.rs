//! The federation on an emulated WAN (granary_measure::federation_wan),
//! driven by bench/federation30.sh: the script owns the PostgreSQL primary
//! and standby and gives their multi-host URL and the commands that stop
//! the primary and promote the standby. Prints the report (Markdown).

use std::path::PathBuf;
use std::process::Command;

use clap::Parser;
use granary_measure::federation_wan::{run, Failover, Opts};

#[derive(Parser)]
struct Args {
    /// The granary binary.
    #[arg(long)]
    granary: PathBuf,
    /// The catalog's multi-host URL.
    #[arg(long)]
    url: String,
    /// Shell command that stops the primary.
    #[arg(long)]
    pg_stop: String,
    /// Shell command that promotes the standby.
    #[arg(long)]
    pg_promote: String,
    /// Work directory (data directories, inputs).
    #[arg(long)]
    work: PathBuf,
    #[arg(long, default_value_t = 3)]
    regions: usize,
    #[arg(long, default_value_t = 10)]
    sites_per_region: usize,
    #[arg(long, default_value_t = 10)]
    publishers: usize,
    #[arg(long, default_value_t = 20)]
    consumers: usize,
    #[arg(long, default_value_t = 4)]
    files_per_publisher: usize,
    /// File sizes in KiB, used in turn.
    #[arg(long, value_delimiter = ',', default_value = "1024,2048,4096")]
    file_kib: Vec<u64>,
    #[arg(long, default_value_t = 2)]
    replicas: u32,
    #[arg(long, default_value_t = 120)]
    consume_secs: u64,
    #[arg(long, default_value_t = 500)]
    think_ms: u64,
    #[arg(long, default_value_t = 1.0)]
    zipf: f64,
    #[arg(long, default_value_t = 10)]
    node_timeout: u64,
    /// Round trips between regions 0–1, 1–2, 0–2 (ms).
    #[arg(long, value_delimiter = ',', default_value = "20,80,200")]
    wan_rtt_ms: Vec<u64>,
    #[arg(long, default_value_t = 50)]
    wan_mbit: u64,
    #[arg(long, default_value_t = 100)]
    access_mbit: u64,
    #[arg(long, default_value_t = 47)]
    seed: u64,
}

struct Shell {
    stop: String,
    promote: String,
}

fn sh(c: &str) {
    let ok = Command::new("sh")
        .args(["-c", c])
        .status()
        .map(|s| s.success());
    if ok.ok() != Some(true) {
        eprintln!("federation_wan: `{c}` failed");
    }
}

impl Failover for Shell {
    fn stop_primary(&mut self) {
        sh(&self.stop);
    }
    fn promote_standby(&mut self) {
        sh(&self.promote);
    }
}

fn main() {
    let a = Args::parse();
    let rtt = match a.wan_rtt_ms[..] {
        [x, y, z] => [x, y, z],
        _ => panic!("--wan-rtt-ms takes three values"),
    };
    let o = Opts {
        granary: a.granary,
        regions: a.regions,
        sites_per_region: a.sites_per_region,
        publishers: a.publishers,
        consumers: a.consumers,
        files_per_publisher: a.files_per_publisher,
        file_kib: a.file_kib,
        replicas: a.replicas,
        consume_secs: a.consume_secs,
        think_ms: a.think_ms,
        zipf: a.zipf,
        node_timeout: a.node_timeout,
        wan_rtt_ms: rtt,
        wan_mbit: a.wan_mbit,
        access_mbit: a.access_mbit,
        url: a.url,
        work: a.work,
        seed: a.seed,
    };
    let mut pg = Shell {
        stop: a.pg_stop,
        promote: a.pg_promote,
    };
    match run(&o, &mut pg) {
        Ok(r) => {
            println!("{}", r.table());
            let rss: Vec<String> = r.rss_kib.iter().map(|k| format!("{}", k / 1024)).collect();
            println!("\npeak RSS per daemon (MiB, sorted): {}", rss.join(" "));
            if !r.violations.is_empty() {
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("federation_wan: {e:#}");
            std::process::exit(2);
        }
    }
}
