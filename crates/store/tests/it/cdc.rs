//! Content-defined chunking at ingest and the hash index, on real files.

use std::collections::HashSet;

use granary_packet::Name;
use granary_store::chunking::noise;
use granary_store::{Chunking, PutOptions, Store};
use sha2::{Digest, Sha256};

fn put(store: &Store, name: &str, data: &[u8], c: Chunking) -> granary_store::Entry {
    let opts = PutOptions {
        chunking: Some(c),
        ..Default::default()
    };
    store
        .put(&Name::from_uri(name).unwrap(), data, &opts, |_| {})
        .unwrap()
}

fn segment_hashes(store: &Store, e: &granary_store::Entry) -> Vec<[u8; 32]> {
    (0..e.meta.segments())
        .map(|s| store.segment_hash(e, s).unwrap())
        .collect()
}

/// Reads a version back segment by segment, checks each against its stored
/// hash, and returns the bytes.
fn read_back(store: &Store, name: &str) -> Vec<u8> {
    let e = store.get(&Name::from_uri(name).unwrap(), None).unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for s in 0..e.meta.segments() {
        store.read_segment(&e, s, &mut buf).unwrap();
        assert!(buf.len() <= e.meta.segment_size as usize);
        assert_eq!(
            <[u8; 32]>::from(Sha256::digest(&buf)),
            store.segment_hash(&e, s).unwrap()
        );
        let (off, len) = store.segment_range(&e, s).unwrap();
        assert_eq!((off, len), (out.len() as u64, buf.len() as u64));
        out.extend_from_slice(&buf);
    }
    assert!(store.read_segment(&e, e.meta.segments(), &mut buf).is_err());
    out
}

#[test]
fn cdc_round_trips_at_every_awkward_size() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for c in [Chunking::fastcdc(), Chunking::rabin()] {
        for (i, len) in [0usize, 1, 1023, 1024, 1025, 8191, 8192, 8193, 3 << 20]
            .into_iter()
            .enumerate()
        {
            let data = noise(len, 99 + i as u64);
            let name = format!("/t/{}/{len}", c.to_string().replace(':', "_"));
            let e = put(&store, &name, &data, c);
            assert_eq!(e.meta.chunking, c.to_string());
            assert_eq!(e.meta.size, len as u64);
            assert_eq!(read_back(&store, &name), data, "{c} {len}");
            // Streaming ingest (1 MiB blocks, tails carried across) cuts
            // exactly where cutting the whole buffer in memory does, and
            // every segment's hash is that of its bytes.
            let want = c.cutter().chunks(&data);
            let spans = store.segment_spans(&e).unwrap();
            if len > 0 {
                let lens: Vec<usize> = spans.iter().map(|s| s.1 as usize).collect();
                assert_eq!(lens, want, "{c} {len}: boundaries");
            }
            for (k, (off, l)) in spans.iter().enumerate() {
                let bytes = &data[*off as usize..*off as usize + *l as usize];
                assert_eq!(
                    store.segment_hash(&e, k as u64).unwrap(),
                    <[u8; 32]>::from(Sha256::digest(bytes)),
                    "{c} {len}: segment {k}"
                );
            }
            // The whole-file hash is not computed unless asked for.
            assert_eq!(e.meta.sha256, None);
        }
    }
    // Fixed is unchanged: no offsets file, 8 KiB segments.
    let e = put(&store, "/t/fixed", &noise(20_000, 3), Chunking::Fixed(8192));
    assert!(e.meta.is_fixed());
    assert_eq!(e.meta.segments(), 3);
    assert!(!dir
        .path()
        .join(format!("{}.offsets", e.path.display()))
        .exists());
    assert_eq!(read_back(&store, "/t/fixed"), noise(20_000, 3));
}

/// The carepo case: a new version with bytes inserted near the start.
#[test]
fn cdc_finds_shared_chunks_where_fixed_finds_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let a = noise(4 << 20, 5);
    let mut b = a.clone();
    b.splice(100..100, noise(37, 8)); // 37 bytes inserted near the start
    let shared = |c: Chunking| {
        let tag = c.to_string().replace(':', "_");
        let ea = put(&store, &format!("/a/{tag}"), &a, c);
        let eb = put(&store, &format!("/b/{tag}"), &b, c);
        let ha: HashSet<[u8; 32]> = segment_hashes(&store, &ea).into_iter().collect();
        let hb = segment_hashes(&store, &eb);
        hb.iter().filter(|h| ha.contains(*h)).count() as f64 / hb.len() as f64
    };
    let fixed = shared(Chunking::Fixed(8192));
    let fast = shared(Chunking::fastcdc());
    let rabin = shared(Chunking::rabin());
    eprintln!("shared chunks: fixed {fixed:.3} fastcdc {fast:.3} rabin {rabin:.3}");
    assert!(fixed < 0.01, "fixed {fixed}");
    assert!(fast >= 0.90, "fastcdc {fast}");
    assert!(rabin >= 0.90, "rabin {rabin}");
}

#[test]
fn hash_index_serves_chunks_survives_rename_and_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let data = noise(300_000, 11);
    let (hashes, spans) = {
        let store = Store::open(dir.path()).unwrap();
        let e = put(&store, "/ix/one", &data, Chunking::fastcdc());
        let h = segment_hashes(&store, &e);
        let spans = store.segment_spans(&e).unwrap();
        for (hh, (off, len)) in h.iter().zip(&spans) {
            let got = store.chunk(hh).unwrap().expect("indexed");
            assert_eq!(
                &got[..],
                &data[*off as usize..(*off + *len as u64) as usize]
            );
        }
        assert!(store.chunk(&[7u8; 32]).unwrap().is_none());
        // Rename: served from the new path.
        store
            .rename(
                &Name::from_uri("/ix/one").unwrap(),
                &Name::from_uri("/ix/two").unwrap(),
            )
            .unwrap();
        assert!(store.chunk(&h[3]).unwrap().is_some());
        (h, spans)
    };
    // Delete the index: rebuilt from the files on next use.
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let store = Store::open(dir.path()).unwrap();
    for (hh, (off, len)) in hashes.iter().zip(&spans) {
        let got = store.chunk(hh).unwrap().expect("rebuilt");
        assert_eq!(
            &got[..],
            &data[*off as usize..(*off + *len as u64) as usize]
        );
    }
    let r = store.reindex().unwrap();
    assert_eq!(r.versions, 1);
    assert_eq!(r.segments, hashes.len() as u64);
    // Removed: a miss, not stale bytes.
    store
        .remove(&Name::from_uri("/ix/two").unwrap(), None)
        .unwrap();
    assert!(store.chunk(&hashes[0]).unwrap().is_none());
}

#[test]
fn a_crash_before_indexing_is_caught_up_from_the_mark() {
    let dir = tempfile::tempdir().unwrap();
    let data = noise(100_000, 12);
    let h;
    {
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.index_len(), Some(0), "a new, empty index");
        let opts = PutOptions {
            chunking: Some(Chunking::rabin()),
            index: false,
            ..Default::default()
        };
        let e = store
            .put(&Name::from_uri("/c/x").unwrap(), &data[..], &opts, |_| {})
            .unwrap();
        h = segment_hashes(&store, &e);
        assert!(store.chunk(&h[0]).unwrap().is_none(), "not indexed");
        // What a crash between publication and indexing leaves behind: the mark.
        let rel = e.path.strip_prefix(dir.path().join("objects")).unwrap();
        std::fs::create_dir_all(dir.path().join("index-pending")).unwrap();
        std::fs::write(
            dir.path().join("index-pending/999999999-1"),
            rel.to_str().unwrap(),
        )
        .unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    assert!(store.chunk(&h[0]).unwrap().is_some(), "caught up on open");
    assert!(std::fs::read_dir(dir.path().join("index-pending"))
        .unwrap()
        .next()
        .is_none());
}

/// The index is only a cache of the files: one whose files are garbage is
/// set aside and rebuilt, and every chunk is found again.
#[test]
fn an_unreadable_index_is_set_aside_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let data = noise(300_000, 21);
    let hashes = {
        let store = Store::open(dir.path()).unwrap();
        let e = put(&store, "/u/x", &data, Chunking::fastcdc());
        let h = segment_hashes(&store, &e);
        assert!(store.chunk(&h[0]).unwrap().is_some());
        h
    };
    let mut stack = vec![dir.path().join("index/tree")];
    let mut spoiled = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                std::fs::write(&p, b"not an index").unwrap();
                spoiled += 1;
            }
        }
    }
    assert!(spoiled > 0);
    let store = Store::open(dir.path()).unwrap();
    for h in &hashes {
        assert!(store.chunk(h).unwrap().is_some(), "rebuilt");
    }
    assert!(dir.path().join("index.bad").is_dir(), "set aside");
}

/// One process at a time: a second open of the same index is `Busy`.
#[test]
fn the_index_is_held_by_one_opener() {
    let dir = tempfile::tempdir().unwrap();
    let first = granary_store::hash_index::Index::open(&dir.path().join("index")).unwrap();
    assert!(matches!(
        granary_store::hash_index::Index::open(&dir.path().join("index")),
        Err(granary_store::hash_index::OpenError::Busy)
    ));
    drop(first);
    assert!(granary_store::hash_index::Index::open(&dir.path().join("index")).is_ok());
}

/// A mark being written (`write_atomic`'s `.tmp-…` file in `index-pending/`)
/// is not a mark: a catch-up running meanwhile (a serving daemon's, every
/// 200 ms) leaves it alone, so the publisher's rename into place succeeds.
#[test]
fn catch_up_leaves_marks_being_written_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let pending = dir.path().join("index-pending");
    std::fs::create_dir_all(&pending).unwrap();
    // A writer that is not alive and an empty (not yet written) file: both
    // would make it look like an abandoned mark.
    let tmp = pending.join(".tmp-999999999-1");
    std::fs::write(&tmp, b"").unwrap();
    store.index_pending();
    assert!(tmp.exists(), "a mark being written was removed");
}

/// Bytes pushed through a pipe in uneven pieces (as FUSE writes arrive)
/// make exactly the version `put` makes of the same bytes: same segments,
/// same hashes, same offsets; an aborted pipe publishes nothing and leaves
/// no temp file; a kept one hands the bytes over and publishes nothing.
#[test]
fn a_piped_ingest_is_put_and_can_be_aborted_or_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let tmp_files = || std::fs::read_dir(dir.path().join("tmp")).unwrap().count();
    let data = noise((5 << 20) + 12345, 7);
    for c in [Chunking::fastcdc(), Chunking::Fixed(8192)] {
        let tag = c.to_string().replace(':', "_");
        let via_put = put(&store, &format!("/p/{tag}/put"), &data, c);
        let name = Name::from_uri(&format!("/p/{tag}/pipe")).unwrap();
        let (mut w, r) = granary_store::pipe();
        let opts = PutOptions {
            chunking: Some(c),
            ..Default::default()
        };
        let piped = std::thread::scope(|s| {
            let t = s.spawn(|| store.put_piped(&name, r, &opts, |_| {}));
            let mut off = 0;
            for (i, n) in [1usize, 4095, 1 << 20, 131072, 7, 3 << 20]
                .iter()
                .cycle()
                .enumerate()
            {
                let n = (*n + i).min(data.len() - off);
                w.write(&data[off..off + n]).unwrap();
                off += n;
                if off == data.len() {
                    break;
                }
            }
            assert_eq!(w.written(), data.len() as u64);
            w.finish();
            t.join().unwrap()
        })
        .unwrap()
        .expect("published");
        assert_eq!(piped.meta.size, via_put.meta.size);
        assert_eq!(piped.meta.segments(), via_put.meta.segments());
        assert_eq!(
            segment_hashes(&store, &piped),
            segment_hashes(&store, &via_put)
        );
        assert_eq!(read_back(&store, &name.to_string()), data);
    }
    assert_eq!(tmp_files(), 0);

    // Dropped midway: an error, nothing published, nothing left.
    let name = Name::from_uri("/p/aborted").unwrap();
    let (mut w, r) = granary_store::pipe();
    let r = std::thread::scope(|s| {
        let t = s.spawn(|| store.put_piped(&name, r, &PutOptions::default(), |_| {}));
        w.write(&data[..3 << 20]).unwrap();
        w.abort();
        t.join().unwrap()
    });
    assert!(r.is_err());
    assert!(store.get(&name, None).is_err());
    assert_eq!(tmp_files(), 0);

    // Kept: the bytes so far are in the file asked for; nothing published.
    let name = Name::from_uri("/p/kept").unwrap();
    let to = dir.path().join("kept.bin");
    let (mut w, r) = granary_store::pipe();
    let r = std::thread::scope(|s| {
        let t = s.spawn(|| store.put_piped(&name, r, &PutOptions::default(), |_| {}));
        w.write(&data[..1_000_001]).unwrap();
        w.write(&data[1_000_001..2_500_000]).unwrap();
        w.keep(to.clone());
        t.join().unwrap()
    });
    assert!(r.unwrap().is_none());
    assert!(std::fs::read(&to).unwrap() == data[..2_500_000]);
    assert!(store.get(&name, None).is_err());
    assert_eq!(tmp_files(), 0);
}

/// Staged versions are invisible until committed; a commit publishes a
/// batch (data, hashes, offsets, files written beside them, metadata) at
/// once, each version exactly as `put` makes it; a staged version whose
/// version exists already fails alone and leaves nothing behind; a
/// discarded one leaves nothing either.
#[test]
fn staged_versions_appear_only_when_committed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let tmp_files = || std::fs::read_dir(dir.path().join("tmp")).unwrap().count();
    let c = Chunking::fastcdc();
    let staged_opts = PutOptions {
        chunking: Some(c),
        staged: true,
        ..Default::default()
    };
    let mut staged = Vec::new();
    let mut want = Vec::new();
    for i in 0..20u64 {
        let data = noise(1000 + 7919 * i as usize, i);
        let src = dir.path().join(format!("src{i}"));
        std::fs::write(&src, &data).unwrap();
        let name = Name::from_uri(&format!("/g/f{i}")).unwrap();
        let (e, _) = store.put_file(&name, &src, &staged_opts, |_| {}).unwrap();
        assert!(store.is_staged(&e));
        store.write_extra(&e, "manifest", b"beside").unwrap();
        assert!(store.get(&name, None).is_err(), "staged is not visible");
        staged.push(e);
        want.push((name, data));
    }
    // One more that collides with a published version.
    let taken = put(&store, "/g/taken", b"first", c);
    let src = dir.path().join("again");
    std::fs::write(&src, b"second").unwrap();
    let opts = PutOptions {
        version: Some(taken.meta.version),
        ..staged_opts.clone()
    };
    let (dup, _) = store
        .put_file(&Name::from_uri("/g/taken").unwrap(), &src, &opts, |_| {})
        .unwrap();
    staged.push(dup);
    // And one discarded.
    let (gone, _) = store
        .put_file(
            &Name::from_uri("/g/gone").unwrap(),
            &src,
            &staged_opts,
            |_| {},
        )
        .unwrap();
    store.write_extra(&gone, "manifest", b"x").unwrap();
    store.discard(&gone);
    let done = store.commit(staged, true);
    assert_eq!(done.len(), 21);
    assert!(done[20].is_err(), "an existing version is not replaced");
    for (r, (name, data)) in done.iter().zip(&want) {
        let e = r.as_ref().unwrap();
        assert_eq!(e.meta.name, name.to_string());
        assert_eq!(read_back(&store, &name.to_string()), *data);
        let via_put = put(&store, &format!("{name}-put"), data, c);
        assert_eq!(segment_hashes(&store, e), segment_hashes(&store, &via_put));
        assert_eq!(store.read_extra(e, "manifest").unwrap(), b"beside");
    }
    assert_eq!(read_back(&store, "/g/taken"), b"first");
    assert!(store
        .get(&Name::from_uri("/g/gone").unwrap(), None)
        .is_err());
    assert_eq!(tmp_files(), 0);
}
