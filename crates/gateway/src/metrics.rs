//! `GET /metrics`: the node in the Prometheus text exposition format 0.0.4
//! (docs/http-api.md; why a hand-written encoder: docs/decisions/0085).
//!
//! - The forwarder's counters, table sizes and per-face packets and bytes come
//!   from its management datasets (status/general, cs/info, faces/list) over
//!   the daemon's Unix socket, as `/api/status` and `granary status` read them:
//!   three small datasets per scrape, and no link from the gateway to the
//!   forwarder's tables.
//! - The repository's size is one walk of its `objects/` tree
//!   ([`granary_store::usage`]), cached: a scrape answers from the last walk and
//!   starts the next one in the background when that is older than
//!   [`REPO_MIN_AGE`] (or twenty times as long as the last walk took), so a
//!   scrape never waits on a large store except the first.
//! - The catalog's size is its in-memory index's length.
//! - Gateway requests are counted by a middleware ([`track`]) by route template
//!   (axum's `MatchedPath`: never the raw path, so a label has as many values as
//!   the router has routes), method and status, with a latency histogram (time
//!   to the response head: a download's body streams on after it).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{MatchedPath, Request, State as St};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use granary_packet::Name;

use crate::State;

/// Upper bounds (seconds) of the request-latency histogram's buckets.
pub const BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The repository walk is redone at most this often.
pub const REPO_MIN_AGE: Duration = Duration::from_secs(5);

/// The content type of the 0.0.4 text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Route label of a request no route matched (the 404 fallback).
const UNMATCHED: &str = "unmatched";

/// One histogram series.
#[derive(Default, Clone)]
struct Histogram {
    /// Per bucket (not cumulative; summed on output).
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

#[derive(Default)]
struct Requests {
    /// (route, method, status) → count.
    count: BTreeMap<(String, &'static str, u16), u64>,
    /// (route, method) → latency.
    latency: BTreeMap<(String, &'static str), Histogram>,
}

#[derive(Default)]
struct RepoCache {
    value: Option<granary_store::Usage>,
    at: Option<Instant>,
    took: Duration,
    refreshing: bool,
}

/// The gateway's own metrics (shared by the middleware and `/metrics`).
pub struct Metrics {
    requests: Mutex<Requests>,
    /// Route template → bytes of response bodies handed to the connection.
    bytes: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    in_flight: AtomicI64,
    started: SystemTime,
    repo: Arc<Mutex<RepoCache>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Mutex::default(),
            bytes: Mutex::default(),
            in_flight: AtomicI64::new(0),
            started: SystemTime::now(),
            repo: Arc::default(),
        }
    }
}

/// A method as a label: a bounded set (the guard answers 405 to the rest).
fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        _ => "other",
    }
}

impl Metrics {
    fn observe(&self, route: &str, method: &'static str, status: u16, secs: f64) {
        let Ok(mut r) = self.requests.lock() else {
            return;
        };
        *r.count
            .entry((route.to_string(), method, status))
            .or_insert(0) += 1;
        let h = r.latency.entry((route.to_string(), method)).or_default();
        h.count += 1;
        h.sum += secs;
        if let Some(i) = BUCKETS.iter().position(|b| secs <= *b) {
            h.buckets[i] += 1;
        }
    }

    /// The body-bytes counter of `route`.
    fn bytes_of(&self, route: &str) -> Arc<AtomicU64> {
        match self.bytes.lock() {
            Ok(mut b) => match b.get(route) {
                Some(c) => c.clone(),
                None => b.entry(route.to_string()).or_default().clone(),
            },
            Err(_) => Arc::default(),
        }
    }

    /// The repository's size from the cache, starting a walk when it is stale;
    /// the first call waits for the first walk.
    async fn repo_usage(&self, root: std::path::PathBuf) -> granary_store::Usage {
        let (have, start) = {
            let Ok(mut c) = self.repo.lock() else {
                return Default::default();
            };
            let max_age = REPO_MIN_AGE.max(c.took * 20);
            let stale = c.at.is_none_or(|t| t.elapsed() >= max_age);
            let start = stale && !c.refreshing;
            if start {
                c.refreshing = true;
            }
            (c.value, start)
        };
        if !start {
            if let Some(v) = have {
                return v;
            }
            // A first walk is under way for another scrape: walk too rather
            // than answer zero (only ever at start).
            return tokio::task::spawn_blocking(move || granary_store::usage(&root))
                .await
                .unwrap_or_default();
        }
        let cache = self.repo.clone();
        let walk = tokio::task::spawn_blocking(move || {
            let t = Instant::now();
            let u = granary_store::usage(&root);
            if let Ok(mut c) = cache.lock() {
                c.value = Some(u);
                c.at = Some(Instant::now());
                c.took = t.elapsed();
                c.refreshing = false;
            }
            u
        });
        match have {
            // Answer from the last walk; the new one updates the cache.
            Some(v) => v,
            None => walk.await.unwrap_or_default(),
        }
    }
}

/// Counts a request in flight until dropped (a request whose client went
/// away is dropped mid-handler, and still leaves the gauge).
struct InFlight<'a>(&'a AtomicI64);

impl<'a> InFlight<'a> {
    fn enter(n: &'a AtomicI64) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The middleware: counts every request by route template, method and status,
/// and times it to the response head.
pub async fn track(St(m): St<Arc<Metrics>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string());
    let method = method_label(req.method());
    let flight = InFlight::enter(&m.in_flight);
    let t = Instant::now();
    let r = next.run(req).await;
    let secs = t.elapsed().as_secs_f64();
    drop(flight);
    let route = route.as_deref().unwrap_or(UNMATCHED);
    m.observe(route, method, r.status().as_u16(), secs);
    let bytes = m.bytes_of(route);
    let (parts, body) = r.into_parts();
    Response::from_parts(parts, axum::body::Body::new(Counted { inner: body, bytes }))
}

/// A response body that adds the bytes of every data frame it yields to its route's
/// counter: what was handed to the connection, streamed bodies (downloads) included.
struct Counted {
    inner: axum::body::Body,
    bytes: Arc<AtomicU64>,
}

impl http_body::Body for Counted {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &r {
            if let Some(d) = f.data_ref() {
                self.bytes.fetch_add(d.len() as u64, Ordering::Relaxed);
            }
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A label value escaped for the text format (`\`, `"` and newline).
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Text of one exposition: HELP/TYPE once per family, then its samples.
#[derive(Default)]
pub struct Text(String);

impl Text {
    /// Starts a family.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    /// One sample; `labels` are (name, unescaped value).
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape_label(val));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {v}");
    }

    /// A family with one unlabelled sample.
    pub fn single(&mut self, name: &str, kind: &str, help: &str, v: impl std::fmt::Display) {
        self.family(name, kind, help);
        self.sample(name, &[], v);
    }

    pub fn finish(self) -> String {
        self.0
    }
}

/// A float as the text format writes it (`+Inf`, integers without a point).
fn float(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.is_nan() {
        "NaN".into()
    } else {
        format!("{v}")
    }
}

fn unix_secs(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

async fn dataset(c: &mut granary_app::Client, uri: &str) -> Result<bytes::Bytes, String> {
    let n = Name::from_uri(uri).map_err(|e| e.to_string())?;
    c.dataset(&n).await.map_err(|e| e.to_string())
}

struct Forwarder {
    general: granary_mgmt::GeneralStatus,
    cs: granary_mgmt::CsInfo,
    faces: Vec<granary_mgmt::FaceStatus>,
}

async fn forwarder(node: &State) -> Result<Forwarder, String> {
    use granary_mgmt::{decode_dataset, CsInfo, FaceStatus, GeneralStatus, TlvElement};
    let mut c = granary_app::Client::connect(&node.socket)
        .await
        .map_err(|e| e.to_string())?;
    let general = GeneralStatus::decode(&dataset(&mut c, "/localhost/nfd/status/general").await?)
        .map_err(|e| e.to_string())?;
    let cs = CsInfo::decode(&dataset(&mut c, "/localhost/nfd/cs/info").await?)
        .map_err(|e| e.to_string())?;
    let faces = decode_dataset::<FaceStatus>(&dataset(&mut c, "/localhost/nfd/faces/list").await?)
        .map_err(|e| e.to_string())?;
    Ok(Forwarder { general, cs, faces })
}

fn write_forwarder(t: &mut Text, f: &Forwarder) {
    let g = &f.general;
    t.single(
        "granary_forwarder_start_time_seconds",
        "gauge",
        "When the forwarder started, seconds since the Unix epoch.",
        float(g.start_timestamp as f64 / 1000.0),
    );
    for (name, help, v) in [
        (
            "granary_forwarder_in_interests_total",
            "Interests received by the forwarder.",
            g.n_in_interests,
        ),
        (
            "granary_forwarder_out_interests_total",
            "Interests sent by the forwarder.",
            g.n_out_interests,
        ),
        (
            "granary_forwarder_in_data_total",
            "Data packets received by the forwarder.",
            g.n_in_data,
        ),
        (
            "granary_forwarder_out_data_total",
            "Data packets sent by the forwarder.",
            g.n_out_data,
        ),
        (
            "granary_forwarder_in_nacks_total",
            "Nacks received by the forwarder.",
            g.n_in_nacks,
        ),
        (
            "granary_forwarder_out_nacks_total",
            "Nacks sent by the forwarder.",
            g.n_out_nacks,
        ),
        (
            "granary_forwarder_satisfied_interests_total",
            "PIT entries satisfied by a Data packet.",
            g.n_satisfied_interests,
        ),
        (
            "granary_forwarder_unsatisfied_interests_total",
            "PIT entries that expired unsatisfied.",
            g.n_unsatisfied_interests,
        ),
        (
            "granary_forwarder_cs_hits_total",
            "Interests answered from the content store.",
            f.cs.n_hits,
        ),
        (
            "granary_forwarder_cs_misses_total",
            "Interests the content store could not answer.",
            f.cs.n_misses,
        ),
    ] {
        t.single(name, "counter", help, v);
    }
    for (name, help, v) in [
        (
            "granary_forwarder_pit_entries",
            "Entries in the pending Interest table.",
            g.n_pit_entries,
        ),
        (
            "granary_forwarder_fib_entries",
            "Entries in the forwarding information base.",
            g.n_fib_entries,
        ),
        (
            "granary_forwarder_cs_entries",
            "Data packets in the content store.",
            g.n_cs_entries,
        ),
        (
            "granary_forwarder_cs_capacity",
            "Most Data packets the content store holds.",
            f.cs.capacity,
        ),
        (
            "granary_forwarder_name_tree_entries",
            "Entries in the name tree.",
            g.n_name_tree_entries,
        ),
        (
            "granary_forwarder_measurements_entries",
            "Entries in the measurements table.",
            g.n_measurements_entries,
        ),
        (
            "granary_forwarder_faces",
            "Faces open.",
            f.faces.len() as u64,
        ),
    ] {
        t.single(name, "gauge", help, v);
    }

    // Per face, by packet type and direction.
    let labels = |x: &granary_mgmt::FaceStatus| {
        let scope = if x.face_scope == granary_mgmt::values::face_scope::LOCAL {
            "local"
        } else {
            "non-local"
        };
        (x.face_id.to_string(), x.uri.clone(), scope)
    };
    for (dir, what) in [("in", "received"), ("out", "sent")] {
        let name = format!("granary_face_{dir}_packets_total");
        t.family(
            &name,
            "counter",
            &format!("Packets {what} on a face, by type (interest, data, nack)."),
        );
        for x in &f.faces {
            let (id, remote, scope) = labels(x);
            let v = if dir == "in" {
                [x.n_in_interests, x.n_in_data, x.n_in_nacks]
            } else {
                [x.n_out_interests, x.n_out_data, x.n_out_nacks]
            };
            for (ty, n) in ["interest", "data", "nack"].into_iter().zip(v) {
                t.sample(
                    &name,
                    &[
                        ("face", &id),
                        ("remote", &remote),
                        ("scope", scope),
                        ("type", ty),
                    ],
                    n,
                );
            }
        }
        let name = format!("granary_face_{dir}_bytes_total");
        t.family(&name, "counter", &format!("Bytes {what} on a face."));
        for x in &f.faces {
            let (id, remote, scope) = labels(x);
            let n = if dir == "in" {
                x.n_in_bytes
            } else {
                x.n_out_bytes
            };
            t.sample(
                &name,
                &[("face", &id), ("remote", &remote), ("scope", scope)],
                n,
            );
        }
    }
    // Granary's extensions to FaceStatus, absent (zero) on most faces.
    type Extension = fn(&granary_mgmt::FaceStatus) -> Option<u64>;
    let extensions: [(&str, &str, Extension); 2] = [
        (
            "granary_face_out_congestion_marks_total",
            "Data a face sent with a congestion mark (NFD's rule over its send queue).",
            |x| x.n_out_congestion_marks,
        ),
        (
            "granary_face_out_queue_drops_total",
            "Packets a face dropped because its send queue was full.",
            |x| x.n_out_queue_drops,
        ),
    ];
    for (name, help, value) in extensions {
        t.family(name, "counter", help);
        for x in &f.faces {
            let (id, remote, scope) = labels(x);
            t.sample(
                name,
                &[("face", &id), ("remote", &remote), ("scope", scope)],
                value(x).unwrap_or(0),
            );
        }
    }
}

fn write_requests(t: &mut Text, m: &Metrics) {
    let (count, latency) = match m.requests.lock() {
        Ok(r) => (r.count.clone(), r.latency.clone()),
        Err(_) => Default::default(),
    };
    t.single(
        "granary_gateway_start_time_seconds",
        "gauge",
        "When the HTTP gateway started, seconds since the Unix epoch.",
        float(unix_secs(m.started)),
    );
    t.single(
        "granary_gateway_requests_in_flight",
        "gauge",
        "HTTP requests being handled (to their response head).",
        m.in_flight.load(Ordering::Relaxed).max(0),
    );
    t.family(
        "granary_gateway_requests_total",
        "counter",
        "HTTP requests answered, by route template, method and status.",
    );
    for ((route, method, status), n) in &count {
        t.sample(
            "granary_gateway_requests_total",
            &[
                ("route", route),
                ("method", method),
                ("status", &status.to_string()),
            ],
            n,
        );
    }
    let sent: Vec<(String, u64)> = match m.bytes.lock() {
        Ok(b) => b
            .iter()
            .map(|(r, n)| (r.clone(), n.load(Ordering::Relaxed)))
            .collect(),
        Err(_) => Vec::new(),
    };
    t.family(
        "granary_gateway_response_bytes_total",
        "counter",
        "Bytes of response bodies handed to the connection, by route template.",
    );
    for (route, n) in &sent {
        t.sample(
            "granary_gateway_response_bytes_total",
            &[("route", route)],
            n,
        );
    }
    let name = "granary_gateway_request_duration_seconds";
    t.family(
        name,
        "histogram",
        "Time from a request to its response head, by route template and method.",
    );
    for ((route, method), h) in &latency {
        let mut cum = 0;
        for (b, n) in BUCKETS.iter().zip(h.buckets) {
            cum += n;
            t.sample(
                &format!("{name}_bucket"),
                &[("route", route), ("method", method), ("le", &float(*b))],
                cum,
            );
        }
        t.sample(
            &format!("{name}_bucket"),
            &[("route", route), ("method", method), ("le", "+Inf")],
            h.count,
        );
        t.sample(
            &format!("{name}_sum"),
            &[("route", route), ("method", method)],
            float(h.sum),
        );
        t.sample(
            &format!("{name}_count"),
            &[("route", route), ("method", method)],
            h.count,
        );
    }
}

/// The whole exposition.
pub async fn render(node: &State, m: &Metrics) -> String {
    let mut t = Text::default();
    let fwd = forwarder(node).await;
    t.single(
        "granary_forwarder_up",
        "gauge",
        "1 when the gateway could read the forwarder's status datasets for this scrape.",
        u8::from(fwd.is_ok()),
    );
    match &fwd {
        Ok(f) => write_forwarder(&mut t, f),
        Err(e) => tracing::debug!("/metrics: forwarder status: {e}"),
    }
    let repo = m.repo_usage(node.data_dir.join("repo")).await;
    t.single(
        "granary_repository_versions",
        "gauge",
        "File versions held by the node's repository.",
        repo.versions,
    );
    t.single(
        "granary_repository_bytes",
        "gauge",
        "Bytes of the file versions held by the node's repository.",
        repo.bytes,
    );
    if let Some(cat) = &node.catalog {
        if let Some(n) = node.shared.catalog_len(cat).await {
            t.single(
                "granary_catalog_records",
                "gauge",
                "Records (file versions) in the node's science catalog.",
                n,
            );
        }
    }
    let reads = &node.shared.local_reads;
    let name = "granary_gateway_data_local_reads_total";
    t.family(
        name,
        "counter",
        "Small /data bodies read from the node's repository, by where: on the async \
         worker (lookup and manifest cached, bytes in the page cache) or on a blocking \
         thread.",
    );
    for (thread, n) in [("worker", &reads.worker), ("blocking", &reads.blocking)] {
        t.sample(name, &[("thread", thread)], n.load(Ordering::Relaxed));
    }
    write_requests(&mut t, m);
    t.finish()
}

/// `GET /metrics`.
pub async fn serve(St(node): St<State>, Extension(m): Extension<Arc<Metrics>>) -> Response {
    let body = render(&node, &m).await;
    (
        [
            (header::CONTENT_TYPE, CONTENT_TYPE),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label("x\ny"), "x\\ny");
        let mut t = Text::default();
        t.family("x_total", "counter", "Help with \\ and\nnewline.");
        t.sample("x_total", &[("remote", "ws://[::1]:80/\"q\"")], 3);
        assert_eq!(
            t.finish(),
            "# HELP x_total Help with \\\\ and\\nnewline.\n# TYPE x_total counter\n\
             x_total{remote=\"ws://[::1]:80/\\\"q\\\"\"} 3\n"
        );
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        m.observe("/a", "GET", 200, 0.0005);
        m.observe("/a", "GET", 404, 0.3);
        m.observe("/a", "GET", 200, 100.0);
        let mut t = Text::default();
        write_requests(&mut t, &m);
        let s = t.finish();
        let line = |le: &str| {
            let p = format!(
                "granary_gateway_request_duration_seconds_bucket{{route=\"/a\",method=\"GET\",le=\"{le}\"}} "
            );
            s.lines()
                .find_map(|l| l.strip_prefix(&p))
                .unwrap_or_else(|| panic!("no bucket {le} in {s}"))
                .to_string()
        };
        assert_eq!(line("0.001"), "1");
        assert_eq!(line("0.25"), "1");
        assert_eq!(line("0.5"), "2");
        assert_eq!(line("30"), "2");
        assert_eq!(line("+Inf"), "3");
        assert!(s.contains(
            "granary_gateway_requests_total{route=\"/a\",method=\"GET\",status=\"404\"} 1\n"
        ));
        assert!(s.contains(
            "granary_gateway_request_duration_seconds_count{route=\"/a\",method=\"GET\"} 3\n"
        ));
    }
}
