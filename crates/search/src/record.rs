//! Catalog records from published versions: the name is translated back to
//! its DRS path (facets), the stored file's netCDF header is read (attributes,
//! variables, time coverage, bounding box), and the two are cross-checked.

use std::collections::BTreeMap;
use std::path::Path;

use granary_catalog::Record;
use granary_packet::Name;
use granary_science::drs::{Outcome, Translator};
use granary_science::netcdf::{self, NcMeta};
use granary_store::Entry;
use serde_json::{json, Value};

/// The `FileMeta::tags` key holding a file's DRS version (`v20190429`).
pub const DRS_VERSION_TAG: &str = "drs_version";

/// Components of `name` as text (lossy for non-UTF-8 bytes).
pub fn components(name: &Name) -> Vec<String> {
    name.components()
        .map(|c| String::from_utf8_lossy(c.value).into_owned())
        .collect()
}

/// Reads the netCDF metadata of `path` if it is a netCDF file: `Ok(None)`
/// when it is not one, `Err` (the reason) when it is one but cannot be read.
pub fn netcdf_of(path: &Path) -> Result<Option<NcMeta>, String> {
    use std::io::Read;
    let mut head = [0u8; 8];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if netcdf::sniff(&head[..n]).is_none() {
        return Ok(None);
    }
    netcdf::read(path).map(Some).map_err(|e| e.to_string())
}

/// Translates a published name (with its DRS version, when known) to facets:
/// the DRS path is rebuilt from the name and translated with the file's
/// attributes; without a DRS version only the file name is translated.
pub fn translate_name(
    tr: &Translator,
    name: &Name,
    drs_version: Option<&str>,
    attrs: Option<&BTreeMap<String, String>>,
) -> Outcome {
    let comps = components(name);
    if let Some(v) = drs_version {
        if let Ok(p) = tr.reverse(&comps, v) {
            return tr.translate(&p.path(), attrs);
        }
    }
    tr.translate(comps.last().map(String::as_str).unwrap_or_default(), attrs)
}

/// The catalog record of a published version. Never fails: what could not be
/// read is said in `meta.problems`, and the file is still catalogued by name.
pub fn record_for(tr: &Translator, e: &Entry, node: Option<&str>) -> Record {
    let mut problems = Vec::new();
    let nc = match netcdf_of(&e.path) {
        Ok(nc) => nc,
        Err(why) => {
            problems.push(format!("netCDF metadata not read: {why}"));
            None
        }
    };
    let attrs = nc.as_ref().map(NcMeta::global_strings);
    let name = Name::from_uri(&e.meta.name).unwrap_or_default();
    let drs_version = e.meta.tags.get(DRS_VERSION_TAG).map(String::as_str);
    let mut outcome = translate_name(tr, &name, drs_version, attrs.as_ref());
    granary_science::consistency::check(&mut outcome, nc.as_ref());
    record_with(e, &outcome, nc.as_ref(), problems, node)
}

/// The global attributes a record carries on its own (identifiers, terms of use), on
/// one line each and bounded as the catalog bounds them.
const RECORD_ATTRIBUTES: [&str; 4] = ["tracking_id", "further_info_url", "license", "citation"];

/// What `publish-dir` (a dry run too) reports of a file's contents: its time axis and
/// the attributes its record will carry.
pub fn metadata_summary(nc: &NcMeta) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("format".into(), json!(nc.format));
    if let Some(t) = &nc.time {
        m.insert("time".into(), json!(t));
    }
    for k in RECORD_ATTRIBUTES {
        if let Some(v) = nc.global_line(k, granary_catalog::MAX_VALUE) {
            m.insert(k.into(), json!(v));
        }
    }
    if !nc.warnings.is_empty() {
        m.insert("warnings".into(), json!(nc.warnings));
    }
    Value::Object(m)
}

/// The record of `e` from a translation and netCDF metadata already made
/// (`granary publish-dir` has both before it publishes).
pub fn record_with(
    e: &Entry,
    outcome: &Outcome,
    nc: Option<&NcMeta>,
    mut problems: Vec<String>,
    node: Option<&str>,
) -> Record {
    let m = &e.meta;
    let name = match Name::from_uri(&m.name) {
        Ok(n) => n,
        Err(e) => {
            problems.push(format!("name {:?}: {e}", m.name));
            Name::new()
        }
    };
    let drs_version = m.tags.get(DRS_VERSION_TAG).map(String::as_str);
    let comps = components(&name);
    let title = comps.last().cloned().unwrap_or_default();
    let (project, mut facets) = if outcome.is_accepted() {
        (
            outcome.project.clone().unwrap_or_default(),
            outcome.facets.clone(),
        )
    } else {
        problems.push(format!(
            "not a DRS name: {}",
            outcome.reason.clone().unwrap_or_default()
        ));
        (String::new(), BTreeMap::new())
    };
    if let Some(v) = drs_version {
        facets
            .entry("version".into())
            .or_insert_with(|| v.to_string());
    }
    let mut text = vec![title.clone(), m.name.clone()];
    if let Some(nc) = nc {
        text.push(nc.text());
    }
    let meta = json!({
        "format": nc.map(|n| json!(n.format)),
        "attributes": nc.map(|n| json!(n.global)),
        "dimensions": nc.map(|n| json!(n.dims)),
        "variables": nc.map(|n| json!(n.variables)),
        "time": nc.and_then(|n| n.time.as_ref()).map(|t| json!(t)),
        "warnings": nc.map(|n| json!(n.warnings)),
        "translation": {
            "status": outcome.status,
            "fixes": outcome.fixes,
            "mismatches": outcome.mismatches,
            "reason": outcome.reason,
        },
        "drs_version": drs_version,
        "chunking": m.chunking,
        "signing": m.signing,
        "signer": m.signer,
        "created_ms": m.created_ms,
        "problems": problems,
    });
    let time = nc.and_then(|n| n.time.as_ref());
    Record {
        name: m.name.clone(),
        version: m.version,
        project,
        facets,
        title,
        size: m.size,
        time_start: time.map(|t| t.start.clone()),
        time_end: time.map(|t| t.end.clone()),
        bbox: nc
            .and_then(|n| n.bbox)
            .map(|b| [b.lat_min, b.lat_max, b.lon_min, b.lon_max]),
        text: text.join(" "),
        meta: strip_nulls(meta),
        sha256: m.sha256.clone(),
        manifest_digest: m.manifest.clone(),
        node: node.map(str::to_string),
        tracking_id: nc.and_then(|n| n.global_line("tracking_id", granary_catalog::MAX_VALUE)),
        further_info_url: nc
            .and_then(|n| n.global_line("further_info_url", granary_catalog::MAX_VALUE)),
        license: nc.and_then(|n| n.global_line("license", granary_catalog::MAX_VALUE)),
        citation: nc.and_then(|n| n.global_line("citation", granary_catalog::MAX_VALUE)),
    }
}

fn strip_nulls(mut v: Value) -> Value {
    if let Value::Object(o) = &mut v {
        o.retain(|_, x| !x.is_null());
    }
    v
}
