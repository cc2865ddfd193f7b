//! How a rename maps names: the byte range of the names under a name, where each one
//! goes, and the temporary names rows pass through while they move. A leaf, shared by
//! the back ends and the facet index.

use crate::error::{Error, Result};

/// Names under `old` as a prefix are `>= old + "/"` and `< old + "0"` ('0' follows '/'),
/// byte-wise: a range, so no LIKE pattern is built from the user's name.
pub(crate) fn renamed_range(old: &str) -> (String, String) {
    (format!("{old}/"), format!("{old}0"))
}

/// Where `name` (equal to `old` or under it) goes.
pub(crate) fn moved_name(old: &str, new: &str, name: &str) -> Result<String> {
    match name.strip_prefix(old) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => Ok(format!("{new}{rest}")),
        _ => Err(Error::Corrupt(format!("{name} is not under {old}"))),
    }
}

/// A name no record can have (valid names hold no control characters), unique per row,
/// used while a rename moves rows so they never collide with each other.
pub(crate) fn temp_name(id: i64) -> String {
    format!("\u{1}mv\u{1}{id}")
}
