//! What the netns benchmarks share: a Granary daemon started inside a
//! testbed host, the CLI pointed at it, and a child process run with its
//! peak RSS sampled.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use granary_testbed::{HostId, Testbed};

/// A daemon in a testbed host.
pub struct Node {
    /// Its data directory (in the shared temp dir).
    pub dir: PathBuf,
    /// Its Unix socket.
    pub socket: PathBuf,
    /// Its process id.
    pub pid: u32,
}

/// Starts `g daemon --listen udp://0.0.0.0:6363 EXTRA…` in `host` and waits
/// until it is ready; the testbed owns the process.
pub fn start_node<S: AsRef<std::ffi::OsStr>>(
    tb: &mut Testbed,
    host: HostId,
    g: &Path,
    tag: &str,
    extra: &[S],
) -> Node {
    let dir = std::env::temp_dir().join(format!(
        "granary-{tag}-bench-{}-{}",
        std::process::id(),
        tb.host_name(host)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("g.sock");
    let mut c = tb.command(host, g);
    c.args(["--data-dir", dir.to_str().unwrap()])
        .args(["--socket", socket.to_str().unwrap()])
        .args(["daemon", "--listen", "udp://0.0.0.0:6363"])
        .args(extra)
        .env("GRANARY_LOG", "warn")
        .stdout(Stdio::piped());
    let mut child = c.spawn().expect("start daemon");
    let pid = child.id();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    for l in lines.by_ref() {
        if l.unwrap() == "ready" {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines.by_ref() {});
    tb.adopt(child);
    Node { dir, socket, pid }
}

/// The CLI `g` pointed at node `n`, with `args`.
pub fn cmd(g: &Path, n: &Node, args: &[&str]) -> Command {
    let mut c = Command::new(g);
    c.args(["--data-dir", n.dir.to_str().unwrap()])
        .args(["--socket", n.socket.to_str().unwrap()])
        .args(args);
    c
}

/// Runs the CLI against `n`; panics with its stderr unless it succeeds.
pub fn cli(g: &Path, n: &Node, args: &[&str]) -> String {
    let o = cmd(g, n, args).output().unwrap();
    assert!(
        o.status.success(),
        "granary {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Peak RSS (VmHWM) of a process, KiB; 0 once it is gone.
pub fn vm_hwm_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// What [`run_sampled`] saw.
pub struct Sampled {
    pub stdout: String,
    pub stderr: String,
    /// Peak RSS, KiB.
    pub peak_kib: u64,
    /// Wall time, seconds.
    pub secs: f64,
    pub ok: bool,
}

/// Runs `c` to the end, sampling its peak RSS every 20 ms.
pub fn run_sampled(mut c: Command) -> Sampled {
    let t = Instant::now();
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let read_all = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            r.read_to_string(&mut s).ok();
            s
        })
    };
    let ho = read_all(Box::new(child.stdout.take().unwrap()));
    let he = read_all(Box::new(child.stderr.take().unwrap()));
    let mut peak_kib = 0;
    let status = loop {
        peak_kib = peak_kib.max(vm_hwm_kib(pid));
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Sampled {
        secs: t.elapsed().as_secs_f64(),
        stdout: ho.join().unwrap(),
        stderr: he.join().unwrap(),
        peak_kib,
        ok: status.success(),
    }
}
