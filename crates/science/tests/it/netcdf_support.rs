//! Helpers shared by the netCDF test binaries (`#[path]`-included by each); as a test
//! binary of its own it holds one sanity test of the helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

pub const KINDS: [&str; 5] = [
    "classic",
    "64-bit-offset",
    "cdf5",
    "netCDF-4",
    "netCDF-4-classic",
];

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// The CDL fixtures kept in the repository.
pub fn cdl_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .expect("tests/data")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "cdl"))
        .collect();
    v.sort();
    assert!(
        v.len() >= 4,
        "CDL fixtures missing in {}",
        data_dir().display()
    );
    v
}

fn need(tool: &str) {
    let ok = Command::new(tool).arg("-h").output().is_ok();
    assert!(
        ok,
        "`{tool}` (Debian package netcdf-bin) is missing: run scripts/setup-test-deps.sh as root"
    );
}

/// `ncgen -k KIND -o OUT CDL`.
pub fn ncgen(kind: &str, cdl: &Path, out: &Path) {
    need("ncgen");
    let st = Command::new("ncgen")
        .args(["-k", kind, "-o"])
        .arg(out)
        .arg(cdl)
        .status()
        .expect("run ncgen");
    assert!(st.success(), "ncgen -k {kind} {} failed", cdl.display());
}

/// Every CDL fixture in every kind: (file, kind, fixture stem).
pub fn all_fixtures(dir: &Path) -> Vec<(PathBuf, &'static str, String)> {
    let mut out = Vec::new();
    for cdl in cdl_files() {
        let stem = cdl.file_stem().unwrap().to_string_lossy().to_string();
        for kind in KINDS {
            let nc = dir.join(format!("{stem}.{kind}.nc"));
            ncgen(kind, &cdl, &nc);
            out.push((nc, kind, stem.clone()));
        }
    }
    out
}

/// `ncdump -h FILE` output.
pub fn ncdump_h(path: &Path) -> String {
    need("ncdump");
    let out = Command::new("ncdump")
        .arg("-h")
        .arg(path)
        .output()
        .expect("run ncdump");
    assert!(
        out.status.success(),
        "ncdump -h {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn venv_python() -> PathBuf {
    let py = repo_root().join("tests/interop/.venv/bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import netCDF4, cftime"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "the Python venv with netCDF4/cftime is missing ({}): run scripts/setup-test-deps.sh",
        py.display()
    );
    py
}

fn nc_dump(args: &[String]) -> Value {
    let py = venv_python();
    let script = repo_root().join("tests/interop/python/nc_dump.py");
    let out = Command::new(py)
        .arg(script)
        .args(args)
        .output()
        .expect("run nc_dump.py");
    assert!(
        out.status.success(),
        "nc_dump.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("nc_dump.py JSON")
}

/// What Python netCDF4 reports for each file, keyed by path.
pub fn python_dump(paths: &[PathBuf]) -> Value {
    let args: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    nc_dump(&args)
}

/// cftime's decoding of `values` (ISO strings or "ERR ...").
pub fn cftime_decode(units: &str, calendar: &str, values: &[f64]) -> Vec<String> {
    let mut args = vec![
        "--decode".to_string(),
        units.to_string(),
        calendar.to_string(),
    ];
    args.extend(values.iter().map(|v| format!("{v:?}")));
    serde_json::from_value(nc_dump(&args)).expect("list of strings")
}

/// Differences between two JSON values, numbers compared to 1e-9 relative.
pub fn diff(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            if (x - y).abs() > 1e-9 * x.abs().max(y.abs()).max(1e-300) {
                out.push(format!("{path}: {x} != {y}"));
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                out.push(format!("{path}: length {} != {}", x.len(), y.len()));
            }
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(p, q, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => diff(p, q, &format!("{path}.{k}"), out),
                    (p, q) => out.push(format!("{path}.{k}: {p:?} vs {q:?}")),
                }
            }
        }
        _ if a == b => {}
        _ => out.push(format!("{path}: {a} != {b}")),
    }
}

/// Differences between our `NcMeta` (as JSON) and nc_dump.py's report of one file:
/// every top-level field, and variables by name. With `ordered`, variable order too.
pub fn compare_meta(
    ours: &Value,
    theirs: &Value,
    label: &str,
    ordered: bool,
    out: &mut Vec<String>,
) {
    for field in ["format", "global", "dims", "time", "bbox"] {
        diff(
            &ours[field],
            &theirs[field],
            &format!("{label}.{field}"),
            out,
        );
    }
    let empty = Vec::new();
    let ov = ours["variables"].as_array().unwrap_or(&empty);
    let tv = theirs["variables"].as_array().unwrap_or(&empty);
    let names = |v: &Vec<Value>| {
        let mut n: Vec<String> = v.iter().map(|x| x["name"].to_string()).collect();
        if !ordered {
            n.sort();
        }
        n
    };
    if names(ov) != names(tv) {
        out.push(format!(
            "{label}: variables {:?} != {:?}",
            names(ov),
            names(tv)
        ));
    }
    for t in tv {
        let o = ov
            .iter()
            .find(|o| o["name"] == t["name"])
            .unwrap_or(&Value::Null);
        diff(o, t, &format!("{label}.var.{}", t["name"]), out);
    }
}

#[test]
fn diff_sees_differences() {
    let a = serde_json::json!({"x": [1.0, 2.0], "y": "s", "z": {"k": 1}});
    let mut d = Vec::new();
    diff(&a, &a, "", &mut d);
    assert!(d.is_empty());
    let b = serde_json::json!({"x": [1.0, 2.5], "y": "t", "z": {}});
    diff(&a, &b, "", &mut d);
    assert_eq!(d.len(), 3, "{d:?}");
}
