//! The gateway's serve loop (hyper-util under the axum router): accepting,
//! per-client and in-progress caps, header and idle timeouts, HTTP/1.1 and
//! HTTP/2 (h2c by prior knowledge, h2 over TLS by ALPN), JSON bodies for the
//! errors hyper answers itself, and a reserved descriptor so that a node out
//! of descriptors still answers 503 (docs/decisions/0082-gateway-serving-layer.md).
//!
//! Fairness: a connection counts against `--http-max-conns` only while a
//! request on it is in progress (its response body included); WebSocket
//! faces have their own cap; connections that have not sent a complete
//! request count only against the per-client cap and are closed by the
//! header timeout. So connections that send nothing never keep accept, or a
//! normal request, waiting.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderValue, Request, Response, StatusCode};
use axum::Router;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::Peer;

/// Default time to send a complete request head (and, on HTTP/1.1, the
/// longest keep-alive wait for the next one).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default idle time after which an HTTP/2 connection or a WebSocket face
/// with no request in progress and nothing received is closed.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default cap on connections with a request in progress.
pub const DEFAULT_MAX_CONNS: usize = 256;
/// Default cap on open connections from one IP address.
pub const DEFAULT_MAX_CONNS_PER_CLIENT: usize = 512;
/// Default cap on open WebSocket faces (`/ndn`).
pub const DEFAULT_MAX_WEBSOCKETS: usize = 256;
/// Largest request head (request line and headers) read; beyond, 431 (or
/// 414 for a request target over hyper's own 65,534-byte limit).
pub const MAX_HEAD: usize = 128 * 1024;
/// h2's own limit on a request's header list (decoded, 32 bytes counted per
/// field as RFC 7540 does). Above it h2 answers a bodiless 431 itself, before
/// the service sees the request (and resets the connection at four times
/// it); so it is set well above [`MAX_HEAD`], which the service enforces
/// with a JSON 431 ([`h2_head_size`]). A stream's decoded head is held only
/// until that answer.
const H2_MAX_HEADER_LIST: u32 = 8 * MAX_HEAD as u32;
/// How long a request waits for a slot under `--http-max-conns` before 503.
const SLOT_WAIT: Duration = Duration::from_secs(30);

/// The serving limits (daemon flags `--http-header-timeout`,
/// `--http-idle-timeout`, `--http-max-conns`, `--http-max-conns-per-client`,
/// `--http-max-websockets`).
#[derive(Debug, Clone)]
pub struct Limits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_conns: usize,
    pub max_conns_per_client: usize,
    pub max_websockets: usize,
    /// How long a request may work before it is answered 503 (`--http-deadline`).
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_conns: DEFAULT_MAX_CONNS,
            max_conns_per_client: DEFAULT_MAX_CONNS_PER_CLIENT,
            max_websockets: DEFAULT_MAX_WEBSOCKETS,
            deadline: crate::budget::DEFAULT_DEADLINE,
        }
    }
}

/// State shared by every connection of one gateway (all its listeners).
pub(crate) struct Shared {
    pub(crate) limits: Limits,
    /// Requests in progress (`--http-max-conns`).
    active: Arc<Semaphore>,
    /// WebSocket faces (`--http-max-websockets`).
    pub(crate) websockets: Arc<Semaphore>,
    /// Open connections per client address.
    per_client: Mutex<HashMap<IpAddr, usize>>,
}

impl Shared {
    pub(crate) fn new(limits: Limits) -> Arc<Shared> {
        Arc::new(Shared {
            active: Arc::new(Semaphore::new(limits.max_conns.max(1))),
            websockets: Arc::new(Semaphore::new(limits.max_websockets.max(1))),
            per_client: Mutex::new(HashMap::new()),
            limits,
        })
    }

    /// Counts a connection from `ip`; false when it is over the client's cap
    /// (it is counted all the same, and uncounted when its guard drops).
    fn admit(self: &Arc<Self>, ip: IpAddr) -> (ClientGuard, bool) {
        let mut m = self.per_client.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(ip).or_insert(0);
        *n += 1;
        let ok = *n <= self.limits.max_conns_per_client;
        (
            ClientGuard {
                shared: self.clone(),
                ip,
            },
            ok,
        )
    }
}

/// One open connection from a client, counted until dropped.
pub(crate) struct ClientGuard {
    shared: Arc<Shared>,
    ip: IpAddr,
}

impl Drop for ClientGuard {
    fn drop(&mut self) {
        let mut m = self
            .shared
            .per_client
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

/// What a request knows of its connection (a request extension): the
/// gateway's shared state, and the connection's client count (a WebSocket
/// face keeps it, so an upgraded connection still counts for its client).
#[derive(Clone)]
pub(crate) struct ConnCtx {
    pub(crate) shared: Arc<Shared>,
    pub(crate) _client: Arc<ClientGuard>,
    /// The connection is TLS: request targets are made absolute `https://`
    /// URIs (as HTTP/2's are), so handlers build `https://` links.
    pub(crate) tls: bool,
}

/// An origin-form request target made absolute with `https` and the Host
/// header's authority (left as it is when there is no usable Host).
fn mark_https(parts: &mut axum::http::request::Parts) {
    if parts.uri.scheme().is_some() {
        return;
    }
    let Some(host) = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.parse::<axum::http::uri::Authority>().ok())
    else {
        return;
    };
    let mut u = parts.uri.clone().into_parts();
    u.scheme = Some(axum::http::uri::Scheme::HTTPS);
    u.authority = Some(host);
    if u.path_and_query.is_none() {
        u.path_and_query = Some(axum::http::uri::PathAndQuery::from_static("/"));
    }
    if let Ok(uri) = axum::http::Uri::from_parts(u) {
        parts.uri = uri;
    }
}

/// A JSON error response (the same body as the router's errors).
pub(crate) fn json_error(status: StatusCode, msg: &str) -> Response<Body> {
    let body = serde_json::json!({ "error": msg }).to_string();
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The error of a request head over [`MAX_HEAD`] (HTTP/1.1 and HTTP/2 alike).
const HEAD_TOO_LARGE: &str = "request head larger than 128 KiB, or more than 100 headers";

/// An HTTP/2 request's head as h2 measures a header list: each field's name
/// and value plus 32 bytes, the pseudo-headers included.
fn h2_head_size<B>(req: &Request<B>) -> usize {
    let field = |name: usize, value: usize| name + value + 32;
    let uri = req.uri();
    let mut n = field(":method".len(), req.method().as_str().len())
        + field(
            ":path".len(),
            uri.path_and_query().map_or(1, |p| p.as_str().len()),
        )
        + field(":scheme".len(), uri.scheme_str().map_or(0, str::len))
        + field(
            ":authority".len(),
            uri.authority().map_or(0, |a| a.as_str().len()),
        );
    for (k, v) in req.headers() {
        n += field(k.as_str().len(), v.len());
    }
    n
}

/// A complete HTTP/1.1 response with a JSON error body, closing the connection.
fn raw_json_error(status: StatusCode, msg: &str, extra: &str) -> Vec<u8> {
    let body = serde_json::json!({ "error": msg }).to_string();
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nx-content-type-options: nosniff\r\n{extra}\r\n{body}",
        status.as_str(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

/// A bound listener, plain or TLS.
pub struct Listener {
    pub tcp: TcpListener,
    pub tls: Option<TlsAcceptor>,
}

/// Serves `router` on `listener` until the task is dropped.
pub(crate) async fn serve(l: Listener, router: Router, shared: Arc<Shared>) {
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(shared.limits.header_timeout)
        .max_buf_size(MAX_HEAD)
        .keep_alive(true);
    b.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(128)
        .max_header_list_size(H2_MAX_HEADER_LIST);
    // No HTTP/2 keep-alive pings: their answers would count as activity and
    // keep an idle connection open; the idle timeout below closes it.
    let builder = Arc::new(b);
    // The reserved descriptor: closed to accept a connection when the
    // process has no other, answered 503 and closed, then taken back.
    let mut spare = open_spare();
    let mut backoff = Duration::from_millis(5);
    loop {
        let (stream, addr) = match l.tcp.accept().await {
            Ok(c) => {
                backoff = Duration::from_millis(5);
                c
            }
            Err(e) if is_out_of_descriptors(&e) => {
                out_of_descriptors(&l, &mut spare, &e).await;
                continue;
            }
            Err(e) => {
                // Aborted handshakes and the like: go on at once; anything
                // else (ENOMEM, ENOBUFS): back off, doubling up to 1 s.
                if !matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
                ) {
                    tracing::warn!("gateway accept: {e}; retrying in {backoff:?}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                continue;
            }
        };
        if spare.is_none() {
            spare = open_spare();
        }
        let _ = stream.set_nodelay(true);
        let (guard, ok) = shared.admit(addr.ip());
        let ctx = ConnCtx {
            shared: shared.clone(),
            _client: Arc::new(guard),
            tls: l.tls.is_some(),
        };
        let builder = builder.clone();
        let router = router.clone();
        let tls = l.tls.clone();
        tokio::spawn(async move {
            let io = Tracked::new(stream, ctx.shared.limits.idle_timeout);
            let activity = io.activity.clone();
            match tls {
                None => connection(&builder, io, activity, router, ctx, addr, ok).await,
                Some(acc) => {
                    let t = ctx.shared.limits.header_timeout;
                    match tokio::time::timeout(t, acc.accept(io)).await {
                        Ok(Ok(s)) => connection(&builder, s, activity, router, ctx, addr, ok).await,
                        Ok(Err(e)) => tracing::debug!("gateway TLS handshake from {addr}: {e}"),
                        Err(_) => tracing::debug!("gateway TLS handshake from {addr}: timed out"),
                    }
                }
            }
        });
    }
}

/// Serves one connection: requests through the router, each holding a slot
/// of `--http-max-conns` until its response body ends; a connection over its
/// client's cap gets 503 for each request; idle connections are closed.
async fn connection<I>(
    builder: &auto::Builder<TokioExecutor>,
    io: I,
    activity: Arc<Activity>,
    router: Router,
    ctx: ConnCtx,
    addr: SocketAddr,
    admitted: bool,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = JsonErrors::new(io);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let ctx_header_timeout = ctx.shared.limits.header_timeout;
    let svc = {
        let in_flight = in_flight.clone();
        let activity = activity.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let router = router.clone();
            let ctx = ctx.clone();
            let in_flight = in_flight.clone();
            let activity = activity.clone();
            async move {
                let busy = Busy::new(in_flight, activity);
                if !admitted {
                    let mut r = json_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &format!(
                            "too many connections from {} (at most {} per client)",
                            addr.ip(),
                            ctx.shared.limits.max_conns_per_client
                        ),
                    );
                    r.headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                    r.headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                    return Ok::<_, Infallible>(r);
                }
                if req.version() == axum::http::Version::HTTP_2 && h2_head_size(&req) > MAX_HEAD {
                    return Ok(json_error(
                        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                        HEAD_TOO_LARGE,
                    ));
                }
                let slot = match tokio::time::timeout(
                    SLOT_WAIT,
                    ctx.shared.active.clone().acquire_owned(),
                )
                .await
                {
                    Ok(Ok(p)) => p,
                    _ => {
                        let mut r = json_error(
                            StatusCode::SERVICE_UNAVAILABLE,
                            "the gateway is busy (every request slot is taken); try again",
                        );
                        r.headers_mut()
                            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                        return Ok(r);
                    }
                };
                let (mut parts, body) = req.into_parts();
                if ctx.tls {
                    mark_https(&mut parts);
                }
                parts.extensions.insert(ConnectInfo(Peer(addr)));
                parts.extensions.insert(ctx);
                let req = Request::from_parts(parts, Body::new(body));
                let mut router = router;
                let r = match tower_service::Service::call(&mut router, req).await {
                    Ok(r) => r,
                    Err(e) => match e {},
                };
                Ok(r.map(|b| {
                    Body::new(Held {
                        inner: b,
                        _slot: slot,
                        _busy: busy,
                    })
                }))
            }
        })
    };
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let idle = activity.idle;
    let header_timeout = ctx_header_timeout;
    // Checked a few times per timeout (at most once a second: 10,000 idle
    // connections cost 10,000 wake-ups a second at the defaults).
    let every =
        (header_timeout.min(idle) / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut closing = false;
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("gateway connection from {addr}: {e}");
                }
                break;
            }
            _ = tick.tick(), if !closing => {
                // Nothing asked yet after the header timeout: closed. (hyper's
                // own header timeout starts once it knows the protocol; a
                // client that sends nothing never gets that far.)
                if activity.answers.load(Ordering::Relaxed) == 0
                    && in_flight.load(Ordering::Relaxed) == 0
                    && activity.start.elapsed() >= header_timeout
                {
                    tracing::debug!("gateway connection from {addr}: no request within {header_timeout:?}");
                    break;
                }
                if !admitted && in_flight.load(Ordering::Relaxed) == 0 && activity.answered() {
                    // Over the client's cap: one answer (503), then closed.
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                } else if in_flight.load(Ordering::Relaxed) == 0 && activity.idle_for() >= idle {
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}

/// Read activity of a connection (for the idle timeout).
pub(crate) struct Activity {
    start: Instant,
    /// Milliseconds since `start` of the last byte read or response sent.
    last: AtomicU64,
    answers: AtomicU64,
    idle: Duration,
}

impl Activity {
    fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last.store(ms, Ordering::Relaxed);
    }
    fn idle_for(&self) -> Duration {
        let now = self.start.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last.load(Ordering::Relaxed)))
    }
    fn answered(&self) -> bool {
        self.answers.load(Ordering::Relaxed) > 0
    }
}

/// Counts a request in progress on its connection until dropped.
struct Busy {
    in_flight: Arc<AtomicUsize>,
    activity: Arc<Activity>,
}

impl Busy {
    fn new(in_flight: Arc<AtomicUsize>, activity: Arc<Activity>) -> Busy {
        in_flight.fetch_add(1, Ordering::Relaxed);
        Busy {
            in_flight,
            activity,
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.activity.touch();
        self.activity.answers.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body holding its request's slot until it ends.
struct Held {
    inner: Body,
    _slot: OwnedSemaphorePermit,
    _busy: Busy,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A TCP stream that notes when it last read a byte.
pub(crate) struct Tracked {
    io: TcpStream,
    activity: Arc<Activity>,
}

impl Tracked {
    fn new(io: TcpStream, idle: Duration) -> Tracked {
        Tracked {
            io,
            activity: Arc::new(Activity {
                start: Instant::now(),
                last: AtomicU64::new(0),
                answers: AtomicU64::new(0),
                idle,
            }),
        }
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Rewrites the answers hyper gives by itself to requests it cannot parse
/// (400, 414, 431: a status line, `content-length: 0` and a date, no body)
/// into the gateway's JSON errors. Every response of the router has a
/// `content-type`, so a bodiless 4xx head without one can only be hyper's.
pub(crate) struct JsonErrors<I> {
    io: I,
    /// A replacement being written: its bytes, how many are out, and the
    /// length of the head it stands for (reported as written when done).
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<I> JsonErrors<I> {
    fn new(io: I) -> JsonErrors<I> {
        JsonErrors { io, pending: None }
    }
}

/// The JSON replacement of hyper's own error head `buf`, if it is one.
fn replacement(buf: &[u8]) -> Option<Vec<u8>> {
    if buf.len() > 256 || !buf.starts_with(b"HTTP/1.1 4") || !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    let text = std::str::from_utf8(buf).ok()?.to_ascii_lowercase();
    if text.contains("content-type:") || !text.contains("\r\ncontent-length: 0\r\n") {
        return None;
    }
    let (status, msg) = match &text[9..12] {
        "400" => (
            StatusCode::BAD_REQUEST,
            "malformed request: the request line or a header does not parse (a raw space, quote or control character in the target?)",
        ),
        "414" => (
            StatusCode::URI_TOO_LONG,
            "request target longer than 65,534 bytes",
        ),
        "431" => (StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, HEAD_TOO_LARGE),
        _ => return None,
    };
    let date = text
        .split("\r\n")
        .find(|l| l.starts_with("date:"))
        .map(|l| format!("{l}\r\n"))
        .unwrap_or_default();
    Some(raw_json_error(status, msg, &date))
}

impl<I: AsyncWrite + Unpin> JsonErrors<I> {
    fn drive(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        while let Some((bytes, done, stands_for)) = &mut self.pending {
            if *done == bytes.len() {
                let n = *stands_for;
                self.pending = None;
                return Poll::Ready(Ok(n));
            }
            match Pin::new(&mut self.io).poll_write(cx, &bytes[*done..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => *done += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(0))
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for JsonErrors<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for JsonErrors<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.pending.is_none() {
            if let Some(r) = replacement(buf) {
                self.pending = Some((r, 0, buf.len()));
            }
        }
        if self.pending.is_some() {
            return self.drive(cx);
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.pending.is_none() {
            let mut nonempty = bufs.iter().filter(|b| !b.is_empty());
            if let (Some(first), None) = (nonempty.next(), nonempty.next()) {
                if let Some(r) = replacement(first) {
                    self.pending = Some((r, 0, first.len()));
                }
            }
        }
        if self.pending.is_some() {
            return self.drive(cx);
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.pending.is_some() {
            match self.drive(cx) {
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// EMFILE or ENFILE: the process or the system is out of descriptors.
fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(23) | Some(24))
}

fn open_spare() -> Option<std::fs::File> {
    std::fs::File::open("/dev/null").ok()
}

/// Out of descriptors: frees the reserved one to take the waiting
/// connection, answers it 503 (plain HTTP; a TLS connection is closed, it
/// cannot be answered without a handshake), closes it, and takes the
/// reserved descriptor back. Without a reserve (the daemon ran out before
/// it could be taken back) it waits a little, as there is nothing to accept
/// with.
async fn out_of_descriptors(l: &Listener, spare: &mut Option<std::fs::File>, e: &io::Error) {
    static LAST_WARNING: Mutex<Option<Instant>> = Mutex::new(None);
    {
        let mut w = LAST_WARNING.lock().unwrap_or_else(|e| e.into_inner());
        if w.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
            tracing::warn!(
                "gateway accept: {e}: out of file descriptors; answering 503 until some are free (raise `ulimit -n`)"
            );
            *w = Some(Instant::now());
        }
    }
    if spare.take().is_none() {
        tokio::time::sleep(Duration::from_millis(50)).await;
        *spare = open_spare();
        return;
    }
    if let Ok((mut s, _)) = l.tcp.accept().await {
        if l.tls.is_none() {
            let msg = raw_json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the node is out of file descriptors; try again shortly",
                "retry-after: 1\r\n",
            );
            let _ = tokio::time::timeout(Duration::from_millis(500), async {
                // Read (part of) the request first, so that closing with
                // unread bytes does not reset the connection before the
                // client reads the answer.
                let mut buf = [0u8; 4096];
                let _ = tokio::time::timeout(Duration::from_millis(100), s.read(&mut buf)).await;
                s.write_all(&msg).await?;
                s.shutdown().await?;
                let _ = tokio::time::timeout(Duration::from_millis(100), s.read(&mut buf)).await;
                Ok::<_, io::Error>(())
            })
            .await;
        }
    }
    *spare = open_spare();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http2_head_is_measured_as_h2_does() {
        let mut req = Request::get("https://h:1/api/status?x=1")
            .version(axum::http::Version::HTTP_2)
            .body(())
            .unwrap();
        let base = (7 + 3 + 32) + (5 + 15 + 32) + (7 + 5 + 32) + (10 + 3 + 32);
        assert_eq!(h2_head_size(&req), base);
        for _ in 0..2000 {
            req.headers_mut()
                .append("x-rep", HeaderValue::from_static("b"));
        }
        assert_eq!(h2_head_size(&req), base + 2000 * (5 + 1 + 32));
        assert!(h2_head_size(&req) < MAX_HEAD);
    }

    #[test]
    fn only_hypers_bodiless_error_heads_are_replaced() {
        let date = "date: Fri, 27 Nov 2026 00:49:46 GMT\r\n";
        for (code, reason) in [
            ("400", "Bad Request"),
            ("414", "URI Too Long"),
            ("431", "Request Header Fields Too Large"),
        ] {
            let head = format!("HTTP/1.1 {code} {reason}\r\ncontent-length: 0\r\n{date}\r\n");
            let r = String::from_utf8(replacement(head.as_bytes()).expect(code)).unwrap();
            assert!(r.starts_with(&format!("HTTP/1.1 {code} ")), "{r}");
            assert!(r.contains("content-type: application/json\r\n"), "{r}");
            let body = r.split_once("\r\n\r\n").unwrap().1;
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            assert!(v["error"].is_string());
            assert!(r.contains(&format!("content-length: {}\r\n", body.len())));
            assert!(r.contains(date.to_ascii_lowercase().as_str()));
        }
        // The router's own answers, other statuses, and body bytes are left.
        for other in [
            format!("HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n{date}\r\n"),
            format!("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n{date}\r\n"),
            format!("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n{date}\r\n"),
            format!("HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n{date}\r\n"),
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n".to_string(),
            format!("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n{date}\r\n{}", "x".repeat(300)),
        ] {
            assert!(replacement(other.as_bytes()).is_none(), "{other}");
        }
    }
}
