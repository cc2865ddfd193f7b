//! `granary get` and `granary cat`: the fetch engine (granary-transfer) from
//! the command line, with ndncatchunks' flag names and defaults.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use granary_packet::Name;
use granary_transfer::{
    dedup_possible, discover, fetch_dedup, fetch_objects, Config, DedupReport, Engine, ObjectInfo,
    OpenOptions, Output, PipelineType, RemoteFile, Sources, Stats, Trust, UnixLink,
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
    /// Stay in slow start until a loss or mark (by default slow start also
    /// ends when RTT samples rise above the path's minimum, as HyStart).
    #[arg(long)]
    pub no_hystart: bool,
}

impl FetchArgs {
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

fn trust(data_dir: &Path) -> anyhow::Result<Arc<Trust>> {
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    Ok(Arc::new(Trust::from_keychain(&kc)?))
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
    eprintln!("Time elapsed: {:.3} s", st.seconds);
    eprintln!("Segments received: {}", st.segments);
    eprintln!("Transferred size: {:.1} kB", st.bytes as f64 / 1e3);
    eprintln!("Goodput: {:.3} Mbit/s", st.goodput_bps() / 1e6);
    eprintln!(
        "Congestion marks: {} (caused {} window decreases)",
        st.congestion_marks, st.decreases_mark
    );
    eprintln!(
        "Timeouts: {} (caused {} window decreases)",
        st.timeouts, st.decreases_loss
    );
    eprintln!(
        "Nacks: {} Congestion (caused {} window decreases), {} Duplicate, {} other",
        st.nacks_congestion, st.decreases_nack, st.nacks_duplicate, st.nacks_other
    );
    eprintln!(
        "Retransmitted segments: {} ({:.4}%), rejected (failed verification): {}",
        st.retransmissions,
        pct(st.retransmissions),
        st.rejected
    );
    eprintln!(
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
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bytes}/{total_bytes} {binary_bytes_per_sec} {wide_bar} ETA {eta}",
    ) {
        bar.set_style(style);
    }
    Some(bar)
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
    let cfg = args.config()?;
    let names: Vec<Name> = names
        .iter()
        .map(|s| name(s))
        .collect::<anyhow::Result<_>>()?;
    // `-o -` is standard output.
    let output = output.filter(|p| p.as_os_str() != "-");
    let to_dir = names.len() > 1 || paths.is_some() || output.is_some_and(|p| p.is_dir());
    if let (Some(dir), Some(_)) = (output, paths) {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
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
            (None, _) => Ok(Output::Stdout),
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
        if let Some(Output::Special(p)) = outputs.iter().find(|o| matches!(o, Output::Special(_))) {
            anyhow::bail!(
                "--resume: {} is not a regular file (a FIFO, device or socket is written straight into, in order, so there is no partial download to resume)",
                p.display()
            );
        }
    }
    let trust = trust(data_dir)?;
    let opts = args.open_options();
    let rt = runtime()?;
    let done: Vec<(ObjectInfo, std::path::PathBuf)> = rt.block_on(async {
        let mut link = UnixLink::connect(socket).await?;
        let mut engine = Engine::new(cfg);
        let mut objects = Vec::new();
        for (n, out) in names.iter().zip(outputs) {
            let info = discover(&mut engine, &mut link, n, trust.clone(), &opts).await?;
            objects.push((info, out));
        }
        // Segments checked against a manifest: hash their content on the
        // socket reader's thread, beside the engine's.
        link.prehash(objects.iter().any(|(i, _)| i.has_manifest()));
        // Dedup fetch for every regular-file output whose manifest gives the
        // chunk hashes; the rest (standard output, FIFOs, devices, sockets,
        // --resume, --no-dedup, no manifest) by name, in order where needed.
        let mut deduped = Vec::new();
        let mut plain = Vec::new();
        for (info, out) in objects {
            match out {
                Output::File(p) if !no_dedup && !resume && dedup_possible(&info) => {
                    deduped.push((info, p))
                }
                out => plain.push((info, out)),
            }
        }
        if resume && !quiet {
            eprintln!("--resume: fetching by name (a dedup fetch is not resumable)");
        }
        let objects = plain;
        let mut sources = Sources::new(
            Some(name(granary_repo::LOCAL_HASH_PREFIX)?),
            Some(name(granary_repo::HASH_PREFIX)?),
        );
        sources.neighbour_lifetime = Duration::from_millis(hash_lifetime);
        let mut dedup_reports = Vec::new();
        let mut dedup_failed = 0;
        // Bytes fetched so far (chunks repeated in a file are not fetched
        // again, so there is no fixed total).
        if let Some(bar) = progress_bar(None).filter(|_| !quiet && !deduped.is_empty()) {
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{spinner} {bytes} {binary_bytes_per_sec}")
            {
                bar.set_style(style);
            }
            engine.on_progress(move |b| bar.inc(b));
        }
        for (info, p) in &deduped {
            let got = fetch_dedup(&mut engine, &mut link, info, p, &sources).await;
            if std::io::stderr().is_terminal() && !quiet {
                eprint!("\r\x1b[2K");
            }
            match got {
                Ok((r, st)) => {
                    if !quiet {
                        print_dedup(&r);
                        print_stats(&st);
                    }
                    dedup_reports.push(serde_json::json!({"report": r, "stats": st}));
                }
                Err(e) => {
                    dedup_failed += 1;
                    eprintln!("{}: FAILED: {e}", info.versioned);
                    dedup_reports.push(serde_json::json!({
                        "versioned": info.versioned.to_string(), "error": e.to_string()}));
                }
            }
        }
        if objects.is_empty() {
            if json {
                let v = serde_json::json!({"objects": [], "dedup": dedup_reports});
                println!("{v}");
            }
            if dedup_failed > 0 {
                anyhow::bail!(
                    "{dedup_failed} of {} object(s) failed; nothing unverified was written as good",
                    deduped.len()
                );
            }
            return Ok(deduped);
        }
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
                None => eprintln!(
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
                    eprintln!("{}: FAILED: {e}", r.versioned);
                }
            }
        }
        if !quiet {
            print_stats(&stats);
        }
        if json {
            let v = serde_json::json!({"objects": reports, "stats": stats, "dedup": dedup_reports});
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
                reports.len() + deduped.len()
            );
        }
        Ok(deduped)
    })?;
    if !no_publish {
        for (info, p) in &done {
            publish_fetched(data_dir, socket, info, p, quiet);
        }
    }
    Ok(())
}

/// One line per source: where a dedup fetch's bytes came from.
fn print_dedup(r: &DedupReport) {
    eprintln!(
        "{}: {} bytes, {} segments ({} unique chunks), every segment verified against {}",
        r.versioned, r.size, r.segments, r.unique_chunks, r.verified_by
    );
    eprintln!(
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

/// Publishes a dedup-fetched file into the local repository under its
/// versioned name, with the chunking that reproduces the manifest's
/// segments (so its chunk hashes are the manifest's and neighbours can ask
/// for them). A failure is reported, not fatal: the file is complete.
fn publish_fetched(data_dir: &Path, socket: &Path, info: &ObjectInfo, p: &Path, quiet: bool) {
    // Only a regular file can be published (a FIFO's bytes are gone, a
    // device is no copy of them); dedup outputs are regular, but be sure.
    if !std::fs::metadata(p).is_ok_and(|m| m.is_file()) {
        return;
    }
    let (Some(version), prefix) = (
        info.versioned.last().and_then(|c| c.as_version()),
        info.versioned.prefix(-1),
    ) else {
        eprintln!("{}: not published (no version component)", info.versioned);
        return;
    };
    let lengths: Vec<u64> = (0..info.map.count())
        .map(|s| info.map.len(s).unwrap_or(0))
        .collect();
    let run = || -> anyhow::Result<String> {
        let (chunking, note) = match crate::repo::matching_chunking(data_dir, p, &lengths)? {
            Some(c) => (c, "its chunk hashes are the manifest's"),
            None => (
                granary_store::Store::open(data_dir.join("repo"))?.default_chunking()?,
                "WARNING: no known chunking reproduces the manifest's segments, so neighbours cannot find its chunks by hash",
            ),
        };
        let v = crate::repo::publish_fetched(data_dir, socket, p, &prefix, version, chunking)?;
        Ok(format!(
            "published into the local repository as {} ({chunking}; {note})",
            v["versioned"].as_str().unwrap_or_default()
        ))
    };
    let have = granary_store::Store::open(data_dir.join("repo"))
        .and_then(|s| s.get(&prefix, Some(version)))
        .is_ok();
    if have {
        if !quiet {
            eprintln!("{} is already in the local repository", info.versioned);
        }
        return;
    }
    match run() {
        Ok(m) if !quiet => eprintln!("{m}"),
        Ok(_) => {}
        Err(e) => eprintln!(
            "{}: not published into the local repository: {e}",
            info.versioned
        ),
    }
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
    let cfg = args.config()?;
    let n = name(uri)?;
    let trust = trust(data_dir)?;
    let opts = args.open_options();
    let rt = runtime()?;
    rt.block_on(async {
        let link = UnixLink::connect(socket).await?;
        let mut f = RemoteFile::open(link, Engine::new(cfg), &n, trust, &opts).await?;
        let st = f.stat();
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
            eprintln!(
                "{}: {bytes} bytes at offset {offset}, verified against {}",
                st.versioned, st.verified_by
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
