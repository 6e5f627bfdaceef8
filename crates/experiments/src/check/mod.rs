//! `check`: a stored run or experiment (the candidate) against a stored baseline, per
//! percentile, per view and, for experiments, per load point. Each row reads the ratio
//! candidate ÷ baseline with an interval made from the two stored intervals (their log
//! half-widths added in quadrature, [`ratio_of`]), against a tolerance: `worse` when the whole interval lies
//! above 1 + tol, `better` when it lies below 1 / (1 + tol), `same` when it lies within
//! [1 / (1 + tol), 1 + tol], `undecided` otherwise. Only views valid in both are compared.
//!
//! A baseline from another host or another configuration is refused unless forced: the
//! differences are listed ([`host_differences`], [`config_differences`]). Target URLs compare
//! without their address (a server restarted on port 0 is the same target): a different
//! address is a note ([`config_notes`]), not a refusal.
//!
//! Three parts: the rows and their verdicts (here), whether two runs may be compared at all
//! ([`differences`]: host facts and configuration keys), and the stored runs and experiments
//! read and checked ([`stored`]).

mod differences;
mod stored;

pub use differences::{
    config_differences, config_notes, host_differences, HOST_KEYS, IGNORED_CONFIG_KEYS,
    TARGET_URL_KEYS,
};
pub use stored::{caveats_of, check_experiments, check_runs, BaselineRef, CheckError};

use std::collections::BTreeMap;

use crate::summary::{Ci, Intervals, RepeatedFacts, RunSummary};
use measurement::RunStatus;
use serde::Serialize;
use serde_json::Value;

/// The percentiles a check compares (those a summary holds).
pub const CHECK_PERCENTILES: [&str; 5] = ["p50", "p90", "p99", "p99.9", "p99.99"];

/// A check's verdict for one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckVerdict {
    Better,
    Worse,
    Same,
    Undecided,
}

impl std::fmt::Display for CheckVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CheckVerdict::Better => "better",
            CheckVerdict::Worse => "worse",
            CheckVerdict::Same => "same",
            CheckVerdict::Undecided => "undecided",
        })
    }
}

/// A value with its interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Interval {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

/// The verdict of a ratio interval `[lo, hi]` against tolerance `tol` (0.1 for 10 %).
pub fn verdict_of(lo: f64, hi: f64, tol: f64) -> CheckVerdict {
    let up = 1.0 + tol;
    let down = 1.0 / up;
    if lo > up {
        CheckVerdict::Worse
    } else if hi < down {
        CheckVerdict::Better
    } else if lo >= down && hi <= up {
        CheckVerdict::Same
    } else {
        CheckVerdict::Undecided
    }
}

/// The ratio candidate ÷ baseline with its interval; None when an interval reaches zero or a
/// bound is not finite.
///
/// The two sides are independent measurements (made at different times), each interval a 95 %
/// interval of its own estimate, and latencies vary multiplicatively; so on the log scale the
/// ratio's errors are the sum of two independent errors and the half-widths add in quadrature:
/// `ln r ± sqrt(h_c² + h_b²)`, each side of the interval from the matching sides of the two
/// (`c.hi` with `b.lo` above, `c.lo` with `b.hi` below). Adding them outright,
/// `[c.lo / b.hi, c.hi / b.lo]`, assumes both err to their limits at once and is √2 wider for
/// equal widths: 3 repeats per side could then not tell a 1.6× slower server from noise on
/// this host. Each side's interval keeps its own floors (a repeated point's is never narrower
/// than its median repeat's own interval), and `tests::quadrature_ratio_covers_the_truth`
/// checks the coverage on simulated repeats.
pub fn ratio_of(c: Interval, b: Interval) -> Option<Interval> {
    let positive = |i: &Interval| i.lo > 0.0 && i.value > 0.0 && i.hi > 0.0;
    if !(positive(&c) && positive(&b)) {
        return None;
    }
    let ln = f64::ln;
    let centre = ln(c.value) - ln(b.value);
    let below = ln(c.value / c.lo).hypot(ln(b.hi / b.value));
    let above = ln(c.hi / c.value).hypot(ln(b.value / b.lo));
    let r = Interval {
        value: centre.exp(),
        lo: (centre - below).exp(),
        hi: (centre + above).exp(),
    };
    (r.value.is_finite() && r.lo.is_finite() && r.hi.is_finite()).then_some(r)
}

/// The two views of one side (a run, or a point of an experiment): each its intervals per
/// percentile (µs, the shape of a run's `measured_ci`), or why it cannot be compared.
#[derive(Clone, Debug)]
pub struct Sides {
    pub user: Result<Intervals, String>,
    pub server: Result<Intervals, String>,
    /// Why this side's intervals cannot bound another run (a single run on a noisy host or
    /// with a tail that moved, in its own words): its verdicts are then `undecided`, for the
    /// difference between two such runs can exceed both intervals without any regression.
    pub unbounded: Option<String>,
    /// The percentiles a view does not stand behind (view, percentile, why): their rows are
    /// undecided, never worse or better on the client's stalls.
    pub unstood: Vec<(String, String, String)>,
}

impl Sides {
    /// The views of a stored run's summary (`lab::Run::to_json`).
    pub fn of_run(summary: &Value) -> Sides {
        Sides::of_summary(&RunSummary::of(summary))
    }

    /// The views of a stored run's summary, read by field.
    pub fn of_summary(s: &RunSummary) -> Sides {
        let views = s.views.clone().unwrap_or_default();
        let view = |name: &str, ci: Option<&Intervals>| -> Result<Intervals, String> {
            match s.status {
                None => return Err("the run has no run status".into()),
                Some(RunStatus::Failed) => return Err("the run's status is 'failed'".into()),
                Some(_) => {}
            }
            match views.of(name) {
                None => Err(format!("no {name} view")),
                Some(v) if v.valid != Some(true) => {
                    let why = v.why.as_deref().unwrap_or("not valid");
                    Err(format!("{name} view invalid: {why}"))
                }
                Some(_) => match ci {
                    Some(c) => Ok(c.clone()),
                    _ => Err(format!("no {name} intervals stored")),
                },
            }
        };
        Sides {
            user: view("user", s.measured_ci.as_ref()),
            server: view(
                "server",
                s.server_view().and_then(|v| v.measured_ci.as_ref()),
            ),
            unbounded: unbounded_of(s),
            unstood: ["user", "server"]
                .iter()
                .flat_map(|v| {
                    let views = &views;
                    CHECK_PERCENTILES.iter().filter_map(move |p| {
                        Some((v.to_string(), p.to_string(), views.unstood(v, p)?))
                    })
                })
                .collect(),
        }
    }

    /// The views of an experiment's point (a `lab::Repeated` as stored, read by field): its
    /// repeats combined when there are two or more, else the one run's own (`run_summary`).
    pub fn of_point(r: &RepeatedFacts, run_summary: Option<&Value>) -> Sides {
        if r.repeats.unwrap_or(0) >= 2 {
            let of = |name: &str| match r.combined(name) {
                Some(s) => intervals_of_summary(s)
                    .ok_or_else(|| format!("{name} view: no intervals stored")),
                None => Err(format!("{name} view: fewer than two valid repeats")),
            };
            return Sides {
                user: of("user"),
                server: of("server"),
                unbounded: None,
                unstood: Vec::new(),
            };
        }
        match run_summary {
            Some(s) => Sides::of_run(s),
            None => {
                let why = "the point's run is not stored".to_string();
                Sides {
                    user: Err(why.clone()),
                    server: Err(why),
                    unbounded: None,
                    unstood: Vec::new(),
                }
            }
        }
    }
}

/// Intervals in µs from a stored `stats::Summary` (ns).
fn intervals_of_summary(s: &stats::Summary) -> Option<Intervals> {
    let out: Vec<(String, Ci)> = s
        .quantiles
        .iter()
        .map(|q| {
            let c = Ci {
                value: q.est.value / 1e3,
                lo: q.est.lo / 1e3,
                hi: q.est.hi / 1e3,
            };
            (q.key.clone(), c)
        })
        .collect();
    (!out.is_empty()).then_some(Intervals(out))
}

/// One row of a check.
#[derive(Clone, Debug, Serialize)]
pub struct CheckRow {
    /// The load point (experiments only): its params, offered load and % of capacity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub point: Option<PointKey>,
    /// "user" or "server".
    pub view: String,
    pub percentile: String,
    pub baseline_us: Option<Interval>,
    pub candidate_us: Option<Interval>,
    /// Candidate ÷ baseline, its interval from the two intervals ([`ratio_of`]).
    pub ratio: Option<Interval>,
    pub verdict: CheckVerdict,
    /// Why a row is undecided without a ratio (a view invalid, a percentile missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// Where a point of an experiment lies: matched between candidate and baseline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointKey {
    pub params: BTreeMap<String, String>,
    pub offered_rps: f64,
    pub load_pct: Option<f64>,
}

impl PointKey {
    /// The same point: the same params and the same load (by % of capacity when both have
    /// one, else by offered rate, within 0.5 %).
    pub fn matches(&self, o: &PointKey) -> bool {
        let close = |a: f64, b: f64| (a - b).abs() <= 0.005 * a.abs().max(b.abs()).max(1e-9);
        self.params == o.params
            && match (self.load_pct, o.load_pct) {
                (Some(a), Some(b)) => close(a, b),
                _ => close(self.offered_rps, o.offered_rps),
            }
    }

    /// "conns=4 · 4000 req/s (60 %)".
    pub fn label(&self) -> String {
        let mut s: String = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v} · "))
            .collect();
        s.push_str(&format!("{:.0} req/s", self.offered_rps));
        if let Some(p) = self.load_pct {
            s.push_str(&format!(" ({p:.0} %)"));
        }
        s
    }
}

fn interval(ci: &Intervals, key: &str) -> Option<Interval> {
    let c = ci.of(key)?;
    let finite = c.value.is_finite() && c.lo.is_finite() && c.hi.is_finite();
    finite.then_some(Interval {
        value: c.value,
        lo: c.lo,
        hi: c.hi,
    })
}

/// The rows of one pair of sides: per view, per percentile.
pub fn compare_sides(
    point: Option<&PointKey>,
    candidate: &Sides,
    baseline: &Sides,
    tol: f64,
) -> Vec<CheckRow> {
    let mut rows = Vec::new();
    for (view, c, b) in [
        ("user", &candidate.user, &baseline.user),
        ("server", &candidate.server, &baseline.server),
    ] {
        for p in CHECK_PERCENTILES {
            let (cv, bv) = (
                c.as_ref().ok().and_then(|ci| interval(ci, p)),
                b.as_ref().ok().and_then(|ci| interval(ci, p)),
            );
            let why = match (c, b) {
                (Err(e), _) => Some(format!("candidate: {e}")),
                (_, Err(e)) => Some(format!("baseline: {e}")),
                _ => None,
            };
            // A percentile neither side stored (p99.99 of a short run) is not a row.
            if why.is_none() && cv.is_none() && bv.is_none() {
                continue;
            }
            let ratio = match (cv, bv, &why) {
                (Some(cv), Some(bv), None) => ratio_of(cv, bv),
                _ => None,
            };
            let why = why.or_else(|| match (cv, bv, ratio) {
                (None, _, _) => Some(format!("candidate has no {p} interval")),
                (_, None, _) => Some(format!("baseline has no {p} interval")),
                (_, _, None) => Some("the baseline's interval reaches zero".into()),
                _ => None,
            });
            let mut verdict = match ratio {
                Some(r) => verdict_of(r.lo, r.hi, tol),
                None => CheckVerdict::Undecided,
            };
            let mut why = why;
            let unbounded = [("candidate", candidate), ("baseline", baseline)]
                .into_iter()
                .find_map(|(who, s)| s.unbounded.as_ref().map(|u| (who, u)));
            if let (
                Some((who, u)),
                CheckVerdict::Better | CheckVerdict::Worse | CheckVerdict::Same,
            ) = (unbounded, verdict)
            {
                why = Some(format!(
                    "would read {verdict}, but the {who}'s intervals do not bound another run ({u}); \
                     repeat the runs (--repeat 3) and check the experiments"
                ));
                verdict = CheckVerdict::Undecided;
            }
            let unstood = [("candidate", candidate), ("baseline", baseline)]
                .into_iter()
                .find_map(|(who, s)| {
                    s.unstood
                        .iter()
                        .find(|(v, k, _)| v == view && k == p)
                        .map(|(_, _, why)| (who, why))
                });
            if let (
                Some((who, u)),
                CheckVerdict::Better | CheckVerdict::Worse | CheckVerdict::Same,
            ) = (unstood, verdict)
            {
                why = Some(format!(
                    "would read {verdict}, but the {who}'s {p} is not the server's ({u})"
                ));
                verdict = CheckVerdict::Undecided;
            }
            rows.push(CheckRow {
                point: point.cloned(),
                view: view.into(),
                percentile: p.into(),
                baseline_us: bv,
                candidate_us: cv,
                ratio,
                verdict,
                why,
            });
        }
    }
    rows
}

/// A check's result.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// "run" or "experiment".
    pub kind: String,
    pub candidate: i64,
    pub baseline: i64,
    /// As a fraction (0.1 for 10 %).
    pub tolerance: f64,
    /// What differs between the two (host facts, configuration): empty unless forced.
    pub differences: Vec<String>,
    /// What differs without refusing the baseline: a target's address ([`config_notes`]).
    pub notes: Vec<String>,
    pub rows: Vec<CheckRow>,
    /// Rows per verdict.
    pub counts: BTreeMap<String, usize>,
    /// True when any row is `worse`.
    pub regression: bool,
    /// What a side says of its own intervals when they cannot bound another run (a noisy
    /// host, a tail not steady): single runs compared on such a host can differ by more than
    /// their intervals; repeat them (`run --repeat`, `sweep --repeat`) and check the
    /// experiments.
    pub caveats: Vec<String>,
}

impl Check {
    fn new(
        kind: &str,
        candidate: i64,
        baseline: i64,
        tol: f64,
        differences: Vec<String>,
        rows: Vec<CheckRow>,
    ) -> Check {
        let mut counts = BTreeMap::new();
        for v in ["better", "worse", "same", "undecided"] {
            counts.insert(v.to_string(), 0);
        }
        for r in &rows {
            *counts.entry(r.verdict.to_string()).or_insert(0) += 1;
        }
        Check {
            kind: kind.into(),
            candidate,
            baseline,
            tolerance: tol,
            differences,
            notes: Vec::new(),
            regression: rows.iter().any(|r| r.verdict == CheckVerdict::Worse),
            rows,
            counts,
            caveats: Vec::new(),
        }
    }
}

/// The reasons a single run gives for its intervals not bounding a repeat, except the user
/// view's own (its stalls make that view invalid, and invalid views are not compared).
fn unbounded_of(summary: &RunSummary) -> Option<String> {
    let flags: Vec<&str> = summary
        .reproducibility
        .iter()
        .flat_map(|r| &r.flags)
        .map(String::as_str)
        .filter(|f| !f.starts_with("user view"))
        .collect();
    (!flags.is_empty()).then(|| flags.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn iv(value: f64, lo: f64, hi: f64) -> Interval {
        Interval { value, lo, hi }
    }

    #[test]
    fn the_verdict_reads_the_whole_ratio_interval_against_the_tolerance() {
        let tol = 0.1;
        // 80 vs 50 µs, tight intervals: worse.
        let r = ratio_of(iv(80.0, 78.0, 82.0), iv(50.0, 49.0, 51.0)).unwrap();
        // Within the outright bounds, beyond either side's own width.
        assert!(r.lo > 78.0 / 51.0 && r.hi < 82.0 / 49.0, "{r:?}");
        assert!(r.lo < 78.0 / 50.0 && r.hi > 82.0 / 50.0, "{r:?}");
        let h = (82.0f64 / 80.0).ln().hypot((50.0f64 / 49.0).ln());
        assert!((r.hi - 1.6 * h.exp()).abs() < 1e-12, "{r:?}");
        assert_eq!(verdict_of(r.lo, r.hi, tol), CheckVerdict::Worse);
        // The reverse: better.
        let r = ratio_of(iv(50.0, 49.0, 51.0), iv(80.0, 78.0, 82.0)).unwrap();
        assert_eq!(verdict_of(r.lo, r.hi, tol), CheckVerdict::Better);
        // Same within 10 %.
        let r = ratio_of(iv(50.0, 49.0, 51.0), iv(50.5, 49.5, 51.5)).unwrap();
        assert_eq!(verdict_of(r.lo, r.hi, tol), CheckVerdict::Same);
        // A wide interval straddling 1 + tol: undecided.
        let r = ratio_of(iv(52.0, 40.0, 70.0), iv(50.0, 49.0, 51.0)).unwrap();
        assert_eq!(verdict_of(r.lo, r.hi, tol), CheckVerdict::Undecided);
        // Edges: lo exactly 1 + tol is not worse.
        assert_eq!(verdict_of(1.1, 1.2, 0.1), CheckVerdict::Undecided);
        assert_eq!(verdict_of(1.0 / 1.1, 1.1, 0.1), CheckVerdict::Same);
        // A baseline interval reaching zero has no ratio.
        assert_eq!(ratio_of(iv(1.0, 1.0, 1.0), iv(1.0, 0.0, 2.0)), None);
    }

    /// Against exact truth: two sides of n repeats each, every repeat's estimate lognormal
    /// around the same true value (the true ratio is 1), each side's interval made as a
    /// repeated point's is (`repeat::spread_interval`); the ratio's interval must contain 1 in
    /// at least 95 % of trials — and not in (nearly) all of them, which is what the outright
    /// sum of the two widths gave.
    #[test]
    fn quadrature_ratio_covers_the_truth() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(23);
        let noise = Normal::new(0.0f64, 0.3).unwrap();
        for n in [3usize, 5] {
            let trials = 4000;
            let (mut covered, mut covered_sum) = (0, 0);
            for _ in 0..trials {
                let mut side = || {
                    let v: Vec<f64> = (0..n)
                        .map(|_| 100.0 * noise.sample(&mut rng).exp())
                        .collect();
                    // Each repeat's own interval: ±2 %, narrower than the spread.
                    let own: Vec<(f64, f64)> = v.iter().map(|x| (x * 0.98, x * 1.02)).collect();
                    let e = crate::repeat::spread_interval(&v, &own, 0.95).unwrap();
                    iv(e.value, e.lo, e.hi)
                };
                let (c, b) = (side(), side());
                let r = ratio_of(c, b).unwrap();
                covered += usize::from(r.lo <= 1.0 && 1.0 <= r.hi);
                covered_sum += usize::from(c.lo / b.hi <= 1.0 && 1.0 <= c.hi / b.lo);
            }
            let rate = covered as f64 / trials as f64;
            let rate_sum = covered_sum as f64 / trials as f64;
            assert!(rate >= 0.95, "n = {n}: quadrature covers {rate}");
            assert!(
                rate < rate_sum,
                "n = {n}: {rate} vs the outright sum's {rate_sum}"
            );
            eprintln!("n = {n}: quadrature covers {rate:.4}, the outright sum {rate_sum:.4}");
        }
    }

    pub(super) fn summary(p50: f64, user_valid: bool) -> Value {
        json!({
            "status": "ok",
            "views": {"user": {"valid": user_valid, "why": "generator late"},
                      "server": {"valid": true, "why": ""}},
            "measured_ci": {"p50": {"value": p50, "lo": p50 * 0.98, "hi": p50 * 1.02}},
            "server_view": {"measured_ci": {"p50": {"value": p50, "lo": p50 * 0.98, "hi": p50 * 1.02}}},
        })
    }

    #[test]
    fn an_invalid_view_is_undecided_with_why_and_the_valid_one_is_compared() {
        let rows = compare_sides(
            None,
            &Sides::of_run(&summary(80.0, false)),
            &Sides::of_run(&summary(50.0, true)),
            0.1,
        );
        let user: Vec<_> = rows.iter().filter(|r| r.view == "user").collect();
        let server: Vec<_> = rows.iter().filter(|r| r.view == "server").collect();
        assert!(!user.is_empty() && !server.is_empty());
        for r in user {
            assert_eq!(r.verdict, CheckVerdict::Undecided);
            let why = r.why.as_deref().unwrap_or("");
            assert!(why.contains("generator late"), "{why}");
        }
        assert_eq!(server.len(), 1, "only p50 is stored");
        assert_eq!(server[0].verdict, CheckVerdict::Worse);
        // A failed candidate has no view to compare.
        let failed = Sides::of_run(&json!({"status": "failed"}));
        assert!(failed.user.is_err() && failed.server.is_err());
    }

    #[test]
    fn a_percentile_a_view_does_not_stand_behind_is_undecided_in_that_view_only() {
        let mut stalled = summary(80.0, true);
        stalled["views"]["percentiles"] = json!([{"key": "p50", "q": 0.5,
            "user": {"valid": false, "why": "lateness p50 40 µs, 50 % of it (> 10 %)"},
            "server": {"valid": true, "why": "bursts add little"}}]);
        let rows = compare_sides(
            None,
            &Sides::of_run(&stalled),
            &Sides::of_run(&summary(50.0, true)),
            0.1,
        );
        let of = |v: &str| rows.iter().find(|r| r.view == v).unwrap();
        assert_eq!(of("user").verdict, CheckVerdict::Undecided);
        let why = of("user").why.as_deref().unwrap_or("");
        assert!(
            why.contains("would read worse") && why.contains("candidate's p50 is not the server's"),
            "{why}"
        );
        assert_eq!(of("server").verdict, CheckVerdict::Worse);
    }

    #[test]
    fn a_run_whose_intervals_do_not_bound_a_repeat_leaves_its_rows_undecided() {
        let mut noisy = summary(50.0, true);
        noisy["reproducibility"] = json!({"single_run_bounds_repeats": false,
            "flags": ["host noisy: 60 % of time lost", "user view counts the generator's stalls"]});
        let c = Sides::of_run(&summary(80.0, true));
        let rows = compare_sides(None, &c, &Sides::of_run(&noisy), 0.1);
        assert_eq!(rows.len(), 2);
        for r in &rows {
            assert_eq!(r.verdict, CheckVerdict::Undecided);
            let why = r.why.as_deref().unwrap_or("");
            assert!(
                why.contains("would read worse") && why.contains("host noisy"),
                "{why}"
            );
            assert!(!why.contains("user view counts"), "{why}");
        }
        // The user view's own flag alone does not: that view is judged by its validity.
        let mut stalled = summary(50.0, true);
        stalled["reproducibility"] = json!({"single_run_bounds_repeats": false,
            "flags": ["user view counts the generator's stalls"]});
        let rows = compare_sides(None, &c, &Sides::of_run(&stalled), 0.1);
        assert!(rows.iter().all(|r| r.verdict == CheckVerdict::Worse));
    }
}
