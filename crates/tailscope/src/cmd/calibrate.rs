//! `tailscope calibrate`: the paper's method (§3.2) — saturate the target, invert the peak
//! throughput to get the amortised time per request; stored for later `--rate N%` runs. For a
//! target with W workers the per-worker service time is W times that (the ideal uses it).

use lab::{CalibrateSpec, Db, TargetPlan};

use super::common::{db_path, shutdown_flag};
use super::progress::Progress;
use super::target::lab_err;
use crate::cli::{CalibrateArgs, OnOff};
use crate::exit::usage;
use crate::output;

pub fn run(a: &CalibrateArgs) -> anyhow::Result<i32> {
    let cpus = a.server_cpus.clone().unwrap_or_default().0;
    let nullrpc = load::NullRpcWorkload {
        request_size: a.request_size,
        stamps: !a.no_stamps,
    };
    if a.server.stress.is_some() {
        return Err(usage(
            "--stress applies to run and sweep: a calibration measures the server alone",
        ));
    }
    let spec = super::target::spec(&a.target, &a.server, &cpus, nullrpc)?;
    let tplan = TargetPlan::new(&spec).map_err(lab_err)?;
    let (duration, warmup) = (a.duration.0, a.warmup.0);
    if a.max_connections == 0 || a.max_depth == 0 {
        return Err(usage(
            "--max-connections and --max-depth must be at least 1",
        ));
    }
    if a.max_connections > 4096 || a.max_depth > 4096 {
        return Err(usage(
            "--max-connections and --max-depth must be at most 4096",
        ));
    }
    if duration.is_zero() {
        return Err(usage("--duration must be positive"));
    }
    let confirm = match &a.confirm {
        Some(c) => c.0,
        None => CalibrateSpec::default().overload_time,
    };
    if confirm.is_zero() {
        return Err(usage("--confirm must be positive"));
    }
    let cspec = CalibrateSpec {
        max_connections: a.max_connections,
        max_depth: a.max_depth,
        step: duration,
        step_warmup: warmup,
        overload_time: confirm,
        cpus: a.cpus.clone().unwrap_or_default().0,
        agents: lab::Agents::from_args(
            &a.agents.agent,
            a.agents.agents_file.as_deref(),
            a.agents.agent_records == OnOff::On,
        )
        .map_err(lab_err)?,
        ..CalibrateSpec::default()
    };
    let db = db_path(&a.db)?;
    let obs = Progress::new(a.json);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let ready = tplan.start(&stop, &obs).map_err(lab_err)?;
    let (workers, _) = ready.ideal_shape(None, None).map_err(lab_err)?;
    let result = lab::calibrate(&ready, &cspec, workers, &db, &stop, &obs);
    let url = ready.url.clone();
    let stopped = ready.stop();
    let c = result.map_err(lab_err)?;
    stopped.map_err(lab_err)?;
    if a.json {
        output::print_json(&c.to_json(&a.target, &url))?;
    } else {
        output::print_with(|w| report::terminal::calibration(w, &url, &c))?;
    }
    Ok(if c.interrupted { 1 } else { 0 })
}
