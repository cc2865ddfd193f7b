//! The query suite run on both back ends, and its brute-force oracle.
#![allow(dead_code)]

pub mod locations;
pub mod pgcluster;

use std::collections::{BTreeMap, BTreeSet, HashSet};

use fastrand::Rng as StdRng;
use granary_catalog::{text, Catalog, Error, FacetSel, Query, Record, Sort};

const SOURCES: &[&str] = &[
    "CanESM5",
    "MIROC6",
    "IPSL-CM6A-LR",
    "GFDL-ESM4",
    "UKESM1-0-LL",
    "CESM2",
    "MPI-ESM1-2-HR",
    "NorESM2-LM",
];
const EXPS: &[&str] = &[
    "historical",
    "ssp126",
    "ssp245",
    "ssp585",
    "piControl",
    "amip",
];
const VARS: &[&str] = &[
    "tas", "pr", "psl", "tos", "uas", "vas", "huss", "clt", "rsds", "zg",
];
const FREQ: &[&str] = &["mon", "day", "fx"];
const WORDS: &[&str] = &[
    "temperature",
    "precipitation",
    "pressure",
    "ocean",
    "wind",
    "humidity",
    "cloud",
    "radiation",
    "geopotential",
    "surface",
];

fn pick<'a>(rng: &mut StdRng, v: &[&'a str]) -> &'a str {
    // Skewed: earlier values are more frequent.
    let a = rng.usize(0..v.len());
    let b = rng.usize(0..=a);
    v[b]
}

pub fn random_records(n: usize, seed: u64) -> Vec<Record> {
    let mut rng = StdRng::with_seed(seed);
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    while out.len() < n {
        let src = pick(&mut rng, SOURCES);
        let exp = pick(&mut rng, EXPS);
        let var = pick(&mut rng, VARS);
        let file = rng.u64(0..40);
        let name = format!("/cmip/{src}/{exp}/{var}/f{file}.nc");
        let version = rng.u64(1..4u64);
        if !seen.insert((name.clone(), version)) {
            continue;
        }
        let mut facets = BTreeMap::new();
        facets.insert("source_id".to_string(), src.to_string());
        facets.insert("experiment_id".to_string(), exp.to_string());
        facets.insert("variable_id".to_string(), var.to_string());
        if rng.f64() < 0.8 {
            facets.insert("frequency".to_string(), pick(&mut rng, FREQ).to_string());
        }
        if rng.f64() < 0.5 {
            facets.insert("member_id".to_string(), format!("r{}i1p1f1", rng.u64(1..5)));
        }
        let (ts, te) = if rng.f64() < 0.9 {
            let y = rng.u64(1850..2100);
            let len = rng.u64(0..50);
            (
                Some(format!("{y:04}-01-01")),
                Some(format!("{:04}-12-31", y + len)),
            )
        } else {
            (None, None)
        };
        let text = (0..3)
            .map(|_| pick(&mut rng, WORDS))
            .collect::<Vec<_>>()
            .join(" ");
        out.push(Record {
            name,
            version,
            project: if rng.f64() < 0.7 { "CMIP6" } else { "CMIP5" }.to_string(),
            facets,
            title: format!("{var}_{src}_{exp}_{file}.nc"),
            size: rng.u64(0..1_000_000),
            time_start: ts,
            time_end: te,
            bbox: None,
            text,
            meta: serde_json::json!({"attrs": {"source_id": src}}),
            sha256: None,
            manifest_digest: None,
            node: None,
            tracking_id: (rng.f64() < 0.5).then(|| format!("hdl:21.14100/{file}-{version}")),
            further_info_url: None,
            license: None,
            citation: None,
        });
    }
    out
}

/// Facet counts as `Page::facet_counts` holds them.
pub type Counts = BTreeMap<String, Vec<(String, u64)>>;

fn all_facets(r: &Record) -> BTreeMap<String, String> {
    let mut f = r.facets.clone();
    if !r.project.is_empty() && !f.contains_key("project") {
        f.insert("project".into(), r.project.clone());
    }
    f
}

/// The oracle: evaluates `q` over `recs` by brute force.
pub fn brute(recs: &[Record], q: &Query) -> (Vec<(String, u64)>, Counts) {
    let mut latest: BTreeMap<&str, u64> = BTreeMap::new();
    for r in recs {
        let e = latest.entry(&r.name).or_insert(0);
        *e = (*e).max(r.version);
    }
    let words = q.text.as_deref().map(text::query_words).unwrap_or_default();
    let mut m: Vec<&Record> = recs
        .iter()
        .filter(|r| !q.latest_only || latest[r.name.as_str()] == r.version)
        .filter(|r| {
            let f = all_facets(r);
            q.filters
                .iter()
                .all(|(k, vs)| f.get(k).is_some_and(|v| vs.contains(v)))
                && q.exclude
                    .iter()
                    .all(|(k, vs)| f.get(k).is_none_or(|v| !vs.contains(v)))
        })
        .filter(|r| {
            q.name_prefix
                .as_ref()
                .is_none_or(|p| r.name.starts_with(p.as_str()))
        })
        .filter(|r| {
            if words.is_empty() {
                return true;
            }
            let mut have = HashSet::new();
            for part in [r.title.as_str(), r.project.as_str(), r.text.as_str()]
                .into_iter()
                .chain(r.facets.values().map(String::as_str))
            {
                have.extend(text::words(part));
            }
            words.iter().all(|w| have.contains(w))
        })
        .filter(|r| match &q.time_overlap {
            None => true,
            Some((from, to)) => {
                if r.time_start.is_none() && r.time_end.is_none() {
                    return false;
                }
                let a = match (to, &r.time_start) {
                    (Some(to), Some(s)) => s <= to,
                    _ => true,
                };
                let b = match (from, &r.time_end) {
                    (Some(from), Some(e)) => e >= from,
                    _ => true,
                };
                a && b
            }
        })
        .collect();
    m.sort_by(|a, b| match q.sort {
        Sort::Name => (&a.name, a.version).cmp(&(&b.name, b.version)),
        Sort::NameDesc => (&b.name, b.version).cmp(&(&a.name, a.version)),
        Sort::Newest => {
            (std::cmp::Reverse(a.version), &a.name).cmp(&(std::cmp::Reverse(b.version), &b.name))
        }
        Sort::Size => (std::cmp::Reverse(a.size), &a.name, a.version).cmp(&(
            std::cmp::Reverse(b.size),
            &b.name,
            b.version,
        )),
    });
    let mut counts: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let keys: Option<BTreeSet<String>> = match &q.facets {
        FacetSel::None => Some(BTreeSet::new()),
        FacetSel::All => None,
        FacetSel::List(l) => Some(l.iter().cloned().collect()),
    };
    for r in &m {
        for (k, v) in all_facets(r) {
            if keys.as_ref().is_none_or(|ks| ks.contains(&k)) {
                *counts.entry(k).or_default().entry(v).or_default() += 1;
            }
        }
    }
    let page = m
        .iter()
        .skip(q.offset)
        .take(q.limit)
        .map(|r| (r.name.clone(), r.version))
        .collect();
    (
        page,
        counts
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().collect()))
            .collect(),
    )
}

fn check(cat: &Catalog, recs: &[Record], q: &Query) {
    let page = cat.query(q).unwrap_or_else(|e| panic!("query {q:?}: {e}"));
    let (want, counts) = brute(recs, q);
    let total_want = {
        let mut q2 = q.clone();
        q2.offset = 0;
        q2.limit = usize::MAX;
        brute(recs, &q2).0.len() as u64
    };
    assert_eq!(page.total, total_want, "total for {q:?}");
    let got: Vec<(String, u64)> = page
        .hits
        .iter()
        .map(|r| (r.name.clone(), r.version))
        .collect();
    assert_eq!(got, want, "hits for {q:?}");
    assert_eq!(page.facet_counts, counts, "facet counts for {q:?}");
}

fn random_query(rng: &mut StdRng) -> Query {
    let mut q = Query::default();
    let facets: [(&str, &[&str]); 3] = [
        ("source_id", SOURCES),
        ("experiment_id", EXPS),
        ("variable_id", VARS),
    ];
    for (k, vs) in facets {
        if rng.f64() < 0.35 {
            let n = rng.u64(1..4);
            q.filters.insert(
                k.into(),
                (0..n).map(|_| pick(rng, vs).to_string()).collect(),
            );
        } else if rng.f64() < 0.1 {
            q.exclude.insert(k.into(), vec![pick(rng, vs).to_string()]);
        }
    }
    if rng.f64() < 0.2 {
        q.filters
            .insert("frequency".into(), vec![pick(rng, FREQ).to_string()]);
    }
    if rng.f64() < 0.2 {
        q.text = Some(format!(
            "{} {}",
            pick(rng, WORDS),
            if rng.f64() < 0.3 {
                pick(rng, WORDS)
            } else {
                ""
            }
        ));
    }
    if rng.f64() < 0.15 {
        let y = rng.u64(1850..2100);
        q.time_overlap = Some((
            (rng.f64() < 0.8).then(|| format!("{y:04}-06-01")),
            (rng.f64() < 0.8).then(|| format!("{:04}-06-01", y + 10)),
        ));
    }
    if rng.f64() < 0.1 {
        q.name_prefix = Some(format!("/cmip/{}", pick(rng, SOURCES)));
    }
    q.latest_only = rng.f64() < 0.7;
    q.sort = [Sort::Name, Sort::NameDesc, Sort::Newest, Sort::Size][rng.usize(0..4)];
    q.limit = [0, 1, 20, 100][rng.usize(0..4)];
    q.offset = [0, 0, 5, 50][rng.usize(0..4)];
    q.facets = match rng.u64(0..3) {
        0 => FacetSel::None,
        1 => FacetSel::All,
        _ => FacetSel::List(vec![
            "source_id".into(),
            "frequency".into(),
            "nosuch".into(),
        ]),
    };
    q
}

pub fn facet_counts_match_brute_force(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    let recs = random_records(3000, 7);
    cat.upsert_many(&recs).unwrap();
    assert_eq!(cat.len().unwrap(), 3000);
    let mut rng = StdRng::with_seed(11);
    for _ in 0..300 {
        let q = random_query(&mut rng);
        check(&cat, &recs, &q);
    }
    // Dense and sparse paths of the name order, deep paging, the last page.
    for (limit, offset) in [(20, 0), (100, 1000), (20, 1990), (50, 5000)] {
        for latest in [true, false] {
            for sort in [Sort::Name, Sort::NameDesc] {
                let q = Query {
                    limit,
                    offset,
                    latest_only: latest,
                    sort,
                    facets: FacetSel::All,
                    ..Query::default()
                };
                check(&cat, &recs, &q);
            }
        }
    }
}

pub fn latest_only_and_versions(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    let mut r = random_records(1, 3).remove(0);
    r.name = "/a/x.nc".into();
    for v in [3, 1, 2] {
        r.version = v;
        r.size = v * 10;
        cat.upsert(&r).unwrap();
    }
    assert_eq!(cat.versions("/a/x.nc").unwrap(), vec![1, 2, 3]);
    assert_eq!(cat.get("/a/x.nc", None).unwrap().unwrap().version, 3);
    assert_eq!(cat.get("/a/x.nc", Some(2)).unwrap().unwrap().size, 20);
    assert!(cat.get("/a/x.nc", Some(9)).unwrap().is_none());
    let all = Query {
        latest_only: false,
        ..Query::default()
    };
    assert_eq!(cat.query(&Query::default()).unwrap().total, 1);
    assert_eq!(cat.query(&all).unwrap().total, 3);
    // Replacing a version keeps one record; removing the latest exposes the previous.
    r.version = 3;
    r.size = 33;
    cat.upsert(&r).unwrap();
    assert_eq!(cat.query(&all).unwrap().total, 3);
    assert_eq!(cat.query(&Query::default()).unwrap().hits[0].size, 33);
    assert_eq!(cat.remove("/a/x.nc", Some(3)).unwrap(), 1);
    assert_eq!(cat.query(&Query::default()).unwrap().hits[0].version, 2);
    assert_eq!(cat.remove("/a/x.nc", None).unwrap(), 2);
    assert_eq!(cat.len().unwrap(), 0);
    assert_eq!(cat.remove("/a/x.nc", None).unwrap(), 0);
}

pub fn time_overlap_and_exclusions(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    let base = random_records(1, 5).remove(0);
    let mk = |name: &str, ts: Option<&str>, te: Option<&str>, var: &str| {
        let mut r = base.clone();
        r.name = name.into();
        r.time_start = ts.map(Into::into);
        r.time_end = te.map(Into::into);
        r.facets.insert("variable_id".into(), var.into());
        r
    };
    cat.upsert_many(&[
        mk("/t/a", Some("1850-01-01"), Some("1899-12-31"), "tas"),
        mk("/t/b", Some("1900-01-01"), Some("1949-12-31"), "pr"),
        mk("/t/c", Some("1950-01-01"), Some("2014-12-31"), "tas"),
        mk("/t/fx", None, None, "orog"),
    ])
    .unwrap();
    let names = |q: &Query| -> Vec<String> {
        cat.query(q)
            .unwrap()
            .hits
            .into_iter()
            .map(|r| r.name)
            .collect()
    };
    let t = |a: Option<&str>, b: Option<&str>| Query {
        time_overlap: Some((a.map(Into::into), b.map(Into::into))),
        ..Query::default()
    };
    assert_eq!(
        names(&t(Some("1890-01-01"), Some("1910-01-01"))),
        ["/t/a", "/t/b"]
    );
    assert_eq!(names(&t(Some("1949-12-31"), None)), ["/t/b", "/t/c"]);
    assert_eq!(names(&t(None, Some("1849-12-31"))), Vec::<String>::new());
    assert_eq!(names(&t(None, None)), ["/t/a", "/t/b", "/t/c"]);
    let mut q = Query::parse_args(&["variable_id!=tas"]).unwrap();
    assert_eq!(names(&q), ["/t/b", "/t/fx"]);
    q = Query::parse_args(&["variable_id!=tas,pr", "project=CMIP6,CMIP5"]).unwrap();
    assert_eq!(names(&q), ["/t/fx"]);
    q = Query::parse_args(&["variable_id=tas,pr", "variable_id!=pr"]).unwrap();
    assert_eq!(names(&q), ["/t/a", "/t/c"]);
    q = Query::parse_args(&["nosuchfacet=x"]).unwrap();
    assert_eq!(cat.query(&q).unwrap().total, 0);
    q = Query::parse_args(&["nosuchfacet!=x"]).unwrap();
    assert_eq!(cat.query(&q).unwrap().total, 4);
}

pub fn autocomplete(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    let recs = random_records(2000, 9);
    cat.upsert_many(&recs).unwrap();
    for (facet, prefix, q) in [
        ("source_id", "c", None),
        ("source_id", "", None),
        ("variable_id", "T", None),
        (
            "variable_id",
            "",
            Some(Query::parse_args(&["experiment_id=historical"]).unwrap()),
        ),
        (
            "experiment_id",
            "ssp",
            Some(Query::parse_args(&["latest=false", "ocean"]).unwrap()),
        ),
        ("nosuch", "", None),
    ] {
        let got = cat.autocomplete(facet, prefix, 5, q.as_ref()).unwrap();
        let mut q2 = q.clone().unwrap_or_default();
        q2.facets = FacetSel::List(vec![facet.to_string()]);
        let (_, counts) = brute(&recs, &q2);
        let mut want: Vec<(String, u64)> = counts
            .get(facet)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|(v, _)| v.to_lowercase().starts_with(&prefix.to_lowercase()))
            .collect();
        want.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        want.truncate(5);
        assert_eq!(got, want, "autocomplete {facet} {prefix:?} {q:?}");
        if facet != "nosuch" {
            assert!(!got.is_empty());
        }
    }
}

pub fn second_handle_sees_writes(spec: &str) {
    let a = Catalog::open(spec).unwrap();
    let b = Catalog::open(spec).unwrap();
    let recs = random_records(500, 13);
    a.upsert_many(&recs).unwrap();
    assert_eq!(b.len().unwrap(), 500);
    let under: Vec<&Record> = recs
        .iter()
        .filter(|r| r.name.starts_with("/cmip/CanESM5/"))
        .collect();
    assert!(!under.is_empty());
    // rename through b, visible through a at once
    let n = b.rename("/cmip/CanESM5", "/moved/CanESM5").unwrap();
    assert_eq!(n, under.len());
    let all = Query {
        latest_only: false,
        limit: 10_000,
        ..Query::default()
    };
    let pa = a
        .query(&Query {
            name_prefix: Some("/moved/".into()),
            ..all.clone()
        })
        .unwrap();
    assert_eq!(pa.total as usize, under.len());
    assert_eq!(
        a.query(&Query {
            name_prefix: Some("/cmip/CanESM5".into()),
            ..all.clone()
        })
        .unwrap()
        .total,
        0
    );
    let one = under[0];
    let moved = one.name.replacen("/cmip/", "/moved/", 1);
    let got = a
        .get(&moved, Some(one.version))
        .unwrap()
        .expect("renamed record");
    assert_eq!(got.title, one.title);
    assert_eq!(got.facets, one.facets);
    // A name that only shares a string prefix is not moved.
    a.upsert(&Record {
        name: "/cmip/CanESM5x".into(),
        version: 1,
        ..Record::default()
    })
    .unwrap();
    assert_eq!(b.rename("/cmip/CanESM5", "/elsewhere").unwrap(), 0);
    // remove through a, visible through b
    let gone = a.remove(&moved, None).unwrap();
    assert!(gone >= 1);
    assert!(b.get(&moved, None).unwrap().is_none());
    assert_eq!(b.len().unwrap(), 501 - gone as u64);
    // free text follows the rename and the removal too
    let t = Query {
        text: Some(one.title.clone()),
        ..all.clone()
    };
    assert_eq!(
        b.query(&t)
            .unwrap()
            .hits
            .iter()
            .filter(|r| r.name == moved)
            .count(),
        0
    );
    // clear through b, rebuild visible through a
    b.clear().unwrap();
    assert_eq!(a.len().unwrap(), 0);
    a.upsert_many(&recs[..10]).unwrap();
    assert_eq!(b.len().unwrap(), 10);
    assert_eq!(
        b.query(&Query {
            facets: FacetSel::All,
            ..all
        })
        .unwrap()
        .total,
        brute(
            &recs[..10],
            &Query {
                latest_only: false,
                limit: 10_000,
                ..Query::default()
            }
        )
        .0
        .len() as u64
    );
}

pub fn rename_conflicts_and_nesting(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    let r = |n: &str, v: u64| Record {
        name: n.into(),
        version: v,
        ..Record::default()
    };
    cat.upsert_many(&[r("/a/b", 1), r("/a/b/b", 1), r("/a/b/c", 2), r("/x", 2)])
        .unwrap();
    // Moving onto an existing record fails and changes nothing.
    let e = cat.rename("/a/b/c", "/x").unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
    assert!(matches!(cat.rename("/a/b", "/x/y"), Ok(3)));
    assert_eq!(cat.rename("/x/y", "/a/b").unwrap(), 3);
    assert_eq!(cat.versions("/a/b/c").unwrap(), vec![2]);
    // /a/b → /a: /a/b/b becomes /a/b while /a/b itself moves away (same statement set).
    assert_eq!(cat.rename("/a/b", "/a").unwrap(), 3);
    assert_eq!(cat.versions("/a").unwrap(), vec![1]);
    assert_eq!(cat.versions("/a/b").unwrap(), vec![1]);
    assert_eq!(cat.versions("/a/c").unwrap(), vec![2]);
    assert_eq!(cat.len().unwrap(), 4);
}

pub fn hostile_strings(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    let evil = [
        "'; DROP TABLE records; --",
        "\" OR 1=1 --",
        "a%b_c\\d",
        "%",
        "_",
        "NEAR(a b) AND c* OR -d \"e\" col:tas ^x",
        "$1 $$ :: ?1 ?",
        "ü-ß 雨 🌧 \u{FFFD}\u{FFFD}",
        "x'y\"z`w",
    ];
    let big = "v".repeat(4096);
    let mut recs = Vec::new();
    for (i, e) in evil.iter().enumerate() {
        let mut f = BTreeMap::new();
        f.insert(e.to_string(), e.to_string());
        f.insert("evil".into(), e.to_string());
        f.insert("big".into(), big.clone());
        recs.push(Record {
            name: format!("/evil/{e}/{i}"),
            version: i as u64 + 1,
            project: e.to_string(),
            facets: f,
            title: e.to_string(),
            size: i as u64,
            time_start: Some(e.to_string()),
            time_end: Some(e.to_string()),
            bbox: Some([-180.0, -90.0, 180.0, 90.0]),
            text: format!("{e} {} \u{0} gone", "w".repeat(10_000)).replace('\0', ""),
            meta: serde_json::json!({"attr": e, "nul": "a\u{0}b", "big": "x".repeat(10_000)}),
            sha256: Some(e.to_string()),
            manifest_digest: Some(e.to_string()),
            node: Some(e.to_string()),
            tracking_id: Some(e.to_string()),
            further_info_url: Some(e.to_string()),
            license: Some(e.to_string()),
            citation: Some(e.to_string()),
        });
    }
    cat.upsert_many(&recs).unwrap();
    assert_eq!(cat.len().unwrap(), evil.len() as u64);
    for (i, e) in evil.iter().enumerate() {
        let got = cat
            .get(&format!("/evil/{e}/{i}"), None)
            .unwrap()
            .expect("evil record");
        assert_eq!(got, recs[i], "round trip of {e:?}");
        let q = Query {
            filters: BTreeMap::from([("evil".to_string(), vec![e.to_string()])]),
            facets: FacetSel::All,
            ..Query::default()
        };
        let p = cat.query(&q).unwrap();
        assert_eq!(p.total, 1, "filter {e:?}");
        assert_eq!(p.facet_counts[*e], vec![(e.to_string(), 1)]);
        let q = Query {
            name_prefix: Some(format!("/evil/{e}/")),
            ..Query::default()
        };
        assert_eq!(cat.query(&q).unwrap().total, 1, "prefix {e:?}");
        // free text: exactly the records holding every word of the hostile string
        let q = Query {
            text: Some(e.to_string()),
            limit: 100,
            ..Query::default()
        };
        let (want, _) = brute(&recs, &q);
        let got: Vec<(String, u64)> = cat
            .query(&q)
            .unwrap()
            .hits
            .iter()
            .map(|r| (r.name.clone(), r.version))
            .collect();
        assert_eq!(got, want, "text {e:?}");
        let q = Query {
            exclude: BTreeMap::from([("evil".to_string(), vec![e.to_string()])]),
            ..Query::default()
        };
        assert_eq!(cat.query(&q).unwrap().total, evil.len() as u64 - 1);
        assert_eq!(
            cat.autocomplete("evil", e, 10, None)
                .unwrap()
                .first()
                .map(|x| x.0.as_str()),
            Some(*e)
        );
    }
    // `%` and `_` are not wildcards anywhere.
    assert_eq!(
        cat.query(&Query {
            name_prefix: Some("/evil/%".into()),
            ..Query::default()
        })
        .unwrap()
        .total,
        1
    );
    assert_eq!(cat.rename("/evil/%", "/evil/percent").unwrap(), 1);
    assert_eq!(cat.remove("/evil/_/4", None).unwrap(), 1);
    assert_eq!(cat.len().unwrap(), evil.len() as u64 - 1);
    // Long words match through their first 64 characters on both back ends.
    let q = Query {
        text: Some("w".repeat(10_000 / 4)),
        limit: 100,
        ..Query::default()
    };
    assert_eq!(cat.query(&q).unwrap().total, evil.len() as u64 - 1);
    // Bad input is an error, never a panic, and writes nothing.
    let bad = |f: &dyn Fn(&mut Record)| {
        let mut r = recs[0].clone();
        r.name = "/bad".into();
        f(&mut r);
        let e = cat.upsert_many(&[recs[1].clone(), r]).unwrap_err();
        assert!(matches!(e, Error::Invalid(_)), "{e}");
    };
    bad(&|r| r.name = "/a\0b".into());
    bad(&|r| r.text = "a\0b".into());
    bad(&|r| r.title = "a\0b".into());
    bad(&|r| {
        r.facets.insert("k".into(), "a\0b".into());
    });
    bad(&|r| {
        r.facets.insert("k\0".into(), "v".into());
    });
    bad(&|r| {
        r.facets.insert("k".into(), "v".repeat(4097));
    });
    bad(&|r| r.text = "t".repeat(256 * 1024 + 1));
    bad(&|r| r.name = String::new());
    bad(&|r| r.version = u64::MAX);
    bad(&|r| r.bbox = Some([f64::NAN, 0.0, 0.0, 0.0]));
    assert!(cat.get("/bad", None).unwrap().is_none());
    assert!(matches!(
        cat.query(&Query {
            limit: 10_001,
            ..Query::default()
        }),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        cat.query(&Query {
            text: Some("t".repeat(5000)),
            ..Query::default()
        }),
        Err(Error::Invalid(_))
    ));
    assert!(cat
        .query(&Query::parse_args(&["k=a\0"]).unwrap_or_default())
        .is_ok());
    assert!(Query::parse_args(&["k=a\0"]).is_err());
    assert!(matches!(cat.rename("/a\0", "/b"), Err(Error::Invalid(_))));
    assert!(matches!(cat.remove("", None), Err(Error::Invalid(_))));
    // The tables are intact.
    assert_eq!(cat.len().unwrap(), evil.len() as u64 - 1);
    let again = Catalog::open(spec).unwrap();
    assert_eq!(again.len().unwrap(), evil.len() as u64 - 1);
}

/// Frequent words are cached between queries (as positions, brought up to date with the
/// records appended since): appends, removals, in-place replacements, renames and a
/// clear made through another handle must all show in the next text query.
pub fn word_cache_follows_changes(spec: &str) {
    let a = Catalog::open(spec).unwrap();
    let b = Catalog::open(spec).unwrap();
    let mut all = random_records(3600, 41);
    for (i, r) in all.iter_mut().enumerate() {
        if i % 5 != 0 {
            r.text.push_str(" everywhere");
        }
    }
    let (first, rest) = all.split_at(3000);
    let mut recs: Vec<Record> = first.to_vec();
    a.upsert_many(&recs).unwrap();
    let queries: Vec<Query> = ["everywhere", "everywhere temperature", "temperature"]
        .iter()
        .flat_map(|t| {
            [true, false].map(|latest| Query {
                text: Some(t.to_string()),
                latest_only: latest,
                limit: 50,
                facets: FacetSel::All,
                ..Query::default()
            })
        })
        .collect();
    let check_all = |recs: &[Record]| {
        for q in &queries {
            check(&a, recs, q);
        }
    };
    check_all(&recs); // fills the cache
    check_all(&recs); // from the cache
                      // appended through the other handle
    b.upsert_many(&rest[..300]).unwrap();
    recs.extend_from_slice(&rest[..300]);
    check_all(&recs);
    // removed
    for r in recs
        .iter()
        .step_by(7)
        .take(100)
        .cloned()
        .collect::<Vec<_>>()
    {
        b.remove(&r.name, Some(r.version)).unwrap();
        recs.retain(|x| !(x.name == r.name && x.version == r.version));
    }
    check_all(&recs);
    // replaced in place: the word goes from some records and comes to others
    let mut changed = Vec::new();
    for r in recs.iter_mut().step_by(11).take(80) {
        r.text = if r.text.contains("everywhere") {
            "nothing here".into()
        } else {
            format!("{} everywhere", r.text)
        };
        changed.push(r.clone());
    }
    b.upsert_many(&changed).unwrap();
    check_all(&recs);
    // appended again, then renamed
    b.upsert_many(&rest[300..]).unwrap();
    recs.extend_from_slice(&rest[300..]);
    check_all(&recs);
    let moved = b.rename("/cmip/MIROC6", "/moved/MIROC6").unwrap();
    assert!(moved > 0);
    for r in &mut recs {
        if let Some(tail) = r.name.strip_prefix("/cmip/MIROC6/") {
            r.name = format!("/moved/MIROC6/{tail}");
        }
    }
    check_all(&recs);
    // cleared and refilled
    b.clear().unwrap();
    b.upsert_many(&rest[..50]).unwrap();
    check_all(&rest[..50]);
}

/// ESGF-style dataset-level `latest` (facet `version` per dataset directory) and the
/// name-level autocomplete, against hand-computed and brute-force answers.
pub fn dataset_latest_and_name_children(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    let rec = |name: &str, version: u64, drs: Option<&str>| {
        let mut facets = BTreeMap::new();
        if let Some(d) = drs {
            facets.insert("version".to_string(), d.to_string());
        }
        Record {
            name: name.into(),
            version,
            facets,
            ..Record::default()
        }
    };
    cat.upsert_many(&[
        rec("/d1/f1.nc", 1, Some("v20190101")),
        rec("/d1/f2.nc", 1, Some("v20190101")),
        rec("/d1/f2.nc", 2, Some("v20200101")),
        rec("/d1/f3.nc", 1, Some("v20200101")),
        rec("/d2/g.nc", 1, None),
        rec("/d3/h.nc", 1, Some("v20180101")),
    ])
    .unwrap();
    let names = |q: &Query| -> Vec<(String, u64)> {
        cat.query(q)
            .unwrap()
            .hits
            .iter()
            .map(|r| (r.name.clone(), r.version))
            .collect()
    };
    let own = |v: &[(&str, u64)]| -> Vec<(String, u64)> {
        v.iter().map(|(n, k)| (n.to_string(), *k)).collect()
    };
    let ds = Query::parse_args(&["latest=dataset"]).unwrap();
    assert!(ds.latest_only && ds.dataset_latest);
    let kept = own(&[
        ("/d1/f2.nc", 2),
        ("/d1/f3.nc", 1),
        ("/d2/g.nc", 1),
        ("/d3/h.nc", 1),
    ]);
    assert_eq!(names(&ds), kept);
    assert_eq!(
        names(&Query {
            latest_only: false,
            ..ds.clone()
        }),
        kept,
        "an older dataset version is left out whatever the repository version"
    );
    assert_eq!(cat.query(&Query::default()).unwrap().total, 5);
    // Counts follow the same selection.
    let page = cat
        .query(&Query {
            facets: FacetSel::All,
            ..ds.clone()
        })
        .unwrap();
    assert_eq!(
        page.facet_counts["version"],
        vec![("v20180101".to_string(), 1), ("v20200101".to_string(), 2)]
    );
    // A newer dataset version of f1 arrives: f1 is back.
    cat.upsert(&rec("/d1/f1.nc", 2, Some("v20200101"))).unwrap();
    assert_eq!(names(&ds).len(), 5);
    assert_eq!(names(&ds)[0], ("/d1/f1.nc".to_string(), 2));

    // Name-level autocomplete.
    cat.clear().unwrap();
    let recs = random_records(1500, 51);
    cat.upsert_many(&recs).unwrap();
    let brute_children = |parent: &str, partial: &str, q: &Query| -> Vec<(String, u64)> {
        let (hits, _) = brute(
            &recs,
            &Query {
                limit: usize::MAX,
                offset: 0,
                facets: FacetSel::None,
                ..q.clone()
            },
        );
        let base = format!("{}/", parent.trim_end_matches('/'));
        let mut c: BTreeMap<String, u64> = BTreeMap::new();
        for (n, _) in hits {
            if let Some(rest) = n.strip_prefix(&base) {
                let child = rest.split('/').next().unwrap_or(rest);
                if child.to_lowercase().starts_with(&partial.to_lowercase()) {
                    *c.entry(child.to_string()).or_default() += 1;
                }
            }
        }
        let mut v: Vec<(String, u64)> = c.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    };
    let tas = Query::parse_args(&["variable_id=tas"]).unwrap();
    for (parent, partial, q) in [
        ("/", "", Query::default()),
        ("/cmip", "", Query::default()),
        ("/cmip/", "c", Query::default()),
        ("/cmip/CanESM5", "HIST", Query::default()),
        ("/cmip/MIROC6/historical", "", tas.clone()),
        ("/cmip/nosuch", "", Query::default()),
    ] {
        let got = cat.name_children(parent, partial, 1000, Some(&q)).unwrap();
        assert_eq!(
            got,
            brute_children(parent, partial, &q),
            "{parent} {partial}"
        );
    }
    assert!(!cat
        .name_children("/cmip", "", 1000, None)
        .unwrap()
        .is_empty());
    assert_eq!(cat.name_children("/cmip", "", 2, None).unwrap().len(), 2);
    assert!(cat.name_children("/cmip\u{0}", "", 10, None).is_err());
}

/// A bulk upsert large enough to be prepared on a second thread, chunk by
/// chunk, while the chunks before are written: still one transaction (an
/// invalid record near the end leaves nothing written), and a record written
/// twice in it (in different chunks) ends as its last write, text included.
pub fn bulk_upsert_in_chunks(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    let base = random_records(700, 21);
    let mut recs: Vec<Record> = Vec::new();
    for k in 0..10 {
        recs.extend(base.iter().map(|r| Record {
            name: format!("{}/k{k}", r.name),
            ..r.clone()
        }));
    }
    assert!(recs.len() >= 7000);
    let mut bad = recs.clone();
    bad[6500].name.push('\0');
    assert!(cat.upsert_many(&bad).is_err());
    assert_eq!(
        cat.len().unwrap(),
        0,
        "a failed bulk upsert wrote something"
    );
    // The first 300 again at the end, with new text: the last write wins.
    let mut twice = recs.clone();
    for r in recs.iter().take(300) {
        twice.push(Record {
            title: format!("{} rewritten", r.title),
            text: format!("{} zanzibar", r.text),
            ..r.clone()
        });
    }
    cat.upsert_many(&twice).unwrap();
    let mut want = twice[recs.len()..].to_vec();
    want.extend_from_slice(&recs[300..]);
    assert_eq!(cat.len().unwrap(), want.len() as u64);
    let mut rng = StdRng::with_seed(5);
    for _ in 0..40 {
        check(&cat, &want, &random_query(&mut rng));
    }
    for text in ["zanzibar", "rewritten"] {
        let q = Query {
            text: Some(text.into()),
            latest_only: false,
            limit: 1000,
            ..Query::default()
        };
        check(&cat, &want, &q);
        assert_eq!(cat.query(&q).unwrap().total, 300, "{text}");
    }
}

/// Records come back exactly as written: every field, with the record's own `project`
/// facet told apart from the one added from its project, after a rename too.
pub fn records_round_trip(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    let mut recs = random_records(60, 31);
    let base = recs[0].clone();
    let with = |name: &str, f: &dyn Fn(&mut Record)| {
        let mut r = Record {
            name: name.into(),
            ..base.clone()
        };
        f(&mut r);
        r
    };
    recs.extend([
        // Own `project` facet equal to the project, different from it, and without one.
        with("/rt/same", &|r| {
            r.facets.insert("project".into(), r.project.clone());
        }),
        with("/rt/other", &|r| {
            r.facets.insert("project".into(), "obs4MIPs".into());
        }),
        with("/rt/facet-only", &|r| {
            r.project.clear();
            r.facets.insert("project".into(), "CORDEX".into());
        }),
        with("/rt/bare", &|r| {
            *r = Record {
                name: r.name.clone(),
                version: 7,
                ..Record::default()
            };
        }),
        with("/rt/full", &|r| {
            r.bbox = Some([-10.5, -20.0, 30.25, 40.0]);
            r.sha256 = Some("ab".repeat(32));
            r.manifest_digest = Some("cd".repeat(32));
            r.node = Some("/node/a".into());
            r.meta = serde_json::json!({"attributes": {"title": "x \u{0} y"}, "n": [1, 2.5, null]});
            r.text = "some \"quoted\" text, é".into();
            r.tracking_id = Some("hdl:21.14100/0b5e5b2e-9c1a-4c1e-8c1e-000000000001".into());
            r.further_info_url = Some("https://furtherinfo.es-doc.org/CMIP6.X".into());
            r.license = Some("CMIP6 model data … CC BY 4.0".into());
            r.citation = Some("Swart et al. (2019), doi:10.22033/ESGF/CMIP6.1303".into());
        }),
    ]);
    // A row written before the tracking_id, further_info_url and license fields:
    // they are read from the netCDF attributes in its `meta`.
    let old = with("/rt/old", &|r| {
        r.tracking_id = None;
        r.meta = serde_json::json!({"attributes": {
            "tracking_id": {"type": "text", "value": "hdl:21.14100/old"},
            "license": {"type": "text", "value": " CC BY 4.0 "},
            "further_info_url": {"type": "int", "value": [1]},
        }});
    });
    cat.upsert(&old).unwrap();
    let got = cat.get("/rt/old", None).unwrap().unwrap();
    assert_eq!(got.tracking_id.as_deref(), Some("hdl:21.14100/old"));
    assert_eq!(got.license.as_deref(), Some("CC BY 4.0"));
    assert_eq!(got.further_info_url, None);
    assert_eq!(cat.remove("/rt/old", None).unwrap(), 1);
    cat.upsert_many(&recs).unwrap();
    for r in &recs {
        let got = cat.get(&r.name, Some(r.version)).unwrap();
        assert_eq!(got.as_ref(), Some(r), "{}", r.name);
    }
    let q = Query {
        name_prefix: Some("/rt/".into()),
        latest_only: false,
        limit: 100,
        ..Query::default()
    };
    let page = cat.query(&q).unwrap();
    let mut want: Vec<&Record> = recs.iter().filter(|r| r.name.starts_with("/rt/")).collect();
    want.sort_by(|a, b| (&a.name, a.version).cmp(&(&b.name, b.version)));
    assert_eq!(page.hits.iter().collect::<Vec<_>>(), want);
    assert_eq!(cat.rename("/rt", "/moved").unwrap(), 5);
    let got = cat.get("/moved/other", None).unwrap().unwrap();
    assert_eq!(
        got,
        Record {
            name: "/moved/other".into(),
            ..recs[recs.len() - 4].clone()
        }
    );
}

/// The oracle for datasets: the highest repository version of each name within each
/// DRS version, grouped by directory (without a `variable` component) and `version`
/// facet: instance id -> (files, size).
pub fn brute_datasets(recs: &[Record]) -> BTreeMap<String, (u64, u64)> {
    let mut latest: BTreeMap<(&str, Option<&String>), &Record> = BTreeMap::new();
    for r in recs {
        let e = latest
            .entry((r.name.as_str(), r.facets.get("version")))
            .or_insert(r);
        if r.version > e.version {
            *e = r;
        }
    }
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in latest.values() {
        let mut comps: Vec<String> = r.name.split('/').skip(1).map(str::to_string).collect();
        comps.pop();
        if comps.len() > 1 && r.facets.get("variable") == comps.last() {
            comps.pop();
        }
        if !r.project.is_empty() && comps[0].eq_ignore_ascii_case(&r.project) {
            comps[0] = r.project.clone();
        }
        let mut id = comps.join(".");
        if let Some(v) = r.facets.get("version") {
            id = format!("{id}.{v}");
        }
        let e = out.entry(id).or_default();
        e.0 += 1;
        e.1 += r.size;
    }
    out
}

fn all_datasets(cat: &Catalog) -> BTreeMap<String, (u64, u64)> {
    let dq = granary_catalog::DatasetQuery {
        query: Query {
            limit: 10_000,
            ..Query::default()
        },
        ..Default::default()
    };
    let p = cat.datasets(&dq).unwrap();
    assert_eq!(p.total as usize, p.hits.len());
    p.hits
        .into_iter()
        .map(|d| (d.instance_id, (d.number_of_files, d.size)))
        .collect()
}

fn monthly(name: &str, drs: &str, from: u32, to: u32, size: u64) -> Record {
    let mut facets = BTreeMap::new();
    facets.insert("version".to_string(), drs.to_string());
    facets.insert("frequency".to_string(), "mon".to_string());
    facets.insert("variable_id".to_string(), "tas".to_string());
    Record {
        name: name.into(),
        version: 1,
        project: "CMIP6".into(),
        facets,
        title: name.rsplit('/').next().unwrap_or("").into(),
        size,
        time_start: Some(format!("{from}-01-01T00:00:00")),
        time_end: Some(format!("{to}-01-01T00:00:00")),
        ..Record::default()
    }
}

/// Dataset records: grouping against brute force, coverage and contiguity (a gap, an
/// overlap), and the records following new files, new repository and DRS versions,
/// removals, renames, another handle's writes and a clear and reload.
pub fn datasets_follow_changes(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    let mut recs = random_records(300, 33);
    let d = "/cmip6/CMIP/I/S/historical/r1i1p1f1/Amon/tas/gn";
    let mine = [
        monthly(&format!("{d}/a_1850-1900.nc"), "v20190101", 1850, 1900, 10),
        monthly(&format!("{d}/a_1900-1950.nc"), "v20190101", 1900, 1950, 20),
        monthly(&format!("{d}/a_1960-2000.nc"), "v20190101", 1960, 2000, 30),
        monthly(&format!("{d}/a_1990-2014.nc"), "v20190101", 1990, 2014, 40),
    ];
    let mut cmip5 = monthly(
        "/cmip5/output1/MOHC/HadGEM2-ES/historical/mon/atmos/Amon/r1i1p1/tas/tas_1.nc",
        "v20110101",
        1860,
        1900,
        5,
    );
    cmip5.project = "CMIP5".into();
    cmip5.facets.insert("variable".into(), "tas".into());
    let mut cmip5b = cmip5.clone();
    cmip5b.name = cmip5b.name.replace("/tas/tas_1", "/pr/pr_1");
    cmip5b.facets.insert("variable".into(), "pr".into());
    recs.extend(mine.iter().cloned());
    recs.push(cmip5.clone());
    recs.push(cmip5b.clone());
    cat.upsert_many(&recs).unwrap();
    assert_eq!(all_datasets(&cat), brute_datasets(&recs));
    assert_eq!(
        cat.dataset_count().unwrap() as usize,
        brute_datasets(&recs).len()
    );

    let one = |cat: &Catalog, id: &str| -> Option<granary_catalog::Dataset> {
        let dq = granary_catalog::DatasetQuery {
            ids: vec![id.to_string()],
            files: true,
            ..Default::default()
        };
        let mut p = cat.datasets(&dq).unwrap();
        assert!(p.hits.len() <= 1);
        p.hits.pop()
    };
    let id = "CMIP6.CMIP.I.S.historical.r1i1p1f1.Amon.tas.gn.v20190101";
    let ds = one(&cat, id).expect("the dataset");
    assert_eq!(
        ds.master_id,
        "CMIP6.CMIP.I.S.historical.r1i1p1f1.Amon.tas.gn"
    );
    assert_eq!(ds.version, "v20190101");
    assert_eq!((ds.number_of_files, ds.size), (4, 100));
    assert_eq!(ds.time_start.as_deref(), Some("1850-01-01T00:00:00"));
    assert_eq!(ds.time_end.as_deref(), Some("2014-01-01T00:00:00"));
    assert!(!ds.contiguous);
    assert_eq!(ds.gaps.len(), 1, "{ds:?}");
    assert_eq!(ds.gaps[0].from, "1950-01-01T00:00:00");
    assert_eq!(ds.gaps[0].to, "1960-01-01T00:00:00");
    assert_eq!(ds.overlaps.len(), 1);
    assert!(ds.overlaps[0].before.ends_with("a_1990-2014.nc"));
    assert_eq!(ds.facets.get("frequency").map(String::as_str), Some("mon"));
    assert_eq!(ds.files.len(), 4);
    assert!(ds.latest);
    // CMIP5: the variable is not part of the dataset.
    let c5 = one(
        &cat,
        "cmip5.output1.MOHC.HadGEM2-ES.historical.mon.atmos.Amon.r1i1p1.v20110101",
    )
    .expect("the CMIP5 dataset");
    assert_eq!(c5.number_of_files, 2);
    assert!(!c5.facets.contains_key("variable"));
    // Master id: every version.
    assert!(one(&cat, "CMIP6.CMIP.I.S.historical.r1i1p1f1.Amon.tas.gn").is_some());

    // The missing file arrives: the gap closes (another handle sees it).
    let other = Catalog::open(spec).unwrap();
    let fill = monthly(&format!("{d}/a_1950-1960.nc"), "v20190101", 1950, 1960, 7);
    other.upsert(&fill).unwrap();
    recs.push(fill);
    let ds = one(&cat, id).unwrap();
    assert_eq!((ds.number_of_files, ds.size), (5, 107));
    assert!(ds.gaps.is_empty() && ds.overlaps.len() == 1);
    // A corrected copy (new repository version) replaces the overlapping file.
    let mut fix = monthly(&format!("{d}/a_1990-2014.nc"), "v20190101", 2000, 2014, 41);
    fix.version = 2;
    cat.upsert(&fix).unwrap();
    recs.push(fix);
    let ds = one(&cat, id).unwrap();
    assert_eq!((ds.number_of_files, ds.size), (5, 108));
    assert!(ds.contiguous, "{ds:?}");
    // A new DRS version: two datasets, only the newer one latest.
    let newer = monthly(&format!("{d}/a_1850-2014.nc"), "v20200101", 1850, 2014, 99);
    cat.upsert(&newer).unwrap();
    recs.push(newer);
    let old = one(&cat, id).unwrap();
    assert!(!old.latest);
    let new = one(
        &cat,
        "CMIP6.CMIP.I.S.historical.r1i1p1f1.Amon.tas.gn.v20200101",
    )
    .unwrap();
    assert!(new.latest && new.number_of_files == 1 && new.contiguous);
    // A name published again under the new DRS version (a new repository version of
    // the same name): the older dataset version keeps its copy.
    let mut again = monthly(&format!("{d}/a_1900-1950.nc"), "v20200101", 1900, 1950, 21);
    again.version = 5;
    cat.upsert(&again).unwrap();
    recs.push(again);
    assert_eq!(one(&cat, id).unwrap().number_of_files, 5);
    let new = one(
        &cat,
        "CMIP6.CMIP.I.S.historical.r1i1p1f1.Amon.tas.gn.v20200101",
    )
    .unwrap();
    assert_eq!((new.number_of_files, new.size), (2, 120));
    let latest_only = granary_catalog::DatasetQuery {
        query: Query {
            name_prefix: Some(format!("{d}/")),
            ..Query::default()
        },
        latest: Some(true),
        ..Default::default()
    };
    let p = cat.datasets(&latest_only).unwrap();
    assert_eq!(p.total, 1);
    assert_eq!(p.hits[0].version, "v20200101");
    assert_eq!(all_datasets(&cat), brute_datasets(&recs));
    // A removal.
    let gone = format!("{d}/a_1850-1900.nc");
    assert_eq!(cat.remove(&gone, None).unwrap(), 1);
    recs.retain(|r| r.name != gone);
    let ds = one(&cat, id).unwrap();
    assert_eq!((ds.number_of_files, ds.size), (4, 98));
    assert_eq!(ds.time_start.as_deref(), Some("1900-01-01T00:00:00"));
    assert_eq!(all_datasets(&cat), brute_datasets(&recs));
    // A rename of the dataset's directory moves the dataset.
    let to = "/cmip6/CMIP/I/S/historical/r2i1p1f1/Amon/tas/gn";
    cat.rename(d, to).unwrap();
    for r in &mut recs {
        if let Some(rest) = r.name.strip_prefix(&format!("{d}/")) {
            r.name = format!("{to}/{rest}");
        }
    }
    assert!(one(&cat, id).is_none());
    let moved = one(
        &cat,
        "CMIP6.CMIP.I.S.historical.r2i1p1f1.Amon.tas.gn.v20190101",
    )
    .unwrap();
    assert_eq!(moved.number_of_files, 4);
    assert_eq!(all_datasets(&other), brute_datasets(&recs));
    // Every file of a dataset removed: the dataset goes.
    let names: Vec<String> = moved.files.iter().map(|f| f.name.clone()).collect();
    for n in &names {
        cat.remove(n, None).unwrap();
    }
    recs.retain(|r| !names.contains(&r.name));
    assert!(one(
        &cat,
        "CMIP6.CMIP.I.S.historical.r2i1p1f1.Amon.tas.gn.v20190101"
    )
    .is_none());
    assert_eq!(all_datasets(&cat), brute_datasets(&recs));
    // Filters select datasets by their files; facet counts count datasets.
    let dq = granary_catalog::DatasetQuery {
        query: Query {
            filters: [("source_id".to_string(), vec!["CanESM5".to_string()])].into(),
            facets: FacetSel::List(vec!["source_id".into()]),
            limit: 10_000,
            ..Query::default()
        },
        ..Default::default()
    };
    let p = cat.datasets(&dq).unwrap();
    let want = brute_datasets(&recs)
        .keys()
        .filter(|k| {
            k.starts_with("cmip.CanESM5.")
                || k.starts_with("CMIP6.CanESM5.")
                || k.starts_with("CMIP5.CanESM5.")
        })
        .count() as u64;
    assert_eq!(p.total, want);
    assert_eq!(
        p.facet_counts["source_id"],
        vec![("CanESM5".to_string(), want)]
    );
    // Paging walks instance-id order.
    let mut q = granary_catalog::DatasetQuery::default();
    q.query.limit = 7;
    let mut ids = Vec::new();
    loop {
        let p = cat.datasets(&q).unwrap();
        if p.hits.is_empty() {
            break;
        }
        ids.extend(p.hits.into_iter().map(|d| d.instance_id));
        q.query.offset += 7;
    }
    let sorted: Vec<String> = ids
        .iter()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(ids.len(), sorted.len());
    assert_eq!(ids.len(), brute_datasets(&recs).len());
    // A clear and reload (the rebuild path) gives the same datasets.
    cat.clear().unwrap();
    assert_eq!(cat.dataset_count().unwrap(), 0);
    cat.upsert_many(&recs).unwrap();
    assert_eq!(all_datasets(&cat), brute_datasets(&recs));
    drop(cat);
    let again = Catalog::open(spec).unwrap();
    assert_eq!(all_datasets(&again), brute_datasets(&recs));
    // A bad id or limit is an error, not a panic.
    let bad = granary_catalog::DatasetQuery {
        ids: vec!["a\u{0}b".into()],
        ..Default::default()
    };
    assert!(again.datasets(&bad).is_err());
}
