//! Asking the science catalog: the local node's (through the daemon when it
//! runs, else the data directory's directly) or a remote node's, every page
//! of an answer, and where `get --query` writes each match.

use std::fmt::Write as _;
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
/// the files `query` (facet constraints and words, as `search` takes them)
/// matches.
pub fn plan_query_get(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    query: &str,
    flat: bool,
) -> anyhow::Result<Vec<(String, PathBuf, u64)>> {
    let words: Vec<&str> = query.split_whitespace().collect();
    let q = Query::parse_args(&words).map_err(|e| anyhow::anyhow!("{e}"))?;
    let hits = all_matches(data_dir, socket, catalog, &q)?;
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

/// `granary search`'s text: the count, one line per file, the facet counts.
pub fn page_text(page: &Page, offset: usize) -> String {
    let mut out = String::new();
    let shown = page.hits.len();
    let _ = writeln!(
        out,
        "{} match{}{}",
        page.total,
        if page.total == 1 { "" } else { "es" },
        if shown > 0 {
            format!(", showing {}–{}", offset + 1, offset + shown)
        } else {
            String::new()
        }
    );
    let w = page
        .hits
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(4)
        .min(110);
    for r in &page.hits {
        let time = match (&r.time_start, &r.time_end) {
            (Some(a), Some(b)) => format!("{} – {}", &a[..a.len().min(10)], &b[..b.len().min(10)]),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{:<w$}  v={:<16}  {:>10}  {}",
            r.name,
            r.version,
            human(r.size),
            time,
            w = w
        );
    }
    for (facet, values) in &page.facet_counts {
        let list: Vec<String> = values.iter().map(|(v, n)| format!("{v} ({n})")).collect();
        let _ = writeln!(out, "{facet}: {}", list.join(", "));
    }
    out
}

/// `granary search --datasets`' text: the count, one line per dataset (its
/// gaps, overlaps and files below it), the facet counts.
pub fn datasets_text(page: &granary_catalog::DatasetPage, offset: usize) -> String {
    let mut out = String::new();
    let shown = page.hits.len();
    let _ = writeln!(
        out,
        "{} dataset{}{}",
        page.total,
        if page.total == 1 { "" } else { "s" },
        if shown > 0 {
            format!(", showing {}–{}", offset + 1, offset + shown)
        } else {
            String::new()
        }
    );
    let day = |t: &Option<String>| {
        t.as_deref()
            .map_or("?", |t| &t[..t.len().min(10)])
            .to_string()
    };
    for d in &page.hits {
        let axis = if d.contiguous {
            "contiguous".to_string()
        } else {
            let mut why = Vec::new();
            if !d.gaps.is_empty() {
                why.push(format!(
                    "{} gap{}",
                    d.gaps.len(),
                    if d.gaps.len() == 1 { "" } else { "s" }
                ));
            }
            if !d.overlaps.is_empty() {
                why.push(format!(
                    "{} overlap{}",
                    d.overlaps.len(),
                    if d.overlaps.len() == 1 { "" } else { "s" }
                ));
            }
            if d.untimed_files > 0 {
                why.push(format!("{} without time", d.untimed_files));
            }
            why.join(", ")
        };
        let _ = writeln!(
            out,
            "{}  {} file{}  {}  {} – {}  {}{}",
            d.instance_id,
            d.number_of_files,
            if d.number_of_files == 1 { "" } else { "s" },
            human(d.size),
            day(&d.time_start),
            day(&d.time_end),
            axis,
            if d.latest { "" } else { "  (superseded)" }
        );
        for g in &d.gaps {
            let _ = writeln!(
                out,
                "  gap      {} → {}  ({} | {})",
                g.from, g.to, g.after, g.before
            );
        }
        for g in &d.overlaps {
            let _ = writeln!(
                out,
                "  overlap  {} → {}  ({} | {})",
                g.from, g.to, g.after, g.before
            );
        }
        for f in &d.files {
            let _ = writeln!(
                out,
                "  {}  v={}  {}  {} – {}",
                f.name,
                f.version,
                human(f.size),
                day(&f.time_start),
                day(&f.time_end)
            );
        }
    }
    for (facet, values) in &page.facet_counts {
        let list: Vec<String> = values.iter().map(|(v, n)| format!("{v} ({n})")).collect();
        let _ = writeln!(out, "{facet}: {}", list.join(", "));
    }
    out
}

/// A size in bytes for people: `512 B`, `1.5 KiB`, … `TiB`.
pub fn human(n: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = n as f64;
    let mut i = 0;
    while x >= 1024.0 && i < U.len() - 1 {
        x /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{x:.1} {}", U[i])
    }
}
