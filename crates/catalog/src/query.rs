//! The query (the wire format of search over NDN and HTTP) and the result page.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result};
use crate::record::{check_plain, Record, MAX_KEY, MAX_VALUE};

/// Largest page.
pub const MAX_LIMIT: usize = 10_000;
/// Largest free-text query (bytes).
pub const MAX_QUERY_TEXT: usize = 4096;
/// Most values in all filters and exclusions together.
pub const MAX_QUERY_VALUES: usize = 10_000;

/// Order of hits. JSON: `"name"`, `"name_desc"`, `"newest"`, `"size"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    /// By name, then version (ascending).
    #[default]
    Name,
    /// By name descending, then version descending.
    NameDesc,
    /// Highest version first, then by name.
    Newest,
    /// Largest first, then by name.
    Size,
}

/// Which facets to count. JSON: `"none"`, `"all"`, or a list of facet keys.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "FacetSelRepr", into = "FacetSelRepr")]
pub enum FacetSel {
    #[default]
    None,
    All,
    List(Vec<String>),
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum FacetSelRepr {
    Word(String),
    List(Vec<String>),
}

impl TryFrom<FacetSelRepr> for FacetSel {
    type Error = String;
    fn try_from(r: FacetSelRepr) -> std::result::Result<Self, String> {
        match r {
            FacetSelRepr::Word(w) if w == "none" => Ok(FacetSel::None),
            FacetSelRepr::Word(w) if w == "all" || w == "*" => Ok(FacetSel::All),
            FacetSelRepr::Word(w) => Err(format!(
                "facets must be \"none\", \"all\" or a list, not {w:?}"
            )),
            FacetSelRepr::List(l) => Ok(FacetSel::List(l)),
        }
    }
}

impl From<FacetSel> for FacetSelRepr {
    fn from(f: FacetSel) -> Self {
        match f {
            FacetSel::None => FacetSelRepr::Word("none".into()),
            FacetSel::All => FacetSelRepr::Word("all".into()),
            FacetSel::List(l) => FacetSelRepr::List(l),
        }
    }
}

/// A search. Every field is optional in JSON (defaults below).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Query {
    /// AND across facets, OR within one facet's values.
    pub filters: BTreeMap<String, Vec<String>>,
    /// `key!=value`: records whose facet equals any of the values are left out.
    pub exclude: BTreeMap<String, Vec<String>>,
    /// Free text: every word must occur (title, facet values, text).
    pub text: Option<String>,
    /// `[start, end]`, either may be null: records whose time range overlaps.
    pub time_overlap: Option<(Option<String>, Option<String>)>,
    /// Only the highest version of each name (default true).
    pub latest_only: bool,
    /// Only files of the latest version of their dataset, as ESGF's `latest=true`: a
    /// record is left out when another record of the same dataset (same name but for
    /// the file name) has a newer DRS version (facet `version`). Default false.
    pub dataset_latest: bool,
    pub sort: Sort,
    /// Default 20, at most 10 000.
    pub limit: usize,
    pub offset: usize,
    pub facets: FacetSel,
    /// Only names starting with this string.
    pub name_prefix: Option<String>,
}

impl Default for Query {
    fn default() -> Self {
        Query {
            filters: BTreeMap::new(),
            exclude: BTreeMap::new(),
            text: None,
            time_overlap: None,
            latest_only: true,
            dataset_latest: false,
            sort: Sort::Name,
            limit: 20,
            offset: 0,
            facets: FacetSel::None,
            name_prefix: None,
        }
    }
}

/// One page of results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Page {
    /// Number of matching records (all pages).
    pub total: u64,
    pub hits: Vec<Record>,
    /// Per facet: `(value, count)` sorted by value, non-zero counts only.
    pub facet_counts: BTreeMap<String, Vec<(String, u64)>>,
}

fn parse_bool(k: &str, v: &str) -> Result<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => invalid(format!("{k}={v:?}: expected true or false")),
    }
}

fn parse_usize(k: &str, v: &str) -> Result<usize> {
    v.parse()
        .or_else(|_| invalid(format!("{k}={v:?}: expected a number")))
}

/// Checks an ISO 8601 date or date-time as the catalog compares them:
/// `YYYY[-MM[-DD[Thh[:mm[:ss[.f]]]]]][Z]`, a month 1–12, a day 1–31 (day 30 of
/// February is a date in 360-day calendars), hours 0–24, minutes and seconds
/// 0–59 (60: a leap second).
pub fn check_time(t: &str) -> Result<()> {
    let bad = || {
        invalid(format!(
            "{t:?} is not a date or time (expected YYYY-MM-DD or YYYY-MM-DDThh:mm:ss)"
        ))
    };
    let s = t.trim().strip_suffix('Z').unwrap_or(t.trim());
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let num = |x: &str, lo: u32, hi: u32, width: Option<usize>| {
        !x.is_empty()
            && x.bytes().all(|b| b.is_ascii_digit())
            && width.is_none_or(|w| x.len() == w)
            && x.parse::<u32>().is_ok_and(|n| (lo..=hi).contains(&n))
    };
    let mut d = date.split('-');
    let y = d.next().unwrap_or("");
    if !(num(y, 0, 999_999, None) && (4..=6).contains(&y.len())) {
        return bad();
    }
    let ok = match (d.next(), d.next(), d.next()) {
        (None, None, None) => time.is_none(),
        (Some(m), None, None) => num(m, 1, 12, Some(2)) && time.is_none(),
        (Some(m), Some(dd), None) => num(m, 1, 12, Some(2)) && num(dd, 1, 31, Some(2)),
        _ => false,
    };
    if !ok {
        return bad();
    }
    if let Some(time) = time {
        let mut parts = time.split(':');
        let h = parts.next().unwrap_or("");
        let ok = num(h, 0, 24, Some(2))
            && match (parts.next(), parts.next(), parts.next()) {
                (None, None, None) => true,
                (Some(m), None, None) => num(m, 0, 59, Some(2)),
                (Some(m), Some(sec), None) => {
                    let (whole, frac) = sec.split_once('.').unwrap_or((sec, "0"));
                    num(m, 0, 59, Some(2))
                        && num(whole, 0, 60, Some(2))
                        && !frac.is_empty()
                        && frac.bytes().all(|b| b.is_ascii_digit())
                }
                _ => false,
            };
        if !ok {
            return bad();
        }
    }
    Ok(())
}

impl Query {
    /// CLI-style arguments: `key=value`, `key=a,b` (OR), `key!=value` (exclusion), and
    /// free words (text). Reserved keys: `limit`, `offset`, `sort`
    /// (`name|name_desc|newest|size`), `latest` (`true|false|dataset`), `facets` (`all`, `none`
    /// or `a,b`), `from` / `to` (time overlap), `prefix` (name prefix), `text`.
    pub fn parse_args(args: &[&str]) -> Result<Query> {
        let mut q = Query::default();
        let mut words: Vec<&str> = Vec::new();
        for a in args {
            if let Some((k, v)) = a.split_once("!=") {
                if !k.is_empty() && !k.contains('=') {
                    q.exclude
                        .entry(k.to_string())
                        .or_default()
                        .extend(v.split(',').map(str::to_string));
                    continue;
                }
            }
            let Some((k, v)) = a.split_once('=') else {
                words.push(a);
                continue;
            };
            match k {
                "" => return invalid(format!("argument {a:?} has no key")),
                "limit" => q.limit = parse_usize(k, v)?,
                "offset" => q.offset = parse_usize(k, v)?,
                "latest" if v.eq_ignore_ascii_case("dataset") => {
                    q.latest_only = true;
                    q.dataset_latest = true;
                }
                "latest" => q.latest_only = parse_bool(k, v)?,
                "sort" => {
                    q.sort = serde_json::from_value(serde_json::Value::String(v.to_string()))
                        .or_else(|_| {
                            invalid(format!(
                                "sort={v:?}: expected name, name_desc, newest or size"
                            ))
                        })?
                }
                "facets" => {
                    q.facets = match v {
                        "all" | "*" => FacetSel::All,
                        "none" | "" => FacetSel::None,
                        _ => FacetSel::List(v.split(',').map(str::to_string).collect()),
                    }
                }
                "from" | "to" => {
                    let t = q.time_overlap.get_or_insert((None, None));
                    if k == "from" {
                        t.0 = Some(v.to_string());
                    } else {
                        t.1 = Some(v.to_string());
                    }
                }
                "prefix" => q.name_prefix = Some(v.to_string()),
                "text" => words.push(v),
                _ => q
                    .filters
                    .entry(k.to_string())
                    .or_default()
                    .extend(v.split(',').map(str::to_string)),
            }
        }
        if !words.is_empty() {
            q.text = Some(words.join(" "));
        }
        q.validate()?;
        Ok(q)
    }

    /// Checks every documented limit.
    pub fn validate(&self) -> Result<()> {
        if self.limit > MAX_LIMIT {
            return invalid(format!("limit {} is more than {MAX_LIMIT}", self.limit));
        }
        if self.offset > u32::MAX as usize {
            return invalid(format!("offset {} is too large", self.offset));
        }
        let mut n = 0;
        for (k, vs) in self.filters.iter().chain(self.exclude.iter()) {
            check_plain("facet key", k, MAX_KEY)?;
            for v in vs {
                check_plain("facet value", v, MAX_VALUE)?;
            }
            n += vs.len();
        }
        if n > MAX_QUERY_VALUES {
            return invalid(format!(
                "{n} facet values in one query, more than {MAX_QUERY_VALUES}"
            ));
        }
        if let Some(t) = &self.text {
            if t.len() > MAX_QUERY_TEXT {
                return invalid(format!(
                    "text is {} bytes, more than {MAX_QUERY_TEXT}",
                    t.len()
                ));
            }
        }
        if let Some((a, b)) = &self.time_overlap {
            for t in [a, b].into_iter().flatten() {
                check_plain("time", t, MAX_KEY)?;
                check_time(t)?;
            }
            if let (Some(a), Some(b)) = (a, b) {
                if a.len() == b.len() && a > b {
                    return invalid(format!("time interval {a}/{b}: its start is after its end"));
                }
            }
        }
        if let Some(p) = &self.name_prefix {
            check_plain("name prefix", p, MAX_VALUE)?;
        }
        if let FacetSel::List(l) = &self.facets {
            if l.len() > 1000 {
                return invalid("more than 1000 facets requested");
            }
            for k in l {
                check_plain("facet key", k, MAX_KEY)?;
            }
        }
        Ok(())
    }
}
