//! The web page in a real headless Chromium: a `granary daemon` with its HTTP
//! gateway on a free loopback port, three generated CMIP6 netCDF files and one
//! CMIP5 file (made with ncgen) published, and
//! tests/interop/python/browser_flow.py (Playwright for Python driving Debian's
//! Chromium) running the user's flow at desktop and phone width: the CMIP5
//! hit's facet summary, "select this page", search with autocomplete, a facet,
//! the file panel with where the file is held (up, from the location catalog),
//! a download compared byte for byte, "download all" of two files, the node
//! status with the federation's nodes (a single node: itself, up), and by dataset the
//! virtual Zarr snippet: its text, read from the page, run by the venv's python (xarray,
//! fsspec, zarr 3) against the gateway and the dataset compared with the published file;
//! a dataset the gateway refuses (two files, each with its own time units, made with
//! ncgen) shows the 422's reason and no snippet. Screenshots of each step go to
//! `<target>/test-artifacts/browser/`.
//!
//! Chromium comes from scripts/setup-test-deps.sh (Debian `chromium`). Without
//! it the test fails when `CI=true`, and otherwise skips, loudly.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::json;

const CHROMIUM: &str = "/usr/bin/chromium";

/// The three files published (relative paths under `granary example-data`'s
/// tree): two CanESM5 members, and one MIROC6 file the search must leave out.
const FILES: [&str; 3] = [
    "CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn/v20190429/tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-185112.nc",
    "CMIP6/CMIP/CCCma/CanESM5/historical/r2i1p1f1/Amon/tas/gn/v20190429/tas_Amon_CanESM5_historical_r2i1p1f1_gn_185001-185112.nc",
    "CMIP6/ScenarioMIP/MIROC/MIROC6/ssp585/r1i1p1f1/Amon/tas/gn/v20190627/tas_Amon_MIROC6_ssp585_r1i1p1f1_gn_201501-201612.nc",
];

/// A CMIP5 file (DRS path under the tree), made by ncgen from [`CMIP5_CDL`].
const CMIP5: &str = "cmip5/output1/CCCma/CanESM2/historical/mon/atmos/Amon/r1i1p1/v20120410/tas/tas_Amon_CanESM2_historical_r1i1p1_185001-185003.nc";

/// Its facet summary on the page: model, experiment, ensemble, MIP table,
/// variable, version.
const CMIP5_SUMMARY: &str = "CanESM2 · historical · r1i1p1 · Amon · tas · v20120410";

const CMIP5_CDL: &str = r#"netcdf tas {
dimensions:
	time = UNLIMITED ;
	lat = 2 ;
	lon = 3 ;
variables:
	double time(time) ;
		time:units = "days since 1850-01-01 00:00:00" ;
		time:calendar = "365_day" ;
		time:standard_name = "time" ;
	double lat(lat) ;
		lat:units = "degrees_north" ;
	double lon(lon) ;
		lon:units = "degrees_east" ;
	float tas(time, lat, lon) ;
		tas:standard_name = "air_temperature" ;
		tas:units = "K" ;
		:project_id = "CMIP5" ;
		:institute_id = "CCCma" ;
		:model_id = "CanESM2" ;
		:experiment_id = "historical" ;
		:frequency = "mon" ;
		:modeling_realm = "atmos" ;
		:table_id = "Table Amon" ;
data:
 time = 15.5, 45, 74.5 ;
 lat = -45, 45 ;
 lon = 0, 120, 240 ;
 tas = 280, 281, 282, 283, 284, 285, 280, 281, 282, 283, 284, 285, 280, 281, 282, 283, 284, 285 ;
}
"#;

/// A CMIP6 dataset the virtual Zarr refuses (a 422): two files of three months each
/// (made by ncgen from [`refused_cdl`]), each with its own time units and calendar
/// (own units alone are re-encoded; another calendar is not).
const REFUSED: [(&str, &str, &str); 2] = [
    (
        "CMIP6/CMIP/NCAR/CESM2/historical/r1i1p1f1/Amon/tas/gn/v20190308/tas_Amon_CESM2_historical_r1i1p1f1_gn_185001-185003.nc",
        "days since 1850-01-01",
        "noleap",
    ),
    (
        "CMIP6/CMIP/NCAR/CESM2/historical/r1i1p1f1/Amon/tas/gn/v20190308/tas_Amon_CESM2_historical_r1i1p1f1_gn_185004-185006.nc",
        "days since 1850-04-01",
        "360_day",
    ),
];

/// The start of the gateway's reason for refusing [`REFUSED`].
const REFUSED_WHY: &str = "not available: time: attribute units differs";

/// A file of [`REFUSED`]: three months from `units`' origin, in `calendar`.
fn refused_cdl(units: &str, calendar: &str) -> String {
    REFUSED_CDL
        .replace("@UNITS@", units)
        .replace("@CALENDAR@", calendar)
}

const REFUSED_CDL: &str = r#"netcdf tas {
dimensions:
	time = UNLIMITED ;
	lat = 2 ;
	lon = 3 ;
variables:
	double time(time) ;
		time:units = "@UNITS@" ;
		time:calendar = "@CALENDAR@" ;
		time:standard_name = "time" ;
	double lat(lat) ;
		lat:units = "degrees_north" ;
	double lon(lon) ;
		lon:units = "degrees_east" ;
	float tas(time, lat, lon) ;
		tas:standard_name = "air_temperature" ;
		tas:units = "K" ;
		:mip_era = "CMIP6" ;
		:activity_id = "CMIP" ;
		:institution_id = "NCAR" ;
		:source_id = "CESM2" ;
		:experiment_id = "historical" ;
		:variant_label = "r1i1p1f1" ;
		:table_id = "Amon" ;
		:variable_id = "tas" ;
		:grid_label = "gn" ;
		:frequency = "mon" ;
data:
 time = 15.5, 45, 74.5 ;
 lat = -45, 45 ;
 lon = 0, 120, 240 ;
 tas = 280, 281, 282, 283, 284, 285, 280, 281, 282, 283, 284, 285, 280, 281, 282, 283, 284, 285 ;
}
"#;

/// Writes `rel` under `tree` from `cdl` with ncgen (Debian netcdf-bin).
fn ncgen(tree: &Path, rel: &str, cdl: &str) {
    let to = tree.join(rel);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    let src = tree.join("fixture.cdl");
    std::fs::write(&src, cdl).unwrap();
    let st = std::process::Command::new("ncgen")
        .args(["-k", "nc4", "-o"])
        .arg(&to)
        .arg(&src)
        .status()
        .expect("ncgen (Debian netcdf-bin; scripts/setup-test-deps.sh installs it)");
    assert!(st.success(), "ncgen failed on {rel}");
    std::fs::remove_file(&src).unwrap();
}

/// A dataset's instance id: its directory's path with dots.
fn dataset_id(rel: &str) -> String {
    rel.rsplit_once('/').unwrap().0.replace('/', ".")
}

fn title(rel: &str) -> &str {
    rel.rsplit('/').next().unwrap()
}

/// Chromium and Playwright present, or why not.
fn browser_missing() -> Option<String> {
    let chromium = std::env::var("GRANARY_CHROMIUM").unwrap_or_else(|_| CHROMIUM.into());
    if !Path::new(&chromium).exists() {
        return Some(format!(
            "{chromium} not found (Debian package `chromium`; scripts/setup-test-deps.sh installs it)"
        ));
    }
    let py = interop_dir().join(".venv/bin/python");
    let ok = std::process::Command::new(&py)
        .args(["-c", "import playwright.sync_api"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        return Some(format!(
            "Playwright is not installed in {} (tests/interop/python/requirements.txt; \
             scripts/setup-test-deps.sh installs it)",
            py.display()
        ));
    }
    None
}

/// Where screenshots go: `<target>/test-artifacts/browser/`.
fn artefact_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp.parent().unwrap_or(tmp).join("test-artifacts/browser");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn web_page_flow_in_headless_chromium() {
    if let Some(why) = browser_missing() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("the browser test cannot run: {why}");
        }
        eprintln!(
            "\n!!!!!!!! SKIPPED: web_page_flow_in_headless_chromium: {why}; \
             nothing was tested (with CI=true this fails) !!!!!!!!\n"
        );
        return;
    }
    // The gateway on a port the system picks (the daemon prints it).
    let d = Daemon::start(&["--http", "127.0.0.1:0"]);
    let http = d
        .http
        .clone()
        .expect("the daemon printed no gateway address");

    // Three generated netCDF files, published with their DRS paths.
    let example = d.dir.path().join("example");
    d.ok(&["example-data", example.to_str().unwrap()]);
    let tree = d.dir.path().join("tree");
    for rel in FILES {
        let to = tree.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(example.join(rel), &to).unwrap();
    }
    ncgen(&tree, CMIP5, CMIP5_CDL);
    for (rel, units, calendar) in REFUSED {
        ncgen(&tree, rel, &refused_cdl(units, calendar));
    }
    d.ok(&["publish-dir", tree.to_str().unwrap()]);
    // This node's prefix (the daemon wrote it at start): where files are held.
    let node_toml = std::fs::read_to_string(d.data.join("node.toml")).unwrap();
    let node = node_toml
        .split('"')
        .nth(1)
        .expect("node_prefix in node.toml")
        .to_string();

    let files: serde_json::Map<String, serde_json::Value> = FILES
        .iter()
        .chain([&CMIP5])
        .chain(REFUSED.iter().map(|(r, _, _)| r))
        .map(|r| (title(r).to_string(), json!(r)))
        .collect();
    let plan = json!({
        "files": files,
        "prefix": "CanE",
        "pick": ["source_id", "CanESM5"],
        "picked": [title(FILES[0]), title(FILES[1])],
        "facet": ["member_id", "r2i1p1f1"],
        "single": title(FILES[1]),
        "late": title(FILES[2]),
        "cmip5": {"title": title(CMIP5), "summary": CMIP5_SUMMARY},
        "node": node,
        "zarr": {
            "open": {"id": dataset_id(FILES[1]), "file": title(FILES[1])},
            "refused": {"id": dataset_id(REFUSED[0].0), "why": REFUSED_WHY},
        },
    });
    let plan_path = d.dir.path().join("plan.json");
    std::fs::write(&plan_path, plan.to_string()).unwrap();

    let out = artefact_dir();
    println!("browser test screenshots: {}", out.display());
    let mut c = python_script("browser_flow.py");
    c.args(["--base", &format!("http://{http}")])
        .args(["--tree", tree.to_str().unwrap()])
        .args(["--expect", plan_path.to_str().unwrap()])
        .args(["--out", out.to_str().unwrap()]);
    if let Ok(ch) = std::env::var("GRANARY_CHROMIUM") {
        c.args(["--chromium", &ch]);
    }
    let o = c.output().expect("cannot start browser_flow.py");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "browser flow failed ({}); screenshots in {}\nstdout: {stdout}\nstderr: {stderr}",
        o.status,
        out.display()
    );
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("bad report from browser_flow.py ({e}): {stdout}"));
    assert_eq!(report["ok"], true, "{report}");
    // Per viewport: one download from the panel, two from "download all".
    assert_eq!(report["downloads"], 6, "{report}");
    // The page's virtual Zarr snippet ran and matched the file (per viewport).
    assert_eq!(report["zarr_runs"], 2, "{report}");
    let shots = report["screenshots"].as_array().unwrap();
    assert_eq!(shots.len(), 24, "{report}");
    for s in shots {
        let p = Path::new(s.as_str().unwrap());
        let len = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 1000, "screenshot {} is missing or empty", p.display());
    }
}
