//! `bench/federation.sh`, part 4: the location catalog on PostgreSQL (a throw-away
//! cluster, `fsync` on) at N locations held by K nodes, through the catalog's own
//! code (`Catalog::register_locations`, `Catalog::locate`).
//!
//! N/2 CMIP6-like names, each held by two of the K nodes. The K nodes register at
//! once, each on its own connection, in batches of BATCH locations (one transaction
//! each), until all N are in or LOAD_S seconds have passed (then the size reached is
//! reported). Then RUNS lookups (`locate`, the highest version on up nodes) of
//! random registered names, one after another on one connection: p50 and p99. The
//! PostgreSQL server's CPU seconds (postmaster and its backends) per phase.
//!
//! Usage: location_bench [N=10000000] [NODES=20]   (env BATCH=10000, LOAD_S=300, RUNS=2000)

#[path = "../tests/it/common/pgcluster.rs"]
mod pgcluster;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use granary_catalog::{Catalog, NewLocation};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The name of the `i`th file: a CMIP6 DRS path.
fn name(i: u64) -> String {
    format!(
        "/cmip6/CMIP/inst{}/model{}/historical/r{}i1p1f1/Amon/var{}/gn/v2019{:04}/file{i}.nc",
        i % 50,
        i % 100,
        i % 10 + 1,
        i % 1000,
        i % 1231
    )
}

/// The two nodes holding name `i` (distinct).
fn holders(i: u64, k: u64) -> (u64, u64) {
    let a = i % k;
    let b = (a + 1 + (i / k) % (k - 1)) % k;
    (a, b)
}

fn node(k: u64) -> String {
    format!("/site/n{k:02}")
}

/// CPU seconds used so far by the PostgreSQL server: the postmaster, its reaped
/// children (backends that exited) and its live children.
fn pg_cpu(postmaster: u32, tick: f64) -> f64 {
    let fields = |pid: &str| -> Option<Vec<u64>> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = &s[s.rfind(')')? + 2..];
        // rest starts at field 3 (state); ppid is field 4, utime 14 … cstime 17.
        let f: Vec<&str> = rest.split_whitespace().collect();
        Some(
            [1usize, 11, 12, 13, 14]
                .iter()
                .map(|&j| f.get(j).and_then(|v| v.parse().ok()).unwrap_or(0))
                .collect(),
        )
    };
    let mut ticks = 0u64;
    if let Some(f) = fields(&postmaster.to_string()) {
        ticks += f[1] + f[2] + f[3] + f[4];
    }
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let pid = e.file_name().to_string_lossy().to_string();
            if !pid.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            if let Some(f) = fields(&pid) {
                if f[0] == postmaster as u64 {
                    ticks += f[1] + f[2];
                }
            }
        }
    }
    ticks as f64 / tick
}

fn clock_tick() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

fn digest(i: u64) -> String {
    format!(
        "{:016x}{:016x}{:016x}{:016x}",
        i,
        i ^ 0x5555,
        i * 31,
        i * 17
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let k: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
        .max(2);
    let batch = env("BATCH", 10_000).max(1) as usize;
    let load_s = env("LOAD_S", 300);
    let runs = env("RUNS", 2000).max(1);
    let names = n / 2;
    let tick = clock_tick();

    let pg = pgcluster::PgCluster::start_durable().unwrap_or_else(|e| {
        eprintln!("PostgreSQL: {e}");
        std::process::exit(2)
    });
    let url = pg.create_db("locations");
    let pm = pg.postmaster_pid().expect("postmaster.pid");
    let cat = Catalog::open_unindexed(&url).expect("open the catalog");
    for j in 0..k {
        cat.heartbeat(&node(j), true).expect("heartbeat");
    }
    eprintln!("location bench: {n} locations ({names} names × 2 holders) of {k} nodes, batches of {batch}, at most {load_s} s …");

    // Registration: K nodes at once, each its own connection.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let cpu0 = pg_cpu(pm, tick);
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(load_s);
    let threads: Vec<_> = (0..k)
        .map(|me| {
            let url = url.clone();
            let stop = stop.clone();
            let done = done.clone();
            std::thread::spawn(move || -> u64 {
                let c = Catalog::open_unindexed(&url).expect("open the catalog");
                let mine = node(me);
                let mut buf = Vec::with_capacity(batch);
                // Every name below `reached` that this node holds is registered.
                let mut reached = 0;
                for i in 0..names {
                    let (a, b) = holders(i, k);
                    if a == me || b == me {
                        buf.push(NewLocation {
                            name: name(i),
                            version: 1_700_000_000_000_000 + i % 7,
                            node: mine.clone(),
                            manifest_digest: Some(digest(i)),
                        });
                    }
                    if buf.len() == batch || i + 1 == names {
                        c.register_locations(&buf).expect("register");
                        done.fetch_add(buf.len() as u64, Ordering::Relaxed);
                        buf.clear();
                        reached = i + 1;
                        if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                            stop.store(true, Ordering::Relaxed);
                            break;
                        }
                    }
                }
                reached
            })
        })
        .collect();
    // Progress on stderr: the rate per million, to see where it falls off.
    let mut next = 1_000_000u64;
    let mut last = (0u64, 0.0f64, cpu0);
    while !threads.iter().all(|t| t.is_finished()) {
        std::thread::sleep(Duration::from_millis(200));
        let d = done.load(Ordering::Relaxed);
        if d >= next {
            let t = t0.elapsed().as_secs_f64();
            let c = pg_cpu(pm, tick);
            eprintln!(
                "  {d} locations at {t:.1} s: {:.0}/s over the last {}, PostgreSQL CPU {:.1} µs each",
                (d - last.0) as f64 / (t - last.1),
                d - last.0,
                (c - last.2) / (d - last.0) as f64 * 1e6
            );
            last = (d, t, c);
            next = d + 1_000_000;
        }
    }
    let reached: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let load = t0.elapsed().as_secs_f64();
    let cpu_load = pg_cpu(pm, tick) - cpu0;
    let loaded = done.load(Ordering::Relaxed);
    let complete = reached.iter().copied().min().unwrap_or(0);

    let mut admin = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let bytes: i64 = admin
        .query_one("SELECT pg_total_relation_size('locations')", &[])
        .unwrap()
        .get(0);
    let rows: i64 = admin
        .query_one("SELECT count(*) FROM locations", &[])
        .unwrap()
        .get(0);
    assert_eq!(
        rows as u64, loaded,
        "rows in the table = locations registered"
    );

    // Lookups of names both holders have registered.
    let mut rng = fastrand::Rng::with_seed(7);
    let timeout = Duration::from_secs(3600);
    let cpu1 = pg_cpu(pm, tick);
    let mut lat = Vec::with_capacity(runs as usize);
    let t1 = Instant::now();
    for _ in 0..runs {
        let i = rng.u64(0..complete.max(1));
        let t = Instant::now();
        let l = cat.locate(&name(i), None, timeout).expect("locate");
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(l.len(), 2, "two holders of {}", name(i));
    }
    let look = t1.elapsed().as_secs_f64();
    let cpu_look = pg_cpu(pm, tick) - cpu1;
    lat.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];

    println!(
        "loaded {loaded} of {n} locations in {load:.1} s{}",
        if loaded < n { " (LOAD_S reached)" } else { "" }
    );
    println!(
        "registration: {:.0} locations/s ({k} nodes at once, batches of {batch}); PostgreSQL CPU {cpu_load:.1} s ({:.1} µs per location)",
        loaded as f64 / load,
        cpu_load / loaded as f64 * 1e6
    );
    println!(
        "table + indexes: {:.2} GiB ({rows} rows)",
        bytes as f64 / (1u64 << 30) as f64
    );
    println!(
        "lookup (locate, 1 connection, {runs} random names): p50 {:.3} ms, p99 {:.3} ms; PostgreSQL CPU {:.2} s ({:.0} µs per lookup) over {look:.1} s",
        pct(0.5),
        pct(0.99),
        cpu_look,
        cpu_look / runs as f64 * 1e6
    );
    drop(cat);
    drop(admin);
    drop(pg);
}
