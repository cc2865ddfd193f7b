//! The catalog follows the files through crashes and outages: a `publish-dir`
//! killed with SIGKILL and run again, a daemon started on a catalog that lost
//! entries, and a real PostgreSQL catalog stopped and started under a running
//! daemon (puts queued and catalogued once it is back, searches answering
//! "unavailable" / HTTP 503 meanwhile, a clean SIGTERM).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// The example tree copied under `copies` member ids: many small netCDF files.
fn big_tree(work: &Path, copies: usize) -> PathBuf {
    let example = work.join("example");
    let o = granary()
        .args(["example-data", example.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tree = work.join("tree");
    copy_under_members(&example, &tree, copies);
    tree
}

/// A granary command on `data` with no daemon (the socket does not exist).
fn local(data: &Path, args: &[&str]) -> Command {
    let mut c = granary();
    c.args([
        "--data-dir",
        data.to_str().unwrap(),
        "--socket",
        data.join("none.sock").to_str().unwrap(),
    ])
    .args(args);
    c
}

fn run_ok(mut c: Command) -> String {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{c:?}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// `catalog check --json`: (exit success, findings).
fn check(mut c: Command) -> (bool, Value) {
    let o = c.output().unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "catalog check: {e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.success(), v)
}

fn version_count(data: &Path) -> usize {
    run_ok(local(data, &["ls"])).lines().count()
}

/// `publish-dir` killed (SIGKILL) after its first group commit began: files
/// in `ls` that the catalog lacks. Even with the catalog queue lost (as a
/// run of an older granary left it), the second run catalogues the files it
/// skips as unchanged: `catalog check` is then clean and a search counts
/// what `ls` lists.
#[test]
fn a_rerun_of_a_killed_publish_dir_catalogues_what_the_kill_left_out() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let tree = big_tree(work.path(), 100);
    let all = files_under(&tree).len();
    let objects = data.join("repo/objects");
    let mut child = local(
        &data,
        &["publish-dir", tree.to_str().unwrap(), "--jobs", "2"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let t0 = Instant::now();
    let end = Instant::now() + Duration::from_secs(120);
    while version_count_fast(&objects) == 0 && Instant::now() < end {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = child.kill();
    child.wait().unwrap();
    let killed_at = t0.elapsed();
    let there = version_count(&data);
    assert!(there > 0 && there < all, "{there} of {all} after the kill");
    let _ = std::fs::remove_dir_all(data.join("catalog-queue"));
    let (clean, before) = check(local(&data, &["catalog", "check", "--json"]));
    eprintln!(
        "after the kill ({killed_at:?} in): {there} of {all} versions in ls, {} in the catalog",
        before["catalogued"]
    );
    assert!(!clean, "{before}");
    assert_eq!(before["files"], there as u64, "{before}");
    assert!(
        !before["missing"].as_array().unwrap().is_empty(),
        "the kill left nothing out of the catalog: {before}"
    );
    let report = work.path().join("report.json");
    run_ok(local(
        &data,
        &[
            "publish-dir",
            tree.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
    ));
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert!(r["counts"]["failed"].is_null(), "{}", r["counts"]);
    let (clean, after) = check(local(&data, &["catalog", "check", "--json"]));
    assert!(clean, "{after}");
    let ls = version_count(&data);
    assert_eq!(ls, all);
    assert_eq!(after["catalogued"], ls as u64, "{after}");
    let page: Value = serde_json::from_str(&run_ok(local(
        &data,
        &["search", "--json", "--all-versions", "--limit", "0"],
    )))
    .unwrap();
    assert_eq!(page["total"], ls as u64, "search total vs ls");
}

/// Version files (`@<digits>`) under `objects`, without listing the store.
fn version_count_fast(objects: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![objects.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let f = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                stack.push(p);
            } else if f.len() > 1
                && f.starts_with('@')
                && f[1..].bytes().all(|b| b.is_ascii_digit())
            {
                n += 1;
            }
        }
    }
    n
}

/// A catalog that lacks stored versions and holds one whose file is gone:
/// `catalog check` says so (non-zero); a daemon started on that data
/// directory repairs it at start and logs the figures.
#[test]
fn the_daemon_repairs_a_catalog_that_differs_from_the_files_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let other = dir.path().join("other-catalog");
    let f = dir.path().join("f.bin");
    std::fs::write(&f, noise(20_000, 5)).unwrap();
    // Catalogued here: kept, then one removed beside the catalog.
    for k in 0..3 {
        run_ok(local(
            &data,
            &["put", f.to_str().unwrap(), &format!("/t/kept{k}")],
        ));
    }
    // Published, but catalogued elsewhere: missing from this catalog.
    for k in 0..5 {
        run_ok(local(
            &data,
            &[
                "--catalog",
                other.to_str().unwrap(),
                "put",
                f.to_str().unwrap(),
                &format!("/t/missing{k}"),
            ],
        ));
    }
    run_ok(local(
        &data,
        &["--catalog", other.to_str().unwrap(), "rm", "/t/kept2"],
    ));
    let (clean, v) = check(local(&data, &["catalog", "check", "--json"]));
    assert!(!clean, "{v}");
    assert_eq!(v["files"], 7, "{v}");
    assert_eq!(v["missing"].as_array().unwrap().len(), 5, "{v}");
    assert_eq!(v["extra"][0][0], "/t/kept2", "{v}");
    let log = dir.path().join("daemon.log");
    let d = Daemon::start_with_stderr(
        tempfile::tempdir().unwrap(),
        data.clone(),
        &[],
        Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let end = Instant::now() + Duration::from_secs(30);
    let v = loop {
        let (clean, v) = check(d.command(&["catalog", "check", "--json"]));
        if clean || Instant::now() > end {
            break v;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(v["missing"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["extra"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["catalogued"], 7, "{v}");
    let page = search(&d, &["missing3"]);
    assert_eq!(page["total"], 1, "{page}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("catalog check: 7 stored version(s), 3 catalogued, 5 missing and 1 without a file repaired"),
        "{text}"
    );
}

fn search(d: &Daemon, args: &[&str]) -> Value {
    let mut a = vec!["search", "--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&d.ok(&a)).unwrap()
}

fn curl(url: &str) -> (u16, Value) {
    let o = Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", url])
        .output()
        .expect("curl (Debian package curl) must be installed");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let (body, code) = out.rsplit_once('\n').unwrap_or(("", "0"));
    (
        code.trim().parse().unwrap_or(0),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// A daemon on a real PostgreSQL catalog that is stopped and started again
/// on the same port: during the outage a put succeeds and says its entry is
/// queued, a search over NDN says the catalog is unavailable and the HTTP
/// gateway answers 503 with a JSON message; once PostgreSQL is back the
/// search answers within seconds, the queued entries are catalogued by the
/// daemon, `catalog check` is clean; SIGTERM ends the daemon with exit 0 and
/// no panic. The other node's record in the shared catalog is left alone.
#[test]
fn a_postgres_outage_queues_puts_answers_503_and_recovers() {
    let mut pg = pgcluster::PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
    let url = pg.create_db("granary_outage");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = dir.path().join("daemon.log");
    // Another node sharing the catalog: its record has no file here, and this
    // node's check must leave it alone.
    let other = dir.path().join("other-node");
    let g = dir.path().join("g.bin");
    std::fs::write(&g, noise(10_000, 3)).unwrap();
    run_ok(local(
        &other,
        &[
            "--catalog",
            &url,
            "put",
            g.to_str().unwrap(),
            "/elsewhere/theirs",
        ],
    ));
    let mut d = Daemon::start_with_stderr(
        tempfile::tempdir().unwrap(),
        data.clone(),
        &["--catalog", &url, "--http", "127.0.0.1:0"],
        Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let http = d.http.clone().expect("gateway address");
    let f = dir.path().join("f.bin");
    std::fs::write(&f, noise(30_000, 9)).unwrap();
    let put = |name: &str| -> (Value, String) {
        let o = d.cli(&[
            "--catalog",
            &url,
            "put",
            "--json",
            f.to_str().unwrap(),
            name,
        ]);
        assert!(
            o.status.success(),
            "put {name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        (
            serde_json::from_slice(&o.stdout).unwrap(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (v, _) = put("/pg/before");
    assert_eq!(v["catalog"], "done", "{v}");
    assert_eq!(search(&d, &["before"])["total"], 1);

    pg.stop().unwrap();
    let mut queued = Vec::new();
    for k in 0..3 {
        let name = format!("/pg/during{k}");
        let (v, err) = put(&name);
        assert_eq!(v["catalog"], "queued", "{v}");
        assert!(err.contains("catalog: queued"), "{err}");
        queued.push(name);
    }
    let o = d.cli(&["search", "--json", "during0"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unavailable"), "{err}");
    let (code, body) = curl(&format!("http://{http}/api/search?q=during0"));
    assert_eq!(code, 503, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("unavailable"),
        "{body}"
    );
    // `catalog check` cannot compare now: it fails, and says why.
    let o = d.cli(&["--catalog", &url, "catalog", "check"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unavailable"), "{err}");

    pg.resume().unwrap();
    let t = Instant::now();
    let page = loop {
        let o = d.cli(&["search", "--json", "--limit", "100"]);
        if o.status.success() {
            let p: Value = serde_json::from_slice(&o.stdout).unwrap();
            if p["total"] == 5 {
                break p;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "not caught up after {:?}: {}",
            t.elapsed(),
            String::from_utf8_lossy(&o.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("caught up {:?} after PostgreSQL came back", t.elapsed());
    for n in &queued {
        assert!(
            page["hits"]
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h["name"] == n.as_str()),
            "{n} not catalogued: {page}"
        );
    }
    let (code, body) = curl(&format!("http://{http}/api/search?q=during1"));
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["total"], 1, "{body}");
    let (clean, v) = check(d.command(&["--catalog", &url, "catalog", "check", "--json"]));
    assert!(clean, "{v}");
    assert_eq!(v["files"], 4, "{v}");
    assert_eq!(v["catalogued"], 5, "{v}");
    assert_eq!(
        search(&d, &["theirs"])["total"],
        1,
        "the other node's record went"
    );

    let st = Command::new("kill")
        .args(["-TERM", &d.child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let status = d.child.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "daemon exit {status}: {text}");
    assert!(!text.contains("panicked"), "{text}");
}
