//! carepo's experiment (Fig. 3) in network namespaces: server —(2.5 Mbit/s
//! down, 0.5 Mbit/s up, 20 ms each way)— gateway — LAN with client1 and
//! client2. client1 fetches file A (and publishes it); client2 fetches B,
//! similar to A: most of B comes from client1 by hash request, and the
//! pair takes less time than fetching both by name.

use crate::common;
use crate::netns;

use std::time::Instant;

use common::noise;
use netns::Node;

/// B is A with four 100-byte insertions.
fn similar_pair(n: usize) -> (Vec<u8>, Vec<u8>) {
    let a = noise(n, 42);
    let mut b = Vec::with_capacity(n + 400);
    for (i, part) in a.chunks(n / 4).enumerate() {
        b.extend_from_slice(part);
        b.extend_from_slice(&noise(100, 900 + 2 * i as u64));
    }
    (a, b)
}

/// `granary get` on `node` with `extra` flags; (seconds, JSON summary).
fn timed_get(
    node: &Node,
    name: &str,
    out: &std::path::Path,
    extra: &[&str],
) -> (f64, serde_json::Value) {
    // (Published with `--sign digest`: integrity only.)
    let mut args = vec![
        "get",
        name,
        "-o",
        out.to_str().unwrap(),
        "--json",
        "--integrity-only",
    ];
    args.extend_from_slice(extra);
    let t = Instant::now();
    let stdout = node.ok(&args);
    let secs = t.elapsed().as_secs_f64();
    (secs, serde_json::from_str(stdout.trim()).unwrap())
}

fn bytes_from(v: &serde_json::Value, src: &str) -> u64 {
    v["dedup"][0]["report"][src]["bytes"].as_u64().unwrap()
}

#[test]
fn carepo_fig3_similar_file_comes_from_the_neighbour() {
    use granary_testbed::topology::CarepoFig3;
    let Some((mut tb, _turn)) = netns::testbed(|_| {}) else {
        return;
    };
    let t = CarepoFig3::build(&mut tb, 2).unwrap();
    let (h1, h2) = (t.clients[0], t.clients[1]);
    let server = Node::start(&mut tb, t.server, &[]);
    let gw = Node::start(&mut tb, t.gateway, &[]);
    let c1 = Node::start(&mut tb, h1, &[]);
    let c2 = Node::start(&mut tb, h2, &[]);
    let to_server = tb.udp_path(t.wan, t.gateway, 6363).unwrap();
    let gw_lan = tb.lan_addr(t.lan, t.gateway).unwrap();
    let c1_lan = tb.lan_addr(t.lan, h1).unwrap();
    let c2_lan = tb.lan_addr(t.lan, h2).unwrap();
    gw.ok(&["route", "add", "/carepo", &format!("udp4://{to_server}")]);
    for c in [&c1, &c2] {
        c.ok(&["route", "add", "/carepo", &format!("udp4://{gw_lan}:6363")]);
    }
    // Hash requests go to the other client on the LAN (the daemon's own
    // repository is the other next hop; the prefix is multicast).
    c1.ok(&[
        "route",
        "add",
        granary_repo::HASH_PREFIX,
        &format!("udp4://{c2_lan}:6363"),
    ]);
    c2.ok(&[
        "route",
        "add",
        granary_repo::HASH_PREFIX,
        &format!("udp4://{c1_lan}:6363"),
    ]);

    let (fa, fb) = similar_pair(600_000);
    // The same files under two prefixes, so that the name fetches and the
    // dedup fetches never hit each other's packets in the gateway's cache.
    for (i, (n, bytes)) in [("a", &fa), ("b", &fb)].into_iter().enumerate() {
        let f = server.dir.path().join(format!("f{i}"));
        std::fs::write(&f, bytes).unwrap();
        for mode in ["plain", "dedup"] {
            server.ok(&[
                "put",
                f.to_str().unwrap(),
                &format!("/carepo/{mode}/{n}"),
                "--chunking",
                "fastcdc",
                "--sign",
                "digest",
            ]);
        }
    }

    // By name: client1 fetches A, client2 fetches B, nothing shared.
    let plain = ["--no-dedup", "--no-publish"];
    let (pa, _) = timed_get(&c1, "/carepo/plain/a", &c1.dir.path().join("pa"), &plain);
    let (pb, _) = timed_get(&c2, "/carepo/plain/b", &c2.dir.path().join("pb"), &plain);
    assert_eq!(std::fs::read(c1.dir.path().join("pa")).unwrap(), fa);
    assert_eq!(std::fs::read(c2.dir.path().join("pb")).unwrap(), fb);

    // Dedup: client1 fetches A over the slow link and publishes it;
    // client2 then gets most of B from client1.
    let (da, va) = timed_get(&c1, "/carepo/dedup/a", &c1.dir.path().join("da"), &[]);
    // client1's daemon keeps A in its repository in the background.
    let t = std::time::Instant::now();
    while !c1.ok(&["ls"]).contains("/carepo/dedup/a/v=") {
        assert!(t.elapsed().as_secs() < 20, "client1 never kept A");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (db, vb) = timed_get(&c2, "/carepo/dedup/b", &c2.dir.path().join("db"), &[]);
    assert_eq!(std::fs::read(c1.dir.path().join("da")).unwrap(), fa);
    assert_eq!(std::fs::read(c2.dir.path().join("db")).unwrap(), fb);
    eprintln!(
        "carepo Fig. 3: by name A {pa:.2} s + B {pb:.2} s = {:.2} s; dedup A {da:.2} s + B {db:.2} s = {:.2} s; \
         B from neighbour {} B, from producer {} B",
        pa + pb,
        da + db,
        bytes_from(&vb, "neighbours"),
        bytes_from(&vb, "producer")
    );
    eprintln!("dedup B engine statistics: {}", vb["dedup"][0]["stats"]);
    // A: nothing to share yet (the neighbour probe found nothing), so
    // everything came by name over the slow link.
    assert_eq!(va["dedup"][0]["by_name"], true, "{va}");
    assert!(va["objects"][0]["error"].is_null(), "{va}");
    // B: most from client1, the rest (the chunks around the insertions)
    // from the producer.
    let (n, p) = (bytes_from(&vb, "neighbours"), bytes_from(&vb, "producer"));
    assert_eq!(n + p, fb.len() as u64, "{vb}");
    assert!(n >= fb.len() as u64 * 8 / 10, "{vb}");
    assert!(p > 0, "the inserted bytes exist only at the producer: {vb}");
    // Times: 600 kB over 2.5 Mbit/s take ≥ 1.9 s, so the name fetches and
    // dedup A crossed the slow link; dedup B mostly did not (its time is
    // process start, discovery and the manifest over the slow link, the
    // chunks around the insertions, and publishing).
    assert!(pa >= 1.9 && pb >= 1.9 && da >= 1.9, "{pa} {pb} {da}");
    assert!(db < pb * 0.75, "dedup B {db:.2} s vs by name {pb:.2} s");
    assert!(da + db < pa + pb, "total {} vs {}", da + db, pa + pb);
}
