//! Download scripts (wget, bash) for a set of files: `/api/wget` (the
//! `/api/search` parameters) and `/esg-search/wget` (ESGF's).

use axum::extract::State as St;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use granary_catalog::{FacetSel, Query, Record, MAX_LIMIT};

use crate::api::{check_facets, dataset_query, download_path, with_catalog};
use crate::query::{pairs, search_query};
use crate::{error, State};

/// Most files in one script.
pub const MAX_FILES: usize = 100_000;

/// `http://<host>` from the request's Host header (only host name, address and
/// port characters are taken; anything else falls back to loopback).
pub(crate) fn base_url(h: &HeaderMap) -> String {
    let host = h
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|s| {
            !s.is_empty()
                && s.len() <= 255
                && s.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b".-:[]_".contains(&c))
        })
        .unwrap_or("127.0.0.1:8080");
    format!("http://{host}")
}

/// `scheme://host[:port]` of the gateway as the client reached it: the request
/// target's authority (HTTP/2 sends no Host header) or else the Host header,
/// holding only host name, address and port characters (else loopback, as
/// [`base_url`]); `https` when the request came over TLS (the TLS listener
/// makes every request target an absolute `https://` URI).
pub(crate) fn origin(headers: &HeaderMap, uri: &Uri) -> String {
    let scheme = if uri.scheme_str() == Some("https") {
        "https"
    } else {
        "http"
    };
    let plain = |s: &str| {
        !s.is_empty()
            && s.len() <= 255
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b".-:[]_".contains(&c))
    };
    let host = match uri.authority().map(|a| a.as_str()) {
        Some(a) if plain(a) => a.to_string(),
        _ => host_of(&base_url(headers)),
    };
    format!("{scheme}://{host}")
}

/// The host name part of the base URL (ESGF's `data_node`, `index_node`).
pub(crate) fn host_of(base: &str) -> String {
    base.split_once("://").map_or(base, |(_, h)| h).to_string()
}

fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A relative path for a record: its NDN name's components as directories
/// (never `.`/`..`, never absolute).
pub(crate) fn rel_path(r: &Record) -> String {
    r.name
        .split('/')
        .filter(|c| !c.is_empty())
        .map(|c| if c == "." || c == ".." { "_" } else { c })
        .collect::<Vec<_>>()
        .join("/")
}

/// Every record of `q` (all pages), at most [`MAX_FILES`].
pub(crate) async fn all_records(node: &State, mut q: Query) -> Result<Vec<Record>, Response> {
    q.facets = FacetSel::None;
    let want = if q.limit == 0 {
        MAX_FILES
    } else {
        q.limit.min(MAX_FILES)
    };
    with_catalog(node, move |c| {
        check_facets(c, &q)?;
        let mut out = Vec::new();
        let mut off = q.offset;
        while out.len() < want {
            q.offset = off;
            q.limit = (want - out.len()).min(MAX_LIMIT);
            let mut p = c.query(&q)?;
            granary_search::service::slim(&mut p);
            let n = p.hits.len();
            out.extend(p.hits);
            off += n;
            if n == 0 || off as u64 >= p.total {
                break;
            }
        }
        Ok(out)
    })
    .await
}

/// The script for `files`, fetched from `base`.
pub(crate) fn script(base: &str, what: &str, files: &[Record]) -> String {
    let total: u64 = files.iter().map(|r| r.size).sum();
    let mut s = String::new();
    s.push_str("#!/usr/bin/env bash\n");
    s.push_str("# Download script made by a Granary gateway.\n");
    s.push_str(&format!("# Query: {}\n", what.replace(['\n', '\r'], " ")));
    s.push_str(&format!(
        "# {} files, {} bytes in all.\n",
        files.len(),
        total
    ));
    s.push_str(
        "#\n# Usage: bash <this script> [-n] [-d DIR]\n\
         #   -n      list what would be downloaded, download nothing\n\
         #   -d DIR  download under DIR (default: the current directory)\n\
         # Files are placed by their NDN name; a file already present with the right\n\
         # SHA-256 is skipped, a partial one is resumed (wget -c); each download is\n\
         # checked against its SHA-256 where the catalog has one.\n\
         set -u\n\
         dry=0; dir=.\n\
         while getopts nd: o; do case $o in n) dry=1;; d) dir=$OPTARG;; *) exit 2;; esac; done\n\
         command -v wget >/dev/null || { echo 'wget is required' >&2; exit 1; }\n\
         cd \"$dir\" || exit 1\n\
         fail=0\n\
         get() { # path url sha256\n\
         \x20 local p=$1 u=$2 h=$3\n\
         \x20 if [ -n \"$h\" ] && [ -f \"$p\" ] && echo \"$h  $p\" | sha256sum -c --status 2>/dev/null; then echo \"ok (present) $p\"; return; fi\n\
         \x20 if [ $dry = 1 ]; then echo \"would fetch $u -> $p\"; return; fi\n\
         \x20 mkdir -p \"$(dirname \"$p\")\" || { fail=$((fail+1)); return; }\n\
         \x20 if ! wget -q -c -O \"$p.part\" \"$u\"; then echo \"FAILED $u\" >&2; fail=$((fail+1)); return; fi\n\
         \x20 if [ -n \"$h\" ] && ! echo \"$h  $p.part\" | sha256sum -c --status; then echo \"CHECKSUM MISMATCH $p\" >&2; rm -f \"$p.part\"; fail=$((fail+1)); return; fi\n\
         \x20 mv -f \"$p.part\" \"$p\" && echo \"ok $p\"\n\
         }\n",
    );
    for r in files {
        let url = format!("{base}{}", download_path(&r.name, r.version));
        s.push_str(&format!(
            "get {} {} {}\n",
            sq(&rel_path(r)),
            sq(&url),
            sq(r.sha256.as_deref().unwrap_or(""))
        ));
    }
    s.push_str(
        "if [ $fail -gt 0 ]; then echo \"$fail file(s) failed\" >&2; exit 1; fi\n\
         echo done\n",
    );
    s
}

pub(crate) fn script_response(body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/x-sh; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"granary-wget.sh\"",
            ),
        ],
        body,
    )
        .into_response()
}

/// The files of the datasets `/api/search?type=dataset` would answer with
/// these parameters (`id=` names datasets): every file of each, at most
/// [`MAX_FILES`] (`limit` counts datasets, as in the dataset search).
async fn dataset_files(
    node: &State,
    p: Vec<(String, String)>,
    has_limit: bool,
) -> Result<Vec<Record>, Response> {
    let mut dq = dataset_query(p).map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
    dq.files = true;
    dq.query.facets = FacetSel::None;
    if !has_limit {
        dq.query.limit = MAX_LIMIT;
    }
    with_catalog(node, move |c| {
        check_facets(c, &dq.query)?;
        let page = c.datasets(&dq)?;
        let keys: Vec<(String, u64)> = page
            .hits
            .iter()
            .flat_map(|d| d.files.iter().map(|f| (f.name.clone(), f.version)))
            .take(MAX_FILES)
            .collect();
        let mut recs = c.get_many(&keys)?;
        recs.sort_by(|a, b| (&a.name, a.version).cmp(&(&b.name, b.version)));
        Ok(recs)
    })
    .await
}

/// `GET /api/wget?<the /api/search parameters>`: a script for every match (not
/// only one page: `limit` defaults to all, at most [`MAX_FILES`]). With
/// `type=dataset` or `id=<dataset id>`, every file of the matching datasets.
pub async fn api_wget(St(node): St<State>, headers: HeaderMap, uri: Uri) -> Response {
    let p = match pairs(uri.query()) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let has_limit = p.iter().any(|(k, _)| k == "limit");
    let by_dataset = p
        .iter()
        .any(|(k, v)| k == "id" || (k == "type" && v.eq_ignore_ascii_case("dataset")));
    let files = if by_dataset {
        dataset_files(&node, p, has_limit).await
    } else {
        let mut q = match search_query(&p) {
            Ok(q) => q,
            Err(e) => return error(StatusCode::BAD_REQUEST, e),
        };
        if !has_limit {
            q.limit = 0;
        }
        all_records(&node, q).await
    };
    let files = match files {
        Ok(f) => f,
        Err(r) => return r,
    };
    script_response(script(
        &origin(&headers, &uri),
        uri.query().unwrap_or(""),
        &files,
    ))
}
