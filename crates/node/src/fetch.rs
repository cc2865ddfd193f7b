//! `granary get` and `granary cat` as the node runs them: discovery, the
//! verified copy of a version the node holds (from this data directory's
//! repository or the daemon's file socket), the dedup fetch (own store,
//! neighbours by hash, the rest by name), the by-name fetch of the rest, and
//! keeping what was fetched ([`crate::fetched`]). What happens is told to
//! the caller as [`Event`]s; the binary prints them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use granary_packet::Name;
use granary_transfer::{
    copy_verified, copy_verified_from, dedup_possible, discover_signed, fetch_dedup, fetch_objects,
    Dedup, Engine, ObjectInfo, RemoteFile, Sources, Trust, UnixLink,
};

pub use granary_transfer::{
    Config, CopyReport, DedupReport, LocatorRef, OpenOptions, Output, PipelineType, Report, Stats,
};

use crate::fetched::Kept;

/// `--fwhint` names, checked.
pub fn hint_names(uris: &[String]) -> anyhow::Result<Vec<Name>> {
    uris.iter()
        .map(|u| {
            let n = Name::from_uri(u).map_err(|e| anyhow::anyhow!("--fwhint {u:?}: {e}"))?;
            if n.is_empty() {
                anyhow::bail!("--fwhint {u:?}: a hint names a prefix, not /");
            }
            Ok(n)
        })
        .collect()
}

fn name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{s}: {e}"))
}

/// The trust anchors of the data directory's keychain.
pub fn trust(data_dir: &Path, integrity_only: bool) -> anyhow::Result<Arc<Trust>> {
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    Ok(Arc::new(
        Trust::from_keychain(&kc)?.with_integrity_only(integrity_only),
    ))
}

/// Two worker threads: the socket reader (framing, NDNLPv2 decoding) runs
/// beside the engine (verification, writes). `GRANARY_FETCH_THREADS=1` for
/// one.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    let threads = std::env::var("GRANARY_FETCH_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(2)
        .max(1);
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?)
}

/// The last generic component of a name, as a file name.
fn file_name_of(n: &Name) -> String {
    n.components()
        .filter(|c| c.typ == granary_packet::types::COMP_GENERIC)
        .last()
        .map(|c| String::from_utf8_lossy(c.value).replace(['/', '\0'], "_"))
        .filter(|s| !s.is_empty() && s != "." && s != "..")
        .unwrap_or_else(|| "object".into())
}

/// What a fetch tells its caller as it goes.
pub enum Event<'a> {
    /// An object was accepted on a DigestSha256 alone (`--integrity-only`):
    /// from now on every line should say so.
    IntegrityOnly,
    /// Bytes are about to be written: a progress bar of this total.
    ProgressStart(Option<u64>),
    /// That many more bytes written.
    Progress(u64),
    /// A local copy's progress ended.
    ProgressDone,
    /// The by-name fetch's progress ended.
    FetchProgressDone,
    /// A version the node holds was copied, every segment verified.
    Copied {
        report: &'a CopyReport,
        from_node: bool,
    },
    /// An object failed (nothing unverified was written as good).
    Failed { versioned: &'a Name, error: String },
    /// The local copy could not be used; the object is fetched instead.
    LocalUnusable { versioned: &'a Name, error: String },
    /// `--resume`: fetched by name.
    ResumeByName,
    /// A dedup fetch finished.
    Deduped {
        report: &'a DedupReport,
        stats: &'a Stats,
    },
    /// A by-name fetch of one object finished (its `error` says whether).
    Fetched(&'a Report),
    /// The by-name run's statistics.
    Stats(&'a Stats),
    /// The whole `get` as JSON; `by_name` when objects were fetched by name.
    Json {
        report: &'a serde_json::Value,
        by_name: bool,
    },
    /// What keeping a fetched file in the repository came to.
    Kept { versioned: &'a Name, kept: Kept },
}

/// Where events go.
pub type Events = Arc<dyn Fn(Event<'_>) + Send + Sync>;

/// What `granary get` is asked to do.
pub struct Get {
    /// The names (RDR discovery finds their versions unless disabled).
    pub names: Vec<Name>,
    /// `get --query`: each file's place under the output directory.
    pub paths: Option<Vec<PathBuf>>,
    /// `-o FILE|DIR` (`None` or `-`: standard output).
    pub output: Option<PathBuf>,
    /// --resume.
    pub resume: bool,
    /// --no-dedup.
    pub no_dedup: bool,
    /// --no-publish.
    pub no_publish: bool,
    /// --hash-lifetime (ms).
    pub hash_lifetime: u64,
    /// --integrity-only.
    pub integrity_only: bool,
    /// Version discovery and manifest options.
    pub open: OpenOptions,
    /// Tell progress ([`Event::ProgressStart`] …).
    pub progress: bool,
}

/// Chunks first asked of the neighbours; when they have none of them, the
/// rest of the file is fetched by name.
const NEIGHBOUR_PROBE: usize = 64;

/// The location lookups of a whole `get` (discovery, dedup and by-name runs):
/// lookups made, hint switches (the first location, then each failover), and
/// verified segments fetched again (0 after a clean failover).
fn located(engine: &Engine) -> serde_json::Value {
    let t = &engine.total;
    serde_json::json!({"lookups": t.lookups, "hint_switches": t.hint_switches, "refetched": t.refetched})
}

/// The outputs of `g`'s names, checked (and directories made) before
/// anything is fetched.
fn outputs(g: &Get) -> anyhow::Result<Vec<Output>> {
    let names = &g.names;
    let paths = g.paths.as_deref();
    // `-o -` is standard output.
    let output = g.output.as_deref().filter(|p| p.as_os_str() != "-");
    // `-o DIR/` (a trailing slash) asks for a directory, as several names
    // and `--query` do: it is made when missing. A file's directory must
    // exist (as for `cp`), checked before anything is fetched.
    let dir_asked = output.is_some_and(|p| p.as_os_str().as_encoded_bytes().ends_with(b"/"));
    let to_dir =
        names.len() > 1 || paths.is_some() || dir_asked || output.is_some_and(|p| p.is_dir());
    match output {
        Some(dir) if to_dir => std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create the directory {}: {e}", dir.display()))?,
        Some(file) => {
            let parent = file
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !parent.is_dir() {
                anyhow::bail!(
                    "cannot write {}: there is no directory {} (create it, or end -o with / to have a directory made and the file named after the data)",
                    file.display(),
                    parent.display()
                );
            }
        }
        None => {}
    }
    if names.len() > 1 && output.is_none() {
        anyhow::bail!("several names need -o DIR (one file per name)");
    }
    if g.resume && output.is_none() {
        anyhow::bail!("--resume needs -o FILE (standard output cannot be resumed)");
    }
    // A FIFO, device or socket is written straight into, in order (never
    // replaced by a rename); a symbolic link's target is written.
    let outputs: Vec<Output> = names
        .iter()
        .enumerate()
        .map(|(k, n)| match (output, paths.and_then(|p| p.get(k))) {
            (None, _) => Ok(Output::stdout()),
            // `get --query`: the file's place in the DRS layout (its
            // components were made safe by the caller).
            (Some(dir), Some(rel)) => {
                let p = dir.join(rel);
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| {
                        granary_transfer::Error::Fetch(format!(
                            "cannot create {}: {e}",
                            parent.display()
                        ))
                    })?;
                }
                Output::for_path(&p)
            }
            (Some(p), None) if to_dir => Output::for_path(&p.join(file_name_of(n))),
            (Some(p), None) => Output::for_path(p),
        })
        .collect::<Result<_, _>>()?;
    if g.resume {
        if let Some(Output::Special(s)) = outputs.iter().find(|o| matches!(o, Output::Special(_))) {
            anyhow::bail!(
                "--resume: {} is not a regular file (a FIFO, device or socket is written straight into, in order, so there is no partial download to resume)",
                s.path().unwrap_or_default().display()
            );
        }
    }
    Ok(outputs)
}

/// Runs `granary get`: every object verified before a byte is written as
/// good; regular files fetched are kept in the repository unless
/// `no_publish` (see [`crate::fetched::keep_fetched`]).
pub fn get(socket: &Path, data_dir: &Path, cfg: Config, g: Get, ev: Events) -> anyhow::Result<()> {
    if g.hash_lifetime == 0 {
        anyhow::bail!("--hash-lifetime must be > 0");
    }
    let outputs = outputs(&g)?;
    let Get {
        names,
        resume,
        no_dedup,
        no_publish,
        hash_lifetime,
        integrity_only,
        open: opts,
        progress: show,
        ..
    } = g;
    let trust = trust(data_dir, integrity_only)?;
    let rt = runtime()?;
    // The node's own repository (this data directory's): a version already
    // there is copied from its file, verified, at disk speed.
    let store = Some(data_dir.join("repo"))
        .filter(|p| p.is_dir())
        .and_then(|p| granary_store::Store::open(p).ok());
    // The publishers' signed manifest roots as received: a kept copy keeps them.
    let mut roots: std::collections::HashMap<String, granary_packet::Data> = Default::default();
    let mut any_integrity_only = false;
    let done: Vec<(ObjectInfo, PathBuf)> = rt.block_on(async {
        let mut link = UnixLink::connect(socket).await?;
        let mut engine = Engine::new(cfg);
        let mut objects = Vec::new();
        for (n, out) in names.iter().zip(outputs) {
            let (info, root) =
                discover_signed(&mut engine, &mut link, n, trust.clone(), &opts).await?;
            if info.integrity_only() {
                any_integrity_only = true;
                ev(Event::IntegrityOnly);
            }
            if let Some(r) = root {
                roots.insert(info.versioned.to_string(), r);
            }
            objects.push((info, out));
        }
        // Already in the local repository: a verified copy of its file.
        let mut copied = Vec::new();
        let mut fetch = Vec::new();
        let mut local_failed = 0;
        for (info, out) in objects {
            // This data directory's repository, else the node's: its file
            // passed over the node's socket (short-circuit local read).
            let src = match crate::fetched::local_source(store.as_ref(), &info) {
                _ if no_dedup => None,
                Some(p) => Some((None, p)),
                None => {
                    tokio::task::block_in_place(|| crate::fetched::node_source(socket, &info))
                        .map(|(f, at)| (Some(f), at))
                }
            };
            let Some((file, src)) = src else {
                fetch.push((info, out));
                continue;
            };
            let from_node = file.is_some();
            if show {
                ev(Event::ProgressStart(info.map.file_size()));
            }
            let r = tokio::task::block_in_place(|| {
                let progress = |n| {
                    if show {
                        ev(Event::Progress(n))
                    }
                };
                match file {
                    Some(f) => copy_verified_from(f, &src, &info, &out, progress),
                    None => copy_verified(&src, &info, &out, progress),
                }
            });
            if show {
                ev(Event::ProgressDone);
            }
            match r {
                Ok(r) => {
                    ev(Event::Copied {
                        report: &r,
                        from_node,
                    });
                    copied.push(serde_json::json!({"local_copy": r, "from_node": from_node}));
                }
                // Its reader went away: nothing more can be written there.
                Err(e) if matches!(&out, Output::Special(s) | Output::Stdout(s) if s.reader_gone()) => {
                    local_failed += 1;
                    ev(Event::Failed { versioned: &info.versioned, error: e.to_string() });
                }
                // The same output, still open, gets the rest by name (from
                // where the copy stopped, for a FIFO or standard output).
                Err(e) => {
                    ev(Event::LocalUnusable { versioned: &info.versioned, error: e.to_string() });
                    fetch.push((info, out));
                }
            }
        }
        // Segments checked against a manifest: hash their content on the
        // socket reader's thread, beside the engine's.
        link.prehash(fetch.iter().any(|(i, _)| i.has_manifest()));
        // Dedup fetch for every regular-file output whose manifest gives the
        // chunk hashes; the rest (standard output, FIFOs, devices, sockets,
        // --resume, --no-dedup, no manifest) by name, in order where needed.
        // An object the node's repository holds comes by name too: by hash
        // it would come from the same store, one chunk at a time.
        let held_here = if no_dedup || resume {
            Default::default()
        } else {
            let names: Vec<Name> = fetch.iter().map(|(i, _)| i.versioned.clone()).collect();
            crate::fetched::node_holds(socket, &names).await
        };
        let mut deduped = Vec::new();
        let mut plain = Vec::new();
        for (info, out) in fetch {
            let here = held_here.contains(&info.versioned);
            match out {
                Output::File(p) if !no_dedup && !resume && !here && dedup_possible(&info) => {
                    deduped.push((info, p))
                }
                out => plain.push((info, out)),
            }
        }
        if resume {
            ev(Event::ResumeByName);
        }
        let mut objects = plain;
        // Neighbours are asked by hash only when the node has some: a route
        // for hash requests through a face that is not the producer's.
        let neighbours = if deduped.is_empty() {
            false
        } else {
            let names: Vec<Name> = deduped.iter().map(|(i, _)| i.versioned.clone()).collect();
            crate::fetched::has_neighbours(socket, &names).await
        };
        let mut sources = Sources::new(
            Some(name(granary_repo::LOCAL_HASH_PREFIX)?),
            neighbours.then(|| name(granary_repo::HASH_PREFIX)).transpose()?,
        );
        sources.have = Some(granary_repo::have_query_prefix());
        sources.have_batch = granary_repo::HAVE_BATCH;
        sources.probe = NEIGHBOUR_PROBE;
        sources.plain_if_nothing = true;
        sources.neighbour_lifetime = Duration::from_millis(hash_lifetime);
        let mut dedup_reports = Vec::new();
        // (Local copies whose output's reader went away count here too.)
        let mut dedup_failed = local_failed;
        let mut keep = Vec::new();
        for (info, p) in deduped {
            let got = fetch_dedup(&mut engine, &mut link, &info, &p, &sources).await;
            match got {
                Ok(Dedup::Done(r, st)) => {
                    ev(Event::Deduped { report: &r, stats: &st });
                    dedup_reports.push(serde_json::json!({"report": r, "stats": st}));
                    keep.push((info, p));
                }
                // Nothing to dedupe: by name, with the others.
                Ok(Dedup::Plain(st)) => {
                    dedup_reports.push(serde_json::json!({
                        "versioned": info.versioned.to_string(), "by_name": true, "lookup_stats": st}));
                    objects.push((info, Output::File(p)))
                }
                Err(e) => {
                    dedup_failed += 1;
                    ev(Event::Failed { versioned: &info.versioned, error: e.to_string() });
                    dedup_reports.push(serde_json::json!({
                        "versioned": info.versioned.to_string(), "error": e.to_string()}));
                }
            }
        }
        let n_dedup = dedup_reports.iter().filter(|r| r["by_name"].is_null()).count();
        if objects.is_empty() {
            let v = serde_json::json!({"objects": [], "dedup": dedup_reports, "local": copied, "integrity_only": any_integrity_only, "located": located(&engine)});
            ev(Event::Json { report: &v, by_name: false });
            if dedup_failed > 0 {
                anyhow::bail!(
                    "{dedup_failed} of {} object(s) failed; nothing unverified was written as good",
                    n_dedup + copied.len() + local_failed
                );
            }
            return Ok(keep);
        }
        // Regular files fetched by name are kept in the repository too (as
        // dedup outputs are), unless --no-dedup or --resume, or the node
        // serves them already.
        let keepable: Vec<(ObjectInfo, PathBuf)> = objects
            .iter()
            .filter_map(|(i, o)| match o {
                Output::File(p)
                    if !no_dedup
                        && !resume
                        && dedup_possible(i)
                        && !held_here.contains(&i.versioned) =>
                {
                    Some((i.clone(), p.clone()))
                }
                _ => None,
            })
            .collect();
        let total: Option<u64> = objects.iter().map(|(i, _)| i.map.file_size()).sum();
        if show {
            ev(Event::ProgressStart(total));
            let progress = ev.clone();
            engine.on_progress(move |b| progress(Event::Progress(b)));
        }
        let (reports, mut stats) = fetch_objects(&mut engine, &mut link, objects, resume).await?;
        // The location counters are the whole `get`'s (a lookup made while
        // discovering the version counts), as `located` reports them.
        stats.lookups = engine.total.lookups;
        stats.hint_switches = engine.total.hint_switches;
        stats.refetched = engine.total.refetched;
        // The progress lives in the engine's callback.
        engine.on_progress(|_| {});
        ev(Event::FetchProgressDone);
        let mut failed = 0;
        for r in &reports {
            failed += usize::from(r.error.is_some());
            ev(Event::Fetched(r));
        }
        for (i, p) in keepable {
            let ok = reports
                .iter()
                .any(|r| r.error.is_none() && r.versioned == i.versioned.to_string());
            if ok {
                keep.push((i, p));
            }
        }
        ev(Event::Stats(&stats));
        let v = serde_json::json!({"objects": reports, "stats": stats, "dedup": dedup_reports, "local": copied, "integrity_only": any_integrity_only, "located": located(&engine)});
        ev(Event::Json { report: &v, by_name: true });
        let failed = failed + dedup_failed;
        if failed > 0 {
            anyhow::bail!(
                "{failed} of {} object(s) failed; nothing unverified was written as good",
                reports.len() + n_dedup + copied.len() + local_failed
            );
        }
        Ok(keep)
    })?;
    if !no_publish {
        for (info, p) in &done {
            let root = roots.get(&info.versioned.to_string());
            let kept = crate::fetched::keep_fetched(data_dir, socket, info, p, root);
            ev(Event::Kept {
                versioned: &info.versioned,
                kept,
            });
        }
    }
    Ok(())
}

/// What `granary cat` read.
pub struct Cat {
    /// The versioned name.
    pub versioned: Name,
    /// What its bytes were verified against.
    pub verified_by: String,
    /// Bytes written.
    pub bytes: u64,
    /// The engine's statistics.
    pub stats: Stats,
}

/// Runs `granary cat`: the bytes `offset..offset+length` of `n` (verified)
/// into `out`. An integrity-only object is told as
/// [`Event::IntegrityOnly`] with its name and checker before any byte.
#[allow(clippy::too_many_arguments)]
pub fn cat(
    socket: &Path,
    data_dir: &Path,
    cfg: Config,
    n: &Name,
    offset: u64,
    length: Option<u64>,
    opts: &OpenOptions,
    integrity_only: bool,
    out: impl std::io::Write + Send + 'static,
    on_integrity_only: impl FnOnce(&Name, &str),
) -> anyhow::Result<Cat> {
    let trust = trust(data_dir, integrity_only)?;
    let rt = runtime()?;
    rt.block_on(async {
        let link = UnixLink::connect(socket).await?;
        let mut f = RemoteFile::open(link, Engine::new(cfg), n, trust, opts).await?;
        let st = f.stat();
        if f.info().integrity_only() {
            on_integrity_only(&st.versioned, &st.verified_by);
        }
        if let Some(size) = st.size {
            if offset > size {
                anyhow::bail!(
                    "offset {offset} is beyond the end of {} ({size} bytes)",
                    st.versioned
                );
            }
        }
        let bytes = f
            .copy_range(offset, length.unwrap_or(u64::MAX), out)
            .await?;
        Ok(Cat {
            versioned: st.versioned.clone(),
            verified_by: st.verified_by.clone(),
            bytes,
            stats: f.engine().total.clone(),
        })
    })
}

/// `cfg` when its engine settings make sense, else what is wrong, named by
/// the `get`/`cat` flag that sets it.
pub fn checked(cfg: Config) -> anyhow::Result<Config> {
    for (n, v) in [
        ("--aimd-beta", cfg.aimd_beta),
        ("--cubic-beta", cfg.cubic_beta),
        ("--rto-alpha", cfg.rto_alpha),
        ("--rto-beta", cfg.rto_beta),
    ] {
        if !(0.0..1.0).contains(&v) || v == 0.0 {
            anyhow::bail!("{n} must be in (0, 1), not {v}");
        }
    }
    let ok = |v: f64, min: f64| v.is_finite() && v >= min;
    if !ok(cfg.init_cwnd, 1.0) || !ok(cfg.aimd_step, 1e-9) || !ok(cfg.rto_k, 0.0) {
        anyhow::bail!("--init-cwnd must be ≥ 1, --aimd-step > 0, --rto-k ≥ 0");
    }
    if cfg.min_rto > cfg.max_rto || cfg.lifetime.is_zero() {
        anyhow::bail!("--min-rto must not exceed --max-rto; --lifetime must be > 0");
    }
    Ok(cfg)
}

/// A fetch that met a NoRoute Nack without a hint (`hinted`: --fwhint
/// given): the error says what would help (the name may live at a site this
/// node has no route for).
pub fn suggest_hint(r: anyhow::Result<()>, hinted: bool, no_locate: bool) -> anyhow::Result<()> {
    match r {
        Err(e) if !hinted && format!("{e:#}").contains("NoRoute") => Err(e.context(
            if no_locate {
                "no route for the name from here: if a site holds it, name it with --fwhint <its node prefix> (e.g. --fwhint /site/a)"
            } else {
                "no route for the name from here, and no node the location lookup offered could serve it (see `granary federation locate NAME`); if a site holds it, name it with --fwhint <its node prefix>"
            },
        )),
        r => r,
    }
}

/// The ndncatchunks-style summary of a fetch, one line each.
pub fn stats_lines(st: &Stats) -> Vec<String> {
    let pct = |n: u64| {
        if st.interests > 0 {
            100.0 * n as f64 / st.interests as f64
        } else {
            0.0
        }
    };
    vec![
        format!("Time elapsed: {:.3} s", st.seconds),
        format!("Segments received: {}", st.segments),
        format!("Transferred size: {:.1} kB", st.bytes as f64 / 1e3),
        format!("Goodput: {:.3} Mbit/s", st.goodput_bps() / 1e6),
        format!(
            "Congestion marks: {} (caused {} window decreases)",
            st.congestion_marks, st.decreases_mark
        ),
        format!(
            "Timeouts: {} (caused {} window decreases)",
            st.timeouts, st.decreases_loss
        ),
        format!(
            "Nacks: {} Congestion (caused {} window decreases), {} Duplicate, {} other",
            st.nacks_congestion, st.decreases_nack, st.nacks_duplicate, st.nacks_other
        ),
        format!(
            "Retransmitted segments: {} ({:.4}%), rejected (failed verification): {}",
            st.retransmissions,
            pct(st.retransmissions),
            st.rejected
        ),
        format!(
            "RTT min/avg/max = {:.3}/{:.3}/{:.3} ms, final RTO {:.0} ms, largest window {:.0}, slow start left on delay {} time(s)",
            st.rtt_min_ms, st.rtt_avg_ms, st.rtt_max_ms, st.rto_ms, st.max_cwnd, st.slow_start_exits
        ),
    ]
}

/// Where a dedup fetch's bytes came from: the object, then one line per
/// source.
pub fn dedup_lines(r: &DedupReport) -> [String; 2] {
    [
        format!(
            "{}: {} bytes, {} segments ({} unique chunks), every segment verified against {}",
            r.versioned, r.size, r.segments, r.unique_chunks, r.verified_by
        ),
        format!(
            "From local store: {} chunks, {} bytes; neighbours: {} chunks, {} bytes; producer: {} chunks, {} bytes; repeated within the file: {} segments, {} bytes",
            r.local.chunks,
            r.local.bytes,
            r.neighbours.chunks,
            r.neighbours.bytes,
            r.producer.chunks,
            r.producer.bytes,
            r.repeated.chunks,
            r.repeated.bytes
        ),
    ]
}

/// Standard output for [`cat`] that notes whether its reader went away
/// (EPIPE): a reader that stopped early (`| head`) is not an error.
pub struct PipeWatch {
    inner: std::io::Stdout,
    closed: Arc<std::sync::atomic::AtomicBool>,
}

impl PipeWatch {
    /// Standard output, and the flag set once its reader went away.
    pub fn stdout() -> (Self, Arc<std::sync::atomic::AtomicBool>) {
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let w = PipeWatch {
            inner: std::io::stdout(),
            closed: closed.clone(),
        };
        (w, closed)
    }

    fn note<T>(&self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                self.closed
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        r
    }
}

impl std::io::Write for PipeWatch {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.note(r)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.note(r)
    }
}
