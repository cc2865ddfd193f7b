//! Version-component conventions: what a VersionNameComponent's number
//! means as a time.
//!
//! NDN naming conventions (NDN-TR-0022, rev. 2) leave the version number's
//! meaning to the application, but in practice it is a timestamp since the
//! UNIX epoch: Granary's repository and gateway stamp versions in
//! microseconds, ndn-cxx's `Name::appendVersion()` in milliseconds, and some
//! producers use seconds or nanoseconds. [`version_time`] tells the units
//! apart by magnitude.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The earliest instant a version is read as: 2001-09-09T01:46:40Z
/// (10^9 s after the epoch).
pub const EARLIEST_SECS: u64 = 1_000_000_000;

/// The first instant a version is no longer read as: 2100-01-01T00:00:00Z.
pub const END_SECS: u64 = 4_102_444_800;

/// A version number read as a time, or `None` when it is not one.
///
/// The rule: `v` is read in whichever unit — seconds, milliseconds,
/// microseconds or nanoseconds since the epoch — puts it in
/// [[`EARLIEST_SECS`], [`END_SECS`]), that is from 2001-09-09 up to (not
/// including) 2100-01-01. Those four bands are
///
/// | unit | `v` from (inclusive) | to (exclusive) |
/// |------|------------------|----------------|
/// | s    | 10^9             | 4,102,444,800 |
/// | ms   | 10^12            | 4,102,444,800,000 |
/// | µs   | 10^15            | 4,102,444,800,000,000 |
/// | ns   | 10^18            | 4,102,444,800,000,000,000 |
///
/// Each spans a factor of 4.1 and the units are a factor of 1000 apart, so
/// at most one unit fits: a number never reads as two times. A number in no
/// band (a counter such as `v=7`, or a date outside 2001–2099) is `None`.
/// The time keeps the unit's full precision.
pub fn version_time(v: u64) -> Option<SystemTime> {
    // Nanoseconds per unit: s, ms, µs, ns. In its band, `v` times that is
    // below 4.2 × 10^18: no overflow.
    const NANOS_PER_UNIT: [u64; 4] = [1_000_000_000, 1_000_000, 1_000, 1];
    NANOS_PER_UNIT
        .iter()
        .map(|ns| (ns, 1_000_000_000 / ns))
        .find(|(_, per_sec)| (EARLIEST_SECS..END_SECS).contains(&(v / per_sec)))
        .map(|(ns, _)| UNIX_EPOCH + Duration::from_nanos(v * ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds and nanoseconds since the epoch of `v` read as a time.
    fn at(v: u64) -> Option<(u64, u32)> {
        version_time(v).map(|t| {
            let d = t.duration_since(UNIX_EPOCH).unwrap();
            (d.as_secs(), d.subsec_nanos())
        })
    }

    #[test]
    fn each_unit_at_its_boundaries() {
        // Seconds.
        assert_eq!(at(999_999_999), None);
        assert_eq!(at(1_000_000_000), Some((1_000_000_000, 0)));
        assert_eq!(at(4_102_444_799), Some((4_102_444_799, 0)));
        assert_eq!(at(4_102_444_800), None);
        // Milliseconds.
        assert_eq!(at(999_999_999_999), None);
        assert_eq!(at(1_000_000_000_000), Some((1_000_000_000, 0)));
        assert_eq!(at(4_102_444_799_999), Some((4_102_444_799, 999_000_000)));
        assert_eq!(at(4_102_444_800_000), None);
        // Microseconds.
        assert_eq!(at(999_999_999_999_999), None);
        assert_eq!(at(1_000_000_000_000_000), Some((1_000_000_000, 0)));
        assert_eq!(
            at(4_102_444_799_999_999),
            Some((4_102_444_799, 999_999_000))
        );
        assert_eq!(at(4_102_444_800_000_000), None);
        // Nanoseconds.
        assert_eq!(at(999_999_999_999_999_999), None);
        assert_eq!(at(1_000_000_000_000_000_000), Some((1_000_000_000, 0)));
        assert_eq!(
            at(4_102_444_799_999_999_999),
            Some((4_102_444_799, 999_999_999))
        );
        assert_eq!(at(4_102_444_800_000_000_000), None);
        assert_eq!(at(u64::MAX), None);
    }

    #[test]
    fn typical_versions() {
        // A Granary repository version (µs), an ndn-cxx one (ms), seconds.
        assert_eq!(
            at(1_795_430_698_329_782),
            Some((1_795_430_698, 329_782_000))
        );
        assert_eq!(at(1_795_430_698_329), Some((1_795_430_698, 329_000_000)));
        assert_eq!(at(1_795_430_698), Some((1_795_430_698, 0)));
        // Counters are not times.
        assert_eq!(at(0), None);
        assert_eq!(at(7), None);
        // Between the bands (2100 and later in one unit, before 2001 in the next).
        assert_eq!(at(50_000_000_000), None);
        assert_eq!(at(50_000_000_000_000), None);
    }
}
