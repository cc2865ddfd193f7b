//! A throw-away PostgreSQL cluster in a temporary directory on a free loopback port,
//! stopped and removed on drop (also when a test fails). Runs the server as the
//! `postgres` user when we are root (PostgreSQL refuses to run as root).
#![allow(dead_code)] // each user (tests, the benchmark) needs a part of it

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct PgCluster {
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
    started: bool,
    /// `fsync=off` (tests: nothing to keep across a crash); a benchmark turns it on.
    no_fsync: bool,
}

fn bin_dir() -> Option<PathBuf> {
    let debian = Path::new("/usr/lib/postgresql/15/bin");
    if debian.join("initdb").exists() {
        return Some(debian.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p).find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
    })
}

impl PgCluster {
    pub fn start() -> Result<PgCluster, String> {
        Self::start_with(true)
    }

    /// As [`PgCluster::start`], with the server's default `fsync=on` (what a
    /// deployment runs: commits wait for the disk).
    pub fn start_durable() -> Result<PgCluster, String> {
        Self::start_with(false)
    }

    fn start_with(no_fsync: bool) -> Result<PgCluster, String> {
        let bin = bin_dir().ok_or(
            "PostgreSQL binaries (initdb, pg_ctl) not found: run scripts/setup-test-deps.sh (as root it installs postgresql)",
        )?;
        let uid = Command::new("id")
            .arg("-u")
            .output()
            .map_err(|e| format!("id -u: {e}"))?;
        let as_postgres = String::from_utf8_lossy(&uid.stdout).trim() == "0";
        let dir = tempfile::Builder::new()
            .prefix("granary-pg-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        if as_postgres {
            let ok = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(dir.path())
                .status()
                .map_err(|e| format!("chown: {e}"))?;
            if !ok.success() {
                return Err("chown postgres failed (is there a postgres user?)".into());
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("free port: {e}"))?
            .port();
        let mut c = PgCluster {
            dir,
            port,
            as_postgres,
            started: false,
            no_fsync,
        };
        let d = c.dir.path().display().to_string();
        let b = bin.display();
        c.run(&format!(
            "{b}/initdb -D {d}/data -A trust -U postgres >{d}/initdb.log 2>&1"
        ))?;
        c.resume()?;
        Ok(c)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory of the server's Unix socket (`.s.PGSQL.<port>`):
    /// reachable from every network namespace of the machine, since they
    /// share the file system.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's postmaster process id (from `postmaster.pid`).
    pub fn postmaster_pid(&self) -> Option<u32> {
        let s = std::fs::read_to_string(self.dir.path().join("data/postmaster.pid")).ok()?;
        s.lines().next()?.trim().parse().ok()
    }

    /// Stops the server (fast shutdown: clients are disconnected), keeping its data.
    pub fn stop(&mut self) -> Result<(), String> {
        let bin = bin_dir().ok_or("PostgreSQL binaries not found")?;
        let d = self.dir.path().display().to_string();
        self.run(&format!(
            "{}/pg_ctl -D {d}/data -m fast -w stop >/dev/null",
            bin.display()
        ))?;
        self.started = false;
        Ok(())
    }

    /// Starts the server (again) on the same port and socket directory.
    pub fn resume(&mut self) -> Result<(), String> {
        let bin = bin_dir().ok_or("PostgreSQL binaries not found")?;
        let d = self.dir.path().display().to_string();
        let port = self.port;
        let fsync = if self.no_fsync { " -c fsync=off" } else { "" };
        self.run(&format!(
            "{}/pg_ctl -D {d}/data -l {d}/server.log -w -o '-p {port} -c listen_addresses=127.0.0.1 -k {d}{fsync}' start >/dev/null",
            bin.display()
        ))?;
        self.started = true;
        Ok(())
    }

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
            let ilog =
                std::fs::read_to_string(self.dir.path().join("initdb.log")).unwrap_or_default();
            return Err(format!(
                "{sh} failed: {}{}\n{ilog}\n{log}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    /// Makes a login role `user` with `password` that must give it over TCP
    /// (scram-sha-256; every other login stays `trust`), and returns the
    /// URL of database `db` as that user without the password.
    pub fn password_login(&self, user: &str, password: &str, db: &str) -> String {
        let admin = format!("postgres://postgres@127.0.0.1:{}/postgres", self.port);
        let mut c = postgres::Client::connect(&admin, postgres::NoTls)
            .expect("connect to the test cluster");
        // `user` and `password` are the harness's own identifiers, never user input.
        c.batch_execute(&format!(
            "SET password_encryption = 'scram-sha-256'; CREATE ROLE {user} LOGIN PASSWORD '{password}'"
        ))
        .expect("create role");
        let hba = self.dir.path().join("data/pg_hba.conf");
        let old = std::fs::read_to_string(&hba).expect("pg_hba.conf");
        std::fs::write(
            &hba,
            format!("host all {user} 127.0.0.1/32 scram-sha-256\n{old}"),
        )
        .expect("write pg_hba.conf");
        c.batch_execute("SELECT pg_reload_conf()").expect("reload");
        format!("postgres://{user}@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates a database and returns its URL.
    pub fn create_db(&self, name: &str) -> String {
        let admin = format!("postgres://postgres@127.0.0.1:{}/postgres", self.port);
        let mut c = postgres::Client::connect(&admin, postgres::NoTls)
            .expect("connect to the test cluster");
        // `name` is the harness's own identifier, never user input.
        c.batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create database");
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        if self.started {
            let d = self.dir.path().display().to_string();
            let bin = bin_dir()
                .map(|b| format!("{}/", b.display()))
                .unwrap_or_default();
            let _ = self.run(&format!(
                "{bin}pg_ctl -D {d}/data -m immediate -w stop >/dev/null 2>&1"
            ));
        }
    }
}
