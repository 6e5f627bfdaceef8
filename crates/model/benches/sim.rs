//! Simulator throughput (requests/s) with a streaming collector, for the two queues the paper
//! draws most: M/D/1 at ρ = 0.7 and M/M/4 at ρ = 0.8, plus an event-driven discipline for
//! comparison. Run with `cargo bench -p model --bench sim -- --quick`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use model::{simulate, ArrivalSpec, Collector, Discipline, ServiceSpec, SimConfig};

const N: u64 = 1_000_000;

fn config(service: ServiceSpec, workers: u32, load: f64, discipline: Discipline) -> SimConfig {
    SimConfig {
        arrival: ArrivalSpec::Poisson,
        rate_per_s: Some(SimConfig::rate_for_load(load, workers, &service).unwrap()),
        service,
        workers,
        discipline,
        class_probs: Vec::new(),
        connections: None,
        requests: N,
        warmup_fraction: 0.1,
        seed: 1,
    }
}

fn bench(c: &mut Criterion) {
    let cases = [
        (
            "M/D/1 rho=0.7 fifo",
            config(
                ServiceSpec::Deterministic { mean_ns: 50_000.0 },
                1,
                0.7,
                Discipline::Fifo,
            ),
        ),
        (
            "M/M/4 rho=0.8 fifo",
            config(
                ServiceSpec::Exponential { mean_ns: 50_000.0 },
                4,
                0.8,
                Discipline::Fifo,
            ),
        ),
        (
            "M/D/4 rho=0.8 lifo",
            config(
                ServiceSpec::Deterministic { mean_ns: 50_000.0 },
                4,
                0.8,
                Discipline::Lifo,
            ),
        ),
    ];
    let mut g = c.benchmark_group("simulate");
    g.throughput(Throughput::Elements(N));
    g.sample_size(10);
    for (name, cfg) in &cases {
        g.bench_function(*name, |b| {
            b.iter(|| {
                // Streaming recorders (exact_limit 0): the bounded-memory path.
                let mut col = Collector::new(cfg.requests, cfg.warmup_fraction, 1, 0);
                simulate(cfg, &mut col).unwrap();
                col.recorded()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
