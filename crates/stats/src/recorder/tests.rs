use super::*;

fn q(p: f64) -> Quantile {
    Quantile::new(p).unwrap()
}

#[test]
fn exact_quantiles_match_type7() {
    let mut r = Recorder::exact(0);
    for v in [40, 10, 30, 20] {
        r.record(v);
    }
    assert_eq!(r.len(), 4);
    assert!(r.is_exact());
    // numpy.quantile([10, 20, 30, 40], 0.5) = 25, 0.9 → 37
    assert_eq!(r.quantile(q(0.5)), Some(25.0));
    assert!((r.quantile(q(0.9)).unwrap() - 37.0).abs() < 1e-9);
    // recording after sorting marks the data unsorted again
    r.record(0);
    assert_eq!(r.quantile(q(0.5)), Some(20.0));
    assert_eq!(Recorder::exact(4).quantile(q(0.5)), None);
}

#[test]
fn empty_summary_is_an_error() {
    assert!(matches!(
        Recorder::exact(0).summarize(0.95),
        Err(StatsError::Empty)
    ));
    let mut r = Recorder::streaming(3).unwrap();
    assert!(matches!(r.summarize(0.95), Err(StatsError::Empty)));
    r.record(1);
    assert!(matches!(
        r.summarize(1.5),
        Err(StatsError::InvalidConfidence(_))
    ));
}

#[test]
fn streaming_rejects_bad_sigfig() {
    assert!(matches!(
        Recorder::streaming(6),
        Err(StatsError::Histogram(_))
    ));
}

#[test]
fn streaming_accepts_the_whole_u64_range() {
    let mut r = Recorder::streaming(3).unwrap();
    for v in [0, 1, 1_000, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
        r.record(v);
    }
    assert_eq!(r.len(), 6);
    let s = r.summarize(0.95).unwrap();
    assert!(s.max_ns >= 0.999 * u64::MAX as f64);
    assert_eq!(s.min_ns, 0.0);
}

#[test]
fn exact_summary_of_1_to_1000() {
    let mut r = Recorder::exact(1000);
    for v in (1..=1000).rev() {
        r.record(v);
    }
    let s = r.summarize(0.95).unwrap();
    assert_eq!(s.count, 1000);
    assert!(s.exact);
    assert_eq!((s.min_ns, s.max_ns), (1.0, 1000.0));
    assert!((s.mean_ns - 500.5).abs() < 1e-9);
    // population sd of 1..n: sqrt((n²−1)/12)
    assert!((s.stdev_ns - ((1e6 - 1.0) / 12.0_f64).sqrt()).abs() < 1e-9);
    let keys: Vec<&str> = s.quantiles.iter().map(|q| q.key.as_str()).collect();
    assert_eq!(keys, ["p50", "p90", "p99", "p99.9", "p99.99"]);
    // type 7 on 1..1000: 1 + 999q
    let p50 = s.get("p50").unwrap();
    assert!((p50.value - 500.5).abs() < 1e-9);
    // CI ranks for the median of 1000 at 95 %: value = rank + 1
    let (lo, hi) = order_statistic_ci(1000, 0.5, 0.95);
    assert_eq!((p50.lo, p50.hi), ((lo + 1) as f64, (hi + 1) as f64));
    let p9999 = s.get("p99.99").unwrap();
    assert!(p9999.lo <= p9999.value && p9999.value <= p9999.hi);
    assert_eq!(p9999.hi, 1000.0);
    assert!(s.get("p42").is_none());
}

#[test]
fn json_shapes_are_in_microseconds() {
    let mut r = Recorder::exact(0);
    for v in [1_000, 2_000, 3_000] {
        r.record(v);
    }
    let s = r.summarize(0.9).unwrap();
    let d = s.distribution_json();
    assert_eq!(d["p50"], serde_json::json!(2.0));
    assert_eq!(d.as_object().unwrap().len(), 5);
    let i = s.intervals_json();
    assert_eq!(i["p50"]["value"], serde_json::json!(2.0));
    assert!(i["p99.99"]["hi"].as_f64().unwrap() <= 3.0);
    // The typed forms serialise to the same objects.
    assert_eq!(serde_json::to_value(s.distribution()).unwrap(), d);
    assert_eq!(serde_json::to_value(s.distribution_ci()).unwrap(), i);
    // Summary round-trips through serde
    let back: Summary = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(back.get("p90"), s.get("p90"));
}

#[test]
fn merge_exact_and_streaming() {
    let mut a = Recorder::exact(0);
    let mut b = Recorder::exact(0);
    (1..=50).for_each(|v| a.record(v));
    (51..=100).for_each(|v| b.record(v));
    a.merge(&b).unwrap();
    assert!(a.is_exact());
    assert_eq!(a.len(), 100);
    assert_eq!(a.quantile(q(0.5)), Some(50.5));

    let mut s = Recorder::streaming(3).unwrap();
    (101..=200).for_each(|v| s.record(v));
    let mut exact_copy = a.clone();
    exact_copy.merge(&s).unwrap();
    assert!(!exact_copy.is_exact());
    assert_eq!(exact_copy.len(), 200);
    // values below 2048 are exact in a 3-digit histogram
    assert_eq!(exact_copy.quantile(q(0.5)), Some(100.5));

    s.merge(&a).unwrap();
    assert_eq!(s.len(), 200);
    assert_eq!(s.quantile(q(0.5)), Some(100.5));
    let mut s2 = Recorder::streaming(2).unwrap();
    s2.record(7);
    s.merge(&s2).unwrap();
    assert_eq!(s.len(), 201);
}

#[test]
fn for_count_picks_mode() {
    assert!(Recorder::for_count(10, 10).is_exact());
    assert!(!Recorder::for_count(11, 10).is_exact());
    assert!(Recorder::for_count(11, 10).values().is_none());
    assert_eq!(Recorder::for_count(5, 10).values(), Some(&[][..]));
}

#[test]
fn ccdf_is_monotone_and_ends_at_one_over_n() {
    for n in [1_u64, 2, 7, 1000, 12_345] {
        for streaming in [false, true] {
            let mut r = if streaming {
                Recorder::streaming(3).unwrap()
            } else {
                Recorder::exact(0)
            };
            (0..n).for_each(|i| r.record((i * 7919) % (n + 3) + 1));
            let pts = r.ccdf(5);
            assert_eq!(pts[0].1, 1.0);
            let last = pts[pts.len() - 1];
            assert!((last.1 - 1.0 / n as f64).abs() < 1e-15, "n={n}");
            for w in pts.windows(2) {
                assert!(w[0].0 <= w[1].0 && w[0].1 > w[1].1, "n={n}: {w:?}");
            }
            // about 5 points per decade
            let decades = (n as f64).log10();
            assert!(pts.len() as f64 <= 5.0 * decades + 2.0, "n={n}");
        }
    }
    assert!(Recorder::exact(0).ccdf(5).is_empty());
}

#[test]
fn bounded_is_exact_up_to_its_limit_then_streams_every_value() {
    let mut r = Recorder::bounded(1000);
    (1..=1000u64).for_each(|v| r.record(v * 10));
    assert!(r.is_exact());
    assert_eq!(r.quantile(Quantile::new(0.5).unwrap()), Some(5005.0));
    r.record(7);
    assert!(!r.is_exact());
    assert_eq!(r.len(), 1001);
    let h = r.histogram().unwrap();
    assert_eq!(h.min(), 7);
    // 3 significant digits: the max (10,000) is within 0.1 %.
    assert!((h.max() as f64 - 10_000.0).abs() <= 10.0);
    let p50 = r.quantile(Quantile::new(0.5).unwrap()).unwrap();
    assert!((p50 - 5000.0).abs() <= 10.0, "{p50}");
}

#[test]
fn a_recorder_from_a_histogram_summarises_as_the_streaming_one() {
    let mut rec = Recorder::streaming(3).unwrap();
    let mut hist = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    for v in 1..=10_000u64 {
        rec.record(v * 37);
        hist.record(v * 37).unwrap();
    }
    let mut from = Recorder::from_histogram(hist);
    assert_eq!(from.len(), 10_000);
    assert_eq!(from.summarize(0.95).unwrap(), rec.summarize(0.95).unwrap());
}

#[test]
fn summarize_with_adds_extra_quantiles_after_the_standard_ones() {
    let mut r = Recorder::exact(1000);
    for v in 1..=1000 {
        r.record(v);
    }
    let plain = r.summarize(0.95).unwrap();
    let extra = vec![("p95".to_string(), 0.95), ("p99".to_string(), 0.99)];
    let s = r.summarize_with(0.95, &extra).unwrap();
    let keys: Vec<&str> = s.quantiles.iter().map(|q| q.key.as_str()).collect();
    assert_eq!(keys, ["p50", "p90", "p99", "p99.9", "p99.99", "p95"]);
    assert_eq!(s.quantiles[..5], plain.quantiles[..5]);
    let p95 = s.get("p95").unwrap();
    assert_eq!(Some(p95.value), r.quantile(q(0.95)));
    assert!(p95.lo < p95.value && p95.value < p95.hi);
    assert!(r.summarize_with(0.95, &[("p100".into(), 1.0)]).is_err());
}
