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

mod items;
mod request;

use items::items_of;
use request::{from_body, from_pairs, pushdown, Search};

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

/// The `next` link of a GET page: `href` with the request's parameters but its
/// `token`, and the token of the page at the offset; `method` says GET (as search
/// links do).
fn get_next(href: String, params: Vec<(String, String)>, method: bool) -> Next {
    let keep: Vec<(String, String)> = params.into_iter().filter(|(k, _)| k != "token").collect();
    Box::new(move |off: usize| -> Value {
        let mut q: Vec<String> = keep
            .iter()
            .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
            .collect();
        q.push(format!("token=next:{off}"));
        let mut l = json!({"rel": "next", "href": format!("{href}?{}", q.join("&")),
                           "type": "application/geo+json"});
        if method {
            l["method"] = json!("GET");
        }
        l
    })
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
    let href = format!("{}/stac/search", origin(&headers, &uri));
    let next = get_next(href, p, true);
    run(&node, &headers, &uri, s, "search", next).await
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
    let href = format!(
        "{}/stac/collections/{COLLECTION}/items",
        origin(&headers, &uri)
    );
    let next = get_next(href, p, false);
    run(&node, &headers, &uri, s, "items", next).await
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

#[cfg(test)]
mod tests {
    use super::items::item_doc;
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
