//! NDN certificates v2: `/<identity>/KEY/<key-id>/<issuer-id>/<version>`,
//! ContentType KEY, content = SubjectPublicKeyInfo DER, ValidityPeriod in
//! SignatureInfo.

use std::sync::Arc;

use bytes::Bytes;
use granary_packet::types::content_type;
use granary_packet::{Component, Data, DataBuilder, KeyLocator, Name, Timestamp, ValidityPeriod};

use crate::error::{Error, Result};
use crate::key::{PrivateKey, Signer};
use crate::verify::Verifier;

/// The `KEY` component of key and certificate names.
pub const KEY_COMPONENT: &[u8] = b"KEY";

/// A decoded certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    data: Data,
    validity: ValidityPeriod,
}

/// True when `name` is a key name: `/<identity>/KEY/<key-id>`.
pub fn is_key_name(name: &Name) -> bool {
    name.get(-2)
        .is_some_and(|c| c.typ == granary_packet::types::COMP_GENERIC && c.value == KEY_COMPONENT)
}

/// A fresh key name under `identity`: `/<identity>/KEY/<8 random bytes>`.
pub fn new_key_name(identity: &Name) -> Result<Name> {
    let mut id = [0u8; 8];
    aws_lc_rs::rand::fill(&mut id).map_err(|e| Error::Key(e.to_string()))?;
    Ok(identity
        .append(&Component::generic(KEY_COMPONENT))
        .append(&Component::generic(&id)))
}

impl Certificate {
    /// Checks that `data` is a certificate v2 and wraps it.
    pub fn from_data(data: Data) -> Result<Certificate> {
        let name = data.name();
        if name.len() < 4 || !is_key_name(&name.prefix(-2)) {
            return Err(Error::Cert(format!(
                "{name} is not /<identity>/KEY/<key-id>/<issuer>/<version>"
            )));
        }
        if data.content_type() != content_type::KEY {
            return Err(Error::Cert(format!(
                "ContentType {} is not KEY (2)",
                data.content_type()
            )));
        }
        let validity = data
            .sig_info()
            .validity
            .ok_or_else(|| Error::Cert("SignatureInfo has no ValidityPeriod".into()))?;
        if data.content().is_empty() {
            return Err(Error::Cert("no public key in content".into()));
        }
        Ok(Certificate { data, validity })
    }

    /// Decodes a certificate from its wire.
    pub fn decode(wire: Bytes) -> Result<Certificate> {
        Self::from_data(Data::decode(wire)?)
    }

    /// Builds and signs a certificate for the key `key_name` holding `spki`.
    pub fn build(
        key_name: &Name,
        issuer: &[u8],
        version: u64,
        spki: &[u8],
        validity: ValidityPeriod,
        signer: &Signer,
    ) -> Result<Certificate> {
        if !is_key_name(key_name) {
            return Err(Error::Cert(format!(
                "{key_name} is not a key name /<identity>/KEY/<key-id>"
            )));
        }
        let name = key_name
            .append(&Component::generic(issuer))
            .append(&Component::version(version));
        let mut b = DataBuilder::new(name)
            .content_type(content_type::KEY)
            .freshness_period(3_600_000)
            .content(Bytes::copy_from_slice(spki));
        b.sig_info.validity = Some(validity);
        Self::from_data(signer.sign_data(b)?)
    }

    /// A self-signed certificate (issuer `self`) valid for `days` from now.
    pub fn self_signed(key: Arc<PrivateKey>, key_name: &Name, days: i64) -> Result<Certificate> {
        let spki = key
            .public_key_spki()
            .ok_or_else(|| Error::Cert("HMAC keys have no certificate".into()))?;
        let now = (crate::now_ms() / 1000) as i64;
        let validity = ValidityPeriod {
            not_before: Timestamp(now - 60),
            not_after: Timestamp(now + days * 86_400),
        };
        let signer = Signer::new(key, key_name.clone());
        Self::build(key_name, b"self", crate::now_ms(), &spki, validity, &signer)
    }

    /// The certificate as a Data.
    pub fn data(&self) -> &Data {
        &self.data
    }

    /// Certificate name.
    pub fn name(&self) -> &Name {
        self.data.name()
    }

    /// Key name (`/<identity>/KEY/<key-id>`).
    pub fn key_name(&self) -> Name {
        self.data.name().prefix(-2)
    }

    /// Identity (`/<identity>`).
    pub fn identity(&self) -> Name {
        self.data.name().prefix(-4)
    }

    /// Public key, SubjectPublicKeyInfo DER.
    pub fn public_key(&self) -> &[u8] {
        self.data.content()
    }

    /// ValidityPeriod.
    pub fn validity(&self) -> ValidityPeriod {
        self.validity
    }

    /// True when valid at `unix_secs`.
    pub fn is_valid_at(&self, unix_secs: i64) -> bool {
        self.validity.contains(unix_secs)
    }

    /// True when the KeyLocator names this certificate's own key.
    pub fn is_self_signed(&self) -> bool {
        match &self.data.sig_info().key_locator {
            Some(KeyLocator::Name(n)) => self.key_name().is_prefix_of(n),
            _ => false,
        }
    }

    /// A verifier for signatures made with this certificate's key.
    pub fn verifier(&self) -> Result<Verifier> {
        Verifier::from_spki(self.public_key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyType;

    #[test]
    fn self_signed_certificate_verifies_and_round_trips() {
        for t in [KeyType::Ed25519, KeyType::Ecdsa, KeyType::Rsa] {
            let k = Arc::new(PrivateKey::generate(t).unwrap());
            let kn = new_key_name(&Name::from_uri("/granary/alice").unwrap()).unwrap();
            let c = Certificate::self_signed(k, &kn, 365).unwrap();
            assert!(c.is_self_signed());
            assert_eq!(c.key_name(), kn);
            assert!(c.is_valid_at((crate::now_ms() / 1000) as i64));
            let c2 = Certificate::decode(c.data().wire().clone()).unwrap();
            c2.verifier().unwrap().verify_data(c2.data()).unwrap();
        }
    }

    #[test]
    fn non_certificates_are_refused() {
        let d = Signer::Digest
            .sign_data(DataBuilder::new(Name::from_uri("/a/KEY/b/c/v=1").unwrap()))
            .unwrap();
        assert!(matches!(Certificate::from_data(d), Err(Error::Cert(_))));
        let d = Signer::Digest
            .sign_data(DataBuilder::new(Name::from_uri("/a/b").unwrap()))
            .unwrap();
        assert!(Certificate::from_data(d).is_err());
    }
}
