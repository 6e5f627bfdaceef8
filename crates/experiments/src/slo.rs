//! Service-level objectives and their verdicts. A verdict reads the confidence interval, not
//! the point estimate: `meets` when the interval's upper end is within the target, `violates`
//! when its lower end is beyond it, `undecided` otherwise. A verdict read from a view that
//! is not valid for the run (the user's view of a run whose generator fell behind, the
//! server's view of one whose offered load was not sent) is `undecided`, never `meets`; a
//! saturated or failed run violates.

use serde::{Deserialize, Serialize};
use stats::Summary;

use measurement::error::{invalid, LabError};
use measurement::percentile::KEYS;
pub use measurement::percentile::{parse_percentile, parse_percentiles};
pub use measurement::view::{View, ViewChoice};
use measurement::{Run, RunStatus};

/// One percentile bound: a percentile key (`p99`) at most `max_us`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bound {
    pub key: String,
    pub max_us: f64,
}

/// What one condition of an SLO bounds.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum What {
    /// A percentile (any, e.g. `p95`, `p99.5`) at most `max_ns`.
    Quantile { key: String, q: f64, max_ns: f64 },
    /// The mean latency at most `max_ns`.
    Mean { max_ns: f64 },
    /// The share of requests that ended in an error, a timeout or were dropped, at most
    /// `max_fraction` (0..1).
    Errors { max_fraction: f64 },
    /// The completed rate at least `min_rps`, or at least `min_of_offered` × the offered rate.
    Rate {
        min_rps: Option<f64>,
        min_of_offered: Option<f64>,
    },
}

/// One condition of an SLO (`server:p99<=1ms`): what it bounds, and the view it reads when
/// it names one (else the SLO's view).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Condition {
    pub text: String,
    pub view: Option<View>,
    pub what: What,
}

impl Condition {
    /// Whether it bounds a latency (a percentile or the mean), read from a view.
    pub fn is_latency(&self) -> bool {
        matches!(self.what, What::Quantile { .. } | What::Mean { .. })
    }
}

/// An SLO: every condition must hold, read from `view` (`auto`: each run's headline view)
/// unless a condition names its own.
///
/// Serde reads it back from its text and view (the conditions are parsed again).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SloText")]
pub struct Slo {
    pub text: String,
    /// The percentile conditions (what [`Slo::judge`] reads).
    pub bounds: Vec<Bound>,
    pub view: ViewChoice,
    pub conditions: Vec<Condition>,
}

/// What a stored [`Slo`] is read back from.
#[derive(Deserialize)]
struct SloText {
    text: String,
    #[serde(default)]
    view: ViewChoice,
}

impl TryFrom<SloText> for Slo {
    type Error = LabError;

    fn try_from(t: SloText) -> Result<Slo, LabError> {
        Slo::parse(&t.text, t.view)
    }
}

/// A verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Meets,
    Violates,
    Undecided,
}

impl std::str::FromStr for Verdict {
    type Err = String;

    /// The stored and printed name ([`Verdict::as_str`]).
    fn from_str(s: &str) -> Result<Verdict, String> {
        [Verdict::Meets, Verdict::Violates, Verdict::Undecided]
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| format!("no verdict '{s}'"))
    }
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Meets => "meets",
            Verdict::Violates => "violates",
            Verdict::Undecided => "undecided",
        }
    }

    /// Every condition must hold: one violation violates, else one undecided is undecided.
    pub fn all(verdicts: impl IntoIterator<Item = Verdict>) -> Verdict {
        let mut out = Verdict::Meets;
        for v in verdicts {
            match v {
                Verdict::Violates => return Verdict::Violates,
                Verdict::Undecided => out = Verdict::Undecided,
                Verdict::Meets => {}
            }
        }
        out
    }
}

/// One condition judged on a run: the measured value with its interval, in `unit`
/// (`us`, `%` or `rps`), against `bound`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConditionResult {
    pub condition: String,
    /// The view read (`user`, `server`), or `requests` for errors and rate.
    pub view: String,
    pub measured: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub bound: f64,
    pub unit: &'static str,
    pub verdict: Verdict,
    /// Why the verdict is what it is when the interval alone does not say it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ConditionResult {
    /// A latency condition's result from its judgement ([`judge_latency`]: the verdict, the
    /// estimate and its interval, and the bound, in ns), in µs.
    pub(crate) fn latency(
        c: &Condition,
        view: View,
        (verdict, est, bound): (Verdict, Option<(f64, f64, f64)>, f64),
        note: Option<String>,
    ) -> ConditionResult {
        ConditionResult {
            condition: c.text.clone(),
            view: view.as_str().into(),
            measured: est.map(|e| e.0 / 1e3),
            lo: est.map(|e| e.1 / 1e3),
            hi: est.map(|e| e.2 / 1e3),
            bound: bound / 1e3,
            unit: "us",
            verdict,
            note,
        }
    }

    /// The verdict a run's or point's status forces (failed and saturated violate,
    /// interrupted is undecided), with why, in place of the interval's.
    pub(crate) fn force(&mut self, forced: Option<Verdict>, why: impl FnOnce() -> String) {
        if let Some(f) = forced.filter(|f| *f != self.verdict) {
            self.verdict = f;
            self.note = Some(why());
        }
    }

    /// "p99 user view 1.8 ms [1.6, 2.0] > 1 ms": what was measured against what.
    pub fn line(&self) -> String {
        let name = self
            .condition
            .split_once(':')
            .map_or(self.condition.as_str(), |(_, c)| c);
        let name = name
            .split(['<', '>'])
            .next()
            .unwrap_or(name)
            .trim()
            .to_string();
        let fmt = |v: f64| fmt_unit(v, self.unit);
        let view = if self.view == "requests" {
            String::new()
        } else {
            format!(" {} view", self.view)
        };
        let lower_is_better = self.unit != "rps";
        let rel = match (self.verdict, lower_is_better) {
            (Verdict::Meets, true) => "<=",
            (Verdict::Meets, false) => ">=",
            (Verdict::Violates, true) => ">",
            (Verdict::Violates, false) => "<",
            (Verdict::Undecided, _) => "vs",
        };
        let measured = match (self.measured, self.lo, self.hi) {
            (Some(m), Some(lo), Some(hi)) => format!("{} [{}, {}]", fmt(m), fmt(lo), fmt(hi)),
            (Some(m), _, _) => fmt(m),
            _ => "not measured".to_string(),
        };
        let mut s = format!(
            "{name}{view} {measured} {rel} {}: {}",
            fmt(self.bound),
            self.verdict.as_str()
        );
        if let Some(n) = &self.note {
            s.push_str(&format!(" ({n})"));
        }
        s
    }
}

/// A condition's figure in its unit ("us", "%", req/s), as the terminal, JUnit and
/// Markdown outputs print it.
pub fn fmt_unit(v: f64, unit: &str) -> String {
    match unit {
        "us" if v >= 1e6 => format!("{:.3} s", v / 1e6),
        "us" if v >= 1e3 => format!("{:.3} ms", v / 1e3),
        "us" => format!("{v:.1} µs"),
        "%" => format!("{v:.3} %"),
        _ => format!("{v:.0} req/s"),
    }
}

/// An SLO judged on one run: each condition, and all of them together.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SloReport {
    pub text: String,
    pub view: ViewChoice,
    pub conditions: Vec<ConditionResult>,
    pub verdict: Verdict,
}

fn positive_duration(part: &str, t: &str) -> Result<f64, LabError> {
    let ns =
        model::parse_duration_ns(t.trim()).map_err(|e| invalid(format!("--slo {part}: {e}")))?;
    if ns.is_nan() || ns <= 0.0 || ns.is_infinite() {
        return Err(invalid(format!("--slo {part}: the bound must be positive")));
    }
    Ok(ns)
}

fn parse_condition(part: &str) -> Result<Condition, LabError> {
    let (view, body) = match part.split_once(':') {
        Some((v, b)) => (
            Some(v.trim().parse::<View>().map_err(|_| {
                invalid(format!(
                    "--slo {part}: a condition's view must be user or server"
                ))
            })?),
            b.trim(),
        ),
        None => (None, part),
    };
    let bad = || {
        invalid(format!(
            "--slo: expected pXX<=TIME, mean<=TIME, errors<=PCT% or rate>=RPS|PCT%, got '{part}'"
        ))
    };
    let what = if let Some((k, v)) = body.split_once(">=").or_else(|| body.split_once('>')) {
        if !k.trim().eq_ignore_ascii_case("rate") {
            return Err(bad());
        }
        let v = v.trim();
        if let Some(p) = v.strip_suffix('%') {
            let f: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(f > 0.0 && f.is_finite()) {
                return Err(invalid(format!("--slo {part}: the rate must be positive")));
            }
            What::Rate {
                min_rps: None,
                min_of_offered: Some(f / 100.0),
            }
        } else {
            let r = model::parse_count(v)
                .map(|c| c as f64)
                .or_else(|_| v.parse::<f64>())
                .map_err(|_| bad())?;
            if !(r > 0.0 && r.is_finite()) {
                return Err(invalid(format!("--slo {part}: the rate must be positive")));
            }
            What::Rate {
                min_rps: Some(r),
                min_of_offered: None,
            }
        }
    } else {
        let (k, v) = body
            .split_once("<=")
            .or_else(|| body.split_once('<'))
            .ok_or_else(bad)?;
        let k = k.trim().to_ascii_lowercase();
        match k.as_str() {
            "mean" => What::Mean {
                max_ns: positive_duration(part, v)?,
            },
            "errors" => {
                let p = v.trim().strip_suffix('%').ok_or_else(|| {
                    invalid(format!(
                        "--slo {part}: give the error share as a percentage (errors<=0.1%)"
                    ))
                })?;
                let f: f64 = p.trim().parse().map_err(|_| bad())?;
                if !(0.0..=100.0).contains(&f) {
                    return Err(invalid(format!(
                        "--slo {part}: the error share must be in 0..100 %"
                    )));
                }
                What::Errors {
                    max_fraction: f / 100.0,
                }
            }
            _ if k.starts_with('p') => {
                let (key, q) =
                    parse_percentile(&k).map_err(|e| invalid(format!("--slo {part}: {e}")))?;
                What::Quantile {
                    key,
                    q,
                    max_ns: positive_duration(part, v)?,
                }
            }
            _ => return Err(bad()),
        }
    };
    Ok(Condition {
        text: part.to_string(),
        view,
        what,
    })
}

/// A two-sided 95 % Wilson interval of a binomial share `k` of `n`.
fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = 1.96_f64;
    let n_f = n as f64;
    let p = k as f64 / n_f;
    let d = 1.0 + z * z / n_f;
    let c = (p + z * z / (2.0 * n_f)) / d;
    let h = z * (p * (1.0 - p) / n_f + z * z / (4.0 * n_f * n_f)).sqrt() / d;
    // At k = 0 (k = n) the bound is exactly 0 (1); rounding in c − h (c + h) leaves ~1e-18,
    // which read `errors<=0%` of an error-free run as violated.
    let lo = if k == 0 { 0.0 } else { (c - h).max(0.0) };
    let hi = if k >= n { 1.0 } else { (c + h).min(1.0) };
    (lo, hi)
}

/// Upper bound: meets when the interval's top is within it, violates when its bottom is beyond.
fn at_most(lo: f64, hi: f64, max: f64) -> Verdict {
    if lo > max {
        Verdict::Violates
    } else if hi <= max {
        Verdict::Meets
    } else {
        Verdict::Undecided
    }
}

impl Slo {
    /// Conditions joined by commas, all of which must hold: any percentile `pXX<=TIME`,
    /// `mean<=TIME`, `errors<=PCT%`, `rate>=RPS` or `rate>=PCT%` (of the offered rate), each
    /// optionally prefixed by a view (`server:p99<=1ms`); read from `view` otherwise.
    pub fn parse(text: &str, view: impl Into<ViewChoice>) -> Result<Slo, LabError> {
        let view = view.into();
        if text.trim().is_empty() {
            return Err(invalid("--slo: no condition given (e.g. p99<=1ms)"));
        }
        let mut conditions = Vec::new();
        for part in text.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(invalid(format!(
                    "--slo: an empty condition in '{}' (conditions are joined by single commas, e.g. p99<=1ms,p99.9<=5ms)",
                    measurement::clip(text.trim())
                )));
            }
            conditions.push(parse_condition(part)?);
        }
        let bounds = conditions
            .iter()
            .filter_map(|c| match &c.what {
                What::Quantile { key, max_ns, .. } => Some(Bound {
                    key: key.clone(),
                    max_us: max_ns / 1e3,
                }),
                _ => None,
            })
            .collect();
        Ok(Slo {
            text: text.trim().to_string(),
            bounds,
            view,
            conditions,
        })
    }

    /// The percentiles beyond the standard five that this SLO reads (the analysis must
    /// compute them).
    pub fn extra_quantiles(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = Vec::new();
        for c in &self.conditions {
            if let What::Quantile { key, q, .. } = &c.what {
                if !KEYS.contains(&key.as_str()) && !out.iter().any(|(k, _)| k == key) {
                    out.push((key.clone(), *q));
                }
            }
        }
        out
    }

    /// The verdict of one distribution's intervals on the latency conditions (percentiles and
    /// mean); a condition on errors or rate cannot be read from a distribution: undecided.
    pub fn judge(&self, s: &Summary) -> Verdict {
        Verdict::all(self.conditions.iter().map(|c| judge_latency(&c.what, s).0))
    }

    /// The view this SLO reads for `run`: the one asked for, or its headline under `auto`.
    pub fn view_of(&self, run: &Run) -> View {
        match self.view {
            ViewChoice::Auto => run.views.headline,
            ViewChoice::User => View::User,
            ViewChoice::Server => View::Server,
        }
    }

    /// Each condition judged on `run`, and all together. Saturated and failed runs violate
    /// every condition, an interrupted one leaves them undecided; a latency condition read
    /// from a view that is not valid for the run (or missing) is undecided, never meets.
    pub fn evaluate(&self, run: &Run) -> SloReport {
        let forced = forced_by(run.status);
        let a = &run.analysis;
        let conditions: Vec<ConditionResult> = self
            .conditions
            .iter()
            .map(|c| {
                let mut r = match &c.what {
                    What::Errors { max_fraction } => {
                        let o = &a.outcomes;
                        let bad = o.error + o.timeout + o.dropped;
                        let n = o.ok + bad;
                        let (lo, hi) = wilson(bad, n);
                        let m = if n == 0 { 0.0 } else { bad as f64 / n as f64 };
                        ConditionResult {
                            condition: c.text.clone(),
                            view: "requests".into(),
                            measured: Some(m * 100.0),
                            lo: Some(lo * 100.0),
                            hi: Some(hi * 100.0),
                            bound: max_fraction * 100.0,
                            unit: "%",
                            verdict: if n == 0 {
                                Verdict::Undecided
                            } else {
                                at_most(lo, hi, *max_fraction)
                            },
                            note: None,
                        }
                    }
                    What::Rate {
                        min_rps,
                        min_of_offered,
                    } => {
                        let bound = min_rps.unwrap_or(min_of_offered.unwrap_or(1.0) * run.rate_rps);
                        let (m, lo, hi, verdict) = match &a.throughput {
                            Some(t) if t.span_s > 0.0 => {
                                // Replies counted over the span: a Poisson count's interval.
                                let n = t.completed_rps * t.span_s;
                                let h = 1.96 * n.sqrt();
                                let lo = (n - h).max(0.0) / t.span_s;
                                let hi = (n + h) / t.span_s;
                                let v = if lo >= bound {
                                    Verdict::Meets
                                } else if hi < bound {
                                    Verdict::Violates
                                } else {
                                    Verdict::Undecided
                                };
                                (Some(t.completed_rps), Some(lo), Some(hi), v)
                            }
                            _ => (Some(a.achieved_rate_rps), None, None, Verdict::Undecided),
                        };
                        ConditionResult {
                            condition: c.text.clone(),
                            view: "requests".into(),
                            measured: m,
                            lo,
                            hi,
                            bound,
                            unit: "rps",
                            verdict,
                            note: None,
                        }
                    }
                    What::Quantile { .. } | What::Mean { .. } => {
                        let view = c.view.unwrap_or_else(|| self.view_of(run));
                        let dist = match view {
                            View::User => Some(&a.measured),
                            View::Server => a.server_view.as_ref().map(|s| &s.measured),
                        };
                        let (verdict, est, bound) = match dist {
                            Some(d) => judge_latency(&c.what, d),
                            None => (Verdict::Undecided, None, latency_bound(&c.what)),
                        };
                        let mut note = None;
                        let verdict = if dist.is_none() {
                            note = Some(format!("the run has no {view} view"));
                            Verdict::Undecided
                        } else if !run.views.is_valid(view) {
                            note = Some(format!("the {view} view is not valid for this run"));
                            Verdict::Undecided
                        } else {
                            unstood(run, view, &c.what, verdict, &mut note)
                        };
                        ConditionResult::latency(c, view, (verdict, est, bound), note)
                    }
                };
                r.force(forced, || format!("the run is {}", run.status));
                r
            })
            .collect();
        self.report(conditions)
    }

    /// The report of these conditions' results: the SLO's verdict is all of theirs.
    pub(crate) fn report(&self, conditions: Vec<ConditionResult>) -> SloReport {
        SloReport {
            text: self.text.clone(),
            view: self.view,
            verdict: Verdict::all(conditions.iter().map(|c| c.verdict)),
            conditions,
        }
    }

    /// The verdict of a run ([`Slo::evaluate`], all conditions together).
    pub fn verdict(&self, run: &Run) -> Verdict {
        self.evaluate(run).verdict
    }
}

/// A quantile the view does not stand behind (issue 37: the generator's stalls, or the
/// bursts after them, are a large part of it): a violation is not the server's to answer for,
/// so it is undecided; a bound met stays met without a note (the stalls only add to the
/// latency, so the interval alone says it).
fn unstood(
    run: &Run,
    view: View,
    what: &What,
    verdict: Verdict,
    note: &mut Option<String>,
) -> Verdict {
    let What::Quantile { key, .. } = what else {
        return verdict;
    };
    match run.views.percentile(view, key).filter(|p| !p.valid) {
        None => verdict,
        Some(_) if verdict == Verdict::Meets => verdict,
        Some(p) => {
            *note = Some(format!(
                "{key} of the {view} view is not the server's: {}",
                p.why
            ));
            Verdict::Undecided
        }
    }
}

/// The verdict a status forces on every condition: a saturated or failed run (or point)
/// violates, an interrupted one is undecided; the others are judged by their intervals.
pub(crate) fn forced_by(status: RunStatus) -> Option<Verdict> {
    match status {
        RunStatus::Saturated | RunStatus::Failed => Some(Verdict::Violates),
        RunStatus::Interrupted => Some(Verdict::Undecided),
        RunStatus::Ok | RunStatus::Invalid => None,
    }
}

pub(crate) fn latency_bound(w: &What) -> f64 {
    match w {
        What::Quantile { max_ns, .. } | What::Mean { max_ns } => *max_ns,
        _ => f64::NAN,
    }
}

/// A latency condition read from one distribution: the verdict, (value, lo, hi) in ns and
/// the bound in ns. The mean's interval is not time-aware: the larger of ±3 standard errors
/// and ±10 % of the mean, so that only a bound well away from the mean decides.
pub(crate) fn judge_latency(w: &What, s: &Summary) -> (Verdict, Option<(f64, f64, f64)>, f64) {
    match w {
        What::Quantile { key, max_ns, .. } => match s.get(key) {
            Some(e) => (
                at_most(e.lo, e.hi, *max_ns),
                Some((e.value, e.lo, e.hi)),
                *max_ns,
            ),
            None => (Verdict::Undecided, None, *max_ns),
        },
        What::Mean { max_ns } => {
            if s.count == 0 {
                return (Verdict::Undecided, None, *max_ns);
            }
            let se = s.stdev_ns / (s.count as f64).sqrt();
            let h = (3.0 * se).max(0.1 * s.mean_ns);
            let (lo, hi) = ((s.mean_ns - h).max(0.0), s.mean_ns + h);
            (at_most(lo, hi, *max_ns), Some((s.mean_ns, lo, hi)), *max_ns)
        }
        _ => (Verdict::Undecided, None, f64::NAN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(p99: (f64, f64, f64)) -> Summary {
        let mut r = stats::Recorder::exact(0);
        r.record(1);
        let mut s = r.summarize(0.95).unwrap();
        for q in &mut s.quantiles {
            if q.key == "p99" {
                q.est.value = p99.0;
                q.est.lo = p99.1;
                q.est.hi = p99.2;
            }
        }
        s
    }

    #[test]
    fn verdicts_read_the_interval() {
        let slo = Slo::parse("p99<=1ms", View::User).unwrap();
        assert_eq!(slo.bounds[0].max_us, 1000.0);
        assert_eq!(slo.judge(&summary((900e3, 850e3, 950e3))), Verdict::Meets);
        assert_eq!(
            slo.judge(&summary((990e3, 900e3, 1_100e3))),
            Verdict::Undecided
        );
        assert_eq!(
            slo.judge(&summary((1_200e3, 1_100e3, 1_300e3))),
            Verdict::Violates
        );
        let two = Slo::parse("p99<=2ms, p50<=1us", View::Server).unwrap();
        // p50 of a recorder holding the value 1 ns: 1 ns <= 1 µs.
        assert_eq!(two.judge(&summary((900e3, 850e3, 950e3))), Verdict::Meets);
        assert_eq!(
            Slo::parse("p99<=1ms", ViewChoice::Auto).unwrap().view,
            ViewChoice::Auto
        );
        assert_eq!("auto".parse::<ViewChoice>().unwrap(), ViewChoice::Auto);
        assert!("both".parse::<ViewChoice>().is_err());
        let many = Slo::parse(
            "p95<=2ms, server:p99.5<=3ms, mean<=1ms, errors<=0.5%, rate>=99%, rate>=9k",
            ViewChoice::Auto,
        )
        .unwrap();
        assert_eq!(many.conditions.len(), 6);
        assert_eq!(many.conditions[1].view, Some(View::Server));
        assert_eq!(
            many.extra_quantiles(),
            vec![("p95".to_string(), 0.95), ("p99.5".to_string(), 0.995)]
        );
        assert_eq!(
            many.conditions[3].what,
            What::Errors {
                max_fraction: 0.005
            }
        );
        assert_eq!(
            many.conditions[5].what,
            What::Rate {
                min_rps: Some(9000.0),
                min_of_offered: None
            }
        );
        assert_eq!(
            parse_percentiles("50,95,99.50,99.5").unwrap(),
            vec![("p95".to_string(), 0.95), ("p99.5".to_string(), 0.995)]
        );
        for bad in ["", "95,", "x", "100", "0", "-5"] {
            assert!(parse_percentiles(bad).is_err(), "{bad}");
        }
        let (lo, hi) = wilson(5, 1000);
        assert!(lo < 0.005 && hi > 0.005 && lo > 0.0);
        // No errors (all errors) bound the share at exactly 0 (1), whatever the count (a
        // 6,000-request run once read 5.4e-18).
        for n in 1..20_000 {
            assert_eq!(wilson(0, n).0, 0.0, "n = {n}");
            assert_eq!(wilson(n, n).1, 1.0, "n = {n}");
            assert!(wilson(0, n).1 > 0.0 && wilson(n, n).0 < 1.0, "n = {n}");
        }
        for bad in [
            "p99",
            "p100<=1ms",
            "p0<=1ms",
            "p99<=x",
            "p99<=0us",
            "",
            "errors<=1",
            "rate<=5",
            "disk:p99<=1ms",
            "mean>=1ms",
            "p99<=1ms,",
            ",p99<=1ms",
            "p99<=1ms,,p50<=1ms",
            " , ",
        ] {
            assert!(Slo::parse(bad, View::User).is_err(), "{bad}");
        }
    }
}
