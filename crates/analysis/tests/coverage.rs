//! Acceptance test against exact theory: simulated M/M/1 runs (ρ = 0.7) fed through the same
//! `analyse` that real runs use. The exact response-time quantile of M/M/1 (FIFO) is
//! −ln(1 − q)/(μ − λ). The nominal 95 % intervals of the user view's p50 and p99 must contain
//! it in 90–98 % of the runs: narrower (the old order-statistic intervals, which ignore the
//! queue's autocorrelation) or much wider both fail. The same runs check the stationarity
//! test's false alarms, and a run with scripted stalls checks that it is flagged.

use analysis::{analyse, AnalysisConfig};
use load::{Outcome, RequestRecord};
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use rand_xoshiro::Xoshiro256PlusPlus;
use stats::Recorder;

const RUNS: u64 = 200;
/// Requests per run, of which the first WARMUP_NS (≈ 7 000 requests) are warm-up.
const REQUESTS: u64 = 107_000;
const WARMUP_NS: u64 = 100_000_000;
/// Mean service 10 µs (μ = 0.1 /µs), arrivals λ = 0.07 /µs: ρ = 0.7.
const MEAN_SERVICE_NS: f64 = 10_000.0;
const RATE_PER_NS: f64 = 0.07 / 1_000.0;

/// One M/M/1 run: Poisson intended arrivals, responses by the Lindley recursion, each with
/// its own seeded stream; sent = seen = intended, kernel receive = receive.
fn mm1_run(seed: u64) -> Vec<RequestRecord> {
    let mut arr = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut svc = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5EED_0F5E_41CE);
    let gap = Exp::new(RATE_PER_NS).unwrap();
    let service = Exp::new(1.0 / MEAN_SERVICE_NS).unwrap();
    let (mut t, mut wait, mut prev_service) = (0.0_f64, 0.0_f64, 0.0_f64);
    (0..REQUESTS)
        .map(|k| {
            let a: f64 = gap.sample(&mut arr);
            t += a;
            if k > 0 {
                wait = (wait + prev_service - a).max(0.0); // Lindley
            }
            let s: f64 = service.sample(&mut svc);
            prev_service = s;
            let intended = t.round() as u64;
            let mut r = RequestRecord::scheduled(intended, 0);
            r.seen_ns = intended;
            r.sent_ns = intended;
            r.received_ns = intended + (wait + s).round() as u64;
            r.kernel_rx_ns = r.received_ns;
            r.outcome = Outcome::Ok;
            r
        })
        .collect()
}

fn cfg() -> AnalysisConfig {
    AnalysisConfig {
        warmup_ns: WARMUP_NS,
        ..AnalysisConfig::default()
    }
}

fn exact_quantile(q: f64) -> f64 {
    let mu_minus_lambda = 1.0 / MEAN_SERVICE_NS - RATE_PER_NS;
    -(1.0 - q).ln() / mu_minus_lambda
}

#[derive(Default, Clone, Copy)]
struct Tally {
    runs: u32,
    sectioned: [u32; 2],
    order_stat: [u32; 2],
    unsteady: u32,
}

fn tally(seeds: impl Iterator<Item = u64>) -> Tally {
    let truth = [exact_quantile(0.5), exact_quantile(0.99)];
    let mut t = Tally::default();
    for seed in seeds {
        let recs = mm1_run(seed);
        let a = analyse(&recs, &cfg()).expect("a simulated run analyses");
        // the old, independence-assuming interval on the same values, for comparison
        let mut old = Recorder::exact(recs.len());
        for r in recs.iter().filter(|r| r.intended_ns >= WARMUP_NS) {
            old.record(r.received_ns - r.intended_ns);
        }
        let old = old.summarize(0.95).expect("non-empty");
        for (k, key) in ["p50", "p99"].into_iter().enumerate() {
            let e = a.measured.get(key).expect("standard key");
            t.sectioned[k] += u32::from(e.lo <= truth[k] && truth[k] <= e.hi);
            let o = old.get(key).expect("standard key");
            t.order_stat[k] += u32::from(o.lo <= truth[k] && truth[k] <= o.hi);
        }
        let q = a
            .measured
            .quantiles
            .iter()
            .find(|q| q.key == "p99")
            .unwrap();
        assert!(q.blocks >= 16, "p99 sectioned over {} blocks", q.blocks);
        t.unsteady += u32::from(!a.stationarity.as_ref().is_some_and(|s| s.steady));
        t.runs += 1;
    }
    t
}

#[test]
fn sectioning_intervals_cover_the_exact_mm1_quantiles() {
    // two threads (the CI host has two cores), each half of the seeds
    let parts: Vec<Tally> = std::thread::scope(|s| {
        let h: Vec<_> = (0..2_u64)
            .map(|p| s.spawn(move || tally((0..RUNS).filter(move |i| i % 2 == p))))
            .collect();
        h.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut t = Tally::default();
    for p in parts {
        t.runs += p.runs;
        t.unsteady += p.unsteady;
        for k in 0..2 {
            t.sectioned[k] += p.sectioned[k];
            t.order_stat[k] += p.order_stat[k];
        }
    }
    let cov = |h: u32| f64::from(h) / f64::from(t.runs);
    println!(
        "M/M/1 rho 0.7, {} runs of {} requests: 95 % interval coverage p50 {:.3} p99 {:.3} (sectioning); order statistic p50 {:.3} p99 {:.3}; stationarity false alarms {:.3}",
        t.runs,
        REQUESTS,
        cov(t.sectioned[0]),
        cov(t.sectioned[1]),
        cov(t.order_stat[0]),
        cov(t.order_stat[1]),
        cov(t.unsteady)
    );
    for (k, key) in ["p50", "p99"].into_iter().enumerate() {
        let c = cov(t.sectioned[k]);
        assert!((0.90..=0.98).contains(&c), "{key} coverage {c}");
    }
    assert!(cov(t.unsteady) <= 0.05, "false alarms {}", cov(t.unsteady));
}

/// The same run with three scripted 5 ms stalls (every request intended in a stall completes
/// only after it ends, as when the host stalls the server): the tail is NOT steady, and the
/// windows that moved are named.
#[test]
fn a_stall_burst_is_flagged_as_not_steady() {
    let mut recs = mm1_run(1_000);
    let steady = analyse(&recs, &cfg()).unwrap();
    let st = steady.stationarity.clone().unwrap();
    assert!(st.steady, "{}", st.summary);
    let stalls = [600_000_000_u64, 640_000_000, 680_000_000];
    for r in &mut recs {
        for s in stalls {
            let end = s + 5_000_000;
            if (s..end).contains(&r.intended_ns) {
                r.received_ns += end - r.intended_ns;
                r.kernel_rx_ns = r.received_ns;
            }
        }
    }
    let a = analyse(&recs, &cfg()).unwrap();
    let st = a.stationarity.unwrap();
    println!("{}", st.summary);
    assert!(
        !st.steady && st.summary.contains("NOT steady"),
        "{}",
        st.summary
    );
    let m = st.user.moved.first().expect("a moved window");
    assert!(m.start_s <= 0.6 && m.end_s >= 0.7, "{m:?}");
    assert!(m.p99_us > 1_000.0, "{m:?}");
    // the windows show it too, and the interval says how it was made
    assert!(a.windows.iter().any(|w| w.p99_us > 1_000.0));
    assert!(
        a.interval_method.starts_with("sectioning over"),
        "{}",
        a.interval_method
    );
}
