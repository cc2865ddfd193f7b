//! Per-file metadata: `user.granary.*` extended attributes on the file
//! itself, or a `<file>.meta` JSON sidecar where the file system refuses user
//! xattrs (chosen automatically when the store opens).

use std::fs;
use std::path::{Path, PathBuf};

use granary_packet::Name;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Metadata of one stored file version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    /// Object name (without version), canonical URI.
    pub name: String,
    /// Version number (the `v=` component).
    pub version: u64,
    /// Size in bytes.
    pub size: u64,
    /// Segment size in bytes (content bytes per Data).
    pub segment_size: u32,
    /// Chunking scheme: `fixed:<bytes>`, `fastcdc:<min>:<avg>:<max>` or
    /// `rabin:<min>:<avg>:<max>` ([`crate::Chunking`]). For content-defined
    /// schemes `segment_size` is the largest segment and the segment
    /// boundaries are in `@<v>.offsets`.
    pub chunking: String,
    /// Number of segments, when they are not all `segment_size` long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<u64>,
    /// SHA-256 of the whole file, hex, when it was asked for at ingest
    /// ([`crate::PutOptions::file_sha256`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Digest of the signed manifest, hex, once one is made.
    pub manifest: Option<String>,
    /// Key name that signs this version, if any.
    pub signer: Option<String>,
    /// Signing policy: `manifest`, `ed25519`, `ecdsa` or `digest`.
    #[serde(default)]
    pub signing: Option<String>,
    /// MIME-like content type, if known.
    pub content_type: Option<String>,
    /// Publication time, ms since the Unix epoch.
    pub created_ms: u64,
    /// Labels set by the publisher and kept with the file (e.g. the DRS
    /// version `drs_version` of a file published by `granary publish-dir`),
    /// so that the catalog can be rebuilt from the files alone.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tags: std::collections::BTreeMap<String, String>,
}

impl FileMeta {
    /// The object name.
    pub fn name(&self) -> Result<Name> {
        Name::from_uri(&self.name)
            .map_err(|e| Error::Corrupt(format!("metadata name {:?}: {e}", self.name)))
    }

    /// Number of segments.
    pub fn segments(&self) -> u64 {
        if let Some(n) = self.segments {
            return n.max(1);
        }
        if self.size == 0 {
            1
        } else {
            self.size.div_ceil(self.segment_size as u64)
        }
    }

    /// True when every segment but the last is `segment_size` long.
    pub fn is_fixed(&self) -> bool {
        self.segments.is_none()
    }
}

/// Where metadata lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `user.granary.*` xattrs.
    Xattr,
    /// `<file>.meta` sidecar files.
    Sidecar,
}

const PREFIX: &str = "user.granary.";
/// Tags are `user.granary.tag.<key>`.
const TAG: &str = "tag.";

/// Finds out whether `dir`'s file system takes user xattrs.
pub fn detect(dir: &Path) -> Backend {
    let probe = dir.join(".xattr-probe");
    let ok =
        fs::write(&probe, b"").is_ok() && xattr::set(&probe, "user.granary.probe", b"1").is_ok();
    let _ = fs::remove_file(&probe);
    if ok {
        Backend::Xattr
    } else {
        Backend::Sidecar
    }
}

/// The sidecar path of a data file.
pub fn sidecar(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".meta");
    PathBuf::from(s)
}

fn to_map(m: &FileMeta) -> Result<serde_json::Map<String, serde_json::Value>> {
    match serde_json::to_value(m).map_err(|e| Error::Corrupt(e.to_string()))? {
        serde_json::Value::Object(o) => Ok(o),
        _ => Err(Error::Corrupt("metadata is not an object".into())),
    }
}

/// Writes metadata for the data file at `path` (which must exist).
pub fn write(backend: Backend, path: &Path, m: &FileMeta) -> Result<()> {
    match backend {
        Backend::Xattr => {
            // Tags: one attribute each (`user.granary.tag.<key>`), so that
            // `getfattr -d` shows them; tags no longer set are removed.
            let tag_prefix = format!("{PREFIX}{TAG}");
            let old_tags: Vec<String> = xattr::list(path)
                .map_err(Error::io(path))?
                .filter_map(|k| k.to_str().map(str::to_string))
                .filter(|k| k.starts_with(&tag_prefix))
                .collect();
            for k in old_tags {
                if !m.tags.contains_key(&k[tag_prefix.len()..]) {
                    let _ = xattr::remove(path, &k);
                }
            }
            for (k, v) in &m.tags {
                xattr::set(path, format!("{tag_prefix}{k}"), v.as_bytes())
                    .map_err(Error::io(path))?;
            }
            for (k, v) in to_map(m)? {
                if k == "tags" {
                    continue;
                }
                let key = format!("{PREFIX}{k}");
                match v {
                    serde_json::Value::Null => {
                        let _ = xattr::remove(path, &key);
                    }
                    serde_json::Value::String(s) => {
                        xattr::set(path, &key, s.as_bytes()).map_err(Error::io(path))?
                    }
                    other => xattr::set(path, &key, other.to_string().as_bytes())
                        .map_err(Error::io(path))?,
                }
            }
            Ok(())
        }
        Backend::Sidecar => {
            let json = serde_json::to_vec_pretty(m).map_err(|e| Error::Corrupt(e.to_string()))?;
            crate::write_atomic(&sidecar(path), &json)
        }
    }
}

/// Reads the metadata of the data file at `path`.
pub fn read(backend: Backend, path: &Path) -> Result<FileMeta> {
    read_at(backend, path, None)
}

/// [`read`], the attributes read through `open` (the data file at `path`,
/// already open) when given: no path walk per attribute.
pub(crate) fn read_at(backend: Backend, path: &Path, open: Option<&fs::File>) -> Result<FileMeta> {
    use xattr::FileExt;
    let list = || match open {
        Some(f) => f.list_xattr(),
        None => xattr::list(path),
    };
    let get = |key: &str| match open {
        Some(f) => f.get_xattr(key),
        None => xattr::get(path, key),
    };
    match backend {
        Backend::Xattr => {
            let mut o = serde_json::Map::new();
            // Every `user.granary.*` attribute present (so new fields need no list here).
            let keys: Vec<String> = list()
                .map_err(Error::io(path))?
                .filter_map(|k| {
                    k.to_str()
                        .and_then(|k| k.strip_prefix(PREFIX))
                        .map(str::to_string)
                })
                .collect();
            let mut tags = serde_json::Map::new();
            for k in keys.iter().map(String::as_str) {
                let key = format!("{PREFIX}{k}");
                if let Some(v) = get(&key).map_err(Error::io(path))? {
                    let s = String::from_utf8_lossy(&v).into_owned();
                    if let Some(tag) = k.strip_prefix(TAG) {
                        tags.insert(tag.to_string(), serde_json::Value::String(s));
                        continue;
                    }
                    let val = match k {
                        "version" | "size" | "segment_size" | "segments" | "created_ms" => {
                            serde_json::Value::Number(
                                s.parse::<u64>()
                                    .map_err(|_| {
                                        Error::Corrupt(format!("{}: {key}={s:?}", path.display()))
                                    })?
                                    .into(),
                            )
                        }
                        _ => serde_json::Value::String(s),
                    };
                    o.insert(k.to_string(), val);
                }
            }
            if !tags.is_empty() {
                o.insert("tags".into(), serde_json::Value::Object(tags));
            }
            match serde_json::from_value(serde_json::Value::Object(o)) {
                Ok(m) => Ok(m),
                // Written as a sidecar (a store whose back end was once
                // detected wrongly, or copied from a file system without
                // xattrs): read it there.
                Err(_) if sidecar(path).exists() => read(Backend::Sidecar, path),
                Err(e) => Err(Error::Corrupt(format!("{}: metadata: {e}", path.display()))),
            }
        }
        Backend::Sidecar => {
            let p = sidecar(path);
            let bytes = fs::read(&p).map_err(Error::io(&p))?;
            serde_json::from_slice(&bytes)
                .map_err(|e| Error::Corrupt(format!("{}: {e}", p.display())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_as_their_own_attributes_and_in_sidecars() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        fs::write(&f, b"x").unwrap();
        let mut m = FileMeta {
            name: "/a/b".into(),
            version: 7,
            size: 1,
            segment_size: 8192,
            chunking: "fixed:8192".into(),
            segments: None,
            sha256: None,
            manifest: None,
            signer: None,
            signing: None,
            content_type: None,
            created_ms: 1,
            tags: [("drs_version".to_string(), "v20190429".to_string())].into(),
        };
        let backends: &[Backend] = if detect(dir.path()) == Backend::Xattr {
            &[Backend::Xattr, Backend::Sidecar]
        } else {
            &[Backend::Sidecar]
        };
        for &b in backends {
            write(b, &f, &m).unwrap();
            assert_eq!(read(b, &f).unwrap().tags, m.tags, "{b:?}");
        }
        if backends.len() == 2 {
            let v = xattr::get(&f, "user.granary.tag.drs_version").unwrap();
            assert_eq!(v.as_deref(), Some(&b"v20190429"[..]));
            // A tag no longer set is removed.
            m.tags.clear();
            write(Backend::Xattr, &f, &m).unwrap();
            assert!(read(Backend::Xattr, &f).unwrap().tags.is_empty());
            assert!(xattr::get(&f, "user.granary.tag.drs_version")
                .unwrap()
                .is_none());
        }
    }
}
