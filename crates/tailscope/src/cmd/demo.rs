//! `tailscope demo`: the one-command tour — a small sweep (`lab::demo`) of the built-in server
//! at three utilisations, measured vs ideal printed for each (`report::demo_tour`), the runs
//! stored as one experiment, the CCDFs plotted.

use std::sync::atomic::Ordering;

use lab::demo::{calibration_of, DemoSpec};
use lab::Db;
use report::demo_tour::{DemoJson, DemoServer, Tour};

use super::common::{db_path, shutdown_flag};
use super::progress::Progress;
use crate::cli::{DemoArgs, GateArgs, OutputArgs};
use crate::exit::usage;
use crate::output::{self, outln};

pub fn run(a: &DemoArgs) -> anyhow::Result<i32> {
    let out = OutputArgs {
        json: a.json,
        ccdf: None,
        plot: Some(a.plot.clone()),
    };
    let gate_args = GateArgs {
        slo: a.slo.clone(),
        slo_view: lab::options::ViewArg::Auto,
        percentiles: None,
        slo_undecided: a.slo_undecided,
        junit: None,
        markdown: None,
    };
    let gate = report::gate::Gate::new(&gate_args)?;
    let spec = DemoSpec {
        server_cpu: a.server_cpu,
        client_cpu: a.client_cpu,
        work: lab::model_query::read_service(&a.work)?,
        work_text: a.work.clone(),
        sched: a.sched.clone(),
        duration: a.duration.value.0,
        duration_text: a.duration.text.clone(),
        warmup: a.warmup.value.0,
        warmup_text: a.warmup.text.clone(),
        loads_pct: a.loads.clone(),
        repeat: a.repeat,
        label: a.label.clone().map(|l| l.0),
        slo: gate.slo.clone(),
        extra_quantiles: gate.extra.clone(),
    };
    let mut plan = spec.plan(host::placement::online_cpus())?;
    output::check_outputs(&out)?;
    let db = db_path(&a.db)?;
    plan.sweep.check(&db)?;
    let (server_cpu, client_cpu) = (plan.server_cpu, plan.client_cpu);
    let progress = Progress::new(a.json);
    let show = |run: &lab::Run| {
        let _ = outln!();
        let _ = output::print_with(|w| report::terminal::run(w, run));
    };
    let tour = Tour::new(&progress, (!a.json && a.detail).then_some(&show as _));
    let tour = if a.detail { tour } else { tour.brief() };
    lab::Observer::note(&tour, &format!("demo: the built-in server ({}, 1 epoll worker) on CPU {server_cpu}; the generator on CPU {client_cpu}", a.work));
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let host_noise = lab::probe_noise(a.no_noise_probe, &[client_cpu], &[server_cpu], &stop, &tour);
    plan.sweep.template.config.host_noise = host_noise.clone();
    let result = lab::sweep(&plan.sweep, &db, &stop, &tour)?;
    let toured = tour.finish();
    let host_line = host_noise.as_ref().map(|h| h.line());
    let mut closing =
        report::demo_view::closing(host_line.as_deref(), &toured.allows, &toured.runs);
    closing.extend(report::demo_view::spread(&result.points));
    let written = if toured.series.is_empty() {
        Vec::new()
    } else {
        output::write_ccdf_outputs(
            &out,
            "tailscope demo: built-in server, measured vs ideal",
            &toured.series,
        )?
    };
    let interrupted = stop.load(Ordering::Relaxed);
    // 0 when every run has a valid view (the user's, else the server's) or is saturated.
    let code = if interrupted || result.rows.is_empty() {
        1
    } else {
        super::sweep::gate_code(&result, &gate)
    };
    if !a.json && a.detail {
        output::print_with(|w| {
            report::demo_tour::end(w, &result, &toured.runs, &written, &closing)
        })?;
        return Ok(code);
    }
    if !a.json {
        output::print_with(|w| {
            report::demo_view::brief(
                w,
                result.experiment_id,
                &toured.runs,
                &result.points,
                host_line.as_deref(),
                &written,
            )
        })?;
        return Ok(code);
    }
    output::print_json(&DemoJson {
        experiment_id: result.experiment_id,
        server: DemoServer {
            arch: "epoll",
            workers: 1,
            work: &a.work,
            cpu: server_cpu,
        },
        calibration: calibration_of(&db, &toured.runs),
        runs: &toured.runs,
        status: &result.status,
        points: &result.points,
        host_noise: host_noise.as_ref(),
        closing: &closing,
        exit_code: code,
        interrupted,
        written: &written,
    })?;
    // The same closing lines for a person, on stderr (stdout holds the one object).
    for l in &closing {
        eprintln!("{l}");
    }
    Ok(code)
}
