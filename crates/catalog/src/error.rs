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
    #[error("PostgreSQL: {}", pg_message(.0))]
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

/// What a PostgreSQL error says, in the server's words when the server said
/// it (`password authentication failed for user "x"`, `database "y" does
/// not exist`, with its SQLSTATE), else the client's message and its cause
/// (connection refused, timed out). `postgres::Error`'s own text is only
/// "db error" for the server's errors. Never holds the connection string.
pub fn pg_message(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!("{} (SQLSTATE {})", db.message(), db.code().code());
        if let Some(d) = db.detail() {
            s.push_str(&format!("; {d}"));
        }
        if let Some(h) = db.hint() {
            s.push_str(&format!("; hint: {h}"));
        }
        return s;
    }
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(&format!(": {t}"));
        }
        src = c.source();
    }
    s
}

/// `spec` (a catalog directory or `postgres://` URL, or key=value
/// connection string) with any password replaced by `***`: safe to print.
pub fn redact(spec: &str) -> String {
    let mut out = spec.to_string();
    // postgres://user:secret@host…
    if let Some(s) = out.find("://") {
        let rest = &out[s + 3..];
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            if let Some(c) = rest[..at].find(':') {
                out = format!("{}{}:***{}", &out[..s + 3], &rest[..c], &rest[at..]);
            }
        }
    }
    // password=secret (a URL parameter or a key=value string)
    let mut i = 0;
    while let Some(p) = out[i..].to_ascii_lowercase().find("password=") {
        let start = i + p + "password=".len();
        let end = out[start..]
            .find(['&', ' ', '\t'])
            .map_or(out.len(), |e| start + e);
        out.replace_range(start..end, "***");
        i = start + 3;
    }
    out
}

pub(crate) fn invalid<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::Invalid(msg.into()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_redacted_wherever_they_are_written() {
        for (spec, want) in [
            (
                "postgres://site:s3cr3t@db1:5432,db2/granary?target_session_attrs=read-write",
                "postgres://site:***@db1:5432,db2/granary?target_session_attrs=read-write",
            ),
            (
                "postgresql://site@db/granary?password=s3cr3t&sslmode=disable",
                "postgresql://site@db/granary?password=***&sslmode=disable",
            ),
            (
                "host=db user=site password=s3cr3t dbname=granary",
                "host=db user=site password=*** dbname=granary",
            ),
            ("/var/lib/granary/catalog", "/var/lib/granary/catalog"),
            ("postgres://site@db/x", "postgres://site@db/x"),
            ("postgres://db/x?user=a@b", "postgres://db/x?user=a@b"),
        ] {
            let r = super::redact(spec);
            assert_eq!(r, want);
            assert!(!r.contains("s3cr3t"));
        }
    }
}
