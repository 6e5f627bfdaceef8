//! The simulator against exact queueing theory, computed here from the textbook formulas (not
//! from `model::analytic`). Each check runs R independent replications (different seeds),
//! takes the statistic per replication, and asserts that the theoretical value lies inside
//! the 95 % Student-t interval of the replication means widened by a stated bias allowance
//! (finite-run and warm-up bias, ns rounding). Samples inside one run are autocorrelated, so
//! per-run order-statistic intervals would be too narrow; replications are independent.

use model::{simulate, ArrivalSpec, Collector, Discipline, ServiceSpec, SimConfig};
use stats::{mean_ci, Quantile};

const D: f64 = 50_000.0; // 50 µs, the paper's service time
const REPS: u64 = 10;

fn config(
    service: ServiceSpec,
    workers: u32,
    load: f64,
    discipline: Discipline,
    requests: u64,
    seed: u64,
) -> SimConfig {
    let rate = SimConfig::rate_for_load(load, workers, &service).unwrap();
    SimConfig {
        arrival: ArrivalSpec::Poisson,
        rate_per_s: Some(rate),
        service,
        workers,
        discipline,
        class_probs: Vec::new(),
        connections: None,
        requests,
        warmup_fraction: 0.1,
        seed,
    }
}

fn run(cfg: &SimConfig) -> Collector {
    let mut c = Collector::new(
        cfg.requests,
        cfg.warmup_fraction,
        cfg.class_probs.len().max(1),
        u64::MAX,
    );
    simulate(cfg, &mut c).unwrap();
    c
}

/// Asserts `theory` ∈ [lo − allowance·|theory|, hi + allowance·|theory|] of the 95 % CI of
/// `per_rep`, printing both.
fn assert_ci(what: &str, per_rep: &[f64], theory: f64, allowance: f64) {
    let ci = mean_ci(per_rep, 0.95).unwrap();
    let slack = allowance * theory.abs();
    println!(
        "{what}: theory {theory:.4}, sim {:.4} [{:.4}, {:.4}]",
        ci.value, ci.lo, ci.hi
    );
    assert!(
        ci.lo - slack <= theory && theory <= ci.hi + slack,
        "{what}: theory {theory} outside [{}, {}] ± {slack}",
        ci.lo,
        ci.hi
    );
}

fn q(r: &mut stats::Recorder, p: f64) -> f64 {
    r.quantile(Quantile::new(p).unwrap()).unwrap()
}

#[test]
fn mm1_response_quantiles() {
    // M/M/1: the response time is exponential with rate μ − λ, so t_p = −ln(1 − p)/(μ − λ).
    let load = 0.7;
    let mu = 1.0 / D;
    let lambda = load * mu;
    let ps = [0.5, 0.9, 0.99];
    let mut per_p = vec![Vec::new(); ps.len()];
    let mut means = Vec::new();
    for seed in 0..REPS {
        let mut c = run(&config(
            ServiceSpec::Exponential { mean_ns: D },
            1,
            load,
            Discipline::Fifo,
            100_000,
            seed,
        ));
        for (i, p) in ps.iter().enumerate() {
            per_p[i].push(q(c.response(), *p));
        }
        means.push(c.mean_response_ns());
    }
    for (i, p) in ps.iter().enumerate() {
        assert_ci(
            &format!("M/M/1 p{p} response ns"),
            &per_p[i],
            -(1.0 - p).ln() / (mu - lambda),
            0.02,
        );
    }
    assert_ci("M/M/1 mean response ns", &means, 1.0 / (mu - lambda), 0.02);
}

/// Erlang C: probability that an arrival waits in M/M/c with offered load a = λ/μ (stable
/// Erlang-B recurrence).
fn erlang_c(c: u32, a: f64) -> f64 {
    let mut b = 1.0;
    for k in 1..=c {
        b = a * b / (f64::from(k) + a * b);
    }
    let rho = a / f64::from(c);
    b / (1.0 - rho * (1.0 - b))
}

#[test]
fn mmc_wait_matches_erlang_c() {
    // M/M/4 at ρ = 0.8: P(W > t) = C·e^{−(cμ − λ)t}, E[W] = C/(cμ − λ).
    let (c, load) = (4u32, 0.8);
    let mu = 1.0 / D;
    let lambda = load * f64::from(c) * mu;
    let ec = erlang_c(c, lambda / mu);
    let decay = f64::from(c) * mu - lambda;
    let (mut p_wait, mut mean_w, mut p99_w) = (Vec::new(), Vec::new(), Vec::new());
    for seed in 0..REPS {
        let cfg = config(
            ServiceSpec::Exponential { mean_ns: D },
            c,
            load,
            Discipline::Fifo,
            100_000,
            100 + seed,
        );
        let mut col = run(&cfg);
        let waits = col.wait().values().unwrap();
        p_wait.push(waits.iter().filter(|w| **w > 0).count() as f64 / waits.len() as f64);
        mean_w.push(col.mean_wait_ns());
        p99_w.push(q(col.wait(), 0.99));
    }
    assert_ci("M/M/4 P(wait > 0)", &p_wait, ec, 0.02);
    assert_ci("M/M/4 mean wait ns", &mean_w, ec / decay, 0.03);
    assert_ci("M/M/4 p99 wait ns", &p99_w, (ec / 0.01).ln() / decay, 0.03);
}

/// M/D/1 waiting-time CDF by Erlang's series:
/// P(W ≤ t) = (1 − ρ) Σ_{k=0}^{⌊t/D⌋} [λ(kD − t)]^k / k! · e^{−λ(kD − t)}.
/// The alternating terms cancel badly for large t; in f64 it is accurate for t ≤ ~3D.
fn md1_wait_cdf(t: f64, lambda: f64, d: f64) -> f64 {
    let rho = lambda * d;
    let mut sum = 0.0;
    let mut fact = 1.0;
    for k in 0..=((t / d).floor() as i32) {
        if k > 0 {
            fact *= f64::from(k);
        }
        let x = lambda * (f64::from(k) * d - t);
        sum += x.powi(k) / fact * (-x).exp();
    }
    (1.0 - rho) * sum
}

#[test]
fn md1_wait_matches_erlang_series() {
    let load = 0.7;
    let lambda = load / D;
    let ts = [0.0, 0.5 * D, D, 2.0 * D, 3.0 * D];
    let mut cdf = vec![Vec::new(); ts.len()];
    let mut mean_w = Vec::new();
    let mut p50_r = Vec::new();
    for seed in 0..REPS {
        let cfg = config(
            ServiceSpec::Deterministic { mean_ns: D },
            1,
            load,
            Discipline::Fifo,
            100_000,
            200 + seed,
        );
        let mut col = run(&cfg);
        let waits = col.wait().values().unwrap();
        for (i, t) in ts.iter().enumerate() {
            cdf[i].push(
                waits.iter().filter(|w| **w as f64 <= *t).count() as f64 / waits.len() as f64,
            );
        }
        mean_w.push(col.mean_wait_ns());
        p50_r.push(q(col.response(), 0.5));
    }
    // P(W = 0) = 1 − ρ.
    assert_ci("M/D/1 P(W = 0)", &cdf[0], 1.0 - load, 0.01);
    for (i, t) in ts.iter().enumerate().skip(1) {
        assert_ci(
            &format!("M/D/1 P(W <= {}us)", t / 1e3),
            &cdf[i],
            md1_wait_cdf(*t, lambda, D),
            0.01,
        );
    }
    // Pollaczek–Khinchine for deterministic service: E[W] = ρD / (2(1 − ρ)).
    assert_ci(
        "M/D/1 mean wait ns",
        &mean_w,
        load * D / (2.0 * (1.0 - load)),
        0.03,
    );
    // Median response = D + the wait median, found by bisection on the series (it is < 3D).
    let (mut lo, mut hi) = (0.0, 3.0 * D);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if md1_wait_cdf(mid, lambda, D) < 0.5 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    assert_ci("M/D/1 p50 response ns", &p50_r, D + 0.5 * (lo + hi), 0.02);
}

#[test]
fn preemptive_priority_class0_sees_only_its_own_traffic() {
    // Preemptive-resume, M/M/1, two classes of equal share at total ρ = 0.7: class 0 never
    // notices class 1, so its response is that of an M/M/1 with λ₀ = 0.35μ: exponential with
    // rate μ − λ₀.
    let mu = 1.0 / D;
    let lambda0 = 0.35 * mu;
    let (mut mean0, mut p99_0) = (Vec::new(), Vec::new());
    let (mut wait0, mut wait1) = (Vec::new(), Vec::new());
    for seed in 0..REPS {
        let mut cfg = config(
            ServiceSpec::Exponential { mean_ns: D },
            1,
            0.7,
            Discipline::PriorityPreemptive,
            100_000,
            300 + seed,
        );
        cfg.class_probs = vec![0.5, 0.5];
        let mut col = run(&cfg);
        let r0 = col.class_response(0).unwrap();
        let vals = r0.values().unwrap();
        mean0.push(vals.iter().sum::<u64>() as f64 / vals.len() as f64);
        p99_0.push(q(r0, 0.99));
        let w0 = col.class_wait(0).unwrap().values().unwrap();
        wait0.push(w0.iter().sum::<u64>() as f64 / w0.len() as f64);
        let w1 = col.class_wait(1).unwrap().values().unwrap();
        wait1.push(w1.iter().sum::<u64>() as f64 / w1.len() as f64);
    }
    assert_ci(
        "preemptive class 0 mean response ns",
        &mean0,
        1.0 / (mu - lambda0),
        0.02,
    );
    assert_ci(
        "preemptive class 0 p99 response ns",
        &p99_0,
        100f64.ln() / (mu - lambda0),
        0.03,
    );
    // Class 1 waits far longer than class 0 in every replication.
    assert!(wait0.iter().zip(&wait1).all(|(a, b)| a < b));
}
