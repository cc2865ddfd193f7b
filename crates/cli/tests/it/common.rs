//! Shared helpers for tests that run real peer libraries (python-ndn, NDNts).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

pub fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop")
}

/// The python with python-ndn installed (tests/interop/.venv, made by
/// scripts/setup-test-deps.sh). Missing is a failure, never a skip.
pub fn python() -> PathBuf {
    let p = interop_dir().join(".venv/bin/python");
    assert!(
        p.exists(),
        "{} missing: run scripts/setup-test-deps.sh (the README's test command does)",
        p.display()
    );
    p
}

pub fn node_script(name: &str) -> Command {
    let dir = interop_dir().join("ndnts");
    assert!(
        dir.join("node_modules/@ndn/packet").exists(),
        "NDNts not installed in {}: run scripts/setup-test-deps.sh",
        dir.display()
    );
    let mut c = Command::new("node");
    c.arg(dir.join(name));
    c
}

pub fn python_script(name: &str) -> Command {
    let mut c = Command::new(python());
    c.arg(interop_dir().join("python").join(name));
    c
}

pub fn run(mut c: Command) {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot start {c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?} failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn read_jsonl(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l}: {e}")))
        .collect()
}

pub fn write_jsonl(p: &Path, v: &[Value]) {
    let mut s = String::new();
    for x in v {
        s.push_str(&serde_json::to_string(x).unwrap());
        s.push('\n');
    }
    std::fs::write(p, s).unwrap();
}

/// Deterministic pseudo-random bytes, for test files whose content must
/// not repeat by accident.
#[allow(unused_imports)] // not every test file uses it
pub use granary_store::chunking::noise;

pub fn granary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_granary"))
}

/// A `granary daemon` process for a test; SIGTERM on drop.
pub struct Daemon {
    pub child: std::process::Child,
    pub dir: tempfile::TempDir,
    /// The daemon's data directory (`dir` unless started with `start_at`).
    pub data: PathBuf,
    pub socket: PathBuf,
    pub tcp: Option<String>,
    pub udp: Option<String>,
    /// The HTTP gateway's address (`IP:PORT`), when started with `--http`.
    pub http: Option<String>,
    /// The WebSocket listener's address, when started with `--listen ws://…`.
    pub ws: Option<String>,
    /// The HTTPS gateway's address and certificate file, when started with `--https`.
    pub https: Option<(String, PathBuf)>,
}

impl Daemon {
    /// Starts a daemon with extra args (e.g. `--listen tcp://127.0.0.1:0`)
    /// and waits for it to say `ready`.
    pub fn start(extra: &[&str]) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().to_path_buf();
        Self::start_at(dir, data, extra)
    }

    /// Starts a daemon on an existing data directory.
    pub fn start_at(dir: tempfile::TempDir, data: PathBuf, extra: &[&str]) -> Daemon {
        Self::start_with_stderr(dir, data, extra, std::process::Stdio::inherit())
    }

    /// [`Daemon::start_at`], its standard error going to `stderr` (a file the
    /// test reads, e.g.).
    pub fn start_with_stderr(
        dir: tempfile::TempDir,
        data: PathBuf,
        extra: &[&str],
        stderr: std::process::Stdio,
    ) -> Daemon {
        Self::start_cmd(granary(), dir, data, extra, stderr)
    }

    /// [`Daemon::start`] from `GRANARY_RELEASE_BIN` when set (a release build to
    /// try), else from this test build, which is optimised (decision 0112): for
    /// tests whose subject is how the node behaves at speed.
    #[allow(dead_code)] // not every test file uses it
    pub fn start_release(extra: &[&str]) -> Daemon {
        let bin = std::env::var_os("GRANARY_RELEASE_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_granary").into());
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().to_path_buf();
        Self::start_cmd(
            Command::new(bin),
            dir,
            data,
            extra,
            std::process::Stdio::inherit(),
        )
    }

    fn start_cmd(
        mut cmd: Command,
        dir: tempfile::TempDir,
        data: PathBuf,
        extra: &[&str],
        stderr: std::process::Stdio,
    ) -> Daemon {
        use std::io::BufRead;
        let socket = data.join("g.sock");
        let mut child = cmd
            .args([
                "--data-dir",
                data.to_str().unwrap(),
                "--socket",
                socket.to_str().unwrap(),
                "daemon",
            ])
            .args(extra)
            // Tests never take the gateway's fixed default port: only those
            // that ask for it (`--http 127.0.0.1:0`) get a gateway.
            .args(if extra.contains(&"--http") {
                &[][..]
            } else {
                &["--http", "off"][..]
            })
            .env("GRANARY_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let mut lines = std::io::BufReader::new(out).lines();
        let (mut tcp, mut udp, mut http, mut ws, mut https) = (None, None, None, None, None);
        loop {
            let l = lines.next().expect("daemon exited before ready").unwrap();
            if let Some(a) = l.strip_prefix("listening tcp://") {
                tcp = Some(a.to_string());
            }
            if let Some(a) = l.strip_prefix("listening udp://") {
                udp = Some(a.to_string());
            }
            if let Some(a) = l.strip_prefix("listening ws://") {
                ws = Some(a.to_string());
            }
            if let Some(a) = l.strip_prefix("gateway http://") {
                http = Some(a.trim_end_matches('/').to_string());
            }
            // `gateway https://IP:PORT/ (certificate: PATH, for REQUESTS_CA_BUNDLE)`
            if let Some(a) = l.strip_prefix("gateway https://") {
                let (addr, rest) = a.split_once(' ').unwrap_or((a, ""));
                let cert = rest
                    .strip_prefix("(certificate: ")
                    .and_then(|r| r.split_once(", for"))
                    .map(|(c, _)| PathBuf::from(c))
                    .unwrap_or_default();
                https = Some((addr.trim_end_matches('/').to_string(), cert));
            }
            if l == "ready" {
                break;
            }
        }
        Daemon {
            child,
            dir,
            data,
            socket,
            tcp,
            udp,
            http,
            ws,
            https,
        }
    }

    /// A granary client command against this daemon (its data directory
    /// and socket), to spawn or run as the test needs.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = granary();
        c.args([
            "--data-dir",
            self.data.to_str().unwrap(),
            "--socket",
            self.socket.to_str().unwrap(),
        ])
        .args(args);
        c
    }

    /// Runs a granary client command against this daemon.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        self.command(args).output().unwrap()
    }

    /// Like `cli`, asserting success and returning stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.cli(args);
        assert!(
            o.status.success(),
            "granary {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    /// Starts `granary serve PREFIX ...` on this daemon; waits for `ready`.
    pub fn serve(&self, prefix: &str, extra: &[&str]) -> Producer {
        use std::io::BufRead;
        let mut child = granary()
            .args(["--socket", self.socket.to_str().unwrap(), "serve", prefix])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let mut lines = std::io::BufReader::new(out).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "ready");
        let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let s2 = served.clone();
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                if l.starts_with("served ") {
                    s2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
        });
        Producer { child, served }
    }

    /// A counter from `cs info` (entries, hits, misses…).
    pub fn cs_stat(&self, key: &str) -> u64 {
        let s = self.ok(&["cs", "info"]);
        s.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key} in {s}"))
            .parse()
            .unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// A producer process.
pub struct Producer {
    pub child: std::process::Child,
    pub served: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Producer {
    pub fn served(&self) -> usize {
        self.served.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The served count once it has reached `want` (or after 3 s): the count
    /// is read from the producer's output by a thread that can lag behind
    /// the Data the test already received. A short pause after reaching it
    /// lets any extra (unexpected) answer show up too.
    pub fn served_at_least(&self, want: usize) -> usize {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while self.served() < want && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        self.served()
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A throw-away PostgreSQL cluster (the catalog crate's test helper).
#[path = "../../../catalog/tests/it/common/pgcluster.rs"]
pub mod pgcluster;

/// A site node on loopback: a TCP listener, `--node-prefix prefix`, and
/// `extra` daemon flags.
pub fn site(prefix: &str, extra: &[&str]) -> Daemon {
    Daemon::start(
        &[
            &["--listen", "tcp://127.0.0.1:0", "--node-prefix", prefix][..],
            extra,
        ]
        .concat(),
    )
}

/// A federation's shared catalog: a throw-away PostgreSQL cluster with one
/// database, and a site config file every site started with
/// [`SharedCatalog::site`] reads (e.g. a short `node_timeout`).
pub struct SharedCatalog {
    /// The cluster (stopped and removed on drop).
    pub pg: pgcluster::PgCluster,
    /// `postgres://…` of the database.
    pub url: String,
    /// The site config file.
    pub config: PathBuf,
    _dir: tempfile::TempDir,
}

impl SharedCatalog {
    /// Starts a cluster with database `db`; `config` is the sites' config
    /// file's text.
    pub fn start(db: &str, config: &str) -> SharedCatalog {
        let pg = pgcluster::PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
        let url = pg.create_db(db);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("site.toml");
        std::fs::write(&path, config).unwrap();
        SharedCatalog {
            pg,
            url,
            config: path,
            _dir: dir,
        }
    }

    /// A [`site`] on this catalog (`--catalog URL --config FILE`), with
    /// `extra` daemon flags.
    pub fn site(&self, prefix: &str, extra: &[&str]) -> Daemon {
        site(
            prefix,
            &[
                &[
                    "--catalog",
                    self.url.as_str(),
                    "--config",
                    self.config.to_str().unwrap(),
                ][..],
                extra,
            ]
            .concat(),
        )
    }
}

/// A node the tests drive through its CLI: a loopback [`Daemon`], or a
/// node in a network namespace (tests/netns, which implements this where
/// it is used).
pub trait Cli {
    /// Runs `granary ARGS` against the node; its stdout, or a panic.
    fn run_ok(&self, args: &[&str]) -> String;
    /// A scratch directory of the node's.
    fn scratch(&self) -> &Path;
}

impl Cli for Daemon {
    fn run_ok(&self, args: &[&str]) -> String {
        self.ok(args)
    }
    fn scratch(&self) -> &Path {
        self.dir.path()
    }
}

/// A router's `hinted forwarded N` counter (`granary status`).
pub fn hinted(d: &impl Cli) -> u64 {
    status_count(d, "hinted")
}

/// The first number after the word that follows `line` in `d`'s `status`
/// (`interests in N`, `hinted forwarded N`).
pub fn status_count(d: &impl Cli, line: &str) -> u64 {
    let s = d.run_ok(&["status"]);
    s.lines()
        .find_map(|l| l.strip_prefix(line))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {line} counter in {s}"))
}

/// `granary federation status --json`'s nodes: (prefix, up), in its order.
pub fn nodes_up(status: &Value) -> Vec<(String, bool)> {
    status["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("no nodes in {status}"))
        .iter()
        .map(|n| (n["prefix"].as_str().unwrap().to_string(), n["up"] == true))
        .collect()
}

/// `tcp4://IP:PORT` of `d`'s TCP listener (started with `--listen tcp://…`).
pub fn tcp(d: &Daemon) -> String {
    format!("tcp4://{}", d.tcp.as_ref().unwrap())
}

/// `to` trusts `from`'s publisher key (its default key, made at the
/// daemon's first start).
pub fn trust(from: &impl Cli, to: &impl Cli) {
    let cert = from.scratch().join("pub.cert");
    std::fs::write(&cert, from.run_ok(&["key", "export"])).unwrap();
    to.run_ok(&["key", "trust", cert.to_str().unwrap()]);
}

/// Every file under `dir`, as paths relative to it, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// Copies the CMIP6 example tree `example` (from `granary example-data`)
/// into `tree` `copies` times: as it is, then under member ids r101i1p1f1,
/// r102i1p1f1, … (directory and file name), so many distinct files.
pub fn copy_under_members(example: &Path, tree: &Path, copies: usize) {
    for rel in files_under(example) {
        let c: Vec<String> = rel
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        for k in 0..copies {
            let mut c = c.clone();
            if k > 0 {
                let member = c[5].clone();
                let new = format!("r{}i1p1f1", 100 + k);
                let n = c.len() - 1;
                c[n] = c[n].replace(&format!("_{member}_"), &format!("_{new}_"));
                c[5] = new;
            }
            let out: PathBuf = tree.join(c.iter().collect::<PathBuf>());
            std::fs::create_dir_all(out.parent().unwrap()).unwrap();
            std::fs::copy(example.join(&rel), &out).unwrap();
        }
    }
}

/// The 326 real CMIP6 files of PyPI `esmvaltool-sample-data` (installed in
/// tests/interop/.venv by scripts/setup-test-deps.sh), in their DRS tree.
#[allow(dead_code)]
pub fn sample_root() -> PathBuf {
    let lib = interop_dir().join(".venv/lib");
    for e in std::fs::read_dir(&lib).expect("tests/interop/.venv: run scripts/setup-test-deps.sh") {
        let p = e
            .expect("venv entry")
            .path()
            .join("site-packages/esmvaltool_sample_data/data/timeseries");
        if p.is_dir() {
            return p;
        }
    }
    panic!(
        "esmvaltool-sample-data is not in {}: run scripts/setup-test-deps.sh",
        lib.display()
    );
}

/// Runs `c`, killing it if it has not finished within `limit` (a hang fails
/// the test instead of stalling the suite).
pub fn run_within(mut c: Command, limit: std::time::Duration) -> std::process::Output {
    let child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg(id.to_string()).status();
            panic!("command did not finish within {limit:?}: a hang");
        }
    }
}
