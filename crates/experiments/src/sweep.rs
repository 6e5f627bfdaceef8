//! Sweeps: every figure of the seed papers is a comparison across configurations — latency
//! against offered load, the highest load meeting a p99 target, one knob against another. A
//! sweep is a loop over [`measure`]: the product of its axes (knobs), each at every offered
//! load, repeated; optionally a search for the highest load meeting an SLO and for the
//! highest open-loop rate the server keeps up with (ThunderX's "max RPS"). Every point is an
//! ordinary stored run; the sweep is stored as an experiment that groups them.
//!
//! Everything is validated before the first server starts: every combination's target and
//! load, every knob value, the SLO, and that a load given in % of capacity can know the
//! capacity. A spawned server is restarted (and recalibrated) only when a server knob
//! changes. Interrupting keeps the finished points and marks the experiment interrupted.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use analysis::IdealSpec;
use load::LoadConfig;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stats::Distribution;

use crate::knob::Axis;
use crate::repeat::{repeated, Repeated};
use crate::slo::{Slo, SloReport, Verdict};
use measurement::error::{invalid, LabError};
pub use measurement::load_spec::Load;
use measurement::measure::{check_load, measure, RunPlan};
use measurement::run_config::stored;
pub use measurement::run_config::Role;
use measurement::Db;
use measurement::Observer;
use measurement::RunTemplate;
use measurement::{stored_calibration, CalibrateSpec, IdealSource};
use measurement::{Ready, TargetPlan, TargetSpec};
use measurement::{Run, RunStatus, SweepStatus};

/// A sweep over loads and knob axes (and `demo`, which is one).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepConfig {
    pub axes: Vec<Axis>,
    pub loads: Vec<Load>,
    pub repeat: u32,
    pub slo: Option<Slo>,
    pub find_max: bool,
    pub max_steps: u32,
    /// What every point shares: the user's options.
    pub run: measurement::RunConfig,
    pub label: Option<String>,
}

/// A sweep.
#[derive(Clone, Debug)]
pub struct SweepPlan {
    /// What the store calls the experiment ("sweep", "demo", …).
    pub kind: String,
    pub template: RunTemplate,
    pub loads: Vec<Load>,
    pub axes: Vec<Axis>,
    /// Each point is run this many times (distinct derived seeds).
    pub repeat: u32,
    pub slo: Option<Slo>,
    /// Search the highest load meeting the SLO (and the highest rate kept up with).
    pub find_max: bool,
    /// Most runs per search.
    pub max_steps: u32,
    /// Run inside this (already begun) experiment instead of one of its own (a tuning walk's
    /// steps are sweeps of one experiment); it is then left for the caller to finish.
    pub experiment: Option<i64>,
    /// `--interleave`: after the grid, each combination of the axes compared at each load
    /// with the first combination, in paired slices (see `ab::within`).
    pub interleave: Option<crate::ab::Design>,
}

/// One row: one stored run. Its serde form is the row of `sweep --json`; distributions are
/// `{p50, …}` in µs (the excess: ratios), null when the point measured nothing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub run_id: Option<i64>,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    pub role: Role,
    pub load_pct: Option<f64>,
    pub offered_rps: f64,
    pub achieved_rps: f64,
    /// The rate the arrival schedule itself held over the measured span (its realisation:
    /// a Poisson schedule's count is off the nominal rate by ~1/sqrt(N), 4 % for a 0.6 s
    /// run at 1,000 req/s), what the send rate is held against by the max-RPS search. None
    /// for a failed point (and in rows stored before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_rps: Option<f64>,
    pub status: RunStatus,
    pub timeouts: u64,
    /// The user view's figures (`measured`, `ideal`, `excess`); the server view's in `server`.
    pub measured: Option<Distribution>,
    pub ideal: Option<Distribution>,
    pub excess: Option<Distribution>,
    /// The server view's measured, ideal and excess, when the run has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ViewFigures>,
    /// The view the run's figures are read from (its headline view).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<crate::slo::View>,
    /// The percentiles the headline view does not stand behind (issue 37; the run's
    /// `views.percentiles` says why): marked † in the table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unstood: Vec<String>,
    pub slo: Option<Verdict>,
    /// The SLO's judgement, condition by condition (of the run; for a search step measured
    /// several times, of its repeats combined). Not serialised: `slo` is the row's verdict.
    #[serde(skip)]
    pub slo_report: Option<SloReport>,
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub repeat: u32,
}

/// One view's figures of a run: measured, its ideal, the excess.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ViewFigures {
    pub measured: Distribution,
    pub ideal: Option<Distribution>,
    pub excess: Distribution,
}

impl Row {
    /// The figures of the row's headline view (the user's for rows stored before the
    /// headline was kept): measured, ideal, excess.
    pub fn headline_figures(
        &self,
    ) -> (
        Option<&Distribution>,
        Option<&Distribution>,
        Option<&Distribution>,
    ) {
        match (self.headline, &self.server) {
            (Some(crate::slo::View::Server), Some(s)) => {
                (Some(&s.measured), s.ideal.as_ref(), Some(&s.excess))
            }
            _ => (
                self.measured.as_ref(),
                self.ideal.as_ref(),
                self.excess.as_ref(),
            ),
        }
    }
}

/// One point of the grid (a combination at one load): its repeats combined — the median of
/// their estimates with an interval from their spread (see [`crate::repeat`]). Verdicts read
/// this, not a single repeat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub params: BTreeMap<String, String>,
    pub load_pct: Option<f64>,
    pub offered_rps: f64,
    /// Median of the repeats' achieved rates.
    pub achieved_rps: f64,
    pub result: Repeated,
    pub slo: Option<Verdict>,
    /// The SLO's judgement of the combined point, condition by condition (not serialised:
    /// `slo` is its verdict).
    #[serde(skip)]
    pub slo_report: Option<SloReport>,
}

/// The result of a search for the highest load meeting a criterion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bracket {
    pub offered_rps: f64,
    pub load_pct: Option<f64>,
    /// The highest rate that met and the lowest that did not (hi is null when none failed
    /// within the steps).
    pub bracket_rps: (f64, Option<f64>),
    pub steps: u32,
}

/// The max-load searches of one combination of the axes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MaxLoad {
    pub params: BTreeMap<String, String>,
    /// Highest load meeting the SLO (None without an SLO).
    pub slo: Option<String>,
    pub offered_rps: Option<f64>,
    pub load_pct: Option<f64>,
    pub bracket_rps: Option<(f64, Option<f64>)>,
    /// ThunderX's max RPS: the highest open-loop rate with achieved >= 99 % of offered and
    /// no timeouts.
    pub max_rps: Option<Bracket>,
    pub capacity_rps: Option<f64>,
}

/// What a sweep measured. Its serde form is `sweep --json`'s object (without `max_load`,
/// which [`SweepResult::to_json`] adds) and what the store keeps as the experiment's summary;
/// [`SweepResult::from_json`] reads that back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    pub experiment_id: i64,
    /// How the loop ended, or the count of each point status (stored as its text: "ok",
    /// "2 ok, 1 invalid").
    pub status: SweepStatus,
    pub slo: Option<Slo>,
    pub axes: Vec<Axis>,
    pub rows: Vec<Row>,
    /// The grid's points, each its repeats combined (one per combination and load).
    pub points: Vec<Point>,
    pub max_loads: Vec<MaxLoad>,
    /// With `--interleave`: each combination against the first, at each load, paired.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paired: Vec<crate::ab::Gain>,
}

impl SweepResult {
    /// The JSON object `sweep --json` prints and the experiment keeps.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        v["max_load"] = match self.max_loads.first() {
            Some(m) if self.max_loads.len() == 1 => serde_json::to_value(m).unwrap_or(Value::Null),
            _ => Value::Null,
        };
        v
    }

    /// A stored sweep summary ([`SweepResult::to_json`]) read back; keys a later build added
    /// are ignored, and so are `max_load` (derived from `max_loads`) and `error`.
    pub fn from_json(v: &Value) -> Result<SweepResult, LabError> {
        SweepResult::deserialize(v)
            .map_err(|e| LabError::Encoding(format!("a stored sweep summary: {e}")))
    }
}

/// One combination of the axes: its params and its validated target.
struct Combo {
    params: BTreeMap<String, String>,
    spec: TargetSpec,
    server_key: String,
    target: TargetPlan,
    load: LoadConfig,
}

fn combos(plan: &SweepPlan) -> Result<Vec<Combo>, LabError> {
    let mut idx = vec![0usize; plan.axes.len()];
    let mut out = Vec::new();
    loop {
        let mut t = plan.template.target.clone();
        let mut l = plan.template.load.clone();
        let mut params = BTreeMap::new();
        let mut server_key = String::new();
        for (a, &i) in plan.axes.iter().zip(&idx) {
            a.knobs[i].apply(&mut t, &mut l)?;
            params.insert(a.name.clone(), a.values[i].clone());
            if a.knobs[i].is_server() {
                server_key.push_str(&format!("{}={};", a.name, a.values[i]));
            }
        }
        out.push(Combo {
            params,
            server_key,
            target: TargetPlan::new(&t)?,
            spec: t,
            load: l,
        });
        // Next index, last axis fastest.
        let mut k = plan.axes.len();
        loop {
            if k == 0 {
                return Ok(out);
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < plan.axes[k].values.len() {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// The most points one sweep's grid may hold: 1,000 runs of a second each are already a
/// quarter of an hour; a list of loads pasted by mistake (`--loads 1,2,…,20000`) is refused
/// instead of running for hours without a word.
pub const MAX_POINTS: usize = 1000;

impl SweepPlan {
    /// Checks everything before anything starts (see the module doc).
    pub fn check(&self, db: &Path) -> Result<(), LabError> {
        if self.repeat == 0 {
            return Err(invalid("--repeat must be at least 1"));
        }
        for (i, a) in self.axes.iter().enumerate() {
            if self.axes[..i].iter().any(|b| b.name == a.name) {
                return Err(invalid(format!(
                    "--param {} is given twice: give its values once, --param {}=V1,V2,…",
                    measurement::clip(&a.name),
                    measurement::clip(&a.name)
                )));
            }
        }
        if self.loads.is_empty() && !self.find_max {
            return Err(invalid("give --loads, --find-max or both"));
        }
        let points = self.grid_points()?;
        if points > MAX_POINTS {
            let each = match self.template.load.stop {
                load::StopAt::Duration(d) => d + self.template.load.warmup,
                _ => std::time::Duration::ZERO,
            };
            let hours = points as f64 * each.as_secs_f64() / 3600.0;
            return Err(invalid(format!(
                "the sweep holds {points} points ({} configuration(s) × {} load(s) × {} repeat(s){}): at most {MAX_POINTS} in one sweep; give fewer --loads or split it",
                self.configurations()?,
                self.loads.len(),
                self.repeat,
                if hours > 0.0 {
                    format!(", about {hours:.1} h of runs")
                } else {
                    String::new()
                }
            )));
        }
        if self.interleave.is_some() {
            if self.axes.is_empty() || self.loads.is_empty() {
                return Err(invalid(
                    "--interleave compares the values of a knob at each load: give --param NAME=V1,V2,… and --loads",
                ));
            }
            if self.template.agents.is_some() {
                return Err(invalid(
                    "--interleave sends the load from this process: it does not go with --agent",
                ));
            }
        }
        if self.find_max && self.max_steps < 2 {
            return Err(invalid("--max-steps must be at least 2"));
        }
        for l in &self.loads {
            match *l {
                Load::Rps(r) if r > 0.0 && r <= load::MAX_RATE => {}
                Load::OfCapacity(f) if f > 0.0 && f.is_finite() => {}
                other => return Err(invalid(format!("--loads: bad load {other:?}"))),
            }
        }
        let combos = combos(self)?;
        let needs_capacity =
            self.find_max || self.loads.iter().any(|l| matches!(l, Load::OfCapacity(_)));
        for c in &combos {
            let mut l = c.load.clone();
            l.rate_per_s = self
                .loads
                .iter()
                .map(|l| match *l {
                    Load::Rps(r) => r,
                    Load::OfCapacity(_) => 1.0,
                })
                .fold(1.0, f64::max);
            check_load(&l, db)?;
            if l.connections < c.target.instances() {
                return Err(invalid(format!(
                    "{} connections cannot reach {} server instances: give --connections {} or more",
                    l.connections,
                    c.target.instances(),
                    c.target.instances()
                )));
            }
            if self.template.agents.is_some() && c.target.instances() > 1 {
                return Err(invalid(
                    "--server-instances above 1 spreads connections over several ports, which agents do not do yet; use one instance with --agent",
                ));
            }
            if let Some(st) = c.target.stress() {
                measurement::stress_cpus(st, &c.target.server_cpus(), &l.cpus)?;
            }
            if needs_capacity && self.template.service_ns.is_none() && !c.target.owns_server() {
                let stored = if db.exists() {
                    let st = store::Store::open(db)?;
                    stored_calibration(&st, &c.target.label)?.is_some()
                } else {
                    false
                };
                if !stored {
                    return Err(invalid(format!(
                        "loads in % of capacity and --find-max need {}'s capacity: run `tailscope calibrate {}` first, give --service, or --spawn the server",
                        c.target.label, c.target.label
                    )));
                }
            }
        }
        Ok(())
    }

    /// Configurations the axes make (their product; one when there are none).
    pub fn configurations(&self) -> Result<usize, LabError> {
        Ok(combos(self)?.len())
    }

    /// Points the grid holds (without the searches).
    pub fn grid_points(&self) -> Result<usize, LabError> {
        Ok(self.configurations()? * self.loads.len() * self.repeat as usize)
    }
}

/// The running state of a sweep.
struct Ctx<'a> {
    plan: &'a SweepPlan,
    db: &'a Db,
    stop: &'a AtomicBool,
    obs: &'a dyn Observer,
    experiment: i64,
    points: u64,
    planned: usize,
    started: std::time::Instant,
    rows: Vec<Row>,
    grid: Vec<Point>,
}

/// A started target and its ideal.
struct Live {
    ready: Ready,
    key: String,
    ideal: Option<(IdealSpec, IdealSource)>,
}

impl Ctx<'_> {
    fn capacity(&self, live: &Live) -> Option<f64> {
        live.ideal
            .as_ref()
            .map(|(i, _)| f64::from(i.workers) * 1e9 / i.service_ns)
    }

    /// One measured point, and its run when it measured one.
    fn point_run(
        &mut self,
        combo: &Combo,
        live: &Live,
        rate: f64,
        role: Role,
        repeat: u32,
    ) -> Result<(Row, Option<Run>), LabError> {
        let t = &self.plan.template;
        let mut load = combo.load.clone();
        load.rate_per_s = rate;
        load.seed = load::derive_seed(t.load.seed, self.points);
        self.points += 1;
        let capacity = self.capacity(live);
        let load_pct = capacity.map(|c| 100.0 * rate / c);
        let eta = if self.points > 1 && self.planned >= self.points as usize {
            let per = self.started.elapsed().as_secs_f64() / (self.points - 1) as f64;
            format!(
                ", about {:.0} s left",
                per * (self.planned + 1 - self.points as usize) as f64
            )
        } else {
            String::new()
        };
        let params: Vec<String> = combo
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        self.obs.note(&format!(
            "point {} of {}: {}{:.0} req/s{} ({role}){eta}",
            self.points,
            self.planned.max(self.points as usize),
            params.iter().map(|p| format!("{p} ")).collect::<String>(),
            rate,
            load_pct.map(|p| format!(" ({p:.0} %)")).unwrap_or_default(),
        ));
        let config = measurement::RunConfig {
            params: Some(
                combo
                    .params
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect(),
            ),
            rate_rps: Some(rate),
            load_pct,
            role: Some(role),
            seed: Some(load.seed),
            server: Some(live.ready.server_facts()),
            ..t.config.clone()
        };
        let seed = load.seed;
        let plan = RunPlan {
            kind: "run".into(),
            load,
            ideal: live.ideal.as_ref().map(|(i, _)| i.clone()),
            ideal_source: live.ideal.as_ref().map(|(_, s)| s.clone()),
            confidence: t.confidence,
            lateness_threshold_ns: t.lateness_threshold_ns,
            attribution: t.attribution,
            server_cpus: t.server_cpus.clone(),
            extra_pids: t.extra_pids.clone(),
            config,
            experiment: Some(self.experiment),
            // eBPF stages for a spawned server when the host supports them, as `run`.
            stages: measurement::StagesMode::default(),
            stages_budget: measurement::StagesBudget::default(),
            agents: t.agents.clone(),
            precision: t.precision.clone(),
            extra_quantiles: t.extra_quantiles.clone(),
        };
        let (row, run) = match measure(&plan, &live.ready, self.db, self.stop, self.obs) {
            Ok(run) => {
                self.obs.run_done(&run);
                (self.row(&run, combo, role, load_pct, repeat), Some(run))
            }
            // A point that measured nothing is a failed row, not the end of the sweep.
            Err(LabError::RunFailed {
                run_id, summary, ..
            }) => {
                let summary: crate::summary::RunSummary = crate::summary::read(&summary);
                (
                    Row {
                        run_id: Some(run_id),
                        params: combo.params.clone(),
                        role,
                        load_pct,
                        offered_rps: rate,
                        achieved_rps: 0.0,
                        scheduled_rps: None,
                        status: if summary.status == Some(RunStatus::Interrupted) {
                            RunStatus::Interrupted
                        } else {
                            RunStatus::Failed
                        },
                        timeouts: summary.outcomes.and_then(|o| o.timeout).unwrap_or(0),
                        measured: None,
                        ideal: None,
                        excess: None,
                        server: None,
                        headline: None,
                        unstood: Vec::new(),
                        slo: self.plan.slo.as_ref().map(|_| Verdict::Violates),
                        slo_report: None,
                        seed,
                        repeat,
                    },
                    None,
                )
            }
            Err(e) => return Err(e),
        };
        self.rows.push(row.clone());
        Ok((row, run))
    }

    /// The repeats of one load point combined, with the SLO's verdict of the combination.
    fn combine(
        &self,
        combo: &Combo,
        rate: f64,
        load_pct: Option<f64>,
        rows: &[Row],
        runs: &[Run],
    ) -> Point {
        let refs: Vec<&Run> = runs.iter().collect();
        let mut result = repeated(&refs, self.plan.template.confidence);
        // Repeats that measured nothing (failed before a run existed) count as failed.
        for r in rows.iter().filter(|r| r.measured.is_none()) {
            result.repeats += 1;
            result.run_ids.push(r.run_id);
            result.statuses.push(r.status);
            if r.status == RunStatus::Failed {
                result.status = RunStatus::Failed;
            }
        }
        let achieved = upper_median(rows.iter().map(|r| r.achieved_rps).collect());
        let report = self
            .plan
            .slo
            .as_ref()
            .map(|s| s.evaluate_repeated(&result, &refs));
        Point {
            params: combo.params.clone(),
            load_pct,
            offered_rps: rate,
            achieved_rps: achieved.unwrap_or(0.0),
            slo: report.as_ref().map(|r| r.verdict),
            slo_report: report,
            result,
        }
    }

    /// One step of a search: the point measured `repeat` times in a row, its repeats
    /// combined; the row returned carries the combination's status and verdict.
    fn step(&mut self, combo: &Combo, live: &Live, rate: f64, role: Role) -> Result<Row, LabError> {
        let n = self.plan.repeat.max(1);
        let mut rows = Vec::new();
        let mut runs = Vec::new();
        for rep in 0..n {
            if rep > 0 && self.stop.load(Ordering::Relaxed) {
                break;
            }
            let (row, run) = self.point_run(combo, live, rate, role, rep)?;
            rows.push(row);
            runs.extend(run);
        }
        let mut row = rows
            .last()
            .cloned()
            .ok_or_else(|| invalid("a search step ran no repeat"))?;
        if n > 1 {
            let p = self.combine(combo, rate, row.load_pct, &rows, &runs);
            row.status = p.result.status;
            row.slo = p.slo;
            row.slo_report = p.slo_report;
            row.achieved_rps = p.achieved_rps;
            // The repeats' realised schedules, combined as their achieved rates are.
            row.scheduled_rps = rows
                .iter()
                .map(|r| r.scheduled_rps)
                .collect::<Option<Vec<f64>>>()
                .and_then(upper_median);
            row.timeouts = rows.iter().map(|r| r.timeouts).sum();
        }
        Ok(row)
    }

    fn row(&self, run: &Run, combo: &Combo, role: Role, load_pct: Option<f64>, repeat: u32) -> Row {
        let a = &run.analysis;
        let report = self.plan.slo.as_ref().map(|s| s.evaluate(run));
        Row {
            run_id: run.run_id,
            params: combo.params.clone(),
            role,
            load_pct,
            offered_rps: run.rate_rps,
            achieved_rps: a.achieved_rate_rps,
            scheduled_rps: a.throughput.as_ref().map(|t| t.offered_rps),
            status: run.status,
            timeouts: a.outcomes.timeout,
            measured: Some(a.measured.distribution()),
            ideal: a.ideal.as_ref().map(stats::Summary::distribution),
            excess: Some(a.excess.iter().map(|e| (e.key.clone(), e.value)).collect()),
            server: a.server_view.as_ref().map(|sv| ViewFigures {
                measured: sv.measured.distribution(),
                ideal: sv.ideal.as_ref().map(stats::Summary::distribution),
                excess: sv.excess.iter().map(|e| (e.key.clone(), e.value)).collect(),
            }),
            headline: Some(run.views.headline),
            unstood: run
                .views
                .invalid_percentiles(run.views.headline)
                .into_iter()
                .map(String::from)
                .collect(),
            slo: report.as_ref().map(|r| r.verdict),
            slo_report: report,
            seed: run.seed,
            repeat,
        }
    }

    /// Starts (or keeps) the combination's server, and its ideal.
    fn live(&mut self, combo: &Combo, prev: Option<Live>) -> Result<Live, LabError> {
        if let Some(mut p) = prev {
            // No server knob changed: the same server (and its calibration) serves on.
            if p.key == combo.server_key {
                // The stressor beside it is not a server knob: this combination's.
                p.ready.set_stress(combo.target.stress().cloned());
                return Ok(p);
            }
            p.ready.stop()?;
        }
        let ready = combo.target.start(self.stop, self.obs)?;
        let t = &self.plan.template;
        let ask = measurement::IdealAsk {
            service_ns: t.service_ns,
            workers: t.workers,
            queues: t.queues,
            calibrate: CalibrateSpec {
                cpus: combo.load.cpus.clone(),
                agents: t.agents.clone(),
                ..t.calibrate.clone()
            },
            calibrated_as: "calibration".into(),
            stored: true,
            announce: false,
        };
        Ok(Live {
            ideal: measurement::resolve_ideal(&ready, &ask, self.db, self.stop, self.obs)?,
            key: combo.server_key.clone(),
            ready,
        })
    }

    /// Bracket then bisect (geometrically) the highest rate for which `meets` holds, each
    /// step a full run; ends when the bracket is within 2 % or after `max_steps` runs.
    /// `known` is a rate already seen to meet: the search starts above it.
    fn search(
        &mut self,
        combo: &Combo,
        live: &Live,
        start: f64,
        known: Option<f64>,
        role: Role,
        meets: &dyn Fn(&Row) -> bool,
    ) -> Result<Bracket, LabError> {
        let (mut lo, mut hi): (Option<f64>, Option<f64>) = (known, None);
        let mut steps = 0u32;
        let mut rate = known.map_or(start, |l| l * 1.5);
        while steps < self.plan.max_steps && !self.stop.load(Ordering::Relaxed) {
            let row = self.step(combo, live, rate, role)?;
            steps += 1;
            if meets(&row) {
                lo = Some(rate);
            } else {
                hi = Some(rate);
            }
            rate = match (lo, hi) {
                (Some(l), None) => l * 1.5,
                (None, Some(h)) => h / 2.0,
                (Some(l), Some(h)) => {
                    if h / l <= 1.02 {
                        break;
                    }
                    (l * h).sqrt()
                }
                (None, None) => break,
            };
            if !(1.0..=load::MAX_RATE).contains(&rate) {
                break;
            }
        }
        let best = lo.unwrap_or(0.0);
        Ok(Bracket {
            offered_rps: best,
            load_pct: self.capacity(live).map(|c| 100.0 * best / c),
            bracket_rps: (best, hi),
            steps,
        })
    }
}

/// Runs the sweep (check it first with [`SweepPlan::check`]).
pub fn sweep(
    plan: &SweepPlan,
    db: &Db,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<SweepResult, LabError> {
    let combos = combos(plan)?;
    let experiment = match plan.experiment {
        Some(e) => e,
        None => db.store.begin_experiment(&store::NewExperiment {
            kind: plan.kind.clone(),
            started_at: store::now_rfc3339(),
            config: stored(&SweepConfig {
                axes: plan.axes.clone(),
                loads: plan.loads.clone(),
                repeat: plan.repeat,
                slo: plan.slo.clone(),
                find_max: plan.find_max,
                max_steps: plan.max_steps,
                run: plan.template.config.clone(),
                label: plan.template.config.label.clone(),
            }),
        })?,
    };
    let mut ctx = Ctx {
        plan,
        db,
        stop,
        obs,
        experiment,
        points: 0,
        planned: plan.grid_points()?,
        started: std::time::Instant::now(),
        rows: Vec::new(),
        grid: Vec::new(),
    };
    let mut max_loads = Vec::new();
    let mut outcome = run_all(&mut ctx, &combos, &mut max_loads);
    let mut paired = Vec::new();
    if let (Ok(()), Some(design)) = (&outcome, &plan.interleave) {
        outcome = interleave(&ctx, &combos, design, &mut paired);
    }
    let statuses: Vec<RunStatus> = ctx.rows.iter().map(|r| r.status).collect();
    let status = SweepStatus::of(outcome.is_ok(), stop.load(Ordering::Relaxed), &statuses);
    let result = SweepResult {
        experiment_id: experiment,
        status: status.clone(),
        slo: plan.slo.clone(),
        axes: plan.axes.clone(),
        rows: std::mem::take(&mut ctx.rows),
        points: std::mem::take(&mut ctx.grid),
        max_loads,
        paired,
    };
    if plan.experiment.is_none() {
        let mut summary = result.to_json();
        if let Err(e) = &outcome {
            summary["error"] = json!(e.to_string());
        }
        db.store
            .finish_experiment(experiment, &status.to_string(), &summary)?;
    }
    outcome.map(|()| result)
}

/// `--interleave`: at each load of the first combination, every other combination compared
/// in paired slices, at the first's rate, with the first combination that has the same
/// stressor (`stress=` is not compared this way: the arms of a comparison share one). A comparison that fails is noted and the
/// others go on; the grid's rows stand either way.
fn interleave(
    ctx: &Ctx<'_>,
    combos: &[Combo],
    design: &crate::ab::Design,
    out: &mut Vec<crate::ab::Gain>,
) -> Result<(), LabError> {
    let Some(first) = combos.first() else {
        return Ok(());
    };
    let mut rates: Vec<f64> = Vec::new();
    for p in ctx.grid.iter().filter(|p| p.params == first.params) {
        if p.offered_rps > 0.0 && !rates.iter().any(|r| (r - p.offered_rps).abs() < 1e-6) {
            rates.push(p.offered_rps);
        }
    }
    let text = |c: &Combo| {
        c.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let t = &ctx.plan.template;
    let arm = |c: &Combo| crate::ab::TemplateArm {
        text: text(c),
        target: c.spec.clone(),
        load: c.load.clone(),
        config: measurement::RunConfig {
            params: Some(
                c.params
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect(),
            ),
            ..t.config.clone()
        },
    };
    for &rate in &rates {
        for (i, c) in combos.iter().enumerate() {
            // Against the first combination with the same stressor (a stressor runs through
            // both arms of a comparison alike, so only its absence or presence is not
            // compared this way).
            let Some(base) = combos[..i]
                .iter()
                .find(|b| b.target.stress() == c.target.stress())
            else {
                continue;
            };
            if ctx.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let g = crate::ab::compare_templates(
                t,
                [arm(base), arm(c)],
                rate,
                design,
                None,
                ctx.db,
                ctx.stop,
                ctx.obs,
            )?;
            ctx.obs
                .note(&format!("paired: {} {}", g.candidate, g.stopped));
            out.push(g);
        }
    }
    Ok(())
}

fn run_all(
    ctx: &mut Ctx<'_>,
    combos: &[Combo],
    max_loads: &mut Vec<MaxLoad>,
) -> Result<(), LabError> {
    let mut live: Option<Live> = None;
    let result = (|| {
        for combo in combos {
            if ctx.stop.load(Ordering::Relaxed) {
                break;
            }
            let l = ctx.live(combo, live.take())?;
            let l = live.insert(l);
            let capacity = ctx.capacity(l);
            let mut rates = Vec::new();
            for load in &ctx.plan.loads {
                rates.push(match (*load, capacity) {
                    (Load::Rps(r), _) => r,
                    (Load::OfCapacity(f), Some(c)) => f * c,
                    (Load::OfCapacity(_), None) => {
                        return Err(invalid(format!(
                            "{}: no capacity known for a load in %",
                            combo.target.label
                        )))
                    }
                });
            }
            // Repeats interleaved (1, 2, 3, 1, 2, 3, …): a drift of the host is spread over
            // every point instead of landing on one.
            let mut rows: Vec<Vec<Row>> = vec![Vec::new(); rates.len()];
            let mut runs: Vec<Vec<Run>> = vec![Vec::new(); rates.len()];
            'grid: for rep in 0..ctx.plan.repeat {
                for (i, &rate) in rates.iter().enumerate() {
                    if ctx.stop.load(Ordering::Relaxed) {
                        break 'grid;
                    }
                    let (row, run) = ctx.point_run(combo, l, rate, Role::Load, rep)?;
                    rows[i].push(row);
                    runs[i].extend(run);
                }
            }
            for (i, &rate) in rates.iter().enumerate() {
                if rows[i].is_empty() {
                    continue;
                }
                let pct = capacity.map(|c| 100.0 * rate / c);
                let p = ctx.combine(combo, rate, pct, &rows[i], &runs[i]);
                ctx.grid.push(p);
            }
            if ctx.plan.find_max && !ctx.stop.load(Ordering::Relaxed) {
                max_loads.push(find_max(ctx, combo, l, capacity)?);
            }
        }
        Ok(())
    })();
    if let Some(l) = live {
        let stopped = l.ready.stop();
        result?;
        stopped?;
        return Ok(());
    }
    result
}

/// The upper median of `v` (the middle value; of two, the higher), None when empty: how a
/// point's repeats combine their achieved and scheduled rates.
fn upper_median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// ThunderX's max-RPS criterion: the run is ok, nothing timed out, and the generator sent at
/// least 99 % of what the schedule asked. "Asked" is the schedule's own realisation over the
/// measured span, not the nominal rate: against the nominal rate a short Poisson run falls
/// short by its count's noise alone (0.6 s at 2,300 req/s: ±2.7 %), and the search then
/// walked down to a tenth of a load the server had just kept up with.
fn kept_up(r: &Row) -> bool {
    let asked = r.scheduled_rps.unwrap_or(r.offered_rps);
    r.status == RunStatus::Ok && r.timeouts == 0 && r.achieved_rps >= 0.99 * asked
}

/// How many times a max-load search goes on above a check that met.
const CHECK_RESUMES: u32 = 2;

/// The two searches of one combination, and the check above the SLO's result.
fn find_max(
    ctx: &mut Ctx<'_>,
    combo: &Combo,
    live: &Live,
    capacity: Option<f64>,
) -> Result<MaxLoad, LabError> {
    let start = capacity.map_or(1000.0, |c| 0.5 * c);
    let mut out = MaxLoad {
        params: combo.params.clone(),
        slo: ctx.plan.slo.as_ref().map(|s| s.text.clone()),
        offered_rps: None,
        load_pct: None,
        bracket_rps: None,
        max_rps: None,
        capacity_rps: capacity,
    };
    if ctx.plan.slo.is_some() {
        let meets = |r: &Row| r.slo == Some(Verdict::Meets);
        let mut b = ctx.search(combo, live, start, None, Role::Search, &meets)?;
        // The answer is the highest load that met: 30 % more must not. A check that meets
        // says a step below it was unlucky (a stall of the host, not the load), so the
        // search goes on above the check's rate, at most twice. A last check that still
        // meets is itself the highest load known to meet, with nothing tried above it.
        for resumed in 0..=CHECK_RESUMES {
            if b.offered_rps <= 0.0 || ctx.stop.load(Ordering::Relaxed) {
                break;
            }
            let check = 1.3 * b.offered_rps;
            let row = ctx.step(combo, live, check, Role::Check)?;
            if !meets(&row) {
                break;
            }
            if resumed == CHECK_RESUMES {
                b = Bracket {
                    offered_rps: check,
                    load_pct: ctx.capacity(live).map(|c| 100.0 * check / c),
                    bracket_rps: (check, None),
                    steps: b.steps,
                };
                break;
            }
            b = ctx.search(combo, live, start, Some(check), Role::Search, &meets)?;
        }
        out.offered_rps = Some(b.offered_rps);
        out.load_pct = b.load_pct;
        out.bracket_rps = Some(b.bracket_rps);
    }
    if !ctx.stop.load(Ordering::Relaxed) {
        out.max_rps = Some(ctx.search(combo, live, start, None, Role::MaxRps, &kept_up)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution as _, Poisson};

    fn row(offered: f64, achieved: f64, scheduled: Option<f64>) -> Row {
        Row {
            run_id: None,
            params: BTreeMap::new(),
            role: Role::MaxRps,
            load_pct: None,
            offered_rps: offered,
            achieved_rps: achieved,
            scheduled_rps: scheduled,
            status: RunStatus::Ok,
            timeouts: 0,
            measured: None,
            ideal: None,
            excess: None,
            server: None,
            headline: None,
            unstood: Vec::new(),
            slo: None,
            slo_report: None,
            seed: 0,
            repeat: 0,
        }
    }

    /// A generator that sends every request its Poisson schedule holds keeps up, however far
    /// the schedule's count falls from the nominal rate; against the nominal rate, a 0.6 s
    /// run at 2,300 req/s (the case the max-RPS search met) fails about a third of the time.
    #[test]
    fn a_run_that_sent_its_whole_schedule_kept_up() {
        let (rate, span) = (2_300.0, 0.6);
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let counts = Poisson::new(rate * span).unwrap();
        let (mut nominal_fails, n) = (0, 2_000);
        for _ in 0..n {
            let sent: f64 = counts.sample(&mut rng) / span;
            assert!(kept_up(&row(rate, sent, Some(sent))));
            nominal_fails += usize::from(!kept_up(&row(rate, sent, None)));
        }
        // P(N < 0.99 λt) for N ~ Poisson(1380): about 0.35.
        let share = nominal_fails as f64 / n as f64;
        assert!((0.28..0.42).contains(&share), "{share}");
        // Sending less than the schedule asked is not keeping up; neither is a timeout.
        assert!(!kept_up(&row(rate, 2_000.0, Some(2_300.0))));
        let mut timed_out = row(rate, 2_300.0, Some(2_300.0));
        timed_out.timeouts = 1;
        assert!(!kept_up(&timed_out));
    }
}
