//! M/D/c exact waiting time: GTH-solved queue law against an independent solver, against the
//! M/D/1 recursion, Little's law, the asymptotic decay rate, and Tales of the Tail's claims.

use model::analytic::{md1, mdc, mdc::MdcWait};

const D: f64 = 50e-6;

fn lambda(rho: f64, c: u32) -> f64 {
    rho * f64::from(c) / D
}

/// Stationary law of Crommelin's chain by plain power iteration on a truncated state space
/// (a different algorithm from the library's GTH reduction; only for moderate loads).
fn power_iteration(a: f64, c: usize, states: usize) -> Vec<f64> {
    let mut alpha = vec![(-a).exp()];
    for k in 1..states {
        let next = alpha[k - 1] * a / k as f64;
        alpha.push(next);
    }
    let mut p = vec![1.0 / states as f64; states];
    for _ in 0..20_000 {
        let mut next = vec![0.0; states];
        for (i, &pi) in p.iter().enumerate() {
            let base = i.saturating_sub(c);
            for (m, &am) in alpha.iter().enumerate().take(states - base) {
                next[base + m] += pi * am;
            }
        }
        let total: f64 = next.iter().sum();
        next.iter_mut().for_each(|x| *x /= total);
        let change: f64 = next.iter().zip(&p).map(|(a, b)| (a - b).abs()).sum();
        p = next;
        if change < 1e-15 {
            break;
        }
    }
    p
}

#[test]
fn queue_law_matches_power_iteration() {
    for (c, rho) in [(2, 0.7), (4, 0.7), (3, 0.5), (8, 0.6)] {
        let w = MdcWait::new(lambda(rho, c), D, c).unwrap();
        let p = w.queue_probs();
        let reference = power_iteration(rho * f64::from(c), c as usize, 200);
        for j in 0..60 {
            assert!(
                (p[j] - reference[j]).abs() < 1e-12,
                "c {c} rho {rho} j {j}: {} vs {}",
                p[j],
                reference[j]
            );
        }
    }
}

#[test]
fn one_worker_equals_md1_recursion() {
    for rho in [0.3, 0.7, 0.95, 0.99] {
        let gth = MdcWait::new(rho / D, D, 1).unwrap();
        let rec = md1::solve(rho / D, D).unwrap();
        for (j, (a, b)) in gth.queue_probs().iter().zip(rec.queue_probs()).enumerate() {
            if *b > 1e-20 {
                assert!((a - b).abs() < 1e-10 * b, "rho {rho} j {j}: {a} vs {b}");
            }
        }
        for i in 0..500 {
            let t = i as f64 * 0.37 * D;
            let (a, b) = (gth.wait_ccdf(t), rec.wait_ccdf(t));
            if b < 1e-20 {
                // Below the truncation level both are geometric extrapolations.
                break;
            }
            assert!(
                (a - b).abs() <= 1e-10 * b + 1e-300,
                "rho {rho} t/D {}",
                t / D
            );
        }
        let free = mdc::wait_cdf(rho / D, D, 1, 3.0 * D).unwrap();
        assert!((free - md1::wait_cdf(rho / D, D, 3.0 * D).unwrap()).abs() < 1e-12);
    }
}

/// Root z0 > 1 of z^c = exp(a (z - 1)), independently of the library, by bisection on
/// c ln z - a (z - 1) between its maximum z = c / a and a point where it is negative.
fn tail_rate(rho: f64, c: u32) -> f64 {
    let (cf, a) = (f64::from(c), rho * f64::from(c));
    let f = |z: f64| cf * z.ln() - a * (z - 1.0);
    let (mut lo, mut hi) = (cf / a, 2.0 * cf / a);
    while f(hi) > 0.0 {
        hi *= 2.0;
    }
    for _ in 0..300 {
        let mid = 0.5 * (lo + hi);
        if f(mid) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    cf * (0.5 * (lo + hi)).ln() / D
}

fn mean_by_integration(w: &MdcWait) -> f64 {
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
fn distribution_is_consistent_with_its_queue_law() {
    for (c, rho) in [
        (2, 0.5),
        (2, 0.9),
        (4, 0.8),
        (8, 0.7),
        (8, 0.95),
        (16, 0.99),
    ] {
        let w = MdcWait::new(lambda(rho, c), D, c).unwrap();
        let p = w.queue_probs();
        let total: f64 = p.iter().sum();
        assert!((total - 1.0).abs() < 1e-13);
        // PASTA: P(W = 0) = P(Q < c).
        let below: f64 = p[..c as usize].iter().sum();
        assert!((w.wait_cdf(0.0) - below).abs() < 1e-13, "c {c} rho {rho}");
        // Mean offered work: E[min(Q, c)] = a (busy servers = offered load).
        let busy: f64 = p
            .iter()
            .enumerate()
            .map(|(j, x)| j.min(c as usize) as f64 * x)
            .sum();
        let a = rho * f64::from(c);
        assert!((busy - a).abs() < 1e-11 * a, "c {c} rho {rho}: {busy}");
        // Mean of the waiting-time law = Little's law on the queue law.
        let integral = mean_by_integration(&w);
        let little = w.mean_wait();
        assert!(
            (integral - little).abs() < 1e-6 * little,
            "c {c} rho {rho}: {integral} vs {little}"
        );
        // Monotone, complementary, and the tail decays at the exact rate.
        let mut prev = 1.0;
        for i in 0..2000 {
            let t = i as f64 * D / 5.0;
            let (f, g) = (w.wait_cdf(t), w.wait_ccdf(t));
            assert!((f + g - 1.0).abs() < 1e-13 && g <= prev * (1.0 + 1e-13));
            prev = g;
        }
        let th = tail_rate(rho, c);
        assert!((w.tail_decay_rate() - th).abs() < 1e-9 * th);
        let t9 = w.wait_quantile(1.0 - 1e-9).unwrap();
        let slope = (w.wait_ccdf(t9).ln() - w.wait_ccdf(t9 + D).ln()) / D;
        assert!(
            (slope - th).abs() < 1e-5 * th,
            "c {c} rho {rho}: {slope} vs {th}"
        );
    }
}

#[test]
fn rejects_what_it_cannot_solve() {
    assert!(MdcWait::new(lambda(1.0, 2), D, 2).is_err());
    assert!(MdcWait::new(1.0, D, 0).is_err());
    assert!(MdcWait::new(1.0, D, 10_000).is_err());
    assert!(MdcWait::new(lambda(0.999_999, 1), D, 1).is_err());
    assert!(MdcWait::new(f64::INFINITY, D, 1).is_err());
}

#[test]
fn tales_of_the_tail_shapes() {
    // Section 2.2: p99 grows about 10x from rho 0.5 to 0.95 (one worker, D = 50 us).
    let p99 = |rho: f64, c: u32| {
        MdcWait::new(lambda(rho, c), D, c)
            .unwrap()
            .response_quantile(0.99)
            .unwrap()
    };
    let ratio = p99(0.95, 1) / p99(0.5, 1);
    assert!(ratio > 7.0 && ratio < 13.0, "p99 ratio {ratio}");
    // Section 2.3: at rho 0.7, p99 with 8 workers is about 4x lower than with 1.
    let ratio = p99(0.7, 1) / p99(0.7, 8);
    assert!(ratio > 3.0 && ratio < 5.0, "worker ratio {ratio}");
}

/// The figures for the CLI helper: `cargo test -p model --release --test model_it analytic_mdc::print_reference_table -- --nocapture`.
#[test]
fn print_reference_table() {
    println!("M/D/1, D = 50 us: response time (us)");
    for rho in [0.5, 0.7, 0.95] {
        let w = md1::solve(rho / D, D).unwrap();
        let q = |p: f64| w.response_quantile(p).unwrap() * 1e6;
        println!(
            "  rho {rho:4}: p50 {:8.2}  p99 {:8.2}  p99.9 {:8.2}",
            q(0.5),
            q(0.99),
            q(0.999)
        );
    }
    let w = MdcWait::new(lambda(0.8, 4), D, 4).unwrap();
    println!(
        "M/D/4 rho 0.8: median response {:.2} us",
        w.response_quantile(0.5).unwrap() * 1e6
    );
    for c in [1, 2, 4, 8] {
        let w = MdcWait::new(lambda(0.7, c), D, c).unwrap();
        println!(
            "M/D/{c} rho 0.7: p99 response {:.2} us",
            w.response_quantile(0.99).unwrap() * 1e6
        );
    }
}
