//! # stats — the statistics vocabulary of tailscope
//!
//! Place in the data flow: every latency the load engine (`load`) measures, every sample the
//! simulator (`model`) draws and every figure the store and the reports show passes through
//! this crate. Latencies arrive as integer nanoseconds and are recorded by a [`Recorder`]
//! (exact: every value kept; streaming: an auto-resizing HdrHistogram). A recorder turns into a
//! [`Summary`] — mean, extremes and the [`STANDARD_QUANTILES`] each with a distribution-free
//! confidence interval — and into CCDF points for log-scale tail plots. Beside that sit the
//! small tools the experiments need: Student-t intervals for batch means ([`mean_ci`]), the
//! Anderson–Darling test for exponential samples ([`anderson_darling_exponential`]) and the
//! latency entropy of the LNS paper ([`latency_entropy`]).
//!
//! The crate depends on nothing else in the workspace.
//!
//! ```
//! use stats::{Quantile, Recorder};
//!
//! let mut rec = Recorder::for_count(10_000, 1_000_000); // small run: keep every value
//! for i in 1..=10_000_u64 {
//!     rec.record(i * 1_000); // 1 µs … 10 ms, in ns
//! }
//! let summary = rec.summarize(0.95)?;
//! let p99 = summary.get("p99").unwrap();
//! assert!(p99.lo <= p99.value && p99.value <= p99.hi);
//! assert_eq!(summary.distribution_json()["p50"], serde_json::json!(5000.5));
//! assert_eq!(rec.quantile(Quantile::new(0.5)?), Some(5_000_500.0));
//! # Ok::<(), stats::StatsError>(())
//! ```

mod blocks;
mod distribution;
mod entropy;
mod error;
mod gof;
mod mean;
mod order_stat;
mod recorder;
mod signed_rank;
mod special;
mod summary;

use serde::{Deserialize, Serialize};

pub use blocks::{
    format_width, ratio_interval, section_mean_ratio, section_median_ratio, BlockEstimate,
    BlockedRecorder, SectionedInterval, DEFAULT_INITIAL_WIDTH_NS, DEFAULT_MIN_BLOCKS, MIN_SECTIONS,
    MIN_TAIL_PER_SECTION,
};
pub use distribution::{Distribution, DistributionCi};
pub use entropy::{latency_entropy, recorder_entropy, EntropyEstimate};
pub use error::StatsError;
pub use gof::{anderson_darling_exponential, AndersonDarling};
pub use mean::mean_ci;
pub use order_stat::{order_statistic_ci, quantile_sorted, EXACT_BINOMIAL_MAX_N};
pub use recorder::{ExactSamples, Recorder, StreamingHistogram, ORDER_STAT_METHOD};
pub use signed_rank::{hodges_lehmann, signed_rank_cdf, HodgesLehmann};
pub use special::{normal_cdf, normal_quantile, student_t_quantile, student_t_two_sided_p};
pub use summary::{QuantileEstimate, Summary};

/// The key of the 99th percentile, the one most views and verdicts read.
pub const P99: &str = "p99";

/// The five percentiles tailscope always reports, with their JSON keys.
pub const STANDARD_QUANTILES: [(&str, f64); 5] = [
    ("p50", 0.5),
    ("p90", 0.9),
    (P99, 0.99),
    ("p99.9", 0.999),
    ("p99.99", 0.9999),
];

/// A probability strictly inside (0, 1). It cannot hold 0, 1, 1.7 or NaN.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize)]
pub struct Quantile(f64);

impl Quantile {
    /// Checks that `q` lies strictly between 0 and 1.
    pub fn new(q: f64) -> Result<Self, StatsError> {
        if q > 0.0 && q < 1.0 {
            Ok(Quantile(q))
        } else {
            Err(StatsError::InvalidQuantile(q))
        }
    }

    /// The probability.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// A point estimate with a confidence interval, all in the same unit (ns for latencies).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The point estimate.
    #[serde(deserialize_with = "f64_or_nan")]
    pub value: f64,
    /// Lower end of the confidence interval.
    #[serde(deserialize_with = "f64_or_nan")]
    pub lo: f64,
    /// Upper end of the confidence interval.
    #[serde(deserialize_with = "f64_or_nan")]
    pub hi: f64,
}

/// A float that JSON may have written as `null` (it has no NaN or infinity): NaN. Other
/// encodings (CBOR) keep every float and read it back as it was.
pub(crate) fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Checks a confidence level (strictly inside (0, 1)).
pub(crate) fn check_confidence(confidence: f64) -> Result<(), StatsError> {
    if confidence > 0.0 && confidence < 1.0 {
        Ok(())
    } else {
        Err(StatsError::InvalidConfidence(confidence))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_rejects_outside_open_unit_interval() {
        for bad in [0.0, 1.0, 1.7, -0.1, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(Quantile::new(bad), Err(StatsError::InvalidQuantile(_))),
                "{bad} accepted"
            );
        }
        for good in [1e-9, 0.5, 0.9999] {
            assert_eq!(Quantile::new(good).unwrap().get(), good);
        }
    }

    #[test]
    fn standard_quantiles_are_valid_and_increasing() {
        for w in STANDARD_QUANTILES.windows(2) {
            assert!(w[0].1 < w[1].1);
        }
        for (_, q) in STANDARD_QUANTILES {
            assert!(Quantile::new(q).is_ok());
        }
    }
}
