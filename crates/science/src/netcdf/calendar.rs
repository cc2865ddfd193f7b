//! CF calendars and time units: exact integer arithmetic, no floating dates.
//!
//! A date is turned into a day number of its calendar, the offset (rounded to whole
//! seconds) is added, and the result turned back into a date. Years are astronomical
//! (year 0 exists) in every calendar.

use std::fmt;

use granary_packet::calendar as gregorian;

/// The CF calendars (CF conventions 1.11, section 4.4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Calendar {
    /// `standard` / `gregorian`: Julian before 1582-10-15, Gregorian from then on.
    Standard,
    ProlepticGregorian,
    /// `noleap` / `365_day`.
    NoLeap,
    /// `all_leap` / `366_day`.
    AllLeap,
    /// `360_day`: twelve months of 30 days.
    Day360,
    Julian,
}

/// Why a time value could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    #[error("unknown calendar {0:?}")]
    UnknownCalendar(String),
    #[error("time units {0:?} are not of the form '<unit> since <date>'")]
    BadUnits(String),
    #[error("time unit {0:?} is not supported (days, hours, minutes, seconds, ms, us)")]
    UnsupportedUnit(String),
    #[error("date {0:?} does not exist in the {1:?} calendar")]
    InvalidDate(String, Calendar),
    #[error("time value {0} is not finite or out of range")]
    OutOfRange(String),
}

/// A calendar date and time of day, to the second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct DateTime {
    pub year: i64,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
}

impl fmt::Display for DateTime {
    /// ISO 8601 without a zone: `1850-01-16T12:00:00` (years beyond 0..=9999 keep a sign).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if (0..=9999).contains(&self.year) {
            write!(f, "{:04}", self.year)?;
        } else {
            write!(f, "{:+05}", self.year)?;
        }
        write!(
            f,
            "-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

const CUM_NOLEAP: [i64; 13] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365];
const CUM_LEAP: [i64; 13] = [0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335, 366];

/// Julian day number of the first Gregorian day (1582-10-15) in the standard calendar.
const GREGORIAN_START_JDN: i64 = 2_299_161;

impl Calendar {
    /// Parses a CF `calendar` attribute (case-insensitive, surrounding blanks ignored).
    /// A missing attribute means `standard` (CF default); `None` here means unknown.
    pub fn parse(s: &str) -> Option<Calendar> {
        match s.trim().to_ascii_lowercase().as_str() {
            "standard" | "gregorian" => Some(Calendar::Standard),
            "proleptic_gregorian" => Some(Calendar::ProlepticGregorian),
            "noleap" | "365_day" => Some(Calendar::NoLeap),
            "all_leap" | "366_day" => Some(Calendar::AllLeap),
            "360_day" => Some(Calendar::Day360),
            "julian" => Some(Calendar::Julian),
            _ => None,
        }
    }

    fn is_leap(self, year: i64) -> bool {
        match self {
            Calendar::NoLeap | Calendar::Day360 => false,
            Calendar::AllLeap => true,
            Calendar::Julian => year.rem_euclid(4) == 0,
            Calendar::ProlepticGregorian => gregorian::is_leap_year(year),
            Calendar::Standard => {
                if year < 1582 {
                    year.rem_euclid(4) == 0
                } else {
                    gregorian::is_leap_year(year)
                }
            }
        }
    }

    /// Number of days in a month (1-based), or `None` for a month outside 1..=12.
    pub fn days_in_month(self, year: i64, month: u8) -> Option<u8> {
        if !(1..=12).contains(&month) {
            return None;
        }
        if self == Calendar::Day360 {
            return Some(30);
        }
        let cum = if self.is_leap(year) {
            &CUM_LEAP
        } else {
            &CUM_NOLEAP
        };
        let m = usize::from(month);
        u8::try_from(cum[m] - cum[m - 1]).ok()
    }

    /// Day number of a date (an arbitrary but fixed epoch per calendar).
    pub fn day_number(self, year: i64, month: u8, day: u8) -> Option<i64> {
        let dim = self.days_in_month(year, month)?;
        if day == 0 || day > dim {
            return None;
        }
        let (m, d) = (i64::from(month), i64::from(day));
        match self {
            Calendar::Day360 => Some((year * 12 + m - 1) * 30 + d - 1),
            Calendar::NoLeap => Some(year * 365 + CUM_NOLEAP[(m - 1) as usize] + d - 1),
            Calendar::AllLeap => Some(year * 366 + CUM_LEAP[(m - 1) as usize] + d - 1),
            Calendar::Julian => Some(julian_jdn(year, m, d)),
            Calendar::ProlepticGregorian => Some(gregorian_jdn(year, m, d)),
            Calendar::Standard => {
                if (year, month, day) >= (1582, 10, 15) {
                    Some(gregorian_jdn(year, m, d))
                } else if (year, month, day) <= (1582, 10, 4) {
                    Some(julian_jdn(year, m, d))
                } else {
                    None // the ten days dropped in October 1582
                }
            }
        }
    }

    /// The date of a day number (inverse of [`Calendar::day_number`]).
    pub fn date(self, n: i64) -> (i64, u8, u8) {
        match self {
            Calendar::Day360 => {
                let year = n.div_euclid(360);
                let r = n.rem_euclid(360);
                (year, (r / 30 + 1) as u8, (r % 30 + 1) as u8)
            }
            Calendar::NoLeap | Calendar::AllLeap => {
                let (len, cum) = if self == Calendar::NoLeap {
                    (365, &CUM_NOLEAP)
                } else {
                    (366, &CUM_LEAP)
                };
                let year = n.div_euclid(len);
                let r = n.rem_euclid(len);
                let mut m = 1;
                while m < 12 && r >= cum[m] {
                    m += 1;
                }
                (year, m as u8, (r - cum[m - 1] + 1) as u8)
            }
            Calendar::Julian => julian_from_jdn(n),
            Calendar::ProlepticGregorian => gregorian_from_jdn(n),
            Calendar::Standard => {
                if n >= GREGORIAN_START_JDN {
                    gregorian_from_jdn(n)
                } else {
                    julian_from_jdn(n)
                }
            }
        }
    }
}

/// Julian day number of 1970-01-01.
const UNIX_EPOCH_JDN: i64 = 2_440_588;

/// Julian day number of a proleptic Gregorian date (the arithmetic is
/// `granary_packet::calendar`'s).
fn gregorian_jdn(y: i64, m: i64, d: i64) -> i64 {
    gregorian::days_from_civil(y, m as u8, d as u8) + UNIX_EPOCH_JDN
}

fn gregorian_from_jdn(n: i64) -> (i64, u8, u8) {
    gregorian::civil_from_days(n - UNIX_EPOCH_JDN)
}

/// Julian day number of a Julian-calendar date (4-year cycles of 1461 days).
fn julian_jdn(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let cycle = y.div_euclid(4);
    let yoc = y - cycle * 4;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    // Day 0 = 0000-03-01 (Julian) = JDN 1 721 118.
    cycle * 1461 + yoc * 365 + doy + 1_721_118
}

fn julian_from_jdn(n: i64) -> (i64, u8, u8) {
    let z = n - 1_721_118;
    let cycle = z.div_euclid(1461);
    let doc = z - cycle * 1461;
    let yoc = (doc - doc / 1460) / 365;
    let doy = doc - 365 * yoc;
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoc + cycle * 4 + i64::from(m <= 2);
    (y, m as u8, d as u8)
}

/// Parsed CF time units: `<unit> since <reference date>`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeUnits {
    /// Length of one unit in microseconds.
    pub unit_micros: i64,
    pub reference: DateTime,
}

impl TimeUnits {
    /// Parses e.g. `days since 1850-01-01`, `hours since 1850-1-1 00:00:00`,
    /// `seconds since 2000-01-01T12:00:00Z`. Months and years are refused (their
    /// length is not a fixed number of days in most calendars).
    pub fn parse(units: &str, calendar: Calendar) -> Result<TimeUnits, TimeError> {
        let bad = || TimeError::BadUnits(units.to_string());
        let lower = units.trim().to_ascii_lowercase();
        let (unit, rest) = lower.split_once(" since ").ok_or_else(bad)?;
        let unit_micros = match unit.trim() {
            "days" | "day" | "d" => 86_400_000_000,
            "hours" | "hour" | "hrs" | "hr" | "h" => 3_600_000_000,
            "minutes" | "minute" | "mins" | "min" => 60_000_000,
            "seconds" | "second" | "secs" | "sec" | "s" => 1_000_000,
            "milliseconds" | "millisecond" | "msec" | "ms" => 1_000,
            "microseconds" | "microsecond" | "usec" | "us" => 1,
            other => return Err(TimeError::UnsupportedUnit(other.to_string())),
        };
        let reference = parse_reference(rest.trim(), calendar).ok_or_else(bad)?;
        if calendar
            .day_number(reference.year, reference.month, reference.day)
            .is_none()
        {
            return Err(TimeError::InvalidDate(rest.trim().to_string(), calendar));
        }
        Ok(TimeUnits {
            unit_micros,
            reference,
        })
    }

    /// The date `value` units after the reference date, rounded to the nearest second.
    pub fn decode(&self, value: f64, calendar: Calendar) -> Result<DateTime, TimeError> {
        let out = || TimeError::OutOfRange(value.to_string());
        let micros = value * self.unit_micros as f64;
        // ±2^62 µs is about ±146 000 years: plenty, and safe from overflow below.
        if !micros.is_finite() || micros.abs() > 4.6e18 {
            return Err(out());
        }
        let offset_s = (micros / 1e6).round() as i64;
        let r = self.reference;
        let ref_day = calendar
            .day_number(r.year, r.month, r.day)
            .ok_or_else(out)?;
        let ref_s = i64::from(r.hour) * 3600 + i64::from(r.minute) * 60 + i64::from(r.second);
        let total = ref_s.checked_add(offset_s).ok_or_else(out)?;
        let day = ref_day
            .checked_add(total.div_euclid(86_400))
            .ok_or_else(out)?;
        let sod = total.rem_euclid(86_400);
        let (year, month, d) = calendar.date(day);
        Ok(DateTime {
            year,
            month,
            day: d,
            hour: (sod / 3600) as u8,
            minute: (sod % 3600 / 60) as u8,
            second: (sod % 60) as u8,
        })
    }
}

/// `YYYY-M-D[( |T)h[:m[:s[.frac]]]][ ]*[Z|UTC|GMT|+00:00|+0000|+00]`; a non-zero zone
/// offset is refused rather than silently ignored.
fn parse_reference(s: &str, _calendar: Calendar) -> Option<DateTime> {
    let s = s.trim();
    let (date, rest) = match s.find(['T', 't', ' ']) {
        Some(i) => (&s[..i], s[i + 1..].trim()),
        None => (s, ""),
    };
    let (sign, date) = match date.strip_prefix('-') {
        Some(d) => (-1, d),
        None => (1, date),
    };
    let mut parts = date.split('-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: u8 = parts.next().map_or(Some(1), |p| p.parse().ok())?;
    let day: u8 = parts.next().map_or(Some(1), |p| p.parse().ok())?;
    if parts.next().is_some() {
        return None;
    }
    let mut dt = DateTime {
        year: sign * year,
        month,
        day,
        hour: 0,
        minute: 0,
        second: 0,
    };
    // Split the time of day from a zone designator.
    let (time, zone) = match rest.find(['Z', 'z', 'U', 'u', 'G', 'g', '+', ' ']) {
        Some(i) => (&rest[..i], rest[i..].trim()),
        None => (rest, ""),
    };
    if !time.is_empty() {
        let mut t = time.split(':');
        let h: u8 = t.next()?.parse().ok()?;
        let m: u8 = t.next().map_or(Some(0), |p| p.parse().ok())?;
        let sec: f64 = t.next().map_or(Some(0.0), |p| p.parse().ok())?;
        if t.next().is_some() || h > 23 || m > 59 || !(0.0..60.0).contains(&sec) {
            return None;
        }
        dt.hour = h;
        dt.minute = m;
        dt.second = sec.floor() as u8;
    }
    let zone = zone.to_ascii_lowercase();
    let zone_ok = matches!(
        zone.as_str(),
        "" | "z" | "utc" | "gmt" | "+00:00" | "+0000" | "+00" | "+0" | "0" | "+0:00"
    );
    zone_ok.then_some(dt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(units: &str, cal: Calendar, v: f64) -> String {
        TimeUnits::parse(units, cal)
            .and_then(|u| u.decode(v, cal))
            .map(|d| d.to_string())
            .unwrap_or_else(|e| format!("ERR {e}"))
    }

    const D1850: &str = "days since 1850-01-01";

    #[test]
    fn day360_known_dates() {
        assert_eq!(dec(D1850, Calendar::Day360, 359.0), "1850-12-30T00:00:00");
        assert_eq!(dec(D1850, Calendar::Day360, 360.0), "1851-01-01T00:00:00");
        assert_eq!(dec(D1850, Calendar::Day360, 15.5), "1850-01-16T12:00:00");
        assert_eq!(dec(D1850, Calendar::Day360, 59.0), "1850-02-30T00:00:00");
    }

    #[test]
    fn noleap_has_no_feb_29() {
        // 2000 is a leap year in real calendars: day 58 of 2000 is 02-28, day 59 is 03-01.
        let u = "days since 2000-01-01";
        assert_eq!(dec(u, Calendar::NoLeap, 58.0), "2000-02-28T00:00:00");
        assert_eq!(dec(u, Calendar::NoLeap, 59.0), "2000-03-01T00:00:00");
        assert_eq!(
            dec(u, Calendar::ProlepticGregorian, 59.0),
            "2000-02-29T00:00:00"
        );
        assert_eq!(dec(u, Calendar::AllLeap, 59.0), "2000-02-29T00:00:00");
        assert_eq!(dec(D1850, Calendar::AllLeap, 59.0), "1850-02-29T00:00:00");
        assert_eq!(
            dec(D1850, Calendar::NoLeap, 365.0 * 150.0),
            "2000-01-01T00:00:00"
        );
        assert!(TimeUnits::parse("days since 2000-02-29", Calendar::NoLeap).is_err());
    }

    #[test]
    fn julian_and_gregorian_differ_by_12_days_in_1850() {
        let g = Calendar::ProlepticGregorian.day_number(1850, 1, 1).unwrap();
        let j = Calendar::Julian.day_number(1850, 1, 1).unwrap();
        assert_eq!(j - g, 12);
        // 1900 is a Julian leap year but not a Gregorian one: the gap widens to 13.
        let g = Calendar::ProlepticGregorian.day_number(1900, 3, 1).unwrap();
        let j = Calendar::Julian.day_number(1900, 3, 1).unwrap();
        assert_eq!(j - g, 13);
        assert_eq!(dec(D1850, Calendar::Julian, 59.0), "1850-03-01T00:00:00");
        // 51 years with 13 Julian leap days (1852..=1900) but 12 Gregorian ones.
        let v = 51.0 * 365.0 + 13.0;
        assert_eq!(dec(D1850, Calendar::Julian, v), "1901-01-01T00:00:00");
        assert_eq!(
            dec(D1850, Calendar::ProlepticGregorian, v),
            "1901-01-02T00:00:00"
        );
    }

    #[test]
    fn standard_switches_at_1582_10_15() {
        let u = "days since 1582-10-04";
        assert_eq!(dec(u, Calendar::Standard, 1.0), "1582-10-15T00:00:00");
        assert_eq!(
            dec(u, Calendar::ProlepticGregorian, 1.0),
            "1582-10-05T00:00:00"
        );
        assert_eq!(dec(u, Calendar::Julian, 1.0), "1582-10-05T00:00:00");
        assert!(TimeUnits::parse("days since 1582-10-10", Calendar::Standard).is_err());
        // JDN anchors: 2000-01-01 is JDN 2 451 545, 1582-10-15 is 2 299 161.
        assert_eq!(Calendar::Standard.day_number(2000, 1, 1), Some(2_451_545));
        assert_eq!(Calendar::Standard.day_number(1582, 10, 15), Some(2_299_161));
        assert_eq!(Calendar::Standard.day_number(1582, 10, 4), Some(2_299_160));
        // 1500 is a leap year in the standard calendar (Julian then), not proleptic.
        assert_eq!(
            dec("days since 1500-02-28", Calendar::Standard, 1.0),
            "1500-02-29T00:00:00"
        );
        assert_eq!(
            dec("days since 1500-02-28", Calendar::ProlepticGregorian, 1.0),
            "1500-03-01T00:00:00"
        );
    }

    #[test]
    fn round_trip_every_calendar() {
        for cal in [
            Calendar::Standard,
            Calendar::ProlepticGregorian,
            Calendar::NoLeap,
            Calendar::AllLeap,
            Calendar::Day360,
            Calendar::Julian,
        ] {
            let start = cal.day_number(-400, 1, 1).unwrap();
            let end = cal.day_number(2400, 12, 30).unwrap();
            let mut prev: Option<(i64, u8, u8)> = None;
            for n in start..=end {
                let (y, m, d) = cal.date(n);
                assert_eq!(
                    cal.day_number(y, m, d),
                    Some(n),
                    "{cal:?} day {n} -> {y}-{m}-{d}"
                );
                if let Some(p) = prev {
                    assert!((y, m, d) > p, "{cal:?}: dates must increase");
                }
                prev = Some((y, m, d));
            }
        }
    }

    #[test]
    fn units_forms() {
        let cal = Calendar::Standard;
        assert_eq!(
            dec("hours since 1850-01-01 00:00:00", cal, 36.0),
            "1850-01-02T12:00:00"
        );
        assert_eq!(
            dec("minutes since 1850-1-1", cal, 90.0),
            "1850-01-01T01:30:00"
        );
        assert_eq!(
            dec("seconds since 2000-01-01T12:00:00Z", cal, -1.0),
            "2000-01-01T11:59:59"
        );
        assert_eq!(
            dec("Days since 1850-01-01 00:00:00.0 UTC", cal, 0.5),
            "1850-01-01T12:00:00"
        );
        assert_eq!(
            dec("days since 1850-01-01", cal, -1.0),
            "1849-12-31T00:00:00"
        );
        assert!(dec("months since 1850-01-01", cal, 1.0).starts_with("ERR"));
        assert!(dec("days after 1850-01-01", cal, 1.0).starts_with("ERR"));
        assert!(dec("days since 1850-13-01", cal, 1.0).starts_with("ERR"));
        assert!(dec("days since 1850-01-01 +05:00", cal, 1.0).starts_with("ERR"));
        assert!(dec(D1850, cal, f64::NAN).starts_with("ERR"));
        assert!(dec(D1850, cal, 1e300).starts_with("ERR"));
        assert_eq!(Calendar::parse(" Gregorian "), Some(Calendar::Standard));
        assert_eq!(Calendar::parse("365_day"), Some(Calendar::NoLeap));
        assert_eq!(Calendar::parse("366_day"), Some(Calendar::AllLeap));
        assert_eq!(Calendar::parse("mars_sol"), None);
    }
}
