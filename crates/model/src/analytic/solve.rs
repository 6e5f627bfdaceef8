//! Monotone inversion by bracketing and bisection, shared by every quantile in this module.

/// Smallest `t >= 0` (to relative precision ~1e-14) with `ccdf(t) <= target`, for a
/// non-increasing `ccdf`. Returns 0 when `ccdf(0) <= target`. `scale` is a natural time unit
/// used as the first bracket. Returns `f64::INFINITY` if no bracket is found (the ccdf never
/// falls to `target`, e.g. when `target` is below what `f64` can resolve).
pub(crate) fn invert_ccdf(ccdf: impl Fn(f64) -> f64, target: f64, scale: f64) -> f64 {
    if ccdf(0.0) <= target {
        return 0.0;
    }
    let mut lo = 0.0;
    let mut hi = scale;
    let mut doublings = 0;
    while ccdf(hi) > target {
        lo = hi;
        hi *= 2.0;
        doublings += 1;
        if doublings > 200 || !hi.is_finite() {
            return f64::INFINITY;
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi || hi - lo <= 1e-14 * hi {
            break;
        }
        if ccdf(mid) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverts_an_exponential() {
        let t = invert_ccdf(|t| (-2.0 * t).exp(), 0.01, 1.0);
        let exact = (100.0_f64).ln() / 2.0;
        assert!((t - exact).abs() < 1e-12 * exact);
        assert_eq!(invert_ccdf(|t| 0.5 * (-t).exp(), 0.6, 1.0), 0.0);
    }
}
