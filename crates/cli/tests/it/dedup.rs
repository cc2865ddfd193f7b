//! Dedup fetch (`granary get`'s default when a manifest gives the chunk
//! hashes) through real daemons on loopback TCP: chunks repeated inside a
//! file are fetched once; a second fetch comes from the local store; a
//! similar file comes mostly from a neighbour that fetched the first one;
//! a neighbour answering hash requests with wrong bytes cannot poison the
//! result.

use crate::common;

use common::*;
use serde_json::Value;

/// `granary get NAME -o OUT --json` on `d`; the JSON summary.
fn get(d: &Daemon, name: &str, out: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec!["get", name, "-o", out.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let stdout = d.ok(&args);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn report(v: &Value) -> &Value {
    &v["dedup"][0]["report"]
}

fn src(v: &Value, which: &str) -> (u64, u64) {
    let s = &report(v)[which];
    (s["chunks"].as_u64().unwrap(), s["bytes"].as_u64().unwrap())
}

/// A producer with a file in its repository, published with `chunking`.
fn producer(files: &[(&str, &[u8])], chunking: &str) -> Daemon {
    let p = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    for (i, (name, bytes)) in files.iter().enumerate() {
        let f = p.dir.path().join(format!("src{i}"));
        std::fs::write(&f, bytes).unwrap();
        p.ok(&["put", f.to_str().unwrap(), name, "--chunking", chunking]);
    }
    p
}

/// A client daemon with a route to the producer for `/d`.
fn client(p: &Daemon) -> Daemon {
    let c = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    c.ok(&["route", "add", "/d", &tcp(p)]);
    trust(p, &c);
    c
}

#[test]
fn repeated_chunks_are_fetched_once_then_come_from_the_local_store() {
    // 40 fixed 4 KiB segments: 8 distinct blocks, each 5 times, then a tail.
    let blocks: Vec<Vec<u8>> = (0..8).map(|i| noise(4096, 100 + 2 * i)).collect();
    let mut file = Vec::new();
    for r in 0..5 {
        for b in &blocks {
            let _ = r;
            file.extend_from_slice(b);
        }
    }
    file.extend_from_slice(&noise(1000, 7));
    let p = producer(&[("/d/rep", &file), ("/d/same", &file)], "fixed:4096");
    let c = client(&p);
    let out = c.dir.path().join("rep");
    let v = get(&c, "/d/rep", &out, &[]);
    assert_eq!(std::fs::read(&out).unwrap(), file);
    let r = report(&v);
    assert_eq!(r["segments"], 41);
    assert_eq!(r["unique_chunks"], 9);
    assert_eq!(src(&v, "producer"), (9, 8 * 4096 + 1000));
    assert_eq!(src(&v, "repeated"), (32, 32 * 4096));
    assert_eq!(src(&v, "neighbours"), (0, 0));
    // Only the unique chunks crossed the network (one Data each), after
    // one batch "have" query to the node's own store.
    assert_eq!(v["dedup"][0]["stats"]["segments"], 9 + 1, "{v}");
    assert_eq!(v["dedup"][0]["stats"]["rejected"], 0);

    // Kept in the client's repository (by the daemon, in the background):
    // a second fetch of the same version is a verified local copy, and
    // another name with the same bytes comes from the local store by hash
    // (one batch "have" query, then the chunks).
    wait_for_version(&c, "/d/rep/v=");
    let out2 = c.dir.path().join("rep2");
    let v2 = get(&c, "/d/rep", &out2, &["--no-publish"]);
    assert_eq!(std::fs::read(&out2).unwrap(), file);
    assert_eq!(
        v2["local"][0]["local_copy"]["size"],
        file.len() as u64,
        "{v2}"
    );
    assert!(v2["dedup"].as_array().unwrap().is_empty(), "{v2}");
    assert_eq!(
        v2["stats"].as_object().map(|_| ()),
        None,
        "nothing fetched: {v2}"
    );
    let out4 = c.dir.path().join("same");
    let v4 = get(&c, "/d/same", &out4, &["--no-publish"]);
    assert_eq!(std::fs::read(&out4).unwrap(), file);
    assert_eq!(src(&v4, "local"), (9, 8 * 4096 + 1000), "{v4}");
    assert_eq!(src(&v4, "producer"), (0, 0));

    // A local copy changed on disk (outside Granary) is not used: the file
    // is fetched, and is right.
    let dir = c.data.join("repo/objects/d/rep");
    let stored = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('@') && !n.contains('.'))
        })
        .unwrap();
    let mut bad = std::fs::read(&stored).unwrap();
    bad[5000] ^= 0xFF;
    std::fs::write(&stored, &bad).unwrap();
    let out6 = c.dir.path().join("rep6");
    let o = c.cli(&[
        "get",
        "/d/rep",
        "-o",
        out6.to_str().unwrap(),
        "--no-publish",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("copy cannot be used"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read(&out6).unwrap(), file);
    // Removed from the repository: its index entries are stale, and the
    // "have" query says so (the chunks come from the producer, no local
    // request is wasted on them).
    c.ok(&["rm", "/d/rep"]);
    let out5 = c.dir.path().join("again");
    let v5 = get(&c, "/d/same", &out5, &["--no-publish"]);
    assert_eq!(std::fs::read(&out5).unwrap(), file);
    assert_eq!(src(&v5, "local"), (0, 0), "{v5}");
    assert_eq!(src(&v5, "producer"), (9, 8 * 4096 + 1000), "{v5}");
    assert_eq!(v5["dedup"][0]["stats"]["interests"], 9 + 1, "{v5}");

    // --no-dedup fetches every segment by name.
    let out3 = c.dir.path().join("rep3");
    let v3 = get(&c, "/d/rep", &out3, &["--no-dedup"]);
    assert_eq!(std::fs::read(&out3).unwrap(), file);
    assert!(v3["dedup"].as_array().unwrap().is_empty());
    assert_eq!(v3["stats"]["segments"], 41);
}

/// Version B is version A with a few insertions: content-defined chunking
/// keeps most chunks.
fn similar_pair(n: usize) -> (Vec<u8>, Vec<u8>) {
    let a = noise(n, 42);
    let mut b = Vec::with_capacity(n + 300);
    for (i, part) in a.chunks(n / 4).enumerate() {
        b.extend_from_slice(part);
        b.extend_from_slice(&noise(100, 900 + 2 * i as u64));
    }
    (a, b)
}

/// The producer cuts with sizes that are not the consumers' default (the
/// 1/4/8 KiB default of before): the kept copy is cut as the manifest root
/// declares, or no neighbour could serve its chunks.
#[test]
fn a_similar_file_comes_mostly_from_a_neighbour_by_hash() {
    let (fa, fb) = similar_pair(600_000);
    let p = producer(&[("/d/a", &fa), ("/d/b", &fb)], "fastcdc:1024:4096:8192");
    let n1 = client(&p);
    let out_a = n1.dir.path().join("a");
    let va = get(&n1, "/d/a", &out_a, &[]);
    assert_eq!(std::fs::read(&out_a).unwrap(), fa);
    // No neighbours yet and nothing local: by name.
    assert_eq!(va["dedup"][0]["by_name"], true, "{va}");

    let (vb, from_n, from_p) = b_beside_a_neighbour(&p, &n1, &fb);
    assert_eq!(from_n + from_p, fb.len() as u64, "{vb}");
    assert!(
        from_n > 8 * from_p,
        "most of B should come from the neighbour: {vb}"
    );
    assert_eq!(vb["dedup"][0]["stats"]["rejected"], 0);
}

/// A new version whose first hundred chunks all changed and whose other
/// hundred did not: the neighbour probe is spread over the file, so the
/// shared half still comes from the neighbour (a probe of the first 64
/// chunks found nothing and sent the whole file by name).
#[test]
fn a_version_with_a_new_head_still_shares_its_tail() {
    const C: usize = 4096;
    let fa = noise(200 * C, 61);
    let mut fb = noise(100 * C, 62);
    fb.extend_from_slice(&fa[100 * C..]);
    let p = producer(&[("/d/a", &fa), ("/d/b", &fb)], "fixed:4096");
    let n1 = client(&p);
    let out_a = n1.dir.path().join("a");
    get(&n1, "/d/a", &out_a, &[]);
    let (vb, from_n, from_p) = b_beside_a_neighbour(&p, &n1, &fb);
    assert_eq!(from_n, (100 * C) as u64, "{vb}");
    assert_eq!(from_p, (100 * C) as u64, "{vb}");
}

#[test]
fn a_neighbour_answering_with_wrong_bytes_cannot_poison_the_result() {
    let file = noise(20 * 4096 + 123, 3);
    let p = producer(&[("/d/f", &file)], "fixed:4096");
    // The neighbour answers every hash request with 4096 wrong bytes (the
    // right length, the wrong hash); its repository has nothing.
    let bad = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let liar = bad.serve(granary_repo::HASH_PREFIX, &["--size", "4096"]);
    let c = client(&p);
    c.ok(&["route", "add", granary_repo::HASH_PREFIX, &tcp(&bad)]);
    let out = c.dir.path().join("f");
    let v = get(&c, "/d/f", &out, &["--no-publish"]);
    assert_eq!(std::fs::read(&out).unwrap(), file, "poisoned");
    // (its output is read by a thread: give it a moment)
    let t = std::time::Instant::now();
    while liar.served() == 0 && t.elapsed() < std::time::Duration::from_secs(3) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(liar.served() > 0, "the bad neighbour was never asked: {v}");
    // Every 4096-byte chunk (all within the neighbour probe) was offered
    // wrong bytes (and asked again with MustBeFresh); none was taken, so
    // the file came by name from the producer.
    assert_eq!(v["dedup"][0]["by_name"], true, "{v}");
    let rejected = v["dedup"][0]["lookup_stats"]["rejected"].as_u64().unwrap();
    assert!(rejected >= 20, "{v}");
    assert_eq!(v["objects"][0]["segments"], 21, "{v}");
    assert!(v["objects"][0]["error"].is_null(), "{v}");
}

/// With no neighbours (no route for hash requests but the producer's), and
/// nothing in the local store, the dedup path sends no hash request at
/// all beyond one batch "have" query to its own store: the file comes by
/// name, and the producer's node sees only name requests.
#[test]
fn with_no_neighbours_no_hash_request_leaves_the_node() {
    let file = noise(300 * 1024 + 17, 9);
    let p = producer(&[("/d/n", &file)], "fastcdc");
    let c = client(&p);
    let out = c.dir.path().join("n");
    let v = get(&c, "/d/n", &out, &["--no-publish"]);
    assert_eq!(std::fs::read(&out).unwrap(), file);
    assert_eq!(v["dedup"][0]["by_name"], true, "{v}");
    let lookups = &v["dedup"][0]["lookup_stats"];
    assert_eq!(
        lookups["interests"], 1,
        "one have query for a few dozen chunks: {v}"
    );
    // Out of the node went the file's segments plus discovery (metadata,
    // manifest): no hash request.
    let segs = v["objects"][0]["segments"].as_u64().unwrap();
    let faces = c.ok(&["face", "list"]);
    let out: u64 = faces
        .lines()
        .filter(|l| l.contains("scope=non-local"))
        .filter_map(|l| l.split_whitespace().find_map(|kv| kv.strip_prefix("out=")))
        .filter_map(|o| o.split('i').next()?.parse::<u64>().ok())
        .sum();
    assert!(
        (segs..segs + 8).contains(&out),
        "{segs} segments, {out} Interests out of the node: {faces}"
    );
    let _ = &p;
}

/// Once `n1` keeps /d/a, a second client whose hash requests go to `n1`
/// fetches /d/b (checked against `fb`): its summary and the bytes that came
/// from the neighbour and from the producer.
fn b_beside_a_neighbour(p: &Daemon, n1: &Daemon, fb: &[u8]) -> (Value, u64, u64) {
    wait_for_version(n1, "/d/a/v=");
    let n2 = client(p);
    n2.ok(&["route", "add", granary_repo::HASH_PREFIX, &tcp(n1)]);
    let out_b = n2.dir.path().join("b");
    let vb = get(&n2, "/d/b", &out_b, &[]);
    assert_eq!(std::fs::read(&out_b).unwrap(), fb);
    let (_, from_n) = src(&vb, "neighbours");
    let (_, from_p) = src(&vb, "producer");
    (vb, from_n, from_p)
}

/// Polls `d`'s `ls` until it lists `what` (a fetched file is kept in the
/// repository by the daemon in the background).
fn wait_for_version(d: &Daemon, what: &str) {
    let t = std::time::Instant::now();
    loop {
        let ls = d.ok(&["ls"]);
        if ls.contains(what) {
            return;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "{what} never appeared in the repository: {ls}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// `granary rm` right after a default `get`, while the daemon is still
/// keeping its copy in the background: the removal wins, the copy never
/// stays in the repository (before, it landed after the removal and the
/// next `get` was served locally).
#[test]
fn rm_during_the_background_keep_wins() {
    let file = noise(48 << 20, 31);
    let p = producer(&[("/d/big", &file)], "fastcdc");
    let c = client(&p);
    let out = c.dir.path().join("big");
    get(&c, "/d/big", &out, &[]);
    let rm = c.cli(&["rm", "/d/big"]);
    let said = String::from_utf8_lossy(&rm.stderr).to_string();
    assert!(rm.status.success(), "{said}");
    assert!(
        said.contains("removed 1 version") || said.contains("still keeping"),
        "{said}"
    );
    // Settled: no ingest left in the store's staging area and no version
    // listed, five times in a row (a copy landing late would stay listed).
    let tmp = c.data.join("repo").join("tmp");
    let t = std::time::Instant::now();
    let mut quiet = 0;
    while quiet < 5 {
        let staging = std::fs::read_dir(&tmp).map_or(0, |d| d.count());
        let ls = c.ok(&["ls"]);
        if staging == 0 && !ls.contains("/d/big") {
            quiet += 1;
        } else {
            quiet = 0;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(30),
            "the removed object is back in the repository: {ls}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // And a new fetch comes from the producer again, not from a local copy.
    let v = get(&c, "/d/big", &out, &["--no-publish"]);
    assert_eq!(std::fs::read(&out).unwrap(), file);
    assert!(v["local"].as_array().is_none_or(|l| l.is_empty()), "{v}");
}
