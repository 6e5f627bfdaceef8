//! `explain` on synthetic series whose relation to the slow requests is known.

use analysis::{StageBreakdown, StageRow};
use attrib::{explain, Series, SourceKind, SourceSeries, PERMUTATION_SHIFTS};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const T0: u64 = 5_000_000_000; // the run's start on CLOCK_MONOTONIC
const STEP: u64 = 10_000_000; // 10 ms intervals
const N: usize = 1000; // 10 s

/// 10 000 requests, one per ms, of 50..150 µs; two requests in each of 50 chosen intervals
/// take 2 ms instead: exactly the slowest 1 %. Returns the requests and the chosen intervals.
fn requests(rng: &mut Xoshiro256PlusPlus) -> (Vec<(u64, u64)>, Vec<bool>) {
    let mut slow = vec![false; N];
    let mut chosen = 0;
    while chosen < 50 {
        let i = rng.gen_range(0..N);
        if !slow[i] {
            slow[i] = true;
            chosen += 1;
        }
    }
    let mut reqs = Vec::new();
    for ms in 0..(N as u64 * 10) {
        let interval = (ms / 10) as usize;
        // The 2nd and 3rd ms of a chosen interval: each lives well inside the interval.
        let lat = if slow[interval] && (ms % 10 == 1 || ms % 10 == 3) {
            2_000_000
        } else {
            rng.gen_range(50_000..150_000)
        };
        reqs.push((ms * 1_000_000, lat));
    }
    (reqs, slow)
}

fn source(name: &str, kind: SourceKind, deltas: Vec<f64>) -> SourceSeries {
    SourceSeries {
        name: name.into(),
        kind,
        unit: "count".into(),
        deltas,
    }
}

fn series(sources: Vec<SourceSeries>) -> Series {
    Series {
        t_mono_ns: (0..=N as u64).map(|i| T0 + i * STEP).collect(),
        server_cpu_ns: vec![0.0; N],
        sources,
    }
}

#[test]
fn the_source_that_spikes_with_slow_requests_ranks_first() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let (reqs, slow) = requests(&mut rng);
    // Spiky: exponential(1) background plus 20 in every slow interval. Expected lift: the slow
    // mean is 21, the overall mean 1 + 20·50/1000 = 2, so 10.5 (sampling error of the means
    // ≈ 0.14 and 0.03: accept 10.5 ± 1.5).
    let spiky: Vec<f64> = slow
        .iter()
        .map(|&s| -rng.gen::<f64>().ln() + if s { 20.0 } else { 0.0 })
        .collect();
    // Uncorrelated: exponential(1) noise with no relation to the slow intervals. Lift's
    // sampling sd ≈ 1/√50 = 0.14: accept 1 ± 0.5.
    let noise: Vec<f64> = (0..N).map(|_| -rng.gen::<f64>().ln()).collect();
    let s = series(vec![
        source("noise", SourceKind::Interrupts, noise),
        source("never moved", SourceKind::SoftIrq, vec![0.0; N]),
        source("constant", SourceKind::Background, vec![3.0; N]),
        source("spiky", SourceKind::Scheduling, spiky),
    ]);
    let why = explain(&s, T0, &reqs, None);
    assert_eq!(why.slow_requests, 100);
    assert_eq!(why.intervals, N as u64);
    assert_eq!(why.slow_intervals, 50);
    // A source that never moved is not tested (nor counted in Holm's m = 3).
    assert_eq!(why.sources.len(), 3);
    assert!(why.sources.iter().all(|f| f.source != "never moved"));

    let first = &why.sources[0];
    assert_eq!(first.source, "spiky");
    assert_eq!(first.kind, SourceKind::Scheduling);
    assert!((first.lift - 10.5).abs() < 1.5, "lift {}", first.lift);
    // No rotation reaches the observed mean: p = 1/(1 + 999); it is the smallest, so Holm
    // multiplies it by m = 3.
    let floor = 3.0 / (1 + PERMUTATION_SHIFTS) as f64;
    assert!((first.p_value - floor).abs() < 1e-12, "p {}", first.p_value);
    assert!(first.mitigation.contains("FIFO"));
    assert!(!first.tradeoff.is_empty());

    let noise = why.sources.iter().find(|f| f.source == "noise").unwrap();
    assert!((noise.lift - 1.0).abs() < 0.5, "lift {}", noise.lift);
    // Seeded: with this seed the noise is not significant (under the null that happens
    // with probability ≥ 95 % per seed).
    assert!(noise.p_value > 0.05, "p {}", noise.p_value);

    let constant = why.sources.iter().find(|f| f.source == "constant").unwrap();
    assert!((constant.lift - 1.0).abs() < 1e-12);
    assert_eq!(constant.p_value, 1.0);

    let js = serde_json::to_value(&why).unwrap();
    assert_eq!(js["sources"][0]["kind"], "scheduling");

    // The streaming form (a mask filled as the slow requests stream past, in any order)
    // says the same.
    let lo = reqs.iter().map(|r| r.0).min().unwrap();
    let hi = reqs.iter().map(|r| r.0 + r.1).max().unwrap();
    let mut mask = attrib::SlowMask::new(&s, T0);
    for &(i, l) in reqs.iter().rev().filter(|r| r.1 == 2_000_000) {
        mask.add(i, l);
    }
    let streamed = attrib::explain_mask(&s, &mask, (lo, hi), None);
    assert_eq!(
        serde_json::to_value(&streamed).unwrap(),
        serde_json::to_value(&why).unwrap()
    );
}

#[test]
fn nothing_to_say_without_requests_or_intervals() {
    let s = series(vec![source("a", SourceKind::Interrupts, vec![1.0; N])]);
    let why = explain(&s, T0, &[], None);
    assert!(why.sources.is_empty() && why.stages.is_empty());
    let why = explain(&Series::default(), T0, &[(0, 1)], None);
    assert!(why.sources.is_empty());
    // Requests entirely after the sampled span.
    let why = explain(&s, T0, &[(100_000_000_000, 5)], None);
    assert!(why.sources.is_empty());
}

fn row(stage: &str, slow: f64, median: f64) -> StageRow {
    StageRow {
        stage: stage.into(),
        slow_p50_us: slow,
        slow_p99_us: slow * 2.0,
        median_p50_us: median,
        median_p99_us: median * 2.0,
    }
}

#[test]
fn stages_rank_by_added_time() {
    let b = StageBreakdown {
        slow_requests: 10,
        median_requests: 100,
        rows: vec![
            row("read", 10.0, 9.0),    // +1 µs, ×1.11
            row("work", 50.0, 5.0),    // +45 µs, ×10
            row("wake", 2.0, 0.1),     // +1.9 µs, ×20
            row("lateness", 1.0, 1.0), // +0
        ],
    };
    let why = explain(&Series::default(), T0, &[], Some(&b));
    let order: Vec<&str> = why.stages.iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(order, ["work", "wake", "read", "lateness"]);
    assert!((why.stages[0].growth - 10.0).abs() < 1e-12);
    assert!((why.stages[1].growth - 20.0).abs() < 1e-9);
    assert_eq!(why.stages[3].growth, 1.0);
}
