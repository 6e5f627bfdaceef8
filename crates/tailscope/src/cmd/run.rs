//! `tailscope run`: parse and validate the options into a target plan and a run plan, start
//! the target, find the ideal's service time, call `lab::measure`, print.

use std::time::Duration;

use analysis::{IdealSpec, QueueStructure};
use lab::{Db, RunPlan, TargetPlan};
use load::{LoadConfig, NullRpcWorkload, StopAt, Target};
use serde_json::json;

use super::common::{db_path, parse_cpus, parse_cpus_flag, parse_duration, shutdown_flag};
use super::progress::Progress;
use super::target::lab_err;
use crate::cli::{AgentArgs, LoadArgs, OnOff, RunArgs, WorkloadArg};
use crate::exit::{usage, OrUsage};
use crate::output::{self, outln};

/// A requested rate: absolute, or a fraction of the calibrated capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    PerSecond(f64),
    OfCapacity(f64),
}

pub fn parse_rate(s: &str) -> anyhow::Result<Rate> {
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        let v: f64 = p
            .trim()
            .parse()
            .map_err(|_| usage(format!("--rate: cannot parse '{s}'")))?;
        if !(v > 0.0 && v.is_finite()) {
            return Err(usage(format!(
                "--rate must be a positive percentage, got '{s}'"
            )));
        }
        return Ok(Rate::OfCapacity(v / 100.0));
    }
    let v = model::parse_count(t)
        .map(|c| c as f64)
        .or_else(|_| t.parse::<f64>())
        .map_err(|_| {
            usage(format!(
                "--rate: cannot parse '{s}' (requests per second, or a percentage like 70%)"
            ))
        })?;
    if !(v > 0.0 && v.is_finite()) {
        return Err(usage(format!("--rate must be positive, got '{s}'")));
    }
    if v > load::MAX_RATE {
        return Err(usage(format!(
            "--rate {s} is beyond any generator (at most {:.0e} req/s)",
            load::MAX_RATE
        )));
    }
    Ok(Rate::PerSecond(v))
}

pub fn parse_target(s: &str) -> anyhow::Result<Target> {
    s.parse::<Target>().or_usage_ctx("target")
}

/// The null-RPC request options of the load flags.
pub fn nullrpc(a: &LoadArgs) -> NullRpcWorkload {
    NullRpcWorkload {
        request_size: a.request_size,
        stamps: !a.no_stamps,
    }
}

/// `--workload`'s sizes and mix in `w` (its arrivals are [`plan`]'s).
pub fn apply_workload(a: &LoadArgs, w: &mut lab::WorkloadSpec) {
    if a.workload == Some(WorkloadArg::Etc) {
        w.key_size = load::SizeDist::Etc(load::EtcSize::Key);
        w.value_size = load::SizeDist::Etc(load::EtcSize::Value);
        w.get_ratio = load::etc::ETC_GET_RATIO;
    }
}

/// The arrival process as the user named it (for the stored config).
pub fn arrival_text(a: &LoadArgs) -> String {
    match a.workload {
        Some(WorkloadArg::Etc) => "etc".into(),
        None => a.arrival.clone(),
    }
}

/// Validated load options (everything but the rate and the target).
pub struct LoadPlan {
    pub arrival: model::ArrivalSpec,
    pub stop: StopAt,
    pub warmup: Duration,
    pub timeout: Duration,
    pub cpus: Vec<usize>,
    pub lateness_threshold_ns: f64,
    pub precision: Option<lab::converge::Precision>,
}

pub fn plan(a: &LoadArgs) -> anyhow::Result<LoadPlan> {
    let unit = super::model::parse_unit(&a.trace_unit)?;
    let arrival = match a.workload {
        Some(WorkloadArg::Etc) => model::ArrivalSpec::GenPareto {
            shape: model::ETC_GAP_SHAPE,
        },
        None => super::model::parse_arrival(&a.arrival, unit)?,
    };
    let stop = match &a.requests {
        Some(r) => {
            let n = model::parse_count(r).or_usage_ctx("--requests")?;
            if n == 0 {
                return Err(usage("--requests must be at least 1"));
            }
            StopAt::Requests(n)
        }
        None => {
            let d = parse_duration("--duration", &a.duration)?;
            if d.is_zero() {
                return Err(usage("--duration must be positive"));
            }
            StopAt::Duration(d)
        }
    };
    if a.connections == 0 || a.threads == 0 || a.max_outstanding == 0 {
        return Err(usage(
            "--connections, --threads and --max-outstanding must be at least 1",
        ));
    }
    if a.threads > a.connections {
        return Err(usage(format!(
            "--threads ({}) cannot exceed --connections ({}): each thread owns connections",
            a.threads, a.connections
        )));
    }
    if a.connections > 100_000 {
        return Err(usage(format!(
            "--connections must be at most 100000, got {}",
            a.connections
        )));
    }
    if !(a.confidence > 0.0 && a.confidence < 1.0) {
        return Err(usage(format!(
            "--confidence must be in (0, 1), got {}",
            a.confidence
        )));
    }
    if let Some(alpha) = a.alpha {
        if !(alpha > 0.0 && alpha <= 1.0) {
            return Err(usage(format!("--alpha must be in (0, 1], got {alpha}")));
        }
    }
    let warmup = parse_duration("--warmup", &a.warmup)?;
    if let StopAt::Duration(d) = stop {
        if warmup >= d {
            return Err(usage(format!(
                "--warmup ({}) must be shorter than --duration ({})",
                a.warmup, a.duration
            )));
        }
    }
    let precision = match &a.precision {
        None if a.max_duration.is_some() => {
            return Err(usage(
                "--max-duration goes with --precision (how long a converging run may take)",
            ))
        }
        None => None,
        Some(text) => {
            let max_text = a.max_duration.as_deref().unwrap_or("60s");
            let max = parse_duration("--max-duration", max_text)?;
            let p = lab::converge::Precision::parse(text, lab::View::User, max).map_err(lab_err)?;
            match stop {
                StopAt::Requests(_) => {
                    return Err(usage(
                        "--precision keeps a run going in time: give --duration (the least it runs), not --requests",
                    ))
                }
                StopAt::Duration(d) if d > max => {
                    return Err(usage(format!(
                        "--duration ({}) is longer than --max-duration ({max_text})",
                        a.duration
                    )))
                }
                StopAt::Duration(_) => {}
            }
            Some(p)
        }
    };
    let timeout = parse_duration("--timeout", &a.timeout)?;
    if timeout.is_zero() {
        return Err(usage("--timeout must be positive"));
    }
    Ok(LoadPlan {
        arrival,
        stop,
        warmup,
        timeout,
        cpus: parse_cpus(a.cpus.as_deref())?,
        lateness_threshold_ns: model::parse_duration_ns(&a.lateness_threshold)
            .or_usage_ctx("--lateness-threshold")?,
        precision,
    })
}

/// The load configuration; its target is a placeholder until the target is started.
pub fn load_config(a: &LoadArgs, p: &LoadPlan, rate: f64) -> anyhow::Result<LoadConfig> {
    Ok(LoadConfig {
        target: parse_target("nullrpc://127.0.0.1:1")?,
        arrival: p.arrival.clone(),
        rate_per_s: rate,
        stop: p.stop,
        warmup: p.warmup,
        connections: a.connections,
        threads: a.threads,
        cpus: p.cpus.clone(),
        max_outstanding_per_conn: a.max_outstanding,
        timeout: p.timeout,
        seed: a.seed,
        class_probs: match a.alpha {
            Some(alpha) if alpha < 1.0 => vec![alpha, 1.0 - alpha],
            _ => Vec::new(),
        },
        yield_when_far: a.yield_when_far,
        churn: None,
        writer_cpus: Vec::new(),
        spread: Vec::new(),
        share: (0, 1),
        start_at_mono_ns: None,
        flush_every: None,
    })
}

/// The ideal's per-worker service time, when it is known before the target starts: given,
/// or the latest stored calibration (whole-target time per request × its workers).
fn known_service(
    a: &RunArgs,
    db: &std::path::Path,
) -> anyhow::Result<Option<(f64, lab::IdealSource)>> {
    if let Some(s) = a.side.service.as_deref() {
        let ns = model::parse_duration_ns(s).or_usage_ctx("--service")?;
        if ns.is_nan() || ns <= 0.0 {
            return Err(usage(format!("--service must be positive, got '{s}'")));
        }
        return Ok(Some((ns, lab::IdealSource::given())));
    }
    if a.side.server.spawn || !db.exists() {
        return Ok(None);
    }
    let st = store::Store::open(db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    Ok(lab::stored_calibration(&st, &a.target)
        .map_err(lab_err)?
        .map(|c| (c.service_ns * f64::from(c.workers), c.source)))
}

pub fn run(a: &RunArgs) -> anyhow::Result<i32> {
    // Validate everything, then run: nothing is written (not even the store file) and no
    // server is started on bad input.
    let (_, mut spec) = super::target::side_spec(&a.target, &a.side, nullrpc(&a.load))?;
    apply_workload(&a.load, &mut spec.workload);
    let tplan = TargetPlan::new(&spec).map_err(lab_err)?;
    let rate = parse_rate(&a.rate)?;
    let p = plan(&a.load)?;
    super::target::check_beside(&tplan, a.load.connections, &p.cpus)?;
    let queues = a.side.queues.structure();
    output::check_outputs(&a.out)?;
    let gate = super::gate::Gate::new(a.slo.as_deref(), a.slo_view.into(), &a.gate)?;
    let stages = check_stages(a)?;
    if agents_of(&a.agents)?.is_some() {
        // The eBPF join matches the server's sockets to this process's connections, and an
        // agent's job names one address: neither extends to load sent from elsewhere.
        if stages == lab::StagesMode::Ebpf {
            return Err(usage(
                "--stages ebpf joins kernel events to this host's connections; with --agent the load comes from elsewhere (use --stages stamps or off)",
            ));
        }
        if a.side.server.server_instances.is_some_and(|n| n > 1) {
            return Err(usage(
                "--server-instances above 1 spreads connections over several ports, which agents do not do yet; use one instance with --agent",
            ));
        }
    }
    if a.repeat == 0 || a.repeat > 1000 {
        return Err(usage(format!(
            "--repeat must be in 1..=1000, got {}",
            a.repeat
        )));
    }
    super::common::check_label(a.label.as_deref())?;
    let db = db_path(&a.db)?;
    let known = known_service(a, &db)?;
    if matches!(rate, Rate::OfCapacity(_)) && known.is_none() && !tplan.owns_server() {
        return Err(usage(format!(
            "--rate {} needs the target's capacity: run `tailscope calibrate {}` first or give --service",
            a.rate, a.target
        )));
    }
    // A rate in % of capacity is known only after a calibration; check the rest now.
    let probe_rate = match rate {
        Rate::PerSecond(r) => r,
        Rate::OfCapacity(_) => 1.0,
    };
    lab::check_load(&load_config(&a.load, &p, probe_rate)?, &db).map_err(lab_err)?;

    let obs = Progress::new(a.out.json);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    let ready = tplan.start(&stop, &obs).map_err(lab_err)?;
    let sizing = Sizing {
        rate,
        known,
        queues,
    };
    if a.repeat > 1 {
        let result = plan_ready(a, &p, sizing, &ready, &db, &stop, &obs).and_then(|mut plan| {
            plan.extra_quantiles = gate.extra.clone();
            Ok(lab::measure_repeated(
                &plan, a.repeat, &ready, &db, &stop, &obs,
            )?)
        });
        let stopped = ready.stop();
        let (runs, combined, experiment) = result?;
        stopped.map_err(lab_err)?;
        return print_repeated(a, &runs, &combined, experiment, &gate);
    }
    let result = plan_ready(a, &p, sizing, &ready, &db, &stop, &obs).and_then(|mut plan| {
        plan.extra_quantiles = gate.extra.clone();
        Ok(lab::measure(&plan, &ready, &db, &stop, &obs)?)
    });
    let stopped = ready.stop();
    let run = match result {
        Ok(run) => run,
        Err(e) => {
            // A run that measured nothing usable still prints its object (status, outcomes,
            // error) under --json; it was stored as such.
            let summary = e
                .downcast_ref::<lab::LabError>()
                .and_then(|l| l.run_summary());
            if let (true, Some(v)) = (a.out.json, summary) {
                output::print_json(v)?;
            }
            return Err(e);
        }
    };
    stopped.map_err(lab_err)?;
    print_run(a, &run, &gate)
}

/// A measured run printed (its JSON object, or the terminal view with its SLO, precision,
/// agents and the files written); its exit code: 1 for a failed measurement (or one whose
/// views are all invalid) whatever the SLO says, else the SLO's.
fn print_run(a: &RunArgs, run: &lab::Run, gate: &super::gate::Gate) -> anyhow::Result<i32> {
    let label = run.url.clone();
    let mut written = plot_run(&a.out, &label, &run.analysis)?;
    let slo = gate.slo.as_ref().map(|s| s.evaluate(run));
    if let Some(r) = &slo {
        written.extend(gate.write(&[(format!("run {label}"), r.clone())])?);
    }
    if a.out.json {
        let mut v = run.to_json();
        v["written"] = json!(written);
        if let Some(r) = &slo {
            v["slo"] = json!(r);
        }
        output::print_json(&v)?;
    } else {
        output::print_with(|w| report::terminal::run(w, run))?;
        if let Some(r) = &slo {
            output::print_with(|w| report::slo_view::lines(w, r))?;
        }
        if let Some(c) = &run.convergence {
            match &c.why_not {
                None => outln!(
                    "precision {}: converged after {:.1} s of measurement",
                    c.precision.text,
                    c.after_s
                )?,
                Some(why) => outln!("precision {}: did NOT converge ({why})", c.precision.text)?,
            }
        }
        if let Some(agents) = &run.agents {
            output::print_with(|w| report::agents_view::agents(w, agents))?;
        }
        for w in written {
            outln!("wrote {w}")?;
        }
    }
    // A measurement that failed (or whose views are all invalid) is 1 whatever the SLO says;
    // one that went fine gives the SLO's code.
    Ok(match (run.status.exit_code(), &slo) {
        (0, Some(r)) => gate.code(r.verdict),
        (c, _) => c,
    })
}

/// `--stages`: a known mode; eBPF needs the server's process and a host that can run it.
fn check_stages(a: &RunArgs) -> anyhow::Result<lab::StagesMode> {
    let mode: lab::StagesMode = a.stages.parse().map_err(usage)?;
    if mode == lab::StagesMode::Ebpf && !a.side.server.spawn && a.side.server_pid.is_empty() {
        return Err(usage(
            "--stages ebpf needs the server's process: --spawn it, or give --server-pid",
        ));
    }
    mode.check_host().map_err(lab_err)?;
    Ok(mode)
}

/// `run --repeat N`'s output: the repeats and their combination (the median of the repeats
/// with an interval from their spread); the exit code of the combined point.
fn print_repeated(
    a: &RunArgs,
    runs: &[lab::Run],
    p: &lab::Repeated,
    experiment: i64,
    gate: &super::gate::Gate,
) -> anyhow::Result<i32> {
    // The combined point is judged (as the exit code is); each repeat's own judgement is
    // listed beside it in the JSON.
    let refs: Vec<&lab::Run> = runs.iter().collect();
    let combined = gate.slo.as_ref().map(|s| s.evaluate_repeated(p, &refs));
    let verdict = combined.as_ref().map(|r| r.verdict);
    let each: Vec<lab::SloReport> = match &gate.slo {
        Some(s) => runs.iter().map(|r| s.evaluate(r)).collect(),
        None => Vec::new(),
    };
    let written = match &combined {
        Some(r) => gate.write(&[(format!("{} repeats combined", runs.len()), r.clone())])?,
        None => Vec::new(),
    };
    let us = |c: &Option<lab::Combined>| c.as_ref().map(|c| c.intervals_json());
    if a.out.json {
        output::print_json(&json!({
            "experiment_id": experiment,
            "status": p.status,
            "headline_view": p.headline,
            "repeat": p.repeats,
            "method": p.method,
            "combined": {
                "user": us(&p.user),
                "server": us(&p.server),
                "counted": {
                    "user": p.user.as_ref().map_or(0, |c| c.counted),
                    "server": p.server.as_ref().map_or(0, |c| c.counted),
                },
                "excess": p.excess.as_ref().map(|x| x.summary.quantiles.iter().map(|q| {
                    (q.key.clone(), json!({"value": q.est.value, "lo": q.est.lo, "hi": q.est.hi}))
                }).collect::<serde_json::Map<_, _>>()),
            },
            "result": p,
            "runs": runs.iter().map(lab::Run::to_json).collect::<Vec<_>>(),
            "slo": combined.as_ref().map(|c| {
                let mut v = json!(c);
                v["repeats"] = json!(each);
                v
            }),
            "written": written,
        }))?;
    } else {
        output::print_with(|w| report::repeat_view::repeated(w, runs, p))?;
        if let Some(c) = &combined {
            outln!("of the combined repeats:")?;
            output::print_with(|w| report::slo_view::lines(w, c))?;
        }
        for w in written {
            outln!("wrote {w}")?;
        }
    }
    // Exit 1 only when no view asked for was measured validly by any repeat.
    let valid = match lab::ViewChoice::from(a.view) {
        lab::ViewChoice::User => p.user.is_some(),
        lab::ViewChoice::Server => p.server.is_some(),
        lab::ViewChoice::Auto => p.user.is_some() || p.server.is_some(),
    };
    Ok(match p.status.exit_code() {
        0 if !valid && p.status != lab::RunStatus::Saturated => 1,
        0 => verdict.map_or(0, |v| gate.code(v)),
        c => c,
    })
}

/// What sizes a run: the rate asked for, the ideal's service time when already known (given
/// or stored) and where it came from, and the queue structure asked for.
struct Sizing {
    rate: Rate,
    known: Option<(f64, lab::IdealSource)>,
    queues: Option<QueueStructure>,
}

/// The ideal's service time (calibrating a server tailscope started when nothing else gives
/// it), the rate, then the plan of the measurement.
fn plan_ready(
    a: &RunArgs,
    p: &LoadPlan,
    sizing: Sizing,
    ready: &lab::Ready,
    db: &Db,
    stop: &std::sync::atomic::AtomicBool,
    obs: &Progress,
) -> anyhow::Result<RunPlan> {
    let Sizing {
        rate,
        known,
        queues,
    } = sizing;
    let (workers, queues) = ready.ideal_shape(a.side.workers, queues).map_err(lab_err)?;
    let service = match known {
        Some(s) => Some(s),
        None if ready.owns_server() => {
            let c = lab::calibrate(
                ready,
                &lab::CalibrateSpec::default(),
                workers,
                db,
                stop,
                obs,
            )
            .map_err(lab_err)?;
            lab::Observer::note(
                obs,
                &format!(
                    "peak {:.0} req/s → {} per request per worker ({} workers)",
                    c.peak_rps,
                    report::terminal::fmt_ns(c.per_worker_service_ns),
                    workers
                ),
            );
            Some((
                c.per_worker_service_ns,
                lab::IdealSource::of(&c, "calibration"),
            ))
        }
        None => None,
    };
    let ideal_source = service.as_ref().map(|s| s.1.clone());
    let ideal = service.map(|(service_ns, _)| IdealSpec {
        service_ns,
        workers,
        queues,
    });
    let rate_rps = match (rate, &ideal) {
        (Rate::PerSecond(r), _) => r,
        (Rate::OfCapacity(frac), Some(spec)) => {
            frac * f64::from(spec.workers) * 1e9 / spec.service_ns
        }
        (Rate::OfCapacity(_), None) => {
            return Err(usage("--rate N% needs --service or a calibration"))
        }
    };
    let load = load_config(&a.load, p, rate_rps)?;
    lab::check_load(&load, &db.path).map_err(lab_err)?;
    let la = &a.load;
    let server_cpus = parse_cpus_flag("--server-cpus", a.side.server_cpus.as_deref())?;
    let probed = if server_cpus.is_empty() {
        ready.server_cpus()
    } else {
        server_cpus.clone()
    };
    let host_noise = probe_noise(a.no_noise_probe, &p.cpus, &probed, stop, obs);
    let view: lab::ViewChoice = a.view.into();
    let plan = RunPlan {
        kind: "run".into(),
        load,
        ideal: ideal.clone(),
        ideal_source,
        confidence: la.confidence,
        lateness_threshold_ns: p.lateness_threshold_ns,
        attribution: !a.side.no_attribution,
        server_cpus,
        extra_pids: a.side.server_pid.clone(),
        config: json!({
            "target": a.target, "url": ready.url, "rate": a.rate, "rate_rps": rate_rps,
            "arrival": arrival_text(la), "workload_preset": la.workload.map(|_| "etc"),
            "duration": la.duration, "requests": la.requests,
            "warmup": la.warmup, "connections": la.connections, "threads": la.threads,
            "cpus": p.cpus, "max_outstanding": la.max_outstanding, "timeout": la.timeout,
            "request_size": la.request_size, "stamps": !la.no_stamps, "seed": la.seed,
            "ideal": ideal, "server": ready.server_json(), "alpha": la.alpha,
            "workload": format!("{:?}", ready.workload), "churn": ready.churn,
            "stages": a.stages, "view": view, "host_noise": host_noise,
            "label": a.label,
        }),
        experiment: None,
        stages: check_stages(a)?,
        agents: agents_of(&a.agents)?,
        precision: p.precision.clone(),
        extra_quantiles: Vec::new(),
    };
    Ok(plan)
}

/// The host's noise just before the load: a short TSC-gap probe, one thread on each of the
/// generator's and the server's CPUs at once (every online CPU when either is not pinned),
/// printed as one line. None when skipped or when the probe could not run (said why).
pub fn probe_noise(
    skip: bool,
    generator: &[usize],
    server: &[usize],
    stop: &std::sync::atomic::AtomicBool,
    obs: &dyn lab::Observer,
) -> Option<noise::HostNoise> {
    if skip {
        return None;
    }
    let cpus: Vec<usize> = if generator.is_empty() || server.is_empty() {
        Vec::new()
    } else {
        generator.iter().chain(server).copied().collect()
    };
    match noise::probe_host(&cpus, noise::QUICK_PROBE, stop) {
        Ok(h) => {
            obs.note(&h.line());
            Some(h)
        }
        Err(e) => {
            obs.note(&format!("host noise: the probe could not run ({e})"));
            None
        }
    }
}

/// The run's agents, checked before anything starts (None: the load runs in this process).
fn agents_of(a: &AgentArgs) -> anyhow::Result<Option<lab::Agents>> {
    if a.agent.is_empty() && a.agents_file.is_none() {
        return Ok(None);
    }
    let me = std::env::current_exe().map_err(|e| usage(format!("--agent local: {e}")))?;
    let mut cmds = Vec::new();
    if let Some(f) = &a.agents_file {
        cmds.extend(lab::agents_file(f, &me).map_err(lab_err)?);
    }
    for t in &a.agent {
        cmds.push(lab::AgentCommand::parse(t, &me).map_err(lab_err)?);
    }
    let records = a.agent_records == OnOff::On;
    Ok(Some(lab::Agents::new(cmds, records).map_err(lab_err)?))
}

fn plot_run(
    out: &crate::cli::OutputArgs,
    label: &str,
    an: &analysis::RunAnalysis,
) -> anyhow::Result<Vec<String>> {
    if out.plot.is_none() && out.ccdf.is_none() {
        return Ok(Vec::new());
    }
    let mut series = vec![report::Series::new(
        format!("measured {label}"),
        an.measured_ccdf_us.clone(),
    )];
    if !an.ideal_ccdf_us.is_empty() {
        let mut s = report::Series::new("ideal (same arrivals)", an.ideal_ccdf_us.clone());
        s.dashed = true;
        series.push(s);
    }
    output::write_ccdf_outputs(out, &format!("{label}: measured vs ideal"), &series)
}
