//! `GET|HEAD /data/<NDN name>[?version=]`: a file streamed through the fetch
//! engine (granary-transfer) on an in-process face of the forwarder, so it comes
//! from the local repository or over NDN alike. Every byte handed to the client
//! was verified against the signed manifest (or the packet's own signature);
//! a failure mid-stream aborts the response.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State as St;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use granary_face::{EventSender, FaceEvent};
use granary_packet::types::COMP_VERSION;
use granary_packet::{Component, Name};
use granary_transfer::link::Incoming;
use granary_transfer::{AppLink, Config, Engine, Link, OpenOptions, RemoteFile, Trust};
use tokio::sync::mpsc;

use crate::api::{ndn_name, version_param};
use crate::{error, Node, State};

/// Bytes fetched per engine run (rounded to whole segments). Two chunks are
/// kept ahead of the client, so a slow client holds back the fetch.
const CHUNK: u64 = 4 << 20;
/// Chunks fetched ahead of the client.
const AHEAD: usize = 2;
/// Bodies up to this size from the local repository are read and checked
/// in one go, with the lookup.
const SMALL_BODY: u64 = 1 << 20;
/// The largest body read and checked on the async worker itself (SHA-256 of it
/// takes ≈ 0.2 ms with SHA-NI): a larger one goes to a blocking thread.
const WORKER_BODY: u64 = 256 << 10;
/// Longest wait for version discovery and the manifest.
const OPEN_TIMEOUT: Duration = Duration::from_secs(20);

/// An in-process face for one download; it is closed when dropped.
pub(crate) struct GwLink {
    inner: AppLink,
    id: u64,
    events: EventSender,
}

impl GwLink {
    pub(crate) async fn new(node: &Node, what: &str) -> Result<GwLink, String> {
        let id = node.ids.next();
        let (mut handle, app) =
            granary_face::internal::pair(id, what, &node.limits, node.events.clone());
        // Non-local: the forwarder refuses /localhost (and /localhop
        // management) to what arrives over HTTP, as to any network face.
        handle.info.scope = granary_face::Scope::NonLocal;
        node.events
            .send(FaceEvent::Created(handle))
            .await
            .map_err(|_| "the forwarder has stopped".to_string())?;
        Ok(GwLink {
            inner: AppLink(app),
            id,
            events: node.events.clone(),
        })
    }
}

impl Drop for GwLink {
    fn drop(&mut self) {
        let ev = FaceEvent::Closed {
            face: self.id,
            reason: "gateway request finished".into(),
        };
        if let Err(mpsc::error::TrySendError::Full(ev)) = self.events.try_send(ev) {
            let events = self.events.clone();
            if let Ok(h) = tokio::runtime::Handle::try_current() {
                h.spawn(async move {
                    let _ = events.send(ev).await;
                });
            }
        }
    }
}

impl Link for GwLink {
    async fn send(
        &mut self,
        batch: &[granary_packet::Interest],
    ) -> Result<(), granary_transfer::Error> {
        self.inner.send(batch).await
    }
    async fn recv(&mut self, out: &mut Vec<Incoming>) -> Result<(), granary_transfer::Error> {
        self.inner.recv(out).await
    }
}

/// Locations from the node's catalog (the shared one when the node is on
/// PostgreSQL): a name without a route is fetched with hinted Interests,
/// failing over between its holders, nearest first by the node's RIB, then
/// least loaded, as `granary get` orders them (docs/federation.md).
struct CatalogLocator(Arc<granary_catalog::Catalog>, std::path::PathBuf);

impl granary_transfer::Locator for CatalogLocator {
    fn locate(&self, object: &Name) -> granary_transfer::LocateFuture {
        let (cat, name, socket) = (self.0.clone(), object.to_string(), self.1.clone());
        Box::pin(async move {
            let t = cat.node_timeout();
            let mut locs = tokio::task::spawn_blocking(move || cat.locate(&name, None, t))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            if locs.len() > 1 {
                // Without the RIB, the catalog's order (least loaded) stays.
                if let Some(rib) = rib(&socket).await {
                    granary_catalog::order_nearest(&mut locs, |node| {
                        Name::from_uri(node)
                            .ok()
                            .and_then(|n| granary_mgmt::dataset::rib_distance(&rib, &n))
                    });
                }
            }
            Ok(locs
                .iter()
                .filter_map(|l| Name::from_uri(&l.node).ok())
                .collect())
        })
    }
}

/// The node's RIB (`rib/list`), if it answers.
async fn rib(socket: &std::path::Path) -> Option<Vec<granary_mgmt::RibEntry>> {
    let mut c = granary_app::Client::connect(socket).await.ok()?;
    let raw = c
        .dataset(&Name::from_uri("/localhost/nfd/rib/list").ok()?)
        .await
        .ok()?;
    granary_mgmt::decode_dataset::<granary_mgmt::RibEntry>(&raw).ok()
}

fn engine_config() -> Config {
    Config {
        lifetime: Duration::from_secs(4),
        retries: 6,
        ..Config::default()
    }
}

/// The outcome of a `Range` header against a size.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ranged {
    /// Serve the whole file (no header, several ranges, or one we ignore).
    Full,
    /// Serve `start..=end`.
    Part(u64, u64),
    /// 416.
    Unsatisfiable,
}

/// One `bytes=` range (RFC 9110 §14.1.2): `a-b`, `a-`, `-n`. A header that does not
/// parse, or asks for several ranges, is ignored (the whole file is served).
pub(crate) fn parse_range(h: &str, size: u64) -> Ranged {
    let h = h.trim();
    let Some(spec) = h
        .get(..6)
        .filter(|u| u.eq_ignore_ascii_case("bytes="))
        .map(|_| h[6..].trim())
    else {
        return Ranged::Full;
    };
    if spec.contains(',') {
        return Ranged::Full;
    }
    let Some((a, b)) = spec.split_once('-') else {
        return Ranged::Full;
    };
    let (a, b) = (a.trim(), b.trim());
    let num = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match (a.is_empty(), b.is_empty()) {
        // -n: the last n bytes.
        (true, false) => match num(b) {
            Some(0) => Ranged::Unsatisfiable,
            Some(_) if size == 0 => Ranged::Unsatisfiable,
            Some(n) => Ranged::Part(size.saturating_sub(n), size - 1),
            None => Ranged::Full,
        },
        // a-
        (false, true) => match num(a) {
            Some(s) if s >= size => Ranged::Unsatisfiable,
            Some(s) => Ranged::Part(s, size - 1),
            None => Ranged::Full,
        },
        (false, false) => match (num(a), num(b)) {
            (Some(s), Some(e)) if s <= e => {
                if s >= size {
                    Ranged::Unsatisfiable
                } else {
                    Ranged::Part(s, e.min(size - 1))
                }
            }
            _ => Ranged::Full,
        },
        (true, true) => Ranged::Full,
    }
}

/// The keychain could not be read: out of descriptors or memory is a 503
/// (with `Retry-After`), anything else a 500.
pub(crate) fn anchors_failed(e: String) -> Response {
    if crate::budget::temporary_text(&e) {
        crate::unavailable(format!("{e}; try again shortly"))
    } else {
        error(StatusCode::INTERNAL_SERVER_ERROR, e)
    }
}

fn fetch_status(e: &granary_transfer::Error) -> StatusCode {
    if crate::budget::temporary_text(&e.to_string()) {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    match e {
        granary_transfer::Error::Fetch(_) => StatusCode::NOT_FOUND,
        granary_transfer::Error::Verify(_) => StatusCode::BAD_GATEWAY,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The answer to a fetch of `target` that failed with `e`. A "not found" of
/// a version the catalog lists is temporary (its holder cannot be reached
/// now: no route yet, down, slow): 503 with Retry-After, so that download
/// scripts and clients try again instead of taking the file for missing.
/// A catalog that cannot answer is a 503 too.
async fn fetch_failed(node: &State, target: &Name, e: granary_transfer::Error) -> Response {
    let status = fetch_status(&e);
    if status != StatusCode::NOT_FOUND || node.catalog.is_none() {
        return error(status, e.to_string());
    }
    let (name, version) = match target.last() {
        Some(c) if c.typ == COMP_VERSION => (target.prefix(-1), c.as_version()),
        _ => (target.clone(), None),
    };
    let n = name.to_string();
    let listed = crate::api::with_catalog(node, move |c| Ok(c.get(&n, version)?.is_some())).await;
    match listed {
        Ok(true) => crate::unavailable(format!(
            "{target} is in the catalog but cannot be fetched now ({e}); try again shortly"
        )),
        Ok(false) => error(StatusCode::NOT_FOUND, e.to_string()),
        Err(r) => r,
    }
}

fn content_type(name: &Name) -> &'static str {
    let last = name
        .components()
        .filter(|c| c.typ == granary_packet::types::COMP_GENERIC)
        .last()
        .map(|c| String::from_utf8_lossy(c.value).to_ascii_lowercase())
        .unwrap_or_default();
    if last.ends_with(".nc") || last.ends_with(".nc4") {
        "application/x-netcdf"
    } else if last.ends_with(".json") {
        "application/json"
    } else if last.ends_with(".txt") || last.ends_with(".csv") {
        "text/plain; charset=utf-8"
    } else {
        "application/octet-stream"
    }
}

pub async fn download(
    St(node): St<State>,
    method: Method,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let raw = uri.path().strip_prefix("/data").unwrap_or_default();
    let name = match ndn_name(raw) {
        Ok(n) => n,
        Err(r) => return r,
    };
    let version = match version_param(&uri) {
        Ok(v) => v,
        Err(r) => return r,
    };
    if version.is_some() && name.last().is_some_and(|c| c.typ == COMP_VERSION) {
        return error(
            StatusCode::BAD_REQUEST,
            "the name already has a version component; leave out ?version=",
        );
    }
    let target = match version {
        Some(v) => name.append(&Component::version(v)),
        None => name.clone(),
    };
    let (trust, generation) = match node.shared.anchors.get() {
        Ok(t) => t,
        Err(e) => return anchors_failed(e),
    };
    // One route to the bytes: a version the node's repository holds is read
    // from its file (every segment checked against the signed manifest
    // kept beside it); anything else is fetched over NDN.
    let get = method == Method::GET;
    // A small body of a version whose lookup and verified manifest are cached, read
    // on this worker when its bytes are in memory (`Shared::worker_read`).
    let on_worker = node.shared.worker_read(
        generation,
        &target,
        |size, digest| body_range(size, digest, &headers, get),
        SMALL_BODY,
        WORKER_BODY,
    );
    let local = match on_worker {
        Some(l) => Some(l),
        None => {
            let shared = node.shared.clone();
            let (t2, tr2, h2) = (target.clone(), trust.clone(), headers.clone());
            let local = tokio::task::spawn_blocking(move || {
                let l = match shared.open_local(&tr2, generation, &t2) {
                    Ok(Some(l)) => l,
                    Ok(None) => return Ok(None),
                    Err(e) => return Err(e),
                };
                // No size in the manifest: fetched over NDN.
                if l.info.map.file_size().is_none() {
                    return Ok(None);
                }
                // A small body is read and checked here, at once: no second
                // blocking task, no channel.
                let small = l
                    .info
                    .map
                    .file_size()
                    .and_then(|size| body_range(size, &l.digest, &h2, get))
                    .filter(|(a, b)| b - a <= SMALL_BODY)
                    .and_then(|(a, b)| {
                        let file = l.entry.file.as_ref()?;
                        let mut out = Vec::new();
                        let r = crate::local::read(&shared.pool, &file.file, &l.info, a, b, |x| {
                            out.push(x);
                            true
                        });
                        let body = r.map(|()| match out.len() {
                            1 => out.pop().unwrap_or_default(),
                            _ => Bytes::from(out.concat()),
                        });
                        shared.local_reads.blocking.fetch_add(1, Ordering::Relaxed);
                        Some((a, b, body))
                    });
                Ok(Some((l, small)))
            })
            .await;
            match local {
                Ok(Ok(l)) => l,
                Ok(Err(e)) => return crate::unavailable(e),
                Err(e) => return crate::unavailable(format!("the read task failed: {e}")),
            }
        }
    };
    if let Some((l, small)) = local {
        let what = Found {
            versioned: l.info.versioned.clone(),
            size: l.info.map.file_size(),
            verified_by: l.info.verified_by.clone(),
            etag: Some(l.digest.clone()),
        };
        let pool = node.shared.pool.clone();
        return respond(
            &name,
            version,
            &method,
            &headers,
            what,
            |start, end| match small {
                Some((a, b, Ok(body))) if (a, b) == (start, end) => Body::from(body),
                Some((a, b, Err(e))) if (a, b) == (start, end) => {
                    tracing::error!("gateway: download of {} aborted: {e}", l.info.versioned);
                    Body::from_stream(futures_util::stream::once(async move {
                        Err::<Bytes, _>(std::io::Error::other(e))
                    }))
                }
                _ => stream_local(pool, l.entry, l.info, start, end),
            },
        );
    }
    let mut opened = open_remote(&node, &target, trust).await;
    // A signer the trust in force does not know may have just been added to
    // the keychain: load it again and try once more.
    if let Ok(Err(granary_transfer::Error::Verify(_))) = &opened {
        if let Ok((t, g)) = node.shared.anchors.reload() {
            if g != generation {
                opened = open_remote(&node, &target, t).await;
            }
        }
    }
    let f = match opened {
        Ok(Ok(f)) => f,
        Ok(Err(e)) => return fetch_failed(&node, &target, e).await,
        Err(r) => return r,
    };
    let st = f.stat();
    let file_version = st
        .versioned
        .last()
        .filter(|c| c.typ == COMP_VERSION)
        .and_then(|c| c.as_version());
    // The ETag is the manifest digest the catalog recorded for this version.
    let mut etag = None;
    if let (Some(cat), Some(v)) = (node.catalog.clone(), file_version) {
        let n = name.to_string();
        etag = tokio::task::spawn_blocking(move || {
            cat.get(&n, Some(v))
                .ok()
                .flatten()
                .and_then(|r| r.manifest_digest)
        })
        .await
        .ok()
        .flatten();
    }
    let what = Found {
        versioned: st.versioned.clone(),
        size: st.size,
        verified_by: st.verified_by.clone(),
        etag,
    };
    let seg = st.segment_size;
    // The face is dropped with `f` if nothing is to be fetched; else the
    // stream owns it.
    respond(
        &name,
        version,
        &method,
        &headers,
        what,
        move |start, end| stream(f, start, end, seg),
    )
}

/// The bytes `start..end` a GET of a version of `size` bytes whose manifest digest
/// is `digest` sends with `headers` (`None`: no body — a HEAD, a 304, an
/// unsatisfiable range — or an empty one).
fn body_range(size: u64, digest: &str, headers: &HeaderMap, get: bool) -> Option<(u64, u64)> {
    let etag = format!("\"{digest}\"");
    match (
        get && !not_modified(headers, &etag),
        range_for(headers, &etag, size),
    ) {
        (true, Ranged::Full) => Some((0, size)),
        (true, Ranged::Part(a, b)) => Some((a, b + 1)),
        _ => None,
    }
    .filter(|(a, b)| b > a)
}

/// What was found for a request, whichever route it came by.
struct Found {
    versioned: Name,
    /// `None`: no manifest and no size (streamed until it ends).
    size: Option<u64>,
    verified_by: String,
    /// The manifest digest, when known.
    etag: Option<String>,
}

/// The response to a GET or HEAD of `what`: headers, conditional requests,
/// a single byte range, and the body `body(start, end)` when one is sent.
fn respond(
    name: &Name,
    version: Option<u64>,
    method: &Method,
    headers: &HeaderMap,
    what: Found,
    body: impl FnOnce(u64, u64) -> Body,
) -> Response {
    let versioned = &what.versioned;
    let file_version = versioned
        .last()
        .filter(|c| c.typ == COMP_VERSION)
        .and_then(|c| c.as_version());
    // The ETag is the manifest digest; a version is immutable, so failing
    // that, a digest of the versioned name.
    let etag = format!(
        "\"{}\"",
        what.etag
            .unwrap_or_else(|| hex::encode(granary_packet::sha256(
                versioned.to_string().as_bytes()
            )))
    );

    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(name)),
    );
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    if let Some(t) = file_version.and_then(granary_packet::version_time) {
        if let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(t)) {
            h.insert(header::LAST_MODIFIED, v);
        }
    }
    if let Ok(v) = HeaderValue::from_str(&versioned.to_string()) {
        h.insert("x-ndn-name", v);
    }
    if let Ok(v) = HeaderValue::from_str(&what.verified_by) {
        h.insert("x-ndn-verified-by", v);
    }
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if version.is_some() {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        }),
    );

    if not_modified(headers, &etag) {
        return (StatusCode::NOT_MODIFIED, h).into_response();
    }

    let Some(size) = what.size else {
        // No manifest and no size: the whole object, streamed until it ends.
        if method == Method::HEAD {
            return (StatusCode::OK, h).into_response();
        }
        return (StatusCode::OK, h, body(0, u64::MAX)).into_response();
    };
    let ranged = range_for(headers, &etag, size);
    let (status, start, end) = match ranged {
        Ranged::Full => (StatusCode::OK, 0, size),
        Ranged::Part(a, b) => {
            if let Ok(v) = HeaderValue::from_str(&format!("bytes {a}-{b}/{size}")) {
                h.insert(header::CONTENT_RANGE, v);
            }
            (StatusCode::PARTIAL_CONTENT, a, b + 1)
        }
        Ranged::Unsatisfiable => {
            let mut r = error(
                StatusCode::RANGE_NOT_SATISFIABLE,
                format!("range outside the file ({size} bytes)"),
            );
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return r;
        }
    };
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start));
    if method == Method::HEAD || start == end {
        return (status, h).into_response();
    }
    (status, h, body(start, end)).into_response()
}

/// True when `If-None-Match` names `etag` (or `*`): 304.
fn not_modified(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|inm| {
            inm.trim() == "*"
                || inm
                    .split(',')
                    .any(|t| t.trim().trim_start_matches("W/") == etag)
        })
}

/// The `Range` header against `size`, honoured only when `If-Range` (if
/// any) names `etag`.
fn range_for(headers: &HeaderMap, etag: &str, size: u64) -> Ranged {
    let if_range_ok = headers
        .get(header::IF_RANGE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| v.trim() == etag);
    match headers.get(header::RANGE).and_then(|v| v.to_str().ok()) {
        Some(r) if if_range_ok => parse_range(r, size),
        _ => Ranged::Full,
    }
}

/// `start..end` of the local copy as a body, read and checked on a blocking
/// thread ahead of the client; a segment that does not match the manifest
/// ends the body with an error (the connection closes short).
fn stream_local(
    pool: Arc<crate::local::Pool>,
    entry: Arc<granary_store::Entry>,
    info: Arc<granary_transfer::ObjectInfo>,
    start: u64,
    end: u64,
) -> Body {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(AHEAD);
    tokio::task::spawn_blocking(move || {
        let Some(file) = entry.file.as_ref() else {
            let _ = tx.blocking_send(Err(std::io::Error::other("the local copy is not open")));
            return;
        };
        let r = crate::local::read(&pool, &file.file, &info, start, end, |b| {
            tx.blocking_send(Ok(b)).is_ok()
        });
        if let Err(e) = r {
            tracing::error!("gateway: download of {} aborted: {e}", info.versioned);
            let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
        }
    });
    let s =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    Body::from_stream(s)
}

/// Opens `target` over NDN on a new in-process face, within [`OPEN_TIMEOUT`];
/// the outer error is a ready response (no face, or the timeout).
pub(crate) async fn open_remote(
    node: &Node,
    target: &Name,
    trust: Arc<Trust>,
) -> Result<Result<RemoteFile<GwLink>, granary_transfer::Error>, Response> {
    let link = match GwLink::new(node, "gateway-data").await {
        Ok(l) => l,
        Err(e) => return Err(error(StatusCode::SERVICE_UNAVAILABLE, e)),
    };
    tokio::time::timeout(
        OPEN_TIMEOUT,
        RemoteFile::open(
            link,
            Engine::new(Config {
                locator: node.catalog.clone().map(|c| {
                    granary_transfer::LocatorRef(
                        Arc::new(CatalogLocator(c, node.socket.clone())) as Arc<_>
                    )
                }),
                ..engine_config()
            }),
            target,
            trust,
            &OpenOptions::default(),
        ),
    )
    .await
    .map_err(|_| {
        error(
            StatusCode::GATEWAY_TIMEOUT,
            format!("{target}: no answer within {} s", OPEN_TIMEOUT.as_secs()),
        )
    })
}

/// The bytes `start..end` (to the end of the object with `u64::MAX`) as a body:
/// a task fetches whole-segment chunks ahead of the client; an error ends the
/// body with an error, which aborts the response (the connection is closed
/// before the announced length is reached).
fn stream(mut f: RemoteFile<GwLink>, start: u64, end: u64, seg: u64) -> Body {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(AHEAD);
    tokio::spawn(async move {
        let per = CHUNK
            .checked_div(seg)
            .map(|n| n.max(1) * seg)
            .unwrap_or(CHUNK);
        let mut pos = start;
        while pos < end {
            // End each chunk on a segment boundary, so no segment is fetched twice.
            let mut hi = pos.saturating_add(per).min(end);
            if seg > 0 && hi < end {
                hi = (hi / seg).max(pos / seg + 1) * seg;
                hi = hi.min(end);
            }
            let r = f.read_at(pos, hi - pos).await;
            let chunk = match r {
                Ok(b) if b.is_empty() && end != u64::MAX => Err(std::io::Error::other(format!(
                    "{}: the object ended at byte {pos}, before {end}",
                    f.stat().versioned
                ))),
                Ok(b) if b.is_empty() => break,
                Ok(b) => Ok(Bytes::from(b)),
                Err(e) => {
                    tracing::warn!("gateway: download of {} aborted: {e}", f.stat().versioned);
                    Err(std::io::Error::other(e.to_string()))
                }
            };
            let failed = chunk.is_err();
            if let Ok(b) = &chunk {
                pos += b.len() as u64;
            }
            if tx.send(chunk).await.is_err() || failed {
                break;
            }
        }
    });
    let s =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    Body::from_stream(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_conditions_are_503_never_404_or_500() {
        let emfile = std::io::Error::from_raw_os_error(24);
        assert!(crate::budget::temporary_io(&emfile));
        assert!(crate::budget::temporary_io(
            &std::io::Error::from_raw_os_error(12)
        ));
        assert!(!crate::budget::temporary_io(
            &std::io::Error::from_raw_os_error(2)
        ));
        // The fetch engine's "not found" stays a 404; one that carries an
        // exhausted resource is a 503.
        let e = granary_transfer::Error::Fetch("no route: /a".into());
        assert_eq!(fetch_status(&e), StatusCode::NOT_FOUND);
        let e = granary_transfer::Error::Fetch(format!("repository: {emfile}"));
        assert_eq!(fetch_status(&e), StatusCode::SERVICE_UNAVAILABLE);
        // The keychain unreadable for lack of descriptors: 503 with Retry-After.
        let r = anchors_failed(format!("trust anchors: keychain/trust: {emfile}"));
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(r.headers().contains_key(header::RETRY_AFTER));
        let r = anchors_failed("trust anchors: bad certificate".into());
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn ranges() {
        use Ranged::*;
        assert_eq!(parse_range("bytes=0-9", 100), Part(0, 9));
        assert_eq!(parse_range("bytes=90-200", 100), Part(90, 99));
        assert_eq!(parse_range("bytes=10-", 100), Part(10, 99));
        assert_eq!(parse_range("bytes=-10", 100), Part(90, 99));
        assert_eq!(parse_range("bytes=-1000", 100), Part(0, 99));
        assert_eq!(parse_range("bytes=100-", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=100-200", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=0-0", 0), Unsatisfiable);
        assert_eq!(parse_range("bytes=5-2", 100), Full);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Full);
        assert_eq!(parse_range("items=0-1", 100), Full);
        assert_eq!(parse_range("bytes=x-1", 100), Full);
        assert_eq!(parse_range("BYTES=1-1", 100), Part(1, 1));
    }
}
