//! [`Run`]: one measured run, the type every view consumes — the terminal printer, `--json`,
//! the store's summary, exports and (later) reports.

use analysis::RunAnalysis;
use load::{BacklogSample, WriterStats};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::instruments::Instrument;

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Measured and valid.
    Ok,
    /// Measured, but the generator fell behind its schedule (its own lateness p99 above the
    /// threshold): the user's view counts the generator's stalls.
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
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Invalid => "invalid",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Saturated => "saturated",
        }
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

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the load generator reported beside the records.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LoadFacts {
    pub start_mono_ns: u64,
    pub warmup_ns: u64,
    /// Scheduled requests (records stored).
    pub records: u64,
    pub errors: Vec<String>,
    pub connects: u64,
    pub misses: u64,
    pub backlog: Vec<BacklogSample>,
    pub drain_ns: u64,
    pub writer: WriterStats,
}

/// Why a run counts as saturated, and what is true of it.
#[derive(Clone, Debug, Serialize)]
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

/// One measured run.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub run_id: Option<i64>,
    pub status: RunStatus,
    /// The target as the user named it.
    pub target: String,
    /// The target actually measured (a spawned server's address).
    pub url: String,
    /// Offered rate, req/s.
    pub rate_rps: f64,
    /// Seed of the schedule and the workload.
    pub seed: u64,
    /// The configuration stored with the run.
    pub config: Value,
    /// The server behind the target (spawned: version and command line).
    pub server: Value,
    /// Where the ideal's service time came from.
    pub ideal_source: Option<crate::IdealSource>,
    pub analysis: RunAnalysis,
    /// Set when the run is saturated (and also computed, as evidence, for failed runs).
    pub saturation: Option<Saturation>,
    pub why: Option<attrib::Why>,
    pub load: LoadFacts,
    /// What ran beside the load, where, and what it cost.
    pub instruments: Vec<Instrument>,
    /// The agents that sent the load, when other hosts did.
    pub agents: Option<crate::AgentsReport>,
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
    let completion_short = t.completed_rps < t.offered_lo_rps;
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

/// A run's status from what was measured: a target that failed (errors, or nothing
/// answered) fails; a generator that fell behind makes the run invalid; a server that could
/// not keep up makes it saturated (its timeouts and drops are then the backlog's, not a
/// failure); any other loss of more than 0.1 % fails it.
pub fn status_of(interrupted: bool, a: &RunAnalysis, saturated: bool) -> RunStatus {
    let o = &a.outcomes;
    let lost = o.error + o.timeout + o.dropped;
    if interrupted {
        RunStatus::Interrupted
    } else if o.ok == 0 || o.error * 1000 > a.requests {
        RunStatus::Failed
    } else if a.lateness_flagged {
        RunStatus::Invalid
    } else if saturated {
        RunStatus::Saturated
    } else if lost * 1000 > a.requests {
        // More than 0.1 % of the requests were lost without the server being saturated: the
        // target did not hold up (or died).
        RunStatus::Failed
    } else {
        RunStatus::Ok
    }
}

impl Run {
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
            "outcomes": {"ok": o.ok, "error": o.error, "timeout": o.timeout, "dropped": o.dropped},
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
            "connects": l.connects,
            "misses": l.misses,
            "start_mono_ns": l.start_mono_ns,
            "warmup_ns": l.warmup_ns,
            "records": l.records,
            "backlog": l.backlog,
            "instruments": self.instruments,
            "server": self.server,
            "convergence": self.convergence,
            "interval_method": a.interval_method,
            "windows": a.windows,
            "stationarity": a.stationarity,
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
