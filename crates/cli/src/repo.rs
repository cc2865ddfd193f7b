//! `granary put|get|ls|stat|mv|rm`: the repository from the command line.
//!
//! put/ls/stat/mv/rm work on `<data-dir>/repo` directly: the daemon serves
//! from the files, so what is published here is served at once (the rename
//! that publishes is atomic). get goes through the node.

use std::path::Path;
use std::time::Instant;

use bytes::Bytes;
use granary_app::{Client, Reply};
use granary_packet::{Component, InterestFields, Name};
use granary_store::Store;

fn name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{e}"))
}

pub(crate) fn store(data_dir: &Path) -> anyhow::Result<Store> {
    Ok(Store::open(data_dir.join("repo"))?)
}

/// `granary put`. A file is streamed in by the daemon when one is running
/// (`/localhost/granary/repo/put`, with a progress bar fed by
/// `…/progress/<id>`); standard input, or no daemon, is ingested here into
/// the same data directory (the daemon serves from the files either way).
#[allow(clippy::too_many_arguments)]
pub fn put(
    data_dir: &Path,
    socket: &Path,
    file: &Path,
    uri: &str,
    version: Option<u64>,
    policy: &str,
    key: Option<&str>,
    keep: Option<u64>,
    segment_size: Option<u32>,
    chunking: Option<granary_store::Chunking>,
    index: bool,
    file_sha256: bool,
    json: bool,
) -> anyhow::Result<()> {
    let n = name(uri)?;
    granary_store::path::check(&n)?;
    let key = key.map(name).transpose()?;
    let stdin = file.as_os_str() == "-";
    let total = if stdin {
        None
    } else {
        Some(
            std::fs::metadata(file)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?
                .len(),
        )
    };
    let bar = match total {
        Some(t) => indicatif::ProgressBar::new(t),
        None => indicatif::ProgressBar::new_spinner(),
    };
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bytes}/{total_bytes} {bytes_per_sec} {wide_bar} {eta}",
    ) {
        bar.set_style(style);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let by_daemon = if stdin {
        None
    } else {
        rt.block_on(Client::connect(socket)).ok()
    };
    let result = match by_daemon {
        Some(client) => {
            let path = std::fs::canonicalize(file)?;
            rt.block_on(put_via_daemon(
                client,
                socket,
                &path,
                &n,
                version,
                policy,
                key.as_ref(),
                keep,
                segment_size,
                chunking,
                index,
                file_sha256,
                &bar,
            ))?
        }
        None => {
            let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
            let id = crate::key::publisher_identity(data_dir)?;
            let (signer, created) =
                granary_repo::publish::publisher_signer_as(&kc, key.as_ref(), policy, &id)
                    .map_err(|e| anyhow::anyhow!(e))?;
            if let Some(k) = created {
                eprintln!("created default publisher key {k}");
            }
            let repo = with_catalog(granary_repo::Repo::new(store(data_dir)?, None), data_dir);
            let how = granary_repo::publish::Publish {
                version,
                signer: &signer,
                policy,
                keep,
                segment_size,
                chunking,
                index,
                file_sha256,
                tags: Vec::new(),
                expect_hashes: None,
            };
            if stdin {
                let reader = std::io::stdin().lock();
                granary_repo::publish::publish(&repo, &n, reader, &how, |b| bar.set_position(b))
            } else {
                granary_repo::publish::publish_file(&repo, &n, file, &how, |b| bar.set_position(b))
            }
            .map_err(|e| anyhow::anyhow!(e))?
        }
    };
    bar.finish_and_clear();
    if result["ok"] != true {
        anyhow::bail!(
            "{}",
            result["error"].as_str().unwrap_or("publishing failed")
        );
    }
    if json {
        println!("{result}");
    } else {
        println!("{}", result["versioned"].as_str().unwrap_or_default());
    }
    let size = result["size"].as_f64().unwrap_or(0.0);
    let secs = result["seconds"].as_f64().unwrap_or(0.0).max(1e-9);
    eprintln!(
        "published {} bytes in {} segments ({}, {:.1} MB/s{}){}",
        size,
        result["segments"],
        result["chunking"].as_str().unwrap_or("?"),
        size / secs / 1e6,
        match (by_daemon_used(&result), result["reflinked"] == true) {
            (true, true) => ", reflinked by the daemon: no data copied",
            (true, false) => ", streamed in by the daemon",
            (false, true) => ", reflinked: no data copied",
            (false, false) => "",
        },
        match result["sha256"].as_str() {
            Some(h) => format!(", sha256 {h}"),
            None => String::new(),
        }
    );
    if let Some(theirs) = result["data_dir"].as_str() {
        let same = std::fs::canonicalize(theirs).ok() == std::fs::canonicalize(data_dir).ok();
        if !same {
            eprintln!(
                "note: the daemon at {} uses the data directory {theirs}, not {}: the file was published there{}",
                socket.display(),
                data_dir.display(),
                match result["key"].as_str() {
                    Some(k) => format!(", signed with its key {k}"),
                    None => String::new(),
                }
            );
        }
    }
    catalog_note(&result);
    if let Some(r) = result["removed_versions"].as_u64().filter(|r| *r > 0) {
        eprintln!("removed {r} older version(s) (--keep)");
        tell_daemon(socket, Some(&n));
    }
    Ok(())
}

/// Says on standard error what the catalog made of a publish, unless it is
/// catalogued: queued (kept on the node until the catalog is back) or failed.
pub(crate) fn catalog_note(result: &serde_json::Value) {
    let why = result["catalog_note"].as_str().unwrap_or_default();
    match result["catalog"].as_str() {
        Some("queued") => eprintln!(
            "catalog: queued ({why}); kept on the node and catalogued when the catalog is back"
        ),
        Some("failed") => eprintln!(
            "catalog: not catalogued ({why}); `granary catalog check --repair` repairs it"
        ),
        _ => {}
    }
}

fn by_daemon_used(v: &serde_json::Value) -> bool {
    v["daemon"] == true
}

#[allow(clippy::too_many_arguments)]
async fn put_via_daemon(
    mut c: Client,
    socket: &Path,
    path: &Path,
    n: &Name,
    version: Option<u64>,
    policy: &str,
    key: Option<&Name>,
    keep: Option<u64>,
    segment_size: Option<u32>,
    chunking: Option<granary_store::Chunking>,
    index: bool,
    file_sha256: bool,
    bar: &indicatif::ProgressBar,
) -> anyhow::Result<serde_json::Value> {
    let id = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos()
    );
    let params = serde_json::json!({
        "path": path.to_str().ok_or_else(|| anyhow::anyhow!("path is not UTF-8"))?,
        "name": n.to_string(),
        "version": version,
        "sign": policy,
        "key": key.map(|k| k.to_string()),
        "keep": keep,
        "segment_size": segment_size,
        "id": id,
        "chunking": chunking.map(|c| c.to_string()),
        "index": index,
        "sha256": file_sha256,
    });
    let cmd = name(granary_repo::local_commands::PREFIX)?.append(&Component::generic(b"put"));
    let mut f = InterestFields::new(cmd);
    f.app_params = Some(Bytes::from(params.to_string()));
    f.lifetime = Some(24 * 3600 * 1000);
    let progress_name = name(granary_repo::local_commands::PREFIX)?
        .append(&Component::generic(b"progress"))
        .append(&Component::generic(id.as_bytes()));
    let poll = async {
        let Ok(mut p) = Client::connect(socket).await else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            let mut q = InterestFields::new(progress_name.clone());
            q.lifetime = Some(1000);
            if let Ok(Reply::Data(d)) = p.express(q).await {
                if let Some(b) = serde_json::from_slice::<serde_json::Value>(d.content())
                    .ok()
                    .and_then(|v| v["bytes"].as_u64())
                {
                    bar.set_position(b);
                }
            }
        }
    };
    let run = async {
        match c.express(f).await? {
            Reply::Data(d) => {
                let mut v: serde_json::Value = serde_json::from_slice(d.content())?;
                v["daemon"] = serde_json::Value::Bool(true);
                Ok(v)
            }
            Reply::Nack(r) => anyhow::bail!(
                "the daemon's repository did not take the command (Nack {}); is it running without --no-repo?",
                granary_packet::types::nack_reason::name(r)
            ),
        }
    };
    tokio::select! {
        r = run => r,
        _ = poll => anyhow::bail!("progress polling stopped"),
    }
}

/// `granary repo …`.
#[derive(clap::Subcommand)]
pub enum RepoCmd {
    /// Rebuild the hash index (chunk SHA-256 → file, offset, length) from
    /// every stored version's hash and offset files. The index is also
    /// rebuilt automatically when <data-dir>/repo/index/ is missing or
    /// unreadable. Stop the daemon first (it holds the index).
    Reindex,
    /// Show the repository's settings, or change them.
    Config {
        /// Default chunking of new versions: fixed[:SIZE],
        /// fastcdc[:MIN:AVG:MAX] or rabin[:MIN:AVG:MAX].
        #[arg(long, value_name = "SCHEME")]
        chunking: Option<String>,
        /// How segments of manifest-signed versions are signed when served:
        /// `digest` (DigestSha256, the default; every NDN consumer can check
        /// it) or `null` (NullSignature: no per-segment SHA-256, as the
        /// signed manifest covers every segment; for consumers that verify
        /// through the manifest, like `granary get`, or not at all). A
        /// running daemon picks the change up at once.
        #[arg(long, value_name = "SIG", value_parser = granary_store::SEGMENT_SIGNATURES)]
        segment_signature: Option<String>,
    },
    /// Re-hash stored files against the hashes taken when they were
    /// published (`.hashes`) and their signed manifests; record damaged
    /// versions (`granary stat` shows them; the daemon stops serving their
    /// bad segments and RDR discovery prefers an older good version), and
    /// with --repair-from restore bad segments from another node. Exits
    /// non-zero while damage remains.
    Scrub(crate::scrub::ScrubArgs),
}

pub fn repo_cmd(data_dir: &Path, socket: &Path, cmd: RepoCmd) -> anyhow::Result<()> {
    if let RepoCmd::Scrub(a) = &cmd {
        return crate::scrub::scrub(data_dir, socket, a);
    }
    let s = store(data_dir)?;
    match cmd {
        RepoCmd::Scrub(_) => {}
        RepoCmd::Reindex => {
            let t = Instant::now();
            let r = s.reindex()?;
            println!(
                "indexed {} segments of {} versions in {:.2} s",
                r.segments,
                r.versions,
                t.elapsed().as_secs_f64()
            );
        }
        RepoCmd::Config {
            chunking,
            segment_signature,
        } => {
            let mut c = s.config()?;
            if let Some(ch) = chunking {
                let parsed: granary_store::Chunking =
                    ch.parse().map_err(|e: String| anyhow::anyhow!(e))?;
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
            println!("chunking = {}", s.default_chunking()?);
            println!(
                "segment_signature = {}",
                if s.null_segments()? { "null" } else { "digest" }
            );
        }
    }
    Ok(())
}

pub fn ls(data_dir: &Path, prefix: Option<&str>) -> anyhow::Result<()> {
    let p = match prefix {
        Some(p) => name(p)?,
        None => Name::new(),
    };
    for m in store(data_dir)?.list(&p)? {
        println!("{}/v={} {} bytes", m.name, m.version, m.size);
    }
    Ok(())
}

pub fn stat(data_dir: &Path, uri: &str) -> anyhow::Result<()> {
    let s = store(data_dir)?;
    let e = s.get(&name(uri)?, None)?;
    println!("{}", serde_json::to_string_pretty(&e.meta)?);
    println!("path {}", e.path.display());
    // Damage (serve-time check or scrub): this version and any other.
    let n = e.meta.name()?;
    for v in s.versions(&n)?.into_iter().rev() {
        let Ok(ev) = s.get(&n, Some(v)) else { continue };
        if let Some(d) = s.damage(&ev) {
            println!(
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
                println!(
                    "  segment {} bytes {}..{}: SHA-256 {} (at ingest {})",
                    b.segment,
                    b.offset,
                    b.offset + b.len,
                    b.found,
                    b.expected
                );
            }
        }
    }
    Ok(())
}

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
        if let Err(e) = ix
            .catalog
            .rename(&old_name.to_string(), &new_name.to_string())
        {
            eprintln!("catalog not updated ({e}); `granary catalog check --repair` repairs it");
        }
    }
    // The old name is gone from this node: a copy of it that a `get`
    // fetched before the rename must not be kept back under it.
    tell_daemon_removed(socket, &old_name, None);
    tell_daemon(socket, Some(&old_name));
    Ok(())
}

/// `repo`, reporting what it publishes to the data directory's catalog
/// (created if missing; `--catalog` may name another).
pub(crate) fn with_catalog(repo: granary_repo::Repo, data_dir: &Path) -> granary_repo::Repo {
    let s = crate::science::settings(
        data_dir,
        crate::science::catalog_spec(),
        &Default::default(),
    );
    match granary_search::Indexer::open(data_dir, &s) {
        Ok(ix) => {
            // Changes queued while the catalog was unavailable go first.
            if !ix.queue.is_empty() {
                ix.drain(&repo.store);
            }
            repo.with_observer(std::sync::Arc::new(ix))
        }
        Err(e) => {
            eprintln!("not catalogued ({e}); `granary catalog check --repair` repairs it");
            repo
        }
    }
}

/// The data directory's catalog, when one exists (or `--catalog` names one):
/// changes made beside the repository (`mv`, `rm`) are reported to it.
fn catalog_of(data_dir: &Path, catalog: Option<&str>) -> Option<granary_search::Indexer> {
    if catalog.is_none() && !granary_search::default_catalog_dir(data_dir).exists() {
        return None;
    }
    let s = crate::science::settings(data_dir, catalog, &Default::default());
    match granary_search::Indexer::open(data_dir, &s) {
        Ok(ix) => Some(ix),
        Err(e) => {
            eprintln!("catalog not updated ({e}); `granary catalog rebuild` repairs it");
            None
        }
    }
}

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

/// Best effort: tells a running daemon that `version` of `nm` (every version
/// when `None`) was removed, so a copy of it that the daemon is still keeping
/// in the background (after a `granary get`) does not land after the removal.
/// Returns how many such copies were still in flight.
fn tell_daemon_removed(socket: &Path, nm: &Name, version: Option<u64>) -> u64 {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return 0;
    };
    rt.block_on(async {
        let (Ok(mut c), Ok(cmd)) = (
            Client::connect(socket).await,
            name(granary_repo::local_commands::PREFIX),
        ) else {
            return 0;
        };
        let mut f = InterestFields::new(cmd.append(&Component::generic(b"removed")));
        let params = serde_json::json!({ "name": nm.to_string(), "version": version });
        f.app_params = Some(Bytes::from(params.to_string()));
        f.lifetime = Some(10_000);
        match c.express(f).await {
            Ok(Reply::Data(d)) => serde_json::from_slice::<serde_json::Value>(d.content())
                .ok()
                .and_then(|v| v["in_flight"].as_u64())
                .unwrap_or(0),
            _ => 0,
        }
    })
}

/// Best effort: ask a running node to forget its repository's cached
/// lookups and drop cached packets under `prefix` (NFD's cs/erase), so a
/// removed or renamed file is not served from cache.
/// Tells a running daemon (if any) to forget its cached lookups and read
/// the repository's settings again; with `erase`, also to drop the packets
/// its content store holds under that prefix.
pub(crate) fn tell_daemon(socket: &Path, erase: Option<&Name>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async {
        if let Ok(mut c) = Client::connect(socket).await {
            // The repository's lookups first (it must not build packets
            // from the old files), then the packets already built.
            if let Ok(forget) = name(granary_repo::local_commands::PREFIX) {
                let mut f = InterestFields::new(forget.append(&Component::generic(b"forget")));
                f.lifetime = Some(2000);
                let _ = c.express(f).await;
            }
            let Some(prefix) = erase else { return };
            let mut p = granary_mgmt::ControlParameters::new();
            p.name = Some(prefix.clone());
            let nfd = Name::from_uri(granary_mgmt::LOCALHOST_NFD).unwrap_or_default();
            if let Ok(r) = c.command(&nfd, "cs", "erase", &p).await {
                if let Some(k) = r.count.filter(|k| *k > 0) {
                    eprintln!("evicted {k} cached packet(s) under {prefix}");
                }
            }
        }
    });
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
    let bar = indicatif::ProgressBar::hidden();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let path = std::fs::canonicalize(file)?;
    let result = match rt.block_on(Client::connect(socket)).ok() {
        Some(client) => rt.block_on(put_via_daemon(
            client, socket, &path, n, version, "manifest", None, None, None, chunking, true, false,
            &bar,
        ))?,
        None => {
            let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
            let id = crate::key::publisher_identity(data_dir)?;
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
