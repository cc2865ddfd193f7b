//! `granary get` and `granary cat`: the fetch engine (granary-transfer) from
//! the command line, with ndncatchunks' flag names and defaults.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use granary_packet::Name;
use granary_transfer::{
    copy_verified, copy_verified_from, dedup_possible, discover_signed, fetch_dedup, fetch_objects,
    Config, Dedup, DedupReport, Engine, ObjectInfo, OpenOptions, Output, PipelineType, RemoteFile,
    Sources, Stats, Trust, UnixLink,
};

/// Engine flags (ndncatchunks' names and defaults).
#[derive(clap::Args, Debug, Clone)]
pub struct FetchArgs {
    /// Window adaptation: fixed, aimd or cubic.
    #[arg(long, default_value = "cubic", value_parser = ["fixed", "aimd", "cubic"])]
    pub pipeline_type: String,
    /// Window of the fixed pipeline (Interests in flight).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub pipeline_size: u64,
    /// Initial congestion window (aimd, cubic).
    #[arg(long, default_value_t = 2.0)]
    pub init_cwnd: f64,
    /// Initial slow-start threshold (default: unlimited).
    #[arg(long)]
    pub init_ssthresh: Option<f64>,
    /// AIMD additive increase step.
    #[arg(long, default_value_t = 1.0)]
    pub aimd_step: f64,
    /// AIMD multiplicative decrease factor.
    #[arg(long, default_value_t = 0.5)]
    pub aimd_beta: f64,
    /// CUBIC multiplicative decrease factor.
    #[arg(long, default_value_t = 0.7)]
    pub cubic_beta: f64,
    /// CUBIC fast convergence.
    #[arg(long)]
    pub enable_fast_conv: bool,
    /// After a decrease, restart from the initial window.
    #[arg(long)]
    pub reset_cwnd_to_init: bool,
    /// Do not react to congestion marks.
    #[arg(long)]
    pub ignore_marks: bool,
    /// Disable conservative window adaptation (decrease on every loss, not once per RTT).
    #[arg(long)]
    pub disable_cwa: bool,
    /// RTT estimator alpha (RFC 6298).
    #[arg(long, default_value_t = 0.125)]
    pub rto_alpha: f64,
    /// RTT estimator beta (RFC 6298).
    #[arg(long, default_value_t = 0.25)]
    pub rto_beta: f64,
    /// RTO = SRTT + K × RTTVAR.
    #[arg(long, default_value_t = 8.0)]
    pub rto_k: f64,
    /// Minimum RTO (ms).
    #[arg(long, default_value_t = 200)]
    pub min_rto: u64,
    /// Maximum RTO (ms).
    #[arg(long, default_value_t = 60_000)]
    pub max_rto: u64,
    /// InterestLifetime (ms).
    #[arg(short = 'l', long, default_value_t = 4000)]
    pub lifetime: u64,
    /// Retransmissions of one Interest before giving up.
    #[arg(short = 'r', long, default_value_t = 15)]
    pub retries: u32,
    /// Use the name as given: no version discovery.
    #[arg(short = 'D', long)]
    pub no_version_discovery: bool,
    /// Do not look for a signed manifest; verify each packet's signature.
    #[arg(long)]
    pub no_manifest: bool,
    /// Accept content whose only signature is a DigestSha256 (segments, or
    /// a manifest, signed so): it proves the bytes intact, not who made
    /// them, so without this flag such content is refused; with it, every
    /// line printed says "integrity only".
    #[arg(long)]
    pub integrity_only: bool,
    /// Stay in slow start until a loss or mark (by default slow start also
    /// ends when RTT samples rise above the path's minimum, as HyStart).
    #[arg(long)]
    pub no_hystart: bool,
    /// ForwardingHint on every Interest (ndnpeek's --fwhint), e.g. the
    /// node prefix of a site that holds the name (/site/a): routers that
    /// have no route for the name forward by the hint's. Repeatable: the
    /// names go into the hint in the order given, and a router uses the
    /// first it has a route for.
    #[arg(long = "fwhint", value_name = "NAME")]
    pub fwhint: Vec<String>,
    /// Without --fwhint, when the name gets a NoRoute Nack or no answer,
    /// the fetch looks up which nodes hold it and goes on with their node
    /// prefixes as forwarding hints, failing over from one to the next
    /// without fetching a verified segment again. --no-locate turns this
    /// off.
    #[arg(long, conflicts_with = "fwhint")]
    pub no_locate: bool,
    /// The catalog to ask for locations over NDN (its prefix, e.g.
    /// /site/a/catalog). Default: the shared catalog directly when
    /// --catalog is a postgres:// URL, else this node's catalog
    /// (/localhost/granary/catalog).
    #[arg(long, value_name = "PREFIX")]
    pub locate_at: Option<String>,
    /// A node whose last heartbeat is older than this (seconds) is not
    /// offered by the lookup. Default: the catalog's node_timeout (60 s).
    #[arg(long, value_name = "SECONDS")]
    pub node_timeout: Option<f64>,
}

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

impl FetchArgs {
    /// The engine's configuration with the location lookup (unless --fwhint or
    /// --no-locate). Call it before starting a runtime: a shared catalog named
    /// by --catalog is opened (and must answer) here.
    pub fn config_located(&self, socket: &Path) -> anyhow::Result<Config> {
        let mut cfg = self.config()?;
        cfg.locator = self.locator(socket)?;
        Ok(cfg)
    }

    /// The location lookup these flags ask for (`None` with --fwhint or --no-locate).
    pub fn locator(&self, socket: &Path) -> anyhow::Result<Option<granary_transfer::LocatorRef>> {
        if self.no_locate || !self.fwhint.is_empty() {
            return Ok(None);
        }
        let timeout = match self.node_timeout {
            None => None,
            Some(s) if s.is_finite() && (0.001..=30.0 * 86400.0).contains(&s) => {
                Some(Duration::from_secs_f64(s))
            }
            Some(s) => anyhow::bail!("--node-timeout {s}: out of range (0.001 s to 30 days)"),
        };
        granary_node::locate::locator(
            socket,
            granary_node::catalog::catalog_spec(),
            self.locate_at.as_deref(),
            timeout,
        )
        .map(Some)
    }

    fn config(&self) -> anyhow::Result<Config> {
        let pipeline_type: PipelineType = self.pipeline_type.parse().map_err(anyhow::Error::msg)?;
        for (n, v) in [
            ("--aimd-beta", self.aimd_beta),
            ("--cubic-beta", self.cubic_beta),
            ("--rto-alpha", self.rto_alpha),
            ("--rto-beta", self.rto_beta),
        ] {
            if !(0.0..1.0).contains(&v) || v == 0.0 {
                anyhow::bail!("{n} must be in (0, 1), not {v}");
            }
        }
        let ok = |v: f64, min: f64| v.is_finite() && v >= min;
        if !ok(self.init_cwnd, 1.0) || !ok(self.aimd_step, 1e-9) || !ok(self.rto_k, 0.0) {
            anyhow::bail!("--init-cwnd must be ≥ 1, --aimd-step > 0, --rto-k ≥ 0");
        }
        if self.min_rto > self.max_rto || self.lifetime == 0 {
            anyhow::bail!("--min-rto must not exceed --max-rto; --lifetime must be > 0");
        }
        Ok(Config {
            pipeline_type,
            pipeline_size: self.pipeline_size as usize,
            init_cwnd: self.init_cwnd,
            init_ssthresh: self.init_ssthresh.unwrap_or(f64::MAX),
            aimd_step: self.aimd_step,
            aimd_beta: self.aimd_beta,
            cubic_beta: self.cubic_beta,
            fast_conv: self.enable_fast_conv,
            reset_cwnd_to_init: self.reset_cwnd_to_init,
            ignore_marks: self.ignore_marks,
            disable_cwa: self.disable_cwa,
            rto_alpha: self.rto_alpha,
            rto_beta: self.rto_beta,
            rto_k: self.rto_k,
            min_rto: Duration::from_millis(self.min_rto),
            max_rto: Duration::from_millis(self.max_rto),
            lifetime: Duration::from_millis(self.lifetime),
            retries: self.retries,
            hystart: !self.no_hystart,
            forwarding_hint: hint_names(&self.fwhint)?,
            ..Config::default()
        })
    }

    fn open_options(&self) -> OpenOptions {
        OpenOptions {
            no_discovery: self.no_version_discovery,
            no_manifest: self.no_manifest,
        }
    }
}

fn name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{s}: {e}"))
}

fn trust(data_dir: &Path, integrity_only: bool) -> anyhow::Result<Arc<Trust>> {
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    Ok(Arc::new(
        Trust::from_keychain(&kc)?.with_integrity_only(integrity_only),
    ))
}

/// Set once an object being fetched is integrity only (accepted with
/// `--integrity-only` on a DigestSha256 alone): from then on every line
/// printed says so ([`say!`], [`tag`]).
static INTEGRITY_ONLY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What every printed line starts with once [`INTEGRITY_ONLY`] is set.
const INTEGRITY_ONLY_TAG: &str = "[integrity only, not authenticated] ";

fn tag() -> &'static str {
    if INTEGRITY_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
        INTEGRITY_ONLY_TAG
    } else {
        ""
    }
}

/// Notes that `info` is integrity only (see [`INTEGRITY_ONLY`]).
fn note_integrity_only(info: &ObjectInfo) {
    if info.integrity_only() {
        INTEGRITY_ONLY.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// `eprintln!`, starting with [`tag`].
macro_rules! say {
    ($($t:tt)*) => {
        eprintln!("{}{}", tag(), format_args!($($t)*))
    };
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

/// ndncatchunks-style summary on standard error.
fn print_stats(st: &Stats) {
    let pct = |n: u64| {
        if st.interests > 0 {
            100.0 * n as f64 / st.interests as f64
        } else {
            0.0
        }
    };
    say!("Time elapsed: {:.3} s", st.seconds);
    say!("Segments received: {}", st.segments);
    say!("Transferred size: {:.1} kB", st.bytes as f64 / 1e3);
    say!("Goodput: {:.3} Mbit/s", st.goodput_bps() / 1e6);
    say!(
        "Congestion marks: {} (caused {} window decreases)",
        st.congestion_marks,
        st.decreases_mark
    );
    say!(
        "Timeouts: {} (caused {} window decreases)",
        st.timeouts,
        st.decreases_loss
    );
    say!(
        "Nacks: {} Congestion (caused {} window decreases), {} Duplicate, {} other",
        st.nacks_congestion,
        st.decreases_nack,
        st.nacks_duplicate,
        st.nacks_other
    );
    say!(
        "Retransmitted segments: {} ({:.4}%), rejected (failed verification): {}",
        st.retransmissions,
        pct(st.retransmissions),
        st.rejected
    );
    say!(
        "RTT min/avg/max = {:.3}/{:.3}/{:.3} ms, final RTO {:.0} ms, largest window {:.0}, slow start left on delay {} time(s)",
        st.rtt_min_ms, st.rtt_avg_ms, st.rtt_max_ms, st.rto_ms, st.max_cwnd, st.slow_start_exits
    );
}

fn progress_bar(total: Option<u64>) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = match total {
        Some(t) => indicatif::ProgressBar::new(t),
        None => indicatif::ProgressBar::new_spinner(),
    };
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(&format!(
        "{}{{bytes}}/{{total_bytes}} {{binary_bytes_per_sec}} {{wide_bar}} ETA {{eta}}",
        tag()
    )) {
        bar.set_style(style);
    }
    Some(bar)
}

/// The location lookups of a whole `get` (discovery, dedup and by-name runs):
/// lookups made, hint switches (the first location, then each failover), and
/// verified segments fetched again (0 after a clean failover).
fn located(engine: &Engine) -> serde_json::Value {
    let t = &engine.total;
    serde_json::json!({"lookups": t.lookups, "hint_switches": t.hint_switches, "refetched": t.refetched})
}

/// Switches of `granary get`.
pub struct GetFlags {
    /// --resume.
    pub resume: bool,
    /// --json.
    pub json: bool,
    /// --quiet.
    pub quiet: bool,
    /// --no-dedup.
    pub no_dedup: bool,
    /// --no-publish.
    pub no_publish: bool,
    /// --hash-lifetime (ms).
    pub hash_lifetime: u64,
}

/// A fetch that met a NoRoute Nack without a hint: the error says what
/// would help (the name may live at a site this node has no route for).
pub fn suggest_hint(r: anyhow::Result<()>, args: &FetchArgs) -> anyhow::Result<()> {
    match r {
        Err(e) if args.fwhint.is_empty() && format!("{e:#}").contains("NoRoute") => Err(e.context(
            if args.no_locate {
                "no route for the name from here: if a site holds it, name it with --fwhint <its node prefix> (e.g. --fwhint /site/a)"
            } else {
                "no route for the name from here, and no node the location lookup offered could serve it (see `granary federation locate NAME`); if a site holds it, name it with --fwhint <its node prefix>"
            },
        )),
        r => r,
    }
}

/// `granary get NAME… [-o FILE|DIR] [--resume] [--json] [-q]`.
pub fn get(
    socket: &Path,
    data_dir: &Path,
    names: &[String],
    paths: Option<&[std::path::PathBuf]>,
    output: Option<&Path>,
    flags: GetFlags,
    args: &FetchArgs,
) -> anyhow::Result<()> {
    suggest_hint(
        get_inner(socket, data_dir, names, paths, output, flags, args),
        args,
    )
}

fn get_inner(
    socket: &Path,
    data_dir: &Path,
    names: &[String],
    paths: Option<&[std::path::PathBuf]>,
    output: Option<&Path>,
    flags: GetFlags,
    args: &FetchArgs,
) -> anyhow::Result<()> {
    let GetFlags {
        resume,
        json,
        quiet,
        no_dedup,
        no_publish,
        hash_lifetime,
    } = flags;
    if hash_lifetime == 0 {
        anyhow::bail!("--hash-lifetime must be > 0");
    }
    let cfg = args.config_located(socket)?;
    let names: Vec<Name> = names
        .iter()
        .map(|s| name(s))
        .collect::<anyhow::Result<_>>()?;
    // `-o -` is standard output.
    let output = output.filter(|p| p.as_os_str() != "-");
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
    if resume && output.is_none() {
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
    if resume {
        if let Some(Output::Special(s)) = outputs.iter().find(|o| matches!(o, Output::Special(_))) {
            anyhow::bail!(
                "--resume: {} is not a regular file (a FIFO, device or socket is written straight into, in order, so there is no partial download to resume)",
                s.path().unwrap_or_default().display()
            );
        }
    }
    let trust = trust(data_dir, args.integrity_only)?;
    let opts = args.open_options();
    let rt = runtime()?;
    // The node's own repository (this data directory's): a version already
    // there is copied from its file, verified, at disk speed.
    let store = Some(data_dir.join("repo"))
        .filter(|p| p.is_dir())
        .and_then(|p| granary_store::Store::open(p).ok());
    // The publishers' signed manifest roots as received: a kept copy keeps them.
    let mut roots: std::collections::HashMap<String, granary_packet::Data> = Default::default();
    let done: Vec<(ObjectInfo, std::path::PathBuf)> = rt.block_on(async {
        let mut link = UnixLink::connect(socket).await?;
        let mut engine = Engine::new(cfg);
        let mut objects = Vec::new();
        for (n, out) in names.iter().zip(outputs) {
            let (info, root) =
                discover_signed(&mut engine, &mut link, n, trust.clone(), &opts).await?;
            note_integrity_only(&info);
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
            let src = match granary_node::fetched::local_source(store.as_ref(), &info) {
                _ if no_dedup => None,
                Some(p) => Some((None, p)),
                None => tokio::task::block_in_place(|| {
                    granary_node::fetched::node_source(socket, &info)
                })
                .map(|(f, at)| (Some(f), at)),
            };
            let Some((file, src)) = src else {
                fetch.push((info, out));
                continue;
            };
            let from_node = file.is_some();
            let bar = progress_bar(info.map.file_size()).filter(|_| !quiet);
            let b2 = bar.clone();
            let r = tokio::task::block_in_place(|| {
                let progress = move |n| {
                    if let Some(b) = &b2 {
                        b.inc(n)
                    }
                };
                match file {
                    Some(f) => copy_verified_from(f, &src, &info, &out, progress),
                    None => copy_verified(&src, &info, &out, progress),
                }
            });
            if let Some(b) = bar {
                b.finish_and_clear();
            }
            match r {
                Ok(r) => {
                    let whose = if from_node {
                        "the node's repository, its file passed over"
                    } else {
                        "the local repository,"
                    };
                    if !quiet {
                        say!(
                            "{}: {} bytes, {} segments, copied from {whose} {}, every segment verified against {}",
                            r.versioned, r.size, r.segments, r.source.display(), r.verified_by
                        );
                    }
                    copied.push(serde_json::json!({"local_copy": r, "from_node": from_node}));
                }
                // Its reader went away: nothing more can be written there.
                Err(e) if matches!(&out, Output::Special(s) | Output::Stdout(s) if s.reader_gone()) => {
                    local_failed += 1;
                    say!("{}: FAILED: {e}", info.versioned);
                }
                // The same output, still open, gets the rest by name (from
                // where the copy stopped, for a FIFO or standard output).
                Err(e) => {
                    say!("{}: the local repository's copy cannot be used ({e}); fetching it", info.versioned);
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
            granary_node::fetched::node_holds(socket, &names).await
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
        if resume && !quiet {
            say!("--resume: fetching by name (a dedup fetch is not resumable)");
        }
        let mut objects = plain;
        // Neighbours are asked by hash only when the node has some: a route
        // for hash requests through a face that is not the producer's.
        let neighbours = if deduped.is_empty() {
            false
        } else {
            let names: Vec<Name> = deduped.iter().map(|(i, _)| i.versioned.clone()).collect();
            granary_node::fetched::has_neighbours(socket, &names).await
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
                    if !quiet {
                        print_dedup(&r);
                        print_stats(&st);
                    }
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
                    say!("{}: FAILED: {e}", info.versioned);
                    dedup_reports.push(serde_json::json!({
                        "versioned": info.versioned.to_string(), "error": e.to_string()}));
                }
            }
        }
        let n_dedup = dedup_reports.iter().filter(|r| r["by_name"].is_null()).count();
        if objects.is_empty() {
            if json {
                let v = serde_json::json!({"objects": [], "dedup": dedup_reports, "local": copied, "integrity_only": !tag().is_empty(), "located": located(&engine)});
                println!("{v}");
            }
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
        let keepable: Vec<(ObjectInfo, std::path::PathBuf)> = objects
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
        if let Some(bar) = progress_bar(total).filter(|_| !quiet) {
            engine.on_progress(move |b| bar.inc(b));
        }
        let (reports, stats) = fetch_objects(&mut engine, &mut link, objects, resume).await?;
        // The progress bar lives in the engine's callback; clear its line.
        engine.on_progress(|_| {});
        if std::io::stderr().is_terminal() {
            eprint!("\r\x1b[2K");
        }
        let mut failed = 0;
        for r in &reports {
            match &r.error {
                None if quiet => {}
                None => say!(
                    "{}: {} bytes, {} segments{}, every segment verified against {}",
                    r.versioned,
                    r.size.map_or("?".into(), |s| s.to_string()),
                    r.segments,
                    if r.reused_segments > 0 {
                        format!(" ({} already on disk, re-verified)", r.reused_segments)
                    } else {
                        String::new()
                    },
                    r.verified_by
                ),
                Some(e) => {
                    failed += 1;
                    say!("{}: FAILED: {e}", r.versioned);
                }
            }
        }
        for (i, p) in keepable {
            let ok = reports
                .iter()
                .any(|r| r.error.is_none() && r.versioned == i.versioned.to_string());
            if ok {
                keep.push((i, p));
            }
        }
        if !quiet {
            print_stats(&stats);
        }
        if json {
            let v = serde_json::json!({"objects": reports, "stats": stats, "dedup": dedup_reports, "local": copied, "integrity_only": !tag().is_empty(), "located": located(&engine)});
            if output.is_some() {
                println!("{v}");
            } else {
                eprintln!("{v}");
            }
        }
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
            publish_fetched(data_dir, socket, info, p, quiet, root);
        }
    }
    Ok(())
}

/// Keeps a fetched file in the local repository (see
/// `granary_node::fetched::keep_fetched`) and says what came of it; a
/// failure is reported, never fatal: the file itself is complete.
fn publish_fetched(
    data_dir: &Path,
    socket: &Path,
    info: &ObjectInfo,
    p: &Path,
    quiet: bool,
    root: Option<&granary_packet::Data>,
) {
    use granary_node::fetched::Kept;
    match granary_node::fetched::keep_fetched(data_dir, socket, info, p, root) {
        Kept::Skipped => {}
        Kept::NoVersion => say!(
            "{}: not kept in the local repository (no version component)",
            info.versioned
        ),
        Kept::AlreadyHere if !quiet => {
            say!("{} is already in the local repository", info.versioned)
        }
        Kept::Keeping(m) if !quiet => say!("{m}"),
        Kept::AlreadyHere | Kept::Keeping(_) => {}
        Kept::Failed(e) => say!("{}: not kept in the local repository: {e}", info.versioned),
    }
}

/// Chunks first asked of the neighbours; when they have none of them, the
/// rest of the file is fetched by name.
const NEIGHBOUR_PROBE: usize = 64;

/// One line per source: where a dedup fetch's bytes came from.
fn print_dedup(r: &DedupReport) {
    say!(
        "{}: {} bytes, {} segments ({} unique chunks), every segment verified against {}",
        r.versioned,
        r.size,
        r.segments,
        r.unique_chunks,
        r.verified_by
    );
    say!(
        "From local store: {} chunks, {} bytes; neighbours: {} chunks, {} bytes; producer: {} chunks, {} bytes; repeated within the file: {} segments, {} bytes",
        r.local.chunks,
        r.local.bytes,
        r.neighbours.chunks,
        r.neighbours.bytes,
        r.producer.chunks,
        r.producer.bytes,
        r.repeated.chunks,
        r.repeated.bytes
    );
}

/// `granary cat NAME [--offset N] [--length L]`: the bytes to standard output.
pub fn cat(
    socket: &Path,
    data_dir: &Path,
    uri: &str,
    offset: u64,
    length: Option<u64>,
    stats: bool,
    args: &FetchArgs,
) -> anyhow::Result<()> {
    suggest_hint(
        cat_inner(socket, data_dir, uri, offset, length, stats, args),
        args,
    )
}

fn cat_inner(
    socket: &Path,
    data_dir: &Path,
    uri: &str,
    offset: u64,
    length: Option<u64>,
    stats: bool,
    args: &FetchArgs,
) -> anyhow::Result<()> {
    let cfg = args.config_located(socket)?;
    let n = name(uri)?;
    let trust = trust(data_dir, args.integrity_only)?;
    let opts = args.open_options();
    let rt = runtime()?;
    rt.block_on(async {
        let link = UnixLink::connect(socket).await?;
        let mut f = RemoteFile::open(link, Engine::new(cfg), &n, trust, &opts).await?;
        let st = f.stat();
        note_integrity_only(f.info());
        if !tag().is_empty() {
            // The bytes go to standard output: say it beside them.
            say!(
                "{}: its bytes are checked against {}, which proves no origin",
                st.versioned,
                st.verified_by
            );
        }
        if let Some(size) = st.size {
            if offset > size {
                anyhow::bail!(
                    "offset {offset} is beyond the end of {} ({size} bytes)",
                    st.versioned
                );
            }
        }
        let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let out = PipeWatch {
            inner: std::io::stdout(),
            closed: closed.clone(),
        };
        let bytes = match f.copy_range(offset, length.unwrap_or(u64::MAX), out).await {
            Ok(b) => b,
            // A reader that stopped early (`| head`) is not an error.
            Err(_) if closed.load(std::sync::atomic::Ordering::Relaxed) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if stats {
            say!(
                "{}: {bytes} bytes at offset {offset}, verified against {}",
                st.versioned,
                st.verified_by
            );
            print_stats(&f.engine().total);
        }
        Ok(())
    })
}

/// Standard output that notes whether its reader went away (EPIPE).
struct PipeWatch {
    inner: std::io::Stdout,
    closed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl PipeWatch {
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
