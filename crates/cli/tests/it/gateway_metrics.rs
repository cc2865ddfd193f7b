//! The gateway's Prometheus `/metrics` against a real daemon: two netCDF files
//! published, a scrape, some traffic (404s, `/api/status`, `/api/file`, a
//! `/data` download, a `granary get` through the forwarder), a second scrape.
//! `promtool check metrics` (Debian `prometheus`, from
//! scripts/setup-test-deps.sh) must accept both, and the counters must have
//! moved by what the test did.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

fn curl(args: &[&str]) -> std::process::Output {
    Command::new("curl")
        .args(["-s", "-g", "--max-time", "60"])
        .args(args)
        .output()
        .expect("curl (Debian package curl) must be installed")
}

/// `curl URL` → (status, headers as lower-case names, body).
fn get(url: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    let head = dir.path().join("head");
    let o = curl(&[
        "-o",
        body.to_str().unwrap(),
        "-D",
        head.to_str().unwrap(),
        "-w",
        "%{http_code}",
        url,
    ]);
    let code = String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    let h = std::fs::read_to_string(&head)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (code, h, std::fs::read(&body).unwrap_or_default())
}

/// A scrape: its text, and each sample (`name{labels}` as written) → value.
struct Scrape {
    text: String,
    samples: BTreeMap<String, f64>,
}

impl Scrape {
    fn get(&self, key: &str) -> f64 {
        *self
            .samples
            .get(key)
            .unwrap_or_else(|| panic!("no sample {key} in\n{}", self.text))
    }

    /// 0 for a series not (yet) exposed.
    fn or0(&self, key: &str) -> f64 {
        self.samples.get(key).copied().unwrap_or(0.0)
    }

    /// The sum over the samples of a family whose labels contain `with`.
    fn sum(&self, name: &str, with: &str) -> f64 {
        self.samples
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{name}{{")) && k.contains(with))
            .map(|(_, v)| v)
            .sum()
    }
}

fn scrape(base: &str) -> Scrape {
    let (code, h, body) = get(&format!("{base}/metrics"));
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let ct = h
        .iter()
        .find(|(k, _)| k == "content-type")
        .map(|(_, v)| v.as_str());
    assert_eq!(ct, Some("text/plain; version=0.0.4; charset=utf-8"));
    let cc = h
        .iter()
        .find(|(k, _)| k == "cache-control")
        .map(|(_, v)| v.as_str());
    assert_eq!(cc, Some("no-store"));
    let text = String::from_utf8(body).expect("UTF-8 exposition");
    let samples = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad line {l:?}"));
            let v = match v {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("bad value in {l:?}")),
            };
            (k.to_string(), v)
        })
        .collect();
    Scrape { text, samples }
}

/// `promtool check metrics` on an exposition; its output on failure.
fn promtool(text: &str, save: &Path) {
    std::fs::write(save, text).unwrap();
    let mut c = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; scripts/setup-test-deps.sh installs it)");
    use std::io::Write;
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool check metrics failed on {}:\n{}{}",
        save.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

const FILES: [&str; 2] = [
    "CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn/v20190429/tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-185112.nc",
    "CMIP6/ScenarioMIP/MIROC/MIROC6/ssp585/r1i1p1f1/Amon/tas/gn/v20190627/tas_Amon_MIROC6_ssp585_r1i1p1f1_gn_201501-201612.nc",
];

fn req(route: &str, status: u16) -> String {
    format!(
        "granary_gateway_requests_total{{route=\"{route}\",method=\"GET\",status=\"{status}\"}}"
    )
}

fn count(route: &str) -> String {
    format!("granary_gateway_request_duration_seconds_count{{route=\"{route}\",method=\"GET\"}}")
}

#[test]
fn metrics_pass_promtool_and_count_what_happened() {
    let d = Daemon::start(&["--http", "127.0.0.1:0"]);
    let base = format!("http://{}", d.http.clone().expect("no gateway address"));
    let example = d.dir.path().join("example");
    d.ok(&["example-data", example.to_str().unwrap()]);
    let tree = d.dir.path().join("tree");
    let mut total = 0;
    for rel in FILES {
        let to = tree.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(example.join(rel), &to).unwrap();
        total += std::fs::metadata(&to).unwrap().len();
    }
    d.ok(&["publish-dir", tree.to_str().unwrap()]);
    let out = tempfile::tempdir().unwrap();
    let out = out.path();

    let m0 = scrape(&base);
    promtool(&m0.text, &out.join("m0.prom"));
    assert_eq!(m0.get("granary_forwarder_up"), 1.0);
    // Sizes: the first scrape walks the repository.
    assert_eq!(m0.get("granary_repository_versions"), 2.0);
    assert_eq!(m0.get("granary_repository_bytes"), total as f64);
    assert_eq!(m0.get("granary_catalog_records"), 2.0);
    assert!(m0.get("granary_forwarder_fib_entries") >= 1.0);
    assert!(m0.get("granary_forwarder_faces") >= 1.0);

    // Traffic: three 404s, two statuses, a file's detail, a download.
    for p in ["/nope", "/nope/deeper", "/api/nope?x=1"] {
        assert_eq!(get(&format!("{base}{p}")).0, 404, "{p}");
    }
    for _ in 0..2 {
        assert_eq!(get(&format!("{base}/api/status")).0, 200);
    }
    let (c, _, hits) = get(&format!("{base}/api/search?source_id=CanESM5"));
    assert_eq!(c, 200);
    let hits: Value = serde_json::from_slice(&hits).unwrap();
    let hit = &hits["hits"][0];
    let name = hit["name"].as_str().unwrap();
    let size = hit["size"].as_u64().unwrap();
    assert_eq!(get(&format!("{base}/api/file{name}")).0, 200);
    let (c, _, body) = get(&format!("{base}{}", hit["download"].as_str().unwrap()));
    assert_eq!(c, 200);
    assert_eq!(body.len() as u64, size);
    assert_eq!(body, std::fs::read(tree.join(FILES[0])).unwrap());
    // Through the forwarder: a producer (its face stays open) answers three
    // peeks of 8 KiB each.
    let _p = d.serve("/mt", &["--size", "8192"]);
    let f0 = scrape(&base);
    for i in 0..3 {
        let o = d.cli(&["peek", &format!("/mt/{i}")]);
        assert!(o.status.success(), "peek /mt/{i} failed");
        assert_eq!(o.stdout.len(), 8192);
    }
    let cs_hits = d.cs_stat("hits");

    let m1 = scrape(&base);
    promtool(&m1.text, &out.join("m1.prom"));
    let delta = |k: &str| m1.or0(k) - m0.or0(k);
    // Requests by route template, never by raw path.
    assert_eq!(delta(&req("unmatched", 404)), 3.0, "{}", m1.text);
    assert_eq!(delta(&req("/api/status", 200)), 2.0);
    assert_eq!(delta(&req("/api/search", 200)), 1.0);
    assert_eq!(delta(&req("/api/file/{*name}", 200)), 1.0);
    assert_eq!(delta(&req("/data/{*name}", 200)), 1.0);
    // m0's and f0's scrapes are counted once answered; m1's is not yet.
    assert_eq!(delta(&req("/metrics", 200)), 2.0);
    assert_eq!(delta(&count("/data/{*name}")), 1.0);
    assert_eq!(delta(&count("unmatched")), 3.0);
    // The download's body bytes, counted as they were handed to the connection.
    assert_eq!(
        delta("granary_gateway_response_bytes_total{route=\"/data/{*name}\"}"),
        size as f64,
        "{}",
        m1.text
    );
    let inf = "granary_gateway_request_duration_seconds_bucket{route=\"/data/{*name}\",method=\"GET\",le=\"+Inf\"}";
    assert_eq!(m1.get(inf), m1.get(&count("/data/{*name}")));
    assert!(
        m1.get(
            "granary_gateway_request_duration_seconds_sum{route=\"/data/{*name}\",method=\"GET\"}"
        ) > 0.0
    );
    for raw in ["/nope", "CanESM5", "deeper"] {
        assert!(
            !m1.text.contains(raw),
            "a raw path or query leaked into a label: {raw}"
        );
    }
    // The forwarder moved: three Interests out to the producer's face and
    // three 8 KiB Data back (counted on the faces still open: the peeks'
    // own faces are closed by now).
    let f1 = &m1;
    let fd = |name: &str, with: &str| f1.sum(name, with) - f0.sum(name, with);
    assert!(
        f1.get("granary_forwarder_in_interests_total")
            - f0.get("granary_forwarder_in_interests_total")
            >= 3.0
    );
    assert!(
        f1.get("granary_forwarder_in_data_total") - f0.get("granary_forwarder_in_data_total")
            >= 3.0
    );
    assert_eq!(
        fd("granary_face_out_packets_total", "type=\"interest\""),
        3.0,
        "{}",
        f1.text
    );
    assert_eq!(
        fd("granary_face_in_packets_total", "type=\"data\""),
        3.0,
        "{}",
        f1.text
    );
    let in_bytes = fd("granary_face_in_bytes_total", "scope=\"local\"");
    assert!(
        in_bytes >= 3.0 * 8192.0,
        "local faces received {in_bytes} bytes, less than three 8 KiB Data"
    );
    // Every face has its congestion-mark counter.
    let faces = f1
        .text
        .lines()
        .filter(|l| l.starts_with("granary_face_in_bytes_total{"))
        .count();
    let marks: Vec<&str> = f1
        .text
        .lines()
        .filter(|l| l.starts_with("granary_face_out_congestion_marks_total{"))
        .collect();
    assert!(faces > 0 && marks.len() == faces, "{}", f1.text);
    // (the scrape's own three management Interests come after `cs info`'s).
    let hits = m1.get("granary_forwarder_cs_hits_total");
    assert!(
        hits >= cs_hits as f64 && hits <= cs_hits as f64 + 3.0,
        "cs hits {hits}, `cs info` said {cs_hits}"
    );
    // Sizes did not change.
    assert_eq!(m1.get("granary_repository_versions"), 2.0);
    assert_eq!(m1.get("granary_catalog_records"), 2.0);
}

/// HTTP and HTTPS listeners share one set of request counters: a scrape of
/// either port counts the requests of both (before, each listener kept its
/// own, so scraping one undercounted).
#[test]
fn one_set_of_counters_for_every_listener() {
    let d = Daemon::start(&["--http", "127.0.0.1:0", "--https", "127.0.0.1:0"]);
    let base = format!("http://{}", d.http.clone().expect("no gateway address"));
    let (addr, cert) = d.https.clone().expect("no https gateway");
    let tls = format!("https://{addr}");
    let before = scrape(&base).or0(&req("/api/openapi.json", 200));
    for _ in 0..3 {
        let o = curl(&[
            "--cacert",
            cert.to_str().unwrap(),
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &format!("{tls}/api/openapi.json"),
        ]);
        assert_eq!(String::from_utf8_lossy(&o.stdout), "200", "{o:?}");
    }
    let (code, _, _) = get(&format!("{base}/api/openapi.json"));
    assert_eq!(code, 200);
    // Scraped over plain HTTP: the three HTTPS requests and the plain one.
    let after = scrape(&base).get(&req("/api/openapi.json", 200));
    assert_eq!(after - before, 4.0, "counted on the HTTP port");
    // And over HTTPS, the same counter.
    let o = curl(&[
        "--cacert",
        cert.to_str().unwrap(),
        &format!("{tls}/metrics"),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    let line = format!("{} {}", req("/api/openapi.json", 200), after);
    assert!(text.contains(&line), "no {line:?} in\n{text}");
}
