//! No input makes a decoder panic: every truncation and single-byte mutation
//! of valid encodings, plus random garbage, goes through every decoder and
//! through parse_command; what decodes re-encodes to the same fields.
//! Inputs the fuzzer found (fuzz/regressions/mgmt) are replayed too.

use bytes::Bytes;
use granary_mgmt::values::*;
use granary_mgmt::*;
use granary_packet::types::sig_type;
use granary_packet::{Component, Interest, InterestFields, Name, SignatureInfo};

/// Seeded draws (the workspace's one generator), deterministic.
struct Rng(fastrand::Rng);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(fastrand::Rng::with_seed(seed))
    }
    fn next(&mut self) -> u64 {
        self.0.u64(..)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn decode_everything(w: &Bytes) {
    // The fuzz target's oracle (round trips of whatever decodes).
    fuzz_oracle(w);
    let _ = ControlParameters::decode(w);
    if let Ok(r) = ControlResponse::decode(w) {
        let _ = r.params();
    }
    let _ = FaceStatus::decode(w);
    let _ = FibEntry::decode(w);
    let _ = RibEntry::decode(w);
    let _ = StrategyChoice::decode(w);
    let _ = CsInfo::decode(w);
    let _ = NextHopRecord::decode(w);
    let _ = Route::decode(w);
    let _ = GeneralStatus::decode(w);
    let _ = decode_dataset::<FaceStatus>(w);
    let _ = decode_dataset::<FibEntry>(w);
    let _ = decode_dataset::<RibEntry>(w);
    let _ = decode_dataset::<StrategyChoice>(w);
    let _ = decode_dataset::<CsInfo>(w);
    let nfd = Name::from_uri(LOCALHOST_NFD).unwrap();
    if let Ok(i) = Interest::decode(w.clone()) {
        let _ = parse_command(&i, &nfd);
        let _ = parse_command(&i, &Name::new());
    }
}

fn seeds() -> Vec<Bytes> {
    let cp = ControlParameters {
        name: Some(Name::from_uri("/a/b").unwrap()),
        face_id: Some(300),
        uri: Some("udp4://192.0.2.1:6363".into()),
        local_uri: Some("dev://eth0".into()),
        origin: Some(255),
        cost: Some(10),
        capacity: Some(1 << 20),
        count: Some(3),
        base_congestion_marking_interval: Some(100_000_000),
        default_congestion_threshold: Some(65536),
        mtu: Some(1400),
        flags: Some(1),
        mask: Some(1),
        strategy: Some(Name::from_uri("/localhost/nfd/strategy/best-route/v=5").unwrap()),
        expiration_period: Some(1000),
        face_persistency: Some(face_persistency::PERSISTENT),
        face_rate: Some(5_000_000),
    };
    let face = FaceStatus {
        face_id: 1,
        uri: "tcp4://198.51.100.7:6363".into(),
        local_uri: "tcp4://198.51.100.1:6363".into(),
        expiration_period: Some(5),
        mtu: Some(8800),
        flags: face_flags::LOCAL_FIELDS_ENABLED,
        ..Default::default()
    };
    let fib = FibEntry {
        name: Name::from_uri("/a").unwrap(),
        next_hops: vec![
            NextHopRecord {
                face_id: 1,
                cost: 2
            };
            3
        ],
    };
    let rib = RibEntry {
        name: Name::from_uri("/a").unwrap(),
        routes: vec![
            Route {
                face_id: 1,
                origin: route_origin::NLSR,
                cost: 2,
                flags: route_flags::CAPTURE,
                expiration_period: Some(9),
            };
            2
        ],
    };
    let sc = StrategyChoice {
        name: Name::from_uri("/x").unwrap(),
        strategy: Name::from_uri("/s/v=1").unwrap(),
    };
    let cs = CsInfo {
        capacity: 100,
        flags: cs_flags::ENABLE_ADMIT,
        n_entries: 1,
        n_hits: 2,
        n_misses: 3,
    };
    let gs = GeneralStatus {
        nfd_version: "0.1".into(),
        start_timestamp: 1,
        current_timestamp: 2,
        ..Default::default()
    };
    let nfd = Name::from_uri(LOCALHOST_NFD).unwrap();
    let unsigned = make_command(&nfd, "rib", "register", &cp).encode();
    let mut f = make_command(&nfd, "faces", "create", &cp);
    let mut si = SignatureInfo::new(sig_type::DIGEST_SHA256);
    si.nonce = Some(Bytes::from_static(&[1; 8]));
    si.time = Some(1_700_000_000_000);
    f.sig_info = Some(si);
    let signed = granary_packet::digest::sign_interest(f);
    let legacy_name = nfd
        .append(&Component::generic(b"rib"))
        .append(&Component::generic(b"unregister"))
        .append(&Component::generic(&cp.encode()))
        .append(&Component::generic(&[0, 0, 1, 139, 207, 229, 104, 0]))
        .append(&Component::generic(&[7; 8]))
        .append(&Component::generic(&[22, 3, 27, 1, 0]))
        .append(&Component::generic(&[23, 2, 0xAA, 0xBB]));
    let legacy = InterestFields::new(legacy_name).encode();
    vec![
        cp.encode(),
        ControlResponse::with_params(200, "OK", &cp).encode(),
        face.encode(),
        fib.encode(),
        rib.encode(),
        sc.encode(),
        cs.encode(),
        gs.encode(),
        encode_dataset(&[fib.clone(), fib]),
        unsigned.wire().clone(),
        signed.wire().clone(),
        legacy.wire().clone(),
    ]
}

#[test]
fn truncations_and_mutations_never_panic() {
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    let mut cases = 0usize;
    for seed in seeds() {
        decode_everything(&seed);
        for n in 0..seed.len() {
            decode_everything(&seed.slice(..n));
            cases += 1;
        }
        for pos in 0..seed.len() {
            for v in [0x00, 0xFF, 0xFD, 0x80, seed[pos] ^ 1, rng.next() as u8] {
                let mut m = seed.to_vec();
                m[pos] = v;
                decode_everything(&Bytes::from(m));
                cases += 1;
            }
        }
        for _ in 0..200 {
            let mut m = seed.to_vec();
            let at = rng.below(m.len() + 1);
            match rng.below(3) {
                0 => m.insert(at, rng.next() as u8),
                1 if at < m.len() => {
                    m.remove(at);
                }
                _ => m.truncate(at),
            }
            decode_everything(&Bytes::from(m));
            cases += 1;
        }
    }
    for _ in 0..2000 {
        let len = rng.below(64);
        let g: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        decode_everything(&Bytes::from(g));
        cases += 1;
    }
    let found =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/mgmt");
    for e in std::fs::read_dir(found).into_iter().flatten().flatten() {
        decode_everything(&Bytes::from(std::fs::read(e.path()).unwrap()));
    }
    assert!(cases > 10_000, "{cases}");
}

#[test]
fn reassembly_of_garbage_names_never_panics() {
    let mut rng = Rng::new(42);
    let prefix = Name::from_uri("/d").unwrap();
    let segs: Vec<_> = segment_dataset(&prefix, 3, &[5u8; 100], 10)
        .iter()
        .map(|b| granary_packet::digest::sign_data(b.clone()))
        .collect();
    for _ in 0..500 {
        let mut pick = Vec::new();
        for _ in 0..rng.below(14) {
            pick.push(segs[rng.below(segs.len())].clone());
        }
        let _ = reassemble_dataset(&pick);
    }
}
