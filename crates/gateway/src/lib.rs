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
mod data;
mod esgf;
mod locate;
mod metrics;
mod query;
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
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use query::MAX_QUERY;

/// Default listening address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";
/// Default cap on concurrent connections.
pub const DEFAULT_MAX_CONNS: usize = 256;

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
}

/// The peer of a connection (for face URIs).
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, CappedListener>>
    for Peer
{
    fn connect_info(s: axum::serve::IncomingStream<'_, CappedListener>) -> Self {
        Peer(*s.remote_addr())
    }
}

/// Shared state of the handlers.
pub(crate) type State = Arc<Node>;

/// The gateway's routes.
pub fn router(node: Arc<Node>) -> Router {
    let metrics = Arc::new(metrics::Metrics::default());
    Router::new()
        .route("/", get(assets::serve))
        .route("/app.js", get(assets::serve))
        .route("/app.css", get(assets::serve))
        .route("/api/openapi.json", get(api::openapi))
        .route("/api/search", get(api::search))
        .route("/api/autocomplete", get(api::autocomplete))
        .route("/api/file/{*name}", get(api::file))
        .route("/api/status", get(api::status))
        .route("/api/wget", get(wget::api_wget))
        .route("/data/{*name}", get(data::download))
        .route("/esg-search/search", get(esgf::search))
        .route("/esg-search/search/", get(esgf::search))
        .route("/esg-search/wget", get(esgf::wget))
        .route("/ndn", get(websocket_face::websocket))
        .route("/metrics", get(metrics::serve))
        .route("/api/zarr/{id}", get(zarr::refs))
        .fallback(not_found)
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

/// Checks every request before routing: read-only methods, query length, and a
/// request target that decodes to UTF-8.
async fn guard(req: Request, next: Next) -> Response {
    let m = req.method();
    if m != axum::http::Method::GET && m != axum::http::Method::HEAD {
        let mut r = error(
            StatusCode::METHOD_NOT_ALLOWED,
            "the gateway is read-only: only GET and HEAD",
        );
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let uri = req.uri();
    if let Some(q) = uri.query() {
        if q.len() > MAX_QUERY {
            return error(
                StatusCode::URI_TOO_LONG,
                format!("query string is {} bytes, more than {MAX_QUERY}", q.len()),
            );
        }
    }
    if let Err(e) = query::decode(uri.path()) {
        return error(StatusCode::BAD_REQUEST, format!("path: {e}"));
    }
    let data = uri.path().starts_with("/data/");
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    // The page loads only its own script, style and API; published files
    // under /data are served inert (an HTML or SVG file cannot run script
    // in the gateway's origin); nothing is framed or sniffed.
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

/// Content-Security-Policy of the page and the API: the page's own `<meta>`
/// policy, plus `frame-ancestors` (which only a header can carry).
pub const PAGE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Content-Security-Policy of published files (`/data/…`).
pub const DATA_CSP: &str = "default-src 'none'; sandbox; frame-ancestors 'none'";

/// A TCP listener that holds at most `cap` connections open: `accept` waits for
/// a free slot, and a connection's slot is freed when it closes.
pub struct CappedListener {
    inner: TcpListener,
    slots: Arc<Semaphore>,
    /// Pauses after failed accepts (granary-face's, as every listener's).
    backoff: granary_face::accept::Backoff,
}

/// A connection holding its slot.
pub struct Capped {
    io: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl CappedListener {
    /// Wraps a bound listener.
    pub fn new(inner: TcpListener, cap: usize) -> CappedListener {
        CappedListener {
            inner,
            slots: Arc::new(Semaphore::new(cap.max(1))),
            backoff: Default::default(),
        }
    }
}

impl axum::serve::Listener for CappedListener {
    type Io = Capped;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let permit = match self.slots.clone().acquire_owned().await {
            Ok(p) => p,
            // The semaphore is never closed; stay idle if it were.
            Err(_) => std::future::pending().await,
        };
        // Out of descriptors and the like: granary-face's accept backs off.
        let (io, addr) =
            granary_face::accept::accept_one(&self.inner, &mut self.backoff, "gateway").await;
        let _ = io.set_nodelay(true);
        (
            Capped {
                io,
                _permit: permit,
            },
            addr,
        )
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

impl tokio::io::AsyncRead for Capped {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Capped {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Binds `addr` and serves the gateway on the current runtime until the task is
/// dropped or aborted. Returns the bound address (port 0 picks one) and the task.
pub async fn start(
    addr: SocketAddr,
    max_conns: usize,
    node: Arc<Node>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let l = TcpListener::bind(addr).await?;
    let bound = l.local_addr()?;
    let _ = node.local.set(bound);
    let app = router(node).into_make_service_with_connect_info::<Peer>();
    let task = tokio::spawn(async move {
        let l = CappedListener::new(l, max_conns);
        if let Err(e) = axum::serve(l, app).await {
            tracing::warn!("gateway stopped: {e}");
        }
    });
    Ok((bound, task))
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
