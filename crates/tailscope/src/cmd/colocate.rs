//! `tailscope colocate A.toml B.toml`: two experiment files as the two services of a QoS
//! matrix; `lab::colocate` runs it.

use super::common::{db_path, shutdown_flag};
use super::progress::Progress;
use super::sweep::sweep_plan;
use super::sweep_file::from_file;
use crate::cli::ColocateArgs;
use crate::exit::usage;
use crate::output;
use report::gate::Gate;

/// One side: its file's options as a sweep's, with the shared overrides.
fn side(file: &str, a: &ColocateArgs) -> anyhow::Result<lab::SweepPlan> {
    if !file.ends_with(".toml") {
        return Err(usage(format!(
            "colocate takes two experiment files (.toml), got '{}'",
            lab::clip(file)
        )));
    }
    let (mut args, axes) = from_file(file)?;
    // --duration / --warmup replace both files' (a duration also their requests).
    if let Some(d) = &a.duration {
        args.opts.load.duration = d.clone();
        args.opts.load.requests = None;
    }
    if let Some(w) = &a.warmup {
        args.opts.load.warmup = w.clone();
    }
    let (mut plan, _) = sweep_plan(&args, axes)?;
    // The command line's agents send both services' load.
    if let Some(agents) = a.agents.agents()? {
        plan.template.agents = Some(agents);
    }
    if plan.loads.is_empty() {
        return Err(usage(format!("{}: no loads", lab::clip(file))));
    }
    Ok(plan)
}

pub fn run(a: &ColocateArgs) -> anyhow::Result<i32> {
    let mut pa = side(&a.a, a)?;
    let mut pb = side(&a.b, a)?;
    // --slo-a / --slo-b, else --slo, in place of the files' own SLOs.
    let view: lab::ViewChoice = a.gate.slo_view.into();
    for (plan, own) in [(&mut pa, &a.slo_a), (&mut pb, &a.slo_b)] {
        if let Some(text) = own.as_deref().or(a.gate.slo.as_deref()) {
            plan.slo = Some(lab::Slo::parse(text, view)?);
        }
        if let Some(l) = &a.label {
            plan.template.config.label = Some(l.0.clone());
        }
    }
    let gate = Gate::judging(&[pa.slo.as_ref(), pb.slo.as_ref()], &a.gate)?;
    // Each side computes every percentile an SLO or --percentiles names.
    for plan in [&mut pa, &mut pb] {
        for (k, q) in &gate.extra {
            if !plan.template.extra_quantiles.iter().any(|(e, _)| e == k) {
                plan.template.extra_quantiles.push((k.clone(), *q));
            }
        }
    }
    let db = db_path(&a.db)?;
    pa.check(&db)?;
    pb.check(&db)?;
    let obs = Progress::new(a.json);
    // Opening it here creates it before the two sides open their own connections.
    drop(
        lab::Db::open(&db)
            .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?,
    );
    let stop = shutdown_flag()?;
    let r = lab::colocate(&pa, &pb, &db, &stop, &obs)?;
    let suites = r.suites();
    let written = gate.write(&suites)?;
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        v["written"] = serde_json::json!(written);
        output::print_json(&v)?;
    } else {
        output::print_with(|w| {
            report::sweep_view::colocation(w, &r)?;
            report::outcome_view::suites(w, &suites)?;
            report::outcome_view::written(w, &written)
        })?;
    }
    Ok(r.exit_code(gate.undecided_fails))
}
