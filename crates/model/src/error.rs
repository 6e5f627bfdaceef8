//! The simulator's error type: every message is one line naming the problem and the value.

use thiserror::Error;

/// Everything that can go wrong when parsing a workload description or validating a
/// simulation. The closed forms in [`crate::analytic`] have their own error type.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A duration string such as `50us` could not be parsed.
    #[error("cannot parse duration '{text}': {reason}")]
    Duration { text: String, reason: &'static str },
    /// A count string such as `10M` could not be parsed.
    #[error("cannot parse count '{text}': {reason}")]
    Count { text: String, reason: &'static str },
    /// Utilisation (offered load per worker) outside (0, 1).
    #[error("utilisation must be in (0, 1), got {0}")]
    Utilisation(f64),
    /// Zero workers.
    #[error("workers must be at least 1")]
    NoWorkers,
    /// A trace file with no timestamps.
    #[error("trace is empty")]
    EmptyTrace,
    /// A trace whose timestamps go backwards (lines of the file, or 1-based positions for a
    /// trace built in code).
    #[error("trace is not sorted: line {line} ({value}) is earlier than line {prev_line} ({prev_value})")]
    UnsortedTrace {
        line: usize,
        value: String,
        prev_line: usize,
        prev_value: String,
    },
    /// A trace or empirical-sample line that is not a number.
    #[error("line {line}: cannot parse '{text}': {reason}")]
    Line {
        line: usize,
        text: String,
        reason: String,
    },
    /// An arrival process description that is not recognised or has bad parameters.
    #[error("bad arrival process '{text}': {reason}")]
    Arrival { text: String, reason: String },
    /// A service-time description that is not recognised or has bad parameters.
    #[error("bad service time '{text}': {reason}")]
    Service { text: String, reason: String },
    /// An unknown queueing discipline name.
    #[error("unknown queueing discipline '{0}' (expected fifo, lifo, random, random-worker, round-robin, priority, priority-preemptive)")]
    Discipline(String),
    /// A rate that is not a positive finite number (or missing where required).
    #[error("arrival rate must be a positive finite number of requests/s, got {0}")]
    Rate(String),
    /// Warm-up fraction outside [0, 1).
    #[error("warm-up fraction must be in [0, 1), got {0}")]
    Warmup(f64),
    /// Class probabilities that are negative or do not sum to 1.
    #[error("class probabilities must be non-negative and sum to 1, got {0:?}")]
    ClassProbs(Vec<f64>),
    /// A priority discipline with fewer than two classes, or too many classes.
    #[error("{discipline} needs between 2 and 255 classes, got {classes}")]
    Classes {
        discipline: &'static str,
        classes: usize,
    },
    /// A configuration value that is out of range.
    #[error("{name} {reason}, got {value}")]
    Invalid {
        name: &'static str,
        reason: &'static str,
        value: String,
    },
    /// The share α of delay-sensitive requests outside (0, 1] (LNS paper §2.4).
    #[error("alpha (share of delay-sensitive requests) must be in (0, 1], got {0}")]
    Alpha(f64),
    /// A fit with fewer basic tests than free parameters (LNS paper Table 3).
    #[error("fitting {params} parameters needs at least {params} basic tests, got {tests}")]
    TooFewTests { tests: usize, params: usize },
    /// A fit that did not converge to finite parameters.
    #[error("fit failed: {0}")]
    Fit(String),
}
