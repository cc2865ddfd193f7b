//! What `granary key` shows and checks of certificates: fingerprints, key
//! kinds, a certificate read from a file, a pinned fingerprint compared, the
//! keychain's listing and a certificate's description.

/// SHA-256 fingerprint of a certificate's public key (its
/// SubjectPublicKeyInfo), as colon-separated hex pairs.
pub fn fingerprint(c: &granary_security::Certificate) -> String {
    granary_packet::sha256(c.public_key())
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The kind of a certificate's key, as `key trust` shows it.
pub fn key_kind(c: &granary_security::Certificate) -> &'static str {
    use granary_security::verify::PublicKeyKind;
    match granary_security::verify::spki_kind(c.public_key()) {
        Some(PublicKeyKind::Ed25519) => "ed25519",
        Some(PublicKeyKind::Ec) => "ecdsa (P-256)",
        Some(PublicKeyKind::Rsa) => "rsa",
        None => "unknown",
    }
}

/// A certificate from bytes (binary or base64), or why it is not one.
pub fn certificate(bytes: &[u8], what: &str) -> anyhow::Result<granary_security::Certificate> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        anyhow::bail!("not an NDN certificate: {what} is empty");
    }
    let wire = granary_security::keychain::decode_binary_or_base64(bytes)
        .map_err(|e| anyhow::anyhow!("not an NDN certificate: {what}: {e}"))?;
    granary_security::Certificate::decode(wire)
        .map_err(|e| anyhow::anyhow!("not an NDN certificate: {what}: {e}"))
}

/// A fingerprint as hex digits only, upper case (how pins are compared).
pub fn normalize_fp(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_hexdigit())
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// `granary key list`'s text: each key (`*` the default) with its
/// certificate's name, validity and fingerprint, then each trust anchor; and,
/// for an empty keychain, the hint to make a key (said on standard error).
pub fn list_text(kc: &granary_security::KeyChain) -> anyhow::Result<(Option<String>, String)> {
    let keys = kc.list()?;
    let empty = keys.is_empty().then(|| {
        format!(
            "no keys in {} — create one with `granary key gen /my/identity`",
            kc.dir().display()
        )
    });
    let mut out = String::new();
    for k in keys {
        let mark = if k.is_default { "*" } else { " " };
        match &k.cert {
            Some(c) => {
                let v = c.validity();
                out += &format!(
                    "{mark} {} {} cert={} valid={}..{} sha256={}\n",
                    k.name,
                    k.key_type.as_str(),
                    c.name(),
                    v.not_before.format(),
                    v.not_after.format(),
                    fingerprint(c)
                );
            }
            None => out += &format!("{mark} {} {}\n", k.name, k.key_type.as_str()),
        }
    }
    for a in kc.trust_anchors()? {
        out += &format!("  anchor {} sha256={}\n", a.name(), fingerprint(&a));
    }
    Ok((empty, out))
}

/// What `key trust` shows of a certificate before trusting it: name, key
/// type, validity, fingerprint.
pub fn describe(c: &granary_security::Certificate) -> String {
    let v = c.validity();
    format!(
        "certificate  {}\nkey type     {}\nvalid        {} .. {}\nfingerprint  SHA-256 {}\n",
        c.name(),
        key_kind(c),
        v.not_before.format(),
        v.not_after.format(),
        fingerprint(c)
    )
}
