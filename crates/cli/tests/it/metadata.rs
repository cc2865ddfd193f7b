//! Metadata that never misleads (`publish-dir` end to end, netCDF files made with
//! ncgen): a facet the DRS path lacks (`realm` of a `day` file) comes from the
//! attributes; a file whose name and time axis disagree is published with a recorded
//! mismatch that the dry run, `publish-dir`, the record and `/api/file` show;
//! `--trust attributes` names a file whose own name does not translate; `tracking_id`,
//! `further_info_url`, `license` and `citation` reach the record.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::Value;

const DIR6: &str = "CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1";

/// A CMIP6-like file: `var(time, lat, lon)` with time bounds (`bounds` as
/// `days since REF`, one row per step), the CMIP6 global attributes of
/// `table`/`variable`, and `extra` attributes.
fn cdl(
    variable: &str,
    table: &str,
    reference: &str,
    bounds: &[(f64, f64)],
    extra: &[(&str, &str)],
) -> String {
    let n = bounds.len();
    let times: Vec<String> = bounds
        .iter()
        .map(|(a, b)| format!("{}", (a + b) / 2.0))
        .collect();
    let bnds: Vec<String> = bounds.iter().map(|(a, b)| format!("{a}, {b}")).collect();
    let data: Vec<String> = (0..n * 4).map(|i| format!("{}", 250 + i)).collect();
    let mut g = vec![
        ("mip_era", "CMIP6"),
        ("activity_id", "CMIP"),
        ("institution_id", "CCCma"),
        ("source_id", "CanESM5"),
        ("experiment_id", "historical"),
        ("sub_experiment_id", "none"),
        ("variant_label", "r1i1p1f1"),
        ("table_id", table),
        ("variable_id", variable),
        ("grid_label", "gn"),
    ];
    g.extend_from_slice(extra);
    let globals: Vec<String> = g
        .iter()
        .map(|(k, v)| format!("  :{k} = \"{v}\" ;"))
        .collect();
    format!(
        "netcdf f {{\ndimensions:\n  time = UNLIMITED ;\n  bnds = 2 ;\n  lat = 2 ;\n  lon = 2 ;\n\
variables:\n  double time(time) ;\n    time:units = \"days since {reference}\" ;\n    time:calendar = \"standard\" ;\n    time:bounds = \"time_bnds\" ;\n\
  double time_bnds(time, bnds) ;\n  double lat(lat) ;\n    lat:units = \"degrees_north\" ;\n  double lon(lon) ;\n    lon:units = \"degrees_east\" ;\n\
  float {variable}(time, lat, lon) ;\n    {variable}:units = \"K\" ;\n\n{}\ndata:\n  time = {} ;\n  time_bnds = {} ;\n  lat = -45, 45 ;\n  lon = 0, 180 ;\n  {variable} = {} ;\n}}\n",
        globals.join("\n"),
        times.join(", "),
        bnds.join(", "),
        data.join(", ")
    )
}

fn ncgen(cdl: &str, out: &Path) {
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let src = out.with_extension("cdl");
    std::fs::write(&src, cdl).unwrap();
    let st = Command::new("ncgen")
        .args(["-k", "netCDF-4", "-o"])
        .arg(out)
        .arg(&src)
        .status()
        .expect("ncgen (Debian netcdf-bin; scripts/setup-test-deps.sh installs it)");
    assert!(st.success(), "ncgen failed on {}", src.display());
    std::fs::remove_file(src).unwrap();
}

/// Month bounds in days since `start` (standard calendar) for the month lengths given.
fn months(lengths: &[u32]) -> Vec<(f64, f64)> {
    let mut t = 0.0;
    lengths
        .iter()
        .map(|l| {
            let b = (t, t + f64::from(*l));
            t += f64::from(*l);
            b
        })
        .collect()
}

fn publish_dir(d: &Daemon, tree: &Path, extra: &[&str]) -> (Value, String) {
    let report = d.dir.path().join("report.json");
    let mut a = vec![
        "publish-dir",
        tree.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    a.extend_from_slice(extra);
    let o = d.cli(&a);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    (
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap(),
        text,
    )
}

fn entry<'a>(r: &'a Value, file: &str) -> &'a Value {
    r["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"].as_str().unwrap_or_default().ends_with(file))
        .unwrap_or_else(|| panic!("no entry for {file} in {r}"))
}

fn search(d: &Daemon, args: &[&str]) -> Value {
    let mut a = vec!["search", "--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&d.ok(&a)).unwrap()
}

#[test]
fn realm_mismatches_trusted_attributes_and_identifiers_from_dry_run_to_api() {
    let d = Daemon::start(&["--http", "127.0.0.1:0"]);
    let tree = d.dir.path().join("tree");
    // 2007: Jan..Dec lengths; the "early" axis starts at 2006-12-01.
    let year2007 = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let early = [31, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30];
    let shifted = "tas_Amon_CanESM5_historical_r1i1p1f1_gn_200701-200712.nc";
    ncgen(
        &cdl(
            "tas",
            "Amon",
            "2006-12-01",
            &months(&early),
            &[
                ("realm", "atmos"),
                ("frequency", "mon"),
                (
                    "tracking_id",
                    "hdl:21.14100/00000000-0000-4000-8000-000000000001",
                ),
                (
                    "further_info_url",
                    "https://furtherinfo.es-doc.org/CMIP6.CCCma.CanESM5.historical.none.r1i1p1f1",
                ),
                (
                    "license",
                    "CMIP6 model data produced by CCCma is licensed under CC BY 4.0",
                ),
                (
                    "citation",
                    "Swart et al. (2019) doi:10.22033/ESGF/CMIP6.3610",
                ),
            ],
        ),
        &tree.join(DIR6).join("Amon/tas/gn/v20190429").join(shifted),
    );
    let daily = "tas_day_CanESM5_historical_r1i1p1f1_gn_20070101-20070110.nc";
    let days: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i), f64::from(i + 1))).collect();
    ncgen(
        &cdl(
            "tas",
            "day",
            "2007-01-01",
            &days,
            &[("realm", "atmos"), ("frequency", "day")],
        ),
        &tree.join(DIR6).join("day/tas/gn/v20190429").join(daily),
    );
    // A CMIP5-style variable and an institution-prefixed model: not a CMIP6 name.
    let odd = "sic_SImon_CCCma-CanESM5_historical_r1i1p1f1_gn_200701-200712.nc";
    ncgen(
        &cdl(
            "siconc",
            "SImon",
            "2007-01-01",
            &months(&year2007),
            &[("realm", "seaIce")],
        ),
        &tree.join("loose").join(odd),
    );

    // Dry run: everything said per file, nothing published.
    let (r, text) = publish_dir(&d, &tree, &["--dry-run"]);
    assert!(
        d.ok(&["ls"]).trim().is_empty(),
        "a dry run published something"
    );
    let e = entry(&r, shifted);
    let m = &e["outcome"]["mismatches"][0];
    assert_eq!(m["facet"], "time_range", "{e}");
    assert_eq!(m["attribute"], "time_bnds");
    assert!(
        m["attribute_value"]
            .as_str()
            .unwrap()
            .starts_with("2006-12-01T00:00:00 to 2007-12-01"),
        "{m}"
    );
    assert_eq!(e["metadata"]["time"]["start"], "2006-12-01T00:00:00");
    assert_eq!(
        e["metadata"]["tracking_id"],
        "hdl:21.14100/00000000-0000-4000-8000-000000000001"
    );
    assert!(e["metadata"]["citation"]
        .as_str()
        .unwrap()
        .starts_with("Swart"));
    assert_eq!(r["mismatched"], 1, "{}", r["mismatched"]);
    assert!(text.contains(&format!("mismatch   CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn/v20190429/{shifted}: time_range")), "{text}");
    assert!(
        text.contains("1 with a name that disagrees with the contents"),
        "{text}"
    );
    assert_eq!(entry(&r, daily)["outcome"]["facets"]["realm"], "atmos");
    assert!(entry(&r, daily)["outcome"]["mismatches"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(entry(&r, odd)["outcome"]["status"], "rejected");

    // Published (the name wins by default; the odd file is refused with the reason).
    let (r, _) = publish_dir(&d, &tree, &[]);
    assert_eq!(r["counts"]["published"], 2, "{}", r["counts"]);
    assert_eq!(r["counts"]["rejected"], 1, "{}", r["counts"]);
    // Trusting attributes names the odd file from them.
    let (r, text) = publish_dir(&d, &tree, &["--trust", "attributes"]);
    let e = entry(&r, odd);
    assert_eq!(e["outcome"]["status"], "fixed", "{e}");
    assert_eq!(
        e["outcome"]["fixes"][0]["code"], "attributes_trusted",
        "{e}"
    );
    let trusted = "/cmip6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/SImon/siconc/gn/siconc_SImon_CanESM5_historical_r1i1p1f1_gn_200701-200712.nc";
    assert_eq!(e["name"], trusted, "{text}");
    assert_eq!(r["counts"]["published"], 1, "{}", r["counts"]);

    // The catalog: realm from the attributes, the mismatch and the identifiers kept.
    assert_eq!(search(&d, &["realm=atmos"])["total"], 2);
    assert_eq!(search(&d, &["realm=seaIce"])["total"], 1);
    let hit = &search(&d, &["table_id=Amon"])["hits"][0];
    assert_eq!(
        hit["tracking_id"], "hdl:21.14100/00000000-0000-4000-8000-000000000001",
        "{hit}"
    );
    assert!(
        hit["citation"]
            .as_str()
            .is_some_and(|c| c.starts_with("Swart")),
        "{hit}"
    );
    assert!(
        hit["license"]
            .as_str()
            .is_some_and(|c| c.contains("CC BY 4.0")),
        "{hit}"
    );
    let name = hit["name"].as_str().unwrap().to_string();
    let http = d.http.as_ref().unwrap();
    let o = Command::new("curl")
        .args(["-sf", &format!("http://{http}/api/file{name}")])
        .output()
        .unwrap();
    let rec: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    let mm = &rec["meta"]["translation"]["mismatches"];
    assert_eq!(mm[0]["facet"], "time_range", "{rec}");
    assert_eq!(rec["citation"], hit["citation"]);
    // The ESGF File document carries the identifiers too.
    let o = Command::new("curl")
        .args([
            "-sf",
            &format!("http://{http}/esg-search/search?type=File&table_id=Amon&format=application/solr%2Bjson"),
        ])
        .output()
        .unwrap();
    let page: Value = serde_json::from_slice(&o.stdout).unwrap();
    let doc = &page["response"]["docs"][0];
    assert_eq!(doc["tracking_id"][0], hit["tracking_id"], "{doc}");
    assert_eq!(doc["citation"][0], hit["citation"], "{doc}");
    assert_eq!(doc["license"][0], hit["license"], "{doc}");
    // A record rebuilt from the stored files says the same.
    d.ok(&["catalog", "rebuild"]);
    let hit = &search(&d, &["table_id=Amon"])["hits"][0];
    assert_eq!(
        hit["tracking_id"],
        "hdl:21.14100/00000000-0000-4000-8000-000000000001"
    );
    let o = Command::new("curl")
        .args(["-sf", &format!("http://{http}/api/file{name}")])
        .output()
        .unwrap();
    let rec: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        rec["meta"]["translation"]["mismatches"][0]["facet"], "time_range",
        "{rec}"
    );
}

/// A table/frequency clash: monthly files under `Amon` whose `frequency` attribute says
/// `monC` (a climatology) or `day` are published with a `frequency` mismatch (the
/// facet stays the table's `mon`); `monPt` (a point sample at the table's interval)
/// and `mon` agree.
#[test]
fn publish_dir_flags_a_table_frequency_clash() {
    let d = Daemon::start(&["--http", "127.0.0.1:0"]);
    let tree = d.dir.path().join("tree");
    let year = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let cases = [
        ("tas", "monC", true),
        ("pr", "day", true),
        ("ps", "monPt", false),
        ("ts", "mon", false),
    ];
    for (var, freq, _) in cases {
        let file = format!("{var}_Amon_CanESM5_historical_r1i1p1f1_gn_200701-200712.nc");
        ncgen(
            &cdl(
                var,
                "Amon",
                "2007-01-01",
                &months(&year),
                &[("realm", "atmos"), ("frequency", freq)],
            ),
            &tree
                .join(DIR6)
                .join(format!("Amon/{var}/gn/v20190429"))
                .join(file),
        );
    }
    let (r, text) = publish_dir(&d, &tree, &[]);
    for (var, freq, clash) in cases {
        let file = format!("{var}_Amon_CanESM5_historical_r1i1p1f1_gn_200701-200712.nc");
        let e = entry(&r, &file);
        let mm = e["outcome"]["mismatches"].as_array().unwrap();
        assert_eq!(e["outcome"]["facets"]["table_id"], "Amon", "{e}");
        if clash {
            assert_eq!(mm.len(), 1, "{freq}: {e}");
            assert_eq!(mm[0]["facet"], "frequency", "{e}");
            assert_eq!(mm[0]["attribute"], "frequency", "{e}");
            assert_eq!(mm[0]["name_value"], "mon (table Amon)", "{e}");
            assert_eq!(mm[0]["attribute_value"], freq, "{e}");
            assert_eq!(e["outcome"]["facets"]["frequency"], "mon", "{e}");
            assert!(
                text.contains(&format!(
                    "mismatch   {DIR6}/Amon/{var}/gn/v20190429/{file}: frequency"
                )),
                "{text}"
            );
        } else {
            assert!(mm.is_empty(), "{freq}: {e}");
            assert_eq!(e["outcome"]["facets"]["frequency"], freq, "{e}");
        }
    }
    assert_eq!(r["mismatched"], 2, "{}", r["mismatched"]);
    // Published all the same, the mismatch in the record.
    let name = search(&d, &["variable_id=tas"])["hits"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let http = d.http.as_ref().unwrap();
    let o = Command::new("curl")
        .args(["-sf", &format!("http://{http}/api/file{name}")])
        .output()
        .unwrap();
    let rec: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    let mm = &rec["meta"]["translation"]["mismatches"];
    assert_eq!(mm[0]["facet"], "frequency", "{rec}");
    assert_eq!(mm[0]["attribute_value"], "monC", "{rec}");
}
