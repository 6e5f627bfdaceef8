//! M/M/1: Poisson arrivals at rate `lambda`, exponential service at rate `mu`, one server, FIFO.
//!
//! Exact: the waiting time is 0 with probability `1 - rho` and otherwise exponential with rate
//! `mu - lambda`; the response time is exponential with rate `mu - lambda`.

use super::{positive, probability, stable, AnalyticError};

/// Validate and return `rho = lambda / mu`.
fn load(lambda: f64, mu: f64) -> Result<f64, AnalyticError> {
    let lambda = positive("arrival rate", lambda)?;
    let mu = positive("service rate", mu)?;
    stable(lambda / mu)
}

/// P(W > t).
pub fn wait_ccdf(lambda: f64, mu: f64, t: f64) -> Result<f64, AnalyticError> {
    let rho = load(lambda, mu)?;
    if t < 0.0 {
        return Ok(1.0);
    }
    Ok(rho * (-(mu - lambda) * t).exp())
}

/// P(R > t) for the response (sojourn) time R = W + S.
pub fn response_ccdf(lambda: f64, mu: f64, t: f64) -> Result<f64, AnalyticError> {
    load(lambda, mu)?;
    if t < 0.0 {
        return Ok(1.0);
    }
    Ok((-(mu - lambda) * t).exp())
}

/// The `p`-quantile of the waiting time; 0 when `p <= 1 - rho` (the atom at zero).
pub fn wait_quantile(lambda: f64, mu: f64, p: f64) -> Result<f64, AnalyticError> {
    let rho = load(lambda, mu)?;
    let p = probability("quantile level", p)?;
    if 1.0 - p >= rho {
        return Ok(0.0);
    }
    Ok((rho / (1.0 - p)).ln() / (mu - lambda))
}

/// The `p`-quantile of the response time.
pub fn response_quantile(lambda: f64, mu: f64, p: f64) -> Result<f64, AnalyticError> {
    load(lambda, mu)?;
    let p = probability("quantile level", p)?;
    Ok(-(-p).ln_1p() / (mu - lambda))
}

/// Mean waiting time `rho / (mu - lambda)`.
pub fn mean_wait(lambda: f64, mu: f64) -> Result<f64, AnalyticError> {
    let rho = load(lambda, mu)?;
    Ok(rho / (mu - lambda))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_invert_ccdfs() {
        let (l, m) = (700.0, 1000.0);
        for p in [0.5, 0.9, 0.99, 0.999] {
            let t = response_quantile(l, m, p).unwrap();
            assert!((response_ccdf(l, m, t).unwrap() - (1.0 - p)).abs() < 1e-12);
            let w = wait_quantile(l, m, p).unwrap();
            if w > 0.0 {
                assert!((wait_ccdf(l, m, w).unwrap() - (1.0 - p)).abs() < 1e-12);
            }
        }
        // Atom at zero: P(W = 0) = 1 - rho = 0.3.
        assert_eq!(wait_quantile(l, m, 0.3).unwrap(), 0.0);
        assert!(wait_quantile(l, m, 0.31).unwrap() > 0.0);
    }

    #[test]
    fn rejects_unstable() {
        assert!(matches!(
            wait_ccdf(1000.0, 1000.0, 0.0),
            Err(AnalyticError::Unstable { .. })
        ));
    }
}
