//! `tailscope run`: the arguments converted into a `lab::RunSpec` (one point of an
//! experiment) and checked before anything starts, the target started, `lab::measure`, the
//! result printed with `report::run_view`.

use lab::{Db, LoadOptions, LoadPlan, RunSpec, TargetPlan};
use load::{LoadConfig, NullRpcWorkload};
use serde_json::json;

use super::common::{check_label, db_path, shutdown_flag};
use super::gate::Gate;
use super::progress::Progress;
use super::target::lab_err;
use crate::cli::{LoadArgs, OnOff, RunArgs, WorkloadArg};
use crate::exit::{usage, OrUsage};
use crate::output;

pub use lab::probe_noise;

/// A requested rate (`tune --rate`): absolute, or a fraction of the calibrated capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    PerSecond(f64),
    OfCapacity(f64),
}

/// `--rate` read by [`lab::Load`]'s parser.
pub fn parse_rate(s: &str) -> anyhow::Result<Rate> {
    match s.parse::<lab::Load>() {
        Ok(lab::Load::Rps(r)) => Ok(Rate::PerSecond(r)),
        Ok(lab::Load::OfCapacity(f)) => Ok(Rate::OfCapacity(f)),
        Err(e) => Err(usage(format!("--rate '{}': {e}", lab::clip(s)))),
    }
}

/// The null-RPC request options of the load flags.
pub fn nullrpc(a: &LoadArgs) -> NullRpcWorkload {
    NullRpcWorkload {
        request_size: a.request_size,
        stamps: !a.no_stamps,
    }
}

/// `--workload`'s sizes and mix in `w` (its arrivals are [`plan`]'s).
pub fn apply_workload(a: &LoadArgs, w: &mut lab::WorkloadSpec) {
    if a.workload == Some(WorkloadArg::Etc) {
        w.key_size = load::SizeDist::Etc(load::EtcSize::Key);
        w.value_size = load::SizeDist::Etc(load::EtcSize::Value);
        w.get_ratio = load::etc::ETC_GET_RATIO;
    }
}

/// The arrival process as the user named it (for the stored config).
pub fn arrival_text(a: &LoadArgs) -> String {
    match a.workload {
        Some(WorkloadArg::Etc) => "etc".into(),
        None => a.arrival.clone(),
    }
}

/// The load flags as `lab`'s options (the arrival read, a trace file included).
pub fn load_options(a: &LoadArgs) -> anyhow::Result<LoadOptions> {
    let arrival = match a.workload {
        Some(WorkloadArg::Etc) => model::ArrivalSpec::GenPareto {
            shape: model::ETC_GAP_SHAPE,
        },
        None => {
            let unit = super::model::parse_unit(&a.trace_unit)?;
            super::model::parse_arrival(&a.arrival, unit)?
        }
    };
    Ok(LoadOptions {
        arrival,
        duration: a.duration.clone(),
        requests: a.requests.clone(),
        warmup: a.warmup.clone(),
        timeout: a.timeout.clone(),
        connections: a.connections,
        threads: a.threads,
        max_outstanding: a.max_outstanding,
        cpus: a.cpus.clone().unwrap_or_default().0,
        lateness_threshold: a.lateness_threshold.clone(),
        precision: a.precision.clone(),
        max_duration: a.max_duration.clone(),
        alpha: a.alpha,
        seed: a.seed,
        confidence: a.confidence,
        yield_when_far: a.yield_when_far,
    })
}

/// The load flags validated (by `lab`).
pub fn plan(a: &LoadArgs) -> anyhow::Result<LoadPlan> {
    load_options(a)?.plan().map_err(lab_err)
}

/// The load configuration at `rate`; its target is a placeholder until the target starts.
pub fn load_config(_a: &LoadArgs, p: &LoadPlan, rate: f64) -> anyhow::Result<LoadConfig> {
    Ok(p.config(rate))
}

/// The one conversion of `run`'s arguments into `lab`'s spec of the run.
fn run_spec(a: &RunArgs, server_cpus: Vec<usize>, gate: &Gate) -> anyhow::Result<RunSpec> {
    let la = &a.load;
    let load = plan(la)?;
    let service_ns = match a.side.service.as_deref() {
        Some(s) => {
            let ns = model::parse_duration_ns(s).or_usage_ctx("--service")?;
            if ns.is_nan() || ns <= 0.0 {
                return Err(usage(format!("--service must be positive, got '{s}'")));
            }
            Some(ns)
        }
        None => None,
    };
    let config = json!({
        "target": a.target, "rate": a.rate.text, "arrival": arrival_text(la),
        "workload_preset": la.workload.map(|_| "etc"), "duration": la.duration,
        "requests": la.requests, "warmup": la.warmup, "connections": la.connections,
        "threads": la.threads, "cpus": load.cpus, "max_outstanding": la.max_outstanding,
        "timeout": la.timeout, "request_size": la.request_size, "stamps": !la.no_stamps,
        "seed": la.seed, "alpha": la.alpha, "stages": a.stages, "label": a.label,
    });
    Ok(RunSpec {
        target: a.target.clone(),
        load,
        rate: a.rate.value,
        ideal: lab::IdealAsk {
            service_ns,
            workers: a.side.workers,
            queues: a.side.queues.structure(),
            calibrate: lab::CalibrateSpec::default(),
            calibrated_as: "calibration".into(),
            stored: false,
            announce: true,
        },
        attribution: !a.side.no_attribution,
        server_cpus,
        extra_pids: a.side.server_pid.clone(),
        stages: a.stages,
        agents: lab::Agents::from_args(
            &a.agents.agent,
            a.agents.agents_file.as_deref(),
            a.agents.agent_records == OnOff::On,
        )
        .map_err(lab_err)?,
        view: a.view.into(),
        noise_probe: !a.no_noise_probe,
        repeat: a.repeat,
        extra_quantiles: gate.extra.clone(),
        config,
    })
}

pub fn run(a: &RunArgs) -> anyhow::Result<i32> {
    // Validate everything, then run: nothing is written (not even the store file) and no
    // server is started on bad input.
    let (server_cpus, mut tspec) = super::target::side_spec(&a.target, &a.side, nullrpc(&a.load))?;
    apply_workload(&a.load, &mut tspec.workload);
    let tplan = TargetPlan::new(&tspec).map_err(lab_err)?;
    output::check_outputs(&a.out)?;
    let gate = Gate::new(a.slo.as_deref(), a.slo_view.into(), &a.gate)?;
    check_label(a.label.as_deref())?;
    let spec = run_spec(a, server_cpus, &gate)?;
    let db = db_path(&a.db)?;
    let checked = spec.check(&tplan, &db).map_err(lab_err)?;

    let obs = Progress::new(a.out.json);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let ready = tplan.start(&stop, &obs).map_err(lab_err)?;
    let plan = spec
        .plan(&checked, &ready, &db, &stop, &obs)
        .map_err(lab_err);
    if a.repeat > 1 {
        let result = plan.and_then(|p| {
            Ok(lab::measure_repeated(
                &p, a.repeat, &ready, &db, &stop, &obs,
            )?)
        });
        let stopped = ready.stop();
        let (runs, combined, experiment) = result?;
        stopped.map_err(lab_err)?;
        return print_repeated(a, &runs, &combined, experiment, &gate);
    }
    let result = plan.and_then(|p| Ok(lab::measure(&p, &ready, &db, &stop, &obs)?));
    let stopped = ready.stop();
    let run = match result {
        Ok(run) => run,
        Err(e) => {
            // A run that measured nothing usable still prints its object (status, outcomes,
            // error) under --json; it was stored as such.
            let summary = e
                .downcast_ref::<lab::LabError>()
                .and_then(|l| l.run_summary());
            if let (true, Some(v)) = (a.out.json, summary) {
                output::print_json(v)?;
            }
            return Err(e);
        }
    };
    stopped.map_err(lab_err)?;
    print_run(a, &run, &gate)
}

/// A measured run printed; its exit code: 1 for a failed measurement (or one whose views are
/// all invalid) whatever the SLO says, else the SLO's.
fn print_run(a: &RunArgs, run: &lab::Run, gate: &Gate) -> anyhow::Result<i32> {
    let label = run.url.clone();
    let mut written = match (&a.out.plot, &a.out.ccdf) {
        (None, None) => Vec::new(),
        _ => output::write_ccdf_outputs(
            &a.out,
            &format!("{label}: measured vs ideal"),
            &report::run_view::run_series(&label, &run.analysis),
        )?,
    };
    let slo = gate.slo.as_ref().map(|s| s.evaluate(run));
    if let Some(r) = &slo {
        written.extend(gate.write(&[(format!("run {label}"), r.clone())])?);
    }
    if a.out.json {
        output::print_json(&report::run_view::run_json(run, slo.as_ref(), &written))?;
    } else {
        output::print_with(|w| report::run_view::run_lines(w, run, slo.as_ref(), &written))?;
    }
    Ok(match (run.status.exit_code(), &slo) {
        (0, Some(r)) => gate.code(r.verdict),
        (c, _) => c,
    })
}

/// `run --repeat N`'s output; the exit code of the combined point (each repeat's SLO report
/// is listed beside the combined one's in the JSON).
fn print_repeated(
    a: &RunArgs,
    runs: &[lab::Run],
    p: &lab::Repeated,
    experiment: i64,
    gate: &Gate,
) -> anyhow::Result<i32> {
    let refs: Vec<&lab::Run> = runs.iter().collect();
    let combined = gate.slo.as_ref().map(|s| s.evaluate_repeated(p, &refs));
    let each: Vec<lab::SloReport> = match &gate.slo {
        Some(s) => runs.iter().map(|r| s.evaluate(r)).collect(),
        None => Vec::new(),
    };
    let written = match &combined {
        Some(r) => gate.write(&[(format!("{} repeats combined", runs.len()), r.clone())])?,
        None => Vec::new(),
    };
    if a.out.json {
        let slo = report::run_view::RepeatedSlo {
            combined: combined.as_ref(),
            each: &each,
        };
        let v = report::run_view::repeated_json(experiment, runs, p, &slo, &written);
        output::print_json(&v)?;
    } else {
        output::print_with(|w| {
            report::run_view::repeated_lines(w, runs, p, combined.as_ref(), &written)
        })?;
    }
    // Exit 1 only when no view asked for was measured validly by any repeat.
    let valid = match lab::ViewChoice::from(a.view) {
        lab::ViewChoice::User => p.user.is_some(),
        lab::ViewChoice::Server => p.server.is_some(),
        lab::ViewChoice::Auto => p.user.is_some() || p.server.is_some(),
    };
    Ok(match p.status.exit_code() {
        0 if !valid && p.status != lab::RunStatus::Saturated => 1,
        0 => combined.map_or(0, |r| gate.code(r.verdict)),
        c => c,
    })
}
