//! The collector's batch-means intervals: streaming mode (per-batch histograms merged on
//! read) must give the same distribution as exact mode, and both must widen the intervals to
//! cover the spread between batches.

use model::{simulate, ArrivalSpec, Collector, Discipline, ServiceSpec, SimConfig};

fn cfg(n: u64) -> SimConfig {
    let service = ServiceSpec::Deterministic { mean_ns: 50_000.0 };
    SimConfig {
        arrival: ArrivalSpec::Poisson,
        rate_per_s: Some(SimConfig::rate_for_load(0.8, 1, &service).unwrap()),
        service,
        workers: 1,
        discipline: Discipline::Fifo,
        class_probs: Vec::new(),
        connections: None,
        requests: n,
        warmup_fraction: 0.01,
        seed: 5,
    }
}

#[test]
fn streaming_batches_merge_to_the_exact_distribution() {
    let c = cfg(400_000);
    let mut exact = Collector::new(c.requests, c.warmup_fraction, 1, u64::MAX);
    let mut streaming = Collector::new(c.requests, c.warmup_fraction, 1, 0);
    simulate(&c, &mut exact).unwrap();
    simulate(&c, &mut streaming).unwrap();
    assert!(exact.has_batch_means() && streaming.has_batch_means());
    assert_eq!(streaming.response().len(), exact.response().len());
    let (er, _) = exact.summarize(0.95).unwrap();
    let (sr, sw) = streaming.summarize(0.95).unwrap();
    assert!(!sr.exact && er.exact);
    for (e, s) in er.quantiles.iter().zip(&sr.quantiles) {
        // HdrHistogram with 3 significant digits: within 0.1 % (plus 1 ns of rounding).
        assert!(
            (e.est.value - s.est.value).abs() <= e.est.value * 1e-3 + 1.0,
            "{}",
            e.key
        );
    }
    assert_eq!(sw.count, sr.count);
}

#[test]
fn batch_means_widen_the_order_statistic_interval() {
    let c = cfg(400_000);
    let mut col = Collector::new(c.requests, c.warmup_fraction, 1, u64::MAX);
    simulate(&c, &mut col).unwrap();
    let plain = col.response().summarize(0.95).unwrap();
    let mut col = Collector::new(c.requests, c.warmup_fraction, 1, u64::MAX);
    simulate(&c, &mut col).unwrap();
    let (batched, _) = col.summarize(0.95).unwrap();
    let p99_plain = plain.get("p99").unwrap();
    let p99 = batched.get("p99").unwrap();
    assert_eq!(p99.value, p99_plain.value);
    assert!(p99.lo <= p99_plain.lo && p99.hi >= p99_plain.hi);
    // At ρ = 0.8 successive responses are strongly correlated: the batch interval is the wider.
    assert!(
        p99.hi - p99.lo > 1.5 * (p99_plain.hi - p99_plain.lo),
        "{p99:?} vs {p99_plain:?}"
    );
}

#[test]
fn too_few_requests_for_batches_keep_order_statistics() {
    let c = cfg(1_000);
    let mut col = Collector::new(c.requests, c.warmup_fraction, 1, u64::MAX);
    simulate(&c, &mut col).unwrap();
    assert!(!col.has_batch_means());
    let (r, _) = col.summarize(0.95).unwrap();
    assert_eq!(r.count, 990);
}
