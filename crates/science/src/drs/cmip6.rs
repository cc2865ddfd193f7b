//! CMIP6: `<mip_era>/<activity_id>/<institution_id>/<source_id>/<experiment_id>/<member_id>/
//! <table_id>/<variable_id>/<grid_label>/<version>/` and
//! `<variable_id>_<table_id>_<source_id>_<experiment_id>_<member_id>_<grid_label>[_<time_range>].nc`
//! (WCRP CMIP6_CVs, CMIP6_DRS.json).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::common::{self, token, VERSION};
use super::outcome::{DrsPath, Error, FixCode, Mismatch, Parsed};
use super::vocab::{self, cmip6_table_info};

static MEMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:([a-z0-9]+)-)?(r[0-9]+i[0-9]+p[0-9]+f[0-9]+)$").expect("static regex")
});
static SHORT_R: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:([a-z0-9]+)-)?r([0-9]+)$").expect("static regex"));
static SHORT_RIP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:([a-z0-9]+)-)?(r[0-9]+i[0-9]+p[0-9]+)$").expect("static regex")
});
static DATE_VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^v[0-9]{8}$").expect("static regex"));

/// A CMIP6 member_id: (member_id, sub_experiment_id, variant_label, detail of the
/// short-form fix if one was needed).
type Member = (String, String, String, Option<String>);

fn member(m: &str) -> Result<Member, String> {
    let v = vocab::cmip6().map_err(|e| e.to_string())?;
    let (sub, variant, fix) = if let Some(c) = MEMBER.captures(m) {
        (
            c.get(1).map(|x| x.as_str().to_string()),
            c[2].to_string(),
            None,
        )
    } else if let Some(c) = SHORT_R.captures(m) {
        let full = format!("r{}i1p1f1", &c[2]);
        let fix = format!("member '{m}' read as '{full}'");
        (c.get(1).map(|x| x.as_str().to_string()), full, Some(fix))
    } else if let Some(c) = SHORT_RIP.captures(m) {
        let full = format!("{}f1", &c[2]);
        let fix = format!("member '{m}' read as '{full}'");
        (c.get(1).map(|x| x.as_str().to_string()), full, Some(fix))
    } else {
        return Err(format!(
            "member_id '{}' is not [<sub_experiment_id>-]r<N>i<N>p<N>f<N>",
            m.escape_default()
        ));
    };
    if let Some(s) = &sub {
        if !v.sub_experiments.contains(s) || s == "none" {
            return Err(format!(
                "sub_experiment_id '{s}' (in member_id '{m}') is not in the CMIP6 vocabulary"
            ));
        }
    }
    let member_id = match &sub {
        Some(s) => format!("{s}-{variant}"),
        None => variant.clone(),
    };
    Ok((
        member_id,
        sub.unwrap_or_else(|| "none".into()),
        variant,
        fix,
    ))
}

fn in_vocab(facet: &str, value: &str, known: bool) -> Result<(), String> {
    common::in_vocab("CMIP6", facet, value, known)
}

/// True if the table's frequency and a frequency attribute sample at the same interval
/// and mean the same kind of value: `mon` ~ `monPt` (a table mixes means and point
/// samples). A climatology (`monC`, `1hrCM`) is another product than a time series at
/// its interval: `monC` under `Amon` is a table/frequency clash, reported as a mismatch.
fn same_interval(a: &str, b: &str) -> bool {
    a.trim_end_matches("Pt") == b.trim_end_matches("Pt")
}

pub(crate) fn parse(
    dirs: &[&str],
    file: &str,
    attrs: Option<&BTreeMap<String, String>>,
) -> Result<Parsed, String> {
    let v = vocab::cmip6().map_err(|e| e.to_string())?;
    let mut p = Parsed::new("CMIP6");
    let f = common::fields(file);
    if f.len() < 5 {
        return Err(format!(
            "file name has {} fields, CMIP6 needs 6 or 7",
            f.len()
        ));
    }
    // The DRS directory: from the last "CMIP6" component on.
    let drs_dir: Option<&[&str]> = match dirs.iter().rposition(|d| *d == "CMIP6") {
        Some(k) => {
            let d = &dirs[k + 1..];
            if d.len() != 9 {
                return Err(format!(
                    "directory has {} levels after CMIP6, CMIP6 needs 9 (<activity_id>/…/<grid_label>/<version>)",
                    d.len()
                ));
            }
            Some(d)
        }
        None => None,
    };
    let (variable, table, mut source, mut experiment, member_f) = (f[0], f[1], f[2], f[3], f[4]);
    // Grid label: field 6, or missing.
    let (grid, rest): (String, &[&str]) = match f.get(5) {
        Some(g) if v.grids.contains(*g) => (g.to_string(), &f[6..]),
        Some(g) if !g.chars().next().is_some_and(|c| c.is_ascii_digit()) => {
            return Err(common::not_in_vocab("CMIP6", "grid_label", g))
        }
        _ => {
            if let Some(d) = drs_dir {
                p.fix(
                    FixCode::GridLabelFromPath,
                    format!(
                        "grid label missing from the file name; '{}' from the directory",
                        d[7]
                    ),
                );
                (d[7].to_string(), &f[5..])
            } else if let Some(g) = attrs.and_then(|a| a.get("grid_label")) {
                p.fix(
                    FixCode::GridLabelFromAttributes,
                    format!("grid label missing from the file name; '{g}' from the grid_label attribute"),
                );
                (g.clone(), &f[5..])
            } else {
                return Err(format!(
                    "file name has {} fields, CMIP6 needs 6 or 7: the grid label is missing, and neither a directory path nor a grid_label attribute gives it",
                    f.len()
                ));
            }
        }
    };
    let swapped = |s: &str, e: &str| {
        !v.sources.contains_key(s)
            && !v.experiments.contains_key(e)
            && v.sources.contains_key(e)
            && v.experiments.contains_key(s)
    };
    if swapped(source, experiment) {
        p.fix(
            FixCode::SwappedModelExperiment,
            format!("file name had experiment '{source}' before source '{experiment}'"),
        );
        std::mem::swap(&mut source, &mut experiment);
    }
    let (member_id, sub_experiment, variant, short) = member(member_f)?;
    if let Some(d) = short {
        p.fix(FixCode::ShortEnsemble, d);
    }
    let activity;
    let institution;
    if let Some(d) = drs_dir {
        let (mut ds, mut de) = (d[2], d[3]);
        if swapped(ds, de) {
            p.fix_once(
                FixCode::SwappedModelExperiment,
                format!("directory had experiment '{ds}' before source '{de}'"),
            );
            std::mem::swap(&mut ds, &mut de);
        }
        let (dm, _, _, dir_short) = member(d[4])?;
        if let Some(d) = dir_short {
            // Once: a short member in the file name is the one reported.
            p.fix_once(FixCode::ShortEnsemble, format!("directory {d}"));
        }
        common::agree([
            ("source_id", ds, source),
            ("experiment_id", de, experiment),
            ("member_id", dm.as_str(), member_id.as_str()),
            ("table_id", d[5], table),
            ("variable_id", d[6], variable),
            ("grid_label", d[7], grid.as_str()),
        ])?;
        activity = d[0].to_string();
        institution = d[1].to_string();
        let ver = d[8];
        if DATE_VERSION.is_match(ver) {
        } else if VERSION.is_match(ver) {
            p.fix(
                FixCode::VersionNotDate,
                format!("version '{ver}' is not v<YYYYMMDD>"),
            );
        } else {
            return Err(format!(
                "version '{}' is not v<YYYYMMDD>",
                ver.escape_default()
            ));
        }
        p.version = Some(ver.to_string());
    } else {
        let acts = v
            .experiments
            .get(experiment)
            .ok_or_else(|| common::not_in_vocab("CMIP6", "experiment_id", experiment))?;
        activity = common::one_of(
            acts,
            attrs,
            "activity_id",
            true,
            &format!("experiment_id '{experiment}'"),
            "activities",
        )?;
        let insts = v
            .sources
            .get(source)
            .ok_or_else(|| common::not_in_vocab("CMIP6", "source_id", source))?;
        institution = common::one_of(
            insts,
            attrs,
            "institution_id",
            false,
            &format!("source_id '{source}'"),
            "institutions",
        )?;
    }
    token("variable_id", variable)?;
    if variable.contains(['.', '(', ')', '+']) {
        return Err(format!("variable_id '{variable}' has punctuation"));
    }
    in_vocab("activity_id", &activity, v.activities.contains(&activity))?;
    in_vocab(
        "institution_id",
        &institution,
        v.institutions.contains(&institution),
    )?;
    in_vocab("source_id", source, v.sources.contains_key(source))?;
    in_vocab(
        "experiment_id",
        experiment,
        v.experiments.contains_key(experiment),
    )?;
    in_vocab("table_id", table, v.tables.contains(table))?;
    in_vocab("grid_label", &grid, v.grids.contains(&grid))?;
    let (tf, realm) = cmip6_table_info(table);
    let mut frequency = tf.unwrap_or("").to_string();
    if let Some(af) = attrs.and_then(|a| a.get("frequency")) {
        if v.frequencies.contains(af) && same_interval(&frequency, af) {
            frequency = af.clone();
        }
    }
    common::tail_into(&mut p, rest, &frequency, false)?;
    let fac = &mut p.facets;
    fac.insert("mip_era".into(), "CMIP6".into());
    fac.insert("activity_id".into(), activity.clone());
    fac.insert("institution_id".into(), institution.clone());
    fac.insert("source_id".into(), source.into());
    fac.insert("experiment_id".into(), experiment.into());
    fac.insert("member_id".into(), member_id.clone());
    fac.insert("variant_label".into(), variant);
    fac.insert("sub_experiment_id".into(), sub_experiment);
    fac.insert("table_id".into(), table.into());
    fac.insert("variable_id".into(), variable.into());
    fac.insert("grid_label".into(), grid.clone());
    if !frequency.is_empty() {
        fac.insert("frequency".into(), frequency);
    }
    // The realm: the table's when it has one; otherwise (`day`, `3hr`, `Efx`, … hold
    // variables of several realms) the file's `realm` attribute, its first (primary)
    // realm, when that is in the vocabulary.
    let realm = realm.map(str::to_string).or_else(|| {
        attrs
            .and_then(|a| a.get("realm"))
            .and_then(|r| r.split_whitespace().next())
            .filter(|r| v.realms.contains(*r))
            .map(str::to_string)
    });
    if let Some(r) = realm {
        fac.insert("realm".into(), r);
    }
    p.file = file_name(
        variable,
        table,
        source,
        experiment,
        &member_id,
        &grid,
        p.time_range.as_deref(),
    );
    p.name_facets = vec![
        activity,
        institution,
        source.into(),
        experiment.into(),
        member_id,
        table.into(),
        variable.into(),
        grid,
    ];
    Ok(p)
}

fn file_name(
    variable: &str,
    table: &str,
    source: &str,
    experiment: &str,
    member: &str,
    grid: &str,
    time_range: Option<&str>,
) -> String {
    common::file_name(
        &[variable, table, source, experiment, member, grid],
        &[time_range],
    )
}

/// Rebuild from facets (used when attributes are trusted): the canonical path, parsed again.
pub(crate) fn from_facets(
    f: &BTreeMap<String, String>,
    time_range: Option<&str>,
    version: Option<&str>,
) -> Result<Parsed, String> {
    let g = |k: &str| f.get(k).map(String::as_str).unwrap_or("");
    let file = file_name(
        g("variable_id"),
        g("table_id"),
        g("source_id"),
        g("experiment_id"),
        g("member_id"),
        g("grid_label"),
        time_range,
    );
    let Some(version) = version else {
        return parse(&[], &file, Some(f));
    };
    let keys = [
        "activity_id",
        "institution_id",
        "source_id",
        "experiment_id",
        "member_id",
        "table_id",
        "variable_id",
        "grid_label",
    ];
    parse(
        &common::facet_dirs("CMIP6", f, &keys, &[version]),
        &file,
        Some(f),
    )
}

/// A file whose name (or path) does not translate, named again from its global
/// attributes alone (`trust = attributes`): CMIP6 files carry every DRS facet as an
/// attribute. The time range is the name's last field when it is one; the version the
/// last `v<digits>` directory. `None` when the attributes are not CMIP6's.
pub(crate) fn from_attributes(
    dirs: &[&str],
    file: &str,
    a: &BTreeMap<String, String>,
) -> Option<Result<Parsed, String>> {
    if a.get("mip_era").map(String::as_str) != Some("CMIP6") {
        return None;
    }
    let mut f = BTreeMap::new();
    for k in [
        "variable_id",
        "table_id",
        "source_id",
        "experiment_id",
        "grid_label",
        "activity_id",
        "institution_id",
    ] {
        let Some(v) = a.get(k) else {
            return Some(Err(format!("the attributes lack {k}")));
        };
        // `activity_id = "RFMIP AerChemMIP"`: the first names the directory, as ESGF does.
        let first = v.split_whitespace().next().unwrap_or_default();
        f.insert(k.to_string(), first.to_string());
    }
    let member = match (a.get("member_id"), a.get("variant_label")) {
        (Some(m), _) => m.clone(),
        (None, Some(vl)) => match a.get("sub_experiment_id") {
            Some(s) if s != "none" => format!("{s}-{vl}"),
            _ => vl.clone(),
        },
        (None, None) => return Some(Err("the attributes lack variant_label".into())),
    };
    f.insert("member_id".into(), member);
    // Not name parts, but read from the attributes by the parse that follows.
    for k in ["realm", "frequency"] {
        if let Some(v) = a.get(k) {
            f.insert(k.to_string(), v.clone());
        }
    }
    let fields = common::fields(file);
    let time_range = fields
        .last()
        .filter(|t| t.bytes().next().is_some_and(|b| b.is_ascii_digit()))
        .map(|t| t.to_string());
    let version = dirs
        .iter()
        .rev()
        .find(|d| common::VERSION.is_match(d))
        .copied();
    Some(from_facets(&f, time_range.as_deref(), version))
}

/// Attribute cross-check: each mismatch, with the value to use if attributes are trusted.
pub(crate) fn cross_check(p: &Parsed, a: &BTreeMap<String, String>) -> Vec<(Mismatch, String)> {
    let mut out = Vec::new();
    let fac = |k: &str| p.facets.get(k).cloned().unwrap_or_default();
    let mut push = |facet: &str, attribute: &str, nv: String, av: &String, repl: String| {
        out.push((Mismatch::new(facet, attribute, nv, av), repl))
    };
    for k in [
        "variable_id",
        "table_id",
        "source_id",
        "experiment_id",
        "grid_label",
        "institution_id",
    ] {
        if let Some(av) = a.get(k) {
            if *av != fac(k) {
                push(k, k, fac(k), av, av.clone());
            }
        }
    }
    if let Some(av) = a.get("activity_id") {
        let nv = fac("activity_id");
        if !av.split_whitespace().any(|w| w == nv) {
            let first = av.split_whitespace().next().unwrap_or("").to_string();
            push("activity_id", "activity_id", nv, av, first);
        }
    }
    let member_attr = a.get("member_id").cloned().or_else(|| {
        a.get("variant_label")
            .map(|vl| match a.get("sub_experiment_id") {
                Some(s) if s != "none" => format!("{s}-{vl}"),
                _ => vl.clone(),
            })
    });
    if let Some(av) = member_attr {
        if av != fac("member_id") {
            let attribute = if a.contains_key("member_id") {
                "member_id"
            } else {
                "variant_label"
            };
            push("member_id", attribute, fac("member_id"), &av, av.clone());
        }
    }
    if let Some(av) = a.get("realm") {
        let nv = fac("realm");
        if !nv.is_empty() && !av.split_whitespace().any(|w| w == nv) {
            let first = av.split_whitespace().next().unwrap_or("").to_string();
            push("realm", "realm", nv, av, first);
        }
    }
    if let Some(av) = a.get("frequency") {
        let nv = fac("frequency");
        if *av != nv {
            // The name's frequency is its table's: say which.
            let nv = format!("{nv} (table {})", fac("table_id"));
            push("frequency", "frequency", nv, av, av.clone());
        }
    }
    out
}

pub(crate) fn reverse(c: &[String], version: &str) -> Result<DrsPath, Error> {
    let file = common::reverse_parts("CMIP6", 9, c, version)?;
    let prefix = format!("{}_{}_{}_{}_{}_{}", c[6], c[5], c[2], c[3], c[4], c[7]);
    common::starts_as_named(file, &prefix)?;
    let dir = format!("CMIP6/{}/{version}/", c[..8].join("/"));
    Ok(DrsPath {
        dir,
        file: file.clone(),
    })
}
