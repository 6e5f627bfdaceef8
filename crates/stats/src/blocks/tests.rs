use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;
use crate::Recorder;

fn q(p: f64) -> Quantile {
    Quantile::new(p).unwrap()
}

#[test]
fn buckets_are_monotone_contiguous_and_hold_their_values() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut vals: Vec<u64> = (0..5000).collect();
    vals.extend((0..20_000).map(|_| rng.gen::<u64>() >> rng.gen_range(0..64)));
    vals.extend([u64::MAX, u64::MAX - 1, 1 << 40, (1 << 40) - 1]);
    for v in vals {
        let (lo, hi) = range_of(bucket_of(v));
        assert!(lo <= v as f64 && v as f64 <= hi, "{v}: {lo}..{hi}");
        // relative width at most 2^-10
        assert!(hi - lo <= (lo / 1024.0).max(0.0) + 1e-9 * lo, "{v}");
    }
    // contiguous: the next bucket starts right after this one ends
    for idx in [2046_u32, 2047, 2048, 3071, 3072, 10_000, 56_000] {
        let (_, hi) = range_of(idx);
        let (lo2, _) = range_of(idx + 1);
        assert_eq!(lo2, hi + 1.0, "{idx}");
    }
}

#[test]
fn doubling_and_merging_keep_every_count() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    let mut a = BlockedRecorder::default();
    let mut b = BlockedRecorder::default();
    let mut both = BlockedRecorder::default();
    let n = 100_000_u64;
    for i in 0..n {
        let t = i * 100_000; // 10 s in all
        let v = rng.gen_range(1_000..1_000_000);
        if i % 3 == 0 { &mut a } else { &mut b }.record(t, v);
        both.record(t, v);
    }
    for r in [&a, &b, &both] {
        let blocks = r.blocks.len();
        assert!(
            (DEFAULT_MIN_BLOCKS..=2 * DEFAULT_MIN_BLOCKS).contains(&blocks),
            "{blocks} blocks"
        );
        let sum: u64 = r.blocks.iter().map(|b| b.n).sum();
        assert_eq!(sum, r.len());
        let bucket_sum: u64 = r
            .blocks
            .iter()
            .map(|b| b.counts.iter().map(|&c| u64::from(c)).sum::<u64>())
            .sum();
        assert_eq!(bucket_sum, r.len());
        // 10 s over at most 32 blocks of 1 ms · 2^j: 512 ms.
        assert_eq!(r.width_ns(), 512_000_000);
    }
    assert_eq!(a.len() + b.len(), n);
    a.merge(&b).unwrap();
    assert_eq!(a.len(), n);
    assert_eq!(a.block_quantiles(q(0.9)), both.block_quantiles(q(0.9)));
    assert_eq!(a.quantile(q(0.5)), both.quantile(q(0.5)));
}

#[test]
fn any_time_order_gives_the_same_blocks() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let mut pairs: Vec<(u64, u64)> = (0..50_000_u64)
        .map(|i| (5_000_000_000 + i * 40_000, rng.gen_range(10_000..90_000)))
        .collect();
    let mut ordered = BlockedRecorder::default();
    for &(t, v) in &pairs {
        ordered.record(t, v);
    }
    // reverse chunks of 1000, then the chunks in reverse order too
    pairs.reverse();
    let mut shuffled = BlockedRecorder::default();
    for &(t, v) in &pairs {
        shuffled.record(t, v);
    }
    assert_eq!(ordered.width_ns(), shuffled.width_ns());
    assert_eq!(
        ordered.block_quantiles(q(0.99)),
        shuffled.block_quantiles(q(0.99))
    );
    let a = ordered.interval(q(0.99), 0.95, None).unwrap();
    let b = shuffled.interval(q(0.99), 0.95, None).unwrap();
    assert_eq!(a, b);
    assert!(a.sections >= 16, "{a:?}");
}

#[test]
fn a_far_early_value_doubles_instead_of_allocating_its_gap() {
    let mut r = BlockedRecorder::default();
    r.record(1 << 50, 7);
    r.record(0, 9);
    assert!(r.blocks.len() <= 2 * DEFAULT_MIN_BLOCKS);
    assert_eq!(r.len(), 2);
    assert_eq!(r.nonempty_blocks(), 2);
}

/// iid exponential samples: sectioning's 95 % interval covers the true quantile in about
/// 95 % of repetitions (for the median and the p99).
#[test]
fn sectioning_covers_on_iid_data() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let exp = Exp::new(1.0).unwrap();
    let reps = 400;
    let n = 20_000_u64;
    let scale = 100_000.0; // mean 100 µs
    let mut hit = [0u32; 2];
    for _ in 0..reps {
        let mut r = BlockedRecorder::default();
        for i in 0..n {
            let v: f64 = exp.sample(&mut rng);
            r.record(i * 50_000, (v * scale) as u64);
        }
        for (k, p) in [0.5_f64, 0.99].into_iter().enumerate() {
            let truth = -(1.0 - p).ln() * scale;
            let iv = r.interval(q(p), 0.95, None).unwrap();
            assert!(iv.sections >= 16, "{iv:?}");
            hit[k] += u32::from(iv.lo <= truth && truth <= iv.hi);
        }
    }
    let cov = hit.map(|h| f64::from(h) / f64::from(reps));
    assert!(
        cov.iter().all(|c| (0.90..=0.985).contains(c)),
        "coverage {cov:?}"
    );
}

/// A strongly autocorrelated series (AR(1), φ = 0.995, through exp so that it is positive and
/// skewed): the order-statistic interval, which assumes independence, misses the true median
/// most of the time; sectioning covers it at about the nominal rate.
#[test]
fn sectioning_covers_an_autocorrelated_series_the_order_statistic_does_not() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let phi: f64 = 0.995;
    let innov = (1.0 - phi * phi).sqrt(); // stationary N(0, 1) marginal
    let reps = 200;
    let n = 50_000_u64;
    let truth = 100_000.0; // the median of exp(0.5·X)·100 µs with X ~ N(0, 1)
    let (mut blocked, mut order) = (0u32, 0u32);
    for _ in 0..reps {
        let mut x: f64 = rng.sample(StandardNormal);
        let mut r = BlockedRecorder::default();
        let mut exact = Recorder::exact(n as usize);
        for i in 0..n {
            let z: f64 = rng.sample(StandardNormal);
            x = phi * x + innov * z;
            let v = ((0.5 * x).exp() * truth) as u64;
            r.record(i * 100_000, v);
            exact.record(v);
        }
        let s = exact.summarize(0.95).unwrap();
        let os = s.get("p50").unwrap();
        order += u32::from(os.lo <= truth && truth <= os.hi);
        let iv = r.interval(q(0.5), 0.95, Some(os.value)).unwrap();
        assert!(iv.sections >= 16);
        blocked += u32::from(iv.lo <= truth && truth <= iv.hi);
    }
    let (b, o) = (
        f64::from(blocked) / f64::from(reps),
        f64::from(order) / f64::from(reps),
    );
    println!("AR(1) median coverage: sectioning {b:.3}, order statistic {o:.3}");
    assert!(o < 0.5, "order statistic covered {o}");
    assert!((0.88..=0.99).contains(&b), "sectioning covered {b}");
}

#[test]
fn too_few_tail_samples_fall_back_and_say_so() {
    let mut r = BlockedRecorder::default();
    let mut exact = Recorder::exact(0);
    for i in 0..20_000_u64 {
        let v = 10_000 + (i * 7919) % 50_000;
        r.record(i * 500_000, v);
        exact.record(v);
    }
    // p99.99 of 20 000 values: 2 expected beyond it in all, far below 3 sections × 5
    let iv = r.interval(q(0.9999), 0.95, None).unwrap();
    assert_eq!(iv.sections, 0);
    assert!(iv.lo <= iv.value && iv.value <= iv.hi);
    let mut s = exact.summarize(0.95).unwrap();
    let before = s.clone();
    r.section_summary(&mut s).unwrap();
    let top = s.quantiles.last().unwrap();
    assert_eq!(top.blocks, 0);
    assert_eq!(top.est, before.quantiles.last().unwrap().est);
    assert!(s.quantiles[0].blocks >= 16);
    assert_eq!(s.quantiles[0].est.value, before.quantiles[0].est.value);
    assert!(
        s.ci_method.starts_with("sectioning over") && s.ci_method.contains("p99.99 assumes"),
        "{}",
        s.ci_method
    );
    for qe in &s.quantiles {
        assert!(qe.est.lo >= 0.0 && qe.est.lo <= qe.est.value && qe.est.value <= qe.est.hi);
    }
}

#[test]
fn sections_need_enough_tail_samples_each() {
    // 20 blocks of 1000: p50 uses all 20; p99 (10 per block) all 20; p99.9 (1 per block)
    // groups them into 4 sections of 5 blocks
    let counts = vec![1000_u64; 20];
    assert_eq!(sections(&counts, 0.5).len(), 20);
    assert_eq!(sections(&counts, 0.99).len(), 20);
    let g = sections(&counts, 0.999);
    assert_eq!(g.len(), 4);
    assert!(g.iter().all(|r| r.len() == 5));
    assert!(sections(&counts, 0.9999).is_empty());
    // every unit lands in exactly one section, in order
    let uneven = vec![10, 0, 5000, 300, 0, 0, 2000, 7, 900, 4000];
    let g = sections(&uneven, 0.99);
    assert_eq!(g.first().unwrap().start, 0);
    assert_eq!(g.last().unwrap().end, uneven.len());
    assert!(g.windows(2).all(|w| w[0].end == w[1].start));
}

/// Measured = ideal + a shared random slowdown per block: the two move together, so the
/// ratio interval by sectioning on per-block ratios is much tighter than the ratio of the
/// two separate intervals, and contains the overall ratio.
#[test]
fn the_ratio_interval_uses_the_correlation() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
    let exp = Exp::new(1.0).unwrap();
    let (mut m, mut i) = (BlockedRecorder::default(), BlockedRecorder::default());
    let mut level = 1.0;
    for k in 0..100_000_u64 {
        if k % 5_000 == 0 {
            level = rng.gen_range(0.5..2.0); // slow swings shared by both
        }
        let base: f64 = exp.sample(&mut rng) * 50_000.0 * level;
        let t = k * 20_000;
        i.record(t, base as u64);
        m.record(t, (base * 1.5) as u64);
    }
    let r = ratio_interval(&m, &i, q(0.99), 0.95, None).unwrap();
    assert!(r.sections >= 16, "{r:?}");
    assert!((r.value - 1.5).abs() < 0.01, "{r:?}");
    assert!(r.lo <= r.value && r.value <= r.hi);
    let (mi, ii) = (
        m.interval(q(0.99), 0.95, None).unwrap(),
        i.interval(q(0.99), 0.95, None).unwrap(),
    );
    let naive = mi.hi / ii.lo - mi.lo / ii.hi;
    assert!(r.hi - r.lo < naive / 10.0, "{r:?} vs naive width {naive}");
}

#[test]
fn bad_parameters_are_errors() {
    assert!(BlockedRecorder::new(0, 16).is_err());
    assert!(BlockedRecorder::new(1000, 1).is_err());
    let r = BlockedRecorder::default();
    assert!(matches!(
        r.interval(q(0.5), 0.95, None),
        Err(StatsError::Empty)
    ));
    let mut r = BlockedRecorder::default();
    r.record(0, 1);
    assert!(r.interval(q(0.5), 1.5, None).is_err());
    let other = BlockedRecorder::new(2_000_000, 16).unwrap();
    assert!(r.merge(&other).is_err());
}

#[test]
fn it_is_send_and_its_memory_is_bounded() {
    fn send<T: Send + Sync>() {}
    send::<BlockedRecorder>();
    let mut r = BlockedRecorder::default();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    // 1 000 000 values over an hour, latencies 10 µs – 10 ms
    for k in 0..1_000_000_u64 {
        let v = (10_000.0 * 1000f64.powf(rng.gen::<f64>())) as u64;
        r.record(k * 3_600_000, v);
    }
    assert!(r.blocks.len() <= 2 * DEFAULT_MIN_BLOCKS);
    // ≤ 32 blocks × (10 octaves · 1024 buckets · 4 B) = 1.3 MB, plus the vectors' growth slack
    assert!(r.heap_bytes() < 2_000_000, "{}", r.heap_bytes());
}
