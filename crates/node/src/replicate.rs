//! Replication that keeps the publisher's signature (`granary replicate`).
//!
//! The target node answers signed command Interests under
//! `<node prefix>/granary/replicate` (an in-process face of the daemon):
//!
//! - `<node>/granary/replicate/<ParametersSha256Digest>`, a signed Interest
//!   v0.3 whose ApplicationParameters are JSON `{"name", "version"?,
//!   "fwhint"?: [..]}`. It must be signed by a key whose certificate is one
//!   of the node's trust anchors (`<data-dir>/keychain/trust`, the same
//!   anchors that admit `/localhop/nfd` commands) or of its own keys, verify,
//!   and pass the replay check (SignatureTime within 60 s, nonce not seen).
//!   Otherwise the answer is `{"ok": false, "error": …}` and nothing is done.
//!   Accepted: `{"ok": true, "id": …}` at once, and the replication runs.
//! - `<node>/granary/replicate/status/<id>`: the job's state as JSON
//!   (`running`, `done` with its report, `failed` with the reason).
//!
//! A replication fetches the version through the node's own forwarder with
//! the transfer engine's verified, dedup-aware fetch (chunks the node holds
//! come from its own store; the rest by name, hinted to `fwhint`), stores it
//! with the publisher's manifest root exactly as received
//! ([`granary_repo::publish::publish_replica`]), serves it under the same
//! versioned name, and registers the location ([`register_location`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use granary_face::internal::AppFace;
use granary_face::{LinkFields, NetPacket};
use granary_packet::types::nack_reason;
use granary_packet::{Component, Data, DataBuilder, Interest, InterestFields, Name};
use granary_repo::{Noted, Repo};
use granary_transfer::{
    dedup_possible, discover_signed, fetch_dedup, fetch_objects, Config, Dedup, Engine,
    OpenOptions, Output, Sources, Trust, UnixLink,
};
use serde_json::{json, Value};

/// The command prefix of the node `node`: `<node>/granary/replicate`.
pub fn command_prefix(node: &Name) -> Name {
    node.append(&Component::generic(b"granary"))
        .append(&Component::generic(b"replicate"))
}

/// How long a finished job's outcome is kept for `status`.
const KEEP_DONE: Duration = Duration::from_secs(600);
/// Replications running at once on a node; more are refused (busy).
const MAX_RUNNING: usize = 4;
/// Largest ApplicationParameters of a command.
const MAX_PARAMS: usize = 8192;

/// What a replication is asked to do.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Request {
    /// The name (without version: the newest is discovered).
    pub name: String,
    /// The version (`None`: the newest).
    #[serde(default)]
    pub version: Option<u64>,
    /// Forwarding hints for the by-name fetch (node prefixes that hold it).
    #[serde(default)]
    pub fwhint: Vec<String>,
}

struct Job {
    state: Value,
    finished: Option<Instant>,
}

/// The replication service of a daemon.
pub struct Service {
    prefix: Name,
    repo: Arc<Repo>,
    data_dir: PathBuf,
    socket: PathBuf,
    jobs: Mutex<HashMap<String, Job>>,
    replay: Mutex<granary_security::ReplayChecker>,
    next_id: std::sync::atomic::AtomicU64,
}

fn reply(name: &Name, v: &Value) -> Data {
    granary_packet::digest::sign_data(
        DataBuilder::new(name.clone())
            .content(Bytes::from(v.to_string()))
            .freshness_period(0),
    )
}

/// Checks a replicate command: a signed Interest v0.3 by a key whose
/// certificate is a trust anchor of `kc` or one of its own, valid now,
/// verifying, and not a replay. Returns the signing key's name.
pub fn authorize(
    kc: &granary_security::KeyChain,
    replay: &mut granary_security::ReplayChecker,
    i: &Interest,
) -> Result<Name, String> {
    let (Some(si), Some(_)) = (&i.sig_info, &i.sig_value) else {
        return Err("unsigned: a replicate command must be a signed Interest".into());
    };
    let locator = match &si.key_locator {
        Some(granary_packet::KeyLocator::Name(n)) => n.clone(),
        _ => return Err("the signature names no key (no KeyLocator name)".into()),
    };
    let certs: Vec<granary_security::Certificate> = kc
        .trust_anchors()
        .unwrap_or_default()
        .into_iter()
        .chain(
            kc.list()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|k| k.cert),
        )
        .collect();
    let anchor = certs
        .iter()
        .find(|c| c.key_name().is_prefix_of(&locator) || locator.is_prefix_of(&c.key_name()))
        .ok_or_else(|| format!("{locator} is not a trusted key on this node"))?;
    let now_secs = (granary_security::now_ms() / 1000) as i64;
    if !anchor.is_valid_at(now_secs) {
        return Err(format!("certificate {} is not valid now", anchor.name()));
    }
    let v = anchor.verifier().map_err(|e| e.to_string())?;
    v.verify_interest(i)
        .map_err(|e| format!("the signature does not verify with {}: {e}", anchor.name()))?;
    replay
        .check(i, granary_security::now_ms())
        .map_err(|e| e.to_string())?;
    Ok(locator)
}

impl Service {
    /// The service of the node `node`, storing into `repo`; its fetches go
    /// through the daemon's own socket `socket`.
    pub fn new(node: &Name, repo: Arc<Repo>, data_dir: &Path, socket: &Path) -> Arc<Service> {
        let gone = clean_leftovers(&data_dir.join("replicating"), Duration::from_secs(3600));
        if gone > 0 {
            tracing::info!(
                "removed {gone} files of replications that did not finish (the daemon stopped)"
            );
        }
        Arc::new(Service {
            prefix: command_prefix(node),
            repo,
            data_dir: data_dir.to_path_buf(),
            socket: socket.to_path_buf(),
            jobs: Mutex::default(),
            replay: Mutex::new(granary_security::ReplayChecker::default()),
            next_id: std::sync::atomic::AtomicU64::new(1),
        })
    }

    /// Registers the command prefix through `face`.
    pub async fn register(&self, face: &AppFace) {
        let p = crate::control::static_route(
            self.prefix.clone(),
            granary_mgmt::values::route_flags::CHILD_INHERIT,
            0,
        );
        let cmd =
            granary_mgmt::make_command(&crate::control::nfd(), "rib", "register", &p).encode();
        face.send(NetPacket::Interest(cmd), LinkFields::default())
            .await;
    }

    /// Serves commands until the face closes.
    pub async fn run(self: Arc<Self>, mut face: AppFace) {
        while let Some((pkt, link)) = face.recv().await {
            let NetPacket::Interest(i) = pkt else {
                continue;
            };
            let out = LinkFields {
                pit_token: link.pit_token.clone(),
                ..Default::default()
            };
            let p = self.on_interest(&i);
            face.send(p, out).await;
        }
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Job>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn on_interest(self: &Arc<Self>, i: &Interest) -> NetPacket {
        let n = &i.name;
        if !self.prefix.is_prefix_of(n) {
            return NetPacket::Nack(i.clone(), nack_reason::NO_ROUTE);
        }
        let verb = n.get(self.prefix.len() as isize);
        if verb.is_some_and(|c| c.value == b"status") && n.len() == self.prefix.len() + 2 {
            let id = n
                .get(-1)
                .map(|c| String::from_utf8_lossy(c.value).into_owned())
                .unwrap_or_default();
            let mut jobs = self.jobs();
            jobs.retain(|_, j| j.finished.is_none_or(|t| t.elapsed() < KEEP_DONE));
            let v = jobs
                .get(&id)
                .map(|j| j.state.clone())
                .unwrap_or_else(|| json!({"state": "unknown", "error": format!("no replication {id} on this node")}));
            return NetPacket::Data(reply(n, &v));
        }
        NetPacket::Data(reply(n, &self.command(i)))
    }

    fn command(self: &Arc<Self>, i: &Interest) -> Value {
        let refuse = |why: String| {
            tracing::warn!("refused replicate command {}: {why}", i.name);
            json!({"ok": false, "error": format!("refused: {why}")})
        };
        let Some(params) = i.app_params.as_ref() else {
            return refuse("no parameters".into());
        };
        if params.len() > MAX_PARAMS || !i.params_digest_ok() {
            return refuse("bad parameters (too long, or digest mismatch)".into());
        }
        let kc = match granary_security::KeyChain::open(self.data_dir.join("keychain")) {
            Ok(k) => k,
            Err(e) => return refuse(format!("no keychain to check the signature: {e}")),
        };
        let signer = {
            let mut replay = self.replay.lock().unwrap_or_else(|e| e.into_inner());
            match authorize(&kc, &mut replay, i) {
                Ok(k) => k,
                Err(why) => return refuse(why),
            }
        };
        let req: Request = match serde_json::from_slice(params) {
            Ok(r) => r,
            Err(e) => {
                return refuse(format!(
                    "parameters must be JSON {{\"name\", \"version\"?, \"fwhint\"?}}: {e}"
                ))
            }
        };
        if let Err(e) = Name::from_uri(&req.name) {
            return refuse(format!("name {:?}: {e}", req.name));
        }
        for h in &req.fwhint {
            if Name::from_uri(h).map_or(true, |n| n.is_empty()) {
                return refuse(format!("forwarding hint {h:?} is not a prefix"));
            }
        }
        let id = format!(
            "{:x}-{}",
            granary_security::now_ms(),
            self.next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        {
            let mut jobs = self.jobs();
            let running = jobs.values().filter(|j| j.finished.is_none()).count();
            if running >= MAX_RUNNING {
                return json!({"ok": false, "error": format!("busy: {running} replications running; try again later")});
            }
            jobs.insert(
                id.clone(),
                Job {
                    state: json!({"state": "running", "name": req.name, "version": req.version}),
                    finished: None,
                },
            );
        }
        tracing::info!(
            "replicating {} (version {:?}) as asked by {signer}",
            req.name,
            req.version
        );
        let me = self.clone();
        let id2 = id.clone();
        // The fetch engine's future is not Send: it runs on a blocking
        // thread of the daemon's runtime, driven by `block_on`.
        let rt = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                rt.block_on(replicate_here(
                    &me.repo,
                    &me.data_dir,
                    &me.socket,
                    &req,
                    &id2,
                ))
            }))
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the replication task panicked")));
            let state = match r {
                Ok(mut v) => {
                    tracing::info!("replicated {}", v["versioned"].as_str().unwrap_or("?"));
                    v["state"] = json!("done");
                    v
                }
                Err(e) => {
                    tracing::warn!("replication of {} failed: {e:#}", req.name);
                    json!({"state": "failed", "error": format!("{e:#}")})
                }
            };
            let mut jobs = me.jobs();
            jobs.insert(
                id2,
                Job {
                    state,
                    finished: Some(Instant::now()),
                },
            );
        });
        json!({"ok": true, "id": id})
    }
}

/// Registers that this node holds `e` (a version it published or
/// replicated). Today: the science catalog's record, as a publish does
/// (queued durably while the catalog is unavailable); the location catalog
/// takes this over.
pub fn register_location(repo: &Repo, e: &granary_store::Entry) -> Option<Noted> {
    repo.notify_published(e)
}

/// [`register_location`] on a blocking thread: the catalog's PostgreSQL
/// client is synchronous (it runs a runtime of its own, which must not be
/// started from async code).
async fn register_blocking(repo: &Arc<Repo>, e: granary_store::Entry) -> Option<Noted> {
    let r = repo.clone();
    tokio::task::spawn_blocking(move || register_location(&r, &e))
        .await
        .unwrap_or_else(|x| Some(Noted::Failed(format!("registration task failed: {x}"))))
}

/// Replicates `req` into `repo` (the daemon's), fetching through the
/// daemon's socket. Returns the report (JSON).
pub async fn replicate_here(
    repo: &Arc<Repo>,
    data_dir: &Path,
    socket: &Path,
    req: &Request,
    id: &str,
) -> anyhow::Result<Value> {
    let t = Instant::now();
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    // Never integrity only: a replica keeps a publisher's signature.
    let trust = Arc::new(Trust::from_keychain(&kc)?);
    let mut name = Name::from_uri(&req.name).map_err(|e| anyhow::anyhow!("{}: {e}", req.name))?;
    if let Some(v) = req.version {
        name = name.append(&Component::version(v));
    }
    let hints = req
        .fwhint
        .iter()
        .map(|h| Name::from_uri(h).map_err(|e| anyhow::anyhow!("{h}: {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // The ingest reads the fetched file right back, and compares each
    // segment with the CRC-32 recorded as it was checked instead of
    // cutting and hashing it again.
    let crcs = granary_transfer::SegmentCrcs::default();
    let cfg = Config {
        forwarding_hint: hints,
        keep_output_cached: true,
        segment_crcs: Some(crcs.clone()),
        ..Config::default()
    };
    let mut link = UnixLink::connect(socket).await?;
    let mut engine = Engine::new(cfg);
    let opts = OpenOptions {
        no_discovery: req.version.is_some(),
        no_manifest: false,
    };
    let (info, root) = discover_signed(&mut engine, &mut link, &name, trust, &opts).await?;
    let Some(root) = root.filter(|_| info.has_manifest()) else {
        anyhow::bail!(
            "{} has no signed manifest: only versions with one can be replicated keeping the publisher's signature",
            info.versioned
        );
    };
    if info.integrity_only() || !dedup_possible(&info) {
        anyhow::bail!(
            "{}: its manifest is not signed by a trusted key, or does not give every segment's hash",
            info.versioned
        );
    }
    let version = info
        .versioned
        .last()
        .and_then(|c| c.as_version())
        .ok_or_else(|| anyhow::anyhow!("{}: no version component", info.versioned))?;
    let prefix = info.versioned.prefix(-1);
    let signer = match &root.sig_info().key_locator {
        Some(granary_packet::KeyLocator::Name(n)) => n.to_string(),
        _ => String::new(),
    };
    let mut report = json!({
        "ok": true,
        "versioned": info.versioned.to_string(),
        "version": version,
        "signer": signer,
        "verified_by": info.verified_by,
    });
    // Held already: the same manifest root is the same version; another
    // one under the same versioned name is a conflict, never replaced.
    if let Ok(e) = repo.store.get(&prefix, Some(version)) {
        let mine = repo.store.read_extra(&e, "manifest");
        if mine.as_deref() == Some(&root.wire()[..]) {
            report["already"] = json!(true);
            if let Some(n) = register_blocking(repo, e).await {
                report["catalog"] = json!(n.word());
            }
            report["seconds"] = json!(t.elapsed().as_secs_f64());
            return Ok(report);
        }
        anyhow::bail!(
            "this node holds another copy of {} (its manifest root differs: signed by {}); remove it first",
            info.versioned,
            e.meta.signer.as_deref().unwrap_or("?")
        );
    }
    let dir = data_dir.join("replicating");
    std::fs::create_dir_all(&dir)?;
    let tmp = dir.join(format!("{id}.data"));
    let _cleanup = Cleanup(tmp.clone());
    link.prehash(true);
    let mut sources = Sources::new(
        Some(Name::from_uri(granary_repo::LOCAL_HASH_PREFIX)?),
        crate::fetched::has_neighbours(socket, std::slice::from_ref(&info.versioned))
            .await
            .then(|| Name::from_uri(granary_repo::HASH_PREFIX))
            .transpose()?,
    );
    sources.have = Some(granary_repo::have_query_prefix());
    sources.have_batch = granary_repo::HAVE_BATCH;
    // This daemon's own store: its chunks read from the files, no Interest.
    let (own, own2) = (repo.clone(), repo.clone());
    sources.read_local = Some(granary_transfer::ChunkReader {
        has: Arc::new(move |hs| own.store.has_chunks(hs)),
        read: Arc::new(move |hs, got| own2.store.chunks(hs, got)),
    });
    sources.probe = 64;
    sources.plain_if_nothing = true;
    match fetch_dedup(&mut engine, &mut link, &info, &tmp, &sources).await? {
        Dedup::Done(r, st) => {
            report["dedup"] = serde_json::to_value(&r)?;
            report["stats"] = serde_json::to_value(&st)?;
        }
        Dedup::Plain(_) => {
            let (reports, st) = fetch_objects(
                &mut engine,
                &mut link,
                vec![(info.clone(), Output::for_path(&tmp)?)],
                false,
            )
            .await?;
            if let Some(e) = reports.iter().find_map(|r| r.error.clone()) {
                anyhow::bail!("{}: {e}", info.versioned);
            }
            report["by_name"] = json!({"segments": info.map.count()});
            report["stats"] = serde_json::to_value(&st)?;
        }
    }
    let fetched_at = t.elapsed().as_secs_f64();
    let (chunking, expect, known) = crate::fetched::replica_layout(data_dir, &info, &tmp)?;
    // Every segment's CRC-32, or a full ingest.
    let known = crcs
        .all(info.map.count())
        .map(|c| Arc::new(granary_store::KnownSegments { crcs: c, ..known }));
    report["ingest"] = json!(if known.is_some() {
        "segments as fetched (CRC-32 compared)"
    } else {
        "cut and hashed"
    });
    let (r2, tmp2, root2, prefix2) = (repo.clone(), tmp.clone(), root.clone(), prefix.clone());
    let e = tokio::task::spawn_blocking(move || {
        // The fetched file is this replication's own: moved in, not copied.
        granary_repo::publish::publish_replica(
            &r2, &prefix2, &tmp2, version, chunking, expect, &root2, true, known,
        )
    })
    .await?
    .map_err(anyhow::Error::msg)?;
    let kept_at = t.elapsed().as_secs_f64();
    if let Some(n) = register_blocking(repo, e.clone()).await {
        report["catalog"] = json!(n.word());
        if let Some(w) = n.why() {
            report["catalog_note"] = json!(w);
        }
    }
    report["size"] = json!(e.meta.size);
    report["segments"] = json!(e.meta.segments());
    report["chunking"] = json!(chunking.to_string());
    report["seconds"] = json!(t.elapsed().as_secs_f64());
    // Where the time went: the verified fetch (manifest included), the
    // ingest into the store, the location registration.
    report["phases"] = json!({
        "fetch": fetched_at,
        "keep": kept_at - fetched_at,
        "register": t.elapsed().as_secs_f64() - kept_at,
    });
    Ok(report)
}

/// Removes what replications that did not finish left in `dir` (the
/// daemon was killed mid-copy: `<id>.data` and the `.part` files beside
/// it; no job survives a restart, a policy copy is claimed again), and
/// root files of `get`'s kept copies older than `stale` (a live `get`
/// hands its root over within seconds). Returns how many went.
pub fn clean_leftovers(dir: &Path, stale: Duration) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= stale);
        let job = !name.starts_with("keep-") && name.contains(".data");
        if (job || old)
            && e.file_type().is_ok_and(|t| t.is_file())
            && std::fs::remove_file(e.path()).is_ok()
        {
            n += 1;
        }
    }
    n
}

/// Removes a temporary file, and what a fetch into it leaves beside it
/// (`.part`, its state and hashes), when dropped.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let (part, state, hashes) = granary_transfer::part_paths(&self.0);
        for p in [&self.0, &part, &state, &hashes] {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Sends a signed replicate command for `req` to the node `target` through
/// the daemon at `socket`, signed with the default key of `data_dir`'s
/// keychain. Returns the job id.
pub async fn send_command(
    socket: &Path,
    data_dir: &Path,
    target: &Name,
    req: &Request,
) -> anyhow::Result<String> {
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    let signer = kc.default_signer().map_err(|e| {
        anyhow::anyhow!("no key to sign the replicate command with ({e}); make one with `granary key generate` or publish with `granary put` first")
    })?;
    let mut f = InterestFields::new(command_prefix(target));
    f.app_params = Some(Bytes::from(serde_json::to_vec(req)?));
    f.lifetime = Some(4000);
    let i = signer.sign_interest(f, None)?;
    let mut c = granary_app::Client::connect(socket).await?;
    let reply = c.express(i.fields().clone()).await?;
    let v = answer_json(reply, target)?;
    if v["ok"].as_bool() != Some(true) {
        anyhow::bail!(
            "{target} refused: {}",
            v["error"].as_str().unwrap_or("no reason given")
        );
    }
    v["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("{target} gave no job id"))
}

fn answer_json(reply: granary_app::Reply, target: &Name) -> anyhow::Result<Value> {
    match reply {
        granary_app::Reply::Data(d) => serde_json::from_slice(d.content())
            .map_err(|e| anyhow::anyhow!("{target}: the answer is not JSON: {e}")),
        granary_app::Reply::Nack(r) => anyhow::bail!(
            "{target}: Nack ({}): no route to the node, or it does not replicate (is a route to {target} configured?)",
            granary_packet::types::nack_reason::name(r)
        ),
    }
}

/// The state of job `id` on `target` (JSON with `state`).
pub async fn status(socket: &Path, target: &Name, id: &str) -> anyhow::Result<Value> {
    let mut c = granary_app::Client::connect(socket).await?;
    let mut f = InterestFields::new(
        command_prefix(target)
            .append(&Component::generic(b"status"))
            .append(&Component::generic(id.as_bytes())),
    );
    f.must_be_fresh = true;
    f.lifetime = Some(2000);
    answer_json(c.express(f).await?, target)
}

/// True when `target` answers a probe through the daemon at `socket` within
/// `wait`: its replicate service's status of a job that does not exist (an
/// answer proves the node is up and reachable from here, heartbeat or not).
pub async fn answers(socket: &Path, target: &Name, wait: Duration) -> bool {
    let probe = async {
        let mut c = granary_app::Client::connect(socket).await.ok()?;
        let mut f = InterestFields::new(
            command_prefix(target)
                .append(&Component::generic(b"status"))
                .append(&Component::generic(b"probe")),
        );
        f.must_be_fresh = true;
        f.lifetime = Some(wait.as_millis().min(60_000) as u64);
        match c.express(f).await.ok()? {
            granary_app::Reply::Data(_) => Some(()),
            granary_app::Reply::Nack(_) => None,
        }
    };
    matches!(tokio::time::timeout(wait, probe).await, Ok(Some(())))
}

/// Sends the command and, unless `no_wait`, waits for the outcome (polling
/// the status every 250 ms; 20 status requests in a row without an answer
/// end the wait with an error). Returns the final state.
pub async fn replicate_to(
    socket: &Path,
    data_dir: &Path,
    target: &Name,
    req: &Request,
    no_wait: bool,
) -> anyhow::Result<Value> {
    let id = send_command(socket, data_dir, target, req).await?;
    if no_wait {
        return Ok(json!({"state": "running", "id": id, "node": target.to_string()}));
    }
    let mut misses = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        match status(socket, target, &id).await {
            Ok(v) if v["state"] == "running" => misses = 0,
            Ok(mut v) => {
                v["id"] = json!(id);
                v["node"] = json!(target.to_string());
                return Ok(v);
            }
            Err(e) => {
                misses += 1;
                if misses >= 20 {
                    anyhow::bail!("{target} no longer answers about replication {id}: {e:#}");
                }
            }
        }
    }
}

/// Node prefixes given as `flag` (`--to`, `--from`), checked: each names a
/// node, not `/`.
fn node_prefixes(flag: &str, uris: &[String], example: &str) -> anyhow::Result<Vec<Name>> {
    uris.iter()
        .map(|t| {
            let n = Name::from_uri(t).map_err(|e| anyhow::anyhow!("{flag} {t:?}: {e}"))?;
            if n.is_empty() {
                anyhow::bail!("{flag} {t:?}: a node prefix such as {example}, not /");
            }
            Ok(n)
        })
        .collect()
}

/// `replicate --to`'s node prefixes, checked.
pub fn targets(to: &[String]) -> anyhow::Result<Vec<Name>> {
    node_prefixes("--to", to, "/site/b")
}

/// The command `replicate` sends for `name` (at `version`): the target
/// fetches with `from` as its hints (checked), else the catalog's `sources`
/// (when this node holds none), else this node's prefix.
pub fn request(
    data_dir: &Path,
    name: &str,
    version: Option<u64>,
    from: &[String],
    sources: Vec<String>,
) -> anyhow::Result<Request> {
    let fwhint = if from.is_empty() && !sources.is_empty() {
        sources
    } else if from.is_empty() {
        vec![crate::identity::node_prefix(data_dir)?.to_string()]
    } else {
        node_prefixes("--from", from, "/site/a")?;
        from.to_vec()
    };
    Ok(Request {
        name: name.to_string(),
        version,
        fwhint,
    })
}

/// The line `replicate` says of target `t`'s answer `v`, and whether it
/// did not fail.
pub fn outcome_line(t: &str, v: &serde_json::Value) -> (String, bool) {
    if v["state"] == "done" {
        let how = match (&v["dedup"], &v["by_name"]) {
            (d, _) if d.is_object() => format!(
                "{} chunks from its own store, {} from neighbours, {} fetched by name",
                d["local"]["chunks"], d["neighbours"]["chunks"], d["producer"]["chunks"]
            ),
            (_, b) if b.is_object() => format!("{} segments fetched by name", b["segments"]),
            _ if v["already"] == true => "held already".to_string(),
            _ => String::new(),
        };
        let line = format!(
            "{t}: holds {} ({} bytes), manifest signed by {} kept as received; {how}; {:.2} s",
            v["versioned"].as_str().unwrap_or("?"),
            v["size"],
            v["signer"].as_str().unwrap_or("?"),
            v["seconds"].as_f64().unwrap_or(0.0)
        );
        return (line, true);
    }
    if v["state"] == "running" {
        let id = v["id"].as_str().unwrap_or("?");
        return (
            format!("{t}: replication {id} accepted (not waiting)"),
            true,
        );
    }
    let why = v["error"].as_str().unwrap_or("no reason given");
    (format!("{t}: FAILED: {why}"), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_of_unfinished_copies_are_removed_and_a_fresh_root_kept() {
        let d = tempfile::tempdir().unwrap();
        for f in [
            "1a2b-1.data",
            "1a2b-1.data.part",
            "1a2b-1.data.part.state",
            "1a2b-1.data.part.hashes",
            "keep-77-1795.root",
        ] {
            std::fs::write(d.path().join(f), b"x").unwrap();
        }
        std::fs::create_dir(d.path().join("sub")).unwrap();
        assert_eq!(clean_leftovers(d.path(), Duration::from_secs(3600)), 4);
        let mut left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["keep-77-1795.root", "sub"]);
        // Once stale, a root goes too.
        assert_eq!(clean_leftovers(d.path(), Duration::ZERO), 1);
        assert_eq!(clean_leftovers(&d.path().join("none"), Duration::ZERO), 0);
    }
}
