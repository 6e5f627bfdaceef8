//! The one parser of an offered load: `run --rate`, `tune --rate` and every item of `sweep
//! --loads` read `5000`, `5k`, `1e4` (requests per second) or `40%` (of the target's
//! calibrated capacity) through [`Load`]'s `FromStr`. The messages do not name the flag:
//! the caller (clap, or the list parser) says which flag the text came from.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An offered load: absolute, or a fraction of the target's capacity.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Load {
    Rps(f64),
    OfCapacity(f64),
}

/// Why a load's text was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadParseError(String);

impl fmt::Display for LoadParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadParseError {}

/// A number as a load's text gives it: a count (`5k`, `10M`) or any positive float.
fn number(t: &str) -> Option<f64> {
    model::parse_count(t)
        .map(|c| c as f64)
        .ok()
        .or_else(|| t.parse::<f64>().ok())
}

impl FromStr for Load {
    type Err = LoadParseError;

    fn from_str(s: &str) -> Result<Load, LoadParseError> {
        let t = s.trim();
        let bad = |why: &str| LoadParseError(why.to_string());
        if let Some(p) = t.strip_suffix('%') {
            let v = number(p.trim()).ok_or_else(|| bad("not a percentage (e.g. 70%)"))?;
            if !(v > 0.0 && v.is_finite()) {
                return Err(bad("must be a positive percentage"));
            }
            return Ok(Load::OfCapacity(v / 100.0));
        }
        let v = number(t).ok_or_else(|| {
            bad("not a load (requests per second, or a percentage of the capacity like 70%)")
        })?;
        if !(v > 0.0 && v.is_finite()) {
            return Err(bad("must be positive"));
        }
        if v > load::MAX_RATE {
            return Err(LoadParseError(format!(
                "beyond any generator (at most {:.0e} req/s)",
                load::MAX_RATE
            )));
        }
        Ok(Load::Rps(v))
    }
}

impl Load {
    /// The rate in requests per second, given the target's capacity (req/s) when the load is
    /// a share of it; `None` for a share of an unknown capacity.
    pub fn rps(self, capacity: Option<f64>) -> Option<f64> {
        match self {
            Load::Rps(r) => Some(r),
            Load::OfCapacity(f) => capacity.map(|c| f * c),
        }
    }

    /// Whether the load needs the target's capacity to become a rate.
    pub fn needs_capacity(self) -> bool {
        matches!(self, Load::OfCapacity(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_counts_and_percentages_parse() {
        assert_eq!("5000".parse::<Load>(), Ok(Load::Rps(5000.0)));
        assert_eq!("5k".parse::<Load>(), Ok(Load::Rps(5000.0)));
        assert_eq!(" 1e4 ".parse::<Load>(), Ok(Load::Rps(10_000.0)));
        assert_eq!("2.5".parse::<Load>(), Ok(Load::Rps(2.5)));
        assert_eq!("40%".parse::<Load>(), Ok(Load::OfCapacity(0.4)));
        assert_eq!("12.5 %".parse::<Load>(), Ok(Load::OfCapacity(0.125)));
        assert_eq!(Load::OfCapacity(0.5).rps(Some(1000.0)), Some(500.0));
        assert_eq!(Load::OfCapacity(0.5).rps(None), None);
        assert_eq!(Load::Rps(7.0).rps(None), Some(7.0));
    }

    #[test]
    fn bad_loads_are_refused_with_their_text() {
        for (text, needle) in [
            ("abc", "not a load"),
            ("", "not a load"),
            ("0", "must be positive"),
            ("-5", "must be positive"),
            ("inf", "must be positive"),
            ("NaN", "must be positive"),
            ("x%", "not a percentage"),
            ("0%", "positive percentage"),
            ("-10%", "positive percentage"),
            ("1e99", "beyond any generator"),
        ] {
            let e = text.parse::<Load>().unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
        let long = "9".repeat(100_000);
        assert!(long.parse::<Load>().unwrap_err().to_string().len() < 100);
    }
}
