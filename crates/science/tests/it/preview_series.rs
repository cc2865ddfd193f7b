//! Time series (`preview::series`) on ncgen files: a point's values and an area's
//! cos(latitude)-weighted mean as computed here from the CDL's own numbers, masked
//! values left out; a point on a contiguous variable reads a small part of it (one
//! value per step, a strided read); the values cap and a variable without time refused.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use granary_science::netcdf::{Limits, ReadAt};
use granary_science::preview::{self, Place, PreviewError, SeriesSelect};

use crate::netcdf_support::ncgen;

/// A file in memory that counts the bytes read from it.
struct Counted {
    bytes: Vec<u8>,
    read: AtomicU64,
}

impl ReadAt for Counted {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let end = offset
            .checked_add(len as u64)
            .filter(|&e| e <= self.len())
            .ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "past the end")
            })?;
        self.read.fetch_add(len as u64, Ordering::Relaxed);
        Ok(self.bytes[offset as usize..end as usize].to_vec())
    }
}

/// `v(time, lat, lon)`: `nt` steps over `ny` latitudes (-60..60) and `nx` longitudes
/// (0..360), value `t * 1000 + y * nx + x` (masked where that is a multiple of 7),
/// stored contiguous; `flat(lat, lon)` without time.
fn cdl(nt: usize, ny: usize, nx: usize) -> String {
    let lat: Vec<String> = (0..ny)
        .map(|j| format!("{}", -60.0 + 120.0 * j as f64 / (ny - 1) as f64))
        .collect();
    let lon: Vec<String> = (0..nx)
        .map(|i| format!("{}", 360.0 * i as f64 / nx as f64))
        .collect();
    let time: Vec<String> = (0..nt).map(|t| format!("{}", t as f64 + 0.5)).collect();
    let v: Vec<String> = (0..nt * ny * nx)
        .map(|k| {
            let (t, r) = (k / (ny * nx), k % (ny * nx));
            let x = t * 1000 + r;
            if x % 7 == 0 {
                "_".to_string()
            } else {
                x.to_string()
            }
        })
        .collect();
    let flat: Vec<String> = (0..ny * nx).map(|k| k.to_string()).collect();
    format!(
        "netcdf s {{\ndimensions:\n  time = {nt} ;\n  lat = {ny} ;\n  lon = {nx} ;\nvariables:\n\
  double time(time) ;\n    time:units = \"days since 2000-01-01\" ;\n    time:calendar = \"noleap\" ;\n\
  double lat(lat) ;\n    lat:units = \"degrees_north\" ;\n  double lon(lon) ;\n    lon:units = \"degrees_east\" ;\n\
  float v(time, lat, lon) ;\n    v:units = \"K\" ;\n    v:_FillValue = -999.f ;\n    v:_Storage = \"contiguous\" ;\n\
  float flat(lat, lon) ;\n\
data:\n  time = {} ;\n  lat = {} ;\n  lon = {} ;\n  v = {} ;\n  flat = {} ;\n}}\n",
        time.join(", "),
        lat.join(", "),
        lon.join(", "),
        v.join(", "),
        flat.join(", ")
    )
}

fn make(dir: &Path, nt: usize, ny: usize, nx: usize) -> Arc<Counted> {
    let src = dir.join("s.cdl");
    let out = dir.join("s.nc");
    std::fs::write(&src, cdl(nt, ny, nx)).expect("cdl");
    ncgen("netCDF-4", &src, &out);
    Arc::new(Counted {
        bytes: std::fs::read(&out).expect("nc"),
        read: AtomicU64::new(0),
    })
}

fn select(variable: &str, place: Place) -> SeriesSelect {
    SeriesSelect {
        variable: variable.into(),
        level: None,
        place,
        max_values: preview::MAX_SERIES_VALUES,
    }
}

#[test]
fn point_and_area_series_equal_the_files_values() {
    let dir = tempfile::tempdir().expect("tmp");
    let (nt, ny, nx) = (3, 5, 8);
    let f = make(dir.path(), nt, ny, nx);
    let value = |t: usize, y: usize, x: usize| {
        let k = t * 1000 + y * nx + x;
        (k % 7 != 0).then_some(k as f64)
    };
    // Nearest to (31, -50): lat 30 (row 3), lon 315 (column 7).
    let s = preview::series(
        f.clone(),
        &select("v", Place::point(31.0, -50.0).unwrap()),
        &Limits::default(),
    )
    .expect("series");
    assert_eq!(s.grid_point, Some([30.0, 315.0]));
    assert_eq!(s.dates[1].as_deref(), Some("2000-01-02T12:00:00"));
    for t in 0..nt {
        match value(t, 3, 7) {
            Some(v) => assert_eq!(s.values[t], v),
            None => assert!(s.values[t].is_nan()),
        }
    }
    // Across the seam (-50..50: longitudes 315, 0, 45), latitudes -30..30.
    let s = preview::series(
        f.clone(),
        &select("v", Place::area(-50.0, -30.0, 50.0, 30.0).unwrap()),
        &Limits::default(),
    )
    .expect("series");
    assert_eq!(s.points, 9);
    for t in 0..nt {
        let (mut num, mut den) = (0.0, 0.0);
        for y in 1..4 {
            let w = (-60.0f64 + 30.0 * y as f64).to_radians().cos();
            for x in [7, 0, 1] {
                if let Some(v) = value(t, y, x) {
                    num += w * v;
                    den += w;
                }
            }
        }
        let want = num / den;
        assert!(
            (s.values[t] - want).abs() <= 1e-9 * want.abs(),
            "{t}: {} {want}",
            s.values[t]
        );
    }
    let png = preview::render_series(&s).expect("png");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn a_point_reads_a_small_part_of_a_contiguous_variable() {
    let dir = tempfile::tempdir().expect("tmp");
    let (nt, ny, nx) = (60, 40, 80);
    let f = make(dir.path(), nt, ny, nx);
    let var_bytes = (nt * ny * nx * 4) as u64;
    let s = preview::series(
        f.clone(),
        &select("v", Place::point(0.0, 180.0).unwrap()),
        &Limits::default(),
    )
    .expect("series");
    assert_eq!(s.values.len(), nt);
    let read = f.read.load(Ordering::Relaxed);
    eprintln!(
        "point series: {read} bytes read of a {var_bytes}-byte variable ({} file)",
        f.len()
    );
    assert!(
        read < var_bytes / 4,
        "{read} bytes read for a {var_bytes}-byte variable"
    );
}

#[test]
fn the_values_cap_and_a_variable_without_time_are_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = make(dir.path(), 3, 5, 8);
    let mut sel = select("v", Place::area(-180.0, -90.0, 180.0, 90.0).unwrap());
    sel.max_values = 3 * 40 - 1;
    match preview::series(f.clone(), &sel, &Limits::default()) {
        Err(PreviewError::BadRequest(why)) => assert!(why.contains("narrow the bbox"), "{why}"),
        other => panic!("{other:?}"),
    }
    sel.max_values = 3 * 40;
    assert!(preview::series(f.clone(), &sel, &Limits::default()).is_ok());
    match preview::series(
        f.clone(),
        &select("flat", Place::point(0.0, 0.0).unwrap()),
        &Limits::default(),
    ) {
        Err(PreviewError::NotAvailable(why)) => assert!(why.contains("no time dimension"), "{why}"),
        other => panic!("{other:?}"),
    }
    match preview::series(
        f,
        &select("v", Place::area(1.0, 1.0, 2.0, 2.0).unwrap()),
        &Limits::default(),
    ) {
        Err(PreviewError::BadRequest(why)) => assert!(why.contains("no grid point"), "{why}"),
        other => panic!("{other:?}"),
    }
}
