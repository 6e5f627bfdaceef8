//! From a loop's raw ticks to a [`CpuReport`]: gaps in ns, time lost, the CCDF of aggregated
//! time lost, the signal-to-noise ratio and the gap classes.

use serde::Serialize;
use serde_json::{json, Value};

use crate::attribution::{Contributor, GoodBadUgly};
use crate::LoopKind;

/// One gap above the threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Gap {
    /// Start (the read that opened the gap), ns since the run's common start.
    pub start_ns: u64,
    /// Length, ns.
    pub len_ns: u64,
    /// True when the gap matches the RT-throttling pattern (see [`crate::throttle`]); such
    /// gaps are excluded from time lost, gaps per second, percentiles and SNR.
    pub throttle: bool,
}

/// How the signal-to-noise ratio is computed (also printed in reports).
pub const SNR_DEFINITION: &str = "snr = useful time / time lost, where time lost is the sum of \
     the lengths of all gaps above the threshold (RT-throttle stalls excluded) and useful time \
     is the observation window minus time lost minus throttle stalls; infinite (null in JSON) \
     when nothing was lost";

/// The paper's signal-to-noise ratio (Where Has My Time Gone? §5), printed beside ours.
pub const PAPER_SNR_DEFINITION: &str = "paper snr = time in the loop's iterations at or below \
     their 99.9th percentile / time in the iterations above it (the slowest 0.1 %), \
     consecutive-reads loop only, RT-throttle stalls left out; a range when the 99.9th \
     percentile falls below the gap threshold, since iterations under it are counted, not \
     listed";

/// [`PAPER_SNR_DEFINITION`] as a range: `low == high` when the slowest 0.1 % of iterations
/// are all listed gaps.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PaperSnr {
    pub low: f64,
    pub high: f64,
}

impl PaperSnr {
    /// Whether the range is one value.
    pub fn exact(&self) -> bool {
        self.low == self.high
    }
}

/// The paper's SNR from what a consecutive-reads loop keeps: `loops` iterations (each one
/// event) over `elapsed_ns`, the listed gap lengths above `threshold_ns`, and `dropped`
/// further gaps of `dropped_ns` in total. The slowest k = ⌊loops/1000⌋ iterations are
/// "above the 99.9th percentile". When the listed gaps cover them the time above is the sum
/// of the k longest; otherwise it lies between what the gaps hold plus the rest at
/// `min_loop_ns` each and plus the rest at `threshold_ns` each. None when k is 0.
pub fn paper_snr(
    loops: u64,
    elapsed_ns: u64,
    listed: &[u64],
    dropped: (u64, u64),
    threshold_ns: u64,
    min_loop_ns: f64,
) -> Option<PaperSnr> {
    let (dropped, dropped_ns) = dropped;
    let k = loops / 1000;
    if k == 0 {
        return None;
    }
    let mut sorted = listed.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let gaps = sorted.len() as u64 + dropped;
    let all_gaps_ns: u64 = sorted.iter().sum::<u64>() + dropped_ns;
    let top = |n: u64| -> f64 { sorted.iter().take(n as usize).sum::<u64>() as f64 };
    let (above_lo, above_hi) = if gaps < k {
        let rest = (k - gaps) as f64;
        (
            all_gaps_ns as f64 + rest * min_loop_ns,
            all_gaps_ns as f64 + rest * threshold_ns as f64,
        )
    } else if dropped == 0 {
        (top(k), top(k))
    } else {
        // The k slowest are gaps, some of them unlisted: at least the k longest listed (or all
        // listed and the rest just above the threshold), at most every gap.
        let listed_n = sorted.len() as u64;
        let lo = if listed_n >= k {
            top(k)
        } else {
            top(listed_n) + (k - listed_n) as f64 * threshold_ns as f64
        };
        (lo, all_gaps_ns as f64)
    };
    let snr = |above: f64| (elapsed_ns as f64 - above).max(0.0) / above.max(f64::MIN_POSITIVE);
    Some(PaperSnr {
        low: snr(above_hi),
        high: snr(above_lo),
    })
}

/// The 99.9th percentile of the loop's iteration lengths, as bounds in ns, and the paper's
/// class of the loop as a latency contributor (§5.1: Good below 1 µs at p99.9, Bad to
/// 100 µs, Ugly beyond), None when the bounds straddle a class boundary.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LoopP999 {
    pub low_ns: f64,
    pub high_ns: f64,
    pub class: Option<GoodBadUgly>,
}

/// [`LoopP999`] from `loops` iterations, the listed gap lengths (all above `threshold_ns`),
/// `dropped` unlisted gaps and the shortest iteration: exact when the listed gaps reach the
/// percentile's rank, else between the shortest iteration and the threshold (fewer gaps
/// than the rank) or from the threshold up (unlisted gaps may hold the rank).
pub fn loop_p999(
    loops: u64,
    listed: &[u64],
    dropped: u64,
    threshold_ns: u64,
    min_loop_ns: f64,
) -> Option<LoopP999> {
    if loops == 0 {
        return None;
    }
    // Rank from the top of the value at ceil(0.999·n) from the bottom.
    let rank = loops - (loops * 999).div_ceil(1000) + 1;
    let gaps = listed.len() as u64 + dropped;
    let (low_ns, high_ns) = if gaps < rank {
        (min_loop_ns, threshold_ns as f64)
    } else if dropped == 0 {
        let mut sorted = listed.to_vec();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let v = sorted[(rank - 1) as usize] as f64;
        (v, v)
    } else {
        (threshold_ns as f64, f64::INFINITY)
    };
    let (a, b) = (GoodBadUgly::of_ns(low_ns), GoodBadUgly::of_ns(high_ns));
    Some(LoopP999 {
        low_ns,
        high_ns,
        class: (a == b).then_some(a),
    })
}

/// Number and total length of the gaps in one Good/Bad/Ugly class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ClassShare {
    /// The class of the gap lengths.
    pub class: GoodBadUgly,
    /// Gaps in the class.
    pub count: u64,
    /// Their total length, ns.
    pub lost_ns: u64,
}

/// What the probe saw on one CPU.
#[derive(Clone, Debug, Serialize)]
pub struct CpuReport {
    /// The CPU.
    pub cpu: usize,
    /// Which loop ran.
    pub loop_kind: LoopKind,
    /// The clock read ([`crate::ClockKind::describe`]).
    pub clock: String,
    /// Calibrated ns per clock tick.
    pub ns_per_tick: f64,
    /// Gap threshold, ns.
    pub threshold_ns: u64,
    /// Loop iterations.
    pub loops: u64,
    /// Shortest iteration (Paired: between the two reads; Consecutive: read to read), ns.
    pub min_loop_ns: f64,
    /// Observation window: first read to last read, ns.
    pub elapsed_ns: u64,
    /// Every gap above the threshold that fitted the buffer, sorted by start.
    pub gaps: Vec<Gap>,
    /// Gaps above threshold that did not fit the buffer (counted in rates and time lost,
    /// missing from the list, percentiles and CCDF).
    pub gaps_dropped: u64,
    /// Gaps whose two reads came from different CPUs (ignored, as in the paper's listings).
    pub migrations: u64,
    /// Non-throttle gaps (listed + dropped) per second of the window.
    pub gaps_per_s: f64,
    /// Σ lengths of non-throttle gaps (listed + dropped), ns.
    pub time_lost_ns: u64,
    /// `time_lost_ns / elapsed_ns`, in [0, 1].
    pub time_lost_fraction: f64,
    /// Σ lengths of gaps marked as RT throttling, ns.
    pub throttle_lost_ns: u64,
    /// Signal-to-noise ratio per [`SNR_DEFINITION`].
    pub snr: f64,
    /// The paper's SNR per [`PAPER_SNR_DEFINITION`] (None for the paired loop, whose
    /// iterations do not tile the window, or with fewer than 1,000 iterations).
    pub paper_snr: Option<PaperSnr>,
    /// The loop's p99.9 and the paper's class of it as a contributor.
    pub loop_p999: Option<LoopP999>,
    /// Percentiles of the listed non-throttle gap lengths (None without gaps).
    pub gap_summary: Option<stats::Summary>,
    /// CCDF of aggregated time lost (Fig 8 of the paper): points `(x_ns, f)` where `f` is
    /// the fraction of the window lost to listed non-throttle gaps of length ≥ `x`; x
    /// increasing, f non-increasing, about 20 points per decade of x.
    pub lost_ccdf: Vec<(f64, f64)>,
    /// Gap counts and time by Good/Bad/Ugly class of their lengths.
    pub gap_classes: Vec<ClassShare>,
    /// Counters that moved on this CPU during the run, worst class first.
    pub classes: Vec<Contributor>,
    /// True when some gaps were identified as RT throttling.
    pub rt_throttled: bool,
    /// Things the reader should know (throttling, unreadable counters, buffer overflow).
    pub warnings: Vec<String>,
    /// Where the contributors' classes came from: `Ebpf` (measured durations, classed by
    /// their p99.9: [`CpuReport::measured`]) or `Counters` (only [`CpuReport::classes`],
    /// classed by nominal cost).
    pub contributor_source: crate::Contributors,
    /// Why counters were used when eBPF was wanted where possible (`auto`).
    pub contributors_reason: Option<String>,
    /// Contributors timed by eBPF on this CPU, worst class first, then most time.
    pub measured: Vec<crate::MeasuredContributor>,
    /// What the eBPF programs did and cost (all CPUs; the same in every CPU's report).
    pub ebpf: Option<ebpf::contrib::ContribTotals>,
}

/// Inputs of [`finish`] besides the gaps.
pub(crate) struct Totals {
    pub elapsed_ns: u64,
    pub dropped: u64,
    pub dropped_ns: u64,
}

/// Fills the derived fields (rates, time lost, SNR, summary, CCDF, classes) of `r` from
/// `r.gaps`, `r.elapsed_ns` and the totals.
pub(crate) fn finish(r: &mut CpuReport, t: &Totals) {
    let noise: Vec<u64> = r
        .gaps
        .iter()
        .filter(|g| !g.throttle)
        .map(|g| g.len_ns)
        .collect();
    r.throttle_lost_ns = r.gaps.iter().filter(|g| g.throttle).map(|g| g.len_ns).sum();
    r.rt_throttled = r.gaps.iter().any(|g| g.throttle);
    r.elapsed_ns = t.elapsed_ns;
    r.gaps_dropped = t.dropped;
    let elapsed = t.elapsed_ns.max(1) as f64;
    r.time_lost_ns = noise.iter().sum::<u64>() + t.dropped_ns;
    r.gaps_per_s = (noise.len() as u64 + t.dropped) as f64 / (elapsed / 1e9);
    r.time_lost_fraction = (r.time_lost_ns as f64 / elapsed).clamp(0.0, 1.0);
    r.snr = snr(t.elapsed_ns, r.time_lost_ns, r.throttle_lost_ns);
    r.paper_snr = match r.loop_kind {
        LoopKind::Consecutive => {
            let throttles = r.gaps.iter().filter(|g| g.throttle).count() as u64;
            paper_snr(
                r.loops.saturating_sub(throttles),
                t.elapsed_ns.saturating_sub(r.throttle_lost_ns),
                &noise,
                (t.dropped, t.dropped_ns),
                r.threshold_ns,
                r.min_loop_ns,
            )
        }
        LoopKind::Paired => None,
    };
    r.loop_p999 = loop_p999(r.loops, &noise, t.dropped, r.threshold_ns, r.min_loop_ns);
    r.gap_summary = if noise.is_empty() {
        None
    } else {
        let mut rec = stats::Recorder::exact(noise.len());
        for &l in &noise {
            rec.record(l);
        }
        rec.summarize(0.95).ok()
    };
    r.lost_ccdf = lost_ccdf(&noise, t.elapsed_ns, 20);
    r.gap_classes = [GoodBadUgly::Good, GoodBadUgly::Bad, GoodBadUgly::Ugly]
        .into_iter()
        .map(|class| {
            let of: Vec<u64> = noise
                .iter()
                .copied()
                .filter(|&l| GoodBadUgly::of_ns(l as f64) == class)
                .collect();
            ClassShare {
                class,
                count: of.len() as u64,
                lost_ns: of.iter().sum(),
            }
        })
        .collect();
    if t.dropped > 0 {
        r.warnings.push(format!(
            "gap buffer full: {} gaps beyond the first {} were counted but not listed",
            t.dropped,
            r.gaps.len()
        ));
    }
}

/// [`SNR_DEFINITION`]: `(elapsed − lost − throttle) / lost`, `f64::INFINITY` when
/// `lost == 0`.
pub fn snr(elapsed_ns: u64, lost_ns: u64, throttle_ns: u64) -> f64 {
    if lost_ns == 0 {
        return f64::INFINITY;
    }
    elapsed_ns.saturating_sub(lost_ns + throttle_ns) as f64 / lost_ns as f64
}

/// CCDF of aggregated time lost: for each gap length x (thinned to about `per_decade`
/// points per decade, always keeping the shortest and the longest), the fraction of
/// `elapsed_ns` spent in gaps of length ≥ x.
pub fn lost_ccdf(lens: &[u64], elapsed_ns: u64, per_decade: usize) -> Vec<(f64, f64)> {
    let mut sorted = lens.to_vec();
    sorted.sort_unstable();
    let elapsed = elapsed_ns.max(1) as f64;
    let step = 1.0 / per_decade.max(1) as f64;
    let mut suffix: u64 = sorted.iter().sum();
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut last_log = f64::NEG_INFINITY;
    let mut i = 0;
    while i < sorted.len() {
        let x = sorted[i];
        let mut j = i;
        while j < sorted.len() && sorted[j] == x {
            j += 1;
        }
        let lg = (x.max(1) as f64).log10();
        let is_last = j == sorted.len();
        if lg >= last_log + step || is_last {
            out.push((x as f64, suffix as f64 / elapsed));
            last_log = lg;
        }
        suffix -= sorted[i..j].iter().sum::<u64>();
        i = j;
    }
    out
}

impl CpuReport {
    /// The JSON object of `tailscope noise --json` for this CPU: `cpu`, `min_loop_ns`,
    /// `gaps_per_s`, `time_lost_fraction`, `snr` (null when infinite), `gaps` (the DESIGN.md
    /// distribution of gap lengths in µs, null without gaps), plus the remaining figures.
    pub fn to_json(&self) -> Value {
        let finite = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
        json!({
            "cpu": self.cpu,
            "loop": match self.loop_kind { LoopKind::Paired => "paired", LoopKind::Consecutive => "consecutive" },
            "clock": self.clock,
            "threshold_ns": self.threshold_ns,
            "loops": self.loops,
            "min_loop_ns": self.min_loop_ns,
            "elapsed_ns": self.elapsed_ns,
            "gap_count": self.gaps.iter().filter(|g| !g.throttle).count() as u64 + self.gaps_dropped,
            "gaps_per_s": self.gaps_per_s,
            "time_lost_ns": self.time_lost_ns,
            "time_lost_fraction": self.time_lost_fraction,
            "throttle_lost_ns": self.throttle_lost_ns,
            "rt_throttled": self.rt_throttled,
            "snr": finite(self.snr),
            "snr_definition": SNR_DEFINITION,
            "loop_p999": self.loop_p999.map(|p| json!({"low_ns": p.low_ns, "high_ns": finite(p.high_ns), "class": p.class.map(GoodBadUgly::name)})),
            "snr_paper": self.paper_snr.map(|p| json!({"low": finite(p.low), "high": finite(p.high), "exact": p.exact(), "definition": PAPER_SNR_DEFINITION})),
            "gaps": self.gap_summary.as_ref().map(|s| s.distribution_json()),
            "max_gap_us": self.gap_summary.as_ref().map(|s| s.max_ns / 1000.0),
            "lost_ccdf": self.lost_ccdf.iter().map(|&(x, f)| json!({"gap_ns": x, "fraction": f})).collect::<Vec<_>>(),
            "gap_classes": self.gap_classes.iter().map(|c| json!({"class": c.class.name(), "count": c.count, "lost_ns": c.lost_ns})).collect::<Vec<_>>(),
            "contributors": self.classes.iter().map(|c| json!({"source": c.source, "delta": c.delta, "per_s": c.per_s, "class": c.class.name(), "note": c.note})).collect::<Vec<_>>(),
            "warnings": self.warnings,
            "contributor_source": self.contributor_source,
            "contributors_class_rule": match self.contributor_source {
                crate::Contributors::Ebpf => "measured p99.9 of each contributor's durations (eBPF)",
                _ => "nominal cost of one event, capped by the longest gap (counters)",
            },
            "contributors_reason": self.contributors_reason,
            "contributors_measured": self.measured.iter().map(|c| {
                let b = |q: &crate::measured::Bucketed| json!({"low_ns": q.low_ns, "high_ns": q.high_ns});
                json!({
                    "source": c.source, "kind": c.kind, "count": c.count, "per_s": c.per_s,
                    "p50_ns": b(&c.p50), "p99_ns": b(&c.p99), "p99.9_ns": b(&c.p999),
                    "max_ns": c.max_ns, "mean_ns": c.mean_ns, "total_ns": c.total_ns,
                    "lost_share": c.lost_share, "class": c.class.name(),
                })
            }).collect::<Vec<_>>(),
            "contributors_ebpf": self.ebpf.as_ref().map(|t| json!({
                "recorded": t.recorded,
                "no_slot": t.no_slot,
                "programs": t.programs,
                "vectors_missing": t.vectors_missing,
                "attached_ns": t.attached_ns,
                "bpf_stats_on": t.cost.measured,
                "bpf_runs": t.cost.runs,
                "bpf_run_time_ns": t.cost.run_time_ns,
            })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ccdf_of_lost_time_exact_on_a_small_list() {
        // lengths 1, 2, 2, 5 µs in a 100 µs window: lost ≥ x is 10, 9, 5 µs.
        let c = lost_ccdf(&[2_000, 1_000, 5_000, 2_000], 100_000, 1000);
        assert_eq!(c, vec![(1000.0, 0.10), (2000.0, 0.09), (5000.0, 0.05)]);
        // thinning keeps first and last only when all are within one step
        let c = lost_ccdf(&[1_000, 1_001, 1_002], 10_000, 1);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0], (1000.0, 0.3003));
        assert_eq!(c[1].0, 1002.0);
        assert!(lost_ccdf(&[], 10, 20).is_empty());
    }

    #[test]
    fn the_papers_snr_is_exact_when_the_slowest_tenth_of_a_percent_are_listed() {
        // 10,000 iterations over 1 ms: k = 10 slowest. Gaps of 10..=21 µs are listed: the 10
        // longest are 12..=21 µs, 165 µs in all; SNR = 835/165.
        let gaps: Vec<u64> = (10..22).map(|us| us * 1_000).collect();
        let p = paper_snr(10_000, 1_000_000, &gaps, (0, 0), 1_000, 20.0).unwrap();
        assert!(p.exact());
        assert!((p.low - 835.0 / 165.0).abs() < 1e-12, "{p:?}");
        // 3 gaps of 50 µs: the other 7 of the slowest ten are under the 1 µs threshold, so
        // above ∈ [150 + 7·0.02, 150 + 7·1] µs.
        let p = paper_snr(10_000, 1_000_000, &[50_000; 3], (0, 0), 1_000, 20.0).unwrap();
        let (lo_above, hi_above) = (150_140.0, 157_000.0);
        assert!((p.high - (1e6 - lo_above) / lo_above).abs() < 1e-9, "{p:?}");
        assert!((p.low - (1e6 - hi_above) / hi_above).abs() < 1e-9, "{p:?}");
        assert!(!p.exact());
        // Unlisted gaps widen it up to every gap's time.
        let p = paper_snr(10_000, 1_000_000, &gaps[..5], (7, 70_000), 1_000, 20.0).unwrap();
        let lo_above = (10 + 11 + 12 + 13 + 14) as f64 * 1e3 + 5.0 * 1e3;
        let hi_above = 60_000.0 + 70_000.0;
        assert!((p.high - (1e6 - lo_above) / lo_above).abs() < 1e-9, "{p:?}");
        assert!((p.low - (1e6 - hi_above) / hi_above).abs() < 1e-9, "{p:?}");
        assert!(paper_snr(999, 1_000, &[], (0, 0), 1_000, 1.0).is_none());
    }

    #[test]
    fn the_loops_p999_classes_the_cpu_as_the_paper_classes_contributors() {
        // 10,000 iterations: p99.9 is the 11th slowest. 12 listed gaps of 10..=21 µs: 11 µs,
        // a Bad contributor.
        let gaps: Vec<u64> = (10..22).map(|us| us * 1_000).collect();
        let p = loop_p999(10_000, &gaps, 0, 1_000, 20.0).unwrap();
        assert_eq!((p.low_ns, p.high_ns), (11_000.0, 11_000.0));
        assert_eq!(p.class, Some(GoodBadUgly::Bad));
        // 3 gaps: the 11th slowest is under the 1 µs threshold: Good whatever it is.
        let p = loop_p999(10_000, &gaps[..3], 0, 1_000, 20.0).unwrap();
        assert_eq!((p.low_ns, p.high_ns, p.class), (20.0, 1_000.0, None));
        let p = loop_p999(10_000, &gaps[..3], 0, 900, 20.0).unwrap();
        assert_eq!(p.class, Some(GoodBadUgly::Good));
        // Unlisted gaps may hold the rank: at least the threshold, no upper bound.
        let p = loop_p999(10_000, &gaps[..3], 20, 1_000, 20.0).unwrap();
        assert_eq!((p.low_ns, p.class), (1_000.0, None));
        assert!(p.high_ns.is_infinite());
    }

    #[test]
    fn snr_is_useful_over_lost() {
        assert_eq!(snr(1_000, 100, 0), 9.0);
        assert_eq!(snr(1_000, 100, 400), 5.0);
        assert!(snr(1_000, 0, 0).is_infinite());
    }
}
