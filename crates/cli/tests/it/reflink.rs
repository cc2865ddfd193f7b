//! Reflink ingest: on a file system that shares extents (XFS here, made by
//! the test on a loop device), `granary put FILE` clones the file into the
//! store instead of copying it, then reads it once to hash it. Needs root,
//! `mkfs.xfs` (xfsprogs; scripts/setup-test-deps.sh installs it) and a loop
//! device; a missing one is a failure, not a skip.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use granary_store::chunking::write_noise;

/// An XFS file system (reflink=1) on a loop device, unmounted on drop.
struct Xfs {
    _dir: tempfile::TempDir,
    mnt: PathBuf,
}

fn sh(c: &mut Command) -> String {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Xfs {
    fn new(mib: u64) -> Xfs {
        assert!(
            Command::new("mkfs.xfs").arg("-V").output().is_ok(),
            "mkfs.xfs not found: run scripts/setup-test-deps.sh (installs xfsprogs)"
        );
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("xfs.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let f = std::fs::File::create(&img).unwrap();
        f.set_len(mib << 20).unwrap();
        sh(Command::new("mkfs.xfs")
            .args(["-q", "-f", "-m", "reflink=1"])
            .arg(&img));
        sh(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt));
        Xfs { _dir: dir, mnt }
    }

    /// Bytes used on the file system.
    fn used(&self) -> u64 {
        let out = sh(Command::new("df")
            .args(["-B1", "--output=used"])
            .arg(&self.mnt));
        out.lines().last().unwrap().trim().parse().unwrap()
    }
}

impl Drop for Xfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

fn put(data: &Path, socket: &Path, src: &Path, name: &str, extra: &[&str]) -> String {
    let out = granary()
        .args(["--data-dir", data.to_str().unwrap()])
        .args(["--socket", socket.to_str().unwrap()])
        .args(["put", src.to_str().unwrap(), name])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "put: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn put_on_xfs_reflinks_instead_of_copying() {
    let fs = Xfs::new(512);
    let data = fs.mnt.join("data");
    std::fs::create_dir(&data).unwrap();
    let src = fs.mnt.join("src.bin");
    let len = 48 << 20;
    write_noise(&src, len as u64, 7).unwrap();
    let original = std::fs::read(&src).unwrap();

    // 1. No daemon: the CLI ingests into the data directory itself.
    let before = fs.used();
    let msg = put(&data, &data.join("none.sock"), &src, "/x/cli", &[]);
    let grew = fs.used().saturating_sub(before);
    assert!(msg.contains("reflinked: no data copied"), "{msg}");
    assert!(
        grew < (len as u64) / 8,
        "a reflinked 48 MiB file used {grew} more bytes"
    );

    // 2. Through a running daemon on the same file system.
    let d = Daemon::start_at(tempfile::tempdir().unwrap(), data.clone(), &[]);
    let before = fs.used();
    let msg = put(&d.data, &d.socket, &src, "/x/daemon", &["--sha256"]);
    let grew = fs.used().saturating_sub(before);
    assert!(msg.contains("reflinked by the daemon"), "{msg}");
    assert!(grew < (len as u64) / 8, "daemon reflink used {grew} bytes");

    // Copy-on-write: changing the source afterwards changes neither version;
    // both are fetched and verified against their manifests.
    Command::new("dd")
        .args([
            "if=/dev/zero",
            "bs=4096",
            "count=16",
            "seek=100",
            "conv=notrunc",
        ])
        .arg(format!("of={}", src.display()))
        .output()
        .unwrap();
    assert_ne!(std::fs::read(&src).unwrap(), original);
    for name in ["/x/cli", "/x/daemon"] {
        let out = d.data.join("out.bin");
        d.ok(&["get", name, "-o", out.to_str().unwrap()]);
        assert!(
            std::fs::read(&out).unwrap() == original,
            "{name} changed with its source"
        );
        std::fs::remove_file(&out).unwrap();
    }
    let stat = d.ok(&["stat", "/x/daemon"]);
    let sha = sha256_hex(&original);
    assert!(
        stat.contains(&sha),
        "hashes describe the stored bytes:\n{stat}"
    );
    drop(d);
}

/// On a file system without reflink (the test's temp dir), put copies.
#[test]
fn put_elsewhere_copies() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    write_noise(&src, 100_000, 3).unwrap();
    let on_xfs = sh(Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(dir.path()));
    let msg = put(
        dir.path(),
        &dir.path().join("none.sock"),
        &src,
        "/y/f",
        &["--sha256"],
    );
    if on_xfs.trim() != "xfs" && on_xfs.trim() != "btrfs" {
        assert!(!msg.contains("reflinked"), "{msg}");
    }
    assert!(msg.contains("published 100000 bytes"), "{msg}");
    // The kernel's copy is what was hashed: the whole-file hash asked for
    // is that of the source, and the stored file is byte-identical.
    let sha = sha256_hex(&std::fs::read(&src).unwrap());
    assert!(msg.contains(&sha), "{msg}");
    let store = granary_store::Store::open(dir.path().join("repo")).unwrap();
    let e = store
        .get(&granary_packet::Name::from_uri("/y/f").unwrap(), None)
        .unwrap();
    assert_eq!(
        std::fs::read(&e.path).unwrap(),
        std::fs::read(&src).unwrap()
    );
    // Without --sha256 no whole-file pass is made.
    let msg = put(dir.path(), &dir.path().join("none.sock"), &src, "/y/g", &[]);
    assert!(!msg.contains("sha256"), "{msg}");
}

fn sha256_hex(b: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b)?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout)[..64].to_string()
}
