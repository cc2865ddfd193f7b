//! The JSON API: `/api/search`, `/api/autocomplete`, `/api/file/<name>`,
//! `/api/status`, `/api/openapi.json`.

use std::sync::Arc;

use axum::extract::State as St;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use granary_catalog::{Catalog, Dataset, DatasetQuery, FacetSel, Page, Query, Record};
use granary_packet::Name;
use serde_json::{json, Value};

use crate::budget::Budget;
use crate::query::{pairs, parse_bool, parse_num, search_query};
use crate::{error, State};

/// Largest autocomplete answer.
const MAX_SUGGESTIONS: usize = 1000;

pub async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("openapi.json"),
    )
        .into_response()
}

/// The canonical NDN URI of a name taken from a URL path (its percent escapes are
/// NDN URI escapes: they only ever make name components).
pub(crate) fn ndn_name(raw: &str) -> Result<Name, Response> {
    let raw = if raw.starts_with('/') {
        raw.to_string()
    } else {
        format!("/{raw}")
    };
    let n = Name::from_uri(&raw)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("bad NDN name: {e}")))?;
    if n.is_empty() {
        return Err(error(StatusCode::BAD_REQUEST, "empty NDN name"));
    }
    Ok(n)
}

/// `/data/<name>?version=<v>`.
pub(crate) fn download_path(name: &str, version: u64) -> String {
    format!("/data{name}?version={version}")
}

/// The file's OPeNDAP URL path (without a suffix): THREDDS's
/// `/thredds/dodsC/<DRS path>` (`CMIP6/…/v20190308/<file>.nc`) when the record has
/// a DRS version, else the gateway's own `/opendap/<name>/v=<version>`.
pub(crate) fn opendap_path(r: &granary_catalog::Record) -> String {
    let drs = r.facets.get("version").filter(|v| {
        v.len() > 1 && v.starts_with('v') && v[1..].bytes().all(|b| b.is_ascii_digit())
    });
    let Some(drs) = drs else {
        return format!("/opendap{}/v={}", r.name, r.version);
    };
    let mut comps: Vec<&str> = r.name.split('/').filter(|c| !c.is_empty()).collect();
    let file = comps.pop().unwrap_or_default();
    if let Some(first) = comps.first_mut() {
        if !r.project.is_empty() && first.eq_ignore_ascii_case(&r.project) {
            *first = r.project.as_str();
        }
    }
    comps.push(drs);
    comps.push(file);
    format!("/thredds/dodsC/{}", comps.join("/"))
}

/// Why a catalog call failed: the request (400), or the catalog's database
/// being unreachable now (503: PostgreSQL down or restarting).
pub(crate) enum CatalogFail {
    Bad(String),
    Down(String),
    /// The request's budget ran out (503) or its client went away.
    Stopped(crate::budget::Stop),
    /// The catalog failed in a way that does not pass (corrupt storage, a bug): 500.
    Broken(String),
}

impl From<crate::budget::Stop> for CatalogFail {
    fn from(s: crate::budget::Stop) -> Self {
        CatalogFail::Stopped(s)
    }
}

impl From<granary_catalog::Error> for CatalogFail {
    fn from(e: granary_catalog::Error) -> Self {
        use granary_catalog::Error as E;
        let text = e.to_string();
        match e {
            E::Unavailable(_) => CatalogFail::Down(text),
            E::Invalid(_) | E::Conflict(_) => CatalogFail::Bad(text),
            // Out of descriptors or memory, SQLite busy or out of them too: it
            // passes (503); anything else is the server's fault (500), never
            // the request's.
            E::Io(ref io) if crate::budget::temporary_io(io) => CatalogFail::Down(text),
            E::Sqlite(_) if sqlite_passes(&text) => CatalogFail::Down(text),
            _ if crate::budget::temporary_text(&text) => CatalogFail::Down(text),
            _ => CatalogFail::Broken(text),
        }
    }
}

/// SQLite's errors that pass by themselves: busy or locked, out of memory,
/// cannot open a file (out of descriptors).
fn sqlite_passes(s: &str) -> bool {
    [
        "database is locked",
        "database table is locked",
        "busy",
        "out of memory",
        "unable to open database file",
    ]
    .iter()
    .any(|x| s.contains(x))
}

impl From<String> for CatalogFail {
    fn from(e: String) -> Self {
        CatalogFail::Bad(e)
    }
}

/// Runs `f` on the catalog on a blocking thread.
pub(crate) async fn with_catalog<T: Send + 'static>(
    node: &State,
    f: impl FnOnce(&Catalog) -> Result<T, CatalogFail> + Send + 'static,
) -> Result<T, Response> {
    with_catalog_budget(node, move |c, _| f(c)).await
}

/// Runs `f` on the catalog on a blocking thread with the request's [`Budget`]:
/// work that loops checks it and stops with [`CatalogFail::Stopped`] when the
/// deadline passes or the client goes away.
pub(crate) async fn with_catalog_budget<T: Send + 'static>(
    node: &State,
    f: impl FnOnce(&Catalog, &Budget) -> Result<T, CatalogFail> + Send + 'static,
) -> Result<T, Response> {
    let Some(cat) = node.catalog.clone() else {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "this node serves no catalog (the daemon runs with --no-catalog, or it could not be opened)",
        ));
    };
    let budget = Budget::current();
    // A few catalog calls at a time (the catalog is CPU-bound): a flood
    // waits here, cheaply, instead of holding a blocking thread, its stack
    // and a result set each; memory stays flat under 500 concurrent
    // searches (crates/cli/tests/it/gateway_load.rs). The slot goes with the
    // work: a request given up while its work still runs keeps the slot
    // until the work has seen the budget and stopped, so the bound holds.
    let Ok(slot) = node.shared.catalog_slots.clone().acquire_owned().await else {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the gateway is stopping",
        ));
    };
    let b = budget.clone();
    let work = node.shared.eval.run(move || {
        let _slot = slot;
        b.check().map_err(CatalogFail::Stopped)?;
        f(&cat, &b)
    });
    match work.await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(CatalogFail::Bad(e))) => Err(error(StatusCode::BAD_REQUEST, e)),
        Ok(Err(CatalogFail::Down(e))) => Err(crate::unavailable(format!(
            "{e}; the node reconnects by itself: try again shortly"
        ))),
        Ok(Err(CatalogFail::Stopped(s))) => Err(crate::budget::refusal(s)),
        Ok(Err(CatalogFail::Broken(e))) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, e)),
        Err(e) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("catalog task failed: {e}"),
        )),
    }
}

/// Constraint names an ESGF index accepts whatever this catalog holds: the
/// CMIP6 and CMIP5 search facets and the Solr fields clients filter on. A
/// filter on one of these that no record carries matches nothing; a name that
/// is neither one of these nor a facet some record holds is refused (400), so
/// that a typo is not mistaken for an empty result.
pub(crate) const ESGF_FIELDS: &[&str] = &[
    "project",
    "mip_era",
    "activity_id",
    "activity_drs",
    "institution_id",
    "source_id",
    "source_type",
    "experiment_id",
    "experiment_title",
    "sub_experiment_id",
    "member_id",
    "variant_label",
    "table_id",
    "frequency",
    "realm",
    "variable_id",
    "variable",
    "variable_long_name",
    "cf_standard_name",
    "grid_label",
    "grid",
    "nominal_resolution",
    "data_specs_version",
    "version",
    "data_node",
    "index_node",
    "institute",
    "model",
    "experiment",
    "experiment_family",
    "time_frequency",
    "product",
    "ensemble",
    "cmor_table",
    "modeling_realm",
    "instance_id",
    "master_id",
    "id",
    "title",
    "tracking_id",
    "further_info_url",
];

/// Refuses a query naming a facet that is neither an ESGF field nor a facet
/// some record holds: 400 listing the known names.
pub(crate) fn check_facets(c: &Catalog, q: &Query) -> Result<(), CatalogFail> {
    let asked: Vec<&String> = q
        .filters
        .keys()
        .chain(q.exclude.keys())
        .filter(|k| !ESGF_FIELDS.contains(&k.as_str()))
        .collect();
    if asked.is_empty() {
        return Ok(());
    }
    let held = c.facet_keys()?;
    let unknown: Vec<&String> = asked.into_iter().filter(|k| !held.contains(k)).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let mut known: Vec<&str> = ESGF_FIELDS
        .iter()
        .copied()
        .chain(held.iter().map(String::as_str))
        .collect();
    known.sort_unstable();
    known.dedup();
    let shown: Vec<String> = unknown.iter().take(5).map(|k| format!("{k:?}")).collect();
    Err(CatalogFail::Bad(format!(
        "unknown facet {} (known: {})",
        shown.join(", "),
        known.join(", ")
    )))
}

/// A search hit as sent: no `meta`, no free-text blob, plus its download path.
pub(crate) fn hit_json(r: &Record) -> Value {
    let mut v = json!(r);
    if let Some(o) = v.as_object_mut() {
        o.remove("meta");
        o.remove("text");
        o.insert("download".into(), json!(download_path(&r.name, r.version)));
    }
    v
}

pub(crate) fn page_json(p: &Page) -> Value {
    json!({
        "total": p.total,
        "hits": p.hits.iter().map(hit_json).collect::<Vec<_>>(),
        "facet_counts": p.facet_counts,
    })
}

/// The dataset query of `/api/search?type=dataset`: the file search's parameters
/// select datasets holding a matching file; `dataset_latest=true|false` keeps the
/// newest (or only older) version of each; `id=` (repeatable) names instance or master
/// ids; `files=true` lists the files.
pub(crate) fn dataset_query(p: Vec<(String, String)>) -> Result<DatasetQuery, String> {
    let mut dq = DatasetQuery::default();
    let mut rest = Vec::new();
    for (k, v) in p {
        match k.as_str() {
            "type" => {}
            "dataset_latest" => dq.latest = Some(parse_bool(&k, &v)?),
            "files" => dq.files = parse_bool(&k, &v)?,
            "id" => dq.ids.push(v),
            _ => rest.push((k, v)),
        }
    }
    dq.query = search_query(&rest)?;
    dq.validate().map_err(|e| e.to_string())?;
    Ok(dq)
}

/// A dataset as sent: the record, plus ESGF's document names for the same fields
/// (`datetime_start`, `datetime_stop`) and where its files are searched.
pub(crate) fn dataset_json(d: &Dataset) -> Value {
    let mut v = json!(d);
    if let Some(o) = v.as_object_mut() {
        o.insert("datetime_start".into(), json!(d.time_start));
        o.insert("datetime_stop".into(), json!(d.time_end));
        if let Some(Value::Array(fs)) = o.get_mut("files") {
            for (f, r) in fs.iter_mut().zip(&d.files) {
                f["download"] = json!(download_path(&r.name, r.version));
            }
        }
    }
    v
}

async fn dataset_search(node: &State, p: Vec<(String, String)>) -> Response {
    let dq = match dataset_query(p) {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let r = with_catalog(node, move |c| {
        check_facets(c, &dq.query)?;
        Ok(c.datasets(&dq)?)
    });
    match r.await {
        Ok(page) => Json(json!({
            "type": "dataset",
            "total": page.total,
            "hits": page.hits.iter().map(dataset_json).collect::<Vec<_>>(),
            "facet_counts": page.facet_counts,
        }))
        .into_response(),
        Err(r) => r,
    }
}

/// Runs a search query from a query string.
pub(crate) async fn run_search(node: &State, uri: &Uri) -> Result<(Query, Page), Response> {
    let p = pairs(uri.query()).map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
    let q = search_query(&p).map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
    let q2 = q.clone();
    let page = with_catalog(node, move |c| {
        check_facets(c, &q2)?;
        let mut page = c.query(&q2)?;
        granary_search::service::slim(&mut page);
        Ok(page)
    })
    .await?;
    Ok((q, page))
}

pub async fn search(St(node): St<State>, uri: Uri) -> Response {
    let p = match pairs(uri.query()) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    match p
        .iter()
        .find(|(k, _)| k == "type")
        .map(|(_, v)| v.to_ascii_lowercase())
    {
        None => {}
        Some(t) if t == "file" => {}
        Some(t) if t == "dataset" => return dataset_search(&node, p).await,
        Some(t) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("type={t:?}: expected file or dataset"),
            )
        }
    }
    match run_search(&node, &uri).await {
        Ok((_, page)) => Json(page_json(&page)).into_response(),
        Err(r) => r,
    }
}

pub async fn autocomplete(St(node): St<State>, uri: Uri) -> Response {
    let p = match pairs(uri.query()) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let mut prefix = String::new();
    let mut facet = None;
    let mut limit = 10usize;
    let mut rest = Vec::new();
    for (k, v) in p {
        match k.as_str() {
            "prefix" => prefix = v,
            "facet" if !v.is_empty() => facet = Some(v),
            "facet" => {}
            "limit" => match parse_num(&k, &v) {
                Ok(n) if n <= MAX_SUGGESTIONS => limit = n,
                Ok(n) => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        format!("limit {n} is more than {MAX_SUGGESTIONS}"),
                    )
                }
                Err(e) => return error(StatusCode::BAD_REQUEST, e),
            },
            _ => rest.push((k, v)),
        }
    }
    // The other parameters narrow the set the values are counted in.
    let mut q = match search_query(&rest) {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    q.limit = 0;
    q.offset = 0;
    let r = with_catalog(&node, move |c| {
        if let Some(f) = facet {
            q.facets = FacetSel::None;
            let vals = c.autocomplete(&f, &prefix, limit, Some(&q))?;
            return Ok(vals
                .into_iter()
                .map(|(v, n)| json!({"facet": f, "value": v, "count": n}))
                .collect::<Vec<_>>());
        }
        // Every facet: the values starting with the prefix (case-insensitive),
        // then those containing it, most frequent first.
        q.facets = FacetSel::All;
        let page = c.query(&q)?;
        let lp = prefix.to_lowercase();
        let mut all: Vec<(bool, u64, String, String)> = Vec::new();
        for (f, vals) in page.facet_counts {
            for (v, n) in vals {
                let lv = v.to_lowercase();
                if lv.starts_with(&lp) {
                    all.push((true, n, f.clone(), v));
                } else if !lp.is_empty() && lv.contains(&lp) {
                    all.push((false, n, f.clone(), v));
                }
            }
        }
        all.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then(b.1.cmp(&a.1))
                .then_with(|| a.2.cmp(&b.2))
                .then_with(|| a.3.cmp(&b.3))
        });
        all.truncate(limit);
        Ok(all
            .into_iter()
            .map(|(_, n, f, v)| json!({"facet": f, "value": v, "count": n}))
            .collect())
    })
    .await;
    match r {
        Ok(values) => Json(json!({ "values": values })).into_response(),
        Err(r) => r,
    }
}

/// The `version` parameter, if any.
pub(crate) fn version_param(uri: &Uri) -> Result<Option<u64>, Response> {
    let p = pairs(uri.query()).map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
    let mut version = None;
    for (k, v) in p {
        if k == "version" && !v.is_empty() {
            let v = v.strip_prefix("v=").unwrap_or(&v);
            version = Some(v.parse::<u64>().map_err(|_| {
                error(
                    StatusCode::BAD_REQUEST,
                    format!("version={v:?}: expected a number"),
                )
            })?);
        }
    }
    Ok(version)
}

pub async fn file(St(node): St<State>, uri: Uri, headers: axum::http::HeaderMap) -> Response {
    let raw = uri.path().strip_prefix("/api/file").unwrap_or_default();
    let name = match ndn_name(raw) {
        Ok(n) => n.to_string(),
        Err(r) => return r,
    };
    let version = match version_param(&uri) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let n2 = name.clone();
    let r = with_catalog(&node, move |c| {
        let rec = c.get(&n2, version)?;
        let versions = c.versions(&n2)?;
        // The federation's nodes holding this version (location catalog).
        let held = match &rec {
            Some(r) => c
                .locations(&n2, c.node_timeout())?
                .into_iter()
                .filter(|l| l.version == r.version)
                .collect(),
            None => Vec::new(),
        };
        Ok(rec.map(|r| (r, versions, held)))
    })
    .await;
    match r {
        Ok(Some((rec, versions, held))) => {
            let mut v = json!(rec);
            if let Some(o) = v.as_object_mut() {
                o.remove("text");
                o.insert("versions".into(), json!(versions));
                let download = download_path(&rec.name, rec.version);
                let at = crate::locate::locations(&node, &rec, &download, &uri, &headers);
                o.insert("download".into(), json!(download));
                o.insert("locations".into(), at);
                o.insert("held_by".into(), json!(held));
            }
            Json(v).into_response()
        }
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            match version {
                Some(v) => format!("{name} version {v} is not in the catalog"),
                None => format!("{name} is not in the catalog"),
            },
        ),
        Err(r) => r,
    }
}

async fn mgmt_dataset(c: &mut granary_app::Client, uri: &str) -> Result<bytes::Bytes, String> {
    let n = Name::from_uri(uri).map_err(|e| e.to_string())?;
    c.dataset(&n).await.map_err(|e| e.to_string())
}

/// The node's counters, as `granary status` and `granary face list` show them.
pub(crate) async fn status_json(node: &Arc<crate::Node>) -> Result<Value, String> {
    use granary_mgmt::{decode_dataset, FaceStatus, GeneralStatus};
    let mut c = granary_app::Client::connect(&node.socket)
        .await
        .map_err(|e| format!("cannot reach the forwarder: {e}"))?;
    let g = GeneralStatus::decode(&mgmt_dataset(&mut c, "/localhost/nfd/status/general").await?)
        .map_err(|e| e.to_string())?;
    let faces =
        decode_dataset::<FaceStatus>(&mgmt_dataset(&mut c, "/localhost/nfd/faces/list").await?)
            .map_err(|e| e.to_string())?;
    let faces: Vec<Value> = faces
        .iter()
        .map(|f| {
            json!({
                "id": f.face_id,
                "remote": f.uri,
                "local": f.local_uri,
                "scope": if f.face_scope == 1 { "local" } else { "non-local" },
                "reliable": f.flags & granary_mgmt::values::face_flags::LP_RELIABILITY_ENABLED != 0,
                "in": {"interests": f.n_in_interests, "data": f.n_in_data, "nacks": f.n_in_nacks, "bytes": f.n_in_bytes},
                "out": {"interests": f.n_out_interests, "data": f.n_out_data, "nacks": f.n_out_nacks, "bytes": f.n_out_bytes},
            })
        })
        .collect();
    let catalog_records = match &node.catalog {
        Some(cat) => node.shared.catalog_len(cat).await,
        None => None,
    };
    Ok(json!({
        "version": g.nfd_version,
        "uptime_s": g.current_timestamp.saturating_sub(g.start_timestamp) / 1000,
        "start_timestamp_ms": g.start_timestamp,
        "current_timestamp_ms": g.current_timestamp,
        "fib_entries": g.n_fib_entries,
        "pit_entries": g.n_pit_entries,
        "cs_entries": g.n_cs_entries,
        "interests": {"in": g.n_in_interests, "out": g.n_out_interests},
        "data": {"in": g.n_in_data, "out": g.n_out_data},
        "nacks": {"in": g.n_in_nacks, "out": g.n_out_nacks},
        "satisfied": g.n_satisfied_interests,
        "unsatisfied": g.n_unsatisfied_interests,
        "faces": faces,
        "catalog_records": catalog_records,
        "gateway_uptime_s": node.started.elapsed().as_secs(),
        "tls": node.tls.get().map(|t| t.status()),
    }))
}

/// `/api/federation`: the nodes of the location catalog (this node's catalog, shared
/// or its own) with their liveness, as `granary federation status` lists them; this
/// node is marked `self`. A node with no catalog lists itself alone.
pub async fn federation(St(node): St<State>) -> Response {
    let me = crate::locate::node_prefix(&node.data_dir);
    if node.catalog.is_none() {
        return Json(json!({
            "node": me,
            "shared": false,
            "node_timeout_s": Value::Null,
            "nodes": me.iter().map(|p| json!({"prefix": p, "up": true, "self": true})).collect::<Vec<_>>(),
        }))
        .into_response();
    }
    let r = with_catalog(&node, |c| {
        let t = c.node_timeout();
        Ok((c.nodes(t)?, c.is_shared()?, t))
    })
    .await;
    match r {
        Ok((nodes, shared, t)) => {
            let mut list: Vec<Value> = nodes
                .into_iter()
                .map(|n| {
                    let mut v = json!(n);
                    v["self"] = json!(me.as_deref() == Some(n.prefix.as_str()));
                    v
                })
                .collect();
            // Before its first heartbeat this node is not in the table yet.
            if let Some(p) = &me {
                if !list.iter().any(|n| n["prefix"] == json!(p)) {
                    list.push(json!({"prefix": p, "up": true, "self": true}));
                }
            }
            Json(json!({
                "node": me,
                "shared": shared,
                "node_timeout_s": t.as_secs_f64(),
                "nodes": list,
            }))
            .into_response()
        }
        Err(r) => r,
    }
}

pub async fn status(St(node): St<State>) -> Response {
    match status_json(&node).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}

#[cfg(test)]
mod catalog_fail_tests {
    use super::*;

    #[test]
    fn catalog_errors_map_to_the_right_status() {
        use granary_catalog::Error as E;
        let kind = |e: E| match CatalogFail::from(e) {
            CatalogFail::Bad(_) => 400,
            CatalogFail::Down(_) => 503,
            CatalogFail::Broken(_) => 500,
            CatalogFail::Stopped(_) => 0,
        };
        assert_eq!(kind(E::Invalid("x".into())), 400);
        assert_eq!(kind(E::Unavailable("down".into())), 503);
        assert_eq!(kind(E::Io(std::io::Error::from_raw_os_error(24))), 503);
        assert_eq!(kind(E::Io(std::io::Error::from_raw_os_error(5))), 500);
        assert_eq!(kind(E::Corrupt("bad".into())), 500);
        assert_eq!(kind(E::Poisoned), 500);
    }
}
