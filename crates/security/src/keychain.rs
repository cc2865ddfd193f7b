//! A file-based keychain in the data directory.
//!
//! Layout (all files written atomically: temp file, fsync, rename):
//!
//! ```text
//! <dir>/keys/<h>/name      key name URI (/<identity>/KEY/<key-id>)
//! <dir>/keys/<h>/type      ed25519 | ecdsa | rsa | hmac
//! <dir>/keys/<h>/secret    PKCS#8 DER private key, or the raw HMAC secret (mode 0600)
//! <dir>/keys/<h>/cert      certificate (Data wire), absent for HMAC keys
//! <dir>/keys/default       key name URI of the default key
//! <dir>/trust/<h>.cert     trust anchors (certificate wire)
//! ```
//!
//! `<h>` is the first 16 bytes (hex) of SHA-256 over the key name's TLV: a
//! fixed-length, traversal-proof file name.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use granary_packet::tlv::{self, Reader};
use granary_packet::{Data, Name};

use crate::cert::{is_key_name, new_key_name, Certificate};
use crate::error::{Error, Result};
use crate::key::{KeyType, PrivateKey, Signer};

/// TLV type of an exported key bag (the private-key export format).
pub const TT_KEY_BAG: u64 = 128;
const TT_BAG_SECRET: u64 = 129;
const TT_BAG_TYPE: u64 = 130;

/// Validity of the self-signed certificate made by [`KeyChain::generate`].
pub const DEFAULT_CERT_DAYS: i64 = 365;

/// One key in the keychain.
#[derive(Debug, Clone)]
pub struct KeyEntry {
    /// Key name.
    pub name: Name,
    /// Key type.
    pub key_type: KeyType,
    /// Its certificate (none for HMAC keys).
    pub cert: Option<Certificate>,
    /// True for the default key.
    pub is_default: bool,
}

/// The keychain. Private keys are parsed once and cached.
#[derive(Debug)]
pub struct KeyChain {
    dir: PathBuf,
    cache: Mutex<HashMap<Name, Arc<PrivateKey>>>,
}

fn hashed(name: &Name) -> String {
    hex::encode(&granary_packet::sha256(&name.to_tlv())[..16])
}

/// Writes `bytes` to `path` atomically and durably (temp, fsync, rename, fsync dir).
pub fn write_atomic(path: &Path, bytes: &[u8], private: bool) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::KeyChain(format!("{} has no parent", path.display())))?;
    // Unique per write, not only per process: threads of one daemon may
    // write the same file at once (each rename is then atomic, last wins).
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".tmp-{}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        path.file_name().and_then(|f| f.to_str()).unwrap_or("f")
    ));
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(if private { 0o600 } else { 0o644 });
    }
    let mut f = opts
        .open(&tmp)
        .map_err(Error::io(format!("creating {}", tmp.display())))?;
    f.write_all(bytes)
        .map_err(Error::io(format!("writing {}", tmp.display())))?;
    f.sync_all()
        .map_err(Error::io(format!("syncing {}", tmp.display())))?;
    fs::rename(&tmp, path).map_err(Error::io(format!("renaming to {}", path.display())))?;
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(Error::io(format!("reading {}", path.display())))
}

/// Decodes a certificate or key bag given as binary TLV or base64 text.
pub fn decode_binary_or_base64(input: &[u8]) -> Result<Bytes> {
    match input.first() {
        Some(&b) if b == 6 || b as u64 == TT_KEY_BAG => Ok(Bytes::copy_from_slice(input)),
        _ => {
            let text: Vec<u8> = input
                .iter()
                .copied()
                .filter(|c| !c.is_ascii_whitespace())
                .collect();
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map(Bytes::from)
                .map_err(|e| Error::KeyChain(format!("neither a TLV packet nor base64: {e}")))
        }
    }
}

impl KeyChain {
    /// Opens (creating if needed) the keychain in `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<KeyChain> {
        let dir = dir.as_ref().to_path_buf();
        for sub in ["keys", "trust"] {
            fs::create_dir_all(dir.join(sub))
                .map_err(Error::io(format!("creating {}", dir.join(sub).display())))?;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = fs::set_permissions(dir.join("keys"), fs::Permissions::from_mode(0o700));
        }
        Ok(KeyChain {
            dir,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The keychain directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn key_dir(&self, name: &Name) -> PathBuf {
        self.dir.join("keys").join(hashed(name))
    }

    /// Generates a key under `identity` (or with exactly this key name if
    /// `identity` already is one), with a self-signed certificate. The first
    /// key becomes the default.
    pub fn generate(&self, identity: &Name, typ: KeyType) -> Result<KeyEntry> {
        let key_name = if is_key_name(identity) {
            identity.clone()
        } else {
            new_key_name(identity)?
        };
        if self.key_dir(&key_name).exists() {
            return Err(Error::KeyChain(format!("key {key_name} already exists")));
        }
        let key = Arc::new(PrivateKey::generate(typ)?);
        let cert = match typ {
            KeyType::Hmac => None,
            _ => Some(Certificate::self_signed(
                key.clone(),
                &key_name,
                DEFAULT_CERT_DAYS,
            )?),
        };
        self.store(&key_name, &key, cert.as_ref())?;
        self.cache
            .lock()
            .map_err(|_| Error::KeyChain("cache poisoned".into()))?
            .insert(key_name.clone(), key);
        if self.default_name()?.is_none() {
            self.set_default(&key_name)?;
        }
        self.get(&key_name)
    }

    /// A signer for the default key; when there is none, one is generated
    /// under `identity` first. Under an exclusive lock on the keychain
    /// (`keys/.lock`, `flock`), so that of several processes or threads
    /// publishing into a new data directory at once exactly one makes the
    /// key and every one signs with it. Returns the signer and, when it was
    /// made here, the new key's name.
    pub fn default_or_generate(
        &self,
        identity: &Name,
        typ: KeyType,
    ) -> Result<(crate::Signer, Option<Name>)> {
        if let Ok(s) = self.default_signer() {
            return Ok((s, None));
        }
        let keys = self.dir.join("keys");
        fs::create_dir_all(&keys).map_err(Error::io(format!("creating {}", keys.display())))?;
        let lock_path = keys.join(".lock");
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(Error::io(format!("opening {}", lock_path.display())))?;
        loop {
            match rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    return Err(Error::io(format!("locking {}", lock_path.display()))(
                        e.into(),
                    ))
                }
            }
        }
        // Another writer may have made it while this one waited.
        if let Ok(s) = self.default_signer() {
            return Ok((s, None));
        }
        let e = self.generate(identity, typ)?;
        Ok((self.signer(&e.name)?, Some(e.name)))
    }

    fn store(&self, key_name: &Name, key: &PrivateKey, cert: Option<&Certificate>) -> Result<()> {
        let d = self.key_dir(key_name);
        fs::create_dir_all(&d).map_err(Error::io(format!("creating {}", d.display())))?;
        write_atomic(&d.join("secret"), key.secret(), true)?;
        write_atomic(&d.join("type"), key.key_type().as_str().as_bytes(), false)?;
        if let Some(c) = cert {
            write_atomic(&d.join("cert"), c.data().wire(), false)?;
        }
        // `name` last: a key directory without it is incomplete and ignored.
        write_atomic(&d.join("name"), key_name.to_string().as_bytes(), false)
    }

    /// All keys, sorted by name.
    pub fn list(&self) -> Result<Vec<KeyEntry>> {
        let mut out = Vec::new();
        let rd = fs::read_dir(self.dir.join("keys")).map_err(Error::io("listing keys"))?;
        for e in rd.flatten() {
            if e.path().is_dir() && e.path().join("name").exists() {
                let text = read(&e.path().join("name"))?;
                let name = Name::from_uri(&String::from_utf8_lossy(&text))?;
                out.push(self.get(&name)?);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// One key's entry.
    pub fn get(&self, key_name: &Name) -> Result<KeyEntry> {
        let d = self.key_dir(key_name);
        if !d.join("name").exists() {
            return Err(Error::KeyChain(format!("no key {key_name}")));
        }
        let key_type: KeyType = String::from_utf8_lossy(&read(&d.join("type"))?)
            .trim()
            .parse()?;
        let cert = if d.join("cert").exists() {
            Some(Certificate::decode(read(&d.join("cert"))?.into())?)
        } else {
            None
        };
        let is_default = self.default_name()?.as_ref() == Some(key_name);
        Ok(KeyEntry {
            name: key_name.clone(),
            key_type,
            cert,
            is_default,
        })
    }

    /// Resolves a name that is a key name, an identity with keys, or a
    /// certificate name to a key name.
    pub fn resolve(&self, name: &Name) -> Result<Name> {
        if self.key_dir(name).join("name").exists() {
            return Ok(name.clone());
        }
        if name.len() >= 2 && self.key_dir(&name.prefix(-2)).join("name").exists() {
            return Ok(name.prefix(-2));
        }
        let mut under: Vec<KeyEntry> = self
            .list()?
            .into_iter()
            .filter(|k| name.is_prefix_of(&k.name))
            .collect();
        if let Some(d) = under.iter().position(|k| k.is_default) {
            return Ok(under.swap_remove(d).name);
        }
        match under.len() {
            1 => Ok(under.remove(0).name),
            0 => Err(Error::KeyChain(format!("no key for {name}"))),
            n => Err(Error::KeyChain(format!(
                "{n} keys under {name}: name one of them"
            ))),
        }
    }

    /// The default key name, if set.
    pub fn default_name(&self) -> Result<Option<Name>> {
        let p = self.dir.join("keys").join("default");
        if !p.exists() {
            return Ok(None);
        }
        Ok(Some(Name::from_uri(
            String::from_utf8_lossy(&read(&p)?).trim(),
        )?))
    }

    /// Makes `key_name` the default.
    pub fn set_default(&self, key_name: &Name) -> Result<()> {
        let key_name = self.resolve(key_name)?;
        write_atomic(
            &self.dir.join("keys").join("default"),
            key_name.to_string().as_bytes(),
            false,
        )
    }

    /// The private key, loaded once and cached.
    pub fn private_key(&self, key_name: &Name) -> Result<Arc<PrivateKey>> {
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| Error::KeyChain("cache poisoned".into()))?;
        if let Some(k) = cache.get(key_name) {
            return Ok(k.clone());
        }
        let entry = self.get(key_name)?;
        let key = Arc::new(PrivateKey::from_secret(
            entry.key_type,
            &read(&self.key_dir(key_name).join("secret"))?,
        )?);
        cache.insert(key_name.clone(), key.clone());
        Ok(key)
    }

    /// A signer for a key; its KeyLocator is the key name.
    pub fn signer(&self, name: &Name) -> Result<Signer> {
        let key_name = self.resolve(name)?;
        Ok(Signer::new(self.private_key(&key_name)?, key_name))
    }

    /// A signer for the default key.
    pub fn default_signer(&self) -> Result<Signer> {
        let n = self
            .default_name()?
            .ok_or_else(|| Error::KeyChain("no default key: run `granary key gen NAME`".into()))?;
        self.signer(&n)
    }

    /// The certificate of a key, as base64 text (ndnsec's `.ndncert` form).
    pub fn export_cert(&self, name: &Name) -> Result<String> {
        let e = self.get(&self.resolve(name)?)?;
        let cert = e
            .cert
            .ok_or_else(|| Error::KeyChain(format!("{} has no certificate (HMAC key)", e.name)))?;
        Ok(base64_lines(cert.data().wire()))
    }

    /// A key bag with the private key (unencrypted: protect the file).
    pub fn export_private(&self, name: &Name) -> Result<Bytes> {
        let key_name = self.resolve(name)?;
        let e = self.get(&key_name)?;
        let key = self.private_key(&key_name)?;
        let mut v = BytesMut::new();
        key_name.encode_to(&mut v);
        tlv::put_tlv(&mut v, TT_BAG_TYPE, key.key_type().as_str().as_bytes());
        tlv::put_tlv(&mut v, TT_BAG_SECRET, key.secret());
        if let Some(c) = &e.cert {
            v.put_slice(c.data().wire());
        }
        let mut out = BytesMut::with_capacity(v.len() + 6);
        tlv::put_tlv(&mut out, TT_KEY_BAG, &v);
        Ok(out.freeze())
    }

    /// Imports a key bag (adds the key) or a certificate (installs it for a
    /// key already here, after checking it carries that key's public key).
    /// Returns the key name.
    pub fn import(&self, input: &[u8]) -> Result<Name> {
        let wire = decode_binary_or_base64(input)?;
        let mut r = Reader::new(&wire);
        let el = r.read()?;
        match el.typ {
            TT_KEY_BAG => self.import_bag(&r, &el),
            6 => {
                let cert = Certificate::from_data(Data::decode(wire.slice(el.start..el.end))?)?;
                let key_name = cert.key_name();
                let key = self.private_key(&key_name).map_err(|_| {
                    Error::KeyChain(format!("no private key for {key_name}; to trust this certificate use `granary key trust`"))
                })?;
                if key.public_key_spki().as_deref() != Some(cert.public_key()) {
                    return Err(Error::Cert(
                        "certificate does not carry this key's public key".into(),
                    ));
                }
                write_atomic(
                    &self.key_dir(&key_name).join("cert"),
                    cert.data().wire(),
                    false,
                )?;
                Ok(key_name)
            }
            t => Err(Error::KeyChain(format!(
                "TLV type {t} is neither a key bag nor a certificate"
            ))),
        }
    }

    fn import_bag(&self, r: &Reader<'_>, el: &tlv::Element) -> Result<Name> {
        let mut inner = Reader::inside(r.buffer(), el);
        let (mut name, mut typ, mut secret, mut cert) = (None, None, None, None);
        while !inner.is_empty() {
            let e = inner.read()?;
            match e.typ {
                7 => name = Some(Name::decode_element(&inner, &e)?),
                TT_BAG_TYPE => {
                    typ = Some(String::from_utf8_lossy(inner.value_ref(&e)).parse::<KeyType>()?)
                }
                TT_BAG_SECRET => secret = Some(inner.value(&e)),
                6 => cert = Some(Certificate::from_data(Data::decode_element(&inner, &e)?)?),
                _ => {}
            }
        }
        let (name, typ, secret) = match (name, typ, secret) {
            (Some(n), Some(t), Some(s)) => (n, t, s),
            _ => return Err(Error::KeyChain("key bag lacks name, type or secret".into())),
        };
        if !is_key_name(&name) {
            return Err(Error::KeyChain(format!("{name} is not a key name")));
        }
        let key = PrivateKey::from_secret(typ, &secret)?;
        if let Some(c) = &cert {
            if key.public_key_spki().as_deref() != Some(c.public_key()) || c.key_name() != name {
                return Err(Error::Cert(
                    "certificate in the bag does not match its key".into(),
                ));
            }
        }
        if self.key_dir(&name).join("name").exists() {
            return Err(Error::KeyChain(format!("key {name} already exists")));
        }
        self.store(&name, &key, cert.as_ref())?;
        if self.default_name()?.is_none() {
            self.set_default(&name)?;
        }
        Ok(name)
    }

    /// Adds a trust anchor (a certificate, binary or base64). The
    /// certificate must verify with its own key if it is self-signed.
    pub fn add_trust_anchor(&self, input: &[u8]) -> Result<Certificate> {
        let cert = Certificate::decode(decode_binary_or_base64(input)?)?;
        if cert.is_self_signed() {
            cert.verifier()?.verify_data(cert.data())?;
        }
        write_atomic(
            &self
                .dir
                .join("trust")
                .join(format!("{}.cert", hashed(cert.name()))),
            cert.data().wire(),
            false,
        )?;
        Ok(cert)
    }

    /// All trust anchors.
    pub fn trust_anchors(&self) -> Result<Vec<Certificate>> {
        let mut out = Vec::new();
        for e in fs::read_dir(self.dir.join("trust"))
            .map_err(Error::io("listing trust anchors"))?
            .flatten()
        {
            if e.path().extension().is_some_and(|x| x == "cert") {
                out.push(Certificate::decode(read(&e.path())?.into())?);
            }
        }
        out.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(out)
    }
}

/// Base64 in 64-character lines.
pub fn base64_lines(bytes: &[u8]) -> String {
    let s = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut out = String::with_capacity(s.len() + s.len() / 64 + 1);
    for chunk in s.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_list_default_export_import() {
        let tmp = tempfile::tempdir().unwrap();
        let kc = KeyChain::open(tmp.path()).unwrap();
        let a = kc
            .generate(&Name::from_uri("/lab/alice").unwrap(), KeyType::Ed25519)
            .unwrap();
        let b = kc
            .generate(&Name::from_uri("/lab/bob").unwrap(), KeyType::Ecdsa)
            .unwrap();
        let h = kc
            .generate(&Name::from_uri("/lab/mac").unwrap(), KeyType::Hmac)
            .unwrap();
        assert!(a.is_default && !b.is_default && h.cert.is_none());
        assert_eq!(kc.list().unwrap().len(), 3);
        kc.set_default(&Name::from_uri("/lab/bob").unwrap())
            .unwrap();
        assert_eq!(kc.default_name().unwrap().unwrap(), b.name);
        assert_eq!(kc.default_signer().unwrap().sig_type(), 3);

        // Reopen: keys persist, signer works, signature verifies with the cert.
        let kc2 = KeyChain::open(tmp.path()).unwrap();
        let s = kc2.signer(&a.name).unwrap();
        let d = s
            .sign_data(granary_packet::DataBuilder::new(
                Name::from_uri("/x").unwrap(),
            ))
            .unwrap();
        a.cert
            .as_ref()
            .unwrap()
            .verifier()
            .unwrap()
            .verify_data(&d)
            .unwrap();

        // Export the private key, import into a fresh keychain.
        let bag = kc.export_private(&a.name).unwrap();
        let other = tempfile::tempdir().unwrap();
        let kc3 = KeyChain::open(other.path()).unwrap();
        assert_eq!(kc3.import(&bag).unwrap(), a.name);
        assert!(kc3.import(&bag).is_err(), "duplicate import refused");
        let cert_b64 = kc.export_cert(&a.name).unwrap();
        assert_eq!(kc3.import(cert_b64.as_bytes()).unwrap(), a.name);
        // A certificate for an unknown key is refused by import, accepted as a trust anchor.
        assert!(kc3
            .import(kc.export_cert(&b.name).unwrap().as_bytes())
            .is_err());
        kc3.add_trust_anchor(kc.export_cert(&b.name).unwrap().as_bytes())
            .unwrap();
        assert_eq!(kc3.trust_anchors().unwrap().len(), 1);
        assert!(kc.export_cert(&h.name).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn secrets_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let kc = KeyChain::open(tmp.path()).unwrap();
        let k = kc
            .generate(&Name::from_uri("/p").unwrap(), KeyType::Ed25519)
            .unwrap();
        let mode = fs::metadata(kc.key_dir(&k.name).join("secret"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0);
    }
}
