//! What translation produces: the [`Outcome`] of one input (its status, [`Fix`]es
//! by [`FixCode`], attribute [`Mismatch`]es), a [`DrsPath`], what a project parser hands
//! the translator ([`Parsed`]), and the [`Error`]s of configuration and reverse
//! translation. A leaf: the parsers, the vocabularies and the translator use it.

use std::collections::BTreeMap;

use serde::Serialize;

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

/// The three kinds of outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Translated,
    Fixed,
    Rejected,
}

/// Declares [`FixCode`] and [`FixCode::ALL`] from one list, so the two cannot drift.
macro_rules! fix_codes {
    ($($(#[doc = $doc:literal])* $code:ident,)*) => {
        /// Named fixes for deviations seen in real archives.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum FixCode {
            $($(#[doc = $doc])* $code,)*
        }

        impl FixCode {
            /// Every fix code, in declaration order.
            pub const ALL: &'static [FixCode] = &[$(FixCode::$code),*];
        }
    };
}

fix_codes! {
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
    /// CMIP5 realm of a table holding variables of several realms (`day`, `Omon`, `3hr`),
    /// taken per variable from the CMIP5 CMOR tables.
    RealmFromTable,
    /// CMIP5 model run by several institutes (`HadGEM2-ES`: INPE, MOHC) named without
    /// directory or `institute_id`: filed under its documented default institute.
    InstituteDefault,
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

impl Mismatch {
    pub(crate) fn new(
        facet: &str,
        attribute: &str,
        name_value: String,
        attribute_value: &str,
    ) -> Self {
        Mismatch {
            facet: facet.into(),
            attribute: attribute.into(),
            name_value,
            attribute_value: attribute_value.into(),
        }
    }
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
    pub(super) fn rejected(input: &str, reason: String) -> Outcome {
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
    /// Nothing parsed yet, for `project`.
    pub fn new(project: &str) -> Parsed {
        Parsed {
            project: project.into(),
            facets: BTreeMap::new(),
            file: String::new(),
            version: None,
            time_range: None,
            fixes: Vec::new(),
            name_facets: Vec::new(),
        }
    }

    pub fn fix(&mut self, code: FixCode, detail: impl Into<String>) {
        self.fixes.push(Fix {
            code,
            detail: detail.into(),
        });
    }

    /// Records the fix unless one with the same code is recorded already.
    pub fn fix_once(&mut self, code: FixCode, detail: impl Into<String>) {
        if !self.fixes.iter().any(|f| f.code == code) {
            self.fix(code, detail);
        }
    }
}
