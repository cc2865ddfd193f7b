//! CMIP5: `<activity>/<product>/<institute>/<model>/<experiment>/<frequency>/<realm>/
//! <MIP table>/<ensemble>/<version>/<variable>/` and
//! `<variable>_<MIP table>_<model>_<experiment>_<ensemble>[_<temporal subset>][_<geographical info>].nc`
//! (CMIP5 DRS document), with the deviations found in real archives.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::common::{self, token, VERSION};
use super::outcome::{DrsPath, Error, FixCode, Mismatch, Parsed};
use super::vocab::{self, model_key};

static ENSEMBLE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^r[0-9]+i[0-9]+p[0-9]+$").expect("static regex"));
static SHORT_R: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^r([0-9]+)$").expect("static regex"));

fn ensemble(e: &str) -> Result<(String, Option<String>), String> {
    if ENSEMBLE.is_match(e) {
        Ok((e.to_string(), None))
    } else if let Some(c) = SHORT_R.captures(e) {
        let full = format!("r{}i1p1", &c[1]);
        Ok((
            full.clone(),
            Some(format!("ensemble '{e}' read as '{full}'")),
        ))
    } else {
        Err(format!(
            "ensemble '{}' is not r<N>i<N>p<N>",
            e.escape_default()
        ))
    }
}

/// The directory spelling of a model, and whether punctuation was changed.
fn model(m: &str) -> Result<(String, bool), String> {
    let v = vocab::cmip5().map_err(|e| e.to_string())?;
    if v.model_institutes.contains_key(m) {
        return Ok((m.to_string(), false));
    }
    match v.canonical_model(m) {
        Some(c) => Ok((c.to_string(), true)),
        None => Err(format!(
            "model '{}' is not in the CMIP5 vocabulary",
            m.escape_default()
        )),
    }
}

fn known_model(m: &str) -> bool {
    vocab::cmip5().is_ok_and(|v| v.canonical_model(m).is_some())
}

pub(crate) fn parse(
    dirs: &[&str],
    file: &str,
    attrs: Option<&BTreeMap<String, String>>,
) -> Result<Parsed, String> {
    let v = vocab::cmip5().map_err(|e| e.to_string())?;
    let mut p = Parsed {
        project: "CMIP5".into(),
        facets: BTreeMap::new(),
        file: String::new(),
        version: None,
        time_range: None,
        fixes: Vec::new(),
        name_facets: Vec::new(),
    };
    let stem = file.strip_suffix(".nc").unwrap_or(file);
    let f: Vec<&str> = stem.split('_').collect();
    let gridspec = f.first() == Some(&"gridspec");
    let (variable, table, mut fmodel, mut experiment, ens, rest, grid_realm) = if gridspec {
        if f.len() != 6 || f[2] != "fx" {
            return Err(format!(
                "gridspec file name has {} fields; CMIP5 gridspec files are gridspec_<realm>_fx_<model>_<experiment>_<ensemble>.nc",
                f.len()
            ));
        }
        p.fix(
            FixCode::Gridspec,
            format!("gridspec file for realm '{}'", f[1]),
        );
        ("gridspec", "fx", f[3], f[4], f[5], &f[6..], Some(f[1]))
    } else {
        if f.len() < 5 {
            return Err(format!(
                "file name has {} fields, CMIP5 needs 5 to 7",
                f.len()
            ));
        }
        (f[0], f[1], f[2], f[3], f[4], &f[5..], None)
    };
    token("variable", variable)?;
    if !v.tables.contains_key(table) {
        return Err(format!(
            "MIP table '{}' is not in the CMIP5 vocabulary",
            table.escape_default()
        ));
    }
    if !known_model(fmodel)
        && !v.is_experiment(experiment)
        && v.is_experiment(fmodel)
        && known_model(experiment)
    {
        p.fix(
            FixCode::SwappedModelExperiment,
            format!("file name had experiment '{fmodel}' before model '{experiment}'"),
        );
        std::mem::swap(&mut fmodel, &mut experiment);
    }
    if !v.is_experiment(experiment) {
        return Err(format!(
            "experiment '{}' is not in the CMIP5 vocabulary",
            experiment.escape_default()
        ));
    }
    let (model_name, punct) = model(fmodel)?;
    if punct {
        p.fix(
            FixCode::ModelPunctuation,
            format!("model '{fmodel}' written as '{model_name}'"),
        );
    }
    let (ensemble_id, short) = ensemble(ens)?;
    let file_short = short.is_some();
    if let Some(d) = short {
        p.fix(FixCode::ShortEnsemble, d);
    }
    let (table_freq, table_realm) = v.tables.get(table).cloned().unwrap_or_default();
    let product;
    let institute;
    let frequency;
    let realm;
    if let Some(k) = dirs.iter().rposition(|d| d.eq_ignore_ascii_case("cmip5")) {
        if dirs[k] != "cmip5" {
            p.fix(
                FixCode::ActivityCase,
                format!("activity directory '{}' read as 'cmip5'", dirs[k]),
            );
        }
        let d = &dirs[k + 1..];
        // (product, institute, model, experiment, frequency, realm, table, ensemble, version, variable)
        let (dtable, dens, dver, dvar) = match d.len() {
            10 if VERSION.is_match(d[8]) => (Some(d[6]), d[7], Some(d[8]), d[9]),
            10 if VERSION.is_match(d[9]) => {
                p.fix(FixCode::DirOrder, "directory had the variable before the version");
                (Some(d[6]), d[7], Some(d[9]), d[8])
            }
            9 if VERSION.is_match(d[8]) => {
                p.fix(FixCode::DirNoTable, "older directory order <realm>/<variable>/<ensemble>/<version> without the MIP table");
                (None, d[7], Some(d[8]), d[6])
            }
            8 => {
                p.fix(FixCode::DirNoTable, "older directory order <realm>/<variable>/<ensemble> without the MIP table or version");
                (None, d[7], None, d[6])
            }
            n => {
                return Err(format!(
                    "directory has {n} levels after cmip5, CMIP5 needs 10 (<product>/<institute>/<model>/<experiment>/<frequency>/<realm>/<table>/<ensemble>/<version>/<variable>)"
                ))
            }
        };
        let (mut dmodel, mut dexp) = (d[2], d[3]);
        if !known_model(dmodel) && v.is_experiment(dmodel) && known_model(dexp) {
            if !p
                .fixes
                .iter()
                .any(|x| x.code == FixCode::SwappedModelExperiment)
            {
                p.fix(
                    FixCode::SwappedModelExperiment,
                    format!("directory had experiment '{dmodel}' before model '{dexp}'"),
                );
            }
            std::mem::swap(&mut dmodel, &mut dexp);
        }
        let (dm, dpunct) = model(dmodel)?;
        if dpunct && !punct {
            p.fix(
                FixCode::ModelPunctuation,
                format!("directory model '{dmodel}' written as '{dm}'"),
            );
        }
        let (de, dshort) = ensemble(dens)?;
        if let (Some(x), false) = (dshort, file_short) {
            p.fix(FixCode::ShortEnsemble, format!("directory {x}"));
        }
        let checks = [
            ("model", dm.as_str(), model_name.as_str()),
            ("experiment", dexp, experiment),
            ("ensemble", de.as_str(), ensemble_id.as_str()),
            ("variable", dvar, variable),
            ("cmor_table", dtable.unwrap_or(table), table),
        ];
        for (facet, dv, fv) in checks {
            if dv != fv {
                return Err(format!(
                    "directory says {facet} '{}' but the file name says '{}'",
                    dv.escape_default(),
                    fv.escape_default()
                ));
            }
        }
        if let Some(gr) = grid_realm {
            if gr != d[5] {
                return Err(format!(
                    "directory says realm '{}' but the gridspec file name says '{gr}'",
                    d[5].escape_default()
                ));
            }
        }
        product = d[0].to_string();
        institute = d[1].to_string();
        frequency = d[4].to_string();
        realm = d[5].to_string();
        p.version = dver.map(str::to_string);
        if !v.products.contains(&product) {
            return Err(format!(
                "product '{}' is not in the CMIP5 vocabulary",
                product.escape_default()
            ));
        }
        let insts = v
            .model_institutes
            .get(&model_name)
            .cloned()
            .unwrap_or_default();
        if !insts.contains(&institute) {
            return Err(format!(
                "institute '{}' is not an institute of model '{model_name}' ({})",
                institute.escape_default(),
                insts.join(", ")
            ));
        }
    } else {
        let mut derived = Vec::new();
        let insts = v
            .model_institutes
            .get(&model_name)
            .cloned()
            .unwrap_or_default();
        institute = match insts.as_slice() {
            [one] => one.clone(),
            many => match attrs.and_then(|a| a.get("institute_id")) {
                Some(i) if many.contains(i) => i.clone(),
                _ => {
                    return Err(format!(
                        "model '{model_name}' belongs to several institutes ({}); give the directory path or an institute_id attribute",
                        many.join(", ")
                    ))
                }
            },
        };
        derived.push(format!("institute '{institute}' from model '{model_name}'"));
        frequency = match attrs.and_then(|a| a.get("frequency")) {
            Some(fr) if v.frequencies.contains(fr) => fr.clone(),
            _ => table_freq.clone(),
        };
        realm = match (grid_realm, &table_realm, attrs.and_then(|a| a.get("modeling_realm"))) {
            (Some(r), _, _) => r.to_string(),
            (None, _, Some(r)) if r.split_whitespace().next().is_some_and(|w| v.realms.contains(w)) => {
                r.split_whitespace().next().unwrap_or_default().to_string()
            }
            (None, Some(r), _) => r.clone(),
            _ => {
                return Err(format!(
                    "realm cannot be derived from MIP table '{table}' without the directory path or a modeling_realm attribute"
                ))
            }
        };
        product = match attrs.and_then(|a| a.get("product")) {
            Some(pr) if v.products.contains(pr) => pr.clone(),
            _ => "output".into(),
        };
        derived.push(format!(
            "frequency '{frequency}', realm '{realm}', product '{product}'"
        ));
        p.fix(FixCode::InstituteFromModel, derived.join("; "));
    }
    if !v.frequencies.contains(&frequency) {
        return Err(format!(
            "frequency '{}' is not in the CMIP5 vocabulary",
            frequency.escape_default()
        ));
    }
    if !v.realms.contains(&realm) {
        return Err(format!(
            "realm '{}' is not in the CMIP5 vocabulary",
            realm.escape_default()
        ));
    }
    if frequency == "fx" {
        if ensemble_id != "r0i0p0" {
            p.fix(
                FixCode::FxEnsemble,
                format!(
                    "fx file with ensemble '{ensemble_id}' (kept; fx files normally use r0i0p0)"
                ),
            );
        }
    } else if ensemble_id == "r0i0p0" {
        return Err(format!(
            "ensemble r0i0p0 is only for fx files, not frequency '{frequency}'"
        ));
    }
    let tail = common::parse_tail(rest, &frequency, true)?;
    p.fixes.extend(tail.fixes);
    p.time_range = tail.time_range;
    let fac = &mut p.facets;
    fac.insert("project".into(), "CMIP5".into());
    fac.insert("product".into(), product.clone());
    fac.insert("institute".into(), institute.clone());
    fac.insert("model".into(), model_name.clone());
    fac.insert("experiment".into(), experiment.into());
    fac.insert("time_frequency".into(), frequency.clone());
    fac.insert("realm".into(), realm.clone());
    fac.insert("cmor_table".into(), table.into());
    fac.insert("ensemble".into(), ensemble_id.clone());
    fac.insert("variable".into(), variable.into());
    p.file = if gridspec {
        format!("gridspec_{realm}_fx_{model_name}_{experiment}_{ensemble_id}.nc")
    } else {
        let mut s = format!("{variable}_{table}_{model_name}_{experiment}_{ensemble_id}");
        for x in [p.time_range.as_deref(), tail.geo.as_deref()]
            .into_iter()
            .flatten()
        {
            s.push('_');
            s.push_str(x);
        }
        s.push_str(".nc");
        s
    };
    p.name_facets = vec![
        product,
        institute,
        model_name,
        experiment.into(),
        frequency,
        realm,
        table.into(),
        ensemble_id,
        variable.into(),
    ];
    Ok(p)
}

/// Rebuild from facets (used when attributes are trusted): the canonical path, parsed again.
pub(crate) fn from_facets(
    f: &BTreeMap<String, String>,
    time_range: Option<&str>,
    version: Option<&str>,
) -> Result<Parsed, String> {
    let g = |k: &str| f.get(k).map(String::as_str).unwrap_or("");
    let file = if g("variable") == "gridspec" {
        format!(
            "gridspec_{}_fx_{}_{}_{}.nc",
            g("realm"),
            g("model"),
            g("experiment"),
            g("ensemble")
        )
    } else {
        let mut s = format!(
            "{}_{}_{}_{}_{}",
            g("variable"),
            g("cmor_table"),
            g("model"),
            g("experiment"),
            g("ensemble")
        );
        if let Some(t) = time_range {
            s.push('_');
            s.push_str(t);
        }
        s + ".nc"
    };
    let Some(version) = version else {
        let mut attrs = BTreeMap::new();
        for (a, k) in [
            ("institute_id", "institute"),
            ("modeling_realm", "realm"),
            ("frequency", "time_frequency"),
            ("product", "product"),
        ] {
            attrs.insert(a.to_string(), g(k).to_string());
        }
        return parse(&[], &file, Some(&attrs));
    };
    let mut dirs = vec!["cmip5"];
    for k in [
        "product",
        "institute",
        "model",
        "experiment",
        "time_frequency",
        "realm",
        "cmor_table",
        "ensemble",
    ] {
        dirs.push(g(k));
    }
    dirs.push(version);
    dirs.push(g("variable"));
    parse(&dirs, &file, None)
}

/// `Table Amon (31 January 2011) 53b766a3…` -> `Amon`.
fn table_of(attr: &str) -> &str {
    match attr.strip_prefix("Table ") {
        Some(r) => r.split_whitespace().next().unwrap_or(r),
        None => attr.trim(),
    }
}

/// Attribute cross-check: each mismatch, with the value to use if attributes are trusted.
pub(crate) fn cross_check(p: &Parsed, a: &BTreeMap<String, String>) -> Vec<(Mismatch, String)> {
    let mut out = Vec::new();
    let fac = |k: &str| p.facets.get(k).cloned().unwrap_or_default();
    let mut check = |facet: &str,
                     attribute: &str,
                     same: &dyn Fn(&str, &str) -> bool,
                     repl: &dyn Fn(&str) -> String| {
        if let Some(av) = a.get(attribute) {
            let nv = fac(facet);
            if !same(&nv, av) {
                out.push((
                    Mismatch {
                        facet: facet.into(),
                        attribute: attribute.into(),
                        name_value: nv,
                        attribute_value: av.clone(),
                    },
                    repl(av),
                ));
            }
        }
    };
    let eq = |n: &str, a: &str| n == a;
    let id = |a: &str| a.to_string();
    check(
        "model",
        "model_id",
        &|n, a| {
            model_key(n) == model_key(a)
                || vocab::cmip5().is_ok_and(|v| v.canonical_model(a) == Some(n))
        },
        &|a| {
            vocab::cmip5()
                .ok()
                .and_then(|v| v.canonical_model(a))
                .unwrap_or(a)
                .to_string()
        },
    );
    check("experiment", "experiment_id", &eq, &id);
    check("time_frequency", "frequency", &eq, &id);
    check(
        "realm",
        "modeling_realm",
        &|n, a| a.split_whitespace().any(|w| w == n),
        &|a| a.split_whitespace().next().unwrap_or(a).to_string(),
    );
    check("cmor_table", "table_id", &|n, a| table_of(a) == n, &|a| {
        table_of(a).to_string()
    });
    check("project", "project_id", &eq, &id);
    check(
        "product",
        "product",
        &|n, a| n == a || (a == "output" && n.starts_with("output")),
        &id,
    );
    check("institute", "institute_id", &eq, &id);
    if let (Some(r), Some(i), Some(pv)) = (
        a.get("realization"),
        a.get("initialization_method"),
        a.get("physics_version"),
    ) {
        let rip = format!("r{}i{}p{}", r.trim(), i.trim(), pv.trim());
        let nv = fac("ensemble");
        if rip != nv {
            out.push((
                Mismatch {
                    facet: "ensemble".into(),
                    attribute: "realization/initialization_method/physics_version".into(),
                    name_value: nv,
                    attribute_value: rip.clone(),
                },
                rip,
            ));
        }
    }
    out
}

pub(crate) fn reverse(c: &[String], version: &str) -> Result<DrsPath, Error> {
    if c.len() != 10 {
        return Err(Error::Reverse(format!(
            "a CMIP5 name has 10 components after the root, this one has {}",
            c.len()
        )));
    }
    if !VERSION.is_match(version) {
        return Err(Error::Reverse(format!("version '{version}' is not v<N>")));
    }
    for x in &c[..9] {
        token("name component", x).map_err(Error::Reverse)?;
    }
    let file = &c[9];
    let prefix = if c[8] == "gridspec" {
        format!("gridspec_{}_fx_{}_{}_{}", c[5], c[2], c[3], c[7])
    } else {
        format!("{}_{}_{}_{}_{}", c[8], c[6], c[2], c[3], c[7])
    };
    let rest = file.strip_prefix(&prefix);
    if !file.ends_with(".nc") || !matches!(rest, Some(r) if r == ".nc" || r.starts_with('_')) {
        return Err(Error::Reverse(format!(
            "file name '{file}' does not start with '{prefix}' as the name's facets say"
        )));
    }
    Ok(DrsPath {
        dir: format!("cmip5/{}/{version}/{}/", c[..8].join("/"), c[8]),
        file: file.clone(),
    })
}
