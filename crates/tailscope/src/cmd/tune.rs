//! `tailscope tune`: parse the options into a `lab::TunePlan`, walk, print.

use host::mitigate::Journal;
use lab::{Db, Load, RunTemplate, Slo, TunePlan, TuneStepKind, View};

use super::common::{db_path, parse_cpus_flag, shutdown_flag};
use super::progress::Progress;
use super::run::{load_config, nullrpc, parse_rate, plan, Rate};
use super::target::lab_err;
use crate::cli::TuneArgs;
use crate::exit::{usage, OrUsage};
use crate::output;

pub fn run(a: &TuneArgs) -> anyhow::Result<i32> {
    let server_cpus = parse_cpus_flag("--server-cpus", a.server_cpus.as_deref())?;
    let spec = super::target::spec(&a.target, &a.server, &server_cpus, nullrpc(&a.load))?;
    let p = plan(&a.load)?;
    let load = match parse_rate(&a.rate)? {
        Rate::PerSecond(r) => Load::Rps(r),
        Rate::OfCapacity(f) => Load::OfCapacity(f),
    };
    let steps = a
        .steps
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<TuneStepKind>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(lab_err)?;
    let slo = a
        .slo
        .as_deref()
        .map(|s| Slo::parse(s, View::User))
        .transpose()
        .map_err(lab_err)?;
    if !a.root.is_dir() {
        return Err(usage(format!(
            "--root {} is not a directory",
            a.root.display()
        )));
    }
    let la = &a.load;
    let template = RunTemplate {
        precision: p.precision.clone(),
        extra_quantiles: slo.as_ref().map(Slo::extra_quantiles).unwrap_or_default(),
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
        }),
    };
    lab::check_tunable(&template).map_err(lab_err)?;
    let db = db_path(&a.db)?;
    // Every step's server must be startable: the walk's first (baseline) sweep is checked
    // like a sweep.
    let probe = lab::SweepPlan {
        kind: "tune".into(),
        template: template.clone(),
        loads: vec![load],
        axes: Vec::new(),
        repeat: 1,
        slo: slo.clone(),
        find_max: slo.is_some(),
        max_steps: a.max_steps,
        experiment: None,
    };
    probe.check(&db).map_err(lab_err)?;
    let tplan = TunePlan {
        template,
        load,
        steps,
        slo,
        max_steps: a.max_steps,
        root: a.root.clone(),
        journal_dir: a.state_dir.clone().unwrap_or_else(Journal::default_dir),
    };
    let obs = Progress::new(a.json);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let result = lab::tune(&tplan, &db, &stop, &obs).map_err(lab_err)?;
    if a.json {
        output::print_json(&serde_json::to_value(&result)?)?;
    } else {
        output::print_with(|w| report::sweep_view::tune(w, &result))?;
    }
    Ok(if result.status == "ok" { 0 } else { 1 })
}
