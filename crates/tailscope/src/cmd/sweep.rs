//! `tailscope sweep`: parse the options (or a TOML experiment file) into a `lab::SweepPlan`,
//! check it, run it, print the rows.

use lab::{Axis, Db, SweepPlan};

use super::common::{db_path, shutdown_flag};
use super::progress::Progress;
use crate::cli::SweepArgs;
use crate::exit::usage;
use crate::output;
use report::gate::Gate;

/// The validated plan of a sweep's arguments (a URL target) and an experiment file's axes,
/// and its SLO gate.
pub fn sweep_plan(a: &SweepArgs, file_axes: Vec<Axis>) -> anyhow::Result<(SweepPlan, Gate)> {
    let o = &a.opts;
    let mut plan = o.plan(&a.target, file_axes)?;
    let gate = Gate::new(&o.gate)?;
    plan.slo = gate.slo.clone();
    plan.template.extra_quantiles = gate.extra.clone();
    Ok((plan, gate))
}

/// A sweep's exit code with its SLO gate (see `lab::SweepResult::gate_code`).
pub fn gate_code(result: &lab::SweepResult, gate: &Gate) -> i32 {
    result.gate_code(gate.undecided_fails)
}

pub fn run(a: &SweepArgs) -> anyhow::Result<i32> {
    // An experiment file's options under the command line's (read from this process's own
    // command line: clap says which options it gave).
    let (a, file_axes) = if a.target.ends_with(".toml") {
        super::sweep_file::from_command_line(std::env::args_os())?
    } else {
        (a.clone(), Vec::new())
    };
    let (mut splan, gate) = sweep_plan(&a, file_axes)?;
    let db = db_path(&a.db)?;
    splan.check(&db)?;
    if a.opts.dry_run {
        let plan = splan.dry_run()?;
        return if a.json {
            output::print_json(&serde_json::to_value(&plan)?)
        } else {
            output::print_with(|w| report::plan_view::dry_run(w, &plan))
        }
        .map(|()| 0);
    }
    let progress = Progress::new(a.json);
    let obs = lab::Headlines::new(&progress);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    // The host's noise, once before the sweep; every point keeps it.
    let server_cpus = match &splan.template.target.spawn {
        Some(s) if splan.template.server_cpus.is_empty() => s.cpus.clone(),
        _ => splan.template.server_cpus.clone(),
    };
    let host_noise = lab::probe_noise(
        a.opts.no_noise_probe,
        &splan.template.load.cpus,
        &server_cpus,
        &stop,
        &obs,
    );
    splan.template.config.host_noise = host_noise.clone();
    let result = lab::sweep(&splan, &db, &stop, &obs)?;
    let suites = result.suites();
    let written = if gate.slo.is_some() {
        gate.write(&suites)?
    } else {
        Vec::new()
    };
    if a.json {
        let mut v = obs.json_of(&result);
        if gate.slo.is_some() {
            v["slo_points"] = serde_json::json!(suites
                .iter()
                .map(|(name, r)| serde_json::json!({"point": name, "slo": r}))
                .collect::<Vec<_>>());
            v["written"] = serde_json::json!(written);
        }
        output::print_json(&v)?;
    } else {
        output::print_with(|w| {
            report::sweep_view::sweep_views(w, &result, &obs.headlines())?;
            report::outcome_view::written(w, &written)
        })?;
    }
    Ok(gate_code(&result, &gate))
}
