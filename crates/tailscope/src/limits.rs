//! Upper bounds of the numeric flags. Each is about the most the code can actually run in
//! reasonable time and memory on one machine, so that a typo (`--workers 4000000000`) is a
//! usage error naming the flag instead of a hang, an out-of-memory kill or a saturated result.

use std::fmt::Display;
use std::time::Duration;

use crate::exit::usage;

/// Requests per curve of `model figure`, which simulates up to six curves.
pub const MAX_FIGURE_REQUESTS: u64 = 1_000_000_000;
/// `noise --duration`: a day of probing is already far more than its tables need.
pub const MAX_NOISE_DURATION: Duration = Duration::from_secs(24 * 3600);
/// `noise --threshold`: a "gap" longer than a second is not a loop iteration any more.
pub const MAX_NOISE_THRESHOLD_NS: f64 = 1e9;

/// `serve --workers`: each is an OS thread, spinning while it works.
pub const MAX_SERVE_WORKERS: usize = 1_024;

/// `v` when it is at most `max`, else a usage error naming `flag`.
pub fn at_most<T: PartialOrd + Display>(flag: &str, v: T, max: T) -> anyhow::Result<T> {
    if v > max {
        return Err(usage(format!("{flag} must be at most {max}, got {v}")));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_name_the_flag_and_the_value() {
        assert_eq!(at_most("--workers", 5, 10).unwrap(), 5);
        let e = at_most("--workers", 4_000_000_000u64, 100_000).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--workers must be at most 100000, got 4000000000"
        );
        assert_eq!(crate::exit::code_of(&e), 2);
    }
}
