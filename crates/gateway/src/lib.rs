//! # granary-gateway
//!
//! The node's HTTP gateway, served on the daemon's own tokio runtime: the JSON
//! search API (`/api/…`, documented in docs/http-api.md and `/api/openapi.json`),
//! ESGF search compatibility (`/esg-search/…`), verified file download with byte
//! ranges (`/data/<NDN name>`, through the fetch engine on an in-process face),
//! the web page (`/`, built into the binary) and a WebSocket NDN face (`/ndn`).
//!
//! Nothing here writes: there is no publishing over HTTP. Every name in a URL is
//! an NDN name, fetched over NDN; no URL is ever mapped to a file path.
#![forbid(unsafe_code)]
// Handlers return ready HTTP responses as their errors (the axum idiom); they
// are built once per request, so their size does not matter.
#![allow(clippy::result_large_err)]

mod api;
mod assets;
pub mod budget;
mod cql2;
mod data;
mod esgf;
mod local;
mod locate;
mod metrics;
mod opendap;
mod pool;
mod preview;
mod query;
mod serve;
mod shared;
mod stac;
pub mod tls;
mod websocket_face;
mod wget;
mod zarr;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use granary_catalog::Catalog;
use granary_face::{EventSender, FaceIds, FaceLimits};
use tokio::net::TcpListener;

pub use query::MAX_QUERY;
pub use serve::{
    Limits, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNS,
    DEFAULT_MAX_CONNS_PER_CLIENT, DEFAULT_MAX_WEBSOCKETS,
};
pub use shared::Shared;
pub use tls::Tls;

/// Default listening address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";

/// What the gateway needs from the daemon.
pub struct Node {
    /// The daemon's Unix socket (management datasets for `/api/status`).
    pub socket: PathBuf,
    /// The data directory (the keychain's trust anchors verify downloads).
    pub data_dir: PathBuf,
    /// The science catalog, when the daemon serves one.
    pub catalog: Option<Arc<Catalog>>,
    /// The forwarder's event channel (in-process and WebSocket faces).
    pub events: EventSender,
    /// Face id allocator.
    pub ids: Arc<FaceIds>,
    /// Face limits in force.
    pub limits: FaceLimits,
    /// When the gateway started.
    pub started: Instant,
    /// The address the gateway is bound to (set by [`start`]).
    pub local: std::sync::OnceLock<SocketAddr>,
    /// Handles made once at start: the repository's store, the trust
    /// anchors ([`Shared::open`]).
    pub shared: Arc<Shared>,
    /// The HTTPS certificate in use (set by [`Gateway::listen`] with TLS),
    /// for `/api/status`.
    pub tls: std::sync::OnceLock<Tls>,
}

/// The peer of a connection (for face URIs): a request extension, as
/// `ConnectInfo<Peer>`.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub SocketAddr);

/// Shared state of the handlers.
pub(crate) type State = Arc<Node>;

/// The gateway's routes, each request under the default deadline.
pub fn router(node: Arc<Node>) -> Router {
    routes(
        node,
        Arc::new(metrics::Metrics::default()),
        budget::DEFAULT_DEADLINE,
    )
}

/// The routes with the counters `metrics` (one set for all of a gateway's
/// listeners) and every request's work bounded by `deadline`.
fn routes(
    node: Arc<Node>,
    metrics: Arc<metrics::Metrics>,
    deadline: std::time::Duration,
) -> Router {
    Router::new()
        .route("/", get(assets::serve))
        .route("/app.js", get(assets::serve))
        .route("/app.css", get(assets::serve))
        .route("/api/openapi.json", get(api::openapi))
        .route("/api/search", get(api::search))
        .route("/api/autocomplete", get(api::autocomplete))
        .route("/api/file/{*name}", get(api::file))
        .route("/api/status", get(api::status))
        .route("/api/federation", get(api::federation))
        .route("/api/wget", get(wget::api_wget))
        .route("/data/{*name}", get(data::download))
        .route("/esg-search/search", get(esgf::search))
        .route("/esg-search/search/", get(esgf::search))
        .route("/esg-search/wget", get(esgf::wget))
        .route("/ndn", get(websocket_face::websocket))
        .route("/metrics", get(metrics::serve))
        .route("/stac", get(stac::landing))
        .route("/stac/", get(stac::landing))
        .route("/stac/conformance", get(stac::conformance))
        .route("/stac/collections", get(stac::collections))
        .route("/stac/collections/{id}", get(stac::collection))
        .route("/stac/collections/{id}/items", get(stac::items))
        .route("/stac/collections/{id}/items/{item}", get(stac::item))
        .route(
            "/stac/search",
            get(stac::search_get).post(stac::search_post),
        )
        .route("/api/zarr/{id}", get(zarr::refs))
        .route("/api/preview/{*name}", get(preview::preview))
        .route("/thredds/dodsC/{*path}", get(opendap::serve))
        .route("/opendap/{*name}", get(opendap::serve))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            deadline,
            budget::layer,
        ))
        .layer(axum::middleware::from_fn(guard))
        .layer(axum::Extension(metrics.clone()))
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            metrics::track,
        ))
        .with_state(node)
}

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no such endpoint (see /api/openapi.json)",
    )
}

/// A JSON error body `{"error": "…"}` with `status`.
pub(crate) fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error": msg.into() });
    (status, axum::Json(body)).into_response()
}

/// A temporary condition (out of descriptors or memory, the catalog down, a
/// deadline): 503 JSON with `Retry-After`, never a 404 or a 500 that a client
/// would take as permanent.
pub(crate) fn unavailable(msg: impl Into<String>) -> Response {
    let mut r = error(StatusCode::SERVICE_UNAVAILABLE, msg);
    r.headers_mut().insert(
        header::RETRY_AFTER,
        header::HeaderValue::from(budget::RETRY_AFTER_SECS),
    );
    r
}

/// Largest request body taken (`Content-Length`); beyond, 413.
pub const MAX_BODY: u64 = 1 << 20;

/// Checks every request before routing: body size, read-only methods, query
/// length, a request target that decodes to UTF-8, and no name under
/// `/localhost` or `/localhop`; then gives every error response a JSON body.
async fn guard(req: Request, next: Next) -> Response {
    if let Some(n) = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        if n > MAX_BODY {
            let mut r = error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body of {n} bytes, more than {MAX_BODY}"),
            );
            r.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
            return secure(r, false);
        }
    }
    let m = req.method();
    // The one POST: a STAC search (it only reads), its body bounded.
    let stac_post = m == axum::http::Method::POST && req.uri().path() == "/stac/search";
    if m != axum::http::Method::GET && m != axum::http::Method::HEAD && !stac_post {
        let mut r = error(
            StatusCode::METHOD_NOT_ALLOWED,
            "the gateway is read-only: only GET and HEAD (and POST on /stac/search)",
        );
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return secure(r, false);
    }
    if stac_post {
        let len = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if len.is_some_and(|n| n > stac::MAX_BODY as u64) {
            return secure(
                error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the body is larger than {} bytes", stac::MAX_BODY),
                ),
                false,
            );
        }
    }
    let uri = req.uri();
    if let Some(q) = uri.query() {
        // ESGF File searches name their datasets in the query string
        // (intake-esgf sends every `dataset_id` in one request).
        let max = if uri.path().starts_with("/esg-search/") {
            esgf::MAX_QUERY
        } else {
            MAX_QUERY
        };
        if q.len() > max && opendap::is_dap(uri.path()) {
            let e = granary_science::dap::DapError::Constraint(format!(
                "the constraint is {} bytes, more than {max}",
                q.len()
            ));
            return secure(opendap::dap_error(&e), false);
        }
        if q.len() > max {
            return secure(
                error(
                    StatusCode::URI_TOO_LONG,
                    format!("query string is {} bytes, more than {max}", q.len()),
                ),
                false,
            );
        }
    }
    if let Err(e) = query::decode(uri.path()) {
        return secure(error(StatusCode::BAD_REQUEST, format!("path: {e}")), false);
    }
    if scoped_target(uri.path(), uri.query()) {
        return secure(
            error(
                StatusCode::FORBIDDEN,
                "names under /localhost and /localhop stay on the node: not served over HTTP",
            ),
            false,
        );
    }
    let data = uri.path().starts_with("/data/");
    let mut r = json_errors(next.run(req).await).await;
    if r.status() == StatusCode::SERVICE_UNAVAILABLE {
        // Every 503 says when to come back.
        r.headers_mut()
            .entry(header::RETRY_AFTER)
            .or_insert(header::HeaderValue::from(budget::RETRY_AFTER_SECS));
    }
    secure(r, data)
}

/// The security headers of every response. The page loads only its own
/// script, style and API; published files under /data are served inert (an
/// HTML or SVG file cannot run script in the gateway's origin); nothing is
/// framed or sniffed.
fn secure(mut r: Response, data: bool) -> Response {
    let h = r.headers_mut();
    let csp = if data { DATA_CSP } else { PAGE_CSP };
    for (k, v) in [
        (header::CONTENT_SECURITY_POLICY, csp),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        h.entry(k).or_insert(header::HeaderValue::from_static(v));
    }
    r
}

/// An error response (4xx, 5xx) whose body is not JSON (axum's own
/// rejections are plain text) gets a JSON one, its text as the message.
async fn json_errors(r: Response) -> Response {
    let s = r.status();
    if !(s.is_client_error() || s.is_server_error()) {
        return r;
    }
    // OPeNDAP clients read DAP2 error bodies.
    if r.headers()
        .get("content-description")
        .is_some_and(|v| v == "dods-error")
    {
        return r;
    }
    let json = r
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if json {
        return r;
    }
    let (mut parts, body) = r.into_parts();
    let text = axum::body::to_bytes(body, 16 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let msg = if text.is_empty() {
        s.canonical_reason().unwrap_or("error").to_string()
    } else {
        text
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::CONTENT_ENCODING);
    let body = serde_json::json!({ "error": msg }).to_string();
    parts.headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// True for a name under `/localhost` or `/localhop` (its first component,
/// of any type, compared without regard to ASCII case).
pub(crate) fn scoped_name(n: &granary_packet::Name) -> bool {
    n.get(0).is_some_and(|c| {
        c.value.eq_ignore_ascii_case(b"localhost") || c.value.eq_ignore_ascii_case(b"localhop")
    })
}

/// True when a request names something under `/localhost` or `/localhop`:
/// the name in the path of `/data/…` and `/api/file/…` (after percent
/// decoding and NDN URI parsing: `%6Cocalhost`, `8=localhost`, doubled
/// slashes), or a query parameter whose value is an NDN name.
fn scoped_target(path: &str, query: Option<&str>) -> bool {
    let rest = ["/data/", "/api/file/"]
        .iter()
        .find_map(|p| path.strip_prefix(p));
    if let Some(rest) = rest {
        if scoped_uri(rest) {
            return true;
        }
    }
    if let Some(q) = query {
        for kv in q.split('&') {
            let v = kv.split_once('=').map_or("", |(_, v)| v);
            let v = v.replace('+', " ");
            let v = percent_encoding::percent_decode_str(&v).decode_utf8_lossy();
            let v = v.trim();
            let v = v.strip_prefix("ndn:").unwrap_or(v);
            if v.starts_with('/') && scoped_uri(v) {
                return true;
            }
        }
    }
    false
}

/// True when the NDN URI `s` (slashes and percent escapes as in a URL path)
/// starts with a scoped component.
fn scoped_uri(s: &str) -> bool {
    let trimmed = s.trim_start_matches('/');
    if let Ok(n) = granary_packet::Name::from_uri(&format!("/{trimmed}")) {
        if scoped_name(&n) {
            return true;
        }
    }
    // Whatever the NDN parser makes of it: the first segment, decoded (twice,
    // for a doubly encoded one), without a `TYPE=` prefix.
    let first = trimmed.split('/').next().unwrap_or("");
    let once = percent_encoding::percent_decode_str(first).decode_utf8_lossy();
    let twice = percent_encoding::percent_decode_str(&once)
        .decode_utf8_lossy()
        .into_owned();
    [once.into_owned(), twice].iter().any(|c| {
        let c = c.rsplit_once('=').map_or(c.as_str(), |(_, v)| v);
        c.eq_ignore_ascii_case("localhost") || c.eq_ignore_ascii_case("localhop")
    })
}

/// Content-Security-Policy of the page and the API: the page's own `<meta>`
/// policy, plus `frame-ancestors` (which only a header can carry).
pub const PAGE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Content-Security-Policy of published files (`/data/…`).
pub const DATA_CSP: &str = "default-src 'none'; sandbox; frame-ancestors 'none'";

/// One gateway: its router and the state its listeners share (the caps count
/// connections of all of them together).
pub struct Gateway {
    node: Arc<Node>,
    shared: Arc<serve::Shared>,
    /// One set of request counters for all listeners (`/metrics` on any port
    /// counts every request, with a `listener` label).
    metrics: Arc<metrics::Metrics>,
}

impl Gateway {
    /// A gateway for `node` with these limits.
    pub fn new(node: Arc<Node>, limits: Limits) -> Gateway {
        Gateway {
            node,
            shared: serve::Shared::new(limits),
            metrics: Arc::new(metrics::Metrics::default()),
        }
    }

    /// Binds `addr` (HTTPS with `tls`) and serves the gateway on the current
    /// runtime until the task is dropped or aborted. Returns the bound
    /// address (port 0 picks one) and the task.
    pub async fn listen(
        &self,
        addr: SocketAddr,
        tls: Option<&Tls>,
    ) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
        let l = TcpListener::bind(addr).await?;
        let bound = l.local_addr()?;
        let _ = self.node.local.set(bound);
        if let Some(t) = tls {
            let _ = self.node.tls.set(t.clone());
        }
        let app = routes(
            self.node.clone(),
            self.metrics.clone(),
            self.shared.limits.deadline,
        );
        let l = serve::Listener {
            tcp: l,
            tls: tls.map(|t| tokio_rustls::TlsAcceptor::from(t.config.clone())),
        };
        let task = tokio::spawn(serve::serve(l, app, self.shared.clone()));
        Ok((bound, task))
    }
}

/// Binds `addr` and serves the gateway (plain HTTP, default limits but
/// `max_conns`) on the current runtime until the task is dropped or aborted.
/// Returns the bound address (port 0 picks one) and the task.
pub async fn start(
    addr: SocketAddr,
    max_conns: usize,
    node: Arc<Node>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let limits = Limits {
        max_conns,
        ..Limits::default()
    };
    Gateway::new(node, limits).listen(addr, None).await
}

/// Parses the `http` setting: `off` (None) or `IP:PORT` (a bare port means
/// loopback). Host names are refused: the address must be explicit.
pub fn parse_addr(s: &str) -> Result<Option<SocketAddr>, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("off") || s.eq_ignore_ascii_case("none") || s.is_empty() {
        return Ok(None);
    }
    let s = s.strip_prefix("http://").unwrap_or(s).trim_end_matches('/');
    if let Ok(port) = s.parse::<u16>() {
        return Ok(Some(SocketAddr::from(([127, 0, 0, 1], port))));
    }
    s.parse::<SocketAddr>().map(Some).map_err(|_| {
        format!("http address {s:?}: expected IP:PORT (e.g. 127.0.0.1:8080), a port, or off")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_targets_by_any_encoding() {
        for (path, query) in [
            ("/data/localhost/nfd/status/general", None),
            ("/data/localhop/nfd/rib/list", None),
            ("/data/%6Cocalhost/nfd", None),
            ("/data/%256Cocalhost/nfd", None),
            ("/data/8=localhost/nfd", None),
            ("/data/8%3Dlocalhost/nfd", None),
            ("/data//localhost/nfd", None),
            ("/data/LocalHost/nfd", None),
            ("/api/file/localhop/x", None),
            ("/esg-search/wget", Some("dataset_id=%2Flocalhost%2Fnfd")),
            ("/api/wget", Some("a=1&name=ndn:/localhop/x")),
        ] {
            assert!(scoped_target(path, query), "{path} {query:?}");
        }
        for (path, query) in [
            ("/data/test/localhost/x", None),
            ("/data/localhostx/y", None),
            ("/api/search", Some("q=localhost")),
            ("/", None),
            ("/api/status", None),
        ] {
            assert!(!scoped_target(path, query), "{path} {query:?}");
        }
    }
}
