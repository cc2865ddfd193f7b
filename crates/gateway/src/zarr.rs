//! Virtual Zarr per dataset: `GET /api/zarr/<dataset id>` answers a kerchunk
//! reference set (version 1) over the dataset's files, concatenated along `time`, every
//! chunk a byte range of `/data/<name>?version=V` (so every read is a verified range
//! read). xarray opens it with the `reference://` filesystem of fsspec.
//!
//! A dataset is grouped as the ESGF search groups it (`esgf.rs`): the files sharing a
//! parent name and a DRS `version` facet; its id is the instance id
//! (`CMIP6.<activity>.….<grid>.vYYYYMMDD`). The chunk index of each file was computed
//! at publication and kept in the catalog (`chunk_refs`). What the slice does not
//! concatenate (chunking that differs across files, a time length that is not a
//! multiple of the time chunk except in the last file, a variable without an index)
//! is a 422 `{"error": "not available: …"}`, the same text in `X-Granary-Refused`
//! (percent-encoded where it is not printable ASCII) so that a HEAD, as the page asks,
//! carries the reason too.

use axum::extract::{Path as AxPath, State as St};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use granary_catalog::{Query, Record, MAX_LIMIT};
use serde_json::{json, Map, Value};

use crate::api::{download_path, with_catalog};
use crate::wget::base_url;
use crate::{error, State};

/// The header of a 422 carrying its reason: the body's `error` text.
const REFUSED: HeaderName = HeaderName::from_static("x-granary-refused");

/// Percent-encoded in [`REFUSED`]: controls, `%` itself and (always) every byte
/// outside ASCII, so that `decodeURIComponent` gives the text back.
const REFUSED_SET: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b'%');

fn unavailable(msg: impl std::fmt::Display) -> Response {
    let text = format!("not available: {msg}");
    let value = refused_value(&text);
    let mut r = error(StatusCode::UNPROCESSABLE_ENTITY, text);
    r.headers_mut().insert(REFUSED, value);
    r
}

/// `text` as the value of [`REFUSED`].
fn refused_value(text: &str) -> HeaderValue {
    let enc = percent_encoding::utf8_percent_encode(text, REFUSED_SET).to_string();
    HeaderValue::from_str(&enc).unwrap_or(HeaderValue::from_static("not available"))
}

/// The files of dataset `id` (the ESGF search's grouping: same parent name, DRS
/// `version` facet; per name the newest NDN version carrying it), in name order; 400
/// for a malformed id, 404 for none.
pub(crate) async fn dataset_records(node: &State, id: &str) -> Result<Vec<Record>, Response> {
    let Some((prefixes, version)) = crate::esgf::dataset_filter(id) else {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "a dataset id is CMIP6.<activity>.<institution>.<source>.<experiment>.<member>.<table>.<variable>.<grid>.v<YYYYMMDD>",
        ));
    };
    let files = with_catalog(node, move |c| {
        for pre in prefixes {
            let q = Query {
                name_prefix: Some(pre.clone()),
                // An older DRS version's files are older versions of the same
                // names: every version is searched, the DRS version filters.
                latest_only: false,
                limit: MAX_LIMIT,
                offset: 0,
                sort: granary_catalog::Sort::Name,
                filters: [("version".to_string(), vec![version.clone()])]
                    .into_iter()
                    .collect(),
                ..Query::default()
            };
            let p = c.query(&q)?;
            if p.total == 0 {
                continue;
            }
            // Only the files directly under the dataset's directory.
            let mut files: Vec<Record> = p
                .hits
                .into_iter()
                .filter(|r| !r.name[pre.len()..].contains('/'))
                .collect();
            // Per name, the newest NDN version carrying this DRS version.
            files.sort_by(|a, b| a.name.cmp(&b.name).then(b.version.cmp(&a.version)));
            files.dedup_by(|later, first| later.name == first.name);
            return Ok(files);
        }
        Ok(Vec::new())
    })
    .await?;
    if files.is_empty() {
        return Err(error(StatusCode::NOT_FOUND, format!("no dataset {id}")));
    }
    Ok(files)
}

pub async fn refs(St(node): St<State>, headers: HeaderMap, AxPath(id): AxPath<String>) -> Response {
    let id = id.trim_end_matches(".json").to_string();
    let files = match dataset_records(&node, &id).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    let found = with_catalog(&node, move |c| {
        let mut out = Vec::new();
        for r in files {
            let ix = c.chunk_refs(&r.name, r.version)?;
            out.push((r, ix));
        }
        Ok(out)
    })
    .await;
    let files = match found {
        Ok(f) => f,
        Err(r) => return r,
    };
    let base = base_url(&headers);
    let mut parsed = Vec::new();
    for (r, ix) in &files {
        let Some(ix) = ix else {
            return unavailable(format!(
                "no chunk index for {} (published before indexing, or not netCDF)",
                r.name
            ));
        };
        let Ok(v) = serde_json::from_str::<Value>(ix) else {
            return unavailable(format!("unreadable chunk index for {}", r.name));
        };
        let url = format!("{base}{}", download_path(&r.name, r.version));
        parsed.push((url, v));
    }
    match build(&parsed) {
        Ok(v) => Json(v).into_response(),
        Err(msg) => unavailable(msg),
    }
}

fn key(index: &[u64]) -> String {
    index
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

fn indexes(c: &Value) -> Option<(Vec<u64>, u64, u64)> {
    let index: Vec<u64> = serde_json::from_value(c.get("index")?.clone()).ok()?;
    Some((
        index,
        c.get("offset")?.as_u64()?,
        c.get("length")?.as_u64()?,
    ))
}

/// At most this many chunk references in one reference set (one per time step over
/// 100 files of 5 000 steps); a dataset needing more is refused.
pub(crate) const MAX_CHUNK_REFS: usize = 500_000;

fn variable<'a>(ix: &'a Value, name: &str) -> Option<&'a Value> {
    ix.get("variables")
        .and_then(Value::as_array)
        .and_then(|vs| vs.iter().find(|v| v["name"] == name))
}

/// The CF time units and calendar a variable's values are in: its own `units`, or
/// (a bounds variable, `time_bnds`, which CF lets go without) those of the variable
/// whose `bounds` names it.
fn time_units_of(ix: &Value, name: &str) -> Option<(String, String)> {
    let own = variable(ix, name)?;
    let holder = if own["zattrs"].get("units").is_some() {
        own
    } else {
        ix.get("variables")?
            .as_array()?
            .iter()
            .find(|v| v["zattrs"].get("bounds").and_then(Value::as_str) == Some(name))?
    };
    let units = holder["zattrs"].get("units")?.as_str()?.to_string();
    if !units.contains(" since ") {
        return None;
    }
    let calendar = holder["zattrs"]
        .get("calendar")
        .and_then(Value::as_str)
        .unwrap_or("standard")
        .to_string();
    Some((units, calendar))
}

/// `(scale, shift)` turning values in `from` units into `to` units (`v * scale +
/// shift`), both in `calendar`; `None` when either does not parse.
fn reencoding(from: &str, to: &str, calendar: &str) -> Option<(f64, f64)> {
    use granary_science::netcdf::calendar::{Calendar, TimeUnits};
    let cal = Calendar::parse(calendar)?;
    let a = TimeUnits::parse(from, cal).ok()?;
    let b = TimeUnits::parse(to, cal).ok()?;
    let seconds = |u: &TimeUnits| -> Option<i64> {
        let r = u.reference;
        let day = cal.day_number(r.year, r.month, r.day)?;
        Some(
            day * 86_400
                + i64::from(r.hour) * 3600
                + i64::from(r.minute) * 60
                + i64::from(r.second),
        )
    };
    let diff_s = seconds(&a)?.checked_sub(seconds(&b)?)?;
    let to_micros = b.unit_micros as f64;
    let scale = if a.unit_micros == b.unit_micros {
        1.0
    } else {
        a.unit_micros as f64 / to_micros
    };
    Some((scale, diff_s as f64 * 1e6 / to_micros))
}

/// A variable stored whole and unfiltered (one chunk as large as the array, HDF5's
/// contiguous layout or a netCDF-3 fixed variable): `(offset, bytes per step of its
/// first dimension)`. Byte ranges cut it along that dimension at any step.
fn cuttable(za: &Value, chunks: &[(Vec<u64>, u64, u64)], shape: &[u64]) -> Option<(u64, u64)> {
    if !za["compressor"].is_null() || !za["filters"].is_null() {
        return None;
    }
    let c: Vec<u64> = serde_json::from_value(za["chunks"].clone()).ok()?;
    if c != shape || shape.is_empty() {
        return None;
    }
    let [(index, offset, length)] = chunks else {
        return None;
    };
    let item: u64 = za["dtype"].as_str()?.get(2..)?.parse().ok()?;
    let row = shape[1..].iter().try_fold(item, |a, &d| a.checked_mul(d))?;
    (index.iter().all(|&i| i == 0) && row.checked_mul(shape[0]) == Some(*length))
        .then_some((*offset, row))
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// One file's part of a variable concatenated along time.
struct Part<'a> {
    url: &'a str,
    shape: Vec<u64>,
    chunks: Vec<u64>,
    refs: Vec<(Vec<u64>, u64, u64)>,
    cut: Option<(u64, u64)>,
}

/// The time chunk that fits every file, or why there is none. Files whose chunking
/// is the same and whose lengths are multiples of it (but the last) keep their
/// chunks; otherwise contiguous files are cut into steps of the greatest common
/// divisor of their lengths (one step at worst), which chunked files must share.
fn time_chunk(name: &str, parts: &[Part]) -> Result<(u64, bool), String> {
    let first = &parts[0].chunks;
    let c0 = first.first().copied().unwrap_or(1).max(1);
    let n = parts.len();
    let uniform = parts.iter().enumerate().all(|(i, p)| {
        &p.chunks == first && (i + 1 == n || p.shape.first().copied().unwrap_or(0) % c0 == 0)
    });
    if uniform {
        return Ok((c0, false));
    }
    let fixed: Vec<&Part> = parts.iter().filter(|p| p.cut.is_none()).collect();
    let Some(f0) = fixed.first() else {
        let g = parts
            .iter()
            .fold(0, |g, p| gcd(g, p.shape.first().copied().unwrap_or(0)))
            .max(1);
        return Ok((g, true));
    };
    let cc = &f0.chunks;
    if let Some(p) = fixed.iter().find(|p| &p.chunks != cc) {
        return Err(format!(
            "{name}: chunking differs across the dataset's files ({}: chunks {:?}; {}: chunks {cc:?})",
            p.url, p.chunks, f0.url
        ));
    }
    let g = cc.first().copied().unwrap_or(1).max(1);
    if cc.len() != parts[0].shape.len() || cc[1..] != parts[0].shape[1..] {
        return Err(format!(
            "{name}: {} is chunked {cc:?}, which contiguous files cannot be cut to (only along time)",
            f0.url
        ));
    }
    for (i, p) in parts.iter().enumerate() {
        let len = p.shape.first().copied().unwrap_or(0);
        // A chunked file's last chunk is stored whole; a contiguous file has no more
        // bytes than its steps.
        if len % g != 0 && (p.cut.is_some() || i + 1 != n) {
            return Err(format!(
                "{name}: {} has {len} time steps, not a multiple of the time chunk {g} of {}",
                p.url, f0.url
            ));
        }
    }
    Ok((g, true))
}

/// The reference set of files (URL, chunk index) given in time order.
pub(crate) fn build(files: &[(String, Value)]) -> Result<Value, String> {
    let (_, first) = files.first().ok_or("no files")?;
    let mut refs = Map::new();
    refs.insert(
        ".zgroup".into(),
        json!(json!({"zarr_format": 2}).to_string()),
    );
    refs.insert(
        ".zattrs".into(),
        json!(first
            .get("global")
            .cloned()
            .unwrap_or(json!({}))
            .to_string()),
    );
    let vars = first
        .get("variables")
        .and_then(Value::as_array)
        .ok_or("chunk index without variables")?;
    for var in vars {
        let name = var
            .get("name")
            .and_then(Value::as_str)
            .ok_or("unnamed variable")?;
        if let Some(why) = var.get("unavailable").and_then(Value::as_str) {
            return Err(format!(
                "{name}: {}",
                why.trim_start_matches("not available: ")
            ));
        }
        let zarray = var.get("zarray").ok_or(format!("{name}: no .zarray"))?;
        let zattrs = var.get("zattrs").cloned().unwrap_or(json!({}));
        let along_time = zattrs
            .pointer("/_ARRAY_DIMENSIONS/0")
            .and_then(Value::as_str)
            == Some("time");
        let mut shape: Vec<u64> = serde_json::from_value(zarray["shape"].clone())
            .map_err(|_| format!("{name}: bad shape"))?;
        let mut zarray = zarray.clone();
        let files_of: &[(String, Value)] = if along_time { files } else { &files[..1] };
        // A small variable along time (`time`, `time_bnds`) whose values every file's
        // index holds is served inline, concatenated: one read for the whole axis, and
        // any chunking of it in the files. Values in another file's time units are
        // re-encoded in the first file's.
        let first_units = time_units_of(first, name);
        let inline: Option<Vec<f64>> = if along_time {
            files_of.iter().try_fold(Vec::new(), |mut all, (_, ix)| {
                let v = variable(ix, name)?;
                let vals = v.get("values")?.as_array()?;
                let shape: Vec<u64> = serde_json::from_value(v["zarray"]["shape"].clone()).ok()?;
                if vals.len() as u64 != shape.iter().product::<u64>() {
                    return None;
                }
                let (scale, shift) = match (&first_units, time_units_of(ix, name)) {
                    (a, b) if *a == b => (1.0, 0.0),
                    (Some(a), Some(b)) if a.1 == b.1 => reencoding(&b.0, &a.0, &a.1)?,
                    _ => return None,
                };
                for x in vals {
                    let x = x.as_f64()?;
                    all.push(if scale == 1.0 && shift == 0.0 {
                        x
                    } else {
                        x * scale + shift
                    });
                }
                Some(all)
            })
        } else {
            None
        };
        let mut time_len = 0u64;
        let mut parts = Vec::new();
        for (url, ix) in files_of {
            let v = variable(ix, name).ok_or(format!("{name} missing from {url}"))?;
            if let Some(why) = v.get("unavailable").and_then(Value::as_str) {
                return Err(format!(
                    "{name} in {url}: {}",
                    why.trim_start_matches("not available: ")
                ));
            }
            let za = &v["zarray"];
            // Values are concatenated as stored: they must mean the same in every file
            // (but time units, which inline values are re-encoded to).
            for k in ["units", "calendar", "scale_factor", "add_offset"] {
                let reencoded = k == "units" && inline.is_some() && first_units.is_some();
                if v["zattrs"].get(k) != zattrs.get(k) && !reencoded {
                    return Err(format!(
                        "{name}: attribute {k} differs across the dataset's files ({url}: {}; first file: {})",
                        v["zattrs"].get(k).unwrap_or(&Value::Null),
                        zattrs.get(k).unwrap_or(&Value::Null)
                    ));
                }
            }
            let c: Vec<u64> = serde_json::from_value(za["chunks"].clone()).unwrap_or_default();
            let s: Vec<u64> = serde_json::from_value(za["shape"].clone()).unwrap_or_default();
            if s.len() != shape.len() || s.get(1..) != shape.get(1..) {
                return Err(format!(
                    "{name}: shape differs across the dataset's files ({url}: {s:?}; first file: {shape:?})"
                ));
            }
            if inline.is_some() {
                time_len += s.first().copied().unwrap_or(0);
                continue;
            }
            for k in ["dtype", "compressor", "filters", "fill_value"] {
                if za[k] != zarray[k] {
                    return Err(format!(
                        "{name}: {k} differs across the dataset's files ({url})"
                    ));
                }
            }
            let chunk_refs = v["chunks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|ch| indexes(ch).ok_or(format!("{name}: bad chunk entry")))
                .collect::<Result<Vec<_>, _>>()?;
            let cut = cuttable(za, &chunk_refs, &s);
            parts.push(Part {
                url,
                shape: s,
                chunks: c,
                refs: chunk_refs,
                cut,
            });
        }
        if let Some(p0) = parts.first() {
            let (g, cutting) = if along_time {
                time_chunk(name, &parts)?
            } else {
                (p0.chunks.first().copied().unwrap_or(1).max(1), false)
            };
            if cutting {
                let mut c = shape.clone();
                if let Some(c0) = c.first_mut() {
                    *c0 = g;
                }
                zarray["chunks"] = json!(c);
            }
            let zeros = vec![0u64; shape.len().saturating_sub(1)];
            for p in &parts {
                let len = p.shape.first().copied().unwrap_or(0);
                let shift = time_len / g;
                match (cutting, p.cut) {
                    (true, Some((offset, row))) => {
                        for k in 0..len / g {
                            let mut index = vec![shift + k];
                            index.extend_from_slice(&zeros);
                            refs.insert(
                                format!("{name}/{}", key(&index)),
                                json!([p.url, offset + k * g * row, g * row]),
                            );
                        }
                    }
                    _ => {
                        for (index, offset, length) in &p.refs {
                            let mut index = index.clone();
                            if along_time {
                                if let Some(i0) = index.first_mut() {
                                    *i0 += shift;
                                }
                            }
                            refs.insert(
                                format!("{name}/{}", key(&index)),
                                json!([p.url, offset, length]),
                            );
                        }
                    }
                }
                if refs.len() > MAX_CHUNK_REFS {
                    return Err(format!(
                        "{name}: more than {MAX_CHUNK_REFS} chunk references (the files' chunks fit together only in {g}-step pieces)"
                    ));
                }
                time_len += len;
            }
        }
        if along_time {
            if let Some(s0) = shape.first_mut() {
                *s0 = time_len;
            }
            zarray["shape"] = json!(shape);
        }
        if let Some(values) = inline {
            use base64::Engine as _;
            let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
            zarray["dtype"] = json!("<f8");
            zarray["chunks"] = json!(shape);
            zarray["compressor"] = Value::Null;
            zarray["filters"] = Value::Null;
            let key = vec!["0"; shape.len()].join(".");
            refs.insert(
                format!("{name}/{key}"),
                json!(format!(
                    "base64:{}",
                    base64::engine::general_purpose::STANDARD.encode(bytes)
                )),
            );
        }
        refs.insert(format!("{name}/.zarray"), json!(zarray.to_string()));
        refs.insert(format!("{name}/.zattrs"), json!(zattrs.to_string()));
    }
    Ok(json!({"version": 1, "refs": refs}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(t: u64, chunk_t: u64, off: u64) -> Value {
        json!({
            "global": {"title": "x"},
            "variables": [
                {"name": "tas", "zarray": {"shape": [t, 2], "chunks": [chunk_t, 2], "dtype": "<f4",
                  "compressor": null, "filters": null, "fill_value": null},
                 "zattrs": {"_ARRAY_DIMENSIONS": ["time", "lat"]},
                 "chunks": (0..t.div_ceil(chunk_t)).map(|i| json!({"index": [i, 0], "offset": off + i * 100, "length": 8 * chunk_t})).collect::<Vec<_>>(),
                 "unavailable": null},
                {"name": "lat", "zarray": {"shape": [2], "chunks": [2], "dtype": "<f8",
                  "compressor": null, "filters": null, "fill_value": null},
                 "zattrs": {"_ARRAY_DIMENSIONS": ["lat"]},
                 "chunks": [{"index": [0], "offset": off, "length": 16}], "unavailable": null}
            ]
        })
    }

    #[test]
    fn time_chunks_are_offset_by_each_files_length() {
        let files = vec![
            ("http://h/data/a?version=1".to_string(), file(4, 2, 1000)),
            ("http://h/data/b?version=1".to_string(), file(3, 2, 5000)),
        ];
        let v = build(&files).expect("refs");
        let refs = &v["refs"];
        assert_eq!(
            refs["tas/0.0"],
            json!(["http://h/data/a?version=1", 1000, 16])
        );
        assert_eq!(
            refs["tas/2.0"],
            json!(["http://h/data/b?version=1", 5000, 16])
        );
        assert_eq!(
            refs["tas/3.0"],
            json!(["http://h/data/b?version=1", 5100, 16])
        );
        assert!(refs.get("tas/4.0").is_none());
        let za: Value =
            serde_json::from_str(refs["tas/.zarray"].as_str().expect("str")).expect("json");
        assert_eq!(za["shape"], json!([7, 2]));
        // Non-time variables from the first file only.
        assert_eq!(
            refs["lat/0"],
            json!(["http://h/data/a?version=1", 1000, 16])
        );
    }

    #[test]
    fn irregular_files_are_not_available() {
        let files = vec![
            ("u1".to_string(), file(3, 2, 0)),
            ("u2".to_string(), file(4, 2, 0)),
        ];
        let e = build(&files).expect_err("3 is not a multiple of 2");
        assert!(e.contains("not a multiple"), "{e}");
        // Chunked files whose chunks differ: neither can be cut.
        let files = vec![
            ("u1".to_string(), file(4, 2, 0)),
            ("u2".to_string(), file(4, 1, 0)),
        ];
        let e = build(&files).expect_err("chunking differs");
        assert!(e.contains("chunking differs"), "{e}");
        // A contiguous file (one chunk of 3) after files chunked by 2: 3 steps cannot
        // be cut into 2-step chunks.
        let files = vec![
            ("u1".to_string(), file(4, 2, 0)),
            ("u2".to_string(), file(3, 3, 0)),
        ];
        let e = build(&files).expect_err("3 steps in 2-step chunks");
        assert!(e.contains("not a multiple of the time chunk 2"), "{e}");
        let mut f = file(2, 2, 0);
        f["variables"][0]["unavailable"] = json!("not available: HDF5 filter 32015");
        let e = build(&[("u".to_string(), f)]).expect_err("unavailable");
        assert!(e.contains("32015"), "{e}");
        let mut g = file(2, 2, 0);
        g["variables"][0]["zattrs"]["units"] = json!("days since 1955-01-01");
        let e = build(&[("u1".to_string(), file(2, 2, 0)), ("u2".to_string(), g)])
            .expect_err("units differ");
        assert!(e.contains("attribute units differs"), "{e}");
    }

    /// A file with a `time` coordinate of `t` steps stored in one chunk of 512 (netCDF4's
    /// default for an unlimited axis), with or without its values in the index.
    fn file_with_time(t: u64, first: f64, values: bool) -> Value {
        let mut f = file(t, 1, 0);
        let mut time = json!({"name": "time", "zarray": {"shape": [t], "chunks": [512], "dtype": "<f8",
              "compressor": {"id": "zlib", "level": 4}, "filters": null, "fill_value": null},
             "zattrs": {"_ARRAY_DIMENSIONS": ["time"], "units": "days since 1850-01-01"},
             "chunks": [{"index": [0], "offset": 10, "length": 30}], "unavailable": null});
        if values {
            time["values"] = json!((0..t).map(|i| first + i as f64).collect::<Vec<f64>>());
        }
        f["variables"].as_array_mut().expect("array").push(time);
        f
    }

    #[test]
    fn time_values_in_the_index_are_served_inline_whatever_the_chunking() {
        let files = vec![
            ("u1".to_string(), file_with_time(12, 0.0, true)),
            ("u2".to_string(), file_with_time(12, 12.0, true)),
            ("u3".to_string(), file_with_time(5, 24.0, true)),
        ];
        let v = build(&files).expect("refs");
        let refs = &v["refs"];
        let za: Value =
            serde_json::from_str(refs["time/.zarray"].as_str().expect("str")).expect("json");
        assert_eq!(za["shape"], json!([29]));
        assert_eq!(za["chunks"], json!([29]));
        assert_eq!(za["dtype"], "<f8");
        assert_eq!(za["compressor"], Value::Null);
        let b64 = refs["time/0"]
            .as_str()
            .expect("inline")
            .strip_prefix("base64:")
            .expect("base64");
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("decodes");
        let got: Vec<f64> = bytes
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        assert_eq!(got, (0..29).map(f64::from).collect::<Vec<_>>());
        assert!(refs.get("time/1").is_none());
        // Without the values (an index made before they were kept): per-file chunks,
        // and 12 steps in a 512-step chunk cannot be concatenated.
        let files = vec![
            ("u1".to_string(), file_with_time(12, 0.0, false)),
            ("u2".to_string(), file_with_time(12, 12.0, true)),
        ];
        let e = build(&files).expect_err("not inline");
        assert!(e.contains("not a multiple of the time chunk 512"), "{e}");
    }

    /// Writes `cdl` with ncgen (netCDF-4) as `dir/<name>.nc`; its chunk index as the
    /// catalog keeps it.
    fn ncgen_indexed(dir: &std::path::Path, name: &str, cdl: &str) -> (String, Value) {
        let src = dir.join(format!("{name}.cdl"));
        let out = dir.join(format!("{name}.nc"));
        std::fs::write(&src, cdl).expect("write CDL");
        let st = std::process::Command::new("ncgen")
            .args(["-k", "netCDF-4", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .expect("ncgen (Debian netcdf-bin; scripts/setup-test-deps.sh installs it)");
        assert!(st.success(), "ncgen {name}");
        let ix =
            granary_science::netcdf::chunk_index(&out, &Default::default()).expect("chunk index");
        (
            out.to_str().expect("utf-8").to_string(),
            serde_json::to_value(ix).expect("json"),
        )
    }

    /// A CMOR-like contiguous file: `ta(time, lat, lon)` of `t` steps of 6 values (`6 * first..`),
    /// `time` (fixed, not unlimited) in `days since <since>` with `time_bnds`.
    fn contiguous_cdl(t: usize, first: usize, since: &str, times: &[f64]) -> String {
        let ta: Vec<String> = (first * 6..(first + t) * 6)
            .map(|v| v.to_string())
            .collect();
        let time: Vec<String> = times.iter().map(|v| v.to_string()).collect();
        let bnds: Vec<String> = times
            .iter()
            .map(|v| format!("{}, {}", v - 0.5, v + 0.5))
            .collect();
        format!(
            "netcdf f {{\ndimensions:\n  time = {t} ;\n  bnds = 2 ;\n  lat = 2 ;\n  lon = 3 ;\nvariables:\n\
             double time(time) ;\n    time:units = \"days since {since}\" ;\n    time:calendar = \"noleap\" ;\n\
             time:bounds = \"time_bnds\" ;\n    time:_Storage = \"contiguous\" ;\n\
             double time_bnds(time, bnds) ;\n    time_bnds:_Storage = \"contiguous\" ;\n\
             double lat(lat) ;\n  double lon(lon) ;\n  float ta(time, lat, lon) ;\n    ta:units = \"K\" ;\n    ta:_Storage = \"contiguous\" ;\n\
             data:\n  time = {} ;\n  time_bnds = {} ;\n  lat = -45, 45 ;\n  lon = 0, 120, 240 ;\n  ta = {} ;\n}}\n",
            time.join(", "),
            bnds.join(", "),
            ta.join(", ")
        )
    }

    /// The values of `ta` read through the reference set: every chunk a byte range of
    /// its file (uncompressed little-endian `<f4`), in chunk order.
    fn read_ta(refs: &Value) -> Vec<f32> {
        let za: Value =
            serde_json::from_str(refs["ta/.zarray"].as_str().expect("str")).expect("json");
        assert_eq!(za["dtype"], "<f4");
        let shape: Vec<u64> = serde_json::from_value(za["shape"].clone()).expect("shape");
        let chunks: Vec<u64> = serde_json::from_value(za["chunks"].clone()).expect("chunks");
        assert_eq!(chunks[1..], shape[1..]);
        let mut out = Vec::new();
        for i in 0..shape[0].div_ceil(chunks[0]) {
            let r = &refs[format!("ta/{i}.0.0")];
            let path = r[0].as_str().expect("url");
            let (off, len) = (
                r[1].as_u64().expect("offset"),
                r[2].as_u64().expect("length"),
            );
            assert_eq!(len, chunks.iter().product::<u64>() * 4, "a whole chunk");
            let bytes = std::fs::read(path).expect("file");
            let b = &bytes[off as usize..(off + len) as usize];
            out.extend(
                b.chunks(4)
                    .map(|c| f32::from_le_bytes(c.try_into().expect("4"))),
            );
        }
        assert!(refs
            .get(format!("ta/{}.0.0", shape[0].div_ceil(chunks[0])))
            .is_none());
        out
    }

    fn inline_f64(refs: &Value, key: &str) -> Vec<f64> {
        use base64::Engine as _;
        let b64 = refs[key]
            .as_str()
            .expect("inline")
            .strip_prefix("base64:")
            .expect("base64");
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("decodes")
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    }

    #[test]
    fn contiguous_files_of_different_lengths_are_cut_into_common_time_chunks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let steps = |n: usize, at: usize| (at..at + n).map(|d| d as f64 + 0.5).collect::<Vec<_>>();
        // Files of (steps, first step), named `prefix0`, `prefix1`, ….
        let make = |prefix: &str, shape: &[(usize, usize)]| -> Vec<(String, Value)> {
            shape
                .iter()
                .enumerate()
                .map(|(i, &(n, at))| {
                    ncgen_indexed(
                        dir.path(),
                        &format!("{prefix}{i}"),
                        &contiguous_cdl(n, at, "1850-01-01", &steps(n, at)),
                    )
                })
                .collect()
        };
        // 4, 4 and 2 steps (as 120, 120, 60 months): 2-step chunks.
        let files = make("a", &[(4, 0), (4, 4), (2, 8)]);
        let v = build(&files).expect("refs");
        let refs = &v["refs"];
        let za: Value =
            serde_json::from_str(refs["ta/.zarray"].as_str().expect("str")).expect("json");
        assert_eq!(za["shape"], json!([10, 2, 3]));
        assert_eq!(za["chunks"], json!([2, 2, 3]));
        assert_eq!(za["compressor"], Value::Null);
        assert_eq!(refs["ta/2.0.0"][0], json!(files[1].0));
        assert_eq!(refs["ta/4.0.0"][0], json!(files[2].0));
        let want: Vec<f32> = (0..60).map(|v| v as f32).collect();
        assert_eq!(read_ta(refs), want);
        assert_eq!(inline_f64(refs, "time/0"), steps(10, 0));
        // 366 and 365 days' worth (3 and 2 steps here): one step per chunk.
        let files = make("b", &[(3, 0), (2, 3)]);
        let v = build(&files).expect("refs");
        let refs = &v["refs"];
        let za: Value =
            serde_json::from_str(refs["ta/.zarray"].as_str().expect("str")).expect("json");
        assert_eq!(za["chunks"], json!([1, 2, 3]));
        assert_eq!(read_ta(refs), (0..30).map(|v| v as f32).collect::<Vec<_>>());
    }

    #[test]
    fn time_axes_in_different_units_are_reencoded_in_the_first_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The same two years, the second file counting from its own year (noleap).
        let files = vec![
            ncgen_indexed(
                dir.path(),
                "y1850",
                &contiguous_cdl(2, 0, "1850-01-01", &[15.5, 45.0]),
            ),
            ncgen_indexed(
                dir.path(),
                "y1851",
                &contiguous_cdl(2, 2, "1851-1-1 00:00:00", &[15.5, 45.0]),
            ),
            ncgen_indexed(
                dir.path(),
                "y1852",
                &contiguous_cdl(2, 4, "1851-12-31 12:00", &[16.0, 45.5]),
            ),
        ];
        let v = build(&files).expect("refs");
        let refs = &v["refs"];
        assert_eq!(
            inline_f64(refs, "time/0"),
            vec![15.5, 45.0, 380.5, 410.0, 745.5, 775.0]
        );
        let bnds = inline_f64(refs, "time_bnds/0.0");
        assert_eq!(bnds[4..8], [380.0, 381.0, 409.5, 410.5]);
        let zattrs: Value =
            serde_json::from_str(refs["time/.zattrs"].as_str().expect("str")).expect("json");
        assert_eq!(zattrs["units"], "days since 1850-01-01");
        assert_eq!(read_ta(refs), (0..36).map(|v| v as f32).collect::<Vec<_>>());
        // Another calendar is not re-encoded: refused.
        let other =
            contiguous_cdl(2, 6, "1853-01-01", &[15.5, 45.0]).replace("\"noleap\"", "\"360_day\"");
        let mut files = files;
        files.push(ncgen_indexed(dir.path(), "y1853", &other));
        let e = build(&files).expect_err("calendars differ");
        assert!(e.contains("time: attribute"), "{e}");
    }

    #[test]
    fn the_refusal_header_is_the_reason_percent_encoded_where_not_printable() {
        let text = "not available: time: attribute units differs (100% sure, é\n)";
        let v = refused_value(text);
        assert_eq!(
            v.to_str().unwrap(),
            "not available: time: attribute units differs (100%25 sure, %C3%A9%0A)"
        );
        let back = percent_encoding::percent_decode_str(v.to_str().unwrap()).decode_utf8();
        assert_eq!(back.unwrap(), text);
        let r = unavailable("ta: chunking or shape differs");
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            r.headers()[REFUSED],
            "not available: ta: chunking or shape differs"
        );
    }

    #[test]
    fn dataset_ids_map_to_name_prefixes() {
        let (p, v) = crate::esgf::dataset_filter(
            "CMIP6.CMIP.MIROC.MIROC6.historical.r1i1p1f1.Amon.ta.gn.v20190311",
        )
        .expect("id");
        assert_eq!(
            p[0],
            "/CMIP6/CMIP/MIROC/MIROC6/historical/r1i1p1f1/Amon/ta/gn/"
        );
        assert_eq!(v, "v20190311");
        assert!(crate::esgf::dataset_filter("nodots").is_none());
    }
}
