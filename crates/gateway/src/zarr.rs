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

pub async fn refs(St(node): St<State>, headers: HeaderMap, AxPath(id): AxPath<String>) -> Response {
    let id = id.trim_end_matches(".json").to_string();
    let Some((prefixes, version)) = crate::esgf::dataset_filter(&id) else {
        return error(
            StatusCode::BAD_REQUEST,
            "a dataset id is CMIP6.<activity>.<institution>.<source>.<experiment>.<member>.<table>.<variable>.<grid>.v<YYYYMMDD>",
        );
    };
    let found = with_catalog(&node, move |c| {
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
            let mut out = Vec::new();
            for r in files {
                let ix = c.chunk_refs(&r.name, r.version)?;
                out.push((r, ix));
            }
            return Ok(out);
        }
        Ok(Vec::new())
    })
    .await;
    let files = match found {
        Ok(f) => f,
        Err(r) => return r,
    };
    if files.is_empty() {
        return error(StatusCode::NOT_FOUND, format!("no dataset {id}"));
    }
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
        let chunks: Vec<u64> = serde_json::from_value(zarray["chunks"].clone())
            .map_err(|_| format!("{name}: bad chunks"))?;
        let mut shape: Vec<u64> = serde_json::from_value(zarray["shape"].clone())
            .map_err(|_| format!("{name}: bad shape"))?;
        let mut zarray = zarray.clone();
        let parts: &[(String, Value)] = if along_time { files } else { &files[..1] };
        // A small variable along time (`time`, `time_bnds`) whose values every file's
        // index holds is served inline, concatenated: one read for the whole axis, and
        // any chunking of it in the files.
        let inline: Option<Vec<f64>> = if along_time {
            parts.iter().try_fold(Vec::new(), |mut all, (_, ix)| {
                let v = ix
                    .get("variables")
                    .and_then(Value::as_array)
                    .and_then(|vs| vs.iter().find(|v| v["name"] == name))?;
                let vals = v.get("values")?.as_array()?;
                let shape: Vec<u64> = serde_json::from_value(v["zarray"]["shape"].clone()).ok()?;
                if vals.len() as u64 != shape.iter().product::<u64>() {
                    return None;
                }
                for x in vals {
                    all.push(x.as_f64()?);
                }
                Some(all)
            })
        } else {
            None
        };
        let mut time_len = 0u64;
        for (n, (url, ix)) in parts.iter().enumerate() {
            let v = ix
                .get("variables")
                .and_then(Value::as_array)
                .and_then(|vs| vs.iter().find(|v| v["name"] == name))
                .ok_or(format!("{name} missing from {url}"))?;
            if let Some(why) = v.get("unavailable").and_then(Value::as_str) {
                return Err(format!(
                    "{name} in {url}: {}",
                    why.trim_start_matches("not available: ")
                ));
            }
            let za = &v["zarray"];
            // Values are concatenated as stored: they must mean the same in every file.
            for k in ["units", "calendar", "scale_factor", "add_offset"] {
                if v["zattrs"].get(k) != zattrs.get(k) {
                    return Err(format!(
                        "{name}: attribute {k} differs across the dataset's files ({url}: {}; first file: {})",
                        v["zattrs"].get(k).unwrap_or(&Value::Null),
                        zattrs.get(k).unwrap_or(&Value::Null)
                    ));
                }
            }
            let c: Vec<u64> = serde_json::from_value(za["chunks"].clone()).unwrap_or_default();
            let s: Vec<u64> = serde_json::from_value(za["shape"].clone()).unwrap_or_default();
            if inline.is_some() {
                if s.len() != shape.len() || s[1..] != shape[1..] {
                    return Err(format!(
                        "{name}: shape differs across the dataset's files ({url}: {s:?})"
                    ));
                }
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
            if c != chunks || s.len() != shape.len() || s[1..] != shape[1..] {
                return Err(format!(
                    "{name}: chunking or shape differs across the dataset's files ({url}: chunks {c:?}, shape {s:?}; first file: chunks {chunks:?})"
                ));
            }
            let c0 = chunks.first().copied().unwrap_or(1).max(1);
            let last = n + 1 == parts.len();
            if along_time && !last && s[0] % c0 != 0 {
                return Err(format!(
                    "{name}: {url} has {} time steps, not a multiple of the time chunk {c0}",
                    s[0]
                ));
            }
            let shift = time_len / c0;
            for ch in v["chunks"].as_array().into_iter().flatten() {
                let (mut index, offset, length) =
                    indexes(ch).ok_or(format!("{name}: bad chunk entry"))?;
                if along_time {
                    if let Some(i0) = index.first_mut() {
                        *i0 += shift;
                    }
                }
                refs.insert(
                    format!("{name}/{}", key(&index)),
                    json!([url, offset, length]),
                );
            }
            time_len += s.first().copied().unwrap_or(0);
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
        let files = vec![
            ("u1".to_string(), file(4, 2, 0)),
            ("u2".to_string(), file(4, 4, 0)),
        ];
        let e = build(&files).expect_err("chunking differs");
        assert!(e.contains("differs"), "{e}");
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
