//! Deviant real-world patterns, each with its expected outcome.

use std::collections::BTreeMap;

use granary_science::drs::{Config, FixCode, FixCode::*, Status, Translator};

struct Row {
    input: String,
    attrs: &'static [(&'static str, &'static str)],
    status: Status,
    fixes: &'static [FixCode],
    /// Substring of the reason (rejections) or of the name URI (accepted).
    expect: &'static str,
}

fn row(input: &str, status: Status, fixes: &'static [FixCode], expect: &'static str) -> Row {
    Row {
        input: input.to_string(),
        attrs: &[],
        status,
        fixes,
        expect,
    }
}

const C6: &str = "CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn/v20190429/";
const C5: &str = "cmip5/output1/MOHC/HadGEM2-ES/historical/mon/atmos/Amon/r1i1p1/v20120101/tas/";

fn rows() -> Vec<Row> {
    use Status::*;
    let long = format!(
        "{}tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc",
        "x/".repeat(2100)
    );
    let long_comp = format!(
        "{}_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc",
        "t".repeat(300)
    );
    vec![
        // Conforming baselines.
        row(&format!("{C6}tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc"), Translated, &[], "/cmip6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn/tas_Amon"),
        row("tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc", Translated, &[], "/cmip6/CMIP/CCCma/"),
        row(&format!("{C5}tas_Amon_HadGEM2-ES_historical_r1i1p1_185912-200511.nc"), Translated, &[], "/cmip5/output1/MOHC/HadGEM2-ES/historical/mon/atmos/Amon/r1i1p1/tas/"),
        row("cmip5/output1/MOHC/HadGEM2-ES/historical/fx/atmos/fx/r0i0p0/v20110101/orog/orog_fx_HadGEM2-ES_historical_r0i0p0.nc", Translated, &[], "/fx/atmos/fx/r0i0p0/orog/"),
        // Time ranges.
        row(&format!("{C6}tas_Amon_CanESM5_historical_r1i1p1f1_gn_1850-2014.nc"), Fixed, &[TimeRangeYearOnly], "gn_185001-201412.nc"),
        row("CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/day/tas/gn/v20190429/tas_day_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc", Fixed, &[TimeRangeMonthOnly], "gn_185001-201412.nc"),
        row("CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/day/tas/gn/v20190429/tas_day_CanESM5_historical_r1i1p1f1_gn_1850-2014.nc", Fixed, &[TimeRangeYearOnly], "gn_1850-2014.nc"),
        row(&format!("{C5}tas_Amon_HadGEM2-ES_historical_r1i1p1_1859-2005.nc"), Fixed, &[TimeRangeYearOnly], "r1i1p1_185901-200512.nc"),
        row(&format!("{C6}tas_Amon_CanESM5_historical_r1i1p1f1_gn_201412-185001.nc"), Rejected, &[], "starts after it ends"),
        row(&format!("{C6}tas_Amon_CanESM5_historical_r1i1p1f1_gn_18500101-20141231.nc"), Rejected, &[], "finer than the frequency 'mon'"),
        row(&format!("{C6}tas_Amon_CanESM5_historical_r1i1p1f1_gn_185013-201412.nc"), Rejected, &[], "month 13"),
        // Climatology suffixes.
        row(&format!("{C5}tas_Amon_HadGEM2-ES_historical_r1i1p1_198001-200512-clim.nc"), Fixed, &[ClimSuffix], "200512-clim.nc"),
        row(&format!("{C5}tas_Amon_HadGEM2-ES_historical_r1i1p1_198001-200512_clim.nc"), Fixed, &[ClimSuffix], "200512-clim.nc"),
        // Extra suffixes.
        row(&format!("{C6}tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412_v2.nc"), Fixed, &[ExtraSuffix], "gn_185001-201412.nc"),
        row(&format!("{C6}tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412_merged_regrid.nc"), Fixed, &[ExtraSuffix, ExtraSuffix], "gn_185001-201412.nc"),
        // Grid label missing.
        row(&format!("{C6}tas_Amon_CanESM5_historical_r1i1p1f1_185001-201412.nc"), Fixed, &[GridLabelFromPath], "gn_185001-201412.nc"),
        Row { input: "tas_Amon_CanESM5_historical_r1i1p1f1_185001-201412.nc".into(), attrs: &[("grid_label", "gn")], status: Fixed, fixes: &[GridLabelFromAttributes], expect: "/gn/tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc" },
        row("tas_Amon_CanESM5_historical_r1i1p1f1_185001-201412.nc", Rejected, &[], "file name has 6 fields, CMIP6 needs 6 or 7: the grid label is missing"),
        // Short ensembles.
        row("CMIP6/CMIP/CCCma/CanESM5/historical/r1/Amon/tas/gn/v20190429/tas_Amon_CanESM5_historical_r1_gn_185001-201412.nc", Fixed, &[ShortEnsemble], "/r1i1p1f1/Amon/"),
        row("tas_Amon_CanESM5_historical_r2i1p1_gn_185001-201412.nc", Fixed, &[ShortEnsemble], "/r2i1p1f1/"),
        row("cmip5/output1/MOHC/HadGEM2-ES/historical/mon/atmos/Amon/r3/v20120101/tas/tas_Amon_HadGEM2-ES_historical_r3_185912-200511.nc", Fixed, &[ShortEnsemble], "/r3i1p1/tas/tas_Amon_HadGEM2-ES_historical_r3i1p1_185912"),
        // Swapped model and experiment.
        row("tas_Amon_historical_CanESM5_r1i1p1f1_gn_185001-201412.nc", Fixed, &[SwappedModelExperiment], "/CanESM5/historical/"),
        row(&format!("{C5}tas_Amon_historical_HadGEM2-ES_r1i1p1_185912-200511.nc"), Fixed, &[SwappedModelExperiment], "tas_Amon_HadGEM2-ES_historical_r1i1p1"),
        // CMIP5 specifics.
        row("cmip5/output1/MOHC/HadGEM2-ES/historical/fx/ocean/fx/r0i0p0/v20110101/gridspec/gridspec_ocean_fx_HadGEM2-ES_historical_r0i0p0.nc", Fixed, &[Gridspec], "/fx/ocean/fx/r0i0p0/gridspec/gridspec_ocean_fx_"),
        // A model run by several institutes: its documented default (vocab/cmip5/cmip5_drs.toml).
        row("tas_Amon_HadGEM2-ES_historical_r1i1p1_185912-200511.nc", Fixed, &[InstituteDefault, InstituteFromModel], "/cmip5/output/MOHC/HadGEM2-ES/historical/mon/atmos/Amon/r1i1p1/tas/"),
        Row { input: "tas_Amon_HadGEM2-ES_historical_r1i1p1_185912-200511.nc".into(), attrs: &[("institute_id", "INPE")], status: Fixed, fixes: &[InstituteFromModel], expect: "/cmip5/output/INPE/HadGEM2-ES/" },
        row("tas_Amon_CanESM2_historical_r1i1p1_185001-200512.nc", Fixed, &[InstituteFromModel], "/cmip5/output/CCCma/CanESM2/historical/mon/atmos/Amon/r1i1p1/tas/"),
        // Tables of several realms: the realm of the variable in the CMIP5 CMOR tables.
        row("tos_Omon_CanESM2_historical_r1i1p1_185001-200512.nc", Fixed, &[RealmFromTable, InstituteFromModel], "/cmip5/output/CCCma/CanESM2/historical/mon/ocean/Omon/r1i1p1/tos/"),
        row("tos_day_HadGEM2-ES_rcp85_r1i1p1_20051201-20101130.nc", Fixed, &[InstituteDefault, RealmFromTable, InstituteFromModel], "/cmip5/output/MOHC/HadGEM2-ES/rcp85/day/ocean/day/r1i1p1/tos/"),
        row("mrsos_day_HadGEM2-ES_rcp85_r1i1p1_20051201-20101130.nc", Fixed, &[InstituteDefault, RealmFromTable, InstituteFromModel], "/day/land/day/r1i1p1/mrsos/"),
        row("notavar_Omon_CanESM2_historical_r1i1p1_185001-200512.nc", Rejected, &[], "variable 'notavar' is not in CMIP5 MIP table 'Omon'"),
        row("cmip5/output1/CSIRO-QCCCE/CSIRO-Mk3.6.0/historical/mon/atmos/Amon/r1i1p1/v1/tas/tas_Amon_CSIRO-Mk3.6.0_historical_r1i1p1_185001-200512.nc", Fixed, &[ModelPunctuation], "/CSIRO-Mk3-6-0/historical/"),
        row("tas_Amon_CESM1(CAM5)_historical_r1i1p1_185001-200512.nc", Fixed, &[ModelPunctuation, InstituteFromModel], "/NSF-DOE-NCAR/CESM1-CAM5/"),
        row("cmip5/output1/MOHC/HadGEM2-ES/historical/mon/atmos/Amon/r1i1p1/tas/v20120101/tas_Amon_HadGEM2-ES_historical_r1i1p1_185912-200511.nc", Fixed, &[DirOrder], "/Amon/r1i1p1/tas/"),
        row("cmip5/output1/MOHC/HadGEM2-ES/historical/mon/atmos/tas/r1i1p1/v1/tas_Amon_HadGEM2-ES_historical_r1i1p1_185912-200511.nc", Fixed, &[DirNoTable], "/atmos/Amon/r1i1p1/tas/"),
        row("CMIP5/output2/MOHC/HadGEM2-ES/historical/mon/atmos/Amon/r1i1p1/v1/tas/tas_Amon_HadGEM2-ES_historical_r1i1p1_185912-200511.nc", Fixed, &[ActivityCase], "/cmip5/output2/"),
        row("cmip5/output1/MOHC/HadGEM2-ES/historical/fx/atmos/fx/r1i1p1/v1/orog/orog_fx_HadGEM2-ES_historical_r1i1p1.nc", Fixed, &[FxEnsemble], "/fx/r1i1p1/orog/"),
        row(&format!("{C5}tas_Amon_HadGEM2-ES_historical_r0i0p0_185912-200511.nc"), Rejected, &[], "directory says ensemble 'r1i1p1'"),
        row("cmip5/output1/MOHC/HadGEM2-ES/historical/mon/atmos/Amon/r0i0p0/v1/tas/tas_Amon_HadGEM2-ES_historical_r0i0p0_185912-200511.nc", Rejected, &[], "r0i0p0 is only for fx"),
        row("cmip5/output1/MOHC/HadGEM2-ES/historical/mon/atmos/Amon/r1i1p1/v1/tas/tas_Amon_HadGEM2-ES_historical_r1i1p1_185912-200511_g-lat-30.nc", Translated, &[], "_185912-200511_g-lat-30.nc"),
        row("CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn/v1/tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc", Fixed, &[VersionNotDate], "/gn/tas_Amon"),
        // Rejections.
        row(&format!("{C6}tas_Amon_CanESM5_histroical_r1i1p1f1_gn_185001-201412.nc"), Rejected, &[], "directory says experiment_id 'historical' but the file name says 'histroical'"),
        row("tas_Amon_CanESM5_histroical_r1i1p1f1_gn_185001-201412.nc", Rejected, &[], "experiment_id 'histroical' is not in the CMIP6 vocabulary"),
        row("CMIP6/CMIP/CCCma/CanESM5/histroical/r1i1p1f1/Amon/tas/gn/v20190429/tas_Amon_CanESM5_histroical_r1i1p1f1_gn_185001-201412.nc", Rejected, &[], "experiment_id 'histroical' is not in the CMIP6 vocabulary"),
        row("tas_Amon_HadGEM2-ES_histroical_r1i1p1_185912-200511.nc", Rejected, &[], "experiment 'histroical' is not in the CMIP5 vocabulary"),
        row("CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn/v20190429/tas_Amon_CanESM5_historical.nc", Rejected, &[], "file name has 4 fields, CMIP6 needs 6 or 7"),
        row("CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn/v20190429/tas_Amon_CanESM5_historical_member1_gn_185001-201412.nc", Rejected, &[], "member_id 'member1' is not"),
        row("CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn/tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc", Rejected, &[], "directory has 8 levels after CMIP6, CMIP6 needs 9"),
        row("CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gq/v20190429/tas_Amon_CanESM5_historical_r1i1p1f1_gq_185001-201412.nc", Rejected, &[], "grid_label 'gq' is not in the CMIP6 vocabulary"),
        row("CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn/v20190429/tas_Omon_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc", Rejected, &[], "directory says table_id 'Amon' but the file name says 'Omon'"),
        row("CMIP6/CMIP/CCCma/CanESM5/historical/../../../../etc/tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc", Rejected, &[], "path component '..' is not allowed"),
        row("", Rejected, &[], "empty input"),
        row("   ", Rejected, &[], "empty input"),
        row("CMIP6/CMIP/CCCma/", Rejected, &[], "no file name"),
        row("tas_Amon_\u{FFFD}\u{FFFD}_historical_r1i1p1f1_gn.nc", Rejected, &[], "U+FFFD"),
        row("tas\u{1}_Amon.nc", Rejected, &[], "U+0001"),
        row("tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412.txt", Rejected, &[], "does not end in .nc"),
        row("foo_bar_baz_qux_quux_corge.nc", Rejected, &[], "cannot tell whether"),
        row(&long, Rejected, &[], "at most 4096"),
        row(&long_comp, Rejected, &[], "at most 255"),
        row("cmip5/output1/MOHC/HadGEM2-ES/historical/mon/atmos/Amon/r1i1p1/v1/tas/tas_Amon_NoSuchModel_historical_r1i1p1_185912-200511.nc", Rejected, &[], "model 'NoSuchModel' is not in the CMIP5 vocabulary"),
        row("cmip5/output1/NCAR/HadGEM2-ES/historical/mon/atmos/Amon/r1i1p1/v1/tas/tas_Amon_HadGEM2-ES_historical_r1i1p1_185912-200511.nc", Rejected, &[], "institute 'NCAR' is not an institute of model 'HadGEM2-ES'"),
        row("cmip5/output1/MOHC/HadGEM2-ES/historical/fx/atmos/fx/r0i0p0/v1/orog/orog_fx_HadGEM2-ES_historical_r0i0p0_1850-2005.nc", Rejected, &[], "fx (time-invariant) files have no time range"),
    ]
}

#[test]
fn deviant_patterns_get_their_expected_outcome() {
    let t = Translator::new(Config::default()).expect("translator");
    let rows = rows();
    assert!(rows.len() >= 30);
    let mut seen_codes = std::collections::BTreeSet::new();
    for r in &rows {
        let attrs: BTreeMap<String, String> = r
            .attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let o = t.translate(&r.input, if attrs.is_empty() { None } else { Some(&attrs) });
        let shown: String = r.input.chars().take(160).collect();
        assert_eq!(o.status, r.status, "{shown}: {o:#?}");
        assert_eq!(o.fix_codes(), r.fixes, "{shown}: {o:#?}");
        seen_codes.extend(o.fix_codes());
        for f in &o.fixes {
            assert!(!f.detail.is_empty());
        }
        match r.status {
            Status::Rejected => {
                let reason = o.reason.as_deref().unwrap_or("");
                assert!(
                    reason.contains(r.expect),
                    "{shown}: reason {reason:?} lacks {:?}",
                    r.expect
                );
                assert!(o.name.is_empty() && o.uri.is_none());
            }
            _ => {
                assert!(o.reason.is_none());
                let uri = o.uri.as_deref().unwrap_or("");
                assert!(
                    uri.contains(r.expect),
                    "{shown}: uri {uri} lacks {:?}",
                    r.expect
                );
                // The canonical (fixed) path round-trips to itself.
                let v = o.drs_version.clone().unwrap_or_else(|| "v20200101".into());
                let back = t.reverse(&o.name, &v).expect("reverse").path();
                let again = t.translate(&back, None);
                assert_eq!(again.name, o.name, "{shown}: canonical path {back}");
                // Fixes that describe the data rather than its spelling (a kept coarse time
                // range, a gridspec or fx file, a short version) may stay; no new ones appear.
                assert!(again.is_accepted(), "{back}: {again:#?}");
                for c in again.fix_codes() {
                    assert!(o.fix_codes().contains(&c), "{back}: new fix {c:?}");
                }
            }
        }
        // JSON report has the documented fields.
        let j = serde_json::to_value(&o).expect("json");
        for k in [
            "status",
            "fixes",
            "reason",
            "project",
            "facets",
            "name",
            "uri",
            "drs_version",
            "time_range",
            "mismatches",
        ] {
            assert!(j.get(k).is_some(), "json lacks {k}");
        }
    }
    // Every fix code but the one only `trust = attributes` gives (tests/it/drs_attrs_rules.rs).
    for c in FixCode::ALL.iter().filter(|c| **c != AttributesTrusted) {
        assert!(seen_codes.contains(c), "no row exercises {c:?}");
    }
}
