//! `tailscope ab BASELINE CANDIDATE`: the two arms and the shared options checked into a
//! `lab::ab::AbSpec` before anything starts, both targets started, `lab::ab::compare`, the
//! result printed with `report::ab_view`. Exit 3 when a row is worse or an arm violates its
//! SLO, 1 when the comparison failed (an arm's target died) or was interrupted.

use clap::CommandFactory;
use lab::ab::Arm;
use lab::Db;

use super::common::{db_path, shutdown_flag};
use super::progress::Progress;
use crate::cli::{AbArgs, Cli};
use crate::exit::{usage, REGRESSION};
use crate::output;
use report::gate::Gate;

/// The `ab` command line's matches (which options it gave: server flags given outside the
/// arms apply to both).
fn matches() -> anyhow::Result<clap::ArgMatches> {
    let m = Cli::command()
        .try_get_matches_from(std::env::args_os())
        .map_err(|e| usage(e.to_string().lines().next().unwrap_or("bad command line")))?;
    match m.subcommand() {
        Some(("ab", m)) => Ok(m.clone()),
        _ => Err(usage("not an ab command line")),
    }
}

pub fn run(a: &AbArgs) -> anyhow::Result<i32> {
    // Validate everything, then run.
    let o = &a.opts;
    let mut gate_args = o.gate.clone();
    let (junit, markdown) = (gate_args.junit.take(), gate_args.markdown.take());
    let gate = Gate::new(&gate_args)?;
    for (flag, p) in [("--junit", &junit), ("--markdown", &markdown)] {
        if let Some(p) = p {
            report::files::check_writable(flag, p)?;
        }
    }
    if let (Some(j), Some(m)) = (&junit, &markdown) {
        if j == m {
            return Err(usage(format!(
                "--junit and --markdown name the same file {}",
                j.display()
            )));
        }
    }
    let m = matches()?;
    let spec = o.plan(&a.baseline, &a.candidate, &m, gate.extra.clone())?;
    let db = db_path(&a.db)?;
    let checked = spec.check(&db)?;

    let obs = Progress::new(a.json);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let baseline = spec.arms[0].tplan.start(&stop, &obs)?;
    let candidate = match spec.arms[1].tplan.start(&stop, &obs) {
        Ok(r) => r,
        Err(e) => {
            let _ = baseline.stop();
            return Err(e.into());
        }
    };
    let out = lab::ab::compare(&spec, &checked, [&baseline, &candidate], &db, &stop, &obs);
    let (b, c) = (baseline.stop(), candidate.stop());
    let out = out?;
    b?;
    c?;
    let r = &out.result;
    let run_of = |arm: Arm| out.runs.iter().find(|x| x.config.arm == Some(arm));
    let slo: Vec<(Arm, lab::SloReport)> = match &gate.slo {
        Some(s) => [Arm::Baseline, Arm::Candidate]
            .into_iter()
            .filter_map(|arm| run_of(arm).map(|run| (arm, s.evaluate(run))))
            .collect(),
        None => Vec::new(),
    };
    let mut written = Vec::new();
    if let Some(p) = &junit {
        std::fs::write(p, report::ab_view::junit(r, &slo, gate.undecided_fails))?;
        written.push(p.display().to_string());
    }
    if let Some(p) = &markdown {
        std::fs::write(p, report::ab_view::markdown(r, &slo))?;
        written.push(p.display().to_string());
    }
    let code = if r.status.exit_code() != 0 {
        r.status.exit_code()
    } else if r.regression {
        REGRESSION
    } else {
        slo.iter()
            .map(|(_, s)| gate.code(s.verdict))
            .max()
            .unwrap_or(0)
    };
    if a.json {
        output::print_json(&report::ab_view::json(r, &slo, &written, code))?;
    } else {
        let runs = [run_of(Arm::Baseline), run_of(Arm::Candidate)];
        output::print_with(|w| report::ab_view::lines(w, r, runs, &slo, &written))?;
    }
    Ok(code)
}
