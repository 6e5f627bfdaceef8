//! Quantile functions of the standard normal and Student-t distributions.
//!
//! Written by hand because the crates allowed in `stats` (hdrhistogram, serde, thiserror) do
//! not provide them and the crate needs only these two, at moderate speed: both are solved by
//! bisection on a CDF that is accurate to double precision (Marsaglia's positive-term series
//! for the normal; the finite trigonometric series of Abramowitz & Stegun 26.7.3–4 for the t
//! distribution with integer degrees of freedom).

use std::f64::consts::{FRAC_PI_2, PI};

/// Degrees of freedom above which the Student-t quantile uses the Cornish–Fisher expansion
/// around the normal quantile (A&S 26.7.5) instead of the exact finite series; at this size
/// the expansion's error is far below 1e-12.
const T_EXPANSION_DF: u64 = 2000;

/// Standard normal CDF Φ(x). Marsaglia's series Φ(x) = ½ + φ(x)(x + x³/3 + x⁵/(3·5) + …)
/// has only positive terms for x > 0, so it keeps full relative precision in the sum.
pub fn normal_cdf(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x < 0.0 {
        return 1.0 - normal_cdf(-x);
    }
    if x > 38.0 {
        return 1.0;
    }
    let mut term = x;
    let mut sum = x;
    let x2 = x * x;
    let mut k = 1.0;
    loop {
        k += 2.0;
        term *= x2 / k;
        let next = sum + term;
        if next == sum {
            break;
        }
        sum = next;
    }
    let pdf = (-0.5 * x2).exp() / (2.0 * PI).sqrt();
    (0.5 + pdf * sum).min(1.0)
}

/// Bisection for an increasing function on [lo, hi]: the x with f(x) = target, to the
/// resolution of f64.
fn bisect(mut lo: f64, mut hi: f64, target: f64, f: impl Fn(f64) -> f64) -> f64 {
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if f(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Quantile of the standard normal distribution: the z with Φ(z) = p.
///
/// Returns NaN when `p` is outside (0, 1). Accurate to about 1e-15 in p (absolute), which is
/// all that confidence levels such as 0.95 or 0.999 need.
pub fn normal_quantile(p: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) {
        return f64::NAN;
    }
    if p < 0.5 {
        return -normal_quantile(1.0 - p);
    }
    bisect(0.0, 40.0, p, normal_cdf)
}

/// P(|T| <= √ν·tan θ) for Student's t with ν degrees of freedom (A&S 26.7.3–4).
fn t_central_prob_theta(theta: f64, df: u64) -> f64 {
    let (s, c) = theta.sin_cos();
    let c2 = c * c;
    if df & 1 == 0 {
        // sinθ (1 + ½cos²θ + (1·3)/(2·4)cos⁴θ + … ) with (ν−2)/2 + 1 terms
        let mut term = 1.0;
        let mut sum = 1.0;
        for k in 1..df / 2 {
            let kf = k as f64;
            term *= c2 * (2.0 * kf - 1.0) / (2.0 * kf);
            sum += term;
        }
        s * sum
    } else {
        // (2/π)(θ + sinθ cosθ (1 + (2/3)cos²θ + (2·4)/(3·5)cos⁴θ + …)) for ν > 1
        let mut tail = 0.0;
        if df > 1 {
            let mut term = 1.0;
            let mut sum = 1.0;
            for k in 1..(df - 1) / 2 {
                let kf = k as f64;
                term *= c2 * (2.0 * kf) / (2.0 * kf + 1.0);
                sum += term;
            }
            tail = s * c * sum;
        }
        (theta + tail) / FRAC_PI_2
    }
}

/// Quantile of Student's t distribution with `df` degrees of freedom: the t with
/// P(T <= t) = p. Returns NaN when `p` is outside (0, 1) or `df` is 0.
pub fn student_t_quantile(p: f64, df: u64) -> f64 {
    if !(p > 0.0 && p < 1.0) || df == 0 {
        return f64::NAN;
    }
    if p < 0.5 {
        return -student_t_quantile(1.0 - p, df);
    }
    if df > T_EXPANSION_DF {
        return cornish_fisher_t(normal_quantile(p), df as f64);
    }
    let target = 2.0 * p - 1.0;
    let theta = bisect(0.0, FRAC_PI_2, target, |th| t_central_prob_theta(th, df));
    (df as f64).sqrt() * theta.tan()
}

/// Two-sided p-value of a Student-t statistic: P(|T| ≥ |t|) with `df` degrees of freedom
/// (exact finite series; the normal for df beyond [`T_EXPANSION_DF`]). NaN for NaN or df 0.
pub fn student_t_two_sided_p(t: f64, df: u64) -> f64 {
    if t.is_nan() || df == 0 {
        return f64::NAN;
    }
    if df > T_EXPANSION_DF {
        return 2.0 * (1.0 - normal_cdf(t.abs()));
    }
    let theta = (t.abs() / (df as f64).sqrt()).atan();
    (1.0 - t_central_prob_theta(theta, df)).clamp(0.0, 1.0)
}

/// Cornish–Fisher expansion of the t quantile in powers of 1/ν (A&S 26.7.5).
fn cornish_fisher_t(z: f64, nu: f64) -> f64 {
    let z2 = z * z;
    let z3 = z2 * z;
    let z5 = z3 * z2;
    let z7 = z5 * z2;
    let z9 = z7 * z2;
    let g1 = (z3 + z) / 4.0;
    let g2 = (5.0 * z5 + 16.0 * z3 + 3.0 * z) / 96.0;
    let g3 = (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / 384.0;
    let g4 = (79.0 * z9 + 776.0 * z7 + 1482.0 * z5 - 1920.0 * z3 - 945.0 * z) / 92160.0;
    z + g1 / nu + g2 / (nu * nu) + g3 / nu.powi(3) + g4 / nu.powi(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_quantile_matches_tables() {
        // Reference values: standard tables of the normal distribution (10 digits).
        let cases = [
            (0.5, 0.0),
            (0.975, 1.959963985),
            (0.995, 2.575829304),
            (0.9995, 3.290526731),
            (0.84134474606854, 1.0),
            (0.025, -1.959963985),
        ];
        for (p, z) in cases {
            assert!(
                (normal_quantile(p) - z).abs() < 1e-8,
                "p={p}: {}",
                normal_quantile(p)
            );
        }
        assert!(normal_quantile(0.0).is_nan() && normal_quantile(1.0).is_nan());
    }

    #[test]
    fn normal_cdf_tail_value() {
        // 1 - Φ(3) = 0.0013498980316301
        assert!((1.0 - normal_cdf(3.0) - 0.0013498980316301).abs() < 1e-14);
    }

    #[test]
    fn student_t_quantile_matches_tables() {
        // Reference values: t tables to 9 significant digits.
        let cases = [
            (0.975, 1, 12.7062047),
            (0.975, 2, 4.30265273),
            (0.975, 5, 2.57058184),
            (0.995, 10, 3.16927267),
            (0.975, 30, 2.04227246),
            (0.95, 9, 1.83311293),
            (0.975, 120, 1.97993041),
        ];
        for (p, df, t) in cases {
            let got = student_t_quantile(p, df);
            assert!((got - t).abs() < 2e-7 * t, "p={p} df={df}: {got} vs {t}");
        }
    }

    #[test]
    fn two_sided_p_inverts_the_quantile() {
        for df in [1_u64, 4, 23, 150, 5000] {
            for p in [0.9, 0.975, 0.995] {
                let t = student_t_quantile(p, df);
                let got = student_t_two_sided_p(t, df);
                let tol = if df > 2000 { 1e-4 } else { 1e-6 };
                assert!((got - 2.0 * (1.0 - p)).abs() < tol, "df={df} p={p}: {got}");
            }
        }
        assert_eq!(student_t_two_sided_p(0.0, 7), 1.0);
    }

    #[test]
    fn t_expansion_agrees_with_exact_series() {
        for df in [30_u64, 31, 2000, 2001] {
            for p in [0.9, 0.975, 0.995] {
                let exact = {
                    let target = 2.0 * p - 1.0;
                    let th = bisect(0.0, FRAC_PI_2, target, |th| t_central_prob_theta(th, df));
                    (df as f64).sqrt() * th.tan()
                };
                let cf = cornish_fisher_t(normal_quantile(p), df as f64);
                let tol = if df < 100 { 2e-6 } else { 1e-11 };
                assert!((exact - cf).abs() < tol, "df={df} p={p}: {exact} vs {cf}");
            }
        }
    }
}
