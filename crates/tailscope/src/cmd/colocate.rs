//! `tailscope colocate A.toml B.toml`: two experiment files as the two services of a QoS
//! matrix; `lab::colocate` runs it.

use super::common::{db_path, shutdown_flag};
use super::gate::Gate;
use super::progress::Progress;
use super::sweep::{agents_of, expand, sweep_plan};
use super::target::lab_err;
use crate::cli::ColocateArgs;
use crate::exit::usage;
use crate::output;

/// One side: its file expanded into a sweep's arguments, with the shared overrides.
fn side(file: &str, a: &ColocateArgs) -> anyhow::Result<lab::SweepPlan> {
    if !file.ends_with(".toml") {
        return Err(usage(format!(
            "colocate takes two experiment files (.toml), got '{}'",
            lab::clip(file)
        )));
    }
    let mut extra = Vec::new();
    for (flag, v) in [("--duration", &a.duration), ("--warmup", &a.warmup)] {
        if let Some(v) = v {
            extra.push(std::ffi::OsString::from(format!("{flag}={v}")));
        }
    }
    let args = expand(file, &extra)?;
    let mut plan = sweep_plan(&args)?;
    // The command line's agents send both services' load.
    if let Some(agents) = agents_of(&a.agents)? {
        plan.template.agents = Some(agents);
    }
    if plan.loads.is_empty() {
        return Err(usage(format!("{}: no loads", lab::clip(file))));
    }
    Ok(plan)
}

pub fn run(a: &ColocateArgs) -> anyhow::Result<i32> {
    super::common::check_label(a.label.as_deref())?;
    let mut pa = side(&a.a, a)?;
    let mut pb = side(&a.b, a)?;
    // --slo-a / --slo-b, else --slo, in place of the files' own SLOs.
    let view: lab::ViewChoice = a.slo_view.into();
    for (plan, own) in [(&mut pa, &a.slo_a), (&mut pb, &a.slo_b)] {
        if let Some(text) = own.as_deref().or(a.slo.as_deref()) {
            plan.slo = Some(lab::Slo::parse(text, view).map_err(lab_err)?);
        }
        if a.label.is_some() {
            plan.template.config["label"] = serde_json::json!(a.label);
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
    let suites = suites(&r);
    let written = gate.write(&suites)?;
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        v["written"] = serde_json::json!(written);
        output::print_json(&v)?;
    } else {
        output::print_with(|w| report::sweep_view::colocation(w, &r))?;
        for (name, rep) in &suites {
            output::outln!("{name}:")?;
            output::print_with(|w| report::slo_view::lines(w, rep))?;
        }
        for w in written {
            output::outln!("wrote {w}")?;
        }
    }
    Ok(exit_code(&r, &gate))
}

/// 1 when the matrix failed or was interrupted, or a cell's run failed (the target, not the
/// SLO); else 3 when a side of a cell violates its SLO (or leaves it undecided under
/// `--slo-undecided fail`), as for the points of a sweep.
fn exit_code(r: &lab::Colocation, gate: &Gate) -> i32 {
    if r.status != lab::ExperimentStatus::Ok {
        return 1;
    }
    let statuses = r.cells.iter().flat_map(|c| [c.status_a, c.status_b]);
    let worst = statuses
        .map(|s| s.map_or(1, |s| s.exit_code()))
        .max()
        .unwrap_or(0);
    if worst != 0 {
        return worst;
    }
    r.cells
        .iter()
        .flat_map(|c| [c.slo_a, c.slo_b])
        .flatten()
        .map(|v| gate.code(v))
        .max()
        .unwrap_or(0)
}

/// One suite per cell and side with an SLO: "A 30 % + B 60 %: A memcached://…".
fn suites(r: &lab::Colocation) -> Vec<(String, lab::SloReport)> {
    let load = |l: &lab::Load, rps: f64| match l {
        lab::Load::OfCapacity(f) => format!("{:.0} %", f * 100.0),
        lab::Load::Rps(_) => format!("{rps:.0} req/s"),
    };
    let mut out = Vec::new();
    for c in &r.cells {
        let cell = format!(
            "A {} + B {}",
            load(&c.load_a, c.rate_a_rps),
            load(&c.load_b, c.rate_b_rps)
        );
        for (side, target, rep) in [("A", &r.a, &c.report_a), ("B", &r.b, &c.report_b)] {
            if let Some(rep) = rep {
                out.push((format!("{cell}: {side} {target}"), rep.clone()));
            }
        }
    }
    out
}
