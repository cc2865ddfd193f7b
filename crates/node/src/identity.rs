//! Who this node is: its name prefix (kept in `<data-dir>/node.toml`) and
//! the identity its publisher key is made under.

use std::path::Path;

use granary_packet::Name;

/// The node's prefix, from `<data-dir>/node.toml` (`node_prefix = "/…"`);
/// at first use it is made from the host name and a random suffix
/// (`/granary/<host>-<4 hex digits>`) and written there, so it stays the same.
pub fn node_prefix(data_dir: &Path) -> anyhow::Result<Name> {
    let file = data_dir.join("node.toml");
    if let Ok(text) = std::fs::read_to_string(&file) {
        let v: toml::Value =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        if let Some(p) = v.get("node_prefix").and_then(|p| p.as_str()) {
            return Name::from_uri(p)
                .map_err(|e| anyhow::anyhow!("{}: node_prefix: {e}", file.display()));
        }
    }
    let host: String = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let host = if host.is_empty() {
        "node".to_string()
    } else {
        host
    };
    let mut r = [0u8; 2];
    {
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut r))
            .map_err(|e| anyhow::anyhow!("/dev/urandom: {e}"))?;
    }
    let uri = format!("/granary/{host}-{:02x}{:02x}", r[0], r[1]);
    std::fs::create_dir_all(data_dir)?;
    granary_store::write_atomic(&file, format!("node_prefix = \"{uri}\"\n").as_bytes())?;
    Name::from_uri(&uri).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Identity of this node's publisher key, made at first need when the
/// keychain has no default key: the node prefix (`<data-dir>/node.toml`,
/// e.g. `/granary/<host>-1a2b`), so that every node signs as itself. An
/// existing default key (e.g. `/granary/publisher` of an older data
/// directory) is kept, and what it signed stays valid.
pub fn publisher_identity(data_dir: &Path) -> anyhow::Result<Name> {
    node_prefix(data_dir)
}

#[cfg(test)]
mod tests {
    #[test]
    fn node_prefix_is_made_once_and_kept() {
        let d = tempfile::tempdir().unwrap();
        let first = super::node_prefix(d.path()).unwrap();
        let uri = first.to_string();
        assert!(uri.starts_with("/granary/"), "{uri}");
        assert_eq!(super::node_prefix(d.path()).unwrap(), first);
        std::fs::write(d.path().join("node.toml"), "node_prefix = \"/x/y\"\n").unwrap();
        assert_eq!(
            super::publisher_identity(d.path()).unwrap().to_string(),
            "/x/y"
        );
        std::fs::write(d.path().join("node.toml"), "node_prefix = 3\nbad").unwrap();
        assert!(super::node_prefix(d.path()).is_err());
    }
}
