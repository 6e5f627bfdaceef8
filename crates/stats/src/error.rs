//! The crate's error type.

/// Everything that can go wrong in a statistics computation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StatsError {
    /// No values were recorded or supplied.
    #[error("no values")]
    Empty,
    /// A quantile outside (0, 1), or NaN.
    #[error("invalid quantile {0}: must lie strictly between 0 and 1")]
    InvalidQuantile(f64),
    /// A confidence level outside (0, 1), or NaN.
    #[error("invalid confidence level {0}: must lie strictly between 0 and 1")]
    InvalidConfidence(f64),
    /// The HdrHistogram library refused an operation.
    #[error("histogram: {0}")]
    Histogram(String),
    /// The computation needs more samples than it was given.
    #[error("too few samples: need at least {need}, got {got}")]
    TooFewSamples {
        /// Minimum number of samples.
        need: usize,
        /// Number supplied.
        got: usize,
    },
    /// A histogram bin width that is not a finite positive number.
    #[error("invalid bin width {0}: must be finite and positive")]
    InvalidBinWidth(f64),
    /// A sample that the computation cannot accept (NaN, infinite, or negative where a
    /// latency is expected).
    #[error("invalid sample {0}")]
    InvalidSample(f64),
}
