//! Local commands of the daemon's repository, under `/localhost/granary/repo`
//! (the forwarder never lets `/localhost` in from a non-local face):
//!
//! - `…/put` with JSON ApplicationParameters `{"path", "name", "version"?,
//!   "sign"?, "key"?, "keep"?, "id"?, "chunking"?, "index"?}`: the daemon streams the file in
//!   (copy + hashing in one pass, constant memory, atomic publish), builds
//!   the signed manifest, applies retention, and answers with a JSON result
//!   when done.
//! - `…/progress/<id>`: bytes ingested so far by the put with that id.
//! - `…/removed` with `{"name", "version"?}`: `granary rm` removed that name
//!   from the store; a detached put of it still in flight (a copy `granary
//!   get` asked to keep) is dropped when it lands, and one that landed since
//!   the removal is removed again.
//! - `…/forget`: drop cached lookups and read the settings again.
//! - `…/holds` with `{"name", "version"}`: whether the repository holds that
//!   version (`{"holds": bool}`): an application on the node then fetches it
//!   by name from here rather than chunk by chunk from the same store.
//!
//! `put`, `removed` and `forget` are taken from the node's own user and root
//! only ([`OWNER_ONLY`]); `holds` and `progress` from any application.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use granary_face::{LinkFields, NetPacket};
use granary_packet::{Data, DataBuilder, Interest, Name};
use serde_json::{json, Value};

use crate::keeps::{drop_kept, removed_on_disk};
use crate::publish::{
    check_segment_size, publish_file, publisher_signer, publisher_signer_as, Publish,
};
use crate::Repo;

/// Prefix of the local commands.
pub const PREFIX: &str = "/localhost/granary/repo";

/// The commands that act with the daemon's rights (`put` reads a path) or
/// change what its repository holds: the node takes them from its own user
/// and root only (the forwarder's `owner_only`); `holds` and `progress` are
/// open to every application on the node.
pub const OWNER_ONLY: [&str; 3] = ["put", "removed", "forget"];

/// [`OWNER_ONLY`] as name prefixes (URIs).
pub fn owner_only_prefixes() -> Vec<String> {
    OWNER_ONLY.iter().map(|v| format!("{PREFIX}/{v}")).collect()
}
/// The local command service.
pub struct Local {
    repo: Arc<Repo>,
    out: tokio::sync::mpsc::Sender<(NetPacket, LinkFields)>,
    prefix: Name,
    progress: Arc<Mutex<HashMap<String, Arc<AtomicU64>>>>,
}

fn reply(name: &Name, v: &Value) -> Data {
    granary_packet::digest::sign_data(
        DataBuilder::new(name.clone())
            .content(Bytes::from(v.to_string()))
            .freshness_period(0),
    )
}

impl Local {
    /// A service sending its delayed answers through `out`.
    pub fn new(repo: Arc<Repo>, out: tokio::sync::mpsc::Sender<(NetPacket, LinkFields)>) -> Self {
        Local {
            repo,
            out,
            prefix: Name::from_uri(PREFIX).unwrap_or_default(),
            progress: Arc::default(),
        }
    }

    /// True for Interests under [`PREFIX`].
    pub fn is_mine(&self, i: &Interest) -> bool {
        self.prefix.is_prefix_of(&i.name)
    }

    /// Handles a local command; `Some` is an immediate answer, `None` means
    /// the answer follows through the outbox.
    pub fn on_interest(&self, i: &Interest, link: &LinkFields) -> Option<NetPacket> {
        let verb = i
            .name
            .get(self.prefix.len() as isize)
            .map(|c| String::from_utf8_lossy(c.value).into_owned());
        match verb.as_deref() {
            Some("progress") => {
                let id = i
                    .name
                    .get(self.prefix.len() as isize + 1)
                    .map(|c| String::from_utf8_lossy(c.value).into_owned());
                let bytes = id.and_then(|id| {
                    self.progress
                        .lock()
                        .ok()
                        .and_then(|m| m.get(&id).map(|a| a.load(Ordering::Relaxed)))
                });
                Some(NetPacket::Data(reply(&i.name, &json!({ "bytes": bytes }))))
            }
            Some("holds") => {
                let params: Value = i
                    .app_params
                    .as_ref()
                    .and_then(|p| serde_json::from_slice(p).ok())
                    .unwrap_or(Value::Null);
                let holds = match (
                    params["name"].as_str().map(Name::from_uri),
                    params["version"].as_u64(),
                ) {
                    (Some(Ok(name)), Some(v)) => self.repo.store.get_shared(&name, Some(v)).is_ok(),
                    _ => false,
                };
                Some(NetPacket::Data(reply(&i.name, &json!({ "holds": holds }))))
            }
            Some("forget") => {
                // Another process renamed or removed a version, or changed
                // the settings: drop the cached lookups so it is seen at
                // once, and read the settings again.
                self.repo.store.forget();
                self.repo.reload();
                Some(NetPacket::Data(reply(&i.name, &json!({ "ok": true }))))
            }
            Some("removed") => {
                // `granary rm` removed `name` (one version or all) from the
                // store: a copy of it still being kept must not land after
                // that, and one that landed between the removal and now is
                // removed again.
                let params: Value = i
                    .app_params
                    .as_ref()
                    .and_then(|p| serde_json::from_slice(p).ok())
                    .unwrap_or(Value::Null);
                let Some(Ok(name)) = params["name"].as_str().map(Name::from_uri) else {
                    return Some(NetPacket::Data(reply(
                        &i.name,
                        &json!({"ok": false, "error": "parameters must be JSON with a name"}),
                    )));
                };
                let version = params["version"].as_u64();
                let (in_flight, landed) = self.repo.keeps.mark_removed(&name, version);
                let (repo, out) = (self.repo.clone(), self.out.clone());
                let (reply_name, token) = (i.name.clone(), link.pit_token.clone());
                tokio::spawn(async move {
                    let n = landed.len();
                    let _ = tokio::task::spawn_blocking(move || {
                        for v in landed {
                            drop_kept(&repo, &name, v);
                        }
                    })
                    .await;
                    let link = LinkFields {
                        pit_token: token,
                        ..Default::default()
                    };
                    let v = json!({"ok": true, "in_flight": in_flight, "dropped": n});
                    let _ = out
                        .send((NetPacket::Data(reply(&reply_name, &v)), link))
                        .await;
                });
                None
            }
            Some("put") => {
                let params: Value = match i.app_params.as_ref().map(|p| serde_json::from_slice(p)) {
                    Some(Ok(v)) => v,
                    _ => {
                        return Some(NetPacket::Data(reply(
                            &i.name,
                            &json!({"ok": false, "error": "parameters must be JSON"}),
                        )))
                    }
                };
                let (repo, out, progress) =
                    (self.repo.clone(), self.out.clone(), self.progress.clone());
                let (name, token) = (i.name.clone(), link.pit_token.clone());
                // `detach`: answered at once; the ingest goes on and its
                // outcome is logged (what `granary get` uses to keep a copy of
                // what it fetched without making its user wait).
                let detach = params["detach"].as_bool().unwrap_or(false);
                let early = detach
                    .then(|| NetPacket::Data(reply(&name, &json!({"ok": true, "detached": true}))));
                let kept_name = params["name"].as_str().and_then(|n| Name::from_uri(n).ok());
                if let (Some(n), true) = (&kept_name, detach) {
                    let v = params["version"].as_u64();
                    if repo.keeps.was_removed(n, v) || removed_on_disk(&repo.store, n, v) {
                        return Some(NetPacket::Data(reply(
                            &name,
                            &json!({"ok": false, "error": format!("{n} was removed or renamed on this node since it was fetched; not kept")}),
                        )));
                    }
                    repo.keeps.begin(n, params["version"].as_u64());
                }
                tokio::spawn(async move {
                    let id = params["id"].as_str().unwrap_or("").to_string();
                    let params_name = params["name"].as_str().unwrap_or("?").to_string();
                    let counter = Arc::new(AtomicU64::new(0));
                    if let Ok(mut m) = progress.lock() {
                        m.insert(id.clone(), counter.clone());
                    }
                    let r2 = repo.clone();
                    let result = tokio::task::spawn_blocking(move || put(&r2, &params, &counter))
                        .await
                        .unwrap_or_else(|e| Err(format!("ingest task failed: {e}")));
                    if let Ok(mut m) = progress.lock() {
                        m.remove(&id);
                    }
                    if detach {
                        let committed = result.as_ref().ok().and_then(|v| v["version"].as_u64());
                        let removed = kept_name
                            .as_ref()
                            .is_some_and(|n| repo.keeps.finish(n, committed));
                        match (result, removed, kept_name) {
                            (Ok(v), true, Some(n)) => {
                                let version = v["version"].as_u64();
                                let _ = tokio::task::spawn_blocking(move || {
                                    if let Some(version) = version {
                                        drop_kept(&repo, &n, version)
                                    }
                                })
                                .await;
                            }
                            (Ok(v), _, _) => tracing::info!(
                                "kept a copy of {}: {}",
                                params_name,
                                v["versioned"].as_str().unwrap_or_default()
                            ),
                            // The node holds that version already (it is
                            // never replaced by a copy).
                            (Err(e), _, _) if e.starts_with("already exists") => {
                                tracing::debug!("not kept: {params_name}: held already")
                            }
                            (Err(e), _, _) => tracing::warn!("not kept: {params_name}: {e}"),
                        }
                        return;
                    }
                    let v = result.unwrap_or_else(|e| json!({"ok": false, "error": e}));
                    let link = LinkFields {
                        pit_token: token,
                        ..Default::default()
                    };
                    let _ = out.send((NetPacket::Data(reply(&name, &v)), link)).await;
                });
                early
            }
            _ => Some(NetPacket::Nack(
                i.clone(),
                granary_packet::types::nack_reason::NO_ROUTE,
            )),
        }
    }
}

fn put(repo: &Repo, p: &Value, counter: &AtomicU64) -> Result<Value, String> {
    let path = p["path"].as_str().ok_or("path is required")?;
    let name =
        Name::from_uri(p["name"].as_str().ok_or("name is required")?).map_err(|e| e.to_string())?;
    let policy = p["sign"].as_str().unwrap_or("manifest");
    let key = p["key"]
        .as_str()
        .map(Name::from_uri)
        .transpose()
        .map_err(|e| e.to_string())?;
    if let Some(f) = p["root_file"].as_str() {
        let wire = std::fs::read(f).map_err(|e| format!("the daemon cannot read {f}: {e}"));
        let _ = std::fs::remove_file(f);
        return put_with_root(repo, p, &name, path, wire?);
    }
    let kc = repo.keychain().ok_or("the daemon has no keychain")?;
    let (signer, _) = match repo.publisher() {
        Some(id) => publisher_signer_as(kc, key.as_ref(), policy, id)?,
        None => publisher_signer(kc, key.as_ref(), policy)?,
    };
    std::fs::File::open(path).map_err(|e| format!("the daemon cannot open {path}: {e}"))?;
    let how = Publish {
        version: p["version"].as_u64(),
        signer: &signer,
        policy,
        keep: p["keep"].as_u64(),
        segment_size: p["segment_size"]
            .as_u64()
            .map(check_segment_size)
            .transpose()?,
        chunking: p["chunking"]
            .as_str()
            .map(str::parse)
            .transpose()
            .map_err(|e: String| e)?,
        index: p["index"].as_bool().unwrap_or(true),
        file_sha256: p["sha256"].as_bool().unwrap_or(false),
        tags: p["tags"]
            .as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default(),
        expect_hashes: match p["expect_hashes"].as_str() {
            Some(h) => Some(
                hex::decode(h)
                    .ok()
                    .and_then(|v| <[u8; 32]>::try_from(v).ok())
                    .ok_or("expect_hashes must be 64 hex digits")?,
            ),
            None => None,
        },
    };
    let mut v = publish_file(repo, &name, std::path::Path::new(path), &how, |b| {
        counter.store(b, Ordering::Relaxed)
    })?;
    // Which data directory and key the daemon used: the CLI tells the user
    // when it is not the data directory it was given.
    if let Some(dir) = repo.store.root().parent() {
        v["data_dir"] = json!(dir.display().to_string());
    }
    v["key"] = match &signer.sig_info().key_locator {
        Some(granary_packet::KeyLocator::Name(k)) => json!(k.to_string()),
        _ => Value::Null,
    };
    Ok(v)
}

/// `put` of a fetched copy with `"root_file"`: the publisher's signed
/// manifest root (a file holding the Data as the fetch received and
/// verified it; removed once read) is kept as
/// the version's manifest, byte for byte ([`crate::manifest::adopt`] checks
/// it is this version's), instead of a manifest signed by this node.
fn put_with_root(
    repo: &Repo,
    p: &Value,
    name: &Name,
    path: &str,
    wire: Vec<u8>,
) -> Result<Value, String> {
    let root =
        Data::decode(Bytes::from(wire)).map_err(|e| format!("root is not a Data packet: {e}"))?;
    let version = p["version"].as_u64().ok_or("root needs a version")?;
    let chunking: granary_store::Chunking = p["chunking"]
        .as_str()
        .ok_or("root needs a chunking")?
        .parse()?;
    let expect = p["expect_hashes"]
        .as_str()
        .and_then(|h| hex::decode(h).ok())
        .and_then(|v| <[u8; 32]>::try_from(v).ok())
        .ok_or("root needs expect_hashes (64 hex digits)")?;
    let t = std::time::Instant::now();
    let e = crate::publish::publish_replica(
        repo,
        name,
        std::path::Path::new(path),
        version,
        chunking,
        expect,
        &root,
        // The user's fetched file: copied, never taken.
        false,
        None,
    )?;
    let noted = repo.notify_published(&e);
    let mut v = json!({
        "ok": true,
        "versioned": name.append(&granary_packet::Component::version(version)).to_string(),
        "version": version,
        "size": e.meta.size,
        "segments": e.meta.segments(),
        "chunking": e.meta.chunking,
        "seconds": t.elapsed().as_secs_f64(),
        "key": e.meta.signer,
        "publisher_signature": true,
    });
    if let Some(n) = noted {
        v["catalog"] = json!(n.word());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_packet::{Component, InterestFields};

    fn ask(l: &Local, verb: &str, params: Option<&[u8]>) -> Option<NetPacket> {
        let name = Name::from_uri(PREFIX)
            .unwrap()
            .append(&Component::generic(verb.as_bytes()));
        let mut f = InterestFields::new(name);
        f.app_params = params.map(Bytes::copy_from_slice);
        l.on_interest(&f.encode(), &LinkFields::default())
    }

    fn answer(p: Option<NetPacket>) -> Value {
        match p {
            Some(NetPacket::Data(d)) => serde_json::from_slice(d.content()).unwrap(),
            other => panic!("expected a JSON answer, got {other:?}"),
        }
    }

    fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
        out.sort();
        out
    }

    /// Local commands with parameters that are not what they need: a clear
    /// error in the answer, nothing written to the store, nothing marked.
    #[tokio::test]
    async fn bad_parameters_get_a_clear_error_and_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = granary_store::Store::open(dir.path()).unwrap();
        let repo = Arc::new(Repo::new(store, None));
        let (tx, mut outbox) = tokio::sync::mpsc::channel(16);
        let l = Local::new(repo, tx);
        let before = files_under(dir.path());

        let bad: [Option<&[u8]>; 5] = [
            None,
            Some(b"not json"),
            Some(b"{\"version\": 3}"),
            Some(b"{\"name\": 7}"),
            Some(b"[\"/a\"]"),
        ];
        for params in bad {
            let v = answer(ask(&l, "removed", params));
            assert_eq!(v["ok"], false, "removed {params:?}: {v}");
            assert!(
                v["error"].as_str().unwrap().contains("name"),
                "removed {params:?}: {v}"
            );
        }
        assert!(l.repo.keeps.is_empty(), "nothing marked");

        for params in [None, Some(&b"{not json"[..])] {
            let v = answer(ask(&l, "put", params));
            assert_eq!(v["ok"], false, "put {params:?}: {v}");
            assert!(v["error"].as_str().unwrap().contains("JSON"), "{v}");
        }
        // Valid JSON without a path: the ingest task answers through the
        // outbox with the reason.
        assert!(ask(&l, "put", Some(b"{\"name\": \"/x\"}")).is_none());
        let (p, _) = tokio::time::timeout(std::time::Duration::from_secs(10), outbox.recv())
            .await
            .unwrap()
            .unwrap();
        let v = answer(Some(p));
        assert_eq!(v["ok"], false, "{v}");
        assert_eq!(v["error"], "path is required", "{v}");

        // An unknown verb is refused, and progress of an unknown put is null.
        assert!(matches!(ask(&l, "format", None), Some(NetPacket::Nack(..))));
        let v = answer(ask(&l, "progress", None));
        assert!(v["bytes"].is_null(), "{v}");

        assert_eq!(files_under(dir.path()), before, "the store is untouched");
    }
}
