//! Closed-form queueing results: the "ideal" latency distribution that theory predicts for a
//! single-queue server, without simulating it (Tales of the Tail §2).
//!
//! In tailscope's data flow this is the queueing-model box on the right-hand side when the
//! arrivals and the service time are described by rates and squared coefficients of variation
//! rather than by a trace: `tailscope model` prints every form that applies, with its source and
//! whether it is exact.
//!
//! Units: time in seconds, rates in 1/s, all as `f64`.
//!
//! - [`erlang_b`], [`erlang_c`]: Erlang loss and delay probabilities (stable recurrence).
//! - [`mm1`], [`mmc`]: exact waiting and response time distributions for exponential service.
//! - [`md1`], [`mdc`]: exact waiting time distributions for deterministic service, evaluated as
//!   sums of positive terms (Crommelin's embedded chain, Franx's form) so that they stay accurate
//!   at high load and deep in the tail, where the classic alternating Erlang series fails.
//! - [`kingman_mean_wait`], [`allen_cunneen_mean_wait`], [`heavy_traffic_wait_ccdf`]:
//!   approximations for general arrivals and service.
//! - [`cobham_mean_waits`], [`mmc_priority_mean_waits`]: priority classes.
//! - [`closed_forms`]: every form that applies to a [`Query`], exact ones first.

mod approx;
mod erlang;
mod forms;
pub mod md1;
pub mod mdc;
pub mod mm1;
pub mod mmc;
mod poisson;
mod priority;
mod solve;

use thiserror::Error;

pub use approx::{
    allen_cunneen_mean_wait, heavy_traffic_wait_ccdf, heavy_traffic_wait_quantile,
    kingman_mean_wait,
};
pub use erlang::{erlang_b, erlang_c};
pub use forms::{closed_forms, ArrivalKind, ClosedForm, Query, ServiceKind, STANDARD_QUANTILES};
pub use priority::{cobham_mean_responses, cobham_mean_waits, mmc_priority_mean_waits};

/// Everything that can make a closed form inapplicable. Every message names the problem and
/// the offending value.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum AnalyticError {
    /// A parameter is NaN or infinite.
    #[error("{name} must be a finite number, got {value}")]
    NotFinite { name: &'static str, value: f64 },
    /// A parameter that must be strictly positive is zero or negative.
    #[error("{name} must be positive, got {value}")]
    NotPositive { name: &'static str, value: f64 },
    /// A parameter that must be zero or more is negative.
    #[error("{name} must not be negative, got {value}")]
    Negative { name: &'static str, value: f64 },
    /// Zero workers.
    #[error("workers must be at least 1, got 0")]
    NoWorkers,
    /// More workers than the exact deterministic-service form supports.
    #[error("the exact M/D/c form supports at most {max} workers, got {workers}")]
    TooManyWorkers { workers: u32, max: u32 },
    /// Utilisation at or above one: the queue grows without bound and no steady state exists.
    #[error(
        "unstable queue: utilisation rho = {rho} (arrival rate x mean service / workers) must be \
         below 1"
    )]
    Unstable { rho: f64 },
    /// A probability (quantile level) outside (0, 1).
    #[error("{name} must be a probability strictly between 0 and 1, got {value}")]
    BadProbability { name: &'static str, value: f64 },
    /// Priority class probabilities that do not sum to one.
    #[error("class probabilities must sum to 1, got {sum}")]
    ClassProbsSum { sum: f64 },
    /// Slices that must have equal length do not.
    #[error("per-class inputs must have equal lengths, got {lens:?}")]
    LengthMismatch { lens: Vec<usize> },
    /// Load so close to one that the exact deterministic-service form would need more memory
    /// than is reasonable.
    #[error(
        "utilisation rho = {rho} is too close to 1 for the exact deterministic-service form \
         with this many workers ({states} queue states needed, limit {limit})"
    )]
    TooManyStates {
        rho: f64,
        states: usize,
        limit: usize,
    },
}

/// Check that `value` is finite and strictly positive.
pub(crate) fn positive(name: &'static str, value: f64) -> Result<f64, AnalyticError> {
    if !value.is_finite() {
        return Err(AnalyticError::NotFinite { name, value });
    }
    if value <= 0.0 {
        return Err(AnalyticError::NotPositive { name, value });
    }
    Ok(value)
}

/// Check that `value` is finite and not negative.
pub(crate) fn non_negative(name: &'static str, value: f64) -> Result<f64, AnalyticError> {
    if !value.is_finite() {
        return Err(AnalyticError::NotFinite { name, value });
    }
    if value < 0.0 {
        return Err(AnalyticError::Negative { name, value });
    }
    Ok(value)
}

/// Check that `p` is a probability strictly inside (0, 1).
pub(crate) fn probability(name: &'static str, p: f64) -> Result<f64, AnalyticError> {
    if p.is_finite() && p > 0.0 && p < 1.0 {
        Ok(p)
    } else {
        Err(AnalyticError::BadProbability { name, value: p })
    }
}

/// Check that the per-server utilisation `rho` is below one.
pub(crate) fn stable(rho: f64) -> Result<f64, AnalyticError> {
    if rho.is_finite() && rho < 1.0 {
        Ok(rho)
    } else {
        Err(AnalyticError::Unstable { rho })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validators_name_the_problem() {
        let e = positive("arrival rate", f64::NAN).unwrap_err();
        assert!(e.to_string().contains("arrival rate"));
        assert!(e.to_string().contains("finite"));
        let e = positive("mean service time", -1.0).unwrap_err();
        assert!(e.to_string().contains("positive"));
        assert!(non_negative("ca2", 0.0).is_ok());
        assert!(non_negative("ca2", -0.1).is_err());
        assert!(probability("p", 1.0).is_err());
        assert!(probability("p", 0.0).is_err());
        assert!(probability("p", 0.5).is_ok());
        let e = stable(1.0).unwrap_err();
        assert!(e.to_string().contains("unstable"));
        assert!(stable(0.999).is_ok());
    }
}
