//! Real CMIP5 file-name lists (tests/data/cmip5-names/, sources and licence in its
//! README), translated from the name alone — no directory, no attributes — with the
//! default translator, as ESGF tools hand bare names over:
//!
//! * at least 99% of the names in standard CMIP5 MIP tables translate, per list and
//!   overall; a standard-table name is refused only when the official CMOR table lacks
//!   its variable (the realm cannot be derived then), and the reason says so;
//! * every accepted name lists its fixes (each with a detail): the institute, frequency
//!   and realm derived from the model and MIP table (`InstituteFromModel`), the realm per
//!   variable where the table holds several realms (`RealmFromTable`, equal to the CMOR
//!   tables' realm), the documented default institute of a model run by several
//!   (`InstituteDefault`: HadGEM2-ES -> MOHC), and the name reverses to itself;
//! * names of non-standard tables (NorESM1-M's own `OmonOnRho`) are refused naming the
//!   table.

use std::collections::{BTreeMap, BTreeSet};

use granary_science::drs::{Config, FixCode, Status, Translator};

const LISTS: [(&str, &str); 4] = [
    (
        "esgf-drslib-mohc_delivery",
        include_str!("data/cmip5-names/esgf-drslib-mohc_delivery.txt"),
    ),
    (
        "esgf-drslib-ncc_rcp45-part",
        include_str!("data/cmip5-names/esgf-drslib-ncc_rcp45-part.txt"),
    ),
    (
        "esgf-drslib-esmControl",
        include_str!("data/cmip5-names/esgf-drslib-esmControl.txt"),
    ),
    (
        "esgf-drslib-gridspec",
        include_str!("data/cmip5-names/esgf-drslib-gridspec.txt"),
    ),
];

/// (table, variable) -> realm, from the official CMOR tables.
fn cmor_realms() -> BTreeMap<(String, String), String> {
    include_str!("../vocab/cmip5/cmip5_variable_realms.tsv")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| match l.split('\t').collect::<Vec<_>>()[..] {
            [t, v, r] => Some(((t.to_string(), v.to_string()), r.to_string())),
            _ => None,
        })
        .collect()
}

/// (variable, MIP table, model) as the name spells them.
fn fields(name: &str) -> (&str, &str, &str) {
    let f: Vec<&str> = name.trim_end_matches(".nc").split('_').collect();
    if f[0] == "gridspec" {
        ("gridspec", f[2], f[3])
    } else {
        (f[0], f[1], f[2])
    }
}

#[derive(Default)]
struct Tally {
    standard: usize,
    translated: usize,
    non_standard: usize,
    failures: Vec<String>,
}

#[test]
fn real_cmip5_names_translate_from_the_name_alone() {
    let t = Translator::new(Config::default()).expect("translator");
    let realms = cmor_realms();
    let tables: BTreeSet<&str> = realms.keys().map(|(t, _)| t.as_str()).collect();
    let mut total = Tally::default();
    let mut report = Vec::new();
    let mut seen = BTreeSet::new();
    for (list, text) in LISTS {
        let mut tally = Tally::default();
        for name in text.lines().filter(|l| !l.trim().is_empty()) {
            assert!(seen.insert(name), "{name} listed twice");
            let (var, table, model) = fields(name);
            let o = t.translate(name, None);
            let reason = o.reason.clone().unwrap_or_default();
            if !tables.contains(table) {
                tally.non_standard += 1;
                assert_eq!(o.status, Status::Rejected, "{name}");
                assert!(
                    reason.contains(&format!("MIP table '{table}'")),
                    "{name}: {reason}"
                );
                continue;
            }
            tally.standard += 1;
            if o.status == Status::Rejected {
                // Refused only where the official table lacks the variable.
                assert!(
                    !realms.contains_key(&(table.to_string(), var.to_string())),
                    "{name} refused although CMIP5 table {table} has {var}: {reason}"
                );
                assert!(
                    reason.contains(&format!(
                        "variable '{var}' is not in CMIP5 MIP table '{table}'"
                    )),
                    "{name}: {reason}"
                );
                tally.failures.push(format!("{name}: {reason}"));
                continue;
            }
            tally.translated += 1;
            assert_eq!(o.status, Status::Fixed, "{name}");
            assert!(
                o.fixes.iter().all(|f| !f.detail.is_empty()),
                "{name}: {:?}",
                o.fixes
            );
            let codes = o.fix_codes();
            assert!(codes.contains(&FixCode::InstituteFromModel), "{name}");
            assert_eq!(o.facets["cmor_table"], table, "{name}");
            assert_eq!(o.facets["model"], model, "{name}");
            if codes.contains(&FixCode::RealmFromTable) {
                assert_eq!(
                    Some(&o.facets["realm"]),
                    realms.get(&(table.to_string(), var.to_string())),
                    "{name}"
                );
            }
            assert_eq!(
                codes.contains(&FixCode::InstituteDefault),
                model == "HadGEM2-ES",
                "{name}: {codes:?}"
            );
            if model == "HadGEM2-ES" {
                assert_eq!(o.facets["institute"], "MOHC", "{name}");
            }
            let back = t.reverse(&o.name, "v20120101").expect("reverse");
            assert_eq!(back.file, name);
        }
        let rate = tally.translated as f64 / tally.standard as f64;
        report.push(format!(
            "{list}: {}/{} standard-table names translated ({:.2}%), {} of non-standard tables refused",
            tally.translated,
            tally.standard,
            100.0 * rate,
            tally.non_standard
        ));
        assert!(
            rate >= 0.99,
            "{list}: {}/{} translated:\n{}",
            tally.translated,
            tally.standard,
            tally.failures.join("\n")
        );
        total.standard += tally.standard;
        total.translated += tally.translated;
        total.non_standard += tally.non_standard;
        total.failures.extend(tally.failures);
    }
    eprintln!(
        "{}\nremaining refusals:\n{}",
        report.join("\n"),
        total.failures.join("\n")
    );
    assert!(total.standard >= 1000, "only {} names", total.standard);
    assert!(total.non_standard > 0, "no non-standard table in the lists");
    assert!(
        total.translated as f64 >= 0.99 * total.standard as f64,
        "{}/{}",
        total.translated,
        total.standard
    );
}
