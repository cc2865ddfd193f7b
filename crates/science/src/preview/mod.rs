//! Quick-look pictures: one 2-D lat/lon field of a netCDF variable, decoded (filters,
//! `scale_factor`/`add_offset`, `_FillValue`/`missing_value`/valid range masked) and
//! rendered as a PNG with a colour bar, the units and the CF `long_name`.
//!
//! [`list`] names the variables that can be drawn (and why the others cannot),
//! [`field`] decodes one time step and level of one of them, [`render`] draws it;
//! [`series`] reads one over the whole time axis at a point or as an area mean
//! (`series.rs`), [`render_series`] draws that as a line plot. No
//! HTTP, no cache: the gateway does that. Every read goes through the same guards as
//! the metadata read ([`crate::netcdf::ReadAt`] behind a byte budget, a deadline, the
//! HDF5 truncation and group-cycle checks, a worker thread under `catch_unwind`), and a
//! field is decoded only when it holds at most [`MAX_VALUES`] values: a header claiming
//! a huge grid is refused before anything is allocated.

mod render;
mod series;

use std::sync::Arc;

use netcdf_reader::{NcFile, NcSliceInfo, NcSliceInfoElem};
use serde::Serialize;

use crate::netcdf::calendar::{Calendar, TimeUnits};
use crate::netcdf::{Limits, NcError, NcMeta, ReadAt, Var};

pub use render::{render, render_series, RenderError, SERIES_HEIGHT, WIDTH};
pub use series::{series, Place, Series, SeriesSelect, MAX_SERIES_VALUES, MAX_STEPS};

/// Largest field decoded for a picture: 16 Mi values (128 MiB as f64), e.g. a
/// 4096 × 4096 grid; a 0.1° global grid (3600 × 1800) fits.
pub const MAX_VALUES: u64 = 16 << 20;

/// A variable that can be drawn.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct PlotVar {
    pub name: String,
    pub long_name: Option<String>,
    pub units: Option<String>,
    pub dims: Vec<String>,
    pub shape: Vec<u64>,
    /// The time dimension among the leading ones (indexed by `time`), if any.
    pub time_dim: Option<String>,
    /// The first other leading dimension (indexed by `level`), if any.
    pub level_dim: Option<String>,
}

/// A variable that cannot be drawn, and why.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct NotPlottable {
    pub name: String,
    pub reason: String,
}

/// What [`list`] finds.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Listing {
    pub variables: Vec<PlotVar>,
    pub not_plottable: Vec<NotPlottable>,
}

/// Which field to decode.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Select {
    pub variable: String,
    /// The time step: an index (default 0).
    pub time: Option<u64>,
    /// Or the time step whose decoded date starts with this text (`1850-03`,
    /// `2014-12-16T12`), in the file's calendar.
    pub time_iso: Option<String>,
    /// The index along the first non-time leading dimension (default 0).
    pub level: Option<u64>,
}

/// One decoded 2-D field.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Field {
    pub variable: String,
    pub long_name: Option<String>,
    pub units: Option<String>,
    pub dims: Vec<String>,
    /// The index taken along each leading dimension (in order).
    pub index: Vec<u64>,
    /// The decoded date of the time step, when the time axis decodes.
    pub time: Option<String>,
    /// The level coordinate's value and units, when there is one.
    pub level: Option<(f64, Option<String>)>,
    pub lat: Vec<f64>,
    pub lon: Vec<f64>,
    /// Row-major (lat, lon), masked values as NaN (`null` in JSON).
    pub values: Vec<f64>,
}

/// Why a picture cannot be made.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PreviewError {
    /// No such variable (404).
    #[error("no variable {0:?} in this file")]
    NoVariable(String),
    /// An index or date outside the file (400).
    #[error("{0}")]
    BadRequest(String),
    /// The file or the variable cannot be drawn (422).
    #[error("not available: {0}")]
    NotAvailable(String),
}

fn nc(e: NcError) -> PreviewError {
    PreviewError::NotAvailable(match e {
        NcError::Timeout(t) => format!("reading the field took longer than {t:?}"),
        other => other.to_string(),
    })
}

fn is_numeric(dtype: &str) -> bool {
    matches!(
        dtype,
        "byte"
            | "short"
            | "int"
            | "float"
            | "double"
            | "ubyte"
            | "ushort"
            | "uint"
            | "int64"
            | "uint64"
    )
}

fn text(v: &Var, key: &str) -> Option<String> {
    v.attributes
        .get(key)
        .and_then(|a| a.as_str())
        .map(|s| s.trim().to_string())
}

/// A 1-D coordinate variable (its own dimension) of the given axis.
fn coord<'a>(meta: &'a NcMeta, dim: &str, lat: bool) -> Option<&'a Var> {
    let v = meta.variable(dim)?;
    if v.dims.len() != 1 || v.dims[0] != dim || !is_numeric(&v.dtype) {
        return None;
    }
    let (std_name, unit_words, names, axis): (&str, &[&str], &[&str], &str) = if lat {
        (
            "latitude",
            &[
                "degrees_north",
                "degree_north",
                "degree_n",
                "degrees_n",
                "degreen",
                "degreesn",
            ],
            &["lat", "latitude"],
            "Y",
        )
    } else {
        (
            "longitude",
            &[
                "degrees_east",
                "degree_east",
                "degree_e",
                "degrees_e",
                "degreee",
                "degreese",
            ],
            &["lon", "longitude"],
            "X",
        )
    };
    let units = v.units.as_deref().unwrap_or("").trim().to_ascii_lowercase();
    let ok = v.standard_name.as_deref() == Some(std_name)
        || unit_words.contains(&units.as_str())
        || (names.contains(&v.name.to_ascii_lowercase().as_str())
            && (units.is_empty() || units.starts_with("degree")))
        || (text(v, "axis").as_deref() == Some(axis) && units.starts_with("degree"));
    ok.then_some(v)
}

fn is_time(meta: &NcMeta, dim: &str) -> bool {
    meta.variable(dim).is_some_and(|v| {
        v.dims.len() == 1
            && (v.units.as_deref().is_some_and(|u| u.contains(" since "))
                || v.standard_name.as_deref() == Some("time")
                || text(v, "axis").as_deref() == Some("T"))
    }) || (dim == "time" && meta.variable(dim).is_none())
}

/// Whether `v` can be drawn, and its time and level dimensions.
fn plottable(meta: &NcMeta, v: &Var) -> Result<PlotVar, String> {
    if !is_numeric(&v.dtype) {
        return Err(format!("type {} is not numeric", v.dtype));
    }
    let n = v.dims.len();
    if n < 2 {
        return Err("fewer than two dimensions".into());
    }
    let (y, x) = (&v.dims[n - 2], &v.dims[n - 1]);
    if coord(meta, y, true).is_none() || coord(meta, x, false).is_none() {
        return Err(format!(
            "not on a latitude/longitude grid with 1-D coordinates (its last two dimensions are {y}, {x})"
        ));
    }
    let values = v.shape[n - 2].saturating_mul(v.shape[n - 1]);
    if values > MAX_VALUES {
        return Err(format!(
            "the field has {} × {} = {values} values, more than the {MAX_VALUES} (16 Mi) a preview decodes",
            v.shape[n - 2],
            v.shape[n - 1]
        ));
    }
    if values == 0 {
        return Err("the field is empty".into());
    }
    if let Some(i) = v.shape[..n - 2].iter().position(|&l| l == 0) {
        return Err(format!("dimension {} is empty", v.dims[i]));
    }
    let time_dim = v.dims[..n - 2].iter().find(|d| is_time(meta, d)).cloned();
    let level_dim = v.dims[..n - 2]
        .iter()
        .find(|d| Some(*d) != time_dim.as_ref())
        .cloned();
    Ok(PlotVar {
        name: v.name.clone(),
        long_name: v.long_name.clone(),
        units: v.units.clone(),
        dims: v.dims.clone(),
        shape: v.shape.clone(),
        time_dim,
        level_dim,
    })
}

/// The variables of `meta` that can be drawn, and the others (of two or more
/// dimensions, not coordinates or bounds) with the reason.
pub fn listing(meta: &NcMeta) -> Listing {
    let bounds: Vec<String> = meta
        .variables
        .iter()
        .filter_map(|v| text(v, "bounds"))
        .collect();
    let mut out = Listing {
        variables: Vec::new(),
        not_plottable: Vec::new(),
    };
    for v in &meta.variables {
        if v.dims.len() < 2 || bounds.contains(&v.name) {
            continue;
        }
        match plottable(meta, v) {
            Ok(p) => out.variables.push(p),
            Err(reason) => out.not_plottable.push(NotPlottable {
                name: v.name.clone(),
                reason,
            }),
        }
    }
    out
}

/// Reads the metadata through the guards and lists the variables ([`listing`]).
pub fn list(source: Arc<dyn ReadAt>, limits: &Limits) -> Result<Listing, PreviewError> {
    let meta = crate::netcdf::read_from(source, limits).map_err(nc)?;
    Ok(listing(&meta))
}

/// Decodes the field `sel` picks: one time step and level of a variable on a 1-D
/// lat/lon grid, reading only what the reader needs for that slice (the chunks it
/// touches, or its byte ranges in a netCDF-3 file).
pub fn field(
    source: Arc<dyn ReadAt>,
    sel: &Select,
    limits: &Limits,
) -> Result<Field, PreviewError> {
    let sel = sel.clone();
    let meta_limits = limits.clone();
    // The decoded slice (f64) may not exceed the field cap.
    let max_read = MAX_VALUES.saturating_mul(8);
    let r = crate::netcdf::run_with_file(source, limits, max_read, move |file, len, subgroups| {
        let meta = crate::netcdf::extract_meta(file, len, &meta_limits, subgroups)?;
        Ok(decode(file, &meta, &sel))
    });
    r.map_err(nc)?
}

fn decode(file: &NcFile, meta: &NcMeta, sel: &Select) -> Result<Field, PreviewError> {
    let v = meta
        .variable(&sel.variable)
        .ok_or_else(|| PreviewError::NoVariable(sel.variable.clone()))?;
    let p = plottable(meta, v).map_err(PreviewError::NotAvailable)?;
    let n = v.dims.len();
    let mut index = Vec::new();
    let mut selections = Vec::new();
    let mut time_label = None;
    let mut level = None;
    let mut used_time = false;
    let mut used_level = false;
    for (&len, dim) in v.shape[..n - 2].iter().zip(&v.dims) {
        let mut i = 0;
        if Some(dim) == p.time_dim.as_ref() {
            used_time = true;
            i = match (&sel.time_iso, sel.time) {
                (Some(iso), _) => time_by_date(file, meta, dim, iso)?,
                (None, t) => t.unwrap_or(0),
            };
            if i >= len {
                return Err(PreviewError::BadRequest(format!(
                    "time index {i} is past the last step ({len} steps along {dim})"
                )));
            }
            time_label = time_at(file, meta, dim, i);
        } else if Some(dim) == p.level_dim.as_ref() {
            used_level = true;
            i = sel.level.unwrap_or(0);
            if i >= len {
                return Err(PreviewError::BadRequest(format!(
                    "level index {i} is past the last ({len} along {dim})"
                )));
            }
            level = coord_value(file, meta, dim, i);
        }
        index.push(i);
        selections.push(NcSliceInfoElem::Index(i));
    }
    if !used_time && (sel.time.is_some_and(|t| t > 0) || sel.time_iso.is_some()) {
        return Err(PreviewError::BadRequest(format!(
            "{} has no time dimension",
            v.name
        )));
    }
    if !used_level && sel.level.is_some_and(|l| l > 0) {
        return Err(PreviewError::BadRequest(format!(
            "{} has no level dimension",
            v.name
        )));
    }
    for _ in 0..2 {
        selections.push(NcSliceInfoElem::Slice {
            start: 0,
            end: u64::MAX,
            step: 1,
        });
    }
    let slice = NcSliceInfo { selections };
    let data = file
        .read_variable_slice_unpacked_masked(&v.name, &slice)
        .map_err(|e| PreviewError::NotAvailable(format!("{}: {e}", v.name)))?;
    let values: Vec<f64> = data.iter().copied().collect();
    let (ny, nx) = (v.shape[n - 2], v.shape[n - 1]);
    if values.len() as u64 != ny * nx {
        return Err(PreviewError::NotAvailable(format!(
            "{}: the reader gave {} values for a {ny} × {nx} field",
            v.name,
            values.len()
        )));
    }
    let axis = |name: &str| -> Result<Vec<f64>, PreviewError> {
        let a = file
            .read_variable_as_f64(name)
            .map_err(|e| PreviewError::NotAvailable(format!("coordinate {name}: {e}")))?;
        Ok(a.iter().copied().collect())
    };
    let lat = axis(&v.dims[n - 2])?;
    let lon = axis(&v.dims[n - 1])?;
    if lat.len() as u64 != ny || lon.len() as u64 != nx {
        return Err(PreviewError::NotAvailable(
            "the lat/lon coordinates do not match the field's shape".into(),
        ));
    }
    Ok(Field {
        variable: v.name.clone(),
        long_name: v.long_name.clone(),
        units: v.units.clone(),
        dims: v.dims.clone(),
        index,
        time: time_label,
        level,
        lat,
        lon,
        values,
    })
}

/// The decoding of a time coordinate: its values' units and calendar.
fn time_units(meta: &NcMeta, dim: &str) -> Option<(TimeUnits, Calendar)> {
    let v = meta.variable(dim)?;
    let cal = match text(v, "calendar") {
        Some(c) => Calendar::parse(&c)?,
        None => Calendar::parse("standard")?,
    };
    let units = TimeUnits::parse(v.units.as_deref()?, cal).ok()?;
    Some((units, cal))
}

fn coord_value(file: &NcFile, meta: &NcMeta, dim: &str, i: u64) -> Option<(f64, Option<String>)> {
    let v = meta.variable(dim)?;
    if v.dims.len() != 1 || !is_numeric(&v.dtype) {
        return None;
    }
    let s = NcSliceInfo {
        selections: vec![NcSliceInfoElem::Index(i)],
    };
    // A 0-d result for an index.
    let a = file.read_variable_slice_as_f64(dim, &s).ok()?;
    let x = a.iter().next().copied()?;
    Some((x, v.units.clone()))
}

fn time_at(file: &NcFile, meta: &NcMeta, dim: &str, i: u64) -> Option<String> {
    let (units, cal) = time_units(meta, dim)?;
    let (x, _) = coord_value(file, meta, dim, i)?;
    units.decode(x, cal).ok().map(|d| d.to_string())
}

/// The first time step whose decoded date starts with `iso`.
fn time_by_date(file: &NcFile, meta: &NcMeta, dim: &str, iso: &str) -> Result<u64, PreviewError> {
    let (units, cal) = time_units(meta, dim).ok_or_else(|| {
        PreviewError::BadRequest(format!(
            "the time axis {dim} does not decode to dates; give an index"
        ))
    })?;
    let len = meta.variable(dim).map(|v| v.shape[0]).unwrap_or(0);
    if len > 1 << 24 {
        return Err(PreviewError::BadRequest(format!(
            "{dim} has {len} steps: give an index"
        )));
    }
    let vals = file
        .read_variable_as_f64(dim)
        .map_err(|e| PreviewError::NotAvailable(format!("coordinate {dim}: {e}")))?;
    let mut first = None;
    let mut last = None;
    for (i, &x) in vals.iter().enumerate() {
        let Ok(d) = units.decode(x, cal) else {
            continue;
        };
        let d = d.to_string();
        if d.starts_with(iso) {
            return Ok(i as u64);
        }
        if first.is_none() {
            first = Some(d.clone());
        }
        last = Some(d);
    }
    Err(PreviewError::BadRequest(format!(
        "no time step at {iso:?} (steps run from {} to {})",
        first.unwrap_or_default(),
        last.unwrap_or_default()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netcdf::{AttrValue, Format};
    use std::collections::BTreeMap;

    fn var(name: &str, dims: &[(&str, u64)], units: Option<&str>) -> Var {
        Var {
            name: name.into(),
            dims: dims.iter().map(|d| d.0.to_string()).collect(),
            shape: dims.iter().map(|d| d.1).collect(),
            dtype: "float".into(),
            units: units.map(str::to_string),
            standard_name: None,
            long_name: None,
            fill_value: None,
            attributes: BTreeMap::new(),
        }
    }

    fn meta(ny: u64, nx: u64) -> NcMeta {
        let mut time = var("time", &[("time", 3)], Some("days since 1850-01-01"));
        time.attributes
            .insert("calendar".into(), AttrValue::Text("noleap".into()));
        NcMeta {
            format: Format::Netcdf4,
            global: BTreeMap::new(),
            dims: vec![],
            variables: vec![
                time,
                var("lat", &[("lat", ny)], Some("degrees_north")),
                var("lon", &[("lon", nx)], Some("degrees_east")),
                var("tas", &[("time", 3), ("lat", ny), ("lon", nx)], Some("K")),
                var("tos", &[("time", 3), ("j", 10), ("i", 20)], Some("degC")),
            ],
            time: None,
            bbox: None,
            warnings: vec![],
        }
    }

    #[test]
    fn lat_lon_fields_are_listed_and_other_grids_say_why() {
        let l = listing(&meta(90, 180));
        assert_eq!(l.variables.len(), 1);
        assert_eq!(l.variables[0].name, "tas");
        assert_eq!(l.variables[0].time_dim.as_deref(), Some("time"));
        assert_eq!(l.variables[0].level_dim, None);
        assert_eq!(l.not_plottable.len(), 1);
        assert!(l.not_plottable[0]
            .reason
            .starts_with("not on a latitude/longitude grid"));
    }

    #[test]
    fn a_field_over_the_cap_is_refused_on_its_declared_shape() {
        // 100,000 × 100,000 floats: 40 GB claimed.
        let l = listing(&meta(100_000, 100_000));
        assert!(l.variables.is_empty());
        let why = &l
            .not_plottable
            .iter()
            .find(|n| n.name == "tas")
            .expect("tas")
            .reason;
        assert!(why.contains("more than the 16777216 (16 Mi)"), "{why}");
        // Exactly at the cap is allowed.
        let l = listing(&meta(4096, 4096));
        assert_eq!(l.variables.len(), 1);
    }
}
