//! ndn-python-repo 0.3's unmodified client classes (PutfileClient,
//! GetfileClient, DeleteClient, CommandChecker; driven by
//! tests/interop/python/repo_client.py) store, fetch and delete files in a
//! running `granary daemon` over the network command protocol
//! (docs/repo-protocol.md).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::Value;

/// The repo name the daemon registers by default.
const REPO: &str = "/granary/repo";

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 131 + 7 * seed as usize) % 251) as u8 ^ seed)
        .collect()
}

/// Runs repo_client.py (or `c`, a command running it); returns whether it
/// exited 0 and its one JSON line.
fn run_client(mut c: Command) -> (bool, Value) {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot start {c:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| {
            panic!(
                "{c:?} printed no JSON line\nstdout: {stdout}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let v: Value = serde_json::from_str(line).unwrap();
    (out.status.success(), v)
}

fn client(d: &Daemon, args: &[&str]) -> Command {
    let mut c = python_script("repo_client.py");
    c.arg(&d.socket).args(args).args(["--timeout", "60"]);
    c
}

fn put(d: &Daemon, repo: &str, file: &Path, name: &str) -> Value {
    let (ok, v) = run_client(client(d, &["put", repo, file.to_str().unwrap(), name]));
    assert!(ok, "put {name}: {v}");
    assert_eq!(v["status_code"], 200, "{v}");
    assert_eq!(v["insert_num"], v["segments"], "{v}");
    assert_eq!(v["notify_acked"], true, "{v}");
    v
}

fn get(d: &Daemon, repo: &str, name: &str, out: &Path) -> (bool, Value) {
    run_client(client(
        d,
        &["get", repo, name, out.to_str().unwrap(), "--overwrite"],
    ))
}

fn delete(d: &Daemon, repo: &str, name: &str) -> Value {
    let (ok, v) = run_client(client(d, &["delete", repo, name]));
    assert!(ok, "delete {name}: {v}");
    assert_eq!(v["status_code"], 200, "{v}");
    v
}

fn tmp_files(d: &Daemon) -> Vec<String> {
    std::fs::read_dir(d.dir.path().join("repo/tmp"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn stock_clients_put_get_and_delete_files() {
    let d = Daemon::start(&[]);
    let sizes = [1usize, 8192, 100_000, 5_000_000];
    let mut inserted = Vec::new();
    for (k, len) in sizes.into_iter().enumerate() {
        let src = d.dir.path().join(format!("in{len}"));
        std::fs::write(&src, data(len, k as u8)).unwrap();
        let name = format!("/science/run1/f{len}");
        let v = put(&d, REPO, &src, &name);
        let segments = v["segments"].as_u64().unwrap();
        assert_eq!(segments, len.div_ceil(8000) as u64, "{v}");
        inserted.push((name, src, len, segments));
    }

    // Fetched back byte-identical by GetfileClient (unversioned NAME/seg=i).
    for (name, src, len, segments) in &inserted {
        let dst = d.dir.path().join("out");
        let (ok, v) = get(&d, REPO, name, &dst);
        assert!(ok, "get {name}: {v}");
        assert_eq!(v["bytes"], *len, "{v}");
        assert_eq!(
            v["segments"], *segments,
            "served in the segments it was put in: {v}"
        );
        assert_eq!(
            std::fs::read(&dst).unwrap(),
            std::fs::read(src).unwrap(),
            "{name} round trip"
        );
        // Segments past the end are Nacked: no 3 s of timeouts for small objects.
        assert!(
            v["elapsed_ms"].as_f64().unwrap() < 2000.0,
            "slow fetch of {name}: {v}"
        );
    }

    // Stored as ordinary Granary objects: listed, stat'able, fetched by granary get.
    let ls = d.ok(&["ls", "/science"]);
    for (name, _, len, _) in &inserted {
        assert!(
            ls.lines()
                .any(|l| l.starts_with(&format!("{name}/v="))
                    && l.ends_with(&format!(" {len} bytes"))),
            "{name} missing from ls:\n{ls}"
        );
    }
    assert_eq!(ls.lines().count(), inserted.len(), "{ls}");
    let stat = d.ok(&["stat", "/science/run1/f100000"]);
    assert!(stat.contains("\"segment_size\": 8000"), "{stat}");
    assert!(stat.contains("\"signing\": \"digest\""), "{stat}");
    let dst = d.dir.path().join("granary-get");
    // (Inserted over the network by an unauthenticated client: a
    // DigestSha256 manifest, integrity only.)
    let o = d.cli(&["get", "/science/run1/f5000000", "-o", dst.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--integrity-only"));
    d.ok(&[
        "get",
        "/science/run1/f5000000",
        "--integrity-only",
        "-o",
        dst.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&dst).unwrap(), data(5_000_000, 3));

    // Delete: each reports the segments it removed, and the files are gone.
    for (name, _, _, segments) in &inserted {
        let v = delete(&d, REPO, name);
        assert_eq!(v["delete_num"], *segments, "{v}");
    }
    assert!(d.ok(&["ls"]).is_empty());
    for (name, _, _, _) in &inserted {
        let (ok, v) = get(&d, REPO, name, &d.dir.path().join("gone"));
        assert!(!ok, "{name} still served after delete: {v}");
        assert_eq!(v["segments"], 0, "{v}");
    }
    assert!(!d.cli(&["get", "/science/run1/f1"]).status.success());
    // Deleting what is not there is not an error for the protocol: 200, 0.
    assert_eq!(delete(&d, REPO, "/science/run1/f1")["delete_num"], 0);
    assert!(tmp_files(&d).is_empty(), "{:?}", tmp_files(&d));
}

/// Any repo name that reaches the repository works (its `/` route), and a
/// second insert of a name is what the name then serves.
#[test]
fn other_repo_names_and_reinsert() {
    let d = Daemon::start(&[]);
    let a = d.dir.path().join("a");
    let b = d.dir.path().join("b");
    std::fs::write(&a, data(30_000, 1)).unwrap();
    std::fs::write(&b, data(20_000, 2)).unwrap();
    put(&d, "/testrepo", &a, "/x/obj");
    let out = d.dir.path().join("out");
    assert!(get(&d, "/testrepo", "/x/obj", &out).0);
    assert_eq!(std::fs::read(&out).unwrap(), data(30_000, 1));
    // The old version's segments are in the node's cache now; the new
    // insert must fetch the client's, and get must then return the new bytes.
    put(&d, REPO, &b, "/x/obj");
    assert!(get(&d, REPO, "/x/obj", &out).0);
    assert_eq!(std::fs::read(&out).unwrap(), data(20_000, 2));
    assert_eq!(d.ok(&["ls", "/x"]).lines().count(), 2);
    // Delete removes every version: 4 + 3 segments.
    assert_eq!(delete(&d, "/testrepo", "/x/obj")["delete_num"], 7);
    assert!(d.ok(&["ls"]).is_empty());
}

/// The client stops answering after 3 of 13 segments: the check reports
/// 400 (PutfileClient raises), nothing of the object is visible, and no
/// temporary file stays behind. A name under the repo's own is refused.
#[test]
fn failed_insert_leaves_nothing() {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("in");
    std::fs::write(&src, data(100_000, 9)).unwrap();
    // repo_client.py with one change: segments 3.. are never answered.
    let script = format!(
        r#"
import sys
sys.path.insert(0, {dir:?})
import repo_client
from ndn.encoding import Component
from ndn_python_repo.clients import PutfileClient
serve = PutfileClient._on_interest
def stop_after_three(self, name, param, app_param):
    if Component.to_number(name[-1]) < 3:
        serve(self, name, param, app_param)
PutfileClient._on_interest = stop_after_three
sys.exit(repo_client.main(['repo_client.py'] + sys.argv[1:]))
"#,
        dir = interop_dir().join("python").to_str().unwrap()
    );
    let mut c = Command::new(python());
    c.args(["-c", &script])
        .arg(&d.socket)
        .args(["put", REPO, src.to_str().unwrap(), "/broken/obj"])
        .args(["--timeout", "60"]);
    let t = std::time::Instant::now();
    let (ok, v) = run_client(c);
    assert!(!ok, "{v}");
    assert_eq!(v["notify_acked"], true, "{v}");
    assert_eq!(v["status_code"], 400, "{v}");
    assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
    assert!(d.ok(&["ls"]).is_empty());
    assert!(tmp_files(&d).is_empty(), "{:?}", tmp_files(&d));
    let (ok, v) = get(&d, REPO, "/broken/obj", &d.dir.path().join("out"));
    assert!(!ok, "{v}");

    // Overlapping the repo name: refused at once.
    let (ok, v) = run_client(client(
        &d,
        &["put", REPO, src.to_str().unwrap(), "/granary/repo/obj"],
    ));
    assert!(!ok, "{v}");
    assert_eq!(v["status_code"], 400, "{v}");
    assert!(d.ok(&["ls"]).is_empty());
}

/// An app that registers `/` with ChildInherit at cost 0 and never answers
/// (ndn-python-repo's server does this with its default `register_root`),
/// connected before the client: the client's own prefix still wins the
/// equal-cost tie, so the repo's Interests for the command message and the
/// segments reach the client, not the silent app (which logs every
/// Interest it is given).
#[test]
fn a_silent_root_registrant_does_not_capture_the_clients_prefix() {
    let d = Daemon::start(&[]);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let socket = d.socket.clone();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<granary_packet::Name>::new()));
    let log = seen.clone();
    let silent = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut c = granary_app::Client::connect(&socket).await.unwrap();
            let mut p = granary_mgmt::ControlParameters::new();
            p.name = Some(granary_packet::Name::new());
            p.cost = Some(0);
            p.flags = Some(1); // ChildInherit
            let nfd = granary_packet::Name::from_uri(granary_mgmt::LOCALHOST_NFD).unwrap();
            c.command(&nfd, "rib", "register", &p).await.unwrap();
            ready_tx.send(()).unwrap();
            // Swallow every Interest, answer none, until the test ends.
            let serve = c.serve(|i| {
                log.lock().unwrap().push(i.name.clone());
                None
            });
            let _ = tokio::time::timeout(std::time::Duration::from_secs(60), serve).await;
        });
    });
    ready_rx.recv().unwrap();
    let routes = d.ok(&["route", "list"]);
    assert!(
        routes
            .lines()
            .any(|l| l.starts_with("route / ") && l.contains("flags=1")),
        "the silent app's / route is registered:\n{routes}"
    );
    let src = d.dir.path().join("in");
    std::fs::write(&src, data(100_000, 9)).unwrap();
    let v = put(&d, REPO, &src, "/science/silent/f");
    // Stored whole (read from the published file itself: a consumer's
    // Interests would also meet the silent `/` route first, by design).
    let stat = d.ok(&["stat", "/science/silent/f"]);
    let path = stat
        .lines()
        .find_map(|l| l.strip_prefix("path "))
        .unwrap_or_else(|| panic!("no path in stat:\n{stat}"));
    assert_eq!(std::fs::read(path).unwrap(), data(100_000, 9));
    drop(d);
    let _ = silent.join();
    // None of the repo's Interests for the client (its command message
    // under the client's prefix, the object's segments) went to the silent
    // app: misrouted, each would wait out its lifetime there.
    let client = granary_packet::Name::from_uri(v["client_prefix"].as_str().unwrap()).unwrap();
    let object = granary_packet::Name::from_uri("/science/silent/f").unwrap();
    let seen = seen.lock().unwrap();
    eprintln!("the silent app was given {} Interests", seen.len());
    let captured: Vec<String> = seen
        .iter()
        .filter(|n| client.is_prefix_of(n) || object.is_prefix_of(n))
        .map(|n| n.to_string())
        .collect();
    assert!(
        captured.is_empty(),
        "the silent `/` registrant was given the client's Interests: {captured:?}"
    );
}
