//! Generated CMIP6 and CMIP5 names from the vendored vocabularies (seeded pseudo-random
//! combinations): each translates, its facets equal the inputs, and reverse() gives back
//! the exact path.

use std::collections::BTreeMap;

use granary_science::drs::{Config, Status, Translator};

/// Seeded draws (the workspace's one generator), reproducible.
struct Rng(fastrand::Rng);
impl Rng {
    fn new(seed: u64) -> Self {
        Rng(fastrand::Rng::with_seed(seed))
    }
    fn next(&mut self) -> u64 {
        self.0.u64(..)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

fn vocab(rel: &str) -> String {
    let p = format!("{}/vocab/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn json_map(rel: &str, key: &str) -> serde_json::Map<String, serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&vocab(rel)).expect("vocabulary JSON");
    v[key].as_object().expect("object").clone()
}

/// Time-range digits per CMIP6 table (0: no time range), from the data request.
fn cmip6_digits(table: &str) -> usize {
    match table {
        "Efx" | "IfxAnt" | "IfxGre" | "Ofx" | "fx" => 0,
        "Eyr" | "IyrAnt" | "IyrGre" | "Oyr" | "Odec" => 4,
        "day" | "Eday" | "EdayZ" | "Oday" | "SIday" | "AERday" | "CFday" => 8,
        "3hr" | "E3hr" | "CF3hr" | "E3hrPt" | "6hrLev" | "6hrPlev" | "6hrPlevPt" | "E6hrZ"
        | "AERhr" | "E1hr" | "E1hrClimMon" | "CFsubhr" | "Esubhr" => 12,
        _ => 6,
    }
}

fn range(rng: &mut Rng, digits: usize) -> Option<String> {
    let y0 = 1850 + rng.below(150);
    let y1 = y0 + rng.below(100);
    match digits {
        0 => None,
        4 => Some(format!("{y0}-{y1}")),
        6 => Some(format!("{y0}01-{y1}12")),
        8 => Some(format!("{y0}0101-{y1}1231")),
        _ => Some(format!("{y0}01010000-{y1}12311800")),
    }
}

const VARIABLES: &[&str] = &[
    "tas",
    "pr",
    "ta",
    "ua",
    "va",
    "tos",
    "siconc",
    "ps",
    "hus",
    "zg",
    "sftlf",
    "areacella",
];

#[test]
fn cmip6_generated_names_translate_and_round_trip() {
    let t = Translator::new(Config::default()).expect("translator");
    let sources = json_map("cmip6/CMIP6_source_id.json", "source_id");
    let experiments = json_map("cmip6/CMIP6_experiment_id.json", "experiment_id");
    let grids: Vec<String> = json_map("cmip6/CMIP6_grid_label.json", "grid_label")
        .keys()
        .cloned()
        .collect();
    let subs: Vec<String> = json_map("cmip6/CMIP6_sub_experiment_id.json", "sub_experiment_id")
        .keys()
        .filter(|k| *k != "none")
        .cloned()
        .collect();
    let tv: serde_json::Value =
        serde_json::from_str(&vocab("cmip6/CMIP6_table_id.json")).expect("json");
    let tables: Vec<String> = tv["table_id"]
        .as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_str().expect("str").to_string())
        .collect();
    let source_ids: Vec<&String> = sources.keys().collect();
    let experiment_ids: Vec<&String> = experiments.keys().collect();
    let mut rng = Rng::new(0x5EED_6C1F_0000_0001);
    let (mut n, mut bare_ok) = (0, 0);
    for _ in 0..3000 {
        let source = rng.pick(&source_ids).as_str();
        let insts = sources[source]["institution_id"].as_array().expect("array");
        let inst = rng.pick(insts).as_str().expect("str");
        let experiment = rng.pick(&experiment_ids).as_str();
        let acts = experiments[experiment]["activity_id"]
            .as_array()
            .expect("array");
        let activity = rng.pick(acts).as_str().expect("str");
        let table = rng.pick(&tables).as_str();
        let variable = *rng.pick(VARIABLES);
        let grid = rng.pick(&grids).as_str();
        let variant = format!(
            "r{}i{}p{}f{}",
            1 + rng.below(50),
            1 + rng.below(3),
            1 + rng.below(3),
            1 + rng.below(4)
        );
        let (sub, member) = if rng.below(10) == 0 {
            let s = rng.pick(&subs).clone();
            (s.clone(), format!("{s}-{variant}"))
        } else {
            ("none".to_string(), variant.clone())
        };
        let version = format!(
            "v20{:02}{:02}{:02}",
            18 + rng.below(6),
            1 + rng.below(12),
            1 + rng.below(28)
        );
        let tr = range(&mut rng, cmip6_digits(table));
        let file = match &tr {
            Some(r) => format!("{variable}_{table}_{source}_{experiment}_{member}_{grid}_{r}.nc"),
            None => format!("{variable}_{table}_{source}_{experiment}_{member}_{grid}.nc"),
        };
        let path = format!("CMIP6/{activity}/{inst}/{source}/{experiment}/{member}/{table}/{variable}/{grid}/{version}/{file}");
        let o = t.translate(&path, None);
        assert_eq!(o.status, Status::Translated, "{path}: {o:?}");
        let want: BTreeMap<&str, &str> = [
            ("mip_era", "CMIP6"),
            ("activity_id", activity),
            ("institution_id", inst),
            ("source_id", source),
            ("experiment_id", experiment),
            ("member_id", member.as_str()),
            ("variant_label", variant.as_str()),
            ("sub_experiment_id", sub.as_str()),
            ("table_id", table),
            ("variable_id", variable),
            ("grid_label", grid),
            ("version", version.as_str()),
        ]
        .into_iter()
        .collect();
        for (k, v) in &want {
            assert_eq!(
                o.facets.get(*k).map(String::as_str),
                Some(*v),
                "{path}: facet {k}"
            );
        }
        assert_eq!(o.time_range, tr, "{path}");
        assert_eq!(o.drs_version.as_deref(), Some(version.as_str()));
        let name: Vec<String> = [
            "cmip6", activity, inst, source, experiment, &member, table, variable, grid, &file,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(o.name, name, "{path}");
        let back = t.reverse(&o.name, &version).expect("reverse");
        assert_eq!(back.path(), path);
        // The bare file name gives the same name whenever the vocabularies fix the
        // activity and institution; otherwise it is rejected, saying why.
        let b = t.translate(&file, None);
        let unique = acts.len() == 1 && insts.len() == 1;
        if unique {
            assert_eq!(b.status, Status::Translated, "{file}: {b:?}");
            assert_eq!(b.name, o.name);
            bare_ok += 1;
        } else {
            assert_eq!(b.status, Status::Rejected, "{file}");
            assert!(
                b.reason.as_deref().is_some_and(|r| r.contains("several")),
                "{b:?}"
            );
        }
        n += 1;
    }
    assert_eq!(n, 3000);
    assert!(bare_ok > 100, "only {bare_ok} bare names were unambiguous");
}

#[derive(serde::Deserialize)]
struct Cmip5Vocab {
    frequencies: Vec<String>,
    realms: Vec<String>,
    experiments: Vec<String>,
    tables: BTreeMap<String, Table5>,
    institutes: BTreeMap<String, Vec<String>>,
}
#[derive(serde::Deserialize)]
struct Table5 {
    frequency: String,
    realm: Option<String>,
}

#[test]
fn cmip5_generated_names_translate_and_round_trip() {
    let t = Translator::new(Config::default()).expect("translator");
    let v: Cmip5Vocab = toml::from_str(&vocab("cmip5/cmip5_drs.toml")).expect("toml");
    assert!(v.frequencies.len() >= 8);
    let pairs: Vec<(&String, &String)> = v
        .institutes
        .iter()
        .flat_map(|(i, ms)| ms.iter().map(move |m| (i, m)))
        .collect();
    let tables: Vec<(&String, &Table5)> = v.tables.iter().filter(|(k, _)| *k != "grids").collect();
    let mut exps = v.experiments.clone();
    exps.extend([
        "decadal1960".to_string(),
        "decadal2005".to_string(),
        "noVolc1990".to_string(),
    ]);
    let mut rng = Rng::new(0xC0FF_EE00_0000_0005);
    for i in 0..600 {
        let (inst, model) = *rng.pick(&pairs);
        let experiment = rng.pick(&exps);
        let (table, info) = *rng.pick(&tables);
        let realm = info
            .realm
            .clone()
            .unwrap_or_else(|| rng.pick(&v.realms).clone());
        let freq = info.frequency.as_str();
        let variable = *rng.pick(VARIABLES);
        let ensemble = if freq == "fx" {
            "r0i0p0".to_string()
        } else {
            format!(
                "r{}i{}p{}",
                1 + rng.below(10),
                1 + rng.below(3),
                1 + rng.below(3)
            )
        };
        let product = if rng.below(2) == 0 {
            "output1"
        } else {
            "output2"
        };
        let version = if i % 7 == 0 {
            format!("v{}", 1 + rng.below(9))
        } else {
            format!("v2012{:02}{:02}", 1 + rng.below(12), 1 + rng.below(28))
        };
        let digits = match freq {
            "fx" => 0,
            "yr" => 4,
            "mon" | "monClim" => 6,
            "day" => 8,
            _ => 12,
        };
        let tr = range(&mut rng, digits);
        let file = match &tr {
            Some(r) => format!("{variable}_{table}_{model}_{experiment}_{ensemble}_{r}.nc"),
            None => format!("{variable}_{table}_{model}_{experiment}_{ensemble}.nc"),
        };
        let path = format!("cmip5/{product}/{inst}/{model}/{experiment}/{freq}/{realm}/{table}/{ensemble}/{version}/{variable}/{file}");
        let o = t.translate(&path, None);
        assert_eq!(o.status, Status::Translated, "{path}: {o:?}");
        for (k, want) in [
            ("project", "CMIP5"),
            ("product", product),
            ("institute", inst.as_str()),
            ("model", model.as_str()),
            ("experiment", experiment.as_str()),
            ("time_frequency", freq),
            ("realm", realm.as_str()),
            ("cmor_table", table.as_str()),
            ("ensemble", ensemble.as_str()),
            ("variable", variable),
            ("version", version.as_str()),
        ] {
            assert_eq!(
                o.facets.get(k).map(String::as_str),
                Some(want),
                "{path}: facet {k}"
            );
        }
        let name: Vec<String> = [
            "cmip5", product, inst, model, experiment, freq, &realm, table, &ensemble, variable,
            &file,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(o.name, name, "{path}");
        assert_eq!(t.reverse(&o.name, &version).expect("reverse").path(), path);
    }
}

#[test]
fn uri_escapes_like_ndn() {
    use granary_science::drs::uri;
    let c: Vec<String> = ["cmip5", "CESM1(CAM5)", "a b", "...", "x~y_z.nc"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(uri(&c), "/cmip5/CESM1%28CAM5%29/a%20b/....../x~y_z.nc");
    assert_eq!(uri(&[]), "/");
}
