//! A rules file overrides the institute a bare CMIP5 file name of a model run by several
//! institutes is filed under (`[cmip5.default_institute]`); a directory path or an
//! `institute_id` attribute still wins, and bad overrides are refused naming the file.

use std::collections::BTreeMap;
use std::path::Path;

use granary_science::drs::{Config, Error, FixCode, Status, Translator};

const BARE: &str = "tas_Amon_HadGEM2-ES_rcp45_r1i1p1_200512-203011.nc";

fn with_rules(files: &[&Path]) -> Translator {
    let rules = files
        .iter()
        .map(|p| Translator::load_rules(p).expect("rules"))
        .collect();
    Translator::new(Config {
        rules,
        ..Config::default()
    })
    .expect("translator")
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

fn institute_default_detail(o: &granary_science::drs::Outcome) -> String {
    o.fixes
        .iter()
        .find(|f| f.code == FixCode::InstituteDefault)
        .map(|f| f.detail.clone())
        .unwrap_or_default()
}

#[test]
fn rules_file_overrides_the_default_institute() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inpe = write(
        dir.path(),
        "inpe.toml",
        "[cmip5.default_institute]\nHadGEM2-ES = \"INPE\"\n",
    );

    // Built in: MOHC, with the documented reason.
    let o = Translator::new(Config::default())
        .expect("translator")
        .translate(BARE, None);
    assert_eq!(o.facets["institute"], "MOHC");
    assert!(institute_default_detail(&o).contains("home institute"));

    let t = with_rules(&[&inpe]);
    let o = t.translate(BARE, None);
    assert_eq!(o.status, Status::Fixed, "{:?}", o.reason);
    assert_eq!(o.facets["institute"], "INPE");
    assert_eq!(o.name[2], "INPE", "{:?}", o.name);
    let d = institute_default_detail(&o);
    assert!(
        d.contains("inpe.toml")
            && d.contains("built-in default is 'MOHC'")
            && d.contains("INPE, MOHC"),
        "{d}"
    );
    // The name reverses to the overriding institute's directory.
    let p = t.reverse(&o.name, "v20111128").expect("reverse");
    assert!(
        p.dir.starts_with("cmip5/output/INPE/HadGEM2-ES/"),
        "{}",
        p.dir
    );

    // A model written with other punctuation is the same model.
    let dotted = write(
        dir.path(),
        "dotted.toml",
        "[cmip5.default_institute]\n\"CFSv2.2011\" = \"COLA-CFS\"\n",
    );
    let o = with_rules(&[&dotted]).translate(
        "tas_Amon_CFSv2-2011_decadal1980_r1i1p1_198011-199012.nc",
        None,
    );
    assert_eq!(o.facets["institute"], "COLA-CFS", "{:?}", o.reason);

    // The first rules file naming a model wins.
    let mohc = write(
        dir.path(),
        "mohc.toml",
        "[cmip5.default_institute]\nHadGEM2-ES = \"MOHC\"\n",
    );
    let o = with_rules(&[&mohc, &inpe]).translate(BARE, None);
    assert_eq!(o.facets["institute"], "MOHC");
    assert!(institute_default_detail(&o).contains("mohc.toml"));
    let o = with_rules(&[&inpe, &mohc]).translate(BARE, None);
    assert_eq!(o.facets["institute"], "INPE");
}

#[test]
fn directories_and_attributes_still_win_over_the_override() {
    let dir = tempfile::tempdir().expect("tempdir");
    let inpe = write(
        dir.path(),
        "inpe.toml",
        "[cmip5.default_institute]\nHadGEM2-ES = \"INPE\"\n",
    );
    let t = with_rules(&[&inpe]);
    let o = t.translate(
        &format!("cmip5/output1/MOHC/HadGEM2-ES/rcp45/mon/atmos/Amon/r1i1p1/v20111128/tas/{BARE}"),
        None,
    );
    assert_eq!(o.facets["institute"], "MOHC");
    assert!(!o.fix_codes().contains(&FixCode::InstituteDefault));
    let a: BTreeMap<String, String> = [("institute_id".to_string(), "MOHC".to_string())].into();
    let o = t.translate(BARE, Some(&a));
    assert_eq!(o.facets["institute"], "MOHC");
    assert!(!o.fix_codes().contains(&FixCode::InstituteDefault));
    // Models of one institute and CMIP6 names are untouched by an override-only file.
    let o = t.translate("tas_Amon_CanESM2_rcp45_r1i1p1_200601-210012.nc", None);
    assert_eq!(o.facets["institute"], "CCCma");
    let o = t.translate(
        "tas_Amon_CanESM5_historical_r1i1p1f1_gn_185001-201412.nc",
        None,
    );
    assert_ne!(o.status, Status::Rejected, "{:?}", o.reason);
}

#[test]
fn a_syntax_file_may_carry_the_override_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let both = write(
        dir.path(),
        "both.toml",
        "project = \"X\"\nroot = \"/x\"\nfile_regex = '^(?P<a>xx[a-z]+)\\.nc$'\nname = [\"a\"]\n\n[cmip5.default_institute]\nHadGEM2-ES = \"INPE\"\n",
    );
    let t = with_rules(&[&both]);
    assert_eq!(t.translate("xxab.nc", None).facets["project"], "X");
    assert_eq!(t.translate(BARE, None).facets["institute"], "INPE");
}

#[test]
fn bad_overrides_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "[cmip5.default_institute]\nHadGEM9 = \"MOHC\"\n",
            "model 'HadGEM9' is not in the CMIP5 vocabulary",
        ),
        (
            "[cmip5.default_institute]\nHadGEM2-ES = \"NCAR\"\n",
            "'NCAR' is not an institute of model 'HadGEM2-ES' (INPE, MOHC)",
        ),
        ("[cmip5]\ndefault_institutes = {}\n", "unknown field"),
        (
            "[cmip5.default_institute]\nHadGEM2-ES = \"INPE\"\n[defaults]\na = \"b\"\n",
            "'defaults' belongs to a syntax",
        ),
        ("", "defines neither a syntax"),
        (
            "root = \"/x\"\nfile_regex = '^(?P<a>[a-z]+)\\.nc$'\nname = [\"a\"]\n",
            "a syntax needs 'project'",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let p = write(dir.path(), &format!("bad{i}.toml"), text);
        let e = Translator::load_rules(&p).expect_err(text);
        assert!(matches!(e, Error::Rules { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains(want) && msg.contains(&format!("bad{i}.toml")),
            "{msg:?} lacks {want:?}"
        );
    }
}
