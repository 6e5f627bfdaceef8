//! Best-of-N throughput of the simulator on fixed workloads, for a machine shared with other
//! jobs: the best run is the one least disturbed, and thread CPU time (which excludes time
//! spent descheduled) is reported beside wall-clock time. Prints requests/s per case.
//! `cargo bench -p model --bench throughput`.

use std::time::Instant;

use model::{simulate, ArrivalSpec, Collector, Discipline, ServiceSpec, SimConfig};

fn config(
    service: ServiceSpec,
    workers: u32,
    load: f64,
    discipline: Discipline,
    requests: u64,
) -> SimConfig {
    SimConfig {
        arrival: ArrivalSpec::Poisson,
        rate_per_s: Some(SimConfig::rate_for_load(load, workers, &service).unwrap()),
        service,
        workers,
        discipline,
        class_probs: Vec::new(),
        connections: None,
        requests,
        warmup_fraction: 0.1,
        seed: 1,
    }
}

/// CPU time of the calling thread in seconds (std has no thread CPU clock).
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters cases by substring.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let n = 4_000_000;
    let det = ServiceSpec::Deterministic { mean_ns: 50_000.0 };
    let exp = ServiceSpec::Exponential { mean_ns: 50_000.0 };
    let cases = [
        (
            "M/D/1 rho=0.7 fifo",
            config(det.clone(), 1, 0.7, Discipline::Fifo, n),
        ),
        (
            "M/M/1 rho=0.7 fifo",
            config(exp.clone(), 1, 0.7, Discipline::Fifo, n),
        ),
        (
            "M/D/4 rho=0.8 fifo",
            config(det.clone(), 4, 0.8, Discipline::Fifo, n),
        ),
        (
            "M/M/4 rho=0.8 fifo",
            config(exp, 4, 0.8, Discipline::Fifo, n),
        ),
        (
            "M/D/4 rho=0.8 random-worker",
            config(det.clone(), 4, 0.8, Discipline::RandomWorker, n),
        ),
        (
            "M/D/4 rho=0.8 lifo",
            config(det, 4, 0.8, Discipline::Lifo, n),
        ),
    ];
    for (name, cfg) in &cases {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let (mut wall, mut cpu) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..7 {
            let (t, c) = (Instant::now(), thread_cpu_s());
            let mut col = Collector::new(cfg.requests, cfg.warmup_fraction, 1, 0);
            simulate(cfg, &mut col).unwrap();
            std::hint::black_box(col.recorded());
            wall = wall.min(t.elapsed().as_secs_f64());
            cpu = cpu.min(thread_cpu_s() - c);
        }
        let m = cfg.requests as f64 / 1e6;
        println!(
            "{name:30} {:5.1} M req/s wall, {:5.1} M req/s CPU (best of 7)",
            m / wall,
            m / cpu
        );
    }
}
