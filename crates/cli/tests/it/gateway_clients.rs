//! The clients climate scientists use, from PyPI, against a real daemon serving
//! real CMIP6 files (ESMValTool's sample data): intake-esgf through the ESGF
//! Solr index (`/esg-search`) and through its STAC back end (`/stac`), both down
//! to xarray datasets compared with the original files; pystac-client over the
//! STAC API (facets, CQL2-JSON, paging, items by id, assets checked); and the
//! index's limits and errors.
//!
//! intake-esgf only builds `https://` URLs: the Python clients talk to the
//! daemon's `--https` listener, trusting its self-signed certificate through
//! `REQUESTS_CA_BUNDLE`; curl checks go to its `--http` one.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

/// Dataset directories taken from the sample data: 1, 2 and 2 files.
const DATASETS: &[&str] = &[
    "CMIP6/CMIP/CSIRO-ARCCSS/ACCESS-CM2/historical/r1i1p1f1/Amon/ta/gn/v20191108",
    "CMIP6/CMIP/MRI/MRI-ESM2-0/historical/r1i1p1f1/Amon/ta/gn/v20190308",
    "CMIP6/CMIP/NCAR/CESM2-FV2/historical/r1i1p1f1/Amon/ta/gn/v20191120",
];

struct Site {
    d: Daemon,
    /// `http://IP:PORT` (curl).
    base: String,
    /// `IP:PORT` of the HTTP listener.
    host: String,
    /// `https://IP:PORT` (the Python clients).
    tls_base: String,
    /// `IP:PORT` of the HTTPS listener (the `data_node` the clients see).
    tls_host: String,
    /// The self-signed certificate the daemon made.
    cert: PathBuf,
    tree: PathBuf,
}

fn site() -> Site {
    let d = Daemon::start(&["--http", "127.0.0.1:0", "--https", "127.0.0.1:0"]);
    let host = d.http.clone().expect("no `gateway http://` line");
    let base = format!("http://{host}");
    let (tls_host, cert) = d.https.clone().expect("no `gateway https://` line");
    assert!(cert.is_file(), "certificate {}", cert.display());
    let tls_base = format!("https://{tls_host}");
    let tree = d.dir.path().join("tree");
    let src = sample_root();
    for ds in DATASETS {
        let to = tree.join(ds);
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(src.join(ds)).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
        }
    }
    d.ok(&["publish-dir", tree.to_str().unwrap()]);
    Site {
        d,
        base,
        host,
        tls_base,
        tls_host,
        cert,
        tree,
    }
}

fn curl(args: &[&str]) -> (u16, Value) {
    let o = Command::new("curl")
        .args(["-s", "-g", "--max-time", "60", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl (Debian package curl) must be installed");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    let v =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {body}"));
    (code.trim().parse().unwrap(), v)
}

/// The status of a GET with a request target longer than a command-line
/// argument may be (curl cannot send it): over a plain TCP connection.
fn status_of_long_get(host: &str, target: &str) -> u16 {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(host).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        c,
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    assert!(body.contains("\"error\""), "{text}");
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The dataset ids of the tree: `CMIP6.<directories>.<version>`.
fn tree_ids() -> BTreeSet<String> {
    DATASETS.iter().map(|d| d.replace('/', ".")).collect()
}

/// The originals of a dataset id.
fn originals(tree: &Path, id: &str) -> Vec<PathBuf> {
    let dir = tree.join(id.replace('.', "/"));
    let mut f: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    f.sort();
    f
}

/// Runs intake_esgf_client.py with a scratch HOME; returns its JSON and HOME.
fn intake(s: &Site, backend: &str, facets: &[&str]) -> (Value, tempfile::TempDir) {
    intake_at(s, &s.tls_base, backend, facets)
}

/// [`intake`] against `base` (the HTTPS or the HTTP listener).
fn intake_at(s: &Site, base: &str, backend: &str, facets: &[&str]) -> (Value, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let mut c = python_script("intake_esgf_client.py");
    c.args([base, s.tree.to_str().unwrap(), backend])
        .args(facets)
        .env("HOME", home.path())
        .env("REQUESTS_CA_BUNDLE", &s.cert)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_CACHE_HOME");
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "intake_esgf_client.py {backend}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    (v, home)
}

/// Checks an intake-esgf run: every dataset of the tree found (ids with
/// `node`), loaded and equal to its originals, and the downloaded files equal
/// to them byte for byte, at their DRS paths under ~/.esgf.
fn check_intake(s: &Site, r: &Value, home: &Path, node: &str) {
    let want: BTreeSet<String> = tree_ids().iter().map(|i| format!("{i}|{node}")).collect();
    let got: BTreeSet<String> = r["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, want);
    let ds = r["datasets"].as_object().unwrap();
    assert_eq!(
        ds.keys().cloned().collect::<BTreeSet<_>>(),
        tree_ids(),
        "{r}"
    );
    let mut files = 0;
    for (id, d) in ds {
        assert_eq!(d["equal"], true, "{id}: xarray differs from the originals");
        let orig = originals(&s.tree, id);
        assert_eq!(d["files"].as_u64().unwrap(), orig.len() as u64);
        assert!(d["variables"].as_array().unwrap().iter().any(|v| v == "ta"));
        for o in orig {
            let rel = o.strip_prefix(&s.tree).unwrap();
            let local = home.join(".esgf").join(rel);
            assert_eq!(
                std::fs::read(&local).unwrap_or_else(|e| panic!("{}: {e}", local.display())),
                std::fs::read(&o).unwrap(),
                "{}",
                rel.display()
            );
            files += 1;
        }
    }
    assert_eq!(
        r["downloaded"].as_array().unwrap().len(),
        files,
        "{}",
        r["downloaded"]
    );
}

#[test]
fn intake_esgf_solr_index_end_to_end() {
    let s = site();
    let (r, home) = intake(&s, "solr", &["variable_id=ta", "table_id=Amon"]);
    check_intake(&s, &r, home.path(), &s.tls_host);
    // Over TLS the documents link to https:// (HTTP/1.1 and HTTP/2 alike).
    for v in ["--http1.1", "--http2"] {
        let (c, f) = curl(&[
            v,
            "--cacert",
            s.cert.to_str().unwrap(),
            &format!("{}/esg-search/search?type=File&limit=1", s.tls_base),
        ]);
        assert_eq!(c, 200);
        let url = f["response"]["docs"][0]["url"][0].as_str().unwrap();
        assert!(
            url.starts_with(&format!("https://{}/data/", s.tls_host)),
            "{v}: {url}"
        );
        assert_eq!(f["response"]["docs"][0]["data_node"], s.tls_host.as_str());
    }

    // The File documents it read carry the files' tracking ids.
    let attrs = {
        let o = python_script("nc_global_attrs.py")
            .arg(&s.tree)
            .output()
            .unwrap();
        assert!(o.status.success());
        serde_json::from_slice::<BTreeMap<String, BTreeMap<String, Value>>>(&o.stdout).unwrap()
    };
    let ids: Vec<String> = r["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| format!("dataset_id={}", v.as_str().unwrap()))
        .collect();
    let (c, files) = curl(&[&format!(
        "{}/esg-search/search?type=File&latest=True&retracted=False&format=application%2Fsolr%2Bjson&{}",
        s.base,
        ids.join("&").replace('|', "%7C")
    )]);
    assert_eq!(c, 200);
    let docs = files["response"]["docs"].as_array().unwrap();
    assert_eq!(docs.len(), attrs.len());
    for d in docs {
        let title = d["title"].as_str().unwrap();
        let (_, a) = attrs
            .iter()
            .find(|(p, _)| p.ends_with(&format!("/{title}")))
            .unwrap_or_else(|| panic!("{title} not in the tree"));
        assert_eq!(d["tracking_id"][0], a["tracking_id"], "{title}");
        assert!(d["tracking_id"][0].as_str().unwrap().starts_with("hdl:"));
    }
}

/// intake-esgf with `prefer_streaming=True` takes the File documents' OPENDAP
/// links (each also probed at `<link>.html`), opens them with xarray through
/// libnetcdf's DAP2 client, and its datasets equal the files: nothing downloaded.
#[test]
fn intake_esgf_streams_over_opendap() {
    let s = site();
    let (c, f) = curl(&[&format!(
        "{}/esg-search/search?type=File&limit=1&variable_id=ta",
        s.base
    )]);
    assert_eq!(c, 200);
    let urls: Vec<&str> = f["response"]["docs"][0]["url"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let dap = urls
        .iter()
        .find(|u| u.ends_with(".nc.html|application/opendap-html|OPENDAP"))
        .unwrap_or_else(|| panic!("no OPENDAP entry: {urls:?}"));
    assert!(dap.contains("/thredds/dodsC/CMIP6/CMIP/"), "{dap}");
    assert!(
        urls.iter()
            .any(|u| u.ends_with(".nc|application/opendap|OPENDAP")),
        "{urls:?}"
    );
    // intake-esgf's probe: a HEAD of the page answers 200.
    let head = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-I", "-w", "%{http_code}"])
        .arg(dap.split('|').next().unwrap())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&head.stdout), "200", "{dap}");

    // Over plain HTTP: the venv's netCDF4 wheel bundles a libcurl that does not
    // take the self-signed certificate from ~/.ncrc (`HTTP.SSL.CAINFO`; Debian's
    // ncdump does), and the subject here is OPeNDAP, not TLS.
    let (r, home) = intake_at(
        &s,
        &s.base,
        "solr",
        &["--stream", "variable_id=ta", "table_id=Amon"],
    );
    let ds = r["datasets"].as_object().unwrap();
    assert_eq!(
        ds.keys().cloned().collect::<BTreeSet<_>>(),
        tree_ids(),
        "{r}"
    );
    for (id, d) in ds {
        assert_eq!(
            d["equal"], true,
            "{id}: the streamed dataset differs from the files"
        );
        let sources = d["sources"].as_array().unwrap();
        assert_eq!(sources.len(), originals(&s.tree, id).len(), "{d}");
        for src in sources {
            assert!(
                src.as_str()
                    .unwrap_or("")
                    .starts_with(&format!("{}/thredds/dodsC/CMIP6/", s.base)),
                "{id} was opened from {src}"
            );
        }
        assert_eq!(
            d["files"].as_u64().unwrap(),
            originals(&s.tree, id).len() as u64
        );
    }
    // Streamed: no file in intake-esgf's cache.
    assert_eq!(r["downloaded"], Value::Array(vec![]), "{r}");
    let cache = home.path().join(".esgf");
    if cache.is_dir() {
        let cached: Vec<PathBuf> = files_under(&cache)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "nc"))
            .collect();
        assert!(cached.is_empty(), "{cached:?}");
    }
}

#[test]
fn stac_api_with_pystac_client_and_intake_esgf() {
    let s = site();
    let stac = format!("{}/stac", s.tls_base);
    let o = python_script("stac_client.py")
        .args([stac.as_str(), "MRI-ESM2-0", "CESM2-FV2"])
        .env("REQUESTS_CA_BUNDLE", &s.cert)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "stac_client.py: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    for c in ["CORE", "ITEM_SEARCH", "FILTER", "COLLECTIONS"] {
        assert_eq!(r["conforms"][c], true, "{c}");
    }
    assert_eq!(r["collections"], serde_json::json!(["cmip6"]));

    // As many items as the ESGF index has datasets, the same ids, two per page.
    let (_, esgf) = curl(&[&format!(
        "{}/esg-search/search?type=Dataset&project=CMIP6&latest=true&limit=0",
        s.base
    )]);
    let n = esgf["response"]["numFound"].as_u64().unwrap() as usize;
    assert_eq!(n, DATASETS.len());
    let ids = |k: &str| -> BTreeSet<String> {
        r[k].as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(r["matched"].as_u64().unwrap() as usize, n);
    assert_eq!(ids("post_ids"), tree_ids());
    assert_eq!(r["post_ids"].as_array().unwrap().len(), n);
    let pages: Vec<u64> = r["post_pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(pages.len(), n.div_ceil(2), "{pages:?}");
    assert!(pages.iter().all(|&p| p == 2 || p == 1));
    assert_eq!(ids("get_ids"), tree_ids());

    // Facet filters (`and` of `in`, `or` of `=`), the named source ids only.
    let chosen: BTreeSet<String> = tree_ids()
        .into_iter()
        .filter(|i| i.contains(".MRI-ESM2-0.") || i.contains(".CESM2-FV2."))
        .collect();
    assert_eq!(chosen.len(), 2);
    assert_eq!(ids("filter_ids"), chosen);
    assert_eq!(ids("or_ids"), chosen);
    assert_eq!(ids("ids_ids").len(), 1);

    // `between` on time: the datasets whose files cover 2005, from the catalog.
    let (_, hits) = curl(&[&format!("{}/api/search?limit=100&facets=none", s.base)]);
    let mut covering = BTreeSet::new();
    for h in hits["hits"].as_array().unwrap() {
        let (a, b) = (
            h["time_start"].as_str().unwrap(),
            h["time_end"].as_str().unwrap(),
        );
        if a <= "2006-01-01" && b >= "2005-01-01" {
            let f = h["facets"].as_object().unwrap();
            covering.insert(format!(
                "CMIP6.CMIP.{}.{}.historical.r1i1p1f1.Amon.ta.{}.{}",
                f["institution_id"].as_str().unwrap(),
                f["source_id"].as_str().unwrap(),
                f["grid_label"].as_str().unwrap(),
                f["version"].as_str().unwrap()
            ));
        }
    }
    assert!(!covering.is_empty());
    assert_eq!(ids("between_ids"), covering);
    assert!(ids("datetime_ids").is_empty());

    // The item read by id: its assets downloaded and checked by the script.
    let item = &r["item"];
    assert_eq!(item["properties"]["cmip6:variable_id"], "ta");
    let assets = item["assets"].as_array().unwrap();
    assert_eq!(
        assets.len(),
        originals(&s.tree, item["id"].as_str().unwrap()).len()
    );
    for a in assets {
        assert!(
            a["href"]
                .as_str()
                .unwrap()
                .starts_with(&format!("https://{}/data/", s.tls_host)),
            "{a}"
        );
        assert_eq!(a["size_ok"], true, "{a}");
        assert_eq!(a["checksum_ok"], true, "{a}");
    }

    // intake-esgf's STAC back end pointed at the gateway finds the datasets
    // its Solr back end finds, and loads them.
    let (r, home) = intake(&s, "stac", &["variable_id=ta", "table_id=Amon"]);
    check_intake(&s, &r, home.path(), &format!("{}/stac", s.tls_host));
}

#[test]
fn index_limits_and_errors_are_json() {
    let s = site();
    let b = &s.base;
    // One maximum page size, refused alike by /api and /esg-search.
    for url in [
        format!("{b}/esg-search/search?limit=99999999"),
        format!("{b}/esg-search/search?type=File&limit=10001"),
        format!("{b}/api/search?limit=99999999"),
    ] {
        let (c, v) = curl(&[&url]);
        assert_eq!(c, 400, "{url}: {v}");
        assert!(v["error"].as_str().unwrap().contains("10000"), "{url}: {v}");
    }
    for url in [
        format!("{b}/esg-search/search?limit=10000"),
        format!("{b}/api/search?limit=10000"),
    ] {
        assert_eq!(curl(&[&url]).0, 200, "{url}");
    }
    // Without a limit: every dataset on one page; paging never answers an empty
    // page while numFound is larger than the offset.
    let (_, all) = curl(&[&format!("{b}/esg-search/search?type=Dataset")]);
    let n = all["response"]["numFound"].as_u64().unwrap();
    assert_eq!(n as usize, DATASETS.len());
    assert_eq!(all["response"]["docs"].as_array().unwrap().len() as u64, n);
    for off in 0..n {
        let (_, p) = curl(&[&format!(
            "{b}/esg-search/search?type=Dataset&limit=1&offset={off}"
        )]);
        assert_eq!(p["response"]["docs"].as_array().unwrap().len(), 1);
        assert_eq!(p["response"]["start"].as_u64().unwrap(), off);
    }
    // Python-style booleans; nothing here is retracted or a replica.
    let (_, t) = curl(&[&format!(
        "{b}/esg-search/search?latest=True&retracted=False&replica=False&distrib=False"
    )]);
    assert_eq!(t["response"]["numFound"].as_u64().unwrap(), n);
    let (_, r) = curl(&[&format!("{b}/esg-search/search?retracted=True")]);
    assert_eq!(r["response"]["numFound"].as_u64().unwrap(), 0);
    let (c, _) = curl(&[&format!("{b}/esg-search/search?latest=maybe")]);
    assert_eq!(c, 400);

    // A File search naming 500 datasets in its query string (intake-esgf sends
    // them all in one request): the real ones are found among them.
    let mut q: Vec<String> = (0..500)
        .map(|i| {
            format!(
                "dataset_id=CMIP6.CMIP.X.Y.historical.r{i}i1p1f1.Amon.ta.gn.v20190101%7C{}",
                s.host
            )
        })
        .collect();
    q.extend(
        tree_ids()
            .iter()
            .map(|i| format!("dataset_id={i}%7C{}", s.host)),
    );
    let url = format!("{b}/esg-search/search?type=File&{}", q.join("&"));
    assert!(url.len() > 8192 * 4);
    let (c, f) = curl(&[&url]);
    assert_eq!(c, 200, "{f}");
    let want: usize = DATASETS
        .iter()
        .map(|d| originals(&s.tree, &d.replace('/', ".")).len())
        .sum();
    assert_eq!(f["response"]["numFound"].as_u64().unwrap() as usize, want);
    let long = format!("/esg-search/search?query={}", "x".repeat(61 * 1024));
    assert_eq!(status_of_long_get(&s.host, &long), 414);
    let (c, _) = curl(&[&format!("{b}/api/search?q={}", "x".repeat(9000))]);
    assert_eq!(c, 414);

    // A File search by tracking id (intake-esgf's `from_tracking_ids`).
    let (_, one) = curl(&[&format!("{b}/esg-search/search?type=File&limit=1")]);
    let doc = &one["response"]["docs"][0];
    let tid = doc["tracking_id"][0].as_str().unwrap();
    let (c, t) = curl(&[&format!(
        "{b}/esg-search/search?type=File&tracking_id={}&tracking_id=hdl:nothing",
        tid.replace('/', "%2F")
    )]);
    assert_eq!(c, 200);
    assert_eq!(t["response"]["numFound"], 1, "{t}");
    assert_eq!(t["response"]["docs"][0]["id"], doc["id"]);

    // STAC bbox: the sample grids sit near the north pole, east of 0°.
    let (_, near) = curl(&[&format!("{b}/stac/search?bbox=-10,80,10,90&limit=100")]);
    assert_eq!(near["numberMatched"].as_u64().unwrap(), n);
    let (_, far) = curl(&[&format!("{b}/stac/search?bbox=100,-10,120,10")]);
    assert_eq!(far["numberMatched"], 0);

    // STAC errors: JSON with a code and a description.
    let post = |body: &str, url: &str| {
        curl(&[
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            body,
            url,
        ])
    };
    let search = format!("{b}/stac/search");
    for (body, status) in [
        ("{", 400),
        ("[]", 400),
        (r#"{"filter": {"op": "s_intersects", "args": []}}"#, 400),
        (
            r#"{"filter": {"op": "in", "args": [{"property": "a"}, "x"]}}"#,
            400,
        ),
        (r#"{"limit": "ten"}"#, 400),
        (r#"{"token": "nope"}"#, 400),
        (
            r#"{"intersects": {"type": "Point", "coordinates": [0, 0]}}"#,
            400,
        ),
    ] {
        let (c, v) = post(body, &search);
        assert_eq!(c, status, "{body}: {v}");
        assert_eq!(v["code"], "BadRequest", "{body}: {v}");
        assert!(v["description"].is_string());
    }
    let big = format!(r#"{{"ids": ["{}"]}}"#, "x".repeat(70_000));
    let (c, v) = post(&big, &search);
    assert_eq!(c, 413, "{v}");
    assert!(v["error"].is_string());
    // POST is for /stac/search only.
    let (c, v) = post("{}", &format!("{b}/api/search"));
    assert_eq!(c, 405, "{v}");
    let (c, v) = post("{}", &format!("{b}/stac/collections"));
    assert_eq!(c, 405, "{v}");
    for (url, status) in [
        (format!("{b}/stac/collections/cmip5"), 404),
        (format!("{b}/stac/collections/cmip6/items/nope"), 404),
        (
            format!("{b}/stac/search?filter-lang=cql2-text&filter=a%3D1"),
            400,
        ),
        (format!("{b}/stac/search?bbox=1,2"), 400),
        (format!("{b}/stac/search?datetime=yesterday"), 400),
    ] {
        let (c, v) = curl(&[&url]);
        assert_eq!(c, status, "{url}: {v}");
        assert!(v["description"].is_string(), "{url}: {v}");
    }
    // A limit above the maximum is lowered (OGC API – Features), not refused.
    let (c, v) = curl(&[&format!("{b}/stac/search?limit=99999999")]);
    assert_eq!(c, 200);
    assert_eq!(v["numberReturned"].as_u64().unwrap(), n);
    // The landing page and the collection link where clients expect them.
    let (_, l) = curl(&[&format!("{b}/stac")]);
    let rels: BTreeSet<&str> = l["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["rel"].as_str().unwrap())
        .collect();
    for rel in ["self", "root", "conformance", "data", "search"] {
        assert!(rels.contains(rel), "{rel}");
    }
    let _ = &s.d;
}
