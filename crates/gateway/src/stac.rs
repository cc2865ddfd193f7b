//! A STAC API (1.0) at `/stac`: one collection, `cmip6`, whose items are the
//! CMIP6 datasets the catalog holds (its dataset records, as `/esg-search`
//! answers them), each with one asset per file. Search by GET and POST with
//! CQL2-JSON filters, `ids`, `collections`, `bbox`, `datetime`, `limit`, and a
//! `next` link carrying a token for the following page.
//!
//! Only the latest version of each dataset is an item (the catalog's ESGF
//! `latest=true`). An asset's `href` is the file's `/data` URL for its version,
//! followed by `&drs=<DRS path>` (which `/data` ignores): the URL then ends in the
//! file name, and clients that make a local path from the URL (intake-esgf's STAC
//! back end looks for `CMIP6….nc` in it) get ESGF's DRS path, version directory
//! included. `file:checksum` is the SHA-256 as a multihash (`1220…`).

use std::collections::BTreeMap;

use axum::body::{to_bytes, Body};
use axum::extract::{Path as AxPath, State as St};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use granary_catalog::{DatasetQuery, Query, Record};
use serde_json::{json, Map, Value};

use crate::api::with_catalog_budget;
use crate::cql2::{self, prop_name, rfc3339, Expr};
use crate::esgf::MAX_SCAN;
use crate::query::pairs;
use crate::wget::origin;
use crate::State;

/// Largest POST body accepted on `/stac/search` (bytes).
pub const MAX_BODY: usize = 64 * 1024;
/// Items per page when the request names no `limit`.
const DEFAULT_LIMIT: usize = 10;
/// Most items per page: a larger `limit` is lowered to it (OGC API – Features:
/// never an error).
pub const MAX_LIMIT: usize = 10_000;
/// The one collection.
const COLLECTION: &str = "cmip6";
/// Assets an item carries in a search or items page: a dataset of more files
/// lists its first ones (by name) and links its whole item, which lists up to
/// [`ITEM_MAX_ASSETS`]. Each page's size is then bounded whatever the datasets.
pub const MAX_ASSETS: usize = 100;
/// Assets of one item fetched by itself (`/stac/collections/cmip6/items/{id}`).
pub const ITEM_MAX_ASSETS: usize = 10_000;
const STAC_VERSION: &str = "1.0.0";
const FILE_EXT: &str = "https://stac-extensions.github.io/file/v2.1.0/schema.json";

/// Conformance classes (STAC API 1.0 and OGC API – Features / Filter).
const CONFORMS: &[&str] = &[
    "https://api.stacspec.org/v1.0.0/core",
    "https://api.stacspec.org/v1.0.0/collections",
    "https://api.stacspec.org/v1.0.0/ogcapi-features",
    "https://api.stacspec.org/v1.0.0/item-search",
    "https://api.stacspec.org/v1.0.0-rc.3/item-search#filter",
    "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core",
    "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson",
    "http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/filter",
    "http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/features-filter",
    "http://www.opengis.net/spec/cql2/1.0/conf/cql2-json",
    "http://www.opengis.net/spec/cql2/1.0/conf/basic-cql2",
    "http://www.opengis.net/spec/cql2/1.0/conf/advanced-comparison-operators",
];

/// A STAC API error: `{"code", "description"}` (and `error`, as every gateway error).
fn fail(status: StatusCode, msg: impl Into<String>) -> Response {
    let msg = msg.into();
    let code = match status {
        StatusCode::NOT_FOUND => "NotFound",
        StatusCode::PAYLOAD_TOO_LARGE => "PayloadTooLarge",
        StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailable",
        s if s.is_server_error() => "ServerError",
        _ => "BadRequest",
    };
    (
        status,
        Json(json!({"code": code, "description": msg, "error": msg})),
    )
        .into_response()
}

fn geojson(v: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/geo+json")],
        Json(v).into_response(),
    )
        .into_response()
}

fn link(rel: &str, href: String, ty: &str) -> Value {
    json!({"rel": rel, "href": href, "type": ty})
}

/// `GET /stac`: the landing page.
pub async fn landing(headers: HeaderMap, uri: Uri) -> Response {
    let o = format!("{}/stac", origin(&headers, &uri));
    Json(json!({
        "type": "Catalog",
        "stac_version": STAC_VERSION,
        "id": "granary",
        "title": "Granary",
        "description": "The science catalog of this Granary node as a STAC API: one collection, cmip6, one item per dataset, one asset per file.",
        "conformsTo": CONFORMS,
        "links": [
            link("self", o.clone(), "application/json"),
            link("root", o.clone(), "application/json"),
            link("conformance", format!("{o}/conformance"), "application/json"),
            link("data", format!("{o}/collections"), "application/json"),
            {"rel": "search", "href": format!("{o}/search"), "type": "application/geo+json", "method": "GET"},
            {"rel": "search", "href": format!("{o}/search"), "type": "application/geo+json", "method": "POST"},
            link("child", format!("{o}/collections/{COLLECTION}"), "application/json"),
        ],
    }))
    .into_response()
}

/// `GET /stac/conformance`.
pub async fn conformance() -> Response {
    Json(json!({ "conformsTo": CONFORMS })).into_response()
}

fn collection_doc(o: &str) -> Value {
    json!({
        "type": "Collection",
        "stac_version": STAC_VERSION,
        "stac_extensions": [],
        "id": COLLECTION,
        "title": "CMIP6",
        "description": "CMIP6 datasets held by this node: one item per dataset (its latest version), one asset per file.",
        "license": "other",
        "extent": {
            "spatial": {"bbox": [[-180.0, -90.0, 180.0, 90.0]]},
            "temporal": {"interval": [[null, null]]},
        },
        "links": [
            link("self", format!("{o}/collections/{COLLECTION}"), "application/json"),
            link("parent", o.to_string(), "application/json"),
            link("root", o.to_string(), "application/json"),
            link("items", format!("{o}/collections/{COLLECTION}/items"), "application/geo+json"),
        ],
    })
}

/// `GET /stac/collections`.
pub async fn collections(headers: HeaderMap, uri: Uri) -> Response {
    let o = format!("{}/stac", origin(&headers, &uri));
    Json(json!({
        "collections": [collection_doc(&o)],
        "links": [
            link("self", format!("{o}/collections"), "application/json"),
            link("root", o.clone(), "application/json"),
        ],
    }))
    .into_response()
}

/// `GET /stac/collections/{id}`.
pub async fn collection(AxPath(id): AxPath<String>, headers: HeaderMap, uri: Uri) -> Response {
    if id != COLLECTION {
        return fail(StatusCode::NOT_FOUND, format!("no collection {id:?}"));
    }
    let o = format!("{}/stac", origin(&headers, &uri));
    Json(collection_doc(&o)).into_response()
}

/// A search, as GET parameters or a POST body give it.
#[derive(Debug, Default, Clone)]
struct Search {
    collections: Option<Vec<String>>,
    ids: Option<Vec<String>>,
    limit: usize,
    offset: usize,
    bbox: Option<[f64; 4]>,
    datetime: Option<(Option<String>, Option<String>)>,
    filter: Option<Value>,
    /// Most assets per item (0: the default, [`MAX_ASSETS`]).
    assets: usize,
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn parse_limit(n: u64) -> Result<usize, String> {
    if n == 0 {
        return Err("limit must be at least 1".into());
    }
    Ok((n as usize).min(MAX_LIMIT))
}

/// `next:<offset>`: the token of the page starting at `offset`.
fn parse_token(t: &str) -> Result<usize, String> {
    t.strip_prefix("next:")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("token {t:?} is not one this server gave"))
}

fn parse_bbox(v: &[f64]) -> Result<[f64; 4], String> {
    match v {
        [w, s, e, n] | [w, s, _, e, n, _] => {
            if [w, s, e, n].iter().any(|x| !x.is_finite()) || s > n {
                return Err("bbox: expected west,south,east,north with south <= north".into());
            }
            Ok([*w, *s, *e, *n])
        }
        _ => Err("bbox: expected 4 (or 6) numbers".into()),
    }
}

/// `datetime`: an instant or `start/end`, either side open (`..` or empty).
fn parse_datetime(v: &str) -> Result<(Option<String>, Option<String>), String> {
    let side = |s: &str| -> Result<Option<String>, String> {
        let s = s.trim();
        if s.is_empty() || s == ".." {
            return Ok(None);
        }
        rfc3339(s)
            .map(Some)
            .ok_or_else(|| format!("datetime {s:?}: expected RFC 3339 (2000-01-01T00:00:00Z)"))
    };
    match v.split_once('/') {
        Some((a, b)) => Ok((side(a)?, side(b)?)),
        None => {
            let t = side(v)?;
            Ok((t.clone(), t))
        }
    }
}

fn from_pairs(p: &[(String, String)]) -> Result<Search, String> {
    let mut s = Search {
        limit: DEFAULT_LIMIT,
        ..Default::default()
    };
    let mut lang = None;
    for (k, v) in p {
        match k.as_str() {
            "collections" => s.collections = Some(list(v)),
            "ids" => s.ids = Some(list(v)),
            "limit" => {
                s.limit = parse_limit(
                    v.trim()
                        .parse()
                        .map_err(|_| format!("limit={v:?}: expected a whole number"))?,
                )?
            }
            "token" => s.offset = parse_token(v)?,
            "bbox" => {
                let nums: Result<Vec<f64>, _> = v.split(',').map(|x| x.trim().parse()).collect();
                s.bbox = Some(parse_bbox(
                    &nums.map_err(|_| format!("bbox={v:?}: not numbers"))?,
                )?);
            }
            "datetime" => s.datetime = Some(parse_datetime(v)?),
            "filter" => {
                s.filter = Some(serde_json::from_str(v).map_err(|e| {
                    format!("filter: only CQL2-JSON is understood (filter-lang=cql2-json): {e}")
                })?)
            }
            "filter-lang" => lang = Some(v.clone()),
            "filter-crs" | "f" | "sortby" | "fields" => {}
            k => return Err(format!("unknown parameter {k:?}")),
        }
    }
    if let Some(l) = lang {
        if l != "cql2-json" {
            return Err(format!("filter-lang={l:?}: only cql2-json is supported"));
        }
    }
    Ok(s)
}

fn from_body(b: &Value) -> Result<Search, String> {
    let Some(o) = b.as_object() else {
        return Err("the body must be a JSON object".into());
    };
    let mut s = Search {
        limit: DEFAULT_LIMIT,
        ..Default::default()
    };
    let strings = |k: &str, v: &Value| -> Result<Vec<String>, String> {
        match v {
            Value::String(x) => Ok(list(x)),
            Value::Array(a) => a
                .iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| format!("{k}: expected strings"))
                })
                .collect(),
            _ => Err(format!("{k}: expected a list of strings")),
        }
    };
    for (k, v) in o {
        if v.is_null() {
            continue;
        }
        match k.as_str() {
            "collections" => s.collections = Some(strings(k, v)?),
            "ids" => s.ids = Some(strings(k, v)?),
            "limit" => {
                s.limit = parse_limit(
                    v.as_u64()
                        .ok_or_else(|| format!("limit: expected a whole number, not {v}"))?,
                )?
            }
            "token" => {
                s.offset = parse_token(v.as_str().ok_or("token: expected a string")?)?;
            }
            "bbox" => {
                let nums: Option<Vec<f64>> = v
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_f64).collect());
                s.bbox = Some(parse_bbox(&nums.ok_or("bbox: expected numbers")?)?);
            }
            "datetime" => {
                s.datetime = Some(parse_datetime(
                    v.as_str().ok_or("datetime: expected a string")?,
                )?)
            }
            "filter" => s.filter = Some(v.clone()),
            "filter-lang" => {
                if v.as_str() != Some("cql2-json") {
                    return Err(format!("filter-lang {v}: only cql2-json is supported"));
                }
            }
            "filter-crs" | "sortby" | "fields" => {}
            k => return Err(format!("unknown field {k:?}")),
        }
    }
    Ok(s)
}

/// `GET /stac/search`.
pub async fn search_get(St(node): St<State>, headers: HeaderMap, uri: Uri) -> Response {
    let p = match pairs(uri.query()) {
        Ok(p) => p,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    let s = match from_pairs(&p) {
        Ok(s) => s,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    let o = origin(&headers, &uri);
    let keep: Vec<(String, String)> = p.into_iter().filter(|(k, _)| k != "token").collect();
    let next = move |off: usize| -> Value {
        let mut q: Vec<String> = keep
            .iter()
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .collect();
        q.push(format!("token=next:{off}"));
        json!({"rel": "next", "href": format!("{o}/stac/search?{}", q.join("&")),
               "type": "application/geo+json", "method": "GET"})
    };
    run(&node, &headers, &uri, s, "search", Box::new(next)).await
}

/// `POST /stac/search` (a JSON body of at most [`MAX_BODY`] bytes).
pub async fn search_post(
    St(node): St<State>,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
) -> Response {
    let bytes = match to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return fail(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the body is larger than {MAX_BODY} bytes"),
            )
        }
    };
    let v: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        match serde_json::from_slice(&bytes) {
            Ok(v) => v,
            Err(e) => {
                return fail(
                    StatusCode::BAD_REQUEST,
                    format!("the body is not JSON: {e}"),
                )
            }
        }
    };
    let s = match from_body(&v) {
        Ok(s) => s,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    let o = origin(&headers, &uri);
    let next = move |off: usize| -> Value {
        let mut b = v.as_object().cloned().unwrap_or_default();
        b.insert("token".into(), json!(format!("next:{off}")));
        json!({"rel": "next", "href": format!("{o}/stac/search"), "type": "application/geo+json",
               "method": "POST", "body": b, "merge": false})
    };
    run(&node, &headers, &uri, s, "search", Box::new(next)).await
}

/// `GET /stac/collections/{id}/items`.
pub async fn items(
    St(node): St<State>,
    AxPath(id): AxPath<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if id != COLLECTION {
        return fail(StatusCode::NOT_FOUND, format!("no collection {id:?}"));
    }
    let p = match pairs(uri.query()) {
        Ok(p) => p,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    if let Some((k, _)) = p.iter().find(|(k, _)| k == "collections" || k == "ids") {
        return fail(StatusCode::BAD_REQUEST, format!("unknown parameter {k:?}"));
    }
    let s = match from_pairs(&p) {
        Ok(s) => s,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    let o = origin(&headers, &uri);
    let keep: Vec<(String, String)> = p.into_iter().filter(|(k, _)| k != "token").collect();
    let next = move |off: usize| -> Value {
        let mut q: Vec<String> = keep
            .iter()
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .collect();
        q.push(format!("token=next:{off}"));
        json!({"rel": "next", "href": format!("{o}/stac/collections/{COLLECTION}/items?{}", q.join("&")),
               "type": "application/geo+json"})
    };
    run(&node, &headers, &uri, s, "items", Box::new(next)).await
}

/// `GET /stac/collections/{id}/items/{item}`.
pub async fn item(
    St(node): St<State>,
    AxPath((id, item)): AxPath<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if id != COLLECTION {
        return fail(StatusCode::NOT_FOUND, format!("no collection {id:?}"));
    }
    let s = Search {
        ids: Some(vec![item.clone()]),
        limit: 1,
        assets: ITEM_MAX_ASSETS,
        ..Default::default()
    };
    let o = format!("{}/stac", origin(&headers, &uri));
    match items_of(&node, &o, &s).await {
        Ok((_, mut items)) if !items.is_empty() => geojson(items.swap_remove(0)),
        Ok(_) => fail(StatusCode::NOT_FOUND, format!("no item {item:?} in {id}")),
        Err(r) => r,
    }
}

/// Percent-encodes all but RFC 3986's unreserved characters.
fn enc(s: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(s, SET).to_string()
}

type Next = Box<dyn FnOnce(usize) -> Value + Send>;

async fn run(
    node: &State,
    headers: &HeaderMap,
    uri: &Uri,
    s: Search,
    what: &str,
    next: Next,
) -> Response {
    let o = format!("{}/stac", origin(headers, uri));
    let (matched, items) = match items_of(node, &o, &s).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let returned = items.len();
    let self_href = format!(
        "{}{}",
        origin(headers, uri),
        uri.path_and_query().map_or(uri.path(), |p| p.as_str())
    );
    let mut links = vec![
        link("self", self_href, "application/geo+json"),
        link("root", o.clone(), "application/json"),
    ];
    if what == "items" {
        links.push(link(
            "collection",
            format!("{o}/collections/{COLLECTION}"),
            "application/json",
        ));
    }
    if s.offset + returned < matched {
        links.push(next(s.offset + returned));
    }
    geojson(json!({
        "type": "FeatureCollection",
        "features": items,
        "links": links,
        "numberMatched": matched,
        "numberReturned": returned,
        "context": {"matched": matched, "returned": returned, "limit": s.limit},
    }))
}

/// The facets a filter may be pushed down to the catalog with (CMIP6 facets that
/// every CMIP6 record carries, so that "not found" means the same as in memory).
const PUSHED: &[&str] = &[
    "mip_era",
    "activity_id",
    "institution_id",
    "source_id",
    "experiment_id",
    "member_id",
    "variant_label",
    "sub_experiment_id",
    "table_id",
    "variable_id",
    "grid_label",
    "version",
];

/// `in`/`=` terms of a top-level `and` on CMIP6 facets, as catalog filters.
/// True when that is the whole filter (every term went to the catalog, or is
/// `retracted` false, which every item is): the catalog's answer is then exact
/// and no item needs evaluating — intake-esgf's filters are of this kind.
fn pushdown(f: &Value, q: &mut Query) -> bool {
    let terms: Vec<&Value> = match (f["op"].as_str(), f["args"].as_array()) {
        (Some("and"), Some(a)) => a.iter().collect(),
        _ => vec![f],
    };
    let mut complete = true;
    for t in terms {
        let (Some(op), Some(args)) = (t["op"].as_str(), t["args"].as_array()) else {
            complete = false;
            continue;
        };
        let (Some(p), Some(v)) = (
            args.first()
                .and_then(|a| a.get("property"))
                .and_then(Value::as_str),
            args.get(1),
        ) else {
            complete = false;
            continue;
        };
        let name = prop_name(p);
        let facet = name.strip_prefix("cmip6:").unwrap_or(name);
        if facet == "retracted"
            && ((op == "=" && *v == json!(false)) || (op == "in" && *v == json!([false])))
        {
            continue;
        }
        if !PUSHED.contains(&facet) {
            complete = false;
            continue;
        }
        let values: Option<Vec<String>> = match (op, v) {
            ("in", Value::Array(a)) => a.iter().map(|x| x.as_str().map(str::to_string)).collect(),
            ("=", Value::String(x)) => Some(vec![x.clone()]),
            _ => None,
        };
        if values.is_none() {
            complete = false;
        }
        if let Some(vs) = values {
            let e = q.filters.entry(facet.to_string()).or_default();
            if e.is_empty() {
                *e = vs;
            } else {
                e.retain(|x| vs.contains(x));
                if e.is_empty() {
                    // Two terms that cannot both hold: a value no record has.
                    e.push("\u{1}none".into());
                }
            }
        }
    }
    complete
}

/// The matching items (datasets) and the page of them asked for.
///
/// Items are built, and the filter and bbox evaluated on them, on the catalog's
/// blocking thread, under the request's budget (checked between items): a filter
/// that matches few of many datasets costs at most the deadline, then 503.
async fn items_of(node: &State, o: &str, s: &Search) -> Result<(usize, Vec<Value>), Response> {
    if let Some(c) = &s.collections {
        if !c.iter().any(|c| c == COLLECTION) {
            return Ok((0, vec![]));
        }
    }
    let filter: Option<std::sync::Arc<Expr>> = match &s.filter {
        Some(f) => Some(std::sync::Arc::new(cql2::compile(f).map_err(|e| {
            let mut r = fail(StatusCode::BAD_REQUEST, e.to_string());
            r.headers_mut()
                .insert("x-granary-limit", header::HeaderValue::from_static(e.limit));
            r
        })?)),
        None => None,
    };
    let mut q = Query {
        latest_only: true,
        dataset_latest: true,
        limit: MAX_SCAN,
        sort: granary_catalog::Sort::Name,
        ..Query::default()
    };
    q.filters.insert("project".into(), vec!["CMIP6".into()]);
    let pushed_whole = match &s.filter {
        Some(f) => pushdown(f, &mut q),
        None => true,
    };
    if let Some((a, b)) = &s.datetime {
        q.time_overlap = Some((a.clone(), b.clone()));
    }
    // The catalog's dataset records, their newest versions; the page's files are
    // then read for the assets. A filter the catalog cannot answer, or a bbox, is
    // evaluated on the items, every match built (at most MAX_SCAN datasets).
    let exact = pushed_whole && s.bbox.is_none();
    q.dataset_latest = false;
    let (offset, limit) = if exact {
        (s.offset, s.limit)
    } else {
        (0, MAX_LIMIT)
    };
    q.offset = offset;
    q.limit = limit;
    let mut dq = DatasetQuery {
        query: q,
        latest: Some(true),
        ids: s.ids.clone().unwrap_or_default(),
        files: true,
    };
    if s.ids.as_ref().is_some_and(Vec::is_empty) {
        return Ok((0, vec![]));
    }
    let host = o.to_string();
    let mut matched = Vec::new();
    let mut n = 0usize;
    loop {
        let dq2 = dq.clone();
        let host = host.clone();
        let filter = filter.clone();
        let bbox = s.bbox;
        let (offset, limit) = (s.offset, s.limit);
        let skip = n;
        let room = s.limit.saturating_sub(matched.len());
        let assets = if s.assets == 0 { MAX_ASSETS } else { s.assets };
        let (total, got, passed, items) = with_catalog_budget(node, move |c, budget| {
            let page = c.datasets(&dq2)?;
            budget.check()?;
            let keys: Vec<(String, u64)> = page
                .hits
                .iter()
                .flat_map(|d| {
                    d.files
                        .iter()
                        .take(assets)
                        .map(|f| (f.name.clone(), f.version))
                })
                .collect();
            let mut recs: BTreeMap<(String, u64), Record> = BTreeMap::new();
            for r in c.get_many(&keys)? {
                recs.insert((r.name.clone(), r.version), r);
            }
            let got = page.hits.len();
            let mut passed = 0usize;
            let mut items = Vec::new();
            for d in &page.hits {
                budget.check()?;
                let files: Vec<Record> = d
                    .files
                    .iter()
                    .filter_map(|f| recs.remove(&(f.name.clone(), f.version)))
                    .collect();
                if files.is_empty() {
                    continue;
                }
                let item = item_doc(&d.instance_id, &files, &host, Some(d));
                if let Some(b) = &bbox {
                    if !bbox_meets(&item["bbox"], b) {
                        continue;
                    }
                }
                if let Some(f) = &filter {
                    if !f.eval(&item) {
                        continue;
                    }
                }
                if exact {
                    items.push(item);
                } else {
                    let k = skip + passed;
                    if k >= offset && items.len() < room && k < offset + limit {
                        items.push(item);
                    }
                    passed += 1;
                }
            }
            Ok((page.total, got, passed, items))
        })
        .await?;
        if exact {
            return Ok((total as usize, items));
        }
        n += passed;
        matched.extend(items);
        dq.query.offset += got;
        if got == 0 || dq.query.offset as u64 >= total || dq.query.offset >= MAX_SCAN {
            return Ok((n, matched));
        }
    }
}

/// One item: a dataset (its files' records, in name order).
/// `whole`: the dataset's record, whose counts, size and time coverage cover
/// every file when `files` lists only the first ones.
fn item_doc(
    inst: &str,
    files: &[Record],
    o: &str,
    whole: Option<&granary_catalog::Dataset>,
) -> Value {
    let first = &files[0];
    let mut props = Map::new();
    for (k, v) in &first.facets {
        props.insert(format!("cmip6:{k}"), json!(v));
    }
    if let Some(a) = first.facets.get("activity_id") {
        props
            .entry("cmip6:activity_drs")
            .or_insert_with(|| json!(a));
    }
    props
        .entry("cmip6:mip_era")
        .or_insert_with(|| json!(first.project));
    if let Some(u) = &first.further_info_url {
        props.insert("cmip6:further_info_url".into(), json!(u));
    }
    props.insert("cmip6:retracted".into(), json!(false));
    props.insert("latest".into(), json!(true));
    let version = inst.rsplit('.').next().unwrap_or_default();
    props.insert("version".into(), json!(version));
    let start = files
        .iter()
        .filter_map(|r| r.time_start.as_deref().and_then(rfc3339))
        .min();
    let end = files
        .iter()
        .filter_map(|r| r.time_end.as_deref().and_then(rfc3339))
        .max();
    props.insert("datetime".into(), Value::Null);
    props.insert("start_datetime".into(), json!(start));
    props.insert("end_datetime".into(), json!(end));
    let (count, size) = match whole {
        Some(d) => (d.number_of_files as usize, d.size),
        None => (files.len(), files.iter().map(|r| r.size).sum::<u64>()),
    };
    if let Some(d) = whole.filter(|d| d.number_of_files as usize > files.len()) {
        // Only the first files are listed: the times of the whole dataset.
        let t = |x: &Option<String>| x.as_deref().and_then(rfc3339);
        props.insert(
            "start_datetime".into(),
            json!(t(&d.time_start).or(start.clone())),
        );
        props.insert("end_datetime".into(), json!(t(&d.time_end).or(end.clone())));
        props.insert("granary:assets_listed".into(), json!(files.len()));
    }
    props.insert("file_count".into(), json!(count));
    props.insert("size".into(), json!(size));
    // Record bboxes are [lat_min, lat_max, lon_min, lon_max]; STAC's is
    // [west, south, east, north], longitudes into -180..180 when they fit.
    let mut bb: Option<[f64; 4]> = None;
    for r in files {
        if let Some([s, n, w, e]) = r.bbox {
            let b = bb.get_or_insert([w, s, e, n]);
            *b = [b[0].min(w), b[1].min(s), b[2].max(e), b[3].max(n)];
        }
    }
    let (bbox, geometry) = match bb {
        Some([mut w, s, mut e, n]) => {
            if w >= 180.0 && e <= 360.0 {
                w -= 360.0;
                e -= 360.0;
            } else if e > 180.0 {
                // Crosses the antimeridian (0..360 grids): the whole globe in longitude.
                w = -180.0;
                e = 180.0;
            }
            let poly = json!({"type": "Polygon", "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]});
            (json!([w, s, e, n]), poly)
        }
        None => (Value::Null, Value::Null),
    };
    let data = o.trim_end_matches("/stac");
    let mut assets = Map::new();
    for r in files {
        let mut a = Map::new();
        a.insert(
            "href".into(),
            json!(format!(
                "{data}{}&drs={}",
                crate::api::download_path(&r.name, r.version),
                drs_path(r)
            )),
        );
        a.insert("type".into(), json!("application/netcdf"));
        a.insert("title".into(), json!(r.title));
        a.insert("roles".into(), json!(["data"]));
        a.insert("file:size".into(), json!(r.size));
        if let Some(h) = &r.sha256 {
            a.insert("file:checksum".into(), json!(format!("1220{h}")));
        }
        if let Some(t) = &r.tracking_id {
            a.insert("cmip6:tracking_id".into(), json!(t));
        }
        assets.insert(r.title.clone(), Value::Object(a));
    }
    let mut item = json!({
        "type": "Feature",
        "stac_version": STAC_VERSION,
        "stac_extensions": [FILE_EXT],
        "id": inst,
        "collection": COLLECTION,
        "geometry": geometry,
        "properties": props,
        "links": [
            link("self", format!("{o}/collections/{COLLECTION}/items/{}", enc(inst)), "application/geo+json"),
            link("parent", format!("{o}/collections/{COLLECTION}"), "application/json"),
            link("collection", format!("{o}/collections/{COLLECTION}"), "application/json"),
            link("root", o.to_string(), "application/json"),
        ],
        "assets": assets,
    });
    if !bbox.is_null() {
        item["bbox"] = bbox;
    }
    item
}

/// The DRS path of a file, URL-encoded but for its slashes:
/// `CMIP6/CMIP/<institution>/…/<grid>/v20190308/<file name>` (the name's
/// directories, its first written as the project, then the DRS version).
fn drs_path(r: &Record) -> String {
    let mut comps: Vec<&str> = r.name.split('/').filter(|c| !c.is_empty()).collect();
    let file = comps.pop().unwrap_or_default();
    if let Some(first) = comps.first_mut() {
        if !r.project.is_empty() && first.eq_ignore_ascii_case(&r.project) {
            *first = r.project.as_str();
        }
    }
    let version = r.facets.get("version").map(String::as_str);
    comps
        .into_iter()
        .chain(version)
        .chain([file])
        .map(|c| {
            // Name components are NDN URI text: decode their escapes first.
            let raw: Vec<u8> = percent_encoding::percent_decode_str(c).collect();
            enc(&String::from_utf8_lossy(&raw))
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// True when an item's bbox meets `[w, s, e, n]` (longitudes compared also a
/// turn east and west, for 0..360 boxes).
fn bbox_meets(item: &Value, q: &[f64; 4]) -> bool {
    let Some(b) = item
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect::<Vec<_>>())
    else {
        return false;
    };
    if b.len() != 4 || b[1] > q[3] || b[3] < q[1] {
        return false;
    }
    [-360.0, 0.0, 360.0]
        .iter()
        .any(|k| b[0] <= q[2] + k && b[2] >= q[0] + k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::esgf::dataset_of;

    fn item() -> Value {
        let r = Record {
            name: "/cmip6/CMIP/NCAR/CESM2/historical/r1i1p1f1/Amon/tas/gn/tas_x.nc".into(),
            version: 3,
            project: "CMIP6".into(),
            facets: [
                ("source_id", "CESM2"),
                ("variable_id", "tas"),
                ("member_id", "r1i1p1f1"),
                ("variant_label", "r1i1p1f1"),
                ("activity_id", "CMIP"),
                ("version", "v20190308"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            title: "tas_x.nc".into(),
            size: 10,
            time_start: Some("1950-01-01T00:00:00".into()),
            time_end: Some("2000-02-30T00:00:00".into()),
            bbox: Some([-90.0, 90.0, 0.0, 358.75]),
            sha256: Some("ab".repeat(32)),
            ..Record::default()
        };
        let (inst, _, _) = dataset_of(&r);
        item_doc(&inst, &[r], "https://h:1/stac", None)
    }

    fn f(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn a_large_datasets_item_lists_its_first_files_and_counts_all() {
        let it = item();
        let inst = it["id"].as_str().unwrap().to_string();
        let r: Record = Record {
            name: "/cmip6/a/f_000.nc".into(),
            title: "f_000.nc".into(),
            version: 1,
            project: "CMIP6".into(),
            size: 7,
            ..Record::default()
        };
        let files: Vec<Record> = (0..MAX_ASSETS)
            .map(|i| Record {
                name: format!("/cmip6/a/f_{i:03}.nc"),
                title: format!("f_{i:03}.nc"),
                ..r.clone()
            })
            .collect();
        let whole = granary_catalog::Dataset {
            number_of_files: 1500,
            size: 1500 * 7,
            time_start: Some("1850-01-01T00:00:00".into()),
            time_end: Some("2100-01-01T00:00:00".into()),
            ..Default::default()
        };
        let doc = item_doc(&inst, &files, "https://h:1/stac", Some(&whole));
        assert_eq!(doc["assets"].as_object().unwrap().len(), MAX_ASSETS);
        assert_eq!(doc["properties"]["file_count"], 1500);
        assert_eq!(doc["properties"]["size"], 1500 * 7);
        assert_eq!(doc["properties"]["granary:assets_listed"], MAX_ASSETS);
        assert_eq!(doc["properties"]["end_datetime"], "2100-01-01T00:00:00Z");
        assert!(
            doc.to_string().len() < 64 * 1024,
            "{}",
            doc.to_string().len()
        );
    }

    #[test]
    fn items_carry_facets_assets_and_times() {
        let it = item();
        assert_eq!(
            it["id"],
            "CMIP6.CMIP.NCAR.CESM2.historical.r1i1p1f1.Amon.tas.gn.v20190308"
        );
        assert_eq!(it["properties"]["cmip6:source_id"], "CESM2");
        assert_eq!(it["properties"]["cmip6:activity_drs"], "CMIP");
        assert_eq!(it["properties"]["end_datetime"], "2000-02-29T00:00:00Z");
        assert_eq!(it["bbox"], json!([-180.0, -90.0, 180.0, 90.0]));
        let a = &it["assets"]["tas_x.nc"];
        assert_eq!(
            a["href"],
            "https://h:1/data/cmip6/CMIP/NCAR/CESM2/historical/r1i1p1f1/Amon/tas/gn/tas_x.nc?version=3&drs=CMIP6/CMIP/NCAR/CESM2/historical/r1i1p1f1/Amon/tas/gn/v20190308/tas_x.nc"
        );
        assert_eq!(a["file:checksum"], format!("1220{}", "ab".repeat(32)));
        assert_eq!(a["file:size"], 10);
    }

    #[test]
    fn cql2_json() {
        let it = item();
        let yes = [
            r#"{"op":"and","args":[{"op":"in","args":[{"property":"properties.cmip6:source_id"},["CESM2","X"]]},{"op":"in","args":[{"property":"properties.cmip6:retracted"},[false]]}]}"#,
            r#"{"op":"=","args":[{"property":"source_id"},"CESM2"]}"#,
            r#"{"op":"or","args":[{"op":"=","args":[{"property":"variable_id"},"pr"]},{"op":"=","args":[{"property":"variable_id"},"tas"]}]}"#,
            r#"{"op":"between","args":[{"property":"datetime"},{"timestamp":"1990-01-01T00:00:00Z"},{"timestamp":"1995-01-01T00:00:00Z"}]}"#,
            r#"{"op":"between","args":[{"property":"start_datetime"},"1900-01-01T00:00:00Z","1960-01-01T00:00:00Z"]}"#,
            r#"{"op":"t_intersects","args":[{"property":"datetime"},{"interval":["1999-01-01",".."]}]}"#,
            r#"{"op":"like","args":[{"property":"id"},"CMIP6.%.tas.%"]}"#,
            r#"{"op":"not","args":[{"op":"isNull","args":[{"property":"cmip6:member_id"}]}]}"#,
        ];
        for y in yes {
            assert!(cql2::compile(&f(y)).unwrap().eval(&it), "{y}");
        }
        let no = [
            r#"{"op":"in","args":[{"property":"properties.cmip6:source_id"},["X"]]}"#,
            r#"{"op":"in","args":[{"property":"properties.cmip6:retracted"},[true]]}"#,
            r#"{"op":"between","args":[{"property":"datetime"},"2001-01-01T00:00:00Z","2002-01-01T00:00:00Z"]}"#,
            r#"{"op":"=","args":[{"property":"nothing"},"x"]}"#,
        ];
        for n in no {
            assert!(!cql2::compile(&f(n)).unwrap().eval(&it), "{n}");
        }
        for bad in [
            r#"{"op":"s_intersects","args":[]}"#,
            r#"{"op":"in","args":[{"property":"a"},"x"]}"#,
            r#"{"op":"between","args":[1,2]}"#,
            r#"[1]"#,
        ] {
            assert!(cql2::compile(&f(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn pushdown_takes_and_of_in() {
        let mut q = Query::default();
        pushdown(
            &f(
                r#"{"op":"and","args":[{"op":"in","args":[{"property":"properties.cmip6:source_id"},["A","B"]]},{"op":"=","args":[{"property":"variable_id"},"tas"]},{"op":"in","args":[{"property":"properties.cmip6:retracted"},[false]]}]}"#,
            ),
            &mut q,
        );
        assert_eq!(q.filters["source_id"], vec!["A", "B"]);
        assert_eq!(q.filters["variable_id"], vec!["tas"]);
        assert!(!q.filters.contains_key("retracted"));
        let mut q = Query::default();
        assert!(pushdown(
            &f(
                r#"{"op":"and","args":[{"op":"in","args":[{"property":"properties.cmip6:source_id"},["A"]]},{"op":"in","args":[{"property":"properties.cmip6:retracted"},[false]]}]}"#
            ),
            &mut q
        ));
        for partial in [
            r#"{"op":"and","args":[{"op":"in","args":[{"property":"source_id"},["A"]]},{"op":"like","args":[{"property":"id"},"%x%"]}]}"#,
            r#"{"op":"in","args":[{"property":"properties.cmip6:retracted"},[true]]}"#,
            r#"{"op":"or","args":[{"op":"=","args":[{"property":"source_id"},"A"]},{"op":"=","args":[{"property":"source_id"},"B"]}]}"#,
        ] {
            assert!(!pushdown(&f(partial), &mut Query::default()), "{partial}");
        }
    }

    #[test]
    fn parameters() {
        let s = from_pairs(&[
            ("limit".into(), "99999999".into()),
            ("token".into(), "next:20".into()),
            ("bbox".into(), "-10,-5,10,5".into()),
            ("datetime".into(), "2000-01-01T00:00:00Z/..".into()),
        ])
        .unwrap();
        assert_eq!(s.limit, MAX_LIMIT);
        assert_eq!(s.offset, 20);
        assert_eq!(
            s.datetime,
            Some((Some("2000-01-01T00:00:00Z".into()), None))
        );
        for bad in [
            ("limit", "0"),
            ("token", "20"),
            ("bbox", "1,2"),
            ("datetime", "x"),
            ("filter", "{"),
            ("filter-lang", "cql2-text"),
            ("nope", "1"),
        ] {
            assert!(
                from_pairs(&[(bad.0.into(), bad.1.into())]).is_err(),
                "{bad:?}"
            );
        }
        assert!(from_body(&json!({"limit": -1})).is_err());
        assert!(from_body(&json!([])).is_err());
        assert!(from_body(&json!({"intersects": {}})).is_err());
        assert_eq!(
            from_body(&json!({"collections": ["cmip6"], "limit": 5}))
                .unwrap()
                .limit,
            5
        );
    }
}
