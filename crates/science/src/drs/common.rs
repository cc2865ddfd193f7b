//! Shared checks: splitting an input path, telling CMIP6 from CMIP5, time ranges.

use std::sync::LazyLock;

use regex::Regex;

use super::outcome::{Fix, FixCode};
use super::vocab;

pub(crate) const MAX_INPUT: usize = 4096;
pub(crate) const MAX_COMPONENT: usize = 255;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Project {
    Cmip6,
    Cmip5,
}

static TOKEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9][A-Za-z0-9.()+-]{0,63}$").expect("static regex"));
static TIME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([0-9]{4,14})-([0-9]{4,14})(-clim)?$").expect("static regex"));
static MEMBER6: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(s[0-9]{4}-)?r[0-9]+i[0-9]+p[0-9]+f[0-9]+$").expect("static regex")
});
static MEMBER5: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^r[0-9]+i[0-9]+p[0-9]+$").expect("static regex"));
pub(crate) static VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^v[0-9]+$").expect("static regex"));

/// Split an input into its directory components and file name, refusing anything that is
/// not a plain relative-or-absolute path to a `.nc` file.
pub(crate) fn split_input(path: &str) -> Result<(Vec<&str>, &str), String> {
    if path.trim().is_empty() {
        return Err("empty input".into());
    }
    if path.len() > MAX_INPUT {
        return Err(format!(
            "input is {} bytes long; at most {MAX_INPUT} are accepted",
            path.len()
        ));
    }
    if let Some(c) = path
        .chars()
        .find(|c| c.is_control() || *c == '\u{FFFD}' || *c == '\\')
    {
        return Err(format!(
            "input contains the character U+{:04X}, which no DRS path holds",
            c as u32
        ));
    }
    if path.ends_with('/') {
        return Err("input ends with '/': no file name".into());
    }
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    for c in &comps {
        if *c == "." || *c == ".." {
            return Err(format!("path component '{c}' is not allowed"));
        }
        if c.len() > MAX_COMPONENT {
            return Err(format!(
                "a path component is {} bytes long; at most {MAX_COMPONENT} are accepted",
                c.len()
            ));
        }
    }
    let Some((file, dirs)) = comps.split_last() else {
        return Err("empty input".into());
    };
    if !file.ends_with(".nc") {
        return Err(format!("file name '{file}' does not end in .nc"));
    }
    Ok((dirs.to_vec(), file))
}

/// Check a facet value taken from the input: letters, digits and `. ( ) + -`.
pub(crate) fn token(facet: &str, v: &str) -> Result<(), String> {
    if TOKEN.is_match(v) {
        Ok(())
    } else if v.is_empty() {
        Err(format!("{facet} is empty"))
    } else {
        Err(format!(
            "{facet} '{}' has characters other than letters, digits and . ( ) + - (or is over 64 long)",
            v.escape_default()
        ))
    }
}

/// Which built-in syntax an input is written in.
pub(crate) fn detect_project(dirs: &[&str], file: &str) -> Result<Project, String> {
    for d in dirs.iter().rev() {
        if *d == "CMIP6" {
            return Ok(Project::Cmip6);
        }
        if d.eq_ignore_ascii_case("cmip5") {
            return Ok(Project::Cmip5);
        }
    }
    if file.starts_with("gridspec_") {
        return Ok(Project::Cmip5);
    }
    let stem = file.trim_end_matches(".nc");
    let f: Vec<&str> = stem.split('_').collect();
    let (Ok(v6), Ok(v5)) = (vocab::cmip6(), vocab::cmip5()) else {
        return Err("vocabularies failed to load".into());
    };
    let get = |i: usize| f.get(i).copied().unwrap_or("");
    let mut s6 = 0;
    let mut s5 = 0;
    if MEMBER6.is_match(get(4)) {
        s6 += 2;
    }
    if MEMBER5.is_match(get(4)) {
        s5 += 1;
    }
    if v6.tables.contains(get(1)) {
        s6 += 1;
    }
    if v5.tables.contains_key(get(1)) {
        s5 += 1;
    }
    if v6.sources.contains_key(get(2)) || v6.sources.contains_key(get(3)) {
        s6 += 2;
    }
    if v5.canonical_model(get(2)).is_some() || v5.canonical_model(get(3)).is_some() {
        s5 += 2;
    }
    if f.iter().skip(5).any(|x| v6.grids.contains(*x)) {
        s6 += 1;
    }
    match s6.cmp(&s5) {
        std::cmp::Ordering::Greater => Ok(Project::Cmip6),
        std::cmp::Ordering::Less => Ok(Project::Cmip5),
        std::cmp::Ordering::Equal => Err(format!(
            "cannot tell whether '{file}' is CMIP6 or CMIP5 (no CMIP6/cmip5 directory, and its fields fit both or neither vocabulary)"
        )),
    }
}

/// Digits a time range has at a frequency (None: any).
fn digits_for(freq: &str) -> Option<&'static [usize]> {
    Some(match freq {
        "yr" | "yrPt" | "dec" => &[4],
        "mon" | "monC" | "monPt" | "monClim" => &[6],
        "day" => &[8],
        "1hr" | "1hrPt" | "1hrCM" | "3hr" | "3hrPt" | "6hr" | "6hrPt" | "subhr" | "subhrPt" => {
            &[10, 12, 14]
        }
        "fx" => &[],
        _ => return None,
    })
}

/// What follows the mandatory file-name fields.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    pub time_range: Option<String>,
    /// CMIP5 geographical subset (`g-...`).
    pub geo: Option<String>,
    pub fixes: Vec<Fix>,
}

/// Parse the optional fields after the mandatory ones: a time range (with `-clim`, or a
/// separate `clim` field), a CMIP5 geographical field (`g-…`) when `allow_geo`, and extra
/// fields (dropped with a fix).
pub(crate) fn parse_tail(rest: &[&str], freq: &str, allow_geo: bool) -> Result<Tail, String> {
    let mut t = Tail::default();
    let mut i = 0;
    if let Some(first) = rest.first() {
        if let Some(c) = TIME.captures(first) {
            let (a, b, clim) = (&c[1], &c[2], c.get(3).is_some());
            let (a, b) = check_range(a, b, freq, &mut t.fixes)?;
            t.time_range = Some(format!("{a}-{b}"));
            if clim {
                t.fixes.push(Fix {
                    code: FixCode::ClimSuffix,
                    detail: "climatology suffix '-clim' kept in the time range".into(),
                });
                t.time_range = Some(format!("{a}-{b}-clim"));
            }
            i = 1;
        } else if !(allow_geo && first.starts_with("g-")) && *first != "clim" {
            return Err(format!(
                "field '{}' where a time range (YYYY[MM[DD[hh[mm]]]]-YYYY…) is expected",
                first.escape_default()
            ));
        }
    }
    for x in &rest[i..] {
        if *x == "clim"
            && t.time_range
                .as_deref()
                .is_some_and(|r| !r.ends_with("-clim"))
        {
            let r = t.time_range.take().unwrap_or_default();
            t.time_range = Some(format!("{r}-clim"));
            t.fixes.push(Fix {
                code: FixCode::ClimSuffix,
                detail: "climatology suffix '_clim' normalised to '-clim'".into(),
            });
        } else if allow_geo && x.starts_with("g-") && t.geo.is_none() {
            token("geographical subset", x)?;
            t.geo = Some(x.to_string());
        } else {
            t.fixes.push(Fix {
                code: FixCode::ExtraSuffix,
                detail: format!(
                    "dropped field '{}' after the time range",
                    x.escape_default()
                ),
            });
        }
    }
    if freq == "fx" && t.time_range.is_some() {
        return Err("fx (time-invariant) files have no time range".into());
    }
    Ok(t)
}

fn check_range(
    a: &str,
    b: &str,
    freq: &str,
    fixes: &mut Vec<Fix>,
) -> Result<(String, String), String> {
    if a.len() != b.len() {
        return Err(format!(
            "time range '{a}-{b}' has ends of different precision"
        ));
    }
    if a > b {
        return Err(format!("time range '{a}-{b}' starts after it ends"));
    }
    if !matches!(a.len(), 4 | 6 | 8 | 10 | 12 | 14) {
        return Err(format!(
            "time range '{a}-{b}' is not YYYY[MM[DD[hh[mm[ss]]]]]"
        ));
    }
    for s in [a, b] {
        if s.len() >= 6
            && !matches!(
                &s[4..6],
                "01" | "02" | "03" | "04" | "05" | "06" | "07" | "08" | "09" | "10" | "11" | "12"
            )
        {
            return Err(format!("time range '{a}-{b}' has month {}", &s[4..6]));
        }
        if s.len() >= 8 && !(1..=31).contains(&s[6..8].parse::<u32>().unwrap_or(0)) {
            return Err(format!("time range '{a}-{b}' has day {}", &s[6..8]));
        }
    }
    let Some(want) = digits_for(freq) else {
        return Ok((a.into(), b.into()));
    };
    if want.contains(&a.len()) || want.is_empty() {
        return Ok((a.into(), b.into()));
    }
    let min = want.iter().copied().min().unwrap_or(4);
    if a.len() > min {
        return Err(format!(
            "time range '{a}-{b}' is finer than the frequency '{freq}' allows"
        ));
    }
    if a.len() == 4 && min == 6 {
        fixes.push(Fix {
            code: FixCode::TimeRangeYearOnly,
            detail: format!("'{a}-{b}' normalised to '{a}01-{b}12'"),
        });
        return Ok((format!("{a}01"), format!("{b}12")));
    }
    let code = if a.len() == 4 {
        FixCode::TimeRangeYearOnly
    } else {
        FixCode::TimeRangeMonthOnly
    };
    fixes.push(Fix {
        code,
        detail: format!("'{a}-{b}' is coarser than frequency '{freq}'; accepted as written"),
    });
    Ok((a.into(), b.into()))
}
