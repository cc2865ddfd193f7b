//! `granary perf`: the arguments; the tool is `granary_measure::perf`.

use std::path::PathBuf;

use granary_measure::perf as m;
use granary_measure::perf::SignMode;

/// `granary perf …`.
#[derive(clap::Args, Debug)]
pub struct PerfArgs {
    #[command(subcommand)]
    cmd: PerfCmd,
}

#[derive(clap::Subcommand, Debug)]
enum PerfCmd {
    /// Producer: answer every Interest under PREFIX with a Data signed on
    /// demand (a fresh key of the chosen type is generated at start).
    Serve(ServeArgs),
    /// Consumer: ask unique names under PREFIX with a window or a rate and
    /// report throughput and latency.
    Fetch(FetchArgs),
}

/// `granary perf serve` options.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Name prefix to register and serve.
    pub prefix: String,
    /// Signature of every Data.
    #[arg(long, value_enum, default_value_t = SignMode::Ecdsa)]
    pub sign: SignMode,
    /// Payload (Content) bytes per Data.
    #[arg(long, default_value_t = 8192)]
    pub payload: usize,
    /// Signing worker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// FreshnessPeriod of every Data, in ms.
    #[arg(long, default_value_t = 0)]
    pub freshness: u64,
    /// Parse the private key again for every packet (reproduces ndnperf's
    /// per-packet key lookup cost).
    #[arg(long)]
    pub no_key_cache: bool,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Write the public key (SubjectPublicKeyInfo DER; the raw secret for
    /// hmac) to FILE, for consumers that check signatures.
    #[arg(long, value_name = "FILE")]
    pub key_out: Option<PathBuf>,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `granary perf fetch` options.
#[derive(clap::Args, Debug)]
pub struct FetchArgs {
    /// Name prefix served by `perf serve`.
    pub prefix: String,
    /// Interests kept outstanding.
    #[arg(long, default_value_t = 16, conflicts_with = "rate")]
    pub window: usize,
    /// Send Interests at this rate (per second) instead of with a window.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Stop sending after this many seconds.
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub duration: f64,
    /// Stop after this many Data (overrides --duration).
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// InterestLifetime in ms; an Interest unanswered for this long counts
    /// as a timeout.
    #[arg(long, default_value_t = 4000)]
    pub lifetime: u64,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `granary perf …`.
pub fn run(socket: &std::path::Path, args: PerfArgs) -> anyhow::Result<()> {
    match args.cmd {
        PerfCmd::Serve(a) => m::serve(
            socket,
            m::ServeParams {
                prefix: a.prefix,
                sign: a.sign,
                payload: a.payload,
                threads: a.threads,
                freshness: a.freshness,
                no_key_cache: a.no_key_cache,
                duration: a.duration,
                key_out: a.key_out,
                json: a.json,
            },
        ),
        PerfCmd::Fetch(a) => m::fetch(
            socket,
            m::FetchParams {
                prefix: a.prefix,
                window: a.window,
                rate: a.rate,
                duration: a.duration,
                count: a.count,
                lifetime: a.lifetime,
                json: a.json,
            },
        ),
    }
}
