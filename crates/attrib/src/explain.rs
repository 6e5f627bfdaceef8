//! Why the slow requests are slow: stage growth from the analysis' breakdown, and the sampled
//! sources that coincide in time with the slowest 1 % of requests.
//!
//! Method, per source. The intervals considered are those overlapping the span of the requests
//! (first intended send to last completion). An interval is *slow* when it overlaps the life
//! (intended send → completion) of one of the slowest 1 % of requests. Each interval's delta is
//! turned into a rate (÷ its length, so uneven sampling does not bias), and
//! **lift = mean rate over slow intervals ÷ mean rate over all considered intervals**.
//! Significance comes from a one-sided circular-shift permutation test: the slow-interval mask
//! is rotated against the source series by up to [`PERMUTATION_SHIFTS`] shifts (all of them
//! when there are fewer intervals, else evenly spaced ones), and p = (1 + #{rotated mean ≥
//! observed mean}) / (1 + shifts). Rotation keeps both the clustering of slow requests and the
//! autocorrelation of the source, which a shuffle would destroy (a shuffle would call any
//! bursty source significant). The reported p-values are Holm-adjusted over the m sources that
//! moved at all (the i-th smallest raw p times m − i + 1, made monotone, capped at 1), so
//! p < 0.05 means significant at 5 % family-wise for the whole report. The smallest possible
//! adjusted p is m / (1 + shifts): with 10 ms intervals and ~10 moving sources a run needs a few
//! seconds before anything can reach 0.05, and a run that short has few slow requests anyway.

use crate::table::mitigation_of;
use crate::{Series, SourceKind};
use analysis::StageBreakdown;
use serde::{Deserialize, Serialize};

/// Most rotations tried per source.
pub const PERMUTATION_SHIFTS: usize = 999;

/// Why the slow requests are slow.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Why {
    /// Stages, the most grown (in added time) first.
    pub stages: Vec<StageFinding>,
    /// Sources, the most significant first (then the highest lift).
    pub sources: Vec<SourceFinding>,
    /// How many requests counted as slow (the slowest 1 %).
    pub slow_requests: u64,
    /// Sampled intervals inside the run's span, and how many of them held a slow request.
    pub intervals: u64,
    pub slow_intervals: u64,
}

/// One source's coincidence with slow requests.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SourceFinding {
    pub source: String,
    pub kind: SourceKind,
    pub lift: f64,
    /// Holm-adjusted one-sided p-value of the circular-shift test (see the module doc).
    pub p_value: f64,
    pub evidence: String,
    pub mitigation: String,
    pub tradeoff: String,
}

/// One stage of the breakdown: its median among the slowest 1 % and among median requests.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StageFinding {
    pub stage: String,
    pub slow_p50_us: f64,
    pub median_p50_us: f64,
    /// slow_p50 ÷ median_p50 (absent, serialised as null, when the median stage took 0).
    pub growth: f64,
}

/// Which sampled intervals hold a slow request, built as the slow requests stream past (the
/// analysis' second pass hands them over one at a time), so that no list of requests is
/// kept: memory is one flag per interval.
#[derive(Clone, Debug)]
pub struct SlowMask {
    start_mono_ns: u64,
    /// One flag per interval of the series.
    mask: Vec<bool>,
    slow: u64,
    t: Vec<u64>,
}

impl SlowMask {
    /// An empty mask over the intervals of `series`, for a run that started at
    /// `start_mono_ns` (CLOCK_MONOTONIC).
    pub fn new(series: &Series, start_mono_ns: u64) -> SlowMask {
        SlowMask {
            start_mono_ns,
            mask: vec![false; series.intervals()],
            slow: 0,
            t: series.t_mono_ns.clone(),
        }
    }

    /// The interval holding absolute time `x` (clamped to the first and last).
    fn holding(&self, x: u64) -> usize {
        self.t.partition_point(|&s| s <= x).saturating_sub(1)
    }

    /// One slow request: (run-relative intended send, latency), both ns.
    pub fn add(&mut self, intended_ns: u64, latency_ns: u64) {
        self.slow += 1;
        if self.mask.is_empty() {
            return;
        }
        let last = self.mask.len() - 1;
        let a = self.holding(self.start_mono_ns + intended_ns).min(last);
        let b = self
            .holding(self.start_mono_ns + intended_ns + latency_ns)
            .min(last);
        for m in &mut self.mask[a..=b] {
            *m = true;
        }
    }
}

/// Explain a run: `series` from its sampler, `mask` the intervals that held one of its
/// slowest 1 %, `span_ns` the run-relative span of its requests (first intended send, last
/// completion: only intervals overlapping it are compared), `stages` the analysis'
/// breakdown when the server sent stamps.
pub fn explain_mask(
    series: &Series,
    mask: &SlowMask,
    span_ns: (u64, u64),
    stages: Option<&StageBreakdown>,
) -> Why {
    let mut why = Why {
        stages: stages.map(stage_findings).unwrap_or_default(),
        ..Why::default()
    };
    why.slow_requests = mask.slow;
    let t = &series.t_mono_ns;
    if series.intervals() == 0 || mask.mask.len() != series.intervals() || mask.slow == 0 {
        return why;
    }
    let (lo, hi) = (
        mask.start_mono_ns + span_ns.0,
        mask.start_mono_ns + span_ns.1,
    );
    if hi < t[0] || lo >= t[t.len() - 1] {
        return why;
    }
    // Intervals [t[i], t[i+1]) overlapping [lo, hi]: from the one holding lo to the one
    // holding hi.
    let first = mask.holding(lo);
    let last = mask.holding(hi).min(series.intervals() - 1);
    let n = last + 1 - first;
    let slow_idx: Vec<usize> = (0..n).filter(|&i| mask.mask[first + i]).collect();
    why.intervals = n as u64;
    why.slow_intervals = slow_idx.len() as u64;
    if slow_idx.is_empty() || slow_idx.len() == n {
        return why; // nothing to compare with
    }

    let mut found = Vec::new();
    for s in &series.sources {
        let rates: Vec<f64> = (first..=last)
            .map(|i| {
                let dt = t[i + 1].saturating_sub(t[i]).max(1) as f64 / 1e9;
                s.deltas.get(i).copied().unwrap_or(0.0) / dt
            })
            .collect();
        let mean_all = rates.iter().sum::<f64>() / n as f64;
        if mean_all.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            continue; // never moved: nothing to attribute
        }
        let (mean_slow, p, shifts) = shift_test(&rates, &slow_idx);
        let (mitigation, tradeoff) = mitigation_of(s.kind);
        found.push(SourceFinding {
            source: s.name.clone(),
            kind: s.kind,
            lift: mean_slow / mean_all,
            p_value: p,
            evidence: format!(
                "{} during the {} intervals that hold slow requests vs {} over all {} intervals \
                 (circular-shift test, {} shifts)",
                rate(mean_slow, &s.unit),
                slow_idx.len(),
                rate(mean_all, &s.unit),
                n,
                shifts
            ),
            mitigation: mitigation.to_string(),
            tradeoff: tradeoff.to_string(),
        });
    }
    holm(&mut found);
    found.sort_by(|a, b| {
        a.p_value
            .total_cmp(&b.p_value)
            .then(b.lift.total_cmp(&a.lift))
    });
    why.sources = found;
    why
}

/// Explain a run whose successful requests are in memory: `requests` as (run-relative
/// intended send ns, latency ns); the slowest 1 % (at least one) count as slow. See
/// [`explain_mask`] for the streaming form.
pub fn explain(
    series: &Series,
    start_mono_ns: u64,
    requests: &[(u64, u64)],
    stages: Option<&StageBreakdown>,
) -> Why {
    let span = requests
        .iter()
        .map(|&(i, _)| i)
        .min()
        .zip(requests.iter().map(|&(i, l)| i + l).max());
    let mut mask = SlowMask::new(series, start_mono_ns);
    let mut by_latency: Vec<(u64, u64)> = requests.to_vec();
    by_latency.sort_unstable_by_key(|&(_, lat)| lat);
    let k = requests.len().div_ceil(100);
    for &(i, l) in &by_latency[requests.len() - k..] {
        mask.add(i, l);
    }
    explain_mask(series, &mask, span.unwrap_or((0, 0)), stages)
}

/// Holm's step-down adjustment of the findings' p-values, in place.
fn holm(found: &mut [SourceFinding]) {
    let m = found.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| found[a].p_value.total_cmp(&found[b].p_value));
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(found[i].p_value * (m - rank) as f64).min(1.0);
        found[i].p_value = running;
    }
}

/// A per-second rate for people: time as ms/s (a share of one CPU), counts as n/s.
fn rate(per_s: f64, unit: &str) -> String {
    let (x, u) = match unit {
        "ns" => (per_s / 1e6, "ms/s"),
        "count" => (per_s, "/s"),
        other => return format!("{per_s:.3} {other}/s"),
    };
    if x.abs() >= 100.0 {
        format!("{x:.0} {u}")
    } else {
        format!("{x:.3} {u}")
    }
}

/// Mean of `rates` over `idx`, the one-sided circular-shift p-value, and the number of shifts.
pub(crate) fn shift_test(rates: &[f64], idx: &[usize]) -> (f64, f64, usize) {
    let n = rates.len();
    let k = idx.len() as f64;
    let stat = |shift: usize| idx.iter().map(|&i| rates[(i + shift) % n]).sum::<f64>() / k;
    let observed = stat(0);
    let shifts = (n - 1).min(PERMUTATION_SHIFTS);
    // Ties count against the source (a flat series is never significant).
    let tol = observed.abs() * 1e-12;
    let at_least = (0..shifts)
        .map(|j| 1 + j * (n - 1) / shifts)
        .filter(|&s| stat(s) >= observed - tol)
        .count();
    (
        observed,
        (1 + at_least) as f64 / (1 + shifts) as f64,
        shifts,
    )
}

fn stage_findings(b: &StageBreakdown) -> Vec<StageFinding> {
    let mut v: Vec<StageFinding> = b
        .rows
        .iter()
        .filter(|r| r.slow_p50_us.is_finite() && r.median_p50_us.is_finite())
        .map(|r| StageFinding {
            stage: r.stage.clone(),
            slow_p50_us: r.slow_p50_us,
            median_p50_us: r.median_p50_us,
            growth: if r.median_p50_us > 0.0 {
                r.slow_p50_us / r.median_p50_us
            } else {
                f64::NAN
            },
        })
        .collect();
    // Ranked by the time added, not the ratio: 0.1 → 1 µs matters less than 10 → 100 µs.
    v.sort_by(|a, b| {
        (b.slow_p50_us - b.median_p50_us).total_cmp(&(a.slow_p50_us - a.median_p50_us))
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Under the null (iid source, a fixed mask) and with every rotation tried, the test is
    /// exact: P(p ≤ 0.05) = ⌊0.05·n⌋/n. Over 400 independent series the rejection count is
    /// Binomial(400, 0.05): mean 20, sd 4.36; accept 20 ± 4 sd.
    #[test]
    fn shift_test_is_calibrated_under_the_null() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let n = 200;
        let idx: Vec<usize> = vec![3, 4, 50, 51, 52, 120, 199];
        let mut rejections = 0;
        for _ in 0..400 {
            let rates: Vec<f64> = (0..n).map(|_| rng.gen::<f64>()).collect();
            let (_, p, shifts) = shift_test(&rates, &idx);
            assert_eq!(shifts, n - 1);
            if p <= 0.05 {
                rejections += 1;
            }
        }
        assert!(
            (3..=37).contains(&rejections),
            "{rejections} rejections of 400"
        );
    }

    fn finding(p: f64) -> SourceFinding {
        SourceFinding {
            source: String::new(),
            kind: SourceKind::Noise,
            lift: 1.0,
            p_value: p,
            evidence: String::new(),
            mitigation: String::new(),
            tradeoff: String::new(),
        }
    }

    /// Holm on (0.01, 0.04, 0.03, 0.5), m = 4: sorted 0.01·4 = 0.04, 0.03·3 = 0.09,
    /// 0.04·2 = 0.08 → 0.09 (monotone), 0.5·1 = 0.5.
    #[test]
    fn holm_adjustment() {
        let mut f: Vec<SourceFinding> = [0.01, 0.04, 0.03, 0.5].map(finding).into();
        holm(&mut f);
        let p: Vec<f64> = f.iter().map(|f| f.p_value).collect();
        let want = [0.04, 0.09, 0.09, 0.5];
        for (a, b) in p.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{p:?}");
        }
    }

    #[test]
    fn a_flat_series_is_never_significant() {
        let (m, p, _) = shift_test(&[2.0; 50], &[1, 2, 3]);
        assert_eq!(m, 2.0);
        assert_eq!(p, 1.0);
    }

    #[test]
    fn stage_rows_without_data_are_dropped_and_zero_median_has_no_growth() {
        let b = StageBreakdown {
            slow_requests: 1,
            median_requests: 1,
            rows: vec![
                analysis::StageRow {
                    stage: "a".into(),
                    slow_p50_us: f64::NAN,
                    slow_p99_us: f64::NAN,
                    median_p50_us: 1.0,
                    median_p99_us: 1.0,
                },
                analysis::StageRow {
                    stage: "b".into(),
                    slow_p50_us: 3.0,
                    slow_p99_us: 3.0,
                    median_p50_us: 0.0,
                    median_p99_us: 0.0,
                },
            ],
        };
        let f = stage_findings(&b);
        assert_eq!(f.len(), 1);
        assert!(f[0].growth.is_nan());
        // NaN becomes null in JSON.
        let js = serde_json::to_value(&f[0]).unwrap();
        assert!(js["growth"].is_null());
    }
}
