//! How much content-defined chunking would save over a set of files
//! (carepo's Table III / Fig. 2 analysis), behind `granary dedup`: per file
//! the chunks and unique chunks, across the files the unique chunks, the
//! bytes shared between files, and the saving.

use std::collections::HashMap;
use std::path::PathBuf;

use granary_store::chunking::{for_each_chunk, Chunking};
use serde_json::{json, Value};

struct FileStats {
    path: PathBuf,
    bytes: u64,
    chunks: u64,
    unique_chunks: u64,
    unique_bytes: u64,
}

/// Analysis of one scheme over every file.
///
/// `progress` is given the bytes read (added up over the files).
pub fn analyse(files: &[PathBuf], c: Chunking, progress: &dyn Fn(u64)) -> anyhow::Result<Value> {
    let cutter = c.cutter();
    // hash → (length, number of files holding it)
    let mut global: HashMap<[u8; 32], (u32, u32)> = HashMap::new();
    let mut per_file = Vec::new();
    for f in files {
        let mut local: HashMap<[u8; 32], u32> = HashMap::new();
        let mut chunks = 0u64;
        let reader = std::fs::File::open(f)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", f.display()))?;
        let bytes = for_each_chunk(std::io::BufReader::new(reader), &cutter, |ch| {
            chunks += 1;
            progress(ch.len() as u64);
            let h: [u8; 32] = granary_packet::sha256(ch);
            local.entry(h).or_insert(ch.len() as u32);
        })
        .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
        let unique_bytes = local.values().map(|l| *l as u64).sum();
        for (h, len) in &local {
            let g = global.entry(*h).or_insert((*len, 0));
            g.1 += 1;
        }
        per_file.push(FileStats {
            path: f.clone(),
            bytes,
            chunks,
            unique_chunks: local.len() as u64,
            unique_bytes,
        });
    }
    let total_bytes: u64 = per_file.iter().map(|f| f.bytes).sum();
    let total_chunks: u64 = per_file.iter().map(|f| f.chunks).sum();
    let within_unique: u64 = per_file.iter().map(|f| f.unique_bytes).sum();
    let unique_bytes: u64 = global.values().map(|(l, _)| *l as u64).sum();
    let shared_bytes: u64 = global
        .values()
        .filter(|(_, n)| *n > 1)
        .map(|(l, _)| *l as u64)
        .sum();
    let pct = |saved: u64| {
        if total_bytes == 0 {
            0.0
        } else {
            100.0 * saved as f64 / total_bytes as f64
        }
    };
    Ok(json!({
        "chunking": c.to_string(),
        "files": per_file.iter().map(|f| json!({
            "path": f.path.display().to_string(),
            "bytes": f.bytes,
            "chunks": f.chunks,
            "unique_chunks": f.unique_chunks,
            "unique_bytes": f.unique_bytes,
        })).collect::<Vec<_>>(),
        "total": {
            "bytes": total_bytes,
            "chunks": total_chunks,
            "unique_chunks": global.len(),
            "unique_bytes": unique_bytes,
            "shared_chunks": global.values().filter(|(_, n)| *n > 1).count(),
            "shared_bytes": shared_bytes,
            "saved_bytes": total_bytes - unique_bytes,
            "saving_percent": pct(total_bytes - unique_bytes),
            "saving_within_files_percent": pct(total_bytes - within_unique),
            "saving_across_files_percent": pct(within_unique - unique_bytes),
        },
    }))
}

/// `granary dedup`'s tables for the [`analyse`] answers of each scheme: per
/// file, then the totals.
pub fn table(schemes: &[Value]) -> String {
    use std::fmt::Write as _;
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let mut out = String::new();
    let short = |p: &str| {
        std::path::Path::new(p)
            .file_name()
            .map_or(p.to_string(), |f| f.to_string_lossy().into_owned())
    };
    let _ = writeln!(
        out,
        "{:<24} {:<24} {:>14} {:>10} {:>10} {:>14}",
        "chunking", "file", "bytes", "chunks", "unique", "unique bytes"
    );
    for s in schemes {
        let c = s["chunking"].as_str().unwrap_or("");
        for f in s["files"].as_array().into_iter().flatten() {
            let _ = writeln!(
                out,
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
    out.push('\n');
    let _ = writeln!(
        out,
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
    for s in schemes {
        let t = &s["total"];
        let _ = writeln!(
            out,
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
    out
}
