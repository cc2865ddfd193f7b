//! Dataset records: the files of one dataset version, with their time coverage, count,
//! size, shared facets and time-axis contiguity.
//!
//! A dataset is keyed by its **directory** (the record name without the file name, and
//! without a last component equal to the record's `variable` facet: CMIP5 puts the
//! variable below the ensemble, and ESGF's CMIP5 dataset ids leave it out) and its
//! **DRS version** (the `version` facet, `""` when the record has none). A member is the
//! highest repository version of its name among those with its DRS version (the DRS
//! version is not in the name: a name published again under a new DRS version leaves
//! its older copy in the older dataset version). The index keeps the membership up to
//! date at every change it applies (add, replace, rename, remove, full load), so a query
//! never regroups files.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result};
use crate::query::Query;

/// The facet naming a record's variable when the directory holds it below the dataset
/// (CMIP5).
pub const DATASET_VARIABLE_FACET: &str = "variable";

/// The facets giving a dataset's time step (CMIP6 `frequency`, CMIP5 `time_frequency`),
/// in the order they are looked for.
pub const FREQUENCY_FACETS: [&str; 2] = ["frequency", "time_frequency"];

/// One file of a dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct DatasetFile {
    pub name: String,
    pub version: u64,
    pub size: u64,
    pub time_start: Option<String>,
    pub time_end: Option<String>,
}

/// A discontinuity between two consecutive files (in time order): `after` ends at
/// `from`, `before` starts at `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Break {
    /// End of the earlier file.
    pub from: String,
    /// Start of the later file.
    pub to: String,
    /// Name of the earlier file.
    pub after: String,
    /// Name of the later file.
    pub before: String,
}

/// One dataset version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Dataset {
    /// ESGF instance id: master id, `.`, version (`CMIP6.CMIP.CCCma.CanESM5.historical.r1i1p1f1.Amon.tas.gn.v20190429`);
    /// the master id when the files carry no DRS version.
    pub instance_id: String,
    /// The directory's components joined by dots, the first written as the project
    /// when they agree ignoring case.
    pub master_id: String,
    /// DRS version (`v20190429`), `""` when the files carry none.
    pub version: String,
    /// The dataset's directory in the name tree (its files are under it).
    pub name: String,
    pub project: String,
    /// Facets every file carries with the same value.
    pub facets: BTreeMap<String, String>,
    pub number_of_files: u64,
    pub size: u64,
    /// Earliest file start.
    pub time_start: Option<String>,
    /// Latest file end.
    pub time_end: Option<String>,
    /// True when every file has a time range and there is no gap nor overlap.
    pub contiguous: bool,
    pub gaps: Vec<Break>,
    pub overlaps: Vec<Break>,
    /// Files without a time range (not part of the contiguity check).
    pub untimed_files: u64,
    /// The time step the tolerance was taken from (`mon`), if the dataset has one.
    pub frequency: Option<String>,
    /// True when no other version of the same master id is newer.
    pub latest: bool,
    /// The files, in name order (only when asked for).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<DatasetFile>,
}

/// A dataset search: the files' query (its filters, text, time and prefix select the
/// datasets holding at least one matching member; `latest_only` and `sort` are
/// ignored: datasets come in instance-id order), which dataset versions, and whether
/// to list the files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct DatasetQuery {
    pub query: Query,
    /// `true`: only the newest version of each master id; `false`: only older ones;
    /// absent: every version.
    pub latest: Option<bool>,
    /// Only these datasets (instance ids, or master ids for every version; a `|node`
    /// suffix is ignored).
    pub ids: Vec<String>,
    /// List each dataset's files.
    pub files: bool,
}

/// Most ids in one dataset query.
pub const MAX_IDS: usize = 10_000;

impl DatasetQuery {
    pub fn validate(&self) -> Result<()> {
        self.query.validate()?;
        if self.ids.len() > MAX_IDS {
            return invalid(format!(
                "{} dataset ids, more than {MAX_IDS}",
                self.ids.len()
            ));
        }
        for id in &self.ids {
            crate::record::check_plain("dataset id", id, crate::record::MAX_VALUE)?;
        }
        if self.query.limit > crate::MAX_LIMIT {
            return invalid("limit too large");
        }
        Ok(())
    }
}

/// One page of datasets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct DatasetPage {
    pub total: u64,
    pub hits: Vec<Dataset>,
    /// Per facet, how many matching datasets carry each value (a dataset counts with
    /// the values of its first file).
    pub facet_counts: BTreeMap<String, Vec<(String, u64)>>,
}

/// The dataset directory of a record name: the name without its file name, and without
/// the next component too when it equals the `variable` facet.
pub fn dataset_dir<'a>(name: &'a str, variable: Option<&str>) -> &'a str {
    let dir = name.rfind('/').map_or("", |k| &name[..k]);
    if let Some(v) = variable {
        if let Some(k) = dir.rfind('/') {
            if &dir[k + 1..] == v && k > 0 {
                return &dir[..k];
            }
        }
    }
    dir
}

/// Master id of a dataset directory: its components joined by dots, the first written
/// as `project` when they agree ignoring case.
pub fn master_id(dir: &str, project: &str) -> String {
    let mut comps: Vec<&str> = dir.split('/').filter(|c| !c.is_empty()).collect();
    if let Some(first) = comps.first_mut() {
        if !project.is_empty() && first.eq_ignore_ascii_case(project) {
            *first = project;
        }
    }
    comps.join(".")
}

/// Instance id from master id and version.
pub fn instance_id(master: &str, version: &str) -> String {
    if version.is_empty() {
        master.to_string()
    } else {
        format!("{master}.{version}")
    }
}

/// The (directory, version) keys an instance or master id may stand for: the
/// directory's first component as written, lower- and upper-cased; the last dot-part
/// as the version, or no version (`None` version: every version of the master id).
pub(crate) fn id_keys(id: &str) -> Vec<(String, Option<String>)> {
    let id = id.split('|').next().unwrap_or("");
    let mut out = Vec::new();
    let dirs = |master: &str| -> Vec<String> {
        let comps: Vec<&str> = master.split('.').filter(|c| !c.is_empty()).collect();
        let Some((first, rest)) = comps.split_first() else {
            return Vec::new();
        };
        let mut v = Vec::new();
        for f in [
            first.to_string(),
            first.to_lowercase(),
            first.to_uppercase(),
        ] {
            let mut d = format!("/{f}");
            for r in rest {
                d.push('/');
                d.push_str(r);
            }
            if !v.contains(&d) {
                v.push(d);
            }
        }
        v
    };
    if let Some((master, version)) = id.rsplit_once('.') {
        for d in dirs(master) {
            out.push((d, Some(version.to_string())));
        }
    }
    for d in dirs(id) {
        out.push((d.clone(), Some(String::new())));
        out.push((d, None));
    }
    out
}

/// The tolerance of a frequency: the longest step between one file's end and the next
/// file's start still counted as contiguous, in seconds of [`time_seconds`]. A file's
/// coverage runs from its first to its last time value (or bound): with bounds,
/// consecutive files meet exactly; with values at mid-interval, the next file starts
/// one step later. So a gap is a step longer than 1.5 steps of the frequency; with no
/// known frequency, any step longer than zero is a gap.
pub fn tolerance(frequency: Option<&str>) -> i64 {
    const DAY: i64 = 86_400;
    let step = match frequency.map(|f| f.trim_end_matches("Pt").trim_end_matches("CM")) {
        Some("subhr") => 1800,
        Some("1hr") => 3600,
        Some("3hr") => 3 * 3600,
        Some("6hr") => 6 * 3600,
        Some("day") => DAY,
        Some("mon" | "monC") => 31 * DAY,
        Some("yr" | "yrC") => 372 * DAY,
        Some("dec") => 3720 * DAY,
        _ => 0,
    };
    step + step / 2
}

/// Seconds of an ISO-8601 time (`[-]YYYY-MM-DD[THH:MM[:SS[.f]]]`) on a uniform calendar
/// of 31-day months and 372-day years: monotonic in every CF calendar (360-day, noleap,
/// Gregorian), and within a day per month of the true length, which the tolerance
/// allows for. `None` when the text is not such a time.
pub fn time_seconds(t: &str) -> Option<i64> {
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let (date, clock) = t.split_once(['T', ' ']).unwrap_or((t, ""));
    let mut d = date.split('-');
    let y: i64 = d.next()?.parse().ok()?;
    let m: i64 = d.next().map_or(Some(1), |s| s.parse().ok())?;
    let day: i64 = d.next().map_or(Some(1), |s| s.parse().ok())?;
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let clock = clock.trim_end_matches('Z');
    let mut c = clock.split(':');
    let mut part = || -> Option<i64> {
        match c.next() {
            None | Some("") => Some(0),
            Some(s) => s.split('.').next()?.parse().ok(),
        }
    };
    let (h, mi, s) = (part()?, part()?, part()?);
    let y = if neg { -y } else { y };
    Some((((y * 12 + m - 1) * 31 + day - 1) * 24 + h) * 3600 + mi * 60 + s)
}

/// Fills `ds`'s time coverage and contiguity from its files (any order).
pub(crate) fn check_contiguity(ds: &mut Dataset, files: &[DatasetFile]) {
    let tol = tolerance(ds.frequency.as_deref());
    let mut timed: Vec<(&DatasetFile, &str, &str)> = Vec::new();
    ds.untimed_files = 0;
    for f in files {
        match (&f.time_start, &f.time_end) {
            (Some(s), Some(e)) => timed.push((f, s, e)),
            _ => ds.untimed_files += 1,
        }
    }
    ds.time_start = timed.iter().map(|t| t.1).min().map(str::to_string);
    ds.time_end = timed.iter().map(|t| t.2).max().map(str::to_string);
    let key = |s: &str| time_seconds(s).map_or((1, 0, s.to_string()), |x| (0, x, String::new()));
    timed.sort_by(|a, b| {
        key(a.1)
            .cmp(&key(b.1))
            .then_with(|| key(a.2).cmp(&key(b.2)))
            .then_with(|| a.0.name.cmp(&b.0.name))
    });
    ds.gaps.clear();
    ds.overlaps.clear();
    // The latest end so far: a file inside an earlier one overlaps it.
    let mut prev: Option<(&DatasetFile, &str)> = None;
    for &(f, s, e) in &timed {
        if let Some((pf, pe)) = prev {
            let brk = || Break {
                from: pe.to_string(),
                to: s.to_string(),
                after: pf.name.clone(),
                before: f.name.clone(),
            };
            match (time_seconds(pe), time_seconds(s)) {
                (Some(a), Some(b)) if b < a => ds.overlaps.push(brk()),
                (Some(a), Some(b)) if b - a > tol => ds.gaps.push(brk()),
                (Some(_), Some(_)) => {}
                // Not parseable: compared as strings, exact meeting only.
                _ if s < pe => ds.overlaps.push(brk()),
                _ if s > pe => ds.gaps.push(brk()),
                _ => {}
            }
        }
        let later = prev.is_none_or(|(_, pe)| key(e) > key(pe));
        if later {
            prev = Some((f, e));
        }
    }
    ds.contiguous = ds.untimed_files == 0 && ds.gaps.is_empty() && ds.overlaps.is_empty();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str, s: &str, e: &str) -> DatasetFile {
        DatasetFile {
            name: name.into(),
            version: 1,
            size: 1,
            time_start: Some(s.into()),
            time_end: Some(e.into()),
        }
    }

    #[test]
    fn dirs_and_ids() {
        assert_eq!(
            dataset_dir("/cmip6/CMIP/a/tas/gn/f.nc", Some("x")),
            "/cmip6/CMIP/a/tas/gn"
        );
        assert_eq!(
            dataset_dir("/cmip5/output1/MOHC/r1i1p1/tas/f.nc", Some("tas")),
            "/cmip5/output1/MOHC/r1i1p1"
        );
        assert_eq!(dataset_dir("/f.nc", None), "");
        assert_eq!(master_id("/cmip6/CMIP/CCCma", "CMIP6"), "CMIP6.CMIP.CCCma");
        assert_eq!(instance_id("a.b", "v1"), "a.b.v1");
        let k = id_keys("CMIP6.CMIP.x.v20190101|node");
        assert!(k.contains(&("/cmip6/CMIP/x".into(), Some("v20190101".into()))));
        assert!(k.contains(&("/CMIP6/CMIP/x/v20190101".into(), None)));
    }

    #[test]
    fn times_parse() {
        assert_eq!(time_seconds("0000-01-01"), Some(0));
        assert_eq!(time_seconds("0000-01-02T00:00:01"), Some(86_401));
        assert_eq!(
            time_seconds("2000-02-30T12:00:00").map(|x| x > 0),
            Some(true)
        );
        assert_eq!(time_seconds("x"), None);
        assert_eq!(time_seconds("2000-13-01"), None);
        assert!(time_seconds("1850-01-16T12:00:00") < time_seconds("1850-02-15T00:00:00"));
    }

    #[test]
    fn bounds_meet_midpoints_step_and_gaps_overlaps_found() {
        // Bounds: consecutive files meet exactly.
        let mut d = Dataset {
            frequency: Some("mon".into()),
            ..Default::default()
        };
        let files = [
            f("b", "1900-01-01T00:00:00", "1950-01-01T00:00:00"),
            f("a", "1850-01-01T00:00:00", "1900-01-01T00:00:00"),
        ];
        check_contiguity(&mut d, &files);
        assert!(d.contiguous, "{d:?}");
        assert_eq!(d.time_start.as_deref(), Some("1850-01-01T00:00:00"));
        assert_eq!(d.time_end.as_deref(), Some("1950-01-01T00:00:00"));
        // Mid-month values: one step apart is contiguous; a missing month is a gap.
        let files = [
            f("a", "1850-01-16T12:00:00", "1850-12-16T12:00:00"),
            f("b", "1851-01-16T12:00:00", "1851-12-16T12:00:00"),
            f("c", "1852-02-15T00:00:00", "1852-12-16T12:00:00"),
            f("d", "1852-06-16T00:00:00", "1853-12-16T12:00:00"),
        ];
        check_contiguity(&mut d, &files);
        assert!(!d.contiguous);
        assert_eq!(d.gaps.len(), 1);
        assert_eq!(
            (d.gaps[0].after.as_str(), d.gaps[0].before.as_str()),
            ("b", "c")
        );
        assert_eq!(d.overlaps.len(), 1);
        assert_eq!(
            (d.overlaps[0].after.as_str(), d.overlaps[0].before.as_str()),
            ("c", "d")
        );
        // Daily: a missing day is a gap; no frequency: any step is one.
        d.frequency = Some("day".into());
        let files = [
            f("a", "2000-01-01T12:00:00", "2000-01-31T12:00:00"),
            f("b", "2000-02-02T12:00:00", "2000-02-28T12:00:00"),
        ];
        check_contiguity(&mut d, &files);
        assert_eq!(d.gaps.len(), 1);
        d.frequency = None;
        let files = [
            f("a", "2000-01-01", "2000-01-31"),
            f("b", "2000-01-31", "2000-02-28"),
        ];
        check_contiguity(&mut d, &files);
        assert!(d.contiguous);
        let mut g = files.to_vec();
        g[1].time_start = None;
        check_contiguity(&mut d, &g);
        assert!(!d.contiguous);
        assert_eq!(d.untimed_files, 1);
    }
}
