//! DRS name translation (CMIP6, CMIP5, user rules files).
//!
//! A file path (or only its file name) written in a data reference syntax becomes an NDN
//! name under a configurable root, with its facets (ESGF facet names), and back. Every input
//! gets exactly one [`Outcome`]: `translated`, `fixed` (with the named fixes applied) or
//! `rejected` (with a precise reason). The DRS version (`v20190429`) is not part of the
//! name; it is kept in the outcome (`drs_version`) and as the facet `version`.
//!
//! Modules: `vocab` (vendored vocabularies, parsed once), `common` (path checks, time
//! ranges), `cmip6`, `cmip5` (built-in syntaxes and their fixes), `rules` (user TOML rules).

mod cmip5;
mod cmip6;
mod common;
mod rules;
mod vocab;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

pub use rules::Rules;

/// Errors of configuration, rules files and reverse translation. (Translation itself never
/// fails: a bad input gives a `rejected` [`Outcome`].)
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("vocabulary: {0}")]
    Vocabulary(String),
    #[error("bad root '{0}': a root is '/' followed by one or more non-empty components")]
    BadRoot(String),
    #[error("rules file {path}: {msg}")]
    Rules { path: String, msg: String },
    #[error("cannot read rules file {path}: {source}")]
    RulesIo {
        path: String,
        source: std::io::Error,
    },
    #[error("reverse: {0}")]
    Reverse(String),
}

/// Which side wins when the file's attributes disagree with its path. The mismatch is
/// reported either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    #[default]
    Name,
    Attributes,
}

/// Translator configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Name prefix for CMIP6, default `/cmip6`.
    pub cmip6_root: String,
    /// Name prefix for CMIP5, default `/cmip5`.
    pub cmip5_root: String,
    pub trust: Trust,
    /// User rules (other projects); tried before the built-in CMIP6/CMIP5 syntaxes.
    pub rules: Vec<Rules>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cmip6_root: "/cmip6".into(),
            cmip5_root: "/cmip5".into(),
            trust: Trust::Name,
            rules: Vec::new(),
        }
    }
}

/// The three kinds of outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Translated,
    Fixed,
    Rejected,
}

/// Named fixes for deviations seen in real archives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FixCode {
    /// Year-only time range: `1850-2014` in a monthly table is normalised to
    /// `185001-201412`; for finer frequencies it is accepted as written.
    TimeRangeYearOnly,
    /// Month-only time range (`185001-201412`) where days or hours are due: accepted as
    /// written (normalising would need the calendar).
    TimeRangeMonthOnly,
    /// Grid label missing from the file name, taken from the directory path.
    GridLabelFromPath,
    /// Grid label missing from the file name, taken from the `grid_label` attribute.
    GridLabelFromAttributes,
    /// `r1` -> `r1i1p1` (CMIP5) / `r1i1p1f1` (CMIP6); `r1i1p1` -> `r1i1p1f1` (CMIP6).
    ShortEnsemble,
    /// Model and experiment fields were swapped.
    SwappedModelExperiment,
    /// Climatology suffix: `-clim` kept, `_clim` normalised to `-clim`.
    ClimSuffix,
    /// Unknown fields after the time range, dropped.
    ExtraSuffix,
    /// A CMIP5 fx file with an ensemble other than `r0i0p0` (kept).
    FxEnsemble,
    /// `gridspec_<realm>_fx_<model>_<experiment>_r0i0p0.nc`.
    Gridspec,
    /// CMIP5 facets absent from the file name (institute, frequency, realm, product)
    /// derived from the vocabularies or attributes.
    InstituteFromModel,
    /// Model written with other punctuation (`CSIRO-Mk3.6.0` -> `CSIRO-Mk3-6-0`).
    ModelPunctuation,
    /// CMIP5 directory with the variable before the version.
    DirOrder,
    /// Older CMIP5 directory without the MIP table level.
    DirNoTable,
    /// CMIP5 activity directory written `CMIP5` rather than `cmip5`.
    ActivityCase,
    /// CMIP6 version not of the form vYYYYMMDD.
    VersionNotDate,
    /// Attributes disagreed and `trust = attributes`: their values were used.
    AttributesTrusted,
}

/// One applied fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fix {
    pub code: FixCode,
    pub detail: String,
}

/// An attribute that disagrees with the path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    pub facet: String,
    pub attribute: String,
    pub name_value: String,
    pub attribute_value: String,
}

/// The result of translating one input.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub input: String,
    pub status: Status,
    pub fixes: Vec<Fix>,
    pub reason: Option<String>,
    pub project: Option<String>,
    pub facets: BTreeMap<String, String>,
    /// Name components (root components first, the file name last).
    pub name: Vec<String>,
    pub uri: Option<String>,
    pub drs_version: Option<String>,
    pub time_range: Option<String>,
    pub mismatches: Vec<Mismatch>,
}

impl Outcome {
    fn rejected(input: &str, reason: String) -> Outcome {
        Outcome {
            input: input.to_string(),
            status: Status::Rejected,
            fixes: Vec::new(),
            reason: Some(reason),
            project: None,
            facets: BTreeMap::new(),
            name: Vec::new(),
            uri: None,
            drs_version: None,
            time_range: None,
            mismatches: Vec::new(),
        }
    }
    pub fn is_accepted(&self) -> bool {
        self.status != Status::Rejected
    }
    pub fn fix_codes(&self) -> Vec<FixCode> {
        self.fixes.iter().map(|f| f.code).collect()
    }
}

/// A DRS location: directory (relative, ending in `/`) and file name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DrsPath {
    pub dir: String,
    pub file: String,
}

impl DrsPath {
    pub fn path(&self) -> String {
        format!("{}{}", self.dir, self.file)
    }
}

/// What a project parser produces before the name is built.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    pub project: String,
    pub facets: BTreeMap<String, String>,
    /// Canonical file name (rebuilt from the facets for the built-in syntaxes).
    pub file: String,
    pub version: Option<String>,
    pub time_range: Option<String>,
    pub fixes: Vec<Fix>,
    /// Facet values for the name, in order (after the root).
    pub name_facets: Vec<String>,
}

impl Parsed {
    pub fn fix(&mut self, code: FixCode, detail: impl Into<String>) {
        self.fixes.push(Fix {
            code,
            detail: detail.into(),
        });
    }
}

/// Percent-escape name components as an NDN canonical URI (`/a/b%20c`): unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`) stay, every other byte is `%XX`; a component of only
/// periods gets three more.
pub fn uri(components: &[String]) -> String {
    if components.is_empty() {
        return "/".into();
    }
    let mut out = String::new();
    for c in components {
        out.push('/');
        if c.bytes().all(|b| b == b'.') {
            out.push_str("...");
        }
        for b in c.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

fn root_components(root: &str) -> Result<Vec<String>, Error> {
    let rest = root
        .strip_prefix('/')
        .ok_or_else(|| Error::BadRoot(root.to_string()))?;
    let comps: Vec<String> = rest.split('/').map(str::to_string).collect();
    if comps.iter().any(|c| c.is_empty()) {
        return Err(Error::BadRoot(root.to_string()));
    }
    Ok(comps)
}

/// Translates DRS paths to names and back. Cheap to share (`&self` everywhere).
#[derive(Debug)]
pub struct Translator {
    cfg: Config,
    cmip6_root: Vec<String>,
    cmip5_root: Vec<String>,
}

impl Translator {
    pub fn new(cfg: Config) -> Result<Self, Error> {
        // Parse the vocabularies now, so a broken build fails here and not per input.
        vocab::cmip6()?;
        vocab::cmip5()?;
        let cmip6_root = root_components(&cfg.cmip6_root)?;
        let cmip5_root = root_components(&cfg.cmip5_root)?;
        for r in &cfg.rules {
            root_components(&r.root)?;
        }
        Ok(Translator {
            cfg,
            cmip6_root,
            cmip5_root,
        })
    }

    /// Read and check a TOML rules file.
    pub fn load_rules(path: &Path) -> Result<Rules, Error> {
        Rules::load(path)
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Translate a DRS path (or a bare file name), optionally cross-checked against the
    /// file's global attributes.
    pub fn translate(&self, path: &str, attrs: Option<&BTreeMap<String, String>>) -> Outcome {
        let (dirs, file) = match common::split_input(path) {
            Ok(x) => x,
            Err(reason) => return Outcome::rejected(path, reason),
        };
        for r in &self.cfg.rules {
            match r.apply(&dirs, file) {
                None => continue,
                Some(Err(reason)) => return Outcome::rejected(path, reason),
                Some(Ok(p)) => {
                    let root = root_components(&r.root).unwrap_or_default();
                    let mismatches = r.cross_check(&p, attrs);
                    return self.finish(path, p, root, mismatches);
                }
            }
        }
        let project = match common::detect_project(&dirs, file) {
            Ok(p) => p,
            Err(reason) => return Outcome::rejected(path, reason),
        };
        let (parsed, root) = match project {
            common::Project::Cmip6 => (cmip6::parse(&dirs, file, attrs), &self.cmip6_root),
            common::Project::Cmip5 => (cmip5::parse(&dirs, file, attrs), &self.cmip5_root),
        };
        let mut p = match parsed {
            Ok(p) => p,
            Err(reason) => return Outcome::rejected(path, reason),
        };
        let checked = match (project, attrs) {
            (_, None) => Vec::new(),
            (common::Project::Cmip6, Some(a)) => cmip6::cross_check(&p, a),
            (common::Project::Cmip5, Some(a)) => cmip5::cross_check(&p, a),
        };
        let mismatches: Vec<Mismatch> = checked.iter().map(|(m, _)| m.clone()).collect();
        if self.cfg.trust == Trust::Attributes && !mismatches.is_empty() {
            let mut facets = p.facets.clone();
            for (m, replacement) in &checked {
                facets.insert(m.facet.clone(), replacement.clone());
            }
            let (tr, v) = (p.time_range.as_deref(), p.version.as_deref());
            let rebuilt = match project {
                common::Project::Cmip6 => cmip6::from_facets(&facets, tr, v),
                common::Project::Cmip5 => cmip5::from_facets(&facets, tr, v),
            };
            match rebuilt {
                Ok(mut q) => {
                    q.fixes = std::mem::take(&mut p.fixes);
                    let list: Vec<String> = mismatches
                        .iter()
                        .map(|m| format!("{}={}", m.facet, m.attribute_value))
                        .collect();
                    q.fix(FixCode::AttributesTrusted, list.join(", "));
                    p = q;
                }
                Err(e) => {
                    return Outcome::rejected(
                        path,
                        format!(
                            "trust = attributes, but the attributes do not make a valid name: {e}"
                        ),
                    )
                }
            }
        }
        self.finish(path, p, root.clone(), mismatches)
    }

    fn finish(
        &self,
        input: &str,
        p: Parsed,
        mut name: Vec<String>,
        mismatches: Vec<Mismatch>,
    ) -> Outcome {
        name.extend(p.name_facets.iter().cloned());
        name.push(p.file.clone());
        let mut facets = p.facets;
        if let Some(v) = &p.version {
            facets.insert("version".into(), v.clone());
        }
        Outcome {
            input: input.to_string(),
            status: if p.fixes.is_empty() {
                Status::Translated
            } else {
                Status::Fixed
            },
            fixes: p.fixes,
            reason: None,
            project: Some(p.project),
            uri: Some(uri(&name)),
            name,
            facets,
            drs_version: p.version,
            time_range: p.time_range,
            mismatches,
        }
    }

    /// Name components (as in [`Outcome::name`]) and the DRS version -> DRS directory and
    /// file name.
    pub fn reverse(&self, components: &[String], drs_version: &str) -> Result<DrsPath, Error> {
        for r in &self.cfg.rules {
            let root = root_components(&r.root)?;
            if components.starts_with(&root) {
                return r.reverse(&components[root.len()..], drs_version);
            }
        }
        if components.starts_with(&self.cmip6_root) {
            return cmip6::reverse(&components[self.cmip6_root.len()..], drs_version);
        }
        if components.starts_with(&self.cmip5_root) {
            return cmip5::reverse(&components[self.cmip5_root.len()..], drs_version);
        }
        Err(Error::Reverse(format!(
            "name {} is under none of the configured roots",
            uri(components)
        )))
    }
}
