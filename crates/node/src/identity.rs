//! Who this node is: its name prefix (kept in `<data-dir>/node.toml`) and
//! the identity its publisher key is made under.

use std::path::Path;

use granary_packet::Name;

/// The node's prefix, from `<data-dir>/node.toml` (`node_prefix = "/…"`);
/// at first use it is made from the host name and a random suffix
/// (`/granary/<host>-<4 hex digits>`) and written there, so it stays the same.
pub fn node_prefix(data_dir: &Path) -> anyhow::Result<Name> {
    if let Some(n) = stored_prefix(data_dir)? {
        return Ok(n);
    }
    let file = data_dir.join("node.toml");
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
    let uri = format!("/granary/{host}-{}", hex::encode(r));
    std::fs::create_dir_all(data_dir)?;
    granary_store::write_atomic(&file, format!("node_prefix = \"{uri}\"\n").as_bytes())?;
    Name::from_uri(&uri).map_err(|e| anyhow::anyhow!("{e}"))
}

/// `<data-dir>/node.toml`, typed.
#[derive(serde::Deserialize)]
struct NodeFile {
    node_prefix: Option<String>,
}

/// The prefix in `<data-dir>/node.toml`, if one was made or set.
fn stored_prefix(data_dir: &Path) -> anyhow::Result<Option<Name>> {
    let file = data_dir.join("node.toml");
    let Ok(text) = std::fs::read_to_string(&file) else {
        return Ok(None);
    };
    let f: NodeFile =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    match f.node_prefix {
        Some(p) => Name::from_uri(&p)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("{}: node_prefix: {e}", file.display())),
        None => Ok(None),
    }
}

/// Sets the node prefix (`granary daemon --node-prefix`, config key
/// `node_prefix`) in `<data-dir>/node.toml`. A change is refused while the
/// keychain holds keys under the old prefix (what this node published is
/// signed by them and its catalog is named after it) unless `force`; with
/// `force` the old keys stay in the keychain, and the default one goes on
/// signing until another is made the default.
pub fn set_node_prefix(data_dir: &Path, want: &Name, force: bool) -> anyhow::Result<Name> {
    if want.is_empty() {
        anyhow::bail!("--node-prefix: the node prefix cannot be / (name the node, e.g. /site/a)");
    }
    if let Some(old) = stored_prefix(data_dir)? {
        if &old == want {
            return Ok(old);
        }
        let keys: Vec<String> = granary_security::KeyChain::open(data_dir.join("keychain"))
            .and_then(|kc| kc.list())
            .map(|l| {
                l.into_iter()
                    .filter(|k| old.is_prefix_of(&k.name))
                    .map(|k| k.name.to_string())
                    .collect()
            })
            .unwrap_or_default();
        // The key the daemon made at its first start, under a prefix made
        // up then, before anything was published: not in the way.
        if !force && only_unused_start_key(data_dir, &keys) {
            tracing::info!(
                "node prefix changed from {old} to {want}; the unused key made at first start ({}) stays, a key under {want} is made the default",
                keys.join(", ")
            );
            std::fs::create_dir_all(data_dir)?;
            granary_store::write_atomic(
                &data_dir.join("node.toml"),
                format!("node_prefix = \"{want}\"\n").as_bytes(),
            )?;
            let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
            let e = kc.generate(want, granary_security::KeyType::Ed25519)?;
            kc.set_default(&e.name)?;
            let _ = std::fs::write(start_key_marker(data_dir), e.name.to_string());
            return Ok(want.clone());
        }
        if !keys.is_empty() && !force {
            anyhow::bail!(
                "refusing to change the node prefix from {old} to {want}: the keychain holds {} key(s) under {old} ({}), which signed what this node published, and its catalog is served as {old}/catalog; consumers trusting {old} would no longer find or trust it. Keep --node-prefix {old}, or pass --force to change it anyway (the old keys stay; run `granary key` to make a key under {want} the default)",
                keys.len(),
                keys.join(", ")
            );
        }
        if !keys.is_empty() {
            tracing::warn!(
                "node prefix changed from {old} to {want} (--force); {} key(s) under {old} stay in the keychain",
                keys.len()
            );
        } else {
            tracing::info!("node prefix changed from {old} to {want}");
        }
    }
    std::fs::create_dir_all(data_dir)?;
    granary_store::write_atomic(
        &data_dir.join("node.toml"),
        format!("node_prefix = \"{want}\"\n").as_bytes(),
    )?;
    Ok(want.clone())
}

/// Identity of this node's publisher key, made at first need when the
/// keychain has no default key: the node prefix (`<data-dir>/node.toml`,
/// e.g. `/granary/<host>-1a2b`), so that every node signs as itself. An
/// existing default key (e.g. `/granary/publisher` of an older data
/// directory) is kept, and what it signed stays valid.
pub fn publisher_identity(data_dir: &Path) -> anyhow::Result<Name> {
    node_prefix(data_dir)
}

/// The file naming the key the daemon made at first start.
fn start_key_marker(data_dir: &Path) -> std::path::PathBuf {
    data_dir.join("keychain").join("made-at-start")
}

/// True when `keys` is exactly the key made at first start and the
/// repository holds nothing (so it signed no publication).
fn only_unused_start_key(data_dir: &Path, keys: &[String]) -> bool {
    let Ok(made) = std::fs::read_to_string(start_key_marker(data_dir)) else {
        return false;
    };
    if keys.len() != 1 || keys[0] != made.trim() {
        return false;
    }
    let repo = data_dir.join("repo");
    if !repo.exists() {
        return true;
    }
    granary_store::Store::open(&repo)
        .and_then(|s| s.list(&Name::new()))
        .is_ok_and(|l| l.is_empty())
}

/// After `granary key gen` made `key`: when the default key is still the
/// one the daemon made at first start and nothing is published, the new key
/// becomes the default, as the first key made always did ("the first one
/// is the default"). True when it did.
pub fn adopt_first_key(data_dir: &Path, key: &Name) -> anyhow::Result<bool> {
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    let Some(current) = kc.default_name()? else {
        return Ok(false);
    };
    if &current == key || !only_unused_start_key(data_dir, &[current.to_string()]) {
        return Ok(false);
    }
    kc.set_default(key)?;
    let _ = std::fs::remove_file(start_key_marker(data_dir));
    Ok(true)
}

/// Makes this node's publisher key at daemon start when the keychain has no
/// default key (Ed25519, under [`publisher_identity`]), so that sites can
/// exchange keys (`granary key export`, `key trust`) before anything is
/// published and replicate commands can be signed. Returns the default
/// key's name and whether it was made now.
pub fn ensure_publisher_key(data_dir: &Path) -> anyhow::Result<(Name, bool)> {
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    if let Some(k) = kc.default_name()? {
        return Ok((k, false));
    }
    let id = publisher_identity(data_dir)?;
    let (_, made) = kc.default_or_generate(&id, granary_security::KeyType::Ed25519)?;
    match made {
        Some(k) => {
            std::fs::write(start_key_marker(data_dir), k.to_string())?;
            Ok((k, true))
        }
        None => {
            let k = kc
                .default_name()?
                .ok_or_else(|| anyhow::anyhow!("the keychain has no default key"))?;
            Ok((k, false))
        }
    }
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

    #[test]
    fn node_prefix_change_is_refused_while_keys_exist_under_the_old_one() {
        let n = |u: &str| granary_packet::Name::from_uri(u).unwrap();
        let d = tempfile::tempdir().unwrap();
        // No node.toml yet: set; again the same: fine; no keys: a change is fine.
        assert_eq!(
            super::set_node_prefix(d.path(), &n("/site/a"), false).unwrap(),
            n("/site/a")
        );
        assert_eq!(
            super::set_node_prefix(d.path(), &n("/site/a"), false).unwrap(),
            n("/site/a")
        );
        assert_eq!(
            super::set_node_prefix(d.path(), &n("/site/b"), false).unwrap(),
            n("/site/b")
        );
        let kc = granary_security::KeyChain::open(d.path().join("keychain")).unwrap();
        kc.generate(&n("/site/b"), granary_security::KeyType::Ed25519)
            .unwrap();
        let e = super::set_node_prefix(d.path(), &n("/site/c"), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("refusing") && e.contains("/site/b") && e.contains("--force"),
            "{e}"
        );
        assert_eq!(super::node_prefix(d.path()).unwrap(), n("/site/b"));
        assert_eq!(
            super::set_node_prefix(d.path(), &n("/site/c"), true).unwrap(),
            n("/site/c")
        );
        assert_eq!(super::node_prefix(d.path()).unwrap(), n("/site/c"));
        assert!(super::set_node_prefix(d.path(), &n("/"), true).is_err());
    }
}
