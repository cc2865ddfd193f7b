//! `bench/gateway.sh` part 2: `/api/search` latency over HTTP. Builds N synthetic
//! CMIP-like records in a temporary SQLite catalog, serves the real gateway router on
//! loopback, and times GET requests (one keep-alive connection, like a page) per
//! query kind: p50 / p99. Then CLIENTS concurrent clients (one keep-alive
//! connection each) on `/api/search`, `/esg-search/search` (File and Dataset),
//! `/stac/search` and `/api/search?type=dataset`
//! (skipped, with the reason, when the gateway has no such endpoint):
//! requests/s and p50 / p99.
//!
//! Usage: cargo run --release -p granary-gateway --example search_bench -- [N] [RUNS] [CLIENTS] [PER_CLIENT]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use std::time::Instant;

use granary_catalog::{Catalog, Record};

#[path = "../../catalog/tests/it/common/pgcluster.rs"]
mod pgcluster;

/// (facet, cardinality)
const FACETS: [(&str, u64); 9] = [
    ("source_id", 100),
    ("experiment_id", 300),
    ("variable_id", 1000),
    ("table_id", 40),
    ("member_id", 200),
    ("grid_label", 10),
    ("activity_id", 20),
    ("institution_id", 50),
    ("version", 50),
];
const WORDS: [&str; 8] = [
    "air",
    "temperature",
    "precipitation",
    "surface",
    "pressure",
    "wind",
    "ocean",
    "cloud",
];

/// Seeded draws (the workspace's one generator), deterministic.
struct Rng(fastrand::Rng);
impl Rng {
    fn new(seed: u64) -> Self {
        Rng(fastrand::Rng::with_seed(seed))
    }
    fn next(&mut self) -> u64 {
        self.0.u64(..)
    }
    /// Skewed: small values much more likely (about 1/(k+1)).
    fn skewed(&mut self, card: u64) -> u64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (((card as f64 + 1.0).ln() * u).exp() as u64 - 1).min(card - 1)
    }
}

/// VmRSS of this process, KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// The files of one CMIP6-shaped dataset (DRS path, ~10 files on average, each a
/// time slice): `/CMIP6/<activity>/<institution>/<source>/<experiment>/<member>/
/// <table>/<variable>/<grid>/<file>` with the DRS `version` facet.
fn dataset(rng: &mut Rng, d: u64, out: &mut Vec<Record>) {
    let mut facets = BTreeMap::new();
    for (f, card) in FACETS {
        facets.insert(f.to_string(), format!("{f}{}", rng.skewed(card)));
    }
    facets.insert("mip_era".into(), "CMIP6".into());
    facets.insert("frequency".into(), "mon".into());
    let v = &facets;
    let dir = format!(
        "/CMIP6/{}/{}/{}/{}/{}/{}/{}/{}",
        v["activity_id"],
        v["institution_id"],
        v["source_id"],
        v["experiment_id"],
        v["member_id"],
        v["table_id"],
        v["variable_id"],
        v["grid_label"]
    );
    let files = 1 + rng.skewed(30);
    let w1 = WORDS[(rng.next() % 8) as usize];
    let w2 = WORDS[(rng.next() % 8) as usize];
    for k in 0..files {
        let y0 = 1850 + 10 * k;
        let file = format!(
            "{}_{}_{}_d{d}_{y0}01-{}12.nc",
            v["variable_id"],
            v["table_id"],
            v["source_id"],
            y0 + 9
        );
        out.push(Record {
            name: format!("{dir}/{file}"),
            version: 1,
            project: "CMIP6".into(),
            title: file,
            size: 1000 + rng.next() % 1_000_000,
            time_start: Some(format!("{y0}-01-01T00:00:00")),
            time_end: Some(format!("{}-01-01T00:00:00", y0 + 10)),
            text: format!("{w1} {w2} {}", v["variable_id"]),
            facets: facets.clone(),
            ..Record::default()
        });
    }
}

/// The request path of the i-th request of a kind.
type PathOf = Box<dyn Fn(usize) -> String>;

/// One GET on a keep-alive connection; returns the body length.
fn get(r: &mut BufReader<std::net::TcpStream>, path: &str) -> usize {
    let (status, len) = get_status(r, path);
    assert_eq!(status, 200, "{path}");
    len
}

/// One GET on a keep-alive connection: (status, body length).
fn get_status(r: &mut BufReader<std::net::TcpStream>, path: &str) -> (u16, usize) {
    r.get_mut()
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n").as_bytes())
        .unwrap();
    let mut len = 0;
    let mut line = String::new();
    // A connection the server closed is reported, never waited on.
    let eof = |n: usize| assert!(n > 0, "GET {path}: the server closed the connection");
    eof(r.read_line(&mut line).unwrap());
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    loop {
        line.clear();
        eof(r.read_line(&mut line).unwrap());
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    (status, len)
}

/// `clients` threads, each on its own keep-alive connection, `per` requests
/// each: (requests/s, p50 ms, p99 ms).
fn concurrent(
    addr: std::net::SocketAddr,
    clients: usize,
    per: usize,
    path: Arc<dyn Fn(usize) -> String + Send + Sync>,
) -> (f64, f64, f64) {
    let t = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut conn = BufReader::new(std::net::TcpStream::connect(addr).unwrap());
                let mut ms = Vec::with_capacity(per);
                for i in 0..per {
                    let t = Instant::now();
                    get(&mut conn, &path(c * per + i));
                    ms.push(t.elapsed().as_secs_f64() * 1e3);
                }
                ms
            })
        })
        .collect();
    let mut ms: Vec<f64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let secs = t.elapsed().as_secs_f64();
    ms.sort_by(|a, b| a.total_cmp(b));
    let p = |q: f64| ms[((ms.len() - 1) as f64 * q) as usize];
    (ms.len() as f64 / secs, p(0.5), p(0.99))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let runs: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200);
    let clients: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100);
    let per: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(20);
    // SEARCH_BENCH_DIR: keep the SQLite catalog there and use it again on the next run
    // (writing 10 M records takes a quarter of an hour); its records are not rewritten.
    let kept = std::env::var_os("SEARCH_BENCH_DIR").map(std::path::PathBuf::from);
    let dir = kept.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("granary-search-bench-{}", std::process::id()))
    });
    let reuse = kept.is_some() && dir.join("catalog.sqlite").exists();
    // CATALOG=pg: a throw-away PostgreSQL cluster instead of the embedded SQLite.
    let pg = (std::env::var("CATALOG").as_deref() == Ok("pg"))
        .then(|| pgcluster::PgCluster::start().expect("PostgreSQL for CATALOG=pg"));
    let spec = match &pg {
        Some(c) => c.create_db("searchbench"),
        None => dir.to_str().unwrap().to_string(),
    };
    println!(
        "catalog: {}",
        if pg.is_some() {
            "PostgreSQL"
        } else {
            "SQLite (embedded)"
        }
    );
    let t = Instant::now();
    let mut total = 0u64;
    if reuse {
        eprintln!("using the records kept in {}", dir.display());
    } else {
        let cat = Catalog::open(&spec).expect("open catalog");
        let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
        let mut batch = Vec::with_capacity(5100);
        let mut d = 0u64;
        while total < n {
            dataset(&mut rng, d, &mut batch);
            d += 1;
            if batch.len() >= 5000 {
                total += batch.len() as u64;
                cat.upsert_many(&batch).expect("insert");
                batch.clear();
            }
        }
        total += batch.len() as u64;
        cat.upsert_many(&batch).expect("insert");
        eprintln!(
            "{total} records in {d} datasets written in {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    // The index as a daemon loads it at start: time and memory per record.
    let before = rss_kib();
    let t = Instant::now();
    let cat = Catalog::open(&spec).expect("open catalog");
    let total = cat.len().expect("len");
    let loaded = t.elapsed().as_secs_f64();
    let after = rss_kib();
    let datasets = cat.dataset_count().expect("datasets");
    println!(
        "{total} records, {datasets} datasets; index loaded in {loaded:.1} s; RSS +{} MiB ({:.0} B/record)",
        after.saturating_sub(before) / 1024,
        after.saturating_sub(before) as f64 * 1024.0 / total.max(1) as f64
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (events, _keep) = tokio::sync::mpsc::channel(16);
    let node = Arc::new(granary_gateway::Node {
        socket: dir.join("none.sock"),
        data_dir: dir.clone(),
        catalog: Some(Arc::new(cat)),
        events,
        ids: Arc::new(granary_face::FaceIds::default()),
        limits: granary_face::FaceLimits::default(),
        started: Instant::now(),
        local: Default::default(),
        tls: Default::default(),
        shared: granary_gateway::Shared::open(&dir),
    });
    let (addr, _task) = rt
        .block_on(granary_gateway::start(
            "127.0.0.1:0".parse().unwrap(),
            clients + 16,
            node,
        ))
        .expect("start gateway");
    let kinds: [(&str, PathOf); 8] = [
        (
            "(a) one facet + all facet counts",
            Box::new(|i| format!("/api/search?variable_id=variable_id{}", i % 50)),
        ),
        (
            "(b) two facets (OR) + one facet",
            Box::new(|i| {
                format!(
                    "/api/search?source_id=source_id{}&source_id=source_id{}&experiment_id=experiment_id{}",
                    i % 20,
                    (i + 7) % 20,
                    i % 30
                )
            }),
        ),
        (
            "(c) free text + all facet counts",
            Box::new(|i| format!("/api/search?q={}+{}", WORDS[i % 8], WORDS[(i + 3) % 8])),
        ),
        (
            "(d) no filter, all facet counts",
            Box::new(|i| format!("/api/search?offset={}", i % 100)),
        ),
        (
            "(f) ESGF Dataset search, one facet",
            Box::new(|i| {
                format!(
                    "/esg-search/search?format=application%2Fsolr%2Bjson&type=Dataset&variable_id=variable_id{}&limit=10",
                    i % 50
                )
            }),
        ),
        (
            "(g) dataset search + counts",
            Box::new(|i| {
                format!(
                    "/api/search?type=dataset&variable_id=variable_id{}&limit=10",
                    i % 50
                )
            }),
        ),
        (
            "(h) STAC search, first page",
            Box::new(|i| format!("/stac/search?limit=10&token=next:{}", i * 10)),
        ),
        (
            "(e) autocomplete, one facet",
            Box::new(|i| {
                format!(
                    "/api/autocomplete?facet=source_id&prefix=source_id{}",
                    i % 10
                )
            }),
        ),
    ];
    println!("{total} records; {runs} requests per kind over one keep-alive HTTP/1.1 connection");
    println!(
        "{:<36} {:>9} {:>9} {:>12}",
        "query", "p50 ms", "p99 ms", "body bytes"
    );
    let mut conn = BufReader::new(std::net::TcpStream::connect(addr).unwrap());
    for (label, path) in &kinds {
        let _ = get(&mut conn, &path(0));
        let mut ms = Vec::with_capacity(runs);
        let mut bytes = 0;
        for i in 0..runs {
            let t = Instant::now();
            bytes = get(&mut conn, &path(i));
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        ms.sort_by(|a, b| a.total_cmp(b));
        let p = |q: f64| ms[((ms.len() - 1) as f64 * q) as usize];
        println!("{label:<36} {:>9.2} {:>9.2} {bytes:>12}", p(0.5), p(0.99));
    }

    // Concurrent clients on the three search endpoints: one filter (a
    // facet value of 50) and the first page, as a client pages a search.
    let per = per.max(1);
    println!();
    println!(
        "{clients} concurrent clients, {per} requests each, one keep-alive connection per client"
    );
    println!(
        "{:<24} {:>10} {:>9} {:>9}",
        "endpoint", "requests/s", "p50 ms", "p99 ms"
    );
    type P = Arc<dyn Fn(usize) -> String + Send + Sync>;
    let eps: [(&str, P); 8] = [
        (
            "/api/search",
            Arc::new(|i| format!("/api/search?variable_id=variable_id{}&limit=10", i % 50)),
        ),
        (
            "/api/search distinct",
            Arc::new(|i| {
                // Every request a different search: none answered from the
                // result cache.
                format!(
                    "/api/search?variable_id=variable_id{}&limit=10&latest={}",
                    i % 1000,
                    (i / 1000) % 2 == 0
                )
            }),
        ),
        (
            "/esg-search/search",
            Arc::new(|i| {
                format!(
                    "/esg-search/search?format=application%2Fsolr%2Bjson&type=File&variable_id=variable_id{}&limit=10",
                    i % 50
                )
            }),
        ),
        (
            "/stac/search",
            Arc::new(|_| "/stac/search?limit=10".to_string()),
        ),
        (
            "/stac/search filter",
            Arc::new(|i| {
                format!(
                    "/stac/search?limit=10&filter-lang=cql2-json&filter=%7B%22op%22%3A%22in%22%2C%22args%22%3A%5B%7B%22property%22%3A%22properties.cmip6%3Avariable_id%22%7D%2C%5B%22variable_id{}%22%5D%5D%7D",
                    i % 50
                )
            }),
        ),
        (
            "/stac/collections/cmip6/items",
            Arc::new(|i| {
                format!(
                    "/stac/collections/cmip6/items?limit=10&token=next:{}",
                    (i % 20) * 10
                )
            }),
        ),
        (
            "/esg-search type=Dataset",
            Arc::new(|i| {
                format!(
                    "/esg-search/search?format=application%2Fsolr%2Bjson&type=Dataset&variable_id=variable_id{}&limit=10",
                    i % 50
                )
            }),
        ),
        (
            "/api/search?type=dataset",
            Arc::new(|i| {
                format!(
                    "/api/search?type=dataset&variable_id=variable_id{}&limit=10",
                    i % 50
                )
            }),
        ),
    ];
    for (label, path) in eps {
        // A fresh connection: the server closes one left idle through a phase.
        let mut probe = BufReader::new(std::net::TcpStream::connect(addr).unwrap());
        let (status, _) = get_status(&mut probe, &path(0));
        if status != 200 {
            println!(
                "{label:<24} skipped: the gateway answers {status} (endpoint not in this build)"
            );
            continue;
        }
        let (rps, p50, p99) = concurrent(addr, clients, per, path);
        println!("{label:<24} {rps:>10.0} {p50:>9.2} {p99:>9.2}");
    }
    hostile(addr);
    if kept.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Percent-encodes everything but letters and digits.
fn pct(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Hostile requests (STAC filters with many `like` wildcards, wide `or`s, long
/// `in` lists, free text of many words) from 4 clients for a while, beside one
/// client asking a cheap page every 20 ms: how long the cheap one waits is what
/// another user sees while the door is attacked.
fn hostile(addr: std::net::SocketAddr) {
    let like = |p: &str| format!(r#"{{"op":"like","args":[{{"property":"id"}},"{p}"]}}"#);
    let mut filters = vec![
        like(&("%a".repeat(120) + "%b")),
        like(&"%_".repeat(100)),
        format!(
            r#"{{"op":"or","args":[{}]}}"#,
            (0..600)
                .map(|i| like(&format!("%{i}%x%")))
                .collect::<Vec<_>>()
                .join(",")
        ),
        format!(
            r#"{{"op":"in","args":[{{"property":"id"}},[{}]]}}"#,
            (0..9000)
                .map(|i| format!("\"v{i}\""))
                .collect::<Vec<_>>()
                .join(",")
        ),
    ];
    filters.push(format!(r#"{{"op":"not","args":[{}]}}"#, filters[0]));
    let words: Vec<String> = (0..400).map(|i| format!("w{i}")).collect();
    let mut paths: Vec<String> = filters
        .iter()
        .map(|f| {
            format!(
                "/stac/search?limit=10&filter-lang=cql2-json&filter={}",
                pct(f)
            )
        })
        .filter(|p| p.len() < 8000)
        .collect();
    paths.push(format!("/api/search?q={}", pct(&words.join(" "))));
    paths.push(format!(
        "/esg-search/search?type=File&query={}",
        pct(&words[..300].join(" "))
    ));
    // The POST forms of the long filters.
    let bodies: Vec<String> = filters
        .iter()
        .map(|f| format!(r#"{{"filter":{f},"limit":10}}"#))
        .collect();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let statuses = Arc::new(std::sync::Mutex::new(BTreeMap::<u16, usize>::new()));
    let attackers: Vec<_> = (0..4)
        .map(|k| {
            let (paths, bodies) = (paths.clone(), bodies.clone());
            let (stop, statuses) = (stop.clone(), statuses.clone());
            std::thread::spawn(move || {
                let mut i = k;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut c = std::net::TcpStream::connect(addr).unwrap();
                    c.set_read_timeout(Some(std::time::Duration::from_secs(120))).unwrap();
                    let req = if i % 2 == 0 {
                        let p = &paths[i / 2 % paths.len()];
                        format!("GET {p} HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
                    } else {
                        let b = &bodies[i / 2 % bodies.len()];
                        format!(
                            "POST /stac/search HTTP/1.1\r\nHost: b\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                            b.len()
                        )
                    };
                    c.write_all(req.as_bytes()).unwrap();
                    let mut out = Vec::new();
                    let _ = c.read_to_end(&mut out);
                    let status = String::from_utf8_lossy(&out[..out.len().min(20)])
                        .split_whitespace()
                        .nth(1)
                        .and_then(|x| x.parse().ok())
                        .unwrap_or(0);
                    *statuses.lock().unwrap().entry(status).or_default() += 1;
                    i += 4;
                }
            })
        })
        .collect();
    let mut conn = BufReader::new(std::net::TcpStream::connect(addr).unwrap());
    let mut ms = Vec::new();
    let t = Instant::now();
    while t.elapsed().as_secs() < 30 {
        let s = Instant::now();
        get(&mut conn, "/stac/conformance");
        ms.push(s.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for a in attackers {
        let _ = a.join();
    }
    ms.sort_by(|a, b| a.total_cmp(b));
    let p = |q: f64| ms[((ms.len() - 1) as f64 * q) as usize];
    println!();
    println!(
        "hostile: 4 clients of hostile searches for 30 s, answers {:?}; a cheap page beside them: {} requests, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        statuses.lock().unwrap(),
        ms.len(),
        p(0.5),
        p(0.99),
        ms[ms.len() - 1]
    );
}
