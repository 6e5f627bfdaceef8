//! `tailscope run`: open-loop load against a target, every request recorded, the measured
//! distribution printed beside the ideal one for the same arrivals, and the run stored.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use analysis::{AnalysisConfig, IdealSpec, RunAnalysis};
use indicatif::{ProgressBar, ProgressStyle};
use load::{LoadConfig, NullRpc, Protocol, RequestRecord, RunRecords, StopAt, Target};
use serde_json::json;

use super::common::{
    db_path, host_facts, now_rfc3339, open_store, parse_cpus, parse_duration, shutdown_flag,
};
use crate::cli::{LoadArgs, RunArgs};
use crate::exit::{usage, OrUsage};
use crate::output::{self, fmt_ns};

pub use super::run_output::{print_human, run_json};

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
    Ok(Rate::PerSecond(v))
}

pub fn parse_target(s: &str) -> anyhow::Result<Target> {
    s.parse::<Target>().or_usage_ctx("target")
}

/// A protocol factory for a target.
pub fn factory(
    t: &Target,
    request_size: usize,
    stamps: bool,
) -> anyhow::Result<Box<dyn Fn() -> Box<dyn Protocol> + Send + Sync>> {
    if !(wire::nullrpc::HEADER_LEN..=wire::nullrpc::MAX_FRAME).contains(&request_size) {
        return Err(usage(format!(
            "--request-size must be between {} and {} bytes, got {request_size}",
            wire::nullrpc::HEADER_LEN,
            wire::nullrpc::MAX_FRAME
        )));
    }
    let transport = t.transport;
    Ok(Box::new(move || {
        Box::new(NullRpc::new(transport, request_size, stamps, stamps)) as Box<dyn Protocol>
    }))
}

/// Validated load options (everything but the rate and the target).
pub struct LoadPlan {
    pub arrival: model::ArrivalSpec,
    pub stop: StopAt,
    pub warmup: Duration,
    pub timeout: Duration,
    pub cpus: Vec<usize>,
    pub lateness_threshold_ns: f64,
}

pub fn plan(a: &LoadArgs) -> anyhow::Result<LoadPlan> {
    let unit = super::model::parse_unit(&a.trace_unit)?;
    let arrival = super::model::parse_arrival(&a.arrival, unit)?;
    let stop = match &a.requests {
        Some(r) => {
            let n = model::parse_count(r).or_usage_ctx("--requests")?;
            if n == 0 {
                return Err(usage("--requests must be at least 1"));
            }
            StopAt::Requests(n)
        }
        None => StopAt::Duration(parse_duration("--duration", &a.duration)?),
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
    Ok(LoadPlan {
        arrival,
        stop,
        warmup,
        timeout: parse_duration("--timeout", &a.timeout)?,
        cpus: parse_cpus(a.cpus.as_deref())?,
        lateness_threshold_ns: model::parse_duration_ns(&a.lateness_threshold)
            .or_usage_ctx("--lateness-threshold")?,
    })
}

pub fn load_config(target: &Target, a: &LoadArgs, p: &LoadPlan, rate: f64) -> LoadConfig {
    LoadConfig {
        target: target.clone(),
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
    }
}

/// Runs the load with a progress bar on stderr.
pub fn execute(
    cfg: &LoadConfig,
    f: &(dyn Fn() -> Box<dyn Protocol> + Send + Sync),
    stop: &AtomicBool,
    label: &str,
) -> anyhow::Result<RunRecords> {
    let bar = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{bar:30}] {human_pos}/{human_len} requests ({elapsed})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(label.to_string());
    let progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let r = load::run_open_loop(cfg, f, stop, &progress);
    bar.finish_and_clear();
    Ok(r?)
}

/// The status of a finished run, and its exit code.
pub fn status_of(rec: &RunRecords, a: &RunAnalysis) -> (&'static str, i32) {
    let bad = a.outcomes.error + a.outcomes.timeout + a.outcomes.dropped;
    if rec.interrupted {
        ("interrupted", 1)
    } else if a.outcomes.ok == 0 || bad * 1000 > a.requests {
        // More than 0.1 % of the requests failed: the target did not hold up (or died).
        ("failed", 1)
    } else if a.lateness_flagged {
        ("invalid", 1)
    } else {
        ("ok", 0)
    }
}

/// The per-request records as named columns for the store.
pub fn columns(records: &[RequestRecord]) -> anyhow::Result<store::Columns> {
    let n = records.len();
    let mut c = store::Columns::new(n);
    let col = |f: &dyn Fn(&RequestRecord) -> i64| records.iter().map(f).collect::<Vec<i64>>();
    let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    c.push_column("intended_ns", col(&|r| i(r.intended_ns)))?;
    c.push_column("sent_ns", col(&|r| i(r.sent_ns)))?;
    c.push_column("received_ns", col(&|r| i(r.received_ns)))?;
    c.push_column("kernel_rx_ns", col(&|r| i(r.kernel_rx_ns)))?;
    c.push_column("conn", col(&|r| i64::from(r.conn)))?;
    c.push_column("class", col(&|r| i64::from(r.class)))?;
    c.push_column("outcome", col(&|r| outcome_code(r.outcome)))?;
    for k in 0..6 {
        c.push_column(&format!("t{}_ns", k + 1), col(&|r| i(r.stamps[k])))?;
    }
    Ok(c)
}

/// Outcome codes in the stored `outcome` column.
pub fn outcome_code(o: load::Outcome) -> i64 {
    match o {
        load::Outcome::Ok => 0,
        load::Outcome::Error => 1,
        load::Outcome::Timeout => 2,
        load::Outcome::Dropped => 3,
    }
}

/// The latest stored calibration of a target: its whole-target time per request (the
/// inverse of its peak throughput), ns, and the workers it had.
pub fn stored_calibration(st: &store::Store, target: &str) -> anyhow::Result<Option<(f64, u32)>> {
    for r in st.list_runs()? {
        if r.kind == "calibrate" && r.target == target && r.status == "ok" {
            let s = r.summary.as_ref();
            if let Some(ns) = s.and_then(|s| s.get("service_ns")).and_then(|v| v.as_f64()) {
                let w = s
                    .and_then(|s| s.get("workers"))
                    .and_then(|v| v.as_u64())
                    .and_then(|w| u32::try_from(w).ok())
                    .unwrap_or(1);
                return Ok(Some((ns, w.max(1))));
            }
        }
    }
    Ok(None)
}

pub fn run(a: &RunArgs) -> anyhow::Result<i32> {
    // Validate everything, then run: nothing is written (not even the store file) and no
    // server is started on bad input.
    let server_cpus = parse_cpus(a.server_cpus.as_deref())?;
    let tplan = super::target::plan(&a.target, &a.server, &server_cpus)?;
    let rate = parse_rate(&a.rate)?;
    let p = plan(&a.load)?;
    if tplan.target.scheme == "nullrpc" {
        // Checks the request size before anything starts.
        drop(factory(
            &tplan.target,
            a.load.request_size,
            !a.load.no_stamps,
        )?);
    }
    if !["auto", "single", "per-worker"].contains(&a.queues.as_str()) {
        return Err(usage(format!(
            "--queues must be auto, single or per-worker, got '{}'",
            a.queues
        )));
    }
    if a.workers == Some(0) {
        return Err(usage("--workers must be at least 1"));
    }
    let given = a
        .service
        .as_deref()
        .map(|s| model::parse_duration_ns(s).or_usage_ctx("--service"))
        .transpose()?;
    output::check_outputs(&a.out)?;
    let db = db_path(&a.db)?;
    let stored = if given.is_none() && !a.server.spawn && db.exists() {
        stored_calibration(&open_store(&a.db)?, &a.target)?
    } else {
        None
    };
    if matches!(rate, Rate::OfCapacity(_)) && given.is_none() && stored.is_none() && !a.server.spawn
    {
        return Err(usage(format!(
            "--rate {} needs the target's capacity: run `tailscope calibrate {}` first or give --service",
            a.rate, a.target
        )));
    }
    let st = open_store(&a.db)?;
    let stop = shutdown_flag()?;
    let ready = tplan.start(!a.server.no_preload, &stop)?;
    let f = ready.factory(a.load.request_size, !a.load.no_stamps, a.load.seed)?;
    let (workers, queues) = ready.ideal_shape(a.workers, &a.queues)?;
    // The per-worker service time of the ideal: given, stored (whole-target time per request
    // × the workers it was calibrated with), or measured now on a spawned server (§3.2).
    let service_ns = match (given, stored) {
        (Some(s), _) => Some(s),
        (None, Some((whole, w))) => Some(whole * f64::from(w)),
        (None, None) if ready.spawned.is_some() => {
            eprintln!("calibrating the spawned server for 3 s…");
            // 16 connections with one request each: saturating without pipelining, which
            // would amortise the server's per-request cost (Redis batches pipelined requests).
            let c = load::calibrate(
                &ready.target,
                f.as_ref(),
                16,
                1,
                std::time::Duration::from_secs(3),
                std::time::Duration::from_secs(1),
                &stop,
            )?;
            eprintln!(
                "peak {:.0} req/s → {} per request per worker ({} workers)",
                c.peak_rps,
                fmt_ns(c.service_ns * f64::from(workers)),
                workers
            );
            Some(c.service_ns * f64::from(workers))
        }
        (None, None) => None,
    };
    let ideal = service_ns.map(|service_ns| IdealSpec {
        service_ns,
        workers,
        queues,
    });
    let rate_rps = match rate {
        Rate::PerSecond(r) => r,
        Rate::OfCapacity(frac) => match &ideal {
            Some(spec) => frac * f64::from(spec.workers) * 1e9 / spec.service_ns,
            None => return Err(usage("--rate N% needs --service or a calibration")),
        },
    };
    let mut cfg = load_config(&ready.target, &a.load, &p, rate_rps);
    cfg.churn = ready.churn;
    let label = ready.url.clone();
    let config_json = json!({
        "target": a.target, "url": label, "rate": a.rate, "rate_rps": rate_rps, "arrival": a.load.arrival,
        "duration": a.load.duration, "requests": a.load.requests, "warmup": a.load.warmup,
        "connections": a.load.connections, "threads": a.load.threads, "cpus": p.cpus,
        "max_outstanding": a.load.max_outstanding, "timeout": a.load.timeout,
        "request_size": a.load.request_size, "stamps": !a.load.no_stamps, "seed": a.load.seed,
        "ideal": ideal, "server": ready.server_json(), "alpha": a.load.alpha,
        "workload": format!("{:?}", ready.workload), "churn": ready.churn,
    });
    let run_id = st.begin_run(&store::NewRun {
        kind: "run".into(),
        target: a.target.clone(),
        started_at: now_rfc3339(),
        config: config_json,
        host: host_facts(),
    })?;
    let mut pids = a.server_pid.clone();
    pids.extend(ready.pids());
    let server = ServerInfo {
        pids,
        tids: Vec::new(),
        cpus: server_cpus,
    };
    let outcome = measure_and_store(
        &st,
        run_id,
        &ready.target,
        &cfg,
        f.as_ref(),
        &stop,
        ideal,
        &p,
        &a.load,
        &label,
        &server,
    );
    let (rec, an, status, code) = match outcome {
        Ok(v) => v,
        Err(e) => {
            // Nothing measurable: the run is still recorded, as failed.
            let _ = st.finish_run(run_id, "failed", &json!({"error": format!("{e:#}")}));
            return Err(e);
        }
    };
    let written = plot_run(&a.out, &label, &an)?;
    if a.out.json {
        let mut v = run_json(Some(run_id), status, &label, &rec, &an);
        v["written"] = json!(written);
        v["server"] = ready.server_json();
        output::print_json(&v)?;
    } else {
        print_human(status, Some(run_id), &label, &an);
        for w in written {
            println!("wrote {w}");
        }
    }
    if let Some(s) = ready.spawned {
        s.stop()?;
    }
    Ok(code)
}

/// What the attribution samples while a run lasts: the server's processes or threads and CPUs.
#[derive(Clone, Debug, Default)]
pub struct ServerInfo {
    pub pids: Vec<u32>,
    pub tids: Vec<u32>,
    pub cpus: Vec<usize>,
}

/// The threads of this process whose names mark them as the built-in server's ("ts-…").
pub fn own_server_threads() -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc/self/task") {
        for e in rd.flatten() {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if comm.starts_with("ts-") {
                if let Some(t) = e.file_name().to_str().and_then(|s| s.parse().ok()) {
                    out.push(t);
                }
            }
        }
    }
    out
}

/// Samples the sources of Tales of the Tail §4 while the load runs (None when the sampler
/// cannot start: the run goes on without a "why").
fn start_sampler(server: &ServerInfo) -> Option<attrib::Sampler> {
    let cpus = if server.cpus.is_empty() {
        (0..host::placement::online_cpus()).collect()
    } else {
        server.cpus.clone()
    };
    let cfg = attrib::SamplerConfig {
        server_pids: server.pids.clone(),
        server_tids: server.tids.clone(),
        cpus,
        ..attrib::SamplerConfig::default()
    };
    match attrib::Sampler::start(cfg) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("tailscope: attribution off: {e}");
            None
        }
    }
}

/// Runs the load, analyses it and stores records and summary. Returns the status and exit code.
#[allow(clippy::too_many_arguments)]
pub fn measure_and_store(
    st: &store::Store,
    run_id: i64,
    target: &Target,
    cfg: &LoadConfig,
    f: &(dyn Fn() -> Box<dyn Protocol> + Send + Sync),
    stop: &AtomicBool,
    ideal: Option<IdealSpec>,
    p: &LoadPlan,
    a: &LoadArgs,
    label: &str,
    server: &ServerInfo,
) -> anyhow::Result<(RunRecords, RunAnalysis, &'static str, i32)> {
    let sampler = start_sampler(server);
    let rec = execute(cfg, f, stop, label);
    let series = sampler.map(|s| s.stop().series);
    let rec = rec?;
    st.put_columns(run_id, &columns(&rec.records)?)?;
    let same_host = target.addr.ip().is_loopback();
    let acfg = AnalysisConfig {
        ideal,
        warmup_ns: rec.warmup_ns,
        arrival: p.arrival.clone(),
        confidence: a.confidence,
        lateness_threshold_ns: p.lateness_threshold_ns,
        seed: a.seed,
        same_host_start_mono_ns: same_host.then_some(rec.start_mono_ns),
    };
    let an = match analysis::analyse(&rec.records, &acfg) {
        Ok(an) => an,
        Err(e) => {
            let status = if rec.interrupted || stop.load(Ordering::Relaxed) {
                "interrupted"
            } else {
                "failed"
            };
            st.finish_run(run_id, status, &json!({"error": e.to_string(), "connection_errors": rec.errors, "records": rec.records.len()}))?;
            anyhow::bail!(
                "run {run_id} {status}: {e}{}",
                rec.errors
                    .first()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            );
        }
    };
    let mut an = an;
    if let Some(series) = &series {
        let reqs: Vec<(u64, u64)> = rec
            .records
            .iter()
            .filter(|r| r.intended_ns >= rec.warmup_ns)
            .filter_map(|r| Some((r.intended_ns, r.latency_ns()?)))
            .collect();
        let why = attrib::explain(series, rec.start_mono_ns, &reqs, an.stages.as_ref());
        an.why = Some(serde_json::to_value(why)?);
    }
    let (status, code) = status_of(&rec, &an);
    st.finish_run(
        run_id,
        status,
        &run_json(Some(run_id), status, label, &rec, &an),
    )?;
    Ok((rec, an, status, code))
}

fn plot_run(
    out: &crate::cli::OutputArgs,
    label: &str,
    an: &RunAnalysis,
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
