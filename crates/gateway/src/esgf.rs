//! The subset of ESGF's search API (`/esg-search/search`, `/esg-search/wget`)
//! that esgf-pyclient (`pyesgf`) uses, answered from the catalog in the Solr
//! JSON shape it parses.
//!
//! Dataset documents are the catalog's dataset records (`granary_catalog::dataset`:
//! the files sharing a directory and a DRS `version` facet); the `instance_id` is
//! the directory's components joined by dots (the first written as the project,
//! `CMIP6`, when they agree) and the version:
//! `CMIP6.CMIP.CCCma.CanESM5.historical.r1i1p1f1.Amon.tas.gn.v20190429`.

use std::collections::BTreeMap;

use axum::extract::State as St;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use granary_catalog::{dataset, Dataset, DatasetQuery, FacetSel, Query, Record, MAX_LIMIT};
use serde_json::{json, Map, Value};

use crate::api::check_facets;
use crate::api::{download_path, opendap_path, with_catalog};
use crate::query::{facet_sel, pairs, parse_bool, parse_num};
use crate::wget::{all_records, host_of, origin, script, script_response};
use crate::{error, State};

/// Files scanned to build datasets for one request, at most.
pub(crate) const MAX_SCAN: usize = 200_000;

/// Longest query string on `/esg-search/…` (bytes): about 600 `dataset_id`s,
/// which intake-esgf sends in one File search (other paths: [`crate::MAX_QUERY`]).
/// hyper refuses a request target over 64 KiB before the gateway sees it.
pub const MAX_QUERY: usize = 60 * 1024;

/// Documents per page when the request sends no `limit`. ESGF's index answers 10;
/// intake-esgf sends no limit and reads every page, so a larger page means fewer
/// round trips (1000 datasets ≈ 1.5 MB of JSON). esgf-pyclient always sends its own limit.
pub const DEFAULT_LIMIT: usize = 1000;

/// CMIP6's directory template, as ESGF's File documents carry it (clients such
/// as intake-esgf build a file's local path from it).
const CMIP6_DIRECTORY_TEMPLATE: &str = "%(root)s/%(mip_era)s/%(activity_drs)s/%(institution_id)s/%(source_id)s/%(experiment_id)s/%(member_id)s/%(table_id)s/%(variable_id)s/%(grid_label)s/%(version)s";

/// Parameters that are not constraints.
const KEYWORDS: &[&str] = &[
    "type",
    "limit",
    "offset",
    "latest",
    "replica",
    "distrib",
    "shards",
    "facets",
    "format",
    "fields",
    "query",
    "dataset_id",
    "sort",
    "start",
    "end",
    "from",
    "to",
    "bbox",
    "download_structure",
    "download_emptypath",
    "retracted",
];

#[derive(Debug, Default)]
struct Esgf {
    file: bool,
    limit: usize,
    offset: usize,
    facets: FacetSel,
    latest: Option<bool>,
    replica: Option<bool>,
    retracted: Option<bool>,
    dataset_ids: Vec<String>,
    query: Query,
}

fn parse(p: &[(String, String)]) -> Result<Esgf, String> {
    let mut e = Esgf {
        limit: DEFAULT_LIMIT,
        ..Default::default()
    };
    let mut q = Query {
        latest_only: false,
        ..Query::default()
    };
    let mut words = Vec::new();
    for (k, v) in p {
        let split = || {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        match k.as_str() {
            "type" => {
                e.file = match v.to_ascii_lowercase().as_str() {
                    "dataset" | "" => false,
                    "file" => true,
                    _ => return Err(format!("type={v:?}: expected Dataset or File")),
                }
            }
            "limit" => {
                // As ESGF's index and /api/search: more than the maximum is refused.
                e.limit = parse_num(k, v)?;
                if e.limit > MAX_LIMIT {
                    return Err(format!(
                        "limit={v}: too many records requested, the maximum is limit={MAX_LIMIT} (page with offset)"
                    ));
                }
            }
            "offset" => e.offset = parse_num(k, v)?,
            "latest" => e.latest = Some(parse_bool(k, v)?),
            "replica" => e.replica = Some(parse_bool(k, v)?),
            "retracted" => e.retracted = Some(parse_bool(k, v)?),
            "facets" => e.facets = facet_sel(v),
            "query" => {
                if !v.trim().is_empty() && v.trim() != "*" && v.trim() != "*:*" {
                    words.push(v.clone())
                }
            }
            "dataset_id" => e.dataset_ids.extend(split()),
            "start" | "from" => q.time_overlap.get_or_insert((None, None)).0 = Some(v.clone()),
            "end" | "to" => q.time_overlap.get_or_insert((None, None)).1 = Some(v.clone()),
            k if KEYWORDS.contains(&k) => {}
            "" => return Err("a parameter has an empty name".into()),
            k => {
                let (map, key) = match k.strip_suffix('!') {
                    Some(f) => (&mut q.exclude, f),
                    None => (&mut q.filters, k),
                };
                let e = map.entry(key.to_string()).or_default();
                for x in split() {
                    if !e.contains(&x) {
                        e.push(x);
                    }
                }
            }
        }
    }
    if !words.is_empty() {
        q.text = Some(words.join(" "));
    }
    q.validate().map_err(|e| e.to_string())?;
    e.query = q;
    Ok(e)
}

/// The dataset a file belongs to: (instance id, master id, version), by the
/// catalog's rule (`granary_catalog::dataset`), so File documents name the dataset
/// records' ids.
pub(crate) fn dataset_of(r: &Record) -> (String, String, String) {
    let dir = dataset::dataset_dir(
        &r.name,
        r.facets
            .get(dataset::DATASET_VARIABLE_FACET)
            .map(String::as_str),
    );
    let master = dataset::master_id(dir, &r.project);
    let version = r.facets.get("version").cloned().unwrap_or_default();
    (dataset::instance_id(&master, &version), master, version)
}

fn facet_lists(r: &Record) -> Map<String, Value> {
    let mut m = Map::new();
    for (k, v) in &r.facets {
        m.insert(k.clone(), json!([v]));
    }
    if !r.project.is_empty() {
        m.insert("project".into(), json!([r.project]));
    }
    if r.project.eq_ignore_ascii_case("CMIP6") {
        // ESGF's CMIP6 records name the DRS directory's activity `activity_drs`
        // (`activity_id` may list several) and always carry `mip_era`.
        if let Some(a) = r.facets.get("activity_id") {
            m.entry("activity_drs").or_insert_with(|| json!([a]));
        }
        m.entry("mip_era").or_insert_with(|| json!([r.project]));
    }
    if let Some(u) = &r.further_info_url {
        m.insert("further_info_url".into(), json!([u]));
    }
    m
}

fn file_doc(r: &Record, base: &str, node: &str) -> Value {
    let (inst, master, version) = dataset_of(r);
    let mut d = facet_lists(r);
    let url = format!("{base}{}", download_path(&r.name, r.version));
    let dap = format!("{base}{}", opendap_path(r));
    let fields = json!({
        "id": format!("{inst}.{}|{node}", r.title),
        "instance_id": format!("{inst}.{}", r.title),
        "master_id": format!("{master}.{}", r.title),
        "dataset_id": format!("{inst}|{node}"),
        "type": "File",
        "title": r.title,
        "size": r.size,
        "version": if version.is_empty() { r.version.to_string() } else { version.trim_start_matches('v').to_string() },
        "data_node": node,
        "index_node": node,
        "replica": false,
        "latest": true,
        // OPeNDAP as ESGF lists it (`….nc.html`, which esgf-pyclient strips),
        // and the data URL itself, which intake-esgf's streaming looks for.
        "url": [
            format!("{url}|application/netcdf|HTTPServer"),
            format!("{dap}.html|application/opendap-html|OPENDAP"),
            format!("{dap}|application/opendap|OPENDAP"),
        ],
        "ndn_name": r.name,
        "ndn_version": r.version,
    });
    if let Value::Object(f) = fields {
        d.extend(f);
    }
    if let Some(h) = &r.sha256 {
        d.insert("checksum".into(), json!([h]));
        d.insert("checksum_type".into(), json!(["SHA256"]));
    }
    if let Some(t) = &r.tracking_id {
        d.insert("tracking_id".into(), json!([t]));
    }
    // Terms of use and how to cite, where the file states them.
    if let Some(l) = &r.license {
        d.insert("license".into(), json!([l]));
    }
    if let Some(c) = &r.citation {
        d.insert("citation".into(), json!([c]));
    }
    if r.project.eq_ignore_ascii_case("CMIP6") {
        d.insert(
            "directory_format_template_".into(),
            json!([CMIP6_DIRECTORY_TEMPLATE]),
        );
    }
    if let Some(t) = &r.time_start {
        d.insert("datetime_start".into(), json!(t));
    }
    if let Some(t) = &r.time_end {
        d.insert("datetime_stop".into(), json!(t));
    }
    Value::Object(d)
}

fn dataset_doc(ds: &Dataset, node: &str) -> Value {
    let mut d = Map::new();
    for (k, v) in &ds.facets {
        d.insert(k.clone(), json!([v]));
    }
    if !ds.project.is_empty() {
        d.insert("project".into(), json!([ds.project]));
    }
    if ds.project.eq_ignore_ascii_case("CMIP6") {
        if let Some(a) = ds.facets.get("activity_id") {
            d.entry("activity_drs").or_insert_with(|| json!([a]));
        }
        d.entry("mip_era").or_insert_with(|| json!([ds.project]));
    }
    let fields = json!({
        "id": format!("{}|{node}", ds.instance_id),
        "instance_id": ds.instance_id,
        "master_id": ds.master_id,
        "title": ds.instance_id,
        "type": "Dataset",
        "version": ds.version.trim_start_matches('v'),
        "number_of_files": ds.number_of_files,
        "size": ds.size,
        "data_node": node,
        "index_node": node,
        "latest": ds.latest,
        "replica": false,
        "url": [],
        "ndn_name": ds.name,
        "contiguous": ds.contiguous,
    });
    if let Value::Object(f) = fields {
        d.extend(f);
    }
    if let Some(t) = &ds.time_start {
        d.insert("datetime_start".into(), json!(t));
    }
    if let Some(t) = &ds.time_end {
        d.insert("datetime_stop".into(), json!(t));
    }
    Value::Object(d)
}

fn solr(
    params: &[(String, String)],
    found: u64,
    start: usize,
    docs: Vec<Value>,
    counts: Value,
) -> Value {
    let mut p = Map::new();
    for (k, v) in params {
        p.insert(k.clone(), json!(v));
    }
    p.insert("shards".into(), json!("127.0.0.1:8983/solr/datasets"));
    json!({
        "responseHeader": {"status": 0, "QTime": 0, "params": p},
        "response": {"numFound": found, "start": start, "maxScore": 1.0, "docs": docs},
        "facet_counts": {"facet_queries": {}, "facet_fields": counts, "facet_ranges": {}, "facet_intervals": {}, "facet_heatmaps": {}},
    })
}

/// Solr's facet list: `[value, count, …]` sorted by value.
fn flat(counts: &BTreeMap<String, Vec<(String, u64)>>) -> Value {
    let mut m = Map::new();
    for (k, vs) in counts {
        let mut l = Vec::new();
        for (v, n) in vs {
            l.push(json!(v));
            l.push(json!(n));
        }
        m.insert(k.clone(), Value::Array(l));
    }
    Value::Object(m)
}

/// Name prefixes and version facet for a dataset id (`instance_id[|node]`);
/// `None` for an id of fewer than two parts and a version (also the virtual
/// Zarr's dataset lookup).
pub(crate) fn dataset_filter(id: &str) -> Option<(Vec<String>, String)> {
    let inst = id.split('|').next()?;
    let (master, version) = inst.rsplit_once('.')?;
    let comps: Vec<&str> = master.split('.').filter(|c| !c.is_empty()).collect();
    if comps.len() < 2 {
        return None;
    }
    let rest = comps[1..].join("/");
    let first = comps[0];
    let mut prefixes = vec![format!("/{first}/{rest}/")];
    for alt in [first.to_lowercase(), first.to_uppercase()] {
        let p = format!("/{alt}/{rest}/");
        if !prefixes.contains(&p) {
            prefixes.push(p);
        }
    }
    Some((prefixes, version.to_string()))
}

pub async fn search(St(node): St<State>, headers: HeaderMap, uri: Uri) -> Response {
    let p = match pairs(uri.query()) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let e = match parse(&p) {
        Ok(e) => e,
        Err(m) => return error(StatusCode::BAD_REQUEST, m),
    };
    let base = origin(&headers, &uri);
    let host = host_of(&base);
    // No replicas here and nothing retracted: asking only for either finds nothing.
    if e.replica == Some(true) || e.retracted == Some(true) {
        return Json(solr(&p, 0, e.offset, vec![], json!({}))).into_response();
    }
    let r = if e.file {
        files(&node, e, &base, &host).await
    } else {
        datasets(&node, e, &host).await
    };
    match r {
        Ok((found, start, docs, counts)) => {
            Json(solr(&p, found, start, docs, counts)).into_response()
        }
        Err(r) => r,
    }
}

type Answer = (u64, usize, Vec<Value>, Value);

async fn files(node: &State, e: Esgf, base: &str, host: &str) -> Result<Answer, Response> {
    let mut q = e.query.clone();
    // A file of the latest version of its dataset is the latest version of its name.
    q.latest_only = e.latest.unwrap_or(false);
    q.limit = e.limit;
    q.offset = e.offset;
    q.facets = e.facets.clone();
    let ids = e.dataset_ids.clone();
    // `tracking_id` is not a facet: the files matching the rest are scanned
    // (at most MAX_SCAN) for it, as intake-esgf's `from_tracking_ids` asks.
    if let Some(tids) = q.filters.remove("tracking_id") {
        let mut all = q.clone();
        all.offset = 0;
        all.limit = MAX_SCAN;
        let found: Vec<Record> = all_records(node, all)
            .await?
            .into_iter()
            .filter(|r| r.tracking_id.as_ref().is_some_and(|t| tids.contains(t)))
            .collect();
        let total = found.len() as u64;
        let docs = found
            .iter()
            .skip(e.offset)
            .take(e.limit)
            .map(|r| file_doc(r, base, host))
            .collect();
        return Ok((total, e.offset, docs, json!({})));
    }
    let (total, hits, counts) = with_catalog(node, move |c| {
        check_facets(c, &q)?;
        if ids.is_empty() {
            let mut p = c.query(&q)?;
            granary_search::service::slim(&mut p);
            return Ok((p.total, p.hits, p.facet_counts));
        }
        // Files of the given datasets: the first name prefix that has any.
        let mut all = Vec::new();
        let mut counts: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for id in &ids {
            let Some((prefixes, version)) = dataset_filter(id) else {
                continue;
            };
            for pre in prefixes {
                let mut q2 = q.clone();
                q2.name_prefix = Some(pre);
                q2.filters.insert("version".into(), vec![version.clone()]);
                q2.offset = 0;
                q2.limit = MAX_LIMIT;
                let mut p = c.query(&q2)?;
                if p.total == 0 {
                    continue;
                }
                granary_search::service::slim(&mut p);
                for (k, vs) in p.facet_counts {
                    for (v, n) in vs {
                        *counts.entry(k.clone()).or_default().entry(v).or_default() += n;
                    }
                }
                all.extend(p.hits);
                break;
            }
        }
        let total = all.len() as u64;
        let hits = all.into_iter().skip(q.offset).take(q.limit).collect();
        let counts = counts
            .into_iter()
            .map(|(k, m)| (k, m.into_iter().collect()))
            .collect();
        Ok((total, hits, counts))
    })
    .await?;
    let docs = hits.iter().map(|r| file_doc(r, base, host)).collect();
    Ok((total, e.offset, docs, flat(&counts)))
}

async fn datasets(node: &State, e: Esgf, host: &str) -> Result<Answer, Response> {
    // The catalog's dataset records: a dataset matches when one of its files (latest
    // repository versions) matches the constraints; ESGF's `latest` is the dataset
    // version's.
    let mut q = e.query.clone();
    q.latest_only = true;
    q.facets = e.facets.clone();
    q.limit = e.limit;
    q.offset = e.offset;
    let dq = DatasetQuery {
        query: q,
        latest: e.latest,
        ids: e.dataset_ids.clone(),
        files: false,
    };
    let page = with_catalog(node, move |c| {
        check_facets(c, &dq.query)?;
        Ok(c.datasets(&dq)?)
    })
    .await?;
    let docs = page.hits.iter().map(|d| dataset_doc(d, host)).collect();
    Ok((page.total, e.offset, docs, flat(&page.facet_counts)))
}

/// `GET /esg-search/wget?<ESGF constraints>`: a script for the matching files
/// (at most `limit`, default 1000 as ESGF's).
pub async fn wget(St(node): St<State>, headers: HeaderMap, uri: Uri) -> Response {
    let p = match pairs(uri.query()) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let has_limit = p.iter().any(|(k, _)| k == "limit");
    let mut e = match parse(&p) {
        Ok(e) => e,
        Err(m) => return error(StatusCode::BAD_REQUEST, m),
    };
    e.file = true;
    e.facets = FacetSel::None;
    if !has_limit {
        e.limit = 1000;
    }
    let base = origin(&headers, &uri);
    let host = host_of(&base);
    let files: Vec<Record> = if e.dataset_ids.is_empty() {
        let mut q = e.query.clone();
        q.latest_only = e.latest.unwrap_or(true);
        q.limit = e.limit;
        q.offset = e.offset;
        match all_records(&node, q).await {
            Ok(f) => f,
            Err(r) => return r,
        }
    } else {
        // Through the File search (dataset ids), then back to records.
        let limit = e.limit;
        match files(&node, e, &base, &host).await {
            Ok((_, _, docs, _)) => {
                let names: Vec<(String, u64)> = docs
                    .iter()
                    .filter_map(|d| {
                        Some((
                            d["ndn_name"].as_str()?.to_string(),
                            d["ndn_version"].as_u64()?,
                        ))
                    })
                    .take(limit)
                    .collect();
                match with_catalog(&node, move |c| {
                    Ok(names
                        .iter()
                        .filter_map(|(n, v)| c.get(n, Some(*v)).ok().flatten())
                        .collect::<Vec<_>>())
                })
                .await
                {
                    Ok(f) => f,
                    Err(r) => return r,
                }
            }
            Err(r) => return r,
        }
    };
    script_response(script(&base, uri.query().unwrap_or(""), &files))
}
