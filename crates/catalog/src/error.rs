//! The catalog's error type.

/// Everything that can go wrong in the catalog. Bad input is `Invalid`, never a panic.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller's input (record, query, name) breaks a documented rule.
    #[error("invalid catalog input: {0}")]
    Invalid(String),
    /// A rename would overwrite a record that is not being moved.
    #[error("catalog conflict: {0}")]
    Conflict(String),
    /// The stored data is not what this crate wrote.
    #[error("catalog storage is corrupt: {0}")]
    Corrupt(String),
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("PostgreSQL: {0}")]
    Postgres(#[from] postgres::Error),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("catalog directory: {0}")]
    Io(#[from] std::io::Error),
    /// A thread panicked while holding the catalog lock.
    #[error("catalog lock poisoned")]
    Poisoned,
    /// The catalog's database cannot be reached now (PostgreSQL down or
    /// restarting); the handle reconnects by itself, with back-off.
    #[error("the catalog is unavailable: {0}")]
    Unavailable(String),
}

impl Error {
    /// True when the database could not be reached: the same call may succeed later.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Unavailable(_))
    }
}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn invalid<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::Invalid(msg.into()))
}
