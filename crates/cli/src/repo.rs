//! `granary put|get|ls|stat|mv|rm`: the repository from the command line.
//!
//! put/ls/stat/mv/rm work on `<data-dir>/repo` directly: the daemon serves
//! from the files, so what is published here is served at once (the rename
//! that publishes is atomic). get goes through the node.

use crate::out::{say, tell};
use std::path::Path;
use std::time::Instant;

use granary_node::control::tell_daemon;
use granary_packet::Name;

/// `granary put`'s flags.
#[derive(clap::Args)]
pub struct PutArgs {
    /// File to publish, or `-`.
    pub file: std::path::PathBuf,
    /// Name (without version), e.g. /cmip6/tas/file.nc.
    pub name: String,
    /// Version number (default: now, in microseconds).
    #[arg(long)]
    pub version: Option<u64>,
    /// Signing: `manifest` (one signed manifest per version, segments
    /// checked against it), `ed25519`/`ecdsa` (every packet signed when
    /// served), `digest` (integrity only).
    #[arg(long, default_value = "manifest", value_parser = ["manifest", "ed25519", "ecdsa", "digest"])]
    pub sign: String,
    /// Key (default: the keychain's default; one is created if there is none).
    #[arg(long)]
    pub key: Option<String>,
    /// Keep only the newest N versions of this name (older ones are removed
    /// once the new one is published). Default: keep all.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub keep: Option<u64>,
    /// Content bytes per segment (256 … 1048576; default 8192). Above
    /// 8 KiB every node on the path needs a larger `max_packet` (daemon
    /// config), as NDN-DPDK and ndn-cxx apps keep the 8800-byte default.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(256..=1_048_576))]
    pub segment_size: Option<u32>,
    #[command(flatten)]
    pub chunking: crate::args::ChunkArgs,
    /// Do not add the segments to the hash index (they are not served to
    /// hash requests until `granary repo reindex`); for measurements.
    #[arg(long)]
    pub no_index: bool,
    /// Also compute the SHA-256 of the whole file (one more hashing pass
    /// at ingest); shown by `stat` and carried in the manifest root.
    /// Without it the manifest's hash tree identifies the content.
    #[arg(long)]
    pub sha256: bool,
    /// Print the result as JSON (version, size, segments, and `catalog`:
    /// `done`, `queued` while the catalog is unavailable — kept on the
    /// node and catalogued when it is back — or `failed`).
    #[arg(long)]
    pub json: bool,
}

fn name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{e}"))
}

/// `granary put`. A file is streamed in by the daemon when one is running
/// (`/localhost/granary/repo/put`, with a progress bar fed by
/// `…/progress/<id>`); standard input, or no daemon, is ingested here into
/// the same data directory (the daemon serves from the files either way).
pub fn put(data_dir: &Path, socket: &Path, a: &PutArgs) -> anyhow::Result<()> {
    let (file, version, policy, keep, segment_size) =
        (&a.file, a.version, &a.sign, a.keep, a.segment_size);
    let (chunking, index, file_sha256) = (a.chunking.resolve()?, !a.no_index, a.sha256);
    let n = name(&a.name)?;
    granary_node::repo::check_name(&n)?;
    let key = a.key.as_deref().map(name).transpose()?;
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
    let how = granary_node::repo::PutHere {
        version,
        policy,
        key: key.as_ref(),
        keep,
        segment_size,
        chunking,
        index,
        file_sha256,
    };
    let (result, created) =
        granary_node::repo::put(data_dir, socket, file, &n, &how, &|b| bar.set_position(b))?;
    if let Some(k) = created {
        tell!("created default publisher key {k}");
    }
    bar.finish_and_clear();
    if result["ok"] != true {
        anyhow::bail!(
            "{}",
            result["error"].as_str().unwrap_or("publishing failed")
        );
    }
    if a.json {
        say!("{result}");
    } else {
        say!("{}", result["versioned"].as_str().unwrap_or_default());
    }
    tell!("{}", granary_node::repo::put_summary(&result));
    if let Some(note) = granary_node::repo::other_data_dir(&result, socket, data_dir) {
        tell!("{note}");
    }
    if let Some(note) = granary_node::repo::catalog_note(&result) {
        eprintln!("{note}");
    }
    if let Some(r) = result["removed_versions"].as_u64().filter(|r| *r > 0) {
        tell!("removed {r} older version(s) (--keep)");
        tell_daemon(socket, Some(&n));
    }
    Ok(())
}

/// `granary repo reindex`.
pub fn reindex(data_dir: &Path) -> anyhow::Result<()> {
    let t = Instant::now();
    let (segments, versions) = granary_node::repo::reindex(data_dir)?;
    println!(
        "indexed {segments} segments of {versions} versions in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `granary repo config`.
pub fn config(
    data_dir: &Path,
    socket: &Path,
    chunking: Option<String>,
    segment_signature: Option<String>,
) -> anyhow::Result<()> {
    let (chunking, null) =
        granary_node::repo::config(data_dir, socket, chunking, segment_signature)?;
    println!("chunking = {chunking}");
    println!(
        "segment_signature = {}",
        if null { "null" } else { "digest" }
    );
    Ok(())
}

pub fn ls(data_dir: &Path, prefix: Option<&str>) -> anyhow::Result<()> {
    let p = match prefix {
        Some(p) => name(p)?,
        None => Name::new(),
    };
    for m in granary_node::repo::list(data_dir, &p)? {
        println!("{}/v={} {} bytes", m.name, m.version, m.size);
    }
    Ok(())
}

pub fn stat(data_dir: &Path, uri: &str, json: bool) -> anyhow::Result<()> {
    print!(
        "{}",
        granary_node::repo::stat_text(data_dir, &name(uri)?, json)?
    );
    Ok(())
}
