//! What a read of netCDF metadata gives and how it can fail: the format, attributes,
//! dimensions, variables, time coverage and bounding box ([`NcMeta`]), the errors
//! ([`NcError`]), the bounds on a read ([`Limits`]) and the signature check ([`sniff`]).
//! A leaf below the parser's guards and extraction, which both use it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The on-disk format of a netCDF file.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// CDF-1 (`CDF\x01`).
    Classic,
    /// CDF-2, 64-bit offset (`CDF\x02`).
    Offset64,
    /// CDF-5, 64-bit data (`CDF\x05`).
    Cdf5,
    /// netCDF-4 (HDF5), enhanced model.
    Netcdf4,
    /// netCDF-4 (HDF5) restricted to the classic model (`_nc3_strict`).
    Netcdf4Classic,
}

/// An attribute value. Text is UTF-8 (invalid bytes replaced by U+FFFD, with a warning);
/// 32-bit floats are widened through their shortest decimal form (`0.1f32` → `0.1`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type", content = "value", rename_all = "lowercase")]
pub enum AttrValue {
    Text(String),
    Strings(Vec<String>),
    Int(Vec<i64>),
    UInt(Vec<u64>),
    Float(Vec<f64>),
    /// A user-defined (enum, compound, opaque, vlen) value, described not decoded.
    Other(String),
}

impl AttrValue {
    /// The value as text: strings as they are (several joined by `", "`), numbers
    /// formatted and joined by `", "` as `ncdump` does.
    pub fn as_text(&self) -> String {
        fn join<T: ToString>(v: &[T]) -> String {
            v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
        }
        match self {
            AttrValue::Text(s) | AttrValue::Other(s) => s.clone(),
            AttrValue::Strings(v) => v.join(", "),
            AttrValue::Int(v) => join(v),
            AttrValue::UInt(v) => join(v),
            AttrValue::Float(v) => join(v),
        }
    }

    /// The first value as a number, when numeric.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            AttrValue::Int(v) => v.first().map(|&x| x as f64),
            AttrValue::UInt(v) => v.first().map(|&x| x as f64),
            AttrValue::Float(v) => v.first().copied(),
            _ => None,
        }
    }

    /// The value as text when it is text.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            AttrValue::Text(s) => Some(s),
            AttrValue::Strings(v) if v.len() == 1 => Some(&v[0]),
            _ => None,
        }
    }
}

/// A dimension; `len` is the current length (the record count when unlimited).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Dim {
    pub name: String,
    pub len: u64,
    pub unlimited: bool,
}

/// A variable's metadata (its data is never read, except coordinate variables).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Var {
    pub name: String,
    pub dims: Vec<String>,
    pub shape: Vec<u64>,
    /// CDL type name: byte, char, short, int, float, double, ubyte, ushort, uint, int64,
    /// uint64, string, or enum/compound/opaque/vlen/array.
    pub dtype: String,
    pub units: Option<String>,
    pub standard_name: Option<String>,
    pub long_name: Option<String>,
    pub fill_value: Option<f64>,
    pub attributes: BTreeMap<String, AttrValue>,
}

/// The time span of the file, decoded with its calendar.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TimeCoverage {
    /// ISO 8601 without zone, to the second: `1850-01-16T12:00:00`.
    pub start: String,
    pub end: String,
    /// The `calendar` attribute as written (`standard` when absent, the CF default).
    pub calendar: String,
    pub units: String,
    /// The variable the coverage was taken from (`time_bnds` when bounds exist).
    pub from_variable: String,
}

/// The min/max of the latitude and longitude coordinate values.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct BBox {
    pub lat_min: f64,
    pub lat_max: f64,
    pub lon_min: f64,
    pub lon_max: f64,
}

/// Everything [`read`] reports about a file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NcMeta {
    pub format: Format,
    pub global: BTreeMap<String, AttrValue>,
    pub dims: Vec<Dim>,
    pub variables: Vec<Var>,
    pub time: Option<TimeCoverage>,
    pub bbox: Option<BBox>,
    /// Things that were read but odd (invalid UTF-8, unknown calendar, skipped parts).
    pub warnings: Vec<String>,
}

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NcError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("not a netCDF file: no CDF-1/2/5 or HDF5 signature")]
    NotNetcdf,
    #[error("malformed netCDF file: {0}")]
    Malformed(String),
    #[error("netCDF file exceeds a reader limit: {0}")]
    Limit(String),
    #[error("reading the netCDF metadata took longer than {0:?}; file abandoned")]
    Timeout(Duration),
    #[error("the netCDF parser failed on this file (caught panic: {0})")]
    Panic(String),
}

/// Bounds on what a read may cost.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Wall-clock bound on one read (header parse plus coordinate reads).
    pub timeout: Duration,
    /// Total bytes the parser may request from the source.
    pub max_bytes_read: u64,
    /// Largest coordinate variable (values) read for the time coverage or bbox.
    pub max_coord_values: u64,
    /// Largest number of dimensions, variables, and attributes per owner.
    pub max_dims: usize,
    pub max_vars: usize,
    pub max_attrs: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(10),
            max_bytes_read: 1 << 30,
            max_coord_values: 64 << 20,
            max_dims: 4096,
            max_vars: 16384,
            max_attrs: 16384,
        }
    }
}

/// The format announced by a file's first bytes: `CDF\1`, `CDF\2`, `CDF\5` or the HDF5
/// signature `\x89HDF\r\n\x1a\n` (reported as [`Format::Netcdf4`]: telling the classic
/// model apart needs the file's attributes).
pub fn sniff(first_bytes: &[u8]) -> Option<Format> {
    match first_bytes {
        [b'C', b'D', b'F', 1, ..] => Some(Format::Classic),
        [b'C', b'D', b'F', 2, ..] => Some(Format::Offset64),
        [b'C', b'D', b'F', 5, ..] => Some(Format::Cdf5),
        [0x89, b'H', b'D', b'F', 0x0d, 0x0a, 0x1a, 0x0a, ..] => Some(Format::Netcdf4),
        _ => None,
    }
}

impl NcMeta {
    /// Every global attribute as text (numbers formatted, several values joined by ", ").
    pub fn global_strings(&self) -> BTreeMap<String, String> {
        self.global
            .iter()
            .map(|(k, v)| (k.clone(), v.as_text()))
            .collect()
    }

    /// Free text for search: global attribute text values, variable names, and their
    /// long and standard names, one item per line, without duplicates.
    pub fn text(&self) -> String {
        let mut items: Vec<String> = Vec::new();
        let mut push = |s: &str| {
            let s = s.trim();
            if !s.is_empty() && !items.iter().any(|i| i == s) {
                items.push(s.to_string());
            }
        };
        for v in self.global.values() {
            if matches!(v, AttrValue::Text(_) | AttrValue::Strings(_)) {
                push(&v.as_text());
            }
        }
        for v in &self.variables {
            push(&v.name);
            for s in [&v.long_name, &v.standard_name].into_iter().flatten() {
                push(s);
            }
        }
        items.join("\n")
    }

    /// A global text attribute (`tracking_id`, `further_info_url`, `license`) as
    /// one line: control characters (line breaks) become spaces, blanks around it
    /// are trimmed, and it is cut to at most `max` bytes at a character boundary.
    /// `None` when absent, not text, or blank.
    pub fn global_line(&self, key: &str, max: usize) -> Option<String> {
        let v = match self.global.get(key)? {
            AttrValue::Text(s) => s.clone(),
            AttrValue::Strings(v) => v.join(", "),
            _ => return None,
        };
        let line: String = v
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let mut line = line.trim();
        if line.len() > max {
            let mut end = max;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line = line[..end].trim_end();
        }
        (!line.is_empty()).then(|| line.to_string())
    }

    /// The variable called `name`.
    pub fn variable(&self, name: &str) -> Option<&Var> {
        self.variables.iter().find(|v| v.name == name)
    }
}

/// A reader error as ours: a bad signature is "not netCDF", anything else malformed.
pub(super) fn map_err(e: netcdf_reader::Error) -> NcError {
    match e {
        netcdf_reader::Error::InvalidMagic => NcError::NotNetcdf,
        netcdf_reader::Error::Hdf5(hdf5_reader::error::Error::InvalidMagic) => NcError::NotNetcdf,
        other => NcError::Malformed(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_line_is_one_trimmed_bounded_line() {
        let mut m = NcMeta {
            format: Format::Netcdf4,
            global: BTreeMap::new(),
            dims: vec![],
            variables: vec![],
            time: None,
            bbox: None,
            warnings: vec![],
        };
        let text = |s: &str| AttrValue::Text(s.into());
        m.global
            .insert("tracking_id".into(), text(" hdl:21.14100/x \n"));
        m.global
            .insert("license".into(), text("CMIP6 data\r\nare é licensed"));
        m.global.insert("blank".into(), text(" \t "));
        m.global.insert("n".into(), AttrValue::Int(vec![1]));
        m.global.insert(
            "two".into(),
            AttrValue::Strings(vec!["a".into(), "b".into()]),
        );
        assert_eq!(
            m.global_line("tracking_id", 100).as_deref(),
            Some("hdl:21.14100/x")
        );
        assert_eq!(
            m.global_line("license", 100).as_deref(),
            Some("CMIP6 data  are é licensed")
        );
        // Cut at a character boundary: `é` is two bytes.
        assert_eq!(
            m.global_line("license", 17).as_deref(),
            Some("CMIP6 data  are")
        );
        assert_eq!(
            m.global_line("license", 16).as_deref(),
            Some("CMIP6 data  are")
        );
        assert_eq!(m.global_line("two", 100).as_deref(), Some("a, b"));
        assert_eq!(m.global_line("blank", 100), None);
        assert_eq!(m.global_line("n", 100), None);
        assert_eq!(m.global_line("missing", 100), None);
    }
}
