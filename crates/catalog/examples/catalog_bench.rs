//! `bench/catalog.sh [N]`: builds N synthetic CMIP-like records and times queries on
//! SQLite and on a throw-away PostgreSQL cluster, printed side by side.

#[path = "../tests/it/common/pgcluster.rs"]
mod pgcluster;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fastrand::Rng as StdRng;
use granary_catalog::{Catalog, FacetSel, Query, Record};

/// (facet, cardinality)
const FACETS: [(&str, usize); 11] = [
    ("source_id", 100),
    ("experiment_id", 300),
    ("variable_id", 1000),
    ("table_id", 40),
    ("member_id", 200),
    ("grid_label", 10),
    ("activity_id", 20),
    ("institution_id", 50),
    ("frequency", 10),
    ("realm", 10),
    ("version", 500),
];
const WORDS: [&str; 12] = [
    "air",
    "temperature",
    "precipitation",
    "flux",
    "sea",
    "surface",
    "pressure",
    "wind",
    "ocean",
    "ice",
    "cloud",
    "radiation",
];

/// Zipf-ish: value k with probability about 1/(k+1).
fn zipf(rng: &mut StdRng, card: usize) -> usize {
    let h = ((card + 1) as f64).ln();
    let x = (rng.f64() * h).exp() - 1.0;
    (x as usize).min(card - 1)
}

fn value(facet: &str, k: usize) -> String {
    format!("{facet}{k}")
}

fn record(rng: &mut StdRng, i: usize) -> Record {
    let mut facets = BTreeMap::new();
    for (f, card) in FACETS {
        facets.insert(f.to_string(), value(f, zipf(rng, card)));
    }
    let var = facets["variable_id"].clone();
    let text = format!(
        "{var} {} {} long name of {var} units K",
        WORDS[zipf(rng, WORDS.len())],
        WORDS[rng.usize(0..WORDS.len())]
    );
    Record {
        name: format!(
            "/CMIP6/{}/{}/{}/f{i}.nc",
            facets["source_id"], facets["experiment_id"], var
        ),
        version: 1,
        project: "CMIP6".into(),
        title: format!("{var}_{}_{i}.nc", facets["source_id"]),
        facets,
        size: rng.u64(1_000..1_000_000_000),
        time_start: Some(format!("{:04}-01-01", rng.u64(1850..2100))),
        time_end: Some(format!("{:04}-12-31", rng.u64(1850..2300))),
        bbox: Some([-180.0, -90.0, 180.0, 90.0]),
        text,
        meta: serde_json::json!({"attributes": {"Conventions": "CF-1.7 CMIP-6.2"}}),
        sha256: Some(format!("{:064x}", i)),
        manifest_digest: None,
        node: None,
        tracking_id: None,
        further_info_url: None,
        license: None,
        citation: None,
    }
}

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1024.0
}

/// CPU time of this thread: unlike wall time, it does not grow when other processes
/// share the cores.
fn cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec owned by this frame, and
    // CLOCK_THREAD_CPUTIME_ID is a clock every Linux supports; the call writes only `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// (p50, p99, p50 of CPU time) in ms.
fn pct(mut v: Vec<Duration>, mut c: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    c.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (
        ms(v[v.len() / 2]),
        ms(v[(v.len() * 99 / 100).min(v.len() - 1)]),
        ms(c[c.len() / 2]),
    )
}

struct Row {
    build_rate: f64,
    build_cpu_rate: f64,
    load_s: f64,
    load_cpu_s: f64,
    rss: f64,
    a: (f64, f64, f64),
    b: (f64, f64, f64),
    b_cold: (f64, f64, f64),
    c: (f64, f64, f64),
    d: (f64, f64, f64),
}

fn run(spec: &str, mut n: usize, runs: usize) -> Row {
    let mut rng = StdRng::with_seed(1);
    let reuse = std::env::var("REUSE").is_ok_and(|v| v == "1");
    let (build, build_cpu) = {
        let cat = Catalog::open(spec).expect("open");
        if reuse && cat.len().expect("len") == n as u64 {
            eprintln!("reusing the catalog at {spec}");
            n = 0;
        } else {
            cat.clear().expect("clear");
        }
        // Only the catalog's work is timed: generating the synthetic records is not.
        let (mut wall, mut busy) = (Duration::ZERO, Duration::ZERO);
        let mut i = 0;
        while i < n {
            let k = (n - i).min(50_000);
            let batch: Vec<Record> = (i..i + k).map(|j| record(&mut rng, j)).collect();
            let t = Instant::now();
            let c0 = cpu();
            cat.upsert_many(&batch).expect("upsert");
            busy += cpu() - c0;
            wall += t.elapsed();
            i += k;
        }
        (wall, busy)
    };
    // Give freed build memory back first, so the difference is the index's.
    // SAFETY: malloc_trim only releases free heap pages; no pointer is touched.
    unsafe { libc::malloc_trim(0) };
    let rss0 = rss_mb();
    let t = Instant::now();
    let c0 = cpu();
    let cat = Catalog::open(spec).expect("open");
    let (load, load_cpu) = (t.elapsed(), cpu() - c0);
    let built = n;
    assert!(cat.len().expect("len") > 0);
    let rss = rss_mb() - rss0;
    let mut time = |f: &mut dyn FnMut(&mut StdRng)| {
        let mut v = Vec::with_capacity(runs);
        let mut c = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let c0 = cpu();
            f(&mut rng);
            c.push(cpu() - c0);
            v.push(t.elapsed());
        }
        pct(v, c)
    };
    let a = time(&mut |rng| {
        let mut q = Query {
            facets: FacetSel::All,
            ..Query::default()
        };
        for f in ["source_id", "variable_id", "experiment_id"] {
            if rng.f64() < 0.6 {
                let card = FACETS.iter().find(|x| x.0 == f).map(|x| x.1).unwrap_or(1);
                q.filters.insert(f.into(), vec![value(f, zipf(rng, card))]);
            }
        }
        cat.query(&q).expect("query");
    });
    // Free text: the first query of each word asks the database for every match
    // (cold); later ones find the word's bitmap kept and ask only for newer ids.
    let mut cold = (Vec::new(), Vec::new());
    let mut seen = std::collections::HashSet::new();
    let b = time(&mut |rng| {
        let w = WORDS[rng.usize(0..WORDS.len())];
        let q = Query {
            text: Some(w.to_string()),
            facets: FacetSel::All,
            ..Query::default()
        };
        let (t, c0) = (Instant::now(), cpu());
        cat.query(&q).expect("query");
        if seen.insert(w) {
            cold.0.push(t.elapsed());
            cold.1.push(cpu() - c0);
        }
    });
    let b_cold = pct(cold.0, cold.1);
    let c = time(&mut |_| {
        cat.query(&Query {
            facets: FacetSel::All,
            ..Query::default()
        })
        .expect("query");
    });
    let d = time(&mut |rng| {
        let p = format!("variable_id{}", rng.u64(0..100));
        cat.autocomplete("variable_id", &p, 10, None)
            .expect("autocomplete");
    });
    Row {
        build_rate: built as f64 / build.as_secs_f64(),
        build_cpu_rate: built as f64 / build_cpu.as_secs_f64(),
        load_s: load.as_secs_f64(),
        load_cpu_s: load_cpu.as_secs_f64(),
        rss,
        a,
        b,
        b_cold,
        c,
        d,
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().expect("temp dir");
    // REUSE=1 KEEP=DIR: keep the SQLite catalog in DIR and reuse it when it holds N records.
    let spec = match std::env::var("KEEP") {
        Ok(d) => d,
        Err(_) => dir.path().join("cat").display().to_string(),
    };
    eprintln!("catalog bench: {n} records, {runs} runs per query; SQLite …");
    let lite = run(&spec, n, runs);
    if std::env::var("KEEP").is_err() {
        // Free the disk before PostgreSQL builds its copy.
        let _ = std::fs::remove_dir_all(&spec);
    }
    let skip_pg = std::env::var("PG").is_ok_and(|v| v == "0");
    if !skip_pg {
        eprintln!("PostgreSQL …");
    }
    let pg = match if skip_pg {
        Err("PG=0".to_string())
    } else {
        pgcluster::PgCluster::start()
    } {
        Ok(c) => {
            let url = c.create_db("bench");
            Some((run(&url, n, runs), c))
        }
        Err(e) => {
            eprintln!("PostgreSQL skipped: {e}");
            None
        }
    };
    let pgr = pg.as_ref().map(|p| &p.0);
    let col = |f: &dyn Fn(&Row) -> String| (f(&lite), pgr.map(f).unwrap_or_else(|| "-".into()));
    println!("| {n} records | SQLite (embedded) | PostgreSQL 15 |");
    println!("|---|---|---|");
    type Line<'a> = (&'a str, Box<dyn Fn(&Row) -> String>);
    let lines: [Line; 8] = [
        (
            "build, records/s (per CPU-s of the writer)",
            Box::new(|r: &Row| format!("{:.0} ({:.0})", r.build_rate, r.build_cpu_rate)),
        ),
        (
            "index load at open, s (CPU s)",
            Box::new(|r: &Row| format!("{:.2} ({:.2})", r.load_s, r.load_cpu_s)),
        ),
        (
            "RSS of the index (MB)",
            Box::new(|r: &Row| format!("{:.0}", r.rss)),
        ),
        (
            "(a) facet filter + counts, p50 / p99 ms (p50 CPU ms)",
            Box::new(|r: &Row| format!("{:.2} / {:.2} ({:.2})", r.a.0, r.a.1, r.a.2)),
        ),
        (
            "(b) free text + counts, p50 / p99 ms (p50 CPU ms)",
            Box::new(|r: &Row| format!("{:.2} / {:.2} ({:.2})", r.b.0, r.b.1, r.b.2)),
        ),
        (
            "(b0) free text, first query of a word, p50 ms (p50 CPU ms)",
            Box::new(|r: &Row| format!("{:.2} ({:.2})", r.b_cold.0, r.b_cold.2)),
        ),
        (
            "(c) facet counts only, p50 / p99 ms (p50 CPU ms)",
            Box::new(|r: &Row| format!("{:.2} / {:.2} ({:.2})", r.c.0, r.c.1, r.c.2)),
        ),
        (
            "(d) autocomplete, p50 / p99 ms (p50 CPU ms)",
            Box::new(|r: &Row| format!("{:.2} / {:.2} ({:.2})", r.d.0, r.d.1, r.d.2)),
        ),
    ];
    for (label, f) in lines.iter() {
        let (a, b) = col(f.as_ref());
        println!("| {label} | {a} | {b} |");
    }
}
