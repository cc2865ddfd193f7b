//! Names ↔ paths under the store root: reversible and traversal-proof.
//!
//! Each name component becomes one directory level, spelled as its
//! canonical URI text (`a`, `seg=3`, `32=metadata`, `%2F`…). That text never
//! contains `/` or NUL (they are percent-escaped) and is never `.` or `..`
//! (period-only values print with three extra periods), so a path built from
//! it cannot leave the root. Components whose text exceeds
//! [`MAX_COMPONENT_TEXT`] bytes are stored as `#` + SHA-256 hex of the
//! component TLV (`#` is always escaped in component text, so no clash); the full name is always in the file's metadata.
//! Version files are named `@<version>`: `@` is always escaped in component
//! text, so a version file never collides with a child directory.

use std::path::{Path, PathBuf};

use granary_packet::Name;

/// Longest component text used verbatim as a directory name.
pub const MAX_COMPONENT_TEXT: usize = 200;
/// Most components an object name may have.
pub const MAX_COMPONENTS: usize = 64;
/// Largest encoded object name (bytes of the Name TLV value).
pub const MAX_NAME_BYTES: usize = 4096;

/// Why a name cannot be stored.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NameError {
    /// Empty name.
    #[error("the name has no components")]
    Empty,
    /// Too many components.
    #[error("the name has {0} components; at most {MAX_COMPONENTS} are allowed")]
    TooManyComponents(usize),
    /// Too long.
    #[error("the name is {0} bytes encoded; at most {MAX_NAME_BYTES} are allowed")]
    TooLong(usize),
    /// Ends in a version or digest component (Granary adds the version).
    #[error("the name must not end with a {0} component (the repository adds the version)")]
    Reserved(&'static str),
}

/// Checks that `name` may name a stored object.
pub fn check(name: &Name) -> Result<(), NameError> {
    let n = name.len();
    if n == 0 {
        return Err(NameError::Empty);
    }
    if n > MAX_COMPONENTS {
        return Err(NameError::TooManyComponents(n));
    }
    if name.value().len() > MAX_NAME_BYTES {
        return Err(NameError::TooLong(name.value().len()));
    }
    match name.last().map(|c| c.typ) {
        Some(granary_packet::types::COMP_VERSION) => Err(NameError::Reserved("version")),
        Some(granary_packet::types::COMP_IMPLICIT_DIGEST) => {
            Err(NameError::Reserved("implicit digest"))
        }
        Some(granary_packet::types::COMP_SEGMENT) => Err(NameError::Reserved("segment")),
        _ => Ok(()),
    }
}

fn component_dir(c: &granary_packet::ComponentRef<'_>) -> String {
    let text = c.to_string();
    if text.len() <= MAX_COMPONENT_TEXT {
        text
    } else {
        format!("#{}", hex::encode(granary_packet::sha256(c.wire)))
    }
}

/// The object directory of `name`, relative to the store's object root.
pub fn object_dir(name: &Name) -> Result<PathBuf, NameError> {
    check(name)?;
    let mut p = PathBuf::new();
    for c in name.components() {
        p.push(component_dir(&c));
    }
    Ok(p)
}

/// The file of one version, relative to the object root.
pub fn version_file(name: &Name, version: u64) -> Result<PathBuf, NameError> {
    Ok(object_dir(name)?.join(format!("@{version}")))
}

/// The name a relative object directory encodes, when no component was
/// hashed (hashed ones need the metadata).
pub fn decode_dir(rel: &Path) -> Option<Name> {
    let mut uri = String::new();
    for part in rel.components() {
        let s = part.as_os_str().to_str()?;
        if s.starts_with('#') || s.starts_with('@') {
            return None;
        }
        uri.push('/');
        uri.push_str(s);
    }
    Name::from_uri(if uri.is_empty() { "/" } else { &uri }).ok()
}

/// Parses a version file name (`@123`).
pub fn parse_version_file(file_name: &str) -> Option<u64> {
    file_name.strip_prefix('@')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_packet::Component;

    #[test]
    fn paths_round_trip_and_stay_inside() {
        for uri in [
            "/a/b/file.nc",
            "/..../...",
            "/a%2F..%2F..%2Fetc/passwd",
            "/32=metadata/x",
            "/%00%FF/seg=3/z",
            "/~x/@y",
        ] {
            let n = Name::from_uri(uri).unwrap();
            let p = object_dir(&n).unwrap();
            for part in p.components() {
                let s = part.as_os_str().to_str().unwrap();
                assert!(
                    !s.is_empty() && s != "." && s != ".." && !s.contains('/') && !s.contains('\0'),
                    "{uri}: {s}"
                );
                assert!(!s.starts_with('@'), "component text never starts with @");
            }
            assert!(matches!(
                p.components().next(),
                Some(std::path::Component::Normal(_))
            ));
            assert_eq!(decode_dir(&p).unwrap(), n, "{uri}");
        }
        let v = version_file(&Name::from_uri("/a").unwrap(), 7).unwrap();
        assert_eq!(v, PathBuf::from("a/@7"));
        assert_eq!(parse_version_file("@7"), Some(7));
    }

    #[test]
    fn hostile_names_refused_or_hashed() {
        assert_eq!(check(&Name::new()), Err(NameError::Empty));
        let many = Name::from_uri(&"/x".repeat(10_000)).unwrap();
        assert_eq!(check(&many), Err(NameError::TooManyComponents(10_000)));
        let huge = Name::new().append(&Component::generic(&vec![b'a'; 1 << 20]));
        assert!(matches!(check(&huge), Err(NameError::TooLong(_))));
        let long = Name::new().append(&Component::generic(&vec![b'a'; 1000]));
        let p = object_dir(&long).unwrap();
        assert!(p.to_str().unwrap().starts_with('#') && p.to_str().unwrap().len() == 65);
        assert_eq!(decode_dir(&p), None, "hashed components come from metadata");
        assert!(check(&Name::from_uri("/a/v=3").unwrap()).is_err());
        assert!(check(&Name::from_uri("/a/seg=3").unwrap()).is_err());
    }
}
