//! The proleptic Gregorian calendar in whole days: leap years, month
//! lengths, and dates to and from days since 1970-01-01 (Howard Hinnant's
//! algorithms, exact over all of `i64`'s useful range; astronomical years,
//! year 0 exists). Certificate timestamps use it here; the science crate's CF
//! calendars build on it.

/// Days from 0000-03-01 to 1970-01-01.
const EPOCH_SHIFT: i64 = 719_468;

/// Days in 400 Gregorian years.
const DAYS_PER_ERA: i64 = 146_097;

/// True for a Gregorian leap year.
pub fn is_leap_year(y: i64) -> bool {
    y.rem_euclid(4) == 0 && (y.rem_euclid(100) != 0 || y.rem_euclid(400) == 0)
}

/// Days in month `m` (1–12) of year `y`, `None` for another month.
pub fn days_in_month(y: i64, m: u8) -> Option<u8> {
    Some(match m {
        2 if is_leap_year(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        _ => return None,
    })
}

/// Days from 1970-01-01 to `y`-`m`-`d` (negative before). The date is not
/// checked: a day past its month's end counts on into the next.
pub fn days_from_civil(y: i64, m: u8, d: u8) -> i64 {
    let (m, d) = (i64::from(m), i64::from(d));
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * DAYS_PER_ERA + doe - EPOCH_SHIFT
}

/// The date (year, month 1–12, day 1–31) `z` days after 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u8, u8) {
    let z = z + EPOCH_SHIFT;
    let era = z.div_euclid(DAYS_PER_ERA);
    let doe = z - era * DAYS_PER_ERA;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u8, d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_days_and_round_trips() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(0, 1, 1), -719_528);
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert!(is_leap_year(2000) && is_leap_year(-4) && !is_leap_year(1900));
        assert_eq!(days_in_month(1900, 2), Some(28));
        assert_eq!(days_in_month(2024, 2), Some(29));
        assert_eq!(days_in_month(2024, 13), None);
        for z in (-1_000_000..1_000_000).step_by(97) {
            let (y, m, d) = civil_from_days(z);
            assert!(d >= 1 && Some(d) <= days_in_month(y, m));
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }
}
