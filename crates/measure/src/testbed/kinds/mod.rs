//! The procedures behind each experiment `kind` (one module each), and the report they write.

mod caching;
mod carepo;
mod pipeline;
mod vip;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use granary_packet::{DataBuilder, InterestFields, Name};

use super::experiment::{link_spec, parse_bytes, ConsumerCfg, Experiment, PublishCfg};
use super::net::Net;
use crate::plot::{Plot, Series};

/// A results table: header and rows, written as CSV and Markdown.
pub struct Table {
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[&'static str]) -> Table {
        Table {
            header: header.to_vec(),
            rows: vec![],
        }
    }
    fn push(&mut self, row: Vec<String>) {
        eprintln!("  {}", row.join(", "));
        self.rows.push(row);
    }
    fn csv(&self) -> String {
        let mut s = self.header.join(",") + "\n";
        for r in &self.rows {
            s += &(r.join(",") + "\n");
        }
        s
    }
    fn markdown(&self) -> String {
        let mut s = format!("| {} |\n", self.header.join(" | "));
        s += &format!("|{}\n", "---|".repeat(self.header.len()));
        for r in &self.rows {
            s += &format!("| {} |\n", r.join(" | "));
        }
        s
    }
    fn col(&self, name: &str) -> usize {
        self.header.iter().position(|h| *h == name).unwrap_or(0)
    }
    fn f(&self, row: &[String], name: &str) -> f64 {
        row[self.col(name)].parse().unwrap_or(f64::NAN)
    }
}

/// What a kind hands to the report.
struct Outcome {
    tables: Vec<(&'static str, Table)>,
    plots: Vec<(&'static str, Plot)>,
    /// Markdown: Granary's figures against the seed's.
    comparison: String,
    /// Markdown: notes on the set-up specific to the kind.
    notes: String,
}

pub fn run(e: &Experiment, out: &Path, work: &Path, tiny: bool) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let o = match e.kind.as_str() {
        "pipeline" => pipeline::pipeline(e, work)?,
        "caching" => caching::caching(e, work)?,
        "carepo" => carepo::carepo(e, work)?,
        "vip" => vip::vip(e, work)?,
        k => anyhow::bail!("unknown kind {k}"),
    };
    for (stem, t) in &o.tables {
        std::fs::write(out.join(format!("{stem}.csv")), t.csv())?;
    }
    for (stem, p) in &o.plots {
        p.write(out, stem)?;
    }
    std::fs::write(
        out.join("report.md"),
        report(e, &o, tiny, t0.elapsed().as_secs_f64()),
    )?;
    Ok(())
}

fn machine() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{cores} cores, load average {} (1/5/15 min) at the end",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

fn report(e: &Experiment, o: &Outcome, tiny: bool, secs: f64) -> String {
    let mut s = format!("# {}\n\n", e.title);
    if !e.description.is_empty() {
        s += &format!("{}\n\n", e.description.trim());
    }
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    s += &format!(
        "Reproduce: `sudo granary testbed run experiments/{}.toml --out DIR{}` \
         (commit {commit}; {:.0} s on this machine: {}; emulation: {}).\n\n",
        e.name,
        if tiny { " --tiny" } else { "" },
        secs,
        machine(),
        if granary_testbed::netem_available() {
            "tc netem"
        } else {
            "user-space relays (`granary linkem`; the kernel has no sch_netem)"
        }
    );
    if tiny {
        s += "**Tiny scale** (`--tiny`): a smoke run; the figures mean little.\n\n";
    }
    s += "## Set-up\n\n| node | daemon flags |\n|---|---|\n";
    for n in &e.node {
        s += &format!("| {} | {} |\n", n.name, n.args.join(" "));
    }
    s += "\n| link | rate | one-way delay | loss |\n|---|---|---|---|\n";
    for l in &e.link {
        let spec = link_spec(l).unwrap_or_default();
        let show = |i: &granary_testbed::Impairment| {
            (
                i.rate_bps.map_or("unlimited".to_string(), |r| {
                    format!("{} Mbit/s", r as f64 / 1e6)
                }),
                format!("{:?}", i.delay),
                format!("{}%", i.loss * 100.0),
            )
        };
        let (ra, da, la) = show(&spec.ab);
        let (rb, db, lb) = show(&spec.ba);
        if (&ra, &da, &la) == (&rb, &db, &lb) {
            s += &format!("| {} — {} | {ra} | {da} | {la} |\n", l.a, l.b);
        } else {
            s += &format!(
                "| {} → {} | {ra} | {da} | {la} |\n| {} → {} | {rb} | {db} | {lb} |\n",
                l.a, l.b, l.b, l.a
            );
        }
    }
    for lan in &e.lan {
        s += &format!("| LAN {} | unlimited | 0 | 0% |\n", lan.join(", "));
    }
    s += "\n";
    for p in &e.publish {
        s += &format!(
            "- {} publishes {}{}{}\n",
            p.node,
            p.prefix,
            p.size.as_ref().map_or(String::new(), |x| format!(" ({x})")),
            p.objects.map_or(String::new(), |x| format!(
                " ({x} objects of {} bytes, on demand)",
                p.payload.unwrap_or(0)
            ))
        );
    }
    for c in &e.consumer {
        s += &format!(
            "- consumer on {} fetches {}{}{}\n",
            c.node,
            c.fetch,
            c.start
                .as_ref()
                .map_or(String::new(), |x| format!(", start {x}")),
            c.rate.map_or(String::new(), |r| format!(
                ", {r} requests/s for {} s, Zipf α {}",
                c.duration.unwrap_or(0.0),
                c.alpha.unwrap_or(0.0)
            ))
        );
    }
    if !e.sweep.is_empty() {
        s += &format!("- sweep: {}\n", e.sweep.to_string().replace('\n', "; "));
    }
    if !e.baseline.is_empty() {
        s += &format!(
            "- compared: {}\n",
            e.baseline
                .iter()
                .map(|b| b.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !o.notes.is_empty() {
        s += &format!("\n{}\n", o.notes.trim());
    }
    s += "\n## Results\n\n";
    for (stem, t) in &o.tables {
        s += &format!("`{stem}.csv`:\n\n{}\n", t.markdown());
    }
    for (stem, p) in &o.plots {
        s += &format!("![{}]({stem}.png)\n\n({stem}.svg)\n\n", p.title);
    }
    s += &format!(
        "## The seed's figure\n\n{} — {}\n\n{}\n\n## Granary against the seed\n\n{}\n",
        e.seed.paper,
        e.seed.figure,
        e.seed.text.trim(),
        o.comparison.trim()
    );
    s
}

fn param<'a>(e: &'a Experiment, k: &str) -> Option<&'a toml::Value> {
    e.params.get(k)
}

fn param_str(e: &Experiment, k: &str, d: &str) -> String {
    param(e, k)
        .and_then(|v| v.as_str())
        .unwrap_or(d)
        .to_string()
}

fn param_int(e: &Experiment, k: &str, d: i64) -> i64 {
    param(e, k).and_then(|v| v.as_integer()).unwrap_or(d)
}

fn sweep_ints(e: &Experiment, k: &str, d: &[i64]) -> anyhow::Result<Vec<i64>> {
    match e.sweep.get(k) {
        None => Ok(d.to_vec()),
        Some(toml::Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_integer()
                    .ok_or_else(|| anyhow::anyhow!("sweep.{k}: integers expected"))
            })
            .collect(),
        Some(_) => anyhow::bail!("sweep.{k}: a list expected"),
    }
}

fn size(s: &str) -> anyhow::Result<u64> {
    parse_bytes(s).map_err(|e| anyhow::anyhow!("{e}"))
}

/// `granary get` run from the root namespace against `node`; (seconds of
/// the transfer as `get` reports it, its JSON).
fn get(
    net: &Net,
    node: &str,
    name: &str,
    dest: &Path,
    extra: &[&str],
) -> anyhow::Result<(f64, serde_json::Value)> {
    let mut args = vec![
        "get",
        name,
        "-o",
        dest.to_str().context("path")?,
        "--json",
        "-q",
        "--no-dedup",
        "--no-publish",
        // The experiments publish with `--sign digest` (no key trust to set
        // up between namespaces): integrity only, which they measure.
        "--integrity-only",
    ];
    args.extend_from_slice(extra);
    let t = Instant::now();
    let o = net.cmd(node, &args).output()?;
    let wall = t.elapsed().as_secs_f64();
    if !o.status.success() {
        anyhow::bail!(
            "granary get {name} on {node}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    let so = String::from_utf8_lossy(&o.stdout);
    let v = so
        .lines()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .unwrap_or_default();
    let secs = v["stats"]["seconds"].as_f64().unwrap_or(wall);
    Ok((secs, v))
}

fn the_publisher(e: &Experiment) -> anyhow::Result<&PublishCfg> {
    e.publish
        .first()
        .ok_or_else(|| anyhow::anyhow!("this experiment needs a [[publish]]"))
}

fn the_consumer(e: &Experiment) -> anyhow::Result<&ConsumerCfg> {
    e.consumer
        .first()
        .ok_or_else(|| anyhow::anyhow!("this experiment needs a [[consumer]]"))
}
