//! Repeats of one point. On a host that drifts between runs no interval from one run can bound
//! the next one; only repeats spread over time can. The result of a repeated point is the
//! median of its repeats' estimates, per view and percentile, with an interval from their
//! spread:
//!
//! - latencies vary multiplicatively (a stall doubles a p99, it does not add a constant), so
//!   the spread is taken on the logarithms of the estimates;
//! - the interval is the Student-t interval of the centre, t(n−1) · s · √(π/2) / √n around the
//!   median of the logs, where s is the sample standard deviation of the logs and √(π/2) the
//!   median's asymptotic inefficiency against the mean (for normal data, conservative for
//!   n = 3, where the exact factor is 1.16 rather than 1.25);
//! - it is widened, if needed, to hold the median repeat's own interval (repeats that happen
//!   to agree closely say nothing below their own resolution);
//! - a view's percentiles are then made monotone in q: a p99's interval never starts below
//!   the p90's lower end, a p90's never ends above the p99's upper end (the true p99 is at
//!   least the true p90).
//!
//! Which repeats count for a view: those whose view is valid (for the user view, a run whose
//! generator kept its schedule; for the server view, any run that measured it and kept the
//! offered rate); a view needs two valid repeats for a combined result (one has no spread).
//! A failed or saturated repeat makes the point failed or saturated.

use serde::{Deserialize, Serialize};
use stats::{Estimate, QuantileEstimate, Summary, STANDARD_QUANTILES};

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

use crate::slo::{
    forced_by, judge_latency, latency_bound, Condition, ConditionResult, Slo, SloReport, Verdict,
    View, ViewChoice,
};
use measurement::measure::{measure, RunPlan};
use measurement::run_config::stored;
use measurement::Db;
use measurement::LabError;
use measurement::Observer;
use measurement::Ready;
use measurement::{Run, RunStatus};

/// How a repeated point's interval is made, as the output names it.
pub const REPEAT_METHOD: &str =
    "median of the repeats; interval t(n-1) x sd of log estimates x sqrt(pi/2)/sqrt(n)";

/// A repeated point: the median of its repeats per view, with intervals from their spread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Repeated {
    pub repeats: u32,
    pub method: String,
    /// The repeats' stored runs, in order.
    pub run_ids: Vec<Option<i64>>,
    pub statuses: Vec<RunStatus>,
    /// The point's status: the worst that a repeat says of the target (failed, saturated),
    /// else `ok` when at least one view has valid repeats, else that of the repeats.
    pub status: RunStatus,
    /// User view (intended → received): repeats counted, and the combined distribution.
    pub user: Option<Combined>,
    /// Server view (sent → kernel receive).
    pub server: Option<Combined>,
    /// The view the point's figures are read from: the user's when some repeat measured it
    /// validly, else the server's.
    pub headline: View,
    /// The user view's excess over the ideal, combined the same way.
    pub excess: Option<Combined>,
}

/// One view of a repeated point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Combined {
    /// Repeats whose view was valid and so counted.
    pub counted: u32,
    /// Median and interval per percentile (in the unit of the repeats' summaries: ns for
    /// latencies, a ratio for the excess).
    pub summary: Summary,
    /// The repeats' own estimates per percentile key, in run order.
    pub estimates: Vec<(String, Vec<f64>)>,
}

impl Combined {
    /// `{"p50": {"value", "lo", "hi"}, …}` in µs (latencies) — the shape of a run's
    /// `measured_ci`.
    pub fn intervals_json(&self) -> serde_json::Value {
        self.summary.intervals_json()
    }
}

/// The median of `xs` (non-empty).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        0.5 * (xs[n / 2 - 1] + xs[n / 2])
    }
}

/// The centre and interval of positive estimates from their spread (see the module doc), at
/// `confidence`; `own` is each repeat's own interval (lo, hi), the median repeat's widens it.
pub fn spread_interval(values: &[f64], own: &[(f64, f64)], confidence: f64) -> Option<Estimate> {
    let logs: Vec<f64> = values
        .iter()
        .filter(|v| v.is_finite() && **v > 0.0)
        .map(|v| v.ln())
        .collect();
    if logs.is_empty() || logs.len() != values.len() {
        return None;
    }
    let n = logs.len();
    let centre = median(&mut logs.clone());
    let (lo, hi) = if n >= 2 {
        let mean = logs.iter().sum::<f64>() / n as f64;
        let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let t = stats::student_t_quantile(0.5 + confidence / 2.0, (n - 1) as u64);
        let h = t * var.sqrt() * (std::f64::consts::PI / 2.0).sqrt() / (n as f64).sqrt();
        ((centre - h).exp(), (centre + h).exp())
    } else {
        (f64::NAN, f64::NAN)
    };
    // The median itself, not exp(ln(·)) of it (for an even count, the geometric mean of
    // the two middle ones: the median of the logs).
    let value = {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] * v[n / 2]).sqrt()
        }
    };
    // The repeat whose estimate is the median (the nearer one of the two middle ones).
    let mid = values
        .iter()
        .enumerate()
        .min_by(|a, b| (a.1 - value).abs().total_cmp(&(b.1 - value).abs()))
        .map(|(i, _)| i)?;
    let (olo, ohi) = own.get(mid).copied().unwrap_or((value, value));
    let lo = if lo.is_nan() { olo } else { lo.min(olo) };
    let hi = if hi.is_nan() { ohi } else { hi.max(ohi) };
    Some(Estimate {
        value,
        lo: lo.min(value),
        hi: hi.max(value),
    })
}

/// Combines the summaries of the counted repeats of one view. Each percentile's interval is
/// its own; for the percentiles of one latency distribution [`repeated`] then makes them
/// monotone in q ([`Summary::monotone_intervals`]), which the excess (a ratio per
/// percentile) is not.
pub fn combine(summaries: &[&Summary], confidence: f64) -> Option<Combined> {
    let first = summaries.first()?;
    let mut quantiles = Vec::new();
    let mut estimates = Vec::new();
    for (key, q) in STANDARD_QUANTILES {
        let mut vals = Vec::new();
        let mut own = Vec::new();
        for s in summaries {
            let e = s.get(key)?;
            vals.push(e.value);
            own.push((e.lo, e.hi));
        }
        let est = spread_interval(&vals, &own, confidence)?;
        quantiles.push(QuantileEstimate {
            key: key.to_string(),
            q,
            est,
            blocks: summaries.len() as u32,
        });
        estimates.push((key.to_string(), vals));
    }
    let mut means: Vec<f64> = summaries.iter().map(|s| s.mean_ns).collect();
    Some(Combined {
        counted: summaries.len() as u32,
        summary: Summary {
            count: summaries.iter().map(|s| s.count).sum(),
            mean_ns: median(&mut means),
            stdev_ns: f64::NAN,
            min_ns: summaries
                .iter()
                .map(|s| s.min_ns)
                .fold(f64::INFINITY, f64::min),
            max_ns: summaries.iter().map(|s| s.max_ns).fold(0.0, f64::max),
            exact: first.exact && summaries.iter().all(|s| s.exact),
            confidence,
            quantiles,
            ci_method: REPEAT_METHOD.into(),
        },
        estimates,
    })
}

/// Whether a repeat measured the target's latency at all (not failed, saturated or
/// interrupted: their percentiles are not the point's).
fn measured(r: &Run) -> bool {
    matches!(r.status, RunStatus::Ok | RunStatus::Invalid)
}

/// Whether a run's user view is valid: it measured, and its generator kept the schedule.
fn user_valid(r: &Run) -> bool {
    measured(r) && r.views.user.valid
}

/// Whether a run's server view is valid: it measured it and the offered load was sent (the
/// generator's lateness does not matter to it).
fn server_valid(r: &Run) -> bool {
    measured(r)
        && r.analysis.server_view.is_some()
        && r.views.server.as_ref().is_some_and(|v| v.valid)
}

/// The point made of `runs` (the repeats of one configuration and load, in run order).
pub fn repeated(runs: &[&Run], confidence: f64) -> Repeated {
    let statuses: Vec<RunStatus> = runs.iter().map(|r| r.status).collect();
    let users: Vec<&Summary> = runs
        .iter()
        .filter(|r| user_valid(r))
        .map(|r| &r.analysis.measured)
        .collect();
    let servers: Vec<&Summary> = runs
        .iter()
        .filter(|r| server_valid(r))
        .filter_map(|r| r.analysis.server_view.as_ref().map(|s| &s.measured))
        .collect();
    // A repeated point's interval comes from the spread of its valid repeats: one valid
    // repeat of several has no spread, and its own interval is the one that does not bound
    // the next run, so that view has no combined result. A point run once is that run.
    let need = if runs.len() >= 2 { 2 } else { 1 };
    let latency = |of: &[&Summary]| {
        let mut c = (of.len() >= need)
            .then(|| combine(of, confidence))
            .flatten()?;
        c.summary.monotone_intervals();
        Some(c)
    };
    let user = latency(&users);
    let server = latency(&servers);
    let excess = excess_combined(runs, confidence);
    let status = if statuses.contains(&RunStatus::Failed) {
        RunStatus::Failed
    } else if statuses.contains(&RunStatus::Saturated) {
        RunStatus::Saturated
    } else if statuses.contains(&RunStatus::Interrupted) && user.is_none() && server.is_none() {
        RunStatus::Interrupted
    } else if user.is_some() || server.is_some() {
        RunStatus::Ok
    } else {
        statuses.first().copied().unwrap_or(RunStatus::Failed)
    };
    Repeated {
        repeats: runs.len() as u32,
        method: REPEAT_METHOD.into(),
        run_ids: runs.iter().map(|r| r.run_id).collect(),
        statuses,
        status,
        headline: if user.is_none() && server.is_some() {
            View::Server
        } else {
            View::User
        },
        user,
        server,
        excess,
    }
}

/// `run --repeat N`: the same run `n` times in a row against one started target (distinct
/// derived seeds), stored as one experiment of kind "repeat" whose summary is the combined
/// point. Stops early on Ctrl-C or when a repeat measured nothing (the target failed).
pub fn measure_repeated(
    plan: &RunPlan,
    n: u32,
    ready: &Ready,
    db: &Db,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<(Vec<Run>, Repeated, i64), LabError> {
    let experiment = db.store.begin_experiment(&store::NewExperiment {
        kind: "repeat".into(),
        started_at: store::now_rfc3339(),
        config: stored(&RepeatConfig {
            repeat: n,
            run: plan.config.clone(),
            label: plan.config.label.clone(),
        }),
    })?;
    let mut runs = Vec::new();
    let mut failure = None;
    for rep in 0..n {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        obs.note(&format!("repeat {} of {n}", rep + 1));
        let mut p = plan.clone();
        p.load.seed = load::derive_seed(plan.load.seed, u64::from(rep));
        p.experiment = Some(experiment);
        p.config.seed = Some(p.load.seed);
        p.config.repeat = Some(u64::from(rep));
        match measure(&p, ready, db, stop, obs) {
            Ok(run) => {
                obs.run_done(&run);
                runs.push(run);
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let refs: Vec<&Run> = runs.iter().collect();
    let combined = repeated(&refs, plan.confidence);
    let status = match (&failure, stop.load(Ordering::Relaxed)) {
        (Some(_), _) => RunStatus::Failed,
        (None, true) => RunStatus::Interrupted,
        (None, false) => combined.status,
    };
    let mut summary = serde_json::to_value(&combined).unwrap_or(serde_json::Value::Null);
    if let Some(e) = &failure {
        summary["error"] = json!(e.to_string());
    }
    db.store
        .finish_experiment(experiment, status.as_str(), &summary)?;
    match failure {
        Some(e) => Err(e),
        None => Ok((runs, combined, experiment)),
    }
}

impl Slo {
    /// The judgement of a repeated point (`runs` are its repeats), per condition:
    /// - failed and saturated points violate, an interrupted one is undecided;
    /// - a latency condition reads its view's combination (the median of the valid repeats,
    ///   with the interval from their spread), undecided when fewer than two repeats measured
    ///   that view validly;
    /// - the error and rate conditions are not combined into one interval: each repeat is
    ///   judged, and the point meets when every repeat does, violates when more than half
    ///   do, else is undecided; the figure is the repeats' median, the interval the range of
    ///   their intervals.
    pub fn evaluate_repeated(&self, p: &Repeated, runs: &[&Run]) -> SloReport {
        let forced = forced_by(p.status);
        let default = match self.view {
            ViewChoice::User => View::User,
            ViewChoice::Server => View::Server,
            ViewChoice::Auto => p.headline,
        };
        let each: Vec<SloReport> = runs.iter().map(|r| self.evaluate(r)).collect();
        let conditions: Vec<ConditionResult> = self
            .conditions
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut r = if c.is_latency() {
                    let view = c.view.unwrap_or(default);
                    let comb = match view {
                        View::User => p.user.as_ref(),
                        View::Server => p.server.as_ref(),
                    };
                    let judged = match comb {
                        Some(comb) => judge_latency(&c.what, &comb.summary),
                        None => (Verdict::Undecided, None, latency_bound(&c.what)),
                    };
                    let note = Some(match comb {
                        Some(comb) => {
                            format!("median of {} valid of {} repeats", comb.counted, p.repeats)
                        }
                        None => format!(
                            "fewer than 2 of {} repeats measured the {view} view validly",
                            p.repeats
                        ),
                    });
                    ConditionResult::latency(c, view, judged, note)
                } else {
                    by_repeats(&each, i, c)
                };
                r.force(forced, || format!("the point is {}", p.status));
                r
            })
            .collect();
        self.report(conditions)
    }

    /// The verdict of a repeated point ([`Slo::evaluate_repeated`]).
    pub fn verdict_repeated(&self, p: &Repeated, runs: &[&Run]) -> Verdict {
        self.evaluate_repeated(p, runs).verdict
    }
}

/// Condition `i` (errors or rate) of a repeated point from its repeats' own judgements.
fn by_repeats(each: &[SloReport], i: usize, c: &Condition) -> ConditionResult {
    let own: Vec<&ConditionResult> = each.iter().filter_map(|r| r.conditions.get(i)).collect();
    let n = own.len();
    let meets = own.iter().filter(|r| r.verdict == Verdict::Meets).count();
    let violates = own
        .iter()
        .filter(|r| r.verdict == Verdict::Violates)
        .count();
    let verdict = if n > 0 && meets == n {
        Verdict::Meets
    } else if 2 * violates > n {
        Verdict::Violates
    } else {
        Verdict::Undecided
    };
    let mut values: Vec<f64> = own.iter().filter_map(|r| r.measured).collect();
    values.sort_by(f64::total_cmp);
    let lo = own.iter().filter_map(|r| r.lo).min_by(f64::total_cmp);
    let hi = own.iter().filter_map(|r| r.hi).max_by(f64::total_cmp);
    let first = own.first();
    ConditionResult {
        condition: c.text.clone(),
        view: first.map_or_else(|| "requests".into(), |r| r.view.clone()),
        measured: values.get(values.len() / 2).copied(),
        lo,
        hi,
        bound: first.map_or(f64::NAN, |r| r.bound),
        unit: first.map_or("%", |r| r.unit),
        verdict,
        note: Some(format!(
            "judged per repeat: {meets} of {n} meet, {violates} violate"
        )),
    }
}

/// The user view's excess (measured ÷ ideal) of the valid repeats, combined as a ratio.
fn excess_combined(runs: &[&Run], confidence: f64) -> Option<Combined> {
    let as_summary = |r: &Run| -> Option<Summary> {
        let quantiles = STANDARD_QUANTILES
            .iter()
            .map(|(key, q)| {
                let e = r.analysis.excess.iter().find(|e| e.key == *key)?;
                Some(QuantileEstimate {
                    key: key.to_string(),
                    q: *q,
                    est: Estimate {
                        value: e.value,
                        lo: e.lo,
                        hi: e.hi,
                    },
                    blocks: 0,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Summary {
            count: r.analysis.measured.count,
            mean_ns: f64::NAN,
            stdev_ns: f64::NAN,
            min_ns: f64::NAN,
            max_ns: f64::NAN,
            exact: r.analysis.measured.exact,
            confidence,
            quantiles,
            ci_method: String::new(),
        })
    };
    let owned: Vec<Summary> = runs
        .iter()
        .filter(|r| user_valid(r))
        .filter_map(|r| as_summary(r))
        .collect();
    if owned.len() < 2 && runs.len() >= 2 {
        return None;
    }
    let refs: Vec<&Summary> = owned.iter().collect();
    let mut c = combine(&refs, confidence)?;
    c.summary.mean_ns = f64::NAN;
    c.summary.min_ns = f64::NAN;
    c.summary.max_ns = f64::NAN;
    Some(c)
}

/// `run --repeat`: one configuration measured n times.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RepeatConfig {
    pub repeat: u32,
    pub run: measurement::RunConfig,
    pub label: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_centre_is_the_median_and_the_interval_widens_with_the_spread() {
        let tight = spread_interval(&[100.0, 101.0, 99.0], &[(98.0, 102.0); 3], 0.95).unwrap();
        assert_eq!(tight.value, 100.0);
        // The median repeat's own interval is the floor.
        assert!(tight.lo <= 98.0 && tight.hi >= 102.0);
        let wide = spread_interval(&[100.0, 1000.0, 300.0], &[(290.0, 310.0); 3], 0.95).unwrap();
        assert_eq!(wide.value, 300.0);
        assert!(wide.lo < 100.0 && wide.hi > 1000.0, "{wide:?}");
        // A single repeat: its own interval.
        let one = spread_interval(&[5.0], &[(4.0, 7.0)], 0.95).unwrap();
        assert_eq!((one.value, one.lo, one.hi), (5.0, 4.0, 7.0));
        assert!(spread_interval(&[5.0, 0.0], &[(4.0, 7.0); 2], 0.95).is_none());
    }

    /// Coverage against a known truth: repeats whose estimates scatter log-normally around it
    /// (a host that drifts between runs), three per point.
    #[test]
    fn three_repeats_cover_the_truth_at_least_as_often_as_promised() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let noise = Normal::new(0.0, 0.8).unwrap();
        let truth: f64 = 1000.0;
        let trials = 4000;
        let mut covered = 0;
        for _ in 0..trials {
            let vals: Vec<f64> = (0..3)
                .map(|_| (truth.ln() + noise.sample(&mut rng)).exp())
                .collect();
            let own: Vec<(f64, f64)> = vals.iter().map(|v| (v * 0.95, v * 1.05)).collect();
            let e = spread_interval(&vals, &own, 0.95).unwrap();
            covered += usize::from(e.lo <= truth && truth <= e.hi);
        }
        let c = covered as f64 / trials as f64;
        // Conservative by construction (√(π/2) > the exact 1.16 for n = 3), not absurdly so.
        assert!((0.95..0.995).contains(&c), "coverage {c}");
    }
}
