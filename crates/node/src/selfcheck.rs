//! `granary selfcheck`: packets and every signature algorithm checked on
//! this machine (the binary prints the results).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use granary_packet::{Data, DataBuilder, Interest, InterestFields, Name};
use granary_security::cert::new_key_name;
use granary_security::{Certificate, KeyType, PrivateKey, ReplayChecker, Signer, Verifier};

/// What one signature algorithm did.
pub struct Algorithm {
    /// Its name (`ed25519`, `ecdsa`, `rsa`, `hmac`).
    pub name: &'static str,
    /// A signed Data verified.
    pub sign_verify: bool,
    /// A flipped byte refused.
    pub tamper_caught: bool,
    /// A signed Interest verified and passed the replay check.
    pub signed_interest: bool,
    /// The same signed Interest again refused.
    pub replay_caught: bool,
    /// Signatures per second over an 8 KiB Data.
    pub signs_per_s: f64,
}

impl Algorithm {
    /// Every check passed.
    pub fn passed(&self) -> bool {
        self.sign_verify && self.tamper_caught && self.signed_interest && self.replay_caught
    }
}

/// The whole check.
pub struct Report {
    /// Per keyed algorithm.
    pub algorithms: Vec<Algorithm>,
    /// DigestSha256 signed and verified.
    pub digest: bool,
    /// 8 KiB Data decoded per second.
    pub decodes_per_s: f64,
}

impl Report {
    /// Checks that failed.
    pub fn failures(&self) -> usize {
        self.algorithms.iter().filter(|a| !a.passed()).count() + usize::from(!self.digest)
    }
}

fn rate(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_millis(150) {
        f();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Runs the checks (an error: a packet or certificate that does not even
/// round-trip).
pub fn run() -> anyhow::Result<Report> {
    let name = Name::from_uri("/granary/selfcheck/file/v=1/seg=0")?;
    anyhow::ensure!(
        name.to_string() == "/granary/selfcheck/file/v=1/seg=0",
        "URI round trip"
    );
    let payload = Bytes::from(vec![0x5Au8; 8192]);
    let identity = Name::from_uri("/granary/selfcheck")?;
    let mut algorithms = Vec::new();
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
        let signs_per_s = rate(|| {
            let _ = signer.sign(decoded.signed_portion());
        });
        algorithms.push(Algorithm {
            name: t.as_str(),
            sign_verify: ok,
            tamper_caught,
            signed_interest: interest_ok,
            replay_caught,
            signs_per_s,
        });
    }
    let d = Signer::Digest.sign_data(DataBuilder::new(name.clone()).content(payload.clone()))?;
    let wire = d.wire().clone();
    let decodes_per_s = rate(|| {
        let _ = Data::decode(wire.clone());
    });
    let digest = Verifier::Digest
        .verify_data(&Data::decode(wire.clone())?)
        .is_ok();
    Ok(Report {
        algorithms,
        digest,
        decodes_per_s,
    })
}
