//! The `granary` command: a thin layer over the library crates.

mod alloc;
mod args;
mod dedup;
mod dissect;
mod federation;
mod fetch;
mod key;
mod linkem;
mod mount;
mod node;
mod out;
mod perf;
mod replicate;
mod repo;
mod science;
mod scrub;
mod selfcheck;
mod sim;
mod testbed;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use granary_node::catalog;

/// Granary: a named-data (NDN) node, repository and distribution tools for
/// big-science data.
#[derive(Parser)]
#[command(name = "granary", version, about, long_about = None)]
struct Cli {
    /// Data directory (keychain, repository). Default: $XDG_DATA_HOME/granary
    /// or ~/.local/share/granary.
    #[arg(long, global = true, env = "GRANARY_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,

    /// The node's Unix socket. Default: <data-dir>/granary.sock.
    #[arg(long, global = true, env = "GRANARY_SOCKET", value_name = "PATH")]
    socket: Option<PathBuf>,

    /// The science catalog: a directory, or `postgres://…` for one shared by
    /// several nodes. Default: <data-dir>/catalog (embedded SQLite). With a
    /// standby: `postgres://h1,h2/db?target_session_attrs=read-write` (the
    /// host that takes writes; after a failover the nodes reconnect, and
    /// changes made meanwhile are queued on disk).
    #[arg(long, global = true, env = "GRANARY_CATALOG", value_name = "DIR|URL")]
    catalog: Option<String>,

    /// Log filter for the daemon (e.g. info, debug, granary_face=debug).
    #[arg(long, global = true, env = "GRANARY_LOG", default_value = "info")]
    log: String,

    /// Log format of the daemon: `text` (coloured only on a terminal and
    /// without NO_COLOR) or `json` (one JSON object per line).
    #[arg(
        long,
        global = true,
        env = "GRANARY_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text
    )]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

/// `--log-format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (tracing-subscriber's json formatter).
    Json,
}

/// The daemon's log on standard error. ANSI colours only when standard
/// error is a terminal and `NO_COLOR` is unset or empty (no-color.org).
fn init_logging(filter: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| "info".into());
    let ansi = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(ansi).init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

#[derive(Subcommand)]
enum Command {
    /// Print the TLV structure of packets (like ndn-tools' ndn-dissect).
    ///
    /// Reads a stream of TLV packets (Interest, Data, LpPacket, Name, or any
    /// TLV) from FILE or standard input. Text output is an indented tree;
    /// --json prints one JSON object per packet per line with the name as a
    /// canonical URI, every field, the signature and validity.
    Dissect {
        /// Input file; `-` or nothing for standard input.
        file: Option<PathBuf>,
        /// The input is hexadecimal text (whitespace ignored).
        #[arg(long, conflicts_with = "base64")]
        hex: bool,
        /// The input is base64 text (e.g. an .ndncert file).
        #[arg(long)]
        base64: bool,
        /// Print JSON lines instead of a tree.
        #[arg(long)]
        json: bool,
    },
    /// Manage keys and certificates in the data directory's keychain.
    #[command(subcommand)]
    Key(key::KeyCmd),
    /// Run the node: forwarder with Unix, TCP and UDP listeners and NFD
    /// management. No config file needed; stops cleanly on SIGTERM/SIGINT.
    Daemon(node::DaemonArgs),
    /// Show the node's general status.
    Status,
    /// List, create or destroy faces.
    #[command(subcommand)]
    Face(node::FaceCmd),
    /// List, add or remove routes.
    #[command(subcommand)]
    Route(node::RouteCmd),
    /// Show strategy choices, or set one: `granary strategy set PREFIX best-route|multicast`.
    Strategy {
        /// `set` to change a choice (omit to list).
        #[arg(value_parser = ["set", "list"])]
        action: Option<String>,
        /// Name prefix.
        prefix: Option<String>,
        /// Strategy: best-route, multicast, or a full strategy name.
        strategy: Option<String>,
    },
    /// Content Store information and configuration.
    #[command(subcommand)]
    Cs(node::CsCmd),
    /// Express one Interest and print the Data's content (or the Nack).
    Peek {
        /// Name.
        name: String,
        /// CanBePrefix.
        #[arg(long)]
        prefix: bool,
        /// MustBeFresh.
        #[arg(long)]
        fresh: bool,
        /// InterestLifetime in ms.
        #[arg(long, default_value_t = 4000)]
        lifetime: u64,
        /// Print the content as hex.
        #[arg(long)]
        hex: bool,
        /// ForwardingHint (as ndnpeek's --fwhint; repeatable, in order).
        #[arg(long = "fwhint", value_name = "NAME")]
        fwhint: Vec<String>,
        /// ApplicationParameters from FILE (`-`: standard input), as
        /// ndnpeek's --payload; the name gets its ParametersSha256Digest.
        #[arg(short = 'P', long, value_name = "FILE")]
        payload: Option<PathBuf>,
    },
    /// Publish a file (or `-` for standard input) into the repository under
    /// NAME; a version component is added. Served as soon as this returns.
    Put {
        /// File to publish, or `-`.
        file: PathBuf,
        /// Name (without version), e.g. /cmip6/tas/file.nc.
        name: String,
        /// Version number (default: now, in microseconds).
        #[arg(long)]
        version: Option<u64>,
        /// Signing: `manifest` (one signed manifest per version, segments
        /// checked against it), `ed25519`/`ecdsa` (every packet signed when
        /// served), `digest` (integrity only).
        #[arg(long, default_value = "manifest", value_parser = ["manifest", "ed25519", "ecdsa", "digest"])]
        sign: String,
        /// Key (default: the keychain's default; one is created if there is none).
        #[arg(long)]
        key: Option<String>,
        /// Keep only the newest N versions of this name (older ones are removed
        /// once the new one is published). Default: keep all.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        keep: Option<u64>,
        /// Content bytes per segment (256 … 1048576; default 8192). Above
        /// 8 KiB every node on the path needs a larger `max_packet` (daemon
        /// config), as NDN-DPDK and ndn-cxx apps keep the 8800-byte default.
        #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(256..=1_048_576))]
        segment_size: Option<u32>,
        #[command(flatten)]
        chunking: ChunkArgs,
        /// Do not add the segments to the hash index (they are not served to
        /// hash requests until `granary repo reindex`); for measurements.
        #[arg(long)]
        no_index: bool,
        /// Also compute the SHA-256 of the whole file (one more hashing pass
        /// at ingest); shown by `stat` and carried in the manifest root.
        /// Without it the manifest's hash tree identifies the content.
        #[arg(long)]
        sha256: bool,
        /// Print the result as JSON (version, size, segments, and `catalog`:
        /// `done`, `queued` while the catalog is unavailable — kept on the
        /// node and catalogued when it is back — or `failed`).
        #[arg(long)]
        json: bool,
    },
    /// Repository maintenance: hash index, settings.
    #[command(subcommand)]
    Repo(RepoCmd),
    /// How much content-defined chunking would save: per file, chunks and
    /// unique chunks; across the files, unique chunks, shared bytes and the
    /// saving. Fixed 8 KiB, FastCDC and Rabin side by side unless
    /// --chunking picks one (carepo's Table III / Fig. 2 analysis).
    Dedup {
        /// Files to analyse.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        chunking: ChunkArgs,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Fetch files by name through the node: pipelined (CUBIC by default),
    /// verified, resumable.
    ///
    /// Each NAME's version is found with RDR (NAME/32=metadata) unless it
    /// ends with a version. Segments are checked against the signed manifest
    /// when the producer has one (Granary's repository), otherwise against
    /// each packet's signature and the keychain's trust anchors; a segment
    /// that fails is requested again, then the run fails with its number and
    /// name. Bad bytes are never written as good: the output is written as
    /// FILE.part and renamed when every segment is verified. Several names
    /// share one congestion window. Flags follow ndncatchunks.
    Get {
        /// Name(s), with or without version.
        #[arg(required_unless_present = "query")]
        names: Vec<String>,
        /// Fetch every file the catalog query matches (e.g. 'source_id=CanESM5
        /// variable_id=tas experiment_id=historical'), under one congestion
        /// window, into -o DIR in the DRS directory layout.
        #[arg(
            long,
            value_name = "QUERY",
            conflicts_with = "names",
            requires = "output"
        )]
        query: Option<String>,
        /// With --query: write every file straight into DIR (no DRS
        /// directories).
        #[arg(long, requires = "query")]
        flat: bool,
        /// With --query: list the files and the total size, fetch nothing.
        #[arg(long, requires = "query")]
        dry_run: bool,
        /// Output file (one name) or directory (several names, an existing
        /// directory, or a path ending in `/`, which is made when missing;
        /// one file per name, named after its last component). A file's
        /// directory must exist. Default (or `-`):
        /// standard output. An existing FIFO, device or socket is written
        /// straight into, in order (no FILE.part, no rename, no --resume);
        /// a symbolic link's target is written and the link kept.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Continue an interrupted download: segments already in FILE.part
        /// are re-verified and kept; only the rest is fetched.
        #[arg(long)]
        resume: bool,
        /// Also print the statistics and per-object results as JSON (on
        /// standard output with -o, else on standard error).
        #[arg(long)]
        json: bool,
        /// No summary on standard error (errors are still reported).
        #[arg(short, long)]
        quiet: bool,
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
        no_dedup: bool,
        /// Do not keep the fetched file in the local repository (by default
        /// the daemon copies it in, in the background, under the same
        /// versioned name, so that neighbours can fetch its chunks by hash;
        /// it is published only if its chunks are still the manifest's).
        #[arg(long)]
        no_publish: bool,
        /// InterestLifetime of hash requests to neighbours (ms); on timeout
        /// the producer is asked (carepo: 500).
        #[arg(long, default_value_t = 500)]
        hash_lifetime: u64,
        #[command(flatten)]
        fetch: fetch::FetchArgs,
    },
    /// Have other nodes hold a copy of a version, keeping the publisher's
    /// signature.
    ///
    /// Sends a signed command (this node's default key; the target checks
    /// it against its trust anchors) to each node --to names (or, with
    /// --replicas N, N up nodes the location catalog has without it); the target
    /// fetches the version (verified; chunks it holds come from its own
    /// store), keeps the publisher's signed manifest root byte for byte,
    /// serves it under the same versioned name and registers the location.
    /// Waits for the outcome unless --no-wait.
    Replicate(replicate::ReplicateArgs),
    /// Search the science catalog: facets, free text, time coverage.
    ///
    /// Asks the local node's catalog (through the daemon when it runs, else
    /// the data directory's catalog directly), or a remote node's with
    /// --node. Example: `granary search source_id=CanESM5 variable_id=tas
    /// experiment_id=historical,ssp585 --facets`.
    Search(science::SearchArgs),
    /// Publish a directory tree of science files: DRS names translated to
    /// NDN names, netCDF metadata read, every file published and catalogued.
    ///
    /// Each file gets one outcome: translated, translated with named fixes,
    /// or rejected with the reason (rejected files are not published unless
    /// --others-under is given). Files published before and unchanged since
    /// are skipped, so an interrupted run can simply be started again. The
    /// report (counts, each fix, each rejection) is printed and written as
    /// JSON.
    PublishDir(science::PublishDirArgs),
    /// Write a small CMIP6-like DRS tree of valid netCDF files to DIR (to try
    /// `publish-dir` and `search`).
    ExampleData {
        /// Output directory.
        dir: PathBuf,
    },
    /// The science catalog: rebuild it from the files, show a record,
    /// translate names.
    #[command(subcommand)]
    Catalog(science::CatalogCmd),
    /// The federation's location catalog: nodes up and down, where names
    /// are, and whether nodes serve what they claim (docs/federation.md).
    #[command(subcommand)]
    Federation(federation::FederationCmd),
    /// Print a byte range of a remote file: only the segments covering it are
    /// fetched (and verified).
    Cat {
        /// Name, with or without version.
        name: String,
        /// First byte.
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Bytes to print (default: to the end).
        #[arg(long)]
        length: Option<u64>,
        /// Print the fetch statistics on standard error.
        #[arg(long)]
        stats: bool,
        #[command(flatten)]
        fetch: fetch::FetchArgs,
    },
    /// Mount a namespace as a file system (FUSE): read-only and verified,
    /// or with --publish a writable NDNFS over the local repository.
    Mount(mount::MountArgs),
    /// List published files under a prefix.
    Ls {
        /// Prefix (default: everything).
        prefix: Option<String>,
    },
    /// Show a published file's metadata.
    Stat {
        /// Name.
        name: String,
        /// One JSON object: the metadata, the file's path, the signed
        /// manifest root it serves (`manifest`: name, digest, signature type
        /// and signer, the publisher's key for a replica) and any damage.
        #[arg(long)]
        json: bool,
    },
    /// Rename a published file (all versions); O(1), nothing re-signed.
    Mv {
        /// Current name.
        old: String,
        /// New name.
        new: String,
    },
    /// Remove a published file (all versions, or one).
    Rm {
        /// Name.
        name: String,
        /// Only this version.
        #[arg(long)]
        version: Option<u64>,
    },
    /// Serve synthetic Data under a prefix (a producer for tests and
    /// measurements): content is SIZE bytes derived from the name.
    Serve {
        /// Name prefix to register.
        prefix: String,
        /// Content size in bytes.
        #[arg(long, default_value_t = 1024)]
        size: usize,
        /// FreshnessPeriod in ms.
        #[arg(long, default_value_t = 10_000)]
        freshness: u64,
        /// Wait this long before answering each Interest (ms).
        #[arg(long, default_value_t = 0)]
        delay_ms: u64,
    },
    /// Emulate a link for UDP: relay datagrams with delay, loss, rate and a
    /// bounded queue per direction (for testbeds on kernels without netem).
    Linkem(linkem::LinkemArgs),
    /// Check that this build works on this machine: packets, every signature
    /// algorithm, certificates, signed Interests. Exits non-zero on failure.
    Selfcheck,
    /// Simulations on the node's own code (`sim cache`: cache-policy study).
    Sim(sim::SimArgs),
    /// Experiments on the netns testbed (`testbed run experiments/NAME.toml
    /// --out DIR`): report, CSV and plots. Needs root.
    Testbed(testbed::TestbedArgs),
    /// Producer signing throughput, ndnperf-style (`perf serve`, `perf fetch`).
    Perf(perf::PerfArgs),
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
        #[arg(long, value_name = "SIG", value_parser = granary_node::repo::SEGMENT_SIGNATURES)]
        segment_signature: Option<String>,
    },
    /// Re-hash stored files against the hashes taken when they were
    /// published (`.hashes`) and their signed manifests; record damaged
    /// versions (`granary stat` shows them; the daemon stops serving their
    /// bad segments and RDR discovery prefers an older good version), and
    /// with --repair-from restore bad segments from another node. A clean
    /// version published before serve-time CRC-32s existed gets its
    /// `.crc32` file, so the node serves it with one CRC-32 per segment
    /// instead of a second SHA-256. Exits non-zero while damage remains.
    Scrub(scrub::ScrubArgs),
}

/// Chunking flags (put, dedup).
#[derive(clap::Args, Clone, Default)]
pub struct ChunkArgs {
    /// How files are cut into segments: `fixed`, `fastcdc` (content-defined,
    /// FastCDC 2020) or `rabin` (31-byte-window Rabin fingerprint, as
    /// carepo), optionally with sizes as `fastcdc:MIN:AVG:MAX`. Default for
    /// put: the repository's setting (`granary repo config`), else fastcdc
    /// (3/5/8 KiB).
    #[arg(long, value_name = "SCHEME")]
    pub chunking: Option<String>,
    /// Smallest chunk in bytes (content-defined; default 3072).
    #[arg(long, value_name = "BYTES", requires = "chunking")]
    pub chunk_min: Option<u32>,
    /// Average chunk in bytes (default 5120).
    #[arg(long, value_name = "BYTES", requires = "chunking")]
    pub chunk_avg: Option<u32>,
    /// Largest chunk in bytes (default 8192, at most 8192; for `fixed`, the
    /// segment size).
    #[arg(long, value_name = "BYTES", requires = "chunking")]
    pub chunk_max: Option<u32>,
}

impl ChunkArgs {
    /// The scheme the flags ask for, if any.
    pub fn resolve(&self) -> anyhow::Result<Option<granary_node::repo::Chunking>> {
        let Some(c) = &self.chunking else {
            return Ok(None);
        };
        if c.contains(':') {
            if self.chunk_min.is_some() || self.chunk_avg.is_some() || self.chunk_max.is_some() {
                anyhow::bail!(
                    "give sizes either in --chunking or with --chunk-min/avg/max, not both"
                );
            }
            return Ok(Some(c.parse().map_err(|e: String| anyhow::anyhow!(e))?));
        }
        Ok(Some(
            granary_node::repo::Chunking::from_parts(
                c,
                self.chunk_min,
                self.chunk_avg,
                self.chunk_max,
            )
            .map_err(|e| anyhow::anyhow!(e))?,
        ))
    }
}

fn default_data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(x).join("granary");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/share/granary")
}

fn socket_path(socket: Option<&PathBuf>, data_dir: &Path) -> PathBuf {
    socket
        .cloned()
        .unwrap_or_else(|| data_dir.join("granary.sock"))
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let data_dir = cli.data_dir.unwrap_or_else(default_data_dir);
    // A client command uses the catalog and node timeout of this data
    // directory's daemon unless told otherwise (--catalog, GRANARY_CATALOG,
    // --node-timeout).
    let (spec, timeout) = if matches!(cli.command, Command::Daemon(_)) {
        (cli.catalog, None)
    } else {
        let s = catalog::daemon_settings(&data_dir);
        let t = s
            .node_timeout
            .filter(|t| t.is_finite() && *t > 0.0 && *t <= 30.0 * 86400.0)
            .map(std::time::Duration::from_secs_f64);
        (cli.catalog.or(s.catalog), t)
    };
    catalog::set_catalog_spec(spec);
    catalog::set_default_node_timeout(timeout);
    let socket = socket_path(cli.socket.as_ref(), &data_dir);
    match cli.command {
        Command::Daemon(args) => {
            init_logging(&cli.log, cli.log_format);
            node::run_daemon(args, socket, &data_dir)
        }
        Command::Status => node::status(&socket),
        Command::Face(c) => node::face(&socket, c),
        Command::Route(c) => node::route(&socket, c),
        Command::Strategy {
            action,
            prefix,
            strategy,
        } => {
            if action.as_deref() == Some("set") && (prefix.is_none() || strategy.is_none()) {
                anyhow::bail!("usage: granary strategy set PREFIX STRATEGY");
            }
            node::strategy(&socket, prefix, strategy)
        }
        Command::Cs(c) => node::cs(&socket, c),
        Command::Put {
            file,
            name,
            version,
            sign,
            key,
            keep,
            segment_size,
            chunking,
            no_index,
            sha256,
            json,
        } => repo::put(
            &data_dir,
            &socket,
            &file,
            &name,
            version,
            &sign,
            key.as_deref(),
            keep,
            segment_size,
            chunking.resolve()?,
            !no_index,
            sha256,
            json,
        ),
        Command::Repo(RepoCmd::Reindex) => repo::reindex(&data_dir),
        Command::Repo(RepoCmd::Config {
            chunking,
            segment_signature,
        }) => repo::config(&data_dir, &socket, chunking, segment_signature),
        Command::Repo(RepoCmd::Scrub(a)) => scrub::scrub(&data_dir, &socket, &a),
        Command::Dedup {
            files,
            chunking,
            json,
        } => dedup::run(&files, chunking.resolve()?, json),
        Command::Get {
            names,
            query,
            flat,
            dry_run,
            output,
            resume,
            json,
            quiet,
            no_dedup,
            no_publish,
            hash_lifetime,
            fetch,
        } => {
            let (names, paths) = match &query {
                None => (names, None),
                Some(q) => {
                    let plan = science::plan_query_get(
                        &data_dir,
                        &socket,
                        catalog::catalog_spec(),
                        q,
                        flat,
                    )?;
                    let total: u64 = plan.iter().map(|p| p.2).sum();
                    if dry_run || !quiet {
                        for (n, p, size) in &plan {
                            println!("{n} -> {} ({size} bytes)", p.display());
                        }
                        eprintln!("{} file(s), {total} bytes", plan.len());
                    }
                    if dry_run {
                        return Ok(());
                    }
                    if plan.is_empty() {
                        anyhow::bail!("no file matches {q:?}");
                    }
                    let (names, paths): (Vec<String>, Vec<PathBuf>) =
                        plan.into_iter().map(|(n, p, _)| (n, p)).unzip();
                    (names, Some(paths))
                }
            };
            fetch::get(
                &socket,
                &data_dir,
                &names,
                paths.as_deref(),
                output.as_deref(),
                fetch::GetFlags {
                    resume,
                    json,
                    quiet,
                    no_dedup,
                    no_publish,
                    hash_lifetime,
                },
                &fetch,
            )
        }
        Command::Search(a) => science::search(&data_dir, &socket, catalog::catalog_spec(), &a),
        Command::PublishDir(a) => {
            science::publish_dir(&data_dir, &socket, catalog::catalog_spec(), &a)
        }
        Command::ExampleData { dir } => science::example_data(&dir),
        Command::Catalog(c) => science::catalog_cmd(&data_dir, catalog::catalog_spec(), c),
        Command::Federation(c) => federation::run(&data_dir, &socket, catalog::catalog_spec(), c),
        Command::Cat {
            name,
            offset,
            length,
            stats,
            fetch,
        } => fetch::cat(&socket, &data_dir, &name, offset, length, stats, &fetch),
        Command::Mount(a) => {
            init_logging(&cli.log, cli.log_format);
            mount::run(&socket, &data_dir, a)
        }
        Command::Ls { prefix } => repo::ls(&data_dir, prefix.as_deref()),
        Command::Stat { name, json } => repo::stat(&data_dir, &name, json),
        Command::Mv { old, new } => {
            granary_node::repo::mv(&data_dir, &socket, catalog::catalog_spec(), &old, &new)
        }
        Command::Rm { name, version } => {
            granary_node::repo::rm(&data_dir, &socket, catalog::catalog_spec(), &name, version)
        }
        Command::Serve {
            prefix,
            size,
            freshness,
            delay_ms,
        } => node::serve(&socket, &prefix, size, freshness, delay_ms),
        Command::Peek {
            name,
            prefix,
            fresh,
            lifetime,
            hex,
            fwhint,
            payload,
        } => {
            let payload = payload.map(|p| args::read_input(Some(&p))).transpose()?;
            node::peek(
                &socket, &name, prefix, fresh, lifetime, hex, &fwhint, payload,
            )
        }
        Command::Dissect {
            file,
            hex,
            base64,
            json,
        } => {
            let input = dissect::decode_input(args::read_input(file.as_ref())?, hex, base64)?;
            if json {
                let mut out = String::new();
                for v in dissect::render_json(&input)? {
                    out.push_str(&serde_json::to_string(&v)?);
                    out.push('\n');
                }
                print!("{out}");
            } else {
                print!("{}", dissect::render_text(&input)?);
            }
            Ok(())
        }
        Command::Key(cmd) => key::run_with(cmd, &data_dir, &socket),
        Command::Replicate(a) => replicate::run(&socket, &data_dir, catalog::catalog_spec(), &a),
        Command::Selfcheck => selfcheck::run(),
        Command::Linkem(a) => linkem::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Testbed(a) => testbed::run(a),
        Command::Perf(a) => perf::run(&socket, a),
    }
}

/// True for the commands that print a listing or a report and quit: on a
/// closed standard output (`granary ls | head -1`) they end as Unix tools
/// do, killed by SIGPIPE without a word (the Rust runtime ignores SIGPIPE,
/// so every `println!` to a closed pipe would panic instead). The others
/// keep SIGPIPE ignored: the daemon and long-running servers must never
/// die of a peer closing a socket; `get` reports a reader that went away
/// as an error; `cat` stops quietly on its own; transfers (`put`,
/// `publish-dir`) report a lost daemon connection as an error.
fn dies_quietly_on_a_closed_pipe(c: &Command) -> bool {
    !matches!(
        c,
        Command::Daemon(_)
            | Command::Get { .. }
            | Command::Cat { .. }
            | Command::Put { .. }
            | Command::PublishDir(_)
            | Command::Mount(_)
            | Command::Serve { .. }
            | Command::Linkem(_)
            | Command::Testbed(_)
            | Command::Perf(_)
    )
}

/// Restores SIGPIPE's default action (terminate).
fn default_sigpipe() {
    // SAFETY: `signal` with SIG_DFL installs no handler of ours (no code
    // of this program ever runs in signal context); it only changes the
    // process's disposition for SIGPIPE, and is called first thing in
    // `main`, before any thread exists, so nothing races with it.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() {
    alloc::tune();
    let cli = Cli::parse();
    if dies_quietly_on_a_closed_pipe(&cli.command) {
        default_sigpipe();
    }
    // A command asked for JSON answers in JSON when it fails too (unless
    // its JSON answer, which says what failed, is out already).
    let json = std::env::args_os().any(|a| a == "--json");
    if let Err(e) = run(cli) {
        if json && !out::json_answered() {
            println!("{}", serde_json::json!({"error": format!("{e:#}")}));
        }
        eprintln!("granary: error: {e:#}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
