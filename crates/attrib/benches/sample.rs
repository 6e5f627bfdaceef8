//! The cost of one attribution sample against the real /proc, with this process as the
//! "server" (its main thread plus four idle threads, as a small server would have): the figure
//! that decides whether the sampler fits in the load generator's gaps between sends (issue 9).
//! Run with `cargo bench -p attrib --bench sample`.
//!
//! Three cases: the default schedule (a cycle of 10 samples, the slow reads spread over it:
//! the mean a run pays), samples with no slow read, and samples that read everything (the
//! baseline and closing samples). `bench/attrib_sample.sh` prints medians and p99s per kind.

use attrib::{mono_now_ns, Probe, SamplerConfig};
use criterion::{criterion_group, criterion_main, Criterion};
use std::time::Duration;

fn probe(slow_every: u32) -> Option<Probe> {
    let cfg = SamplerConfig {
        server_pids: vec![std::process::id()],
        slow_every,
        ..SamplerConfig::default()
    };
    let mut p = Probe::new(&cfg).ok()?;
    p.sample(mono_now_ns());
    Some(p)
}

fn bench(c: &mut Criterion) {
    // Idle threads that live as long as the benchmark; they are never joined.
    for _ in 0..4 {
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_secs(3600));
        });
    }
    let (Some(mut mixed), Some(mut light), Some(mut full)) = (probe(10), probe(u32::MAX), probe(1))
    else {
        eprintln!("no readable /proc here: nothing to measure");
        return;
    };
    c.bench_function("sample, 5 threads, every CPU, cycle of 10", |b| {
        b.iter(|| mixed.sample(mono_now_ns()))
    });
    c.bench_function("sample, 5 threads, every CPU, light", |b| {
        b.iter(|| light.sample(mono_now_ns()))
    });
    c.bench_function("sample, 5 threads, every CPU, everything", |b| {
        b.iter(|| full.sample(mono_now_ns()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
