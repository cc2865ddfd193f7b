//! `publish-dir`'s work: per file (by worker threads) netCDF metadata, DRS
//! translation, and staging in the repository (skipped for a file published
//! unchanged already); then group commits in batches and the catalog.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use granary_catalog::Record;
use granary_packet::Name;
use granary_science::drs::{Outcome, Status};
use granary_search::{record, Indexer};
use serde_json::{json, Value};

/// Every regular file under `dir`, sorted.
pub fn walk(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = std::fs::read_dir(&d).map_err(|e| anyhow::anyhow!("{}: {e}", d.display()))?;
        for e in rd {
            let e = e?;
            let t = e.file_type()?;
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The tag recording the source file a version was published from (size and
/// modification time), so that a second run skips it.
const SOURCE_TAG: &str = "source";

fn source_stamp(p: &Path) -> anyhow::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p)?;
    Ok(format!("{}:{}.{:09}", m.len(), m.mtime(), m.mtime_nsec()))
}

/// Files published per group commit.
pub const COMMIT_BATCH: usize = 256;

/// A file staged for publication, with what its catalog record needs.
pub struct Staged {
    pub entry: granary_store::Entry,
    pub report: Value,
    pub outcome: Outcome,
    pub nc: Option<granary_science::netcdf::NcMeta>,
    pub problems: Vec<String>,
    /// The file's chunk index (JSON), for virtual Zarr; `None` when not netCDF.
    pub chunk_refs: Option<String>,
}

/// The chunk index (JSON) of a netCDF file, kept in the catalog's `chunk_refs` table
/// for the gateway's virtual Zarr; `None` when it cannot be read (the record is
/// published all the same).
pub fn chunk_refs_of(f: &Path) -> Option<String> {
    let limits = granary_science::netcdf::Limits::default();
    let ix = granary_science::netcdf::chunk_index(f, &limits).ok()?;
    serde_json::to_string(&ix).ok()
}

/// What a worker made of one file.
pub struct Prepared {
    /// Its report entry (final unless `staged`).
    pub report: Value,
    /// Translation outcome.
    pub status: &'static str,
    /// Fix codes applied.
    pub fixes: Vec<String>,
    /// `unchanged` or `failed`, when so.
    pub count: Option<&'static str>,
    /// Staged, to be committed.
    pub staged: Option<Staged>,
    /// Published unchanged already, but missing from the catalog (a run
    /// killed between its commit and its catalog write): its record.
    pub recatalog: Option<Record>,
}

/// One file of `publish-dir`: metadata, translation, and (unless a dry run,
/// or published unchanged already) staged in the repository.
pub fn prepare(
    f: &Path,
    root: &Path,
    ix: &Indexer,
    others: Option<&Name>,
    publish: Option<(&granary_repo::Repo, &granary_security::Signer)>,
    chunking: Option<granary_store::Chunking>,
    chunk_index: bool,
) -> Prepared {
    let rel = f
        .strip_prefix(root)
        .unwrap_or(f)
        .to_string_lossy()
        .into_owned();
    let (nc, problems) = match record::netcdf_of(f) {
        Ok(nc) => (nc, Vec::new()),
        Err(why) => (None, vec![format!("netCDF metadata not read: {why}")]),
    };
    let attrs = nc.as_ref().map(|n| n.global_strings());
    let mut outcome: Outcome = ix.translator.translate(&rel, attrs.as_ref());
    granary_science::consistency::check(&mut outcome, nc.as_ref());
    let fixes = outcome
        .fixes
        .iter()
        .map(|fx| format!("{:?}", fx.code))
        .collect();
    let target: Option<Name> = if outcome.is_accepted() {
        outcome.uri.as_deref().and_then(|u| Name::from_uri(u).ok())
    } else {
        others.and_then(|p| {
            rel.split('/').try_fold(p.clone(), |n, c| {
                Some(n.append(&granary_packet::Component::generic(c.as_bytes())))
            })
        })
    };
    let status = match outcome.status {
        Status::Translated => "translated",
        Status::Fixed => "fixed",
        Status::Rejected => "rejected",
    };
    let mut report = json!({"path": rel, "outcome": outcome});
    if let Some(n) = &nc {
        report["metadata"] = record::metadata_summary(n);
    }
    if !problems.is_empty() {
        report["problems"] = json!(problems);
    }
    let mut p = Prepared {
        report,
        status,
        fixes,
        count: None,
        staged: None,
        recatalog: None,
    };
    let (Some((repo, signer)), Some(name)) = (publish, target) else {
        if let Some(n) = outcome.uri.as_deref() {
            p.report["name"] = json!(n);
        }
        return p;
    };
    p.report["name"] = json!(name.to_string());
    let stamp = match source_stamp(f) {
        Ok(s) => s,
        Err(e) => {
            p.count = Some("failed");
            p.report["error"] = json!(e.to_string());
            return p;
        }
    };
    // Resumable: the latest version published from this very file is kept,
    // and catalogued if the catalog lacks it (or cannot say now).
    let latest = repo.store.get(&name, None).ok();
    if let Some(e) = latest
        .as_ref()
        .filter(|e| e.meta.tags.get(SOURCE_TAG) == Some(&stamp))
    {
        p.count = Some("unchanged");
        p.report["published"] = json!("unchanged");
        if !ix
            .catalog
            .has(&e.meta.name, e.meta.version)
            .unwrap_or(false)
        {
            p.report["catalogued"] = json!("again");
            p.recatalog = Some(record::record_with(
                e,
                &outcome,
                nc.as_ref(),
                problems,
                ix.node(),
            ));
        }
        return p;
    }
    let mut tags = vec![(SOURCE_TAG.to_string(), stamp)];
    if let Some(v) = &outcome.drs_version {
        tags.push((record::DRS_VERSION_TAG.to_string(), v.clone()));
    }
    let how = granary_repo::publish::Publish {
        version: None,
        signer,
        policy: "manifest",
        keep: None,
        segment_size: None,
        chunking,
        index: true,
        file_sha256: true,
        tags,
        expect_hashes: None,
    };
    match granary_repo::publish::stage_file(repo, &name, f, &how) {
        Ok(entry) => {
            let report = std::mem::take(&mut p.report);
            let chunk_refs = nc
                .as_ref()
                .filter(|_| chunk_index)
                .and_then(|_| chunk_refs_of(f));
            p.staged = Some(Staged {
                entry,
                report,
                outcome,
                nc,
                problems,
                chunk_refs,
            });
        }
        Err(e) => {
            p.count = Some("failed");
            p.report["error"] = json!(e);
        }
    }
    p
}

/// What [`run`] did: each file's report entry (in file order), the counts
/// by outcome, the fixes applied, and the bytes published.
pub struct Tally {
    pub entries: Vec<Value>,
    pub counts: BTreeMap<&'static str, u64>,
    pub fixes: BTreeMap<String, u64>,
    pub bytes: u64,
}

/// Publishes `files` (under `root`): `jobs` workers [`prepare`] them, this
/// thread publishes what they staged in batches of [`COMMIT_BATCH`] with one
/// group commit each and catalogs each batch (queued while the catalog is
/// unavailable). Without `publish` (a dry run) nothing is staged. With
/// `chunk_index`, the byte ranges of every netCDF-4 chunk are read once and
/// catalogued (virtual Zarr).
/// `progress` is called once per file done.
#[allow(clippy::too_many_arguments)]
pub fn run(
    files: &[PathBuf],
    root: &Path,
    ix: &Indexer,
    others: Option<&Name>,
    publish: Option<(&granary_repo::Repo, &granary_security::Signer)>,
    chunking: Option<granary_store::Chunking>,
    chunk_index: bool,
    jobs: u64,
    progress: &dyn Fn(),
) -> anyhow::Result<Tally> {
    let mut entries: Vec<Option<Value>> = vec![None; files.len()];
    let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut fix_counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut bytes = 0u64;
    // Files are read, translated and staged (ingested, manifest signed,
    // nothing durable or visible yet) by `--jobs` workers; this thread
    // publishes what they staged in batches with one group commit each
    // (two syncfs per batch instead of several fsyncs per file: each file
    // still appears complete or not at all), then catalogs the batch.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let jobs = jobs.max(1);
    let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Prepared)>(COMMIT_BATCH);
    let result = std::thread::scope(|sc| -> anyhow::Result<()> {
        for k in 0..jobs {
            let tx = tx.clone();
            let next = &next;
            std::thread::Builder::new()
                .name(format!("publish-dir-{k}"))
                .spawn_scoped(sc, move || loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(f) = files.get(i) else { break };
                    let p = prepare(f, root, ix, others, publish, chunking, chunk_index);
                    if tx.send((i, p)).is_err() {
                        break;
                    }
                })?;
        }
        drop(tx);
        let mut pending: Vec<(usize, Staged)> = Vec::new();
        let mut records: Vec<Record> = Vec::new();
        let mut warned = false;
        let mut commit = |pending: &mut Vec<(usize, Staged)>,
                          entries: &mut Vec<Option<Value>>,
                          counts: &mut BTreeMap<&'static str, u64>,
                          bytes: &mut u64,
                          records: &mut Vec<Record>|
         -> anyhow::Result<()> {
            let Some((repo, _)) = publish else {
                return Ok(());
            };
            if pending.is_empty() && records.is_empty() {
                return Ok(());
            }
            let warned = &mut warned;
            let batch = std::mem::take(pending);
            let staged: Vec<granary_store::Entry> =
                batch.iter().map(|(_, s)| s.entry.clone()).collect();
            // The batch's records go to the catalog queue before the files are
            // published: a run killed after the commit leaves them there, and
            // the next command that opens the catalog applies those whose
            // files exist. Removed from the queue once catalogued.
            let journal = {
                let records = batch
                    .iter()
                    .map(|(_, s)| {
                        record::record_with(
                            &s.entry,
                            &s.outcome,
                            s.nc.as_ref(),
                            s.problems.clone(),
                            ix.node(),
                        )
                    })
                    .chain(records.iter().cloned())
                    .collect();
                ix.queue
                    .push(&granary_search::queue::Op::Journal {
                        records,
                        writer: granary_search::queue::Writer::current(),
                    })
                    .map_err(|e| {
                        anyhow::anyhow!("catalog queue {}: {e}", ix.queue.dir().display())
                    })?
            };
            let done = granary_repo::publish::commit(repo, staged, true);
            let mut chunk_refs: Vec<(String, u64, String)> = Vec::new();
            for ((i, s), r) in batch.into_iter().zip(done) {
                let mut entry = s.report;
                match r {
                    Ok(e) => {
                        if let Some(refs) = &s.chunk_refs {
                            chunk_refs.push((e.meta.name.clone(), e.meta.version, refs.clone()));
                        }
                        *counts.entry("published").or_default() += 1;
                        *bytes += e.meta.size;
                        entry["published"] = json!(format!("{}/v={}", e.meta.name, e.meta.version));
                        records.push(record::record_with(
                            &e,
                            &s.outcome,
                            s.nc.as_ref(),
                            s.problems,
                            ix.node(),
                        ));
                    }
                    Err(e) => {
                        *counts.entry("failed").or_default() += 1;
                        entry["error"] = json!(e);
                    }
                }
                entries[i] = Some(entry);
            }
            // Catalogued once durable; queued (the journal stays) while the
            // catalog is unavailable.
            match ix.catalog.upsert_many(records) {
                Ok(()) => {
                    for (name, version, refs) in chunk_refs.drain(..) {
                        // Best effort: a missing index makes the dataset's Zarr view
                        // "not available", never the publication fail.
                        if let Err(e) = ix.catalog.put_chunk_refs(&name, version, &refs) {
                            eprintln!("catalog: chunk index of {name}: {e}");
                        }
                    }
                    let _ = std::fs::remove_file(&journal);
                }
                Err(e) if granary_search::queue::retryable(&e) => {
                    // Queued: exactly what was published (the journal also
                    // names what failed to commit).
                    let queued = granary_search::queue::Op::Upsert {
                        records: records.clone(),
                    };
                    ix.queue.push(&queued).map_err(|e| {
                        anyhow::anyhow!("catalog queue {}: {e}", ix.queue.dir().display())
                    })?;
                    let _ = std::fs::remove_file(&journal);
                    *counts.entry("queued").or_default() += records.len() as u64;
                    if !*warned {
                        eprintln!(
                            "catalog: {e}; records queued in {} and catalogued when the catalog is back",
                            ix.queue.dir().display()
                        );
                        *warned = true;
                    }
                }
                Err(e) => return Err(e.into()),
            }
            records.clear();
            Ok(())
        };
        for (i, p) in rx {
            progress();
            *counts.entry(p.status).or_default() += 1;
            for fx in p.fixes {
                *fix_counts.entry(fx).or_default() += 1;
            }
            if let Some(c) = p.count {
                *counts.entry(c).or_default() += 1;
            }
            if let Some(r) = p.recatalog {
                *counts.entry("catalogued again").or_default() += 1;
                records.push(r);
            }
            match p.staged {
                Some(s) => pending.push((i, s)),
                None => entries[i] = Some(p.report),
            }
            if pending.len() + records.len() >= COMMIT_BATCH {
                commit(
                    &mut pending,
                    &mut entries,
                    &mut counts,
                    &mut bytes,
                    &mut records,
                )?;
            }
        }
        commit(
            &mut pending,
            &mut entries,
            &mut counts,
            &mut bytes,
            &mut records,
        )
    });
    result?;
    Ok(Tally {
        entries: entries.into_iter().flatten().collect(),
        counts,
        fixes: fix_counts,
        bytes,
    })
}

/// The repository and publisher signer [`run`] publishes with, and the
/// repository's default chunking (read once, not once per file); with the
/// publisher key when it was made for this. Changes an earlier run (or
/// another command) left queued in `ix` are applied first.
pub fn open_publishing(
    data_dir: &Path,
    ix: &Indexer,
) -> anyhow::Result<(
    granary_repo::Repo,
    granary_security::Signer,
    granary_store::Chunking,
    Option<String>,
)> {
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    let id = crate::identity::publisher_identity(data_dir)?;
    let (signer, created) = granary_repo::publish::publisher_signer_as(&kc, None, "manifest", &id)
        .map_err(|e| anyhow::anyhow!(e))?;
    let store = crate::repo::store(data_dir)?;
    let chunking = store.default_chunking()?;
    let repo = granary_repo::Repo::new(store, None);
    if !ix.queue.is_empty() {
        ix.drain(&repo.store);
    }
    Ok((repo, signer, chunking, created.map(|k| k.to_string())))
}

/// Writes `publish-dir`'s JSON report to `to`, or by default to
/// `<catalog dir>/reports/publish-dir-<ms>.json`; where it went.
pub fn write_report(data_dir: &Path, to: Option<&Path>, report: &Value) -> anyhow::Result<PathBuf> {
    let path = match to {
        Some(p) => p.to_path_buf(),
        None => {
            let d = granary_search::default_catalog_dir(data_dir).join("reports");
            std::fs::create_dir_all(&d)?;
            let ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0);
            d.join(format!("publish-dir-{ms}.json"))
        }
    };
    granary_store::write_atomic(&path, serde_json::to_string_pretty(report)?.as_bytes())?;
    Ok(path)
}

/// `publish-dir`'s JSON report of a run over `files` files under `root`
/// that took `seconds`, and how many files have a name that disagrees with
/// their contents.
pub fn report(root: &Path, dry_run: bool, files: usize, t: &Tally, seconds: f64) -> (Value, usize) {
    let mismatched = t
        .entries
        .iter()
        .filter(|e| {
            e["outcome"]["mismatches"]
                .as_array()
                .is_some_and(|m| !m.is_empty())
        })
        .count();
    let report = json!({
        "dir": root,
        "dry_run": dry_run,
        "mismatched": mismatched,
        "files": files,
        "counts": t.counts,
        "fixes": t.fixes,
        "seconds": seconds,
        "bytes_published": t.bytes,
        "entries": t.entries,
    });
    (report, mismatched)
}

/// What `publish-dir` says of each file: its outcome unless it was simply
/// translated (every outcome with `dry_run`), each disagreement between its
/// name and its contents (published, and said), and its failure.
pub fn entry_lines(entries: &[Value], dry_run: bool) -> Vec<String> {
    let mut out = Vec::new();
    for e in entries {
        let o = &e["outcome"];
        let path = e["path"].as_str().unwrap_or_default();
        let status = o["status"].as_str().unwrap_or("?");
        let detail = match status {
            "rejected" => o["reason"].as_str().unwrap_or_default().to_string(),
            "fixed" => o["fixes"]
                .as_array()
                .map(|f| {
                    f.iter()
                        .map(|x| x["detail"].as_str().unwrap_or_default().to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                })
                .unwrap_or_default(),
            _ => String::new(),
        };
        if status != "translated" || dry_run {
            out.push(format!(
                "{status:<10} {path}{}{}",
                e["name"]
                    .as_str()
                    .map(|n| format!(" -> {n}"))
                    .unwrap_or_default(),
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({detail})")
                }
            ));
        }
        for m in o["mismatches"].as_array().into_iter().flatten() {
            out.push(format!(
                "mismatch   {path}: {} '{}' in the name, {} '{}' in the file",
                m["facet"].as_str().unwrap_or_default(),
                m["name_value"].as_str().unwrap_or_default(),
                m["attribute"].as_str().unwrap_or_default(),
                m["attribute_value"].as_str().unwrap_or_default(),
            ));
        }
        if let Some(err) = e["error"].as_str() {
            out.push(format!("failed     {path}: {err}"));
        }
    }
    out
}

/// The totals `publish-dir` ends with: each outcome's count, and the
/// mismatches.
pub fn summary(t: &Tally, mismatched: usize) -> String {
    let mut s: Vec<String> = t.counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    if mismatched > 0 {
        s.push(format!(
            "{mismatched} with a name that disagrees with the contents (`mismatch` lines)"
        ));
    }
    s.join(", ")
}
