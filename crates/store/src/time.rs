//! RFC 3339 UTC timestamps for `started_at` / `finished_at`.
//!
//! Formatting one UTC timestamp needs only the days-to-civil-date conversion below (the
//! well-known era-based proleptic Gregorian algorithm), so no date crate is pulled in.

use std::time::{SystemTime, UNIX_EPOCH};

/// Proleptic Gregorian `(year, month 1..=12, day 1..=31)` of a day count since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // shift the epoch to 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146_096
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from March 1st
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC, millisecond precision, RFC 3339).
pub fn rfc3339_utc(t: SystemTime) -> String {
    // Milliseconds since the epoch, negative before it.
    let ms: i64 = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => {
            // Before the epoch: round the magnitude up so the result is the floor.
            let d = e.duration();
            let up = u128::from(d.subsec_nanos() % 1_000_000 != 0);
            -i64::try_from(d.as_millis() + up).unwrap_or(i64::MAX)
        }
    };
    let secs = ms.div_euclid(1_000);
    let milli = ms.rem_euclid(1_000);
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        sod / 3_600,
        sod % 3_600 / 60,
        sod % 60
    )
}

/// The current time as an RFC 3339 UTC string.
pub fn now_rfc3339() -> String {
    rfc3339_utc(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(10_957), (2000, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29)); // leap day of a /400 year
        assert_eq!(civil_from_days(-25_508), (1900, 3, 1)); // 1900 is not a leap year
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(2_932_896), (9999, 12, 31));
    }

    #[test]
    fn days_are_consecutive() {
        // Walk 1900..2100 day by day: every step moves to the next calendar day.
        let mut prev = civil_from_days(-25_567); // 1900-01-01
        assert_eq!(prev, (1900, 1, 1));
        for days in -25_566..47_482 {
            let cur = civil_from_days(days);
            let next_day = (prev.0, prev.1, prev.2 + 1);
            let next_month = (prev.0, prev.1 + 1, 1);
            let next_year = (prev.0 + 1, 1, 1);
            let leap = prev.0 % 4 == 0 && (prev.0 % 100 != 0 || prev.0 % 400 == 0);
            let month_len = match prev.1 {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            let ok = if prev.2 < month_len {
                cur == next_day
            } else if prev.1 < 12 {
                cur == next_month
            } else {
                cur == next_year
            };
            assert!(ok, "{prev:?} -> {cur:?}");
            prev = cur;
        }
        assert_eq!(prev, (2099, 12, 31));
    }

    #[test]
    fn formats_known_instants() {
        let at = |ms: u64| rfc3339_utc(UNIX_EPOCH + Duration::from_millis(ms));
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        // `date -u -d @1700000000` = 2023-11-14 22:13:20
        assert_eq!(at(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH - Duration::from_millis(1)),
            "1969-12-31T23:59:59.999Z"
        );
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH - Duration::from_micros(1_500)),
            "1969-12-31T23:59:59.998Z"
        );
    }
}
