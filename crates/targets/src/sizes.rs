//! The sizes of nginx's generated files drawn from a distribution (the study varies file size,
//! Figs 5–6; real static content is heavy-tailed): fixed, uniform or lognormal, drawn from a
//! seed so the same spec serves the same files every time.

use std::fmt;
use std::str::FromStr;

use crate::{HttpFiles, Kind, TargetError};

/// Largest single generated file.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// How file sizes are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FileSizes {
    Fixed(u64),
    /// Uniform integer in `lo..=hi` bytes.
    Uniform {
        lo: u64,
        hi: u64,
    },
    /// `median × e^(σ·Z)`, Z standard normal, clamped to 1 ..= [`MAX_FILE_BYTES`].
    Lognormal {
        median: u64,
        sigma: f64,
    },
}

fn bad(reason: String) -> TargetError {
    TargetError::BadConfig {
        kind: Kind::Nginx,
        reason,
    }
}

impl FromStr for FileSizes {
    type Err = TargetError;

    /// `N`, `fixed:N`, `uniform:LO,HI` or `lognormal:MEDIAN,SIGMA` (bytes).
    fn from_str(s: &str) -> Result<FileSizes, TargetError> {
        let syntax = || {
            bad(format!(
                "file size '{s}': write N, fixed:N, uniform:LO,HI or lognormal:MEDIAN,SIGMA (bytes)"
            ))
        };
        let n = |t: &str| t.trim().parse::<u64>().map_err(|_| syntax());
        fn two(v: &str) -> Option<(&str, &str)> {
            v.split_once(',')
        }
        let d = match s.trim().split_once(':') {
            None => FileSizes::Fixed(n(s)?),
            Some(("fixed", v)) => FileSizes::Fixed(n(v)?),
            Some(("uniform", v)) => {
                let (lo, hi) = two(v).ok_or_else(syntax)?;
                FileSizes::Uniform {
                    lo: n(lo)?,
                    hi: n(hi)?,
                }
            }
            Some(("lognormal", v)) => {
                let (m, sg) = two(v).ok_or_else(syntax)?;
                FileSizes::Lognormal {
                    median: n(m)?,
                    sigma: sg.trim().parse().map_err(|_| syntax())?,
                }
            }
            _ => return Err(syntax()),
        };
        d.validate()?;
        Ok(d)
    }
}

impl fmt::Display for FileSizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileSizes::Fixed(n) => write!(f, "{n}"),
            FileSizes::Uniform { lo, hi } => write!(f, "uniform:{lo},{hi}"),
            FileSizes::Lognormal { median, sigma } => write!(f, "lognormal:{median},{sigma}"),
        }
    }
}

/// splitmix64: a few lines of well-known generator, enough to draw sizes reproducibly
/// without a dependency.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform in (0, 1).
fn unit(state: &mut u64) -> f64 {
    ((next(state) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

impl FileSizes {
    /// Checks the bounds (each file at most [`MAX_FILE_BYTES`]).
    pub fn validate(&self) -> Result<(), TargetError> {
        let too_big = |b: u64| b > MAX_FILE_BYTES;
        match *self {
            FileSizes::Fixed(n) if too_big(n) => Err(bad(format!("file size {n} is above 1 GiB"))),
            FileSizes::Uniform { lo, hi } if lo > hi || too_big(hi) => {
                Err(bad(format!("uniform:{lo},{hi} needs LO <= HI <= 1 GiB")))
            }
            FileSizes::Lognormal { median, sigma }
                if median == 0 || too_big(median) || !(0.0..=5.0).contains(&sigma) =>
            {
                Err(bad(format!(
                    "lognormal:{median},{sigma} needs 1 <= MEDIAN <= 1 GiB and 0 <= SIGMA <= 5"
                )))
            }
            _ => Ok(()),
        }
    }

    /// `count` sizes drawn from `seed` (the same every time).
    pub fn draw(&self, count: u32, seed: u64) -> Vec<u64> {
        let mut st = seed ^ 0x5EED_F11E;
        (0..count)
            .map(|_| match *self {
                FileSizes::Fixed(n) => n,
                FileSizes::Uniform { lo, hi } => lo + next(&mut st) % (hi - lo + 1),
                FileSizes::Lognormal { median, sigma } => {
                    // Box–Muller.
                    let (u1, u2) = (unit(&mut st), unit(&mut st));
                    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                    let x = median as f64 * (sigma * z).exp();
                    x.round().clamp(1.0, MAX_FILE_BYTES as f64) as u64
                }
            })
            .collect()
    }

    /// The files: `count` of them with sizes drawn from `seed`.
    pub fn files(&self, count: u32, seed: u64) -> HttpFiles {
        match *self {
            FileSizes::Fixed(n) => HttpFiles::uniform(count, n),
            _ => HttpFiles::with_sizes(self.draw(count, seed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_draw_reproducibly() {
        assert_eq!("4096".parse::<FileSizes>().unwrap(), FileSizes::Fixed(4096));
        let u: FileSizes = "uniform:100,200".parse().unwrap();
        let a = u.draw(1000, 1);
        assert_eq!(a, u.draw(1000, 1));
        assert_ne!(a, u.draw(1000, 2));
        assert!(a.iter().all(|&s| (100..=200).contains(&s)));
        assert!(a.contains(&100) && a.contains(&200));
        let l: FileSizes = "lognormal:4096,1".parse().unwrap();
        let mut v = l.draw(20_001, 3);
        v.sort_unstable();
        let median = v[10_000] as f64;
        assert!((median / 4096.0 - 1.0).abs() < 0.1, "median {median}");
        assert_eq!(l.to_string(), "lognormal:4096,1");
        assert_eq!(l.files(3, 1).count, 3);
        for bad in [
            "",
            "x",
            "uniform:5",
            "uniform:9,1",
            "lognormal:0,1",
            "lognormal:10,9",
            "fixed:2000000000",
        ] {
            assert!(bad.parse::<FileSizes>().is_err(), "{bad:?}");
        }
    }
}
