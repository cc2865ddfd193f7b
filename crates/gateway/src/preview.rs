//! `GET /api/preview/<name>[?variable=V&time=T&level=L&version=N&format=png|json]`:
//! a quick-look picture of one 2-D lat/lon field of a catalogued netCDF file
//! (`granary_science::preview` decodes and draws it); without `variable`, the JSON
//! list of the variables that can be drawn. The bytes come by `/data`'s one route: a
//! version the node's repository holds is read from its file, every segment checked
//! against the signed manifest (`local::read`); any other over NDN (`RemoteFile`), so
//! only the ranges the decoder asks for are read, never the whole file. Each answer is
//! kept in memory (bounded by bytes, least recently used out first), keyed by the
//! version's manifest digest and the request: a version never changes, so the ETag is
//! that key's digest and an explicit `version` gets an immutable `Cache-Control`.
//!
//! With `point=LAT,LON` or `bbox=W,S,E,N`, the answer is the variable's time series
//! over the whole time axis instead (`preview::series`: the nearest grid point, or the
//! cos-latitude weighted mean over the box), as a line plot or JSON; the name may then
//! be a dataset id (`CMIP6.….vYYYYMMDD`, grouped as the ESGF search and `/api/zarr`
//! group it), whose files' series are read in turn and concatenated.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State as St;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use granary_packet::types::COMP_VERSION;
use granary_packet::Component;
use granary_science::netcdf::{Limits, ReadAt};
use granary_science::preview::{self, Place, PreviewError, Select, Series, SeriesSelect};

use crate::api::{ndn_name, with_catalog};
use crate::query::pairs;
use crate::{error, State};

/// Bytes of answers kept in memory.
const CACHE_BYTES: usize = 64 << 20;
/// Pictures decoded at once (each may hold up to 16 Mi values).
const DECODES: usize = 2;
/// Smallest block read from the file and kept while one answer is made.
const MIN_BLOCK: u64 = 64 << 10;
/// Blocks kept while one answer is made.
const BLOCKS_KEPT: usize = 32;
/// Longest wait for one remote read.
const REMOTE_READ: Duration = Duration::from_secs(30);

/// The answers made, bounded by bytes, and their hit and miss counts.
pub(crate) struct Cache {
    inner: Mutex<Inner>,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    /// Decodes at once ([`DECODES`]); a permit goes with its decode to the
    /// blocking thread, so a request given up (deadline, client gone) still
    /// counts until its decode ends.
    slots: Arc<tokio::sync::Semaphore>,
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, (Bytes, &'static str, u64)>,
    bytes: usize,
    tick: u64,
}

impl Default for Cache {
    fn default() -> Cache {
        Cache {
            inner: Mutex::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            slots: Arc::new(tokio::sync::Semaphore::new(DECODES)),
        }
    }
}

impl Cache {
    fn get(&self, key: &str) -> Option<(Bytes, &'static str)> {
        let mut g = self.inner.lock().ok()?;
        g.tick += 1;
        let t = g.tick;
        let e = g.map.get_mut(key)?;
        e.2 = t;
        Some((e.0.clone(), e.1))
    }

    fn put(&self, key: String, body: Bytes, ctype: &'static str) {
        if body.len() > CACHE_BYTES / 4 {
            return;
        }
        let Ok(mut g) = self.inner.lock() else { return };
        g.tick += 1;
        let t = g.tick;
        g.bytes += body.len();
        if let Some(old) = g.map.insert(key, (body, ctype, t)) {
            g.bytes -= old.0.len();
        }
        while g.bytes > CACHE_BYTES {
            let Some(k) = g
                .map
                .iter()
                .min_by_key(|(_, v)| v.2)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(v) = g.map.remove(&k) {
                g.bytes -= v.0.len();
            }
        }
    }
}

/// A byte source read block by block, the last blocks kept: the decoder's many
/// small header reads cost one verified segment read (or one NDN fetch) each block.
struct Blocks {
    len: u64,
    block: u64,
    fetch: Box<dyn Fn(u64, u64) -> std::io::Result<Vec<u8>> + Send + Sync>,
    kept: Mutex<Vec<(u64, Arc<Vec<u8>>)>>,
}

impl Blocks {
    fn block(&self, b: u64) -> std::io::Result<Arc<Vec<u8>>> {
        if let Some(x) = self
            .kept
            .lock()
            .ok()
            .and_then(|k| k.iter().find(|(n, _)| *n == b).map(|(_, v)| v.clone()))
        {
            return Ok(x);
        }
        let lo = b * self.block;
        let hi = (lo + self.block).min(self.len);
        let v = Arc::new((self.fetch)(lo, hi)?);
        if v.len() as u64 != hi - lo {
            return Err(std::io::Error::other(format!(
                "read {} bytes at {lo}, expected {}",
                v.len(),
                hi - lo
            )));
        }
        if let Ok(mut k) = self.kept.lock() {
            if k.len() >= BLOCKS_KEPT {
                k.remove(0);
            }
            k.push((b, v.clone()));
        }
        Ok(v)
    }
}

impl ReadAt for Blocks {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let end = offset
            .checked_add(len as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("range {offset}+{len} is past the end ({} bytes)", self.len),
                )
            })?;
        if len == 0 {
            return Ok(Vec::new());
        }
        // A large read (a whole chunk) is read as it is, not kept.
        if len as u64 > 4 * self.block {
            let v = (self.fetch)(offset, end)?;
            if v.len() != len {
                return Err(std::io::Error::other("short read"));
            }
            return Ok(v);
        }
        let mut out = Vec::with_capacity(len);
        let mut pos = offset;
        while pos < end {
            let b = pos / self.block;
            let blk = self.block(b)?;
            let from = (pos - b * self.block) as usize;
            let to = ((end - b * self.block) as usize).min(blk.len());
            out.extend_from_slice(&blk[from..to]);
            pos = b * self.block + to as u64;
        }
        Ok(out)
    }
}

/// What the request asks for.
struct Ask {
    sel: Option<Select>,
    /// A time series at a point or over a box instead of a map.
    place: Option<Place>,
    json: bool,
    version: Option<u64>,
}

/// Numbers separated by commas, exactly `n` of them.
fn numbers(k: &str, v: &str, n: usize, form: &str) -> Result<Vec<f64>, String> {
    let x: Vec<f64> = v
        .split(',')
        .map(|p| p.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("{k}={v:?}: expected {form}"))?;
    if x.len() != n {
        return Err(format!("{k}={v:?}: expected {form}"));
    }
    Ok(x)
}

fn parse(uri: &Uri) -> Result<Ask, String> {
    let mut sel = Select::default();
    let mut variable = None;
    let mut json = false;
    let mut version = None;
    let mut place = None;
    for (k, v) in pairs(uri.query())? {
        match k.as_str() {
            "point" | "bbox" if place.is_some() => {
                return Err("give one of point=LAT,LON and bbox=W,S,E,N".into())
            }
            "point" => {
                let x = numbers("point", &v, 2, "LAT,LON in degrees")?;
                place = Some(Place::point(x[0], x[1]).map_err(|e| format!("point: {e}"))?);
            }
            "bbox" => {
                let x = numbers("bbox", &v, 4, "W,S,E,N in degrees")?;
                place =
                    Some(Place::area(x[0], x[1], x[2], x[3]).map_err(|e| format!("bbox: {e}"))?);
            }
            "variable" if !v.is_empty() => variable = Some(v),
            "time" if !v.is_empty() => match v.parse::<u64>() {
                Ok(t) => sel.time = Some(t),
                Err(_)
                    if v.len() <= 32 && v.starts_with(|c: char| c.is_ascii_digit() || c == '-') =>
                {
                    sel.time_iso = Some(v)
                }
                Err(_) => {
                    return Err(format!(
                        "time={v:?}: expected an index or a date (YYYY-MM-DD…)"
                    ))
                }
            },
            "level" if !v.is_empty() => {
                sel.level = Some(
                    v.parse()
                        .map_err(|_| format!("level={v:?}: expected an index"))?,
                )
            }
            "version" if !v.is_empty() => {
                let v = v.strip_prefix("v=").unwrap_or(&v);
                version = Some(
                    v.parse()
                        .map_err(|_| format!("version={v:?}: expected a number"))?,
                )
            }
            "format" => match v.as_str() {
                "png" | "" => json = false,
                "json" => json = true,
                _ => return Err(format!("format={v:?}: expected png or json")),
            },
            "variable" | "time" | "level" | "version" => {}
            other => return Err(format!("unknown parameter {other:?}")),
        }
    }
    if place.is_some() {
        if variable.is_none() {
            return Err("a series (point= or bbox=) needs variable=".into());
        }
        if sel.time.is_some() || sel.time_iso.is_some() {
            return Err("a series (point= or bbox=) covers the whole time axis: no time=".into());
        }
    }
    Ok(Ask {
        sel: variable.map(|variable| Select { variable, ..sel }),
        place,
        json,
        version,
    })
}

/// 304 with the ETag when `If-None-Match` names `etag` (weak or strong).
fn not_modified(headers: &HeaderMap, etag: &str) -> Option<Response> {
    let inm = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|t| t.trim().trim_start_matches("W/") == etag)
        });
    if !inm {
        return None;
    }
    let mut r = StatusCode::NOT_MODIFIED.into_response();
    if let Ok(v) = HeaderValue::from_str(etag) {
        r.headers_mut().insert(header::ETAG, v);
    }
    Some(r)
}

fn answer(body: Bytes, ctype: &'static str, etag: &str, immutable: bool, hit: bool) -> Response {
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if immutable {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        }),
    );
    h.insert(
        "x-preview-cache",
        HeaderValue::from_static(if hit { "hit" } else { "miss" }),
    );
    (StatusCode::OK, h, body).into_response()
}

fn status_of(e: &PreviewError) -> StatusCode {
    match e {
        PreviewError::NoVariable(_) => StatusCode::NOT_FOUND,
        PreviewError::BadRequest(_) => StatusCode::BAD_REQUEST,
        PreviewError::NotAvailable(_) => StatusCode::UNPROCESSABLE_ENTITY,
    }
}

fn preview_error(e: PreviewError) -> Response {
    error(status_of(&e), e.to_string())
}

pub async fn preview(St(node): St<State>, headers: HeaderMap, uri: Uri) -> Response {
    let raw = uri.path().strip_prefix("/api/preview").unwrap_or_default();
    let name = match ndn_name(raw) {
        Ok(n) => n,
        Err(r) => return r,
    };
    if name.last().is_some_and(|c| c.typ == COMP_VERSION) {
        return error(
            StatusCode::BAD_REQUEST,
            "give the version as ?version=, not in the name",
        );
    }
    let ask = match parse(&uri) {
        Ok(a) => a,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    if let Some(id) = dataset_id(raw) {
        if ask.place.is_some() {
            return dataset_series(&node, &headers, &id, ask).await;
        }
        return error(
            StatusCode::BAD_REQUEST,
            "a dataset id gives a time series only (point=LAT,LON or bbox=W,S,E,N); a map needs a file name",
        );
    }
    let n = name.to_string();
    let version = ask.version;
    let rec = match with_catalog(&node, move |c| Ok(c.get(&n, version)?)).await {
        Ok(Some(r)) => r,
        Ok(None) => {
            return error(
                StatusCode::NOT_FOUND,
                match version {
                    Some(v) => format!("{name} version {v} is not in the catalog"),
                    None => format!("{name} is not in the catalog"),
                },
            )
        }
        Err(r) => return r,
    };
    let what = match &ask.sel {
        None => "list".to_string(),
        Some(s) => format!(
            "{}|{:?}|{:?}|{:?}|{}|{:?}",
            s.variable, s.time, s.time_iso, s.level, ask.json, ask.place
        ),
    };
    let key = format!(
        "{}|{}|{}",
        rec.manifest_digest.clone().unwrap_or_default(),
        rec.version,
        what
    );
    let etag = format!(
        "\"p-{}\"",
        &hex::encode(granary_packet::sha256(
            format!("{}|{key}", rec.name).as_bytes()
        ))[..32]
    );
    let immutable = ask.version.is_some();
    if let Some(r) = not_modified(&headers, &etag) {
        return r;
    }
    let cache = &node.shared.previews;
    if let Some((body, ctype)) = cache.get(&key) {
        cache.hits.fetch_add(1, Ordering::Relaxed);
        return answer(body, ctype, &etag, immutable, true);
    }
    let slot = match cache.slots.clone().acquire_owned().await {
        Ok(s) => s,
        Err(_) => return error(StatusCode::SERVICE_UNAVAILABLE, "shutting down"),
    };
    // Made meanwhile by another request?
    if let Some((body, ctype)) = cache.get(&key) {
        cache.hits.fetch_add(1, Ordering::Relaxed);
        return answer(body, ctype, &etag, immutable, true);
    }
    cache.misses.fetch_add(1, Ordering::Relaxed);
    let target = name.append(&Component::version(rec.version));
    let source = match open_source(&node, &target).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let ask_sel = ask.sel.clone();
    let place = ask.place;
    let json = ask.json;
    let made =
        tokio::task::spawn_blocking(move || -> Result<(Bytes, &'static str), PreviewError> {
            let _slot = slot;
            let limits = Limits {
                timeout: Duration::from_secs(60),
                ..Limits::default()
            };
            match (ask_sel, place) {
                (Some(sel), Some(place)) => {
                    let s = preview::series(source, &series_select(sel, place), &limits)?;
                    series_body(&s, json)
                }
                (None, _) => {
                    let l = preview::list(source, &limits)?;
                    let v = serde_json::to_vec(&l)
                        .map_err(|e| PreviewError::NotAvailable(e.to_string()))?;
                    Ok((Bytes::from(v), "application/json"))
                }
                (Some(sel), None) => {
                    let f = preview::field(source, &sel, &limits)?;
                    if json {
                        let v = serde_json::to_vec(&f)
                            .map_err(|e| PreviewError::NotAvailable(e.to_string()))?;
                        Ok((Bytes::from(v), "application/json"))
                    } else {
                        let png = preview::render(&f)
                            .map_err(|e| PreviewError::NotAvailable(e.to_string()))?;
                        Ok((Bytes::from(png), "image/png"))
                    }
                }
            }
        })
        .await;
    match made {
        Ok(Ok((body, ctype))) => {
            cache.put(key, body.clone(), ctype);
            answer(body, ctype, &etag, immutable, false)
        }
        Ok(Err(e)) => preview_error(e),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("preview task failed: {e}"),
        ),
    }
}

fn series_select(sel: Select, place: Place) -> SeriesSelect {
    SeriesSelect {
        variable: sel.variable,
        level: sel.level,
        place,
        max_values: preview::MAX_SERIES_VALUES,
    }
}

fn series_body(s: &Series, json: bool) -> Result<(Bytes, &'static str), PreviewError> {
    if json {
        let v = serde_json::to_vec(s).map_err(|e| PreviewError::NotAvailable(e.to_string()))?;
        Ok((Bytes::from(v), "application/json"))
    } else {
        let png =
            preview::render_series(s).map_err(|e| PreviewError::NotAvailable(e.to_string()))?;
        Ok((Bytes::from(png), "image/png"))
    }
}

/// Most files in one dataset's series.
const MAX_SERIES_FILES: usize = 2000;

/// The dataset id a preview path names (`CMIP6.….vYYYYMMDD`: one component, a DRS
/// version last), if it is one.
fn dataset_id(raw: &str) -> Option<String> {
    let id = raw.trim_start_matches('/');
    let version = id.rsplit_once('.')?.1;
    let digits = version.strip_prefix('v')?;
    (!id.contains('/')
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && crate::esgf::dataset_filter(id).is_some())
    .then(|| id.to_string())
}

/// A dataset's series: each file's (in name order, which is time order) read as a
/// file's is, concatenated; the values cap holds for the dataset as a whole.
async fn dataset_series(node: &State, headers: &HeaderMap, id: &str, ask: Ask) -> Response {
    let (Some(sel), Some(place)) = (ask.sel.clone(), ask.place) else {
        return error(
            StatusCode::BAD_REQUEST,
            "a series needs variable= and point= or bbox=",
        );
    };
    let files = match crate::zarr::dataset_records(node, id).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    if files.len() > MAX_SERIES_FILES {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "the dataset has {} files, more than the {MAX_SERIES_FILES} a series reads",
                files.len()
            ),
        );
    }
    let versions: Vec<String> = files
        .iter()
        .map(|r| {
            format!(
                "{}@{}:{}",
                r.name,
                r.version,
                r.manifest_digest.clone().unwrap_or_default()
            )
        })
        .collect();
    let key = format!(
        "dataset|{id}|{}|{:?}|{:?}|{}|{}",
        sel.variable,
        sel.level,
        place,
        ask.json,
        versions.join(",")
    );
    let etag = format!(
        "\"p-{}\"",
        &hex::encode(granary_packet::sha256(key.as_bytes()))[..32]
    );
    if let Some(r) = not_modified(headers, &etag) {
        return r;
    }
    let cache = &node.shared.previews;
    if let Some((body, ctype)) = cache.get(&key) {
        cache.hits.fetch_add(1, Ordering::Relaxed);
        return answer(body, ctype, &etag, false, true);
    }
    let slot = match cache.slots.clone().acquire_owned().await {
        Ok(s) => Arc::new(s),
        Err(_) => return error(StatusCode::SERVICE_UNAVAILABLE, "shutting down"),
    };
    cache.misses.fetch_add(1, Ordering::Relaxed);
    let mut all: Option<Series> = None;
    let mut left = preview::MAX_SERIES_VALUES;
    for r in &files {
        if let Err(stop) = crate::budget::Budget::current().check() {
            return error(StatusCode::SERVICE_UNAVAILABLE, stop.to_string());
        }
        let Ok(name) = granary_packet::Name::from_uri(&r.name) else {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("bad name in the catalog: {}", r.name),
            );
        };
        let source = match open_source(node, &name.append(&Component::version(r.version))).await {
            Ok(s) => s,
            Err(resp) => return resp,
        };
        let mut ss = series_select(sel.clone(), place);
        ss.max_values = left;
        let slot = slot.clone();
        let made = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let limits = Limits {
                timeout: Duration::from_secs(60),
                ..Limits::default()
            };
            preview::series(source, &ss, &limits)
        })
        .await;
        let s = match made {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return error(status_of(&e), format!("{}: {e}", r.name));
            }
            Err(e) => {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("preview task failed: {e}"),
                )
            }
        };
        left = left.saturating_sub((s.values.len() as u64).saturating_mul(s.points.max(1)));
        match &mut all {
            None => all = Some(s),
            Some(a) => {
                if a.points != s.points || a.grid_point != s.grid_point {
                    return error(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        format!(
                            "not available: {} is on another grid than the dataset's first file",
                            r.name
                        ),
                    );
                }
                a.dates.extend(s.dates);
                a.values.extend(s.values);
            }
        }
    }
    let Some(s) = all else {
        return error(StatusCode::NOT_FOUND, format!("no dataset {id}"));
    };
    if s.values.len() as u64 > preview::MAX_STEPS {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "{} time steps: more than the {} a series holds",
                s.values.len(),
                preview::MAX_STEPS
            ),
        );
    }
    match series_body(&s, ask.json) {
        Ok((body, ctype)) => {
            cache.put(key, body.clone(), ctype);
            answer(body, ctype, &etag, false, false)
        }
        Err(e) => preview_error(e),
    }
}

/// The bytes of `target` (a versioned name) by `/data`'s route: the repository's
/// verified copy, else over NDN.
pub(crate) async fn open_source(
    node: &State,
    target: &granary_packet::Name,
) -> Result<Arc<dyn ReadAt>, Response> {
    let (trust, generation) = match node.shared.anchors.get() {
        Ok(t) => t,
        Err(e) => return Err(crate::data::anchors_failed(e)),
    };
    let shared = node.shared.clone();
    let (t2, tr2) = (target.clone(), trust.clone());
    let local =
        match tokio::task::spawn_blocking(move || shared.open_local(&tr2, generation, &t2)).await {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => return Err(crate::unavailable(e)),
            Err(e) => return Err(crate::unavailable(format!("the read task failed: {e}"))),
        };
    if let Some(l) = local {
        let size = l.info.map.file_size().unwrap_or(0);
        let block = l.info.map.segment_size().max(MIN_BLOCK);
        let pool = node.shared.pool.clone();
        let fetch = move |a: u64, b: u64| -> std::io::Result<Vec<u8>> {
            let file = l
                .entry
                .file
                .as_ref()
                .ok_or_else(|| std::io::Error::other("the local copy is not open"))?;
            let mut out = Vec::with_capacity((b - a) as usize);
            crate::local::read(&pool, &file.file, &l.info, a, b, |x| {
                out.extend_from_slice(&x);
                true
            })
            .map_err(std::io::Error::other)?;
            Ok(out)
        };
        return Ok(Arc::new(Blocks {
            len: size,
            block,
            fetch: Box::new(fetch),
            kept: Mutex::default(),
        }));
    }
    // Every caller found this version in the catalog: it exists, so a fetch
    // that fails now (no route yet, its holder down or slow) is temporary, a
    // 503 with Retry-After; bytes that do not verify are the holder's fault.
    let f = match crate::data::open_remote(node, target, trust).await? {
        Ok(f) => f,
        Err(e @ granary_transfer::Error::Verify(_)) => {
            return Err(error(StatusCode::BAD_GATEWAY, e.to_string()))
        }
        Err(e) => {
            return Err(crate::unavailable(format!(
                "{target} is in the catalog but cannot be fetched now ({e}); try again shortly"
            )))
        }
    };
    let st = f.stat();
    let Some(size) = st.size else {
        return Err(error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "not available: the file has no manifest giving its size",
        ));
    };
    let handle = tokio::runtime::Handle::current();
    let f = Mutex::new(f);
    let fetch = move |a: u64, b: u64| -> std::io::Result<Vec<u8>> {
        let mut g = f
            .lock()
            .map_err(|_| std::io::Error::other("remote reader poisoned"))?;
        handle
            .block_on(async { tokio::time::timeout(REMOTE_READ, g.read_at(a, b - a)).await })
            .map_err(|_| std::io::Error::other(format!("no answer within {REMOTE_READ:?}")))?
            .map_err(|e| std::io::Error::other(e.to_string()))
    };
    Ok(Arc::new(Blocks {
        len: size,
        block: st.segment_size.max(MIN_BLOCK),
        fetch: Box::new(fetch),
        kept: Mutex::default(),
    }))
}
