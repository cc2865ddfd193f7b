//! The reader against Python netCDF4/cftime on ncgen-made fixtures, in all five kinds.

use crate::netcdf_support as support;

use granary_science::netcdf::{self, Calendar, Format, TimeUnits};

#[test]
fn fixtures_match_python_netcdf4_in_all_five_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let files = support::all_fixtures(dir.path());
    let paths: Vec<_> = files.iter().map(|(p, _, _)| p.clone()).collect();
    let py = support::python_dump(&paths);
    let mut problems = Vec::new();
    for (path, kind, stem) in &files {
        let meta = netcdf::read(path).unwrap_or_else(|e| panic!("{stem} {kind}: {e}"));
        let ours = serde_json::to_value(&meta).unwrap();
        let theirs = &py[path.display().to_string()];
        support::compare_meta(
            &ours,
            theirs,
            &format!("{stem}.{kind}"),
            true,
            &mut problems,
        );
        let expect_format = match *kind {
            "classic" => Format::Classic,
            "64-bit-offset" => Format::Offset64,
            "cdf5" => Format::Cdf5,
            "netCDF-4" => Format::Netcdf4,
            _ => Format::Netcdf4Classic,
        };
        assert_eq!(meta.format, expect_format, "{stem}.{kind}");
        let head = std::fs::read(path).unwrap();
        let sniffed = netcdf::sniff(&head[..8]);
        let expect_sniff = match expect_format {
            Format::Netcdf4Classic => Format::Netcdf4,
            f => f,
        };
        assert_eq!(sniffed, Some(expect_sniff), "{stem}.{kind}");
    }
    assert!(
        problems.is_empty(),
        "{} differences:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Known facts about the fixtures, so the comparison above cannot pass with both
/// sides empty.
#[test]
fn fixture_facts() {
    let dir = tempfile::tempdir().unwrap();
    for (path, kind, stem) in support::all_fixtures(dir.path()) {
        let m = netcdf::read(&path).unwrap();
        let t = m.time.as_ref();
        match stem.as_str() {
            "tas_360day" => {
                let t = t.expect("time");
                assert_eq!(
                    (t.start.as_str(), t.end.as_str()),
                    ("1850-01-01T00:00:00", "1850-04-01T00:00:00"),
                    "{kind}"
                );
                assert_eq!(t.calendar, "360_day");
                assert_eq!(t.from_variable, "time_bnds");
                let b = m.bbox.unwrap();
                assert_eq!(
                    (b.lat_min, b.lat_max, b.lon_min, b.lon_max),
                    (-67.5, 67.5, 0.0, 315.0)
                );
                assert!(m.global_strings()["institution"].contains("Météorologiques"));
                assert_eq!(m.global_strings()["scale_values"], "0.1, 2.5, -3");
                assert_eq!(m.global_strings()["realization_index"], "1");
                let tas = m.variable("tas").unwrap();
                assert_eq!(tas.shape, vec![3, 4, 8]);
                assert_eq!(tas.fill_value, Some(1e20));
                assert_eq!(tas.units.as_deref(), Some("K"));
                let time_dim = m.dims.iter().find(|d| d.name == "time").unwrap();
                assert!(time_dim.unlimited && time_dim.len == 3);
                let text = m.text();
                assert!(
                    text.contains("Near-Surface Air Temperature")
                        && text.contains("air_temperature")
                );
                assert!(m.warnings.is_empty(), "{:?}", m.warnings);
            }
            "pr_noleap" => {
                let t = t.expect("time");
                assert_eq!(
                    (t.start.as_str(), t.end.as_str()),
                    ("2014-12-01T00:00:00", "2015-03-31T00:00:00")
                );
                assert_eq!(t.from_variable, "time_bounds");
                let b = m.bbox.unwrap();
                assert_eq!(
                    (b.lat_min, b.lat_max, b.lon_min, b.lon_max),
                    (-60.5, 59.25, -180.0, 179.5)
                );
            }
            "tos_curvilinear_julian" => {
                let t = t.expect("time");
                // Day 18262 after 1850-01-01 is 1900-01-01 in the Julian calendar,
                // 1900-01-01 in proleptic Gregorian as well (12 leap days in both).
                assert_eq!(t.start, "1900-01-01T00:00:00");
                let b = m.bbox.unwrap();
                assert_eq!(
                    (b.lat_min, b.lat_max, b.lon_min, b.lon_max),
                    (-78.25, 89.5, -100.5, 400.25)
                );
            }
            "psl_standard_1582" => {
                let t = t.expect("time");
                assert_eq!(
                    (t.start.as_str(), t.end.as_str()),
                    ("1582-10-01T06:00:00", "1582-10-25T06:00:00")
                );
                assert_eq!(t.calendar, "gregorian");
            }
            "unknown_calendar" => {
                assert!(t.is_none());
                assert!(
                    m.warnings.iter().any(|w| w.contains("mars_sol")),
                    "{:?}",
                    m.warnings
                );
            }
            other => panic!("unexpected fixture {other}"),
        }
    }
}

/// Our calendar arithmetic against cftime on a spread of offsets, every CF calendar.
#[test]
fn calendars_match_cftime() {
    let offsets: Vec<f64> = vec![
        0.0, 0.5, 1.0, 27.0, 58.0, 59.0, 59.75, 60.0, 359.0, 360.0, 364.0, 365.0, 366.0, 1460.0,
        1461.0, 18262.0, 36524.25, 54787.0, 73048.0, 91311.5, 146096.0, -1.0, -365.0, -100000.0,
        123456.789,
    ];
    let cases = [
        (
            "days since 1850-01-01",
            [
                "standard",
                "gregorian",
                "proleptic_gregorian",
                "noleap",
                "365_day",
                "all_leap",
                "366_day",
                "360_day",
                "julian",
            ]
            .as_slice(),
        ),
        (
            "hours since 1582-10-01 12:00:00",
            ["standard", "julian", "proleptic_gregorian"].as_slice(),
        ),
        (
            "days since 1500-02-20",
            [
                "standard",
                "proleptic_gregorian",
                "julian",
                "360_day",
                "noleap",
            ]
            .as_slice(),
        ),
        (
            "seconds since 2000-02-28T23:00:00",
            ["standard", "noleap", "all_leap", "360_day"].as_slice(),
        ),
    ];
    let mut checked = 0;
    for (units, cals) in cases {
        for cal_name in cals {
            let scale = if units.starts_with("hours") {
                24.0
            } else if units.starts_with("seconds") {
                86400.0
            } else {
                1.0
            };
            let values: Vec<f64> = offsets.iter().map(|o| o * scale).collect();
            let theirs = support::cftime_decode(units, cal_name, &values);
            let cal = Calendar::parse(cal_name).unwrap();
            let tu = TimeUnits::parse(units, cal).unwrap();
            for (v, t) in values.iter().zip(&theirs) {
                let ours = tu
                    .decode(*v, cal)
                    .map(|d| d.to_string())
                    .unwrap_or_else(|e| format!("ERR {e}"));
                assert_eq!(&ours, t, "{units} {cal_name} {v}");
                checked += 1;
            }
        }
    }
    assert!(checked > 400);
}
