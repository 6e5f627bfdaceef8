//! How a run is shown: the JSON object of issue 3's interface (later keys additive) and the
//! terminal report, including the "why" section of the attribution.

use analysis::{QueueStructure, RunAnalysis};
use load::RunRecords;
use serde_json::{json, Value};

use crate::output::fmt_ns;
/// The JSON object of a run (issue 3's interface; later keys are additive).
pub fn run_json(
    run_id: Option<i64>,
    status: &str,
    target: &str,
    rec: &RunRecords,
    a: &RunAnalysis,
) -> Value {
    let o = &a.outcomes;
    json!({
        "status": status,
        "run_id": run_id,
        "target": target,
        "requests": a.requests,
        "achieved_rate_rps": a.achieved_rate_rps,
        "outcomes": {"ok": o.ok, "error": o.error, "timeout": o.timeout, "dropped": o.dropped},
        "measured": a.measured.distribution_json(),
        "measured_ci": a.measured.intervals_json(),
        "classes": a.classes.iter().map(|c| json!({
            "class": c.class,
            "label": if c.class == 0 { "delay-sensitive" } else { "other" },
            "requests": c.requests,
            "measured": c.measured.distribution_json(),
        })).collect::<Vec<_>>(),
        "mean_us": a.measured.mean_ns / 1e3,
        "min_us": a.measured.min_ns / 1e3,
        "max_us": a.measured.max_ns / 1e3,
        "ideal": a.ideal.as_ref().map(|s| s.distribution_json()),
        "ideal_ci": a.ideal.as_ref().map(|s| s.intervals_json()),
        "ideal_spec": a.ideal_spec,
        "ideal_note": a.ideal_note,
        "excess": a.excess_json(),
        "excess_ci": a.excess,
        "lateness": a.lateness.distribution_json(),
        "lateness_flagged": a.lateness_flagged,
        "arrival_check": a.arrival_check,
        "stages": a.stages,
        "why": a.why,
        "client_wakeup": a.client_wakeup.as_ref().map(|s| s.distribution_json()),
        "connection_errors": rec.errors,
        "connects": rec.connects,
        "misses": rec.misses,
        "start_mono_ns": rec.start_mono_ns,
        "warmup_ns": rec.warmup_ns,
    })
}

/// Prints the run for a person.
pub fn print_human(status: &str, run_id: Option<i64>, target: &str, a: &RunAnalysis) {
    let id = run_id
        .map(|i| format!("run {i}"))
        .unwrap_or_else(|| "run (not stored)".into());
    println!(
        "{id} · {target} · {status} · {} requests after warm-up · achieved {:.0} req/s",
        a.requests, a.achieved_rate_rps
    );
    let o = &a.outcomes;
    println!(
        "outcomes: ok {}, error {}, timeout {}, dropped {}",
        o.ok, o.error, o.timeout, o.dropped
    );
    let conf = a.measured.confidence * 100.0;
    println!(
        "{:<8} {:>10} {:<24} {:>10} {:<24} {:>8} {:<16}",
        "",
        "measured",
        format!("{conf:.0}% CI"),
        "ideal",
        format!("{conf:.0}% CI"),
        "excess",
        "CI"
    );
    for q in &a.measured.quantiles {
        let ideal = a.ideal.as_ref().and_then(|s| s.get(&q.key));
        let ex = a.excess.iter().find(|e| e.key == q.key);
        println!(
            "{:<8} {:>10} {:<24} {:>10} {:<24} {:>8} {:<16}",
            q.key,
            fmt_ns(q.est.value),
            format!("[{}, {}]", fmt_ns(q.est.lo), fmt_ns(q.est.hi)),
            ideal.map(|e| fmt_ns(e.value)).unwrap_or_else(|| "-".into()),
            ideal
                .map(|e| format!("[{}, {}]", fmt_ns(e.lo), fmt_ns(e.hi)))
                .unwrap_or_default(),
            ex.map(|e| format!("{:.2}x", e.value))
                .unwrap_or_else(|| "-".into()),
            ex.map(|e| format!("[{:.2}, {:.2}]", e.lo, e.hi))
                .unwrap_or_default(),
        );
    }
    if let Some(spec) = &a.ideal_spec {
        println!(
            "ideal: the run's own arrival times through {} worker(s), {} queue(s), deterministic service {}",
            spec.workers,
            match spec.queues {
                QueueStructure::Single => "one shared",
                QueueStructure::PerWorker => "per-worker",
            },
            fmt_ns(spec.service_ns)
        );
    }
    if let Some(n) = &a.ideal_note {
        println!("ideal: {n}");
    }
    let late = |k: &str| {
        a.lateness
            .get(k)
            .map(|e| fmt_ns(e.value))
            .unwrap_or_default()
    };
    println!(
        "generator lateness (sent − intended): p50 {}, p99 {}, p99.9 {}{}",
        late("p50"),
        late("p99"),
        late("p99.9"),
        if a.lateness_flagged {
            "  — FLAGGED: the generator fell behind its schedule"
        } else {
            ""
        }
    );
    if let Some(c) = &a.arrival_check {
        println!(
            "arrivals: Anderson–Darling on {} inter-arrival gaps: A² = {:.3}, p = {:.3} → {}",
            c.n,
            c.statistic,
            c.p_value,
            if c.exponential {
                "consistent with exponential"
            } else {
                "NOT exponential"
            }
        );
    }
    if let Some(w) = &a.client_wakeup {
        let g = |k: &str| w.get(k).map(|e| fmt_ns(e.value)).unwrap_or_default();
        println!(
            "client wake-up (kernel rx → user space): p50 {}, p99 {}",
            g("p50"),
            g("p99")
        );
    }
    for c in &a.classes {
        let g = |k: &str| {
            c.measured
                .get(k)
                .map(|e| fmt_ns(e.value))
                .unwrap_or_default()
        };
        println!(
            "class {} ({}): {} requests, p50 {}, p99 {}, p99.9 {}",
            c.class,
            if c.class == 0 {
                "delay-sensitive"
            } else {
                "other"
            },
            c.requests,
            g("p50"),
            g("p99"),
            g("p99.9")
        );
    }
    print_why(a);
    if let Some(s) = &a.stages {
        println!(
            "stages (µs): slowest 1% ({} requests) vs median requests ({}):",
            s.slow_requests, s.median_requests
        );
        println!(
            "  {:<34} {:>10} {:>10} {:>10} {:>10}",
            "stage", "slow p50", "slow p99", "med p50", "med p99"
        );
        for r in &s.rows {
            println!(
                "  {:<34} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                r.stage, r.slow_p50_us, r.slow_p99_us, r.median_p50_us, r.median_p99_us
            );
        }
    }
}

/// The "why" section: grown stages and the sources that line up with the slowest requests.
fn print_why(a: &RunAnalysis) {
    let Some(w) = &a.why else { return };
    let Ok(w) = serde_json::from_value::<WhyView>(w.clone()) else {
        return;
    };
    println!(
        "why ({} slowest requests; {} of {} sampled intervals held one):",
        w.slow_requests, w.slow_intervals, w.intervals
    );
    for s in w.stages.iter().take(3) {
        if s.slow_p50_us > s.median_p50_us + 1.0 {
            println!(
                "  stage {}: {:.1} µs in the slowest 1% vs {:.1} µs for median requests",
                s.stage, s.slow_p50_us, s.median_p50_us
            );
        }
    }
    let significant: Vec<_> = w.sources.iter().filter(|s| s.p_value < 0.05).collect();
    if significant.is_empty() {
        println!("  no sampled source lines up with the slowest requests (all p >= 0.05)");
    }
    for s in significant.iter().take(4) {
        println!(
            "  {} ({}): {:.1}x more during slow requests, p = {:.3}; {}",
            s.source, s.kind, s.lift, s.p_value, s.evidence
        );
        println!(
            "      fix: {}\n      trade-off: {}",
            s.mitigation, s.tradeoff
        );
    }
}

/// The parts of `attrib::Why` the terminal shows (read back from its JSON form, which is
/// what the store keeps).
#[derive(serde::Deserialize)]
struct WhyView {
    stages: Vec<StageView>,
    sources: Vec<SourceView>,
    slow_requests: u64,
    intervals: u64,
    slow_intervals: u64,
}

#[derive(serde::Deserialize)]
struct StageView {
    stage: String,
    slow_p50_us: f64,
    median_p50_us: f64,
}

#[derive(serde::Deserialize)]
struct SourceView {
    source: String,
    kind: String,
    lift: f64,
    p_value: f64,
    evidence: String,
    mitigation: String,
    tradeoff: String,
}
