//! The data directory's repository as the commands change it: opening its
//! store, publishing a file without output, renaming and removing, each
//! also reported to the catalog and to a running daemon.

use std::path::Path;
use std::time::Instant;

use granary_app::Client;
use granary_packet::Name;
use granary_store::Store;

use crate::catalog::{catalog_of, with_catalog};
use crate::control::{put_via_daemon, tell_daemon, tell_daemon_removed};
use crate::identity::publisher_identity;

fn name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The store of `<data-dir>/repo`.
pub fn store(data_dir: &Path) -> anyhow::Result<Store> {
    Ok(Store::open(data_dir.join("repo"))?)
}

/// `granary mv`: renames every version of `old` to `new`, completing any
/// rename a killed `mv` left half done first.
pub fn mv(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    old: &str,
    new: &str,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let s = store(data_dir)?;
    let new_name = name(new)?;
    let old_name = name(old)?;
    // The manifest root carries the name: each version's is signed again
    // (one signature per version; segments and manifest blocks are
    // untouched). Recorded first, so that a killed `mv` is completed by
    // the next one or by the daemon's start.
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    if let Err(e) = granary_repo::keeps::record_removal(&s, &old_name, None) {
        eprintln!("warning: the rename could not be recorded ({e}): a copy being kept may come back under {old_name}");
    }
    for (o, n) in granary_repo::rename::recover(&s, &kc) {
        eprintln!("completed an interrupted rename of {o} to {n}");
        tell_daemon_removed(socket, &o, None);
        tell_daemon(socket, Some(&o));
    }
    granary_repo::rename::rename(&s, &kc, &old_name, &new_name).map_err(|x| anyhow::anyhow!(x))?;
    eprintln!("renamed in {:.2} ms", t.elapsed().as_secs_f64() * 1e3);
    if let Some(ix) = catalog_of(data_dir, catalog) {
        // This node's locations only: other nodes keep the old name.
        let (o, n) = (old_name.to_string(), new_name.to_string());
        let r = match ix.node() {
            Some(node) => ix.catalog.rename_for(node, &o, &n),
            None => ix.catalog.rename(&o, &n),
        };
        if let Err(e) = r {
            eprintln!("catalog not updated ({e}); `granary catalog check --repair` repairs it");
        }
    }
    // The old name is gone from this node: a copy of it that a `get`
    // fetched before the rename must not be kept back under it.
    tell_daemon_removed(socket, &old_name, None);
    tell_daemon(socket, Some(&old_name));
    Ok(())
}

/// `granary rm`: removes `uri` (every version, or `version`).
pub fn rm(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    uri: &str,
    version: Option<u64>,
) -> anyhow::Result<()> {
    let nm = name(uri)?;
    let st = store(data_dir)?;
    // Recorded first: a copy of it that a `get` asks the daemon to keep
    // later is refused, even by a daemon that restarts meanwhile.
    if let Err(e) = granary_repo::keeps::record_removal(&st, &nm, version) {
        eprintln!(
            "warning: the removal could not be recorded ({e}): a copy being kept may come back"
        );
    }
    let removed = st.remove(&nm, version);
    // A copy that `granary get` asked the daemon to keep may still be on its
    // way into the store: the daemon drops it, whether the name had versions
    // yet or not.
    let in_flight = tell_daemon_removed(socket, &nm, version);
    let n = match removed {
        Ok(n) => n,
        Err(granary_store::Error::NotFound(_)) if in_flight > 0 => 0,
        Err(e @ granary_store::Error::NotFound(_)) => {
            // Not in the repository; packets of it that the node cached
            // (fetched through it) still go.
            tell_daemon(socket, Some(&nm));
            return Err(e.into());
        }
        Err(e) => return Err(e.into()),
    };
    match in_flight {
        0 => eprintln!("removed {n} version(s)"),
        k => eprintln!(
            "removed {n} version(s); the daemon drops the {k} copy(ies) of {nm} it was still keeping"
        ),
    }
    if let Some(ix) = catalog_of(data_dir, catalog) {
        let op = granary_search::queue::Op::Remove {
            name: nm.to_string(),
            version,
            node: ix.node().map(str::to_string),
        };
        match ix.apply_or_queue(op, None) {
            granary_repo::Noted::Done => {}
            granary_repo::Noted::Queued(why) => {
                eprintln!("catalog: removal queued ({why}); recorded when the catalog is back")
            }
            granary_repo::Noted::Failed(why) => eprintln!(
                "catalog not updated ({why}); `granary catalog check --repair` repairs it"
            ),
        }
    }
    tell_daemon(socket, Some(&nm));
    Ok(())
}

/// Publishes `file` as `n` (a new version unless `version`), as `put` does
/// (through the daemon when one runs, else here, with the catalog), with
/// no output. Returns the put's JSON result.
pub fn publish_quiet(
    data_dir: &Path,
    socket: &Path,
    file: &Path,
    n: &Name,
    version: Option<u64>,
    chunking: Option<granary_store::Chunking>,
) -> anyhow::Result<serde_json::Value> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let path = std::fs::canonicalize(file)?;
    let result = match rt.block_on(Client::connect(socket)).ok() {
        Some(client) => rt.block_on(put_via_daemon(
            client,
            socket,
            &path,
            n,
            version,
            "manifest",
            None,
            None,
            None,
            chunking,
            true,
            false,
            &|_| {},
        ))?,
        None => {
            let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
            let id = publisher_identity(data_dir)?;
            let (signer, _) =
                granary_repo::publish::publisher_signer_as(&kc, None, "manifest", &id)
                    .map_err(|e| anyhow::anyhow!(e))?;
            let repo = with_catalog(granary_repo::Repo::new(store(data_dir)?, None), data_dir);
            let how = granary_repo::publish::Publish {
                version,
                signer: &signer,
                policy: "manifest",
                keep: None,
                segment_size: None,
                chunking,
                index: true,
                file_sha256: false,
                tags: Vec::new(),
                expect_hashes: None,
            };
            granary_repo::publish::publish_file(&repo, n, &path, &how, |_| {})
                .map_err(|e| anyhow::anyhow!(e))?
        }
    };
    if result["ok"] != true {
        anyhow::bail!(
            "{}",
            result["error"].as_str().unwrap_or("publishing failed")
        );
    }
    Ok(result)
}

pub use granary_store::integrity::Damage;
pub use granary_store::{Chunking, Entry, FileMeta, DEFAULT_SEGMENT_SIZE, SEGMENT_SIGNATURES};

/// Refuses a name the repository cannot store (see `granary_store::path`).
pub fn check_name(n: &Name) -> anyhow::Result<()> {
    Ok(granary_store::path::check(n)?)
}

/// How `put` publishes in its own process ([`put_here`]).
pub struct PutHere<'a> {
    /// The version (default: now).
    pub version: Option<u64>,
    /// Signing policy (`manifest`, `digest`, …).
    pub policy: &'a str,
    /// The key (default: the publisher key).
    pub key: Option<&'a Name>,
    /// Versions to keep.
    pub keep: Option<u64>,
    /// Fixed segment size.
    pub segment_size: Option<u32>,
    /// Chunking (default: the repository's).
    pub chunking: Option<Chunking>,
    /// Keep the chunk hash index.
    pub index: bool,
    /// Record the whole file's SHA-256.
    pub file_sha256: bool,
}

/// `granary put` without a daemon (or from standard input, `file` `-`):
/// ingests into the data directory's repository here, reported to its
/// catalog. Returns the publish result and the publisher key when it was
/// made for this.
pub fn put_here(
    data_dir: &Path,
    file: &Path,
    n: &Name,
    p: &PutHere<'_>,
    progress: impl FnMut(u64),
) -> anyhow::Result<(serde_json::Value, Option<String>)> {
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    let id = publisher_identity(data_dir)?;
    let (signer, created) = granary_repo::publish::publisher_signer_as(&kc, p.key, p.policy, &id)
        .map_err(|e| anyhow::anyhow!(e))?;
    let repo = with_catalog(granary_repo::Repo::new(store(data_dir)?, None), data_dir);
    let how = granary_repo::publish::Publish {
        version: p.version,
        signer: &signer,
        policy: p.policy,
        keep: p.keep,
        segment_size: p.segment_size,
        chunking: p.chunking,
        index: p.index,
        file_sha256: p.file_sha256,
        tags: Vec::new(),
        expect_hashes: None,
    };
    let v = if file.as_os_str() == "-" {
        let reader = std::io::stdin().lock();
        granary_repo::publish::publish(&repo, n, reader, &how, progress)
    } else {
        granary_repo::publish::publish_file(&repo, n, file, &how, progress)
    }
    .map_err(|e| anyhow::anyhow!(e))?;
    Ok((v, created.map(|k| k.to_string())))
}

/// `granary repo reindex`: (segments, versions) indexed.
pub fn reindex(data_dir: &Path) -> anyhow::Result<(u64, u64)> {
    let r = store(data_dir)?.reindex()?;
    Ok((r.segments, r.versions))
}

/// `granary repo config`: sets the default chunking and the segment
/// signature (a running daemon is told), then returns both as they are.
pub fn config(
    data_dir: &Path,
    socket: &Path,
    chunking: Option<String>,
    segment_signature: Option<String>,
) -> anyhow::Result<(Chunking, bool)> {
    let s = store(data_dir)?;
    let mut c = s.config()?;
    if let Some(ch) = chunking {
        let parsed: Chunking = ch.parse().map_err(|e: String| anyhow::anyhow!(e))?;
        c.chunking = Some(parsed.to_string());
        s.set_config(&c)?;
    }
    if let Some(sig) = segment_signature {
        c.segment_signature = Some(sig);
        s.set_config(&c)?;
        // A running daemon reads its settings again (the segments
        // concerned are never cached: NoCache).
        tell_daemon(socket, None);
    }
    Ok((s.default_chunking()?, s.null_segments()?))
}

/// `granary ls`: the versions stored under `prefix`.
pub fn list(data_dir: &Path, prefix: &Name) -> anyhow::Result<Vec<FileMeta>> {
    Ok(store(data_dir)?.list(prefix)?)
}

/// The signed manifest root a stored version serves, as `stat --json` shows
/// it: the root's name, its signature type and the signer (the KeyLocator's
/// key name; a replica's is the publisher's). `None` when the version has no
/// manifest root.
pub fn manifest_signature(data_dir: &Path, e: &Entry) -> anyhow::Result<Option<serde_json::Value>> {
    let s = store(data_dir)?;
    let Some(wire) = s.read_extra(e, "manifest") else {
        return Ok(None);
    };
    let d = granary_packet::Data::decode(bytes::Bytes::from(wire)).map_err(|x| {
        anyhow::anyhow!(
            "{}: the manifest root is not a Data packet: {x}",
            e.meta.name
        )
    })?;
    let si = d.sig_info();
    let signer = match &si.key_locator {
        Some(granary_packet::signature::KeyLocator::Name(n)) => Some(n.to_string()),
        Some(granary_packet::signature::KeyLocator::Digest(b)) => {
            Some(format!("digest:{}", hex::encode(b)))
        }
        None => None,
    };
    Ok(Some(serde_json::json!({
        "name": d.name().to_string(),
        "digest": hex::encode(d.implicit_digest()),
        "signature_type": granary_packet::types::sig_type::name(si.sig_type),
        "signature_type_code": si.sig_type,
        "signer": signer,
    })))
}

/// `granary stat`: the latest version of `n`, and the damage recorded for
/// each of its versions (newest first).
pub fn stat(data_dir: &Path, n: &Name) -> anyhow::Result<(Entry, Vec<(u64, Damage)>)> {
    let s = store(data_dir)?;
    let e = s.get(n, None)?;
    let n = e.meta.name()?;
    let mut damaged = Vec::new();
    for v in s.versions(&n)?.into_iter().rev() {
        let Ok(ev) = s.get(&n, Some(v)) else { continue };
        if let Some(d) = s.damage(&ev) {
            damaged.push((v, d));
        }
    }
    Ok((e, damaged))
}

/// `granary put`: a file is streamed in by the daemon at `socket` when one
/// runs (`/localhost/granary/repo/put`, `progress` fed by
/// `…/progress/<id>`); standard input (`file` `-`), or no daemon, is
/// ingested here ([`put_here`]) into the same data directory (the daemon
/// serves from the files either way). Returns the publish result and the
/// publisher key when it was made for this.
pub fn put(
    data_dir: &Path,
    socket: &Path,
    file: &Path,
    n: &Name,
    p: &PutHere<'_>,
    progress: &dyn Fn(u64),
) -> anyhow::Result<(serde_json::Value, Option<String>)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let by_daemon = if file.as_os_str() == "-" {
        None
    } else {
        rt.block_on(Client::connect(socket)).ok()
    };
    let Some(client) = by_daemon else {
        return put_here(data_dir, file, n, p, progress);
    };
    let path = std::fs::canonicalize(file)?;
    let v = rt.block_on(put_via_daemon(
        client,
        socket,
        &path,
        n,
        p.version,
        p.policy,
        p.key,
        p.keep,
        p.segment_size,
        p.chunking,
        p.index,
        p.file_sha256,
        progress,
    ))?;
    Ok((v, None))
}

/// What `put` says of a publish result: bytes, segments, chunking, rate,
/// how the data went in, the file's SHA-256.
pub fn put_summary(result: &serde_json::Value) -> String {
    let size = result["size"].as_f64().unwrap_or(0.0);
    let secs = result["seconds"].as_f64().unwrap_or(0.0).max(1e-9);
    format!(
        "published {} bytes in {} segments ({}, {:.1} MB/s{}){}",
        size,
        result["segments"],
        result["chunking"].as_str().unwrap_or("?"),
        size / secs / 1e6,
        match (
            crate::control::by_daemon_used(result),
            result["reflinked"] == true
        ) {
            (true, true) => ", reflinked by the daemon: no data copied",
            (true, false) => ", streamed in by the daemon",
            (false, true) => ", reflinked: no data copied",
            (false, false) => "",
        },
        match result["sha256"].as_str() {
            Some(h) => format!(", sha256 {h}"),
            None => String::new(),
        }
    )
}

/// A note when the daemon that published `result` keeps another data
/// directory than `data_dir` (the file, and its key, are there).
pub fn other_data_dir(
    result: &serde_json::Value,
    socket: &Path,
    data_dir: &Path,
) -> Option<String> {
    let theirs = result["data_dir"].as_str()?;
    if std::fs::canonicalize(theirs).ok() == std::fs::canonicalize(data_dir).ok() {
        return None;
    }
    Some(format!(
        "note: the daemon at {} uses the data directory {theirs}, not {}: the file was published there{}",
        socket.display(),
        data_dir.display(),
        match result["key"].as_str() {
            Some(k) => format!(", signed with its key {k}"),
            None => String::new(),
        }
    ))
}

/// What the catalog made of a publish, unless it is catalogued: queued
/// (kept on the node until the catalog is back) or failed.
pub fn catalog_note(result: &serde_json::Value) -> Option<String> {
    let why = result["catalog_note"].as_str().unwrap_or_default();
    match result["catalog"].as_str() {
        Some("queued") => Some(format!(
            "catalog: queued ({why}); kept on the node and catalogued when the catalog is back"
        )),
        Some("failed") => Some(format!(
            "catalog: not catalogued ({why}); `granary catalog check --repair` repairs it"
        )),
        _ => None,
    }
}

/// What `granary stat` prints for `n`: its metadata, path and damage (the
/// damage of every version), or with `json` one object with the signed
/// manifest root it serves as well.
pub fn stat_text(data_dir: &Path, n: &Name, json: bool) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let (e, damaged) = stat(data_dir, n)?;
    let mut out = String::new();
    if json {
        let manifest = manifest_signature(data_dir, &e)?;
        let damaged: Vec<serde_json::Value> = damaged
            .iter()
            .map(|(v, d)| {
                serde_json::json!({
                    "version": v,
                    "segments": d.segments.len(),
                    "problems": d.problems,
                    "by": d.by,
                })
            })
            .collect();
        let v = serde_json::json!({
            "meta": e.meta,
            "path": e.path,
            "manifest": manifest,
            "damaged": damaged,
        });
        return Ok(format!("{v}\n"));
    }
    let _ = writeln!(out, "{}", serde_json::to_string_pretty(&e.meta)?);
    let _ = writeln!(out, "path {}", e.path.display());
    // Damage (serve-time check or scrub): this version and any other.
    for (v, d) in damaged {
        let _ = writeln!(
 out,
            "DAMAGED v={v}: {} bad segment(s){} (detected by {}); `granary repo scrub {} --repair-from NODE` restores it",
            d.segments.len(),
            if d.problems.is_empty() {
                String::new()
            } else {
                format!(", {}", d.problems.join("; "))
            },
            d.by,
            e.meta.name
        );
        for b in &d.segments {
            let _ = writeln!(
                out,
                "  segment {} bytes {}..{}: SHA-256 {} (at ingest {})",
                b.segment,
                b.offset,
                b.offset + b.len,
                b.found,
                b.expected
            );
        }
    }
    Ok(out)
}
