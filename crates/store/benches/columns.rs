//! Throughput of storing and loading raw record columns (encode + zstd + SQLite, and back).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use rand_xoshiro::Xoshiro256PlusPlus;
use store::{Columns, NewRun, Store};

fn records(n: usize) -> Columns {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let gap = Exp::new(1.0 / 10_000.0).unwrap();
    let lat = Exp::new(1.0 / 40_000.0).unwrap();
    let mut t = 0.0f64;
    let intended: Vec<i64> = (0..n)
        .map(|_| {
            t += gap.sample(&mut rng);
            t as i64
        })
        .collect();
    let received: Vec<i64> = intended
        .iter()
        .map(|&x| x + lat.sample(&mut rng) as i64)
        .collect();
    let mut c = Columns::new(n);
    c.push_column("intended_ns", intended).unwrap();
    c.push_column("received_ns", received).unwrap();
    c
}

fn bench(c: &mut Criterion) {
    let n = 1_000_000;
    let cols = records(n);
    let store = Store::open_in_memory().unwrap();
    let id = store
        .begin_run(&NewRun {
            kind: "bench".into(),
            target: "none".into(),
            started_at: store::now_rfc3339(),
            config: serde_json::Value::Null,
            host: serde_json::Value::Null,
        })
        .unwrap();
    let mut g = c.benchmark_group("columns");
    g.sample_size(10);
    g.throughput(Throughput::Elements((n * cols.cols.len()) as u64));
    g.bench_function("put_1M_x2", |b| {
        b.iter(|| store.put_columns(id, &cols).unwrap())
    });
    g.bench_function("get_1M_x2", |b| b.iter(|| store.columns(id).unwrap()));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
