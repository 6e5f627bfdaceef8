//! `tailscope demo`: the one-command tour — a small sweep. The built-in server on its own CPU
//! with a known synthetic service time, calibrated, Poisson load at three utilisations from
//! the generator's CPU; measured vs ideal printed for each, the runs stored as one
//! experiment, the CCDFs plotted.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use lab::{Db, Load, RunTemplate, SpawnSpec, SweepPlan, TargetSpec, WorkloadSpec};
use load::LoadConfig;
use serde_json::{json, Value};

use super::common::{db_path, parse_duration, parse_sched, shutdown_flag};
use super::progress::Progress;
use super::target::lab_err;
use crate::cli::{DemoArgs, OutputArgs};
use crate::exit::usage;
use crate::output::{self, outln};

/// Shows each run as it is stored and keeps its CCDFs for the plot.
struct Tour {
    progress: Progress,
    json: bool,
    series: Mutex<Vec<report::Series>>,
    runs: Mutex<Vec<Value>>,
    /// Per run: its load and what this host allows there (one line each).
    allows: Mutex<Vec<String>>,
}

impl lab::Observer for Tour {
    fn note(&self, msg: &str) {
        self.progress.note(msg)
    }
    fn progress(&self, phase: &str, done: u64, total: u64) {
        self.progress.progress(phase, done, total)
    }
    fn phase_done(&self, phase: &str) {
        self.progress.phase_done(phase)
    }
    fn run_done(&self, run: &lab::Run) {
        let pct = run.config["load_pct"].as_f64().unwrap_or(0.0);
        let label = format!("{pct:.0}% load");
        if !self.json {
            let _ = outln!();
            let _ = output::print_with(|w| report::terminal::run(w, run));
        }
        if let Ok(mut s) = self.series.lock() {
            s.push(report::Series::new(
                format!("measured {label}"),
                run.analysis.measured_ccdf_us.clone(),
            ));
            let mut i =
                report::Series::new(format!("ideal {label}"), run.analysis.ideal_ccdf_us.clone());
            i.dashed = true;
            s.push(i);
        }
        if let Ok(mut r) = self.runs.lock() {
            let mut v = run.to_json();
            v["load_pct"] = json!(pct);
            r.push(v);
        }
        if let Ok(mut l) = self.allows.lock() {
            l.push(allows(&label, run));
        }
    }
}

/// What a run shows this host allows, in one line: the status, each view's validity, the
/// headline view and its numbers (`headline: server view` is the run's `headline_view`).
fn allows(label: &str, run: &lab::Run) -> String {
    let v = &run.views;
    let word = |ok: bool| if ok { "valid" } else { "invalid" };
    let server = match &v.server {
        Some(s) => format!("server view {} ({})", word(s.valid), s.why),
        None => "no server view".into(),
    };
    let a = &run.analysis;
    let (measured, ideal) = match v.headline {
        lab::View::User => (Some(&a.measured), a.ideal.as_ref()),
        lab::View::Server => (
            a.server_view.as_ref().map(|s| &s.measured),
            a.server_view.as_ref().and_then(|s| s.ideal.as_ref()),
        ),
    };
    let q = |s: Option<&stats::Summary>, k: &str| {
        s.and_then(|s| s.get(k))
            .map_or("-".into(), |e| report::terminal::fmt_ns(e.value))
    };
    format!(
        "{label} (run {}): {}; user view {} ({}); {server}; headline: {} view: p50 {}, p99 {}, p99.9 {} (ideal p99 {}){}",
        run.run_id.map_or("-".into(), |i| i.to_string()),
        run.status,
        word(v.user.valid),
        v.user.why,
        v.headline,
        q(measured, "p50"),
        q(measured, "p99"),
        q(measured, "p99.9"),
        q(ideal, "p99"),
        if v.is_valid(v.headline) {
            ""
        } else {
            " — NOT VALID"
        }
    )
}

/// The closing lines: the host's noise, then per load what this host allows, then which
/// view to read here.
fn closing(host: Option<&noise::HostNoise>, per_run: &[String], runs: &[Value]) -> Vec<String> {
    let mut out = vec!["what this host allows:".to_string()];
    out.push(match host {
        Some(h) => format!("  {}", h.line()),
        None => "  host noise: not probed".into(),
    });
    out.extend(per_run.iter().map(|l| format!("  {l}")));
    let heads: Vec<&str> = runs
        .iter()
        .filter_map(|r| r["headline_view"].as_str())
        .collect();
    let valid = |view: &str| {
        runs.iter()
            .filter(|r| r["views"][view]["valid"].as_bool() == Some(true))
            .count()
    };
    let (user, server) = (valid("user"), valid("server"));
    let n = runs.len();
    out.push(if n == 0 {
        "  no run was measured".into()
    } else if user == n {
        "  the user view is valid at every load: the generator kept its schedule on this host; read the user view".into()
    } else if server == n {
        format!(
            "  the user view is valid at {user} of {n} loads (the generator was late), the server view at every load: on this host read the server view (headlines: {})",
            heads.join(", ")
        )
    } else {
        format!(
            "  the user view is valid at {user} of {n} loads, the server view at {server}: read each run's headline view (headlines: {})",
            heads.join(", ")
        )
    });
    out
}

/// How far the repeats of each load spread, in the view each load is read from: the host's
/// drift between runs, which no single run's interval can show.
fn spread(points: &[lab::Point]) -> Vec<String> {
    let mut out = Vec::new();
    for p in points.iter().filter(|p| p.result.repeats > 1) {
        let r = &p.result;
        let (name, c) = match r.headline {
            lab::View::User => ("user", r.user.as_ref()),
            lab::View::Server => ("server", r.server.as_ref()),
        };
        let load = p
            .load_pct
            .map_or(format!("{:.0} req/s", p.offered_rps), |l| {
                format!("{l:.0}%")
            });
        let Some(c) = c else {
            out.push(format!(
                "  {load}: {} repeats, fewer than 2 of them measured a view validly",
                r.repeats
            ));
            continue;
        };
        let line = |key: &str| -> Option<String> {
            let e = c.summary.get(key)?;
            let vals = &c.estimates.iter().find(|(k, _)| k == key)?.1;
            let (lo, hi) = vals
                .iter()
                .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(*v), b.max(*v)));
            // Two repeats give a t(1) interval too wide to print usefully: their range says
            // more.
            let interval = if vals.len() >= 3 {
                format!(
                    " [{}, {}]",
                    report::terminal::fmt_ns(e.lo),
                    report::terminal::fmt_ns(e.hi)
                )
            } else {
                String::new()
            };
            Some(format!(
                "{key} {}{interval} (repeats {} to {}, x{:.2})",
                report::terminal::fmt_ns(e.value),
                report::terminal::fmt_ns(lo),
                report::terminal::fmt_ns(hi),
                if lo > 0.0 { hi / lo } else { f64::NAN }
            ))
        };
        out.push(format!(
            "  {load}: median of {} valid of {} repeats, {name} view: {}; {}",
            c.counted,
            r.repeats,
            line("p50").unwrap_or_default(),
            line("p99").unwrap_or_default()
        ));
    }
    if !out.is_empty() {
        out.insert(
            0,
            "how far the repeats spread (the host drifts between runs; only repeats show it — with 3 or more, an interval from their spread; --repeat):".into(),
        );
    }
    out
}

pub fn run(a: &DemoArgs) -> anyhow::Result<i32> {
    let online = host::placement::online_cpus();
    let server_cpu = a.server_cpu.unwrap_or(if online > 1 { 1 } else { 0 });
    let client_cpu = a.client_cpu.unwrap_or(0);
    for (flag, c) in [("--server-cpu", server_cpu), ("--client-cpu", client_cpu)] {
        if c >= online {
            return Err(usage(format!(
                "{flag}: CPU {c} does not exist (this machine has {online})"
            )));
        }
    }
    if a.repeat == 0 || a.repeat > 20 {
        return Err(usage(format!(
            "--repeat must be in 1..=20, got {}",
            a.repeat
        )));
    }
    if a.loads.is_empty() || a.loads.iter().any(|l| !(*l > 0.0 && *l < 100.0)) {
        return Err(usage(
            "--loads must be percentages in (0, 100), e.g. 30,60,85",
        ));
    }
    super::common::check_label(a.label.as_deref())?;
    let work = super::model::parse_service(&a.work)?;
    let sched = parse_sched(a.sched.as_deref())?;
    let duration = parse_duration("--duration", &a.duration)?;
    let warmup = std::time::Duration::from_secs(2);
    if duration <= warmup {
        return Err(usage(format!(
            "--duration must be longer than the demo's 2 s warm-up, got {}",
            a.duration
        )));
    }
    let out = OutputArgs {
        json: a.json,
        ccdf: None,
        plot: Some(a.plot.clone()),
    };
    output::check_outputs(&out)?;
    let mut load = LoadConfig::new(super::run::parse_target("nullrpc://127.0.0.1:1")?, 1.0);
    load.stop = load::StopAt::Duration(duration - warmup);
    load.warmup = warmup;
    load.connections = 8;
    load.cpus = vec![client_cpu];
    load.yield_when_far = false;
    let gate = super::gate::Gate::new(
        a.slo.as_deref(),
        lab::ViewChoice::Auto,
        &crate::cli::GateArgs {
            percentiles: None,
            slo_undecided: a.slo_undecided,
            junit: None,
            markdown: None,
        },
    )?;
    let plan = SweepPlan {
        kind: "demo".into(),
        template: RunTemplate {
            agents: None,
            precision: None,
            extra_quantiles: gate.extra.clone(),
            target: TargetSpec {
                url: "nullrpc://".into(),
                spawn: Some(SpawnSpec {
                    threads: Some(1),
                    cpus: vec![server_cpu],
                    sched,
                    arch: Some(server::Arch::Epoll),
                    work: Some(work),
                    ..SpawnSpec::default()
                }),
                workload: WorkloadSpec::default(),
                churn: None,
                preload: false,
                stress: None,
            },
            load,
            service_ns: None,
            workers: None,
            queues: None,
            confidence: 0.95,
            lateness_threshold_ns: 50_000.0,
            attribution: true,
            server_cpus: Vec::new(),
            extra_pids: Vec::new(),
            calibrate: lab::CalibrateSpec::default(),
            config: json!({"demo": true, "duration": a.duration, "connections": 8,
                           "client_cpu": client_cpu, "server_cpu": server_cpu, "work": a.work,
                           "label": a.label}),
        },
        loads: a
            .loads
            .iter()
            .map(|p| Load::OfCapacity(p / 100.0))
            .collect(),
        axes: Vec::new(),
        repeat: a.repeat,
        slo: gate.slo.clone(),
        find_max: false,
        max_steps: 2,
        experiment: None,
    };
    let db = db_path(&a.db)?;
    plan.check(&db).map_err(lab_err)?;
    let tour = Tour {
        progress: Progress::new(a.json),
        json: a.json,
        series: Mutex::new(Vec::new()),
        runs: Mutex::new(Vec::new()),
        allows: Mutex::new(Vec::new()),
    };
    lab::Observer::note(
        &tour,
        &format!(
            "demo: the built-in server ({}, 1 epoll worker) on CPU {server_cpu}; the generator on CPU {client_cpu}",
            a.work
        ),
    );
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let host_noise =
        super::run::probe_noise(a.no_noise_probe, &[client_cpu], &[server_cpu], &stop, &tour);
    let mut plan = plan;
    plan.template.config["host_noise"] = json!(host_noise);
    let result = lab::sweep(&plan, &db, &stop, &tour).map_err(lab_err)?;
    let series = tour.series.into_inner().unwrap_or_default();
    let runs = tour.runs.into_inner().unwrap_or_default();
    let per_run = tour.allows.into_inner().unwrap_or_default();
    let mut closing = closing(host_noise.as_ref(), &per_run, &runs);
    closing.extend(spread(&result.points));
    let written = if series.is_empty() {
        Vec::new()
    } else {
        output::write_ccdf_outputs(
            &out,
            "tailscope demo: built-in server, measured vs ideal",
            &series,
        )?
    };
    // 0 when every run has a valid view (the user's, else the server's) or is saturated.
    let code = if stop.load(Ordering::Relaxed) || result.rows.is_empty() {
        1
    } else {
        super::sweep::gate_code(&result, &gate)
    };
    // The calibration the sweep made, as the store keeps it.
    let calibration = runs
        .first()
        .and_then(|r| r["ideal_source"]["calibration_run"].as_i64())
        .and_then(|id| db.store.get_run(id).ok().flatten())
        .and_then(|r| r.summary);
    if a.json {
        output::print_json(&json!({
            "experiment_id": result.experiment_id,
            "server": {"arch": "epoll", "workers": 1, "work": a.work, "cpu": server_cpu},
            "calibration": calibration,
            "runs": runs,
            "status": result.status,
            "points": result.points,
            "host_noise": host_noise,
            "closing": closing,
            "exit_code": code,
            "interrupted": stop.load(Ordering::Relaxed),
            "written": written,
        }))?;
        // The same closing lines for a person, on stderr (stdout holds the one object).
        for l in &closing {
            eprintln!("{l}");
        }
    } else {
        outln!()?;
        let heads: std::collections::BTreeMap<i64, lab::View> = runs
            .iter()
            .filter_map(|v| {
                let view = serde_json::from_value(v["headline_view"].clone()).ok()?;
                Some((v["run_id"].as_i64()?, view))
            })
            .collect();
        output::print_with(|w| report::sweep_view::sweep_views(w, &result, &heads))?;
        for w in written {
            outln!("wrote {w}")?;
        }
        outln!()?;
        for l in &closing {
            outln!("{l}")?;
        }
    }
    Ok(code)
}
