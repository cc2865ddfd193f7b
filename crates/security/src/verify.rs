//! Signature verification.

use aws_lc_rs::signature::{self as sig, ParsedPublicKey};
use aws_lc_rs::{constant_time, hmac};
use granary_packet::types::sig_type;
use granary_packet::{Data, Interest};

use crate::error::{Error, Result};

/// Kind of public key found in a SubjectPublicKeyInfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublicKeyKind {
    /// id-ecPublicKey (P-256 assumed, checked on parse).
    Ec,
    /// rsaEncryption.
    Rsa,
    /// id-Ed25519.
    Ed25519,
}

const OID_EC: &[u8] = &[0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01];
const OID_RSA: &[u8] = &[
    0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01,
];
const OID_ED25519: &[u8] = &[0x06, 0x03, 0x2B, 0x65, 0x70];

/// Identifies the algorithm of a SubjectPublicKeyInfo by its OID.
pub fn spki_kind(spki: &[u8]) -> Option<PublicKeyKind> {
    let head = &spki[..spki.len().min(32)];
    let has = |oid: &[u8]| head.windows(oid.len()).any(|w| w == oid);
    if has(OID_ED25519) {
        Some(PublicKeyKind::Ed25519)
    } else if has(OID_EC) {
        Some(PublicKeyKind::Ec)
    } else if has(OID_RSA) {
        Some(PublicKeyKind::Rsa)
    } else {
        None
    }
}

/// Verifies signatures of one kind with one key, parsed once.
#[allow(clippy::large_enum_variant)] // few, long-lived; no indirection on the verify path
pub enum Verifier {
    /// DigestSha256 (no key).
    Digest,
    /// A public key (RSA, ECDSA or Ed25519).
    Public {
        /// The parsed key.
        key: ParsedPublicKey,
        /// Its kind.
        kind: PublicKeyKind,
    },
    /// An HMAC secret.
    Hmac(hmac::Key),
    /// Accepts SignatureNull (type 200) only; use where configured.
    Null,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verifier::Digest => f.write_str("Verifier(digest)"),
            Verifier::Public { kind, .. } => write!(f, "Verifier({kind:?})"),
            Verifier::Hmac(_) => f.write_str("Verifier(hmac)"),
            Verifier::Null => f.write_str("Verifier(null)"),
        }
    }
}

impl Verifier {
    /// A verifier for a public key in SubjectPublicKeyInfo DER.
    pub fn from_spki(spki: &[u8]) -> Result<Verifier> {
        let kind =
            spki_kind(spki).ok_or_else(|| Error::Key("unsupported public key algorithm".into()))?;
        let alg: &'static dyn sig::VerificationAlgorithm = match kind {
            PublicKeyKind::Ec => &sig::ECDSA_P256_SHA256_ASN1,
            PublicKeyKind::Rsa => &sig::RSA_PKCS1_2048_8192_SHA256,
            PublicKeyKind::Ed25519 => &sig::ED25519,
        };
        let key = ParsedPublicKey::new(alg, spki).map_err(|e| Error::Key(e.to_string()))?;
        Ok(Verifier::Public { key, kind })
    }

    /// A verifier for an HMAC-SHA256 secret.
    pub fn hmac(secret: &[u8]) -> Verifier {
        Verifier::Hmac(hmac::Key::new(hmac::HMAC_SHA256, secret))
    }

    /// Verifies `value` over `signed` with signature type `typ`.
    pub fn verify(&self, typ: u64, signed: &[u8], value: &[u8]) -> Result<()> {
        match (self, typ) {
            (Verifier::Digest, sig_type::DIGEST_SHA256) => {
                constant_time::verify_slices_are_equal(&granary_packet::sha256(signed), value)
                    .map_err(|_| Error::BadSignature("digest mismatch"))
            }
            (Verifier::Hmac(k), sig_type::HMAC_WITH_SHA256) => {
                hmac::verify(k, signed, value).map_err(|_| Error::BadSignature("HMAC mismatch"))
            }
            (Verifier::Public { key, kind }, t)
                if matches!(
                    (kind, t),
                    (PublicKeyKind::Ec, sig_type::SHA256_WITH_ECDSA)
                        | (PublicKeyKind::Rsa, sig_type::SHA256_WITH_RSA)
                        | (PublicKeyKind::Ed25519, sig_type::ED25519)
                ) =>
            {
                key.verify_sig(signed, value)
                    .map_err(|_| Error::BadSignature("public-key signature invalid"))
            }
            (Verifier::Null, sig_type::NULL) => Ok(()),
            (v, got) => Err(Error::WrongSigType {
                got,
                key: match v {
                    Verifier::Digest => "digest",
                    Verifier::Hmac(_) => "HMAC",
                    Verifier::Null => "null",
                    Verifier::Public {
                        kind: PublicKeyKind::Ec,
                        ..
                    } => "ECDSA",
                    Verifier::Public {
                        kind: PublicKeyKind::Rsa,
                        ..
                    } => "RSA",
                    Verifier::Public {
                        kind: PublicKeyKind::Ed25519,
                        ..
                    } => "Ed25519",
                },
            }),
        }
    }

    /// Verifies a Data's signature.
    pub fn verify_data(&self, d: &Data) -> Result<()> {
        self.verify(d.sig_info().sig_type, d.signed_portion(), d.sig_value())
    }

    /// Verifies a signed Interest (and its parameters digest).
    pub fn verify_interest(&self, i: &Interest) -> Result<()> {
        if !i.params_digest_ok() {
            return Err(Error::BadSignature(
                "ParametersSha256DigestComponent mismatch",
            ));
        }
        let (si, sv, signed) = match (&i.sig_info, &i.sig_value, i.signed_portion()) {
            (Some(si), Some(sv), Some(signed)) => (si, sv, signed),
            _ => return Err(Error::BadSignature("Interest is not signed")),
        };
        self.verify(si.sig_type, &signed, sv)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use granary_packet::{DataBuilder, InterestFields, Name};

    use super::*;
    use crate::key::{KeyType, PrivateKey, Signer};

    #[test]
    fn every_algorithm_signs_and_verifies_and_rejects_tampering() {
        for t in [
            KeyType::Ed25519,
            KeyType::Ecdsa,
            KeyType::Rsa,
            KeyType::Hmac,
        ] {
            let k = Arc::new(PrivateKey::generate(t).unwrap());
            let signer = Signer::new(k.clone(), Name::from_uri("/k/KEY/1").unwrap());
            let v = match t {
                KeyType::Hmac => Verifier::hmac(k.secret()),
                _ => Verifier::from_spki(&k.public_key_spki().unwrap()).unwrap(),
            };
            let d = signer
                .sign_data(DataBuilder::new(Name::from_uri("/x").unwrap()).content(&b"abc"[..]))
                .unwrap();
            v.verify_data(&d).unwrap();
            let mut w = d.wire().to_vec();
            let at = w.len() - d.sig_value().len() - 4 - 10;
            w[at] ^= 0x55;
            if let Ok(bad) = Data::decode(w.into()) {
                assert!(
                    v.verify_data(&bad).is_err(),
                    "{t:?} accepted a tampered packet"
                );
            }
            let i = signer
                .sign_interest(
                    InterestFields::new(Name::from_uri("/cmd").unwrap()),
                    Some(1),
                )
                .unwrap();
            v.verify_interest(&Interest::decode(i.wire().clone()).unwrap())
                .unwrap();
            // Wrong algorithm is refused, not mis-verified.
            assert!(Verifier::Digest.verify_data(&d).is_err());
        }
        let d = Signer::Digest
            .sign_data(DataBuilder::new(Name::from_uri("/d").unwrap()))
            .unwrap();
        Verifier::Digest.verify_data(&d).unwrap();
    }
}
