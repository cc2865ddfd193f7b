//! The fault-injection suite: a concurrent workload against a real
//! `granary daemon` while faults are injected, a history of every
//! operation's outcome, and a checker of the invariants over it (README.md).
//!
//! Everything runs the real binary ([`Config::bin`]) as separate processes;
//! the store crate is used only to read back which version a flipped file
//! held.
#![forbid(unsafe_code)]

mod env;
mod model;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

pub use env::Env;
use model::{Model, Presence};

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The `granary` binary.
    pub bin: PathBuf,
    /// Seed of every random choice (printed; the same seed makes the same
    /// choices, though the threads' interleaving differs from run to run).
    pub seed: u64,
    /// Operations to run (at least).
    pub ops: usize,
    /// Faults to inject (at least), spread over the operations.
    pub faults: usize,
    /// Concurrent client threads.
    pub workers: usize,
    /// Run the catalog on a throw-away PostgreSQL cluster (and restart it
    /// as a fault); otherwise the embedded SQLite catalog.
    pub pg: bool,
    /// Put the node's data directory on a loop-mounted ext4 file system
    /// and fill it as a fault (needs root, `mkfs.ext4`, `mount`).
    pub disk: bool,
    /// Upper bound of the workload phase; the run stops there even if the
    /// counts are not reached (reported).
    pub max_seconds: u64,
}

/// What a run did and found.
#[derive(Debug, Default)]
pub struct Report {
    pub seed: u64,
    /// Operations run, by kind: (acknowledged, failed, unknown outcome).
    pub ops: BTreeMap<String, [u64; 3]>,
    /// Faults injected, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Invariant violations found (empty: the run passed).
    pub violations: Vec<String>,
    /// Seconds of workload, and of recovery and checking.
    pub workload_seconds: f64,
    pub check_seconds: f64,
    /// Versions the checker verified at the end.
    pub versions_checked: usize,
    /// The first few error messages of failed operations, by kind.
    pub failures: BTreeMap<String, Vec<String>>,
}

impl Report {
    pub fn total_ops(&self) -> u64 {
        self.ops.values().map(|c| c[0] + c[1] + c[2]).sum()
    }
    pub fn total_faults(&self) -> u64 {
        self.faults.values().sum()
    }
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "seed": self.seed,
            "ops": self.total_ops(),
            "ops_by_kind": self.ops.iter().map(|(k, c)| (k.clone(), serde_json::json!({"acked": c[0], "failed": c[1], "unknown": c[2]}))).collect::<serde_json::Map<_, _>>(),
            "faults": self.total_faults(),
            "faults_by_kind": self.faults,
            "violations": self.violations,
            "workload_seconds": self.workload_seconds,
            "check_seconds": self.check_seconds,
            "versions_checked": self.versions_checked,
            "failures": self.failures,
        })
    }
}

/// How one client process ended.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// Exit 0.
    Acked,
    /// A non-zero exit (its stderr).
    Failed(String),
    /// Killed by the harness (or by a signal): the outcome is unknown.
    Killed,
    /// Did not end within the client timeout (killed then).
    Hung,
}

/// Client processes in flight, for `kill-client`.
#[derive(Default)]
pub(crate) struct InFlight(Mutex<BTreeMap<u32, &'static str>>);

const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);

/// Content of a put: `size` bytes from (seed, version, writer).
pub(crate) fn content(seed: u64, version: u64, writer: u64, size: usize) -> Vec<u8> {
    let s = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(version.wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(writer.wrapping_mul(0x94D0_49BB_1331_11EB));
    granary_store::chunking::noise(size, s)
}

pub(crate) fn sha(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

struct Shared {
    cfg: Config,
    env: Env,
    model: Mutex<Model>,
    report: Mutex<Report>,
    inflight: InFlight,
    done_ops: AtomicUsize,
    next_version: AtomicU64,
    next_name: AtomicU64,
    stop: AtomicBool,
    /// Names a mutating operation is working on.
    busy: Mutex<BTreeSet<String>>,
}

impl Shared {
    fn count(&self, kind: &str, o: &Outcome) {
        let mut r = self.report.lock().unwrap();
        let c = r.ops.entry(kind.to_string()).or_default();
        match o {
            Outcome::Acked => c[0] += 1,
            Outcome::Failed(_) => c[1] += 1,
            Outcome::Killed | Outcome::Hung => c[2] += 1,
        }
        if let Outcome::Hung = o {
            r.violations
                .push(format!("a {kind} did not end within {CLIENT_TIMEOUT:?}"));
        }
        if let Outcome::Failed(e) = o {
            let f = r.failures.entry(kind.to_string()).or_default();
            if f.len() < 4 {
                f.push(e.chars().take(300).collect());
            }
            if e.contains("panicked") {
                r.violations.push(format!("a {kind} panicked: {e}"));
            }
        }
    }

    fn violation(&self, mut v: String) {
        self.env.record(&serde_json::json!({"violation": v}));
        if v.len() > 600 {
            let mut cut = 600;
            while !v.is_char_boundary(cut) {
                cut -= 1;
            }
            v.truncate(cut);
            v.push('…');
        }
        eprintln!("faults: VIOLATION {v}");
        self.report.lock().unwrap().violations.push(v);
    }

    /// Runs one client process (args after the global ones), tracked for
    /// `kill-client`; its outcome goes to the history.
    fn client(&self, kind: &'static str, data_dir: &Path, args: &[String]) -> Outcome {
        let t = Instant::now();
        let o = self.client_run(kind, data_dir, args);
        self.env.record(&serde_json::json!({
            "kind": kind,
            "args": args,
            "ms": t.elapsed().as_millis() as u64,
            "outcome": match &o {
                Outcome::Acked => "acked".to_string(),
                Outcome::Failed(e) => format!("failed: {}", e.trim_end()),
                Outcome::Killed => "killed".to_string(),
                Outcome::Hung => "hung".to_string(),
            },
        }));
        o
    }

    fn client_run(&self, kind: &'static str, data_dir: &Path, args: &[String]) -> Outcome {
        let mut c = Command::new(&self.cfg.bin);
        c.arg("--data-dir")
            .arg(data_dir)
            .arg("--socket")
            .arg(&self.env.socket)
            .args(&self.env.catalog_args)
            .args(args)
            .env("GRANARY_LOG", "warn")
            .stdin(Stdio::null());
        run_tracked(c, kind, &self.inflight)
    }

    /// Locks `name` for a mutation; false when another operation has it.
    fn claim(&self, name: &str) -> bool {
        self.busy.lock().unwrap().insert(name.to_string())
    }
    fn release(&self, name: &str) {
        self.busy.lock().unwrap().remove(name);
    }
}

pub(crate) fn run_tracked(mut c: Command, kind: &'static str, inflight: &InFlight) -> Outcome {
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = match c.spawn() {
        Ok(ch) => ch,
        Err(e) => return Outcome::Failed(format!("cannot start: {e}")),
    };
    let pid = child.id();
    inflight.0.lock().unwrap().insert(pid, kind);
    let t = Instant::now();
    // The output is read on its own thread (a full pipe would block the
    // child), the exit waited for here with a deadline.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(o) => break Some(o),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if t.elapsed() > CLIENT_TIMEOUT => {
                kill(pid);
                let _ = rx.recv_timeout(Duration::from_secs(10));
                break None;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break None,
        }
    };
    inflight.0.lock().unwrap().remove(&pid);
    let Some(out) = out else {
        return Outcome::Hung;
    };
    let Ok(out) = out else {
        return Outcome::Failed("wait failed".into());
    };
    use std::os::unix::process::ExitStatusExt;
    if out.status.success() {
        Outcome::Acked
    } else if out.status.signal().is_some() {
        Outcome::Killed
    } else {
        Outcome::Failed(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

pub(crate) fn kill(pid: u32) {
    signal(pid, "KILL");
}

/// Sends a signal with kill(1) (no `unsafe`, no extra crate).
pub(crate) fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// True when running as root.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs the suite as `cfg` says.
pub fn run(cfg: &Config) -> Result<Report, String> {
    let env = Env::new(cfg)?;
    let shared = Arc::new(Shared {
        cfg: cfg.clone(),
        env,
        model: Mutex::new(Model::new(24)),
        report: Mutex::new(Report {
            seed: cfg.seed,
            ..Default::default()
        }),
        inflight: InFlight::default(),
        done_ops: AtomicUsize::new(0),
        next_version: AtomicU64::new(1_000),
        next_name: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        busy: Mutex::new(BTreeSet::new()),
    });
    shared.env.trust_publisher()?;
    shared.env.start_daemon()?;
    let t = Instant::now();
    let deadline = t + Duration::from_secs(cfg.max_seconds);
    let mut threads = Vec::new();
    for w in 0..cfg.workers.max(1) {
        let s = shared.clone();
        threads.push(std::thread::spawn(move || worker(&s, w as u64, deadline)));
    }
    let faults = {
        let s = shared.clone();
        std::thread::spawn(move || fault_loop(&s, deadline))
    };
    for th in threads {
        let _ = th.join();
    }
    shared.stop.store(true, Ordering::SeqCst);
    let _ = faults.join();
    let workload_seconds = t.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let checked = check(&shared);
    let mut report = std::mem::take(&mut *shared.report.lock().unwrap());
    report.workload_seconds = workload_seconds;
    report.check_seconds = t2.elapsed().as_secs_f64();
    report.versions_checked = checked;
    shared.env.stop_daemon();
    if !report.violations.is_empty() || std::env::var_os("GRANARY_FAULTS_KEEP").is_some() {
        eprintln!(
            "faults: the run's directory (history.jsonl, daemon logs, the store) is kept at {}",
            shared.env.keep().display()
        );
    }
    Ok(report)
}

fn worker(s: &Shared, w: u64, deadline: Instant) {
    let mut rng =
        fastrand::Rng::with_seed(s.cfg.seed ^ (w + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    loop {
        let done = s.done_ops.load(Ordering::SeqCst);
        let faults = s.report.lock().unwrap().total_faults() as usize;
        if (done >= s.cfg.ops && faults >= s.cfg.faults) || Instant::now() > deadline {
            return;
        }
        let r = rng.u32(0..100);
        let ran = if r < 34 {
            op_put(s, &mut rng)
        } else if r < 70 {
            op_get(s, &mut rng)
        } else if r < 80 {
            op_mv(s, &mut rng)
        } else if r < 92 {
            op_rm(s, &mut rng)
        } else {
            op_publish_dir(s, &mut rng)
        };
        if ran {
            s.done_ops.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A size: mostly small files, some of a few hundred KiB, a few of MiB.
fn size(rng: &mut fastrand::Rng) -> usize {
    match rng.u32(0..100) {
        0..=69 => rng.usize(1..48 * 1024),
        70..=94 => rng.usize(48 * 1024..512 * 1024),
        _ => rng.usize(512 * 1024..3 * 1024 * 1024),
    }
}

fn op_put(s: &Shared, rng: &mut fastrand::Rng) -> bool {
    let Some(name) = s.model.lock().unwrap().pick_name(rng, true) else {
        return false;
    };
    if !s.claim(&name) {
        return false;
    }
    let version = s.next_version.fetch_add(1, Ordering::SeqCst);
    // One put in six races a second writer of the same version with other
    // content: at most one may be acknowledged, and the stored version
    // must be wholly that one's.
    let writers: u64 = if rng.u32(0..6) == 0 { 2 } else { 1 };
    let n = size(rng);
    let mut files = Vec::new();
    let mut shas = Vec::new();
    for wr in 0..writers {
        let b = content(s.cfg.seed, version, wr, n);
        shas.push(sha(&b));
        let p = s.env.inputs.join(format!("{version}-{wr}"));
        if std::fs::write(&p, &b).is_err() {
            s.release(&name);
            return false;
        }
        files.push(p);
    }
    s.model
        .lock()
        .unwrap()
        .begin_put(version, &name, shas.clone());
    let outcomes: Vec<Outcome> = std::thread::scope(|sc| {
        let hs: Vec<_> = files
            .iter()
            .map(|f| {
                let args = vec![
                    "put".to_string(),
                    f.display().to_string(),
                    name.clone(),
                    "--version".into(),
                    version.to_string(),
                ];
                sc.spawn(move || s.client("put", &s.env.node, &args))
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or(Outcome::Killed))
            .collect()
    });
    let acked: Vec<usize> = outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| matches!(o, Outcome::Acked))
        .map(|(i, _)| i)
        .collect();
    if acked.len() > 1 {
        s.violation(format!(
            "{name} v={version}: {} writers were all told \"published\"",
            acked.len()
        ));
    }
    s.model
        .lock()
        .unwrap()
        .end_put(version, acked.first().map(|i| shas[*i]));
    for o in &outcomes {
        s.count("put", o);
    }
    for f in files {
        let _ = std::fs::remove_file(f);
    }
    s.release(&name);
    true
}

fn op_get(s: &Shared, rng: &mut fastrand::Rng) -> bool {
    let pick = s.model.lock().unwrap().pick_version(rng);
    let Some((name, version, expect)) = pick else {
        return false;
    };
    // Another application (its own data directory, over NDN through the
    // node) or the publisher (the verified local copy).
    let (dir, kind) = if rng.f64() < 0.75 {
        (&s.env.consumer, "get")
    } else {
        (&s.env.node, "get-local")
    };
    let out = s.env.outputs.join(format!(
        "{}-{}",
        version.unwrap_or_default(),
        s.next_name.fetch_add(1, Ordering::SeqCst)
    ));
    let uri = match version {
        Some(v) => format!("{name}/v={v}"),
        None => name.clone(),
    };
    let o = s.client(
        kind,
        dir,
        &[
            "get".into(),
            uri.clone(),
            "-o".into(),
            out.display().to_string(),
            "-q".into(),
        ],
    );
    if let Outcome::Acked = o {
        match std::fs::read(&out) {
            Ok(b) => {
                let h = sha(&b);
                if !expect.contains(&h) {
                    s.violation(format!(
                        "{kind} {uri} returned {} bytes that were never published under that name and version",
                        b.len()
                    ));
                }
            }
            Err(e) => s.violation(format!(
                "{kind} {uri} succeeded but its output is unreadable: {e}"
            )),
        }
    }
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(out.with_extension("part"));
    s.count(kind, &o);
    true
}

fn op_mv(s: &Shared, rng: &mut fastrand::Rng) -> bool {
    let Some(name) = s.model.lock().unwrap().pick_name(rng, false) else {
        return false;
    };
    if !s.claim(&name) {
        return false;
    }
    if !s.model.lock().unwrap().has_versions(&name) {
        s.release(&name);
        return false;
    }
    let to = format!("/faults/m{}", s.next_name.fetch_add(1, Ordering::SeqCst));
    s.claim(&to);
    let o = s.client("mv", &s.env.node, &["mv".into(), name.clone(), to.clone()]);
    s.model
        .lock()
        .unwrap()
        .moved(&name, &to, matches!(o, Outcome::Acked));
    s.count("mv", &o);
    s.release(&to);
    s.release(&name);
    true
}

fn op_rm(s: &Shared, rng: &mut fastrand::Rng) -> bool {
    let Some(name) = s.model.lock().unwrap().pick_name(rng, false) else {
        return false;
    };
    if !s.claim(&name) {
        return false;
    }
    let v = s.model.lock().unwrap().version_at(&name, rng);
    let Some(v) = v else {
        s.release(&name);
        return false;
    };
    let o = s.client(
        "rm",
        &s.env.node,
        &["rm".into(), name.clone(), "--version".into(), v.to_string()],
    );
    s.model
        .lock()
        .unwrap()
        .removed(v, matches!(o, Outcome::Acked));
    s.count("rm", &o);
    s.release(&name);
    true
}

fn op_publish_dir(s: &Shared, rng: &mut fastrand::Rng) -> bool {
    // Rerun an unfinished one first (as an operator would after a crash).
    let pending = if rng.f64() < 0.5 {
        s.model.lock().unwrap().unfinished_dir()
    } else {
        None
    };
    let k = match pending {
        Some(k) => k,
        None => {
            let k = s.next_name.fetch_add(1, Ordering::SeqCst);
            let dir = s.env.dirs.join(format!("pd{k}"));
            let files = rng.u64(8..40);
            let mut made = BTreeMap::new();
            for f in 0..files {
                let rel = format!("d{}/f{f}.dat", f % 3);
                let b = content(s.cfg.seed, 1 << 40 | k, f, rng.usize(1..24 * 1024));
                let p = dir.join(&rel);
                if std::fs::create_dir_all(p.parent().unwrap()).is_err()
                    || std::fs::write(&p, &b).is_err()
                {
                    return false;
                }
                made.insert(format!("/faults/pd{k}/{rel}"), sha(&b));
            }
            s.model.lock().unwrap().begin_dir(k, made);
            k
        }
    };
    if !s.claim(&format!("pd{k}")) {
        return false;
    }
    let dir = s.env.dirs.join(format!("pd{k}"));
    let o = s.client(
        "publish-dir",
        &s.env.node,
        &[
            "publish-dir".into(),
            dir.display().to_string(),
            "--others-under".into(),
            format!("/faults/pd{k}"),
            "--jobs".into(),
            "2".into(),
        ],
    );
    s.model
        .lock()
        .unwrap()
        .end_dir(k, matches!(o, Outcome::Acked));
    s.count("publish-dir", &o);
    s.release(&format!("pd{k}"));
    true
}

fn fault_loop(s: &Shared, deadline: Instant) {
    let mut rng = fastrand::Rng::with_seed(s.cfg.seed ^ 0xFA17_FA17_FA17_FA17);
    let every = (s.cfg.ops / s.cfg.faults.max(1)).max(1);
    let mut injected = 0usize;
    let mut tries = 0usize;
    let mut kinds: Vec<&str> = vec!["kill-daemon", "kill-client", "kill-client", "flip"];
    if s.cfg.pg {
        kinds.push("pg-restart");
    }
    if s.env.disk_full_possible() {
        kinds.push("disk-full");
    }
    while !s.stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        let done = s.done_ops.load(Ordering::SeqCst);
        if done < (injected + 1) * every && done < s.cfg.ops {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        if injected >= s.cfg.faults && done >= s.cfg.ops {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        // Every kind in turn, in an order the seed shuffles once a round:
        // each run meets every kind of fault.
        if injected % kinds.len() == 0 && tries == 0 {
            rng.shuffle(&mut kinds);
        }
        let kind = kinds[injected % kinds.len()];
        let ok = match kind {
            "kill-daemon" => {
                s.env.kill_daemon();
                std::thread::sleep(Duration::from_millis(rng.u64(0..500)));
                if let Err(e) = s.env.start_daemon() {
                    s.violation(format!("the daemon did not come back after a kill: {e}"));
                }
                true
            }
            "kill-client" => {
                let pids: Vec<u32> = s
                    .inflight
                    .0
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|(_, k)| !k.starts_with("get"))
                    .map(|(p, _)| *p)
                    .collect();
                if pids.is_empty() {
                    false
                } else {
                    kill(pids[rng.usize(0..pids.len())]);
                    true
                }
            }
            "flip" => flip(s, &mut rng),
            "pg-restart" => {
                let down = Duration::from_millis(rng.u64(1000..3000));
                match s.env.restart_pg(down) {
                    Ok(()) => true,
                    Err(e) => {
                        s.violation(format!("harness: PostgreSQL restart failed: {e}"));
                        false
                    }
                }
            }
            "disk-full" => {
                s.env.fill_disk(Duration::from_millis(rng.u64(1000..2000)));
                true
            }
            _ => false,
        };
        if ok {
            s.env.record(&serde_json::json!({"fault": kind}));
            injected += 1;
            tries = 0;
            *s.report
                .lock()
                .unwrap()
                .faults
                .entry(kind.to_string())
                .or_default() += 1;
        } else {
            // Nothing to act on yet (no client in flight, no stored file):
            // the same kind again shortly.
            tries += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Flips one byte of a stored data file and records which version it held.
fn flip(s: &Shared, rng: &mut fastrand::Rng) -> bool {
    let files = s.env.data_files();
    if files.is_empty() {
        return false;
    }
    let p = &files[rng.usize(0..files.len())];
    let Ok(m) = granary_store::meta::read(s.env.backend(), p) else {
        return false;
    };
    if m.size == 0 {
        return false;
    }
    let at = rng.u64(0..m.size);
    use std::os::unix::fs::FileExt;
    let Ok(f) = std::fs::OpenOptions::new().read(true).write(true).open(p) else {
        return false;
    };
    let mut b = [0u8; 1];
    if f.read_exact_at(&mut b, at).is_err() {
        return false;
    }
    b[0] ^= 0x5a;
    if f.write_all_at(&b, at).is_err() {
        return false;
    }
    let _ = f.sync_all();
    s.model.lock().unwrap().flipped(&m.name, m.version);
    true
}

/// Recovery, then the invariants over the final state. Returns the number
/// of versions verified.
fn check(s: &Shared) -> usize {
    if s.cfg.pg {
        if let Err(e) = s.env.ensure_pg() {
            s.violation(format!("harness: PostgreSQL did not come back: {e}"));
        }
    }
    s.env.release_disk();
    // A clean restart: the daemon's start-up recovery runs.
    s.env.kill_daemon();
    if let Err(e) = s.env.start_daemon() {
        s.violation(format!("the daemon did not start for the check: {e}"));
        return 0;
    }
    // Versions a killed client's daemon-side put was still committing are
    // settled by the restart; what is visible now is final.
    let listed = match s.env.list() {
        Ok(l) => l,
        Err(e) => {
            s.violation(format!("ls failed after recovery: {e}"));
            return 0;
        }
    };
    let model = s.model.lock().unwrap();
    for v in model.check_listing(&listed) {
        s.violation(v);
    }
    // Every visible version: fetched by another application, compared.
    let expect: Vec<(String, u64, Vec<[u8; 32]>, bool)> = listed
        .iter()
        .map(|(n, v)| {
            let (e, flipped) = model.expected(n, *v);
            (n.clone(), *v, e, flipped)
        })
        .collect();
    let flipped_present: BTreeSet<(String, u64)> = expect
        .iter()
        .filter(|x| x.3)
        .map(|x| (x.0.clone(), x.1))
        .collect();
    drop(model);
    let next = AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..3 {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some((n, v, e, flipped)) = expect.get(i) else {
                    return;
                };
                let out = s.env.outputs.join(format!("check-{i}"));
                let uri = format!("{n}/v={v}");
                let o = s.client(
                    "check-get",
                    &s.env.consumer,
                    &[
                        "get".into(),
                        uri.clone(),
                        "-o".into(),
                        out.display().to_string(),
                        "-q".into(),
                    ],
                );
                match o {
                    Outcome::Acked => {
                        let b = std::fs::read(&out).unwrap_or_default();
                        if !e.contains(&sha(&b)) {
                            s.violation(format!(
                                "{uri}: get returned {} bytes that were never published under it",
                                b.len()
                            ));
                        }
                    }
                    o if !flipped => s.violation(format!(
                        "{uri} is visible but does not verify for another application: {o:?}"
                    )),
                    _ => {}
                }
                let _ = std::fs::remove_file(&out);
            });
        }
    });
    // Damage: exactly the flipped versions that are still there.
    match s.env.scrub() {
        Ok(damaged) => {
            for d in &damaged {
                if !flipped_present.contains(d) {
                    s.violation(format!(
                        "{}/v={} is damaged though no byte of it was flipped",
                        d.0, d.1
                    ));
                }
            }
            for f in &flipped_present {
                if !damaged.contains(f) {
                    s.violation(format!(
                        "{}/v={}: a flipped byte that scrub did not find",
                        f.0, f.1
                    ));
                }
            }
        }
        Err(e) => s.violation(format!("repo scrub failed: {e}")),
    }
    // The catalog follows the files (it may need a moment to drain what
    // was queued while PostgreSQL was down).
    let t = Instant::now();
    loop {
        match s.env.catalog_check() {
            Ok(()) => break,
            Err(e) if t.elapsed() > Duration::from_secs(60) => {
                s.violation(format!(
                    "the catalog differs from the files after recovery: {e}"
                ));
                break;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
    let _ = Presence::Must;
    expect.len()
}
