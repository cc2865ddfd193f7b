//! OPeNDAP (DAP2) for every catalogued netCDF file (docs/http-api.md, decision
//! 0106), at two URL forms:
//!
//! - `/thredds/dodsC/<DRS path>` as ESGF's THREDDS data nodes have it
//!   (`CMIP6/CMIP/NCAR/…/gn/v20190308/tas_….nc`): the DRS path's directories with the
//!   DRS version left out name the file, the first written as the project (the name
//!   is `/cmip6/CMIP/…`); the DRS version picks the newest version of the file
//!   published with it; without one, the newest;
//! - `/opendap/<NDN name>[/v=<version>]`: the gateway's own form, any catalogued file.
//!
//! Each takes a suffix: `.dds`, `.das`, `.dods`, `.ascii`, `.html` (also the bare URL:
//! the page), and the query string is the constraint expression. The values come by
//! `/data`'s one route (the local verified copy, else `RemoteFile` over NDN; every
//! byte checked against the signed manifest) through `granary_science::dap`, which
//! reads only the header and the hyperslabs' chunks; the work runs on the gateway's
//! low-priority pool under the request's budget, two files at a time. Errors are
//! DAP2 `Error { code; message; }` bodies with the status as the code.
//! `X-Granary-Read-Blocks` (distinct 8 KiB blocks of the file read, the default
//! segment size), `X-Granary-File-Blocks` and `X-Granary-Reads` say how much of the
//! file an answer read.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::extract::State as St;
use axum::http::{header, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use granary_packet::types::COMP_VERSION;
use granary_packet::{Component, Name};
use granary_science::dap::{self, DapError};
use granary_science::netcdf::{Limits, ReadAt};

use crate::api::{ndn_name, with_catalog};
use crate::State;

/// Files read at once for OPeNDAP answers (each may hold an answer of up to
/// `dap::MAX_BYTES` and its decoded values).
const READS: usize = 2;
/// Versions of a name looked through for a DRS version.
const MAX_VERSIONS: usize = 64;

fn slots() -> Arc<tokio::sync::Semaphore> {
    static SLOTS: OnceLock<Arc<tokio::sync::Semaphore>> = OnceLock::new();
    SLOTS
        .get_or_init(|| Arc::new(tokio::sync::Semaphore::new(READS)))
        .clone()
}

/// Whether `path` is an OPeNDAP URL (its errors are DAP2 error bodies).
pub(crate) fn is_dap(path: &str) -> bool {
    path.starts_with("/thredds/dodsC/") || path.starts_with("/opendap/")
}

/// A DAP2 error answer: the body names the code, the status is the same.
pub(crate) fn dap_error(e: &DapError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let mut r = (status, dap::error_body(e)).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(
        HeaderName::from_static("content-description"),
        HeaderValue::from_static("dods-error"),
    );
    server_headers(h);
    if status == StatusCode::SERVICE_UNAVAILABLE {
        h.insert(
            header::RETRY_AFTER,
            HeaderValue::from(crate::budget::RETRY_AFTER_SECS),
        );
    }
    r
}

fn server_headers(h: &mut axum::http::HeaderMap) {
    h.insert(
        HeaderName::from_static("xdods-server"),
        HeaderValue::from_static("dods/3.2"),
    );
    h.insert(
        HeaderName::from_static("xopendap-server"),
        HeaderValue::from_static("granary-dap2/1.0"),
    );
    h.insert(
        HeaderName::from_static("xdap"),
        HeaderValue::from_static("2.0"),
    );
}

/// Turns a gateway error response (JSON) into a DAP2 error with its status.
async fn as_dap(r: Response) -> Response {
    let status = r.status();
    let body = axum::body::to_bytes(r.into_body(), 16 * 1024)
        .await
        .unwrap_or_default();
    let msg = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(&body).trim().to_string());
    let e = match status.as_u16() {
        404 => DapError::NoVariable(msg),
        413 => DapError::TooLarge(msg),
        422 => DapError::Unreadable(msg),
        503 => DapError::Temporary(msg),
        400 => DapError::Constraint(msg),
        // Any other status (a fetch that failed for good: 502) keeps its code.
        code => {
            let mut r = dap_error(&DapError::Unreadable(String::new()));
            *r.status_mut() = status;
            *r.body_mut() = axum::body::Body::from(dap::error_body_with(code, &msg));
            return r;
        }
    };
    dap_error(&e)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Dds,
    Das,
    Dods,
    Ascii,
    Html,
}

fn split_suffix(path: &str) -> (&str, Kind) {
    for (s, k) in [
        (".dds", Kind::Dds),
        (".das", Kind::Das),
        (".dods", Kind::Dods),
        (".ascii", Kind::Ascii),
        (".asc", Kind::Ascii),
        (".html", Kind::Html),
    ] {
        if let Some(p) = path.strip_suffix(s) {
            return (p, k);
        }
    }
    (path, Kind::Html)
}

/// A DRS version directory: `v` and digits.
fn is_drs_version(c: &str) -> bool {
    c.len() > 1 && c.starts_with('v') && c[1..].bytes().all(|b| b.is_ascii_digit())
}

/// The NDN name and DRS version of a THREDDS-style path.
fn from_drs(raw: &str) -> Result<(Name, Option<String>), DapError> {
    let mut comps: Vec<&str> = raw.split('/').filter(|c| !c.is_empty()).collect();
    let Some(file) = comps.pop() else {
        return Err(DapError::NoVariable("no file named".into()));
    };
    let mut version = None;
    if let Some(pos) = comps.iter().rposition(|c| is_drs_version(c)) {
        version = Some(comps.remove(pos).to_string());
    }
    let mut out: Vec<String> = comps.iter().map(|c| c.to_string()).collect();
    if let Some(first) = out.first_mut() {
        *first = first.to_ascii_lowercase();
    }
    out.push(file.to_string());
    let name = ndn_name(&out.join("/"))
        .map_err(|_| DapError::Constraint(format!("{raw:?} is not a DRS path")))?;
    Ok((name, version))
}

/// Which file, and which version of it, a request names.
struct Target {
    name: Name,
    title: String,
    url: String,
}

async fn find(node: &State, path: &str) -> Result<Target, Response> {
    let (name, drs_version, own_version, base) =
        if let Some(rest) = path.strip_prefix("/thredds/dodsC") {
            let (n, v) = from_drs(rest).map_err(|e| dap_error(&e))?;
            (n, v, None, format!("/thredds/dodsC{rest}"))
        } else {
            let rest = path.strip_prefix("/opendap").unwrap_or_default();
            let n = match ndn_name(rest) {
                Ok(n) => n,
                Err(r) => return Err(as_dap(r).await),
            };
            match n.last() {
                Some(c) if c.typ == COMP_VERSION => {
                    let v = c.as_version().ok_or_else(|| {
                        dap_error(&DapError::Constraint("a bad version component".into()))
                    })?;
                    (n.prefix(-1), None, Some(v), format!("/opendap{rest}"))
                }
                _ => (n, None, None, format!("/opendap{rest}")),
            }
        };
    let n = name.to_string();
    let found = with_catalog(node, move |c| {
        if let Some(v) = own_version {
            return Ok(c.get(&n, Some(v))?);
        }
        let Some(want) = drs_version else {
            return Ok(c.get(&n, None)?);
        };
        let mut versions = c.versions(&n)?;
        versions.sort_unstable_by(|a, b| b.cmp(a));
        for v in versions.into_iter().take(MAX_VERSIONS) {
            if let Some(r) = c.get(&n, Some(v))? {
                if r.facets.get("version").is_some_and(|x| *x == want) {
                    return Ok(Some(r));
                }
            }
        }
        Ok(None)
    })
    .await;
    match found {
        Ok(Some(r)) => Ok(Target {
            name: name.append(&Component::version(r.version)),
            title: r.title,
            url: base,
        }),
        Ok(None) => Err(dap_error(&DapError::NoVariable(format!(
            "{name} is not in the catalog{}",
            own_version.map_or(String::new(), |v| format!(" at version {v}"))
        )))),
        Err(r) => Err(as_dap(r).await),
    }
}

/// The unit `X-Granary-Read-Blocks` counts in: the store's default segment size.
const BLOCK: u64 = 8192;

/// Counts what the decoder reads from the file: its reads, and the distinct
/// [`BLOCK`]-sized blocks of the file they touch.
struct Counted {
    inner: Arc<dyn ReadAt>,
    reads: Arc<AtomicU64>,
    blocks: Arc<Mutex<HashSet<u64>>>,
}

impl ReadAt for Counted {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        if len > 0 {
            if let Ok(mut b) = self.blocks.lock() {
                let last = offset.saturating_add(len as u64 - 1) / BLOCK;
                b.extend(offset / BLOCK..=last);
            }
        }
        self.inner.read_at(offset, len)
    }
}

/// `GET|HEAD /thredds/dodsC/<DRS path>.<suffix>` and `/opendap/<name>.<suffix>`.
pub async fn serve(St(node): St<State>, uri: Uri) -> Response {
    let (path, kind) = split_suffix(uri.path());
    let ce = match crate::query::decode(uri.query().unwrap_or("")) {
        Ok(c) => c,
        Err(e) => {
            return dap_error(&DapError::Constraint(format!(
                "the constraint is not UTF-8 once decoded: {e}"
            )))
        }
    };
    if ce.len() > dap::MAX_CE {
        return dap_error(&DapError::Constraint(format!(
            "the constraint is {} bytes, more than {}",
            ce.len(),
            dap::MAX_CE
        )));
    }
    let target = match find(&node, path).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let source = match crate::preview::open_source(&node, &target.name).await {
        Ok(s) => s,
        Err(r) => return as_dap(r).await,
    };
    let Ok(slot) = slots().acquire_owned().await else {
        return dap_error(&DapError::Temporary("the gateway is stopping".into()));
    };
    let (reads, blocks) = (
        Arc::new(AtomicU64::new(0)),
        Arc::<Mutex<HashSet<u64>>>::default(),
    );
    let size = source.len();
    let source: Arc<dyn ReadAt> = Arc::new(Counted {
        inner: source,
        reads: reads.clone(),
        blocks: blocks.clone(),
    });
    let budget = crate::budget::Budget::current();
    let b = budget.clone();
    let title = target.title.clone();
    let url = target.url.clone();
    let work = node.shared.eval.run(
        move || -> Result<(Vec<u8>, &'static str, &'static str), DapError> {
            let _slot = slot;
            b.check().map_err(|s| DapError::Temporary(s.to_string()))?;
            let limits = Limits {
                timeout: b.left().max(Duration::from_millis(100)),
                ..Limits::default()
            };
            let text = "text/plain; charset=utf-8";
            Ok(match kind {
                Kind::Dods => (
                    dap::dods(source, &title, &ce, &limits)?,
                    "application/octet-stream",
                    "dods-data",
                ),
                Kind::Ascii => (
                    dap::ascii(source, &title, &ce, &limits)?.into_bytes(),
                    text,
                    "dods-ascii",
                ),
                Kind::Dds => {
                    let m = dap::model_of(source, &title, &limits)?;
                    (dap::dds(&m, &ce)?.into_bytes(), text, "dods-dds")
                }
                Kind::Das => {
                    let m = dap::model_of(source, &title, &limits)?;
                    (dap::das(&m).into_bytes(), text, "dods-das")
                }
                Kind::Html => {
                    let m = dap::model_of(source, &title, &limits)?;
                    (
                        dap::html(&m, &url).into_bytes(),
                        "text/html; charset=utf-8",
                        "dods-html",
                    )
                }
            })
        },
    );
    let made = match work.await {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => return dap_error(&e),
        Err(e) => return dap_error(&DapError::Unreadable(format!("the read failed: {e}"))),
    };
    let (body, ctype, desc) = made;
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    h.insert(
        HeaderName::from_static("content-description"),
        HeaderValue::from_static(desc),
    );
    server_headers(h);
    let touched = blocks.lock().map(|b| b.len() as u64).unwrap_or(0);
    h.insert(
        HeaderName::from_static("x-granary-read-blocks"),
        HeaderValue::from(touched),
    );
    h.insert(
        HeaderName::from_static("x-granary-file-blocks"),
        HeaderValue::from(size.div_ceil(BLOCK)),
    );
    h.insert(
        HeaderName::from_static("x-granary-reads"),
        HeaderValue::from(reads.load(Ordering::Relaxed)),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drs_paths_name_files() {
        let (n, v) = from_drs(
            "/CMIP6/CMIP/NCAR/CESM2/historical/r1i1p1f1/Amon/tas/gn/v20190308/tas_Amon_CESM2_historical_r1i1p1f1_gn_185001-201412.nc",
        )
        .unwrap();
        assert_eq!(
            n.to_string(),
            "/cmip6/CMIP/NCAR/CESM2/historical/r1i1p1f1/Amon/tas/gn/tas_Amon_CESM2_historical_r1i1p1f1_gn_185001-201412.nc"
        );
        assert_eq!(v.as_deref(), Some("v20190308"));
        assert_eq!(split_suffix("/a/b.nc.dods"), ("/a/b.nc", Kind::Dods));
        assert_eq!(split_suffix("/a/b.nc"), ("/a/b.nc", Kind::Html));
        assert!(from_drs("/").is_err());
    }
}
