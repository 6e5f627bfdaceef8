//! `tailscope colocate A.toml B.toml`: two experiment files as the two services of a QoS
//! matrix; `lab::colocate` runs it.

use super::common::{db_path, shutdown_flag};
use super::progress::Progress;
use super::sweep::{expand, sweep_plan};
use super::target::lab_err;
use crate::cli::ColocateArgs;
use crate::exit::usage;
use crate::output;

/// One side: its file expanded into a sweep's arguments, with the shared overrides.
fn side(file: &str, a: &ColocateArgs) -> anyhow::Result<lab::SweepPlan> {
    if !file.ends_with(".toml") {
        return Err(usage(format!(
            "colocate takes two experiment files (.toml), got '{file}'"
        )));
    }
    let mut extra = Vec::new();
    for (flag, v) in [("--duration", &a.duration), ("--warmup", &a.warmup)] {
        if let Some(v) = v {
            extra.push(flag.to_string());
            extra.push(v.clone());
        }
    }
    let args = expand(file, &extra)?;
    let plan = sweep_plan(&args)?;
    if plan.loads.is_empty() {
        return Err(usage(format!("{file}: no loads")));
    }
    Ok(plan)
}

pub fn run(a: &ColocateArgs) -> anyhow::Result<i32> {
    let pa = side(&a.a, a)?;
    let pb = side(&a.b, a)?;
    let db = db_path(&a.db)?;
    pa.check(&db).map_err(lab_err)?;
    pb.check(&db).map_err(lab_err)?;
    let obs = Progress::new(a.json);
    // Opening it here creates it before the two sides open their own connections.
    drop(
        lab::Db::open(&db)
            .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?,
    );
    let stop = shutdown_flag()?;
    let r = lab::colocate(&pa, &pb, &db, &stop, &obs).map_err(lab_err)?;
    if a.json {
        output::print_json(&serde_json::to_value(&r)?)?;
    } else {
        output::print_with(|w| report::sweep_view::colocation(w, &r))?;
    }
    Ok(if r.status == "ok" { 0 } else { 1 })
}
