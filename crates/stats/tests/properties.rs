//! Property tests: invariants that must hold for any input.

use proptest::prelude::*;
use stats::{order_statistic_ci, quantile_sorted, Quantile, Recorder, STANDARD_QUANTILES};

fn recorder(values: &[u64], streaming: bool) -> Recorder {
    let mut r = if streaming {
        Recorder::streaming(3).unwrap()
    } else {
        Recorder::exact(values.len())
    };
    values.iter().for_each(|&v| r.record(v));
    r
}

/// Latencies: mostly moderate, sometimes anywhere in u64.
fn latency() -> impl Strategy<Value = u64> {
    prop_oneof![9 => 0_u64..10_000_000, 1 => any::<u64>()]
}

proptest! {
    #[test]
    fn quantile_is_monotone_in_q(
        values in prop::collection::vec(latency(), 1..300),
        streaming in any::<bool>(),
        mut qs in prop::collection::vec(0.0001_f64..0.9999, 2..8),
    ) {
        let mut r = recorder(&values, streaming);
        qs.sort_by(f64::total_cmp);
        let got: Vec<f64> = qs.iter().map(|&q| r.quantile(Quantile::new(q).unwrap()).unwrap()).collect();
        for w in got.windows(2) {
            prop_assert!(w[0] <= w[1], "{got:?}");
        }
        let min = *values.iter().min().unwrap() as f64;
        let max = *values.iter().max().unwrap() as f64;
        let slack = if streaming { 1e-3 } else { 0.0 };
        for v in got {
            prop_assert!(v >= min * (1.0 - slack) && v <= max * (1.0 + slack));
        }
    }

    #[test]
    fn summary_intervals_contain_estimates(
        values in prop::collection::vec(latency(), 1..500),
        streaming in any::<bool>(),
        confidence in 0.5_f64..0.999,
    ) {
        let mut r = recorder(&values, streaming);
        let s = r.summarize(confidence).unwrap();
        prop_assert_eq!(s.count, values.len() as u64);
        prop_assert_eq!(s.quantiles.len(), STANDARD_QUANTILES.len());
        let mut prev = f64::NEG_INFINITY;
        for q in &s.quantiles {
            prop_assert!(q.est.lo <= q.est.value && q.est.value <= q.est.hi, "{q:?}");
            prop_assert!(q.est.value >= prev);
            prev = q.est.value;
        }
        prop_assert!(s.min_ns <= s.quantiles[0].est.lo);
        prop_assert!(s.quantiles[4].est.hi <= s.max_ns);
    }

    #[test]
    fn ci_ranks_are_ordered_and_in_range(
        n in 1_u64..5000,
        q in 0.0001_f64..0.9999,
        confidence in 0.5_f64..0.9999,
    ) {
        let (lo, hi) = order_statistic_ci(n, q, confidence);
        prop_assert!(lo <= hi && hi < n);
        // a higher confidence never gives a narrower interval
        let (lo2, hi2) = order_statistic_ci(n, q, (confidence + 1.0) / 2.0);
        prop_assert!(lo2 <= lo && hi2 >= hi);
    }

    #[test]
    fn type7_is_between_neighbours(mut values in prop::collection::vec(any::<u64>(), 1..100), q in 0.0_f64..=1.0) {
        values.sort_unstable();
        let v = quantile_sorted(&values, q);
        let h = (values.len() - 1) as f64 * q;
        let i = h.floor() as usize;
        let j = (i + 1).min(values.len() - 1);
        prop_assert!(v >= values[i] as f64 && v <= values[j] as f64);
    }

    #[test]
    fn merge_equals_recording_everything(
        a in prop::collection::vec(latency(), 0..200),
        b in prop::collection::vec(latency(), 0..200),
        sa in any::<bool>(),
        sb in any::<bool>(),
    ) {
        let mut ra = recorder(&a, sa);
        ra.merge(&recorder(&b, sb)).unwrap();
        prop_assert_eq!(ra.is_exact(), !sa && !sb);
        let all: Vec<u64> = a.iter().chain(&b).copied().collect();
        let mut direct = recorder(&all, sa || sb);
        prop_assert_eq!(ra.len(), direct.len());
        if !all.is_empty() {
            let q = Quantile::new(0.9).unwrap();
            prop_assert_eq!(ra.quantile(q), direct.quantile(q));
        }
    }
}
