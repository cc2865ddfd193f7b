//! Example data: a small CMIP6-like DRS tree of valid netCDF-4 (classic model, deflated)
//! files, for demonstrations and tests. Deterministic: the same bytes on every run (no
//! clock, no randomness; tracking ids are hashes of the path).

use std::path::{Path, PathBuf};

use netcdf_writer::{NcAttrValue, NcFileBuilder, NcWriteFormat, NcWriteOptions};

use crate::netcdf::Calendar;

/// Why the example tree could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("netCDF writer: {0}")]
    Write(String),
    #[error("bad example definition: {0}")]
    Definition(String),
}

fn werr(e: netcdf_writer::Error) -> ExampleError {
    ExampleError::Write(e.to_string())
}

/// One dataset of the tree (one DRS directory).
struct Dataset {
    activity: &'static str,
    institution_id: &'static str,
    source_id: &'static str,
    experiment_id: &'static str,
    member_id: &'static str,
    table_id: &'static str,
    variable_id: &'static str,
    grid_label: &'static str,
    version: &'static str,
    calendar: &'static str,
    /// Files as (start year, start month, number of months).
    files: &'static [(i64, u8, u32)],
}

const DATASETS: &[Dataset] = &[
    Dataset {
        activity: "CMIP",
        institution_id: "CCCma",
        source_id: "CanESM5",
        experiment_id: "historical",
        member_id: "r1i1p1f1",
        table_id: "Amon",
        variable_id: "tas",
        grid_label: "gn",
        version: "v20190429",
        calendar: "noleap",
        files: &[(1850, 1, 24), (1852, 1, 24)],
    },
    Dataset {
        activity: "CMIP",
        institution_id: "CCCma",
        source_id: "CanESM5",
        experiment_id: "historical",
        member_id: "r1i1p1f1",
        table_id: "Amon",
        variable_id: "tas",
        grid_label: "gn",
        version: "v20190306",
        calendar: "noleap",
        files: &[(1850, 1, 48)],
    },
    Dataset {
        activity: "CMIP",
        institution_id: "CCCma",
        source_id: "CanESM5",
        experiment_id: "historical",
        member_id: "r2i1p1f1",
        table_id: "Amon",
        variable_id: "tas",
        grid_label: "gn",
        version: "v20190429",
        calendar: "noleap",
        files: &[(1850, 1, 24)],
    },
    Dataset {
        activity: "ScenarioMIP",
        institution_id: "CCCma",
        source_id: "CanESM5",
        experiment_id: "ssp585",
        member_id: "r1i1p1f1",
        table_id: "Amon",
        variable_id: "pr",
        grid_label: "gn",
        version: "v20190429",
        calendar: "noleap",
        files: &[(2015, 1, 24), (2017, 1, 24)],
    },
    Dataset {
        activity: "CMIP",
        institution_id: "MIROC",
        source_id: "MIROC6",
        experiment_id: "historical",
        member_id: "r1i1p1f1",
        table_id: "Amon",
        variable_id: "psl",
        grid_label: "gn",
        version: "v20181212",
        calendar: "proleptic_gregorian",
        files: &[(1850, 1, 24)],
    },
    Dataset {
        activity: "CMIP",
        institution_id: "MIROC",
        source_id: "MIROC6",
        experiment_id: "piControl",
        member_id: "r1i1p1f1",
        table_id: "Omon",
        variable_id: "tos",
        grid_label: "gn",
        version: "v20181212",
        calendar: "proleptic_gregorian",
        files: &[(3200, 1, 24)],
    },
    Dataset {
        activity: "ScenarioMIP",
        institution_id: "MIROC",
        source_id: "MIROC6",
        experiment_id: "ssp585",
        member_id: "r1i1p1f1",
        table_id: "Amon",
        variable_id: "tas",
        grid_label: "gn",
        version: "v20190627",
        calendar: "proleptic_gregorian",
        files: &[(2015, 1, 24)],
    },
    Dataset {
        activity: "CMIP",
        institution_id: "IPSL",
        source_id: "IPSL-CM6A-LR",
        experiment_id: "historical",
        member_id: "r1i1p1f1",
        table_id: "Amon",
        variable_id: "tas",
        grid_label: "gr",
        version: "v20180803",
        calendar: "proleptic_gregorian",
        files: &[(1850, 1, 24)],
    },
    Dataset {
        activity: "ScenarioMIP",
        institution_id: "IPSL",
        source_id: "IPSL-CM6A-LR",
        experiment_id: "ssp585",
        member_id: "r1i1p1f1",
        table_id: "day",
        variable_id: "pr",
        grid_label: "gr",
        version: "v20190903",
        calendar: "proleptic_gregorian",
        files: &[(2015, 1, 3), (2015, 4, 3)],
    },
    Dataset {
        activity: "CMIP",
        institution_id: "MOHC",
        source_id: "UKESM1-0-LL",
        experiment_id: "historical",
        member_id: "r1i1p1f2",
        table_id: "Amon",
        variable_id: "tas",
        grid_label: "gn",
        version: "v20190406",
        calendar: "360_day",
        files: &[(1850, 1, 24), (1852, 1, 24)],
    },
    Dataset {
        activity: "ScenarioMIP",
        institution_id: "MOHC",
        source_id: "UKESM1-0-LL",
        experiment_id: "ssp585",
        member_id: "r1i1p1f2",
        table_id: "Omon",
        variable_id: "tos",
        grid_label: "gn",
        version: "v20190726",
        calendar: "360_day",
        files: &[(2015, 1, 24)],
    },
    Dataset {
        activity: "CMIP",
        institution_id: "MOHC",
        source_id: "UKESM1-0-LL",
        experiment_id: "piControl",
        member_id: "r1i1p1f2",
        table_id: "day",
        variable_id: "tas",
        grid_label: "gn",
        version: "v20190827",
        calendar: "360_day",
        files: &[(2960, 1, 3)],
    },
];

fn institution(id: &str) -> &'static str {
    match id {
        "CCCma" => "Canadian Centre for Climate Modelling and Analysis, Environment and Climate Change Canada, Victoria, BC V8P 5C2, Canada",
        "MIROC" => "JAMSTEC (Japan Agency for Marine-Earth Science and Technology, Kanagawa 236-0001, Japan), AORI (Atmosphere and Ocean Research Institute, The University of Tokyo, Chiba 277-8564, Japan), NIES (National Institute for Environmental Studies, Ibaraki 305-8506, Japan), and R-CCS (RIKEN Center for Computational Science, Hyogo 650-0047, Japan)",
        "IPSL" => "Institut Pierre Simon Laplace, Paris 75252, France",
        _ => "Met Office Hadley Centre, Fitzroy Road, Exeter, Devon, EX1 3PB, UK",
    }
}

fn experiment(id: &str) -> &'static str {
    match id {
        "historical" => "all-forcing simulation of the recent past",
        "ssp585" => "update of RCP8.5 based on SSP5",
        _ => "pre-industrial control",
    }
}

/// (realm, units, standard_name, long_name, cell_methods) of a variable.
fn variable_info(
    var: &str,
) -> (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
) {
    match var {
        "tas" => (
            "atmos",
            "K",
            "air_temperature",
            "Near-Surface Air Temperature",
            "area: time: mean",
        ),
        "pr" => (
            "atmos",
            "kg m-2 s-1",
            "precipitation_flux",
            "Precipitation",
            "area: time: mean",
        ),
        "psl" => (
            "atmos",
            "Pa",
            "air_pressure_at_mean_sea_level",
            "Sea Level Pressure",
            "area: time: mean",
        ),
        _ => (
            "ocean",
            "degC",
            "sea_surface_temperature",
            "Sea Surface Temperature",
            "area: mean where sea time: mean",
        ),
    }
}

/// 64-bit FNV-1a, for deterministic tracking ids.
fn fnv(seed: u64, s: &str) -> u64 {
    s.bytes().fold(seed, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn tracking_id(path: &str) -> String {
    let a = fnv(0xcbf2_9ce4_8422_2325, path);
    let b = fnv(0x6c62_272e_07bb_0142, path);
    format!(
        "hdl:21.14100/{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

const NLAT: usize = 18;
const NLON: usize = 36;

/// Time axis of one file: (time values, bounds) in days since 1850-01-01.
fn time_axis(
    cal: Calendar,
    daily: bool,
    (y0, m0, months): (i64, u8, u32),
) -> Result<(Vec<f64>, Vec<f64>, String), ExampleError> {
    let bad = || ExampleError::Definition(format!("date {y0}-{m0} in {cal:?}"));
    let epoch = cal.day_number(1850, 1, 1).ok_or_else(bad)?;
    let month_start = |k: u32| -> Result<i64, ExampleError> {
        let idx = i64::from(m0) - 1 + i64::from(k);
        let (y, m) = (y0 + idx.div_euclid(12), (idx.rem_euclid(12) + 1) as u8);
        Ok(cal.day_number(y, m, 1).ok_or_else(bad)? - epoch)
    };
    let (first, end) = (month_start(0)?, month_start(months)?);
    let mut t = Vec::new();
    let mut b = Vec::new();
    if daily {
        for d in first..end {
            t.push(d as f64 + 0.5);
            b.extend([d as f64, (d + 1) as f64]);
        }
    } else {
        for k in 0..months {
            let (s, e) = (month_start(k)?, month_start(k + 1)?);
            t.push((s + e) as f64 / 2.0);
            b.extend([s as f64, e as f64]);
        }
    }
    let (ys, ms, ds) = cal.date(first + epoch);
    let (ye, me, de) = cal.date(end - 1 + epoch);
    let range = if daily {
        format!("{ys:04}{ms:02}{ds:02}-{ye:04}{me:02}{de:02}")
    } else {
        format!("{ys:04}{ms:02}-{ye:04}{me:02}")
    };
    Ok((t, b, range))
}

/// A smooth, compressible field: latitude gradient plus a seasonal cycle.
fn field(var: &str, times: &[f64], lat: &[f64], lon: &[f64]) -> Vec<f32> {
    let mut out = Vec::with_capacity(times.len() * lat.len() * lon.len());
    for &t in times {
        let season = (t / 365.0 * std::f64::consts::TAU).sin();
        for &la in lat {
            let s = la.to_radians().sin();
            for &lo in lon {
                let wave = (lo.to_radians() * 2.0).cos();
                let v = match var {
                    "tas" => 288.0 - 35.0 * s * s + 8.0 * season * s + wave,
                    "pr" => 3.0e-5 * (1.0 - s * s) + 1.0e-6 * (1.0 + wave),
                    "psl" => 101_325.0 + 1500.0 * (3.0 * s).cos() + 200.0 * season,
                    _ if la.abs() > 70.0 || (lo > 240.0 && lo < 300.0 && la > 0.0) => 1.0e20,
                    _ => 28.0 - 26.0 * s * s + 2.0 * season * s,
                };
                out.push(v as f32);
            }
        }
    }
    out
}

fn text(s: impl Into<String>) -> NcAttrValue {
    NcAttrValue::Chars(s.into())
}

fn build_file(
    d: &Dataset,
    rel_dir: &str,
    file_name: &str,
    span: (i64, u8, u32),
) -> Result<Vec<u8>, ExampleError> {
    let cal =
        Calendar::parse(d.calendar).ok_or_else(|| ExampleError::Definition(d.calendar.into()))?;
    let daily = d.table_id == "day";
    let (times, bounds, _) = time_axis(cal, daily, span)?;
    let (realm, units, standard_name, long_name, cell_methods) = variable_info(d.variable_id);
    let lat: Vec<f64> = (0..NLAT).map(|i| -85.0 + 10.0 * i as f64).collect();
    let lon: Vec<f64> = (0..NLON).map(|i| 5.0 + 10.0 * i as f64).collect();
    let lat_b: Vec<f64> = lat.iter().flat_map(|x| [x - 5.0, x + 5.0]).collect();
    let lon_b: Vec<f64> = lon.iter().flat_map(|x| [x - 5.0, x + 5.0]).collect();
    let variant = d.member_id.rsplit('-').next().unwrap_or(d.member_id);
    let frequency = if daily { "day" } else { "mon" };

    let mut b = NcFileBuilder::new();
    let t = b.add_unlimited_dimension("time").map_err(werr)?;
    let nb = b.add_dimension("bnds", 2).map_err(werr)?;
    let la = b.add_dimension("lat", NLAT as u64).map_err(werr)?;
    let lo = b.add_dimension("lon", NLON as u64).map_err(werr)?;

    let tv = b.add_variable::<f64>("time", &[t]).map_err(werr)?;
    for (k, v) in [
        ("bounds", "time_bnds"),
        ("units", "days since 1850-01-01"),
        ("calendar", d.calendar),
        ("axis", "T"),
        ("long_name", "time"),
        ("standard_name", "time"),
    ] {
        b.add_variable_attribute(tv, k, text(v)).map_err(werr)?;
    }
    let tb = b.add_variable::<f64>("time_bnds", &[t, nb]).map_err(werr)?;
    let lav = b.add_variable::<f64>("lat", &[la]).map_err(werr)?;
    for (k, v) in [
        ("bounds", "lat_bnds"),
        ("units", "degrees_north"),
        ("axis", "Y"),
        ("long_name", "Latitude"),
        ("standard_name", "latitude"),
    ] {
        b.add_variable_attribute(lav, k, text(v)).map_err(werr)?;
    }
    let lab = b.add_variable::<f64>("lat_bnds", &[la, nb]).map_err(werr)?;
    let lov = b.add_variable::<f64>("lon", &[lo]).map_err(werr)?;
    for (k, v) in [
        ("bounds", "lon_bnds"),
        ("units", "degrees_east"),
        ("axis", "X"),
        ("long_name", "Longitude"),
        ("standard_name", "longitude"),
    ] {
        b.add_variable_attribute(lov, k, text(v)).map_err(werr)?;
    }
    let lob = b.add_variable::<f64>("lon_bnds", &[lo, nb]).map_err(werr)?;
    let dv = b
        .add_variable::<f32>(d.variable_id, &[t, la, lo])
        .map_err(werr)?;
    for (k, v) in [
        ("standard_name", standard_name),
        ("long_name", long_name),
        ("units", units),
        ("cell_methods", cell_methods),
        ("cell_measures", "area: areacella"),
    ] {
        b.add_variable_attribute(dv, k, text(v)).map_err(werr)?;
    }
    b.set_variable_fill_value(dv, 1.0e20_f32).map_err(werr)?;
    b.add_variable_attribute(dv, "missing_value", NcAttrValue::Floats(vec![1.0e20]))
        .map_err(werr)?;
    b.set_variable_deflate(dv, Some(4), true).map_err(werr)?;
    b.set_variable_chunking(dv, [1, NLAT as u64, NLON as u64])
        .map_err(werr)?;

    // Global attributes, in CMOR's order; they repeat the path's components.
    let version_date = &d.version[1..];
    let creation = format!(
        "{}-{}-{}T12:00:00Z",
        &version_date[..4],
        &version_date[4..6],
        &version_date[6..8]
    );
    let ripf: Vec<i32> = variant
        .split(['r', 'i', 'p', 'f'])
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    if ripf.len() != 4 {
        return Err(ExampleError::Definition(format!("variant label {variant}")));
    }
    let mut globals: Vec<(&str, NcAttrValue)> = vec![
        ("Conventions", text("CF-1.7 CMIP-6.2")),
        ("activity_id", text(d.activity)),
        ("creation_date", text(creation)),
        ("data_specs_version", text("01.00.29")),
        ("experiment", text(experiment(d.experiment_id))),
        ("experiment_id", text(d.experiment_id)),
        ("forcing_index", NcAttrValue::Ints(vec![ripf[3]])),
        ("frequency", text(frequency)),
        (
            "further_info_url",
            text(format!(
                "https://furtherinfo.es-doc.org/CMIP6.{}.{}.{}.none.{}",
                d.institution_id, d.source_id, d.experiment_id, d.member_id
            )),
        ),
        ("grid", text(if d.grid_label == "gr" { "regridded to a 10x10 degree grid" } else { "native atmosphere/ocean grid, 10x10 degree example" })),
        ("grid_label", text(d.grid_label)),
        ("initialization_index", NcAttrValue::Ints(vec![ripf[1]])),
        ("institution", text(institution(d.institution_id))),
        ("institution_id", text(d.institution_id)),
        ("license", text(format!(
            "CMIP6 model data produced by {} is licensed under a Creative Commons Attribution 4.0 International License (https://creativecommons.org/licenses). Example data written by Granary: not real model output.",
            d.institution_id
        ))),
        ("member_id", text(d.member_id)),
        ("mip_era", text("CMIP6")),
        ("nominal_resolution", text("1000 km")),
        ("physics_index", NcAttrValue::Ints(vec![ripf[2]])),
        ("product", text("model-output")),
        ("realization_index", NcAttrValue::Ints(vec![ripf[0]])),
        ("realm", text(realm)),
        ("source_id", text(d.source_id)),
        ("source_type", text("AOGCM")),
        ("sub_experiment_id", text("none")),
        ("table_id", text(d.table_id)),
        ("title", text(format!("{} output prepared for CMIP6", d.source_id))),
        ("tracking_id", text(tracking_id(&format!("{rel_dir}/{file_name}")))),
        ("variable_id", text(d.variable_id)),
        ("variant_label", text(variant)),
    ];
    for (k, v) in globals.drain(..) {
        b.add_attribute(k, v).map_err(werr)?;
    }

    b.write_variable(tv, &times).map_err(werr)?;
    b.write_variable(tb, &bounds).map_err(werr)?;
    b.write_variable(lav, &lat).map_err(werr)?;
    b.write_variable(lab, &lat_b).map_err(werr)?;
    b.write_variable(lov, &lon).map_err(werr)?;
    b.write_variable(lob, &lon_b).map_err(werr)?;
    b.write_variable(dv, &field(d.variable_id, &times, &lat, &lon))
        .map_err(werr)?;
    let (_, bytes) = b
        .to_vec(NcWriteOptions {
            format: NcWriteFormat::Nc4Classic,
        })
        .map_err(werr)?;
    Ok(bytes)
}

/// Writes the example tree under `dir` (`dir/CMIP6/<activity>/…/<file>.nc`) and returns
/// the written files, in a fixed order. Files are netCDF-4, classic model, deflated.
pub fn write_tree(dir: &Path) -> Result<Vec<PathBuf>, ExampleError> {
    let mut written = Vec::new();
    for d in DATASETS {
        let rel_dir = format!(
            "CMIP6/{}/{}/{}/{}/{}/{}/{}/{}/{}",
            d.activity,
            d.institution_id,
            d.source_id,
            d.experiment_id,
            d.member_id,
            d.table_id,
            d.variable_id,
            d.grid_label,
            d.version
        );
        let cal = Calendar::parse(d.calendar)
            .ok_or_else(|| ExampleError::Definition(d.calendar.into()))?;
        let full_dir = dir.join(&rel_dir);
        std::fs::create_dir_all(&full_dir).map_err(|source| ExampleError::Io {
            path: full_dir.display().to_string(),
            source,
        })?;
        for &span in d.files {
            let (_, _, range) = time_axis(cal, d.table_id == "day", span)?;
            let name = format!(
                "{}_{}_{}_{}_{}_{}_{}.nc",
                d.variable_id,
                d.table_id,
                d.source_id,
                d.experiment_id,
                d.member_id,
                d.grid_label,
                range
            );
            let bytes = build_file(d, &rel_dir, &name, span)?;
            let path = full_dir.join(&name);
            std::fs::write(&path, bytes).map_err(|source| ExampleError::Io {
                path: path.display().to_string(),
                source,
            })?;
            written.push(path);
        }
    }
    Ok(written)
}
