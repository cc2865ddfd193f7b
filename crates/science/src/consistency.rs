//! Cross-checks between what a file's DRS name says and what its netCDF contents say,
//! beyond the attribute checks of `drs` (which compare facets with global attributes):
//! today the name's time range against the decoded time axis.
//!
//! A disagreement never rejects a file: it is recorded in the translation's
//! `mismatches`, where `publish-dir`, the catalog record, the API and the page show it.

use crate::drs::{Mismatch, Outcome};
use crate::netcdf::calendar::{Calendar, DateTime};
use crate::netcdf::{NcMeta, TimeCoverage};

/// Adds to `outcome.mismatches` what the file's contents contradict in its name.
pub fn check(outcome: &mut Outcome, nc: Option<&NcMeta>) {
    let (Some(range), Some(cov)) = (
        outcome.time_range.as_deref(),
        nc.and_then(|n| n.time.as_ref()),
    ) else {
        return;
    };
    // Cell bounds are 2-D (`time_bnds(time, bnds)`); time values are 1-D.
    let bounds = nc
        .and_then(|n| n.variables.iter().find(|v| v.name == cov.from_variable))
        .is_some_and(|v| v.dims.len() == 2);
    if let Some(m) = time_range_mismatch(range, cov, bounds) {
        outcome.mismatches.push(m);
    }
}

/// The mismatch between a DRS time range (`185001-201412`, `20000101-20091231`,
/// `1850-2014`, `200001010000-200012312100`, one stamp alone) and the time axis the
/// file holds (`bounds`: the coverage was taken from cell bounds), if any. Climatologies (`-clim`) and stamps that do not parse are not
/// judged (`None`).
///
/// The rule: each stamp names a period as long as its precision (a year, a month, a day,
/// an hour, a minute, a second) in the file's own calendar. The axis must start in the
/// first period and end in the last: with cell bounds (`time_bnds`), the first lower
/// bound lies in `[first, first + 1 period)` and the last upper bound in
/// `(last, last + 1 period]`; with time values alone, both lie in their period.
pub fn time_range_mismatch(range: &str, cov: &TimeCoverage, bounds: bool) -> Option<Mismatch> {
    if range.ends_with("clim") {
        return None;
    }
    let (a, b) = match range.split_once('-') {
        Some((a, b)) => (a, b),
        None => (range, range),
    };
    let cal = Calendar::parse(&cov.calendar)?;
    let (first, first_next) = period(a, cal)?;
    let (last, last_next) = period(b, cal)?;
    let start = parse_iso(&cov.start)?;
    let end = parse_iso(&cov.end)?;
    let start_ok = first <= start && start < first_next;
    let end_ok = if bounds {
        last < end && end <= last_next
    } else {
        last <= end && end < last_next
    };
    if start_ok && end_ok {
        return None;
    }
    Some(Mismatch {
        facet: "time_range".into(),
        attribute: cov.from_variable.clone(),
        name_value: format!("{range} ({first} to {last_next})"),
        attribute_value: format!("{} to {}", cov.start, cov.end),
    })
}

/// A DRS time stamp -> (start of its period, start of the next period).
fn period(stamp: &str, cal: Calendar) -> Option<(DateTime, DateTime)> {
    if !stamp.bytes().all(|b| b.is_ascii_digit()) || ![4, 6, 8, 10, 12, 14].contains(&stamp.len()) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| stamp.get(r).and_then(|s| s.parse::<i64>().ok());
    let year = num(0..4)?;
    let month = u8::try_from(num(4..6).unwrap_or(1)).ok()?;
    let day = u8::try_from(num(6..8).unwrap_or(1)).ok()?;
    let hour = u8::try_from(num(8..10).unwrap_or(0)).ok()?;
    let minute = u8::try_from(num(10..12).unwrap_or(0)).ok()?;
    let second = u8::try_from(num(12..14).unwrap_or(0)).ok()?;
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let day_no = cal.day_number(year, month, day)?;
    let start = DateTime {
        year,
        month,
        day,
        hour,
        minute,
        second,
    };
    let next = match stamp.len() {
        4 => DateTime {
            year: year + 1,
            month: 1,
            day: 1,
            ..Default::default()
        },
        6 => {
            let (y, m) = if month == 12 {
                (year + 1, 1)
            } else {
                (year, month + 1)
            };
            DateTime {
                year: y,
                month: m,
                day: 1,
                ..Default::default()
            }
        }
        n => {
            let step = match n {
                8 => 86_400,
                10 => 3_600,
                12 => 60,
                _ => 1,
            };
            let secs = day_no * 86_400
                + i64::from(hour) * 3_600
                + i64::from(minute) * 60
                + i64::from(second)
                + step;
            let (y, m, d) = cal.date(secs.div_euclid(86_400));
            let s = secs.rem_euclid(86_400);
            DateTime {
                year: y,
                month: m,
                day: d,
                hour: (s / 3_600) as u8,
                minute: (s % 3_600 / 60) as u8,
                second: (s % 60) as u8,
            }
        }
    };
    Some((start, next))
}

/// `1850-01-16T12:00:00` (a sign before years outside 0..=9999) -> a date.
fn parse_iso(s: &str) -> Option<DateTime> {
    let (date, time) = s.split_once('T').unwrap_or((s, "00:00:00"));
    let (sign, date) = match date.as_bytes().first() {
        Some(b'-') => (-1, &date[1..]),
        Some(b'+') => (1, &date[1..]),
        _ => (1, date),
    };
    let mut d = date.split('-');
    let year: i64 = d.next()?.parse().ok()?;
    let month: u8 = d.next()?.parse().ok()?;
    let day: u8 = d.next()?.parse().ok()?;
    let mut t = time.split(':');
    let hour: u8 = t.next()?.parse().ok()?;
    let minute: u8 = t.next().unwrap_or("0").parse().ok()?;
    let second: u8 = t.next().unwrap_or("0").parse().ok()?;
    Some(DateTime {
        year: sign * year,
        month,
        day,
        hour,
        minute,
        second,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cov(start: &str, end: &str, var: &str, cal: &str) -> TimeCoverage {
        TimeCoverage {
            start: start.into(),
            end: end.into(),
            calendar: cal.into(),
            units: "days since 1850-01-01".into(),
            from_variable: var.into(),
        }
    }

    #[test]
    fn monthly_file_whose_axis_is_a_month_early_is_a_mismatch() {
        // The case: named 200701-200712, the axis runs 2006-12-01 -> 2007-12-01.
        let c = cov(
            "2006-12-01T00:00:00",
            "2007-12-01T00:00:00",
            "time_bnds",
            "standard",
        );
        let m = time_range_mismatch("200701-200712", &c, true).expect("a mismatch");
        assert_eq!(m.facet, "time_range");
        assert_eq!(m.attribute, "time_bnds");
        assert!(m
            .name_value
            .starts_with("200701-200712 (2007-01-01T00:00:00 to 2008-01-01T00:00:00)"));
        // The same axis without bounds (mid-month values) is checked per period too.
        let c = cov(
            "2006-12-16T12:00:00",
            "2007-11-16T00:00:00",
            "time",
            "standard",
        );
        assert!(time_range_mismatch("200701-200712", &c, false).is_some());
    }

    #[test]
    fn agreeing_axes_in_every_precision_and_calendar_pass() {
        let ok = [
            (
                "185001-201412",
                "1850-01-01T00:00:00",
                "2015-01-01T00:00:00",
                "time_bnds",
                "noleap",
            ),
            (
                "185001-201412",
                "1850-01-16T12:00:00",
                "2014-12-16T12:00:00",
                "time",
                "360_day",
            ),
            (
                "20000101-20091231",
                "2000-01-01T00:00:00",
                "2010-01-01T00:00:00",
                "time_bnds",
                "standard",
            ),
            (
                "20000101-20001230",
                "2000-01-01T00:00:00",
                "2001-01-01T00:00:00",
                "time_bnds",
                "360_day",
            ),
            (
                "1850-2014",
                "1850-01-01T00:00:00",
                "2015-01-01T00:00:00",
                "time_bnds",
                "standard",
            ),
            (
                "200001010000-200012311800",
                "2000-01-01T00:00:00",
                "2000-12-31T18:00:00",
                "time",
                "noleap",
            ),
            (
                "20051201",
                "2005-12-01T12:00:00",
                "2005-12-01T12:00:00",
                "time",
                "standard",
            ),
        ];
        for (r, s, e, v, cal) in ok {
            assert_eq!(
                time_range_mismatch(r, &cov(s, e, v, cal), v != "time"),
                None,
                "{r} {s} {e}"
            );
        }
    }

    #[test]
    fn axes_that_overrun_or_fall_short_are_mismatches_and_odd_stamps_are_not_judged() {
        let bad = [
            // one month too many at the end
            (
                "185001-201412",
                "1850-01-01T00:00:00",
                "2015-02-01T00:00:00",
                "time_bnds",
            ),
            // ends a year early
            (
                "185001-201412",
                "1850-01-01T00:00:00",
                "2014-01-01T00:00:00",
                "time_bnds",
            ),
            // starts a day late
            (
                "20000101-20091231",
                "2000-01-02T00:00:00",
                "2010-01-01T00:00:00",
                "time_bnds",
            ),
        ];
        for (r, s, e, v) in bad {
            assert!(
                time_range_mismatch(r, &cov(s, e, v, "standard"), v != "time").is_some(),
                "{r}"
            );
        }
        let c = cov(
            "1850-01-01T00:00:00",
            "1900-01-01T00:00:00",
            "time_bnds",
            "standard",
        );
        assert_eq!(time_range_mismatch("185001-201412-clim", &c, true), None);
        assert_eq!(time_range_mismatch("18501-2014", &c, true), None);
        assert_eq!(time_range_mismatch("185013-201412", &c, true), None);
    }
}
