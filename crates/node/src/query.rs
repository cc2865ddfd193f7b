//! Asking the science catalog: the local node's (through the daemon when it
//! runs, else the data directory's directly) or a remote node's, every page
//! of an answer, and where `get --query` writes each match.

use std::path::{Path, PathBuf};

use granary_app::Client;
use granary_catalog::{Page, Query, Record};
use granary_packet::Name;
use granary_science::drs::{Translator, Trust};
use granary_search::{protocol, record, Indexer};
use serde_json::json;

use crate::catalog::settings;

/// Runs `q` on the local node's catalog (through the daemon when one runs,
/// else directly on the data directory's catalog) or on a remote catalog.
pub fn run_query(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    node: Option<&str>,
    q: &Query,
) -> anyhow::Result<Page> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let remote = match node {
        Some(p) => Some(Name::from_uri(p).map_err(|e| anyhow::anyhow!("--node {p}: {e}"))?),
        None => None,
    };
    let client = rt.block_on(Client::connect(socket));
    let prefix = match (&remote, client.is_ok()) {
        (Some(p), _) => p.clone(),
        (None, true) => Name::from_uri(protocol::LOCAL_PREFIX)?,
        (None, false) => {
            // No node running: the embedded catalog of this data directory.
            let ix = Indexer::open(data_dir, &settings(data_dir, catalog, &[], Trust::Name))
                .map_err(|e| anyhow::anyhow!(e))?;
            let mut page = ix.catalog.query(q).map_err(|e| anyhow::anyhow!("{e}"))?;
            granary_search::service::slim(&mut page);
            return Ok(page);
        }
    };
    let mut c = client?;
    let v = rt
        .block_on(granary_search::client::ask(
            &mut c,
            &prefix,
            protocol::VERB_SEARCH,
            &json!(q),
            4000,
        ))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    serde_json::from_value(v).map_err(|e| anyhow::anyhow!("bad answer from {prefix}: {e}"))
}

/// Runs a dataset query like [`run_query`] (the catalog's `datasets` verb).
pub fn run_dataset_query(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    node: Option<&str>,
    q: &granary_catalog::DatasetQuery,
) -> anyhow::Result<granary_catalog::DatasetPage> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let remote = match node {
        Some(p) => Some(Name::from_uri(p).map_err(|e| anyhow::anyhow!("--node {p}: {e}"))?),
        None => None,
    };
    let client = rt.block_on(Client::connect(socket));
    let prefix = match (&remote, client.is_ok()) {
        (Some(p), _) => p.clone(),
        (None, true) => Name::from_uri(protocol::LOCAL_PREFIX)?,
        (None, false) => {
            let ix = Indexer::open(data_dir, &settings(data_dir, catalog, &[], Trust::Name))
                .map_err(|e| anyhow::anyhow!(e))?;
            return ix.catalog.datasets(q).map_err(|e| anyhow::anyhow!("{e}"));
        }
    };
    let mut c = client?;
    let v = rt
        .block_on(granary_search::client::ask(
            &mut c,
            &prefix,
            protocol::VERB_DATASETS,
            &json!(q),
            4000,
        ))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    serde_json::from_value(v).map_err(|e| anyhow::anyhow!("bad answer from {prefix}: {e}"))
}

/// Every record matching `q` (all pages), latest versions unless asked.
pub fn all_matches(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    q: &Query,
) -> anyhow::Result<Vec<Record>> {
    let mut q = q.clone();
    q.limit = 10_000;
    q.offset = 0;
    q.facets = granary_catalog::FacetSel::None;
    let mut out = Vec::new();
    loop {
        let page = run_query(data_dir, socket, catalog, None, &q)?;
        let n = page.hits.len();
        out.extend(page.hits);
        if n == 0 || out.len() as u64 >= page.total {
            break;
        }
        q.offset += n;
    }
    Ok(out)
}

/// A path component safe to create under an output directory.
fn safe_component(c: &str) -> String {
    let s: String = c
        .chars()
        .map(|ch| {
            if ch == '/' || ch == '\0' || ch == '\\' {
                '_'
            } else {
                ch
            }
        })
        .collect();
    if s.is_empty() || s == "." || s == ".." {
        format!("_{s}_")
    } else {
        s
    }
}

/// Where a record goes under the output directory: its DRS path (the
/// directory layout of the archive) unless `flat`, else the file name.
pub fn output_path(tr: &Translator, r: &Record, flat: bool) -> PathBuf {
    let name = Name::from_uri(&r.name).unwrap_or_default();
    let comps = record::components(&name);
    let file = safe_component(comps.last().map(String::as_str).unwrap_or("object"));
    if flat {
        return PathBuf::from(file);
    }
    let drs = r
        .facets
        .get("version")
        .and_then(|v| tr.reverse(&comps, v).ok())
        .map(|p| p.path());
    let rel = drs.unwrap_or_else(|| comps.join("/"));
    rel.split('/')
        .filter(|c| !c.is_empty())
        .map(safe_component)
        .collect()
}

/// `granary get --query`: the versioned names, output paths and sizes of
/// the files `q` matches.
pub fn plan_query_get(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    q: &Query,
    flat: bool,
) -> anyhow::Result<Vec<(String, PathBuf, u64)>> {
    let hits = all_matches(data_dir, socket, catalog, q)?;
    let tr = granary_search::translator(&settings(data_dir, catalog, &[], Trust::Name))
        .map_err(|e| anyhow::anyhow!(e))?;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for r in hits {
        let p = output_path(&tr, &r, flat);
        if !seen.insert(p.clone()) {
            anyhow::bail!(
                "two matching files would both be written to {} (use the DRS layout, not --flat)",
                p.display()
            );
        }
        let versioned = format!("{}/v={}", r.name, r.version);
        out.push((versioned, p, r.size));
    }
    Ok(out)
}
