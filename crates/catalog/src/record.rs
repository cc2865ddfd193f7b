//! The record (one published file version) and its validation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result};

/// Largest facet value, name, title (bytes).
pub const MAX_VALUE: usize = 4096;
/// Largest facet key (bytes).
pub const MAX_KEY: usize = 256;
/// Most facets on one record.
pub const MAX_FACETS: usize = 64;
/// Largest free-text blob (bytes).
pub const MAX_TEXT: usize = 256 * 1024;
/// Largest `meta` document, serialised (bytes).
pub const MAX_META: usize = 4 * 1024 * 1024;

/// One published file version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Record {
    /// NDN URI of the file, without version.
    pub name: String,
    /// Repository version.
    pub version: u64,
    /// "CMIP6", "CMIP5", "".
    pub project: String,
    pub facets: BTreeMap<String, String>,
    /// File name.
    pub title: String,
    pub size: u64,
    /// ISO-8601.
    pub time_start: Option<String>,
    /// ISO-8601.
    pub time_end: Option<String>,
    /// `[lat_min, lat_max, lon_min, lon_max]` in degrees (as the
    /// page and `/api/file` read it; STAC items give west, south, east, north).
    pub bbox: Option<[f64; 4]>,
    /// Free-text blob: attribute values, variable names, long names.
    pub text: String,
    /// Full metadata for the detail view: attributes, variables.
    pub meta: serde_json::Value,
    pub sha256: Option<String>,
    pub manifest_digest: Option<String>,
    /// Which node holds it (federation).
    pub node: Option<String>,
    /// The file's `tracking_id` global attribute (CMIP6: `hdl:21.14100/<uuid>`).
    pub tracking_id: Option<String>,
    /// The file's `further_info_url` global attribute.
    pub further_info_url: Option<String>,
    /// The file's `license` global attribute.
    pub license: Option<String>,
    /// The file's `citation` global attribute, where it has one.
    pub citation: Option<String>,
}

/// A name, facet key or value must be short and free of control characters (NUL included).
pub(crate) fn check_plain(what: &str, s: &str, max: usize) -> Result<()> {
    if s.len() > max {
        return invalid(format!("{what} is {} bytes, more than {max}", s.len()));
    }
    if has_control(s) {
        return invalid(format!("{what} contains a control character"));
    }
    Ok(())
}

/// True if `s` holds a control character (Unicode `Cc`: U+0000–U+001F, U+007F–U+009F),
/// tested on the UTF-8 bytes: C1 controls are `C2 80`–`C2 9F`.
fn has_control(s: &str) -> bool {
    let b = s.as_bytes();
    // Printable ASCII (the usual name or value) holds none: one branch-free pass that
    // the compiler vectorises, before the exact test.
    if b.iter().fold(true, |ok, &c| ok & (0x20..0x7f).contains(&c)) {
        return false;
    }
    b.iter().enumerate().any(|(i, &c)| {
        c < 0x20 || c == 0x7f || (c == 0xc2 && b.get(i + 1).is_some_and(|&n| n <= 0x9f))
    })
}

pub(crate) fn check_name(what: &str, s: &str) -> Result<()> {
    if s.is_empty() {
        return invalid(format!("{what} is empty"));
    }
    check_plain(what, s, MAX_VALUE)
}

pub(crate) fn check_int(what: &str, v: u64) -> Result<i64> {
    i64::try_from(v).or_else(|_| invalid(format!("{what} {v} is larger than 2^63-1")))
}

impl Record {
    /// Checks every documented limit.
    pub fn validate(&self) -> Result<()> {
        check_name("record name", &self.name)?;
        check_int("version", self.version)?;
        check_int("size", self.size)?;
        check_plain("project", &self.project, MAX_KEY)?;
        if self.facets.len() > MAX_FACETS {
            return invalid(format!(
                "{} facets, more than {MAX_FACETS}",
                self.facets.len()
            ));
        }
        for (k, v) in &self.facets {
            check_name("facet key", k)?;
            check_plain("facet key", k, MAX_KEY)?;
            check_plain("facet value", v, MAX_VALUE)?;
        }
        check_plain("title", &self.title, MAX_VALUE)?;
        if self.text.len() > MAX_TEXT {
            return invalid(format!(
                "text is {} bytes, more than {MAX_TEXT}",
                self.text.len()
            ));
        }
        if self.text.contains('\0') {
            return invalid("text contains a NUL character");
        }
        for (what, v) in [
            ("time_start", &self.time_start),
            ("time_end", &self.time_end),
            ("sha256", &self.sha256),
            ("manifest_digest", &self.manifest_digest),
            ("node", &self.node),
        ] {
            if let Some(v) = v {
                check_plain(what, v, MAX_KEY)?;
            }
        }
        for (what, v) in [
            ("tracking_id", &self.tracking_id),
            ("further_info_url", &self.further_info_url),
            ("license", &self.license),
            ("citation", &self.citation),
        ] {
            if let Some(v) = v {
                check_plain(what, v, MAX_VALUE)?;
            }
        }
        if let Some(b) = self.bbox {
            if b.iter().any(|x| !x.is_finite()) {
                return invalid("bbox has a non-finite coordinate");
            }
        }
        Ok(())
    }

    /// The facets as stored: `project` is added as a facet when the record has one and
    /// its facets do not name `project` themselves.
    pub(crate) fn index_facets(&self) -> Vec<(&str, &str)> {
        let mut f: Vec<(&str, &str)> = self
            .facets
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if !self.project.is_empty() && !self.facets.contains_key("project") {
            f.push(("project", self.project.as_str()));
        }
        f
    }

    /// The text indexed for free-text search: title, facet values, text.
    pub(crate) fn body(&self) -> String {
        crate::text::body(
            std::iter::once(self.title.as_str())
                .chain(std::iter::once(self.project.as_str()))
                .chain(self.facets.values().map(String::as_str))
                .chain(std::iter::once(self.text.as_str())),
        )
    }
}

/// Facets as stored in the `facets` column: `key US value RS key US value …`. Keys and
/// values hold no control characters (validated), so the separators cannot occur in them.
pub(crate) fn encode_facets(f: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (i, (k, v)) in f.iter().enumerate() {
        if i > 0 {
            s.push('\x1e');
        }
        s.push_str(k);
        s.push('\x1f');
        s.push_str(v);
    }
    s
}

pub(crate) fn decode_facets(s: &str) -> impl Iterator<Item = (&str, &str)> {
    s.split('\x1e').filter_map(|kv| kv.split_once('\x1f'))
}

/// What a write stores: the record, checked, as its row's columns, and the
/// text the free-text index gets.
pub(crate) struct Prepared {
    pub cols: Columns,
    pub body: String,
    /// The node that holds it (the record's `node`) and the manifest digest: written
    /// as a location in the same transaction as the record.
    pub loc: Option<(String, Option<String>)>,
}

/// What the `data` column holds: the part of a record its other columns do not (name,
/// version, project, size, times and facets are columns already), as JSON with empty
/// fields left out. Catalogs written before this format hold the whole record there;
/// [`decode_record`] reads both.
#[derive(Serialize)]
struct StoredRef<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    title: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    bbox: Option<[f64; 4]>,
    #[serde(skip_serializing_if = "str::is_empty")]
    text: &'a str,
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    meta: &'a serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    manifest_digest: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tracking_id: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    further_info_url: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    license: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    citation: &'a Option<String>,
    /// The record's own facets name `project` (so the facets column's `project` is
    /// not the one added from the record's project).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    own_project_facet: bool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Stored {
    title: String,
    bbox: Option<[f64; 4]>,
    text: String,
    meta: serde_json::Value,
    sha256: Option<String>,
    manifest_digest: Option<String>,
    node: Option<String>,
    tracking_id: Option<String>,
    further_info_url: Option<String>,
    license: Option<String>,
    citation: Option<String>,
    own_project_facet: bool,
    /// Present only in rows of the earlier format (the whole record as JSON).
    facets: Option<BTreeMap<String, String>>,
}

impl Prepared {
    pub fn new(r: &Record) -> Result<Prepared> {
        r.validate()?;
        let data = serde_json::to_string(&StoredRef {
            title: &r.title,
            bbox: r.bbox,
            text: &r.text,
            meta: &r.meta,
            sha256: &r.sha256,
            manifest_digest: &r.manifest_digest,
            node: &r.node,
            tracking_id: &r.tracking_id,
            further_info_url: &r.further_info_url,
            license: &r.license,
            citation: &r.citation,
            own_project_facet: r.facets.contains_key("project"),
        })?;
        if data.len() > MAX_META + MAX_TEXT + 64 * 1024 {
            return invalid(format!("record is {} bytes as JSON, too large", data.len()));
        }
        Ok(Prepared {
            cols: Columns {
                name: r.name.clone(),
                version: check_int("version", r.version)?,
                project: r.project.clone(),
                size: check_int("size", r.size)?,
                time_start: r.time_start.clone(),
                time_end: r.time_end.clone(),
                facets: encode_facets(&r.index_facets()),
                data,
            },
            body: r.body(),
            loc: r.node.clone().map(|n| (n, r.manifest_digest.clone())),
        })
    }
}

/// A stored row: its columns and its `data`.
pub(crate) struct Columns {
    pub name: String,
    pub version: i64,
    pub project: String,
    pub size: i64,
    pub time_start: Option<String>,
    pub time_end: Option<String>,
    pub facets: String,
    pub data: String,
}

/// Rebuilds a record from its row (a rename changes only the name column). Rows of the
/// earlier format carry their facets in `data` too; the other fields agree with the
/// columns there, so the columns are used for both.
pub(crate) fn decode_record(c: Columns) -> Result<Record> {
    let unsigned = |what: &str, v: i64| {
        u64::try_from(v).map_err(|_| crate::error::Error::Corrupt(format!("negative {what} {v}")))
    };
    let s: Stored = serde_json::from_str(&c.data)?;
    let facets = match s.facets {
        Some(f) => f,
        None => {
            let mut f: BTreeMap<String, String> = decode_facets(&c.facets)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            if !s.own_project_facet && !c.project.is_empty() {
                f.remove("project");
            }
            f
        }
    };
    // Rows written before these fields existed have them in `meta`'s attributes only.
    let attr = |k: &str| {
        s.meta
            .pointer(&format!("/attributes/{k}/value"))
            .and_then(serde_json::Value::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty() && v.len() <= MAX_VALUE && !has_control(v))
            .map(str::to_string)
    };
    let tracking_id = s.tracking_id.or_else(|| attr("tracking_id"));
    let further_info_url = s.further_info_url.or_else(|| attr("further_info_url"));
    let license = s.license.or_else(|| attr("license"));
    let citation = s.citation.or_else(|| attr("citation"));
    Ok(Record {
        name: c.name,
        version: unsigned("version", c.version)?,
        project: c.project,
        facets,
        title: s.title,
        size: unsigned("size", c.size)?,
        time_start: c.time_start,
        time_end: c.time_end,
        bbox: s.bbox,
        text: s.text,
        meta: s.meta,
        sha256: s.sha256,
        manifest_digest: s.manifest_digest,
        node: s.node,
        tracking_id,
        further_info_url,
        license,
        citation,
    })
}

#[cfg(test)]
mod tests {
    use super::has_control;

    #[test]
    fn control_test_agrees_with_char_is_control() {
        let mut samples: Vec<String> = ["", "plain", "tas_Amon", "é ü 中文 🌍", "a\u{a0}b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for c in (0u32..0x250).chain([0x2028, 0xfeff, 0x1_f600]) {
            if let Some(ch) = char::from_u32(c) {
                samples.push(format!("x{ch}y"));
            }
        }
        for s in &samples {
            assert_eq!(has_control(s), s.chars().any(char::is_control), "{s:?}");
        }
    }
}
