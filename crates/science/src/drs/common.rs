//! Shared checks: splitting an input path, telling CMIP6 from CMIP5, time ranges; and
//! what the CMIP5 and CMIP6 parsers share: splitting the file name into fields, directory
//! against file name, vocabulary refusals, choosing among several owners, building a file
//! name, and the checks of a reverse translation.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::outcome::{Error, Fix, FixCode, Parsed};
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

/// The `_`-separated fields of a file name, without `.nc`.
pub(crate) fn fields(file: &str) -> Vec<&str> {
    file.strip_suffix(".nc")
        .unwrap_or(file)
        .split('_')
        .collect()
}

/// Parses the fields after the mandatory ones ([`parse_tail`]) into `p`: its fixes and
/// time range. Returns the CMIP5 geographical field.
pub(crate) fn tail_into(
    p: &mut Parsed,
    rest: &[&str],
    freq: &str,
    allow_geo: bool,
) -> Result<Option<String>, String> {
    let tail = parse_tail(rest, freq, allow_geo)?;
    p.fixes.extend(tail.fixes);
    p.time_range = tail.time_range;
    Ok(tail.geo)
}

/// Each `(facet, directory value, file-name value)` must agree.
pub(crate) fn agree<'a>(
    checks: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
) -> Result<(), String> {
    for (facet, dv, fv) in checks {
        if dv != fv {
            return Err(format!(
                "directory says {facet} '{}' but the file name says '{}'",
                dv.escape_default(),
                fv.escape_default()
            ));
        }
    }
    Ok(())
}

/// Why `value` of `facet` is refused: not in the `project`'s vocabulary.
pub(crate) fn not_in_vocab(project: &str, facet: &str, value: &str) -> String {
    format!(
        "{facet} '{}' is not in the {project} vocabulary",
        value.escape_default()
    )
}

/// `Ok` when `known`, else the refusal of [`not_in_vocab`].
pub(crate) fn in_vocab(project: &str, facet: &str, value: &str, known: bool) -> Result<(), String> {
    if known {
        Ok(())
    } else {
        Err(not_in_vocab(project, facet, value))
    }
}

/// The one of `options` (the institutions of a model, the activities of an experiment):
/// the only one, or the one the attribute names (its whole value, or with `by_word` its
/// first word that is an option). `owner` says whose options they are in the refusal.
pub(crate) fn one_of(
    options: &[String],
    attrs: Option<&BTreeMap<String, String>>,
    attribute: &str,
    by_word: bool,
    owner: &str,
    plural: &str,
) -> Result<String, String> {
    if let [one] = options {
        return Ok(one.clone());
    }
    let given = attrs.and_then(|a| a.get(attribute));
    let chosen = if by_word {
        given.and_then(|g| {
            g.split_whitespace()
                .find(|w| options.iter().any(|o| o == w))
        })
    } else {
        given
            .map(String::as_str)
            .filter(|g| options.iter().any(|o| o == g))
    };
    chosen.map(str::to_string).ok_or_else(|| {
        format!(
            "{owner} belongs to several {plural} ({}); give the directory path or an {attribute} attribute",
            options.join(", ")
        )
    })
}

/// `fields` joined by `_`, then each optional field present, then `.nc`.
pub(crate) fn file_name(fields: &[&str], optional: &[Option<&str>]) -> String {
    let mut s = fields.join("_");
    for x in optional.iter().flatten() {
        s.push('_');
        s.push_str(x);
    }
    s.push_str(".nc");
    s
}

/// The directory of a canonical path: `top`, the values of `keys` in `facets` (empty
/// when absent), then `after`.
pub(crate) fn facet_dirs<'a>(
    top: &'a str,
    facets: &'a BTreeMap<String, String>,
    keys: &[&str],
    after: &[&'a str],
) -> Vec<&'a str> {
    let mut dirs = vec![top];
    dirs.extend(
        keys.iter()
            .map(|k| facets.get(*k).map_or("", String::as_str)),
    );
    dirs.extend(after);
    dirs
}

/// The checks a reverse translation starts with: `c` (the name after the root) has `n`
/// components, the version is `v<N>`, every component but the file name is a token.
/// Returns the file name.
pub(crate) fn reverse_parts<'a>(
    project: &str,
    n: usize,
    c: &'a [String],
    version: &str,
) -> Result<&'a String, Error> {
    if c.len() != n {
        return Err(Error::Reverse(format!(
            "a {project} name has {n} components after the root, this one has {}",
            c.len()
        )));
    }
    if !VERSION.is_match(version) {
        return Err(Error::Reverse(format!("version '{version}' is not v<N>")));
    }
    for x in &c[..n - 1] {
        token("name component", x).map_err(Error::Reverse)?;
    }
    Ok(&c[n - 1])
}

/// A reversed file name must be `prefix` followed by `.nc` or by more `_` fields.
pub(crate) fn starts_as_named(file: &str, prefix: &str) -> Result<(), Error> {
    let rest = file.strip_prefix(prefix);
    if !file.ends_with(".nc") || !matches!(rest, Some(r) if r == ".nc" || r.starts_with('_')) {
        return Err(Error::Reverse(format!(
            "file name '{file}' does not start with '{prefix}' as the name's facets say"
        )));
    }
    Ok(())
}
