//! `granary dedup FILE…` (the analysis is `granary_measure::dedup`): what chunking would save, without publishing
//! anything (carepo's Table III / Fig. 2 analysis): for each scheme, per
//! file the chunks and unique chunks, and across the files the unique
//! chunks, the bytes shared between files, and the saving.

use std::path::{Path, PathBuf};

use granary_measure::dedup::analyse;

use granary_node::repo::Chunking;
use serde_json::{json, Value};

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

pub fn run(files: &[PathBuf], chunking: Option<Chunking>, as_json: bool) -> anyhow::Result<()> {
    let schemes = match chunking {
        Some(c) => vec![c],
        None => vec![
            Chunking::Fixed(granary_node::repo::DEFAULT_SEGMENT_SIZE),
            Chunking::fastcdc(),
            Chunking::rabin(),
        ],
    };
    let mut size = 0u64;
    for f in files {
        size += std::fs::metadata(f)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", f.display()))?
            .len();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(size * schemes.len() as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bytes}/{total_bytes} {bytes_per_sec} {wide_bar} {eta}",
    ) {
        bar.set_style(style);
    }
    let mut out = Vec::new();
    for c in &schemes {
        out.push(analyse(files, *c, &|b| bar.inc(b))?);
    }
    bar.finish_and_clear();
    if as_json {
        println!("{}", json!({ "schemes": out }));
        return Ok(());
    }
    let short = |p: &str| {
        Path::new(p)
            .file_name()
            .map_or(p.to_string(), |f| f.to_string_lossy().into_owned())
    };
    println!(
        "{:<24} {:<24} {:>14} {:>10} {:>10} {:>14}",
        "chunking", "file", "bytes", "chunks", "unique", "unique bytes"
    );
    for s in &out {
        let c = s["chunking"].as_str().unwrap_or("");
        for f in s["files"].as_array().into_iter().flatten() {
            println!(
                "{:<24} {:<24} {:>14} {:>10} {:>10} {:>14}",
                c,
                short(f["path"].as_str().unwrap_or("")),
                n(&f["bytes"]),
                n(&f["chunks"]),
                n(&f["unique_chunks"]),
                n(&f["unique_bytes"])
            );
        }
    }
    println!();
    println!(
        "{:<24} {:>14} {:>10} {:>10} {:>14} {:>14} {:>8} {:>8} {:>8}",
        "chunking",
        "bytes",
        "chunks",
        "unique",
        "unique bytes",
        "shared bytes",
        "saving",
        "within",
        "across"
    );
    for s in &out {
        let t = &s["total"];
        println!(
            "{:<24} {:>14} {:>10} {:>10} {:>14} {:>14} {:>7.2}% {:>7.2}% {:>7.2}%",
            s["chunking"].as_str().unwrap_or(""),
            n(&t["bytes"]),
            n(&t["chunks"]),
            n(&t["unique_chunks"]),
            n(&t["unique_bytes"]),
            n(&t["shared_bytes"]),
            t["saving_percent"].as_f64().unwrap_or(0.0),
            t["saving_within_files_percent"].as_f64().unwrap_or(0.0),
            t["saving_across_files_percent"].as_f64().unwrap_or(0.0),
        );
    }
    Ok(())
}
