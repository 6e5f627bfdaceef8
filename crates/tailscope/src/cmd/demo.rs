//! `tailscope demo`: the one-command tour — a small sweep. The built-in server on its own CPU
//! with a known synthetic service time, calibrated, Poisson load at three utilisations from
//! the generator's CPU; measured vs ideal printed for each, the runs stored as one
//! experiment, the CCDFs plotted.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use lab::{Db, Load, RunTemplate, SpawnSpec, SweepPlan, TargetSpec, WorkloadSpec};
use load::LoadConfig;
use serde_json::{json, Value};

use super::common::{db_path, parse_duration, parse_sched, shutdown_flag};
use super::progress::Progress;
use super::target::lab_err;
use crate::cli::{DemoArgs, OutputArgs};
use crate::exit::usage;
use crate::output::{self, outln};

/// Shows each run as it is stored and keeps its CCDFs for the plot.
struct Tour {
    progress: Progress,
    json: bool,
    series: Mutex<Vec<report::Series>>,
    runs: Mutex<Vec<Value>>,
    /// Per run: its load and what this host allows there (one line each).
    allows: Mutex<Vec<String>>,
}

impl lab::Observer for Tour {
    fn note(&self, msg: &str) {
        self.progress.note(msg)
    }
    fn progress(&self, phase: &str, done: u64, total: u64) {
        self.progress.progress(phase, done, total)
    }
    fn phase_done(&self, phase: &str) {
        self.progress.phase_done(phase)
    }
    fn run_done(&self, run: &lab::Run) {
        let pct = run.config["load_pct"].as_f64().unwrap_or(0.0);
        let label = format!("{pct:.0}% load");
        if !self.json {
            let _ = outln!();
            let _ = output::print_with(|w| report::terminal::run(w, run));
        }
        if let Ok(mut s) = self.series.lock() {
            s.push(report::Series::new(
                format!("measured {label}"),
                run.analysis.measured_ccdf_us.clone(),
            ));
            let mut i =
                report::Series::new(format!("ideal {label}"), run.analysis.ideal_ccdf_us.clone());
            i.dashed = true;
            s.push(i);
        }
        if let Ok(mut r) = self.runs.lock() {
            let mut v = run.to_json();
            v["load_pct"] = json!(pct);
            r.push(v);
        }
        if let Ok(mut l) = self.allows.lock() {
            l.push(report::demo_view::allows(&label, run));
        }
    }
}

/// The demo's placement and server, checked.
struct Setup {
    server_cpu: usize,
    client_cpu: usize,
    work: model::ServiceSpec,
    sched: Option<host::placement::SchedSpec>,
    duration: std::time::Duration,
}

/// The demo's warm-up before each run.
const WARMUP: std::time::Duration = std::time::Duration::from_secs(2);

/// Checks the demo's flags (exit 2 on the first wrong one), before anything starts.
fn setup(a: &DemoArgs) -> anyhow::Result<Setup> {
    let online = host::placement::online_cpus();
    let server_cpu = a.server_cpu.unwrap_or(if online > 1 { 1 } else { 0 });
    let client_cpu = a.client_cpu.unwrap_or(0);
    for (flag, c) in [("--server-cpu", server_cpu), ("--client-cpu", client_cpu)] {
        if c >= online {
            return Err(usage(format!(
                "{flag}: CPU {c} does not exist (this machine has {online})"
            )));
        }
    }
    if a.repeat == 0 || a.repeat > 20 {
        return Err(usage(format!(
            "--repeat must be in 1..=20, got {}",
            a.repeat
        )));
    }
    if a.loads.is_empty() || a.loads.iter().any(|l| !(*l > 0.0 && *l < 100.0)) {
        return Err(usage(
            "--loads must be percentages in (0, 100), e.g. 30,60,85",
        ));
    }
    super::common::check_label(a.label.as_deref())?;
    let work = super::model::parse_service(&a.work)?;
    let sched = parse_sched(a.sched.as_deref())?;
    let duration = parse_duration("--duration", &a.duration)?;
    if duration <= WARMUP {
        return Err(usage(format!(
            "--duration must be longer than the demo's 2 s warm-up, got {}",
            a.duration
        )));
    }
    Ok(Setup {
        server_cpu,
        client_cpu,
        work,
        sched,
        duration,
    })
}

/// The demo as a sweep: the built-in server (one epoll worker, the given work) on its CPU,
/// 8 connections from the generator's, one point per load in % of the calibrated capacity.
fn sweep_plan(a: &DemoArgs, s: Setup, gate: &super::gate::Gate) -> anyhow::Result<SweepPlan> {
    let mut load = LoadConfig::new(super::run::parse_target("nullrpc://127.0.0.1:1")?, 1.0);
    load.stop = load::StopAt::Duration(s.duration - WARMUP);
    load.warmup = WARMUP;
    load.connections = 8;
    load.cpus = vec![s.client_cpu];
    load.yield_when_far = false;
    Ok(SweepPlan {
        kind: "demo".into(),
        template: RunTemplate {
            agents: None,
            precision: None,
            extra_quantiles: gate.extra.clone(),
            target: TargetSpec {
                url: "nullrpc://".into(),
                spawn: Some(SpawnSpec {
                    threads: Some(1),
                    cpus: vec![s.server_cpu],
                    sched: s.sched,
                    arch: Some(server::Arch::Epoll),
                    work: Some(s.work),
                    ..SpawnSpec::default()
                }),
                workload: WorkloadSpec::default(),
                churn: None,
                preload: false,
                stress: None,
            },
            load,
            service_ns: None,
            workers: None,
            queues: None,
            confidence: 0.95,
            lateness_threshold_ns: 50_000.0,
            attribution: true,
            server_cpus: Vec::new(),
            extra_pids: Vec::new(),
            calibrate: lab::CalibrateSpec::default(),
            config: json!({"demo": true, "duration": a.duration, "connections": 8,
                           "client_cpu": s.client_cpu, "server_cpu": s.server_cpu,
                           "work": a.work, "label": a.label}),
        },
        loads: a
            .loads
            .iter()
            .map(|p| Load::OfCapacity(p / 100.0))
            .collect(),
        axes: Vec::new(),
        repeat: a.repeat,
        slo: gate.slo.clone(),
        find_max: false,
        max_steps: 2,
        experiment: None,
    })
}

pub fn run(a: &DemoArgs) -> anyhow::Result<i32> {
    let s = setup(a)?;
    let (server_cpu, client_cpu) = (s.server_cpu, s.client_cpu);
    let out = OutputArgs {
        json: a.json,
        ccdf: None,
        plot: Some(a.plot.clone()),
    };
    output::check_outputs(&out)?;
    let gate = super::gate::Gate::new(
        a.slo.as_deref(),
        lab::ViewChoice::Auto,
        &crate::cli::GateArgs {
            percentiles: None,
            slo_undecided: a.slo_undecided,
            junit: None,
            markdown: None,
        },
    )?;
    let mut plan = sweep_plan(a, s, &gate)?;
    let db = db_path(&a.db)?;
    plan.check(&db).map_err(lab_err)?;
    let tour = Tour {
        progress: Progress::new(a.json),
        json: a.json,
        series: Mutex::new(Vec::new()),
        runs: Mutex::new(Vec::new()),
        allows: Mutex::new(Vec::new()),
    };
    lab::Observer::note(
        &tour,
        &format!(
            "demo: the built-in server ({}, 1 epoll worker) on CPU {server_cpu}; the generator on CPU {client_cpu}",
            a.work
        ),
    );
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let host_noise =
        super::run::probe_noise(a.no_noise_probe, &[client_cpu], &[server_cpu], &stop, &tour);
    plan.template.config["host_noise"] = json!(host_noise);
    let result = lab::sweep(&plan, &db, &stop, &tour).map_err(lab_err)?;
    let series = tour.series.into_inner().unwrap_or_default();
    let runs = tour.runs.into_inner().unwrap_or_default();
    let per_run = tour.allows.into_inner().unwrap_or_default();
    let host_line = host_noise.as_ref().map(|h| h.line());
    let mut closing = report::demo_view::closing(host_line.as_deref(), &per_run, &runs);
    closing.extend(report::demo_view::spread(&result.points));
    let written = if series.is_empty() {
        Vec::new()
    } else {
        output::write_ccdf_outputs(
            &out,
            "tailscope demo: built-in server, measured vs ideal",
            &series,
        )?
    };
    let interrupted = stop.load(Ordering::Relaxed);
    // 0 when every run has a valid view (the user's, else the server's) or is saturated.
    let code = if interrupted || result.rows.is_empty() {
        1
    } else {
        super::sweep::gate_code(&result, &gate)
    };
    if a.json {
        // The calibration the sweep made, as the store keeps it.
        let calibration = runs
            .first()
            .and_then(|r| r["ideal_source"]["calibration_run"].as_i64())
            .and_then(|id| db.store.get_run(id).ok().flatten())
            .and_then(|r| r.summary);
        output::print_json(&json!({
            "experiment_id": result.experiment_id,
            "server": {"arch": "epoll", "workers": 1, "work": a.work, "cpu": server_cpu},
            "calibration": calibration,
            "runs": runs,
            "status": result.status,
            "points": result.points,
            "host_noise": host_noise,
            "closing": closing,
            "exit_code": code,
            "interrupted": interrupted,
            "written": written,
        }))?;
        // The same closing lines for a person, on stderr (stdout holds the one object).
        for l in &closing {
            eprintln!("{l}");
        }
    } else {
        print_tour(&result, &runs, &written, &closing)?;
    }
    Ok(code)
}

/// The demo's end for a person: the sweep's table by each run's headline view, the files
/// written, the closing lines.
fn print_tour(
    result: &lab::SweepResult,
    runs: &[Value],
    written: &[String],
    closing: &[String],
) -> anyhow::Result<()> {
    outln!()?;
    let heads: std::collections::BTreeMap<i64, lab::View> = runs
        .iter()
        .filter_map(|v| {
            let view = serde_json::from_value(v["headline_view"].clone()).ok()?;
            Some((v["run_id"].as_i64()?, view))
        })
        .collect();
    output::print_with(|w| report::sweep_view::sweep_views(w, result, &heads))?;
    for w in written {
        outln!("wrote {w}")?;
    }
    outln!()?;
    for l in closing {
        outln!("{l}")?;
    }
    Ok(())
}
