//! `granary repo scrub [PREFIX] [--repair-from SOURCE] [--json]`: re-hash
//! stored versions against the hashes taken at ingest and their manifests,
//! record damage, and restore bad segments from another node (the work is
//! `granary_node::scrub`).

use std::io::IsTerminal;
use std::path::Path;

/// Options of `granary repo scrub`.
#[derive(clap::Args, Debug, Clone)]
pub struct ScrubArgs {
    /// Scrub only versions under this name prefix (default: everything).
    pub prefix: Option<String>,
    /// Restore damaged segments from another node, over NDN through the
    /// running daemon: a face URI (`tcp://HOST:PORT`, `udp://…`,
    /// `unix:///PATH`; the face is created if needed), a face id, or a name
    /// PREFIX that the node already routes to replicas (their faces in the
    /// FIB are used). Each segment is fetched by its versioned name and
    /// written only if its SHA-256 is the one taken at ingest, which this
    /// scrub has just checked against the signed manifest.
    #[arg(long, value_name = "NODE|PREFIX")]
    pub repair_from: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Hashing threads (default: every core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub threads: Option<u64>,
}

/// `granary repo scrub`.
pub fn scrub(data_dir: &Path, socket: &Path, args: &ScrubArgs) -> anyhow::Result<()> {
    let bar = std::sync::OnceLock::<indicatif::ProgressBar>::new();
    let s = granary_node::scrub::scrub(
        data_dir,
        socket,
        args.prefix.as_deref(),
        args.threads.map(|t| t as usize),
        args.repair_from.as_deref(),
        |total| {
            if !args.json && std::io::stderr().is_terminal() {
                let b = indicatif::ProgressBar::new(total);
                b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                if let Ok(style) = indicatif::ProgressStyle::with_template(
                    "scrub {bytes}/{total_bytes} {binary_bytes_per_sec} {wide_bar} ETA {eta}",
                ) {
                    b.set_style(style);
                }
                let _ = bar.set(b);
            }
        },
        &|b| {
            if let Some(bar) = bar.get() {
                bar.inc(b);
            }
        },
        || {
            if let Some(b) = bar.get() {
                b.finish_and_clear();
            }
        },
    )?;
    if args.json {
        println!("{}", s.json());
        crate::out::mark_json_answered();
    } else {
        print!("{}", s.text());
    }
    let damaged = s.damaged();
    if damaged > 0 {
        let hint = if args.repair_from.is_some() {
            ""
        } else {
            " (`--repair-from NODE|PREFIX` restores them from another node)"
        };
        anyhow::bail!("{damaged} damaged version(s){hint}");
    }
    Ok(())
}
