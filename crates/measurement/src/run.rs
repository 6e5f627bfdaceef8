//! [`Run`]: one measured run, the type every view consumes — the terminal printer, `--json`,
//! the store's summary, exports and reports.
//!
//! A run has two serialised forms:
//!
//! - [`Run::to_json`]: the documented JSON shape that `--json` prints and the store keeps as
//!   the run's summary (distributions as `{p50, …}` in µs, units in key names; keys are only
//!   ever added). It is written for people and scripts, not read back into a `Run`.
//! - [`Run::encode`]: the serde form of the whole `Run` (every field, as derived), which the
//!   store keeps beside the summary ([`store::Store::finish_run_typed`]) and [`load_run`]
//!   reads back, so that views read a stored run by field.
//!
//! The serde form is CBOR, not JSON, for one reason: floats. A run holds floats that can be
//! NaN or infinite (a stage's growth over a median of 0, the figures of an empty
//! distribution), and JSON has no such numbers: serde_json writes them as `null`, which does
//! not read back into an `f64`. CBOR keeps every `f64` bit for bit (NaN, ±inf, −0), for every
//! field, present and future, without a helper on each float; `--json` keeps serde_json's
//! `null` for them, as before. [`RUN_ENCODING_VERSION`] names the encoding: a field added to
//! a type inside `Run` later needs `#[serde(default)]` (older stored runs lack it) or a new
//! version.

use analysis::RunAnalysis;
use load::BacklogSample;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stats::P99;

use crate::error::LabError;
use crate::instruments::Instrument;
use crate::view::{View, ViewChoice};

/// What a run's ideal service time came from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IdealSource {
    /// "given" (--service), "stored calibration" or "calibration" (made for this run).
    pub from: String,
    /// The calibration run, when it came from one.
    pub calibration_run: Option<i64>,
    /// Its batching gain and the per-worker cost without batching: a request arriving alone
    /// costs that, not the batched cost the ideal assumes — a source of excess at low load.
    pub batching_gain: Option<f64>,
    pub unbatched_per_worker_service_ns: Option<f64>,
}

/// How a loop of runs (a tuning walk, a colocation matrix) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExperimentStatus {
    /// Every step ran (each run has its own status).
    Ok,
    /// Stopped early (Ctrl-C); the finished steps are kept.
    Interrupted,
    /// A step could not run (the error is stored with the experiment).
    Failed,
}

impl ExperimentStatus {
    /// From how the loop ended: its outcome and whether it was stopped.
    pub fn of<T, E>(outcome: &Result<T, E>, stopped: bool) -> ExperimentStatus {
        match outcome {
            Ok(_) if stopped => ExperimentStatus::Interrupted,
            Ok(_) => ExperimentStatus::Ok,
            Err(_) => ExperimentStatus::Failed,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ExperimentStatus::Ok => "ok",
            ExperimentStatus::Interrupted => "interrupted",
            ExperimentStatus::Failed => "failed",
        }
    }
}

impl std::fmt::Display for ExperimentStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a sweep ended, as the experiment stores it: the loop stopped (`failed`,
/// `interrupted`), or it completed and every point is ok (`ok`), or the count of each point
/// status in [`SweepStatus::ORDER`] ("2 ok, 1 invalid", "3 saturated"). Its serde form is
/// that text, so older stores read back the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SweepStatus {
    /// The loop itself stopped on an error (stored with the experiment).
    Failed,
    /// Stopped early (Ctrl-C); the finished points are kept.
    Interrupted,
    /// Completed, every point ok.
    AllOk,
    /// Completed; how many points ended with each status (non-zero counts, in
    /// [`SweepStatus::ORDER`]), not all ok.
    Points(Vec<(RunStatus, usize)>),
}

impl SweepStatus {
    /// The order point statuses are counted in.
    pub const ORDER: [RunStatus; 5] = [
        RunStatus::Ok,
        RunStatus::Saturated,
        RunStatus::Invalid,
        RunStatus::Failed,
        RunStatus::Interrupted,
    ];

    /// From how the loop ended and its points' statuses.
    pub fn of(completed: bool, interrupted: bool, points: &[RunStatus]) -> SweepStatus {
        if !completed {
            return SweepStatus::Failed;
        }
        if interrupted {
            return SweepStatus::Interrupted;
        }
        if points.iter().all(|s| *s == RunStatus::Ok) {
            return SweepStatus::AllOk;
        }
        SweepStatus::Points(
            SweepStatus::ORDER
                .iter()
                .map(|s| (*s, points.iter().filter(|p| *p == s).count()))
                .filter(|(_, n)| *n > 0)
                .collect(),
        )
    }

    /// Whether the loop stopped before its end (then the exit code is 1 whatever the points).
    pub fn stopped(&self) -> bool {
        matches!(self, SweepStatus::Failed | SweepStatus::Interrupted)
    }

    /// The status that colours the whole: the loop's own when it stopped, else the worst of
    /// its points' (failed, invalid, saturated, interrupted, ok).
    pub fn worst(&self) -> RunStatus {
        match self {
            SweepStatus::Failed => RunStatus::Failed,
            SweepStatus::Interrupted => RunStatus::Interrupted,
            SweepStatus::AllOk => RunStatus::Ok,
            SweepStatus::Points(counts) => [
                RunStatus::Failed,
                RunStatus::Invalid,
                RunStatus::Saturated,
                RunStatus::Interrupted,
                RunStatus::Ok,
            ]
            .into_iter()
            .find(|w| counts.iter().any(|(s, n)| s == w && *n > 0))
            .unwrap_or(RunStatus::Ok),
        }
    }
}

impl std::fmt::Display for SweepStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SweepStatus::Failed => f.write_str("failed"),
            SweepStatus::Interrupted => f.write_str("interrupted"),
            SweepStatus::AllOk => f.write_str("ok"),
            SweepStatus::Points(counts) => {
                let parts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
                f.write_str(&parts.join(", "))
            }
        }
    }
}

impl std::str::FromStr for SweepStatus {
    type Err = String;

    /// The stored text ([`SweepStatus`]'s `Display`); anything else is no sweep status.
    fn from_str(s: &str) -> Result<SweepStatus, String> {
        match s {
            "failed" => return Ok(SweepStatus::Failed),
            "interrupted" => return Ok(SweepStatus::Interrupted),
            "ok" => return Ok(SweepStatus::AllOk),
            _ => {}
        }
        let bad = || format!("no sweep status '{s}'");
        let counts = s
            .split(", ")
            .map(|part| {
                let (n, status) = part.split_once(' ').ok_or_else(bad)?;
                let n: usize = n.parse().map_err(|_| bad())?;
                let status: RunStatus = status.parse().map_err(|_| bad())?;
                Ok((status, n))
            })
            .collect::<Result<Vec<_>, String>>()?;
        if counts.is_empty() || counts.iter().any(|(_, n)| *n == 0) {
            return Err(bad());
        }
        Ok(SweepStatus::Points(counts))
    }
}

impl Serialize for SweepStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SweepStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SweepStatus, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Measured, and a view asked for is valid ([`Views`]: the user's when the generator
    /// kept its schedule, the server's when the offered load was sent).
    Ok,
    /// Measured, but no view asked for is valid: the generator fell behind its schedule (the
    /// user's view counts its stalls) and the server's view is missing or was not asked for
    /// or the offered load was not sent.
    Invalid,
    /// The target failed: refused, died, or answered errors or garbage to more than 0.1 %.
    Failed,
    /// Stopped early (Ctrl-C); what was measured is kept.
    Interrupted,
    /// The server could not keep up: it completed clearly less than was offered, or its
    /// backlog grew through the run. A measurement of capacity, not a failure: the
    /// completion rate is what the server can do; latency percentiles grow with the run's
    /// length.
    Saturated,
}

impl RunStatus {
    /// Every status, in the order they are listed.
    pub const ALL: [RunStatus; 5] = [
        RunStatus::Ok,
        RunStatus::Invalid,
        RunStatus::Failed,
        RunStatus::Saturated,
        RunStatus::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Invalid => "invalid",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Saturated => "saturated",
        }
    }

    /// The outcome a stored row records, read as a run status: the one place lab reads a
    /// row's status. `None` for a row still running or abandoned, and for an outcome that is
    /// no run status (an experiment's "2 ok, 1 invalid", a foreign text).
    pub fn of_row(status: &store::RowStatus) -> Option<RunStatus> {
        status.outcome()?.parse().ok()
    }

    /// The process exit code a run with this status gives: 0 for a valid measurement (a
    /// saturated one included), 1 otherwise.
    pub fn exit_code(self) -> i32 {
        match self {
            RunStatus::Ok | RunStatus::Saturated => 0,
            _ => 1,
        }
    }
}

impl std::str::FromStr for RunStatus {
    type Err = String;

    /// The stored and printed name ([`RunStatus::as_str`]); anything else (a row still
    /// `running`, an experiment's "2 ok, 1 invalid") is no run status.
    fn from_str(s: &str) -> Result<RunStatus, String> {
        RunStatus::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("no run status '{s}'"))
    }
}

/// The row of a run that finished with this status.
impl From<RunStatus> for store::RowStatus {
    fn from(s: RunStatus) -> store::RowStatus {
        store::RowStatus::Finished(s.as_str().to_string())
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the load generator reported beside the records: the engine's own summary, for a
/// local run and for agents alike (theirs added up, see `crate::agents`).
pub type LoadFacts = load::RunSummary;

/// Why a run counts as saturated, and what is true of it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Saturation {
    /// Offered (with its 95 % interval) and completed rates: the completion rate is the
    /// capacity measured.
    pub offered_rps: f64,
    pub offered_lo_rps: f64,
    pub completed_rps: f64,
    /// The ideal's capacity (workers ÷ service time), to compare with.
    pub ideal_capacity_rps: Option<f64>,
    /// In flight plus held, mean over the first and the last third of the measured part.
    pub backlog_start: f64,
    pub backlog_end: f64,
    /// Completed clearly below offered; the backlog grew steadily.
    pub completion_short: bool,
    pub backlog_grew: bool,
    /// How long the backlog took to drain after the schedule ended, s.
    pub drain_s: f64,
}

pub use crate::tail_validity::ViewValidity;

/// A verdict per view, never masked by the other: the user's view (intended send →
/// received) is valid when the generator kept its schedule (its own lateness p99 within the
/// threshold); the server's view (sent → client kernel receive, its ideal from the actual
/// sends) when it exists and the offered load was sent (the achieved send rate is not below
/// the offered rate's 95 % interval), whatever the generator's lateness.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Views {
    pub user: ViewValidity,
    /// None when the run has no server view.
    pub server: Option<ViewValidity>,
    /// The view the user asked for (`run --view`; auto by default).
    pub asked: ViewChoice,
    /// The view the run's figures are read from: the one asked for, or under `auto` the
    /// user's when it is valid, else the server's when that is.
    pub headline: View,
    /// Which view is the headline and why, for a person.
    pub headline_why: String,
    /// Per percentile, whether each view stands behind it (see
    /// [`crate::tail_validity::percentiles_of`]); empty
    /// in runs stored before it was judged.
    #[serde(default)]
    pub percentiles: Vec<crate::tail_validity::PercentileValidity>,
}

impl Views {
    pub fn is_valid(&self, view: View) -> bool {
        match view {
            View::User => self.user.valid,
            View::Server => self.server.as_ref().is_some_and(|s| s.valid),
        }
    }

    /// One view's verdict on one percentile (None: not judged, as in runs stored before).
    pub fn percentile(&self, view: View, key: &str) -> Option<&ViewValidity> {
        let p = self.percentiles.iter().find(|p| p.key == key)?;
        match view {
            View::User => Some(&p.user),
            View::Server => p.server.as_ref(),
        }
    }

    /// Whether a view stands behind a percentile: the view is valid and, where the
    /// percentile was judged, so is it.
    pub fn percentile_valid(&self, view: View, key: &str) -> bool {
        self.is_valid(view) && self.percentile(view, key).is_none_or(|p| p.valid)
    }

    /// The percentiles a valid view does not stand behind (empty: it stands behind all
    /// those judged, or the view is invalid as a whole).
    pub fn invalid_percentiles(&self, view: View) -> Vec<&str> {
        if !self.is_valid(view) {
            return Vec::new();
        }
        self.percentiles
            .iter()
            .filter(|p| match view {
                View::User => !p.user.valid,
                View::Server => p.server.as_ref().is_some_and(|s| !s.valid),
            })
            .map(|p| p.key.as_str())
            .collect()
    }

    /// Per view, the judged percentiles it stands behind (an invalid view: none; a view
    /// the run does not have: null): `{"user": ["p50", "p90"], "server": [...]}`.
    pub fn stood_behind_json(&self) -> serde_json::Value {
        let of = |view: View| -> Vec<&str> {
            self.percentiles
                .iter()
                .filter(|p| self.percentile_valid(view, &p.key))
                .map(|p| p.key.as_str())
                .collect()
        };
        serde_json::json!({
            "user": of(View::User),
            "server": self.server.as_ref().map(|_| of(View::Server)),
        })
    }

    /// The percentiles a valid view does not stand behind, each with why (in the judged
    /// order).
    pub fn unstood(&self, view: View) -> Vec<(&str, &str)> {
        self.invalid_percentiles(view)
            .into_iter()
            .filter_map(|k| Some((k, self.percentile(view, k)?.why.as_str())))
            .collect()
    }

    /// "p50–p90 (not p99–p99.99)": the judged percentiles a valid view stands behind and
    /// those it does not, for the status line; None when it stands behind all or the view is
    /// invalid.
    pub fn stands_behind(&self, view: View) -> Option<String> {
        let bad = self.invalid_percentiles(view);
        if bad.is_empty() {
            return None;
        }
        let keys: Vec<&str> = self.percentiles.iter().map(|p| p.key.as_str()).collect();
        let good: Vec<&str> = keys.iter().copied().filter(|k| !bad.contains(k)).collect();
        // A run of neighbours in the judged order reads as "first–last".
        let span = |set: &[&str]| -> String {
            let at = |k: &str| keys.iter().position(|x| *x == k);
            let contiguous = set
                .windows(2)
                .all(|w| at(w[1]).zip(at(w[0])).is_some_and(|(b, a)| b == a + 1));
            match set {
                [] => "none".into(),
                [one] => one.to_string(),
                [first, .., last] if contiguous => format!("{first}–{last}"),
                _ => set.join(", "),
            }
        };
        Some(format!("{} (not {})", span(&good), span(&bad)))
    }

    /// A view the user asked for is valid (auto: either).
    pub fn asked_valid(&self) -> bool {
        match self.asked {
            ViewChoice::Auto => self.is_valid(View::User) || self.is_valid(View::Server),
            ViewChoice::User => self.is_valid(View::User),
            ViewChoice::Server => self.is_valid(View::Server),
        }
    }
}

/// Whose the generator's lateness is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LatenessCause {
    /// The host stalled the generator (the rate was kept: transient stalls).
    HostStalls,
    /// The generator could not keep the rate.
    GeneratorLimit,
    /// Not late (lateness p99 within the threshold).
    None,
}

impl LatenessCause {
    pub fn as_str(self) -> &'static str {
        match self {
            LatenessCause::HostStalls => "host-stalls",
            LatenessCause::GeneratorLimit => "generator-limit",
            LatenessCause::None => "none",
        }
    }
}

/// The lateness verdict: whose the generator's lateness is, and the evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatenessVerdict {
    pub cause: LatenessCause,
    pub why: String,
}

/// What [`judge`] needs beside the analysis.
#[derive(Clone, Debug, Default)]
pub struct JudgeInput<'a> {
    pub interrupted: bool,
    pub saturated: bool,
    pub asked: ViewChoice,
    pub lateness_threshold_ns: f64,
    /// The host's noise probed before the run (None: skipped or failed).
    pub host_noise: Option<&'a noise::HostNoise>,
    /// The generator's CPUs (empty: not pinned).
    pub generator_cpus: &'a [usize],
    /// Set when something beyond the lateness spoils the user's view (an agent behind its
    /// schedule taints the merged stream).
    pub user_late: Option<String>,
}

/// A run's verdicts: its status, its views, the lateness stated beside a status that is
/// not about validity, and whose the lateness is.
#[derive(Clone, Debug)]
pub struct Judgement {
    pub status: RunStatus,
    pub views: Views,
    pub status_note: Option<String>,
    pub lateness_verdict: LatenessVerdict,
}

fn fmt_ns(ns: f64) -> String {
    if ns.is_finite() {
        model::format_duration_ns(ns)
    } else {
        "-".into()
    }
}

fn lateness_p99(a: &RunAnalysis) -> f64 {
    a.lateness.get(P99).map_or(0.0, |e| e.value)
}

/// Requests per second skipped on purpose (`--overdue shed`) over the measured span.
fn skipped_rps(a: &RunAnalysis) -> f64 {
    match &a.throughput {
        Some(t) if t.span_s > 0.0 => a.outcomes.skipped as f64 / t.span_s,
        _ => 0.0,
    }
}

/// Whose the lateness is: the host's stalls when the generator kept the offered rate (its
/// lateness came in transient stalls; the probe before the run says whether the host's
/// gaps are of the same order as the lateness p99), the generator's own limit when it could
/// not keep the rate (achieved below the offered rate's 95 % interval) although no send
/// waited for a free connection (sends held by the server's backlog slow the rate too).
pub fn lateness_verdict_of(
    a: &RunAnalysis,
    threshold_ns: f64,
    host: Option<&noise::HostNoise>,
    generator_cpus: &[usize],
) -> LatenessVerdict {
    let p99 = lateness_p99(a);
    if !a.lateness_flagged {
        return LatenessVerdict {
            cause: LatenessCause::None,
            why: format!(
                "lateness p99 {} within the threshold {}",
                fmt_ns(p99),
                fmt_ns(threshold_ns)
            ),
        };
    }
    let (kept, rates) = match &a.throughput {
        Some(t) => (
            a.achieved_rate_rps + skipped_rps(a) >= t.offered_lo_rps,
            format!(
                "sent {:.0} req/s of {:.0} offered (95 % interval from {:.0})",
                a.achieved_rate_rps, t.offered_rps, t.offered_lo_rps
            ),
        ),
        None => (true, format!("sent {:.0} req/s", a.achieved_rate_rps)),
    };
    // Sends held for a free connection (the server's backlog) slow the send rate too: then
    // a short rate is not the generator's limit.
    let held = a
        .held_in_client
        .as_ref()
        .map_or(0.0, |h| h.fraction)
        .max(0.0);
    let (kept, rates) = if !kept && held > 0.01 {
        (
            true,
            format!(
                "{rates}, but {:.0} % of the sends waited for a free connection: the server's backlog, not the generator, held the rate down",
                100.0 * held
            ),
        )
    } else {
        (kept, rates)
    };
    // Gaps "of the same order" as the lateness p99: at least a quarter of it.
    let worst = host.map(|h| h.worst_gap_ns(generator_cpus));
    let noisy = worst.map(|w| w >= p99 / 4.0);
    let probe = match worst {
        Some(w) => format!(
            "the host's probe before the run saw gaps up to {}",
            fmt_ns(w)
        ),
        None => "no noise probe before the run".into(),
    };
    let (cause, why) = match (kept, noisy) {
        (true, Some(true)) => (
            LatenessCause::HostStalls,
            format!(
                "lateness p99 {}: the generator kept the rate ({rates}) and {probe}, the same order: the host stalled it",
                fmt_ns(p99)
            ),
        ),
        (true, _) => (
            LatenessCause::HostStalls,
            format!(
                "lateness p99 {}: the generator kept the rate ({rates}), so it was stalled now and then rather than limited; {probe} (the host's stalls come in bursts)",
                fmt_ns(p99)
            ),
        ),
        (false, Some(false)) => (
            LatenessCause::GeneratorLimit,
            format!(
                "lateness p99 {}: the host was quiet ({probe}) but the generator {rates}: its own limit (more --threads/--connections, or a lower rate)",
                fmt_ns(p99)
            ),
        ),
        (false, _) => (
            LatenessCause::GeneratorLimit,
            format!(
                "lateness p99 {}: the generator {rates}: it could not keep the rate ({probe})",
                fmt_ns(p99)
            ),
        ),
    };
    LatenessVerdict { cause, why }
}

/// The validity of each view (see [`Views`]) and the headline for the view asked.
pub fn views_of(
    a: &RunAnalysis,
    asked: ViewChoice,
    threshold_ns: f64,
    lateness: &LatenessVerdict,
    user_late: Option<&str>,
) -> Views {
    let p99 = lateness_p99(a);
    let whose = match lateness.cause {
        LatenessCause::GeneratorLimit => "its own limit",
        _ => "host stalls",
    };
    let user = match (a.lateness_flagged, user_late) {
        (true, _) => ViewValidity {
            valid: false,
            why: format!(
                "the generator was late ({whose}): lateness p99 {} above the threshold {}",
                fmt_ns(p99),
                fmt_ns(threshold_ns)
            ),
        },
        (false, Some(why)) => ViewValidity {
            valid: false,
            why: why.to_string(),
        },
        (false, None) => ViewValidity {
            valid: true,
            why: format!(
                "the generator kept its schedule: lateness p99 {} within the threshold {}",
                fmt_ns(p99),
                fmt_ns(threshold_ns)
            ),
        },
    };
    // Requests skipped on purpose (`--overdue shed`) thin the process the server sees; the
    // load asked for was sent when what went out and what was skipped make it up.
    let skipped_rps = skipped_rps(a);
    let thinned = if a.outcomes.skipped > 0 {
        format!(
            ", thinned by {} skipped ({:.2} %)",
            a.outcomes.skipped,
            100.0 * a.outcomes.skipped as f64 / a.requests.max(1) as f64
        )
    } else {
        String::new()
    };
    let server = a.server_view.as_ref().map(|_| match &a.throughput {
        Some(t) if a.achieved_rate_rps + skipped_rps >= t.offered_lo_rps => ViewValidity {
            valid: true,
            why: format!(
                "the offered load was sent: {:.0} req/s of {:.0} offered (95 % interval from {:.0}){thinned}",
                a.achieved_rate_rps, t.offered_rps, t.offered_lo_rps
            ),
        },
        Some(t) => ViewValidity {
            valid: false,
            why: format!(
                "the offered load was not sent: {:.0} req/s, below the offered {:.0} (95 % interval from {:.0})",
                a.achieved_rate_rps, t.offered_rps, t.offered_lo_rps
            ),
        },
        None => ViewValidity {
            valid: false,
            why: "no measured span to compare the send rate with".into(),
        },
    });
    let percentiles = crate::tail_validity::percentiles_of(a);
    let mut v = Views {
        user,
        server,
        asked,
        headline: View::User,
        headline_why: String::new(),
        percentiles,
    };
    let server_why = v
        .server
        .as_ref()
        .map_or("the run has no server view".to_string(), |s| s.why.clone());
    let (headline, why) = match asked {
        ViewChoice::User => (View::User, "asked for (--view user)".to_string()),
        ViewChoice::Server => (View::Server, "asked for (--view server)".to_string()),
        ViewChoice::Auto if v.user.valid => (View::User, "user view valid".to_string()),
        ViewChoice::Auto if v.is_valid(View::Server) => (
            View::Server,
            format!("user view invalid: {}; headline: server view", v.user.why),
        ),
        ViewChoice::Auto => (
            View::User,
            format!(
                "no view is valid: user view: {}; server view: {server_why}",
                v.user.why
            ),
        ),
    };
    v.headline = headline;
    v.headline_why = why;
    v
}

/// A run's verdicts from what was measured. Precedence: interrupted; then failed (nothing
/// answered, errors above 0.1 %, or more than 0.1 % lost without the server being
/// saturated — a target that died stops answering in the run's last third, which
/// [`saturation_of`] reads) and saturated, reported as such whatever the generator's
/// lateness (stated beside them in `status_note`); `ok` when a view asked for is valid;
/// `invalid` only when none is.
pub fn judge(a: &RunAnalysis, i: &JudgeInput<'_>) -> Judgement {
    let lateness = lateness_verdict_of(a, i.lateness_threshold_ns, i.host_noise, i.generator_cpus);
    let views = views_of(
        a,
        i.asked,
        i.lateness_threshold_ns,
        &lateness,
        i.user_late.as_deref(),
    );
    let status = status_of(i.interrupted, a, i.saturated, &views);
    let status_note = match status {
        RunStatus::Failed | RunStatus::Saturated | RunStatus::Interrupted if !views.user.valid => {
            Some(format!("generator also late: {}", views.user.why))
        }
        _ => None,
    };
    Judgement {
        status,
        views,
        status_note,
        lateness_verdict: lateness,
    }
}

/// The version of [`Run::encode`]'s form this build writes and reads (stored with it).
pub const RUN_ENCODING_VERSION: i64 = 1;

/// Largest nesting [`Run::decode`] follows (a run nests a handful of levels, plus the JSON
/// values it carries: its configuration and the server's facts).
const DECODE_DEPTH: usize = 128;

/// One measured run. `Serialize + Deserialize`: its serde form is what the store keeps
/// ([`Run::encode`]); `--json` prints [`Run::to_json`], the documented shape.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    pub run_id: Option<i64>,
    pub status: RunStatus,
    /// Beside a status that is not about validity (failed, saturated, interrupted): the
    /// generator was also late.
    pub status_note: Option<String>,
    /// The validity of each view and the headline.
    pub views: Views,
    /// Whose the generator's lateness is.
    pub lateness_verdict: LatenessVerdict,
    /// The host's noise probed just before the run (or its sweep); None when skipped.
    pub host_noise: Option<noise::HostNoise>,
    /// Whether this single run's intervals may be read as bounds on a repeat, and why not.
    pub reproducibility: crate::reproduce::Reproducibility,
    /// The target as the user named it.
    pub target: String,
    /// The target actually measured (a spawned server's address).
    pub url: String,
    /// Offered rate, req/s.
    pub rate_rps: f64,
    /// Seed of the schedule and the workload.
    pub seed: u64,
    /// The configuration stored with the run.
    pub config: crate::run_config::RunConfig,
    /// The server behind the target (spawned: version and command line).
    pub server: crate::server_facts::ServerFacts,
    /// Where the ideal's service time came from.
    pub ideal_source: Option<IdealSource>,
    pub analysis: RunAnalysis,
    /// Set when the run is saturated (and also computed, as evidence, for failed runs).
    pub saturation: Option<Saturation>,
    pub why: Option<attrib::Why>,
    pub load: LoadFacts,
    /// What ran beside the load, where, and what it cost.
    pub instruments: Vec<Instrument>,
    /// The agents that sent the load, when other hosts did.
    pub agents: Option<crate::agent_spec::AgentsReport>,
    /// A run asked to converge (`--precision`): whether it did, and after how long.
    pub convergence: Option<crate::converge::Convergence>,
    /// The host's time lost per window of the analysis (from the attribution sampler).
    pub window_host: Vec<crate::timeline::WindowHost>,
}

/// Saturation evidence from the analysis and the backlog samples (None: none at all).
pub fn saturation_of(
    a: &RunAnalysis,
    backlog: &[BacklogSample],
    warmup_ns: u64,
    drain_ns: u64,
) -> Option<Saturation> {
    let t = a.throughput.as_ref()?;
    let measured: Vec<f64> = backlog
        .iter()
        .filter(|b| b.t_ns >= warmup_ns)
        .map(|b| (b.in_flight + b.held) as f64)
        .collect();
    let third = measured.len() / 3;
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let (start, end) = if third > 0 {
        (
            mean(&measured[..third]),
            mean(&measured[measured.len() - third..]),
        )
    } else {
        (0.0, 0.0)
    };
    // Held requests in the last third and a backlog several times what it was: not the
    // random ups and downs of a queue below capacity.
    let held_late = backlog
        .iter()
        .filter(|b| b.t_ns >= warmup_ns)
        .skip(measured.len() - third)
        .any(|b| b.held > 0);
    let backlog_grew = third > 0 && held_late && end > 4.0 * start + 10.0;
    // Requests skipped on purpose (`--overdue shed`) were never the server's to complete.
    let completion_short = t.completed_rps + skipped_rps(a) < t.offered_lo_rps;
    // A saturated server keeps completing to the end; one that stopped answering died.
    let served_to_the_end = t.completed_end_rps >= 0.5 * t.completed_rps;
    ((completion_short || backlog_grew) && served_to_the_end).then(|| Saturation {
        offered_rps: t.offered_rps,
        offered_lo_rps: t.offered_lo_rps,
        completed_rps: t.completed_rps,
        ideal_capacity_rps: a
            .ideal_spec
            .as_ref()
            .map(|s| f64::from(s.workers) * 1e9 / s.service_ns),
        backlog_start: start,
        backlog_end: end,
        completion_short,
        backlog_grew,
        drain_s: drain_ns as f64 / 1e9,
    })
}

/// A run's status (see [`judge`] for the precedence).
pub fn status_of(interrupted: bool, a: &RunAnalysis, saturated: bool, views: &Views) -> RunStatus {
    let o = &a.outcomes;
    let lost = o.error + o.timeout + o.dropped;
    if interrupted {
        RunStatus::Interrupted
    } else if o.ok == 0 || o.error * 1000 > a.requests {
        RunStatus::Failed
    } else if saturated {
        RunStatus::Saturated
    } else if lost * 1000 > a.requests {
        // More than 0.1 % of the requests were lost without the server being saturated: the
        // target did not hold up (or died).
        RunStatus::Failed
    } else if !views.asked_valid() {
        RunStatus::Invalid
    } else {
        RunStatus::Ok
    }
}

/// Stores a finished run: its status, its summary ([`Run::to_json`]) and its typed form
/// ([`Run::encode`]), in one transaction. The run must have been begun in `st` (its
/// `run_id`).
pub fn store_run(st: &store::Store, run: &Run) -> Result<(), LabError> {
    let id = run
        .run_id
        .ok_or_else(|| LabError::Failed("a run without an id cannot be stored".into()))?;
    st.finish_run_typed(id, run.status.as_str(), &run.to_json(), &run.encode()?)?;
    Ok(())
}

/// Stored run `id` as a [`Run`]; `Ok(None)` when it has no typed form this build reads: it
/// was stored before typed runs, never finished, failed before it was analysed, or a newer
/// build encoded it (its JSON summary is then all there is). A typed form that does not
/// decode is an error.
pub fn load_run(st: &store::Store, id: i64) -> Result<Option<Run>, LabError> {
    match st.typed_run(id)? {
        Some(blob) => Run::decode(&blob),
        None => Ok(None),
    }
}

impl Run {
    /// The serde form of the whole run, as the store keeps it (see the module doc: CBOR,
    /// [`RUN_ENCODING_VERSION`]).
    pub fn encode(&self) -> Result<store::RunBlob, LabError> {
        let mut data = Vec::new();
        ciborium::into_writer(self, &mut data).map_err(|e| LabError::Encoding(e.to_string()))?;
        Ok(store::RunBlob {
            version: RUN_ENCODING_VERSION,
            data,
        })
    }

    /// A run from [`Run::encode`]'s form; `Ok(None)` for another version's (a newer build's).
    pub fn decode(blob: &store::RunBlob) -> Result<Option<Run>, LabError> {
        if blob.version != RUN_ENCODING_VERSION {
            return Ok(None);
        }
        ciborium::de::from_reader_with_recursion_limit(blob.data.as_slice(), DECODE_DEPTH)
            .map(Some)
            .map_err(|e| LabError::Encoding(e.to_string()))
    }

    /// The JSON object of a run (DESIGN.md's shapes; keys are only ever added).
    pub fn to_json(&self) -> Value {
        let a = &self.analysis;
        let o = &a.outcomes;
        let l = &self.load;
        let mut v = json!({
            "status": self.status,
            "run_id": self.run_id,
            "target": self.target,
            "url": self.url,
            "rate_rps": self.rate_rps,
            "seed": self.seed,
            "requests": a.requests,
            "achieved_rate_rps": a.achieved_rate_rps,
            "outcomes": {"ok": o.ok, "error": o.error, "timeout": o.timeout, "dropped": o.dropped, "skipped": o.skipped},
            "measured": a.measured.distribution_json(),
            "measured_ci": a.measured.intervals_json(),
            "classes": a.classes.iter().map(|c| json!({
                "class": c.class,
                "label": if c.class == 0 { "delay-sensitive" } else { "other" },
                "requests": c.requests,
                "measured": c.measured.distribution_json(),
            })).collect::<Vec<_>>(),
            "mean_us": a.measured.mean_ns / 1e3,
            "min_us": a.measured.min_ns / 1e3,
            "max_us": a.measured.max_ns / 1e3,
            "ideal": a.ideal.as_ref().map(|s| s.distribution_json()),
            "ideal_ci": a.ideal.as_ref().map(|s| s.intervals_json()),
            "ideal_spec": a.ideal_spec,
            "ideal_note": a.ideal_note,
            "ideal_source": self.ideal_source,
            "excess": a.excess_json(),
            "excess_ci": a.excess,
            "lateness": a.lateness.distribution_json(),
            "lateness_flagged": a.lateness_flagged,
            "views": self.views,
            "headline_view": self.views.headline,
            "stands_behind": self.views.stood_behind_json(),
            "threads": self.load.threads,
            "status_note": self.status_note,
            "lateness_verdict": self.lateness_verdict,
            "host_noise": self.host_noise,
            "reproducibility": self.reproducibility,
        });
        // Built in two parts: one json! of every key exceeds the macro's recursion limit.
        let rest = json!({
            "held_in_client": a.held_in_client.as_ref().map(|h| json!({
                "requests": h.requests,
                "fraction": h.fraction,
                "held": h.held.distribution_json(),
            })),
            "server_view": a.server_view.as_ref().map(|sv| json!({
                "measured": sv.measured.distribution_json(),
                "measured_ci": sv.measured.intervals_json(),
                "ideal": sv.ideal.as_ref().map(|s| s.distribution_json()),
                "ideal_ci": sv.ideal.as_ref().map(|s| s.intervals_json()),
                "ideal_note": sv.ideal_note,
                "excess": excess_json(&sv.excess),
                "excess_ci": sv.excess,
                "kernel_stamped_fraction": sv.kernel_stamped_fraction,
            })),
            "decomposition": a.decomposition.as_ref().map(|d| json!({
                "lateness": d.lateness.distribution_json(),
                "network_server": d.network_server.distribution_json(),
                "client_wakeup": d.client_wakeup.as_ref().map(|s| s.distribution_json()),
            })),
            "excess_split": a.excess_split,
            "throughput": a.throughput,
            "saturation": self.saturation,
            "ideal_transient": a.ideal_transient.as_ref().map(|s| s.distribution_json()),
            "drain_s": l.drain_ns as f64 / 1e9,
            "stamped_service_us": a.stamped_service_ns.map(|s| s / 1e3),
            "ideal_check": a.ideal_check,
            "arrival_check": a.arrival_check,
            "stages": a.stages,
            "why": self.why,
            "client_wakeup": a.client_wakeup.as_ref().map(|s| s.distribution_json()),
            "connection_errors": l.errors,
            "error_codes": l.error_codes,
            "connects": l.connects,
            "tls": l.tls,
            "misses": l.misses,
            "start_mono_ns": l.start_mono_ns,
            "warmup_ns": l.warmup_ns,
            "records": l.records,
            "backlog": l.backlog,
            "instruments": self.instruments,
            "server": self.server.to_json(),
            "convergence": self.convergence,
            "interval_method": a.interval_method,
            "windows": a.windows,
            "stationarity": a.stationarity,
            "entropy": a.entropy,
            "window_host": self.window_host,
        });
        if let (Value::Object(m), Value::Object(r)) = (&mut v, rest) {
            m.extend(r);
        }
        if let (Value::Object(m), Some(a)) = (&mut v, &self.agents) {
            m.insert("agents".into(), json!(a.agents));
            m.insert("agents_merged".into(), json!(a.merged));
            m.insert("agents_missing".into(), json!(a.missing));
            m.insert("agents_notes".into(), json!(a.notes));
            if let Some(e) = &a.error {
                m.insert("error".into(), json!(e));
            }
        }
        v
    }
}

/// `{"p50": ratio, ...}`.
fn excess_json(e: &[analysis::Excess]) -> Value {
    let mut m = serde_json::Map::new();
    for x in e {
        m.insert(x.key.clone(), json!(x.value));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::RowStatus;

    #[test]
    fn a_sweep_status_counts_its_points_and_reads_back_from_its_text() {
        use RunStatus::*;
        let cases = [
            (true, false, vec![Ok, Ok], SweepStatus::AllOk, "ok", Ok),
            (
                false,
                false,
                vec![Ok],
                SweepStatus::Failed,
                "failed",
                Failed,
            ),
            (
                true,
                true,
                vec![Ok],
                SweepStatus::Interrupted,
                "interrupted",
                Interrupted,
            ),
            (
                true,
                false,
                vec![Invalid, Ok, Ok],
                SweepStatus::Points(vec![(Ok, 2), (Invalid, 1)]),
                "2 ok, 1 invalid",
                Invalid,
            ),
            (
                true,
                false,
                vec![Saturated, Saturated, Saturated],
                SweepStatus::Points(vec![(Saturated, 3)]),
                "3 saturated",
                Saturated,
            ),
            (
                true,
                false,
                vec![Saturated, Failed, Invalid],
                SweepStatus::Points(vec![(Saturated, 1), (Invalid, 1), (Failed, 1)]),
                "1 saturated, 1 invalid, 1 failed",
                Failed,
            ),
        ];
        for (completed, interrupted, points, want, text, worst) in cases {
            let got = SweepStatus::of(completed, interrupted, &points);
            assert_eq!(got, want);
            assert_eq!(got.to_string(), text);
            assert_eq!(got.worst(), worst, "{text}");
            assert_eq!(got.stopped(), !completed || interrupted, "{text}");
            assert_eq!(
                text.parse::<SweepStatus>(),
                std::result::Result::Ok(want.clone())
            );
            let json = serde_json::to_value(&got).unwrap();
            assert_eq!(json, serde_json::json!(text));
            assert_eq!(serde_json::from_value::<SweepStatus>(json).unwrap(), want);
        }
        for bad in [
            "",
            "2 ok,",
            "0 ok",
            "two ok",
            "2 fine",
            "running",
            "2 ok,1 invalid",
        ] {
            assert!(bad.parse::<SweepStatus>().is_err(), "{bad:?}");
        }
    }

    /// The run's views say which percentiles they stand behind (`tail_validity::judge`'s
    /// verdicts on latencies with a late tail).
    #[test]
    fn views_list_the_percentiles_they_stand_behind() {
        use crate::tail_validity::{judge, late_tail_values, summary_of};
        let (user, lateness) = late_tail_values();
        let judged = judge(&summary_of(&user), &summary_of(&lateness), None, None, None);
        // The run's views say which percentiles they stand behind.
        let views = Views {
            user: ViewValidity {
                valid: true,
                why: String::new(),
            },
            server: Some(ViewValidity {
                valid: true,
                why: String::new(),
            }),
            asked: ViewChoice::Auto,
            headline: View::User,
            headline_why: String::new(),
            percentiles: judged,
        };
        let bad = views.invalid_percentiles(View::User);
        assert!(bad.contains(&"p99.9") && !bad.contains(&"p50"), "{bad:?}");
        let behind = views.stands_behind(View::User).unwrap();
        assert!(behind.starts_with("p50–"), "{behind}");
        assert!(
            behind.contains("(not ") && behind.contains("p99.9"),
            "{behind}"
        );
        assert!(!views.percentile_valid(View::User, "p99.9"));
        assert!(views.percentile_valid(View::User, "p50"));
        // A percentile not judged (a run stored before) stands with its view.
        assert!(views.percentile_valid(View::User, "p95"));
        // An invalid view lists none apart: the whole view is marked instead.
        let mut whole = views.clone();
        whole.user.valid = false;
        assert!(whole.invalid_percentiles(View::User).is_empty());
        assert!(!whole.percentile_valid(View::User, "p50"));
    }

    #[test]
    fn a_row_reads_as_a_run_status_only_when_finished_with_one() {
        for s in RunStatus::ALL {
            let row = RowStatus::from_text(s.as_str());
            assert_eq!(RunStatus::of_row(&row), Some(s));
        }
        assert_eq!(RunStatus::of_row(&RowStatus::Running), None);
        assert_eq!(RunStatus::of_row(&RowStatus::Abandoned), None);
        assert_eq!(RowStatus::from(RunStatus::Saturated).as_str(), "saturated");
        let counts = RowStatus::Finished("2 ok, 1 invalid".into());
        assert_eq!(RunStatus::of_row(&counts), None);
    }
}
