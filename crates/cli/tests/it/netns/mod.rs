//! Shared set-up for the network-namespace tests: they need root and
//! iproute2. Missing either is a failure with the reason; only an explicit
//! `GRANARY_SKIP_NETNS=1` skips them, loudly.
#![allow(dead_code)]

use granary_testbed::{Options, Testbed};

/// The `granary` binary the testbed runs: `GRANARY_NETNS_BIN` when set (another
/// build to try), else this test build's, which is optimised (decision 0112), so the
/// testbed does not depend on how slowly an unoptimised build copes with a busy
/// machine.
pub fn bin() -> std::ffi::OsString {
    std::env::var_os("GRANARY_NETNS_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_granary").into())
}

/// Tests of one binary take turns: measured delays and rates must not
/// depend on what the other tests in the binary do at the same time.
pub static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A testbed and the turn of the calling test (hold both to the end), or
/// None when the user asked to skip netns tests.
pub fn testbed(
    opts: impl FnOnce(&mut Options),
) -> Option<(Testbed, std::sync::MutexGuard<'static, ()>)> {
    if std::env::var("GRANARY_SKIP_NETNS").as_deref() == Ok("1") {
        eprintln!(
            "\n!!!!!!!! SKIPPED: netns test (GRANARY_SKIP_NETNS=1); nothing was tested !!!!!!!!\n"
        );
        return None;
    }
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let mut o = Options::new(bin());
    opts(&mut o);
    match Testbed::new(o) {
        Ok(t) => Some((t, turn)),
        Err(e) => panic!(
            "{e}\nThe netns tests need root and iproute2 (CI runs as root). \
             Set GRANARY_SKIP_NETNS=1 to skip them explicitly."
        ),
    }
}

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use granary_testbed::HostId;

/// A `granary daemon` running inside a testbed host (stopped with the
/// testbed). Its Unix socket is a path, so CLI commands reach it from the
/// root namespace.
pub struct Node {
    pub dir: tempfile::TempDir,
    pub data: PathBuf,
    pub socket: PathBuf,
    /// The daemon's pid (`ip netns exec` execs it, so it is the child's).
    pub pid: u32,
}

pub fn granary() -> Command {
    Command::new(bin())
}

impl Node {
    /// Starts a daemon in `host` with a UDP listener on 0.0.0.0:6363 plus
    /// `extra` daemon flags; waits for `ready`.
    pub fn start(tb: &mut granary_testbed::Testbed, host: HostId, extra: &[&str]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().to_path_buf();
        let socket = data.join("g.sock");
        let pid = Self::spawn(tb, host, &data, &socket, extra);
        Node {
            dir,
            data,
            socket,
            pid,
        }
    }

    /// Kills the daemon (SIGKILL: no goodbye to anyone) and waits until
    /// its process is gone.
    pub fn kill(&self) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &self.pid.to_string()])
            .status();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // The testbed reaps it (it adopted the child); until then it is a
        // zombie, whose state is Z.
        while std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .is_ok_and(|s| !s.contains(") Z "))
        {
            assert!(
                std::time::Instant::now() < end,
                "pid {} still runs",
                self.pid
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Starts the daemon again in `host` on the same data directory and
    /// socket (after [`Node::kill`]).
    pub fn restart(&mut self, tb: &mut granary_testbed::Testbed, host: HostId, extra: &[&str]) {
        self.pid = Self::spawn(tb, host, &self.data, &self.socket, extra);
    }

    fn spawn(
        tb: &mut granary_testbed::Testbed,
        host: HostId,
        data: &std::path::Path,
        socket: &std::path::Path,
        extra: &[&str],
    ) -> u32 {
        use std::io::BufRead;
        let mut c = tb.command(host, bin());
        c.args([
            "--data-dir",
            data.to_str().unwrap(),
            "--socket",
            socket.to_str().unwrap(),
            "daemon",
            "--listen",
            "udp://0.0.0.0:6363",
        ])
        .args(extra)
        .env("GRANARY_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        let mut child = c.spawn().unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        loop {
            let l = lines.next().expect("daemon exited before ready").unwrap();
            if l == "ready" {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines.by_ref() {});
        let pid = child.id();
        tb.adopt(child);
        pid
    }

    pub fn cli(&self, args: &[&str]) -> Output {
        granary()
            .args([
                "--data-dir",
                self.data.to_str().unwrap(),
                "--socket",
                self.socket.to_str().unwrap(),
            ])
            .args(args)
            .output()
            .unwrap()
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.cli(args);
        assert!(
            o.status.success(),
            "granary {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }
}
