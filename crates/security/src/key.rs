//! Private keys and signers.

use std::sync::Arc;

use aws_lc_rs::encoding::{AsDer, PublicKeyX509Der};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self as sig, KeyPair};
use aws_lc_rs::{hmac, rsa};
use bytes::Bytes;
use granary_packet::types::sig_type;
use granary_packet::{
    Data, DataBuilder, Interest, InterestFields, KeyLocator, Name, SignatureInfo,
};

use crate::error::{Error, Result};

/// Kinds of key Granary can make and use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    /// Ed25519 (signature type 5).
    Ed25519,
    /// ECDSA on P-256 with SHA-256 (signature type 3).
    Ecdsa,
    /// RSA-2048 PKCS#1 v1.5 with SHA-256 (signature type 1).
    Rsa,
    /// HMAC-SHA256 with a 32-byte secret (signature type 4).
    Hmac,
}

impl KeyType {
    /// The NDN SignatureType this key produces.
    pub fn sig_type(self) -> u64 {
        match self {
            KeyType::Ed25519 => sig_type::ED25519,
            KeyType::Ecdsa => sig_type::SHA256_WITH_ECDSA,
            KeyType::Rsa => sig_type::SHA256_WITH_RSA,
            KeyType::Hmac => sig_type::HMAC_WITH_SHA256,
        }
    }

    /// Largest signature this key produces.
    pub fn max_sig_len(self) -> usize {
        match self {
            KeyType::Ed25519 => 64,
            KeyType::Ecdsa => 72,
            KeyType::Rsa => 512,
            KeyType::Hmac => 32,
        }
    }

    /// Short lowercase name (`ed25519`, `ecdsa`, `rsa`, `hmac`).
    pub fn as_str(self) -> &'static str {
        match self {
            KeyType::Ed25519 => "ed25519",
            KeyType::Ecdsa => "ecdsa",
            KeyType::Rsa => "rsa",
            KeyType::Hmac => "hmac",
        }
    }
}

impl std::str::FromStr for KeyType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "ed25519" => Ok(KeyType::Ed25519),
            "ecdsa" | "ec" | "p256" | "ecdsa-p256" => Ok(KeyType::Ecdsa),
            "rsa" | "rsa2048" => Ok(KeyType::Rsa),
            "hmac" => Ok(KeyType::Hmac),
            _ => Err(Error::Key(format!(
                "unknown key type {s:?} (ed25519, ecdsa, rsa, hmac)"
            ))),
        }
    }
}

// Keys are few and long-lived; boxing the large variant would only add an indirection.
#[allow(clippy::large_enum_variant)]
enum Inner {
    Ed25519(sig::Ed25519KeyPair),
    Ecdsa(sig::EcdsaKeyPair),
    Rsa(rsa::KeyPair),
    Hmac(hmac::Key),
}

/// A private key, parsed once. Cheap to share (`Arc`).
pub struct PrivateKey {
    typ: KeyType,
    inner: Inner,
    /// PKCS#8 DER (asymmetric) or the raw secret (HMAC).
    secret: Vec<u8>,
    rng: SystemRandom,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateKey({})", self.typ.as_str())
    }
}

fn rejected(e: impl std::fmt::Display) -> Error {
    Error::Key(e.to_string())
}

impl PrivateKey {
    /// Generates a new key.
    pub fn generate(typ: KeyType) -> Result<PrivateKey> {
        let rng = SystemRandom::new();
        let secret = match typ {
            KeyType::Ed25519 => sig::Ed25519KeyPair::generate_pkcs8(&rng)
                .map_err(rejected)?
                .as_ref()
                .to_vec(),
            KeyType::Ecdsa => {
                sig::EcdsaKeyPair::generate_pkcs8(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
                    .map_err(rejected)?
                    .as_ref()
                    .to_vec()
            }
            KeyType::Rsa => {
                let kp = rsa::KeyPair::generate(rsa::KeySize::Rsa2048).map_err(rejected)?;
                let der: aws_lc_rs::encoding::Pkcs8V1Der = kp.as_der().map_err(rejected)?;
                der.as_ref().to_vec()
            }
            KeyType::Hmac => {
                let mut k = vec![0u8; 32];
                aws_lc_rs::rand::fill(&mut k).map_err(rejected)?;
                k
            }
        };
        Self::from_secret(typ, &secret)
    }

    /// Loads a key from PKCS#8 DER (or a raw secret for HMAC).
    pub fn from_secret(typ: KeyType, secret: &[u8]) -> Result<PrivateKey> {
        let inner = match typ {
            KeyType::Ed25519 => {
                Inner::Ed25519(sig::Ed25519KeyPair::from_pkcs8(secret).map_err(rejected)?)
            }
            KeyType::Ecdsa => Inner::Ecdsa(
                sig::EcdsaKeyPair::from_pkcs8(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, secret)
                    .map_err(rejected)?,
            ),
            KeyType::Rsa => Inner::Rsa(rsa::KeyPair::from_pkcs8(secret).map_err(rejected)?),
            KeyType::Hmac => {
                if secret.is_empty() {
                    return Err(Error::Key("empty HMAC key".into()));
                }
                Inner::Hmac(hmac::Key::new(hmac::HMAC_SHA256, secret))
            }
        };
        Ok(PrivateKey {
            typ,
            inner,
            secret: secret.to_vec(),
            rng: SystemRandom::new(),
        })
    }

    /// The key type.
    pub fn key_type(&self) -> KeyType {
        self.typ
    }

    /// PKCS#8 DER of the private key (raw secret for HMAC).
    pub fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// Public key as SubjectPublicKeyInfo DER (`None` for HMAC).
    pub fn public_key_spki(&self) -> Option<Vec<u8>> {
        let der: std::result::Result<PublicKeyX509Der, _> = match &self.inner {
            Inner::Ed25519(k) => k.public_key().as_der(),
            Inner::Ecdsa(k) => k.public_key().as_der(),
            Inner::Rsa(k) => k.public_key().as_der(),
            Inner::Hmac(_) => return None,
        };
        der.ok().map(|d| d.as_ref().to_vec())
    }

    /// Signs `msg`, returning the NDN SignatureValue bytes.
    pub fn sign(&self, msg: &[u8]) -> Result<Bytes> {
        Ok(match &self.inner {
            Inner::Ed25519(k) => Bytes::copy_from_slice(k.sign(msg).as_ref()),
            Inner::Ecdsa(k) => {
                Bytes::copy_from_slice(k.sign(&self.rng, msg).map_err(rejected)?.as_ref())
            }
            Inner::Rsa(k) => {
                let mut out = vec![0u8; k.public_modulus_len()];
                k.sign(&sig::RSA_PKCS1_SHA256, &self.rng, msg, &mut out)
                    .map_err(rejected)?;
                Bytes::from(out)
            }
            Inner::Hmac(k) => Bytes::copy_from_slice(hmac::sign(k, msg).as_ref()),
        })
    }
}

/// What a signer puts in SignatureInfo and how it signs. Cheap to clone.
#[derive(Clone, Debug)]
pub enum Signer {
    /// DigestSha256: no key.
    Digest,
    /// A private key, located by `locator` (usually its key or certificate name).
    Key {
        /// The key, shared.
        key: Arc<PrivateKey>,
        /// KeyLocator written in SignatureInfo.
        locator: KeyLocator,
    },
}

impl Signer {
    /// A signer for `key` whose KeyLocator names `name`.
    pub fn new(key: Arc<PrivateKey>, name: Name) -> Signer {
        Signer::Key {
            key,
            locator: KeyLocator::Name(name),
        }
    }

    /// The NDN SignatureType.
    pub fn sig_type(&self) -> u64 {
        match self {
            Signer::Digest => sig_type::DIGEST_SHA256,
            Signer::Key { key, .. } => key.typ.sig_type(),
        }
    }

    /// A SignatureInfo for this signer.
    pub fn sig_info(&self) -> SignatureInfo {
        let mut si = SignatureInfo::new(self.sig_type());
        if let Signer::Key { locator, .. } = self {
            si.key_locator = Some(locator.clone());
        }
        si
    }

    /// Signs raw bytes.
    pub fn sign(&self, msg: &[u8]) -> Result<Bytes> {
        match self {
            Signer::Digest => granary_packet::digest::value(msg),
            Signer::Key { key, .. } => key.sign(msg),
        }
    }

    /// Largest SignatureValue this signer makes.
    pub fn max_sig_len(&self) -> usize {
        match self {
            Signer::Digest => granary_packet::digest::LEN,
            Signer::Key { key, .. } => key.typ.max_sig_len(),
        }
    }

    /// Signs a Data: sets its SignatureInfo (keeping a ValidityPeriod already
    /// there) and encodes it in one buffer.
    pub fn sign_data(&self, mut b: DataBuilder) -> Result<Data> {
        let validity = b.sig_info.validity;
        b.sig_info = self.sig_info();
        b.sig_info.validity = validity;
        b.sign_with(self.max_sig_len(), |m| self.sign(m))
    }

    /// Signs an Interest (v0.3): adds SignatureNonce (8 random bytes) and
    /// SignatureTime (now), plus `seq_num` if given.
    pub fn sign_interest(&self, mut f: InterestFields, seq_num: Option<u64>) -> Result<Interest> {
        let mut si = self.sig_info();
        let mut nonce = [0u8; 8];
        aws_lc_rs::rand::fill(&mut nonce).map_err(rejected)?;
        si.nonce = Some(Bytes::copy_from_slice(&nonce));
        si.time = Some(crate::now_ms());
        si.seq_num = seq_num;
        f.sig_info = Some(si);
        f.sign_with(|m| self.sign(m))
    }
}
