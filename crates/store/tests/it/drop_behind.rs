//! Serving a large file does not fill the page cache with it: the pages
//! far behind the reader are dropped. The test asserts what the store
//! advised the kernel away ([`granary_store::OpenData::dropped_behind`]);
//! what stays cached (`fincore`) depends on the machine's memory pressure
//! and is only printed.

use std::io::Read;

use granary_packet::Name;
use granary_store::{PutOptions, Store, DROP_BEHIND_MIN, DROP_WINDOW};

/// Bytes of `path` in the page cache (`fincore`, util-linux), for the
/// log only: `None` when `fincore` is missing or fails.
fn resident(path: &std::path::Path) -> Option<u64> {
    let out = std::process::Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .arg(path)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// What the drop-behind advised away for the version `e` was read through.
fn dropped(e: &granary_store::Entry) -> u64 {
    e.file
        .as_ref()
        .expect("a shared lookup keeps the data file open")
        .dropped_behind()
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
fn a_large_file_read_through_is_advised_away_behind_the_reader() {
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
    let last = store.segment_range(&e, e.meta.segments() - 1).unwrap().0;
    let advised = dropped(&e);
    eprintln!(
        "{size}-byte file read through: {advised} bytes advised away, {:?} bytes still cached",
        resident(&e.path)
    );
    // Everything up to less than two windows behind the furthest read was
    // advised away, one `fadvise` per window read (without dropping: 0);
    // the window just behind the reader was kept.
    assert!(
        advised + 2 * DROP_WINDOW > last,
        "{advised} of {size} bytes advised away after one read through (furthest read at {last})"
    );
    assert!(
        advised + DROP_WINDOW <= last,
        "{advised} bytes advised away: the window behind the reader at {last} was dropped too"
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
    eprintln!(
        "small file read through: {:?} bytes still cached",
        resident(&e.path)
    );
    assert_eq!(dropped(&e), 0, "a small file was dropped");
}
