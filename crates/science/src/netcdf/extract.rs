//! From the parser's model to [`NcMeta`]: attributes, dimensions, variables, the time
//! coverage and the bounding box.

use std::collections::BTreeMap;

use netcdf_reader::{NcAttrValue, NcAttribute, NcFile, NcFormat, NcType, NcVariable};

use super::calendar::{Calendar, TimeUnits};
use super::meta::{
    map_err, AttrValue, BBox, Dim, Format, Limits, NcError, NcMeta, TimeCoverage, Var,
};

pub(super) fn extract(
    file: &NcFile,
    file_len: u64,
    limits: &Limits,
    subgroups: usize,
) -> Result<NcMeta, NcError> {
    let format = match file.format() {
        NcFormat::Classic => Format::Classic,
        NcFormat::Offset64 => Format::Offset64,
        NcFormat::Cdf5 => Format::Cdf5,
        NcFormat::Nc4 => Format::Netcdf4,
        NcFormat::Nc4Classic => Format::Netcdf4Classic,
    };
    // Root-group accessors only: they do not recurse into sub-groups.
    let root_dims = file.dimensions().map_err(map_err)?;
    let root_vars = file.variables().map_err(map_err)?;
    let root_attrs = file.global_attributes().map_err(map_err)?;
    let mut warnings = Vec::new();
    if root_dims.len() > limits.max_dims {
        return Err(NcError::Limit(format!(
            "{} dimensions (limit {})",
            root_dims.len(),
            limits.max_dims
        )));
    }
    if root_vars.len() > limits.max_vars {
        return Err(NcError::Limit(format!(
            "{} variables (limit {})",
            root_vars.len(),
            limits.max_vars
        )));
    }
    if subgroups > 0 {
        warnings.push(format!(
            "{subgroups} sub-group(s) not read (only the root group is)"
        ));
    }
    if file.as_classic().is_some() {
        check_classic_extents(root_vars, file_len)?;
    }
    let global = attributes("global", root_attrs, limits, &mut warnings)?;
    let dims = root_dims
        .iter()
        .map(|d| Dim {
            name: d.name.clone(),
            len: d.size,
            unlimited: d.is_unlimited,
        })
        .collect();
    let mut variables = Vec::with_capacity(root_vars.len());
    for v in root_vars {
        let attrs = attributes(&v.name, &v.attributes, limits, &mut warnings)?;
        let text = |k: &str| attrs.get(k).and_then(AttrValue::as_str).map(str::to_string);
        variables.push(Var {
            name: v.name.clone(),
            dims: v.dimensions.iter().map(|d| d.name.clone()).collect(),
            shape: v.shape(),
            dtype: dtype_name(&v.dtype).to_string(),
            units: text("units"),
            standard_name: text("standard_name"),
            long_name: text("long_name"),
            fill_value: attrs.get("_FillValue").and_then(AttrValue::as_f64),
            attributes: attrs,
        });
    }
    let mut meta = NcMeta {
        format,
        global,
        dims,
        variables,
        time: None,
        bbox: None,
        warnings,
    };
    let reader = CoordReader {
        file,
        file_len,
        limits,
    };
    match time_coverage(&meta, &reader) {
        Ok(t) => meta.time = t,
        Err(e) => meta.warnings.push(e),
    }
    match bbox(&meta, &reader) {
        Ok(b) => meta.bbox = b,
        Err(e) => meta.warnings.push(e),
    }
    Ok(meta)
}

/// A classic file's fixed-size variables must lie inside the file (record variables
/// are checked by the parser against the record count).
fn check_classic_extents(vars: &[NcVariable], file_len: u64) -> Result<(), NcError> {
    for v in vars.iter().filter(|v| !v.is_record_var) {
        let size = v.dtype.size().unwrap_or(1) as u64;
        let bytes = v
            .num_elements()
            .map_err(|e| NcError::Malformed(format!("{}: {e}", v.name)))?
            .saturating_mul(size);
        let end = v.data_offset.saturating_add(bytes);
        if end > file_len {
            return Err(NcError::Malformed(format!(
                "variable {} declares data up to byte {end}, past the end of the {file_len}-byte file",
                v.name
            )));
        }
    }
    Ok(())
}

fn dtype_name(t: &NcType) -> &'static str {
    match t {
        NcType::Byte => "byte",
        NcType::Char => "char",
        NcType::Short => "short",
        NcType::Int => "int",
        NcType::Float => "float",
        NcType::Double => "double",
        NcType::UByte => "ubyte",
        NcType::UShort => "ushort",
        NcType::UInt => "uint",
        NcType::Int64 => "int64",
        NcType::UInt64 => "uint64",
        NcType::String => "string",
        NcType::Enum { .. } => "enum",
        NcType::Compound { .. } => "compound",
        NcType::Opaque { .. } => "opaque",
        NcType::Array { .. } => "array",
        NcType::VLen { .. } => "vlen",
    }
}

/// A 32-bit float through its shortest decimal form, so `0.1f32` reads as `0.1`.
fn widen(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

fn attributes(
    owner: &str,
    attrs: &[NcAttribute],
    limits: &Limits,
    warnings: &mut Vec<String>,
) -> Result<BTreeMap<String, AttrValue>, NcError> {
    if attrs.len() > limits.max_attrs {
        return Err(NcError::Limit(format!(
            "{owner}: {} attributes (limit {})",
            attrs.len(),
            limits.max_attrs
        )));
    }
    let mut out = BTreeMap::new();
    for a in attrs {
        let value = match &a.value {
            NcAttrValue::Chars(s) => AttrValue::Text(s.clone()),
            NcAttrValue::Strings(v) if v.len() == 1 => AttrValue::Text(v[0].clone()),
            NcAttrValue::Strings(v) => AttrValue::Strings(v.clone()),
            NcAttrValue::Bytes(v) => AttrValue::Int(v.iter().map(|&x| i64::from(x)).collect()),
            NcAttrValue::Shorts(v) => AttrValue::Int(v.iter().map(|&x| i64::from(x)).collect()),
            NcAttrValue::Ints(v) => AttrValue::Int(v.iter().map(|&x| i64::from(x)).collect()),
            NcAttrValue::Int64s(v) => AttrValue::Int(v.clone()),
            NcAttrValue::UBytes(v) => AttrValue::UInt(v.iter().map(|&x| u64::from(x)).collect()),
            NcAttrValue::UShorts(v) => AttrValue::UInt(v.iter().map(|&x| u64::from(x)).collect()),
            NcAttrValue::UInts(v) => AttrValue::UInt(v.iter().map(|&x| u64::from(x)).collect()),
            NcAttrValue::UInt64s(v) => AttrValue::UInt(v.clone()),
            NcAttrValue::Floats(v) => AttrValue::Float(v.iter().map(|&x| widen(x)).collect()),
            NcAttrValue::Doubles(v) => AttrValue::Float(v.clone()),
            other => AttrValue::Other(format!("{other:?}").chars().take(200).collect()),
        };
        let lossy = match &value {
            AttrValue::Text(s) => s.contains('\u{FFFD}'),
            AttrValue::Strings(v) => v.iter().any(|s| s.contains('\u{FFFD}')),
            _ => false,
        };
        if lossy {
            warnings.push(format!(
                "{owner}:{}: invalid UTF-8 in attribute text, replaced by U+FFFD",
                a.name
            ));
        }
        out.insert(a.name.clone(), value);
    }
    Ok(out)
}

struct CoordReader<'a> {
    file: &'a NcFile,
    file_len: u64,
    limits: &'a Limits,
}

impl CoordReader<'_> {
    fn var(&self, name: &str) -> Result<&NcVariable, String> {
        self.file
            .variables()
            .map_err(|e| e.to_string())?
            .iter()
            .find(|v| v.name == name)
            .ok_or_else(|| format!("{name}: variable not found"))
    }

    /// The finite, non-fill values of a numeric variable, after checking its declared
    /// size against the limit and (for uncompressed formats) against the file size.
    fn values(&self, var: &NcVariable, meta_var: &Var) -> Result<Vec<f64>, String> {
        let n = var
            .num_elements()
            .map_err(|e| format!("{}: {e}", var.name))?;
        if n > self.limits.max_coord_values {
            return Err(format!(
                "{}: {n} values, more than the {} read for coordinates",
                var.name, self.limits.max_coord_values
            ));
        }
        let size = var.dtype.size().unwrap_or(8) as u64;
        let classic = self.file.as_classic().is_some();
        // Uncompressed data cannot be larger than the file; compressed data is bounded by
        // the value limit and, as a guard against absurd ratios, 1024x the file size.
        let cap = if classic {
            self.file_len
        } else {
            self.file_len.saturating_mul(1024)
        };
        if n.saturating_mul(size) > cap {
            return Err(format!(
                "{}: declares {} bytes of data in a {}-byte file",
                var.name,
                n.saturating_mul(size),
                self.file_len
            ));
        }
        let array = self
            .file
            .read_variable_as_f64(&var.name)
            .map_err(|e| format!("{}: {e}", var.name))?;
        let mut skip: Vec<f64> = Vec::new();
        for k in ["_FillValue", "missing_value"] {
            if let Some(v) = meta_var.attributes.get(k) {
                if let AttrValue::Float(xs) = v {
                    skip.extend(xs);
                } else if let Some(x) = v.as_f64() {
                    skip.push(x);
                }
            }
        }
        // A float32 fill value widened through its decimal form may differ from the
        // widened data value: compare at float32 precision as well.
        Ok(array
            .iter()
            .copied()
            .filter(|x| x.is_finite())
            .filter(|x| !skip.iter().any(|s| s == x || (*s as f32) == (*x as f32)))
            .collect())
    }
}

fn min_max(values: &[f64]) -> Option<(f64, f64)> {
    let mut it = values.iter().copied();
    let first = it.next()?;
    Some(it.fold((first, first), |(lo, hi), x| (lo.min(x), hi.max(x))))
}

fn has_since(v: &Var) -> bool {
    v.units
        .as_deref()
        .is_some_and(|u| u.to_ascii_lowercase().contains(" since "))
}

fn find_time(meta: &NcMeta) -> Option<&Var> {
    let is_coord = |v: &Var| v.dims.len() == 1 && v.dims[0] == v.name;
    meta.variable("time")
        .filter(|v| has_since(v))
        .or_else(|| meta.variables.iter().find(|v| is_coord(v) && has_since(v)))
        .or_else(|| {
            meta.variables.iter().find(|v| {
                has_since(v)
                    && (v.standard_name.as_deref() == Some("time")
                        || v.attributes.get("axis").and_then(AttrValue::as_str) == Some("T"))
            })
        })
}

fn time_coverage(meta: &NcMeta, reader: &CoordReader<'_>) -> Result<Option<TimeCoverage>, String> {
    let Some(tvar) = find_time(meta) else {
        return Ok(None);
    };
    let units = tvar.units.clone().unwrap_or_default();
    let calendar_raw = tvar
        .attributes
        .get("calendar")
        .and_then(AttrValue::as_str)
        .unwrap_or("standard")
        .to_string();
    let Some(calendar) = Calendar::parse(&calendar_raw) else {
        return Err(format!(
            "{}: unknown calendar {calendar_raw:?}, time coverage not decoded",
            tvar.name
        ));
    };
    let parsed = TimeUnits::parse(&units, calendar).map_err(|e| format!("{}: {e}", tvar.name))?;
    let bounds_name = tvar
        .attributes
        .get("bounds")
        .and_then(AttrValue::as_str)
        .map(str::to_string)
        .or_else(|| {
            ["time_bnds", "time_bounds"]
                .into_iter()
                .find(|n| meta.variable(n).is_some())
                .map(str::to_string)
        })
        .filter(|n| meta.variable(n).is_some());
    let chosen = bounds_name
        .as_deref()
        .and_then(|n| meta.variable(n))
        .unwrap_or(tvar);
    let nc_var = reader.var(&chosen.name)?;
    let values = reader.values(nc_var, chosen)?;
    let Some((lo, hi)) = min_max(&values) else {
        return Ok(None);
    };
    let start = parsed
        .decode(lo, calendar)
        .map_err(|e| format!("{}: {e}", chosen.name))?;
    let end = parsed
        .decode(hi, calendar)
        .map_err(|e| format!("{}: {e}", chosen.name))?;
    Ok(Some(TimeCoverage {
        start: start.to_string(),
        end: end.to_string(),
        calendar: calendar_raw,
        units,
        from_variable: chosen.name.clone(),
    }))
}

fn is_axis(v: &Var, names: &[&str], standard: &str, units: &[&str]) -> bool {
    v.dims.len() <= 2
        && !v.dims.is_empty()
        && (names.contains(&v.name.as_str())
            || v.standard_name.as_deref() == Some(standard)
            || v.units.as_deref().is_some_and(|u| units.contains(&u)))
}

fn find_axis<'a>(
    meta: &'a NcMeta,
    names: &[&str],
    standard: &str,
    units: &[&str],
) -> Option<&'a Var> {
    // Variables named as another variable's bounds are not coordinates.
    let bounds: Vec<&str> = meta
        .variables
        .iter()
        .filter_map(|v| v.attributes.get("bounds").and_then(AttrValue::as_str))
        .collect();
    let candidates: Vec<&Var> = meta
        .variables
        .iter()
        .filter(|v| !bounds.contains(&v.name.as_str()) && is_axis(v, names, standard, units))
        .collect();
    let coord = |v: &&&Var| v.dims.len() == 1 && v.dims[0] == v.name;
    candidates
        .iter()
        .find(coord)
        .or_else(|| candidates.first())
        .copied()
}

fn bbox(meta: &NcMeta, reader: &CoordReader<'_>) -> Result<Option<BBox>, String> {
    let lat = find_axis(
        meta,
        &["lat", "latitude", "nav_lat"],
        "latitude",
        &["degrees_north", "degree_north", "degrees_N", "degree_N"],
    );
    let lon = find_axis(
        meta,
        &["lon", "longitude", "nav_lon"],
        "longitude",
        &["degrees_east", "degree_east", "degrees_E", "degree_E"],
    );
    let (Some(lat), Some(lon)) = (lat, lon) else {
        return Ok(None);
    };
    let read = |v: &Var| -> Result<Option<(f64, f64)>, String> {
        let nc = reader.var(&v.name)?;
        Ok(min_max(&reader.values(nc, v)?))
    };
    let (Some((lat_min, lat_max)), Some((lon_min, lon_max))) = (read(lat)?, read(lon)?) else {
        return Ok(None);
    };
    Ok(Some(BBox {
        lat_min,
        lat_max,
        lon_min,
        lon_max,
    }))
}
