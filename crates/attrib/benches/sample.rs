//! The cost of one attribution sample against the real /proc, with this process as the
//! "server" (its main thread plus four idle threads, as a small server would have): the figure
//! that decides whether the sampler may run inside the load generator's loop (issue 9).
//! Run with `cargo bench -p attrib --bench sample`.

use attrib::{mono_now_ns, Probe, SamplerConfig};
use criterion::{criterion_group, criterion_main, Criterion};
use std::time::Duration;

fn bench(c: &mut Criterion) {
    // Idle threads that live as long as the benchmark; they are never joined.
    for _ in 0..4 {
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_secs(3600));
        });
    }
    let cfg = SamplerConfig {
        server_pids: vec![std::process::id()],
        ..SamplerConfig::default()
    };
    let Ok(mut probe) = Probe::new(&cfg) else {
        eprintln!("no readable /proc here: nothing to measure");
        return;
    };
    probe.sample(mono_now_ns());
    c.bench_function("one sample, 5 threads, every CPU", |b| {
        b.iter(|| probe.sample(mono_now_ns()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
