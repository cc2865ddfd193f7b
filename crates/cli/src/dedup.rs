//! `granary dedup FILE…` (the analysis is `granary_measure::dedup`): what chunking would save, without publishing
//! anything (carepo's Table III / Fig. 2 analysis): for each scheme, per
//! file the chunks and unique chunks, and across the files the unique
//! chunks, the bytes shared between files, and the saving.

use std::path::PathBuf;

use granary_measure::dedup::analyse;

use granary_node::repo::Chunking;
use serde_json::json;

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
    print!("{}", granary_measure::dedup::table(&out));
    Ok(())
}
