//! Granary-signed packets and certificates verify in python-ndn and NDNts;
//! library-signed packets verify in Granary; Granary URIs parse identically
//! in both libraries.

use crate::common;

use std::sync::Arc;

use bytes::Bytes;
use common::*;
use granary_packet::{Component, Data, DataBuilder, Interest, InterestFields, Name};
use granary_security::cert::new_key_name;
use granary_security::{Certificate, KeyType, PrivateKey, Signer, Verifier};
use serde_json::{json, Value};

struct Case {
    rec: Value,
    expect_verified: bool,
    name: Name,
    validity: Option<(String, String)>,
}

fn granary_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let contents: [Bytes; 4] = [
        Bytes::new(),
        Bytes::from_static(b"x"),
        Bytes::from(vec![0xA5u8; 8192]),
        Bytes::from_static(b"hello granary"),
    ];
    let mut add = |id: String,
                   kind: &str,
                   wire: &Bytes,
                   cert: Option<&Certificate>,
                   hmac: Option<&[u8]>,
                   ok: bool,
                   name: &Name| {
        let validity = if kind == "cert" {
            let c = Certificate::decode(wire.clone()).unwrap();
            Some((
                c.validity().not_before.format(),
                c.validity().not_after.format(),
            ))
        } else {
            None
        };
        cases.push(Case {
            rec: json!({
                "id": id,
                "kind": kind,
                "hex": hex::encode(wire),
                "cert_hex": cert.map(|c| hex::encode(c.data().wire())),
                "hmac_key_hex": hmac.map(hex::encode),
            }),
            expect_verified: ok,
            name: name.clone(),
            validity,
        });
    };
    for t in [
        None,
        Some(KeyType::Rsa),
        Some(KeyType::Ecdsa),
        Some(KeyType::Hmac),
        Some(KeyType::Ed25519),
    ] {
        let label = t.map_or("digest", |t| t.as_str());
        let (signer, cert, secret) = match t {
            None => (Signer::Digest, None, None),
            Some(t) => {
                let key = Arc::new(PrivateKey::generate(t).unwrap());
                let kn = new_key_name(&Name::from_uri(&format!("/granary/test/{label}")).unwrap())
                    .unwrap();
                let cert = (t != KeyType::Hmac)
                    .then(|| Certificate::self_signed(key.clone(), &kn, 30).unwrap());
                let secret = (t == KeyType::Hmac).then(|| key.secret().to_vec());
                (Signer::new(key, kn), cert, secret)
            }
        };
        if let Some(c) = &cert {
            add(
                format!("{label}-selfsigned-cert"),
                "cert",
                c.data().wire(),
                None,
                None,
                true,
                c.name(),
            );
            // A certificate issued by this key for another key.
            let other = Arc::new(PrivateKey::generate(KeyType::Ecdsa).unwrap());
            let okn = new_key_name(&Name::from_uri("/granary/test/issued").unwrap()).unwrap();
            let issued = Certificate::build(
                &okn,
                b"granary-ca",
                7,
                &other.public_key_spki().unwrap(),
                c.validity(),
                &signer,
            )
            .unwrap();
            add(
                format!("{label}-issued-cert"),
                "cert",
                issued.data().wire(),
                Some(c),
                None,
                true,
                issued.name(),
            );
        }
        for (j, content) in contents.iter().enumerate() {
            let name = Name::from_uri(&format!("/granary/{label}/file/v=1700000000000000"))
                .unwrap()
                .append(&Component::segment(j as u64));
            let mut b = DataBuilder::new(name.clone()).content(content.clone());
            if j % 2 == 1 {
                b = b
                    .freshness_period(10_000)
                    .final_block_id(Component::segment(3));
            }
            let d = signer.sign_data(b).unwrap();
            add(
                format!("{label}-data-{j}"),
                "data",
                d.wire(),
                cert.as_ref(),
                secret.as_deref(),
                true,
                &name,
            );
            if j == 2 {
                // Negative control: one flipped content byte must not verify.
                let mut forged = d.to_builder();
                let mut body = content.to_vec();
                body[100] ^= 0x01;
                forged.content = Some(Bytes::from(body));
                let forged = forged.encode_with_signature(d.sig_value().clone());
                add(
                    format!("{label}-data-tampered"),
                    "data",
                    forged.wire(),
                    cert.as_ref(),
                    secret.as_deref(),
                    false,
                    &name,
                );
            }
        }
        let mut f = InterestFields::new(Name::from_uri(&format!("/granary/cmd/{label}")).unwrap());
        f.app_params = Some(Bytes::from_static(b"{\"op\":\"insert\"}"));
        f.nonce = Some(0x01020304);
        let i = signer.sign_interest(f, Some(42)).unwrap();
        add(
            format!("{label}-interest"),
            "interest",
            i.wire(),
            cert.as_ref(),
            secret.as_deref(),
            true,
            &i.name,
        );
    }
    cases
}

fn verify_with(cmd: std::process::Command, cases: &[Case], dir: &std::path::Path, lib: &str) {
    let input = dir.join(format!("{lib}-in.jsonl"));
    let output = dir.join(format!("{lib}-out.jsonl"));
    write_jsonl(
        &input,
        &cases.iter().map(|c| c.rec.clone()).collect::<Vec<_>>(),
    );
    let mut cmd = cmd;
    cmd.arg(&input).arg(&output);
    run(cmd);
    let results = read_jsonl(&output);
    assert_eq!(results.len(), cases.len());
    let mut failures = Vec::new();
    for (c, r) in cases.iter().zip(&results) {
        let id = c.rec["id"].as_str().unwrap();
        assert_eq!(r["id"], c.rec["id"]);
        if r["decoded"] != true {
            failures.push(format!("{id}: {lib} could not decode: {}", r["error"]));
            continue;
        }
        if r["verified"] != c.expect_verified {
            failures.push(format!(
                "{id}: {lib} verified={} expected {} ({})",
                r["verified"], c.expect_verified, r["error"]
            ));
        }
        match r["uri"].as_str().map(Name::from_uri) {
            Some(Ok(n)) if n == c.name => {}
            other => failures.push(format!("{id}: {lib} name {:?} != {}", other, c.name)),
        }
        if let Some((nb, na)) = &c.validity {
            let v = &r["validity"];
            if v["not_before"] != nb.as_str() || v["not_after"] != na.as_str() {
                failures.push(format!("{id}: {lib} validity {v} != {nb}..{na}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let verified = results.iter().filter(|r| r["verified"] == true).count();
    eprintln!(
        "{lib}: {verified}/{} Granary packets verified (negative controls rejected)",
        results.len()
    );
}

#[test]
fn granary_signed_packets_verify_in_python_ndn() {
    let tmp = tempfile::tempdir().unwrap();
    verify_with(
        python_script("verify.py"),
        &granary_cases(),
        tmp.path(),
        "python-ndn",
    );
}

#[test]
fn granary_signed_packets_verify_in_ndnts() {
    let tmp = tempfile::tempdir().unwrap();
    verify_with(
        node_script("verify.mjs"),
        &granary_cases(),
        tmp.path(),
        "NDNts",
    );
}

/// Library-signed packets that carry their key material verify in Granary.
fn library_signatures_verify_in_granary(mut gen: std::process::Command, lib: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("gen.jsonl");
    gen.arg(&out);
    run(gen);
    let mut checked = std::collections::BTreeMap::<u64, usize>::new();
    let mut failures = Vec::new();
    for r in read_jsonl(&out) {
        let kind = r["kind"].as_str().unwrap();
        if kind != "data" && kind != "interest" {
            continue;
        }
        let wire = Bytes::from(hex::decode(r["hex"].as_str().unwrap()).unwrap());
        let verifier = if let Some(k) = r["hmac_key_hex"].as_str() {
            Verifier::hmac(&hex::decode(k).unwrap())
        } else if let Some(c) = r["cert_hex"].as_str() {
            let cert = Certificate::decode(Bytes::from(hex::decode(c).unwrap())).unwrap();
            match cert.verifier() {
                Ok(v) => v,
                Err(_) => continue, // e.g. P-384 keys, which Granary does not support
            }
        } else if r["fields"]["sig_type"] == 0 {
            Verifier::Digest
        } else {
            continue;
        };
        let (res, st) = if kind == "data" {
            let d = Data::decode(wire).unwrap();
            (verifier.verify_data(&d), d.sig_info().sig_type)
        } else {
            let i = Interest::decode(wire).unwrap();
            let st = i.sig_info.as_ref().map_or(0, |s| s.sig_type);
            if i.sig_info.is_none() {
                continue;
            }
            (verifier.verify_interest(&i), st)
        };
        match res {
            Ok(()) => *checked.entry(st).or_default() += 1,
            Err(e) => failures.push(format!("{}: {e}", r["note"])),
        }
    }
    assert!(
        failures.is_empty(),
        "{lib} signatures Granary rejected:\n{}",
        failures.join("\n")
    );
    for st in [0u64, 1, 3, 4, 5] {
        assert!(
            checked.get(&st).copied().unwrap_or(0) > 0,
            "no {lib} packet with signature type {st} was verified"
        );
    }
    eprintln!("{lib}: Granary verified {checked:?} (by signature type)");
}

#[test]
fn ndnts_signatures_verify_in_granary() {
    library_signatures_verify_in_granary(node_script("gen_packets.mjs"), "NDNts");
}

#[test]
fn python_ndn_signatures_verify_in_granary() {
    library_signatures_verify_in_granary(python_script("gen_packets.py"), "python-ndn");
}

/// Names Granary prints; parsed by each library, they must encode to the same bytes.
fn uri_corpus() -> Vec<Name> {
    let mut v = Vec::new();
    let uris = [
        "/",
        "/a/b/c",
        "/granary/cmip6/CMIP/NCAR/CESM2/historical/r1i1p1f1/Amon/tas/gn/v=20190308/seg=0",
        "/a%20b/%2F%3F%23/~-._",
        "/32=metadata",
        "/32=ls/33=x/252=%FF/65535=...",
        "/seq=7/t=1700000000000000/off=4096/v=0/seg=18446744073709551615",
        "/....",
        "/a/...../b",
        "/%00%01%02%FE%FF",
    ];
    for u in uris {
        v.push(Name::from_uri(u).unwrap());
    }
    v.push(Name::new().append(&Component::implicit_digest(&[0xAB; 32])));
    v.push(
        Name::from_uri("/p")
            .unwrap()
            .append(&Component::params_digest(&[0x0F; 32])),
    );
    for b in 0u8..=255 {
        v.push(Name::new().append(&Component::generic(&[b, b'x'])));
        v.push(Name::new().append(&Component::number(8 + 2 * (b as u64 % 30), b as u64 * 1000)));
    }
    v
}

fn uris_both_ways(cmd: std::process::Command, lib: &str, skip_periods: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let names: Vec<Name> = uri_corpus()
        .into_iter()
        .filter(|n| !(skip_periods && n.components().any(|c| c.value.iter().all(|&b| b == b'.'))))
        .collect();
    let input = tmp.path().join("uris.txt");
    let output = tmp.path().join("out.jsonl");
    std::fs::write(
        &input,
        names
            .iter()
            .map(|n| n.to_string() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    let mut cmd = cmd;
    cmd.arg(&input).arg(&output);
    run(cmd);
    let res = read_jsonl(&output);
    assert_eq!(res.len(), names.len());
    let mut failures = Vec::new();
    for (n, r) in names.iter().zip(&res) {
        if r["ok"] != true {
            failures.push(format!("{lib} cannot parse {n}: {}", r["error"]));
            continue;
        }
        if r["hex"].as_str().unwrap() != hex::encode(n.to_tlv()) {
            failures.push(format!("{lib} parses {n} to {}", r["hex"]));
        }
        // And the library's own printing parses back in Granary to the same name.
        match r["uri"].as_str().map(Name::from_uri) {
            Some(Ok(m)) if &m == n => {}
            other => failures.push(format!(
                "{lib} prints {n} as {:?}, Granary reads it as {other:?}",
                r["uri"]
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{lib}: {} URIs agree both ways", names.len());
}

#[test]
fn uris_agree_with_ndnts() {
    uris_both_ways(node_script("uri.mjs"), "NDNts", false);
}

/// python-ndn parses period-only components literally (`/...` is a three-dot
/// component, not the empty one), so those names are left out for it.
#[test]
fn uris_agree_with_python_ndn() {
    uris_both_ways(python_script("uri.py"), "python-ndn", true);
}
