//! `tailscope tune`: parse the options into a `lab::TunePlan`, walk, print.

use host::mitigate::Journal;
use lab::{Db, Load, RunTemplate, TunePlan, TuneStepKind};

use super::common::{db_path, parse_cpus_flag, shutdown_flag};
use super::progress::Progress;
use super::run::{load_config, nullrpc, parse_rate, plan, Rate};
use super::target::lab_err;
use crate::cli::TuneArgs;
use crate::exit::{usage, OrUsage};
use crate::output;

pub fn run(a: &TuneArgs) -> anyhow::Result<i32> {
    let server_cpus = parse_cpus_flag("--server-cpus", a.server_cpus.as_deref())?;
    let mut spec = super::target::spec(&a.target, &a.server, &server_cpus, nullrpc(&a.load))?;
    super::run::apply_workload(&a.load, &mut spec.workload);
    let p = plan(&a.load)?;
    let load = match parse_rate(&a.rate)? {
        Rate::PerSecond(r) => Load::Rps(r),
        Rate::OfCapacity(f) => Load::OfCapacity(f),
    };
    let steps = TuneStepKind::parse_list(&a.steps).map_err(lab_err)?;
    if let Some(dir) = &a.state_dir {
        super::common::check_dir_flag("--state-dir", dir)?;
    }
    super::common::check_label(a.label.as_deref())?;
    let gate = super::gate::Gate::new(a.slo.as_deref(), a.slo_view.into(), &a.gate)?;
    let slo = gate.slo.clone();
    let la = &a.load;
    let template = RunTemplate {
        agents: super::sweep::agents_of(&a.agents)?,
        precision: p.precision.clone(),
        extra_quantiles: gate.extra.clone(),
        target: spec,
        load: load_config(la, &p, 1.0)?,
        service_ns: a
            .service
            .as_deref()
            .map(|s| model::parse_duration_ns(s).or_usage_ctx("--service"))
            .transpose()?,
        workers: None,
        queues: None,
        confidence: la.confidence,
        lateness_threshold_ns: p.lateness_threshold_ns,
        attribution: !a.no_attribution,
        server_cpus,
        extra_pids: Vec::new(),
        calibrate: lab::CalibrateSpec::default(),
        config: serde_json::json!({
            "target": a.target, "rate": a.rate, "duration": la.duration, "warmup": la.warmup,
            "connections": la.connections, "cpus": p.cpus, "seed": la.seed, "slo": a.slo,
            "slo_view": lab::ViewChoice::from(a.slo_view), "label": a.label,
        }),
    };
    let tplan = TunePlan {
        template,
        load,
        steps,
        slo,
        max_steps: a.max_steps,
        root: a.root.clone(),
        journal_dir: a.state_dir.clone().unwrap_or_else(Journal::default_dir),
    };
    let db = db_path(&a.db)?;
    tplan.check(&db).map_err(lab_err)?;
    let obs = Progress::new(a.json);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let result = lab::tune(&tplan, &db, &stop, &obs).map_err(lab_err)?;
    let (gated, all) = result.suites();
    let written = if gate.slo.is_some() {
        gate.write_split(&gated, &all)?
    } else {
        Vec::new()
    };
    if a.json {
        let mut v = serde_json::to_value(&result)?;
        v["tuned"] = serde_json::json!(result.tuned().map(|t| &t.name));
        v["written"] = serde_json::json!(written);
        output::print_json(&v)?;
    } else {
        output::print_with(|w| report::outcome_view::tune(w, &result))?;
        output::print_with(|w| report::outcome_view::written(w, &written))?;
    }
    Ok(result.exit_code(gate.undecided_fails))
}
