//! Which keys are trusted, and what a DigestSha256 alone proves (integrity only).

use super::*;

/// Verifiers for the keys the user trusts: the keychain's own certificates
/// and its trust anchors. A DigestSha256 proves that bytes are intact, not
/// who made them (anyone can compute one): content whose only signature is
/// a digest — segments signed so, or a manifest signed so — is refused
/// unless the user asked for integrity only ([`Trust::with_integrity_only`],
/// `--integrity-only`), and is then described as integrity only.
#[derive(Default)]
pub struct Trust {
    keys: Vec<(Name, Arc<Verifier>)>,
    integrity_only: bool,
}

/// What [`Trust::verifier_for`] says of DigestSha256-signed content that
/// is accepted (`--integrity-only`).
pub const INTEGRITY_ONLY: &str = "DigestSha256 (integrity only: proves no origin)";

impl Trust {
    /// From a keychain (own keys' certificates + trust anchors).
    pub fn from_keychain(kc: &KeyChain) -> Result<Trust, Error> {
        let certs = kc
            .list()
            .map_err(|e| Error::Verify(e.to_string()))?
            .into_iter()
            .filter_map(|k| k.cert)
            .chain(
                kc.trust_anchors()
                    .map_err(|e| Error::Verify(e.to_string()))?,
            );
        let mut keys = Vec::new();
        for c in certs {
            if let Ok(v) = c.verifier() {
                keys.push((c.key_name(), Arc::new(v)));
            }
        }
        Ok(Trust {
            keys,
            integrity_only: false,
        })
    }

    /// The same trust, accepting content whose only signature is a
    /// DigestSha256 as integrity only (`yes`), or refusing it (the default).
    pub fn with_integrity_only(mut self, yes: bool) -> Trust {
        self.integrity_only = yes;
        self
    }

    /// True when DigestSha256-only content is accepted (as integrity only).
    pub fn integrity_only(&self) -> bool {
        self.integrity_only
    }

    /// Why DigestSha256-only content `what` is refused.
    pub fn digest_refused(what: &str) -> String {
        format!(
            "{what} is signed only with DigestSha256: that proves the bytes are intact, not who made them (anyone can compute it), and no trusted key signs it. Pass --integrity-only to accept it as integrity only (not authenticated), or trust the publisher's key and fetch a signed version"
        )
    }

    /// Checks a packet that only points at content (RDR metadata, a
    /// directory listing): a NullSignature is taken as it is, a
    /// DigestSha256 is checked (with or without `--integrity-only`: the
    /// content it points at is verified on its own), any other signature
    /// must verify with a trusted key.
    pub fn check_pointer(&self, d: &Data) -> Result<(), String> {
        let v = match d.sig_info().sig_type {
            sig_type::NULL => return Ok(()),
            sig_type::DIGEST_SHA256 => Arc::new(Verifier::Digest),
            _ => self.verifier_for(d)?.0,
        };
        v.verify_data(d)
            .map_err(|e| format!("{} does not verify: {e}", d.name()))
    }

    /// The verifier for a Data's signature, and how to describe it. A
    /// DigestSha256 is refused unless integrity only was asked for.
    pub fn verifier_for(&self, d: &Data) -> Result<(Arc<Verifier>, String), String> {
        let si = d.sig_info();
        if si.sig_type == sig_type::DIGEST_SHA256 {
            if !self.integrity_only {
                return Err(Trust::digest_refused(&d.name().to_string()));
            }
            return Ok((Arc::new(Verifier::Digest), INTEGRITY_ONLY.into()));
        }
        let Some(KeyLocator::Name(key)) = &si.key_locator else {
            return Err(format!("{}: signature has no KeyLocator name", d.name()));
        };
        for (k, v) in &self.keys {
            if k.is_prefix_of(key) || key.is_prefix_of(k) {
                return Ok((v.clone(), format!("{k}")));
            }
        }
        Err(format!(
            "{}: signed by {key}, which is not in the keychain or its trust anchors. To trust it, run here: `granary key trust --fetch {key}` (it shows the key's SHA-256 fingerprint; compare it with `granary key list` on the publishing node, or pin it with --fingerprint HEX); or on the publishing node `granary key export -o publisher.ndncert`, copy the file here and run `granary key trust publisher.ndncert`",
            d.name()
        ))
    }
}
