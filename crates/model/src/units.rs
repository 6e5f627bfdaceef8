//! Human units on the command line: durations (`50us`, `1.5ms`) and counts (`10M`, `1e6`).

use crate::ModelError;

/// Nanoseconds per unit for every accepted duration suffix (longest suffixes first so that
/// `ms` is not read as `s`).
const DURATION_UNITS: [(&str, f64); 8] = [
    ("ns", 1.0),
    ("us", 1e3),
    ("µs", 1e3),
    ("μs", 1e3), // Greek mu (U+03BC) as well as the micro sign (U+00B5)
    ("ms", 1e6),
    ("min", 60e9),
    ("s", 1e9),
    ("h", 3600e9),
];

/// The longest duration anything in tailscope holds: time is kept in `u64` nanoseconds (about
/// 584 years), so a longer one could only be saturated, silently.
pub const MAX_DURATION_NS: f64 = u64::MAX as f64;

/// Parses a duration with a mandatory unit (`100ns`, `50us`, `50µs`, `1.5ms`, `2s`) into
/// nanoseconds. A bare number, a negative, NaN or infinite value, one that does not fit in
/// `u64` nanoseconds ([`MAX_DURATION_NS`]), or an empty string is an error naming the text.
pub fn parse_duration_ns(s: &str) -> Result<f64, ModelError> {
    let err = |reason| ModelError::Duration {
        text: s.to_string(),
        reason,
    };
    let t = s.trim();
    if t.is_empty() {
        return Err(err("empty"));
    }
    let (number, scale) = DURATION_UNITS
        .iter()
        .find_map(|(suffix, scale)| t.strip_suffix(suffix).map(|n| (n.trim(), *scale)))
        .ok_or_else(|| err("a unit is required (ns, us, ms, s)"))?;
    let v: f64 = number.parse().map_err(|_| err("not a number"))?;
    if v.is_nan() {
        return Err(err("not a number"));
    }
    if v < 0.0 || number.starts_with('-') {
        return Err(err("negative"));
    }
    let ns = v * scale;
    if !ns.is_finite() {
        return Err(err("not finite"));
    }
    // `u64::MAX as f64` rounds up to 2^64, which itself does not fit.
    if ns >= MAX_DURATION_NS {
        return Err(err("too long (more than 2^64 ns, about 584 years)"));
    }
    Ok(ns)
}

/// Parses a count: a plain integer (`1000`), scientific notation (`1e6`), or a decimal SI
/// suffix `k`, `M`, `G` (`250k`, `10M`, `1G`). The result must be a whole number.
pub fn parse_count(s: &str) -> Result<u64, ModelError> {
    let err = |reason| ModelError::Count {
        text: s.to_string(),
        reason,
    };
    let t = s.trim().replace('_', "");
    if t.is_empty() {
        return Err(err("empty"));
    }
    if let Ok(n) = t.parse::<u64>() {
        return Ok(n);
    }
    let (number, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('M') => (&t[..t.len() - 1], 1e6),
        Some('G') => (&t[..t.len() - 1], 1e9),
        _ => (t.as_str(), 1.0),
    };
    let v: f64 = number.parse().map_err(|_| err("not a number"))?;
    if v.is_nan() || v.is_infinite() {
        return Err(err("not finite"));
    }
    if v < 0.0 || number.starts_with('-') {
        return Err(err("negative"));
    }
    let n = v * scale;
    if n > u64::MAX as f64 {
        return Err(err("too large"));
    }
    if n.fract() != 0.0 {
        return Err(err("not a whole number"));
    }
    Ok(n as u64)
}

/// Formats nanoseconds for people with three significant-ish digits: `850 ns`, `50.0 µs`,
/// `1.50 ms`, `2.00 s`.
pub fn format_duration_ns(ns: f64) -> String {
    if !ns.is_finite() {
        return format!("{ns} ns");
    }
    let a = ns.abs();
    let (v, unit) = if a < 1e3 {
        (ns, "ns")
    } else if a < 1e6 {
        (ns / 1e3, "µs")
    } else if a < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    if unit == "ns" || v.abs() >= 100.0 {
        format!("{v:.0} {unit}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.2} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("50us").unwrap(), 50_000.0);
        assert_eq!(parse_duration_ns("50µs").unwrap(), 50_000.0);
        assert_eq!(parse_duration_ns("50μs").unwrap(), 50_000.0);
        assert_eq!(parse_duration_ns("1.5ms").unwrap(), 1_500_000.0);
        assert_eq!(parse_duration_ns("2s").unwrap(), 2e9);
        assert_eq!(parse_duration_ns("100ns").unwrap(), 100.0);
        assert_eq!(parse_duration_ns(" 0us ").unwrap(), 0.0);
        for bad in [
            "0.5",
            "",
            "-5us",
            "NaNus",
            "infus",
            "abcus",
            "5 parsecs",
            "1e99s",
            "18446744074s",
            "1e300h",
        ] {
            assert!(parse_duration_ns(bad).is_err(), "{bad}");
        }
        let msg = parse_duration_ns("-5us").unwrap_err().to_string();
        assert_eq!(msg, "cannot parse duration '-5us': negative");
        // The longest that fits in u64 ns is accepted; 2^64 ns is not.
        assert_eq!(parse_duration_ns("18446744073s").unwrap(), 18446744073e9);
        assert!(parse_duration_ns("18446744073709551616ns").is_err());
        let msg = parse_duration_ns("1e99s").unwrap_err().to_string();
        assert!(msg.contains("'1e99s'") && msg.contains("too long"), "{msg}");
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("10M").unwrap(), 10_000_000);
        assert_eq!(parse_count("1e6").unwrap(), 1_000_000);
        assert_eq!(parse_count("250k").unwrap(), 250_000);
        assert_eq!(parse_count("1G").unwrap(), 1_000_000_000);
        assert_eq!(parse_count("1000").unwrap(), 1000);
        assert_eq!(parse_count("1.5k").unwrap(), 1500);
        for bad in ["", "-3", "1.5", "x", "1e400", "NaN"] {
            assert!(parse_count(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(format_duration_ns(50_000.0), "50.0 µs");
        assert_eq!(format_duration_ns(850.0), "850 ns");
        assert_eq!(format_duration_ns(1.5e6), "1.50 ms");
        assert_eq!(format_duration_ns(2e9), "2.00 s");
    }
}
