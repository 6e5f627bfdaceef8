//! M/M/1 and M/M/c exact forms, Erlang C, and the approximations that must reduce to them.

use model::analytic::{allen_cunneen_mean_wait, erlang_c, mm1, mmc};

/// Erlang C from its textbook definition with explicit powers and factorials (fine for small
/// c), independent of the library's Erlang B recurrence.
fn erlang_c_direct(c: u32, a: f64) -> f64 {
    let mut sum = 0.0;
    let mut term = 1.0; // a^k / k!
    for k in 0..c {
        if k > 0 {
            term *= a / f64::from(k);
        }
        sum += term;
    }
    let top = term * a / f64::from(c) * f64::from(c) / (f64::from(c) - a);
    top / (sum + top)
}

#[test]
fn erlang_c_known_values() {
    assert!((erlang_c(2, 1.0).unwrap() - 1.0 / 3.0).abs() < 1e-15);
    let direct = erlang_c_direct(10, 8.0);
    assert!((erlang_c(10, 8.0).unwrap() - direct).abs() < 1e-14);
    // Tabulated value (e.g. call-centre tables): C(10, 8) = 0.4092 to four places.
    assert!((direct - 0.4092).abs() < 5e-5, "{direct}");
    for (c, a) in [(3, 2.5), (20, 15.0), (50, 49.0)] {
        let (x, y) = (erlang_c(c, a).unwrap(), erlang_c_direct(c, a));
        assert!((x - y).abs() < 1e-12, "c {c} a {a}: {x} vs {y}");
    }
    // Large c where a^c / c! overflows f64: the recurrence still works and stays a probability.
    let big = erlang_c(2000, 1950.0).unwrap();
    assert!(big > 0.0 && big < 1.0);
}

#[test]
fn mmc_with_one_server_is_mm1() {
    let mu = 1.0 / 50e-6;
    for rho in [0.1, 0.5, 0.9, 0.99] {
        let l = rho * mu;
        for i in 0..200 {
            let t = i as f64 * 10e-6;
            let (a, b) = (
                mmc::wait_ccdf(l, mu, 1, t).unwrap(),
                mm1::wait_ccdf(l, mu, t).unwrap(),
            );
            assert!((a - b).abs() < 1e-14 * b.max(1e-300));
            // The hypoexponential mixture must collapse to Exp(mu - lambda).
            let (a, b) = (
                mmc::response_ccdf(l, mu, 1, t).unwrap(),
                mm1::response_ccdf(l, mu, t).unwrap(),
            );
            assert!((a - b).abs() < 1e-12 * b, "rho {rho} t {t}: {a} vs {b}");
        }
        for p in [0.5, 0.9, 0.99, 0.999, 0.9999] {
            let (a, b) = (
                mmc::response_quantile(l, mu, 1, p).unwrap(),
                mm1::response_quantile(l, mu, p).unwrap(),
            );
            assert!((a - b).abs() < 1e-10 * b, "rho {rho} p {p}");
            let (a, b) = (
                mmc::wait_quantile(l, mu, 1, p).unwrap(),
                mm1::wait_quantile(l, mu, p).unwrap(),
            );
            assert!((a - b).abs() <= 1e-12 * b);
        }
    }
}

#[test]
fn mmc_response_mean_is_wait_plus_service() {
    // Integral of the response ccdf (Simpson) = C / (c mu - lambda) + 1 / mu, including the
    // case theta = c mu - lambda = mu where the hypoexponential form is 0/0 in textbook form.
    let mu = 1.0;
    for (c, l) in [(4, 3.0), (2, 1.0), (8, 7.5)] {
        let n = 200_000;
        let end = 80.0;
        let h = end / n as f64;
        let mut s =
            mmc::response_ccdf(l, mu, c, 0.0).unwrap() + mmc::response_ccdf(l, mu, c, end).unwrap();
        for i in 1..n {
            let w = if i % 2 == 1 { 4.0 } else { 2.0 };
            s += w * mmc::response_ccdf(l, mu, c, i as f64 * h).unwrap();
        }
        let integral = s * h / 3.0;
        let exact = mmc::mean_wait(l, mu, c).unwrap() + 1.0 / mu;
        assert!(
            (integral - exact).abs() < 1e-8 * exact,
            "c {c}: {integral} vs {exact}"
        );
    }
}

#[test]
fn allen_cunneen_is_exact_for_mmc() {
    let (c, l, s) = (6, 5.0, 1.0);
    let ac = allen_cunneen_mean_wait(c, l, s, 1.0, 1.0).unwrap();
    assert!((ac - mmc::mean_wait(l, 1.0 / s, c).unwrap()).abs() < 1e-14);
}
