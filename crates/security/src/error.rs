//! Security errors.

/// Result alias.
pub type Result<T> = std::result::Result<T, Error>;

/// What went wrong in signing, verification or the keychain.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A packet could not be decoded.
    #[error("packet: {0}")]
    Packet(#[from] granary_packet::Error),
    /// A signature did not verify.
    #[error("signature does not verify ({0})")]
    BadSignature(&'static str),
    /// The signature type does not fit the key.
    #[error("signature type {got} cannot be verified with a {key} key")]
    WrongSigType {
        /// Signature type in the packet.
        got: u64,
        /// Kind of key at hand.
        key: &'static str,
    },
    /// A key could not be parsed or generated.
    #[error("key: {0}")]
    Key(String),
    /// A certificate is malformed or not valid now.
    #[error("certificate: {0}")]
    Cert(String),
    /// A signed Interest failed replay protection.
    #[error("replay check: {0}")]
    Replay(&'static str),
    /// The keychain has no such key, or a file problem.
    #[error("keychain: {0}")]
    KeyChain(String),
    /// File-system error.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }
}
