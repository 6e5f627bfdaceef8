//! The paired estimate of `tailscope ab` against exact truth (bench/ab_power.sh): simulated
//! comparisons of two M/M/1 servers with the same Poisson arrivals per pair, whose every
//! percentile's true ratio is known exactly, with and without a host drift shared by both
//! arms, and with host stalls that hit one arm's slice. Prints, per scenario, percentile and
//! way of summing the sections up (their mean with a t interval, or their Hodges–Lehmann
//! centre with the signed-rank interval), how often the nominal 95 % interval contains the
//! truth, its median width, and how often the verdict is right.
//!
//! `cargo run --release -p experiments --example ab_coverage -- [TRIALS] [PAIRS]` (default 400, 30).

mod sim;

use experiments::ab::{Arm, Centre};
use experiments::check::CheckVerdict;
use measurement::View;
use sim::Sim;

fn main() {
    let mut args = std::env::args().skip(1);
    let trials: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(400);
    let pairs: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(30);
    let asked: Vec<(String, f64)> = [("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)]
        .iter()
        .map(|(k, q)| (k.to_string(), *q))
        .collect();
    println!("# {trials} trials of {pairs} pairs; M/M/1 arms, 50 vs 60 us mean service, 5000 req/s, 0.5 s slices");
    println!("drift  stalls  centre  percentile  coverage  median_width  worse  A/A_false");
    // (drift per slice, probability a slice is hit by a 20 ms stall of its arm alone)
    for (drift, stalls) in [
        (0.0, 0.0),
        (0.02, 0.0),
        (0.05, 0.0),
        (0.1, 0.0),
        (0.02, 0.1),
        (0.02, 0.3),
    ] {
        let slower = Sim {
            rate: 5000.0,
            s_base: 50e-6,
            s_cand: 60e-6,
            slice_s: 0.5,
            settle_s: 0.05,
            drift,
            stalls,
            stall_s: 0.02,
        };
        let same = Sim {
            s_cand: 50e-6,
            ..slower
        };
        let truth = slower.truth();
        let n = asked.len();
        let centres = [Centre::Mean, Centre::HodgesLehmann];
        // [centre][percentile]
        let (mut covered, mut worse, mut false_v) = (
            [vec![0u64; n], vec![0u64; n]],
            [vec![0u64; n], vec![0u64; n]],
            [vec![0u64; n], vec![0u64; n]],
        );
        let mut widths: [Vec<Vec<f64>>; 2] = [vec![Vec::new(); n], vec![Vec::new(); n]];
        for t in 0..trials {
            let mut p = slower.run(pairs, 7 + t);
            let mut aa = same.run(pairs, 1_000_007 + t);
            for (c, centre) in centres.iter().enumerate() {
                p.set_centre(*centre);
                aa.set_centre(*centre);
                for (k, row) in p
                    .rows(View::User, &asked, 0.95, 0.1, None)
                    .iter()
                    .enumerate()
                {
                    if let Some(r) = row.ratio {
                        covered[c][k] += u64::from(r.lo <= truth && truth <= r.hi);
                        widths[c][k].push(r.hi / r.lo);
                    }
                    worse[c][k] += u64::from(row.verdict == CheckVerdict::Worse);
                }
                for (k, row) in aa
                    .rows(View::User, &asked, 0.95, 0.1, None)
                    .iter()
                    .enumerate()
                {
                    false_v[c][k] += u64::from(matches!(
                        row.verdict,
                        CheckVerdict::Worse | CheckVerdict::Better
                    ));
                }
            }
        }
        for (c, centre) in centres.iter().enumerate() {
            let name = match centre {
                Centre::Mean => "mean",
                Centre::HodgesLehmann => "HL",
            };
            for (k, (key, _)) in asked.iter().enumerate() {
                widths[c][k].sort_by(f64::total_cmp);
                let w = widths[c][k]
                    .get(widths[c][k].len() / 2)
                    .copied()
                    .unwrap_or(f64::NAN);
                println!(
                    "{drift:<6} {stalls:<7} {name:<7} {key:<11} {:>8.3}  {w:>12.3}  {:>5.3}  {:>9.3}",
                    covered[c][k] as f64 / trials as f64,
                    worse[c][k] as f64 / trials as f64,
                    false_v[c][k] as f64 / trials as f64
                );
            }
        }
    }
    // The arms are named so that a reader of the output knows which way the ratio goes.
    println!(
        "# ratio = {} / {}; true ratio {:.4}",
        Arm::Candidate,
        Arm::Baseline,
        (1.0 / 50e-6 - 5000.0) / (1.0 / 60e-6 - 5000.0)
    );
}
