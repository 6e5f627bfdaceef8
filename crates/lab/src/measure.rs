//! [`measure`]: one open-loop measurement, the whole data flow of DESIGN.md — instruments
//! started off the load's CPUs, the load with its records streamed to the store, the
//! analysis over the stored records (two passes, bounded memory), the "why", the status —
//! returned as one [`Run`] and stored.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use analysis::{AnalysisConfig, IdealSpec};
use load::LoadConfig;
use serde_json::{json, Value};

use crate::db::{free_bytes, host_facts, Db};
use crate::error::{invalid, LabError};
use crate::instruments::{generator_instrument, writer_instrument, Attribution, ServerInfo};
use crate::records::{StoreSink, StoredRecords};
use crate::run::{asked_of, judge, JudgeInput, LoadFacts, Run};
use crate::target::Ready;
use crate::Observer;

/// Stored bytes per request record, a generous bound (delta-coded, compressed columns take
/// ~10–20 B): runs whose records would not fit on the store's disk are refused up front.
const BYTES_PER_RECORD: f64 = 40.0;

/// Everything one measurement needs beside the started target.
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// What the store calls it: "run", "sweep-point", …
    pub kind: String,
    /// The load; its target and churn are taken from the ready target.
    pub load: LoadConfig,
    pub ideal: Option<IdealSpec>,
    /// Where the ideal's service time came from (None: no ideal).
    pub ideal_source: Option<crate::IdealSource>,
    pub confidence: f64,
    /// A run whose generator lateness p99 exceeds this is invalid.
    pub lateness_threshold_ns: f64,
    /// Sample the sources of tail latency beside the run (the "why").
    pub attribution: bool,
    /// Where the server runs (for the attribution), beyond what the target knows.
    pub server_cpus: Vec<usize>,
    pub extra_pids: Vec<u32>,
    /// What the user asked for, stored with the run.
    pub config: Value,
    /// The experiment this run is a point of, if any.
    pub experiment: Option<i64>,
    /// Where the per-request server stages come from (eBPF for real servers).
    pub stages: crate::StagesMode,
    /// Send the load from these agents (other hosts) instead of from this process.
    pub agents: Option<crate::Agents>,
    /// Keep measuring until these intervals are tight (or the longest duration it allows);
    /// the load's own duration is then the least the run takes.
    pub precision: Option<crate::converge::Precision>,
    /// Percentiles `(key, q)` beyond the standard five in the measured summaries
    /// (`--percentiles`, an SLO's `p95<=…`).
    pub extra_quantiles: Vec<(String, f64)>,
}

/// Checks a run's load before anything is started: the configuration itself, and that its
/// records fit on the store's disk. `db` is the store file.
pub fn check_load(load: &LoadConfig, db: &Path) -> Result<(), LabError> {
    // The target is not known yet (a spawned server's port): any address validates alike.
    load.validate().map_err(invalid)?;
    let expected = expected_requests(load);
    if let Some(free) = free_bytes(db) {
        let need = expected * BYTES_PER_RECORD;
        if need > free as f64 * 0.9 {
            return Err(invalid(format!(
                "the run would store ~{expected:.3e} request records (~{:.1} GB) but the store's disk has {:.1} GB free: shorten --duration or lower --rate",
                need / 1e9,
                free as f64 / 1e9
            )));
        }
    }
    Ok(())
}

/// Requests the schedule will hold, approximately.
pub fn expected_requests(load: &LoadConfig) -> f64 {
    let warm = load.warmup.as_secs_f64() * load.rate_per_s;
    match load.stop {
        load::StopAt::Duration(d) => warm + d.as_secs_f64() * load.rate_per_s,
        load::StopAt::Requests(n) => warm + n as f64,
    }
}

/// CPUs for tailscope's own background threads: neither the generator's nor the server's
/// (empty when there is none, or when either is unpinned and so may be anywhere).
fn spare_cpus(generator: &[usize], server: &[usize]) -> Vec<usize> {
    if generator.is_empty() {
        return Vec::new();
    }
    let host: Vec<usize> = (0..host::placement::online_cpus()).collect();
    attrib::spare_cpus(&host, server, generator)
}

/// Runs one measurement against `ready` and stores it in `db`.
pub fn measure(
    plan: &RunPlan,
    ready: &Ready,
    db: &Db,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<Run, LabError> {
    if let Some(agents) = &plan.agents {
        return crate::agents::measure(plan, agents, ready, db, stop, obs);
    }
    let mut cfg = plan.load.clone();
    // A converging run: one schedule as long as the longest allowed, stopped by its own flag
    // when the intervals are tight; records reach the check at least every 250 ms.
    let min_ns = match cfg.stop {
        load::StopAt::Duration(d) => (cfg.warmup + d).as_nanos() as u64,
        load::StopAt::Requests(_) => 0,
    };
    if let Some(p) = &plan.precision {
        cfg.stop = load::StopAt::Duration(p.max_duration);
        cfg.flush_every = Some(std::time::Duration::from_millis(250));
    }
    cfg.target = ready.target.clone();
    cfg.churn = ready.churn;
    // A scaled-out server: the connections go round-robin over its instances.
    cfg.spread = ready.spread();
    let mut server_cpus = plan.server_cpus.clone();
    if server_cpus.is_empty() {
        server_cpus = ready.server_cpus();
    }
    cfg.writer_cpus = spare_cpus(&cfg.cpus, &server_cpus);
    let factory = ready.factory(cfg.seed)?;
    let st = &db.store;
    let run_id = st.begin_run_in(
        &store::NewRun {
            kind: plan.kind.clone(),
            target: ready.label.clone(),
            started_at: store::now_rfc3339(),
            config: plan.config.clone(),
            host: host_facts(),
        },
        plan.experiment,
    )?;
    let fail = |e: LabError| {
        let _ = st.finish_run(run_id, "failed", &json!({"error": e.to_string()}));
        e
    };
    let mut pids = plan.extra_pids.clone();
    pids.extend(ready.pids());
    let server = ServerInfo {
        pids,
        tids: ready.tids(),
        cpus: server_cpus,
    };
    let mut sink = StoreSink::open(&db.path, run_id).map_err(|e| fail(e.into()))?;
    let threads = cfg.threads.min(cfg.connections);
    let mut stages =
        crate::stages::Stages::start(plan.stages, ready, &server, threads, obs).map_err(fail)?;
    // A stressor beside the run and the server's eviction counter (see `interference`).
    let beside =
        crate::interference::Beside::start(ready, &cfg.cpus, &server.cpus, obs).map_err(fail)?;
    let mut attribution = Attribution::start(&server, &cfg.cpus, plan.attribution);
    let progress = |done: u64, total: u64| obs.progress("run", done, total);
    let halt = AtomicBool::new(false);
    let mut convergence = None;
    let result = match &plan.precision {
        None => load::run_open_loop_into(
            &cfg,
            factory.as_ref(),
            stop,
            &progress,
            &mut stages.sink(&mut sink),
            attribution.slack(),
        ),
        Some(p) => {
            let mut staged = stages.sink(&mut sink);
            let mut conv = crate::converge::ConvergeSink::new(
                &mut staged,
                p,
                plan.confidence,
                cfg.warmup.as_nanos() as u64,
                min_ns,
                &halt,
            )
            .map_err(fail)?;
            // The user's Ctrl-C stops the run too; `halt` alone means it converged.
            let done = AtomicBool::new(false);
            let r = std::thread::scope(|s| {
                s.spawn(|| {
                    while !done.load(Ordering::Relaxed) {
                        if stop.load(Ordering::Relaxed) {
                            halt.store(true, Ordering::Relaxed);
                        }
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                });
                let r = load::run_open_loop_into(
                    &cfg,
                    factory.as_ref(),
                    &halt,
                    &progress,
                    &mut conv,
                    attribution.slack(),
                );
                done.store(true, Ordering::Relaxed);
                r
            });
            let interrupted = stop.load(Ordering::Relaxed);
            let c = conv.finish(interrupted);
            obs.note(&match &c.why_not {
                None => format!("converged after {:.1} s ({})", c.after_s, p.text),
                Some(w) => format!("did not converge: {w}"),
            });
            convergence = Some(c);
            r.map(|mut s| {
                s.interrupted = interrupted;
                s
            })
        }
    };
    obs.phase_done("run");
    let server_json = beside.finish(ready, obs);
    let (series, sampler) = attribution.finish();
    let summary = result.map_err(|e| fail(e.into()))?;
    let mut instruments = vec![
        generator_instrument(&summary.generator, &cfg.cpus),
        sampler,
        writer_instrument(&summary.writer),
    ];
    instruments.extend(stages.finish(&summary.writer));
    let same_host = cfg.target.addr.ip().is_loopback();
    let acfg = AnalysisConfig {
        window_ns: 0,
        extra_quantiles: plan.extra_quantiles.clone(),
        ideal: plan.ideal.clone(),
        warmup_ns: summary.warmup_ns,
        arrival: cfg.arrival.clone(),
        confidence: plan.confidence,
        lateness_threshold_ns: plan.lateness_threshold_ns,
        seed: cfg.seed,
        same_host_start_mono_ns: same_host.then_some(summary.start_mono_ns),
    };
    let mut mask = series
        .as_ref()
        .map(|s| attrib::SlowMask::new(s, summary.start_mono_ns));
    let mut on_slow = |t: u64, l: u64| {
        if let Some(m) = mask.as_mut() {
            m.add(t, l);
        }
    };
    let analysed = analysis::analyse_records(
        &mut StoredRecords::new(st, run_id),
        &acfg,
        Some(&mut on_slow),
    );
    let an = match analysed {
        Ok(an) => an,
        Err(e) => {
            let status = if summary.interrupted {
                "interrupted"
            } else {
                "failed"
            };
            // What is known without a latency: how every request ended.
            let mut o = analysis::Outcomes::default();
            let mut requests = 0u64;
            StoredRecords::new(st, run_id).for_each(&mut |r| {
                if r.intended_ns >= summary.warmup_ns {
                    requests += 1;
                    match r.outcome {
                        load::Outcome::Ok => o.ok += 1,
                        load::Outcome::Error => o.error += 1,
                        load::Outcome::Timeout => o.timeout += 1,
                        load::Outcome::Dropped => o.dropped += 1,
                    }
                }
            })?;
            let first = summary.errors.first().cloned();
            let message = format!(
                "run {run_id} {status}: {e}{}",
                first.map(|m| format!(" ({m})")).unwrap_or_default()
            );
            let v = json!({
                "status": status, "run_id": run_id, "target": ready.label, "url": ready.url,
                "error": message, "requests": requests, "outcomes": o,
                "connection_errors": summary.errors, "records": summary.records,
                "instruments": instruments,
                "server": server_json,
            });
            st.finish_run(run_id, status, &v)?;
            return Err(LabError::RunFailed {
                run_id,
                message,
                summary: v,
            });
        }
    };
    let why = match (&series, &mask, an.span_ns) {
        (Some(s), Some(m), Some(span)) => {
            Some(attrib::explain_mask(s, m, span, an.stages.as_ref()))
        }
        (Some(_), _, _) => Some(attrib::Why::default()),
        _ => None,
    };
    let window_host = series.as_ref().map_or(Vec::new(), |s| {
        crate::timeline::window_host(s, summary.start_mono_ns, &an.windows)
    });
    let saturation =
        crate::run::saturation_of(&an, &summary.backlog, summary.warmup_ns, summary.drain_ns);
    let (asked, host_noise) = asked_of(&plan.config);
    let j = judge(
        &an,
        &JudgeInput {
            interrupted: summary.interrupted,
            saturated: saturation.is_some(),
            asked,
            lateness_threshold_ns: plan.lateness_threshold_ns,
            host_noise: host_noise.as_ref(),
            generator_cpus: &cfg.cpus,
            user_late: None,
        },
    );
    let status = j.status;
    let reproducibility = crate::reproduce::reproducibility(
        an.stationarity.as_ref(),
        host_noise.as_ref(),
        j.views.user.valid,
    );
    let run = Run {
        reproducibility,
        run_id: Some(run_id),
        status,
        status_note: j.status_note,
        views: j.views,
        lateness_verdict: j.lateness_verdict,
        host_noise,
        target: ready.label.clone(),
        url: ready.url.clone(),
        rate_rps: cfg.rate_per_s,
        seed: cfg.seed,
        config: plan.config.clone(),
        ideal_source: plan.ideal_source.clone(),
        server: server_json,
        analysis: an,
        saturation,
        why,
        instruments,
        load: LoadFacts {
            start_mono_ns: summary.start_mono_ns,
            warmup_ns: summary.warmup_ns,
            records: summary.records,
            errors: summary.errors,
            connects: summary.connects,
            misses: summary.misses,
            backlog: summary.backlog,
            drain_ns: summary.drain_ns,
            writer: summary.writer,
            generator: summary.generator,
        },
        agents: None,
        convergence,
        window_host,
    };
    crate::run::store_run(st, &run)?;
    Ok(run)
}
