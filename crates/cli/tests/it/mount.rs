//! `granary mount`: real daemons, a real FUSE mount, real readers (Python,
//! netCDF4, cp, find, sha256sum) against the original files.
//!
//! Needs /dev/fuse (root, or a user allowed to mount). Without it the tests
//! say so loudly and skip, except under CI=true, where that is a failure.

use crate::common;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{noise, tcp, trust, Daemon};

fn rnd(seed: u64, n: usize) -> Vec<u8> {
    noise(n, seed)
}

/// Linux errno values the tests expect.
const ENOENT: i32 = 2;
const EIO: i32 = 5;
const EROFS: i32 = 30;

fn fuse_available() -> bool {
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        Ok(_) => true,
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!(
                    "/dev/fuse cannot be opened ({e}) and CI=true: the mount tests must run in CI"
                );
            }
            eprintln!(
                "\n*** SKIPPING the mount test: /dev/fuse cannot be opened ({e}). \
                 Run as root on a machine with FUSE to test `granary mount`. ***\n"
            );
            false
        }
    }
}

fn is_mounted(mp: &Path) -> bool {
    let mp = std::fs::canonicalize(mp).unwrap_or_else(|_| mp.to_path_buf());
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(mp.to_str().unwrap()))
}

/// A running `granary mount`; unmounted (SIGTERM, then a lazy unmount if
/// anything is left) when dropped.
struct Mount {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Mount {
    fn start(d: &Daemon, prefix: &str, extra: &[&str]) -> Mount {
        let dir = tempfile::tempdir().unwrap();
        let mut child = d
            .command(&["mount", prefix, dir.path().to_str().unwrap()])
            .args(extra)
            .env("GRANARY_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let line = std::io::BufReader::new(out).lines().next();
        assert!(
            matches!(&line, Some(Ok(l)) if l == "ready"),
            "granary mount did not start: {line:?}"
        );
        assert!(is_mounted(dir.path()));
        Mount { child, dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if is_mounted(self.dir.path()) {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn put(d: &Daemon, file: &Path, name: &str, extra: &[&str]) {
    let mut args = vec!["put", file.to_str().unwrap(), name];
    args.extend_from_slice(extra);
    d.ok(&args);
}

fn py(script: &str, args: &[&str]) -> String {
    let out = Command::new(common::python())
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Random reads (offsets, lengths, seeks, reads across segment
/// boundaries), os.stat and os.listdir through the mount, compared with
/// the originals.
const PY_COMPARE: &str = r#"
import mmap, os, random, sys
mnt, orig_dir, seg = sys.argv[1], sys.argv[2], int(sys.argv[3])
names = sorted(os.listdir(orig_dir))
assert sorted(os.listdir(mnt)) == names, (os.listdir(mnt), names)
rng = random.Random(7)
# Many handles at once on a cold mount (before anything is in the page
# cache): 16 tasks on 8 threads, each its own handle, random preads.
from concurrent.futures import ThreadPoolExecutor
def worker(k):
    r = random.Random(k); n = names[k % len(names)]
    data = open(os.path.join(orig_dir, n), 'rb').read()
    fd = os.open(os.path.join(mnt, n), os.O_RDONLY)
    try:
        for _ in range(40):
            off = r.randrange(0, len(data)); ln = r.randrange(1, 3 * seg)
            assert os.pread(fd, ln, off) == data[off:off + ln], (n, off, ln)
    finally:
        os.close(fd)
    return True
with ThreadPoolExecutor(8) as ex:
    assert all(ex.map(worker, range(16)))
for n in names:
    o = os.path.join(orig_dir, n); m = os.path.join(mnt, n)
    data = open(o, 'rb').read()
    st = os.stat(m)
    assert st.st_size == len(data), (n, st.st_size, len(data))
    assert st.st_mode & 0o777 == 0o444, oct(st.st_mode)
    assert abs(st.st_mtime - os.stat(o).st_mtime) < 3600, 'mtime is the version time'
    with open(m, 'rb') as f:
        for _ in range(150):
            off = rng.randrange(0, len(data))
            ln = rng.choice([1, 7, 4096, seg - 1, seg, seg + 1, 3 * seg + 5, 100000])
            f.seek(off)
            got = f.read(ln)
            assert got == data[off:off + ln], (n, off, ln)
        # every segment boundary region in the first 64 segments
        for k in range(1, 64):
            off = k * seg - 3
            if off + 6 > len(data):
                break
            f.seek(off)
            assert f.read(6) == data[off:off + 6], (n, off)
        f.seek(max(0, len(data) - 10))
        assert f.read(100) == data[-10:]
        assert f.read(10) == b''
        f.seek(0)
        assert f.read() == data
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        assert mm[:] == data and mm[len(data) // 2:len(data) // 2 + 9000] == data[len(data) // 2:len(data) // 2 + 9000]
        mm.close()
print('checked', len(names))
"#;

#[test]
fn python_reads_through_a_remote_mount_match_the_originals() {
    if !fuse_available() {
        return;
    }
    let p = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let c = Daemon::start(&[]);
    c.ok(&["route", "add", "/m", &tcp(&p)]);
    let src = tempfile::tempdir().unwrap();
    let (fixed, cdc) = (src.path().join("fixed"), src.path().join("cdc"));
    std::fs::create_dir_all(&fixed).unwrap();
    std::fs::create_dir_all(&cdc).unwrap();
    for (i, size) in [(0u64, 1_000_003usize), (1, 8192), (2, 1), (3, 2_500_000)] {
        let f = fixed.join(format!("f{i}.bin"));
        std::fs::write(&f, rnd(i, size)).unwrap();
        put(
            &p,
            &f,
            &format!("/m/fixed/f{i}.bin"),
            &["--chunking", "fixed:8000"],
        );
        let f = cdc.join(format!("c{i}.bin"));
        std::fs::write(&f, rnd(100 + i, size)).unwrap();
        put(
            &p,
            &f,
            &format!("/m/cdc/c{i}.bin"),
            &["--chunking", "fastcdc"],
        );
    }
    trust(&p, &c);
    let m = Mount::start(&c, "/m", &[]);
    let mut top: Vec<_> = std::fs::read_dir(m.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    top.sort();
    assert_eq!(top, ["cdc", "fixed"]);
    let out = py(
        PY_COMPARE,
        &[
            m.path("fixed").to_str().unwrap(),
            fixed.to_str().unwrap(),
            "8000",
        ],
    );
    assert!(out.contains("checked 4"), "{out}");
    let out = py(
        PY_COMPARE,
        &[
            m.path("cdc").to_str().unwrap(),
            cdc.to_str().unwrap(),
            "4096",
        ],
    );
    assert!(out.contains("checked 4"), "{out}");
    // Writing is refused in read-only mode.
    let e = std::fs::write(m.path("fixed/new"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(EROFS), "{e}");
    // The mount shows up, and SIGTERM unmounts it cleanly.
    let root = m.root().to_path_buf();
    drop(m);
    assert!(!is_mounted(&root));
}

fn sha256_of(p: &Path) -> String {
    let out = Command::new("sha256sum").arg(p).output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn cp_find_and_parallel_sha256sum_of_a_published_tree() {
    if !fuse_available() {
        return;
    }
    let d = Daemon::start(&[]);
    let src = tempfile::tempdir().unwrap();
    let files = [
        ("a/x.bin", 300_000usize),
        ("a/y.bin", 5),
        ("a/deep/z.bin", 1_200_000),
        ("b/w.bin", 70_000),
        ("top.bin", 123_456),
    ];
    for (k, (rel, size)) in files.iter().enumerate() {
        let f = src.path().join(rel);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, rnd(k as u64, *size)).unwrap();
        put(&d, &f, &format!("/tree/{rel}"), &[]);
    }
    let m = Mount::start(&d, "/tree", &["--threads", "4"]);
    // find
    let out = Command::new("find")
        .arg(".")
        .arg("-type")
        .arg("f")
        .current_dir(m.root())
        .output()
        .unwrap();
    let mut found: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.trim_start_matches("./").to_string())
        .collect();
    found.sort();
    let mut want: Vec<String> = files.iter().map(|f| f.0.to_string()).collect();
    want.sort();
    assert_eq!(found, want);
    // cp -r, then compare every file
    let dst = tempfile::tempdir().unwrap();
    let st = Command::new("cp")
        .arg("-r")
        .arg(m.root())
        .arg(dst.path().join("copy"))
        .status()
        .unwrap();
    assert!(st.success());
    let st = Command::new("diff")
        .arg("-r")
        .arg(src.path())
        .arg(dst.path().join("copy"))
        .status()
        .unwrap();
    assert!(
        st.success(),
        "cp -r of the mount differs from the originals"
    );
    // parallel sha256sum through the mount (a fresh mount: cold cache)
    drop(m);
    let m = Mount::start(&d, "/tree", &["--cache-size", "1M"]);
    let out = Command::new("sh")
        .arg("-c")
        .arg("find . -type f -print0 | xargs -0 -P 5 -n 1 sha256sum")
        .current_dir(m.root())
        .output()
        .unwrap();
    assert!(out.status.success());
    let sums = String::from_utf8(out.stdout).unwrap();
    for (rel, _) in files {
        let want = format!("{}  ./{rel}", sha256_of(&src.path().join(rel)));
        assert!(sums.lines().any(|l| l == want), "{want} not in {sums}");
    }
}

#[test]
fn netcdf4_variable_slice_through_the_mount() {
    if !fuse_available() {
        return;
    }
    let d = Daemon::start(&[]);
    let src = tempfile::tempdir().unwrap();
    let nc = src.path().join("tas.nc");
    py(
        r#"
import sys, numpy as np, netCDF4
ds = netCDF4.Dataset(sys.argv[1], 'w', format='NETCDF4')
ds.createDimension('time', None); ds.createDimension('lat', 90); ds.createDimension('lon', 180)
v = ds.createVariable('tas', 'f4', ('time', 'lat', 'lon'), zlib=True, chunksizes=(1, 45, 90))
rng = np.random.default_rng(3)
v[0:24] = rng.standard_normal((24, 90, 180)).astype('f4') * 10 + 280
v.units = 'K'
ds.close()
"#,
        &[nc.to_str().unwrap()],
    );
    put(&d, &nc, "/cmip/tas.nc", &[]);
    let m = Mount::start(&d, "/cmip", &[]);
    let out = py(
        r#"
import sys, numpy as np, netCDF4
a = netCDF4.Dataset(sys.argv[1]); b = netCDF4.Dataset(sys.argv[2])
x = a['tas'][5:9, 10:40, 100:150]; y = b['tas'][5:9, 10:40, 100:150]
assert a['tas'].units == 'K' and x.shape == (4, 30, 50)
assert np.array_equal(np.asarray(x), np.asarray(y))
assert np.array_equal(a['tas'][:], b['tas'][:])
print('equal', float(x.mean()))
"#,
        &[m.path("tas.nc").to_str().unwrap(), nc.to_str().unwrap()],
    );
    assert!(out.starts_with("equal"), "{out}");
}

/// Reads `len` bytes at `off`, returning the OS error if any.
fn read_at(p: &Path, off: u64, len: usize) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(p)?;
    let mut b = vec![0; len];
    let n = f.read_at(&mut b, off)?;
    b.truncate(n);
    Ok(b)
}

#[test]
fn a_tampered_segment_gives_eio_never_wrong_bytes() {
    if !fuse_available() {
        return;
    }
    let d = Daemon::start(&[]);
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("t.bin");
    let data = rnd(9, 400_000);
    std::fs::write(&f, &data).unwrap();
    put(&d, &f, "/tamper/t.bin", &["--chunking", "fixed:8000"]);
    // Flip one byte of segment 20 in the stored file.
    let st = d.ok(&["stat", "/tamper/t.bin"]);
    let stored = st
        .lines()
        .find_map(|l| l.strip_prefix("path "))
        .expect("stat prints the stored path");
    let stored = PathBuf::from(stored.trim());
    let mut bytes = std::fs::read(&stored).unwrap();
    bytes[20 * 8000 + 17] ^= 0xff;
    {
        use std::os::unix::fs::FileExt;
        let h = std::fs::OpenOptions::new()
            .write(true)
            .open(&stored)
            .unwrap();
        h.write_all_at(&bytes[20 * 8000 + 17..20 * 8000 + 18], 20 * 8000 + 17)
            .unwrap();
    }
    let m = Mount::start(&d, "/tamper", &["--timeout", "3"]);
    let p = m.path("t.bin");
    // Untouched segments read fine (unless the repository itself refuses
    // the whole object once it notices the damage: then opening fails).
    match read_at(&p, 0, 8000) {
        Ok(b) => assert_eq!(b, &data[..8000]),
        Err(e) => {
            assert!(matches!(e.raw_os_error(), Some(EIO) | Some(ENOENT)), "{e}");
            eprintln!("the repository refuses the damaged object as a whole: {e}");
        }
    }
    // The tampered segment is EIO (whether the repository refuses to serve
    // it or the mount's manifest check rejects it), never the wrong bytes.
    let t = Instant::now();
    let e = read_at(&p, 20 * 8000, 100).unwrap_err();
    assert!(matches!(e.raw_os_error(), Some(EIO) | Some(ENOENT)), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10));
    // Reading across it fails too; the whole file cannot be read.
    assert!(std::fs::read(&p).is_err());
}

/// A version the node holds is read from the node's own file (decision
/// 0100), not segment by segment over NDN: the node sends a handful of Data
/// (listing, metadata, manifest) for a 1,000-segment file, and the bytes
/// are the file's. A byte changed in the node's file afterwards is caught
/// by the manifest check: EIO, never the changed bytes.
#[test]
fn a_version_the_node_holds_is_read_from_its_file_and_checked() {
    if !fuse_available() {
        return;
    }
    let d = Daemon::start(&[]);
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("h.bin");
    let data = rnd(48, 8_000_000);
    std::fs::write(&f, &data).unwrap();
    put(&d, &f, "/held/h.bin", &["--chunking", "fixed:8000"]);
    let m = Mount::start(&d, "/held", &["--timeout", "3"]);
    let before = data_out(&d);
    assert!(
        std::fs::read(m.path("h.bin")).unwrap() == data,
        "the bytes read through the mount are not the file's"
    );
    let sent = data_out(&d) - before;
    eprintln!("the node sent {sent} Data for a 1,000-segment file it holds");
    assert!(sent <= 20, "{sent} Data: the file was fetched by name");
    drop(m);
    // One byte of segment 500 changes in the node's file.
    let st = d.ok(&["stat", "/held/h.bin"]);
    let stored = st
        .lines()
        .find_map(|l| l.strip_prefix("path "))
        .expect("stat prints the stored path");
    let at = 500 * 8000 + 3;
    {
        use std::os::unix::fs::FileExt;
        let h = std::fs::OpenOptions::new()
            .write(true)
            .open(stored.trim())
            .unwrap();
        h.write_all_at(&[data[at] ^ 0x40], at as u64).unwrap();
    }
    let m = Mount::start(&d, "/held", &["--timeout", "3"]);
    let p = m.path("h.bin");
    assert_eq!(read_at(&p, 0, 8000).unwrap(), &data[..8000]);
    let e = read_at(&p, 500 * 8000, 100).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(EIO), "{e}");
    assert!(std::fs::read(&p).is_err());
}

#[test]
fn a_stopped_producer_gives_eio_after_the_timeout() {
    if !fuse_available() {
        return;
    }
    let p = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let c = Daemon::start(&["--listen", "udp://127.0.0.1:0"]);
    c.ok(&["route", "add", "/gone", &tcp(&p)]);
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("g.bin");
    let data = rnd(4, 2_000_000);
    std::fs::write(&f, &data).unwrap();
    put(&p, &f, "/gone/g.bin", &["--chunking", "fixed:8000"]);
    trust(&p, &c);
    let m = Mount::start(&c, "/gone", &["--timeout", "2", "--cache-size", "0"]);
    let path = m.path("g.bin");
    let h = std::fs::File::open(&path).unwrap();
    {
        use std::os::unix::fs::FileExt;
        let mut b = vec![0; 1000];
        h.read_exact_at(&mut b, 0).unwrap();
        assert_eq!(b, &data[..1000]);
    }
    drop(p);
    let t = Instant::now();
    let e = {
        use std::os::unix::fs::FileExt;
        let mut b = vec![0; 1000];
        h.read_exact_at(&mut b, 1_500_000).unwrap_err()
    };
    let took = t.elapsed();
    assert_eq!(e.raw_os_error(), Some(EIO), "{e}");
    assert!(
        took < Duration::from_secs(8),
        "EIO after {took:?}, not a hang"
    );
    // A producer that is silent (the route leads to a UDP port nobody
    // answers on: no Nack, no Data): EIO once the 2 s timeout has passed.
    c.ok(&["route", "add", "/gone", "udp4://127.0.0.1:9"]);
    let t = Instant::now();
    let e = {
        use std::os::unix::fs::FileExt;
        let mut b = vec![0; 1000];
        h.read_exact_at(&mut b, 1_900_000).unwrap_err()
    };
    let took = t.elapsed();
    assert_eq!(e.raw_os_error(), Some(EIO), "{e}");
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(8),
        "EIO after {took:?} with --timeout 2"
    );
}

#[test]
fn an_open_handle_stays_on_its_version() {
    if !fuse_available() {
        return;
    }
    let d = Daemon::start(&[]);
    let src = tempfile::tempdir().unwrap();
    let (v1, v2) = (rnd(1, 1_000_000), rnd(2, 1_000_000));
    let f = src.path().join("v.bin");
    std::fs::write(&f, &v1).unwrap();
    put(&d, &f, "/ver/v.bin", &[]);
    let m = Mount::start(&d, "/ver", &["--dir-ttl", "0.2", "--cache-size", "0"]);
    let path = m.path("v.bin");
    use std::os::unix::fs::FileExt;
    let old = std::fs::File::open(&path).unwrap();
    let mut b = vec![0; 1000];
    old.read_exact_at(&mut b, 0).unwrap();
    assert_eq!(b, &v1[..1000]);
    std::fs::write(&f, &v2).unwrap();
    put(&d, &f, "/ver/v.bin", &[]);
    std::thread::sleep(Duration::from_millis(1500));
    // A new open sees the new version…
    assert_eq!(std::fs::read(&path).unwrap(), v2);
    // …the old handle still reads the old one, everywhere.
    let mut all = vec![0; v1.len()];
    old.read_exact_at(&mut all, 0).unwrap();
    assert!(all == v1, "the open handle changed version");
}

#[test]
fn publish_mode_cp_mv_rm_and_a_killed_writer() {
    if !fuse_available() {
        return;
    }
    let a = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("in.bin");
    let data = rnd(11, 3_000_000);
    std::fs::write(&f, &data).unwrap();
    let m = Mount::start(&a, "/pub", &["--publish", "--dir-ttl", "0.2"]);
    // cp in: published when cp closes the file.
    let st = Command::new("cp")
        .arg(&f)
        .arg(m.path("in.bin"))
        .status()
        .unwrap();
    assert!(st.success());
    let ls = a.ok(&["ls", "/pub"]);
    assert!(ls.contains("/pub/in.bin/v="), "{ls}");
    // Another node gets it byte-identical.
    let b = Daemon::start(&[]);
    b.ok(&["route", "add", "/pub", &tcp(&a)]);
    trust(&a, &b);
    let out = src.path().join("got.bin");
    b.ok(&["get", "/pub/in.bin", "-o", out.to_str().unwrap()]);
    assert!(std::fs::read(&out).unwrap() == data);
    // Read back through the mount.
    assert!(std::fs::read(m.path("in.bin")).unwrap() == data);
    // mkdir, random-offset writes, re-open and append.
    std::fs::create_dir(m.path("sub")).unwrap();
    py(
        r#"
import sys
p = sys.argv[1]
with open(p, 'wb') as f:
    f.seek(100000); f.write(b'B' * 5000)
    f.seek(0); f.write(b'A' * 100)
with open(p, 'r+b') as f:
    f.seek(50); f.write(b'C' * 10)
with open(p, 'ab') as f:
    f.write(b'END')
"#,
        &[m.path("sub/r.bin").to_str().unwrap()],
    );
    let mut want = vec![0u8; 105_000];
    want[..100].fill(b'A');
    want[50..60].fill(b'C');
    want[100_000..].fill(b'B');
    want.extend_from_slice(b"END");
    let got = src.path().join("r.bin");
    a.ok(&["get", "/pub/sub/r.bin", "-o", got.to_str().unwrap()]);
    assert!(std::fs::read(&got).unwrap() == want, "random-offset writes");
    std::thread::sleep(Duration::from_millis(300));
    let mut names: Vec<_> = std::fs::read_dir(m.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["in.bin", "sub"]);
    // mv = granary mv; rm = granary rm.
    std::fs::rename(m.path("in.bin"), m.path("moved.bin")).unwrap();
    let ls = a.ok(&["ls", "/pub"]);
    assert!(
        ls.contains("/pub/moved.bin/v=") && !ls.contains("/pub/in.bin"),
        "{ls}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(std::fs::read(m.path("moved.bin")).unwrap() == data);
    std::fs::remove_file(m.path("moved.bin")).unwrap();
    let ls = a.ok(&["ls", "/pub"]);
    assert!(!ls.contains("moved.bin"), "{ls}");
    // A writer killed midway publishes nothing.
    write_then_die(&m.path("killed.bin"), 1_000_000);
    std::thread::sleep(Duration::from_millis(500));
    let ls = a.ok(&["ls", "/pub"]);
    assert!(
        !ls.contains("killed.bin"),
        "a killed writer published: {ls}"
    );
    // …while one that closes publishes.
    std::fs::write(m.path("kept.bin"), b"kept").unwrap();
    assert!(a.ok(&["ls", "/pub"]).contains("/pub/kept.bin/v="));
}

/// close() returns before the kernel tells the mount the handle is gone
/// (FUSE's release is asynchronous), and the mount serves requests on
/// several threads: an open right after a close must never join a draft
/// that the release is about to drop (its writes then failed with EBADF).
#[test]
fn reopening_a_file_just_closed_keeps_every_write() {
    if !fuse_available() {
        return;
    }
    let a = Daemon::start(&[]);
    let m = Mount::start(&a, "/pub", &["--publish"]);
    let out = py(
        r#"
import sys
p = sys.argv[1]
with open(p, 'wb') as f:
    f.write(b'0')
for i in range(1, 60):
    with open(p, 'r+b') as f:
        f.seek(0); f.write(b'x')
    with open(p, 'ab') as f:
        f.write(str(i % 10).encode())
print(open(p, 'rb').read().decode())
"#,
        &[m.path("r.bin").to_str().unwrap()],
    );
    let want: String = std::iter::once('x')
        .chain((1..60).map(|i| char::from(b'0' + (i % 10) as u8)))
        .collect();
    assert_eq!(out.trim(), want);
    let got = tempfile::tempdir().unwrap();
    let f = got.path().join("r.bin");
    a.ok(&["get", "/pub/r.bin", "-o", f.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), want);
}

/// Two writers open one stored file at once: each open copies the stored
/// bytes into a draft, so both may finish before either is in the table.
/// They must share one draft (a second one used to replace the first in the
/// table, and the writers got EIO and lost writes).
#[test]
fn two_writers_opening_one_file_at_once_share_its_draft() {
    if !fuse_available() {
        return;
    }
    let a = Daemon::start(&[]);
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("two.bin");
    std::fs::write(&f, rnd(5, 200_000)).unwrap();
    put(&a, &f, "/pub/two.bin", &[]);
    let m = Mount::start(&a, "/pub", &["--publish"]);
    let out = py(
        r#"
import sys, threading
p = sys.argv[1]
errors = []
def write(at, b, start):
    try:
        start.wait()
        with open(p, 'r+b') as f:
            f.seek(at); f.write(b)
    except Exception as e:
        errors.append(repr(e))
for i in range(20):
    start = threading.Barrier(2)
    ts = [threading.Thread(target=write, args=(2 * i, b'A', start)),
          threading.Thread(target=write, args=(2 * i + 1, b'B', start))]
    for t in ts: t.start()
    for t in ts: t.join()
print(errors[:3])
print(open(p, 'rb').read()[:40].decode())
"#,
        &[m.path("two.bin").to_str().unwrap()],
    );
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("[]"), "{out}");
    assert_eq!(lines.next(), Some("AB".repeat(20).as_str()), "{out}");
    let got = src.path().join("got.bin");
    a.ok(&["get", "/pub/two.bin", "-o", got.to_str().unwrap()]);
    let mut want = rnd(5, 200_000);
    for i in 0..20 {
        want[2 * i] = b'A';
        want[2 * i + 1] = b'B';
    }
    assert!(
        std::fs::read(&got).unwrap() == want,
        "the last version lacks a write"
    );
}

#[test]
fn unmount_cleans_a_crashed_mount() {
    if !fuse_available() {
        return;
    }
    let d = Daemon::start(&[]);
    let mut m = Mount::start(&d, "/crash", &[]);
    // SIGKILL: the mount is left behind (ENOTCONN on access).
    m.child.kill().unwrap();
    m.child.wait().unwrap();
    assert!(is_mounted(m.root()));
    assert!(std::fs::read_dir(m.root()).is_err());
    let o = d.cli(&["mount", "--unmount", m.root().to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!is_mounted(m.root()));
    assert!(std::fs::read_dir(m.root()).unwrap().next().is_none());
}

/// Data packets a node has sent (`granary status`).
fn data_out(d: &Daemon) -> u64 {
    let s = d.ok(&["status"]);
    s.lines()
        .find_map(|l| l.strip_prefix("data"))
        .and_then(|l| l.split_whitespace().skip_while(|w| *w != "out").nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no data counters in {s}"))
}

#[test]
fn a_small_read_fetches_only_its_covering_segments() {
    if !fuse_available() {
        return;
    }
    let p = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let c = Daemon::start(&[]);
    c.ok(&["route", "add", "/few", &tcp(&p)]);
    let src = tempfile::tempdir().unwrap();
    let f = src.path().join("f.bin");
    let data = rnd(21, 2_000_000);
    std::fs::write(&f, &data).unwrap();
    put(&p, &f, "/few/f.bin", &["--chunking", "fixed:8000"]);
    trust(&p, &c);
    // No block cache, so no read-ahead of our own; POSIX_FADV_RANDOM turns
    // the kernel's off.
    let m = Mount::start(&c, "/few", &["--cache-size", "0"]);
    let before = data_out(&p);
    let out = py(
        r#"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
print(os.pread(fd, 100, 1000037).hex())
"#,
        &[m.path("f.bin").to_str().unwrap()],
    );
    let small = data_out(&p) - before;
    assert_eq!(out.trim(), hex::encode(&data[1_000_037..1_000_137]));
    // Listing, metadata, the manifest (root and blocks), one or two
    // segments, and the status queries: far from the 250 segments.
    assert!(small <= 12, "{small} Data for a 100-byte read");
    let before = data_out(&p);
    assert!(std::fs::read(m.path("f.bin")).unwrap() == data);
    let all = data_out(&p) - before;
    eprintln!("producer sent {small} Data for a 100-byte read, {all} for the whole file");
    assert!(all >= 240, "a whole read took only {all} Data");
}

/// Files of the data directory's store temp dir (ingests under way).
fn store_tmp(d: &Daemon) -> Vec<(String, u64)> {
    std::fs::read_dir(d.data.join("repo/tmp"))
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                    (e.file_name().to_string_lossy().into_owned(), len)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Bytes in the mount's draft files.
fn draft_bytes(d: &Daemon) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(d.data.join("mount-drafts")) {
        for e in rd.flatten() {
            for f in std::fs::read_dir(e.path()).into_iter().flatten().flatten() {
                n += f.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    n
}

/// The stored version's metadata (`granary stat`) and the files beside it.
fn stored(d: &Daemon, name: &str) -> (serde_json::Value, Vec<u8>, Option<Vec<u8>>) {
    let out = d.ok(&["stat", name]);
    let json_end = out.find("\npath ").unwrap();
    let meta: serde_json::Value = serde_json::from_str(&out[..json_end]).unwrap();
    let path = out[json_end + 6..]
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_string();
    let hashes = std::fs::read(format!("{path}.hashes")).unwrap();
    let offsets = std::fs::read(format!("{path}.offsets")).ok();
    (meta, hashes, offsets)
}

/// A file written in order into the mount is streamed into the repository
/// while it is written (the bytes are in the store's ingest, not in a
/// draft, before the writer closes) and is then exactly what `put` makes
/// of the same bytes: same segments, hashes, offsets, signer and a signed
/// manifest. A writer that goes back to rewrite its header (netCDF does)
/// continues in a draft with every byte; a killed streaming writer
/// publishes nothing and leaves no temp file.
#[test]
fn publish_mode_streams_files_written_in_order() {
    if !fuse_available() {
        return;
    }
    let a = Daemon::start(&[]);
    let src = tempfile::tempdir().unwrap();
    let data = rnd(23, 6_000_000);
    let f = src.path().join("ref.bin");
    std::fs::write(&f, &data).unwrap();
    let m = Mount::start(&a, "/st", &["--publish", "--dir-ttl", "0.2"]);
    let mount_pid = m.child.id();
    // Write half, hold the file open, look, then write the rest and close.
    let mut w = Command::new(common::python())
        .arg("-c")
        .arg(
            r#"
import sys
data = open(sys.argv[2], 'rb').read()
half = len(data) // 2
f = open(sys.argv[1], 'wb')
for i in range(0, half, 131072):
    f.write(data[i:min(i + 131072, half)])
f.flush()
print('half', flush=True)
sys.stdin.readline()
f.write(data[half:])
f.close()
print('closed', flush=True)
"#,
        )
        .arg(m.path("streamed.bin"))
        .arg(&f)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(w.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "half");
    // Streamed: the mount's ingest temp file holds the bytes (at least
    // the full 1 MiB blocks); no draft file does.
    let end = Instant::now() + Duration::from_secs(10);
    let ingested = loop {
        let mine: u64 = store_tmp(&a)
            .iter()
            .filter(|(n, _)| n.starts_with(&format!("{mount_pid}-")) && n.ends_with(".data"))
            .map(|(_, l)| *l)
            .sum();
        if mine >= 2 << 20 || Instant::now() > end {
            break mine;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        ingested >= 2 << 20,
        "no ingest under way in the store: {:?}",
        store_tmp(&a)
    );
    assert_eq!(draft_bytes(&a), 0, "a sequential writer went to a draft");
    assert!(
        !a.ok(&["ls", "/st"]).contains("streamed.bin"),
        "published before close"
    );
    use std::io::Write;
    writeln!(w.stdin.take().unwrap()).unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "closed");
    assert!(w.wait().unwrap().success());
    assert!(a.ok(&["ls", "/st"]).contains("/st/streamed.bin/v="));
    assert!(std::fs::read(m.path("streamed.bin")).unwrap() == data);
    // What `put` makes of the same bytes.
    put(&a, &f, "/st/put.bin", &[]);
    let (ms, hs, os) = stored(&a, "/st/streamed.bin");
    let (mp, hp, op) = stored(&a, "/st/put.bin");
    for k in [
        "size",
        "segment_size",
        "chunking",
        "segments",
        "signer",
        "signing",
    ] {
        assert_eq!(ms[k], mp[k], "{k}: streamed {ms} put {mp}");
    }
    assert!(ms["manifest"].is_string(), "no signed manifest: {ms}");
    assert!(hs == hp, "segment hashes differ from put's");
    assert!(os == op, "segment offsets differ from put's");
    assert!(store_tmp(&a).is_empty(), "{:?}", store_tmp(&a));

    // In order, then back to the start (a header rewritten on close): the
    // stream becomes a draft with every byte written so far.
    py(
        r#"
import sys
data = open(sys.argv[2], 'rb').read()
with open(sys.argv[1], 'wb') as f:
    for i in range(0, len(data), 1 << 20):
        f.write(data[i:i + (1 << 20)])
    f.seek(10); f.write(b'HEADER')
"#,
        &[
            m.path("rewritten.bin").to_str().unwrap(),
            f.to_str().unwrap(),
        ],
    );
    let mut want = data.clone();
    want[10..16].copy_from_slice(b"HEADER");
    let got = src.path().join("rewritten.bin");
    a.ok(&["get", "/st/rewritten.bin", "-o", got.to_str().unwrap()]);
    assert!(std::fs::read(&got).unwrap() == want, "stream turned draft");

    // A streaming writer killed midway: nothing published, nothing left.
    write_then_die(&m.path("killed.bin"), 3_000_000);
    let end = Instant::now() + Duration::from_secs(5);
    while !store_tmp(&a).is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(store_tmp(&a).is_empty(), "left: {:?}", store_tmp(&a));
    assert!(!a.ok(&["ls", "/st"]).contains("killed.bin"));
}

/// A writer (another process) that writes `n` bytes to `path`, flushes, and
/// is killed (SIGKILL) before it closes the file.
fn write_then_die(path: &std::path::Path, n: usize) {
    let mut w = Command::new(common::python())
        .arg("-c")
        .arg(
            r#"
import sys, time
f = open(sys.argv[1], 'wb')
f.write(b'x' * int(sys.argv[2])); f.flush()
print('written', flush=True)
time.sleep(60)
"#,
        )
        .arg(path)
        .arg(n.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(w.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "written");
    w.kill().unwrap();
    w.wait().unwrap();
}

/// Inodes held by the mount (`statfs`'s file count, `df -i`).
fn inodes(m: &Mount) -> u64 {
    let out = Command::new("stat")
        .args(["-f", "-c", "%c"])
        .arg(m.root())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// A long-lived mount holds only the inodes the kernel holds: walking a
/// tree gives the kernel one per file and directory; when the kernel drops
/// them (`drop_caches`, as memory pressure would), the mount forgets them,
/// and the tree still reads the same afterwards.
#[test]
fn the_mount_forgets_the_inodes_the_kernel_drops() {
    if !fuse_available() {
        return;
    }
    let d = Daemon::start(&[]);
    let src = tempfile::tempdir().unwrap();
    let n = 60;
    for k in 0..n {
        let f = src.path().join(format!("d{}/f{k}.bin", k % 6));
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, rnd(k, 1000)).unwrap();
    }
    for k in 0..n {
        let rel = format!("d{}/f{k}.bin", k % 6);
        put(&d, &src.path().join(&rel), &format!("/many/{rel}"), &[]);
    }
    let m = Mount::start(&d, "/many", &[]);
    let walk = || {
        let out = Command::new("sh")
            .arg("-c")
            .arg("find . -type f | sort | xargs cat | sha256sum")
            .current_dir(m.root())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let first = walk();
    let held = inodes(&m);
    assert!(
        held > n,
        "{held} inodes after walking {n} files in 6 directories"
    );
    // Needs root (as FUSE mounts in these tests do).
    std::fs::write("/proc/sys/vm/drop_caches", "2").unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while inodes(&m) > 2 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = inodes(&m);
    assert!(
        left <= 2,
        "{left} of {held} inodes still held after the kernel dropped them"
    );
    assert_eq!(
        walk(),
        first,
        "the tree reads differently after the forgets"
    );
    assert!(inodes(&m) > n);
}

/// A file whose only signature is a DigestSha256 (published `--sign
/// digest`: a digest-signed manifest, which anyone could have made) is not
/// shown as verified content: reading it fails (EIO) unless the mount was
/// started with `--integrity-only`; a key-signed file reads either way.
#[test]
fn digest_only_files_need_an_integrity_only_mount() {
    if !fuse_available() {
        return;
    }
    let d = Daemon::start(&[]);
    let body = rnd(31, 50_000);
    let f = d.dir.path().join("f.bin");
    std::fs::write(&f, &body).unwrap();
    put(&d, &f, "/io/digest.bin", &["--sign", "digest"]);
    put(&d, &f, "/io/signed.bin", &[]);
    {
        let m = Mount::start(&d, "/io", &[]);
        assert_eq!(std::fs::read(m.path("signed.bin")).unwrap(), body);
        let e = std::fs::read(m.path("digest.bin")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    }
    let m = Mount::start(&d, "/io", &["--integrity-only"]);
    assert_eq!(std::fs::read(m.path("digest.bin")).unwrap(), body);
    assert_eq!(std::fs::read(m.path("signed.bin")).unwrap(), body);
}
