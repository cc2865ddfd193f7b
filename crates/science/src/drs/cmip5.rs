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
        None => Err(common::not_in_vocab("CMIP5", "model", m)),
    }
}

fn in_vocab(facet: &str, value: &str, known: bool) -> Result<(), String> {
    common::in_vocab("CMIP5", facet, value, known)
}

/// `gridspec_<realm>_fx_<model>_<experiment>_<ensemble>.nc`.
fn gridspec_name(realm: &str, model: &str, experiment: &str, ensemble: &str) -> String {
    common::file_name(&["gridspec", realm, "fx", model, experiment, ensemble], &[])
}

fn known_model(m: &str) -> bool {
    vocab::cmip5().is_ok_and(|v| v.canonical_model(m).is_some())
}

/// Rules files' `[cmip5.default_institute]`: model -> (institute, where it was set).
pub(crate) type InstituteOverrides = BTreeMap<String, (String, String)>;

pub(crate) fn parse(
    dirs: &[&str],
    file: &str,
    attrs: Option<&BTreeMap<String, String>>,
    overrides: &InstituteOverrides,
) -> Result<Parsed, String> {
    let v = vocab::cmip5().map_err(|e| e.to_string())?;
    let mut p = Parsed::new("CMIP5");
    let f = common::fields(file);
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
    in_vocab("MIP table", table, v.tables.contains_key(table))?;
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
    in_vocab("experiment", experiment, v.is_experiment(experiment))?;
    let (model_name, punct) = model(fmodel)?;
    if punct {
        p.fix(
            FixCode::ModelPunctuation,
            format!("model '{fmodel}' written as '{model_name}'"),
        );
    }
    let (ensemble_id, short) = ensemble(ens)?;
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
            p.fix_once(
                FixCode::SwappedModelExperiment,
                format!("directory had experiment '{dmodel}' before model '{dexp}'"),
            );
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
        if let Some(x) = dshort {
            // Once: a short ensemble in the file name is the one reported.
            p.fix_once(FixCode::ShortEnsemble, format!("directory {x}"));
        }
        common::agree([
            ("model", dm.as_str(), model_name.as_str()),
            ("experiment", dexp, experiment),
            ("ensemble", de.as_str(), ensemble_id.as_str()),
            ("variable", dvar, variable),
            ("cmor_table", dtable.unwrap_or(table), table),
        ])?;
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
        in_vocab("product", &product, v.products.contains(&product))?;
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
        institute = match common::one_of(
            &insts,
            attrs,
            "institute_id",
            false,
            &format!("model '{model_name}'"),
            "institutes",
        ) {
            Ok(i) => i,
            Err(e) => {
                let builtin = v.default_institute.get(&model_name);
                let (d, why) = match (overrides.get(&model_name), builtin) {
                    (Some((d, src)), Some((b, _))) if d != b => {
                        (d, format!("set by {src} (the built-in default is '{b}')"))
                    }
                    (Some((d, src)), _) => (d, format!("set by {src}")),
                    (None, Some((d, why))) => (d, why.clone()),
                    (None, None) => return Err(e),
                };
                p.fix(
                    FixCode::InstituteDefault,
                    format!(
                        "model '{model_name}' is run by {}; filed under '{d}': {why}",
                        insts.join(", ")
                    ),
                );
                d.clone()
            }
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
            (None, None, _) if v.variable_realms.contains_key(&(table.to_string(), variable.to_string())) => {
                let r = v.variable_realms[&(table.to_string(), variable.to_string())].clone();
                p.fix(
                    FixCode::RealmFromTable,
                    format!("realm '{r}' of variable '{variable}' in CMIP5 MIP table '{table}'"),
                );
                r
            }
            _ => {
                return Err(format!(
                    "realm cannot be derived: variable '{}' is not in CMIP5 MIP table '{table}' (tables of several realms give it per variable), and neither the directory path nor a modeling_realm attribute gives it", variable.escape_default()
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
    in_vocab("frequency", &frequency, v.frequencies.contains(&frequency))?;
    in_vocab("realm", &realm, v.realms.contains(&realm))?;
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
    let geo = common::tail_into(&mut p, rest, &frequency, true)?;
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
        gridspec_name(&realm, &model_name, experiment, &ensemble_id)
    } else {
        common::file_name(
            &[variable, table, &model_name, experiment, &ensemble_id],
            &[p.time_range.as_deref(), geo.as_deref()],
        )
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
    overrides: &InstituteOverrides,
) -> Result<Parsed, String> {
    let g = |k: &str| f.get(k).map(String::as_str).unwrap_or("");
    let file = if g("variable") == "gridspec" {
        gridspec_name(g("realm"), g("model"), g("experiment"), g("ensemble"))
    } else {
        let fields = ["variable", "cmor_table", "model", "experiment", "ensemble"].map(g);
        common::file_name(&fields, &[time_range])
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
        return parse(&[], &file, Some(&attrs), overrides);
    };
    let keys = [
        "product",
        "institute",
        "model",
        "experiment",
        "time_frequency",
        "realm",
        "cmor_table",
        "ensemble",
    ];
    parse(
        &common::facet_dirs("cmip5", f, &keys, &[version, g("variable")]),
        &file,
        None,
        overrides,
    )
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
                out.push((Mismatch::new(facet, attribute, nv, av), repl(av)));
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
            let attribute = "realization/initialization_method/physics_version";
            out.push((Mismatch::new("ensemble", attribute, nv, &rip), rip));
        }
    }
    out
}

pub(crate) fn reverse(c: &[String], version: &str) -> Result<DrsPath, Error> {
    let file = common::reverse_parts("CMIP5", 10, c, version)?;
    let prefix = if c[8] == "gridspec" {
        format!("gridspec_{}_fx_{}_{}_{}", c[5], c[2], c[3], c[7])
    } else {
        format!("{}_{}_{}_{}_{}", c[8], c[6], c[2], c[3], c[7])
    };
    common::starts_as_named(file, &prefix)?;
    Ok(DrsPath {
        dir: format!("cmip5/{}/{version}/{}/", c[..8].join("/"), c[8]),
        file: file.clone(),
    })
}
