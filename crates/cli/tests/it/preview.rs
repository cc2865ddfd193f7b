//! Quick-look pictures end to end: `GET /api/preview/<name>` on a real daemon.
//! Real CMIP6 files (esmvaltool-sample-data) published with `publish-dir`, the same
//! files rewritten deflated and shuffled, and ncgen-made files in all five netCDF kinds
//! (packed shorts with `_FillValue` and `missing_value`) are decoded by the gateway and
//! compared value by value with netCDF4-python (`preview_check.py check`), and their
//! PNGs checked with Pillow; hostile files get a JSON 4xx "not available: <reason>" and
//! the daemon stays up; a second request is a cache hit (header), and `If-None-Match`
//! a 304.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

/// One file of each of these datasets (several models and institutes).
const SAMPLES: [&str; 3] = [
    "CMIP6/CMIP/MIROC/MIROC6/historical/r1i1p1f1/Amon/ta/gn/v20190311",
    "CMIP6/CMIP/MPI-M/MPI-ESM1-2-HR/historical/r1i1p1f1/Amon/ta/gn/v20190710",
    "CMIP6/CMIP/CAS/FGOALS-g3/historical/r1i1p1f1/day/ta/gn/v20190826",
];

const KINDS: [&str; 5] = ["classic", "offset64", "cdf5", "nc4", "nc4classic"];

/// (status, headers, body) of a GET.
fn get(url: &str, extra: &[&str]) -> (u16, String, Vec<u8>) {
    let t = tempfile::NamedTempFile::new().expect("tmp");
    let out = Command::new("curl")
        .args(["-s", "-D", t.path().to_str().expect("utf-8"), "-o", "-"])
        .args(extra)
        .arg(url)
        .output()
        .expect("curl");
    let head = std::fs::read_to_string(t.path()).unwrap_or_default();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_ascii_lowercase(), out.stdout)
}

fn check(base: &str, name: &str, file: &Path, var: &str, at: &[&str]) -> Value {
    let mut c = python_script("preview_check.py");
    c.args(["check", base, name]).arg(file).arg(var).args(at);
    let out = c.output().expect("python");
    assert!(
        out.status.success(),
        "preview_check.py check {name} {var} {at:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", line.trim());
    let v: Value = serde_json::from_str(line.trim()).expect("one JSON line");
    // The stated size: the map's width plus two 10-pixel margins.
    assert_eq!(v["png"][0], 740, "{v}");
    assert!(v["png"][1].as_u64().is_some_and(|h| h > 100), "{v}");
    v
}

fn wait_catalogued(base: &str, name: &str) {
    for _ in 0..300 {
        if get(&format!("{base}/api/file{name}"), &[]).0 == 200 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{name} never reached the catalog");
}

#[test]
fn previews_decode_like_netcdf4_python_and_refuse_hostile_files() {
    let root = sample_root();
    let d = Daemon::start_release(&["--http", "127.0.0.1:0"]);
    let base = format!("http://{}", d.http.clone().expect("gateway address"));
    let tree = d.dir.path().join("tree");
    let made = d.dir.path().join("made");
    let mut originals = Vec::new();
    for rel in SAMPLES {
        let from = root.join(rel);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&from)
            .expect("sample dataset")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        let f = files.first().expect("a file").clone();
        let to = tree.join(rel);
        std::fs::create_dir_all(&to).expect("mkdir");
        let dst = to.join(f.file_name().expect("name"));
        std::fs::copy(&f, &dst).expect("copy");
        originals.push((rel, dst));
    }
    let mut c = python_script("preview_check.py");
    c.arg("make").arg(&made);
    for (_, f) in &originals {
        c.arg(f);
    }
    run(c);
    d.ok(&["publish-dir", tree.to_str().expect("utf-8")]);
    // Everything made, under /test/preview/ (catalogued by name).
    let mut made_names = Vec::new();
    for e in std::fs::read_dir(&made).expect("made") {
        let p = e.expect("entry").path();
        let n = format!(
            "/test/preview/{}",
            p.file_name().expect("name").to_string_lossy()
        );
        d.ok(&["put", p.to_str().expect("utf-8"), &n]);
        made_names.push(n);
    }
    for n in &made_names {
        wait_catalogued(&base, n);
    }

    // Real files, as published and deflated + shuffled.
    for (rel, f) in &originals {
        let comps: Vec<&str> = rel.split('/').collect();
        let file = f.file_name().expect("name").to_string_lossy().into_owned();
        let name = format!("/cmip6/{}/{file}", comps[1..9].join("/"));
        wait_catalogued(&base, &name);
        let (s, _, body) = get(&format!("{base}/api/preview{name}"), &[]);
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
        let list: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(list["variables"][0]["name"], "ta", "{list}");
        assert_eq!(list["variables"][0]["level_dim"], "plev", "{list}");
        check(&base, &name, f, "ta", &[]);
        check(&base, &name, f, "ta", &["3", "1"]);
        let z = made.join(format!("z_{file}"));
        check(
            &base,
            &format!("/test/preview/z_{file}"),
            &z,
            "ta",
            &["2", "1"],
        );
    }

    // Every netCDF kind: packed, filled, missing; with and without leading dims.
    for k in KINDS {
        let name = format!("/test/preview/{k}.nc");
        let f = made.join(format!("{k}.nc"));
        let v = check(&base, &name, &f, "t", &[]);
        assert_eq!(v["index"], serde_json::json!([0, 0]));
        let v = check(&base, &name, &f, "t", &["1", "1"]);
        assert!(v["masked"].as_u64().is_some_and(|m| m > 0), "{v}");
        check(&base, &name, &f, "d", &[]);
        // A date picks the step (noleap days since 2000-01-01: 45 = 2000-02-15).
        let (s, _, body) = get(
            &format!("{base}/api/preview{name}?variable=t&time=2000-02&format=json"),
            &[],
        );
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
        let j: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(j["index"], serde_json::json!([1, 0]));
        assert_eq!(j["time"], "2000-02-15T00:00:00");
    }

    // The cache: the second request is a hit, the ETag answers 304.
    let url = format!("{base}/api/preview/test/preview/nc4.nc?variable=d&version=");
    let (_, _, body) = get(&format!("{base}/api/file/test/preview/nc4.nc"), &[]);
    let rec: Value = serde_json::from_slice(&body).expect("json");
    let url = format!("{url}{}", rec["version"]);
    let (s1, h1, png) = get(&url, &[]);
    let (s2, h2, png2) = get(&url, &[]);
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(png, png2);
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(h1.contains("content-type: image/png"), "{h1}");
    assert!(h2.contains("x-preview-cache: hit"), "{h2}");
    assert!(
        h2.contains("cache-control: public, max-age=31536000, immutable"),
        "{h2}"
    );
    let etag = h2
        .lines()
        .find_map(|l| l.strip_prefix("etag: "))
        .expect("etag")
        .trim()
        .to_string();
    let (s3, _, _) = get(&url, &["-H", &format!("If-None-Match: {etag}")]);
    assert_eq!(s3, 304);

    // Errors: each a JSON body with the reason.
    let cases: [(&str, u16, &str); 10] = [
        ("nc4.nc?variable=nope", 404, "no variable \\\"nope\\\""),
        (
            "nc4.nc?variable=t&time=9",
            400,
            "time index 9 is past the last step",
        ),
        (
            "nc4.nc?variable=t&level=5",
            400,
            "level index 5 is past the last",
        ),
        ("nc4.nc?variable=t&time=1999-01", 400, "no time step at"),
        ("nc4.nc?variable=t&colour=red", 400, "unknown parameter"),
        (
            "classic.nc?variable=curv",
            422,
            "not available: not on a latitude/longitude grid",
        ),
        (
            "bad_filter.nc?variable=v",
            422,
            "not available: v: HDF5 error: unsupported filter: filter id 32015",
        ),
        (
            "bad_truncated.nc?variable=t",
            422,
            "not available: malformed netCDF file: truncated HDF5 file",
        ),
        ("bad_past_end.nc?variable=t", 422, "but the file has only"),
        (
            "bad_huge_dim.nc?variable=d",
            422,
            "not available: malformed netCDF file",
        ),
    ];
    for (q, want, why) in cases {
        let (s, h, body) = get(&format!("{base}/api/preview/test/preview/{q}"), &[]);
        let body = String::from_utf8_lossy(&body);
        assert_eq!(s, want, "{q}: {body}");
        assert!(h.contains("content-type: application/json"), "{q}: {h}");
        assert!(body.contains(why), "{q}: {body}");
    }
    let (s, _, _) = get(&format!("{base}/api/preview/test/preview/none.nc"), &[]);
    assert_eq!(s, 404);
    // Still up.
    let (s, _, _) = get(&format!("{base}/api/status"), &[]);
    assert_eq!(s, 200);
}

/// VmRSS of `pid`, KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("status")
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

/// A flood of distinct previews (every sample file at two time steps and
/// levels, 64 requests at once: decodes, cache misses, requests given up at
/// the deadline) leaves the daemon's RSS within the preview cache's 64 MiB
/// plus 64 MiB of where it was before. (Before the fix: about +190 MiB after
/// one such flood and +320 MiB after six, as every abandoned request freed
/// its decode slot and the decoders' freed buffers stayed in glibc's arenas.)
#[test]
fn a_flood_of_previews_leaves_rss_within_the_cache_bound() {
    let root = sample_root();
    let d = Daemon::start_release(&["--http", "127.0.0.1:0"]);
    let pid = d.child.id();
    let base = format!("http://{}", d.http.clone().expect("gateway address"));
    d.ok(&["publish-dir", root.to_str().expect("utf-8")]);
    let (s, _, body) = get(&format!("{base}/api/search?type=file&limit=1000"), &[]);
    assert_eq!(s, 200);
    let hits: Value = serde_json::from_slice(&body).expect("json");
    let names: Vec<String> = hits["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| h["name"].as_str().expect("name").to_string())
        .collect();
    assert!(names.len() >= 300, "{} files catalogued", names.len());
    // One preview first, so that what is loaded once (code, the reader's
    // tables) is in the baseline.
    let (s, _, _) = get(&format!("{base}/api/preview{}?variable=ta", names[0]), &[]);
    assert_eq!(s, 200);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let before = rss_kib(pid);
    let cfg = d.dir.path().join("flood.cfg");
    let mut text = String::new();
    for t in 0..2 {
        for n in &names {
            if !text.is_empty() {
                text.push_str("next\n");
            }
            text.push_str(&format!(
                "url = \"{base}/api/preview{n}?variable=ta&time={}&level={t}\"\noutput = \"/dev/null\"\nwrite-out = \"%{{http_code}}\\n\"\nmax-time = 120\ngloboff\n",
                t + 1
            ));
        }
    }
    std::fs::write(&cfg, text).expect("write");
    let o = Command::new("curl")
        .args([
            "-s",
            "--parallel",
            "--parallel-immediate",
            "--parallel-max",
            "64",
            "-K",
        ])
        .arg(&cfg)
        .output()
        .expect("curl");
    let codes: Vec<u16> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap_or(0))
        .collect();
    assert_eq!(codes.len(), 2 * names.len());
    // 200, 400 (a step past a file's last), 503 (the deadline passed while
    // waiting for a decode): nothing else.
    let bad: Vec<_> = codes
        .iter()
        .filter(|c| ![200, 400, 503].contains(*c))
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
    let mut ok = codes.iter().filter(|c| **c == 200).count();
    // On a loaded machine many of the flood's requests pass their deadline (503):
    // distinct previews one at a time make up the hundred decodes the bound is
    // about, whatever the load.
    let mut more = names.iter().cycle().take(names.len() * 2).enumerate();
    while ok < 100 {
        let Some((i, n)) = more.next() else { break };
        let t = 3 + i / names.len();
        let (s, _, _) = get(&format!("{base}/api/preview{n}?variable=ta&time={t}"), &[]);
        assert!([200, 400, 503].contains(&s), "preview {n} at {t}: {s}");
        ok += usize::from(s == 200);
    }
    assert!(ok >= 100, "only {ok} previews made");
    std::thread::sleep(std::time::Duration::from_secs(1));
    let after = rss_kib(pid);
    eprintln!(
        "RSS {} MiB before, {} MiB after {} preview requests ({ok} answered 200)",
        before / 1024,
        after / 1024,
        codes.len()
    );
    let bound = before + (64 + 64) * 1024;
    assert!(
        after <= bound,
        "RSS {after} KiB after the flood, over {bound} KiB (the {before} KiB before + the 64 MiB preview cache + 64 MiB)"
    );
    let (s, _, _) = get(&format!("{base}/api/status"), &[]);
    assert_eq!(s, 200);
}

/// Runs `series_check.py series` (`args`: NAME VAR LEVEL FILE… -- point LAT LON | bbox
/// W S E N): the JSON series equal to netCDF4-python's, the PNG 740 × 400.
fn series_check(base: &str, args: &[&str]) {
    let mut c = python_script("series_check.py");
    c.args(["series", base]).args(args);
    let out = c.output().expect("python");
    assert!(
        out.status.success(),
        "series_check.py series {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stdout).trim());
}

/// Time series (`point=`, `bbox=`) of files and of datasets: real CMIP6 datasets whole
/// (MIROC6: 7 contiguous files of 120 and 60 months; CAMS-CSM1-0: 5 files each in its
/// own `days since`) and ncgen files (packed, filled and missing values, netCDF-3 and
/// netCDF-4 deflated); values and dates equal netCDF4-python's, PNGs decode at
/// 740 × 400; hostile parameters are a 400 JSON error.
#[test]
fn time_series_at_a_point_and_over_an_area_match_netcdf4_python() {
    const MIROC: &str = "CMIP6/CMIP/MIROC/MIROC6/historical/r1i1p1f1/Amon/ta/gn/v20190311";
    const CAMS: &str = "CMIP6/CMIP/CAMS/CAMS-CSM1-0/historical/r1i1p1f1/Amon/ta/gn/v20190708";
    let root = sample_root();
    let d = Daemon::start_release(&["--http", "127.0.0.1:0"]);
    let base = format!("http://{}", d.http.clone().expect("gateway address"));
    let tree = d.dir.path().join("tree");
    let made = d.dir.path().join("made");
    let mut datasets = Vec::new();
    for rel in [MIROC, CAMS] {
        let to = tree.join(rel);
        std::fs::create_dir_all(&to).expect("mkdir");
        let mut files = Vec::new();
        for e in std::fs::read_dir(root.join(rel)).expect("sample dataset") {
            let p = e.expect("entry").path();
            let dst = to.join(p.file_name().expect("name"));
            std::fs::copy(&p, &dst).expect("copy");
            files.push(dst);
        }
        files.sort();
        datasets.push((rel, files));
    }
    let mut c = python_script("preview_check.py");
    c.arg("make").arg(&made);
    run(c);
    d.ok(&["publish-dir", tree.to_str().expect("utf-8")]);
    for k in ["classic", "nc4"] {
        let p = made.join(format!("{k}.nc"));
        d.ok(&[
            "put",
            p.to_str().expect("utf-8"),
            &format!("/test/series/{k}.nc"),
        ]);
        wait_catalogued(&base, &format!("/test/series/{k}.nc"));
    }
    let path = |p: &Path| p.to_str().expect("utf-8").to_string();

    // One file: a point and a box (4 grid points), real CMIP6 data.
    let (rel, files) = &datasets[0];
    let comps: Vec<&str> = rel.split('/').collect();
    let first = &files[0];
    let name = format!(
        "/cmip6/{}/{}",
        comps[1..9].join("/"),
        first.file_name().expect("name").to_string_lossy()
    );
    wait_catalogued(&base, &name);
    let f = path(first);
    series_check(&base, &[&name, "ta", "1", &f, "--", "point", "88.5", "1"]);
    series_check(
        &base,
        &[&name, "ta", "0", &f, "--", "bbox", "-1", "80", "2", "90"],
    );

    // ncgen files: packed shorts with fill and missing values; the whole globe, a box
    // across the seam (170..190 on a 0..315 grid: two runs), a point west of 0.
    for k in ["classic", "nc4"] {
        let name = format!("/test/series/{k}.nc");
        let f = path(&made.join(format!("{k}.nc")));
        series_check(
            &base,
            &[
                &name, "t", "1", &f, "--", "bbox", "-180", "-90", "180", "90",
            ],
        );
        series_check(
            &base,
            &[&name, "t", "0", &f, "--", "bbox", "170", "-40", "190", "40"],
        );
        series_check(&base, &[&name, "t", "1", &f, "--", "point", "-50", "-60"]);
    }

    // Datasets: every file's series in turn, the units of each file its own.
    for (rel, files) in &datasets {
        let id = rel.replace('/', ".");
        let name = format!("/{id}");
        let mut args: Vec<String> = vec![name, "ta".into(), "0".into()];
        args.extend(files.iter().map(|f| path(f)));
        args.push("--".into());
        let mut point = args.clone();
        point.extend(["point", "89", "0.5"].map(String::from));
        let point: Vec<&str> = point.iter().map(String::as_str).collect();
        series_check(&base, &point);
        args.extend(["bbox", "-10", "-90", "10", "90"].map(String::from));
        let bbox: Vec<&str> = args.iter().map(String::as_str).collect();
        series_check(&base, &bbox);
    }

    // Hostile parameters: a 400 JSON error each, for a file and for a dataset.
    for (name, var) in [
        ("/test/series/nc4.nc".to_string(), "t"),
        (format!("/{}", MIROC.replace('/', ".")), "ta"),
    ] {
        let mut c = python_script("series_check.py");
        c.args(["hostile", &base, &name, var]);
        run(c);
    }
    // A variable without time is not a series (422); a dataset id names no map (400).
    let (s, _, body) = get(
        &format!("{base}/api/preview/test/series/nc4.nc?variable=d&point=0,0"),
        &[],
    );
    let body = String::from_utf8_lossy(&body);
    assert_eq!(s, 422, "{body}");
    assert!(body.contains("has no time dimension"), "{body}");
    let (s, _, body) = get(
        &format!("{base}/api/preview/{}?variable=ta", MIROC.replace('/', ".")),
        &[],
    );
    assert_eq!(s, 400, "{}", String::from_utf8_lossy(&body));
    let (s, _, _) = get(&format!("{base}/api/status"), &[]);
    assert_eq!(s, 200);
}
