//! Colocation (ThunderX Fig. 11): two services on one host, each under its own
//! grid of offered loads; for every pair of loads both are measured at once, and the QoS
//! matrix says which of them meets its SLO. Each service is first calibrated alone (its
//! loads in % are of its own capacity), then every cell runs the two measurements
//! concurrently, each a stored run of one experiment.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use analysis::IdealSpec;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stats::P99;

use crate::slo::{SloReport, Verdict};
use crate::sweep::{Load, SweepPlan};
use measurement::error::{invalid, LabError};
use measurement::measure::{measure, RunPlan};
use measurement::run_config::stored;
use measurement::Db;
use measurement::IdealSource;
use measurement::Observer;
use measurement::{ExperimentStatus, RunStatus};
use measurement::{Ready, TargetPlan};

/// One cell of the matrix.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    pub load_a: Load,
    pub load_b: Load,
    pub rate_a_rps: f64,
    pub rate_b_rps: f64,
    pub run_a: Option<i64>,
    pub run_b: Option<i64>,
    pub status_a: Option<RunStatus>,
    pub status_b: Option<RunStatus>,
    pub p99_a_us: Option<f64>,
    pub p99_b_us: Option<f64>,
    pub slo_a: Option<Verdict>,
    pub slo_b: Option<Verdict>,
    /// Each side's judgement by its SLO, condition by condition (none for a run that never
    /// started).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report_a: Option<SloReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report_b: Option<SloReport>,
    /// "both", "a", "b" or "neither" meet their SLO (the paper's cell shading).
    pub meets: String,
}

/// The QoS matrix.
#[derive(Clone, Debug, Serialize)]
pub struct Colocation {
    pub experiment_id: i64,
    pub status: ExperimentStatus,
    pub a: String,
    pub b: String,
    pub cells: Vec<Cell>,
}

/// One service's side: its plan and what it needs during the cells.
struct Side<'a> {
    plan: &'a SweepPlan,
    ready: Ready,
    ideal: Option<(IdealSpec, IdealSource)>,
}

impl Side<'_> {
    fn rate(&self, l: Load) -> Result<f64, LabError> {
        match (l, &self.ideal) {
            (Load::Rps(r), _) => Ok(r),
            (Load::OfCapacity(f), Some((i, _))) => {
                Ok(f * f64::from(i.workers) * 1e9 / i.service_ns)
            }
            (Load::OfCapacity(_), None) => Err(invalid(format!(
                "{}: a load in % needs the capacity (--service or --spawn)",
                self.ready.label
            ))),
        }
    }

    fn run_plan(&self, rate: f64, experiment: i64, cell: usize) -> RunPlan {
        let t = &self.plan.template;
        let mut load = t.load.clone();
        load.rate_per_s = rate;
        load.seed = load::derive_seed(t.load.seed, cell as u64);
        let config = measurement::RunConfig {
            colocation_cell: Some(cell as u64),
            rate_rps: Some(rate),
            ..t.config.clone()
        };
        RunPlan {
            precision: None,
            extra_quantiles: Vec::new(),
            kind: "run".into(),
            load,
            ideal: self.ideal.as_ref().map(|(i, _)| i.clone()),
            ideal_source: self.ideal.as_ref().map(|(_, s)| s.clone()),
            confidence: t.confidence,
            lateness_threshold_ns: t.lateness_threshold_ns,
            attribution: false,
            server_cpus: t.server_cpus.clone(),
            extra_pids: t.extra_pids.clone(),
            config,
            experiment: Some(experiment),
            // Two services measured at once: no eBPF collector beside them (as no sampler).
            stages: measurement::StagesMode::Stamps,
            stages_budget: measurement::StagesBudget::default(),
            agents: t.agents.clone(),
        }
    }
}

fn start<'a>(
    plan: &'a SweepPlan,
    db: &Db,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<Side<'a>, LabError> {
    if !plan.axes.is_empty() {
        return Err(invalid("colocation takes loads, not --param axes"));
    }
    let t = &plan.template;
    let ready = TargetPlan::new(&t.target)?.start(stop, obs)?;
    let ask = measurement::IdealAsk {
        service_ns: t.service_ns,
        workers: t.workers,
        queues: t.queues,
        calibrate: measurement::CalibrateSpec {
            cpus: t.load.cpus.clone(),
            agents: t.agents.clone(),
            ..t.calibrate.clone()
        },
        calibrated_as: "calibration (alone)".into(),
        stored: false,
        announce: false,
    };
    let ideal = measurement::resolve_ideal(&ready, &ask, db, stop, obs)?;
    Ok(Side { plan, ready, ideal })
}

/// Runs the QoS matrix of `a` against `b` (each a sweep plan of loads and an SLO, without
/// axes), storing every measurement in one experiment in the store at `db_path`.
/// One side of a cell: its run, status, p99 (µs), verdict and SLO report.
type CellSide = (
    Option<i64>,
    Option<RunStatus>,
    Option<f64>,
    Option<Verdict>,
    Option<SloReport>,
);

fn side_of(x: &Result<measurement::Run, LabError>, slo: &Option<crate::slo::Slo>) -> CellSide {
    match x {
        Ok(r) => {
            let report = slo.as_ref().map(|s| s.evaluate(r));
            (
                r.run_id,
                Some(r.status),
                r.analysis.measured.get(P99).map(|e| e.value / 1e3),
                report.as_ref().map(|x| x.verdict),
                report,
            )
        }
        Err(LabError::RunFailed { run_id, .. }) => (
            Some(*run_id),
            Some(RunStatus::Failed),
            None,
            slo.as_ref().map(|_| Verdict::Violates),
            None,
        ),
        Err(_) => (None, None, None, None, None),
    }
}

/// Two services colocated: each side's sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ColocateConfig {
    pub a: ColocateSide,
    pub b: ColocateSide,
}

/// One side of a colocation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ColocateSide {
    pub loads: Vec<Load>,
    pub slo: Option<crate::slo::Slo>,
    pub run: measurement::RunConfig,
}

impl ColocateSide {
    /// A side as its sweep plan asks for it.
    pub fn of(plan: &crate::sweep::SweepPlan) -> ColocateSide {
        ColocateSide {
            loads: plan.loads.clone(),
            slo: plan.slo.clone(),
            run: plan.template.config.clone(),
        }
    }
}

pub fn colocate(
    a: &SweepPlan,
    b: &SweepPlan,
    db_path: &Path,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<Colocation, LabError> {
    let db = Db::open(db_path)?;
    let experiment = db.store.begin_experiment(&store::NewExperiment {
        kind: "colocate".into(),
        started_at: store::now_rfc3339(),
        config: stored(&ColocateConfig {
            a: ColocateSide::of(a),
            b: ColocateSide::of(b),
        }),
    })?;
    let mut cells = Vec::new();
    let outcome = (|| -> Result<(String, String), LabError> {
        let sa = start(a, &db, stop, obs)?;
        let sb = start(b, &db, stop, obs)?;
        let names = (sa.ready.label.clone(), sb.ready.label.clone());
        let mut k = 0usize;
        'cells: for &la in &a.loads {
            for &lb in &b.loads {
                if stop.load(Ordering::Relaxed) {
                    break 'cells;
                }
                let (ra, rb) = (sa.rate(la)?, sb.rate(lb)?);
                obs.note(&format!(
                    "cell {}: {} at {ra:.0} req/s beside {} at {rb:.0} req/s",
                    k + 1,
                    names.0,
                    names.1
                ));
                let (pa, pb) = (
                    sa.run_plan(ra, experiment, k),
                    sb.run_plan(rb, experiment, k),
                );
                // The two measurements at once, each with its own connection to the store.
                let (xa, xb) = std::thread::scope(|s| {
                    let ha = s.spawn(|| -> Result<_, LabError> {
                        let d = Db::open(db_path)?;
                        measure(&pa, &sa.ready, &d, stop, obs)
                    });
                    let hb = s.spawn(|| -> Result<_, LabError> {
                        let d = Db::open(db_path)?;
                        measure(&pb, &sb.ready, &d, stop, obs)
                    });
                    let join = |h: std::thread::ScopedJoinHandle<'_, Result<_, LabError>>| {
                        h.join().unwrap_or_else(|_| {
                            Err(LabError::Failed("a measurement thread panicked".into()))
                        })
                    };
                    (join(ha), join(hb))
                });
                for x in [&xa, &xb] {
                    if let Err(e) = x {
                        if !matches!(e, LabError::RunFailed { .. }) {
                            return Err(LabError::Failed(e.to_string()));
                        }
                    }
                }
                let (run_a, status_a, p99_a_us, slo_a, report_a) = side_of(&xa, &a.slo);
                let (run_b, status_b, p99_b_us, slo_b, report_b) = side_of(&xb, &b.slo);
                let ok = |v: Option<Verdict>| v == Some(Verdict::Meets);
                let meets = match (ok(slo_a), ok(slo_b)) {
                    (true, true) => "both",
                    (true, false) => "a",
                    (false, true) => "b",
                    (false, false) => "neither",
                };
                cells.push(Cell {
                    load_a: la,
                    load_b: lb,
                    rate_a_rps: ra,
                    rate_b_rps: rb,
                    run_a,
                    run_b,
                    status_a,
                    status_b,
                    p99_a_us,
                    p99_b_us,
                    slo_a,
                    slo_b,
                    report_a,
                    report_b,
                    meets: meets.into(),
                });
                k += 1;
            }
        }
        let (x, y) = (sa.ready.stop(), sb.ready.stop());
        x?;
        y?;
        Ok(names)
    })();
    let status = ExperimentStatus::of(&outcome, stop.load(Ordering::Relaxed));
    let (na, nb) = outcome.as_ref().cloned().unwrap_or_default();
    let result = Colocation {
        experiment_id: experiment,
        status,
        a: na,
        b: nb,
        cells,
    };
    let mut summary = serde_json::to_value(&result).unwrap_or(Value::Null);
    if let Err(e) = &outcome {
        summary["error"] = json!(e.to_string());
    }
    db.store
        .finish_experiment(experiment, status.as_str(), &summary)?;
    outcome.map(|_| result)
}
