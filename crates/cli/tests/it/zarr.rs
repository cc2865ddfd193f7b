//! Virtual Zarr end to end: the real CMIP6 files of esmvaltool-sample-data (in
//! tests/interop/.venv, 76 datasets) published with `publish-dir`; `GET /api/zarr/<dataset
//! id>` of every dataset opened by xarray through fsspec's reference filesystem and
//! compared value by value with `xr.open_mfdataset` of the original files (at least 70
//! of the 76 must open; contiguous files of different lengths and files with their own
//! time units included); one time step reads only its chunks; a dataset whose files
//! cannot be combined is a 422 with the reason in the body and in `X-Granary-Refused`.

use crate::common;

use std::process::Command;

use common::*;

/// A dataset with a deflated chunked copy as a later DRS version (the codecs path).
const COMPRESSED: &str = "CMIP6/CMIP/MPI-M/MPI-ESM1-2-HR/historical/r1i1p1f1/Amon/ta/gn/v20190710";

/// Contiguous files of 120 steps (and 60 last): as a later DRS version whose first file
/// is chunked by 7 steps and deflated, the others stored plain: one Zarr array has one
/// compressor, a 422.
const IRREGULAR: &str = "CMIP6/CMIP/MIROC/MIROC6/historical/r1i1p1f1/Amon/ta/gn/v20190311";

fn dataset_id(rel: &str) -> String {
    rel.replace('/', ".")
}

/// `X-Granary-Refused`'s value as text (its `%XX` escapes decoded, as UTF-8).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).expect("ASCII");
            out.push(u8::from_str_radix(hex, 16).expect("a %XX escape"));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn virtual_zarr_of_published_cmip6_datasets_matches_the_files() {
    let root = sample_root();
    let d = Daemon::start_release(&["--http", "127.0.0.1:0"]);
    let base = format!("http://{}", d.http.clone().expect("gateway address"));
    let tree = d.dir.path().join("tree");
    let mut sample = Vec::new();
    copy_tree(&root, &root, &tree, &mut sample);
    sample.sort();
    sample.dedup();
    assert_eq!(
        sample.len(),
        76,
        "esmvaltool-sample-data 0.0.4 has 76 datasets"
    );
    let compressed = COMPRESSED.replace("v20190710", "v20990101");
    let mut c = python_script("zarr_virtual.py");
    c.arg("compress")
        .arg(tree.join(COMPRESSED))
        .arg(tree.join(&compressed));
    run(c);
    let irregular = IRREGULAR.replace("v20190311", "v20990101");
    let mut c = python_script("zarr_virtual.py");
    c.arg("compress")
        .arg(tree.join(IRREGULAR))
        .arg(tree.join(&irregular))
        .args(["7", "1"]);
    run(c);
    let report = d.dir.path().join("report.json");
    d.ok(&[
        "publish-dir",
        tree.to_str().expect("utf-8"),
        "--report",
        report.to_str().expect("utf-8"),
    ]);

    // An unknown dataset is a 404 JSON error; a malformed id a 400.
    let get = |path: &str| {
        let out = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
            .arg(format!("{base}{path}"))
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(
        get("/api/zarr/CMIP6.CMIP.X.Y.historical.r1i1p1f1.Amon.ta.gn.v20190311"),
        "404"
    );
    assert_eq!(get("/api/zarr/nodots"), "400");
    let why = "ta: ";
    let out = Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}"])
        .arg(format!("{base}/api/zarr/{}", dataset_id(&irregular)))
        .output()
        .expect("curl");
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(body.ends_with("\n422"), "{body}");
    assert!(
        body.contains(&format!(r#""error":"not available: {why}"#))
            && body.contains("compressor differs across the dataset's files"),
        "{body}"
    );
    // The reason in a header too, so a HEAD (the page's) carries it: the body's
    // `error` text.
    let out = Command::new("curl")
        .args(["-s", "-I"])
        .arg(format!("{base}/api/zarr/{}", dataset_id(&irregular)))
        .output()
        .expect("curl");
    let head = String::from_utf8_lossy(&out.stdout);
    assert!(head.starts_with("HTTP/1.1 422"), "{head}");
    let refused = head
        .lines()
        .find_map(|l| l.strip_prefix("x-granary-refused: "))
        .unwrap_or_else(|| panic!("no X-Granary-Refused: {head}"));
    let error: serde_json::Value =
        serde_json::from_str(body.trim_end_matches("\n422")).expect("JSON error");
    assert_eq!(
        percent_decode(refused.trim_end()),
        error["error"].as_str().unwrap(),
        "{head}"
    );

    // Every dataset: opened and equal to open_mfdataset of its files, or refused with
    // the same reason in the body and the header (checked by the script).
    let mut c = python_script("zarr_virtual.py");
    c.arg("all").arg(&base).arg(&tree);
    let out = c.output().expect("python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The per-dataset figures (files, shape, chunks, /data requests for one step).
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "zarr_virtual.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("summary")).expect("JSON summary");
    let opened: Vec<&str> = summary["opened"]
        .as_array()
        .expect("opened")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    let of_sample = sample
        .iter()
        .filter(|rel| opened.contains(&dataset_id(rel).as_str()))
        .count();
    eprintln!(
        "{of_sample} of {} sample datasets open as virtual Zarr; refused: {}",
        sample.len(),
        summary["refused"]
    );
    assert!(
        of_sample >= 70,
        "{of_sample} of 76 open: {}",
        summary["refused"]
    );
    assert!(opened.contains(&dataset_id(&compressed).as_str()));
    assert!(
        summary["refused"][dataset_id(&irregular)].is_string(),
        "{summary}"
    );
}

/// Copies the `.nc` files under `from` to the same place under `to`, each dataset's
/// directory (relative to `root`) into `datasets`.
fn copy_tree(
    root: &std::path::Path,
    from: &std::path::Path,
    to: &std::path::Path,
    datasets: &mut Vec<String>,
) {
    for e in std::fs::read_dir(from).expect("sample tree") {
        let p = e.expect("entry").path();
        let target = to.join(p.file_name().expect("name"));
        if p.is_dir() {
            copy_tree(root, &p, &target, datasets);
        } else if p.extension().is_some_and(|x| x == "nc") {
            std::fs::create_dir_all(to).expect("mkdir");
            std::fs::copy(&p, &target).expect("copy");
            let rel = from.strip_prefix(root).expect("under the root");
            datasets.push(rel.to_str().expect("utf-8").to_string());
        }
    }
}
