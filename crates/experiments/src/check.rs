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

use std::collections::BTreeMap;

use crate::summary::{Ci, ExperimentSummary, HostFacts, Intervals, RepeatedFacts, RunSummary};
use measurement::RunStatus;
use serde::Serialize;
use serde_json::Value;
use store::{ExperimentRow, RunRow, Store, StoreError};

/// The percentiles a check compares (those a summary holds).
pub const CHECK_PERCENTILES: [&str; 5] = ["p50", "p90", "p99", "p99.9", "p99.99"];

/// The host facts that must agree for two runs to be compared.
pub const HOST_KEYS: [&str; 5] = ["hostname", "kernel", "cpu_model", "arch", "cpus_online"];

/// Configuration keys that do not change what is measured (names, seeds, judgements, the
/// ideal and the probes beside the run); every other key must agree.
pub const IGNORED_CONFIG_KEYS: [&str; 16] = [
    "label",
    "seed",
    "host_noise",
    "ideal",
    "slo",
    "slo_view",
    "slos",
    "view",
    "find_max",
    "max_steps",
    "percentiles",
    "pids",
    "address",
    "role",
    "stages",
    "stages_budget",
];

/// Configuration keys (at any depth) whose values are target URLs: they compare by scheme and
/// path, without the address (host and port), see [`config_differences`].
pub const TARGET_URL_KEYS: [&str; 2] = ["target", "url"];

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

/// The host facts that differ: "kernel: 6.1.0 ≠ 6.8.0".
pub fn host_differences(candidate: &Value, baseline: &Value) -> Vec<String> {
    let (c, b) = (HostFacts::of(candidate), HostFacts::of(baseline));
    c.named()
        .into_iter()
        .zip(b.named())
        .filter(|((_, c), (_, b))| c != b)
        .map(|((k, c), (_, b))| format!("host {k}: {b} (baseline) vs {c} (candidate)"))
        .collect()
}

fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if IGNORED_CONFIG_KEYS.contains(&k.as_str()) {
                    continue;
                }
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, x, out);
            }
        }
        _ => {
            out.insert(prefix.to_string(), v.clone());
        }
    }
}

/// A target URL without its address: `scheme://` and the path (with any query), host, port
/// and user left out, an empty path read as `/`: "nullrpc://127.0.0.1:43355" and
/// "NullRPC://[::1]:7/" both give "nullrpc:///". None when `s` is not a URL (no
/// `scheme://`), e.g. "builtin:threads".
fn without_address(s: &str) -> Option<String> {
    let (scheme, rest) = s.split_once("://")?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return None;
    }
    let path = &rest[rest.find(['/', '?', '#']).unwrap_or(rest.len())..];
    let slash = if path.starts_with('/') { "" } else { "/" };
    Some(format!("{}://{slash}{path}", scheme.to_ascii_lowercase()))
}

/// True when `key` (a dotted path) names a target URL ([`TARGET_URL_KEYS`]) and `c` and `b`
/// are URLs that differ only in their address.
fn same_target(key: &str, c: &Value, b: &Value) -> bool {
    let name = key.rsplit('.').next().unwrap_or(key);
    if !TARGET_URL_KEYS.contains(&name) {
        return false;
    }
    match (
        c.as_str().map(without_address),
        b.as_str().map(without_address),
    ) {
        (Some(Some(c)), Some(Some(b))) => c == b,
        _ => false,
    }
}

/// The flattened keys whose values differ, as (key, candidate value, baseline value).
fn differing(candidate: &Value, baseline: &Value) -> Vec<(String, Value, Value)> {
    let (mut c, mut b) = (BTreeMap::new(), BTreeMap::new());
    flatten("", candidate, &mut c);
    flatten("", baseline, &mut b);
    let keys: std::collections::BTreeSet<&String> = c.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (cv, bv) = (
                c.get(k).unwrap_or(&Value::Null),
                b.get(k).unwrap_or(&Value::Null),
            );
            (cv != bv).then(|| (k.clone(), cv.clone(), bv.clone()))
        })
        .collect()
}

/// The configuration keys (dotted paths) whose values differ, outside
/// [`IGNORED_CONFIG_KEYS`]: "rate_rps: 4000 (baseline) vs 2000 (candidate)". Target URLs
/// ([`TARGET_URL_KEYS`]) that differ only in their address (host and port: a server
/// restarted on port 0) are the same target, not a difference ([`config_notes`] says so).
pub fn config_differences(candidate: &Value, baseline: &Value) -> Vec<String> {
    differing(candidate, baseline)
        .into_iter()
        .filter(|(k, cv, bv)| !same_target(k, cv, bv))
        .map(|(k, cv, bv)| format!("{k}: {bv} (baseline) vs {cv} (candidate)"))
        .collect()
}

/// What differs in the configurations without refusing the baseline: each pair of target
/// URLs that differ only in their address, once, "the baseline's address differs:
/// nullrpc://127.0.0.1:38153 (baseline) vs nullrpc://127.0.0.1:43355 (candidate); compared
/// as the same target".
pub fn config_notes(candidate: &Value, baseline: &Value) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    for (k, cv, bv) in differing(candidate, baseline) {
        if !same_target(&k, &cv, &bv) {
            continue;
        }
        let (Some(c), Some(b)) = (cv.as_str(), bv.as_str()) else {
            continue;
        };
        let note = format!(
            "the baseline's address differs: {b} (baseline) vs {c} (candidate); compared as the same target"
        );
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    notes
}

pub use measurement::cli_values::BaselineRef;

/// Why a check cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("no {0} with id {1}")]
    NotFound(&'static str, i64),
    #[error("no {0} labelled '{1}'")]
    NoLabel(&'static str, String),
    #[error("no earlier {0} of the same target and configuration as {0} {1}")]
    NoLatest(&'static str, i64),
    #[error("the baseline cannot be the candidate itself ({0} {1})")]
    SameAsCandidate(&'static str, i64),
    #[error("{0} {1} has no stored result (status '{2}')")]
    Unfinished(&'static str, i64, store::RowStatus),
    #[error("{0} {1} is a calibration, not a measurement of latencies: check compares runs (give the id of a run)")]
    Calibration(&'static str, i64),
    #[error("baseline {kind} {id} differs from the candidate (use --force to compare anyway): {}", first_of(.differences))]
    Differs {
        kind: &'static str,
        id: i64,
        differences: Vec<String>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CheckError {
    /// True for what the user asked wrong (exit 2), false for the store failing.
    pub fn is_usage(&self) -> bool {
        !matches!(self, CheckError::Store(_))
    }
}

/// The first differences (each clipped), and how many more: one line a person reads; `--json`
/// and the check's own `differences` keep them all.
fn first_of(d: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s: Vec<String> = d
        .iter()
        .take(SHOWN)
        .map(|x| measurement::clip(x).into_owned())
        .collect();
    if d.len() > SHOWN {
        s.push(format!("and {} more", d.len() - SHOWN));
    }
    s.join("; ")
}

fn label_of(config: &Value) -> Option<String> {
    measurement::RunConfig::of(config)
        .label()
        .map(str::to_string)
}

/// The differences that refuse a baseline: host facts and configuration.
fn differences(c_host: &Value, b_host: &Value, c_cfg: &Value, b_cfg: &Value) -> Vec<String> {
    let mut d = host_differences(c_host, b_host);
    d.extend(config_differences(c_cfg, b_cfg));
    d
}

/// Checks run `candidate` against the baseline `baseline` names, in the read-only `store`.
/// Err(CheckError::Differs) when host or configuration differ and `force` is not set.
pub fn check_runs(
    store: &Store,
    candidate: i64,
    baseline: &BaselineRef,
    tol: f64,
    force: bool,
) -> Result<(Check, RunRow), CheckError> {
    let c = store
        .get_run(candidate)?
        .ok_or(CheckError::NotFound("run", candidate))?;
    let b = match baseline {
        BaselineRef::Id(id) => store
            .get_run(*id)?
            .ok_or(CheckError::NotFound("run", *id))?,
        BaselineRef::Label(l) => store
            .list_runs()?
            .into_iter()
            .filter(|r| r.id != c.id && label_of(&r.config).as_deref() == Some(l.as_str()))
            .max_by_key(|r| r.id)
            .ok_or_else(|| CheckError::NoLabel("run", l.clone()))?,
        BaselineRef::Latest => store
            .list_runs()?
            .into_iter()
            .filter(|r| {
                r.id < c.id
                    && r.kind == c.kind
                    && (r.target == c.target
                        || same_target(
                            "target",
                            &Value::String(r.target.clone()),
                            &Value::String(c.target.clone()),
                        ))
                    && r.summary.is_some()
                    && differences(&c.host, &r.host, &c.config, &r.config).is_empty()
            })
            .max_by_key(|r| r.id)
            .ok_or(CheckError::NoLatest("run", c.id))?,
    };
    if b.id == c.id {
        return Err(CheckError::SameAsCandidate("run", c.id));
    }
    for r in [&c, &b] {
        if r.kind == "calibrate" {
            return Err(CheckError::Calibration("run", r.id));
        }
    }
    let Some(bs) = &b.summary else {
        return Err(CheckError::Unfinished("run", b.id, b.status.clone()));
    };
    let diffs = differences(&c.host, &b.host, &c.config, &b.config);
    if !diffs.is_empty() && !force {
        return Err(CheckError::Differs {
            kind: "run",
            id: b.id,
            differences: diffs,
        });
    }
    let cs = RunSummary::of(c.summary.as_ref().unwrap_or(&Value::Null));
    let bs = RunSummary::of(bs);
    let rows = compare_sides(None, &Sides::of_summary(&cs), &Sides::of_summary(&bs), tol);
    let mut check = Check::new("run", c.id, b.id, tol, diffs, rows);
    check.notes = config_notes(&c.config, &b.config);
    for (who, s) in [("candidate", &cs), ("baseline", &bs)] {
        check.caveats.extend(caveats_of(who, s));
    }
    Ok((check, c))
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

/// A run's own word that its intervals do not bound a repeat, with its reasons.
pub fn caveats_of(who: &str, summary: &RunSummary) -> Vec<String> {
    let Some(r) = summary
        .reproducibility
        .as_ref()
        .filter(|r| r.single_run_bounds_repeats == Some(false))
    else {
        return Vec::new();
    };
    vec![format!(
        "{who}'s intervals do not bound a repeat ({})",
        if r.flags.is_empty() {
            "no reason stored".to_string()
        } else {
            r.flags.join("; ")
        }
    )]
}

/// One experiment's points, read back: key, combined result, and the summary of the point's
/// single run (for a point of one repeat).
fn points_of(store: &Store, e: &ExperimentRow) -> Result<Vec<(PointKey, Sides)>, CheckError> {
    let Some(summary) = e.summary.as_ref().map(ExperimentSummary::of) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    // A `run --repeat N` experiment keeps its one point's combined result as its summary.
    if summary.points.is_none() && summary.repeated.repeats.is_some() {
        let config = measurement::RunConfig::of(&e.config);
        let key = PointKey {
            params: BTreeMap::new(),
            offered_rps: config.run.and_then(|r| r.rate_rps).unwrap_or(0.0),
            load_pct: None,
        };
        out.push((key, Sides::of_point(&summary.repeated, None)));
    }
    for p in summary.points.unwrap_or_default() {
        let Some(r) = p.result else {
            continue;
        };
        let key = PointKey {
            params: p.params,
            offered_rps: p.offered_rps.unwrap_or(0.0),
            load_pct: p.load_pct,
        };
        let run = match r.run_ids.first() {
            Some(&id) if r.repeats.unwrap_or(0) < 2 => {
                store.get_run(id)?.and_then(|row| row.summary)
            }
            _ => None,
        };
        out.push((key, Sides::of_point(&r, run.as_ref())));
    }
    Ok(out)
}

/// The host facts of an experiment: its first run's.
fn host_of(store: &Store, e: i64) -> Result<Value, CheckError> {
    Ok(store
        .experiment_runs(e)?
        .first()
        .map(|r| r.host.clone())
        .unwrap_or(Value::Null))
}

/// Checks experiment `candidate` against a baseline experiment, point by point (matched by
/// params and load). A candidate point with no baseline point is undecided.
pub fn check_experiments(
    store: &Store,
    candidate: i64,
    baseline: &BaselineRef,
    tol: f64,
    force: bool,
) -> Result<(Check, ExperimentRow), CheckError> {
    let c = store
        .get_experiment(candidate)?
        .ok_or(CheckError::NotFound("experiment", candidate))?;
    let c_host = host_of(store, c.id)?;
    let b = match baseline {
        BaselineRef::Id(id) => store
            .get_experiment(*id)?
            .ok_or(CheckError::NotFound("experiment", *id))?,
        BaselineRef::Label(l) => store
            .list_experiments()?
            .into_iter()
            .filter(|e| e.id != c.id && label_of(&e.config).as_deref() == Some(l.as_str()))
            .max_by_key(|e| e.id)
            .ok_or_else(|| CheckError::NoLabel("experiment", l.clone()))?,
        BaselineRef::Latest => {
            let mut found = None;
            let mut all = store.list_experiments()?;
            all.sort_by_key(|e| std::cmp::Reverse(e.id));
            for e in all {
                if e.id < c.id
                    && e.kind == c.kind
                    && e.summary.is_some()
                    && differences(&c_host, &host_of(store, e.id)?, &c.config, &e.config).is_empty()
                {
                    found = Some(e);
                    break;
                }
            }
            found.ok_or(CheckError::NoLatest("experiment", c.id))?
        }
    };
    if b.id == c.id {
        return Err(CheckError::SameAsCandidate("experiment", c.id));
    }
    if b.summary.is_none() {
        return Err(CheckError::Unfinished("experiment", b.id, b.status.clone()));
    }
    let diffs = differences(&c_host, &host_of(store, b.id)?, &c.config, &b.config);
    if !diffs.is_empty() && !force {
        return Err(CheckError::Differs {
            kind: "experiment",
            id: b.id,
            differences: diffs,
        });
    }
    let base = points_of(store, &b)?;
    let mut rows = Vec::new();
    for (key, sides) in points_of(store, &c)? {
        match base.iter().find(|(k, _)| k.matches(&key)) {
            Some((_, bs)) => rows.extend(compare_sides(Some(&key), &sides, bs, tol)),
            None => {
                let none = Sides {
                    user: Err("no baseline point at this load".into()),
                    server: Err("no baseline point at this load".into()),
                    unbounded: None,
                    unstood: Vec::new(),
                };
                rows.extend(compare_sides(Some(&key), &sides, &none, tol));
            }
        }
    }
    let mut check = Check::new("experiment", c.id, b.id, tol, diffs, rows);
    check.notes = config_notes(&c.config, &b.config);
    Ok((check, c))
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

    fn summary(p50: f64, user_valid: bool) -> Value {
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

    #[test]
    fn differences_list_host_and_configuration_keys_but_not_names_or_seeds() {
        let a = json!({"target": "nullrpc://h:1", "rate_rps": 4000.0, "seed": 1, "label": "a",
                       "run": {"connections": 4, "seed": 3}});
        let b = json!({"target": "nullrpc://h:1", "rate_rps": 2000.0, "seed": 2, "label": "b",
                       "run": {"connections": 8, "seed": 4}});
        let d = config_differences(&a, &b);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].starts_with("rate_rps: 2000.0 (baseline) vs 4000.0 (candidate)"));
        assert!(d[1].starts_with("run.connections"));
        assert!(config_differences(&a, &a).is_empty());
        let h1 = json!({"hostname": "x", "kernel": "6.1", "cpu_model": "m"});
        let h2 = json!({"hostname": "y", "kernel": "6.1", "cpu_model": "m"});
        assert_eq!(host_differences(&h1, &h2).len(), 1);
        assert!(host_differences(&h1, &h1).is_empty());
    }

    #[test]
    fn a_target_whose_address_alone_differs_is_the_same_target_with_a_note() {
        let cfg = |target: &str, url: &str| {
            json!({"target": target, "url": url, "rate_rps": 4000.0,
                   "run": {"server": {"url": url}, "connections": 4}})
        };
        // a server restarted on port 0: only the port differs, at the top and deeper down
        let b = cfg("memcached", "memcached://127.0.0.1:38153");
        let c = cfg("memcached", "memcached://127.0.0.1:43355");
        assert!(config_differences(&c, &b).is_empty());
        assert_eq!(
            config_notes(&c, &b),
            vec![
                "the baseline's address differs: memcached://127.0.0.1:38153 (baseline) vs \
                 memcached://127.0.0.1:43355 (candidate); compared as the same target"
                    .to_string()
            ]
        );
        // another host too, and an empty path against "/"
        let c = cfg("http://10.0.0.5:8080/", "http://10.0.0.5:8080");
        let b = cfg("http://localhost:80", "http://localhost:80/");
        assert!(config_differences(&c, &b).is_empty());
        // one note per pair of addresses: target, url and run.server.url make two
        assert_eq!(config_notes(&c, &b).len(), 2, "{:?}", config_notes(&c, &b));
        assert!(config_notes(&c, &c).is_empty());
        // another scheme or another path is another target: refused, no note
        for (bt, ct) in [
            ("nullrpc://127.0.0.1:1", "memcached://127.0.0.1:2"),
            ("http://h:1/a", "http://h:2/b"),
            ("http://h:1/a?x=1", "http://h:1/a?x=2"),
            ("builtin:threads", "builtin:epoll"),
        ] {
            let (b, c) = (json!({"target": bt}), json!({"target": ct}));
            let d = config_differences(&c, &b);
            assert_eq!(d.len(), 1, "{bt} vs {ct}: {d:?}");
            assert!(d[0].starts_with("target: "), "{d:?}");
            assert!(config_notes(&c, &b).is_empty(), "{bt} vs {ct}");
        }
        // only keys named target or url compare so
        let d = config_differences(&json!({"server": "a://h:1"}), &json!({"server": "a://h:2"}));
        assert_eq!(d.len(), 1, "{d:?}");
    }

    #[test]
    fn a_stored_baseline_on_another_port_is_compared_with_a_note() {
        let st = Store::open_in_memory().unwrap();
        let run = |port: u16, p50: f64| {
            let url = format!("nullrpc://127.0.0.1:{port}");
            let id = st
                .begin_run(&store::NewRun {
                    kind: "run".into(),
                    target: url.clone(),
                    started_at: "2026-01-01T00:00:00Z".into(),
                    config: json!({"target": url, "rate_rps": 4000.0}),
                    host: json!({"hostname": "h", "kernel": "k", "cpu_model": "m"}),
                })
                .unwrap();
            st.finish_run(id, "ok", &summary(p50, true)).unwrap();
            id
        };
        let (b, c) = (run(38153, 50.0), run(43355, 80.0));
        let (check, _) = check_runs(&st, c, &BaselineRef::Id(b), 0.1, false).unwrap();
        assert!(check.differences.is_empty(), "{:?}", check.differences);
        assert_eq!(check.notes.len(), 1, "{:?}", check.notes);
        assert!(check.notes[0].contains("127.0.0.1:38153 (baseline)"));
        assert!(check.regression);
        let json = serde_json::to_value(&check).unwrap();
        assert_eq!(json["notes"][0], json!(check.notes[0]));
    }

    fn stored(st: &Store, rate: f64, label: &str, p50: f64) -> i64 {
        let id = st
            .begin_run(&store::NewRun {
                kind: "run".into(),
                target: "nullrpc://127.0.0.1:7".into(),
                started_at: "2026-01-01T00:00:00Z".into(),
                config: json!({"target": "nullrpc://127.0.0.1:7", "rate_rps": rate,
                               "label": label, "seed": label.len()}),
                host: json!({"hostname": "h", "kernel": "k", "cpu_model": "m"}),
            })
            .unwrap();
        st.finish_run(id, "ok", &summary(p50, true)).unwrap();
        id
    }

    #[test]
    fn stored_runs_resolve_their_baseline_and_read_a_regression() {
        let st = Store::open_in_memory().unwrap();
        let a = stored(&st, 4000.0, "base", 50.0);
        let other = stored(&st, 2000.0, "slow-rate", 50.0);
        let c = stored(&st, 4000.0, "cand", 80.0);
        for b in [
            BaselineRef::Id(a),
            BaselineRef::Label("base".into()),
            BaselineRef::Latest,
        ] {
            let (check, _) = check_runs(&st, c, &b, 0.1, false).unwrap();
            assert_eq!(check.baseline, a, "{b:?}");
            assert!(check.regression);
            assert!(check.rows.iter().all(|r| r.verdict == CheckVerdict::Worse));
        }
        let e = check_runs(&st, c, &BaselineRef::Id(other), 0.1, false).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("rate_rps"), "{e}");
        let (forced, _) = check_runs(&st, c, &BaselineRef::Id(other), 0.1, true).unwrap();
        assert_eq!(forced.differences.len(), 1);
        for (b, want) in [
            (BaselineRef::Id(99), "no run with id 99"),
            (BaselineRef::Label("x".into()), "no run labelled 'x'"),
            (BaselineRef::Id(c), "candidate itself"),
        ] {
            let e = check_runs(&st, c, &b, 0.1, false).unwrap_err();
            assert!(e.is_usage() && e.to_string().contains(want), "{e}");
        }
        let e = check_runs(&st, a, &BaselineRef::Latest, 0.1, false).unwrap_err();
        assert!(e.to_string().contains("no earlier run"), "{e}");
    }

    #[test]
    fn points_match_by_params_and_load() {
        let k = |rps: f64, pct: Option<f64>| PointKey {
            params: BTreeMap::new(),
            offered_rps: rps,
            load_pct: pct,
        };
        assert!(k(4000.0, None).matches(&k(4001.0, None)));
        assert!(!k(4000.0, None).matches(&k(4200.0, None)));
        // By % of capacity when both have one, whatever the calibrated rate.
        assert!(k(4000.0, Some(60.0)).matches(&k(4300.0, Some(60.0))));
        let mut p = k(4000.0, None);
        p.params.insert("conns".into(), "4".into());
        assert!(!p.matches(&k(4000.0, None)));
    }
}
