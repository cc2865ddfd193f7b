//! `granary put|get|ls|stat|mv|rm`: the repository from the command line.
//!
//! put/ls/stat/mv/rm work on `<data-dir>/repo` directly: the daemon serves
//! from the files, so what is published here is served at once (the rename
//! that publishes is atomic). get goes through the node.

use crate::out::{say, tell};
use std::path::Path;
use std::time::Instant;

use granary_app::Client;
use granary_node::control::{by_daemon_used, put_via_daemon, tell_daemon};
use granary_packet::Name;

fn name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{e}"))
}

/// `granary put`. A file is streamed in by the daemon when one is running
/// (`/localhost/granary/repo/put`, with a progress bar fed by
/// `…/progress/<id>`); standard input, or no daemon, is ingested here into
/// the same data directory (the daemon serves from the files either way).
#[allow(clippy::too_many_arguments)]
pub fn put(
    data_dir: &Path,
    socket: &Path,
    file: &Path,
    uri: &str,
    version: Option<u64>,
    policy: &str,
    key: Option<&str>,
    keep: Option<u64>,
    segment_size: Option<u32>,
    chunking: Option<granary_node::repo::Chunking>,
    index: bool,
    file_sha256: bool,
    json: bool,
) -> anyhow::Result<()> {
    let n = name(uri)?;
    granary_node::repo::check_name(&n)?;
    let key = key.map(name).transpose()?;
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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let by_daemon = if stdin {
        None
    } else {
        rt.block_on(Client::connect(socket)).ok()
    };
    let result = match by_daemon {
        Some(client) => {
            let path = std::fs::canonicalize(file)?;
            rt.block_on(put_via_daemon(
                client,
                socket,
                &path,
                &n,
                version,
                policy,
                key.as_ref(),
                keep,
                segment_size,
                chunking,
                index,
                file_sha256,
                &|b| bar.set_position(b),
            ))?
        }
        None => {
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
            let (v, created) =
                granary_node::repo::put_here(data_dir, file, &n, &how, |b| bar.set_position(b))?;
            if let Some(k) = created {
                tell!("created default publisher key {k}");
            }
            v
        }
    };
    bar.finish_and_clear();
    if result["ok"] != true {
        anyhow::bail!(
            "{}",
            result["error"].as_str().unwrap_or("publishing failed")
        );
    }
    if json {
        say!("{result}");
    } else {
        say!("{}", result["versioned"].as_str().unwrap_or_default());
    }
    let size = result["size"].as_f64().unwrap_or(0.0);
    let secs = result["seconds"].as_f64().unwrap_or(0.0).max(1e-9);
    tell!(
        "published {} bytes in {} segments ({}, {:.1} MB/s{}){}",
        size,
        result["segments"],
        result["chunking"].as_str().unwrap_or("?"),
        size / secs / 1e6,
        match (by_daemon_used(&result), result["reflinked"] == true) {
            (true, true) => ", reflinked by the daemon: no data copied",
            (true, false) => ", streamed in by the daemon",
            (false, true) => ", reflinked: no data copied",
            (false, false) => "",
        },
        match result["sha256"].as_str() {
            Some(h) => format!(", sha256 {h}"),
            None => String::new(),
        }
    );
    if let Some(theirs) = result["data_dir"].as_str() {
        let same = std::fs::canonicalize(theirs).ok() == std::fs::canonicalize(data_dir).ok();
        if !same {
            tell!(
                "note: the daemon at {} uses the data directory {theirs}, not {}: the file was published there{}",
                socket.display(),
                data_dir.display(),
                match result["key"].as_str() {
                    Some(k) => format!(", signed with its key {k}"),
                    None => String::new(),
                }
            );
        }
    }
    catalog_note(&result);
    if let Some(r) = result["removed_versions"].as_u64().filter(|r| *r > 0) {
        tell!("removed {r} older version(s) (--keep)");
        tell_daemon(socket, Some(&n));
    }
    Ok(())
}

/// Says on standard error what the catalog made of a publish, unless it is
/// catalogued: queued (kept on the node until the catalog is back) or failed.
fn catalog_note(result: &serde_json::Value) {
    let why = result["catalog_note"].as_str().unwrap_or_default();
    match result["catalog"].as_str() {
        Some("queued") => eprintln!(
            "catalog: queued ({why}); kept on the node and catalogued when the catalog is back"
        ),
        Some("failed") => eprintln!(
            "catalog: not catalogued ({why}); `granary catalog check --repair` repairs it"
        ),
        _ => {}
    }
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
    let (e, damaged) = granary_node::repo::stat(data_dir, &name(uri)?)?;
    if json {
        let manifest = granary_node::repo::manifest_signature(data_dir, &e)?;
        let damaged: Vec<serde_json::Value> = damaged
            .iter()
            .map(|(v, d)| {
                serde_json::json!({
                    "version": v,
                    "segments": d.segments.len(),
                    "problems": d.problems,
                    "by": d.by,
                })
            })
            .collect();
        let v = serde_json::json!({
            "meta": e.meta,
            "path": e.path,
            "manifest": manifest,
            "damaged": damaged,
        });
        println!("{v}");
        return Ok(());
    }
    println!("{}", serde_json::to_string_pretty(&e.meta)?);
    println!("path {}", e.path.display());
    // Damage (serve-time check or scrub): this version and any other.
    for (v, d) in damaged {
        println!(
            "DAMAGED v={v}: {} bad segment(s){} (detected by {}); `granary repo scrub {} --repair-from NODE` restores it",
            d.segments.len(),
            if d.problems.is_empty() {
                String::new()
            } else {
                format!(", {}", d.problems.join("; "))
            },
            d.by,
            e.meta.name
        );
        for b in &d.segments {
            println!(
                "  segment {} bytes {}..{}: SHA-256 {} (at ingest {})",
                b.segment,
                b.offset,
                b.offset + b.len,
                b.found,
                b.expected
            );
        }
    }
    Ok(())
}
