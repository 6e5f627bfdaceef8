//! Exact quantiles of sorted samples and distribution-free confidence intervals for quantiles.
//!
//! The interval uses order statistics: if B counts the samples below the true q-quantile ξ,
//! then B ~ Binomial(n, q) whatever the distribution, and P(x₍ₗ₎ ≤ ξ ≤ x₍ᵤ₎) (1-based ranks)
//! equals P(l ≤ B ≤ u − 1). Small n uses the binomial CDF itself; large n the normal
//! approximation with continuity correction (the method of Le Boudec's book that Lancet uses).

use crate::special::normal_quantile;

/// Largest n for which [`order_statistic_ci`] evaluates the binomial CDF exactly.
pub const EXACT_BINOMIAL_MAX_N: u64 = 1000;

/// Order-statistic (distribution-free) confidence interval for the q-quantile of n iid
/// samples: 0-based ranks `(lo, hi)` into the sorted sample such that
/// P(x₍lo₎ ≤ ξ_q ≤ x₍hi₎) ≥ `confidence`, with at most (1 − confidence)/2 of the miss
/// probability on each side. Exact binomial for n ≤ [`EXACT_BINOMIAL_MAX_N`], normal
/// approximation with continuity correction above. Ranks are clamped to [0, n − 1]; when the
/// sample is too small for the requested quantile the clamped interval covers less than asked
/// (e.g. p99.99 from 100 samples).
///
/// Degenerate input (n = 0, q or confidence outside (0, 1)) yields `(0, n.saturating_sub(1))`.
pub fn order_statistic_ci(n: u64, q: f64, confidence: f64) -> (u64, u64) {
    let last = n.saturating_sub(1);
    if n == 0 || !(q > 0.0 && q < 1.0) || !(confidence > 0.0 && confidence < 1.0) {
        return (0, last);
    }
    let alpha_half = (1.0 - confidence) / 2.0;
    // 1-based ranks l and u
    let (l, u) = if n <= EXACT_BINOMIAL_MAX_N {
        binomial_ranks(n, q, alpha_half)
    } else {
        normal_ranks(n, q, alpha_half)
    };
    let lo = l.max(1) - 1;
    let hi = u.max(1) - 1;
    (lo.min(last), hi.min(last))
}

/// Exact ranks: l the largest with F(l−1) ≤ α/2, u the smallest with F(u−1) ≥ 1 − α/2,
/// F the Binomial(n, q) CDF (u may come out as n + 1 and is clamped by the caller).
fn binomial_ranks(n: u64, q: f64, alpha_half: f64) -> (u64, u64) {
    // log pmf by the recurrence p(k+1) = p(k)·(n−k)/(k+1)·q/(1−q), in log space so that
    // n·ln(1−q) below the f64 range (e.g. q = 0.9999, n = 1000) is harmless.
    let log_ratio = (q / (1.0 - q)).ln();
    let mut log_pmf = n as f64 * (-q).ln_1p();
    let mut cdf = 0.0; // F(k) after adding pmf(k)
    let mut l = 1; // F(-1) = 0 ≤ α/2 always
    let mut u = n + 1;
    for k in 0..=n {
        cdf += log_pmf.exp();
        // cdf = F(k); a 1-based rank r has F(r − 1), so rank k + 1 sees F(k).
        if cdf <= alpha_half {
            l = k + 1;
        }
        if cdf >= 1.0 - alpha_half {
            u = k + 1;
            break;
        }
        let kf = k as f64;
        log_pmf += ((n as f64 - kf) / (kf + 1.0)).ln() + log_ratio;
    }
    (l, u)
}

/// Normal approximation with continuity correction: B ≈ N(nq, nq(1−q)),
/// F(k) ≈ Φ((k + ½ − nq)/σ).
fn normal_ranks(n: u64, q: f64, alpha_half: f64) -> (u64, u64) {
    let z = normal_quantile(1.0 - alpha_half);
    let nf = n as f64;
    let mean = nf * q;
    let sd = (nf * q * (1.0 - q)).sqrt();
    // F(l−1) ≤ α/2  ⇔  l − ½ ≤ nq − zσ
    let l = (mean - z * sd + 0.5).floor();
    // F(u−1) ≥ 1 − α/2  ⇔  u − ½ ≥ nq + zσ
    let u = (mean + z * sd + 0.5).ceil();
    let l = if l < 1.0 { 1 } else { l as u64 };
    let u = if u < 1.0 { 1 } else { (u as u64).min(n + 1) };
    (l, u)
}

/// Exact quantile of a SORTED slice, type 7 of Hyndman & Fan (linear interpolation between
/// the order statistics at h = (n − 1)q; numpy's default). `q` is clamped to [0, 1];
/// an empty slice gives NaN.
pub fn quantile_sorted(sorted: &[u64], q: f64) -> f64 {
    let n = sorted.len();
    if n == 0 || q.is_nan() {
        return f64::NAN;
    }
    let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
    let i = h.floor() as usize;
    let frac = h - i as f64;
    let a = sorted[i] as f64;
    match sorted.get(i + 1) {
        Some(&b) if frac > 0.0 => a + frac * (b as f64 - a),
        _ => a,
    }
}

/// The two 0-based ranks a type-7 quantile interpolates between.
pub(crate) fn type7_ranks(n: u64, q: f64) -> (u64, f64) {
    let h = n.saturating_sub(1) as f64 * q.clamp(0.0, 1.0);
    let i = h.floor();
    (i as u64, h - i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type7_matches_numpy_hand_values() {
        // numpy.quantile([1, 2, 3, 4], q) (default linear) = 1 + 3q
        let v = [1, 2, 3, 4];
        assert_eq!(quantile_sorted(&v, 0.5), 2.5);
        assert_eq!(quantile_sorted(&v, 0.25), 1.75);
        assert!((quantile_sorted(&v, 0.9) - 3.7).abs() < 1e-12);
        assert_eq!(quantile_sorted(&v, 0.0), 1.0);
        assert_eq!(quantile_sorted(&v, 1.0), 4.0);
        // numpy.quantile([10, 20, 40, 80, 160], 0.99) = 80 + 0.96*80 = 156.8
        assert!((quantile_sorted(&[10, 20, 40, 80, 160], 0.99) - 156.8).abs() < 1e-9);
        assert_eq!(quantile_sorted(&[7], 0.3), 7.0);
        assert!(quantile_sorted(&[], 0.5).is_nan());
    }

    /// Coverage of ranks (1-based l, u): P(l ≤ B ≤ u−1) for B ~ Bin(n, q), computed directly.
    fn coverage(n: u64, q: f64, lo: u64, hi: u64) -> f64 {
        let mut p = 0.0;
        let mut log_pmf = n as f64 * (-q).ln_1p();
        for k in 0..=n {
            // B = k lies in [l, u−1] = [lo+1, hi]
            if k > lo && k <= hi {
                p += log_pmf.exp();
            }
            let kf = k as f64;
            log_pmf += ((n as f64 - kf) / (kf + 1.0)).ln() + (q / (1.0 - q)).ln();
        }
        p
    }

    #[test]
    fn exact_ranks_reach_confidence_and_are_tight() {
        for (n, q) in [(100, 0.5), (200, 0.9), (1000, 0.99), (50, 0.3)] {
            let (lo, hi) = order_statistic_ci(n, q, 0.95);
            assert!(coverage(n, q, lo, hi) >= 0.95, "n={n} q={q}");
            // Tight: narrowing either side would drop a tail above 2.5 %.
            assert!(coverage(n, q, lo + 1, hi) < 0.975 + 1e-12 || lo + 1 > hi);
            assert!(coverage(n, q, lo, hi - 1) < 0.975 + 1e-12);
        }
        // Textbook case: median of n = 100 at 95 %: ranks 40 and 61 (1-based).
        assert_eq!(order_statistic_ci(100, 0.5, 0.95), (39, 60));
    }

    #[test]
    fn exact_and_normal_agree_near_the_switch() {
        let n = EXACT_BINOMIAL_MAX_N;
        for q in [0.5, 0.9, 0.99] {
            let (el, eu) = binomial_ranks(n, q, 0.025);
            let (nl, nu) = normal_ranks(n, q, 0.025);
            assert!(
                el.abs_diff(nl) <= 1 && eu.abs_diff(nu) <= 1,
                "q={q}: {el} {eu} vs {nl} {nu}"
            );
            // just above the switch the public function uses the normal ranks
            let (el, eu) = binomial_ranks(n + 1, q, 0.025);
            let (nl, nu) = order_statistic_ci(n + 1, q, 0.95);
            assert!(
                (el - 1).abs_diff(nl) <= 1 && (eu - 1).abs_diff(nu) <= 1,
                "q={q}"
            );
            // and their true coverage is still close to the nominal 95 %
            let cov = coverage(n + 1, q, nl, nu);
            assert!(cov > 0.945, "q={q}: {cov}");
        }
    }

    #[test]
    fn ranks_are_clamped() {
        assert_eq!(order_statistic_ci(100, 0.9999, 0.95).1, 99);
        assert_eq!(order_statistic_ci(10_000, 0.9999, 0.95).1, 9999);
        assert_eq!(order_statistic_ci(1, 0.5, 0.95), (0, 0));
        assert_eq!(order_statistic_ci(0, 0.5, 0.95), (0, 0));
        let (lo, hi) = order_statistic_ci(1_000_000, 0.99, 0.95);
        assert!(lo < 990_000 && hi > 990_000 && hi - lo < 1000);
    }
}
