//! The shared catalog on PostgreSQL's own high availability: a primary and
//! a streaming standby (`pg_basebackup -R -c fast`), two nodes whose `--catalog` is
//! the multi-host URL `postgres://…@P1,P2/db?target_session_attrs=read-write`.
//! The primary is stopped: the nodes go on (publishing, fetching over NDN,
//! replicating), their catalog registrations are queued on disk; the standby
//! is promoted: the nodes reconnect by themselves and the queued
//! registrations arrive. A wrong catalog URL stops the daemon at start with
//! a clear error.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn bin_dir() -> PathBuf {
    let debian = Path::new("/usr/lib/postgresql/15/bin");
    if debian.join("pg_basebackup").exists() {
        return debian.to_path_buf();
    }
    std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).find(|d| d.join("pg_basebackup").exists()))
        .expect("PostgreSQL (pg_basebackup) not found: run scripts/setup-test-deps.sh")
}

/// A streaming standby of a primary on 127.0.0.1, made with
/// `pg_basebackup -R`, in a temporary directory; stopped on drop (also used
/// by federation_walkthrough.rs).
pub(crate) struct Standby {
    /// Its data directory, log and socket.
    dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub(crate) port: u16,
    as_postgres: bool,
}

impl Standby {
    fn run(&self, sh: &str) -> Result<(), String> {
        let out = if self.as_postgres {
            Command::new("su").args(["postgres", "-c", sh]).output()
        } else {
            Command::new("sh").args(["-c", sh]).output()
        }
        .map_err(|e| format!("{sh}: {e}"))?;
        if !out.status.success() {
            let log =
                std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
            return Err(format!(
                "{sh} failed: {}{}\n{log}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    pub(crate) fn of(primary_port: u16) -> Standby {
        let as_postgres =
            String::from_utf8_lossy(&Command::new("id").arg("-u").output().unwrap().stdout).trim()
                == "0";
        let dir = tempfile::Builder::new()
            .prefix("granary-pg-standby-")
            .tempdir()
            .unwrap();
        if as_postgres {
            assert!(Command::new("chown")
                .arg("postgres:postgres")
                .arg(dir.path())
                .status()
                .unwrap()
                .success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let s = Standby {
            dir,
            port,
            as_postgres,
        };
        let (b, d) = (bin_dir().display().to_string(), s.dir.path().display());
        s.run(&format!(
            "{b}/pg_basebackup -h 127.0.0.1 -p {primary_port} -U postgres -D {d}/data -R -X stream -c fast >{d}/basebackup.log 2>&1"
        ))
        .unwrap();
        s.run(&format!(
            "{b}/pg_ctl -D {d}/data -l {d}/server.log -w -o '-p {port} -c listen_addresses=127.0.0.1 -k {d} -c fsync=off' start >/dev/null"
        ))
        .unwrap();
        s
    }

    /// The directory of its Unix socket (`.s.PGSQL.<port>`).
    pub(crate) fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn promote(&self) {
        let (b, d) = (bin_dir().display().to_string(), self.dir.path().display());
        self.run(&format!("{b}/pg_ctl -D {d}/data -w promote >/dev/null"))
            .unwrap();
    }
}

impl Drop for Standby {
    fn drop(&mut self) {
        let (b, d) = (bin_dir().display().to_string(), self.dir.path().display());
        let _ = self.run(&format!(
            "{b}/pg_ctl -D {d}/data -m immediate -w stop >/dev/null 2>&1"
        ));
    }
}

fn put(d: &Daemon, url: &str, file: &Path, name: &str) -> Value {
    let o = d.cli(&[
        "--catalog",
        url,
        "put",
        "--json",
        file.to_str().unwrap(),
        name,
    ]);
    assert!(
        o.status.success(),
        "put {name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Names of the records in the catalog at `url` (asked of PostgreSQL itself).
fn records(url: &str) -> Vec<String> {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    c.query("SELECT name FROM records ORDER BY name", &[])
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect()
}

#[test]
fn the_nodes_survive_a_primary_failover_and_their_queued_registrations_arrive() {
    let mut primary = pgcluster::PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
    let one = primary.create_db("granary_ha");
    let standby = Standby::of(primary.port());
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/granary_ha?target_session_attrs=read-write",
        primary.port(),
        standby.port
    );
    let promoted = format!("postgres://postgres@127.0.0.1:{}/granary_ha", standby.port);
    let work = tempfile::tempdir().unwrap();
    let cat = ["--catalog", url.as_str()];
    let a = site("/site/a", &cat);
    let b = site("/site/b", &cat);
    a.ok(&["route", "add", "/site/b", &tcp(&b)]);
    b.ok(&["route", "add", "/site/a", &tcp(&a)]);
    let f = work.path().join("f.bin");
    let bytes = granary_store::chunking::noise(100_000, 4);
    std::fs::write(&f, &bytes).unwrap();
    let v = put(&a, &url, &f, "/ha/before");
    assert_eq!(v["catalog"], "done", "{v}");
    trust(&a, &b);
    assert_eq!(records(&one), ["/ha/before"]);

    // The primary goes away; the standby is read-only (the URL wants a
    // read-write session): no catalog can take a write.
    primary.stop().unwrap();
    let mut queued = Vec::new();
    for k in 0..3 {
        let name = format!("/ha/during{k}");
        let v = put(&a, &url, &f, &name);
        assert_eq!(v["catalog"], "queued", "{v}");
        queued.push(name);
    }
    // Fetching needs no catalog: B fetches A's file over NDN, verified.
    let out = work.path().join("before.out");
    let o = b.cli(&[
        "get",
        "/ha/before",
        "--fwhint",
        "/site/a",
        "-o",
        out.to_str().unwrap(),
        "--no-publish",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
    // Replicating goes on; B's location registration is queued.
    let o = run_within(
        a.command(&["replicate", "--json", "/ha/during0", "--to", "/site/b"]),
        Duration::from_secs(120),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["state"], "done", "{r}");
    assert_eq!(r["catalog"], "queued", "{r}");
    assert!(
        std::fs::read_dir(b.data.join("catalog-queue"))
            .unwrap()
            .count()
            > 0
    );

    // The standby is promoted: the nodes find it by the same URL and the
    // queued registrations arrive, without a restart.
    standby.promote();
    let t = Instant::now();
    let want: Vec<String> = std::iter::once("/ha/before".to_string())
        .chain(queued.iter().cloned())
        .collect();
    loop {
        let got = records(&promoted);
        if got == want {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "queued registrations not in the promoted catalog after {:?}: {got:?}",
            t.elapsed()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("caught up {:?} after the promotion", t.elapsed());
    // Both queues are empty, and new writes go straight to the new primary.
    let t = Instant::now();
    while std::fs::read_dir(b.data.join("catalog-queue"))
        .map(|d| d.count() > 0)
        .unwrap_or(false)
    {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "B's queue not drained"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let v = put(&a, &url, &f, "/ha/after");
    assert_eq!(v["catalog"], "done", "{v}");
    assert!(records(&promoted).contains(&"/ha/after".to_string()));
    let o = a.cli(&["search", "--json", "during2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_wrong_catalog_url_stops_the_daemon_at_start_with_a_clear_error() {
    let pg = pgcluster::PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
    for (url, says) in [
        ("postgres://h1:notaport/x", "invalid"),
        (
            &*format!("postgres://postgres@127.0.0.1:{}/no_such_db", pg.port()),
            "no_such_db",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let o = granary()
            .args([
                "--data-dir",
                dir.path().to_str().unwrap(),
                "--catalog",
                url,
                "daemon",
                "--http",
                "off",
            ])
            .output()
            .unwrap();
        assert!(!o.status.success(), "{url}: the daemon started");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(says) && err.contains("--catalog URL is wrong"),
            "{url}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // A server that is only down does not stop the node: it says so and runs.
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = dir.path().join("daemon.log");
    let d = Daemon::start_with_stderr(
        tempfile::tempdir().unwrap(),
        dir.path().join("data"),
        &[
            "--catalog",
            &format!("postgres://postgres@127.0.0.1:{port}/granary"),
        ],
        std::process::Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("catalog unreachable at start"), "{text}");
    assert!(text.contains("catalog-queue"), "{text}");
    drop(d);
}
