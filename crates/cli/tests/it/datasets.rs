//! Dataset records on real data: the 326 CMIP6 files of ESMValTool's sample data
//! (tests/interop/.venv) published by a real daemon, plus a new version of one dataset
//! with its middle file left out. The datasets `granary search --datasets`,
//! `/api/search?type=dataset` and `/esg-search/search?type=Dataset` report agree with a
//! brute-force grouping of the DRS directories, the dataset with the hole reports one
//! gap between the files around it, and a removal and a rename update the records.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

/// The dataset copied as a new version with its middle file left out.
const GAPPED: &str = "CMIP6/CMIP/SNU/SAM0-UNICON/historical/r1i1p1f1/Amon/ta/gn";
const OLD_VERSION: &str = "v20190323";
const NEW_VERSION: &str = "v20990101";

fn nc_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            nc_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "nc") {
            out.push(p);
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let t = to.join(p.file_name().unwrap());
        if p.is_dir() {
            std::fs::create_dir_all(&t).unwrap();
            copy_tree(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

fn curl(url: &str) -> Value {
    let o = Command::new("curl")
        .args(["-s", "-g", "--fail-with-body", "--max-time", "60", url])
        .output()
        .expect("curl (Debian package curl) must be installed");
    assert!(
        o.status.success(),
        "{url}: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{url}: not JSON: {e}"))
}

/// instance id -> number of files, from a list of dataset JSON objects.
fn counts(hits: &[Value], id: &str, n: &str) -> BTreeMap<String, u64> {
    hits.iter()
        .map(|d| (d[id].as_str().unwrap().to_string(), d[n].as_u64().unwrap()))
        .collect()
}

#[test]
fn datasets_of_real_cmip6_files_agree_everywhere() {
    let d = Daemon::start(&["--http", "127.0.0.1:0"]);
    let base = format!("http://{}", d.http.clone().expect("no gateway line"));
    let tree = d.dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    copy_tree(&sample_root(), &tree);
    // A new version of one dataset, its middle file (in time order) left out.
    let old_dir = tree.join(GAPPED).join(OLD_VERSION);
    let new_dir = tree.join(GAPPED).join(NEW_VERSION);
    std::fs::create_dir_all(&new_dir).unwrap();
    let mut old: Vec<PathBuf> = std::fs::read_dir(&old_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    old.sort();
    assert!(
        old.len() >= 3,
        "{} has {} files",
        old_dir.display(),
        old.len()
    );
    let hole = old.len() / 2;
    for (k, f) in old.iter().enumerate() {
        if k != hole {
            std::fs::copy(f, new_dir.join(f.file_name().unwrap())).unwrap();
        }
    }
    let name_of = |p: &Path| p.file_name().unwrap().to_str().unwrap().to_string();
    let (before_hole, after_hole) = (name_of(&old[hole - 1]), name_of(&old[hole + 1]));

    // The brute-force grouping: every directory holding .nc files is a dataset.
    let mut files = Vec::new();
    nc_files(&tree, &mut files);
    assert_eq!(files.len(), 326 + old.len() - 1);
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for f in &files {
        let dir = f.parent().unwrap().strip_prefix(&tree).unwrap();
        *want
            .entry(dir.to_str().unwrap().replace('/', "."))
            .or_default() += 1;
    }
    let latest_n = want.len() as u64 - 1;

    d.ok(&["publish-dir", tree.to_str().unwrap()]);

    // Every sample file is an atmosphere file: the 56 daily ones (a MIP table of several
    // realms, no realm in the DRS path) take it from their `realm` attribute.
    let atmos: Value = serde_json::from_str(&d.ok(&[
        "search",
        "--json",
        "--all-versions",
        "--limit",
        "0",
        "realm=atmos",
    ]))
    .unwrap();
    assert_eq!(atmos["total"].as_u64(), Some(files.len() as u64), "{atmos}");

    // The CLI, through the daemon's catalog service.
    let out = d.ok(&["search", "--datasets", "--json", "--limit", "1000"]);
    let cli: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(cli["total"].as_u64(), Some(want.len() as u64));
    let hits = cli["hits"].as_array().unwrap();
    assert_eq!(counts(hits, "instance_id", "number_of_files"), want);
    for h in hits {
        let files_size = h["size"].as_u64().unwrap();
        assert!(files_size > 0);
    }

    // The gateway's API.
    let api = curl(&format!(
        "{base}/api/search?type=dataset&limit=1000&files=true"
    ));
    let api_hits = api["hits"].as_array().unwrap();
    assert_eq!(counts(api_hits, "instance_id", "number_of_files"), want);
    // Same records: sizes, coverage and contiguity agree with the CLI's.
    for (c, a) in hits.iter().zip(api_hits) {
        for k in [
            "instance_id",
            "size",
            "time_start",
            "time_end",
            "contiguous",
            "gaps",
            "overlaps",
        ] {
            assert_eq!(c[k], a[k], "{k} of {}", c["instance_id"]);
        }
        assert_eq!(a["datetime_start"], a["time_start"]);
        let listed = a["files"].as_array().unwrap();
        assert_eq!(listed.len() as u64, a["number_of_files"].as_u64().unwrap());
        let sum: u64 = listed.iter().map(|f| f["size"].as_u64().unwrap()).sum();
        assert_eq!(sum, a["size"].as_u64().unwrap());
    }

    // ESGF's index, type=Dataset.
    let esgf = curl(&format!(
        "{base}/esg-search/search?type=Dataset&limit=1000&format=application%2Fsolr%2Bjson"
    ));
    assert_eq!(
        esgf["response"]["numFound"].as_u64(),
        Some(want.len() as u64)
    );
    let docs = esgf["response"]["docs"].as_array().unwrap();
    assert_eq!(counts(docs, "instance_id", "number_of_files"), want);
    for doc in docs {
        let id = doc["instance_id"].as_str().unwrap();
        let (master, version) = id.rsplit_once('.').unwrap();
        assert_eq!(doc["master_id"], master);
        assert_eq!(doc["version"], version.trim_start_matches('v'));
        let c = hits.iter().find(|h| h["instance_id"] == id).unwrap();
        assert_eq!(doc["size"], c["size"]);
        assert_eq!(doc["datetime_start"], c["time_start"]);
        assert_eq!(doc["datetime_stop"], c["time_end"]);
        assert_eq!(doc["latest"], c["latest"]);
    }
    let latest = curl(&format!(
        "{base}/esg-search/search?type=Dataset&latest=true&limit=0&format=application%2Fsolr%2Bjson"
    ));
    assert_eq!(latest["response"]["numFound"].as_u64(), Some(latest_n));
    // STAC: one item per latest dataset.
    let stac = curl(&format!("{base}/stac/search?limit=5"));
    assert_eq!(stac["numberMatched"].as_u64(), Some(latest_n));

    // The dataset with the hole: one gap, between the files around it; the
    // original version, whole, has none, and is superseded.
    let gapped = format!("{}.{NEW_VERSION}", GAPPED.replace('/', "."));
    let g = hits
        .iter()
        .find(|h| h["instance_id"] == gapped.as_str())
        .unwrap();
    assert_eq!(g["contiguous"], false);
    let gaps = g["gaps"].as_array().unwrap();
    assert_eq!(gaps.len(), 1, "{g}");
    assert!(gaps[0]["after"].as_str().unwrap().ends_with(&before_hole));
    assert!(gaps[0]["before"].as_str().unwrap().ends_with(&after_hole));
    assert_eq!(g["latest"], true);
    let whole = format!("{}.{OLD_VERSION}", GAPPED.replace('/', "."));
    let w = hits
        .iter()
        .find(|h| h["instance_id"] == whole.as_str())
        .unwrap();
    assert_eq!(w["gaps"], serde_json::json!([]), "{w}");
    assert_eq!(w["latest"], false);
    let human = d.ok(&["search", "--datasets", "source_id=SAM0-UNICON"]);
    let sam0 = want.keys().filter(|k| k.contains(".SAM0-UNICON.")).count();
    assert!(human.contains(&format!("{sam0} datasets")), "{human}");
    assert!(human.contains("1 gap"), "{human}");
    assert!(
        human.contains(&format!("gap      {}", gaps[0]["from"].as_str().unwrap())),
        "{human}"
    );

    // A removal and a rename: the records follow.
    let one = |id: &str| -> Value {
        let p = curl(&format!(
            "{base}/api/search?type=dataset&id={id}&files=true"
        ));
        p["hits"][0].clone()
    };
    let first = one(&gapped)["files"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    d.ok(&["rm", &first]);
    assert_eq!(
        one(&gapped)["number_of_files"].as_u64(),
        Some(old.len() as u64 - 2)
    );
    let any = one(&gapped)["files"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let (dir, file) = any.rsplit_once('/').unwrap();
    let moved_dir = dir.replace("/r1i1p1f1/", "/r9i1p1f1/");
    d.ok(&["mv", &any, &format!("{moved_dir}/{file}")]);
    assert_eq!(
        one(&gapped)["number_of_files"].as_u64(),
        Some(old.len() as u64 - 3)
    );
    let moved = one(&gapped.replace(".r1i1p1f1.", ".r9i1p1f1."));
    assert_eq!(moved["number_of_files"].as_u64(), Some(1), "{moved}");
}
