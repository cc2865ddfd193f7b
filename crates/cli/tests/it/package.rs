//! The Debian package (scripts/build-deb.sh): built from this checkout's binary,
//! installed with dpkg, its systemd unit checked by `systemd-analyze verify` (no
//! warning either), then the unit's own command line run as the package's user with
//! the unit's runtime directory and file limit — a node that answers on its socket and
//! stops on SIGTERM — and the package purged. Needs root and dpkg (CI runs as root);
//! only `GRANARY_SKIP_PACKAGE=1` skips, loudly.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn skip() -> bool {
    if std::env::var("GRANARY_SKIP_PACKAGE").as_deref() == Ok("1") {
        eprintln!("\n!!!!!!!! SKIPPED: package test (GRANARY_SKIP_PACKAGE=1); nothing was tested !!!!!!!!\n");
        return true;
    }
    assert!(
        rustix::process::geteuid().is_root(),
        "the package test installs a package: run as root (CI does), or set GRANARY_SKIP_PACKAGE=1"
    );
    false
}

fn run(c: &mut Command) -> String {
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Purges the package when the test ends, however it ends.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg")
            .args(["--purge", "granary"])
            .stdout(Stdio::null())
            .status();
    }
}

/// The value of `key=` in the unit's [Service] section.
fn unit_value<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("the unit has no {key}="))
}

#[test]
fn the_debian_package_installs_a_unit_that_verifies_and_a_node_that_runs() {
    if skip() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // `GRANARY_RELEASE_BIN` when set (another build to package), else this test
    // build's binary (optimised: decision 0112).
    let bin: PathBuf = std::env::var_os("GRANARY_RELEASE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_granary").into());
    let out = tempfile::tempdir().unwrap();
    let deb = run(Command::new("bash")
        .arg(root.join("scripts/build-deb.sh"))
        .arg("--binary")
        .arg(&bin)
        .arg("--out")
        .arg(out.path()));
    let deb = PathBuf::from(deb.trim());
    assert!(deb.is_file(), "no package at {}", deb.display());
    let contents = run(Command::new("dpkg-deb").arg("--contents").arg(&deb));
    for f in [
        "./usr/bin/granary",
        "./lib/systemd/system/granary.service",
        "./etc/granary/granary.toml",
        "./usr/share/doc/granary/README.md",
    ] {
        assert!(
            contents.contains(f),
            "{f} missing from the package:\n{contents}"
        );
    }
    let info = run(Command::new("dpkg-deb")
        .arg("--info")
        .arg(&deb)
        .arg("conffiles"));
    assert!(info.contains("/etc/granary/granary.toml"), "{info}");

    let _purge = Installed;
    run(Command::new("dpkg").arg("--install").arg(&deb));
    let user = run(Command::new("getent").args(["passwd", "granary"]));
    assert!(user.contains("/var/lib/granary"), "{user}");
    let installed = run(Command::new("/usr/bin/granary").arg("--version"));
    assert!(installed.starts_with("granary "), "{installed}");

    // The unit as systemd reads it: no error and no warning.
    let v = Command::new("systemd-analyze")
        .args(["verify", "/lib/systemd/system/granary.service"])
        .output()
        .expect("systemd-analyze");
    let warnings = String::from_utf8_lossy(&v.stderr);
    assert!(
        v.status.success() && warnings.trim().is_empty(),
        "systemd-analyze verify: {warnings}"
    );
    let unit = std::fs::read_to_string("/lib/systemd/system/granary.service").unwrap();
    assert_eq!(unit_value(&unit, "User"), "granary");
    assert_eq!(unit_value(&unit, "StateDirectory"), "granary");
    assert_eq!(unit_value(&unit, "RuntimeDirectory"), "granary");
    let nofile: u64 = unit_value(&unit, "LimitNOFILE").parse().unwrap();
    assert!(nofile >= 65536, "LimitNOFILE={nofile}");
    assert_eq!(unit_value(&unit, "StandardError"), "journal");

    // The unit's command, as systemd would start it: as the granary user, with
    // /run/granary made for it and the file limit raised. Only the HTTP listener is
    // moved off the default port, which other tests' nodes may hold.
    let exec = unit_value(&unit, "ExecStart");
    let argv: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(argv[0], "/usr/bin/granary");
    let run_dir = Path::new("/run/granary");
    std::fs::create_dir_all(run_dir).unwrap();
    run(Command::new("chown").args(["granary:granary", "/run/granary"]));
    // The unit's limit, or this machine's hard limit if that is lower (a sandbox
    // may forbid raising it even to root; systemd would).
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .maximum
        .unwrap_or(u64::MAX);
    let limit = nofile.min(hard);
    if limit < nofile {
        eprintln!("LimitNOFILE={nofile} capped at this machine's hard limit {hard}");
    }
    let mut node = Command::new("prlimit")
        .arg(format!("--nofile={limit}"))
        .args([
            "--",
            "setpriv",
            "--reuid=granary",
            "--regid=granary",
            "--init-groups",
            "--",
        ])
        .args(&argv)
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the installed node");
    let socket = run_dir.join("granary.sock");
    let started = Instant::now();
    while !socket.exists() {
        if let Ok(Some(s)) = node.try_wait() {
            let mut err = String::new();
            std::io::Read::read_to_string(node.stderr.as_mut().unwrap(), &mut err).ok();
            panic!("the installed node exited ({s}) before making its socket:\n{err}");
        }
        // A hang guard, not a measurement.
        assert!(started.elapsed() < Duration::from_secs(120), "no socket");
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = run(Command::new("/usr/bin/granary").args([
        "--data-dir",
        "/var/lib/granary",
        "--socket",
        "/run/granary/granary.sock",
        "status",
    ]));
    assert!(status.contains("uptime"), "{status}");
    // Its state went where the unit says, owned by its user: the publisher key
    // made at first start.
    let meta = std::fs::metadata("/var/lib/granary").unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&meta),
        user.split(':').nth(2).unwrap().parse::<u32>().unwrap()
    );
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(node.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let s = node.wait().unwrap();
    assert!(s.success(), "the node did not stop cleanly on SIGTERM: {s}");
    let _ = std::fs::remove_dir_all(run_dir);
}
