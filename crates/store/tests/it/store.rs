//! The store on real files: round trips at segment boundaries, versions,
//! listing, O(1) rename, removal, crash leftovers, hostile names, and the
//! sidecar fallback on a file system without user xattrs.

use std::io::Read;
use std::os::unix::fs::MetadataExt;

use granary_packet::Name;
use granary_store::chunking::noise;
use granary_store::{Backend, Error, PutOptions, Store};
use sha2::{Digest, Sha256};

fn n(s: &str) -> Name {
    Name::from_uri(s).unwrap()
}

fn read_all(store: &Store, e: &granary_store::Entry) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for s in 0..e.meta.segments() {
        store.read_segment(e, s, &mut buf).unwrap();
        assert_eq!(
            store.segment_hash(e, s).unwrap(),
            <[u8; 32]>::from(Sha256::digest(&buf)),
            "segment {s} hash"
        );
        out.extend_from_slice(&buf);
    }
    out
}

fn exercise(store: &Store) {
    for (i, len) in [
        0usize,
        1,
        8191,
        8192,
        8193,
        3 * 8192,
        1 << 20,
        (2 << 20) + 12_345,
    ]
    .into_iter()
    .enumerate()
    {
        let data = noise(len, i as u64 + 1);
        let name = n(&format!("/t/file{len}"));
        let mut seen = 0;
        // Every other size also asks for the whole-file SHA-256.
        let whole = i % 2 == 0;
        let opts = PutOptions {
            file_sha256: whole,
            ..Default::default()
        };
        let e = store.put(&name, &data[..], &opts, |b| seen = b).unwrap();
        assert_eq!(seen as usize, len);
        assert_eq!(e.meta.size as usize, len);
        assert_eq!(
            e.meta.segments(),
            if len == 0 {
                1
            } else {
                len.div_ceil(8192) as u64
            }
        );
        assert_eq!(
            e.meta.sha256,
            whole.then(|| hex::encode(Sha256::digest(&data)))
        );
        let got = store.get(&name, None).unwrap();
        assert_eq!(got.meta, e.meta);
        assert_eq!(read_all(store, &got), data, "round trip of {len} bytes");
        // The file is the file: same bytes on disk.
        assert_eq!(std::fs::read(&got.path).unwrap(), data);
    }
    // Versions.
    let name = n("/t/versioned");
    store
        .put(
            &name,
            &b"one"[..],
            &PutOptions {
                version: Some(1),
                ..Default::default()
            },
            |_| {},
        )
        .unwrap();
    store
        .put(
            &name,
            &b"two"[..],
            &PutOptions {
                version: Some(2),
                ..Default::default()
            },
            |_| {},
        )
        .unwrap();
    assert_eq!(store.versions(&name).unwrap(), vec![1, 2]);
    assert_eq!(store.get(&name, None).unwrap().meta.version, 2);
    assert!(matches!(
        store.put(
            &name,
            &b"dup"[..],
            &PutOptions {
                version: Some(2),
                ..Default::default()
            },
            |_| {}
        ),
        Err(Error::Exists(_))
    ));
    assert_eq!(store.list(&n("/t")).unwrap().len(), 8 + 2);
    // Rename: the data file keeps its inode (nothing copied), metadata follows.
    let before = store.get(&n("/t/file1048576"), None).unwrap();
    let ino = std::fs::metadata(&before.path).unwrap().ino();
    store
        .rename(&n("/t/file1048576"), &n("/moved/big"))
        .unwrap();
    let after = store.get(&n("/moved/big"), None).unwrap();
    assert_eq!(std::fs::metadata(&after.path).unwrap().ino(), ino);
    assert_eq!(after.meta.name, "/moved/big");
    assert!(matches!(
        store.get(&n("/t/file1048576"), None),
        Err(Error::NotFound(_))
    ));
    assert_eq!(read_all(store, &after).len(), 1 << 20);
    assert!(matches!(
        store.rename(&n("/moved/big"), &n("/t/versioned")),
        Err(Error::Exists(_))
    ));
    // Remove.
    assert_eq!(store.remove(&n("/t/versioned"), Some(1)).unwrap(), 1);
    assert_eq!(store.versions(&n("/t/versioned")).unwrap(), vec![2]);
    assert_eq!(store.remove(&n("/t/versioned"), None).unwrap(), 1);
    assert!(store.remove(&n("/t/versioned"), None).is_err());
}

#[test]
fn store_with_xattrs() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.backend(), Backend::Xattr);
    exercise(&store);
    // Metadata really is in xattrs, not a sidecar.
    let e = store.get(&n("/moved/big"), None).unwrap();
    assert_eq!(
        xattr::get(&e.path, "user.granary.name").unwrap().unwrap(),
        b"/moved/big"
    );
    assert!(!granary_store::meta::sidecar(&e.path).exists());
}

/// A file system of type `fstype` (mount arguments `args`) mounted in a
/// fresh temporary directory, unmounted on drop.
struct Mounted {
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Mounted {
    fn new(fstype: &str, args: &[&str]) -> Mounted {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(fstype);
        std::fs::create_dir(&path).unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", fstype])
            .args(args)
            .arg(fstype)
            .arg(&path)
            .status()
            .unwrap();
        assert!(
            st.success(),
            "mounting {fstype} needs root (CI and the dev machines run as root)"
        );
        Mounted { path, _dir: dir }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("--lazy") // the index's threads may still hold a file
            .arg(&self.path)
            .status();
    }
}

/// ramfs has no user xattrs: the store notices and uses sidecar files.
#[test]
fn store_on_a_file_system_without_user_xattrs() {
    let mnt = Mounted::new("ramfs", &[]);
    let store = Store::open(&mnt.path).unwrap();
    assert_eq!(store.backend(), Backend::Sidecar);
    exercise(&store);
    let e = store.get(&n("/moved/big"), None).unwrap();
    assert!(granary_store::meta::sidecar(&e.path).exists());
}

/// A disk that fills up mid-ingest: the write error is reported (not a
/// short version), nothing is left behind, and the store goes on working.
#[test]
fn a_full_disk_fails_the_ingest_and_loses_nothing() {
    let small = Mounted::new("tmpfs", &["-o", "size=8m"]);
    let mnt = small.path.clone();
    let store = Store::open(&mnt).unwrap();
    let big: Vec<u8> = (0..32u32 << 20).map(|i| (i % 251) as u8).collect();
    for chunking in [None, Some(granary_store::Chunking::fastcdc())] {
        let opts = PutOptions {
            chunking,
            ..PutOptions::default()
        };
        let err = store
            .put(&n("/too/big"), &big[..], &opts, |_| {})
            .expect_err("32 MiB cannot fit in 8 MiB");
        assert!(
            err.to_string().contains("space"),
            "the error says why: {err}"
        );
        assert!(store.versions(&n("/too/big")).unwrap().is_empty());
        assert_eq!(std::fs::read_dir(mnt.join("tmp")).unwrap().count(), 0);
    }
    let e = store
        .put(&n("/fits"), &big[..1 << 20], &PutOptions::default(), |_| {})
        .unwrap();
    assert_eq!(read_all(&store, &e), &big[..1 << 20]);
}

struct FailAfter(usize);

impl Read for FailAfter {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.0 == 0 {
            return Err(std::io::Error::other("source went away"));
        }
        let k = buf.len().min(self.0).min(4096);
        buf[..k].fill(7);
        self.0 -= k;
        Ok(k)
    }
}

#[test]
fn interrupted_ingest_leaves_nothing_visible() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let name = n("/half");
    assert!(store
        .put(&name, FailAfter(100_000), &PutOptions::default(), |_| {})
        .is_err());
    assert!(store.versions(&name).unwrap().is_empty());
    assert_eq!(
        std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
        0
    );
    // A crash leaves temp files behind; opening the store removes them.
    std::fs::write(dir.path().join("tmp/123.data"), b"partial").unwrap();
    std::fs::write(dir.path().join("tmp/123.hashes"), b"partial").unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(
        std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
        0
    );
    assert!(store.list(&Name::new()).unwrap().is_empty());
}

#[test]
fn hostile_names_create_nothing_outside() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = Store::open(&root).unwrap();
    let huge = Name::new().append(&granary_packet::Component::generic(&vec![b'x'; 1 << 20]));
    for name in [
        n("/..../x"),
        n("/a%2F..%2F..%2Fescape"),
        n("/%00nul"),
        Name::new().append(&granary_packet::Component::generic(b"..")),
        Name::new().append(&granary_packet::Component::generic(&vec![b'L'; 300])),
    ] {
        let e = store
            .put(&name, &b"x"[..], &PutOptions::default(), |_| {})
            .unwrap();
        assert!(
            e.path.starts_with(root.join("objects")),
            "{name} -> {}",
            e.path.display()
        );
        assert_eq!(store.get(&name, None).unwrap().meta.name, name.to_string());
    }
    assert!(matches!(
        store.put(
            &n(&"/c".repeat(10_000)),
            &b"x"[..],
            &PutOptions::default(),
            |_| {}
        ),
        Err(Error::Name(_))
    ));
    assert!(matches!(
        store.put(&huge, &b"x"[..], &PutOptions::default(), |_| {}),
        Err(Error::Name(_))
    ));
    // Nothing appeared next to the store.
    let siblings: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(siblings, vec![std::ffi::OsString::from("store")]);
}

/// A rename killed after moving some files of a version (its hashes) but
/// not its data file: `finish_rename` moves the rest, and the version is
/// whole under the new name, nothing left under the old.
#[test]
fn finish_rename_completes_a_version_moved_halfway() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let opts = PutOptions {
        version: Some(7),
        ..Default::default()
    };
    let data = noise(50_000, 9);
    let e = store.put(&n("/half/a"), &data[..], &opts, |_| {}).unwrap();
    let old_dir = e.path.parent().unwrap().to_path_buf();
    let new_dir = old_dir.parent().unwrap().join("b");
    std::fs::create_dir_all(&new_dir).unwrap();
    std::fs::rename(old_dir.join("@7.hashes"), new_dir.join("@7.hashes")).unwrap();
    // Half moved: still visible under the old name only.
    assert_eq!(store.versions(&n("/half/b")).unwrap(), Vec::<u64>::new());
    let done = store.finish_rename(&n("/half/a"), &n("/half/b")).unwrap();
    assert_eq!(done, vec![7]);
    assert!(store.versions(&n("/half/a")).unwrap().is_empty());
    let moved = store.get(&n("/half/b"), Some(7)).unwrap();
    assert_eq!(moved.meta.name, "/half/b");
    assert_eq!(read_all(&store, &moved), data);
    assert!(new_dir.join("@7.hashes").exists());
    // Idempotent.
    assert_eq!(
        store.finish_rename(&n("/half/a"), &n("/half/b")).unwrap(),
        vec![7]
    );
}

/// Puts `bytes` as version `v` of `name` (another process's writes, for the
/// lookup-cache tests).
fn put_version(writer: &Store, name: &Name, v: u64, bytes: &[u8]) {
    let opts = PutOptions {
        version: Some(v),
        ..Default::default()
    };
    writer.put(name, bytes, &opts, |_| {}).unwrap();
}

/// Puts version 2 of `name` (the latest) and checks that `reader`'s cached latest
/// lookup does not hide it.
fn version_two_is_seen(reader: &Store, writer: &Store, name: &Name) {
    put_version(writer, name, 2, b"two");
    tick();
    assert!(
        reader.get_cached(name, None).is_none(),
        "a new version unseen"
    );
    assert_eq!(reader.get_shared(name, None).unwrap().meta.version, 2);
}

/// Lets the file system's timestamps tick past a change (50 ms settle, and more).
fn tick() {
    std::thread::sleep(std::time::Duration::from_millis(60));
}

/// Cached lookups trusted for an hour still see what other processes change: a new
/// version (through the name's directory), a removal, and a file put back at the same
/// path (another inode). The waits only let the per-hit check interval (2 ms) and a
/// clock tick of the file system's timestamps pass; nothing is timed.
#[test]
fn long_lived_lookups_see_changes_by_other_processes() {
    let dir = tempfile::tempdir().unwrap();
    let reader = Store::open(dir.path()).unwrap();
    reader.set_cache_ttl(std::time::Duration::from_secs(3600));
    let writer = Store::open(dir.path()).unwrap();
    let name = n("/ttl/obj");
    let put = |v: u64, bytes: &[u8]| put_version(&writer, &name, v, bytes);
    put(1, b"one");
    tick();
    let first = reader.get_shared(&name, None).unwrap();
    assert_eq!(first.meta.version, 1);
    tick();
    assert!(reader.get_cached(&name, None).is_some(), "not cached");
    // A new version: the latest lookup follows it.
    version_two_is_seen(&reader, &writer, &name);
    // A version looked up by number, removed, then put back at the same path.
    let two = reader.get_shared(&name, Some(2)).unwrap();
    assert_eq!(two.meta.size, 3);
    writer.remove(&name, Some(2)).unwrap();
    tick();
    assert!(
        reader.get_cached(&name, Some(2)).is_none(),
        "a removal unseen"
    );
    put(2, b"two again");
    tick();
    assert_eq!(reader.get_shared(&name, Some(2)).unwrap().meta.size, 9);
    let again = reader.get_shared(&name, Some(2)).unwrap();
    writer.remove(&name, Some(2)).unwrap();
    put(2, b"two, third time");
    tick();
    assert!(
        reader.get_cached(&name, Some(2)).is_none(),
        "a file put back at the same path unseen"
    );
    assert_eq!(again.meta.size, 9);
    assert_eq!(reader.get_shared(&name, Some(2)).unwrap().meta.size, 15);
}

/// A data-only lookup past its time to live comes back without a lookup
/// (`get_cached` makes none) while its file is the one it found, unchanged, and
/// for a latest version while the name's directory is unchanged; a new version, a
/// file put back at the same path, a change in place (here a `chmod`, which moves
/// the change time as an attribute written in place does) and `forget` each stop it.
/// The sleeps only let the file system's clock tick; nothing is timed.
#[test]
fn expired_lookups_come_back_only_while_their_file_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let reader = Store::open(dir.path()).unwrap();
    assert_eq!(
        reader.backend(),
        Backend::Xattr,
        "this test needs user xattrs"
    );
    reader.set_data_only(true);
    let ttl = std::time::Duration::from_millis(1);
    reader.set_cache_ttl(ttl);
    let writer = Store::open(dir.path()).unwrap();
    let name = n("/dormant/obj");
    let put = |v: u64, bytes: &[u8]| put_version(&writer, &name, v, bytes);
    let expire = || std::thread::sleep(ttl * 5);
    let body = |e: &granary_store::Entry| {
        let mut b = vec![0u8; e.meta.size as usize];
        reader.read_at(e, 0, &mut b).unwrap();
        b
    };
    put(1, b"one");
    tick();
    // Latest version: looked up, expired, back from the dormant lookup.
    assert_eq!(reader.get_shared(&name, None).unwrap().meta.version, 1);
    expire();
    let back = reader.get_cached(&name, None).expect("not brought back");
    assert_eq!(back.meta.version, 1);
    assert_eq!(body(&back), b"one");
    // Again after the sweep a long-lived reader calls (the daemon's sweeper).
    expire();
    reader.sweep();
    assert!(
        reader.get_cached(&name, None).is_some(),
        "lost by the sweep"
    );
    // A new version changes the directory: the dormant latest lookup is dropped.
    expire();
    version_two_is_seen(&reader, &writer, &name);
    // By number: a file put back at the same path is another inode.
    assert_eq!(reader.get_shared(&name, Some(1)).unwrap().meta.size, 3);
    expire();
    assert!(
        reader.get_cached(&name, Some(1)).is_some(),
        "not brought back"
    );
    expire();
    writer.remove(&name, Some(1)).unwrap();
    put(1, b"one again");
    tick();
    assert!(
        reader.get_cached(&name, Some(1)).is_none(),
        "a file put back at the same path unseen"
    );
    let one = reader.get_shared(&name, Some(1)).unwrap();
    assert_eq!(body(&one), b"one again");
    // A change in place moves the change time.
    tick();
    expire();
    assert!(
        reader.get_cached(&name, Some(1)).is_some(),
        "not brought back"
    );
    expire();
    let mut mode = std::fs::metadata(&one.path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o600);
    std::fs::set_permissions(&one.path, mode).unwrap();
    assert!(
        reader.get_cached(&name, Some(1)).is_none(),
        "a change in place unseen"
    );
    // `forget` drops the dormant lookups too.
    assert_eq!(reader.get_shared(&name, Some(2)).unwrap().meta.version, 2);
    tick();
    assert_eq!(reader.get_shared(&name, Some(2)).unwrap().meta.version, 2);
    expire();
    reader.forget();
    assert!(
        reader.get_cached(&name, Some(2)).is_none(),
        "kept through forget"
    );
}
