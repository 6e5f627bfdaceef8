//! `tailscope runs compare A B [C…]`: read the runs (read-only), have `report::compare` set
//! them side by side, print the table or its JSON, and write the overlay plot when asked.

use std::path::PathBuf;

use serde_json::json;

use super::common::open_existing_store;
use crate::cli::{DbArgs, OutputArgs};
use crate::exit::usage;
use crate::output::{self, outln};
use report::files::check_not_the_store;

pub fn run(ids: &[i64], plot: Option<&PathBuf>, db: &DbArgs, json: bool) -> anyhow::Result<i32> {
    if ids.len() < 2 {
        return Err(usage("runs compare needs at least two run ids"));
    }
    let out = OutputArgs {
        json,
        ccdf: None,
        plot: plot.cloned(),
    };
    output::check_outputs(&out)?;
    let (db_path, st) = open_existing_store(db)?;
    if let Some(p) = plot {
        check_not_the_store("--plot", p, &db_path)?;
    }
    let Some(st) = st else {
        return Err(usage(format!("no results store at {}", db_path.display())));
    };
    // Every id a stored load run, checked before any curve is computed.
    for &id in ids {
        let row = st
            .get_run(id)?
            .ok_or_else(|| usage(format!("no run with id {id}")))?;
        if row.kind == "calibrate" {
            return Err(usage(format!(
                "run {id} is a calibration of {}, not a load run: runs compare takes load runs (see tailscope runs list)",
                lab::clip(&row.target)
            )));
        }
    }
    let mut runs = Vec::new();
    for &id in ids {
        let r = match plot {
            // The curves are recomputed from the records only when they are drawn.
            Some(_) => report::stored::StoredRun::load(&st, id)?,
            None => st
                .get_run(id)?
                .map(|row| report::stored::StoredRun::without_curves(row, "not drawn")),
        };
        runs.push(r.ok_or_else(|| usage(format!("no run with id {id}")))?);
    }
    let c = report::compare::compare(&runs);
    let written = match plot {
        Some(_) => output::write_ccdf_outputs(
            &out,
            &format!(
                "runs {}: measured latency",
                ids.iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            &report::compare::series(&runs),
        )?,
        None => Vec::new(),
    };
    if json {
        let mut v = report::compare::to_json(&c);
        v["written"] = json!(written);
        output::print_json(&v)?;
    } else {
        output::print_with(|w| report::compare::table(w, &c))?;
        for w in written {
            outln!("wrote {w}")?;
        }
    }
    Ok(0)
}
