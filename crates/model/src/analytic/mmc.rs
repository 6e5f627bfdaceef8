//! M/M/c: Poisson arrivals at rate `lambda`, `c` exponential servers at rate `mu` each, one
//! FIFO queue.
//!
//! Exact: the waiting time is 0 with probability `1 - C` (C = Erlang C) and otherwise
//! exponential with rate `theta = c mu - lambda`. The response time is W + Exp(mu): a mixture
//! of Exp(mu) and a hypoexponential with rates `theta` and `mu`, evaluated in a form that stays
//! exact as `theta` approaches `mu` (see `hypoexp_ccdf`).

use super::solve::invert_ccdf;
use super::{erlang_c, positive, probability, AnalyticError};

/// Validated parameters: (P(wait), theta).
fn params(lambda: f64, mu: f64, c: u32) -> Result<(f64, f64), AnalyticError> {
    let lambda = positive("arrival rate", lambda)?;
    let mu = positive("service rate", mu)?;
    if c == 0 {
        return Err(AnalyticError::NoWorkers);
    }
    let pw = erlang_c(c, lambda / mu)?;
    Ok((pw, f64::from(c) * mu - lambda))
}

/// P(E1 + E2 > t) for independent exponentials with rates `theta` and `mu`.
///
/// The textbook `(theta e^{-mu t} - mu e^{-theta t}) / (theta - mu)` is 0/0 at `theta = mu`
/// and cancels near it; it equals `e^{-mu t} (1 + mu t phi((theta - mu) t))` with
/// `phi(x) = (1 - e^{-x}) / x`, which `exp_m1` evaluates without cancellation.
pub(crate) fn hypoexp_ccdf(theta: f64, mu: f64, t: f64) -> f64 {
    if t <= 0.0 {
        return 1.0;
    }
    let x = (theta - mu) * t;
    if x < -1.0 {
        // theta well below mu: e^{-theta t} dominates and the difference does not cancel.
        return (mu * (-theta * t).exp() - theta * (-mu * t).exp()) / (mu - theta);
    }
    let phi = if x == 0.0 { 1.0 } else { -(-x).exp_m1() / x };
    (-mu * t).exp() * (1.0 + mu * t * phi)
}

/// P(W > t).
pub fn wait_ccdf(lambda: f64, mu: f64, c: u32, t: f64) -> Result<f64, AnalyticError> {
    let (pw, theta) = params(lambda, mu, c)?;
    if t < 0.0 {
        return Ok(1.0);
    }
    Ok(pw * (-theta * t).exp())
}

/// P(R > t) for the response time R = W + S.
pub fn response_ccdf(lambda: f64, mu: f64, c: u32, t: f64) -> Result<f64, AnalyticError> {
    let (pw, theta) = params(lambda, mu, c)?;
    if t < 0.0 {
        return Ok(1.0);
    }
    Ok((1.0 - pw) * (-mu * t).exp() + pw * hypoexp_ccdf(theta, mu, t))
}

/// The `p`-quantile of the waiting time; 0 when `p <= 1 - C` (the atom at zero).
pub fn wait_quantile(lambda: f64, mu: f64, c: u32, p: f64) -> Result<f64, AnalyticError> {
    let (pw, theta) = params(lambda, mu, c)?;
    let p = probability("quantile level", p)?;
    if 1.0 - p >= pw {
        return Ok(0.0);
    }
    Ok((pw / (1.0 - p)).ln() / theta)
}

/// The `p`-quantile of the response time, by bisection on the exact ccdf.
pub fn response_quantile(lambda: f64, mu: f64, c: u32, p: f64) -> Result<f64, AnalyticError> {
    let (pw, theta) = params(lambda, mu, c)?;
    let p = probability("quantile level", p)?;
    let ccdf = |t: f64| (1.0 - pw) * (-mu * t).exp() + pw * hypoexp_ccdf(theta, mu, t);
    Ok(invert_ccdf(ccdf, 1.0 - p, 1.0 / mu))
}

/// Mean waiting time `C / (c mu - lambda)`.
pub fn mean_wait(lambda: f64, mu: f64, c: u32) -> Result<f64, AnalyticError> {
    let (pw, theta) = params(lambda, mu, c)?;
    Ok(pw / theta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypoexp_is_continuous_through_equal_rates() {
        let mu = 3.0_f64;
        for t in [0.01_f64, 0.5, 2.0, 10.0] {
            let equal = (1.0 + mu * t) * (-mu * t).exp();
            assert!((hypoexp_ccdf(mu, mu, t) - equal).abs() < 1e-15);
            for d in [1e-9, -1e-9, 1e-5, -1e-5] {
                let near = hypoexp_ccdf(mu + d, mu, t);
                assert!((near - equal).abs() < 10.0 * d.abs(), "t {t} d {d}");
            }
        }
        // Far from equal rates, the textbook form (evaluated directly) agrees.
        let (a, b, t) = (1.0_f64, 5.0_f64, 0.7_f64);
        let text = (a * (-b * t).exp() - b * (-a * t).exp()) / (a - b);
        assert!((hypoexp_ccdf(a, b, t) - text).abs() < 1e-15);
        assert!((hypoexp_ccdf(b, a, t) - text).abs() < 1e-15);
    }

    #[test]
    fn response_quantile_inverts() {
        let (l, m, c) = (3000.0, 1000.0, 4);
        for p in [0.5, 0.99, 0.9999] {
            let t = response_quantile(l, m, c, p).unwrap();
            let r = response_ccdf(l, m, c, t).unwrap();
            assert!(
                (r - (1.0 - p)).abs() < 1e-12 * (1.0 - p) + 1e-15,
                "{p}: {r}"
            );
        }
    }
}
