//! The environment a run works in: the node (a real daemon on its data
//! directory, optionally on a small loop-mounted file system), another
//! application's data directory, a throw-away PostgreSQL cluster, and the
//! faults that act on them.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::Config;

pub struct Env {
    bin: PathBuf,
    base: tempfile::TempDir,
    /// The node's data directory.
    pub node: PathBuf,
    /// Another application's data directory (fetches through the node).
    pub consumer: PathBuf,
    pub socket: PathBuf,
    pub inputs: PathBuf,
    pub outputs: PathBuf,
    /// Source trees for `publish-dir`.
    pub dirs: PathBuf,
    /// `--catalog URL` when on PostgreSQL.
    pub catalog_args: Vec<String>,
    daemon: Mutex<Option<Child>>,
    starts: Mutex<u32>,
    pg: Option<Pg>,
    /// Mount point of the loop file system, when there is one.
    mnt: Option<PathBuf>,
    ballast: Mutex<Option<PathBuf>>,
    history: Mutex<std::fs::File>,
    keep: std::sync::atomic::AtomicBool,
}

fn sh(c: &mut Command) -> Result<(), String> {
    let out = c.output().map_err(|e| format!("{c:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{c:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl Env {
    pub fn new(cfg: &Config) -> Result<Env, String> {
        let base = tempfile::Builder::new()
            .prefix("granary-faults-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let b = base.path();
        let mut mnt = None;
        let node = if cfg.disk {
            let img = b.join("disk.img");
            let m = b.join("fs");
            std::fs::create_dir_all(&m).map_err(|e| e.to_string())?;
            sh(Command::new("truncate").args(["-s", "384M"]).arg(&img))?;
            sh(Command::new("mkfs.ext4")
                .args(["-q", "-F", "-m", "0"])
                .arg(&img))?;
            sh(Command::new("mount").args(["-o", "loop"]).arg(&img).arg(&m))?;
            mnt = Some(m.clone());
            m.join("node")
        } else {
            b.join("node")
        };
        let (consumer, inputs, outputs, dirs) = (
            b.join("consumer"),
            b.join("in"),
            b.join("out"),
            b.join("src"),
        );
        for d in [&node, &consumer, &inputs, &outputs, &dirs] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let pg = if cfg.pg { Some(Pg::create(b)?) } else { None };
        let catalog_args = match &pg {
            Some(p) => vec!["--catalog".to_string(), p.url.clone()],
            None => Vec::new(),
        };
        Ok(Env {
            bin: cfg.bin.clone(),
            socket: node.join("g.sock"),
            node,
            consumer,
            inputs,
            outputs,
            dirs,
            catalog_args,
            daemon: Mutex::new(None),
            starts: Mutex::new(0),
            pg,
            mnt,
            ballast: Mutex::new(None),
            history: Mutex::new(
                std::fs::File::create(b.join("history.jsonl")).map_err(|e| e.to_string())?,
            ),
            keep: Default::default(),
            base,
        })
    }

    fn granary(&self, data_dir: &Path) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--data-dir")
            .arg(data_dir)
            .arg("--socket")
            .arg(&self.socket)
            .args(&self.catalog_args)
            .env("GRANARY_LOG", "warn")
            .stdin(Stdio::null());
        c
    }

    /// Appends one event to the history (`<run dir>/history.jsonl`).
    pub fn record(&self, event: &serde_json::Value) {
        use std::io::Write;
        let mut h = self.history.lock().unwrap();
        let _ = writeln!(h, "{event}");
    }

    /// Keeps the run's directory (history, daemon logs, the store) for a
    /// look after a failure; returns its path.
    pub fn keep(&self) -> PathBuf {
        self.keep.store(true, std::sync::atomic::Ordering::SeqCst);
        self.base.path().to_path_buf()
    }

    /// Makes the node's publisher key and has the other application trust
    /// it (as an operator does once: `key gen`, `key export`, `key trust`).
    pub fn trust_publisher(&self) -> Result<(), String> {
        let cert = self.base.path().join("publisher.ndncert");
        let id = "/faults/publisher";
        for (dir, args) in [
            (&self.node, vec!["key", "gen", id]),
            (
                &self.node,
                vec!["key", "export", "-o", cert.to_str().unwrap_or_default()],
            ),
            (
                &self.consumer,
                vec!["key", "trust", cert.to_str().unwrap_or_default(), "--yes"],
            ),
        ] {
            sh(self.granary(dir).args(&args))?;
        }
        Ok(())
    }

    /// Starts the daemon and waits for `ready` (retrying for a while: a
    /// restart may meet the catalog's database restarting too).
    pub fn start_daemon(&self) -> Result<(), String> {
        let t = Instant::now();
        let mut last = String::new();
        while t.elapsed() < Duration::from_secs(60) {
            match self.try_start() {
                Ok(c) => {
                    *self.daemon.lock().unwrap() = Some(c);
                    return Ok(());
                }
                Err(e) => {
                    last = e;
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
        }
        Err(last)
    }

    fn try_start(&self) -> Result<Child, String> {
        let n = {
            let mut s = self.starts.lock().unwrap();
            *s += 1;
            *s
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.base.path().join(format!("daemon-{n}.log")))
            .map_err(|e| e.to_string())?;
        let mut c = self.granary(&self.node);
        c.args(["daemon", "--http", "off"])
            .stdout(Stdio::piped())
            .stderr(log);
        let mut child = c.spawn().map_err(|e| format!("start daemon: {e}"))?;
        let out = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut ready = false;
            for l in std::io::BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if !ready && l == "ready" {
                    ready = true;
                    let _ = tx.send(());
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(()) => Ok(child),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(self.base.path().join(format!("daemon-{n}.log")))
                    .unwrap_or_default();
                Err(format!("daemon did not become ready: {log}"))
            }
        }
    }

    pub fn kill_daemon(&self) {
        if let Some(mut c) = self.daemon.lock().unwrap().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn stop_daemon(&self) {
        if let Some(mut c) = self.daemon.lock().unwrap().take() {
            crate::signal(c.id(), "TERM");
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Every stored data file (`objects/…/@<version>`).
    pub fn data_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![self.node.join("repo/objects")];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(p),
                    Ok(t) if t.is_file() => {
                        let n = e.file_name();
                        let n = n.to_string_lossy();
                        if n.len() > 1
                            && n.starts_with('@')
                            && n[1..].bytes().all(|b| b.is_ascii_digit())
                        {
                            out.push(p);
                        }
                    }
                    _ => {}
                }
            }
        }
        out.sort();
        out
    }

    /// The store's metadata back end (xattrs where the file system has them).
    pub fn backend(&self) -> granary_store::Backend {
        match std::fs::read_to_string(self.node.join("repo/backend")) {
            Ok(s) if s.trim() == "sidecar" => granary_store::Backend::Sidecar,
            _ => granary_store::Backend::Xattr,
        }
    }

    /// `granary ls /faults`: (name, version) of every visible version.
    pub fn list(&self) -> Result<Vec<(String, u64)>, String> {
        let out = self
            .granary(&self.node)
            .args(["ls", "/faults"])
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let mut v = Vec::new();
        for l in String::from_utf8_lossy(&out.stdout).lines() {
            let first = l.split(' ').next().unwrap_or_default();
            let Some((n, ver)) = first.rsplit_once("/v=") else {
                return Err(format!("ls printed {l:?}"));
            };
            let ver = ver.parse().map_err(|_| format!("ls printed {l:?}"))?;
            v.push((n.to_string(), ver));
        }
        Ok(v)
    }

    /// `granary repo scrub /faults --json`: the damaged versions.
    pub fn scrub(&self) -> Result<std::collections::BTreeSet<(String, u64)>, String> {
        let out = self
            .granary(&self.node)
            .args(["repo", "scrub", "/faults", "--json"])
            .output()
            .map_err(|e| e.to_string())?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
            format!(
                "scrub printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        let mut set = std::collections::BTreeSet::new();
        for r in v["reports"].as_array().into_iter().flatten() {
            let bad = r["bad"].as_array().is_some_and(|b| !b.is_empty());
            let problems = r["problems"].as_array().is_some_and(|b| !b.is_empty());
            if bad || problems {
                set.insert((
                    r["name"].as_str().unwrap_or_default().to_string(),
                    r["version"].as_u64().unwrap_or_default(),
                ));
            }
        }
        Ok(set)
    }

    /// `granary catalog check`: Ok when the catalog equals the files.
    pub fn catalog_check(&self) -> Result<(), String> {
        let out = self
            .granary(&self.node)
            .args(["catalog", "check"])
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    pub fn disk_full_possible(&self) -> bool {
        self.mnt.is_some()
    }

    /// Fills the node's file system for `hold`, then frees it.
    pub fn fill_disk(&self, hold: Duration) {
        let Some(m) = &self.mnt else { return };
        let p = m.join("ballast");
        if let Ok(f) = std::fs::File::create(&p) {
            *self.ballast.lock().unwrap() = Some(p.clone());
            if let Ok(st) = rustix::fs::fstatvfs(&f) {
                let free = st.f_bavail * st.f_frsize;
                let _ = rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, free);
                // Whatever fallocate left (its own rounding), taken in
                // small pieces.
                let mut off = free;
                while rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), off, 4096)
                    .is_ok()
                {
                    off += 4096;
                }
            }
            std::thread::sleep(hold);
        }
        self.release_disk();
    }

    pub fn release_disk(&self) {
        if let Some(p) = self.ballast.lock().unwrap().take() {
            let _ = std::fs::remove_file(p);
        }
    }

    pub fn restart_pg(&self, down: Duration) -> Result<(), String> {
        let Some(pg) = &self.pg else { return Ok(()) };
        pg.stop()?;
        std::thread::sleep(down);
        pg.start()
    }

    pub fn ensure_pg(&self) -> Result<(), String> {
        match &self.pg {
            Some(pg) if !pg.running() => pg.start(),
            _ => Ok(()),
        }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.kill_daemon();
        drop(self.pg.take());
        if self.keep.load(std::sync::atomic::Ordering::SeqCst) {
            // Left mounted and in place for a look.
            let _ =
                std::mem::replace(&mut self.base, tempfile::tempdir().expect("a temp dir")).keep();
            return;
        }
        if let Some(m) = &self.mnt {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
    }
}

/// A throw-away PostgreSQL cluster (as the `postgres` user when root),
/// stopped and started by the `pg-restart` fault on the same port.
struct Pg {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    url: String,
}

impl Pg {
    fn create(base: &Path) -> Result<Pg, String> {
        let debian = Path::new("/usr/lib/postgresql/15/bin");
        let bin = if debian.join("initdb").exists() {
            debian.to_path_buf()
        } else {
            std::env::var_os("PATH")
                .and_then(|p| std::env::split_paths(&p).find(|d| d.join("initdb").exists()))
                .ok_or("PostgreSQL (initdb) not found: run scripts/setup-test-deps.sh")?
        };
        let as_postgres = crate::is_root();
        let dir = base.join("pg");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        if as_postgres {
            sh(Command::new("chown").arg("postgres:postgres").arg(&dir))?;
            // The cluster's directory is inside the run's temp directory.
            sh(Command::new("chmod").arg("755").arg(base))?;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let pg = Pg {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            dir,
            bin,
            port,
            as_postgres,
        };
        let d = pg.dir.display();
        let b = pg.bin.display();
        pg.run(&format!(
            "{b}/initdb -D {d}/data -A trust -U postgres >{d}/initdb.log 2>&1"
        ))?;
        pg.start()?;
        Ok(pg)
    }

    fn run(&self, script: &str) -> Result<(), String> {
        if self.as_postgres {
            sh(Command::new("su").args(["postgres", "-c", script]))
        } else {
            sh(Command::new("sh").args(["-c", script]))
        }
    }

    fn start(&self) -> Result<(), String> {
        let (d, b, port) = (self.dir.display(), self.bin.display(), self.port);
        self.run(&format!(
            "{b}/pg_ctl -D {d}/data -l {d}/server.log -w -o '-p {port} -c listen_addresses=127.0.0.1 -k {d} -c fsync=off' start >/dev/null"
        ))
    }

    fn stop(&self) -> Result<(), String> {
        let (d, b) = (self.dir.display(), self.bin.display());
        self.run(&format!(
            "{b}/pg_ctl -D {d}/data -m fast -w stop >/dev/null"
        ))
    }

    fn running(&self) -> bool {
        let (d, b) = (self.dir.display(), self.bin.display());
        self.run(&format!("{b}/pg_ctl -D {d}/data status >/dev/null"))
            .is_ok()
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let (d, b) = (self.dir.display(), self.bin.display());
        let _ = self.run(&format!(
            "{b}/pg_ctl -D {d}/data -m immediate -w stop >/dev/null 2>&1"
        ));
    }
}
