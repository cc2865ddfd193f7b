//! The `granary` command: a thin layer over the library crates.

mod alloc;
mod args;
mod dedup;
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
mod settings;
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
    Strategy(node::StrategyArgs),
    /// Content Store information and configuration.
    #[command(subcommand)]
    Cs(node::CsCmd),
    /// Express one Interest and print the Data's content (or the Nack).
    Peek(node::PeekArgs),
    /// Publish a file (or `-` for standard input) into the repository under
    /// NAME; a version component is added. Served as soon as this returns.
    Put(repo::PutArgs),
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
        chunking: args::ChunkArgs,
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
    Get(fetch::GetArgs),
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
    Cat(fetch::CatArgs),
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
    Serve(node::ServeArgs),
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
    catalog::set_client_data_dir(&data_dir);
    let socket = socket_path(cli.socket.as_ref(), &data_dir);
    match cli.command {
        Command::Daemon(args) => {
            init_logging(&cli.log, cli.log_format);
            node::run_daemon(args, socket, &data_dir)
        }
        Command::Status => node::status(&socket),
        Command::Face(c) => node::face(&socket, c),
        Command::Route(c) => node::route(&socket, c),
        Command::Strategy(a) => node::strategy(&socket, a),
        Command::Cs(c) => node::cs(&socket, c),
        Command::Put(a) => repo::put(&data_dir, &socket, &a),
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
        Command::Get(a) => fetch::get(&socket, &data_dir, &a),
        Command::Search(a) => science::search(&data_dir, &socket, catalog::catalog_spec(), &a),
        Command::PublishDir(a) => {
            science::publish_dir(&data_dir, &socket, catalog::catalog_spec(), &a)
        }
        Command::ExampleData { dir } => science::example_data(&dir),
        Command::Catalog(c) => science::catalog_cmd(&data_dir, catalog::catalog_spec(), c),
        Command::Federation(c) => federation::run(&data_dir, &socket, catalog::catalog_spec(), c),
        Command::Cat(a) => fetch::cat(&socket, &data_dir, &a),
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
        Command::Serve(a) => node::serve(&socket, &a),
        Command::Peek(a) => node::peek(&socket, &a),
        Command::Dissect {
            file,
            hex,
            base64,
            json,
        } => {
            print!(
                "{}",
                granary_node::dissect::dissect(
                    args::read_input(file.as_ref())?,
                    hex,
                    base64,
                    json
                )?
            );
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
            | Command::Get(_)
            | Command::Cat(_)
            | Command::Put(_)
            | Command::PublishDir(_)
            | Command::Mount(_)
            | Command::Serve(_)
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
