//! # granary-security
//!
//! Signing and verification for Granary: DigestSha256, RSA (PKCS#1 v1.5,
//! SHA-256), ECDSA P-256, HMAC-SHA256 and Ed25519 via `aws-lc-rs`; NDN
//! certificates v2; signed Interests v0.3 with a replay checker; a file-based
//! keychain. Keys are parsed once and their signing contexts reused.
//!
//! Depends only on `granary-packet`. Does no network I/O.
#![forbid(unsafe_code)]

pub mod cert;
pub mod error;
pub mod key;
pub mod keychain;
pub mod replay;
pub mod verify;

pub use cert::Certificate;
pub use error::{Error, Result};
pub use key::{KeyType, PrivateKey, Signer};
pub use keychain::KeyChain;
pub use replay::ReplayChecker;
pub use verify::Verifier;

/// Current time in milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
