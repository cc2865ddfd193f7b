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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use granary_face::{LinkFields, NetPacket};
use granary_packet::{Component, Data, DataBuilder, Interest, Name};
use granary_security::{KeyChain, KeyType, Signer};
use granary_store::PutOptions;
use serde_json::{json, Value};

use crate::Repo;

/// Prefix of the local commands.
pub const PREFIX: &str = "/localhost/granary/repo";

/// Identity of the key made when a keychain has none and a signature is needed.
pub const DEFAULT_PUBLISHER: &str = "/granary/publisher";

/// The signer for a signing policy: the named key, the default key, or a new
/// default key under [`DEFAULT_PUBLISHER`] (Ed25519, or ECDSA for `ecdsa`).
/// Returns the signer and, when one was created, the new key's name.
pub fn publisher_signer(
    kc: &KeyChain,
    key: Option<&Name>,
    policy: &str,
) -> Result<(Signer, Option<Name>), String> {
    let id = Name::from_uri(DEFAULT_PUBLISHER).map_err(|e| e.to_string())?;
    publisher_signer_as(kc, key, policy, &id)
}

/// [`publisher_signer`], making a missing default key under `identity`
/// (the node's prefix, so that every node signs as itself) instead of
/// [`DEFAULT_PUBLISHER`]. An existing default key is used whatever its name
/// (older data directories keep `/granary/publisher`).
pub fn publisher_signer_as(
    kc: &KeyChain,
    key: Option<&Name>,
    policy: &str,
    identity: &Name,
) -> Result<(Signer, Option<Name>), String> {
    if policy == "digest" {
        return Ok((Signer::Digest, None));
    }
    let mut created = None;
    let signer = match key {
        Some(k) => kc.signer(k).map_err(|e| e.to_string())?,
        None => {
            let t = if policy == "ecdsa" {
                KeyType::Ecdsa
            } else {
                KeyType::Ed25519
            };
            let (s, made) = kc
                .default_or_generate(identity, t)
                .map_err(|e| e.to_string())?;
            created = made;
            s
        }
    };
    let want = match policy {
        "ed25519" => Some(granary_packet::types::sig_type::ED25519),
        "ecdsa" => Some(granary_packet::types::sig_type::SHA256_WITH_ECDSA),
        "manifest" => None,
        other => {
            return Err(format!(
                "unknown signing policy {other:?} (manifest, ed25519, ecdsa, digest)"
            ))
        }
    };
    if let Some(w) = want {
        if signer.sig_type() != w {
            return Err(format!(
                "--sign {policy} needs a {policy} key; name one with --key"
            ));
        }
    }
    Ok((signer, created))
}

/// How to publish: version, signing, retention.
pub struct Publish<'a> {
    /// Version (default: now in µs).
    pub version: Option<u64>,
    /// Signer of the manifest (and of packets for `ed25519`/`ecdsa`).
    pub signer: &'a Signer,
    /// Signing policy.
    pub policy: &'a str,
    /// Keep only the newest N versions.
    pub keep: Option<u64>,
    /// Content bytes per segment (default 8192); see [`check_segment_size`].
    pub segment_size: Option<u32>,
    /// Chunking (default: the repository's config, else fixed 8 KiB).
    pub chunking: Option<granary_store::Chunking>,
    /// Add the segments to the hash index (normally true).
    pub index: bool,
    /// Also hash the whole file ([`PutOptions::file_sha256`]).
    pub file_sha256: bool,
    /// Labels kept with the version in its metadata (`FileMeta::tags`; e.g.
    /// `drs_version` from `granary publish-dir`).
    pub tags: Vec<(String, String)>,
    /// Publish only if the segments' hashes are exactly these
    /// ([`PutOptions::expect_hashes`]).
    pub expect_hashes: Option<[u8; 32]>,
}

/// Segment sizes a publisher may choose: 256 B … 1 MiB. Above 8 KiB the
/// Data no longer fits the default 8800-byte packet limit, so every node on
/// the path needs a larger `max_packet`.
pub fn check_segment_size(n: u64) -> Result<u32, String> {
    if (256..=1 << 20).contains(&n) {
        Ok(n as u32)
    } else {
        Err(format!("segment size {n}: must be 256 … 1048576 bytes"))
    }
}

/// Publishes a stream (standard input, a network insert): store, manifest,
/// retention. Returns the result as JSON.
///
/// Every publish path stages the version (ingested, its manifest signed and
/// its tags set, all still invisible in the store's temp directory) and
/// then commits it ([`granary_store::Store::commit`]): the version appears
/// whole, with its manifest, or not at all, and of several writers of one
/// version exactly one publishes (the store's publish lock); the others get
/// "already exists" and leave nothing behind.
pub fn publish(
    repo: &Repo,
    name: &Name,
    reader: impl std::io::Read,
    how: &Publish<'_>,
    progress: impl FnMut(u64),
) -> Result<Value, String> {
    let t = std::time::Instant::now();
    let e = repo
        .store
        .put(name, reader, &staged_options(repo, name, how)?, progress)
        .map_err(|e| e.to_string())?;
    let e = commit_one(repo, e, how)?;
    finish(repo, name, e, how, t, false)
}

/// Publishes what is pushed into `reader`'s [`granary_store::PipeWriter`]
/// as it arrives (a file written into `granary mount --publish`): the
/// store's streaming ingest, then manifest, retention and the observer, as
/// [`publish`]. `Ok(None)`: the writer kept its bytes instead
/// ([`granary_store::PipeWriter::keep`]); nothing was published.
pub fn publish_piped(
    repo: &Repo,
    name: &Name,
    reader: granary_store::PipeReader,
    how: &Publish<'_>,
    progress: impl FnMut(u64),
) -> Result<Option<Value>, String> {
    let t = std::time::Instant::now();
    let e = repo
        .store
        .put_piped(name, reader, &staged_options(repo, name, how)?, progress)
        .map_err(|e| e.to_string())?;
    match e {
        Some(e) => {
            let e = commit_one(repo, e, how)?;
            finish(repo, name, e, how, t, false).map(Some)
        }
        None => Ok(None),
    }
}

/// Publishes the file at `path`: reflinked into the store where the file
/// system allows (no data copied; one read pass to hash), copied otherwise.
pub fn publish_file(
    repo: &Repo,
    name: &Name,
    path: &std::path::Path,
    how: &Publish<'_>,
    progress: impl FnMut(u64),
) -> Result<Value, String> {
    let t = std::time::Instant::now();
    let (e, reflinked) = repo
        .store
        .put_file(name, path, &staged_options(repo, name, how)?, progress)
        .map_err(|e| e.to_string())?;
    let e = commit_one(repo, e, how)?;
    finish(repo, name, e, how, t, reflinked)
}

/// [`publish_file`] without publishing yet: the version is ingested,
/// its manifest signed and its tags set, all left staged in the store's
/// temp directory (nothing made durable, nothing visible) for [`commit`]
/// to publish with others (`granary publish-dir`'s group commit).
/// Retention (`how.keep`) is not applied.
pub fn stage_file(
    repo: &Repo,
    name: &Name,
    path: &std::path::Path,
    how: &Publish<'_>,
) -> Result<granary_store::Entry, String> {
    let (e, _) = repo
        .store
        .put_file(name, path, &staged_options(repo, name, how)?, |_| {})
        .map_err(|e| e.to_string())?;
    sign_staged(repo, e, how)
}

/// Signs the manifest of a staged version and sets its tags; on failure
/// the staged version is discarded.
fn sign_staged(
    repo: &Repo,
    e: granary_store::Entry,
    how: &Publish<'_>,
) -> Result<granary_store::Entry, String> {
    let fail = |x: String| {
        repo.store.discard(&e);
        x
    };
    crate::manifest::publish(&repo.store, &e, how.signer, how.policy)
        .map_err(|x| fail(format!("manifest: {x}")))?;
    if !how.tags.is_empty() {
        // `manifest::publish` wrote the manifest digest into the metadata:
        // add the tags to what is there now.
        let mut m = granary_store::meta::read(repo.store.backend(), &e.path)
            .map_err(|x| fail(x.to_string()))?;
        m.tags
            .extend(how.tags.iter().map(|(k, v)| (k.clone(), v.clone())));
        repo.store
            .set_meta(&e, &m)
            .map_err(|x| fail(x.to_string()))?;
    }
    Ok(e)
}

/// Signs and commits one staged version (see [`publish`]).
fn commit_one(
    repo: &Repo,
    e: granary_store::Entry,
    how: &Publish<'_>,
) -> Result<granary_store::Entry, String> {
    let e = sign_staged(repo, e, how)?;
    repo.store
        .commit(vec![e], how.index)
        .pop()
        .unwrap_or_else(|| Err(granary_store::Error::Corrupt("nothing committed".into())))
        .map_err(|e| match e {
            granary_store::Error::Exists(what) => format!(
                "already exists: {what} (published by another writer; a version is never replaced: choose another --version or remove it first)"
            ),
            e => e.to_string(),
        })
}

/// Publishes versions staged by [`stage_file`] together
/// ([`granary_store::Store::commit`]: two `syncfs` for the whole batch;
/// each version appears complete or not at all) and tells the observer of
/// each. Returns each one's entry as published, in order.
pub fn commit(
    repo: &Repo,
    staged: Vec<granary_store::Entry>,
    index: bool,
) -> Vec<Result<granary_store::Entry, String>> {
    repo.store
        .commit(staged, index)
        .into_iter()
        .map(|r| {
            let e = r.map_err(|e| e.to_string())?;
            let _ = repo.notify_published(&e);
            Ok(e)
        })
        .collect()
}

/// Options of a staged ingest. A version asked for that is already stored
/// is refused here, before any byte is read (a copy that `granary get` asks
/// the node to keep of a version it holds would otherwise be ingested in
/// full only to be refused at the commit); the commit's check under the
/// publish lock still decides between writers racing for a new version.
fn staged_options(repo: &Repo, name: &Name, how: &Publish<'_>) -> Result<PutOptions, String> {
    if let Some(v) = how.version {
        if repo.store.versions(name).is_ok_and(|vs| vs.contains(&v)) {
            return Err(format!(
                "already exists: {name} version {v} (a version is never replaced: choose another --version or remove it first)"
            ));
        }
    }
    let mut o = put_options(repo, how)?;
    o.staged = true;
    Ok(o)
}

fn put_options(repo: &Repo, how: &Publish<'_>) -> Result<PutOptions, String> {
    let chunking = match (how.segment_size, how.chunking) {
        (Some(s), None) | (Some(s), Some(granary_store::Chunking::Fixed(_))) => {
            granary_store::Chunking::Fixed(check_segment_size(s as u64)?)
        }
        (Some(_), Some(c)) => {
            return Err(format!(
                "--segment-size is for fixed-size segments; chunking {c} sets its own sizes"
            ))
        }
        (None, Some(c)) => c,
        (None, None) => repo.store.default_chunking().map_err(|e| e.to_string())?,
    };
    Ok(PutOptions {
        version: how.version,
        chunking: Some(chunking),
        index: how.index,
        file_sha256: how.file_sha256,
        expect_hashes: how.expect_hashes,
        ..Default::default()
    })
}

/// After the version is committed: the observer, retention, the JSON result.
fn finish(
    repo: &Repo,
    name: &Name,
    e: granary_store::Entry,
    how: &Publish<'_>,
    t: std::time::Instant,
    reflinked: bool,
) -> Result<Value, String> {
    let noted = repo.notify_published(&e);
    let mut removed = 0;
    if let Some(k) = how.keep {
        let versions = repo.store.versions(name).map_err(|e| e.to_string())?;
        let old = versions.len().saturating_sub(k as usize);
        for v in &versions[..old] {
            repo.store
                .remove(name, Some(*v))
                .map_err(|e| e.to_string())?;
            let _ = repo.notify_removed(name, Some(*v));
        }
        removed = old;
    }
    let mut v = json!({
        "ok": true,
        "versioned": name.append(&Component::version(e.meta.version)).to_string(),
        "version": e.meta.version,
        "size": e.meta.size,
        "segments": e.meta.segments(),
        "chunking": e.meta.chunking,
        "sha256": e.meta.sha256,
        "seconds": t.elapsed().as_secs_f64(),
        "removed_versions": removed,
        "reflinked": reflinked,
    });
    // What the catalog made of it: "done", "queued" (kept on the node and
    // catalogued when the catalog is back) or "failed"; absent without one.
    if let Some(n) = noted {
        v["catalog"] = json!(n.word());
        if let Some(why) = n.why() {
            v["catalog_note"] = json!(why);
        }
    }
    Ok(v)
}

/// The local command service.
pub struct Local {
    repo: Arc<Repo>,
    out: tokio::sync::mpsc::Sender<(NetPacket, LinkFields)>,
    prefix: Name,
    progress: Arc<Mutex<HashMap<String, Arc<AtomicU64>>>>,
}

/// The copies being kept in the background, held by the [`Repo`] so that
/// every removal sees them: `granary rm` (the `removed` local command) and
/// a network delete (python_repo).
#[derive(Default)]
pub(crate) struct Keeps(Mutex<Vec<Keep>>, Mutex<Vec<Removal>>);

/// A removal (or rename away) of a name that this node was told of: a
/// copy of it asked to be kept after it — `granary get` fetched it before
/// the removal and asks to keep it after — must not bring it back.
struct Removal {
    name: Name,
    version: Option<u64>,
    at: std::time::Instant,
}

/// How long a removal blocks keeps of what it removed: longer than a fetch
/// that started before it can take to ask.
const REMOVAL_MEMORY: std::time::Duration = std::time::Duration::from_secs(600);

/// The durable record of removals (`<repo>/removed.log`, one JSON line
/// each: name, version, time): written by `rm`, `mv` and rename recovery
/// whether or not a daemon runs, read by the daemon before it keeps a
/// copy, so that a removal survives a daemon restart. Lines older than
/// [`REMOVAL_MEMORY`] are ignored (and dropped when the file is rewritten).
fn removal_log(store: &granary_store::Store) -> std::path::PathBuf {
    store.root().join("removed.log")
}

/// Records that `name` (`version`, or every version) was removed or renamed
/// away, durably (see [`removal_log`]).
pub fn record_removal(
    store: &granary_store::Store,
    name: &Name,
    version: Option<u64>,
) -> std::io::Result<()> {
    use std::io::Write;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let p = removal_log(store);
    // Rewritten without its stale lines once it grows.
    if std::fs::metadata(&p).is_ok_and(|m| m.len() > 1 << 20) {
        let keep: String = std::fs::read_to_string(&p)
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                serde_json::from_str::<Value>(l).is_ok_and(|v| {
                    v["at"]
                        .as_u64()
                        .is_some_and(|t| now.saturating_sub(t) < REMOVAL_MEMORY.as_secs())
                })
            })
            .map(|l| format!("{l}\n"))
            .collect();
        granary_store::write_atomic(&p, keep.as_bytes()).map_err(std::io::Error::other)?;
    }
    let line = json!({"name": name.to_string(), "version": version, "at": now});
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)?;
    f.write_all(format!("{line}\n").as_bytes())?;
    f.sync_data()
}

/// True when [`removal_log`] records a removal of `name` (`version`) in the
/// last [`REMOVAL_MEMORY`].
fn removed_on_disk(store: &granary_store::Store, name: &Name, version: Option<u64>) -> bool {
    let Ok(text) = std::fs::read_to_string(removal_log(store)) else {
        return false;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let want = name.to_string();
    text.lines().rev().any(|l| {
        serde_json::from_str::<Value>(l).is_ok_and(|v| {
            v["name"].as_str() == Some(want.as_str())
                && v["at"]
                    .as_u64()
                    .is_some_and(|t| now.saturating_sub(t) < REMOVAL_MEMORY.as_secs())
                && (v["version"].is_null() || version.is_none() || v["version"].as_u64() == version)
        })
    })
}

/// A copy being kept in the background (a detached `put`, as `granary get`
/// asks for), or kept in the last [`KEEP_MEMORY`]: a removal of its name
/// that comes meanwhile must win, whichever of the two commits last.
struct Keep {
    name: Name,
    version: Option<u64>,
    /// Set by a removal of this name (and version) while it was in flight.
    removed: bool,
    /// When its version was committed; `None` while in flight.
    finished: Option<std::time::Instant>,
}

/// How long a finished keep is remembered: longer than a `granary rm`
/// takes between removing the files and telling the daemon.
const KEEP_MEMORY: std::time::Duration = std::time::Duration::from_secs(60);

fn reply(name: &Name, v: &Value) -> Data {
    let b = DataBuilder::new(name.clone())
        .content(Bytes::from(v.to_string()))
        .freshness_period(0);
    match b.sign_with(32, |m| {
        Ok::<_, std::convert::Infallible>(Bytes::copy_from_slice(&granary_packet::sha256(m)))
    }) {
        Ok(d) => d,
        Err(never) => match never {},
    }
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

impl Keeps {
    /// Records a keep of `name` (`version` if asked for) starting now;
    /// forgets those finished longer than [`KEEP_MEMORY`] ago.
    pub(crate) fn begin(&self, name: &Name, version: Option<u64>) {
        if let Ok(mut k) = self.0.lock() {
            k.retain(|k| k.finished.is_none_or(|t| t.elapsed() < KEEP_MEMORY));
            k.push(Keep {
                name: name.clone(),
                version,
                removed: false,
                finished: None,
            });
        }
    }

    /// Marks the keeps of `name` (`version`, or every version) as removed;
    /// returns how many are still in flight (each is dropped when it lands)
    /// and the versions among them already committed (they landed after the
    /// store removed the name, or are gone already: [`drop_kept`] them).
    pub(crate) fn mark_removed(&self, name: &Name, version: Option<u64>) -> (usize, Vec<u64>) {
        if let Ok(mut r) = self.1.lock() {
            r.retain(|r| r.at.elapsed() < REMOVAL_MEMORY);
            r.push(Removal {
                name: name.clone(),
                version,
                at: std::time::Instant::now(),
            });
        }
        let Ok(mut keeps) = self.0.lock() else {
            return (0, Vec::new());
        };
        let (mut in_flight, mut landed) = (0, Vec::new());
        for k in keeps.iter_mut().filter(|k| {
            k.name == *name && (version.is_none() || k.version.is_none() || k.version == version)
        }) {
            k.removed = true;
            match k.finished {
                Some(_) => landed.extend(k.version),
                None => in_flight += 1,
            }
        }
        (in_flight, landed)
    }

    /// True when `name` (`version`) was removed here in the last
    /// [`REMOVAL_MEMORY`]: a keep of it asked for now is refused.
    pub(crate) fn was_removed(&self, name: &Name, version: Option<u64>) -> bool {
        self.1.lock().is_ok_and(|r| {
            r.iter().any(|r| {
                r.at.elapsed() < REMOVAL_MEMORY
                    && r.name == *name
                    && (r.version.is_none() || version.is_none() || r.version == version)
            })
        })
    }

    /// Records that the keep of `name` finished (committing `version`, if
    /// it did); true when a removal of it came meanwhile, so the caller
    /// drops it.
    pub(crate) fn finish(&self, name: &Name, version: Option<u64>) -> bool {
        let Ok(mut keeps) = self.0.lock() else {
            return false;
        };
        let Some(k) = keeps
            .iter_mut()
            .find(|k| k.finished.is_none() && k.name == *name)
        else {
            return false;
        };
        k.finished = Some(std::time::Instant::now());
        if version.is_some() {
            k.version = version;
        }
        k.removed
    }
}

/// Removes `version` of `name`, a kept copy that a removal overtook.
pub(crate) fn drop_kept(repo: &Repo, name: &Name, version: u64) {
    match repo.store.remove(name, Some(version)) {
        Ok(_) => {
            repo.store.forget();
            let _ = repo.notify_removed(name, Some(version));
            tracing::info!(
                "dropped the copy of {name} v={version} being kept: it was removed meanwhile"
            );
        }
        Err(granary_store::Error::NotFound(_)) => {}
        Err(e) => tracing::warn!("could not drop the kept copy of {name} v={version}: {e}"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use granary_packet::InterestFields;

    /// A removal recorded on disk blocks keeps of that name (every version
    /// when it named none, else only its version), also for a store opened
    /// afterwards (a restarted daemon); other names are not blocked.
    #[test]
    fn recorded_removals_block_keeps_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let store = granary_store::Store::open(dir.path()).unwrap();
        let (a, b) = (
            Name::from_uri("/rm/a").unwrap(),
            Name::from_uri("/rm/b").unwrap(),
        );
        assert!(!removed_on_disk(&store, &a, Some(1)));
        record_removal(&store, &a, None).unwrap();
        record_removal(&store, &b, Some(7)).unwrap();
        drop(store);
        let store = granary_store::Store::open(dir.path()).unwrap();
        assert!(removed_on_disk(&store, &a, Some(1)));
        assert!(removed_on_disk(&store, &b, Some(7)));
        assert!(!removed_on_disk(&store, &b, Some(8)));
        assert!(!removed_on_disk(
            &store,
            &Name::from_uri("/rm/c").unwrap(),
            None
        ));
        // Stale lines (older than REMOVAL_MEMORY) block nothing.
        std::fs::write(
            removal_log(&store),
            "{\"name\":\"/rm/c\",\"version\":null,\"at\":1}\n",
        )
        .unwrap();
        assert!(!removed_on_disk(
            &store,
            &Name::from_uri("/rm/c").unwrap(),
            None
        ));
    }

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
        assert!(l.repo.keeps.0.lock().unwrap().is_empty(), "nothing marked");

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
