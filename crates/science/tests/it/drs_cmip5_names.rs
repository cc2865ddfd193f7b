//! CMIP5 names alone (no directory path, no attributes), as ESGF tools hand them over:
//! every variable of every standard CMIP5 MIP table translates, its realm the one the
//! official CMOR tables give (vocab/cmip5/cmip5_variable_realms.tsv, generated from
//! them); models run by several institutes take their documented default; unknown
//! variables and non-standard tables are refused with the reason.

use granary_science::drs::{Config, FixCode, Status, Translator};

const REALMS: &str = include_str!("../../vocab/cmip5/cmip5_variable_realms.tsv");

fn translator() -> Translator {
    Translator::new(Config::default()).expect("translator")
}

#[test]
fn every_standard_table_variable_translates_from_the_name_alone() {
    let t = translator();
    let mut n = 0;
    let mut failed = Vec::new();
    for line in REALMS.lines().filter(|l| !l.starts_with('#')) {
        let [table, var, realm] = line.split('\t').collect::<Vec<_>>()[..] else {
            panic!("bad row {line}");
        };
        // Bounds and formula terms (`a_bnds`, `depth_c`; in `aero` the hybrid
        // coordinate's terms, listed under atmos) are written into other
        // variables' files, never files of their own.
        if var.contains('_')
            || (table == "aero"
                && ["a", "b", "ap", "p0", "ps", "ptop", "ztop", "orog"].contains(&var))
        {
            continue;
        }
        // cfSites/cfOff/Oclim are not per-time-range files in the same way; all tables
        // are still names the DRS allows, so the time range is chosen per frequency.
        let (ens, range) = match table {
            "fx" => ("r0i0p0", None),
            "3hr" | "cf3hr" | "6hrLev" | "6hrPlev" | "cfSites" => {
                ("r1i1p1", Some("200001010000-200012312100"))
            }
            "day" | "cfDay" => ("r1i1p1", Some("20000101-20001231")),
            "Oyr" => ("r1i1p1", Some("2000-2005")),
            _ => ("r1i1p1", Some("200001-200012")),
        };
        for model in ["CanESM2", "HadGEM2-ES"] {
            let name = match range {
                Some(r) => format!("{var}_{table}_{model}_historical_{ens}_{r}.nc"),
                None => format!("{var}_{table}_{model}_historical_{ens}.nc"),
            };
            n += 1;
            let o = t.translate(&name, None);
            if o.status == Status::Rejected {
                failed.push(format!("{name}: {}", o.reason.unwrap_or_default()));
                continue;
            }
            if o.facets["realm"] != realm {
                failed.push(format!("{name}: realm {} not {realm}", o.facets["realm"]));
                continue;
            }
            assert_eq!(o.facets["cmor_table"], table, "{name}");
            let inst = if model == "HadGEM2-ES" {
                "MOHC"
            } else {
                "CCCma"
            };
            assert_eq!(o.facets["institute"], inst, "{name}");
            let codes = o.fix_codes();
            assert!(
                codes.contains(&FixCode::InstituteFromModel),
                "{name}: {codes:?}"
            );
            assert_eq!(
                codes.contains(&FixCode::InstituteDefault),
                model == "HadGEM2-ES",
                "{name}: {codes:?}"
            );
        }
    }
    assert!(n > 2000, "only {n} names");
    assert!(
        failed.is_empty(),
        "{} of {n} rejected:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn real_bare_names_translate_with_their_fixes_named() {
    let t = translator();
    // Names as published (ESGF file lists), with the realm the CMIP5 archive files them under.
    for (name, realm, inst, fixes) in [
        (
            "tos_day_HadGEM2-ES_rcp85_r1i1p1_20051201-20101130.nc",
            "ocean",
            "MOHC",
            vec![
                FixCode::InstituteDefault,
                FixCode::RealmFromTable,
                FixCode::InstituteFromModel,
            ],
        ),
        (
            "tas_day_CMCC-CESM_rcp85_r1i1p1_20960101-21001231.nc",
            "atmos",
            "CMCC",
            vec![FixCode::RealmFromTable, FixCode::InstituteFromModel],
        ),
        (
            "tos_day_MPI-ESM-MR_historical_r1i1p1_18700101-18701231.nc",
            "ocean",
            "MPI-M",
            vec![FixCode::RealmFromTable, FixCode::InstituteFromModel],
        ),
        (
            "mrsos_day_HadGEM2-ES_rcp85_r1i1p1_20051201-20151130.nc",
            "land",
            "MOHC",
            vec![
                FixCode::InstituteDefault,
                FixCode::RealmFromTable,
                FixCode::InstituteFromModel,
            ],
        ),
        (
            "tas_Amon_GFDL-ESM2M_piControl_r1i1p1_000101-000512.nc",
            "atmos",
            "NOAA-GFDL",
            vec![FixCode::InstituteFromModel],
        ),
    ] {
        let o = t.translate(name, None);
        assert_ne!(o.status, Status::Rejected, "{name}: {:?}", o.reason);
        assert_eq!(o.facets["realm"], realm, "{name}");
        assert_eq!(o.facets["institute"], inst, "{name}");
        assert_eq!(o.fix_codes(), fixes, "{name}");
    }
    // The default institute's fix names the other institutes and the reason.
    let o = t.translate(
        "tas_Amon_HadGEM2-ES_historical_r1i1p1_185912-200511.nc",
        None,
    );
    let d = &o
        .fixes
        .iter()
        .find(|f| f.code == FixCode::InstituteDefault)
        .expect("fix")
        .detail;
    assert!(
        d.contains("INPE, MOHC") && d.contains("home institute"),
        "{d}"
    );
}

#[test]
fn non_standard_tables_and_unknown_variables_are_refused_with_the_reason() {
    let t = translator();
    let o = t.translate(
        "tos_OmonOnRho_CanESM2_historical_r1i1p1_185001-200512.nc",
        None,
    );
    assert_eq!(o.status, Status::Rejected);
    assert!(
        o.reason.as_deref().unwrap_or("").contains("OmonOnRho"),
        "{:?}",
        o.reason
    );
    let o = t.translate("tas_Omon_CanESM2_historical_r1i1p1_185001-200512.nc", None);
    assert_eq!(o.status, Status::Rejected);
    let r = o.reason.unwrap_or_default();
    assert!(
        r.contains("variable 'tas' is not in CMIP5 MIP table 'Omon'"),
        "{r}"
    );
}
