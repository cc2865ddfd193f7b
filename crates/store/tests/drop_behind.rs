//! Serving a large file does not fill the page cache with it: the pages
//! far behind the reader are dropped (`fincore` counts what stays).

use std::io::Read;

use granary_packet::Name;
use granary_store::{PutOptions, Store, DROP_BEHIND_MIN, DROP_WINDOW};

/// Bytes of `path` in the page cache (`fincore`, util-linux).
fn resident(path: &std::path::Path) -> u64 {
    let out = std::process::Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .arg(path)
        .output()
        .expect("fincore (util-linux)");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Pseudo-random bytes, generated as they are read (no copy in memory).
struct Noise(u64, u64);

impl Read for Noise {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.1 as usize);
        for b in &mut buf[..n] {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            *b = self.0 as u8;
        }
        self.1 -= n as u64;
        Ok(n)
    }
}

#[test]
fn a_large_file_read_through_leaves_only_its_tail_cached() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let size = DROP_BEHIND_MIN + (64 << 20);
    let name = Name::from_uri("/big").unwrap();
    store
        .put(&name, Noise(7, size), &PutOptions::default(), |_| {})
        .unwrap();
    let e = store.get_shared(&name, None).unwrap();
    let mut buf = Vec::new();
    for s in 0..e.meta.segments() {
        let (at, len) = store.segment_range(&e, s).unwrap();
        buf.resize(len as usize, 0);
        store.read_at(&e, at, &mut buf).unwrap();
    }
    let cached = resident(&e.path);
    // The last window or two behind the end (and the kernel's read-ahead
    // at most) stay; without dropping, the whole file would.
    assert!(
        cached <= 3 * DROP_WINDOW,
        "{cached} of {size} bytes still cached after one read through"
    );

    // A file under the threshold stays cached as read.
    let small = Name::from_uri("/small").unwrap();
    store
        .put(&small, Noise(9, 64 << 20), &PutOptions::default(), |_| {})
        .unwrap();
    let e = store.get_shared(&small, None).unwrap();
    for s in 0..e.meta.segments() {
        let (at, len) = store.segment_range(&e, s).unwrap();
        buf.resize(len as usize, 0);
        store.read_at(&e, at, &mut buf).unwrap();
    }
    assert!(resident(&e.path) >= 60 << 20, "a small file was dropped");
}
