//! M/D/1 exact waiting time: the stable positive-term form against the classic Erlang series,
//! Pollaczek–Khinchine, and the asymptotic decay rate.

use model::analytic::md1;

const D: f64 = 50e-6;

/// Classic Erlang series in plain f64, with a bound on its rounding error: every term is
/// computed to a few ulps, so the error is below ~1e-15 x (sum of |terms|).
fn erlang_series(rho: f64, t: f64) -> (f64, f64) {
    let lambda = rho / D;
    let kmax = (t / D).floor() as usize;
    let (mut sum, mut abs_sum) = (0.0, 0.0);
    let mut fact = 1.0;
    for k in 0..=kmax {
        if k > 0 {
            fact *= k as f64;
        }
        let x = lambda * (k as f64 * D - t);
        let term = (lambda * (t - k as f64 * D)).exp() * x.powi(k as i32) / fact;
        sum += term;
        abs_sum += term.abs();
    }
    ((1.0 - rho) * sum, 1e-15 * abs_sum * 8.0)
}

/// The decay rate theta of the tail: root of lambda (e^{theta D} - 1) = theta, by bisection
/// (written independently of the library's solver).
fn theta(rho: f64) -> f64 {
    let lambda = rho / D;
    let f = |th: f64| lambda * (th * D).exp_m1() - th;
    let (mut lo, mut hi) = (1e-9 / D, 1.0 / D);
    while f(hi) < 0.0 {
        hi *= 2.0;
    }
    for _ in 0..300 {
        let mid = 0.5 * (lo + hi);
        if f(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[test]
fn agrees_with_erlang_series_where_that_is_accurate() {
    for rho in [0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.99] {
        let w = md1::solve(rho / D, D).unwrap();
        for i in 0..=400 {
            let t = i as f64 * 0.01 * D; // 0 .. 4 D, including the kinks at multiples of D
            let (naive, err) = erlang_series(rho, t);
            assert!(
                err < 1e-11,
                "the reference itself is not accurate enough here"
            );
            let stable = w.wait_cdf(t);
            assert!(
                (stable - naive).abs() < 1e-10,
                "rho {rho} t/D {}: stable {stable} naive {naive}",
                t / D
            );
        }
    }
}

#[test]
fn erlang_series_fails_where_the_stable_form_does_not() {
    // Not a check of the library against itself: it documents why the stable form exists.
    let rho = 0.95;
    let t = 200.0 * D;
    let (naive, err) = erlang_series(rho, t);
    assert!(
        err > 1.0,
        "series error bound {err} should be useless here ({naive})"
    );
    let w = md1::solve(rho / D, D).unwrap();
    let f = w.wait_cdf(t);
    assert!(f > 0.99 && f < 1.0, "{f}");
}

#[test]
fn cdf_is_a_distribution_with_the_right_atom_and_tail() {
    for rho in [0.5, 0.7, 0.9, 0.95, 0.99] {
        let w = md1::solve(rho / D, D).unwrap();
        assert!((w.wait_cdf(0.0) - (1.0 - rho)).abs() < 1e-14);
        assert!((w.prob_no_wait() - (1.0 - rho)).abs() < 1e-14);
        let th = theta(rho);
        assert!((w.tail_decay_rate() - th).abs() < 1e-9 * th);
        let mut prev_cdf = 0.0;
        let mut prev_ccdf = 1.0;
        let step = D / 7.0;
        let mut t = 0.0;
        loop {
            let f = w.wait_cdf(t);
            let g = w.wait_ccdf(t);
            assert!((0.0..=1.0).contains(&f) && (0.0..=1.0).contains(&g));
            assert!(f >= prev_cdf - 1e-15, "rho {rho} t {t}: cdf decreased");
            assert!(
                g <= prev_ccdf * (1.0 + 1e-13),
                "rho {rho} t {t}: ccdf increased"
            );
            assert!((f + g - 1.0).abs() < 1e-13, "rho {rho} t {t}: {f} + {g}");
            prev_cdf = f;
            prev_ccdf = g;
            if g < 1e-13 {
                break;
            }
            t += step;
        }
        assert!(w.wait_cdf(t) > 1.0 - 1e-12);
        // Tail log-slope over one service time, where the ccdf is ~1e-9, against theta.
        let t9 = w.wait_quantile(1.0 - 1e-9).unwrap();
        let slope = (w.wait_ccdf(t9).ln() - w.wait_ccdf(t9 + D).ln()) / D;
        assert!(
            (slope - th).abs() < 1e-6 * th,
            "rho {rho}: slope {slope} theta {th}"
        );
        // Deep tail keeps relative precision: still geometric at 1e-20 (the queue law is
        // computed, not extrapolated, down to about 1e-25).
        let t20 = (1e20_f64).ln() / th;
        let r = w.wait_ccdf(t20 + D) / w.wait_ccdf(t20);
        assert!((r - (-th * D).exp()).abs() < 1e-6, "rho {rho}: ratio {r}");
    }
}

/// Integral of the ccdf by composite Simpson on each service-time interval (the density has
/// kinks at multiples of D, so intervals never straddle one).
fn mean_by_integration(w: &model::analytic::mdc::MdcWait) -> f64 {
    let n = 64;
    let h = D / n as f64;
    let mut total = 0.0;
    let mut k = 0.0;
    loop {
        let t0 = k * D;
        let mut s = w.wait_ccdf(t0) + w.wait_ccdf(t0 + D);
        for i in 1..n {
            let c = if i % 2 == 1 { 4.0 } else { 2.0 };
            s += c * w.wait_ccdf(t0 + i as f64 * h);
        }
        total += s * h / 3.0;
        if w.wait_ccdf(t0 + D) < 1e-16 {
            return total;
        }
        k += 1.0;
    }
}

#[test]
fn mean_is_pollaczek_khinchine() {
    for rho in [0.5, 0.7, 0.9, 0.95, 0.99] {
        let w = md1::solve(rho / D, D).unwrap();
        let pk = rho * D / (2.0 * (1.0 - rho));
        let integral = mean_by_integration(&w);
        assert!(
            (integral - pk).abs() < 1e-6 * pk,
            "rho {rho}: integral {integral} PK {pk}"
        );
        // Little's law on the queue law gives the same mean.
        assert!((w.mean_wait() - pk).abs() < 1e-9 * pk);
        assert!((md1::mean_wait(rho / D, D).unwrap() - pk).abs() < 1e-12 * pk);
    }
}

#[test]
fn quantiles_invert_the_cdf_and_respect_the_atom() {
    let rho = 0.7;
    let w = md1::solve(rho / D, D).unwrap();
    assert_eq!(w.wait_quantile(0.2999).unwrap(), 0.0);
    assert_eq!(w.wait_quantile(0.29).unwrap(), 0.0);
    let q = w.wait_quantile(0.31).unwrap();
    assert!(q > 0.0 && q < D);
    for p in [0.5, 0.9, 0.99, 0.999, 0.9999] {
        let q = w.wait_quantile(p).unwrap();
        assert!(
            (w.wait_ccdf(q) - (1.0 - p)).abs() < 1e-12 * (1.0 - p).max(1e-3),
            "{p}"
        );
        assert_eq!(w.response_quantile(p).unwrap(), q + D);
        assert!((w.response_ccdf(q + D) - (1.0 - p)).abs() < 1e-9 * (1.0 - p));
    }
    // First piece has a closed form: P(W <= t) = (1 - rho) e^{lambda t} for t < D.
    let q = w.wait_quantile(0.5).unwrap();
    if q < D {
        let exact = (0.5 / 0.3_f64).ln() / (rho / D);
        assert!((q - exact).abs() < 1e-12 * exact);
    }
    assert_eq!(w.response_ccdf(0.999 * D), 1.0);
    assert!(w.wait_quantile(1.0).is_err());
    assert!(w.wait_quantile(f64::NAN).is_err());
}

#[test]
fn free_functions_validate() {
    assert!(md1::wait_cdf(20_000.0, D, 0.0).is_err()); // rho = 1
    assert!(md1::wait_cdf(-1.0, D, 0.0).is_err());
    assert!(md1::wait_cdf(1.0, f64::NAN, 0.0).is_err());
    let f = md1::wait_cdf(10_000.0, D, D).unwrap();
    assert!((f - 0.5 * 0.5_f64.exp()).abs() < 1e-14);
}
