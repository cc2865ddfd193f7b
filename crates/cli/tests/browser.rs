//! The web page in a real headless Chromium: a `granary daemon` with its HTTP
//! gateway on a free loopback port, three generated netCDF files published, and
//! tests/interop/python/browser_flow.py (Playwright for Python driving Debian's
//! Chromium) running the user's flow at desktop and phone width: search with
//! autocomplete, a facet, the file panel, a download compared byte for byte,
//! "download all" of two files. Screenshots of each step go to
//! `<target>/test-artifacts/browser/`.
//!
//! Chromium comes from scripts/setup-test-deps.sh (Debian `chromium`). Without
//! it the test fails when `CI=true`, and otherwise skips, loudly.

mod common;

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
    d.ok(&["publish-dir", tree.to_str().unwrap()]);

    let files: serde_json::Map<String, serde_json::Value> = FILES
        .iter()
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
    let shots = report["screenshots"].as_array().unwrap();
    assert_eq!(shots.len(), 18, "{report}");
    for s in shots {
        let p = Path::new(s.as_str().unwrap());
        let len = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 1000, "screenshot {} is missing or empty", p.display());
    }
}
