//! HTTPS for the gateway: rustls (aws-lc-rs) with ALPN `h2` and `http/1.1`,
//! from a certificate and key given in PEM files, or from a self-signed
//! certificate made in the data directory on first start and kept.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A TLS server configuration and the certificate file it came from.
#[derive(Clone)]
pub struct Tls {
    pub config: Arc<rustls::ServerConfig>,
    /// The certificate (chain) file: what a client trusts
    /// (`curl --cacert`, `REQUESTS_CA_BUNDLE`) for a self-signed one.
    pub cert: PathBuf,
    /// The first (leaf) certificate's validity period, or why it could not
    /// be read.
    pub validity: Result<Validity, String>,
}

/// A certificate's validity period, seconds since the epoch (inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

/// A certificate that expires within this long is warned about.
pub const EXPIRY_WARNING_SECS: i64 = 7 * 86_400;

/// `secs` (since the epoch) as RFC 3339 UTC, e.g. `2026-11-29T04:33:23Z`.
fn rfc3339(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{secs} s since 1970"))
}

fn now_secs() -> i64 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

/// The leaf certificate's notBefore and notAfter. x509-parser is the parser
/// rcgen already depends on (no features: no signature checks, only DER).
fn validity(leaf: &CertificateDer<'_>) -> Result<Validity, String> {
    let (_, c) = x509_parser::parse_x509_certificate(leaf.as_ref())
        .map_err(|e| format!("cannot read its validity: {e}"))?;
    let v = c.validity();
    Ok(Validity {
        not_before: v.not_before.timestamp(),
        not_after: v.not_after.timestamp(),
    })
}

/// Whether a certificate is valid at `now`, and the warning to give when it
/// is not, or expires within [`EXPIRY_WARNING_SECS`].
pub fn check(path: &Path, v: &Validity, now: i64) -> (bool, Option<String>) {
    let (nb, na) = (rfc3339(v.not_before), rfc3339(v.not_after));
    let p = path.display();
    if now < v.not_before {
        (
            false,
            Some(format!(
                "TLS certificate {p} is not valid yet: valid from {nb} to {na} (now {}); clients refuse it until then (is the clock right?)",
                rfc3339(now)
            )),
        )
    } else if now > v.not_after {
        (
            false,
            Some(format!(
                "TLS certificate {p} has expired: valid from {nb} to {na} (now {}); clients refuse it, replace it",
                rfc3339(now)
            )),
        )
    } else if v.not_after - now < EXPIRY_WARNING_SECS {
        let hours = (v.not_after - now) / 3600;
        (
            true,
            Some(format!(
                "TLS certificate {p} expires soon: valid from {nb} to {na}, {} days {} hours left; replace it",
                hours / 24,
                hours % 24
            )),
        )
    } else {
        (true, None)
    }
}

impl Tls {
    /// The certificate in use and its validity now, for `/api/status`:
    /// `{"certificate", "not_before", "not_after", "valid", "warning"}`
    /// (`warning` null when there is nothing to say).
    pub fn status(&self) -> serde_json::Value {
        let cert = self.cert.display().to_string();
        match &self.validity {
            Ok(v) => {
                let (valid, warning) = check(&self.cert, v, now_secs());
                serde_json::json!({
                    "certificate": cert,
                    "not_before": rfc3339(v.not_before),
                    "not_after": rfc3339(v.not_after),
                    "valid": valid,
                    "warning": warning,
                })
            }
            Err(e) => serde_json::json!({
                "certificate": cert,
                "not_before": null,
                "not_after": null,
                "valid": null,
                "warning": format!("TLS certificate {cert}: {e}"),
            }),
        }
    }
}

/// Loads a certificate chain and its private key (PEM).
pub fn load(cert: &Path, key: &Path) -> Result<Tls, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("TLS certificate {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("TLS certificate {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "TLS certificate {}: no PEM certificate in it",
            cert.display()
        ));
    }
    let validity = validity(&chain[0]);
    match &validity {
        Ok(v) => {
            if let (_, Some(w)) = check(cert, v, now_secs()) {
                tracing::warn!("{w}");
            }
        }
        Err(e) => tracing::warn!("TLS certificate {}: {e}", cert.display()),
    }
    let k =
        PrivateKeyDer::from_pem_file(key).map_err(|e| format!("TLS key {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, k)
        .map_err(|e| {
            format!(
                "TLS certificate {} and key {}: {e}",
                cert.display(),
                key.display()
            )
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Tls {
        config: Arc::new(config),
        cert: cert.to_path_buf(),
        validity,
    })
}

/// The names a self-signed certificate for `addr` covers: `localhost`, the
/// loopback addresses, and `addr`'s own IP when it is a specific one.
pub fn names_for(addr: SocketAddr) -> Vec<String> {
    let mut v = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    let ip = addr.ip();
    if !ip.is_unspecified() && !v.contains(&ip.to_string()) {
        v.push(ip.to_string());
    }
    if ip.is_unspecified() {
        // Every address of the host would be a name; those it can know of
        // cheaply are its host name's.
        if let Ok(h) = std::fs::read_to_string("/etc/hostname") {
            let h = h.trim();
            if !h.is_empty() && !v.iter().any(|n| n == h) {
                v.push(h.to_string());
            }
        }
    }
    v
}

/// The self-signed certificate of `dir` (`<dir>/cert.pem`, `<dir>/key.pem`,
/// the key mode 0600), made on first use and whenever the names it covers
/// (`<dir>/names`) lack one of `names`; kept and reused otherwise.
pub fn self_signed(dir: &Path, names: &[String]) -> Result<Tls, String> {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let list = dir.join("names");
    let have: Vec<String> = std::fs::read_to_string(&list)
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default();
    let covered = names.iter().all(|n| have.contains(n));
    if !(covered && cert.exists() && key.exists()) {
        let mut all = have.clone();
        for n in names {
            if !all.contains(n) {
                all.push(n.clone());
            }
        }
        make(dir, &all)
            .map_err(|e| format!("self-signed certificate in {}: {e}", dir.display()))?;
        tracing::info!(
            "made a self-signed TLS certificate {} for {}",
            cert.display(),
            all.join(", ")
        );
    }
    load(&cert, &key)
}

fn make(dir: &Path, names: &[String]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let mut params = rcgen::CertificateParams::new(names.to_vec()).map_err(|e| e.to_string())?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "granary gateway (self-signed)");
    params.is_ca = rcgen::IsCa::NoCa;
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    // Python 3.13's strict verification wants the authority key identifier.
    params.use_authority_key_identifier_extension = true;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let year = 1970 + (now / 31_556_952) as i32;
    params.not_before = rcgen::date_time_ymd(year - 1, 1, 1);
    params.not_after = rcgen::date_time_ymd(year + 10, 1, 1);
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    write_atomic(&dir.join("key.pem"), key.serialize_pem().as_bytes(), 0o600)?;
    write_atomic(&dir.join("cert.pem"), cert.pem().as_bytes(), 0o644)?;
    write_atomic(&dir.join("names"), names.join("\n").as_bytes(), 0o644)?;
    Ok(())
}

fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_is_read_and_judged() {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let v = validity(cert.der()).unwrap();
        assert_eq!(rfc3339(v.not_before), "2020-01-01T00:00:00Z");
        assert_eq!(rfc3339(v.not_after), "2021-01-01T00:00:00Z");
        let p = Path::new("/etc/c.pem");
        let (ok, w) = check(p, &v, v.not_after + 1);
        let w = w.unwrap();
        assert!(
            !ok && w.contains("/etc/c.pem") && w.contains("expired"),
            "{w}"
        );
        assert!(w.contains("2020-01-01T00:00:00Z") && w.contains("2021-01-01T00:00:00Z"));
        let (ok, w) = check(p, &v, v.not_before - 1);
        assert!(!ok && w.unwrap().contains("not valid yet"));
        let (ok, w) = check(p, &v, v.not_after - 3 * 86_400);
        assert!(ok && w.unwrap().contains("expires soon: "));
        assert_eq!(check(p, &v, v.not_after - 30 * 86_400), (true, None));
    }
}
