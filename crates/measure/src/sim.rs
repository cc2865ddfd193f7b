//! The cache simulator behind `granary sim cache`: the cache-policy study (issue 18, item 2).
//!
//! Drives the forwarder's own Content Store (`granary_forwarder::cs`) with a
//! request stream: every request is an Interest looked up with
//! `ContentStore::find`; a miss fetches the Data "from the origin" and
//! inserts it with `ContentStore::insert`, exactly what the forwarder does.
//! Nothing of the store is re-implemented here.
//!
//! Requests are independent-reference (IRM) Zipf draws over a catalog of
//! `--objects` objects (popularity of rank i ∝ 1/i^α), or the lines of a
//! trace file. With `--chunks C > 1` each consumer fetches a drawn object's
//! C chunks in order and the consumers are interleaved one chunk at a time
//! (the climate seed's Fig. 7 set-up: consumers fetching whole files through
//! one gateway cache). Every list option is swept (cartesian product).
//!
//! Hit ratios are counted after a warm-up (the first `--warmup` fraction of
//! requests), so they estimate the steady state that Che's approximation
//! predicts for LRU.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use bytes::Bytes;
use granary_forwarder::cs::{ContentStore, CsConfig, Policy};
use granary_forwarder::vip::{encode_beacon, TickInput, Vip, VipConfig};
use granary_packet::{Component, Data, DataBuilder, Interest, InterestFields, Name};

/// What `granary sim cache` sweeps: every list is swept (cartesian product).
#[derive(Debug, Clone)]
pub struct CacheParams {
    /// Replacement policies.
    pub policy: Vec<Policy>,
    /// Zipf skews α.
    pub alpha: Vec<f64>,
    /// Catalog sizes (objects).
    pub objects: Vec<usize>,
    /// Chunks per object (1: pure IRM over objects).
    pub chunks: usize,
    /// Cache sizes, in packets.
    pub cache: Vec<usize>,
    /// Requests issued by each consumer.
    pub requests: u64,
    /// Numbers of consumers.
    pub consumers: Vec<usize>,
    /// Fraction of the requests run before hits are counted.
    pub warmup: f64,
    /// A trace to replay (one name per line) instead of Zipf requests.
    pub trace: Option<PathBuf>,
    /// Seed of the request generator and of the Random policy.
    pub seed: u64,
    /// Parameter on the plot's x axis (None: the swept one with the most values).
    pub x: Option<Axis>,
    /// Output directory (CSV, SVG, PNG); None: the CSV on standard output.
    pub out: Option<PathBuf>,
}

/// A swept parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Cache,
    Alpha,
    Objects,
    Consumers,
}

impl Axis {
    fn label(self) -> &'static str {
        match self {
            Axis::Cache => "cache size (packets)",
            Axis::Alpha => "Zipf alpha",
            Axis::Objects => "catalog size (objects)",
            Axis::Consumers => "consumers",
        }
    }
}

/// One simulated configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub policy: Policy,
    pub alpha: f64,
    pub objects: usize,
    pub chunks: usize,
    pub consumers: usize,
    pub cache: usize,
}

/// What one run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// Requests counted (after the warm-up).
    pub requests: u64,
    pub hits: u64,
    /// All requests simulated, warm-up included, per second of wall time.
    pub req_per_s: f64,
}

impl Outcome {
    pub fn hit_ratio(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.hits as f64 / self.requests as f64
        }
    }
}

/// Zipf popularities p_1..p_n (sum 1).
pub fn zipf_pmf(n: usize, alpha: f64) -> Vec<f64> {
    let w: Vec<f64> = (1..=n).map(|i| (i as f64).powf(-alpha)).collect();
    let total: f64 = w.iter().sum();
    w.into_iter().map(|x| x / total).collect()
}

/// Sampler by inversion of the cumulative distribution (binary search).
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The sampler of `n` ranks with skew `alpha`.
    pub fn new(n: usize, alpha: f64) -> Self {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = zipf_pmf(n, alpha)
            .into_iter()
            .map(|p| {
                acc += p;
                acc
            })
            .collect();
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        Zipf { cdf }
    }

    /// One rank, 0-based (0 is the most popular).
    pub fn sample(&self, rng: &mut fastrand::Rng) -> usize {
        let u = rng.f64();
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }
}

/// Che's approximation of the LRU hit ratio under IRM: the characteristic
/// time T solves Σ (1 − e^(−p_i T)) = C, and the hit ratio is
/// Σ p_i (1 − e^(−p_i T)).
pub fn che_lru_hit_ratio(pmf: &[f64], cache: usize) -> f64 {
    if cache == 0 {
        return 0.0;
    }
    if cache >= pmf.len() {
        return 1.0;
    }
    let occupancy = |t: f64| pmf.iter().map(|p| 1.0 - (-p * t).exp()).sum::<f64>();
    let c = cache as f64;
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while occupancy(hi) < c {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if occupancy(mid) < c {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let t = 0.5 * (lo + hi);
    pmf.iter().map(|p| p * (1.0 - (-p * t).exp())).sum()
}

/// The packets of a catalog, built on first use and kept (each item's Data
/// and Interest are made once).
struct Catalog {
    names: Vec<Name>,
    data: Vec<Option<Data>>,
    interests: Vec<Option<Interest>>,
}

impl Catalog {
    fn new(names: Vec<Name>) -> Self {
        let n = names.len();
        Catalog {
            names,
            data: vec![None; n],
            interests: vec![None; n],
        }
    }

    fn synthetic(items: usize) -> Self {
        let base = Name::from_uri("/sim").expect("static name");
        Catalog::new(
            (0..items)
                .map(|i| base.append(&Component::segment(i as u64)))
                .collect(),
        )
    }

    fn interest(&mut self, i: usize) -> &Interest {
        let names = &self.names;
        self.interests[i].get_or_insert_with(|| {
            InterestFields {
                name: names[i].clone(),
                ..Default::default()
            }
            .encode()
        })
    }

    fn data(&mut self, i: usize) -> Data {
        let names = &self.names;
        self.data[i]
            .get_or_insert_with(|| {
                DataBuilder::new(names[i].clone())
                    .freshness_period(3_600_000)
                    .encode_with_signature(Bytes::from_static(&[0; 32]))
            })
            .clone()
    }
}

/// Requests per VIP period in the simulation (the forwarder's period is
/// 100 ms; here time is counted in requests).
const VIP_PERIOD: u64 = 100;

/// Largest catalog simulated (objects × chunks, or distinct trace names).
pub const MAX_ITEMS: usize = 1 << 24;

/// Feeds `next()` request indices through a Content Store of `cache` packets
/// under `policy`. Returns the counts after the warm-up.
fn drive(
    catalog: &mut Catalog,
    policy: Policy,
    cache: usize,
    seed: u64,
    total: u64,
    warmup: u64,
    mut next: impl FnMut() -> usize,
) -> Outcome {
    let cfg = CsConfig {
        max_packets: cache,
        max_bytes: usize::MAX,
        policy,
        admit: true,
        serve: true,
    };
    let mut cs = ContentStore::new(cfg, seed);
    let now = Instant::now();
    let started = Instant::now();
    let (mut h0, mut m0) = (0, 0);
    // VIP: the forwarder's own VIP state, fed by the requests, with the
    // source as the one upstream neighbour (count 0); a period every
    // VIP_PERIOD requests.
    let mut vip = (policy == Policy::Vip).then(|| {
        let mut v = Vip::new(VipConfig::default());
        let _ = v.on_beacon(1, &encode_beacon(&[], &[]), now);
        v
    });
    let upstream = |_: &Name, out: &mut Vec<u64>| out.push(1);
    let not_source = |_: &Name| false;
    for k in 0..total {
        if k == warmup {
            (h0, m0) = (cs.hits(), cs.misses());
        }
        let i = next();
        if let Some(v) = vip.as_mut() {
            v.on_request(&catalog.names[i]);
            if k % VIP_PERIOD == VIP_PERIOD - 1 {
                let _ = v.on_beacon(1, &encode_beacon(&[], &[]), now);
                v.tick(
                    now,
                    &TickInput {
                        neighbours: &[1],
                        upstreams: &upstream,
                        is_source: &not_source,
                        cache_slots: cache,
                    },
                );
                for o in v.take_evicted() {
                    cs.erase_prefix(&o, usize::MAX);
                }
                v.retain_held(|k| cs.holds_prefix(k));
            }
        }
        if cs.find(catalog.interest(i), now).is_none()
            && vip.as_mut().is_none_or(|v| {
                let (admit, victim) = v.admit(&catalog.names[i], cache, false);
                if let Some(o) = victim {
                    cs.erase_prefix(&o, usize::MAX);
                }
                admit
            })
        {
            let d = catalog.data(i);
            cs.insert(&d, now);
        }
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    if warmup >= total {
        (h0, m0) = (cs.hits(), cs.misses());
    }
    let hits = cs.hits() - h0;
    Outcome {
        requests: hits + (cs.misses() - m0),
        hits,
        req_per_s: total as f64 / secs,
    }
}

/// Runs one Zipf configuration.
#[cfg(test)]
pub fn simulate(p: &Point, requests_per_consumer: u64, warmup: f64, seed: u64) -> Outcome {
    let items = p.objects * p.chunks.max(1);
    let mut catalog = Catalog::synthetic(items);
    simulate_with(&mut catalog, p, requests_per_consumer, warmup, seed)
}

fn simulate_with(
    catalog: &mut Catalog,
    p: &Point,
    requests_per_consumer: u64,
    warmup: f64,
    seed: u64,
) -> Outcome {
    let zipf = Zipf::new(p.objects, p.alpha);
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed_cafe);
    let consumers = p.consumers.max(1);
    let chunks = p.chunks.max(1);
    let total = requests_per_consumer.saturating_mul(consumers as u64);
    let warm = (total as f64 * warmup.clamp(0.0, 1.0)) as u64;
    // Per consumer: (object, next chunk); chunk == chunks means "draw anew".
    let mut state = vec![(0usize, chunks); consumers];
    let mut turn = 0usize;
    drive(catalog, p.policy, p.cache, seed, total, warm, || {
        let s = &mut state[turn];
        turn = (turn + 1) % consumers;
        if s.1 >= chunks {
            *s = (zipf.sample(&mut rng), 0);
        }
        let i = s.0 * chunks + s.1;
        s.1 += 1;
        i
    })
}

/// Reads a trace: one name per line (blank lines and `#` comments skipped).
/// Returns the distinct names and the request sequence as indices.
fn read_trace(path: &Path) -> anyhow::Result<(Vec<Name>, Vec<usize>)> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut names = Vec::new();
    let mut seq = Vec::new();
    for (n, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let id = match ids.get(t) {
            Some(&id) => id,
            None => {
                let name = Name::from_uri(t).map_err(|e| {
                    anyhow::anyhow!("{}:{}: bad name {t:?}: {e}", path.display(), n + 1)
                })?;
                if names.len() >= MAX_ITEMS {
                    bail!("{}: more than {MAX_ITEMS} distinct names", path.display());
                }
                ids.insert(t.to_string(), names.len());
                names.push(name);
                names.len() - 1
            }
        };
        seq.push(id);
    }
    if seq.is_empty() {
        bail!(
            "{}: no requests (expected one name per line)",
            path.display()
        );
    }
    Ok((names, seq))
}

/// One CSV row.
struct Row {
    point: Point,
    outcome: Outcome,
    che: Option<f64>,
}

const CSV_HEADER: &str =
    "policy,alpha,objects,chunks,consumers,cache,requests,hits,hit_ratio,che_lru,req_per_s";

fn csv_row(r: &Row) -> String {
    let p = &r.point;
    format!(
        "{},{},{},{},{},{},{},{},{:.6},{},{:.0}",
        p.policy,
        p.alpha,
        p.objects,
        p.chunks,
        p.consumers,
        p.cache,
        r.outcome.requests,
        r.outcome.hits,
        r.outcome.hit_ratio(),
        r.che.map(|c| format!("{c:.6}")).unwrap_or_default(),
        r.outcome.req_per_s
    )
}

fn check_args(a: &CacheParams) -> anyhow::Result<()> {
    if a.policy.is_empty() || a.cache.is_empty() {
        bail!("--policy and --cache need at least one value");
    }
    if !(0.0..1.0).contains(&a.warmup) {
        bail!("--warmup must be a fraction in [0, 1)");
    }
    if a.requests == 0 {
        bail!("--requests must be at least 1");
    }
    if a.trace.is_none() {
        if a.chunks == 0 {
            bail!("--chunks must be at least 1");
        }
        if let Some(a) = a.alpha.iter().find(|a| !a.is_finite() || **a < 0.0) {
            bail!("--alpha {a}: must be a finite number ≥ 0");
        }
        for &o in &a.objects {
            if o == 0 {
                bail!("--objects must be at least 1");
            }
            if o.saturating_mul(a.chunks) > MAX_ITEMS {
                bail!(
                    "--objects {o} × --chunks {}: more than {MAX_ITEMS} items",
                    a.chunks
                );
            }
        }
        if a.consumers.contains(&0) {
            bail!("--consumers must be at least 1");
        }
    }
    Ok(())
}

/// `granary sim cache`: runs the sweep, writes the CSV (and the plots with `out`).
pub fn cache(a: CacheParams) -> anyhow::Result<()> {
    check_args(&a)?;
    let mut rows = Vec::new();
    if let Some(path) = &a.trace {
        let (names, seq) = read_trace(path)?;
        let objects = names.len();
        let mut catalog = Catalog::new(names);
        for &cache in &a.cache {
            for &policy in &a.policy {
                let mut k = 0;
                let warm = (seq.len() as f64 * a.warmup) as u64;
                let outcome = drive(
                    &mut catalog,
                    policy,
                    cache,
                    a.seed,
                    seq.len() as u64,
                    warm,
                    || {
                        let i = seq[k];
                        k += 1;
                        i
                    },
                );
                let point = Point {
                    policy,
                    alpha: f64::NAN,
                    objects,
                    chunks: 1,
                    consumers: 1,
                    cache,
                };
                progress(&point, &outcome);
                rows.push(Row {
                    point,
                    outcome,
                    che: None,
                });
            }
        }
    } else {
        for &alpha in &a.alpha {
            for &objects in &a.objects {
                let pmf = (a.chunks == 1).then(|| zipf_pmf(objects, alpha));
                let mut catalog = Catalog::synthetic(objects * a.chunks);
                for &consumers in &a.consumers {
                    for &cache in &a.cache {
                        let che = pmf.as_ref().map(|p| che_lru_hit_ratio(p, cache));
                        for &policy in &a.policy {
                            let point = Point {
                                policy,
                                alpha,
                                objects,
                                chunks: a.chunks,
                                consumers,
                                cache,
                            };
                            let outcome =
                                simulate_with(&mut catalog, &point, a.requests, a.warmup, a.seed);
                            progress(&point, &outcome);
                            rows.push(Row {
                                point,
                                outcome,
                                che,
                            });
                        }
                    }
                }
            }
        }
    }

    let mut csv = String::from(CSV_HEADER);
    csv.push('\n');
    for r in &rows {
        csv.push_str(&csv_row(r));
        csv.push('\n');
    }
    match &a.out {
        None => std::io::stdout().write_all(csv.as_bytes())?,
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let x = a.x.unwrap_or_else(|| default_axis(&a));
            std::fs::write(dir.join("cache.csv"), &csv)?;
            let svg = plot_svg(&rows, x);
            std::fs::write(dir.join("cache.svg"), &svg)?;
            std::fs::write(dir.join("cache.png"), crate::plot::svg_to_png(&svg)?)?;
            eprintln!(
                "wrote {}, {} and {}",
                dir.join("cache.csv").display(),
                dir.join("cache.svg").display(),
                dir.join("cache.png").display()
            );
        }
    }
    Ok(())
}

fn progress(p: &Point, o: &Outcome) {
    eprintln!(
        "{:<6} alpha={} objects={} consumers={} cache={}: hit ratio {:.4} ({:.2} M requests/s)",
        p.policy,
        p.alpha,
        p.objects,
        p.consumers,
        p.cache,
        o.hit_ratio(),
        o.req_per_s / 1e6
    );
}

fn default_axis(a: &CacheParams) -> Axis {
    if a.trace.is_some() {
        return Axis::Cache;
    }
    [
        (Axis::Cache, a.cache.len()),
        (Axis::Alpha, a.alpha.len()),
        (Axis::Objects, a.objects.len()),
        (Axis::Consumers, a.consumers.len()),
    ]
    .into_iter()
    .max_by_key(|&(axis, n)| (n, axis == Axis::Cache))
    .map_or(Axis::Cache, |(axis, _)| axis)
}

fn axis_value(p: &Point, x: Axis) -> f64 {
    match x {
        Axis::Cache => p.cache as f64,
        Axis::Alpha => p.alpha,
        Axis::Objects => p.objects as f64,
        Axis::Consumers => p.consumers as f64,
    }
}

/// The series label: the policy and every parameter other than `x` that
/// varies across the rows.
fn series_label(p: &Point, x: Axis, rows: &[Row]) -> String {
    let varies = |f: &dyn Fn(&Point) -> f64| {
        rows.iter()
            .any(|r| f(&r.point).to_bits() != f(&rows[0].point).to_bits())
    };
    let mut s = p.policy.to_string();
    if x != Axis::Alpha && varies(&|q| q.alpha) {
        let _ = write!(s, " α={}", p.alpha);
    }
    if x != Axis::Objects && varies(&|q| q.objects as f64) {
        let _ = write!(s, " objects={}", p.objects);
    }
    if x != Axis::Consumers && varies(&|q| q.consumers as f64) {
        let _ = write!(s, " consumers={}", p.consumers);
    }
    if x != Axis::Cache && varies(&|q| q.cache as f64) {
        let _ = write!(s, " cache={}", p.cache);
    }
    s
}

/// A line chart of hit ratio against `x`, one line per series, written as
/// plain SVG (no fonts or rendering libraries involved). A log x scale is
/// used when the values span more than a factor of 20.
fn plot_svg(rows: &[Row], x: Axis) -> String {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in rows {
        let label = series_label(&r.point, x, rows);
        let pt = (axis_value(&r.point, x), r.outcome.hit_ratio());
        match series.iter_mut().find(|(l, _)| *l == label) {
            Some((_, v)) => v.push(pt),
            None => series.push((label, vec![pt])),
        }
    }
    for (_, v) in &mut series {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let xs: Vec<f64> = rows
        .iter()
        .map(|r| axis_value(&r.point, x))
        .filter(|v| v.is_finite())
        .collect();
    let (mut x0, mut x1) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    let log = x0 > 0.0 && x1 / x0 > 20.0;
    let tx = |v: f64| if log { v.log10() } else { v };
    let (lx0, mut lx1) = (tx(x0), tx(x1));
    if lx1 <= lx0 {
        lx1 = lx0 + 1.0;
    }
    let (w, h, ml, mr, mt, mb) = (760.0, 480.0, 70.0, 220.0, 30.0, 60.0);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let px = |v: f64| ml + (tx(v) - lx0) / (lx1 - lx0) * pw;
    let py = |v: f64| mt + (1.0 - v.clamp(0.0, 1.0)) * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    // Axes and grid.
    for k in 0..=5 {
        let v = k as f64 / 5.0;
        let y = py(v);
        let _ = writeln!(
            s,
            r##"<line x1="{ml}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{v:.1}</text>"##,
            ml + pw,
            ml - 6.0,
            y + 4.0
        );
    }
    let mut ticks: Vec<f64> = xs.clone();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    for t in ticks {
        let xp = px(t);
        let _ = writeln!(
            s,
            r##"<line x1="{xp}" y1="{mt}" x2="{xp}" y2="{}" stroke="#eee"/><text x="{xp}" y="{}" text-anchor="middle">{}</text>"##,
            mt + ph,
            mt + ph + 16.0,
            t
        );
    }
    let _ = writeln!(
        s,
        r#"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}{}</text>"#,
        ml + pw / 2.0,
        h - 18.0,
        x.label(),
        if log { " (log scale)" } else { "" }
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">cache hit ratio</text>"#,
        mt + ph / 2.0
    );
    const COLORS: [&str; 8] = [
        "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    ];
    for (k, (label, pts)) in series.iter().enumerate() {
        let c = COLORS[k % COLORS.len()];
        let path: Vec<String> = pts
            .iter()
            .filter(|(a, _)| a.is_finite())
            .map(|&(a, b)| format!("{:.1},{:.1}", px(a), py(b)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for p in &path {
            let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(s, r#"<circle cx="{cx}" cy="{cy}" r="3" fill="{c}"/>"#);
        }
        let ly = mt + 10.0 + 18.0 * k as f64;
        let lx = ml + pw + 12.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            xml_escape(label)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(policy: Policy, alpha: f64, objects: usize, cache: usize) -> Point {
        Point {
            policy,
            alpha,
            objects,
            chunks: 1,
            consumers: 1,
            cache,
        }
    }

    /// The VIP policy (the forwarder's VIP state deciding admission and
    /// eviction) learns popularity under IRM: it beats LRU and is within 2 %
    /// of LFU, the IRM optimum for a single cache.
    #[test]
    fn vip_policy_learns_popularity() {
        for cache in [20, 200] {
            let r = |p| simulate(&point(p, 1.15, 5000, cache), 200_000, 0.2, 3).hit_ratio();
            let (vip, lru, lfu) = (r(Policy::Vip), r(Policy::Lru), r(Policy::Lfu));
            assert!(
                vip > lru + 0.03,
                "cache {cache}: vip {vip:.3}, lru {lru:.3}"
            );
            assert!(
                (vip - lfu).abs() < 0.02,
                "cache {cache}: vip {vip:.3}, lfu {lfu:.3}"
            );
        }
    }

    /// LRU under IRM matches Che's approximation within 2 % (relative)
    /// across a sweep of cache sizes and skews.
    #[test]
    fn lru_matches_che_approximation() {
        let objects = 2000;
        for alpha in [0.8, 1.15] {
            let pmf = zipf_pmf(objects, alpha);
            for cache in [10, 50, 200, 500] {
                let sim = simulate(&point(Policy::Lru, alpha, objects, cache), 400_000, 0.2, 7);
                let che = che_lru_hit_ratio(&pmf, cache);
                let rel = (sim.hit_ratio() - che).abs() / che;
                assert!(
                    rel < 0.02,
                    "alpha {alpha} cache {cache}: simulated {:.4}, Che {che:.4} ({:.2} %)",
                    sim.hit_ratio(),
                    rel * 100.0
                );
            }
        }
    }

    /// The climate seed reports LFU ahead of LRU, FIFO and Random at α = 1.15.
    #[test]
    fn lfu_beats_lru_at_seed_alpha() {
        for cache in [20, 100, 500] {
            let r = |policy| simulate(&point(policy, 1.15, 5000, cache), 200_000, 0.2, 3);
            let lfu = r(Policy::Lfu).hit_ratio();
            let lru = r(Policy::Lru).hit_ratio();
            let fifo = r(Policy::Fifo).hit_ratio();
            let random = r(Policy::Random).hit_ratio();
            assert!(
                lfu > lru + 0.01,
                "cache {cache}: LFU {lfu:.4} vs LRU {lru:.4}"
            );
            assert!(
                lru > fifo && lru > random,
                "cache {cache}: LRU {lru:.4} FIFO {fifo:.4} random {random:.4}"
            );
        }
    }

    #[test]
    fn che_limits() {
        let pmf = zipf_pmf(100, 1.0);
        assert_eq!(che_lru_hit_ratio(&pmf, 0), 0.0);
        assert_eq!(che_lru_hit_ratio(&pmf, 100), 1.0);
        let a = che_lru_hit_ratio(&pmf, 10);
        let b = che_lru_hit_ratio(&pmf, 20);
        assert!(0.0 < a && a < b && b < 1.0);
    }

    #[test]
    fn zipf_sampler_follows_pmf() {
        let z = Zipf::new(50, 1.15);
        let pmf = zipf_pmf(50, 1.15);
        let mut rng = fastrand::Rng::with_seed(9);
        let mut counts = [0u32; 50];
        let n = 200_000;
        for _ in 0..n {
            counts[z.sample(&mut rng)] += 1;
        }
        for i in [0, 1, 5, 49] {
            let f = f64::from(counts[i]) / f64::from(n);
            assert!((f - pmf[i]).abs() < 0.01, "rank {i}: {f} vs {}", pmf[i]);
        }
    }

    /// Chunked objects and more consumers share more: the hit ratio grows
    /// with the number of consumers (the seed's Fig. 7 b).
    #[test]
    fn more_consumers_share_more() {
        let p = |consumers| Point {
            policy: Policy::Lru,
            alpha: 1.15,
            objects: 20,
            chunks: 200,
            consumers,
            cache: 400,
        };
        let few = simulate(&p(2), 20_000, 0.0, 5).hit_ratio();
        let many = simulate(&p(20), 20_000, 0.0, 5).hit_ratio();
        assert!(many > few, "2 consumers {few:.4}, 20 consumers {many:.4}");
    }

    #[test]
    fn trace_replay_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("trace.txt");
        std::fs::write(&t, "# a trace\n/a\n/b\n\n/a\n/a\n").unwrap();
        let (names, seq) = read_trace(&t).unwrap();
        assert_eq!(names.len(), 2);
        assert_eq!(seq, vec![0, 1, 0, 0]);
        let mut catalog = Catalog::new(names);
        let mut it = seq.into_iter();
        let o = drive(&mut catalog, Policy::Lru, 1, 1, 4, 0, || it.next().unwrap());
        // /a miss, /b miss (evicts /a), /a miss, /a hit.
        assert_eq!((o.requests, o.hits), (4, 1));

        std::fs::write(&t, "").unwrap();
        assert!(read_trace(&t)
            .unwrap_err()
            .to_string()
            .contains("no requests"));
        assert!(read_trace(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn svg_plot_has_one_line_per_series() {
        let rows: Vec<Row> = [Policy::Lru, Policy::Lfu]
            .into_iter()
            .flat_map(|policy| {
                [10, 100].into_iter().map(move |cache| Row {
                    point: point(policy, 1.15, 1000, cache),
                    outcome: Outcome {
                        requests: 10,
                        hits: 5,
                        req_per_s: 1.0,
                    },
                    che: None,
                })
            })
            .collect();
        let svg = plot_svg(&rows, Axis::Cache);
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains(">lru<") && svg.contains(">lfu<"));
    }
}
