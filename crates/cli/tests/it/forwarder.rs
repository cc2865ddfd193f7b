//! The forwarder as a running process: real daemons, real sockets.

use crate::common;

use std::io::{Read, Write};
use std::time::Duration;

use common::*;
use granary_packet::{Data, Interest, InterestFields, Name};

fn peek(d: &Daemon, name: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["peek", name, "--hex"];
    args.extend_from_slice(extra);
    d.cli(&args)
}

#[test]
fn no_route_gives_a_prompt_nack() {
    let d = Daemon::start(&[]);
    let o = peek(&d, "/nowhere/x", &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    // Answered by a Nack (not left to time out): what made it prompt.
    assert!(err.contains("nack NoRoute"), "{err}");
}

#[test]
fn local_producer_consumer_and_cache() {
    local_producer_consumer_and_cache_on(&[]);
}

#[test]
fn local_producer_consumer_and_cache_sharded() {
    local_producer_consumer_and_cache_on(&["--shards", "2"]);
}

fn local_producer_consumer_and_cache_on(daemon_args: &[&str]) {
    let d = Daemon::start(daemon_args);
    let p = d.serve("/local/p", &["--size", "8192"]);
    let o = peek(&d, "/local/p/a", &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        hex::decode(String::from_utf8_lossy(&o.stdout).trim())
            .unwrap()
            .len(),
        8192
    );
    let hits = d.cs_stat("hits");
    assert!(peek(&d, "/local/p/a", &[]).status.success());
    assert_eq!(d.cs_stat("hits"), hits + 1, "second fetch from the CS");
    assert_eq!(p.served_at_least(1), 1);
    // Status and face list show the traffic.
    assert!(d.ok(&["status"]).contains("satisfied"));
    assert!(d.ok(&["face", "list"]).contains("scope=local"));
    assert!(d.ok(&["route", "list"]).contains("fib /local/p"));
}

#[test]
fn garbage_face_is_dropped_and_others_unaffected() {
    let d = Daemon::start(&[]);
    let _p = d.serve("/g", &["--size", "100"]);
    let mut bad = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    // Random bytes (an invalid TLV type 0 right away, then noise).
    let mut rng = fastrand::Rng::with_seed(0x9E37_79B9_7F4A_7C15);
    let noise: Vec<u8> = std::iter::once(0u8)
        .chain((0..4096).map(|_| rng.u8(..)))
        .collect();
    let _ = bad.write_all(&noise);
    bad.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut buf = [0u8; 16];
    let n = bad.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the forwarder closes a face that sends garbage");
    for i in 0..5 {
        assert!(
            peek(&d, &format!("/g/{i}"), &[]).status.success(),
            "fetch {i} after garbage"
        );
    }
    // An oversized packet is refused the same way.
    let mut big = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    let _ = big.write_all(&[5, 0xFE, 0x00, 0x10, 0x00, 0x00]);
    big.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    assert_eq!(big.read(&mut buf).unwrap_or(0), 0);
    assert!(peek(&d, "/g/after", &[]).status.success());
}

#[test]
fn localhost_is_unreachable_from_non_local_faces() {
    let d = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let mut s = std::net::TcpStream::connect(d.tcp.as_ref().unwrap()).unwrap();
    let mut f = InterestFields::new(Name::from_uri("/localhost/nfd/status/general").unwrap());
    f.can_be_prefix = true;
    f.nonce = Some(1);
    f.lifetime = Some(1000);
    s.write_all(f.encode().wire()).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let mut buf = [0u8; 64];
    let r = s.read(&mut buf);
    assert!(
        r.is_err(),
        "no answer to /localhost from a TCP face, got {r:?}"
    );
    // The same from the local socket works.
    assert!(d.ok(&["status"]).contains("granary-"));
    // And /localhost is never forwarded to a non-local face.
    let other = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let addr = format!("tcp4://{}", other.tcp.as_ref().unwrap());
    d.ok(&["route", "add", "/localhost/x", &addr]);
    let o = peek(&d, "/localhost/x/y", &[]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("NoRoute"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A — B over TCP, B — C over UDP with MTU 1400 (8 KiB Data fragmented);
/// B's face to C is created with NDNLPv2 link reliability (`--reliable`),
/// C's (on demand) without, as C's channel has it off (`--udp-reliability
/// false`; the default is on): C still Acks what B sends.
#[test]
fn three_daemons_chained_with_cache_aggregation_and_loops() {
    three_daemons_chained(&[]);
}

/// The same with B sharded: aggregation, loops (dead-nonce list and PIT on
/// a data shard), B's CS and `cs erase` across its shards.
#[test]
fn three_daemons_chained_with_the_middle_one_sharded() {
    three_daemons_chained(&["--shards", "3"]);
}

fn three_daemons_chained(b_args: &[&str]) {
    let c = Daemon::start(&[
        "--listen",
        "udp://127.0.0.1:0",
        "--udp-reliability",
        "false",
    ]);
    let b = Daemon::start(
        &[
            &[
                "--listen",
                "tcp://127.0.0.1:0",
                "--listen",
                "udp://127.0.0.1:0",
                "--udp-mtu",
                "1400",
            ][..],
            b_args,
        ]
        .concat(),
    );
    let a = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let c_udp = format!("udp4://{}", c.udp.as_ref().unwrap());
    let b_tcp = format!("tcp4://{}", b.tcp.as_ref().unwrap());
    a.ok(&["route", "add", "/chain", &b_tcp]);
    b.ok(&["route", "add", "/chain", &c_udp, "--reliable"]);
    let faces = b.ok(&["face", "list"]);
    let to_c = faces
        .lines()
        .find(|l| l.contains(&format!("remote={c_udp}")))
        .unwrap_or_else(|| panic!("no face to C in\n{faces}"));
    assert!(to_c.ends_with(" reliable"), "{to_c}");
    let p = c.serve("/chain", &["--size", "8192", "--delay-ms", "300"]);

    let o = peek(&a, "/chain/file/1", &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let content = hex::decode(String::from_utf8_lossy(&o.stdout).trim()).unwrap();
    assert_eq!(content.len(), 8192);
    assert_eq!(p.served_at_least(1), 1);

    // Second fetch: A's cache is disabled so B answers from its CS.
    a.ok(&["cs", "config", "--serve", "off"]);
    let hits = b.cs_stat("hits");
    let o = peek(&a, "/chain/file/1", &[]);
    assert!(o.status.success());
    assert_eq!(
        hex::decode(String::from_utf8_lossy(&o.stdout).trim()).unwrap(),
        content
    );
    assert_eq!(b.cs_stat("hits"), hits + 1, "served from B's cache");
    assert_eq!(p.served_at_least(1), 1, "producer not asked again");
    // `cs erase` drops it (as `nfdc cs erase`): the next fetch goes on to C
    // and B caches it again.
    let entries = b.cs_stat("entries");
    assert!(entries >= 1);
    let out = b.ok(&["cs", "erase", "/chain/file"]);
    assert!(out.contains("erased 1 packet(s)"), "{out}");
    assert_eq!(b.cs_stat("entries"), entries - 1);
    let hits = b.cs_stat("hits");
    assert!(peek(&a, "/chain/file/1", &[]).status.success());
    assert_eq!(b.cs_stat("hits"), hits, "B had nothing left to answer from");
    assert_eq!(b.cs_stat("entries"), entries);
    // `rm` of a name B's repository does not hold fails, and still drops
    // what B cached of it.
    let o = b.cli(&["rm", "/chain/file"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("evicted 1 cached packet(s)"), "{err}");
    assert_eq!(b.cs_stat("entries"), entries - 1);

    // Aggregation: two consumers at A at once, one Interest reaches C.
    let t1 = std::thread::spawn({
        let sock = a.socket.clone();
        move || {
            granary()
                .args(["--socket", sock.to_str().unwrap(), "peek", "/chain/agg"])
                .output()
                .unwrap()
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    let o2 = peek(&a, "/chain/agg", &[]);
    let o1 = t1.join().unwrap();
    assert!(o1.status.success() && o2.status.success());
    assert_eq!(
        p.served_at_least(2),
        2,
        "one Interest upstream for two consumers"
    );

    // Loop: B routes /loop back to A, A routes /loop to B.
    let a_tcp = format!("tcp4://{}", a.tcp.as_ref().unwrap());
    a.ok(&["route", "add", "/loop", &b_tcp]);
    b.ok(&["route", "add", "/loop", &a_tcp]);
    let o = peek(&a, "/loop/x", &["--lifetime", "3000"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("nack"),
        "loop ends in a Nack, not a timeout: {err}"
    );
    let faces = c.ok(&["face", "list"]);
    assert!(
        faces
            .lines()
            .filter(|l| l.contains("udp4://"))
            .all(|l| !l.ends_with(" reliable")),
        "C's on-demand face keeps its channel's setting (off): {faces}"
    );
}

/// A raw Unix connection to `d` that has registered `prefix` (the
/// ControlResponse read and checked), with a 3 s read timeout.
fn raw_producer(d: &Daemon, prefix: &str) -> std::os::unix::net::UnixStream {
    let mut producer = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    let mut p = granary_mgmt::ControlParameters::new();
    p.name = Some(Name::from_uri(prefix).unwrap());
    let cmd = granary_mgmt::make_command(
        &Name::from_uri("/localhost/nfd").unwrap(),
        "rib",
        "register",
        &p,
    )
    .encode();
    producer.write_all(cmd.wire()).unwrap();
    producer
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut buf = vec![0u8; 65536];
    let n = producer.read(&mut buf).unwrap();
    let resp = Data::decode(bytes::Bytes::copy_from_slice(&buf[..n])).unwrap();
    assert!(resp.content().starts_with(&[0x65]), "ControlResponse");
    producer
}

/// Raw check that the forwarder decrements HopLimit and adds a Nonce without
/// touching the rest (signature intact).
#[test]
fn forwarded_interest_keeps_its_bytes_except_nonce_and_hop_limit() {
    let d = Daemon::start(&[]);
    let mut producer = raw_producer(&d, "/raw");
    let mut buf = vec![0u8; 65536];
    let mut consumer = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    let mut f = InterestFields::new(Name::from_uri("/raw/x").unwrap());
    f.hop_limit = Some(5);
    f.app_params = Some(bytes::Bytes::from_static(b"payload"));
    let i = f.encode();
    consumer.write_all(i.wire()).unwrap();
    let n = producer.read(&mut buf).unwrap();
    let got = Interest::decode(bytes::Bytes::copy_from_slice(&buf[..n])).unwrap();
    assert_eq!(got.hop_limit, Some(4));
    assert!(got.nonce.is_some());
    assert!(got.params_digest_ok());
    assert_eq!(got.name, i.name);
    assert_eq!(got.app_params, i.app_params);
}

fn command_over(
    stream: &mut std::net::TcpStream,
    wire: &[u8],
) -> Option<granary_mgmt::ControlResponse> {
    use granary_mgmt::TlvElement;
    stream.write_all(wire).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut buf = vec![0u8; 65536];
    let n = stream.read(&mut buf).ok()?;
    let d = Data::decode(bytes::Bytes::copy_from_slice(&buf[..n])).ok()?;
    granary_mgmt::ControlResponse::decode(&bytes::Bytes::copy_from_slice(d.content())).ok()
}

/// `/localhop/nfd` commands from a non-local face: only signed v0.3 commands
/// by a trust anchor's key are obeyed, once.
#[test]
fn localhop_commands_need_a_trusted_signature() {
    let dir = tempfile::tempdir().unwrap();
    let dd = dir.path().to_str().unwrap();
    let key = |args: &[&str]| {
        let o = granary()
            .args(["--data-dir", dd, "key"])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    key(&["gen", "/admin", "--type", "ecdsa"]);
    key(&["gen", "/stranger"]);
    let cert = dir.path().join("admin.ndncert");
    std::fs::write(&cert, key(&["export", "/admin"])).unwrap();
    key(&["trust", cert.to_str().unwrap()]);
    // A daemon on that data directory (it reads keychain/trust at start).
    let sock = dir.path().join("g.sock");
    let mut child = granary()
        .args([
            "--data-dir",
            dd,
            "--socket",
            sock.to_str().unwrap(),
            "daemon",
            "--listen",
            "tcp://127.0.0.1:0",
            "--http",
            "off",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut tcp = None;
    {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        for l in lines.by_ref() {
            let l = l.unwrap();
            if let Some(a) = l.strip_prefix("listening tcp://") {
                tcp = Some(a.to_string());
            }
            if l == "ready" {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
    }
    let kc = granary_security::KeyChain::open(dir.path().join("keychain")).unwrap();
    let localhop = Name::from_uri("/localhop/nfd").unwrap();
    let mut p = granary_mgmt::ControlParameters::new();
    p.name = Some(Name::from_uri("/remote/route").unwrap());
    let cmd = || granary_mgmt::make_command(&localhop, "rib", "register", &p);
    let mut s = std::net::TcpStream::connect(tcp.unwrap()).unwrap();

    let unsigned = cmd().encode();
    assert_eq!(
        command_over(&mut s, unsigned.wire()).unwrap().status_code,
        403
    );
    let stranger = kc
        .signer(&Name::from_uri("/stranger").unwrap())
        .unwrap()
        .sign_interest(cmd(), None)
        .unwrap();
    assert_eq!(
        command_over(&mut s, stranger.wire()).unwrap().status_code,
        403
    );
    let good = kc
        .signer(&Name::from_uri("/admin").unwrap())
        .unwrap()
        .sign_interest(cmd(), None)
        .unwrap();
    let r = command_over(&mut s, good.wire()).unwrap();
    assert_eq!(r.status_code, 200, "{}", r.status_text);
    // The same signed command again is a replay (new Nonce, same SignatureNonce).
    let replay = good.with_nonce_and_hop_limit(12345, None);
    assert_eq!(
        command_over(&mut s, replay.wire()).unwrap().status_code,
        403
    );
    let _ = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
}

#[test]
fn multicast_strategy_reaches_every_next_hop() {
    let d = Daemon::start(&[]);
    let p1 = d.serve("/mc", &["--size", "10"]);
    let p2 = d.serve("/mc", &["--size", "10"]);
    assert!(peek(&d, "/mc/best", &[]).status.success());
    // Producers' counts are read by threads that can lag: wait for them.
    let sum = |want| {
        let end = std::time::Instant::now() + Duration::from_secs(3);
        while p1.served() + p2.served() < want && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(50));
        p1.served() + p2.served()
    };
    assert_eq!(sum(1), 1, "best-route asks one producer");
    d.ok(&["strategy", "set", "/mc", "multicast"]);
    assert!(d
        .ok(&["strategy"])
        .contains("/mc /localhost/nfd/strategy/multicast"));
    assert!(peek(&d, "/mc/all", &[]).status.success());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sum(3), 3, "multicast asks both");
}

fn vm_hwm_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .trim()
        .parse()
        .unwrap()
}

/// A consumer that asks for 30,000 × 8 KiB and never reads: the forwarder's
/// memory stays bounded (send queue), and a consumer of another producer is
/// served meanwhile. (Consumers of the flooded producer queue behind the
/// flood: queues are FIFO, there is no per-consumer fairness yet.)
#[test]
fn slow_consumer_cannot_grow_memory() {
    let d = Daemon::start(&["--cs-capacity", "0"]);
    let _p = d.serve("/slow", &["--size", "8192"]);
    let _q = d.serve("/other", &["--size", "100"]);
    let mut hog = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    let mut batch = Vec::new();
    for i in 0..30_000u32 {
        let mut f = InterestFields::new(Name::from_uri(&format!("/slow/{i}")).unwrap());
        f.nonce = Some(i);
        batch.extend_from_slice(f.encode().wire());
    }
    hog.set_write_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let _ = hog.write_all(&batch);
    std::thread::sleep(Duration::from_secs(2));
    let o = peek(&d, "/other/x", &[]);
    assert!(
        o.status.success(),
        "another consumer is still served: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let kib = vm_hwm_kib(d.child.id());
    // 30,000 × 8 KiB would be 240 MiB. The bounds: the faces → forwarder
    // channel (8192 events) and the hog's send queue (4096 packets), ≈ 100 MiB
    // of 8.3 KiB Data at most, on top of an idle daemon's ~15 MiB (measured
    // 116–123 MiB peak here; allocator slack makes up the rest).
    eprintln!("forwarder peak RSS {kib} KiB");
    assert!(kib < 150 * 1024, "forwarder peak RSS {kib} KiB");
    drop(hog);
}

/// `--nfd-socket` also listens where unmodified NFD apps look.
#[test]
fn nfd_socket_listener() {
    let path = std::path::Path::new(granary_forwarder::daemon::NFD_SOCKET);
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        panic!(
            "{} is already served by another process; stop it to run this test",
            path.display()
        );
    }
    let d = Daemon::start(&["--nfd-socket"]);
    let o = granary()
        .args(["--socket", path.to_str().unwrap(), "status"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    drop(d);
    assert!(!path.exists(), "socket file removed on shutdown");
}

/// NDNLPv2 CachePolicy NoCache is honoured from local faces only, as NFD
/// does: Data from a TCP producer that asks for it is cached all the same.
#[test]
fn cache_policy_from_a_non_local_face_is_ignored() {
    let d = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let mut s = std::net::TcpStream::connect(d.tcp.as_ref().unwrap()).unwrap();
    let me = s.local_addr().unwrap();
    // Route /np to this connection's face.
    let mut face = None;
    for _ in 0..50 {
        face = d
            .ok(&["face", "list"])
            .lines()
            .find(|l| l.contains(&format!("remote=tcp4://{me}")))
            .and_then(|l| l.strip_prefix("faceid="))
            .and_then(|l| l.split_whitespace().next())
            .map(str::to_string);
        if face.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let face = face.expect("the TCP connection's face");
    d.ok(&["route", "add", "/np", &face]);
    let before = d.cs_stat("entries");
    let consumer = std::thread::spawn({
        let sock = d.socket.clone();
        move || {
            granary()
                .args(["--socket", sock.to_str().unwrap(), "peek", "/np/x"])
                .output()
                .unwrap()
        }
    });
    // Answer the Interest with a Data wrapped in an LpPacket that carries
    // CachePolicy NoCache.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = vec![0u8; 8800];
    let n = s.read(&mut buf).unwrap();
    let i = Interest::decode(bytes::Bytes::copy_from_slice(&buf[..n])).unwrap();
    assert_eq!(i.name.to_string(), "/np/x");
    let data = granary_packet::DataBuilder::new(i.name.clone())
        .content(&b"cached anyway"[..])
        .freshness_period(10_000)
        .sign_with(32, |m| {
            Ok::<_, ()>(bytes::Bytes::copy_from_slice(&granary_packet::sha256(m)))
        })
        .unwrap();
    let lp = granary_packet::lp::LpPacket {
        cache_policy: Some(1),
        fragment: Some(data.wire().clone()),
        ..Default::default()
    };
    let mut wire = bytes::BytesMut::new();
    lp.encode_to(&mut wire);
    s.write_all(&wire).unwrap();
    let o = consumer.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        d.cs_stat("entries"),
        before + 1,
        "NoCache from TCP honoured"
    );
}

/// What nfdc needs: faces/query with a FaceQueryFilter answers a dataset
/// named `<query>/<filter>/v=/seg=` holding only the matching faces;
/// faces/channels lists the listeners; faces/update turns congestion
/// marking off and on, and the face dataset reports it.
#[test]
fn faces_query_channels_and_update_as_nfdc_uses_them() {
    use granary_mgmt::{decode_dataset, ChannelStatus, FaceQueryFilter, FaceStatus, TlvElement};
    let a = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let b = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let b_tcp = format!("tcp4://{}", b.tcp.as_ref().unwrap());
    a.ok(&["route", "add", "/b", &b_tcp]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = granary_app::Client::connect(&a.socket).await.unwrap();
        let all = decode_dataset::<FaceStatus>(
            &c.dataset(&Name::from_uri("/localhost/nfd/faces/list").unwrap())
                .await
                .unwrap(),
        )
        .unwrap();
        let tcp_face = all.iter().find(|f| f.uri == b_tcp).expect("the TCP face");
        // Stream faces mark by default, and say so.
        let bit = granary_mgmt::values::face_flags::CONGESTION_MARKING_ENABLED;
        assert_ne!(tcp_face.flags & bit, 0, "{tcp_face:?}");
        assert_eq!(tcp_face.base_congestion_marking_interval, Some(100_000_000));
        assert_eq!(tcp_face.default_congestion_threshold, Some(65_536));
        for filter in [
            FaceQueryFilter {
                face_id: Some(tcp_face.face_id),
                ..Default::default()
            },
            FaceQueryFilter {
                uri_scheme: Some("tcp4".into()),
                face_scope: Some(0),
                ..Default::default()
            },
        ] {
            let q = Name::from_uri("/localhost/nfd/faces/query")
                .unwrap()
                .append(&granary_packet::Component::generic(&filter.encode()));
            // The first segment's name: <query>/<filter>/v=<n>/seg=0.
            let mut f = InterestFields::new(q.clone());
            f.can_be_prefix = true;
            f.must_be_fresh = true;
            let granary_app::Reply::Data(d) = c.express(f).await.unwrap() else {
                panic!("faces/query was Nacked")
            };
            assert_eq!(d.name().len(), q.len() + 2, "{}", d.name());
            assert!(q.is_prefix_of(d.name()));
            assert!(
                d.name().get(-1).unwrap().as_segment().is_some(),
                "{}",
                d.name()
            );
            let got = decode_dataset::<FaceStatus>(&c.dataset(&q).await.unwrap()).unwrap();
            assert_eq!(got.len(), 1, "{filter:?}: {got:?}");
            assert_eq!(got[0].face_id, tcp_face.face_id);
        }
        let channels = decode_dataset::<ChannelStatus>(
            &c.dataset(&Name::from_uri("/localhost/nfd/faces/channels").unwrap())
                .await
                .unwrap(),
        )
        .unwrap();
        let uris: Vec<&str> = channels.iter().map(|c| c.local_uri.as_str()).collect();
        assert!(
            uris.contains(&format!("tcp4://{}", a.tcp.as_ref().unwrap()).as_str()),
            "{uris:?}"
        );
        assert!(uris.iter().any(|u| u.starts_with("unix://")), "{uris:?}");
    });
    let id = a
        .ok(&["face", "list"])
        .lines()
        .find(|l| l.contains(&b_tcp))
        .and_then(|l| {
            l.split_whitespace()
                .next()?
                .strip_prefix("faceid=")?
                .parse::<u64>()
                .ok()
        })
        .unwrap();
    let show = a.ok(&["face", "show", &id.to_string()]);
    assert!(
        show.contains(&b_tcp) && show.contains("congestion-marking"),
        "{show}"
    );
    a.ok(&[
        "face",
        "update",
        &id.to_string(),
        "--congestion-marking",
        "off",
        "--marking-threshold",
        "1000",
    ]);
    let show = a.ok(&["face", "show", &id.to_string()]);
    assert!(!show.contains("congestion-marking"), "{show}");
    let channels = a.ok(&["face", "channels"]);
    assert!(channels.contains("unix://"), "{channels}");
    assert!(!a.cli(&["face", "show", "999999"]).status.success());
}

#[test]
fn vip_strategy_and_cs_policy_are_set_by_command() {
    let d = Daemon::start(&[]);
    let p = d.serve("/v", &["--size", "10"]);
    d.ok(&["strategy", "set", "/v", "vip"]);
    assert!(d
        .ok(&["strategy"])
        .contains("/v /localhost/nfd/strategy/vip/v=1"));
    let out = d.ok(&["cs", "config", "--policy", "vip"]);
    assert!(out.contains("policy=vip"), "{out}");
    // The vip strategy forwards to the local producer; this node is the
    // source of /v, where VIP neither counts nor caches (its demand is
    // served at once), so every request reaches the producer.
    for i in 0..3 {
        assert!(peek(&d, "/v/x", &[]).status.success(), "peek {i}");
        std::thread::sleep(Duration::from_millis(250));
    }
    let end = std::time::Instant::now() + Duration::from_secs(3);
    while p.served() < 3 && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(p.served(), 3);
    assert!(d.ok(&["cs", "info"]).contains("entries=0"));
    // Back to LRU: the next Data is cached and answers the one after.
    assert!(d
        .ok(&["cs", "config", "--policy", "lru"])
        .contains("policy=lru"));
    assert!(peek(&d, "/v/y", &[]).status.success());
    assert!(peek(&d, "/v/y", &[]).status.success());
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(p.served(), 4, "the second /v/y came from the CS");
    assert!(!d.cli(&["cs", "config", "--policy", "mru"]).status.success());
}

#[test]
fn face_rate_sets_the_vip_capacity() {
    // A's face to B carries VIPs in proportion to the rate configured on it
    // (default VIP: 100 ms periods, 8192-byte objects).
    let a = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let b = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let b_tcp = format!("tcp4://{}", b.tcp.as_ref().unwrap());
    a.ok(&["route", "add", "/b", &b_tcp]);
    a.ok(&["strategy", "set", "/b", "vip"]);
    let id = a
        .ok(&["face", "list"])
        .lines()
        .find(|l| l.contains(&b_tcp))
        .and_then(|l| {
            l.split_whitespace()
                .next()?
                .strip_prefix("faceid=")?
                .parse::<u64>()
                .ok()
        })
        .unwrap();
    let capacity = |want: &str| {
        // VIP notices the strategy at its next period.
        let end = std::time::Instant::now() + Duration::from_secs(3);
        loop {
            let show = a.ok(&["face", "show", &id.to_string()]);
            if show.contains(want) || std::time::Instant::now() > end {
                return show;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // Neither configured nor measured (no Data yet): the default, 200.
    let show = capacity("vip-capacity=200/period");
    assert!(show.contains("vip-capacity=200/period"), "{show}");
    // 40 Mbit/s: 40e6 · 0.1 / (8 · 8192) = 61 objects a period.
    a.ok(&["face", "update", &id.to_string(), "--rate", "40mbit"]);
    let show = capacity("vip-capacity=61/period");
    assert!(show.contains("vip-capacity=61/period"), "{show}");
    // 0: measured again (nothing received: the default).
    a.ok(&["face", "update", &id.to_string(), "--rate", "0"]);
    let show = capacity("vip-capacity=200/period");
    assert!(show.contains("vip-capacity=200/period"), "{show}");
    let bad = a.cli(&["face", "update", &id.to_string(), "--rate", "fast"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a rate"));
    // A sharded forwarder has no VIP: FaceRate is refused with the reason.
    let s = Daemon::start(&["--shards", "2", "--listen", "tcp://127.0.0.1:0"]);
    s.ok(&["route", "add", "/b", &b_tcp]);
    let sid = s
        .ok(&["face", "list"])
        .lines()
        .find(|l| l.contains(&b_tcp))
        .and_then(|l| {
            l.split_whitespace()
                .next()?
                .strip_prefix("faceid=")?
                .parse::<u64>()
                .ok()
        })
        .unwrap();
    let o = s.cli(&["face", "update", &sid.to_string(), "--rate", "1mbit"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--shards 1"),
        "{o:?}"
    );
}

/// A sharded forwarder (`--shards 3`) beside the single-lock default: exact
/// Interests spread over the data shards by name hash, and every count,
/// erase and route change reaches all of them.
#[test]
fn sharded_forwarder_sums_its_shards_and_follows_route_changes() {
    let d = Daemon::start(&["--shards", "3"]);
    let p = d.serve("/sh", &["--size", "4000"]);
    let names: Vec<String> = (0..24).map(|k| format!("/sh/item/{k}")).collect();
    for n in &names {
        let o = peek(&d, n, &[]);
        assert!(
            o.status.success(),
            "{n}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let content = hex::decode(String::from_utf8_lossy(&o.stdout).trim()).unwrap();
        assert_eq!(content.len(), 4000);
    }
    assert_eq!(p.served_at_least(24), 24);
    // 24 names over 3 shards: the counts are the sums over the shards.
    assert_eq!(d.cs_stat("entries"), 24);
    let hits = d.cs_stat("hits");
    for n in &names {
        assert!(peek(&d, n, &[]).status.success());
    }
    assert_eq!(d.cs_stat("hits"), hits + 24, "every second fetch from a CS");
    assert_eq!(p.served(), 24, "the producer was not asked again");
    let status = d.ok(&["status"]);
    assert!(status.contains("cs entries       24"), "{status}");
    assert!(status.contains("satisfied        24 "), "{status}");
    // A CanBePrefix Interest goes to the control shard, and finds Data
    // cached on the data shards (the producer is not asked).
    let o = peek(&d, "/sh/item", &["--prefix"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        d.cs_stat("hits"),
        hits + 25,
        "CanBePrefix from a data shard's CS"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(p.served(), 24, "the producer was not asked for the prefix");
    let out = d.ok(&["cs", "erase", "/sh"]);
    assert!(out.contains("erased 24 packet(s)"), "{out}");
    assert_eq!(d.cs_stat("entries"), 0);

    // A route added and removed by command reaches every shard.
    let b = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let _r = b.serve("/up", &["--size", "100"]);
    let b_tcp = format!("tcp4://{}", b.tcp.as_ref().unwrap());
    d.ok(&["route", "add", "/up", &b_tcp]);
    for k in 0..12 {
        let o = peek(&d, &format!("/up/{k}"), &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let faces = d.ok(&["face", "list"]);
    let face_id = faces
        .lines()
        .find(|l| l.contains(&format!("remote={b_tcp}")))
        .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("faceid=")))
        .unwrap_or_else(|| panic!("no face to B in\n{faces}"))
        .to_string();
    d.ok(&["route", "remove", "/up", &face_id]);
    for k in 12..24 {
        let o = peek(&d, &format!("/up/{k}"), &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("nack NoRoute"),
            "/up/{k} after the route was removed: {err}"
        );
    }
    // The VIP counts are one node-wide view: refused on a sharded node.
    let o = d.cli(&["strategy", "set", "/v", "vip"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("one forwarding shard"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A file fetched across a sharded node: the repository's discovery
/// (CanBePrefix, on the control shard) and its segments (exact, on the data
/// shards) both come back, byte for byte.
#[test]
fn a_file_crosses_a_sharded_node() {
    let b = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let a = Daemon::start(&["--shards", "2"]);
    let src = b.dir.path().join("src");
    let content: Vec<u8> = (0..3_000_000u32).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(&src, &content).unwrap();
    b.ok(&["put", src.to_str().unwrap(), "/far/file"]);
    a.ok(&[
        "route",
        "add",
        "/far",
        &format!("tcp4://{}", b.tcp.as_ref().unwrap()),
    ]);
    trust(&b, &a);
    let dst = a.dir.path().join("dst");
    a.ok(&["get", "/far/file", "-o", dst.to_str().unwrap()]);
    assert_eq!(std::fs::read(&dst).unwrap(), content);
}

#[test]
fn bad_shard_settings_are_refused() {
    let o = granary()
        .args(["daemon", "--shards", "0"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let dir = tempfile::tempdir().unwrap();
    let o = granary()
        .args(["--data-dir", dir.path().to_str().unwrap(), "--socket"])
        .arg(dir.path().join("s.sock"))
        .args([
            "daemon",
            "--shards",
            "2",
            "--cs-policy",
            "vip",
            "--http",
            "off",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("one forwarding shard"), "{err}");
}

/// After an Interest is satisfied, the same name and nonce again is a
/// loop only if a cache could not have answered it: MustBeFresh with a
/// FreshnessPeriod shorter than the dead-nonce list's lifetime (NFD's rule).
/// Otherwise it is forwarded as usual. Unsatisfied Interests always count.
#[test]
fn dead_nonces_after_satisfaction_follow_nfds_rule() {
    let d = Daemon::start(&["--cs-capacity", "0", "--no-repo"]);
    let mut producer = raw_producer(&d, "/dn");
    let mut buf = vec![0u8; 65536];
    let mut consumer = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    consumer
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    // Sends `name` with `nonce` twice; the producer answers what reaches it.
    // Returns what the consumer got the second time: 0x06 Data, 0x64 a Nack.
    let mut twice = |name: &str, must_be_fresh: bool| -> u8 {
        let mut f = InterestFields::new(Name::from_uri(name).unwrap());
        f.nonce = Some(0x1234_5678);
        f.must_be_fresh = must_be_fresh;
        let i = f.encode();
        let mut last = 0;
        for _ in 0..2 {
            consumer.write_all(i.wire()).unwrap();
            let n = producer.read(&mut buf);
            if let Ok(n) = n {
                let got = Interest::decode(bytes::Bytes::copy_from_slice(&buf[..n])).unwrap();
                let data = granary_packet::DataBuilder::new(got.name.clone())
                    .content(vec![1u8; 10])
                    .freshness_period(0)
                    .encode_with_signature(bytes::Bytes::from_static(&[0u8; 32]));
                producer.write_all(data.wire()).unwrap();
            }
            let n = consumer.read(&mut buf).unwrap();
            assert!(n > 0);
            last = buf[0];
        }
        last
    };
    assert_eq!(twice("/dn/plain", false), 0x06, "forwarded again, answered");
    assert_eq!(
        twice("/dn/fresh", true),
        0x64,
        "MustBeFresh, FreshnessPeriod 0: Nack Duplicate"
    );
}
