//! The example DRS tree: valid files (our reader, `ncdump -h`, Python netCDF4 agree),
//! attributes equal to the path, deterministic bytes.

use crate::netcdf_support as support;

use std::path::Path;

use granary_science::example::write_tree;
use granary_science::netcdf::{self, Format};

fn rel_parts(root: &Path, p: &Path) -> Vec<String> {
    p.strip_prefix(root)
        .unwrap()
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn example_tree_is_valid_consistent_and_deterministic() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let files = write_tree(a.path()).unwrap();
    let again = write_tree(b.path()).unwrap();
    assert!((15..=30).contains(&files.len()), "{} files", files.len());
    let total: u64 = files
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    eprintln!("example tree: {} files, {total} bytes", files.len());
    assert!(total < 8 << 20, "{total} bytes");
    assert_eq!(files.len(), again.len());
    for (x, y) in files.iter().zip(&again) {
        assert_eq!(rel_parts(a.path(), x), rel_parts(b.path(), y));
        assert!(
            std::fs::read(x).unwrap() == std::fs::read(y).unwrap(),
            "{} differs between runs",
            x.display()
        );
    }

    let py = support::python_dump(&files);
    let mut versions = std::collections::BTreeMap::<String, Vec<String>>::new();
    let mut calendars = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    for f in &files {
        let parts = rel_parts(a.path(), f);
        assert_eq!(parts.len(), 11, "{parts:?}");
        assert_eq!(parts[0], "CMIP6");
        let m = netcdf::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(m.format, Format::Netcdf4Classic);
        assert!(m.warnings.is_empty(), "{:?}", m.warnings);
        let g = m.global_strings();
        let keys = [
            "activity_id",
            "institution_id",
            "source_id",
            "experiment_id",
            "member_id",
            "table_id",
            "variable_id",
            "grid_label",
        ];
        for (k, v) in keys.iter().zip(&parts[1..9]) {
            assert_eq!(&g[*k], v, "{}: {k}", f.display());
        }
        assert_eq!(g["mip_era"], "CMIP6");
        assert_eq!(g["variant_label"], parts[5]);
        for k in [
            "Conventions",
            "institution",
            "tracking_id",
            "further_info_url",
            "license",
            "creation_date",
            "title",
            "frequency",
            "realm",
            "nominal_resolution",
        ] {
            assert!(!g[k].is_empty(), "{k}");
        }
        // File name: <var>_<table>_<source>_<exp>_<member>_<grid>_<start>-<end>.nc
        let name = parts[10].strip_suffix(".nc").unwrap();
        let fields: Vec<&str> = name.split('_').collect();
        assert_eq!(
            fields[..6],
            [
                &g["variable_id"],
                &g["table_id"],
                &g["source_id"],
                &g["experiment_id"],
                &g["member_id"],
                &g["grid_label"]
            ]
            .map(String::as_str)
        );
        let (start, end) = fields[6].split_once('-').unwrap();
        // Time coverage (from time_bnds) agrees with the file name's range.
        let t = m.time.as_ref().expect("time coverage");
        assert_eq!(t.from_variable, "time_bnds");
        calendars.insert(t.calendar.clone());
        let digits = |s: &str| s.chars().filter(char::is_ascii_digit).collect::<String>();
        assert!(
            digits(&t.start).starts_with(start),
            "{} vs {start}",
            t.start
        );
        let last_day = m.variable("time_bnds").unwrap();
        assert_eq!(last_day.dims, ["time", "bnds"]);
        let end_digits = digits(&t.end);
        assert!(end_digits.as_str() > end, "{} should follow {end}", t.end);
        let bbox = m.bbox.expect("bbox");
        assert_eq!(
            (bbox.lat_min, bbox.lat_max, bbox.lon_min, bbox.lon_max),
            (-85.0, 85.0, 5.0, 355.0)
        );
        let var = m.variable(&g["variable_id"]).unwrap();
        assert!(var.units.is_some() && var.standard_name.is_some() && var.long_name.is_some());
        assert_eq!(var.fill_value, Some(1e20));
        versions
            .entry(parts[1..9].join("/"))
            .or_default()
            .push(parts[9].clone());

        // ncdump -h (libnetcdf) reads it.
        let dump = support::ncdump_h(f);
        assert!(
            dump.contains(&format!("float {}(time, lat, lon)", g["variable_id"])),
            "{dump}"
        );
        assert!(dump.contains(&format!(":source_id = \"{}\"", g["source_id"])));

        // Python netCDF4 sees the same as we do.
        let ours = serde_json::to_value(&m).unwrap();
        let theirs = &py[f.display().to_string()];
        // The writer does not record creation order: libnetcdf lists by name, so the
        // variable order is not compared here (it is for the ncgen fixtures).
        support::compare_meta(&ours, theirs, name, false, &mut problems);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        versions.values().any(|v| {
            let mut v = v.clone();
            v.sort();
            v.dedup();
            v.len() == 2
        }),
        "two versions of one dataset"
    );
    for c in ["noleap", "360_day", "proleptic_gregorian"] {
        assert!(calendars.contains(c), "{calendars:?}");
    }
}
