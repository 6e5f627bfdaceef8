//! `tailscope check CANDIDATE --baseline B`: parse, have `lab::check` compare the stored run
//! or experiment with its baseline (the store opened read-only), print the rows. Exit code 3
//! (`exit::REGRESSION`) when any row is worse, 1 when the candidate's measurement failed.

use lab::check::CheckError;

use super::common::open_existing_store;
use crate::cli::CheckArgs;
use crate::exit::{usage, REGRESSION};
use crate::output::{self, outln};

fn check_err(e: CheckError) -> anyhow::Error {
    if e.is_usage() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

pub fn run(a: &CheckArgs) -> anyhow::Result<i32> {
    let tol = a.tolerance.0;
    let (db_path, st) = open_existing_store(&a.db)?;
    let Some(st) = st else {
        return Err(usage(format!("no results store at {}", db_path.display())));
    };
    // An `ab` comparison holds its own baseline: its paired rows, judged again at --tolerance.
    let is_ab = a.experiment
        && st
            .get_experiment(a.candidate)
            .map_err(anyhow::Error::new)?
            .is_some_and(|e| e.kind == "ab");
    let baseline = match (&a.baseline, is_ab) {
        (Some(_), true) => {
            return Err(usage(format!(
                "experiment {} is an ab comparison: it holds its own baseline (check it without --baseline)",
                a.candidate
            )))
        }
        (None, true) => return print_ab(a, &st, tol),
        (Some(b), false) => b,
        (None, false) => {
            return Err(usage(
                "--baseline is needed (an id, label:NAME or latest); only an ab comparison (--experiment) holds its own",
            ))
        }
    };
    let (check, failed) = if a.experiment {
        let (c, row) = lab::check::check_experiments(&st, a.candidate, baseline, tol, a.force)
            .map_err(check_err)?;
        (
            c,
            lab::RunStatus::of_row(&row.status) == Some(lab::RunStatus::Failed),
        )
    } else {
        let (c, row) =
            lab::check::check_runs(&st, a.candidate, baseline, tol, a.force).map_err(check_err)?;
        // The run's own status as its summary stored it, else its row's.
        let status = row
            .summary
            .as_ref()
            .and_then(|s| lab::summary::RunSummary::of(s).status)
            .or_else(|| lab::RunStatus::of_row(&row.status));
        (c, status == Some(lab::RunStatus::Failed))
    };
    let why = "the candidate's measurement failed";
    finish(a, &check, failed.then_some(why))
}

/// Prints a check (its table, or `--json` with the candidate's failure and the exit code) and
/// returns the exit code: 1 when the candidate failed (`failed` says how), 3 on a regression.
fn finish(a: &CheckArgs, check: &lab::check::Check, failed: Option<&str>) -> anyhow::Result<i32> {
    let code = if failed.is_some() {
        1
    } else if check.regression {
        REGRESSION
    } else {
        0
    };
    if a.json {
        let mut v = serde_json::to_value(check)?;
        v["candidate_failed"] = serde_json::json!(failed.is_some());
        v["exit_code"] = serde_json::json!(code);
        output::print_json(&v)?;
    } else {
        output::print_with(|w| report::check_view::table(w, check))?;
        if let Some(why) = failed {
            outln!("{why}: its rows cannot be trusted (exit 1)")?;
        }
    }
    Ok(code)
}

/// `check ID --experiment` of an `ab` comparison.
fn print_ab(a: &CheckArgs, st: &store::Store, tol: f64) -> anyhow::Result<i32> {
    let (check, r) = lab::ab::check_stored(st, a.candidate, tol).map_err(check_err)?;
    let why = format!("the comparison failed ({})", r.stopped);
    finish(
        a,
        &check,
        (r.status == lab::RunStatus::Failed).then_some(why.as_str()),
    )
}
