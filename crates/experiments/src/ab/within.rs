//! The `ab` design inside tailscope's own loops: a tuning step against the step before it
//! (`tune --interleave`), a knob value against its axis's first value (`sweep
//! --interleave`). Each is a paired comparison as `ab` makes it — short slices of the two
//! configurations alternating in counterbalanced order with the same arrivals per pair — so
//! a drift of the host lands on both alike, and each gain comes with its interval.
//!
//! A configuration that differs in the server's own flags is a second server started beside
//! the first, on the same CPUs (only one is loaded at a time); one that differs in a host
//! setting shares the one server, and the setting is switched before each slice (a write to
//! `/proc` or `/sys`, far shorter than a slice's settle time).

use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use super::compare::{compare_planned, AbOutcome, Design, PlannedArm, Switch};
use super::paired::{AbRow, Arm};
use measurement::error::{invalid, LabError};
use measurement::view::View;
use measurement::Db;
use measurement::Observer;
use measurement::RunPlan;
use measurement::RunTemplate;
use measurement::{Ready, TargetPlan, TargetSpec};

/// One configuration of a paired comparison inside a loop.
#[derive(Clone, Debug)]
pub struct TemplateArm {
    /// What it is, for a person (a step's name, a knob's value).
    pub text: String,
    pub target: TargetSpec,
    pub load: load::LoadConfig,
    /// As stored with its run (the step or the knob's params).
    pub config: measurement::RunConfig,
}

/// A paired comparison's outcome as a loop reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gain {
    /// The configuration compared against (the baseline arm), and the one judged.
    pub against: String,
    pub candidate: String,
    /// The stored `ab` experiment (`report --experiment`, `check --experiment` read it).
    pub experiment: i64,
    /// How the two were kept apart: two servers side by side, or a host setting switched.
    pub how: String,
    pub rate_rps: f64,
    pub pairs: u32,
    pub decided: bool,
    pub stopped: String,
    /// The view read, and its rows (candidate ÷ baseline with the interval and verdict).
    pub view: View,
    pub decide: Vec<String>,
    pub rows: Vec<AbRow>,
    pub elapsed_s: f64,
}

impl Gain {
    fn of(out: &AbOutcome, how: &str) -> Gain {
        let r = &out.result;
        Gain {
            against: r.baseline.spec.clone(),
            candidate: r.candidate.spec.clone(),
            experiment: r.experiment,
            how: how.to_string(),
            rate_rps: r.rate_rps,
            pairs: r.pairs,
            decided: r.decided,
            stopped: r.stopped.clone(),
            view: r.decided_view,
            decide: r.decide.clone(),
            rows: r
                .rows
                .iter()
                .filter(|x| x.view == r.decided_view)
                .cloned()
                .collect(),
            elapsed_s: r.elapsed_s,
        }
    }

    /// The row of a percentile.
    pub fn row(&self, percentile: &str) -> Option<&AbRow> {
        self.rows.iter().find(|r| r.percentile == percentile)
    }
}

/// The run `RunTemplate` `t` makes of arm `a` at `rate` against `ready` (as a sweep's point,
/// without an ideal: the loop's own runs carry it; these only give the ratio).
fn plan_of(t: &RunTemplate, a: &TemplateArm, rate: f64, ready: &Ready) -> RunPlan {
    let mut load = a.load.clone();
    load.rate_per_s = rate;
    RunPlan {
        kind: "ab-arm".into(),
        load,
        ideal: None,
        ideal_source: None,
        confidence: t.confidence,
        lateness_threshold_ns: t.lateness_threshold_ns,
        attribution: false,
        server_cpus: t.server_cpus.clone(),
        extra_pids: t.extra_pids.clone(),
        config: measurement::RunConfig {
            rate_rps: Some(rate),
            server: Some(ready.server_facts()),
            ..a.config.clone()
        },
        experiment: None,
        stages: measurement::StagesMode::Stamps,
        stages_budget: measurement::StagesBudget::default(),
        agents: None,
        precision: None,
        extra_quantiles: t.extra_quantiles.clone(),
    }
}

/// Compares `arms` (baseline first) at `rate` in paired slices. With `switch` both share the
/// baseline's server and `switch` sets the host up for each arm's slices; otherwise each arm
/// gets a server of its own, both started before the first pair and stopped after the last.
#[allow(clippy::too_many_arguments)]
pub fn compare_templates(
    t: &RunTemplate,
    arms: [TemplateArm; 2],
    rate: f64,
    design: &Design,
    switch: Option<Switch<'_>>,
    db: &Db,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<Gain, LabError> {
    if t.agents.is_some() {
        return Err(invalid(
            "--interleave sends the load from this process: it does not go with --agent",
        ));
    }
    let (pb, pc) = (
        TargetPlan::new(&arms[0].target)?,
        TargetPlan::new(&arms[1].target)?,
    );
    if pb.stress() != pc.stress() {
        return Err(invalid(format!(
            "'{}' and '{}' differ in their stressor: a stressor runs through both arms of a paired comparison alike",
            arms[0].text, arms[1].text
        )));
    }
    let shared = switch.is_some();
    let how = if shared {
        "one server; the host setting switched before each slice"
    } else {
        "two servers side by side on the same CPUs, one loaded at a time"
    };
    obs.note(&format!(
        "paired: '{}' against '{}' at {rate:.0} req/s ({how})",
        arms[1].text, arms[0].text
    ));
    let b = pb.start(stop, obs)?;
    let c = if shared {
        None
    } else {
        match pc.start(stop, obs) {
            Ok(r) => Some(r),
            Err(e) => {
                let _ = b.stop();
                return Err(e);
            }
        }
    };
    let ready = [&b, c.as_ref().unwrap_or(&b)];
    let [a0, a1] = &arms;
    let planned = [
        PlannedArm {
            arm: Arm::Baseline,
            text: a0.text.clone(),
            plan: plan_of(t, a0, rate, ready[0]),
            ready: ready[0],
        },
        PlannedArm {
            arm: Arm::Candidate,
            text: a1.text.clone(),
            plan: plan_of(t, a1, rate, ready[1]),
            ready: ready[1],
        },
    ];
    let out = compare_planned(design, planned, switch, db, stop, obs);
    let stopped_c = c.map(Ready::stop);
    let stopped_b = b.stop();
    let out = out?;
    stopped_b?;
    if let Some(s) = stopped_c {
        s?;
    }
    Ok(Gain::of(&out, how))
}
