//! Time series at a glance: one variable over a file's whole time axis, at the grid
//! point nearest a place ([`Place::Point`]) or averaged over a latitude/longitude box
//! ([`Place::Area`], weighted by the cosine of latitude), decoded as the map is
//! (filters, `scale_factor`/`add_offset`, fill values and valid range masked).
//!
//! Only the values needed are read: a point is one strided hyperslab (one value per
//! time step), a box one hyperslab per run of longitudes (two where it crosses the
//! grid's seam). What is read is bounded before anything is allocated: at most
//! [`MAX_SERIES_VALUES`] values (time steps × grid points) and [`MAX_STEPS`] steps.

use std::sync::Arc;

use netcdf_reader::{NcFile, NcSliceInfo, NcSliceInfoElem};
use serde::Serialize;

use super::{coord_value, nc, plottable, time_units, PreviewError};
use crate::netcdf::{Limits, NcMeta, ReadAt};

/// Most values read for one series: time steps × grid points (16 Mi, 128 MiB as f64),
/// e.g. 100 years of daily values over a 20 × 20 box, or 1 980 months over 8 000 points.
pub const MAX_SERIES_VALUES: u64 = 16 << 20;

/// Most time steps in one series (about 2 800 years of daily values).
pub const MAX_STEPS: u64 = 1 << 20;

/// Where the series is taken.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Place {
    /// The grid point nearest (latitude, longitude) in degrees.
    Point { lat: f64, lon: f64 },
    /// The cos(latitude)-weighted mean over the grid points inside the box (degrees;
    /// `west <= east`, a box over the seam as e.g. 170..190).
    Area {
        west: f64,
        south: f64,
        east: f64,
        north: f64,
    },
}

impl Place {
    /// A point: latitude in [-90, 90], longitude in [-360, 360].
    pub fn point(lat: f64, lon: f64) -> Result<Place, String> {
        if !lat.is_finite() || !(-90.0..=90.0).contains(&lat) {
            return Err(format!("latitude {lat} is outside -90..90"));
        }
        if !lon.is_finite() || !(-360.0..=360.0).contains(&lon) {
            return Err(format!("longitude {lon} is outside -360..360"));
        }
        Ok(Place::Point { lat, lon })
    }

    /// A box `west,south,east,north`: south <= north within -90..90, west <= east
    /// within -360..360 and at most 360 degrees apart.
    pub fn area(west: f64, south: f64, east: f64, north: f64) -> Result<Place, String> {
        for (what, x, lim) in [
            ("west", west, 360.0),
            ("south", south, 90.0),
            ("east", east, 360.0),
            ("north", north, 90.0),
        ] {
            if !x.is_finite() || !(-lim..=lim).contains(&x) {
                return Err(format!("bbox {what} {x} is outside -{lim}..{lim}"));
            }
        }
        if south > north {
            return Err(format!(
                "bbox is inverted: south {south} is north of north {north} (bbox=W,S,E,N)"
            ));
        }
        if west > east {
            return Err(format!(
                "bbox is inverted: west {west} is east of east {east} (bbox=W,S,E,N; across the seam, e.g. 170,-10,190,10)"
            ));
        }
        if east - west > 360.0 {
            return Err(format!(
                "bbox spans {} degrees of longitude (at most 360)",
                east - west
            ));
        }
        Ok(Place::Area {
            west,
            south,
            east,
            north,
        })
    }
}

/// Which series to read.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesSelect {
    pub variable: String,
    /// The index along the first non-time leading dimension (default 0).
    pub level: Option<u64>,
    pub place: Place,
    /// Values (steps × points) this read may take: [`MAX_SERIES_VALUES`] or what a
    /// dataset's earlier files left.
    pub max_values: u64,
}

/// One decoded series.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Series {
    pub variable: String,
    pub long_name: Option<String>,
    pub units: Option<String>,
    /// `point` or `area_mean`.
    pub method: String,
    /// The grid point taken (`point`): [latitude, longitude].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grid_point: Option<[f64; 2]>,
    /// The box asked (`area_mean`): [west, south, east, north].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bbox: Option<[f64; 4]>,
    /// Grid points per step (1 for a point).
    pub points: u64,
    /// The level coordinate's value and units, when there is one.
    pub level: Option<(f64, Option<String>)>,
    /// The decoded date of each step (`null` where the time axis does not decode).
    pub dates: Vec<Option<String>>,
    /// One value per step, masked steps (every point masked) as NaN (`null` in JSON).
    pub values: Vec<f64>,
}

/// Reads the series `sel` asks for through the guards.
pub fn series(
    source: Arc<dyn ReadAt>,
    sel: &SeriesSelect,
    limits: &Limits,
) -> Result<Series, PreviewError> {
    let sel = sel.clone();
    let meta_limits = limits.clone();
    let max_read = sel.max_values.min(MAX_SERIES_VALUES).saturating_mul(8);
    let r = crate::netcdf::run_with_file(source, limits, max_read, move |file, len, subgroups| {
        let meta = crate::netcdf::extract_meta(file, len, &meta_limits, subgroups)?;
        Ok(decode(file, &meta, &sel))
    });
    r.map_err(nc)?
}

/// The index of the value nearest `x` (longitudes compared modulo 360).
fn nearest(axis: &[f64], x: f64, circular: bool) -> Option<usize> {
    let dist = |a: f64| {
        if circular {
            let d = (a - x).rem_euclid(360.0);
            d.min(360.0 - d)
        } else {
            (a - x).abs()
        }
    };
    axis.iter()
        .enumerate()
        .filter(|(_, a)| a.is_finite())
        .min_by(|(_, a), (_, b)| dist(**a).total_cmp(&dist(**b)))
        .map(|(i, _)| i)
}

/// Runs of consecutive indexes `[start, end)` for which `inside` holds.
fn runs(n: usize, inside: impl Fn(usize) -> bool) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for i in 0..n {
        if inside(i) {
            match out.last_mut() {
                Some(r) if r.1 == i => r.1 = i + 1,
                _ => out.push((i, i + 1)),
            }
        }
    }
    out
}

fn decode(file: &NcFile, meta: &NcMeta, sel: &SeriesSelect) -> Result<Series, PreviewError> {
    let v = meta
        .variable(&sel.variable)
        .ok_or_else(|| PreviewError::NoVariable(sel.variable.clone()))?;
    let p = plottable(meta, v).map_err(PreviewError::NotAvailable)?;
    let n = v.dims.len();
    let time_dim = p
        .time_dim
        .clone()
        .ok_or_else(|| PreviewError::NotAvailable(format!("{} has no time dimension", v.name)))?;
    let axis = |name: &str| -> Result<Vec<f64>, PreviewError> {
        let a = file
            .read_variable_as_f64(name)
            .map_err(|e| PreviewError::NotAvailable(format!("coordinate {name}: {e}")))?;
        Ok(a.iter().copied().collect())
    };
    let (ny, nx) = (v.shape[n - 2], v.shape[n - 1]);
    let lat = axis(&v.dims[n - 2])?;
    let lon = axis(&v.dims[n - 1])?;
    if lat.len() as u64 != ny || lon.len() as u64 != nx {
        return Err(PreviewError::NotAvailable(
            "the lat/lon coordinates do not match the field's shape".into(),
        ));
    }
    let mut steps = 0;
    let mut leading = Vec::new();
    let mut level = None;
    for (&len, dim) in v.shape[..n - 2].iter().zip(&v.dims) {
        if *dim == time_dim {
            steps = len;
            leading.push(NcSliceInfoElem::Slice {
                start: 0,
                end: len,
                step: 1,
            });
        } else if Some(dim) == p.level_dim.as_ref() {
            let i = sel.level.unwrap_or(0);
            if i >= len {
                return Err(PreviewError::BadRequest(format!(
                    "level index {i} is past the last ({len} along {dim})"
                )));
            }
            level = coord_value(file, meta, dim, i);
            leading.push(NcSliceInfoElem::Index(i));
        } else {
            leading.push(NcSliceInfoElem::Index(0));
        }
    }
    if p.level_dim.is_none() && sel.level.is_some_and(|l| l > 0) {
        return Err(PreviewError::BadRequest(format!(
            "{} has no level dimension",
            v.name
        )));
    }
    if steps > MAX_STEPS {
        return Err(PreviewError::BadRequest(format!(
            "{steps} time steps: more than the {MAX_STEPS} a series holds"
        )));
    }
    // The grid points: one (a point), or the box's latitude rows and longitude runs.
    let (rows, cols, grid_point, bbox) = match sel.place {
        Place::Point { lat: y, lon: x } => {
            let (Some(iy), Some(ix)) = (nearest(&lat, y, false), nearest(&lon, x, true)) else {
                return Err(PreviewError::NotAvailable(
                    "the grid has no finite coordinates".into(),
                ));
            };
            (
                (iy, iy + 1),
                vec![(ix, ix + 1)],
                Some([lat[iy], lon[ix]]),
                None,
            )
        }
        Place::Area {
            west,
            south,
            east,
            north,
        } => {
            let ys = runs(lat.len(), |i| (south..=north).contains(&lat[i]));
            let inside_lon = |i: usize| (lon[i] - west).rem_euclid(360.0) <= east - west;
            let xs = runs(lon.len(), inside_lon);
            // Latitudes are monotonic on these grids: one run; otherwise the span.
            let rows = match (ys.first(), ys.last()) {
                (Some(a), Some(b)) => (a.0, b.1),
                _ => (0, 0),
            };
            if rows.0 == rows.1 || xs.is_empty() {
                return Err(PreviewError::BadRequest(format!(
                    "no grid point inside the bbox {west},{south},{east},{north} (the grid: lat {}..{}, lon {}..{})",
                    lat.first().copied().unwrap_or(f64::NAN),
                    lat.last().copied().unwrap_or(f64::NAN),
                    lon.first().copied().unwrap_or(f64::NAN),
                    lon.last().copied().unwrap_or(f64::NAN)
                )));
            }
            (rows, xs, None, Some([west, south, east, north]))
        }
    };
    let points = (rows.1 - rows.0) as u64 * cols.iter().map(|c| (c.1 - c.0) as u64).sum::<u64>();
    let cap = sel.max_values.min(MAX_SERIES_VALUES);
    if steps.saturating_mul(points) > cap {
        return Err(PreviewError::BadRequest(format!(
            "{steps} time steps × {points} grid points = {} values, more than the {cap} a series reads; narrow the bbox",
            steps.saturating_mul(points)
        )));
    }
    let weights: Vec<f64> = (rows.0..rows.1)
        .map(|i| lat[i].to_radians().cos().max(0.0))
        .collect();
    let t = steps as usize;
    let mut sum = vec![0.0f64; t];
    let mut wsum = vec![0.0f64; t];
    for &(x0, x1) in &cols {
        let mut selections = leading.clone();
        selections.push(NcSliceInfoElem::Slice {
            start: rows.0 as u64,
            end: rows.1 as u64,
            step: 1,
        });
        selections.push(NcSliceInfoElem::Slice {
            start: x0 as u64,
            end: x1 as u64,
            step: 1,
        });
        let data = file
            .read_variable_slice_unpacked_masked(&v.name, &NcSliceInfo { selections })
            .map_err(|e| PreviewError::NotAvailable(format!("{}: {e}", v.name)))?;
        let (h, w) = (rows.1 - rows.0, x1 - x0);
        if data.len() != t * h * w {
            return Err(PreviewError::NotAvailable(format!(
                "{}: the reader gave {} values for {t} × {h} × {w}",
                v.name,
                data.len()
            )));
        }
        for (k, x) in data.iter().enumerate() {
            if x.is_finite() {
                let step = k / (h * w);
                let wt = weights[(k / w) % h];
                sum[step] += wt * x;
                wsum[step] += wt;
            }
        }
    }
    let values: Vec<f64> = sum
        .iter()
        .zip(&wsum)
        .map(|(s, w)| if *w > 0.0 { s / w } else { f64::NAN })
        .collect();
    let dates = match time_units(meta, &time_dim) {
        Some((units, cal)) => {
            let tv = axis(&time_dim)?;
            if tv.len() != t {
                return Err(PreviewError::NotAvailable(format!(
                    "{time_dim} has {} values for {t} steps",
                    tv.len()
                )));
            }
            tv.iter()
                .map(|&x| units.decode(x, cal).ok().map(|d| d.to_string()))
                .collect()
        }
        None => vec![None; t],
    };
    Ok(Series {
        variable: v.name.clone(),
        long_name: v.long_name.clone(),
        units: v.units.clone(),
        method: if grid_point.is_some() {
            "point"
        } else {
            "area_mean"
        }
        .into(),
        grid_point,
        bbox,
        points,
        level,
        dates,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_places_are_refused() {
        assert!(Place::point(999.0, 0.0).is_err());
        assert!(Place::point(0.0, f64::NAN).is_err());
        assert!(Place::point(0.0, 1e300).is_err());
        assert!(Place::area(0.0, 10.0, 10.0, -10.0)
            .unwrap_err()
            .contains("inverted"));
        assert!(Place::area(10.0, -10.0, 0.0, 10.0)
            .unwrap_err()
            .contains("inverted"));
        assert!(Place::area(-360.0, -90.0, 360.0, 90.0).is_err());
        assert!(Place::area(-180.0, -90.0, 180.0, 90.0).is_ok());
        assert!(Place::area(170.0, -10.0, 190.0, 10.0).is_ok());
    }

    #[test]
    fn nearest_points_and_runs() {
        let lon = [0.0, 90.0, 180.0, 270.0];
        assert_eq!(nearest(&lon, -80.0, true), Some(3));
        assert_eq!(nearest(&lon, 359.0, true), Some(0));
        assert_eq!(nearest(&[-45.0, 45.0], 10.0, false), Some(1));
        assert_eq!(nearest(&[], 10.0, false), None);
        // A box across the seam on a 0..360 grid: two runs.
        let inside = |i: usize| (lon[i] - (-100.0f64)).rem_euclid(360.0) <= 110.0;
        assert_eq!(runs(4, inside), vec![(0, 1), (3, 4)]);
    }
}
