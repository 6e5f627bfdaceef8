//! `tailscope run`: the arguments converted into a `lab::RunSpec` (one point of an
//! experiment) and checked before anything starts, the target started, `lab::measure`, the
//! result printed with `report::run_view`.

use lab::Db;

use super::common::{db_path, shutdown_flag};
use super::progress::Progress;
use crate::cli::RunArgs;
use crate::exit::usage;
use crate::output;
use report::gate::Gate;

pub fn run(a: &RunArgs) -> anyhow::Result<i32> {
    // Validate everything, then run: nothing is written (not even the store file) and no
    // server is started on bad input.
    let o = &a.opts;
    let gate = Gate::new(&o.gate)?;
    let (tplan, spec) = o.plan(&a.target, gate.extra.clone())?;
    output::check_outputs(&a.out)?;
    let db = db_path(&a.db)?;
    let checked = spec.check(&tplan, &db)?;

    let obs = Progress::new(a.out.json);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let ready = tplan.start(&stop, &obs)?;
    let plan = spec
        .plan(&checked, &ready, &db, &stop, &obs)
        .map_err(anyhow::Error::from);
    if o.repeat > 1 {
        let result = plan.and_then(|p| {
            Ok(lab::measure_repeated(
                &p, o.repeat, &ready, &db, &stop, &obs,
            )?)
        });
        let stopped = ready.stop();
        let (runs, combined, experiment) = result?;
        stopped?;
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
    stopped?;
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
        output::print_with(|w| {
            report::run_view::run_lines(w, run, slo.as_ref(), &written, a.detail)
        })?;
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
    let valid = match lab::ViewChoice::from(a.opts.view) {
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
