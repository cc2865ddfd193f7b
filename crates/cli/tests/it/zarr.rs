//! Virtual Zarr end to end: real CMIP6 files (esmvaltool-sample-data, in
//! tests/interop/.venv) published with `publish-dir`; `GET /api/zarr/<dataset id>`
//! opened by xarray through fsspec's reference filesystem and compared value by value
//! with `xr.open_mfdataset` of the original files; one time step reads only its chunks;
//! datasets whose files cannot be combined are a 422 with the reason in the body and in
//! `X-Granary-Refused`.

use crate::common;

use std::process::Command;

use common::*;

/// Datasets of several time files each, every file the same time length (monthly and
/// daily).
const DATASETS: [&str; 3] = [
    "CMIP6/CMIP/MPI-M/MPI-ESM1-2-HR/historical/r1i1p1f1/Amon/ta/gn/v20190710",
    "CMIP6/CMIP/CAS/FGOALS-g3/historical/r1i1p1f1/day/ta/gn/v20190826",
    "CMIP6/CMIP/SNU/SAM0-UNICON/historical/r1i1p1f1/day/ta/gn/v20190323",
];

/// Each file with its own time units (`days since` its first year): stored values
/// cannot be concatenated as they are, a 422.
const OWN_UNITS: &str = "CMIP6/CMIP/CAMS/CAMS-CSM1-0/historical/r1i1p1f1/Amon/ta/gn/v20190708";

/// Contiguous variables whose last file is shorter (6 × 120 months, then 60): the
/// per-file chunks differ, which this slice answers with a 422.
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
    let d = Daemon::start(&["--http", "127.0.0.1:0"]);
    let base = format!("http://{}", d.http.clone().expect("gateway address"));
    let tree = d.dir.path().join("tree");
    for rel in DATASETS.iter().chain([&IRREGULAR, &OWN_UNITS]) {
        let from = root.join(rel);
        let to = tree.join(rel);
        std::fs::create_dir_all(&to).expect("mkdir");
        let mut n = 0;
        for e in std::fs::read_dir(&from).expect("sample dataset") {
            let p = e.expect("entry").path();
            std::fs::copy(&p, to.join(p.file_name().expect("name"))).expect("copy");
            n += 1;
        }
        assert!(n >= 2, "{rel}: {n} files");
    }
    // The first dataset again as a later DRS version, chunked along time, deflated and
    // shuffled (the sample files are contiguous): the codecs path end to end.
    let compressed = DATASETS[0].replace("v20190710", "v20990101");
    let mut c = python_script("zarr_virtual.py");
    c.arg("compress")
        .arg(tree.join(DATASETS[0]))
        .arg(tree.join(&compressed));
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
    for (rel, why) in [
        (IRREGULAR, "ta: chunking or shape differs"),
        (OWN_UNITS, "time: attribute units differs"),
    ] {
        let out = Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}"])
            .arg(format!("{base}/api/zarr/{}", dataset_id(rel)))
            .output()
            .expect("curl");
        let body = String::from_utf8_lossy(&out.stdout);
        assert!(body.ends_with("\n422"), "{body}");
        assert!(
            body.contains(&format!(r#""error":"not available: {why}"#)),
            "{body}"
        );
        // The reason in a header too, so a HEAD (the page's) carries it: the body's
        // `error` text.
        let out = Command::new("curl")
            .args(["-s", "-I"])
            .arg(format!("{base}/api/zarr/{}", dataset_id(rel)))
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
    }

    let mut c = python_script("zarr_virtual.py");
    c.arg(&base);
    for rel in DATASETS.iter().copied().chain([compressed.as_str()]) {
        c.arg(dataset_id(rel)).arg(tree.join(rel));
    }
    let out = c.output().expect("python");
    // The per-dataset figures (files, shape, chunks, /data requests for one step).
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "zarr_virtual.py failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
