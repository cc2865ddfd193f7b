//! `publish-dir`'s work on one file, done by its worker threads: netCDF
//! metadata, DRS translation, and staging in the repository (skipped for a
//! file published unchanged already), ready for the group commit.

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
    let outcome: Outcome = ix.translator.translate(&rel, attrs.as_ref());
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
    let how = granary_repo::local::Publish {
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
    match granary_repo::local::stage_file(repo, &name, f, &how) {
        Ok(entry) => {
            let report = std::mem::take(&mut p.report);
            p.staged = Some(Staged {
                entry,
                report,
                outcome,
                nc,
                problems,
            });
        }
        Err(e) => {
            p.count = Some("failed");
            p.report["error"] = json!(e);
        }
    }
    p
}
