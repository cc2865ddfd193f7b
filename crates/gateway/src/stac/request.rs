//! A STAC search as GET parameters or a POST body give it, and the part of its CQL2
//! filter the catalog can answer itself.

use super::*;

/// A search, as GET parameters or a POST body give it.
#[derive(Debug, Default, Clone)]
pub(super) struct Search {
    pub(super) collections: Option<Vec<String>>,
    pub(super) ids: Option<Vec<String>>,
    pub(super) limit: usize,
    pub(super) offset: usize,
    pub(super) bbox: Option<[f64; 4]>,
    pub(super) datetime: Option<(Option<String>, Option<String>)>,
    pub(super) filter: Option<Value>,
    /// Most assets per item (0: the default, [`MAX_ASSETS`]).
    pub(super) assets: usize,
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn parse_limit(n: u64) -> Result<usize, String> {
    if n == 0 {
        return Err("limit must be at least 1".into());
    }
    Ok((n as usize).min(MAX_LIMIT))
}

/// `next:<offset>`: the token of the page starting at `offset`.
fn parse_token(t: &str) -> Result<usize, String> {
    t.strip_prefix("next:")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("token {t:?} is not one this server gave"))
}

fn parse_bbox(v: &[f64]) -> Result<[f64; 4], String> {
    match v {
        [w, s, e, n] | [w, s, _, e, n, _] => {
            if [w, s, e, n].iter().any(|x| !x.is_finite()) || s > n {
                return Err("bbox: expected west,south,east,north with south <= north".into());
            }
            Ok([*w, *s, *e, *n])
        }
        _ => Err("bbox: expected 4 (or 6) numbers".into()),
    }
}

/// `datetime`: an instant or `start/end`, either side open (`..` or empty).
fn parse_datetime(v: &str) -> Result<(Option<String>, Option<String>), String> {
    let side = |s: &str| -> Result<Option<String>, String> {
        let s = s.trim();
        if s.is_empty() || s == ".." {
            return Ok(None);
        }
        rfc3339(s)
            .map(Some)
            .ok_or_else(|| format!("datetime {s:?}: expected RFC 3339 (2000-01-01T00:00:00Z)"))
    };
    match v.split_once('/') {
        Some((a, b)) => Ok((side(a)?, side(b)?)),
        None => {
            let t = side(v)?;
            Ok((t.clone(), t))
        }
    }
}

pub(super) fn from_pairs(p: &[(String, String)]) -> Result<Search, String> {
    let mut s = Search {
        limit: DEFAULT_LIMIT,
        ..Default::default()
    };
    let mut lang = None;
    for (k, v) in p {
        match k.as_str() {
            "collections" => s.collections = Some(list(v)),
            "ids" => s.ids = Some(list(v)),
            "limit" => {
                s.limit = parse_limit(
                    v.trim()
                        .parse()
                        .map_err(|_| format!("limit={v:?}: expected a whole number"))?,
                )?
            }
            "token" => s.offset = parse_token(v)?,
            "bbox" => {
                let nums: Result<Vec<f64>, _> = v.split(',').map(|x| x.trim().parse()).collect();
                s.bbox = Some(parse_bbox(
                    &nums.map_err(|_| format!("bbox={v:?}: not numbers"))?,
                )?);
            }
            "datetime" => s.datetime = Some(parse_datetime(v)?),
            "filter" => {
                s.filter = Some(serde_json::from_str(v).map_err(|e| {
                    format!("filter: only CQL2-JSON is understood (filter-lang=cql2-json): {e}")
                })?)
            }
            "filter-lang" => lang = Some(v.clone()),
            "filter-crs" | "f" | "sortby" | "fields" => {}
            k => return Err(format!("unknown parameter {k:?}")),
        }
    }
    if let Some(l) = lang {
        if l != "cql2-json" {
            return Err(format!("filter-lang={l:?}: only cql2-json is supported"));
        }
    }
    Ok(s)
}

pub(super) fn from_body(b: &Value) -> Result<Search, String> {
    let Some(o) = b.as_object() else {
        return Err("the body must be a JSON object".into());
    };
    let mut s = Search {
        limit: DEFAULT_LIMIT,
        ..Default::default()
    };
    let strings = |k: &str, v: &Value| -> Result<Vec<String>, String> {
        match v {
            Value::String(x) => Ok(list(x)),
            Value::Array(a) => a
                .iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| format!("{k}: expected strings"))
                })
                .collect(),
            _ => Err(format!("{k}: expected a list of strings")),
        }
    };
    for (k, v) in o {
        if v.is_null() {
            continue;
        }
        match k.as_str() {
            "collections" => s.collections = Some(strings(k, v)?),
            "ids" => s.ids = Some(strings(k, v)?),
            "limit" => {
                s.limit = parse_limit(
                    v.as_u64()
                        .ok_or_else(|| format!("limit: expected a whole number, not {v}"))?,
                )?
            }
            "token" => {
                s.offset = parse_token(v.as_str().ok_or("token: expected a string")?)?;
            }
            "bbox" => {
                let nums: Option<Vec<f64>> = v
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_f64).collect());
                s.bbox = Some(parse_bbox(&nums.ok_or("bbox: expected numbers")?)?);
            }
            "datetime" => {
                s.datetime = Some(parse_datetime(
                    v.as_str().ok_or("datetime: expected a string")?,
                )?)
            }
            "filter" => s.filter = Some(v.clone()),
            "filter-lang" => {
                if v.as_str() != Some("cql2-json") {
                    return Err(format!("filter-lang {v}: only cql2-json is supported"));
                }
            }
            "filter-crs" | "sortby" | "fields" => {}
            k => return Err(format!("unknown field {k:?}")),
        }
    }
    Ok(s)
}

/// The facets a filter may be pushed down to the catalog with (CMIP6 facets that
/// every CMIP6 record carries, so that "not found" means the same as in memory).
const PUSHED: &[&str] = &[
    "mip_era",
    "activity_id",
    "institution_id",
    "source_id",
    "experiment_id",
    "member_id",
    "variant_label",
    "sub_experiment_id",
    "table_id",
    "variable_id",
    "grid_label",
    "version",
];

/// `in`/`=` terms of a top-level `and` on CMIP6 facets, as catalog filters.
/// True when that is the whole filter (every term went to the catalog, or is
/// `retracted` false, which every item is): the catalog's answer is then exact
/// and no item needs evaluating — intake-esgf's filters are of this kind.
pub(super) fn pushdown(f: &Value, q: &mut Query) -> bool {
    let terms: Vec<&Value> = match (f["op"].as_str(), f["args"].as_array()) {
        (Some("and"), Some(a)) => a.iter().collect(),
        _ => vec![f],
    };
    let mut complete = true;
    for t in terms {
        let (Some(op), Some(args)) = (t["op"].as_str(), t["args"].as_array()) else {
            complete = false;
            continue;
        };
        let (Some(p), Some(v)) = (
            args.first()
                .and_then(|a| a.get("property"))
                .and_then(Value::as_str),
            args.get(1),
        ) else {
            complete = false;
            continue;
        };
        let name = prop_name(p);
        let facet = name.strip_prefix("cmip6:").unwrap_or(name);
        if facet == "retracted"
            && ((op == "=" && *v == json!(false)) || (op == "in" && *v == json!([false])))
        {
            continue;
        }
        if !PUSHED.contains(&facet) {
            complete = false;
            continue;
        }
        let values: Option<Vec<String>> = match (op, v) {
            ("in", Value::Array(a)) => a.iter().map(|x| x.as_str().map(str::to_string)).collect(),
            ("=", Value::String(x)) => Some(vec![x.clone()]),
            _ => None,
        };
        if values.is_none() {
            complete = false;
        }
        if let Some(vs) = values {
            let e = q.filters.entry(facet.to_string()).or_default();
            if e.is_empty() {
                *e = vs;
            } else {
                e.retain(|x| vs.contains(x));
                if e.is_empty() {
                    // Two terms that cannot both hold: a value no record has.
                    e.push("\u{1}none".into());
                }
            }
        }
    }
    complete
}
