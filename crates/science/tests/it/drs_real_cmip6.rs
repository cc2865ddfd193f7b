//! The 326 real CMIP6 files of the PyPI package esmvaltool-sample-data (installed into
//! tests/interop/.venv by scripts/setup-test-deps.sh): every path translates with facets
//! equal to its path components, and the global attributes (read with the venv's netCDF4)
//! agree with the name, but for the one file whose `frequency` clashes with its table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use granary_science::drs::{Config, Translator};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn venv_python() -> PathBuf {
    let py = repo_root().join("tests/interop/.venv/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run `bash scripts/setup-test-deps.sh` first",
        py.display()
    );
    py
}

fn sample_dir(py: &Path) -> PathBuf {
    let out = Command::new(py)
        .args([
            "-c",
            "import esmvaltool_sample_data, os; print(os.path.dirname(esmvaltool_sample_data.__file__))",
        ])
        .output()
        .expect("run venv python");
    assert!(
        out.status.success(),
        "esmvaltool_sample_data is not importable ({}): run `bash scripts/setup-test-deps.sh`",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "nc") {
            out.push(p);
        }
    }
}

#[test]
fn real_cmip6_sample_tree_translates_and_matches_attributes() {
    let py = venv_python();
    let dir = sample_dir(&py);
    let mut files = Vec::new();
    walk(&dir, &mut files);
    assert_eq!(
        files.len(),
        326,
        "esmvaltool-sample-data 0.0.4 ships 326 .nc files"
    );

    let script = repo_root().join("tests/interop/python/nc_global_attrs.py");
    let out = Command::new(&py)
        .arg(&script)
        .arg(&dir)
        .output()
        .expect("run nc_global_attrs.py");
    assert!(
        out.status.success(),
        "nc_global_attrs.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let attrs: BTreeMap<String, BTreeMap<String, String>> =
        serde_json::from_slice(&out.stdout).expect("attribute JSON");
    assert_eq!(attrs.len(), 326);

    let t = Translator::new(Config::default()).expect("translator");
    let keys = [
        "activity_id",
        "institution_id",
        "source_id",
        "experiment_id",
        "member_id",
        "table_id",
        "variable_id",
        "grid_label",
        "version",
    ];
    let mut fixed = 0;
    let mut clashes = 0;
    for f in &files {
        let path = f.to_str().expect("utf-8 path");
        let comps: Vec<&str> = path.split('/').collect();
        let k = comps
            .iter()
            .rposition(|c| *c == "CMIP6")
            .expect("CMIP6 in path");
        let a = attrs
            .get(path)
            .unwrap_or_else(|| panic!("no attributes for {path}"));
        let o = t.translate(path, Some(a));
        assert!(o.is_accepted(), "{path}: {:?}", o.reason);
        if !o.fixes.is_empty() {
            fixed += 1;
        }
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(
                o.facets.get(*key).map(String::as_str),
                Some(comps[k + 1 + i]),
                "{path}: {key}"
            );
        }
        assert_eq!(o.name.last().map(String::as_str), comps.last().copied());
        // One real table/frequency clash: GFDL-CM4's Amon file says `frequency = monC`
        // (a climatology) for a monthly time series.
        if path.contains("/GFDL-CM4/historical/r1i1p1f1/Amon/") {
            assert_eq!(o.mismatches.len(), 1, "{path}: {:?}", o.mismatches);
            let m = &o.mismatches[0];
            assert_eq!(m.facet, "frequency", "{path}");
            assert_eq!(m.attribute_value, "monC", "{path}");
            clashes += 1;
        } else {
            assert!(o.mismatches.is_empty(), "{path}: {:?}", o.mismatches);
        }
        // Round trip to the relative DRS path.
        let v = o.drs_version.as_deref().expect("version");
        assert_eq!(
            t.reverse(&o.name, v).expect("reverse").path(),
            comps[k..].join("/")
        );
    }
    assert_eq!(fixed, 0, "conforming real files needed fixes");
    assert_eq!(clashes, 1);
}
