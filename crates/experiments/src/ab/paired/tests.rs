use rand::SeedableRng;
use rand_distr::{Distribution, Normal};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;

/// The simulated comparison `bench/ab_power.sh` runs at full size (examples/ab_coverage).
#[path = "../../../examples/ab_coverage/sim.rs"]
mod sim;
use sim::Sim;

fn percentiles(keys: &[(&str, f64)]) -> Vec<(String, f64)> {
    keys.iter().map(|(k, q)| (k.to_string(), *q)).collect()
}

/// Nominal 95 % paired intervals contain the exact ratio in 90–98 % of comparisons, with and
/// without a drifting host, whichever way the sections are summed up (a scaled-down
/// `bench/ab_power.sh` coverage run).
#[test]
fn paired_ratio_intervals_cover_the_exact_ratio_with_and_without_drift() {
    let asked = percentiles(&[("p50", 0.5), ("p99", 0.99)]);
    let centres = [Centre::Mean, Centre::HodgesLehmann];
    for drift in [0.0, 0.05] {
        let sim = Sim {
            rate: 5000.0,
            s_base: 50e-6,
            s_cand: 60e-6,
            slice_s: 0.4,
            settle_s: 0.04,
            drift,
            stalls: 0.0,
            stall_s: 0.0,
        };
        let truth = sim.truth();
        let trials = 240;
        // The trials (each its own seed) split over two threads: the same trials and counts
        // as one after the other, in half the time on this machine's two CPUs. Each simulated
        // comparison is summed up both ways.
        let covered_by = |half: usize| {
            let mut covered = [[0usize; 2]; 2];
            for trial in (half..trials).step_by(2) {
                let mut p = sim.run(24, 1000 + trial as u64);
                for (c, centre) in centres.into_iter().enumerate() {
                    p.set_centre(centre);
                    for (k, row) in p
                        .rows(View::User, &asked, 0.95, 0.1, None)
                        .iter()
                        .enumerate()
                    {
                        let r = row.ratio.expect("enough pairs for p50 and p99");
                        assert!(r.lo > 0.0 && r.lo <= r.value && r.value <= r.hi, "{r:?}");
                        covered[c][k] += usize::from(r.lo <= truth && truth <= r.hi);
                    }
                }
            }
            covered
        };
        let covered = std::thread::scope(|s| {
            let other = s.spawn(|| covered_by(1));
            let mine = covered_by(0);
            let other = other.join().expect("the other half's trials ran");
            let mut sum = mine;
            for (c, row) in sum.iter_mut().enumerate() {
                for (k, x) in row.iter_mut().enumerate() {
                    *x += other[c][k];
                }
            }
            sum
        });
        for (c, centre) in centres.into_iter().enumerate() {
            for (k, (key, _)) in asked.iter().enumerate() {
                let rate = covered[c][k] as f64 / trials as f64;
                eprintln!(
                    "drift {drift}, {centre:?}: {key} covers the true ratio {truth:.4} in {rate:.3}"
                );
                assert!(
                    (0.90..=0.985).contains(&rate),
                    "drift {drift}, {centre:?}: {key} coverage {rate}"
                );
            }
        }
    }
}

/// A 1.31× slower server is called worse at p50 and p99 from a couple of dozen pairs, even
/// on a host whose latencies wander (×1.3 over the comparison); the same server against itself is
/// never called worse or better.
#[test]
fn a_slower_candidate_reads_worse_and_an_equal_one_never_does() {
    let asked = percentiles(&[("p50", 0.5), ("p99", 0.99)]);
    let slower = Sim {
        rate: 5000.0,
        s_base: 50e-6,
        s_cand: 60e-6,
        slice_s: 0.4,
        settle_s: 0.04,
        drift: 0.05,
        stalls: 0.0,
        stall_s: 0.0,
    };
    let same = Sim {
        s_cand: 50e-6,
        ..slower
    };
    let (mut worse, mut false_verdicts) = (0, 0);
    for trial in 0..40 {
        let rows = slower
            .run(24, trial)
            .rows(View::User, &asked, 0.95, 0.1, None);
        worse += rows
            .iter()
            .filter(|r| r.verdict == CheckVerdict::Worse)
            .count();
        let rows = same
            .run(24, 500 + trial)
            .rows(View::User, &asked, 0.95, 0.1, None);
        false_verdicts += rows
            .iter()
            .filter(|r| matches!(r.verdict, CheckVerdict::Worse | CheckVerdict::Better))
            .count();
    }
    eprintln!("worse in {worse} of 80 rows; A/A: {false_verdicts} better/worse of 80");
    assert!(worse >= 72, "worse in {worse} of 80 rows");
    assert_eq!(false_verdicts, 0);
}

/// Host stalls (~20 ms, exponential) freezing one arm's server in one slice in ten: the
/// Hodges–Lehmann centre still calls a 1.29× slower candidate worse at p99 in most
/// comparisons of 30 pairs, where they made the sections' mean undecided in nine of ten
/// (examples/ab_coverage: 96 % against 11 % over 200 trials), and its interval still covers
/// the exact ratio; the same server against itself is not called worse or better.
#[test]
fn stalls_in_one_arms_slices_leave_the_p99_decided() {
    let asked = percentiles(&[("p99", 0.99)]);
    let slower = Sim {
        rate: 5000.0,
        s_base: 50e-6,
        s_cand: 60e-6,
        slice_s: 0.5,
        settle_s: 0.05,
        drift: 0.02,
        stalls: 0.1,
        stall_s: 0.02,
    };
    let same = Sim {
        s_cand: 50e-6,
        ..slower
    };
    let truth = slower.truth();
    let trials = 30;
    let (mut worse, mut mean_worse, mut covered, mut false_verdicts) = (0, 0, 0, 0);
    for trial in 0..trials {
        let mut p = slower.run(30, 77 + trial);
        let row = &p.rows(View::User, &asked, 0.95, 0.1, None)[0];
        worse += usize::from(row.verdict == CheckVerdict::Worse);
        covered += usize::from(row.ratio.is_some_and(|r| r.lo <= truth && truth <= r.hi));
        p.set_centre(Centre::Mean);
        let row = &p.rows(View::User, &asked, 0.95, 0.1, None)[0];
        mean_worse += usize::from(row.verdict == CheckVerdict::Worse);
        let row = &same
            .run(30, 9_000 + trial)
            .rows(View::User, &asked, 0.95, 0.1, None)[0];
        false_verdicts += usize::from(matches!(
            row.verdict,
            CheckVerdict::Worse | CheckVerdict::Better
        ));
    }
    eprintln!(
        "p99 worse in {worse} of {trials} (the mean: {mean_worse}); covered {covered}; A/A {false_verdicts}"
    );
    assert!(worse >= 24, "p99 worse in {worse} of {trials}");
    assert!(covered >= 26, "covered in {covered} of {trials}");
    assert!(false_verdicts <= 1, "A/A: {false_verdicts} of {trials}");
}

#[test]
fn looks_grow_by_half_and_share_the_error_out() {
    let l = Looks::plan(6, 50, 0.95);
    assert_eq!(l.at, vec![6, 9, 14, 21, 32, 48, 50]);
    assert!((l.confidence - (1.0 - 0.05 / 7.0)).abs() < 1e-12);
    let one = Looks::plan(10, 10, 0.95);
    assert_eq!(one.at, vec![10]);
    assert_eq!(one.confidence, 0.95);
    assert_eq!(Looks::fixed(20, 0.9).at, vec![20]);
}

#[test]
fn pairs_needed_scale_with_the_square_of_the_half_width() {
    let iv = |value: f64, lo: f64, hi: f64| Interval { value, lo, hi };
    // 1.2 [1.05, 1.37] after 10 pairs: the lower half-width ln(1.2/1.05) must shrink to
    // ln(1.2/1.1): (0.1335/0.0870)² = 2.35 → ~25 pairs with the 5 % margin.
    let n = pairs_needed(iv(1.2, 1.05, 1.3714), 0.1, 10).unwrap();
    assert!((24..=26).contains(&n), "{n}");
    // Within the tolerance: both sides must fit inside it.
    let n = pairs_needed(iv(1.0, 0.85, 1.18), 0.1, 10).unwrap();
    assert!(n > 10, "{n}");
    // On the edge: no number of pairs.
    assert_eq!(pairs_needed(iv(1.1, 1.0, 1.2), 0.1, 10), None);
}

#[test]
fn too_few_pairs_for_a_far_percentile_is_undecided_with_why() {
    let sim = Sim {
        rate: 2000.0,
        s_base: 50e-6,
        s_cand: 60e-6,
        slice_s: 0.2,
        settle_s: 0.02,
        drift: 0.0,
        stalls: 0.0,
        stall_s: 0.0,
    };
    let p = sim.run(4, 3);
    let rows = p.rows(
        View::Server,
        &percentiles(&[("p99.99", 0.9999)]),
        0.95,
        0.1,
        None,
    );
    assert_eq!(rows[0].verdict, CheckVerdict::Undecided);
    assert!(rows[0].ratio.is_none());
    assert!(rows[0]
        .why
        .as_deref()
        .unwrap_or("")
        .contains("too few pairs"));
    let invalid = p.rows(
        View::User,
        &percentiles(&[("p50", 0.5)]),
        0.95,
        0.1,
        Some("the candidate's user view is invalid: generator late"),
    );
    assert_eq!(invalid[0].verdict, CheckVerdict::Undecided);
    assert!(invalid[0].why.as_deref().unwrap_or("").contains("invalid"));
}

fn facts(p50: f64, p99: f64) -> SliceFacts {
    SliceFacts {
        user_us: vec![p50, p99],
        server_us: vec![p50, p99],
        ..SliceFacts::default()
    }
}

#[test]
fn the_carry_over_check_finds_an_order_effect_and_not_a_missing_one() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let noise = Normal::new(0.0f64, 0.05).unwrap();
    for effect in [1.0, 1.15] {
        let mut p = Paired::new();
        for i in 0..40u32 {
            let candidate_first = i % 2 == 0;
            // The slice that runs second is slowed by `effect`.
            let (b, c) = if candidate_first {
                (effect, 1.0)
            } else {
                (1.0, effect)
            };
            let b50 = 100.0 * b * noise.sample(&mut rng).exp();
            let c50 = 120.0 * c * noise.sample(&mut rng).exp();
            p.push_pair(PairFacts {
                index: i,
                seed: 0,
                candidate_first,
                at_s: 0.0,
                baseline: facts(b50, 3.0 * b50),
                candidate: facts(c50, 3.0 * c50),
            });
        }
        let co = p.carry_over(View::User, 0, 0.95).unwrap();
        assert_eq!(co.pairs, (20, 20));
        // Candidate first: 1.2 / effect; baseline first: 1.2 · effect.
        assert!(
            (co.effect.value - 1.0 / (effect * effect)).abs() < 0.05,
            "{co:?}"
        );
        assert_eq!(co.detected, effect != 1.0, "{co:?}");
    }
    // Fewer than two pairs of an order: no check.
    assert!(Paired::new().carry_over(View::User, 0, 0.95).is_none());
}

/// Host stalls that hit one arm's slice (not shared: the pairing cannot cancel them) do not
/// break the promise: with a 20 ms stall in one slice of ten, the intervals from 16 pairs
/// still cover the exact ratio, and the same server is never called worse or better.
#[test]
fn stalls_in_one_arms_slices_leave_the_intervals_covering() {
    let asked = percentiles(&[("p50", 0.5), ("p99", 0.99)]);
    let sim = Sim {
        rate: 5000.0,
        s_base: 50e-6,
        s_cand: 60e-6,
        slice_s: 0.4,
        settle_s: 0.04,
        drift: 0.02,
        stalls: 0.1,
        stall_s: 0.02,
    };
    let same = Sim {
        s_cand: 50e-6,
        ..sim
    };
    let truth = sim.truth();
    let trials = 200;
    let (mut covered, mut false_verdicts) = ([0usize; 2], 0);
    for t in 0..trials {
        for (k, row) in sim
            .run(16, 3000 + t)
            .rows(View::User, &asked, 0.95, 0.1, None)
            .iter()
            .enumerate()
        {
            let r = row.ratio.expect("enough pairs");
            covered[k] += usize::from(r.lo <= truth && truth <= r.hi);
        }
        false_verdicts += same
            .run(16, 9000 + t)
            .rows(View::User, &asked, 0.95, 0.1, None)
            .iter()
            .filter(|r| matches!(r.verdict, CheckVerdict::Worse | CheckVerdict::Better))
            .count();
    }
    for (k, (key, _)) in asked.iter().enumerate() {
        let rate = covered[k] as f64 / trials as f64;
        eprintln!("stalls: {key} covers {rate:.3}");
        assert!((0.90..=0.99).contains(&rate), "{key} coverage {rate}");
    }
    eprintln!(
        "stalls: A/A better/worse rows {false_verdicts} of {}",
        2 * trials
    );
    assert!(false_verdicts <= 2, "{false_verdicts}");
}
