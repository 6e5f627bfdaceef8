//! Approximations for general (G) arrival and service processes, described by their squared
//! coefficients of variation `ca2` (inter-arrival) and `cs2` (service).

use super::{erlang_c, non_negative, positive, probability, stable, AnalyticError};

/// Kingman's G/G/1 approximation of the mean wait:
/// `rho / (1 - rho) * (ca2 + cs2) / 2 * mean_s`.
/// Exact for M/G/1 (`ca2 = 1`: the Pollaczek–Khinchine formula) and asymptotically exact as
/// `rho -> 1` (Kingman 1961).
pub fn kingman_mean_wait(rho: f64, mean_s: f64, ca2: f64, cs2: f64) -> Result<f64, AnalyticError> {
    let rho = stable(positive("utilisation", rho)?)?;
    let mean_s = positive("mean service time", mean_s)?;
    let v = non_negative("ca2", ca2)? + non_negative("cs2", cs2)?;
    Ok(rho / (1.0 - rho) * v / 2.0 * mean_s)
}

/// Allen–Cunneen G/G/c approximation of the mean wait: the M/M/c wait
/// `C(c, a) / (c / mean_s - lambda)` scaled by `(ca2 + cs2) / 2`. Exact for M/M/c and,
/// with `c = 1` and `ca2 = 1`, for M/G/1.
pub fn allen_cunneen_mean_wait(
    c: u32,
    lambda: f64,
    mean_s: f64,
    ca2: f64,
    cs2: f64,
) -> Result<f64, AnalyticError> {
    let lambda = positive("arrival rate", lambda)?;
    let mean_s = positive("mean service time", mean_s)?;
    let v = non_negative("ca2", ca2)? + non_negative("cs2", cs2)?;
    let pw = erlang_c(c, lambda * mean_s)?;
    Ok(pw / (f64::from(c) / mean_s - lambda) * v / 2.0)
}

fn check_tail(p_wait: f64, mean_wait: f64) -> Result<(), AnalyticError> {
    let p_wait = positive("probability of waiting", p_wait)?;
    if p_wait > 1.0 {
        return Err(AnalyticError::BadProbability {
            name: "probability of waiting",
            value: p_wait,
        });
    }
    non_negative("mean wait", mean_wait)?;
    Ok(())
}

/// Heavy-traffic exponential approximation of the waiting-time tail:
/// `P(W > t) ~= p_wait * exp(-p_wait * t / mean_wait)`.
///
/// That is: wait with probability `p_wait`, and then an exponential delay whose mean makes the
/// overall mean equal `mean_wait`. With `p_wait = rho` and Kingman's mean this is the G/G/1
/// heavy-traffic limit (Kingman 1962: the scaled wait tends to an exponential; the atom
/// `1 - rho` vanishes as `rho -> 1`); with `p_wait` = Erlang C and the Allen–Cunneen mean it
/// is the usual G/G/c counterpart, exact for M/M/c. Below heavy traffic it is an
/// approximation only (for M/D/1 it overstates the body and has a different decay rate).
pub fn heavy_traffic_wait_ccdf(p_wait: f64, mean_wait: f64, t: f64) -> Result<f64, AnalyticError> {
    check_tail(p_wait, mean_wait)?;
    if t < 0.0 {
        return Ok(1.0);
    }
    if mean_wait == 0.0 {
        return Ok(0.0);
    }
    Ok(p_wait * (-p_wait * t / mean_wait).exp())
}

/// The `p`-quantile of [`heavy_traffic_wait_ccdf`]; 0 when `1 - p >= p_wait`.
pub fn heavy_traffic_wait_quantile(
    p_wait: f64,
    mean_wait: f64,
    p: f64,
) -> Result<f64, AnalyticError> {
    check_tail(p_wait, mean_wait)?;
    let p = probability("quantile level", p)?;
    if 1.0 - p >= p_wait || mean_wait == 0.0 {
        return Ok(0.0);
    }
    Ok(mean_wait / p_wait * (p_wait / (1.0 - p)).ln())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kingman_is_pollaczek_khinchine_for_poisson() {
        // M/D/1 at rho = 0.7, D = 1: PK gives 0.7 / (2 * 0.3).
        let w = kingman_mean_wait(0.7, 1.0, 1.0, 0.0).unwrap();
        assert!((w - 0.7 / 0.6).abs() < 1e-15);
    }

    #[test]
    fn allen_cunneen_reduces_to_kingman_for_one_server() {
        let (lambda, s, ca2, cs2) = (800.0, 1e-3, 1.7, 0.4);
        let ac = allen_cunneen_mean_wait(1, lambda, s, ca2, cs2).unwrap();
        let k = kingman_mean_wait(lambda * s, s, ca2, cs2).unwrap();
        assert!((ac - k).abs() < 1e-15 * k);
    }

    #[test]
    fn heavy_traffic_tail_has_the_requested_mean() {
        // The integral of the ccdf is mean_wait (trapezoid rule, h = 1e-3, to t = 60).
        let (pw, m) = (0.6_f64, 2.5_f64);
        let h = 1e-3;
        let mut integral = 0.0;
        for i in 0..60_000 {
            let a = heavy_traffic_wait_ccdf(pw, m, i as f64 * h).unwrap();
            let b = heavy_traffic_wait_ccdf(pw, m, (i + 1) as f64 * h).unwrap();
            integral += 0.5 * h * (a + b);
        }
        assert!((integral - m).abs() < 1e-6 * m, "{integral}");
        let q = heavy_traffic_wait_quantile(pw, m, 0.99).unwrap();
        let back = heavy_traffic_wait_ccdf(pw, m, q).unwrap();
        assert!((back - 0.01).abs() < 1e-15);
        assert_eq!(heavy_traffic_wait_quantile(pw, m, 0.4).unwrap(), 0.0);
        assert!(heavy_traffic_wait_ccdf(1.5, m, 0.0).is_err());
    }
}
