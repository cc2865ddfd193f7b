//! Rename that survives being killed: `granary mv` records its intent
//! (`<repo>/renames/<pid>-<n>.json`, durable) before it moves anything,
//! moves the versions ([`Store::rename`]), signs each version's manifest
//! root again under the new name (one signature per version), and only
//! then drops the record. A rename interrupted anywhere is completed by
//! [`recover`] — the daemon runs it at start and every `mv` before its own
//! — so no version stays half-renamed (under the new name with a manifest
//! root that names the old one, which no consumer could verify).

use std::path::{Path, PathBuf};

use granary_packet::Name;
use granary_security::{KeyChain, Signer};
use granary_store::Store;

fn journal_dir(store: &Store) -> PathBuf {
    store.root().join("renames")
}

/// Renames `old` to `new` (every version), crash-safe as the module says.
/// Returns the versions renamed.
pub fn rename(store: &Store, kc: &KeyChain, old: &Name, new: &Name) -> Result<Vec<u64>, String> {
    let dir = journal_dir(store);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let record = dir.join(format!(
        "{}-{}.json",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    let body = serde_json::json!({"old": old.to_string(), "new": new.to_string()});
    granary_store::write_atomic(&record, body.to_string().as_bytes()).map_err(|e| e.to_string())?;
    if let Err(e) = store.rename(old, new) {
        // Nothing was moved (it failed its checks) or it failed midway:
        // completing it is right only in the second case.
        // Refused by its checks: nothing was moved.
        if matches!(
            e,
            granary_store::Error::Exists(_) | granary_store::Error::NotFound(_)
        ) {
            let _ = std::fs::remove_file(&record);
            return Err(e.to_string());
        }
        // Failed midway (a full disk): completed below, or left recorded
        // for `recover` when that fails too.
    }
    let done = complete(store, kc, old, new)?;
    std::fs::remove_file(&record).map_err(|e| format!("{}: {e}", record.display()))?;
    Ok(done)
}

/// Completes every interrupted rename. Returns (old, new) of each one
/// completed; failures are logged and their records kept for next time.
pub fn recover(store: &Store, kc: &KeyChain) -> Vec<(Name, Name)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(journal_dir(store)) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        // A record being written (`.tmp-…`, renamed into place by its
        // writer) is not a record yet; one of a live `mv` is its own
        // business.
        if e.file_name().as_encoded_bytes().starts_with(b".") || owner_alive(&p) {
            continue;
        }
        match recover_one(store, kc, &p) {
            Ok(Some(pair)) => out.push(pair),
            Ok(None) => {}
            Err(x) => tracing::error!(
                "rename record {}: {x}; kept, tried again at the next start or mv",
                p.display()
            ),
        }
    }
    out
}

fn owner_alive(p: &Path) -> bool {
    let pid = p
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split('-').next())
        .and_then(|n| n.parse::<u32>().ok());
    pid.is_some_and(|pid| pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists())
}

fn recover_one(store: &Store, kc: &KeyChain, p: &Path) -> Result<Option<(Name, Name)>, String> {
    let Ok(bytes) = std::fs::read(p) else {
        return Ok(None);
    };
    let v: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => {
            // Written atomically: a record that does not parse was never
            // complete, so its rename never started.
            let _ = std::fs::remove_file(p);
            return Ok(None);
        }
    };
    let name = |k: &str| {
        v[k].as_str()
            .ok_or_else(|| format!("no {k:?}"))
            .and_then(|s| Name::from_uri(s).map_err(|e| e.to_string()))
    };
    let (old, new) = (name("old")?, name("new")?);
    // Completed whether or not it had started moving (a version's files
    // beside it go first, its data file last: one killed midway may have
    // moved files of a version whose data file is still under the old
    // name). The `mv` was never acknowledged, so either outcome is right;
    // only a half-done one is not.
    complete(store, kc, &old, &new)?;
    tracing::warn!("completed the interrupted rename of {old} to {new}");
    std::fs::remove_file(p).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(Some((old, new)))
}

/// Moves what is left and signs every manifest root under `new` again.
fn complete(store: &Store, kc: &KeyChain, old: &Name, new: &Name) -> Result<Vec<u64>, String> {
    let versions = store.finish_rename(old, new).map_err(|e| e.to_string())?;
    for v in &versions {
        let e = store.get(new, Some(*v)).map_err(|e| e.to_string())?;
        if e.meta.manifest.is_none() {
            continue;
        }
        let signer = match e.meta.signer.as_deref() {
            Some(k) => {
                let k = Name::from_uri(k).map_err(|x| x.to_string())?;
                kc.signer(&k)
                    .map_err(|x| format!("re-signing the manifest of v={v}: {x}"))?
            }
            None => Signer::Digest,
        };
        crate::manifest::rename_root(store, &e, &signer)
            .map_err(|x| format!("manifest of v={v}: {x}"))?;
    }
    Ok(versions)
}
