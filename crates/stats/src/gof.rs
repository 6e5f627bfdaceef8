//! Goodness of fit: Anderson–Darling test for the exponential distribution.

use crate::StatsError;

/// Minimum sample size: Stephens' modification is calibrated for n ≥ 5.
const AD_MIN_N: usize = 5;

/// Upper 5 % point of the modified statistic A²(1 + 0.6/n) for the exponential with estimated
/// mean (Stephens 1974; D'Agostino & Stephens 1986, table 4.11).
const AD_CRITICAL_5PCT: f64 = 1.341;

/// Largest A* for which the p-value fit is used (its last quadratic has its minimum near 10).
const AD_P_FIT_MAX: f64 = 10.0;

/// Result of [`anderson_darling_exponential`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AndersonDarling {
    /// Sample size.
    pub n: u64,
    /// A².
    pub statistic: f64,
    /// Stephens' modified statistic A²(1 + 0.6/n), compared with the tables.
    pub modified: f64,
    /// Approximate p-value (D'Agostino & Stephens' piecewise fit for this case).
    pub p_value: f64,
    /// `modified` exceeds the 5 % critical value 1.341.
    pub reject_at_5pct: bool,
}

/// Anderson–Darling test that `samples` are exponential with unknown mean (estimated by the
/// sample mean). Samples must be finite and non-negative; at least 5 are needed. A sample of
/// zeros or a zero value gives an infinite statistic (an exponential sample has no zeros).
pub fn anderson_darling_exponential(samples: &[f64]) -> Result<AndersonDarling, StatsError> {
    if samples.len() < AD_MIN_N {
        return Err(StatsError::TooFewSamples {
            need: AD_MIN_N,
            got: samples.len(),
        });
    }
    if let Some(&bad) = samples.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
        return Err(StatsError::InvalidSample(bad));
    }
    let n = samples.len();
    let nf = n as f64;
    let mean = samples.iter().sum::<f64>() / nf;
    let mut y: Vec<f64> = samples.iter().map(|x| x / mean).collect();
    y.sort_unstable_by(f64::total_cmp);
    // With F(x) = 1 − e^(−y): ln F = ln(−expm1(−y)), ln(1 − F) = −y, both without cancellation.
    let sum: f64 = (0..n)
        .map(|i| {
            let ln_f = (-(-y[i]).exp_m1()).ln();
            let ln_sf = -y[n - 1 - i];
            (2 * i + 1) as f64 * (ln_f + ln_sf)
        })
        .sum();
    let statistic = if mean > 0.0 {
        -nf - sum / nf
    } else {
        f64::INFINITY
    };
    let modified = statistic * (1.0 + 0.6 / nf);
    Ok(AndersonDarling {
        n: n as u64,
        statistic,
        modified,
        p_value: p_value_exponential(modified),
        reject_at_5pct: modified > AD_CRITICAL_5PCT,
    })
}

/// Piecewise approximation of P(A* > a) for the exponential case with estimated mean
/// (D'Agostino & Stephens 1986). It reproduces the table's 15/10/5/1 % points
/// (0.922, 1.078, 1.341, 1.957) to within 0.004. Beyond A* = 10 (p < 1e-6) the quadratic
/// turns upward, so p is reported as 0 there.
fn p_value_exponential(a: f64) -> f64 {
    let p = if a.is_nan() {
        f64::NAN
    } else if a > AD_P_FIT_MAX {
        0.0
    } else if a < 0.26 {
        1.0 - (-12.2204 + 67.459 * a - 110.3 * a * a).exp()
    } else if a < 0.51 {
        1.0 - (-6.1327 + 20.218 * a - 18.663 * a * a).exp()
    } else if a < 0.95 {
        (0.9209 - 3.353 * a + 0.300 * a * a).exp()
    } else {
        (0.731 - 3.009 * a + 0.15 * a * a).exp()
    };
    p.clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p_value_fit_matches_critical_points() {
        for (a, p) in [(0.922, 0.15), (1.078, 0.10), (1.341, 0.05), (1.957, 0.01)] {
            let got = p_value_exponential(a);
            assert!((got - p).abs() < 0.004, "{a}: {got}");
        }
        // continuous at the joins
        for a in [0.26, 0.51, 0.95] {
            let d = p_value_exponential(a - 1e-9) - p_value_exponential(a);
            assert!(d.abs() < 2e-3, "{a}: {d}");
        }
        assert_eq!(p_value_exponential(100.0), 0.0);
    }

    #[test]
    fn hand_computed_small_sample() {
        // x = 1..5, mean 3, y = x/3; A² = 0.61485140 (computed independently in Python)
        let r = anderson_darling_exponential(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        let y: Vec<f64> = (1..=5).map(|x| f64::from(x) / 3.0).collect();
        let mut s = 0.0;
        for i in 0..5 {
            let fi = 1.0 - (-y[i]).exp();
            let fj = 1.0 - (-y[4 - i]).exp();
            s += (2 * i + 1) as f64 * (fi.ln() + (1.0 - fj).ln());
        }
        let a2 = -5.0 - s / 5.0;
        assert!((r.statistic - a2).abs() < 1e-12);
        assert!((r.statistic - 0.614_851_400_4).abs() < 1e-9);
        assert!((r.modified - a2 * 1.12).abs() < 1e-12);
        assert_eq!(r.n, 5);
    }

    #[test]
    fn rejects_bad_input() {
        assert!(matches!(
            anderson_darling_exponential(&[1.0; 4]),
            Err(StatsError::TooFewSamples { need: 5, got: 4 })
        ));
        assert!(matches!(
            anderson_darling_exponential(&[1.0, 2.0, 3.0, -1.0, 2.0]),
            Err(StatsError::InvalidSample(_))
        ));
        let zeros = anderson_darling_exponential(&[0.0; 6]).unwrap();
        assert!(zeros.reject_at_5pct && zeros.p_value == 0.0);
    }
}
