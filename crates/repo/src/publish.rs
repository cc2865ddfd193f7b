//! The publish path the daemon's `put` command shares with the CLI: the
//! publisher's signer ([`publisher_signer`]), [`Publish`] (version, signing,
//! retention), [`publish`] / [`publish_piped`] / [`publish_file`] (ingest,
//! signed manifest, observer, retention in one call) and group commit
//! ([`stage_file`], [`commit`]).

use granary_packet::{Component, Name};
use granary_security::{KeyChain, KeyType, Signer};
use granary_store::PutOptions;
use serde_json::{json, Value};

use crate::Repo;

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

/// A replica of another node's version: the file at `path` (fetched and
/// verified against the publisher's manifest) ingested with `chunking`
/// under `name` and `version`, published only if its segments' hashes are
/// exactly `expect_hashes` (the SHA-256 of the manifest's segment hashes),
/// with `root` — the publisher's signed manifest root as received — kept
/// byte for byte as its manifest ([`crate::manifest::adopt`]): never
/// re-signed. The version appears whole, with that manifest, or not at all.
/// The observer is not told: the caller registers the location. With
/// `take_source` the file at `path` (the caller's own temporary file) is
/// moved into the store rather than copied ([`PutOptions::take_source`]);
/// never for a user's file; `known`, the segments the fetch checked,
/// then spares the ingest cutting and hashing them again
/// ([`PutOptions::known_segments`]).
#[allow(clippy::too_many_arguments)]
pub fn publish_replica(
    repo: &Repo,
    name: &Name,
    path: &std::path::Path,
    version: u64,
    chunking: granary_store::Chunking,
    expect_hashes: [u8; 32],
    root: &granary_packet::Data,
    take_source: bool,
    known: Option<std::sync::Arc<granary_store::KnownSegments>>,
) -> Result<granary_store::Entry, String> {
    if repo
        .store
        .versions(name)
        .is_ok_and(|vs| vs.contains(&version))
    {
        return Err(format!(
            "already exists: {name} version {version} (a version is never replaced)"
        ));
    }
    let opts = PutOptions {
        version: Some(version),
        chunking: Some(chunking),
        index: true,
        expect_hashes: Some(expect_hashes),
        staged: true,
        take_source,
        known_segments: known.filter(|_| take_source),
        ..Default::default()
    };
    let (e, _) = repo
        .store
        .put_file(name, path, &opts, |_| {})
        .map_err(|e| e.to_string())?;
    if let Err(x) = crate::manifest::adopt(&repo.store, &e, root) {
        repo.store.discard(&e);
        return Err(format!("manifest: {x}"));
    }
    repo.store
        .commit(vec![e], true)
        .pop()
        .unwrap_or_else(|| Err(granary_store::Error::Corrupt("nothing committed".into())))
        .map_err(|e| match e {
            granary_store::Error::Exists(what) => {
                format!("already exists: {what} (a version is never replaced)")
            }
            e => e.to_string(),
        })
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
