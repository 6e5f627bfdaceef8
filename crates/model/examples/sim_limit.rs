//! The simulator against its limit, in one process: `cargo run --release -p model --example
//! sim_limit [REQUESTS] [REPS]` (also run by `bench/sim_vs_peers.sh`).
//!
//! The limit is a bare loop over the same recursion with the same generator and the same
//! distributions: Lindley's recursion for M/D/1 at ρ = 0.7, the Kiefer–Wolfowitz recursion
//! (the earliest-free of four workers) for M/M/4 at ρ = 0.8, recording each response time,
//! rounded to the ns, in a histogram of 3 digits the way the simulator records (a
//! [`model::FastHist`]: the least a simulator that reports quantiles does; the loop that keeps
//! only a sum is printed too, as `sum only`). The variates are drawn as the simulator draws
//! them: the ziggurat of `rand_distr::Exp1`, inlined, times the mean (the same numbers as
//! `rand_distr::Exp`). The simulator is [`model::simulate`]
//! into a [`model::Collector`] (response and wait histograms, batch means, exact means), as
//! `tailscope model` runs it. Each is timed on the thread's CPU clock (time spent
//! descheduled by other jobs does not count), REPS times alternately; the medians and the
//! ratio simulator ÷ limit are printed. The ratio is the figure that means something on a busy
//! host: both sides are slowed alike.

use model::{simulate, ArrivalSpec, Collector, Discipline, FastHist, ServiceSpec, SimConfig};
use rand::SeedableRng;
use rand_distr::{Distribution, Exp1};
use rand_xoshiro::Xoshiro256PlusPlus;

const MEAN_NS: f64 = 50_000.0;

/// CPU time of the calling thread, s.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The bare loop: arrivals at `rate_per_s`, `N` FIFO workers, service exponential or
/// deterministic (mean 50 µs); the sum of the responses, and their histogram if `hist`.
/// The workers' free times are kept sorted, the earliest first, and the request's end
/// replaces it by a fixed network of `min`s and `max`es, as the simulator keeps them for up
/// to 8 workers (the cheapest Kiefer–Wolfowitz step found: no branch, no computed index).
fn bare<const N: usize>(
    n: u64,
    rate_per_s: f64,
    exp_service: bool,
    hist: Option<&mut FastHist>,
) -> f64 {
    let mut rng_a = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut rng_s = Xoshiro256PlusPlus::seed_from_u64(2);
    // 1/λ as rand_distr's Exp computes it.
    let gap_scale = 1.0 / (rate_per_s / 1e9);
    let svc_scale = 1.0 / (1.0 / MEAN_NS);
    let (mut t, mut sum) = (0.0f64, 0.0f64);
    let mut free = [0.0f64; N];
    let mut none = FastHist::default();
    let (h, record) = match hist {
        Some(h) => (h, true),
        None => (&mut none, false),
    };
    for _ in 0..n {
        let g: f64 = Exp1.sample(&mut rng_a);
        t += g * gap_scale;
        let s = if exp_service {
            let x: f64 = Exp1.sample(&mut rng_s);
            x * svc_scale
        } else {
            MEAN_NS
        };
        let e = free[0];
        let end = (if e > t { e } else { t }) + s;
        model::sim::replace_earliest(&mut free, end);
        sum += end - t;
        if record {
            // Rounded to the ns and counted as the simulator's collector does.
            h.record_ns(end - t);
        }
    }
    sum
}

fn sim(n: u64, workers: u32, load: f64, service: ServiceSpec) -> f64 {
    let cfg = SimConfig {
        arrival: ArrivalSpec::Poisson,
        rate_per_s: SimConfig::rate_for_load(load, workers, &service).ok(),
        service,
        workers,
        discipline: Discipline::Fifo,
        class_probs: Vec::new(),
        connections: None,
        requests: n,
        warmup_fraction: 0.0,
        seed: 1,
    };
    let mut col = Collector::new(n, 0.0, 1, 0);
    match simulate(&cfg, &mut col) {
        Ok(_) => col.mean_response_ns(),
        Err(e) => {
            eprintln!("simulate: {e}");
            std::process::exit(1);
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000_000);
    let reps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    println!("simulator vs the bare recursion, {n} requests, median of {reps} (thread CPU time)");
    for (name, workers, load, exp) in [("M/D/1 0.7", 1u32, 0.7, false), ("M/M/4 0.8", 4, 0.8, true)]
    {
        let service = if exp {
            ServiceSpec::Exponential { mean_ns: MEAN_NS }
        } else {
            ServiceSpec::Deterministic { mean_ns: MEAN_NS }
        };
        let rate = load * f64::from(workers) * 1e9 / MEAN_NS;
        let (mut lim, mut sum_only, mut simr) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..reps {
            let run = |h: Option<&mut FastHist>| match workers {
                1 => bare::<1>(n, rate, exp, h),
                _ => bare::<4>(n, rate, exp, h),
            };
            let c = thread_cpu_s();
            std::hint::black_box(run(None));
            sum_only.push(n as f64 / (thread_cpu_s() - c));
            let mut h = FastHist::default();
            let c = thread_cpu_s();
            std::hint::black_box(run(Some(&mut h)));
            lim.push(n as f64 / (thread_cpu_s() - c));
            std::hint::black_box(h.into_histogram().len());
            let c = thread_cpu_s();
            std::hint::black_box(sim(n, workers, load, service.clone()));
            simr.push(n as f64 / (thread_cpu_s() - c));
        }
        let (l, o, s) = (median(lim), median(sum_only), median(simr));
        println!(
            "{name:10} limit {:6.1} M req/s (sum only {:6.1}) | simulator {:6.1} M req/s | {:.2}x the limit ({:.2}x sum only)",
            l / 1e6,
            o / 1e6,
            s / 1e6,
            s / l,
            s / o
        );
    }
}
