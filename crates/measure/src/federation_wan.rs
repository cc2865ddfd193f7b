//! A federation on an emulated WAN (issue 47): storage sites in regions,
//! one router per region, one campus (client) node per region for the
//! consumers, every node but the routers on one PostgreSQL catalog with a
//! streaming standby. A scaled-down day of CMIP6-like work: publication at
//! some sites, the `[[replication]]` policy (`replicas` copies), consumers
//! fetching Zipf-popular names through their campus node, new versions
//! published mid-run, a site killed and the primary failed over mid-run.
//! Reports replication lag, the bytes on the WAN and access links against
//! the bytes delivered, the failover times, each daemon's peak RSS, and
//! checks the invariants across sites: nothing acknowledged is lost,
//! nothing wrong is served, every name reaches its replicas, every consumer
//! gets every file it asked for (retrying while the catalog is failed
//! over).
//!
//! The catalog traffic does not cross the emulated links (the nodes reach
//! PostgreSQL on Unix sockets, a management network), and without
//! `sch_netem` the links' delay, rate and loss apply to the UDP faces
//! through the testbed's relays (crates/testbed/README.md).
//!
//! Used by bench/federation30.sh (30 sites) and by the CLI's netns test
//! (6 sites).

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use granary_testbed::{HostId, LinkId, LinkSpec, Options, Testbed};
use serde_json::Value;

/// What the run is made of.
#[derive(Clone, Debug)]
pub struct Opts {
    /// The `granary` binary the nodes and commands run.
    pub granary: PathBuf,
    pub regions: usize,
    pub sites_per_region: usize,
    /// Sites that publish (spread over the regions).
    pub publishers: usize,
    /// Consumers (users on the regions' campus nodes).
    pub consumers: usize,
    pub files_per_publisher: usize,
    /// File sizes in KiB, used in turn.
    pub file_kib: Vec<u64>,
    /// Copies the policy keeps of each version.
    pub replicas: u32,
    /// How long the consumers fetch (the site kill and the failover happen
    /// inside this window).
    pub consume_secs: u64,
    /// Pause between a consumer's fetches.
    pub think_ms: u64,
    /// Zipf exponent of the names' popularity.
    pub zipf: f64,
    /// Seconds of silence before a node is down.
    pub node_timeout: u64,
    /// Round-trip times between regions 0–1, 1–2, 0–2 (ms).
    pub wan_rtt_ms: [u64; 3],
    /// Rate of each inter-region link (Mbit/s).
    pub wan_mbit: u64,
    /// Rate of each site's and campus's access link (Mbit/s).
    pub access_mbit: u64,
    /// The catalog: a multi-host URL reaching the primary and the standby.
    pub url: String,
    /// Where the nodes' data directories and the inputs go.
    pub work: PathBuf,
    pub seed: u64,
}

/// The catalog's failover, done by the caller (it owns the servers).
pub trait Failover {
    /// The primary stops (fast shutdown).
    fn stop_primary(&mut self);
    /// The standby is promoted.
    fn promote_standby(&mut self);
}

/// What the run measured and found.
#[derive(Debug, Default)]
pub struct Report {
    pub sites: usize,
    pub daemons: usize,
    pub versions_published: usize,
    pub bytes_published: u64,
    /// Seconds from a version's `put` to its `replicas` up copies (sampled
    /// each second): sorted.
    pub replication_lag_s: Vec<f64>,
    /// Versions never seen reaching their copies.
    pub never_replicated: usize,
    pub fetches: usize,
    /// Fetches that failed at first (then retried).
    pub fetch_retries: usize,
    pub fetch_failed: usize,
    pub bytes_delivered: u64,
    /// Bytes on the links between regions (both directions, frames).
    pub wan_bytes: u64,
    /// Bytes from the routers to the campus nodes (what reached the consumers' nodes).
    pub campus_in_bytes: u64,
    /// Bytes on the sites' access links (both directions).
    pub site_access_bytes: u64,
    /// Fetches the campus node answered from its own store (a kept copy).
    pub fetches_local: usize,
    /// Bytes consumers' fetches read from the campus node's own store
    /// (dedup: chunks of other versions it holds).
    pub dedup_local_bytes: u64,
    /// Site kill: seconds until every version it held had its copies on up
    /// sites again.
    pub kill_recopied_s: Option<f64>,
    /// Site kill: seconds until the catalog showed it down (its heartbeat
    /// `node_timeout` old).
    pub kill_seen_down_s: Option<f64>,
    /// Primary stopped to standby promoted (the outage chosen).
    pub pg_outage_s: f64,
    /// Promotion to the first catalog answer.
    pub pg_catalog_back_s: Option<f64>,
    /// Promotion to the record published during the outage being located.
    pub pg_queued_arrived_s: Option<f64>,
    /// Peak RSS per daemon, KiB, sorted.
    pub rss_kib: Vec<u64>,
    /// Invariants broken (empty: all hold).
    pub violations: Vec<String>,
    pub wall_s: f64,
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn pct(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

impl Report {
    /// The report as a Markdown table.
    pub fn table(&self) -> String {
        let lag = &self.replication_lag_s;
        let rss: Vec<f64> = self.rss_kib.iter().map(|&k| k as f64 / 1024.0).collect();
        let opt = |x: Option<f64>| x.map_or("never".to_string(), |s| format!("{s:.1} s"));
        let rows = [
            ("sites / daemons", format!("{} / {}", self.sites, self.daemons)),
            (
                "versions published",
                format!("{} ({:.1} MiB)", self.versions_published, mib(self.bytes_published)),
            ),
            (
                "replication lag (put → copies), p50 / p90 / max",
                format!(
                    "{:.1} / {:.1} / {:.1} s ({} never)",
                    pct(lag, 0.5),
                    pct(lag, 0.9),
                    pct(lag, 1.0),
                    self.never_replicated
                ),
            ),
            (
                "fetches (retried / failed for good)",
                format!("{} ({} / {})", self.fetches, self.fetch_retries, self.fetch_failed),
            ),
            ("bytes delivered to consumers", format!("{:.1} MiB", mib(self.bytes_delivered))),
            (
                "bytes into the campus nodes",
                format!(
                    "{:.1} MiB ({:.0} % of delivered; {} fetches from the campus store, {:.1} MiB read locally by dedup)",
                    mib(self.campus_in_bytes),
                    100.0 * self.campus_in_bytes as f64 / self.bytes_delivered.max(1) as f64,
                    self.fetches_local,
                    mib(self.dedup_local_bytes)
                ),
            ),
            ("bytes on the WAN (between regions)", format!("{:.1} MiB", mib(self.wan_bytes))),
            ("bytes on the sites' access links", format!("{:.1} MiB", mib(self.site_access_bytes))),
            ("site killed → seen down (node_timeout)", opt(self.kill_seen_down_s)),
            ("site killed → its versions on 2 up sites again", opt(self.kill_recopied_s)),
            ("PostgreSQL primary down → standby promoted", format!("{:.1} s", self.pg_outage_s)),
            ("promotion → catalog answers", opt(self.pg_catalog_back_s)),
            ("promotion → record queued in the outage located", opt(self.pg_queued_arrived_s)),
            (
                "peak RSS per daemon, median / max",
                format!("{:.0} / {:.0} MiB", pct(&rss, 0.5), pct(&rss, 1.0)),
            ),
            (
                "invariants (nothing lost, nothing wrong served, replicas reached, every fetch served)",
                if self.violations.is_empty() {
                    "all hold".to_string()
                } else {
                    format!("{} violated", self.violations.len())
                },
            ),
            ("wall time", format!("{:.0} s", self.wall_s)),
        ];
        let mut s = String::from("| | |\n|---|---|\n");
        for (k, v) in rows {
            s.push_str(&format!("| {k} | {v} |\n"));
        }
        for v in &self.violations {
            s.push_str(&format!("\nVIOLATION: {v}"));
        }
        s
    }
}

/// A daemon in a testbed host.
struct Node {
    dir: PathBuf,
    socket: PathBuf,
    pid: u32,
    /// The node prefix (sites and campus nodes).
    prefix: String,
}

impl Node {
    fn cmd(&self, g: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(g);
        c.args(["--data-dir", self.dir.to_str().unwrap()])
            .args(["--socket", self.socket.to_str().unwrap()])
            .args(args)
            .env("GRANARY_LOG", "warn");
        c
    }

    fn ok(&self, g: &Path, args: &[&str]) -> anyhow::Result<String> {
        let o = self.cmd(g, args).output()?;
        if !o.status.success() {
            bail!(
                "granary {args:?} on {}: {}",
                self.prefix,
                String::from_utf8_lossy(&o.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }
}

fn start(
    tb: &mut Testbed,
    host: HostId,
    g: &Path,
    dir: PathBuf,
    prefix: &str,
    extra: &[String],
) -> anyhow::Result<Node> {
    std::fs::create_dir_all(&dir)?;
    let socket = dir.join("g.sock");
    let mut c = tb.command(host, g);
    c.args(["--data-dir", dir.to_str().unwrap()])
        .args(["--socket", socket.to_str().unwrap()])
        .args(["daemon", "--listen", "udp://0.0.0.0:6363", "--http", "off"])
        .args(extra)
        .env("GRANARY_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(dir.join("daemon.log"))?));
    let mut child = c.spawn().context("start daemon")?;
    let pid = child.id();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l == "ready" => break,
            Some(Ok(_)) => {}
            _ => bail!(
                "daemon {prefix} exited before ready: {}",
                std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default()
            ),
        }
    }
    std::thread::spawn(move || for _ in lines.by_ref() {});
    tb.adopt(child);
    Ok(Node {
        dir,
        socket,
        pid,
        prefix: prefix.to_string(),
    })
}

fn vm_hwm_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Bytes sent and received on `host`'s interface that has `addr`.
fn if_bytes(tb: &Testbed, host: HostId, addr: std::net::Ipv4Addr) -> anyhow::Result<(u64, u64)> {
    let ns = tb.netns(host).to_string();
    let out = Command::new("ip")
        .args(["-n", &ns, "-j", "-s", "addr", "show"])
        .output()?;
    let v: Value = serde_json::from_slice(&out.stdout)?;
    for i in v.as_array().into_iter().flatten() {
        let has = i["addr_info"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|a| a["local"].as_str() == Some(&addr.to_string()));
        if has {
            let name = i["ifname"].as_str().unwrap_or_default();
            let o = Command::new("ip")
                .args(["-n", &ns, "-j", "-s", "link", "show", "dev", name])
                .output()?;
            let l: Value = serde_json::from_slice(&o.stdout)?;
            let s = &l[0]["stats64"];
            return Ok((
                s["tx"]["bytes"].as_u64().unwrap_or(0),
                s["rx"]["bytes"].as_u64().unwrap_or(0),
            ));
        }
    }
    bail!("no interface with {addr} in {ns}")
}

/// A published version.
#[derive(Clone, Debug)]
struct Pub {
    name: String,
    version: u64,
    sha: [u8; 32],
    size: u64,
    at: Instant,
}

/// Content of version `v` of file `k` (v > 0: the first version with one
/// eighth changed, so a holder of the old one has most of its chunks).
fn content(seed: u64, k: usize, v: u32, kib: u64) -> Vec<u8> {
    let mut b = granary_store::chunking::noise((kib * 1024) as usize, seed + k as u64 * 7919);
    if v > 0 {
        let len = b.len() / 8;
        let at = (b.len() / 3).min(b.len() - len);
        let patch =
            granary_store::chunking::noise(len, seed + k as u64 * 7919 + 1_000_003 * v as u64);
        b[at..at + len].copy_from_slice(&patch);
    }
    b
}

fn put(g: &Path, n: &Node, file: &Path, name: &str) -> anyhow::Result<u64> {
    let out = n.ok(g, &["put", "--json", file.to_str().unwrap(), name])?;
    let v: Value = serde_json::from_str(&out).with_context(|| format!("put --json: {out}"))?;
    v["version"]
        .as_u64()
        .or_else(|| v["versioned"].as_str()?.rsplit_once("/v=")?.1.parse().ok())
        .ok_or_else(|| anyhow!("no version in {out}"))
}

/// Runs the federation's day; the caller owns the catalog's servers.
pub fn run(o: &Opts, pg: &mut dyn Failover) -> anyhow::Result<Report> {
    let t_run = Instant::now();
    let g = o.granary.as_path();
    std::fs::create_dir_all(&o.work)?;
    let mut tb = Testbed::new(Options::new(g))?;
    let mut rep = Report {
        sites: o.regions * o.sites_per_region,
        ..Report::default()
    };
    // Hosts and links.
    let mut routers = Vec::new();
    for r in 0..o.regions {
        routers.push(tb.add_host(&format!("r{r}"))?);
    }
    let access = LinkSpec::symmetric(
        Some(o.access_mbit * 1_000_000),
        Duration::from_millis(1),
        0.0,
    );
    let mut wan: BTreeMap<(usize, usize), LinkId> = BTreeMap::new();
    for (a, b, rtt) in [
        (0, 1, o.wan_rtt_ms[0]),
        (1, 2, o.wan_rtt_ms[1]),
        (0, 2, o.wan_rtt_ms[2]),
    ] {
        if b < o.regions {
            let l = tb.link(
                routers[a],
                routers[b],
                LinkSpec::symmetric(
                    Some(o.wan_mbit * 1_000_000),
                    Duration::from_millis(rtt / 2),
                    0.0,
                ),
            )?;
            wan.insert((a, b), l);
        }
    }
    let mut site_hosts = Vec::new(); // (region, index, host, link)
    for (r, &router) in routers.iter().enumerate() {
        for i in 0..o.sites_per_region {
            let h = tb.add_host(&format!("s{r}x{i}"))?;
            let l = tb.link(h, router, access.clone())?;
            site_hosts.push((r, i, h, l));
        }
    }
    let mut campus_hosts = Vec::new();
    for (r, &router) in routers.iter().enumerate() {
        let h = tb.add_host(&format!("c{r}"))?;
        let l = tb.link(h, router, access.clone())?;
        campus_hosts.push((h, l));
    }

    // The sites, on the shared catalog, with the policy.
    let conf = o.work.join("site.toml");
    std::fs::write(
        &conf,
        format!(
            "node_timeout = {}\nreplication_period = 2\nreplication_retry = 5\n\n[[replication]]\nprefix = \"/cmip6\"\nreplicas = {}\n",
            o.node_timeout, o.replicas
        ),
    )?;
    let mut sites = Vec::new();
    for &(r, i, h, l) in &site_hosts {
        let prefix = format!("/r{r}/s{i}");
        let n = start(
            &mut tb,
            h,
            g,
            o.work.join(format!("site-{r}-{i}")),
            &prefix,
            &[
                "--node-prefix".into(),
                prefix.clone(),
                "--catalog".into(),
                o.url.clone(),
                "--config".into(),
                conf.to_str().unwrap().into(),
            ],
        )?;
        let to_r = tb.udp_path(l, h, 6363)?;
        n.ok(g, &["route", "add", "/", &format!("udp4://{to_r}")])?;
        sites.push(n);
    }
    // The routers: a route per site of their region, one per other region.
    let mut router_nodes = Vec::new();
    for (r, &router) in routers.iter().enumerate() {
        let mut t = format!("node_prefix = \"/router/r{r}\"\n");
        for (k, &(sr, _, _, l)) in site_hosts.iter().enumerate() {
            if sr == r {
                let f = tb.udp_path(l, router, 6363)?;
                t += &format!(
                    "\n[[route]]\nprefix = \"{}\"\nface = \"udp4://{f}\"\n",
                    sites[k].prefix
                );
            }
        }
        for (&(a, b), &l) in &wan {
            let other = if a == r {
                b
            } else if b == r {
                a
            } else {
                continue;
            };
            let f = tb.udp_path(l, router, 6363)?;
            t += &format!("\n[[route]]\nprefix = \"/r{other}\"\nface = \"udp4://{f}\"\n");
        }
        let c = o.work.join(format!("router-{r}.toml"));
        std::fs::write(&c, t)?;
        router_nodes.push(start(
            &mut tb,
            router,
            g,
            o.work.join(format!("router-{r}")),
            &format!("/router/r{r}"),
            &["--config".into(), c.to_str().unwrap().into()],
        )?);
    }
    // The campus nodes: clients on the catalog, everything to the router.
    let mut campus = Vec::new();
    for (r, &(h, l)) in campus_hosts.iter().enumerate() {
        let prefix = format!("/campus/r{r}");
        let c = o.work.join(format!("campus-{r}.toml"));
        std::fs::write(&c, format!("node_timeout = {}\n", o.node_timeout))?;
        let n = start(
            &mut tb,
            h,
            g,
            o.work.join(format!("campus-{r}")),
            &prefix,
            &[
                "--node-prefix".into(),
                prefix.clone(),
                "--catalog".into(),
                o.url.clone(),
                "--role".into(),
                "client".into(),
                "--config".into(),
                c.to_str().unwrap().into(),
            ],
        )?;
        let to_r = tb.udp_path(l, h, 6363)?;
        n.ok(g, &["route", "add", "/", &format!("udp4://{to_r}")])?;
        campus.push(n);
    }
    rep.daemons = sites.len() + router_nodes.len() + campus.len();

    // Publishers: spread over the regions; everyone trusts their keys.
    let publishers: Vec<usize> = (0..o.publishers)
        .map(|p| (p % o.regions) * o.sites_per_region + p / o.regions)
        .collect();
    for &p in &publishers {
        let cert = o.work.join(format!("pub{p}.ndncert"));
        std::fs::write(&cert, sites[p].ok(g, &["key", "export"])?)?;
        for n in sites.iter().chain(campus.iter()) {
            n.ok(g, &["key", "trust", cert.to_str().unwrap()])?;
        }
    }

    // Link counters from here on.
    let counters = |tb: &Testbed| -> anyhow::Result<(u64, u64, u64)> {
        let mut w = 0;
        for (&(a, _), &l) in &wan {
            let (tx, rx) = if_bytes(tb, routers[a], tb.link_addr(l, routers[a])?)?;
            w += tx + rx;
        }
        let mut c = 0;
        for (r, &(_, l)) in campus_hosts.iter().enumerate() {
            c += if_bytes(tb, routers[r], tb.link_addr(l, routers[r])?)?.0;
        }
        let mut s = 0;
        for &(r, _, _, l) in &site_hosts {
            let (tx, rx) = if_bytes(tb, routers[r], tb.link_addr(l, routers[r])?)?;
            s += tx + rx;
        }
        Ok((w, c, s))
    };
    let before = counters(&tb)?;

    // Publication, first round.
    let published: Arc<Mutex<Vec<Pub>>> = Arc::new(Mutex::new(Vec::new()));
    let input = o.work.join("input");
    std::fs::create_dir_all(&input)?;
    let mut files = Vec::new(); // (k, publisher site, name, kib)
    for (pi, &p) in publishers.iter().enumerate() {
        for j in 0..o.files_per_publisher {
            let k = pi * o.files_per_publisher + j;
            let kib = o.file_kib[k % o.file_kib.len()];
            files.push((
                k,
                p,
                format!("/cmip6/{}/f{j:02}.nc", &sites[p].prefix[1..]),
                kib,
            ));
        }
    }
    let publish = |k: usize, p: usize, name: &str, kib: u64, v: u32| -> anyhow::Result<Pub> {
        let b = content(o.seed, k, v, kib);
        let f = input.join(format!("{k}-{v}"));
        std::fs::write(&f, &b)?;
        let version = put(g, &sites[p], &f, name)?;
        let _ = std::fs::remove_file(&f);
        Ok(Pub {
            name: name.to_string(),
            version,
            sha: granary_packet::sha256(&b),
            size: b.len() as u64,
            at: Instant::now(),
        })
    };
    for (k, p, name, kib) in &files {
        let x = publish(*k, *p, name, *kib, 0)?;
        published.lock().unwrap().push(x);
    }
    eprintln!(
        "federation_wan: {} sites, {} daemons; {} versions published",
        rep.sites,
        rep.daemons,
        files.len()
    );

    // The replication monitor: each second, which latest versions are
    // short of their copies (on a site's catalog view).
    let replicated: Arc<Mutex<BTreeMap<(String, u64), Instant>>> = Default::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mon = {
        let (published, replicated, stop) = (published.clone(), replicated.clone(), stop.clone());
        let watcher = sites[sites.len() - 1].cmd(g, &[]);
        let args: Vec<String> = watcher
            .get_args()
            .map(|a| a.to_string_lossy().into())
            .collect();
        let g = g.to_path_buf();
        let conf = conf.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let o = Command::new(&g)
                    .args(&args)
                    .args([
                        "federation",
                        "status",
                        "--json",
                        "--config",
                        conf.to_str().unwrap(),
                    ])
                    .output();
                if let Some(o) = o.ok().filter(|o| o.status.success()) {
                    if let Ok(v) = serde_json::from_slice::<Value>(&o.stdout) {
                        let under: BTreeSet<(String, u64)> = v["under_replicated"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|u| {
                                (
                                    u["name"].as_str().unwrap_or_default().to_string(),
                                    u["version"].as_u64().unwrap_or(0),
                                )
                            })
                            .collect();
                        let now = Instant::now();
                        let ps = published.lock().unwrap().clone();
                        let mut r = replicated.lock().unwrap();
                        for p in ps {
                            let key = (p.name.clone(), p.version);
                            if !under.contains(&key) && !r.contains_key(&key) {
                                r.insert(key, now);
                            }
                        }
                    }
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };

    // The consumers.
    let t0 = Instant::now();
    let consume_until = t0 + Duration::from_secs(o.consume_secs);
    let names: Vec<String> = files.iter().map(|f| f.2.clone()).collect();
    #[derive(Default)]
    struct Tally {
        fetches: usize,
        retries: usize,
        failed: usize,
        bytes: u64,
        local: usize,
        dedup_local: u64,
        wrong: Vec<String>,
    }
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut users = Vec::new();
    for u in 0..o.consumers {
        let c = &campus[u % campus.len()];
        let base: Vec<String> = c
            .cmd(g, &[])
            .get_args()
            .map(|a| a.to_string_lossy().into())
            .collect();
        let (g, names, published, tally) = (
            g.to_path_buf(),
            names.clone(),
            published.clone(),
            tally.clone(),
        );
        let out = o.work.join(format!("user{u}.out"));
        let (zipf, think, seed) = (o.zipf, o.think_ms, o.seed);
        users.push(std::thread::spawn(move || {
            let mut rng = fastrand::Rng::with_seed(seed * 1000 + u as u64);
            let w: Vec<f64> = (1..=names.len())
                .map(|k| 1.0 / (k as f64).powf(zipf))
                .collect();
            let total: f64 = w.iter().sum();
            while Instant::now() < consume_until {
                let mut x = rng.f64() * total;
                let mut k = 0;
                while k + 1 < w.len() && x >= w[k] {
                    x -= w[k];
                    k += 1;
                }
                let name = &names[k];
                // A user retries a failed fetch for up to 2 minutes.
                let end = Instant::now() + Duration::from_secs(120);
                let mut first = true;
                loop {
                    let _ = std::fs::remove_file(&out);
                    let r = Command::new(&g)
                        .args(&base)
                        .args([
                            "get",
                            name,
                            "-o",
                            out.to_str().unwrap(),
                            "--json",
                            "--quiet",
                        ])
                        .env("GRANARY_LOG", "warn")
                        .output();
                    let ok = r.as_ref().is_ok_and(|r| r.status.success());
                    if ok {
                        let bytes = std::fs::read(&out).unwrap_or_default();
                        let sha = granary_packet::sha256(&bytes);
                        let mut t = tally.lock().unwrap();
                        t.fetches += 1;
                        t.bytes += bytes.len() as u64;
                        if !published
                            .lock()
                            .unwrap()
                            .iter()
                            .any(|p| &p.name == name && p.sha == sha)
                        {
                            t.wrong
                                .push(format!("user {u}: {name}: bytes of no published version"));
                        }
                        if let Ok(v) = serde_json::from_slice::<Value>(&r.as_ref().unwrap().stdout)
                        {
                            if v["local"].as_array().is_some_and(|l| !l.is_empty()) {
                                t.local += 1;
                            }
                            for d in v["dedup"].as_array().into_iter().flatten() {
                                t.dedup_local +=
                                    d["report"]["local"]["bytes"].as_u64().unwrap_or(0);
                            }
                        }
                        break;
                    }
                    if first {
                        tally.lock().unwrap().retries += 1;
                        first = false;
                    }
                    if Instant::now() > end {
                        let mut t = tally.lock().unwrap();
                        t.failed += 1;
                        t.wrong.push(format!(
                            "user {u}: {name} not fetched in 2 min: {}",
                            r.map(|r| String::from_utf8_lossy(&r.stderr).into_owned())
                                .unwrap_or_default()
                        ));
                        break;
                    }
                    std::thread::sleep(Duration::from_secs(2));
                }
                std::thread::sleep(Duration::from_millis(think));
            }
        }));
    }

    // The day's events, at fractions of the consumers' window.
    let at = |f: f64| t0 + Duration::from_secs_f64(o.consume_secs as f64 * f);
    let sleep_until = |t: Instant| {
        let now = Instant::now();
        if t > now {
            std::thread::sleep(t - now);
        }
    };
    // New versions of a quarter of the files (an eighth of each changed).
    sleep_until(at(0.15));
    for (k, p, name, kib) in files.iter().step_by(4) {
        let x = publish(*k, *p, name, *kib, 1)?;
        published.lock().unwrap().push(x);
    }
    // A publishing site dies (SIGKILL): the one in the last region.
    sleep_until(at(0.3));
    let killed = publishers[publishers.len() - 1];
    let t_kill = Instant::now();
    let _ = Command::new("kill")
        .args(["-9", &sites[killed].pid.to_string()])
        .status();
    let held_by_killed: Vec<String> = files
        .iter()
        .filter(|f| f.1 == killed)
        .map(|f| f.2.clone())
        .collect();
    // Watched each second: when the catalog shows the site down, and when
    // its versions are on `replicas` up sites again.
    let kill_watch = {
        let args: Vec<String> = sites[sites.len() - 1]
            .cmd(g, &[])
            .get_args()
            .map(|a| a.to_string_lossy().into())
            .collect();
        let (g, conf, held) = (g.to_path_buf(), conf.clone(), held_by_killed.clone());
        let prefix = sites[killed].prefix.clone();
        let limit = Duration::from_secs(o.node_timeout * 4 + 240);
        std::thread::spawn(move || -> (Option<f64>, Option<f64>) {
            let mut down = None;
            while t_kill.elapsed() < limit {
                let st = Command::new(&g)
                    .args(&args)
                    .args([
                        "federation",
                        "status",
                        "--json",
                        "--config",
                        conf.to_str().unwrap(),
                    ])
                    .output()
                    .ok()
                    .filter(|o| o.status.success())
                    .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok());
                if let Some(v) = st {
                    if down.is_none()
                        && v["nodes"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|n| n["prefix"] == prefix.as_str() && n["up"] == false)
                    {
                        down = Some(t_kill.elapsed().as_secs_f64());
                    }
                    let short = v["under_replicated"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|u| held.iter().any(|h| u["name"] == h.as_str()));
                    if down.is_some() && !short {
                        return (down, Some(t_kill.elapsed().as_secs_f64()));
                    }
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            (down, None)
        })
    };
    // The primary fails; a site publishes meanwhile; the standby is promoted.
    sleep_until(at(0.5));
    let t_stop = Instant::now();
    pg.stop_primary();
    let outage_pub = publishers[0];
    let outage_name = format!("/cmip6/{}/outage.nc", &sites[outage_pub].prefix[1..]);
    let x = publish(10_000, outage_pub, &outage_name, o.file_kib[0], 0)?;
    std::thread::sleep(Duration::from_secs(5).saturating_sub(t_stop.elapsed()));
    let t_promote = Instant::now();
    pg.promote_standby();
    rep.pg_outage_s = (t_promote - t_stop).as_secs_f64();
    let watcher = &sites[sites.len() - 1];
    let end = Instant::now() + Duration::from_secs(120);
    while Instant::now() < end {
        if rep.pg_catalog_back_s.is_none()
            && watcher.ok(g, &["federation", "status", "--json"]).is_ok()
        {
            rep.pg_catalog_back_s = Some(t_promote.elapsed().as_secs_f64());
        }
        if watcher
            .ok(g, &["federation", "locate", &outage_name, "--json"])
            .is_ok_and(|s| s.contains(&sites[outage_pub].prefix))
        {
            rep.pg_queued_arrived_s = Some(t_promote.elapsed().as_secs_f64());
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    published.lock().unwrap().push(x);
    let mut names_all = names.clone();
    names_all.push(outage_name.clone());

    for u in users {
        let _ = u.join();
    }
    // Convergence: every latest version on `replicas` up sites (the killed
    // one is down after node_timeout and its versions are copied again).
    let latest = |published: &[Pub]| -> BTreeMap<String, Pub> {
        let mut m = BTreeMap::new();
        for p in published {
            m.insert(p.name.clone(), p.clone());
        }
        m
    };
    let up_holders = |name: &str| -> Vec<String> {
        watcher
            .ok(g, &["federation", "locate", name, "--json"])
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .map(|v| {
                let arr = v["locations"]
                    .as_array()
                    .or(v.as_array())
                    .cloned()
                    .unwrap_or_default();
                arr.iter()
                    .filter(|l| l["role"].as_str().is_none_or(|r| r == "storage"))
                    .filter_map(|l| l["node"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let end = Instant::now() + Duration::from_secs(o.node_timeout * 3 + 180);
    loop {
        let all = latest(&published.lock().unwrap());
        let short: Vec<String> = all
            .keys()
            .filter(|n| up_holders(n).len() < o.replicas as usize)
            .cloned()
            .collect();
        if short.is_empty() {
            break;
        }
        if Instant::now() > end {
            rep.violations.push(format!(
                "{} names short of {} copies: {short:?}",
                short.len(),
                o.replicas
            ));
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = mon.join();
    (rep.kill_seen_down_s, rep.kill_recopied_s) = kill_watch.join().unwrap_or((None, None));
    if rep.kill_recopied_s.is_none() {
        rep.violations
            .push("the killed site's versions never had their copies on up sites again".into());
    }

    // Invariants. Nothing lost: every acknowledged version is held by an up
    // site that serves it (federation check probes every location).
    let ps = published.lock().unwrap().clone();
    for p in &ps {
        let v = p.version.to_string();
        let held = watcher
            .ok(
                g,
                &["federation", "locate", &p.name, "--version", &v, "--json"],
            )
            .unwrap_or_default();
        if !held.contains("/r") {
            rep.violations
                .push(format!("{} v={} is held by no up site", p.name, p.version));
        }
    }
    // Every consumer node gets every file's newest version, right.
    let newest = latest(&ps);
    for (r, c) in campus.iter().enumerate() {
        let out = o.work.join(format!("final-{r}.out"));
        for (name, p) in &newest {
            let _ = std::fs::remove_file(&out);
            let got = c
                .ok(g, &["get", name, "-o", out.to_str().unwrap(), "--quiet"])
                .map(|_| std::fs::read(&out).unwrap_or_default());
            match got {
                Ok(b) if granary_packet::sha256(&b) == p.sha => {}
                Ok(_) => rep.violations.push(format!(
                    "campus {r}: {name}: not the newest version's bytes"
                )),
                Err(e) => rep.violations.push(format!("campus {r}: {name}: {e}")),
            }
        }
    }
    let ck = watcher
        .cmd(g, &["federation", "check", "--sample", "100000"])
        .output()?;
    if !ck.status.success() {
        rep.violations.push(format!(
            "federation check: {}{}",
            String::from_utf8_lossy(&ck.stdout),
            String::from_utf8_lossy(&ck.stderr)
        ));
    }
    // Nothing wrong served, every fetch served.
    let t = tally.lock().unwrap();
    rep.violations.extend(t.wrong.iter().cloned());
    rep.fetches = t.fetches;
    rep.fetch_retries = t.retries;
    rep.fetch_failed = t.failed;
    rep.bytes_delivered = t.bytes;
    rep.fetches_local = t.local;
    rep.dedup_local_bytes = t.dedup_local;
    if t.fetches == 0 {
        rep.violations.push("no consumer fetch completed".into());
    }
    drop(t);
    // Replication lag.
    let r = replicated.lock().unwrap();
    for p in &ps {
        match r.get(&(p.name.clone(), p.version)) {
            Some(&when) => rep
                .replication_lag_s
                .push(when.saturating_duration_since(p.at).as_secs_f64()),
            None => rep.never_replicated += 1,
        }
    }
    drop(r);
    rep.replication_lag_s.sort_by(|a, b| a.total_cmp(b));
    rep.versions_published = ps.len();
    rep.bytes_published = ps.iter().map(|p| p.size).sum();
    let after = counters(&tb)?;
    rep.wan_bytes = after.0 - before.0;
    rep.campus_in_bytes = after.1 - before.1;
    rep.site_access_bytes = after.2 - before.2;
    let _ = names_all;
    rep.rss_kib = sites
        .iter()
        .enumerate()
        .filter(|(k, _)| *k != killed)
        .map(|(_, n)| n)
        .chain(router_nodes.iter())
        .chain(campus.iter())
        .map(|n| vm_hwm_kib(n.pid))
        .collect();
    rep.rss_kib.sort();
    rep.wall_s = t_run.elapsed().as_secs_f64();
    drop(tb);
    Ok(rep)
}
