//! Packet and signature micro-benchmarks (single thread). Prints one line per
//! figure: `name<TAB>ops_per_sec<TAB>note`. Driven by bench/packet.sh, which
//! runs `openssl speed` beside it and prints the ratios.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use granary_packet::{Component, Data, DataBuilder, Interest, InterestFields, Name};
use granary_security::{KeyType, PrivateKey, Signer, Verifier};

fn measure(label: &str, note: &str, secs: f64, mut f: impl FnMut()) {
    // Warm up, then run batches until the time is spent.
    for _ in 0..100 {
        f();
    }
    let start = Instant::now();
    let budget = Duration::from_secs_f64(secs);
    let mut n = 0u64;
    while start.elapsed() < budget {
        for _ in 0..64 {
            f();
        }
        n += 64;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    println!("{label}\t{rate:.0}\t{note}");
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let name =
        Name::from_uri("/granary/cmip6/CMIP/NCAR/CESM2/historical/tas/v=1700000000000000").unwrap();
    let seg = name.append(&Component::segment(12345));
    let payload = Bytes::from(vec![0x42u8; 8192]);

    // --- Data, 8 KiB payload, digest-signed (the signature is not the point here)
    let data = Signer::Digest
        .sign_data(
            DataBuilder::new(seg.clone())
                .content(payload.clone())
                .freshness_period(10_000),
        )
        .unwrap();
    let wire = data.wire().clone();
    measure(
        "data8k.decode",
        "Data::decode, 8 KiB content, zero-copy",
        secs,
        || {
            black_box(Data::decode(black_box(wire.clone())).unwrap());
        },
    );
    let builder = data.to_builder();
    let sig = data.sig_value().clone();
    measure(
        "data8k.encode",
        "DataBuilder encode with precomputed SignatureValue",
        secs,
        || {
            black_box(builder.encode_with_signature(sig.clone()));
        },
    );
    measure(
        "data8k.encode+digest",
        "encode + DigestSha256 over 8 KiB",
        secs,
        || {
            black_box(Signer::Digest.sign_data(builder.clone()).unwrap());
        },
    );

    // --- Interest, typical consumer Interest
    let mut f = InterestFields::new(seg.clone());
    f.can_be_prefix = false;
    f.must_be_fresh = true;
    f.nonce = Some(0x1234_5678);
    f.lifetime = Some(4000);
    let interest = f.encode();
    let iw = interest.wire().clone();
    measure(
        "interest.decode",
        "Interest::decode (9-component name)",
        secs,
        || {
            black_box(Interest::decode(black_box(iw.clone())).unwrap());
        },
    );
    measure("interest.encode", "InterestFields::encode", secs, || {
        black_box(f.encode());
    });
    // --- Content Store: a full store (65,536 × 8 KiB segments of one object),
    // each op inserts the next segment (evicting the oldest) and looks up a
    // cached one — what a forwarder does per Data passing through.
    {
        use granary_forwarder::cs::{ContentStore, CsConfig};
        let cfg = CsConfig {
            max_bytes: usize::MAX,
            ..CsConfig::default()
        };
        let mut cs = ContentStore::new(cfg, 1);
        let now = Instant::now();
        let make = |i: u64| {
            DataBuilder::new(name.append(&Component::segment(i)))
                .content(payload.clone())
                .freshness_period(10_000)
                .encode_with_signature(sig.clone())
        };
        let pool: Vec<Data> = (0..70_000).map(make).collect();
        let lookups: Vec<Interest> = (0..70_000)
            .map(|i| InterestFields::new(name.append(&Component::segment(i))).encode())
            .collect();
        for d in &pool[..65_536] {
            cs.insert(d, now);
        }
        let mut i = 65_536usize;
        measure(
            "cs.insert+find",
            "CS full at 65,536 8 KiB segments: insert one (evict one) + exact lookup",
            secs,
            || {
                cs.insert(&pool[i % pool.len()], now);
                black_box(cs.find(&lookups[(i * 7919) % lookups.len()], now));
                i += 1;
            },
        );
    }

    let uri = seg.to_string();
    measure("name.parse_uri", "Name::from_uri", secs, || {
        black_box(Name::from_uri(black_box(&uri)).unwrap());
    });

    // --- Signatures. Small message: comparable with `openssl speed`.
    let small = [0x5Au8; 32];
    for t in [KeyType::Ecdsa, KeyType::Ed25519, KeyType::Rsa] {
        let key = Arc::new(PrivateKey::generate(t).unwrap());
        let v = Verifier::from_spki(&key.public_key_spki().unwrap()).unwrap();
        let sigv = key.sign(&small).unwrap();
        let st = t.sig_type();
        measure(
            &format!("sign.{}", t.as_str()),
            "32-byte message",
            secs,
            || {
                black_box(key.sign(black_box(&small)).unwrap());
            },
        );
        measure(
            &format!("verify.{}", t.as_str()),
            "32-byte message",
            secs,
            || {
                v.verify(st, black_box(&small), &sigv).unwrap();
            },
        );
        let signer = Signer::new(key.clone(), Name::from_uri("/k/KEY/1").unwrap());
        let b = DataBuilder::new(seg.clone()).content(payload.clone());
        measure(
            &format!("data8k.sign.{}", t.as_str()),
            "whole signed 8 KiB Data packet",
            secs,
            || {
                black_box(signer.sign_data(b.clone()).unwrap());
            },
        );
    }
    let hk = PrivateKey::generate(KeyType::Hmac).unwrap();
    measure("hmac.8k", "HMAC-SHA256 over 8192 bytes", secs, || {
        black_box(hk.sign(black_box(&payload)).unwrap());
    });
    measure(
        "sha256.8k",
        "SHA-256 over 8192 bytes (packet crate, implicit digest)",
        secs,
        || {
            black_box(granary_packet::sha256(black_box(&payload)));
        },
    );
}
