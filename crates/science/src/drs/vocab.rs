//! The vendored controlled vocabularies (crates/science/vocab/), compiled into the binary
//! and parsed once on first use.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

const CMIP6_SOURCE: &str = include_str!("../../vocab/cmip6/CMIP6_source_id.json");
const CMIP6_EXPERIMENT: &str = include_str!("../../vocab/cmip6/CMIP6_experiment_id.json");
const CMIP6_ACTIVITY: &str = include_str!("../../vocab/cmip6/CMIP6_activity_id.json");
const CMIP6_INSTITUTION: &str = include_str!("../../vocab/cmip6/CMIP6_institution_id.json");
const CMIP6_TABLE: &str = include_str!("../../vocab/cmip6/CMIP6_table_id.json");
const CMIP6_GRID: &str = include_str!("../../vocab/cmip6/CMIP6_grid_label.json");
const CMIP6_SUB_EXPERIMENT: &str = include_str!("../../vocab/cmip6/CMIP6_sub_experiment_id.json");
const CMIP6_FREQUENCY: &str = include_str!("../../vocab/cmip6/CMIP6_frequency.json");
const CMIP6_REALM: &str = include_str!("../../vocab/cmip6/CMIP6_realm.json");
const CMIP5_DRS: &str = include_str!("../../vocab/cmip5/cmip5_drs.toml");
const CMIP5_MODELS_CSV: &str = include_str!("../../vocab/cmip5/CMIP5_models.csv");
const CMIP5_VARIABLE_REALMS: &str = include_str!("../../vocab/cmip5/cmip5_variable_realms.tsv");

/// The CMIP6 vocabularies the translator needs.
#[derive(Debug)]
pub(crate) struct Cmip6 {
    /// source_id -> institution_ids
    pub sources: BTreeMap<String, Vec<String>>,
    /// experiment_id -> activity_ids
    pub experiments: BTreeMap<String, Vec<String>>,
    pub activities: BTreeSet<String>,
    pub institutions: BTreeSet<String>,
    pub tables: BTreeSet<String>,
    pub grids: BTreeSet<String>,
    pub sub_experiments: BTreeSet<String>,
    pub frequencies: BTreeSet<String>,
    pub realms: BTreeSet<String>,
}

/// The CMIP5 vocabularies the translator needs.
#[derive(Debug)]
pub(crate) struct Cmip5 {
    pub frequencies: BTreeSet<String>,
    pub realms: BTreeSet<String>,
    pub products: BTreeSet<String>,
    pub experiments: BTreeSet<String>,
    pub experiment_patterns: Vec<Regex>,
    /// table -> (frequency, realm if the table implies one)
    pub tables: BTreeMap<String, (String, Option<String>)>,
    /// model (directory spelling) -> institutes
    pub model_institutes: BTreeMap<String, Vec<String>>,
    /// punctuation-normalised model key -> directory spelling
    pub model_keys: HashMap<String, String>,
    /// (MIP table, variable) -> realm, from the CMIP5 CMOR tables
    pub variable_realms: HashMap<(String, String), String>,
    /// model run by several institutes -> (default institute, reason)
    pub default_institute: BTreeMap<String, (String, String)>,
}

impl Cmip5 {
    pub fn is_experiment(&self, e: &str) -> bool {
        self.experiments.contains(e) || self.experiment_patterns.iter().any(|r| r.is_match(e))
    }
    /// The directory spelling of a model written with other punctuation
    /// (`CSIRO-Mk3.6.0` -> `CSIRO-Mk3-6-0`, `CESM1(CAM5)` -> `CESM1-CAM5`).
    pub fn canonical_model(&self, m: &str) -> Option<&str> {
        self.model_keys.get(&model_key(m)).map(String::as_str)
    }
}

/// Punctuation- and case-insensitive key of a model name.
pub(crate) fn model_key(m: &str) -> String {
    m.chars()
        .filter_map(|c| match c {
            '.' | '(' | '_' => Some('-'),
            ')' => None,
            c => Some(c.to_ascii_lowercase()),
        })
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

#[derive(Deserialize)]
struct SourceFile {
    source_id: BTreeMap<String, SourceEntry>,
}
#[derive(Deserialize)]
struct SourceEntry {
    institution_id: Vec<String>,
}
#[derive(Deserialize)]
struct ExperimentFile {
    experiment_id: BTreeMap<String, ExperimentEntry>,
}
#[derive(Deserialize)]
struct ExperimentEntry {
    activity_id: Vec<String>,
}
#[derive(Deserialize)]
struct Cmip5File {
    frequencies: Vec<String>,
    realms: Vec<String>,
    products: Vec<String>,
    experiments: Vec<String>,
    experiment_patterns: Vec<String>,
    tables: BTreeMap<String, Cmip5Table>,
    institutes: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    default_institute: BTreeMap<String, DefaultInstitute>,
}
#[derive(Deserialize)]
struct DefaultInstitute {
    institute: String,
    reason: String,
}
#[derive(Deserialize)]
struct Cmip5Table {
    frequency: String,
    realm: Option<String>,
}

/// Keys of the JSON object `top[field]` (the CV files map ids to descriptions).
fn keys(text: &str, field: &str) -> Result<BTreeSet<String>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    match v.get(field) {
        Some(serde_json::Value::Object(m)) => Ok(m.keys().cloned().collect()),
        Some(serde_json::Value::Array(a)) => Ok(a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect()),
        _ => Err(format!("no '{field}' in vocabulary")),
    }
}

fn load_cmip6() -> Result<Cmip6, String> {
    let s: SourceFile = serde_json::from_str(CMIP6_SOURCE).map_err(|e| e.to_string())?;
    let e: ExperimentFile = serde_json::from_str(CMIP6_EXPERIMENT).map_err(|e| e.to_string())?;
    Ok(Cmip6 {
        sources: s
            .source_id
            .into_iter()
            .map(|(k, v)| (k, v.institution_id))
            .collect(),
        experiments: e
            .experiment_id
            .into_iter()
            .map(|(k, v)| (k, v.activity_id))
            .collect(),
        activities: keys(CMIP6_ACTIVITY, "activity_id")?,
        institutions: keys(CMIP6_INSTITUTION, "institution_id")?,
        tables: keys(CMIP6_TABLE, "table_id")?,
        grids: keys(CMIP6_GRID, "grid_label")?,
        sub_experiments: keys(CMIP6_SUB_EXPERIMENT, "sub_experiment_id")?,
        frequencies: keys(CMIP6_FREQUENCY, "frequency")?,
        realms: keys(CMIP6_REALM, "realm")?,
    })
}

fn load_cmip5() -> Result<Cmip5, String> {
    let f: Cmip5File = toml::from_str(CMIP5_DRS).map_err(|e| e.to_string())?;
    let mut model_institutes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (inst, models) in &f.institutes {
        for m in models {
            model_institutes
                .entry(m.clone())
                .or_default()
                .push(inst.clone());
        }
    }
    let mut model_keys = HashMap::new();
    // esgf-drslib's list: official model_id (column 4) and directory spelling (column 5),
    // with the abbreviated institute (column 2, "??" when unknown).
    let mut rd = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(CMIP5_MODELS_CSV.as_bytes());
    for rec in rd.records().skip(2) {
        let rec = rec.map_err(|e| e.to_string())?;
        let (Some(inst), Some(official), Some(dir)) = (rec.get(1), rec.get(3), rec.get(4)) else {
            continue;
        };
        let (inst, official, dir) = (inst.trim(), official.trim(), dir.trim());
        if dir.is_empty() {
            continue;
        }
        model_keys.insert(model_key(official), dir.to_string());
        let entry = model_institutes.entry(dir.to_string()).or_default();
        if entry.is_empty() && inst != "??" && !inst.is_empty() {
            entry.push(inst.replace('/', "-"));
        }
    }
    // The DRS document's spellings win over the older list's.
    for m in model_institutes.keys() {
        model_keys.insert(model_key(m), m.clone());
    }
    let mut tables = BTreeMap::new();
    for (t, v) in f.tables {
        tables.insert(t, (v.frequency, v.realm));
    }
    let mut variable_realms = HashMap::new();
    for line in CMIP5_VARIABLE_REALMS
        .lines()
        .filter(|l| !l.starts_with('#'))
    {
        if let [t, var, r] = line.split('\t').collect::<Vec<_>>()[..] {
            variable_realms.insert((t.to_string(), var.to_string()), r.to_string());
        }
    }
    let experiment_patterns = f
        .experiment_patterns
        .iter()
        .map(|p| Regex::new(p).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    Ok(Cmip5 {
        frequencies: f.frequencies.into_iter().collect(),
        realms: f.realms.into_iter().collect(),
        products: f.products.into_iter().collect(),
        experiments: f.experiments.into_iter().collect(),
        experiment_patterns,
        tables,
        model_institutes,
        model_keys,
        variable_realms,
        default_institute: f
            .default_institute
            .into_iter()
            .map(|(m, d)| (m, (d.institute, d.reason)))
            .collect(),
    })
}

static CMIP6: LazyLock<Result<Cmip6, String>> = LazyLock::new(load_cmip6);
static CMIP5: LazyLock<Result<Cmip5, String>> = LazyLock::new(load_cmip5);

pub(crate) fn cmip6() -> Result<&'static Cmip6, super::outcome::Error> {
    CMIP6
        .as_ref()
        .map_err(|e| super::outcome::Error::Vocabulary(format!("CMIP6: {e}")))
}

pub(crate) fn cmip5() -> Result<&'static Cmip5, super::outcome::Error> {
    CMIP5
        .as_ref()
        .map_err(|e| super::outcome::Error::Vocabulary(format!("CMIP5: {e}")))
}

/// CMIP6 table -> (frequency, realm where the table implies one). From the CMIP6 data
/// request tables (CMOR `approx_interval`/`frequency` and `realm` headers).
pub(crate) fn cmip6_table_info(table: &str) -> (Option<&'static str>, Option<&'static str>) {
    let f = match table {
        "3hr" | "E3hr" | "CF3hr" => "3hr",
        "E3hrPt" => "3hrPt",
        "6hrLev" | "6hrPlev" | "E6hrZ" => "6hr",
        "6hrPlevPt" => "6hrPt",
        "AERhr" | "E1hr" => "1hr",
        "E1hrClimMon" => "1hrCM",
        "AERday" | "CFday" | "Eday" | "EdayZ" | "Oday" | "SIday" | "day" => "day",
        "AERmon" | "AERmonZ" | "Amon" | "CFmon" | "Emon" | "EmonZ" | "ImonAnt" | "ImonGre"
        | "LImon" | "Lmon" | "Omon" | "SImon" => "mon",
        "Oclim" => "monC",
        "Odec" => "dec",
        "Eyr" | "IyrAnt" | "IyrGre" | "Oyr" => "yr",
        "CFsubhr" | "Esubhr" => "subhrPt",
        "Efx" | "IfxAnt" | "IfxGre" | "Ofx" | "fx" => "fx",
        _ => return (None, None),
    };
    let r = match table {
        "Amon" | "CFmon" | "CFday" | "CF3hr" | "CFsubhr" | "6hrLev" | "6hrPlev" | "6hrPlevPt" => {
            Some("atmos")
        }
        "AERday" | "AERhr" | "AERmon" | "AERmonZ" => Some("aerosol"),
        "Oclim" | "Oday" | "Odec" | "Ofx" | "Omon" | "Oyr" => Some("ocean"),
        "SIday" | "SImon" => Some("seaIce"),
        "Lmon" => Some("land"),
        "LImon" | "IfxAnt" | "IfxGre" | "ImonAnt" | "ImonGre" | "IyrAnt" | "IyrGre" => {
            Some("landIce")
        }
        _ => None,
    };
    (Some(f), r)
}
