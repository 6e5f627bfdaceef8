//! The tuning walk of Tales of the Tail (§4, the paper's headline: a naive memcached becomes a
//! tuned one by removing one source of tail latency at a time): a baseline, then one
//! mitigation added per step, cumulatively, in the paper's order — realtime scheduling for
//! the server, a single queue, interrupts away from the server's CPUs, NUMA binding, holding
//! C0, the performance governor. Each step is a sweep of one point (and, with an SLO, a
//! search for the highest load meeting it: the throughput a mitigation costs or buys), all in
//! one stored experiment. A step this host cannot express is listed as skipped with the
//! reason. Every host change goes through `host::mitigate`: journalled before it is made,
//! reverted at the end (also when the walk fails), and on the next start if tailscope died.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use host::mitigate::{self, Applied, Journal, Mitigation};
use host::probe::HostRoot;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::slo::{Slo, SloReport};
use crate::sweep::{sweep, Load, SweepPlan};
use measurement::error::{invalid, LabError};
use measurement::run_config::stored;
use measurement::Db;
use measurement::Observer;
use measurement::RunTemplate;
use measurement::{ExperimentStatus, RunStatus};

/// One mitigation of the walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TuneStepKind {
    /// The server's threads in the realtime FIFO class (Tales §4.2: FIFO order of wake-ups,
    /// and nothing else on the CPU runs before them).
    Rt,
    /// One queue for all workers (Tales §4.3): memcached over UDP; the built-in server's
    /// dispatcher.
    Udp,
    /// Interrupts of the network cards away from the server's CPUs (Tales §4.4).
    Irq,
    /// The server's memory and threads on one NUMA node (Tales §4.5).
    Numa,
    /// Every CPU held in C0 (`/dev/cpu_dma_latency` = 0; Tales §4.6).
    Cstate,
    /// The performance frequency governor (Tales §4.6).
    Governor,
}

impl TuneStepKind {
    pub const ALL: [TuneStepKind; 6] = [
        TuneStepKind::Rt,
        TuneStepKind::Udp,
        TuneStepKind::Irq,
        TuneStepKind::Numa,
        TuneStepKind::Cstate,
        TuneStepKind::Governor,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TuneStepKind::Rt => "rt",
            TuneStepKind::Udp => "udp",
            TuneStepKind::Irq => "irq",
            TuneStepKind::Numa => "numa",
            TuneStepKind::Cstate => "cstate",
            TuneStepKind::Governor => "governor",
        }
    }
}

impl std::str::FromStr for TuneStepKind {
    type Err = LabError;
    fn from_str(s: &str) -> Result<TuneStepKind, LabError> {
        TuneStepKind::ALL
            .into_iter()
            .find(|x| x.name() == s.trim())
            .ok_or_else(|| {
                invalid(format!(
                    "--steps: unknown step '{}' (one of rt, udp, irq, numa, cstate, governor)",
                    measurement::clip(s)
                ))
            })
    }
}

impl TuneStepKind {
    /// `rt,udp,…` (`tune --steps`): at least one step, no empty item, none twice.
    pub fn parse_list(text: &str) -> Result<Vec<TuneStepKind>, LabError> {
        const ALL: &str = "rt, udp, irq, numa, cstate, governor";
        if text.trim().is_empty() {
            return Err(invalid(format!(
                "--steps: no step given (one or more of {ALL}, joined by commas)"
            )));
        }
        let mut steps: Vec<TuneStepKind> = Vec::new();
        for item in text.split(',').map(str::trim) {
            if item.is_empty() {
                return Err(invalid(format!(
                    "--steps: an empty item in '{}' (steps are joined by single commas, e.g. rt,udp)",
                    measurement::clip(text)
                )));
            }
            let step = item.parse::<TuneStepKind>()?;
            if steps.contains(&step) {
                return Err(invalid(format!(
                    "--steps: '{}' is given twice (each mitigation is a step once)",
                    measurement::clip(item)
                )));
            }
            steps.push(step);
        }
        Ok(steps)
    }
}

/// A tuning walk.
#[derive(Clone, Debug)]
pub struct TunePlan {
    pub template: RunTemplate,
    /// The load every step runs at.
    pub load: Load,
    pub steps: Vec<TuneStepKind>,
    pub slo: Option<Slo>,
    pub max_steps: u32,
    /// Where the host's /proc and /sys are read and written (tests use fixture trees), and
    /// where the journal of host changes lives.
    pub root: PathBuf,
    pub journal_dir: PathBuf,
    /// `--interleave`: each step's gain also measured paired against the step before it.
    pub interleave: Option<crate::ab::Design>,
}

/// One step of the walk, as reported.
#[derive(Clone, Debug, Serialize)]
pub struct TuneStep {
    pub name: String,
    /// What this step changed (empty for the baseline).
    pub changes: Vec<String>,
    pub skipped: Option<String>,
    pub run_id: Option<i64>,
    pub status: Option<RunStatus>,
    pub measured: Option<stats::Distribution>,
    pub ideal: Option<stats::Distribution>,
    pub excess: Option<stats::Distribution>,
    pub max_load_rps: Option<f64>,
    pub max_load_pct: Option<f64>,
    /// The SLO's judgement of this step at the walk's load, condition by condition.
    pub slo: Option<SloReport>,
    /// With `--interleave`: this step against the step measured before it, in paired
    /// slices (its gain as a ratio with its interval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired: Option<crate::ab::Gain>,
    /// Why the paired comparison could not be made, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired_error: Option<String>,
}

impl TuneResult {
    /// The configuration the walk ends with (every step that ran applied): its last measured
    /// step. The gate of `tune --slo` reads it.
    pub fn tuned(&self) -> Option<&TuneStep> {
        self.steps.iter().rev().find(|s| s.skipped.is_none())
    }
}

/// The walk.
#[derive(Clone, Debug, Serialize)]
pub struct TuneResult {
    pub experiment_id: i64,
    pub status: ExperimentStatus,
    pub steps: Vec<TuneStep>,
}

/// What a step does on this host, or why it cannot.
enum Action {
    /// Changes to the server's spec (a restart): described, and applied to the template.
    Spec(String),
    /// A host change through `host::mitigate`.
    Host(Mitigation),
    Skip(String),
}

fn action(
    step: TuneStepKind,
    t: &mut RunTemplate,
    root: &HostRoot,
    server_cpus: &[usize],
) -> Action {
    let scheme = t.target.url.split("://").next().unwrap_or("").to_string();
    match step {
        TuneStepKind::Rt => match t.target.spawn.as_mut() {
            Some(s) => {
                s.sched = Some(host::placement::SchedSpec::Fifo { prio: 50 });
                Action::Spec("server threads: SCHED_FIFO priority 50".into())
            }
            None => Action::Skip("the server is not spawned by tailscope (--spawn)".into()),
        },
        TuneStepKind::Udp => match (scheme.as_str(), t.target.spawn.as_mut()) {
            ("memcached", Some(_)) => {
                t.target.url = t.target.url.replacen("memcached://", "memcached+udp://", 1);
                Action::Spec("memcached over UDP: one socket, one queue for every thread".into())
            }
            ("nullrpc", Some(s)) => {
                s.arch = Some(server::Arch::Dispatch);
                Action::Spec(
                    "built-in server: a dispatcher feeding the workers from one queue".into(),
                )
            }
            ("memcached+udp", _) => Action::Skip("already one queue (UDP)".into()),
            ("redis", _) => Action::Skip("Redis serves from one thread: already one queue".into()),
            ("http", _) => Action::Skip(
                "nginx's workers each accept their own connections: it offers no single queue"
                    .into(),
            ),
            (_, None) => Action::Skip("the server is not spawned by tailscope (--spawn)".into()),
            (other, _) => Action::Skip(format!("no single-queue mode for {other}")),
        },
        TuneStepKind::Irq => {
            let Some(irqs) = host::probe::nic_irqs(root) else {
                return Action::Skip("no /proc/interrupts to read".into());
            };
            if irqs.is_empty() {
                return Action::Skip("no network-card interrupts on this host".into());
            }
            if server_cpus.is_empty() {
                return Action::Skip("the server's CPUs are not known (--server-cpus)".into());
            }
            let online = host::probe::online_cpus(root).unwrap_or_default();
            if online.iter().all(|c| server_cpus.contains(c)) {
                return Action::Skip(
                    "no CPU is left for the interrupts besides the server's".into(),
                );
            }
            Action::Host(Mitigation::IrqAffinityAway {
                irqs: irqs.iter().map(|i| i.irq).collect(),
                from_cpus: server_cpus.to_vec(),
            })
        }
        TuneStepKind::Numa => match t.target.spawn.as_mut() {
            None => Action::Skip("the server is not spawned by tailscope (--spawn)".into()),
            Some(s) if s.numa.is_some() => {
                Action::Skip("the server's memory policy is already set (--server-numa)".into())
            }
            Some(s) => {
                // The node of the server's CPUs (node 0 when they are not pinned): memory
                // local to where it runs. On a one-node host this is real too: the policy
                // shows in /proc/PID/numa_maps, and allocations can never go remote.
                let nodes = host::numa::Nodes::read(root);
                let node = server_cpus
                    .first()
                    .and_then(|&c| nodes.node_of_cpu(c))
                    .or_else(|| nodes.nodes.first().map(|n| n.0))
                    .unwrap_or(0);
                s.numa = Some(host::numa::NumaPolicy::Bind(node));
                Action::Spec(format!(
                    "server memory bound to NUMA node {node} (set_mempolicy MPOL_BIND) and its CPUs to that node's ({} node(s) on this host)",
                    nodes.nodes.len()
                ))
            }
        },
        TuneStepKind::Cstate => {
            if root.list("sys/devices/system/cpu/cpu0/cpuidle").is_empty() {
                Action::Skip(
                    "no cpuidle states on this host (nothing deeper than C0 to leave)".into(),
                )
            } else {
                Action::Host(Mitigation::CpuDmaLatencyZero)
            }
        }
        TuneStepKind::Governor => {
            if root.list("sys/devices/system/cpu/cpu0/cpufreq").is_empty() {
                Action::Skip("no cpufreq on this host (no governor to set)".into())
            } else {
                Action::Host(Mitigation::Governor {
                    cpus: server_cpus.to_vec(),
                    to: "performance".into(),
                })
            }
        }
    }
}

/// Runs the walk. Host changes are reverted when it ends (or fails).
pub fn tune(
    plan: &TunePlan,
    db: &Db,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<TuneResult, LabError> {
    let root = HostRoot::new(&plan.root);
    let journal = Journal::in_dir(&plan.journal_dir);
    if journal.path().exists() {
        let n = mitigate::revert_leftovers(&root, &journal)
            .map_err(|e| LabError::Failed(format!("reverting a dead run's host changes: {e}")))?;
        if n > 0 {
            obs.note(&format!(
                "reverted {n} host change(s) left by a tailscope that died"
            ));
        }
    }
    let experiment = db.store.begin_experiment(&store::NewExperiment {
        kind: "tune".into(),
        started_at: store::now_rfc3339(),
        config: stored(&TuneConfig {
            steps: plan.steps.clone(),
            load: plan.load,
            slo: plan.slo.clone(),
            run: plan.template.config.clone(),
        }),
    })?;
    let mut applied: Vec<Applied> = Vec::new();
    let mut steps = Vec::new();
    let ctx = Walk {
        plan,
        db,
        stop,
        obs,
        root: &root,
        journal: &journal,
        experiment,
    };
    let outcome = walk(&ctx, &mut applied, &mut steps);
    // Every host change is undone, newest first, whatever happened.
    let mut revert_error = None;
    while let Some(a) = applied.pop() {
        if let Err(e) = a.revert() {
            revert_error.get_or_insert(e);
        }
    }
    let status = ExperimentStatus::of(&outcome, stop.load(Ordering::Relaxed));
    let result = TuneResult {
        experiment_id: experiment,
        status,
        steps,
    };
    let mut summary = serde_json::to_value(&result).unwrap_or(Value::Null);
    if let Err(e) = &outcome {
        summary["error"] = json!(e.to_string());
    }
    db.store
        .finish_experiment(experiment, status.as_str(), &summary)?;
    outcome?;
    if let Some(e) = revert_error {
        return Err(LabError::Failed(format!(
            "reverting the walk's host changes: {e}"
        )));
    }
    Ok(result)
}

/// What the walk reads: the plan, the store, the stop flag, the observer, the host it
/// changes (and the journal of those changes), and its experiment.
struct Walk<'a> {
    plan: &'a TunePlan,
    db: &'a Db,
    stop: &'a AtomicBool,
    obs: &'a dyn Observer,
    root: &'a HostRoot,
    journal: &'a Journal,
    experiment: i64,
}

/// The steps in order, each measured (or skipped, with why); the host changes applied so far
/// are kept in `applied` for the caller to revert whatever happens.
fn walk(
    ctx: &Walk<'_>,
    applied: &mut Vec<Applied>,
    out: &mut Vec<TuneStep>,
) -> Result<(), LabError> {
    let Walk {
        plan,
        db,
        stop,
        obs,
        root,
        journal,
        experiment,
    } = *ctx;
    let mut template = plan.template.clone();
    let server_cpus: Vec<usize> = match template.target.spawn.as_ref() {
        Some(s) if !s.cpus.is_empty() => s.cpus.clone(),
        _ => template.server_cpus.clone(),
    };
    let mut todo: Vec<Option<TuneStepKind>> = vec![None];
    todo.extend(plan.steps.iter().copied().map(Some));
    // The step measured last (its name, template and rate), for `--interleave`.
    let mut prev: Option<(String, RunTemplate, f64)> = None;
    for step in todo {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let name = step.map_or("baseline", TuneStepKind::name).to_string();
        let mut changes = Vec::new();
        let mut host_change: Option<Mitigation> = None;
        if let Some(step) = step {
            match action(step, &mut template, root, &server_cpus) {
                Action::Skip(why) => {
                    obs.note(&format!("tune: {name} skipped: {why}"));
                    out.push(TuneStep {
                        name,
                        changes,
                        skipped: Some(why),
                        run_id: None,
                        status: None,
                        measured: None,
                        ideal: None,
                        excess: None,
                        max_load_rps: None,
                        max_load_pct: None,
                        slo: None,
                        paired: None,
                        paired_error: None,
                    });
                    continue;
                }
                Action::Spec(what) => changes.push(what),
                Action::Host(m) => {
                    let a = Applied::apply(root, journal, std::slice::from_ref(&m), false)
                        .map_err(|e| LabError::Failed(format!("tune {name}: {m}: {e}")))?;
                    changes.extend(a.changes().iter().map(|c| {
                        if c.file.ends_with("cpu_dma_latency") {
                            // A device held open with a binary 0, not a text setting.
                            "/dev/cpu_dma_latency held open at 0 µs (every CPU stays in C0)"
                                .to_string()
                        } else {
                            format!("/{}: {} → {}", c.file.display(), c.old.trim(), c.new.trim())
                        }
                    }));
                    applied.push(a);
                    host_change = Some(m);
                }
            }
        }
        obs.note(&format!(
            "tune: {name}{}",
            if changes.is_empty() {
                String::new()
            } else {
                format!(" ({})", changes.join("; "))
            }
        ));
        let mut t = template.clone();
        t.config.tune_step = Some(name.to_string());
        t.config.tune_changes = Some(changes.clone());
        let sweep_plan = SweepPlan {
            kind: "tune".into(),
            template: t,
            loads: vec![plan.load],
            axes: Vec::new(),
            repeat: 1,
            slo: plan.slo.clone(),
            find_max: plan.slo.is_some(),
            max_steps: plan.max_steps,
            experiment: Some(experiment),
            interleave: None,
        };
        let r = sweep(&sweep_plan, db, stop, obs)?;
        let row = r.rows.iter().find(|r| r.role == crate::sweep::Role::Load);
        let max = r.max_loads.first();
        let (mut paired, mut paired_error) = (None, None);
        if let (Some(design), Some((prev_name, prev_t, rate))) = (&plan.interleave, &prev) {
            if !stop.load(Ordering::Relaxed) {
                let mut t_prev = prev_t.clone();
                if host_change.is_some() {
                    // The step changed only the host: both arms are this template.
                    t_prev = template.clone();
                }
                match paired_step(
                    ctx,
                    applied,
                    (prev_name, &t_prev),
                    (&name, &template),
                    host_change.as_ref(),
                    *rate,
                    design,
                ) {
                    Ok(g) => paired = Some(g),
                    Err(e) => {
                        obs.note(&format!("tune: {name}: the paired comparison failed: {e}"));
                        paired_error = Some(e.to_string());
                    }
                }
            }
        }
        if let Some(rate) = row.map(|r| r.offered_rps).filter(|r| *r > 0.0) {
            prev = Some((name.clone(), template.clone(), rate));
        }
        out.push(TuneStep {
            name,
            changes,
            skipped: None,
            run_id: row.and_then(|r| r.run_id),
            status: row.map(|r| r.status),
            measured: row.and_then(|r| r.measured.clone()),
            ideal: row.and_then(|r| r.ideal.clone()),
            excess: row.and_then(|r| r.excess.clone()),
            max_load_rps: max.and_then(|m| m.offered_rps),
            max_load_pct: max.and_then(|m| m.load_pct),
            slo: row.and_then(|r| r.slo_report.clone()),
            paired,
            paired_error,
        });
    }
    Ok(())
}

/// The paired comparison of step `now` against step `prev` at `rate` (the earlier step's):
/// two servers side by side when the step changed the server, else one server with the
/// step's host change `host` switched on for the candidate's slices and off for the
/// baseline's (it is left on, as the walk goes on with it).
fn paired_step(
    ctx: &Walk<'_>,
    applied: &mut Vec<Applied>,
    prev: (&str, &RunTemplate),
    now: (&str, &RunTemplate),
    host: Option<&Mitigation>,
    rate: f64,
    design: &crate::ab::Design,
) -> Result<crate::ab::Gain, LabError> {
    let arm = |(name, t): (&str, &RunTemplate)| crate::ab::TemplateArm {
        text: name.to_string(),
        target: t.target.clone(),
        load: t.load.clone(),
        config: measurement::RunConfig {
            tune_step: Some(name.to_string()),
            ..t.config.clone()
        },
    };
    let arms = [arm(prev), arm(now)];
    let Some(m) = host else {
        return crate::ab::compare_templates(
            now.1, arms, rate, design, None, ctx.db, ctx.stop, ctx.obs,
        );
    };
    let mut on = true;
    let mut switch = |a: crate::ab::Arm| -> Result<(), String> {
        let want = a == crate::ab::Arm::Candidate;
        if want != on {
            if want {
                let a = Applied::apply(ctx.root, ctx.journal, std::slice::from_ref(m), false)
                    .map_err(|e| format!("{m}: {e}"))?;
                applied.push(a);
            } else if let Some(a) = applied.pop() {
                a.revert().map_err(|e| format!("reverting {m}: {e}"))?;
            }
            on = want;
        }
        Ok(())
    };
    let out = crate::ab::compare_templates(
        now.1,
        arms,
        rate,
        design,
        Some(&mut switch),
        ctx.db,
        ctx.stop,
        ctx.obs,
    );
    // The walk goes on with the step's change made.
    switch(crate::ab::Arm::Candidate).map_err(LabError::Failed)?;
    out
}

impl TunePlan {
    /// Checks the walk before anything starts: the host root is a directory, the target a
    /// server tailscope starts, and the walk's first (baseline) sweep passes a sweep's checks
    /// (every step's server must be startable).
    pub fn check(&self, db: &std::path::Path) -> Result<(), LabError> {
        if !self.root.is_dir() {
            return Err(invalid(format!(
                "--root {} is not a directory",
                measurement::clip(&self.root.display().to_string())
            )));
        }
        check_tunable(&self.template)?;
        SweepPlan {
            kind: "tune".into(),
            template: self.template.clone(),
            loads: vec![self.load],
            axes: Vec::new(),
            repeat: 1,
            slo: self.slo.clone(),
            find_max: self.slo.is_some(),
            max_steps: self.max_steps,
            experiment: None,
            interleave: None,
        }
        .check(db)
    }
}

/// Whether a template's target is one tune can walk: a server tailscope starts.
pub fn check_tunable(t: &RunTemplate) -> Result<(), LabError> {
    if t.target.spawn.is_none() {
        return Err(invalid(
            "tune restarts the server between steps: give --spawn (memcached://, http://, redis://, nullrpc://)",
        ));
    }
    Ok(())
}

/// The tuning walk.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TuneConfig {
    pub steps: Vec<TuneStepKind>,
    pub load: Load,
    pub slo: Option<Slo>,
    pub run: measurement::RunConfig,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_given_once_each() {
        assert_eq!(
            TuneStepKind::parse_list(" rt, udp ").unwrap(),
            vec![TuneStepKind::Rt, TuneStepKind::Udp]
        );
        for bad in ["", " ", "rt,", ",rt", "rt,,udp", "rt,rt", "rt,bogus"] {
            let e = TuneStepKind::parse_list(bad).unwrap_err();
            assert!(e.is_invalid(), "{bad}");
            assert!(e.to_string().contains("--steps"), "{bad}: {e}");
        }
    }
}
