//! `tailscope demo`: the one-command tour. Starts the built-in server on its own CPU with a
//! known synthetic service time, calibrates it, runs Poisson load at three utilisations, prints
//! measured vs ideal for each, stores the runs and writes the CCDF plot.

use std::sync::atomic::Ordering;
use std::time::Duration;

use analysis::{IdealSpec, QueueStructure};
use lab::{CalibrateSpec, Db, RunPlan, TargetPlan};
use load::{LoadConfig, NullRpcWorkload, StopAt};
use serde_json::{json, Value};
use server::{Arch, ServerConfig};

use super::common::{db_path, parse_duration, parse_sched, shutdown_flag};
use super::progress::Progress;
use super::target::lab_err;
use crate::cli::{DemoArgs, OutputArgs};
use crate::exit::usage;
use crate::output::{self, outln};

pub fn run(a: &DemoArgs) -> anyhow::Result<i32> {
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
    if a.loads.is_empty() || a.loads.iter().any(|l| !(*l > 0.0 && *l < 100.0)) {
        return Err(usage(
            "--loads must be percentages in (0, 100), e.g. 30,60,85",
        ));
    }
    let work = super::model::parse_service(&a.work)?;
    let sched = parse_sched(a.sched.as_deref())?;
    let duration = parse_duration("--duration", &a.duration)?;
    let warmup = Duration::from_secs(2);
    if duration <= warmup {
        return Err(usage(format!(
            "--duration must be longer than the demo's 2 s warm-up, got {}",
            a.duration
        )));
    }
    let out = OutputArgs {
        json: a.json,
        ccdf: None,
        plot: Some(a.plot.clone()),
    };
    output::check_outputs(&out)?;
    let scfg = ServerConfig {
        arch: Arch::Epoll,
        workers: 1,
        work: Some(work),
        cpus: vec![server_cpu],
        sched,
        seed: 1,
        ..ServerConfig::default()
    };
    let tplan = TargetPlan::builtin(scfg, NullRpcWorkload::default()).map_err(lab_err)?;
    let mut base = LoadConfig::new(super::run::parse_target("nullrpc://127.0.0.1:1")?, 1.0);
    base.stop = StopAt::Duration(duration - warmup);
    base.warmup = warmup;
    base.connections = 8;
    base.cpus = vec![client_cpu];
    base.yield_when_far = false;
    let db = db_path(&a.db)?;
    lab::check_load(&base, &db).map_err(lab_err)?;

    let obs = Progress::new(a.json);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let ready = tplan.start(&stop, &obs).map_err(lab_err)?;
    lab::Observer::note(
        &obs,
        &format!(
            "demo: built-in server ({}, 1 epoll worker) on CPU {server_cpu}; generator on CPU {client_cpu}",
            a.work
        ),
    );
    let result = tour(a, &base, &ready, &db, &stop, &obs);
    let counters = ready.stop().map_err(lab_err)?;
    let (cal, runs, series, worst) = result?;
    let written = if series.is_empty() {
        Vec::new()
    } else {
        output::write_ccdf_outputs(
            &out,
            "tailscope demo: built-in server, measured vs ideal",
            &series,
        )?
    };
    if a.json {
        output::print_json(&json!({
            "server": {"arch": "epoll", "workers": 1, "work": a.work, "cpu": server_cpu,
                       "served": counters.map(|c| c.served)},
            "calibration": cal,
            "runs": runs,
            "interrupted": stop.load(Ordering::Relaxed),
            "written": written,
        }))?;
    } else {
        for w in written {
            outln!("wrote {w}")?;
        }
    }
    if stop.load(Ordering::Relaxed) {
        return Ok(1);
    }
    Ok(worst)
}

type Tour = (Value, Vec<Value>, Vec<report::Series>, i32);

/// Calibrate, then one run per load: each with its own seed derived from seed 1.
fn tour(
    a: &DemoArgs,
    base: &LoadConfig,
    ready: &lab::Ready,
    db: &Db,
    stop: &std::sync::atomic::AtomicBool,
    obs: &Progress,
) -> anyhow::Result<Tour> {
    let cal = lab::calibrate(ready, &CalibrateSpec::default(), 1, db, stop, obs)
        .map_err(|e| lab_err(e).context("demo calibration failed"))?;
    if !a.json {
        outln!(
            "calibration: peak {:.0} req/s → amortised service time {} (synthetic work {})",
            cal.peak_rps,
            report::terminal::fmt_ns(cal.service_ns),
            a.work
        )?;
    }
    let mut runs = Vec::new();
    let mut series = Vec::new();
    let mut worst = 0;
    for (i, pct) in a.loads.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let rate = pct / 100.0 * 1e9 / cal.service_ns;
        let ideal = IdealSpec {
            service_ns: cal.service_ns,
            workers: 1,
            queues: QueueStructure::Single,
        };
        let mut load = base.clone();
        load.rate_per_s = rate;
        load.seed = load::derive_seed(1, i as u64);
        let plan = RunPlan {
            kind: "run".into(),
            ideal: Some(ideal.clone()),
            ideal_source: Some(lab::IdealSource::of(&cal, "calibration")),
            confidence: 0.95,
            lateness_threshold_ns: 50_000.0,
            attribution: true,
            server_cpus: Vec::new(),
            extra_pids: Vec::new(),
            config: json!({"demo": true, "load_pct": pct, "rate_rps": rate,
                           "duration": a.duration, "connections": load.connections,
                           "client_cpu": load.cpus, "work": a.work, "ideal": ideal,
                           "seed": load.seed}),
            load,
            experiment: None,
            stages: lab::StagesMode::default(),
        };
        let run = lab::measure(&plan, ready, db, stop, obs).map_err(lab_err)?;
        worst = worst.max(run.status.exit_code());
        let label = format!("{pct:.0}% load");
        if !a.json {
            outln!()?;
            output::print_with(|w| report::terminal::run(w, &run))?;
        }
        series.push(report::Series::new(
            format!("measured {label}"),
            run.analysis.measured_ccdf_us.clone(),
        ));
        let mut s =
            report::Series::new(format!("ideal {label}"), run.analysis.ideal_ccdf_us.clone());
        s.dashed = true;
        series.push(s);
        let mut v = run.to_json();
        v["load_pct"] = json!(pct);
        runs.push(v);
    }
    Ok((cal.to_json(&ready.label, &ready.url), runs, series, worst))
}
