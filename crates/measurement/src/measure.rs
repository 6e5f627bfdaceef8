//! [`measure`]: one open-loop measurement, the whole data flow of DESIGN.md — the load
//! from its [`LoadSource`] (this process' engine with its instruments, or agents on other
//! hosts) with its records streamed to the store, the analysis over the stored records (two
//! passes, bounded memory), the "why", the status — returned as one [`Run`] and stored.
//! Every run is finished here, wherever its load came from.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use analysis::{AnalysisConfig, AnalysisError, Outcomes, RunAnalysis};
use load::LoadConfig;
use serde_json::json;
use store::Store;

use crate::db::{free_bytes, host_facts, Db};
use crate::error::{invalid, LabError};
use crate::judge::{judge, saturation_of, JudgeInput};
use crate::local::LocalEngine;
use crate::observer::Observer;
use crate::records::StoredRecords;
use crate::run::Run;
use crate::source::{LoadSource, Loaded, Measured, Sending};
use crate::status::RunStatus;
use crate::target::Ready;

pub use crate::source::RunPlan;

/// Stored bytes per request record, a generous bound (delta-coded, compressed columns take
/// ~10–20 B): runs whose records would not fit on the store's disk are refused up front.
const BYTES_PER_RECORD: f64 = 40.0;

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

/// Where `plan`'s load comes from: its agents, or this process.
pub fn source_of(plan: &RunPlan) -> &dyn LoadSource {
    match &plan.agents {
        Some(a) => a,
        None => &LocalEngine,
    }
}

/// Runs one measurement against `ready` and stores it in `db`.
pub fn measure(
    plan: &RunPlan,
    ready: &Ready,
    db: &Db,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<Run, LabError> {
    let source = source_of(plan);
    source.check(plan, ready)?;
    let st = &db.store;
    let run_id = st.begin_run_in(
        &store::NewRun {
            kind: plan.kind.clone(),
            target: ready.label.clone(),
            started_at: store::now_rfc3339(),
            config: source.config(plan).to_json(),
            host: host_facts(),
        },
        plan.experiment,
    )?;
    let sending = Sending {
        plan,
        ready,
        db,
        run_id,
        stop,
        obs,
    };
    let loaded = match source.send(&sending) {
        Ok(l) => l,
        Err(e) => {
            let _ = st.finish_run(
                run_id,
                RunStatus::Failed.as_str(),
                &json!({"error": e.to_string()}),
            );
            return Err(e);
        }
    };
    finish(plan, ready, st, run_id, loaded)
}

/// The analysis of a sent run: of its stored records (with the attribution's slow-request
/// mask built on the way), or the one its source made of histograms.
fn analyse(
    plan: &RunPlan,
    st: &Store,
    run_id: i64,
    l: &mut Loaded,
) -> (Result<RunAnalysis, AnalysisError>, Option<attrib::SlowMask>) {
    let records = std::mem::replace(&mut l.measured, Measured::Records);
    if let Measured::Histograms(an) = records {
        return (*an, None);
    }
    let acfg = AnalysisConfig {
        window_ns: 0,
        extra_quantiles: plan.extra_quantiles.clone(),
        ideal: plan.ideal.clone(),
        warmup_ns: l.facts.warmup_ns,
        arrival: l.cfg.arrival.clone(),
        confidence: plan.confidence,
        lateness_threshold_ns: plan.lateness_threshold_ns,
        seed: l.cfg.seed,
        same_host_start_mono_ns: l.same_host_start_mono_ns,
    };
    let start = l.facts.start_mono_ns;
    let mut mask = l.series.as_ref().map(|s| attrib::SlowMask::new(s, start));
    let mut on_slow = |t: u64, u: u64| {
        if let Some(m) = mask.as_mut() {
            m.add(t, u);
        }
    };
    let an = analysis::analyse_records(
        &mut StoredRecords::new(st, run_id),
        &acfg,
        Some(&mut on_slow),
    );
    (an, mask)
}

/// How every request ended, for a run without an analysis: from the agents' counts when
/// agents sent it, else from the stored records after the warm-up.
fn outcomes_of(st: &Store, run_id: i64, l: &Loaded) -> Result<Outcomes, LabError> {
    let mut o = Outcomes::default();
    if let Some(a) = &l.agents {
        for x in a.agents.iter().map(|a| &a.outcomes) {
            o.ok += x.ok;
            o.error += x.error;
            o.timeout += x.timeout;
            o.dropped += x.dropped;
        }
        return Ok(o);
    }
    StoredRecords::new(st, run_id).for_each(&mut |r| {
        if r.intended_ns >= l.facts.warmup_ns {
            match r.outcome {
                load::Outcome::Ok => o.ok += 1,
                load::Outcome::Error => o.error += 1,
                load::Outcome::Timeout => o.timeout += 1,
                load::Outcome::Dropped => o.dropped += 1,
                load::Outcome::Skipped => o.skipped += 1,
            }
        }
    })?;
    Ok(o)
}

/// A run that could not be analysed: stored as failed (or interrupted) with what is known
/// without a latency.
fn unanalysed(ready: &Ready, st: &Store, run_id: i64, l: &Loaded, e: AnalysisError) -> LabError {
    let status = if l.failures.is_empty() && l.facts.interrupted {
        RunStatus::Interrupted
    } else {
        RunStatus::Failed
    };
    let why = if l.failures.is_empty() {
        // What the server answered instead (gRPC statuses, HTTP errors), else the first
        // connection error.
        let first = l
            .facts
            .error_codes_line()
            .or_else(|| l.facts.errors.first().cloned());
        format!(
            "{e}{}",
            first.map(|m| format!(" ({m})")).unwrap_or_default()
        )
    } else {
        l.failures.join("; ")
    };
    let message = format!("run {run_id} {status}: {why}");
    let o = match outcomes_of(st, run_id, l) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let mut v = json!({
        "status": status, "run_id": run_id, "target": ready.label, "url": ready.url,
        "error": message, "requests": o.ok + o.error + o.timeout + o.dropped, "outcomes": o,
        "connection_errors": l.facts.errors, "records": l.facts.records,
        "error_codes": l.facts.error_codes,
        "instruments": l.instruments,
        "server": l.server.to_json(),
    });
    if let (Some(m), Some(a)) = (v.as_object_mut(), &l.agents) {
        m.insert("agents".into(), json!(a.agents));
        m.insert("agents_merged".into(), json!(a.merged));
    }
    if let Err(e) = st.finish_run(run_id, status.as_str(), &v) {
        return e.into();
    }
    LabError::RunFailed {
        run_id,
        message,
        summary: v,
    }
}

/// Finishes a sent run, wherever its load came from: the analysis, the "why", saturation,
/// the views and the status; the [`Run`], stored.
pub fn finish(
    plan: &RunPlan,
    ready: &Ready,
    st: &Store,
    run_id: i64,
    mut l: Loaded,
) -> Result<Run, LabError> {
    let (an, mask) = analyse(plan, st, run_id, &mut l);
    let an = an.map_err(|e| unanalysed(ready, st, run_id, &l, e))?;
    let start = l.facts.start_mono_ns;
    let why = match (&l.series, &mask, an.span_ns) {
        (Some(s), Some(m), Some(span)) => {
            Some(attrib::explain_mask(s, m, span, an.stages.as_ref()))
        }
        (Some(_), _, _) => Some(attrib::Why::default()),
        _ => None,
    };
    let window_host = l.series.as_ref().map_or(Vec::new(), |s| {
        crate::timeline::window_host(s, start, &an.windows)
    });
    let f = &l.facts;
    let saturation = saturation_of(&an, &f.backlog, f.warmup_ns, f.drain_ns);
    let (asked, host_noise) = plan.config.asked();
    let j = judge(
        &an,
        &JudgeInput {
            interrupted: f.interrupted,
            saturated: saturation.is_some(),
            asked,
            lateness_threshold_ns: plan.lateness_threshold_ns,
            host_noise: host_noise.as_ref(),
            generator_cpus: &l.generator_cpus,
            user_late: l.user_late.clone(),
        },
    );
    let mut status = j.status;
    // A source's failure (an agent died) fails the run, whatever arrived.
    if !l.failures.is_empty() {
        status = RunStatus::Failed;
    }
    // Failed on its error replies: say so with what the server answered.
    let o = &an.outcomes;
    let status_note = match f.error_codes_line() {
        Some(codes) if status == RunStatus::Failed && o.error * 1000 > an.requests => {
            let share = 100.0 * o.error as f64 / an.requests.max(1) as f64;
            let errors = format!(
                "{} of the requests were error replies ({share:.1} %, more than 0.1 %): {codes}",
                o.error
            );
            Some(match j.status_note {
                Some(n) => format!("{errors}; {n}"),
                None => errors,
            })
        }
        _ => j.status_note,
    };
    let reproducibility = crate::reproduce::reproducibility(
        an.stationarity.as_ref(),
        host_noise.as_ref(),
        j.views.user.valid,
    );
    let run = Run {
        reproducibility,
        run_id: Some(run_id),
        status,
        status_note,
        views: j.views,
        lateness_verdict: j.lateness_verdict,
        host_noise,
        target: ready.label.clone(),
        url: ready.url.clone(),
        rate_rps: l.cfg.rate_per_s,
        seed: l.cfg.seed,
        config: plan.config.clone(),
        ideal_source: plan.ideal_source.clone(),
        server: l.server,
        analysis: an,
        saturation,
        why,
        instruments: l.instruments,
        load: l.facts,
        agents: l.agents,
        convergence: l.convergence,
        window_host,
    };
    crate::run::store_run(st, &run)?;
    Ok(run)
}
