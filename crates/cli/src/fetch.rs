//! `granary get` and `granary cat`: the fetch engine (granary-transfer) from
//! the command line, with ndncatchunks' flag names and defaults.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use granary_node::fetch::{Config, Event, OpenOptions, PipelineType, Stats};
use granary_node::fetched::Kept;
use granary_packet::Name;

/// `granary get`'s flags.
#[derive(clap::Args)]
pub struct GetArgs {
    /// Name(s), with or without version.
    #[arg(required_unless_present = "query")]
    pub names: Vec<String>,
    /// Fetch every file the catalog query matches (e.g. 'source_id=CanESM5
    /// variable_id=tas experiment_id=historical'), under one congestion
    /// window, into -o DIR in the DRS directory layout.
    #[arg(
        long,
        value_name = "QUERY",
        conflicts_with = "names",
        requires = "output"
    )]
    pub query: Option<String>,
    /// With --query: write every file straight into DIR (no DRS
    /// directories).
    #[arg(long, requires = "query")]
    pub flat: bool,
    /// With --query: list the files and the total size, fetch nothing.
    #[arg(long, requires = "query")]
    pub dry_run: bool,
    /// Output file (one name) or directory (several names, an existing
    /// directory, or a path ending in `/`, which is made when missing;
    /// one file per name, named after its last component). A file's
    /// directory must exist. Default (or `-`):
    /// standard output. An existing FIFO, device or socket is written
    /// straight into, in order (no FILE.part, no rename, no --resume);
    /// a symbolic link's target is written and the link kept.
    #[arg(short, long)]
    pub output: Option<std::path::PathBuf>,
    /// Continue an interrupted download: segments already in FILE.part
    /// are re-verified and kept; only the rest is fetched.
    #[arg(long)]
    pub resume: bool,
    /// Also print the statistics and per-object results as JSON (on
    /// standard output with -o, else on standard error).
    #[arg(long)]
    pub json: bool,
    /// No summary on standard error (errors are still reported).
    #[arg(short, long)]
    pub quiet: bool,
    /// Fetch every segment by name, in order. By default, for a file
    /// whose signed manifest gives every chunk's SHA-256: a version the
    /// local repository holds is copied from it (verified, no Interest);
    /// one the node's repository holds (another application's data
    /// directory on the node) is copied the same way from the node's file,
    /// which the node passes over `<socket>.files` (verified against the
    /// manifest; by name when the node cannot pass it);
    /// otherwise the chunks the local repository has (one batch query) come
    /// from it, neighbours are asked by hash request
    /// (/localhop/granary/sha256/<hash>, short lifetime) when the node has
    /// any, and the rest comes from the producer by name — the whole file
    /// in the by-name pipeline when nothing was found nearby. Every chunk
    /// is checked against the manifest; a chunk repeated inside the file is
    /// fetched once.
    #[arg(long)]
    pub no_dedup: bool,
    /// Do not keep the fetched file in the local repository (by default
    /// the daemon copies it in, in the background, under the same
    /// versioned name, so that neighbours can fetch its chunks by hash;
    /// it is published only if its chunks are still the manifest's).
    #[arg(long)]
    pub no_publish: bool,
    /// InterestLifetime of hash requests to neighbours (ms); on timeout
    /// the producer is asked (carepo: 500).
    #[arg(long, default_value_t = 500)]
    pub hash_lifetime: u64,
    #[command(flatten)]
    pub fetch: FetchArgs,
}

/// `granary cat`'s flags.
#[derive(clap::Args)]
pub struct CatArgs {
    /// Name, with or without version.
    pub name: String,
    /// First byte.
    #[arg(long, default_value_t = 0)]
    pub offset: u64,
    /// Bytes to print (default: to the end).
    #[arg(long)]
    pub length: Option<u64>,
    /// Print the fetch statistics on standard error.
    #[arg(long)]
    pub stats: bool,
    #[command(flatten)]
    pub fetch: FetchArgs,
}

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
    pub fn locator(
        &self,
        socket: &Path,
    ) -> anyhow::Result<Option<granary_node::fetch::LocatorRef>> {
        if self.no_locate || !self.fwhint.is_empty() {
            return Ok(None);
        }
        let timeout = granary_node::federation::node_timeout(self.node_timeout)?;
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
        let mut cfg = granary_node::fetch::checked(Config {
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
        })?;
        cfg.forwarding_hint = granary_node::fetch::hint_names(&self.fwhint)?;
        Ok(cfg)
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

/// `eprintln!`, starting with [`tag`].
macro_rules! say {
    ($($t:tt)*) => {
        eprintln!("{}{}", tag(), format_args!($($t)*))
    };
}

/// ndncatchunks-style summary on standard error.
fn print_stats(st: &Stats) {
    for l in granary_node::fetch::stats_lines(st) {
        say!("{l}");
    }
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

/// `granary get NAME… [-o FILE|DIR] [--resume] [--json] [-q]`: the fetch is
/// `granary_node::fetch::get`; this prints what it tells.
pub fn get(socket: &Path, data_dir: &Path, a: &GetArgs) -> anyhow::Result<()> {
    let (names, paths) = match &a.query {
        None => (a.names.clone(), None),
        Some(q) => {
            let catalog = granary_node::catalog::catalog_spec();
            let plan = granary_node::query::plan_query_get(data_dir, socket, catalog, q, a.flat)?;
            let total: u64 = plan.iter().map(|p| p.2).sum();
            if a.dry_run || !a.quiet {
                for (n, p, size) in &plan {
                    println!("{n} -> {} ({size} bytes)", p.display());
                }
                eprintln!("{} file(s), {total} bytes", plan.len());
            }
            if a.dry_run {
                return Ok(());
            }
            if plan.is_empty() {
                anyhow::bail!("no file matches {q:?}");
            }
            let (names, paths): (Vec<String>, Vec<_>) =
                plan.into_iter().map(|(n, p, _)| (n, p)).unzip();
            (names, Some(paths))
        }
    };
    let (args, output) = (&a.fetch, a.output.as_deref());
    let r = (|| {
        let cfg = args.config_located(socket)?;
        let names: Vec<Name> = names
            .iter()
            .map(|s| name(s))
            .collect::<anyhow::Result<_>>()?;
        let quiet = a.quiet;
        let g = granary_node::fetch::Get {
            names,
            paths,
            output: output.map(Path::to_path_buf),
            resume: a.resume,
            no_dedup: a.no_dedup,
            no_publish: a.no_publish,
            hash_lifetime: a.hash_lifetime,
            integrity_only: args.integrity_only,
            open: args.open_options(),
            progress: !quiet && std::io::stderr().is_terminal(),
        };
        let (json, to_stdout) = (a.json, output.is_some_and(|p| p.as_os_str() != "-"));
        let bar = std::sync::Mutex::new(None::<indicatif::ProgressBar>);
        let ev = move |e: Event<'_>| show(e, quiet, json, to_stdout, &bar);
        granary_node::fetch::get(socket, data_dir, cfg, g, std::sync::Arc::new(ev))
    })();
    granary_node::fetch::suggest_hint(r, !args.fwhint.is_empty(), args.no_locate)
}

/// Prints one event of `get`.
fn show(
    e: Event<'_>,
    quiet: bool,
    json: bool,
    to_stdout: bool,
    bar: &std::sync::Mutex<Option<indicatif::ProgressBar>>,
) {
    let bar = || bar.lock().unwrap_or_else(|p| p.into_inner());
    match e {
        Event::IntegrityOnly => INTEGRITY_ONLY.store(true, std::sync::atomic::Ordering::Relaxed),
        Event::ProgressStart(total) => *bar() = progress_bar(total),
        Event::Progress(n) => {
            if let Some(b) = &*bar() {
                b.inc(n)
            }
        }
        Event::ProgressDone => {
            if let Some(b) = bar().take() {
                b.finish_and_clear();
            }
        }
        Event::FetchProgressDone => {
            // The bar lived in the engine's callback; clear its line.
            bar().take();
            if std::io::stderr().is_terminal() {
                eprint!("\r\x1b[2K");
            }
        }
        Event::Copied {
            report: r,
            from_node,
        } => {
            let whose = if from_node {
                "the node's repository, its file passed over"
            } else {
                "the local repository,"
            };
            let how = match r.read_direct {
                0 => "through the page cache",
                n if n == r.size => "with direct I/O",
                _ => "partly with direct I/O",
            };
            if !quiet {
                say!(
                    "{}: {} bytes, {} segments, copied from {whose} {} (read {how}), every segment verified against {}",
                    r.versioned, r.size, r.segments, r.source.display(), r.verified_by
                );
            }
        }
        Event::Failed { versioned, error } => say!("{versioned}: FAILED: {error}"),
        Event::LocalUnusable { versioned, error } => {
            say!("{versioned}: the local repository's copy cannot be used ({error}); fetching it")
        }
        Event::ResumeByName if !quiet => {
            say!("--resume: fetching by name (a dedup fetch is not resumable)")
        }
        Event::Deduped { report, stats } if !quiet => {
            for l in granary_node::fetch::dedup_lines(report) {
                say!("{l}");
            }
            print_stats(stats);
        }
        Event::Fetched(r) => match &r.error {
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
            Some(e) => say!("{}: FAILED: {e}", r.versioned),
        },
        Event::Stats(st) if !quiet => print_stats(st),
        Event::Json { report, by_name } if json => {
            if to_stdout || !by_name {
                crate::out::json_answer(report);
            } else {
                eprintln!("{report}");
            }
        }
        Event::Kept { versioned, kept } => match kept {
            Kept::Skipped => {}
            Kept::NoVersion => {
                say!("{versioned}: not kept in the local repository (no version component)")
            }
            Kept::AlreadyHere if !quiet => {
                say!("{versioned} is already in the local repository")
            }
            Kept::Keeping(m) if !quiet => say!("{m}"),
            Kept::AlreadyHere | Kept::Keeping(_) => {}
            Kept::Failed(e) => say!("{versioned}: not kept in the local repository: {e}"),
        },
        _ => {}
    }
}

/// `granary cat NAME [--offset N] [--length L]`: the bytes to standard output.
pub fn cat(socket: &Path, data_dir: &Path, a: &CatArgs) -> anyhow::Result<()> {
    let (args, offset, length) = (&a.fetch, a.offset, a.length);
    let r = (|| {
        let cfg = args.config_located(socket)?;
        let n = name(&a.name)?;
        let (out, closed) = granary_node::fetch::PipeWatch::stdout();
        let opts = args.open_options();
        let c = granary_node::fetch::cat(
            socket,
            data_dir,
            cfg,
            &n,
            offset,
            length,
            &opts,
            args.integrity_only,
            out,
            |versioned, verified_by| {
                INTEGRITY_ONLY.store(true, std::sync::atomic::Ordering::Relaxed);
                // The bytes go to standard output: say it beside them.
                say!("{versioned}: its bytes are checked against {verified_by}, which proves no origin");
            },
        );
        let c = match c {
            Ok(c) => c,
            // A reader that stopped early (`| head`) is not an error.
            Err(_) if closed.load(std::sync::atomic::Ordering::Relaxed) => return Ok(()),
            Err(e) => return Err(e),
        };
        if a.stats {
            say!(
                "{}: {} bytes at offset {offset}, verified against {}",
                c.versioned,
                c.bytes,
                c.verified_by
            );
            print_stats(&c.stats);
        }
        Ok(())
    })();
    granary_node::fetch::suggest_hint(r, !args.fwhint.is_empty(), args.no_locate)
}
