//! Query strings: strict decoding (UTF-8 or a 400) and their translation into
//! catalog queries.

use std::collections::BTreeMap;

use granary_catalog::{FacetSel, Query, Sort};

/// Longest query string accepted (bytes); longer ones get 414.
pub const MAX_QUERY: usize = 8192;

/// Percent-decodes `s` (and `+` as a space when `plus`) into UTF-8.
fn decode_with(s: &str, plus: bool) -> Result<String, String> {
    let owned;
    let s = if plus && s.contains('+') {
        owned = s.replace('+', " ");
        owned.as_str()
    } else {
        s
    };
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(s).collect();
    String::from_utf8(bytes).map_err(|_| "not valid UTF-8 once percent-decoded".to_string())
}

/// Percent-decodes a path into UTF-8.
pub fn decode(s: &str) -> Result<String, String> {
    decode_with(s, false)
}

/// The query string as ordered `(key, value)` pairs, each decoded to UTF-8.
pub fn pairs(q: Option<&str>) -> Result<Vec<(String, String)>, String> {
    let Some(q) = q else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for part in q.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').unwrap_or((part, ""));
        let k = decode_with(k, true).map_err(|e| format!("parameter name: {e}"))?;
        let v = decode_with(v, true).map_err(|e| format!("parameter {k:?}: {e}"))?;
        out.push((k, v));
    }
    Ok(out)
}

pub fn parse_bool(k: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" | "" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!("{k}={v:?}: expected true or false")),
    }
}

pub fn parse_num(k: &str, v: &str) -> Result<usize, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{k}={v:?}: expected a whole number"))
}

/// A `/api/search` query string as a catalog query: `facet=value` (repeatable: OR
/// within a facet, AND across facets), `facet!=value` (exclusion), `q`, `limit`,
/// `offset`, `latest`, `facets=all|none|a,b`, `time=START/END`, `sort`, `prefix`.
pub fn search_query(pairs: &[(String, String)]) -> Result<Query, String> {
    let mut q = Query {
        facets: FacetSel::All,
        ..Query::default()
    };
    let mut words = Vec::new();
    for (k, v) in pairs {
        match k.as_str() {
            "q" | "text" => {
                if !v.trim().is_empty() {
                    words.push(v.clone())
                }
            }
            "limit" => q.limit = parse_num(k, v)?,
            "offset" => q.offset = parse_num(k, v)?,
            "latest" => q.latest_only = parse_bool(k, v)?,
            "facets" => q.facets = facet_sel(v),
            "time" => q.time_overlap = Some(time_range(v)?),
            "sort" => {
                q.sort = serde_json::from_value::<Sort>(serde_json::Value::String(v.clone()))
                    .map_err(|_| format!("sort={v:?}: expected name, name_desc, newest or size"))?
            }
            "prefix" => q.name_prefix = Some(v.clone()),
            "format" => {}
            // The kind of hit; callers that serve datasets take `type=dataset`
            // before this.
            "type" if v.eq_ignore_ascii_case("file") => {}
            "type" => return Err(format!("type={v:?}: expected file or dataset")),
            _ => {
                if k.is_empty() {
                    return Err("a parameter has an empty name".into());
                }
                if let Some(f) = k.strip_suffix('!') {
                    push(&mut q.exclude, f, v);
                } else {
                    push(&mut q.filters, k, v);
                }
            }
        }
    }
    if !words.is_empty() {
        q.text = Some(words.join(" "));
    }
    q.validate().map_err(|e| e.to_string())?;
    Ok(q)
}

fn push(m: &mut BTreeMap<String, Vec<String>>, k: &str, v: &str) {
    let e = m.entry(k.to_string()).or_default();
    if !e.iter().any(|x| x == v) {
        e.push(v.to_string());
    }
}

pub fn facet_sel(v: &str) -> FacetSel {
    match v.trim() {
        "all" | "*" => FacetSel::All,
        "none" | "" => FacetSel::None,
        l => FacetSel::List(
            l.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        ),
    }
}

/// `START/END`, either side may be empty.
pub fn time_range(v: &str) -> Result<(Option<String>, Option<String>), String> {
    let (a, b) = v
        .split_once('/')
        .ok_or_else(|| format!("time={v:?}: expected START/END (either may be empty)"))?;
    let f = |s: &str| {
        let s = s.trim();
        (!s.is_empty()).then(|| s.to_string())
    };
    Ok((f(a), f(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_strictly() {
        assert_eq!(
            pairs(Some("a=b+c&d=%2F&x")).unwrap(),
            vec![
                ("a".into(), "b c".into()),
                ("d".into(), "/".into()),
                ("x".into(), "".into())
            ]
        );
        assert!(pairs(Some("a=%FF")).is_err());
        assert!(decode("/data/%C3%28").is_err());
    }

    #[test]
    fn search_params() {
        let p = pairs(Some(
            "source_id=A&source_id=B&experiment_id=h&member_id!=r2&q=air+temp&limit=5&latest=False&time=1900/&facets=a,b",
        ))
        .unwrap();
        let q = search_query(&p).unwrap();
        assert_eq!(q.filters["source_id"], vec!["A", "B"]);
        assert_eq!(q.filters["experiment_id"], vec!["h"]);
        assert_eq!(q.exclude["member_id"], vec!["r2"]);
        assert_eq!(q.text.as_deref(), Some("air temp"));
        assert_eq!(q.limit, 5);
        assert!(!q.latest_only);
        assert_eq!(q.time_overlap, Some((Some("1900".into()), None)));
        assert_eq!(q.facets, FacetSel::List(vec!["a".into(), "b".into()]));
        assert!(search_query(&pairs(Some("limit=x")).unwrap()).is_err());
        assert!(search_query(&pairs(Some("limit=100000")).unwrap()).is_err());
    }
}
