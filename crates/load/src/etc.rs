//! Facebook's ETC memcached workload (Atikoglu et al., "Workload Analysis of a Large-Scale
//! Key-Value Store", SIGMETRICS 2012), as the fits that paper publishes:
//! - key sizes: generalized extreme value, location 30.7984, scale 8.20449, shape 0.078688;
//! - value sizes: 0–14 bytes with the published probabilities (together 0.44155), otherwise
//!   15 bytes plus a generalized Pareto of location 0, scale 214.476, shape 0.348238;
//! - inter-arrival gaps: generalized Pareto of location 0, scale 16.0292 µs, shape 0.154971
//!   (mean 18.97 µs, about 52.7k requests/s to one server); as an arrival process the scale
//!   is set from the run's rate and only the shape is kept (`model::ArrivalSpec::GenPareto`).
//! - get:set about 30:1 ([`ETC_GET_RATIO`]).
//!
//! Sizes are the continuous fits rounded to the nearest byte and kept within bounds that the
//! fits cross with negligible probability (keys 10..=250 bytes: below 10 with P ≈ 5·10⁻⁸,
//! above 250 with P ≈ 6·10⁻⁷; values up to 1,000,000 bytes: above with P ≈ 10⁻⁹), so
//! [`cdf`](EtcSize::cdf) is the exact distribution of what is drawn.
//!
//! The other workloads that paper describes (USR, APP, VAR, SYS) are given there as plots
//! without fitted parameters, so tailscope does not ship them.

/// Fraction of gets in ETC (30 gets to 1 set).
pub const ETC_GET_RATIO: f64 = 30.0 / 31.0;
/// Shape of ETC's generalized Pareto inter-arrival gaps (`model::ArrivalSpec::GenPareto`).
pub use model::ETC_GAP_SHAPE;

const KEY_LOC: f64 = 30.7984;
const KEY_SCALE: f64 = 8.20449;
const KEY_SHAPE: f64 = 0.078_688;
/// Smallest and largest key size drawn.
pub const KEY_BOUNDS: (usize, usize) = (10, 250);

/// P(value size = k) for k = 0..=14 bytes, as published.
const VALUE_HEAD: [f64; 15] = [
    0.00536, 0.00047, 0.17820, 0.09239, 0.00018, 0.02740, 0.00065, 0.00606, 0.00023, 0.00837,
    0.00837, 0.08989, 0.00092, 0.00326, 0.01980,
];
const VALUE_SCALE: f64 = 214.476;
const VALUE_SHAPE: f64 = 0.348_238;
/// Largest value size drawn.
pub const VALUE_MAX: usize = 1_000_000;

/// Which of ETC's size distributions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EtcSize {
    Key,
    Value,
}

/// Quantile of the generalized extreme value distribution (shape ≠ 0).
fn gev_quantile(u: f64, loc: f64, scale: f64, shape: f64) -> f64 {
    loc + scale * ((-u.ln()).powf(-shape) - 1.0) / shape
}

fn gev_cdf(x: f64, loc: f64, scale: f64, shape: f64) -> f64 {
    let t = 1.0 + shape * (x - loc) / scale;
    if t <= 0.0 {
        return if shape > 0.0 { 0.0 } else { 1.0 };
    }
    (-t.powf(-1.0 / shape)).exp()
}

/// Quantile of the generalized Pareto distribution of location 0 (shape > 0).
fn gpd_quantile(u: f64, scale: f64, shape: f64) -> f64 {
    scale * ((1.0 - u).powf(-shape) - 1.0) / shape
}

fn gpd_cdf(x: f64, scale: f64, shape: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    1.0 - (1.0 + shape * x / scale).powf(-1.0 / shape)
}

fn head_mass() -> f64 {
    VALUE_HEAD.iter().sum()
}

impl EtcSize {
    /// Smallest and largest size drawn.
    pub fn bounds(self) -> (usize, usize) {
        match self {
            EtcSize::Key => KEY_BOUNDS,
            EtcSize::Value => (0, VALUE_MAX),
        }
    }

    /// The size for a uniform draw `u` in (0, 1) (inverse transform).
    pub fn from_uniform(self, u: f64) -> usize {
        let (lo, hi) = self.bounds();
        let x = match self {
            EtcSize::Key => gev_quantile(u, KEY_LOC, KEY_SCALE, KEY_SHAPE),
            EtcSize::Value => {
                let mut acc = 0.0;
                for (k, p) in VALUE_HEAD.iter().enumerate() {
                    acc += p;
                    if u < acc {
                        return k;
                    }
                }
                // The tail: rescale u to (0, 1) within the tail's mass.
                let head = head_mass();
                let v = ((u - head) / (1.0 - head)).clamp(0.0, 1.0 - f64::EPSILON);
                VALUE_HEAD.len() as f64 + gpd_quantile(v, VALUE_SCALE, VALUE_SHAPE)
            }
        };
        // Rounded to the nearest byte; `as` saturates NaN to 0, which the clamp then bounds.
        (x.round().max(0.0) as usize).clamp(lo, hi)
    }

    /// P(size ≤ k), exactly, for the rounded and bounded sizes drawn.
    pub fn cdf(self, k: usize) -> f64 {
        let (lo, hi) = self.bounds();
        if k < lo {
            return 0.0;
        }
        if k >= hi {
            return 1.0;
        }
        let edge = k as f64 + 0.5;
        match self {
            EtcSize::Key => gev_cdf(edge, KEY_LOC, KEY_SCALE, KEY_SHAPE),
            EtcSize::Value => {
                if k < VALUE_HEAD.len() {
                    return VALUE_HEAD[..=k].iter().sum();
                }
                let head = head_mass();
                head + (1.0 - head)
                    * gpd_cdf(edge - VALUE_HEAD.len() as f64, VALUE_SCALE, VALUE_SHAPE)
            }
        }
    }

    /// Mean size. Keys: the exact sum over their bounds. Values: the head's exact sum plus the
    /// tail's continuous mean (15 + scale / (1 − shape)); rounding to bytes and the 1 MB
    /// bound move it by less than 0.01 byte.
    pub fn mean(self) -> f64 {
        match self {
            EtcSize::Key => {
                let (lo, hi) = KEY_BOUNDS;
                (lo..=hi)
                    .map(|k| {
                        let below = if k == lo { 0.0 } else { self.cdf(k - 1) };
                        k as f64 * (self.cdf(k) - below)
                    })
                    .sum()
            }
            EtcSize::Value => {
                let head: f64 = VALUE_HEAD
                    .iter()
                    .enumerate()
                    .map(|(k, p)| k as f64 * p)
                    .sum();
                let tail = VALUE_HEAD.len() as f64 + VALUE_SCALE / (1.0 - VALUE_SHAPE);
                head + (1.0 - head_mass()) * tail
            }
        }
    }
}
