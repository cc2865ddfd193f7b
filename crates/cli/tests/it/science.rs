//! The science layer end to end: `example-data` → `publish-dir` → `search`
//! (CLI, and python-ndn over the catalog protocol) → `get --query`, with the
//! catalog following `put`, `mv` and `rm`.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

/// CMIP6 DRS facets of a relative path `CMIP6/<activity>/<institution>/
/// <source>/<experiment>/<member>/<table>/<variable>/<grid>/<version>/<file>`.
fn drs_facets(p: &Path) -> BTreeMap<&'static str, String> {
    let c: Vec<String> = p.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    assert_eq!(c.len(), 11, "not a CMIP6 DRS path: {}", p.display());
    let keys = [
        "mip_era",
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
    keys.iter().zip(&c).map(|(k, v)| (*k, v.clone())).collect()
}

/// The relative paths of the latest DRS version of each file (the catalog's
/// default view: one record per file name, its newest version).
fn latest(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut by_file: BTreeMap<(PathBuf, String), (String, PathBuf)> = BTreeMap::new();
    for p in files {
        let f = drs_facets(p);
        let dataset = p.parent().unwrap().parent().unwrap().to_path_buf();
        let key = (
            dataset,
            p.file_name().unwrap().to_string_lossy().into_owned(),
        );
        let v = f["version"].clone();
        let e = by_file.entry(key).or_insert((v.clone(), p.clone()));
        if v > e.0 {
            *e = (v, p.clone());
        }
    }
    by_file.into_values().map(|(_, p)| p).collect()
}

/// Runs `publish-dir TREE` (with more args) and returns its JSON report.
fn publish_dir(d: &Daemon, tree: &Path, extra: &[&str]) -> Value {
    let report = d.dir.path().join("report.json");
    let mut a = vec![
        "publish-dir",
        tree.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    a.extend_from_slice(extra);
    d.ok(&a);
    serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap()
}

fn search_json(d: &Daemon, args: &[&str]) -> Value {
    let mut a = vec!["search", "--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&d.ok(&a)).unwrap()
}

#[test]
fn publish_dir_search_and_get_query_end_to_end() {
    let d = Daemon::start(&[]);
    let tree = d.dir.path().join("example");
    d.ok(&["example-data", tree.to_str().unwrap()]);
    let all = files_under(&tree);
    assert!(all.len() >= 10, "example-data wrote {} files", all.len());
    let latest = latest(&all);

    // Dry run: every file translated, nothing published.
    let r = publish_dir(&d, &tree, &["--dry-run"]);
    assert_eq!(r["files"], all.len());
    assert_eq!(r["counts"]["translated"], all.len(), "{}", r["counts"]);
    assert!(
        d.ok(&["ls"]).trim().is_empty(),
        "a dry run published something"
    );

    // Publish.
    let r = publish_dir(&d, &tree, &[]);
    assert_eq!(r["counts"]["published"], all.len(), "{}", r["counts"]);
    // A second run skips everything (resumable).
    let r = publish_dir(&d, &tree, &[]);
    assert_eq!(r["counts"]["unchanged"], all.len(), "{}", r["counts"]);
    assert!(r["counts"]["published"].is_null());
    // A file changed since: published again, as a new version of its name.
    let touched = tree.join(&all[0]);
    let bytes = std::fs::read(&touched).unwrap();
    std::fs::write(&touched, &bytes).unwrap();
    let r = publish_dir(&d, &tree, &[]);
    assert_eq!(r["counts"]["published"], 1, "{}", r["counts"]);
    assert_eq!(r["counts"]["unchanged"], all.len() - 1, "{}", r["counts"]);

    // Search: totals and facet counts equal a brute-force count of the tree.
    let page = search_json(&d, &["--facets", "--limit", "1000"]);
    assert_eq!(page["total"], latest.len(), "{page}");
    // Each record names its version's signed manifest (as `put` records do).
    for h in page["hits"].as_array().unwrap() {
        let m = h["manifest_digest"].as_str().unwrap_or_default();
        assert!(
            m.len() == 64 && m.bytes().all(|b| b.is_ascii_hexdigit()),
            "no manifest digest in {h}"
        );
    }
    let mut want: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for p in &latest {
        for (k, v) in drs_facets(p) {
            *want.entry(k.to_string()).or_default().entry(v).or_default() += 1;
        }
    }
    for facet in [
        "source_id",
        "experiment_id",
        "variable_id",
        "table_id",
        "member_id",
    ] {
        let got: BTreeMap<String, u64> = page["facet_counts"][facet]
            .as_array()
            .unwrap_or_else(|| panic!("no counts for {facet}: {}", page["facet_counts"]))
            .iter()
            .map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_u64().unwrap()))
            .collect();
        assert_eq!(got, want[facet], "{facet}");
    }
    let (source, n_source) = want["source_id"]
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), *v))
        .unwrap();
    let page = search_json(&d, &[&format!("source_id={source}")]);
    assert_eq!(page["total"], n_source);
    assert!(page["hits"]
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["facets"]["source_id"] == source.as_str()));
    // Every version: the file published twice counts twice.
    let page = search_json(&d, &["--all-versions", "--limit", "1000"]);
    assert_eq!(page["total"], all.len() + 1);

    // A python-ndn consumer asks the catalog over NDN.
    let mut c = python_script("catalog_query.py");
    let q = serde_json::json!({"filters": {"source_id": [source]}, "limit": 5}).to_string();
    c.args([
        d.socket.to_str().unwrap(),
        "/localhost/granary/catalog",
        "search",
        &q,
    ]);
    let o = c.output().unwrap();
    let line = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap_or("{}")
        .to_string();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert!(
        o.status.success(),
        "python-ndn: {line} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(v["verified"], true);
    assert_eq!(v["answer"]["total"], n_source, "{v}");

    // get --query: every matching file, in the DRS layout, byte-identical.
    let expect: Vec<&PathBuf> = latest
        .iter()
        .filter(|p| drs_facets(p)["source_id"] == source)
        .collect();
    let out = d.dir.path().join("out");
    let q = format!("source_id={source}");
    let listed = d.ok(&[
        "get",
        "--query",
        &q,
        "-o",
        out.to_str().unwrap(),
        "--dry-run",
    ]);
    assert_eq!(listed.lines().count(), expect.len(), "{listed}");
    assert!(!out.exists(), "--dry-run fetched something");
    d.ok(&["get", "--query", &q, "-o", out.to_str().unwrap(), "-q"]);
    let got = files_under(&out);
    assert_eq!(got.len(), expect.len(), "{got:?}");
    for p in expect {
        assert_eq!(
            std::fs::read(out.join(p)).unwrap(),
            std::fs::read(tree.join(p)).unwrap(),
            "{}",
            p.display()
        );
    }

    // The catalog follows mv and rm.
    let first = page_names(&search_json(
        &d,
        &[&format!("source_id={source}"), "--limit", "1"],
    ));
    let old = &first[0];
    let new = format!("/moved{}", old);
    d.ok(&["mv", old, &new]);
    let page = search_json(&d, &[&format!("source_id={source}"), "--limit", "1000"]);
    let names = page_names(&page);
    assert!(names.contains(&new) && !names.contains(old), "{names:?}");
    d.ok(&["rm", &new]);
    let page = search_json(&d, &[&format!("source_id={source}"), "--limit", "1000"]);
    assert!(!page_names(&page).contains(&new));

    // And a plain put through the daemon: found by its file name.
    let f = d.dir.path().join("notes-1234.txt");
    std::fs::write(&f, b"not a netCDF file").unwrap();
    d.ok(&["put", f.to_str().unwrap(), "/misc/notes-1234.txt"]);
    let page = search_json(&d, &["notes-1234.txt"]);
    assert_eq!(page["total"], 1, "{page}");
}

fn page_names(page: &Value) -> Vec<String> {
    page["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn search_without_a_daemon_reads_the_embedded_catalog_and_bad_queries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let tree = dir.path().join("tree");
    let g = |args: &[&str]| {
        let mut c = granary();
        c.args([
            "--data-dir",
            data.to_str().unwrap(),
            "--socket",
            data.join("none.sock").to_str().unwrap(),
        ]);
        c.args(args);
        c.output().unwrap()
    };
    assert!(g(&["example-data", tree.to_str().unwrap()])
        .status
        .success());
    let o = g(&["publish-dir", tree.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = g(&["search", "--json", "variable_id=tas"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["total"].as_u64().unwrap() > 0);
    // Hostile input is a clear error or an exact empty answer, never a crash.
    for q in [
        "source_id='; DROP TABLE records; --",
        "\"quoted\" NEAR(a b)",
        "x=%_%",
        "source_id=%",
    ] {
        let o = g(&["search", "--json", q]);
        assert!(o.status.code().is_some(), "{q}: killed");
        if o.status.success() {
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["total"], 0, "{q}: {v}");
        }
    }
    // The catalog still answers afterwards.
    let o = g(&["search", "--json", "variable_id=tas"]);
    let v2: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v2["total"], v["total"]);
    // Catalog rebuild from the files gives the same answer.
    assert!(g(&["catalog", "rebuild"]).status.success());
    let o = g(&["search", "--json", "variable_id=tas"]);
    let v3: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v3["total"], v["total"]);
}

/// `granary search --node PREFIX`: one node asks another node's catalog over NDN (a TCP
/// face and a route to its node prefix), and gets what that node answers locally;
/// `get --query --flat` writes every match straight into the output directory.
#[test]
fn remote_search_over_ndn_and_flat_get() {
    let b = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let tree = b.dir.path().join("example");
    b.ok(&["example-data", tree.to_str().unwrap()]);
    let r = publish_dir(&b, &tree, &[]);
    let published = r["counts"]["published"].as_u64().unwrap();
    assert!(published >= 10, "{}", r["counts"]);
    let toml = std::fs::read_to_string(b.data.join("node.toml")).unwrap();
    let b_prefix = toml
        .lines()
        .find_map(|l| l.strip_prefix("node_prefix = \""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap_or_else(|| panic!("no node_prefix in {toml}"))
        .to_string();
    let b_catalog = format!("{b_prefix}/catalog");

    let a = Daemon::start(&[]);
    assert_eq!(
        search_json(&a, &[])["total"],
        0,
        "a starts with an empty catalog"
    );
    let b_tcp = format!("tcp://{}", b.tcp.as_ref().unwrap());
    a.ok(&["route", "add", &b_prefix, &b_tcp]);
    for args in [
        vec!["--facets", "--limit", "1000"],
        vec!["source_id=CanESM5", "--facets"],
        vec![
            "variable_id=tas",
            "experiment_id=historical,ssp585",
            "--limit",
            "3",
        ],
        vec!["temperature", "--all-versions"],
    ] {
        let mut remote_args = vec!["--node", b_catalog.as_str()];
        remote_args.extend_from_slice(&args);
        let remote = search_json(&a, &remote_args);
        let local = search_json(&b, &args);
        assert!(remote["total"].as_u64().unwrap() > 0, "{args:?}: {remote}");
        assert_eq!(remote["total"], local["total"], "{args:?}");
        assert_eq!(page_names(&remote), page_names(&local), "{args:?}");
        assert_eq!(remote["facet_counts"], local["facet_counts"], "{args:?}");
    }
    // The readable table works remotely too, and a bad query is refused by the remote
    // catalog with its reason.
    let table = a.ok(&["search", "--node", &b_catalog, "source_id=MIROC6"]);
    assert!(table.contains("MIROC6"), "{table}");
    let o = a.cli(&["search", "--node", &b_catalog, "limit=99999"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("limit"), "{err}");
    // No route: a clear failure, not a hang.
    let o = a.cli(&["search", "--node", "/no/such/node/catalog"]);
    assert!(!o.status.success());

    // get --query --flat: every latest match by its file name alone, byte-identical.
    let all = files_under(&tree);
    let newest = latest(&all);
    let expect: Vec<&PathBuf> = newest
        .iter()
        .filter(|p| drs_facets(p)["source_id"] == "CanESM5")
        .collect();
    assert!(expect.len() >= 2);
    let out = b.dir.path().join("flat");
    b.ok(&[
        "get",
        "--query",
        "source_id=CanESM5",
        "-o",
        out.to_str().unwrap(),
        "--flat",
        "-q",
    ]);
    let got = files_under(&out);
    assert_eq!(got.len(), expect.len(), "{got:?}");
    assert!(got.iter().all(|p| p.components().count() == 1), "{got:?}");
    for p in expect {
        let file = p.file_name().unwrap();
        assert_eq!(
            std::fs::read(out.join(file)).unwrap(),
            std::fs::read(tree.join(p)).unwrap(),
            "{}",
            p.display()
        );
    }
    // Dataset-level latest: CanESM5 historical tas has an older DRS version whose one
    // file (1850-1853) was split in two by the newer one; by name all three files are
    // latest, by dataset only the newer version's two.
    let ds = "source_id=CanESM5 variable_id=tas experiment_id=historical member_id=r1i1p1f1";
    let terms: Vec<&str> = ds.split(' ').collect();
    let by_name = search_json(&b, &terms);
    assert_eq!(by_name["total"], 3, "{by_name}");
    let mut t = terms.clone();
    t.push("latest=dataset");
    let by_dataset = search_json(&b, &t);
    assert_eq!(by_dataset["total"], 2, "{by_dataset}");
    assert!(by_dataset["hits"]
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["facets"]["version"] == "v20190429"));
    let remote = search_json(&a, &[&["--node", b_catalog.as_str()][..], &t[..]].concat());
    assert_eq!(remote["total"], 2, "{remote}");

    // Two versions of one file would land on one path: refused, nothing written.
    let one = newest
        .iter()
        .find(|p| drs_facets(p)["source_id"] == "MIROC6")
        .unwrap();
    let bytes = std::fs::read(tree.join(one)).unwrap();
    std::fs::write(tree.join(one), &bytes).unwrap(); // new mtime: published again
    let r = publish_dir(&b, &tree, &[]);
    assert_eq!(r["counts"]["published"], 1, "{}", r["counts"]);
    let out2 = b.dir.path().join("flat2");
    let o = b.cli(&[
        "get",
        "--query",
        "source_id=MIROC6 latest=false",
        "-o",
        out2.to_str().unwrap(),
        "--flat",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--flat"), "{err}");
    assert!(!out2.exists() || files_under(&out2).is_empty());
}

/// Data files of versions in a store (`@<digits>`, not the files beside).
fn version_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let n = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                stack.push(p);
            } else if n.len() > 1
                && n.starts_with('@')
                && n[1..].bytes().all(|b| b.is_ascii_digit())
            {
                out.push(p);
            }
        }
    }
    out
}

/// `publish-dir` killed (SIGKILL) while it publishes: every version that
/// is there is complete (its bytes are its source file's, its hashes and
/// signed manifest beside it), none is half there; a second run publishes
/// the rest and fails nothing.
#[test]
fn a_killed_publish_dir_leaves_each_file_complete_or_absent() {
    let d = Daemon::start(&[]);
    let example = d.dir.path().join("example");
    d.ok(&["example-data", example.to_str().unwrap()]);
    // More files: each example file again under 12 more member ids.
    let tree = d.dir.path().join("tree");
    copy_under_members(&example, &tree, 13);
    let all = files_under(&tree);
    let mut by_file: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    for rel in &all {
        let n = rel.file_name().unwrap().to_string_lossy().into_owned();
        by_file
            .entry(n)
            .or_default()
            .push(std::fs::read(tree.join(rel)).unwrap());
    }
    let objects = d.data.join("repo/objects");
    let mut child = d
        .command(&["publish-dir", tree.to_str().unwrap(), "--jobs", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while version_files(&objects).is_empty() && std::time::Instant::now() < end {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let _ = child.kill();
    child.wait().unwrap();
    let there = version_files(&objects);
    for v in &there {
        let name = v.parent().unwrap().file_name().unwrap().to_string_lossy();
        let bytes = std::fs::read(v).unwrap();
        assert!(
            by_file[&*name].contains(&bytes),
            "{}: not its source's bytes",
            v.display()
        );
        for suffix in ["hashes", "manifest", "levels"] {
            let mut p = v.as_os_str().to_owned();
            p.push(format!(".{suffix}"));
            assert!(Path::new(&p).exists(), "{} has no .{suffix}", v.display());
        }
    }
    eprintln!(
        "{} of {} files were there after the kill",
        there.len(),
        all.len()
    );
    let r = publish_dir(&d, &tree, &[]);
    assert!(r["counts"]["failed"].is_null(), "{}", r["counts"]);
    let published = r["counts"]["published"].as_u64().unwrap_or(0);
    let unchanged = r["counts"]["unchanged"].as_u64().unwrap_or(0);
    assert_eq!(published + unchanged, all.len() as u64, "{}", r["counts"]);
    assert_eq!(
        version_files(&objects).len() as u64,
        there.len() as u64 + published
    );
}
