//! A run judged: whether the server saturated ([`saturation_of`]), which views of its latency
//! stand ([`views_of`], and the lateness verdict behind the user view), and its status
//! ([`status_of`]); [`judge`] makes all of it from the analysis.

use analysis::RunAnalysis;
use load::BacklogSample;
use serde::{Deserialize, Serialize};
use stats::P99;

use crate::status::RunStatus;
use crate::view::{View, ViewChoice};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
