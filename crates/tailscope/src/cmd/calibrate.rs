//! `tailscope calibrate`: the paper's method (§3.2) — saturate the target, invert the peak
//! throughput to get the amortised per-request service time; stored for later `--rate N%` runs.

use serde_json::json;

use super::common::{host_facts, now_rfc3339, open_store, parse_duration, shutdown_flag};
use super::run::{factory, parse_target};
use crate::cli::CalibrateArgs;
use crate::exit::usage;
use crate::output::{self, fmt_ns};

pub fn run(a: &CalibrateArgs) -> anyhow::Result<i32> {
    let target = parse_target(&a.target)?;
    let duration = parse_duration("--duration", &a.duration)?;
    let warmup = parse_duration("--warmup", &a.warmup)?;
    if a.connections == 0 || a.outstanding == 0 {
        return Err(usage("--connections and --outstanding must be at least 1"));
    }
    if duration.is_zero() {
        return Err(usage("--duration must be positive"));
    }
    let f = factory(&target, a.request_size, !a.no_stamps)?;
    let st = open_store(&a.db)?;
    let stop = shutdown_flag()?;
    let id = st.begin_run(&store::NewRun {
        kind: "calibrate".into(),
        target: a.target.clone(),
        started_at: now_rfc3339(),
        config: json!({"duration": a.duration, "warmup": a.warmup, "connections": a.connections,
                       "outstanding": a.outstanding, "request_size": a.request_size}),
        host: host_facts(),
    })?;
    eprintln!(
        "calibrating {}: saturating it for {} after {} warm-up…",
        a.target, a.duration, a.warmup
    );
    let c = match load::calibrate(
        &target,
        f.as_ref(),
        a.connections,
        a.outstanding,
        duration,
        warmup,
        &stop,
    ) {
        Ok(c) => c,
        Err(e) => {
            let _ = st.finish_run(id, "failed", &json!({"error": e.to_string()}));
            return Err(
                anyhow::Error::new(e).context(format!("calibration of {} failed", a.target))
            );
        }
    };
    let status = if stop.load(std::sync::atomic::Ordering::Relaxed) {
        "interrupted"
    } else {
        "ok"
    };
    let summary = json!({
        "status": status, "run_id": id, "target": a.target,
        "peak_rate_rps": c.peak_rps, "service_ns": c.service_ns, "service_us": c.service_ns / 1e3,
        "requests": c.requests, "duration_s": c.duration_ns as f64 / 1e9,
    });
    st.finish_run(id, status, &summary)?;
    if a.json {
        output::print_json(&summary)?;
    } else {
        println!(
            "{}: peak {:.0} req/s over {} requests → amortised service time {} per request (run {id})",
            a.target,
            c.peak_rps,
            c.requests,
            fmt_ns(c.service_ns)
        );
    }
    Ok(if status == "ok" { 0 } else { 1 })
}
