//! Goodput of `granary get` over an emulated WAN (driven by
//! bench/netns-goodput.sh): consumer — router — producer in network
//! namespaces, the consumer—router link impaired (rate, delay, loss), the
//! producer's repository serving one random file per segment size. For each
//! segment size and each pipeline (fixed N, aimd, cubic) it fetches the file
//! (Content Stores off, so nothing is served from a cache) and prints one CSV
//! line: the shape of seed 004's Fig. 4/5 (goodput against pipeline size and
//! packet size). Optionally NDNts's fetch (@ndn/segmented-object) runs on the
//! same path for a side-by-side figure.

#[allow(dead_code)] // each benchmark uses part of it
mod netns_node;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use clap::Parser;
use granary_store::chunking::write_noise;
use granary_testbed::{relay, LinkSpec, Options, Testbed};
use netns_node::{cli, run_sampled, start_node, vm_hwm_kib, Sampled};

#[derive(Parser)]
struct Args {
    /// The granary binary.
    #[arg(long)]
    granary: PathBuf,
    /// Link rate.
    #[arg(long, default_value = "100mbit", value_parser = relay::parse_rate)]
    rate: u64,
    /// One-way delay (RTT is twice this).
    #[arg(long, default_value = "10ms", value_parser = relay::parse_duration)]
    delay: Duration,
    /// Loss per datagram, each direction.
    #[arg(long, default_value = "0.5%", value_parser = relay::parse_loss)]
    loss: f64,
    /// File size in MiB for adaptive pipelines and windows ≥ 16.
    #[arg(long, default_value_t = 64)]
    file_mib: u64,
    /// File size in MiB for windows < 16 (they are slow).
    #[arg(long, default_value_t = 4)]
    small_mib: u64,
    /// Segment sizes (bytes), comma-separated; 0 is `put`'s default chunking.
    #[arg(
        long,
        default_value = "1024,2048,4096,8192,16384,32768",
        value_delimiter = ','
    )]
    sizes: Vec<u32>,
    /// Pipelines: fixed:N, aimd, cubic, or `default` (comma-separated).
    /// `default` is `granary get` with no flags at all (dedup on, the
    /// engine's default window), each run on a freshly written and published
    /// file so that nothing comes from a copy fetched before.
    #[arg(
        long,
        default_value = "fixed:1,fixed:4,fixed:16,fixed:64,aimd,cubic",
        value_delimiter = ','
    )]
    pipelines: Vec<String>,
    /// UDP MTU of the faces.
    #[arg(long, default_value_t = 1400)]
    udp_mtu: usize,
    /// Device MTU of the links (e.g. 9000: jumbo frames).
    #[arg(long)]
    link_mtu: Option<u32>,
    /// Extra `granary daemon` flags for all three nodes (one string, split
    /// on spaces), e.g. `--udp-reliability`.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    daemon_args: String,
    /// Extra `granary get` flags (one string, split on spaces).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    get_args: String,
    /// Also fetch with NDNts (node + tests/interop/ndnts) at these sizes
    /// (≤ 8192; NDNts keeps the 8800-byte packet limit).
    #[arg(long)]
    ndnts: Option<PathBuf>,
    /// CSV output (also printed).
    #[arg(long)]
    csv: Option<PathBuf>,
}

fn main() {
    let a = Args::parse();
    let g = a.granary.clone();
    let mut out = String::from(
        "tool,segment_size,pipeline,window,file_bytes,goodput_mbps,link_share,seconds,retransmissions,timeouts,max_cwnd,rtt_avg_ms,get_peak_rss_kib\n",
    );
    print!("{out}");
    let mut tb = Testbed::new(Options::new(&g)).expect("testbed");
    eprintln!(
        "emulation {:?}: {} Mbit/s, {:?} one-way, {}% loss per datagram each way, UDP MTU {}",
        tb.emulation(),
        a.rate / 1_000_000,
        a.delay,
        a.loss * 100.0,
        a.udp_mtu
    );
    let c = tb.add_host("consumer").unwrap();
    let r = tb.add_host("router").unwrap();
    let p = tb.add_host("producer").unwrap();
    let mut spec = LinkSpec::symmetric(Some(a.rate), a.delay, a.loss);
    spec.mtu = a.link_mtu;
    let wan = tb.link(c, r, spec).unwrap();
    let mut clean = LinkSpec::clean();
    clean.mtu = a.link_mtu;
    let lan = tb.link(r, p, clean).unwrap();
    let max_seg = a.sizes.iter().copied().max().unwrap_or(8192);
    let mut extra = vec![
        "--cs-capacity".to_string(),
        "0".to_string(),
        "--udp-mtu".to_string(),
        a.udp_mtu.to_string(),
        "--max-packet".to_string(),
        (max_seg as usize + 2048).max(8800).to_string(),
    ];
    extra.extend(a.daemon_args.split_whitespace().map(String::from));
    let consumer = start_node(&mut tb, c, &g, "netns", &extra);
    let router = start_node(&mut tb, r, &g, "netns", &extra);
    let producer = start_node(&mut tb, p, &g, "netns", &extra);
    let to_router = tb.udp_path(wan, c, 6363).unwrap();
    let to_producer = tb.link_addr(lan, p).unwrap();
    cli(
        &g,
        &consumer,
        &["route", "add", "/bench", &format!("udp4://{to_router}")],
    );
    cli(
        &g,
        &router,
        &[
            "route",
            "add",
            "/bench",
            &format!("udp4://{to_producer}:6363"),
        ],
    );
    cli(
        &g,
        &producer,
        &["key", "gen", "/bench/producer", "--type", "ed25519"],
    );
    let cert = cli(&g, &producer, &["key", "export", "/bench/producer"]);
    let cert_path = producer.dir.join("producer.ndncert");
    std::fs::write(&cert_path, cert).unwrap();
    cli(
        &g,
        &consumer,
        &["key", "trust", cert_path.to_str().unwrap()],
    );

    let big = producer.dir.join("big.bin");
    let small = producer.dir.join("small.bin");
    write_noise(&big, a.file_mib << 20, 1).unwrap();
    write_noise(&small, a.small_mib << 20, 2).unwrap();
    let get_extra: Vec<&str> = a.get_args.split_whitespace().collect();
    let mut fresh_seed = 100;
    for &size in &a.sizes {
        for (file, tag) in [(&big, "big"), (&small, "small")] {
            if size == 0 {
                // The default chunking: published per `default` run below.
                break;
            }
            let seg = size.to_string();
            cli(
                &g,
                &producer,
                &[
                    "put",
                    file.to_str().unwrap(),
                    &format!("/bench/{tag}/{size}"),
                    "--segment-size",
                    &seg,
                ],
            );
            if a.ndnts.is_some() && size <= 8192 {
                cli(
                    &g,
                    &producer,
                    &[
                        "put",
                        file.to_str().unwrap(),
                        &format!("/bench/{tag}d/{size}"),
                        "--segment-size",
                        &seg,
                        "--sign",
                        "digest",
                    ],
                );
            }
        }
        for pl in &a.pipelines {
            let (kind, window) = match pl.split_once(':') {
                Some(("fixed", w)) => ("fixed", w.parse::<u32>().expect("fixed:N")),
                _ => (pl.as_str(), 0),
            };
            let small_run = kind == "fixed" && window < 16;
            let (tag, file) = if small_run {
                ("small", &small)
            } else {
                ("big", &big)
            };
            let mut name = format!("/bench/{tag}/{size}");
            let fresh = producer.dir.join("fresh.bin");
            let defaults = kind == "default";
            if defaults || size == 0 {
                // New bytes under a new name, published as the user would
                // (`put` with its default chunking unless a size is given).
                fresh_seed += 1;
                write_noise(&fresh, a.file_mib << 20, fresh_seed).unwrap();
                name = format!("/bench/fresh/{fresh_seed}");
                let mut put = vec!["put", fresh.to_str().unwrap(), &name];
                let seg = size.to_string();
                if size != 0 {
                    put.extend(["--segment-size", &seg]);
                }
                cli(&g, &producer, &put);
            }
            let file = if defaults || size == 0 { &fresh } else { file };
            let dest = consumer.dir.join("out.bin");
            let mut cmd = Command::new(&g);
            cmd.args([
                "--data-dir",
                consumer.dir.to_str().unwrap(),
                "--socket",
                consumer.socket.to_str().unwrap(),
            ])
            .args(["get", &name, "-o", dest.to_str().unwrap(), "--json"]);
            if !defaults {
                cmd.args(["--no-dedup", "--pipeline-type", kind]);
            }
            if kind == "fixed" {
                cmd.args(["--pipeline-size", &window.to_string()]);
            }
            cmd.args(&get_extra);
            let Sampled {
                stdout: so,
                stderr: se,
                peak_kib: peak,
                secs: wall,
                ..
            } = run_sampled(cmd);
            let json = so
                .lines()
                .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .unwrap_or_else(|| panic!("no JSON from get:\n{so}\n{se}"));
            let st = &json["stats"];
            let bytes = st["bytes"].as_f64().unwrap_or(0.0);
            // A `default` run is timed as the user sees it: the whole process
            // (manifest, dedup lookup, fetch, verification).
            let secs = if defaults {
                wall
            } else {
                st["seconds"].as_f64().unwrap_or(f64::NAN)
            };
            let same = std::fs::metadata(&dest).map(|m| m.len()).unwrap_or(0)
                == std::fs::metadata(file).unwrap().len();
            assert!(same, "{name}: output has the wrong size:\n{se}");
            let mbps = bytes * 8.0 / secs / 1e6;
            let line = format!(
                "granary,{size},{kind},{window},{},{mbps:.2},{:.3},{secs:.2},{},{},{},{:.1},{peak}\n",
                bytes as u64,
                mbps * 1e6 / a.rate as f64,
                st["retransmissions"],
                st["timeouts"],
                st["max_cwnd"],
                st["rtt_avg_ms"].as_f64().unwrap_or(0.0),
            );
            print!("{line}");
            out.push_str(&line);
            let _ = std::fs::remove_file(&dest);
            let _ = std::fs::remove_file(&fresh);
        }
        if let (Some(dir), true) = (&a.ndnts, size <= 8192 && size > 0) {
            let name = format!("/bench/bigd/{size}");
            let dest = consumer.dir.join("out-ndnts.bin");
            let mut cmd = Command::new("node");
            cmd.arg(dir.join("fetch.mjs")).args([
                consumer.socket.to_str().unwrap(),
                &name,
                dest.to_str().unwrap(),
                "--timeout",
                "3000",
            ]);
            let Sampled {
                stdout: so,
                stderr: se,
                peak_kib: peak,
                secs: wall,
                ..
            } = run_sampled(cmd);
            let v: serde_json::Value =
                serde_json::from_str(so.lines().last().unwrap_or("{}")).unwrap_or_default();
            let bytes = v["bytes"].as_f64().unwrap_or(0.0);
            assert!(
                v["error"].is_null() && bytes > 0.0,
                "NDNts fetch failed: {so}\n{se}"
            );
            let mbps = bytes * 8.0 / wall / 1e6;
            let line = format!(
                "ndnts,{size},ndnts-default,0,{},{mbps:.2},{:.3},{wall:.2},,,,,{peak}\n",
                bytes as u64,
                mbps * 1e6 / a.rate as f64
            );
            print!("{line}");
            out.push_str(&line);
            let _ = std::fs::remove_file(&dest);
        }
    }
    eprintln!(
        "peak RSS: consumer daemon {} KiB, router {} KiB, producer {} KiB",
        vm_hwm_kib(consumer.pid),
        vm_hwm_kib(router.pid),
        vm_hwm_kib(producer.pid)
    );
    for h in [c, r, p] {
        eprintln!(
            "kernel UDP drops in {} (InErrors, RcvbufErrors, SndbufErrors): {:?}",
            tb.host_name(h),
            tb.udp_kernel_drops(h).unwrap()
        );
    }
    if let Some(p) = &a.csv {
        std::fs::write(p, out).unwrap();
    }
    drop(tb);
    for n in [consumer, router, producer] {
        let _ = std::fs::remove_dir_all(&n.dir);
    }
}
