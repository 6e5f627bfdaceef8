//! `tailscope tune`: parse the options into a `lab::TunePlan`, walk, print.

use host::mitigate::Journal;
use lab::{Db, Load, RunTemplate, SloReport, TunePlan, TuneStepKind};

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
    let steps = parse_steps(&a.steps)?;
    if let Some(dir) = &a.state_dir {
        super::common::check_dir_flag("--state-dir", dir)?;
    }
    super::common::check_label(a.label.as_deref())?;
    let gate = super::gate::Gate::new(a.slo.as_deref(), a.slo_view.into(), &a.gate)?;
    let slo = gate.slo.clone();
    if !a.root.is_dir() {
        return Err(usage(format!(
            "--root {} is not a directory",
            a.root.display()
        )));
    }
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
    let (gated, all) = suites(&result);
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
        output::print_with(|w| report::sweep_view::tune(w, &result))?;
        if let (Some(t), Some(rep)) = (result.tuned(), result.tuned().and_then(|t| t.slo.as_ref()))
        {
            output::outln!("the tuned configuration (through step {}):", t.name)?;
            output::print_with(|w| report::slo_view::lines(w, rep))?;
        }
        for w in written {
            output::outln!("wrote {w}")?;
        }
    }
    Ok(exit_code(&result, &gate))
}

/// `--steps rt,udp,…`: at least one step, no empty item, none twice.
fn parse_steps(text: &str) -> anyhow::Result<Vec<TuneStepKind>> {
    const ALL: &str = "rt, udp, irq, numa, cstate, governor";
    if text.trim().is_empty() {
        return Err(usage(format!(
            "--steps: no step given (one or more of {ALL}, joined by commas)"
        )));
    }
    let mut steps: Vec<TuneStepKind> = Vec::new();
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(usage(format!(
                "--steps: an empty item in '{}' (steps are joined by single commas, e.g. rt,udp)",
                lab::clip(text)
            )));
        }
        let step = item.parse::<TuneStepKind>().map_err(lab_err)?;
        if steps.contains(&step) {
            return Err(usage(format!(
                "--steps: '{item}' is given twice (each mitigation is a step once)"
            )));
        }
        steps.push(step);
    }
    Ok(steps)
}

/// 1 when the walk failed or was interrupted, or its tuned configuration (the last step
/// measured) did not measure; else, with an SLO, the gate's code of that configuration's
/// verdict at the walk's load: earlier steps are expected to fall short (that is why one
/// tunes), the configuration the walk ends with is the one to ship.
fn exit_code(result: &lab::TuneResult, gate: &super::gate::Gate) -> i32 {
    if result.status != lab::ExperimentStatus::Ok {
        return 1;
    }
    let Some(t) = result.tuned() else { return 1 };
    if matches!(
        t.status,
        Some(lab::RunStatus::Failed | lab::RunStatus::Interrupted) | None
    ) {
        return 1;
    }
    t.slo.as_ref().map_or(0, |r| gate.code(r.verdict))
}

/// Named SLO judgements: what the JUnit and Markdown files hold.
type Suites = Vec<(String, SloReport)>;

/// The JUnit suites (the tuned configuration: what the exit code reads) and the Markdown
/// ones (every step measured, in order).
fn suites(result: &lab::TuneResult) -> (Suites, Suites) {
    let name = |t: &lab::TuneStep| {
        if t.changes.is_empty() {
            format!("step {}", t.name)
        } else {
            format!("step {} ({})", t.name, t.changes.join("; "))
        }
    };
    let all = result
        .steps
        .iter()
        .filter_map(|t| Some((name(t), t.slo.clone()?)))
        .collect();
    let gated = result
        .tuned()
        .and_then(|t| Some((format!("tuned configuration: {}", name(t)), t.slo.clone()?)))
        .into_iter()
        .collect();
    (gated, all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{GateArgs, UndecidedArg};
    use lab::{TuneResult, TuneStep, Verdict, ViewChoice};

    fn step(name: &str, verdict: Option<Verdict>) -> TuneStep {
        TuneStep {
            name: name.into(),
            changes: Vec::new(),
            skipped: verdict.is_none().then(|| "not on this host".into()),
            run_id: verdict.map(|_| 1),
            status: verdict.map(|_| lab::RunStatus::Ok),
            measured: None,
            ideal: None,
            excess: None,
            max_load_rps: None,
            max_load_pct: None,
            slo: verdict.map(|verdict| SloReport {
                text: "p99<=1ms".into(),
                view: ViewChoice::Auto,
                conditions: Vec::new(),
                verdict,
            }),
        }
    }

    fn code(steps: Vec<TuneStep>, undecided: UndecidedArg) -> i32 {
        let g = GateArgs {
            percentiles: None,
            slo_undecided: undecided,
            junit: None,
            markdown: None,
        };
        let gate = super::super::gate::Gate::new(Some("p99<=1ms"), ViewChoice::Auto, &g).unwrap();
        let r = TuneResult {
            experiment_id: 1,
            status: lab::ExperimentStatus::Ok,
            steps,
        };
        exit_code(&r, &gate)
    }

    #[test]
    fn steps_are_given_once_each() {
        assert_eq!(
            parse_steps(" rt, udp ").unwrap(),
            vec![TuneStepKind::Rt, TuneStepKind::Udp]
        );
        for bad in ["", " ", "rt,", ",rt", "rt,,udp", "rt,rt", "rt,bogus"] {
            let e = parse_steps(bad).unwrap_err();
            assert_eq!(crate::exit::code_of(&e), 2, "{bad}");
            assert!(e.to_string().contains("--steps"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_last_measured_step_decides() {
        use Verdict::*;
        let f = UndecidedArg::Fail;
        // The baseline falling short is why one tunes; the tuned configuration decides.
        assert_eq!(
            code(
                vec![step("baseline", Some(Violates)), step("rt", Some(Meets))],
                f
            ),
            0
        );
        assert_eq!(
            code(
                vec![step("baseline", Some(Meets)), step("rt", Some(Violates))],
                f
            ),
            3
        );
        // A skipped last step changed nothing: the step before it is the tuned one.
        let skipped = vec![
            step("baseline", Some(Violates)),
            step("rt", Some(Meets)),
            step("numa", None),
        ];
        assert_eq!(code(skipped, f), 0);
        assert_eq!(code(vec![step("baseline", Some(Undecided))], f), 3);
        assert_eq!(
            code(vec![step("baseline", Some(Undecided))], UndecidedArg::Pass),
            0
        );
        // Nothing measured: the walk gave no configuration to judge.
        assert_eq!(code(vec![step("numa", None)], f), 1);
    }
}
