//! `granary selfcheck`: a quick end-to-end check of this build.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use granary_packet::{Data, DataBuilder, Interest, InterestFields, Name};
use granary_security::cert::new_key_name;
use granary_security::{Certificate, KeyType, PrivateKey, ReplayChecker, Signer, Verifier};

fn rate(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_millis(150) {
        f();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

pub fn run() -> anyhow::Result<()> {
    println!("granary {} self-check", env!("CARGO_PKG_VERSION"));
    let name = Name::from_uri("/granary/selfcheck/file/v=1/seg=0")?;
    anyhow::ensure!(
        name.to_string() == "/granary/selfcheck/file/v=1/seg=0",
        "URI round trip"
    );
    let payload = Bytes::from(vec![0x5Au8; 8192]);
    let identity = Name::from_uri("/granary/selfcheck")?;
    let mut failures = 0;
    for t in [
        KeyType::Ed25519,
        KeyType::Ecdsa,
        KeyType::Rsa,
        KeyType::Hmac,
    ] {
        let key = Arc::new(PrivateKey::generate(t)?);
        let key_name = new_key_name(&identity)?;
        let signer = Signer::new(key.clone(), key_name.clone());
        let verifier = match t {
            KeyType::Hmac => Verifier::hmac(key.secret()),
            _ => {
                let cert = Certificate::self_signed(key.clone(), &key_name, 1)?;
                let c2 = Certificate::decode(cert.data().wire().clone())?;
                c2.verifier()?.verify_data(c2.data())?;
                c2.verifier()?
            }
        };
        let d = signer.sign_data(DataBuilder::new(name.clone()).content(payload.clone()))?;
        let decoded = Data::decode(d.wire().clone())?;
        let ok = verifier.verify_data(&decoded).is_ok();
        let mut bad = d.wire().to_vec();
        bad[40] ^= 1;
        let tamper_caught = Data::decode(Bytes::from(bad))
            .map(|b| verifier.verify_data(&b).is_err())
            .unwrap_or(true);
        let i = signer.sign_interest(InterestFields::new(Name::from_uri("/granary/cmd")?), None)?;
        let i2 = Interest::decode(i.wire().clone())?;
        let mut rc = ReplayChecker::default();
        let interest_ok = verifier.verify_interest(&i2).is_ok()
            && rc.check(&i2, granary_security::now_ms()).is_ok();
        let replay_caught = rc.check(&i2, granary_security::now_ms()).is_err();
        let sign_rate = rate(|| {
            let _ = signer.sign(decoded.signed_portion());
        });
        let pass = ok && tamper_caught && interest_ok && replay_caught;
        if !pass {
            failures += 1;
        }
        println!(
            "  {:<8} sign+verify {}  tamper {}  signed-interest {}  replay {}  ~{:.0} signs/s (8 KiB Data)",
            t.as_str(),
            if ok { "ok" } else { "FAIL" },
            if tamper_caught { "caught" } else { "MISSED" },
            if interest_ok { "ok" } else { "FAIL" },
            if replay_caught { "caught" } else { "MISSED" },
            sign_rate
        );
    }
    let d = Signer::Digest.sign_data(DataBuilder::new(name.clone()).content(payload.clone()))?;
    let wire = d.wire().clone();
    let decode_rate = rate(|| {
        let _ = Data::decode(wire.clone());
    });
    let digest_ok = Verifier::Digest
        .verify_data(&Data::decode(wire.clone())?)
        .is_ok();
    if !digest_ok {
        failures += 1;
    }
    println!(
        "  digest   sign+verify {}  8 KiB Data decode ~{:.2} M/s",
        if digest_ok { "ok" } else { "FAIL" },
        decode_rate / 1e6
    );
    anyhow::ensure!(failures == 0, "{failures} check(s) failed");
    println!("all checks passed");
    Ok(())
}
