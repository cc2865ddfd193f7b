//! The repository's settings file, `<root>/config.toml` ([`RepoConfig`]).

use std::fs;
use std::path::PathBuf;

use crate::{write_atomic, Chunking, Error, Result, Store};

/// Per-repository settings, `<root>/config.toml`:
/// `chunking = "fastcdc:1024:4096:8192"` (any [`Chunking`] form).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct RepoConfig {
    /// Chunking of new versions published without an explicit choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunking: Option<String>,
    /// How segments of versions that have a signed manifest are signed
    /// when served: `digest` (DigestSha256, the default: consumers that
    /// check every packet's digest accept them) or `null` (NullSignature,
    /// SignatureType 200, no value: the manifest already covers every
    /// segment, so the per-segment SHA-256 is skipped; only consumers that
    /// verify through the manifest, or not at all, accept them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_signature: Option<String>,
}

/// The values of [`RepoConfig::segment_signature`].
pub const SEGMENT_SIGNATURES: [&str; 2] = ["digest", "null"];

impl Store {
    fn config_path(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// The repository's settings (defaults when there is no file).
    pub fn config(&self) -> Result<RepoConfig> {
        let p = self.config_path();
        match fs::read_to_string(&p) {
            Ok(t) => {
                toml::from_str(&t).map_err(|e| Error::Corrupt(format!("{}: {e}", p.display())))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(RepoConfig::default()),
            Err(e) => Err(Error::io(&p)(e)),
        }
    }

    /// Saves the repository's settings.
    pub fn set_config(&self, c: &RepoConfig) -> Result<()> {
        let t = toml::to_string(c).map_err(|e| Error::Corrupt(e.to_string()))?;
        write_atomic(&self.config_path(), t.as_bytes())
    }

    /// True when segments covered by a manifest are served with a
    /// NullSignature ([`RepoConfig::segment_signature`] `null`).
    pub fn null_segments(&self) -> Result<bool> {
        match self.config()?.segment_signature.as_deref() {
            None | Some("digest") => Ok(false),
            Some("null") => Ok(true),
            Some(other) => Err(Error::Corrupt(format!(
                "{}: segment_signature {other:?} is not one of {}",
                self.config_path().display(),
                SEGMENT_SIGNATURES.join(", ")
            ))),
        }
    }

    /// The chunking new versions get by default: the config file's, or
    /// FastCDC 3/5/8 KiB ([`Chunking::fastcdc`]).
    pub fn default_chunking(&self) -> Result<Chunking> {
        match self.config()?.chunking {
            Some(s) => s
                .parse()
                .map_err(|e| Error::Corrupt(format!("{}: {e}", self.config_path().display()))),
            None => Ok(Chunking::fastcdc()),
        }
    }
}
