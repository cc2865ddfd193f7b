//! Attribute cross-checks with `trust` both ways, and user rules files (CORDEX example,
//! malformed files).

use std::collections::BTreeMap;
use std::path::Path;

use granary_science::drs::{Config, Error, FixCode, Status, Translator, Trust};

const P6: &str = "CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn/v20190429/tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc";
const P5: &str = "cmip5/output1/MOHC/HadGEM2-ES/historical/mon/atmos/Amon/r1i1p1/v20120101/tas/tas_Amon_HadGEM2-ES_historical_r1i1p1_185912-200511.nc";

fn attrs(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn translator(trust: Trust) -> Translator {
    Translator::new(Config {
        trust,
        ..Config::default()
    })
    .expect("translator")
}

#[test]
fn cmip6_mismatches_reported_and_trust_decides() {
    let a = attrs(&[
        ("variable_id", "tas"),
        ("table_id", "Amon"),
        ("source_id", "CanESM5"),
        ("experiment_id", "historical"),
        ("variant_label", "r2i1p1f1"),
        ("grid_label", "gn"),
        ("activity_id", "CMIP"),
        ("institution_id", "CCCma"),
        ("frequency", "mon"),
    ]);
    let o = translator(Trust::Name).translate(P6, Some(&a));
    assert_eq!(o.status, Status::Translated);
    assert_eq!(o.mismatches.len(), 1, "{:?}", o.mismatches);
    let m = &o.mismatches[0];
    assert_eq!(
        (
            m.facet.as_str(),
            m.name_value.as_str(),
            m.attribute_value.as_str()
        ),
        ("member_id", "r1i1p1f1", "r2i1p1f1")
    );
    assert_eq!(o.facets["member_id"], "r1i1p1f1");

    let o = translator(Trust::Attributes).translate(P6, Some(&a));
    assert_eq!(o.status, Status::Fixed);
    assert_eq!(o.fix_codes(), vec![FixCode::AttributesTrusted]);
    assert_eq!(o.mismatches.len(), 1);
    assert_eq!(o.facets["member_id"], "r2i1p1f1");
    assert!(
        o.uri.as_deref().is_some_and(|u| u.ends_with(
            "/r2i1p1f1/Amon/tas/gn/tas_Amon_CanESM5_historical_r2i1p1f1_gn_185001-201412.nc"
        )),
        "{:?}",
        o.uri
    );

    // Agreeing attributes (multi-activity list, monPt on a monthly table): no mismatch.
    let ok = attrs(&[
        ("activity_id", "CMIP ScenarioMIP"),
        ("frequency", "monPt"),
        ("member_id", "r1i1p1f1"),
    ]);
    let o = translator(Trust::Name).translate(P6, Some(&ok));
    assert!(o.mismatches.is_empty(), "{:?}", o.mismatches);
    assert_eq!(o.facets["frequency"], "monPt");

    // A table/frequency clash: a climatology (monC) or daily values under Amon. The
    // facet stays the table's; trusting attributes does not rename for it.
    for clash in ["monC", "day"] {
        let a = attrs(&[("frequency", clash), ("member_id", "r1i1p1f1")]);
        for trust in [Trust::Name, Trust::Attributes] {
            let o = translator(trust).translate(P6, Some(&a));
            assert_eq!(o.mismatches.len(), 1, "{clash}: {:?}", o.mismatches);
            let m = &o.mismatches[0];
            assert_eq!(
                (m.facet.as_str(), m.attribute.as_str()),
                ("frequency", "frequency")
            );
            assert_eq!(m.name_value, "mon (table Amon)");
            assert_eq!(m.attribute_value, clash);
            assert_eq!(o.facets["frequency"], "mon");
            assert!(o.fixes.is_empty(), "{clash}: {:?}", o.fixes);
        }
    }

    // Several mismatches at once; attributes trusted but invalid: rejected with the reason.
    let bad = attrs(&[("experiment_id", "histroical"), ("source_id", "MIROC6")]);
    let o = translator(Trust::Name).translate(P6, Some(&bad));
    assert_eq!(o.mismatches.len(), 2);
    let o = translator(Trust::Attributes).translate(P6, Some(&bad));
    assert_eq!(o.status, Status::Rejected);
    assert!(
        o.reason
            .as_deref()
            .is_some_and(|r| r.contains("histroical")),
        "{:?}",
        o.reason
    );
}

#[test]
fn cmip5_attribute_equivalences_and_mismatches() {
    let a = attrs(&[
        ("model_id", "HadGEM2-ES"),
        ("experiment_id", "historical"),
        ("frequency", "mon"),
        ("modeling_realm", "atmos"),
        (
            "table_id",
            "Table Amon (31 January 2011) 53b766a395ac41696af40aab76a49ae5",
        ),
        ("project_id", "CMIP5"),
        ("product", "output"),
        ("institute_id", "MOHC"),
        ("realization", "1"),
        ("initialization_method", "1"),
        ("physics_version", "1"),
    ]);
    let o = translator(Trust::Name).translate(P5, Some(&a));
    assert_eq!(o.status, Status::Translated);
    assert!(o.mismatches.is_empty(), "{:?}", o.mismatches);

    let p = "cmip5/output1/CSIRO-QCCCE/CSIRO-Mk3-6-0/historical/mon/atmos/Amon/r1i1p1/v1/tas/tas_Amon_CSIRO-Mk3-6-0_historical_r1i1p1_185001-200512.nc";
    let o = translator(Trust::Name).translate(p, Some(&attrs(&[("model_id", "CSIRO-Mk3.6.0")])));
    assert!(o.mismatches.is_empty(), "{:?}", o.mismatches);

    let wrong = attrs(&[
        ("table_id", "Table Omon (31 January 2011) 0123"),
        ("realization", "2"),
        ("initialization_method", "1"),
        ("physics_version", "1"),
    ]);
    let o = translator(Trust::Name).translate(P5, Some(&wrong));
    let facets: Vec<&str> = o.mismatches.iter().map(|m| m.facet.as_str()).collect();
    assert_eq!(facets, vec!["cmor_table", "ensemble"]);
    let o = translator(Trust::Attributes).translate(
        P5,
        Some(&attrs(&[
            ("realization", "2"),
            ("initialization_method", "1"),
            ("physics_version", "1"),
        ])),
    );
    assert_eq!(o.status, Status::Fixed);
    assert_eq!(o.facets["ensemble"], "r2i1p1");
    assert!(o.name.last().is_some_and(|f| f.contains("_r2i1p1_")));
}

fn cordex_rules() -> granary_science::drs::Rules {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules/cordex.toml");
    Translator::load_rules(&p).expect("cordex rules")
}

#[test]
fn cordex_rules_translate_and_reverse() {
    let t = Translator::new(Config {
        rules: vec![cordex_rules()],
        ..Config::default()
    })
    .expect("translator");
    let path = "CORDEX/output/EUR-11/SMHI/ICHEC-EC-EARTH/rcp85/r12i1p1/SMHI-RCA4/v1/day/tas/v20131026/tas_EUR-11_ICHEC-EC-EARTH_rcp85_r12i1p1_SMHI-RCA4_v1_day_20060101-20101231.nc";
    let o = t.translate(path, None);
    assert_eq!(o.status, Status::Translated, "{o:#?}");
    assert_eq!(o.project.as_deref(), Some("CORDEX"));
    assert_eq!(o.facets["rcm_name"], "SMHI-RCA4");
    assert_eq!(o.facets["time_frequency"], "day");
    assert_eq!(o.facets["institute"], "SMHI");
    assert_eq!(o.drs_version.as_deref(), Some("v20131026"));
    assert_eq!(o.time_range.as_deref(), Some("20060101-20101231"));
    assert_eq!(
        o.uri.as_deref(),
        Some("/cordex/output/EUR-11/SMHI/ICHEC-EC-EARTH/rcp85/r12i1p1/SMHI-RCA4/v1/day/tas/tas_EUR-11_ICHEC-EC-EARTH_rcp85_r12i1p1_SMHI-RCA4_v1_day_20060101-20101231.nc")
    );
    assert_eq!(
        t.reverse(&o.name, "v20131026").expect("reverse").path(),
        path
    );
    // Allowed values are enforced; CMIP6 still goes to the built-in syntax.
    let bad = path.replace("EUR-11", "XYZ-11");
    let o = t.translate(&bad, None);
    assert_eq!(o.status, Status::Rejected);
    assert!(
        o.reason.as_deref().is_some_and(
            |r| r.contains("domain 'XYZ-11' is not in the CORDEX rules' allowed values")
        ),
        "{:?}",
        o.reason
    );
    assert_eq!(t.translate(P6, None).project.as_deref(), Some("CMIP6"));
    // Attribute cross-check from the rules' [attributes] table.
    let o = t.translate(
        path,
        Some(&attrs(&[
            ("model_id", "SMHI-RCA4"),
            ("CORDEX_domain", "EUR-44"),
        ])),
    );
    assert_eq!(o.mismatches.len(), 1);
    assert_eq!(o.mismatches[0].facet, "domain");
}

#[test]
fn malformed_rules_files_give_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        ("project = \"X\"\nroot = \"/x\"\nname = [\"a\"]\n", "needs dir_regex or file_regex"),
        ("project = \"X\"\nroot = \"/x\"\nfile_regex = '(?P<a>[a-z'\nname = [\"a\"]\n", "file_regex"),
        ("project = \"X\"\nroot = \"/x\"\nfile_regex = '^(?P<a>[a-z]+)\\.nc$'\nname = [\"b\"]\n", "name facet 'b' is neither captured"),
        ("project = \"X\"\nroot = \"x\"\nfile_regex = '^(?P<a>[a-z]+)\\.nc$'\nname = [\"a\"]\n", "root 'x'"),
        ("project = \"X\"\nroot = \"/x\"\nfile_regex = '^(?P<a>[a-z]+)\\.nc$'\nname = [\"a\"]\nbogus = 1\n", "unknown field"),
        ("project = \"X\"\nroot = \"/x\"\nfile_regex = '^(?P<a>[a-z]+)\\.nc$'\nname = [\"a\"]\n[reverse]\ndir = \"X/{b}/\"\n", "reverse.dir uses '{b}'"),
        ("this is not toml", "rules file"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("r{i}.toml"));
        std::fs::write(&p, text).expect("write");
        let e = Translator::load_rules(&p).expect_err(text);
        assert!(matches!(e, Error::Rules { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains(want) && msg.contains(&format!("r{i}.toml")),
            "{msg:?} lacks {want:?}"
        );
    }
    let e = Translator::load_rules(&dir.path().join("absent.toml")).expect_err("absent");
    assert!(matches!(e, Error::RulesIo { .. }));
}

#[test]
fn reverse_refuses_inconsistent_names() {
    let t = translator(Trust::Name);
    let o = t.translate(P6, None);
    assert!(t.reverse(&o.name, "latest").is_err());
    let mut n = o.name.clone();
    n[6] = "Omon".into();
    let e = t
        .reverse(&n, "v20190429")
        .expect_err("table differs from file");
    assert!(e.to_string().contains("does not start with"), "{e}");
    assert!(t.reverse(&o.name[..5], "v20190429").is_err());
    let other: Vec<String> = vec!["elsewhere".into(), "x.nc".into()];
    assert!(t.reverse(&other, "v1").is_err());
}

/// The attributes of a real CMIP6 sea-ice file (CanESM5, SImon, siconc).
fn siconc_attrs() -> BTreeMap<String, String> {
    attrs(&[
        ("mip_era", "CMIP6"),
        ("activity_id", "CMIP"),
        ("institution_id", "CCCma"),
        ("source_id", "CanESM5"),
        ("experiment_id", "historical"),
        ("sub_experiment_id", "none"),
        ("variant_label", "r1i1p1f1"),
        ("table_id", "SImon"),
        ("variable_id", "siconc"),
        ("grid_label", "gn"),
        ("frequency", "mon"),
        ("realm", "seaIce"),
    ])
}

#[test]
fn trusted_attributes_name_a_file_whose_name_does_not_translate() {
    // A CMIP5-style variable and an institution-prefixed model in the name.
    let file = "sic_SImon_CCCma-CanESM5_historical_r1i1p1f1_gn_185001-201412.nc";
    let a = siconc_attrs();
    let o = translator(Trust::Name).translate(file, Some(&a));
    assert_eq!(o.status, Status::Rejected, "{o:?}");
    let o = translator(Trust::Attributes).translate(file, Some(&a));
    assert_eq!(o.status, Status::Fixed, "{:?}", o.reason);
    assert_eq!(o.fix_codes(), vec![FixCode::AttributesTrusted]);
    assert_eq!(
        o.uri.as_deref(),
        Some("/cmip6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/SImon/siconc/gn/siconc_SImon_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc")
    );
    assert_eq!(o.facets["realm"], "seaIce");
    assert_eq!(o.time_range.as_deref(), Some("185001-201412"));
    // With a DRS directory that holds a version: kept.
    let o =
        translator(Trust::Attributes).translate(&format!("some/where/v20190429/{file}"), Some(&a));
    assert_eq!(o.drs_version.as_deref(), Some("v20190429"), "{o:?}");
    // Attributes that are not valid either: rejected with both reasons.
    let mut bad = a.clone();
    bad.insert("source_id".into(), "NoSuchModel".into());
    let o = translator(Trust::Attributes).translate(file, Some(&bad));
    assert_eq!(o.status, Status::Rejected);
    let why = o.reason.unwrap_or_default();
    assert!(
        why.contains("attributes do not make a valid name") && why.contains("NoSuchModel"),
        "{why}"
    );
    // Not CMIP6 attributes: rejected as before.
    let o = translator(Trust::Attributes).translate(file, Some(&attrs(&[("title", "x")])));
    assert_eq!(o.status, Status::Rejected);
}

#[test]
fn realm_comes_from_the_attribute_when_the_table_has_several() {
    let p = "CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/day/tas/gn/v20190429/tas_day_CanESM5_historical_r1i1p1f1_gn_18500101-18591231.nc";
    let o = translator(Trust::Name).translate(p, None);
    assert!(!o.facets.contains_key("realm"), "{:?}", o.facets);
    let o = translator(Trust::Name).translate(p, Some(&attrs(&[("realm", "atmos")])));
    assert_eq!(o.facets["realm"], "atmos");
    assert!(o.mismatches.is_empty());
    // Several realms: the first (primary) one; a realm not in the vocabulary: none.
    let o = translator(Trust::Name).translate(p, Some(&attrs(&[("realm", "land landIce")])));
    assert_eq!(o.facets["realm"], "land");
    let o = translator(Trust::Name).translate(p, Some(&attrs(&[("realm", "atmosphere")])));
    assert!(!o.facets.contains_key("realm"));
    // A table that implies a realm wins; a disagreeing attribute is a reported mismatch
    // that does not rename the file even when attributes are trusted.
    let o = translator(Trust::Attributes).translate(P6, Some(&attrs(&[("realm", "ocean")])));
    assert_eq!(o.facets["realm"], "atmos");
    assert_eq!(o.mismatches.len(), 1, "{:?}", o.mismatches);
    assert_eq!(o.status, Status::Translated, "{:?}", o.fixes);
}
