//! `tailscope calibrate`: the paper's method (§3.2) — saturate the target, invert the peak
//! throughput to get the amortised time per request; stored for later `--rate N%` runs. For a
//! target with W workers the per-worker service time is W times that (the ideal uses it).

use serde_json::json;

use super::common::{
    host_facts, now_rfc3339, open_store, parse_cpus, parse_duration, shutdown_flag,
};
use crate::cli::CalibrateArgs;
use crate::exit::usage;
use crate::output::{self, fmt_ns};

pub fn run(a: &CalibrateArgs) -> anyhow::Result<i32> {
    let cpus = parse_cpus(a.server_cpus.as_deref())?;
    let tplan = super::target::plan(&a.target, &a.server, &cpus)?;
    let duration = parse_duration("--duration", &a.duration)?;
    let warmup = parse_duration("--warmup", &a.warmup)?;
    if a.connections == 0 || a.outstanding == 0 {
        return Err(usage("--connections and --outstanding must be at least 1"));
    }
    if duration.is_zero() {
        return Err(usage("--duration must be positive"));
    }
    if tplan.target.scheme == "nullrpc" {
        // Checks the request size before anything starts.
        drop(super::run::factory(
            &tplan.target,
            a.request_size,
            !a.no_stamps,
        )?);
    }
    let st = open_store(&a.db)?;
    let stop = shutdown_flag()?;
    let ready = tplan.start(!a.server.no_preload, &stop)?;
    let f = ready.factory(a.request_size, !a.no_stamps, 1)?;
    let (workers, _) = ready.ideal_shape(None, "auto")?;
    let config = json!({"duration": a.duration, "warmup": a.warmup, "connections": a.connections,
                        "outstanding": a.outstanding, "request_size": a.request_size,
                        "url": ready.url, "server": ready.server_json()});
    eprintln!(
        "calibrating {}: saturating it for {} after {} warm-up…",
        ready.url, a.duration, a.warmup
    );
    let Stored {
        cal: c,
        summary,
        status,
    } = calibrate_and_store(
        &st,
        &a.target,
        &ready.url,
        &ready.target,
        f.as_ref(),
        (a.connections, a.outstanding),
        (duration, warmup),
        workers,
        config,
        &stop,
    )?;
    let id = summary["run_id"].clone();
    if a.json {
        output::print_json(&summary)?;
    } else {
        println!(
            "{}: peak {:.0} req/s over {} requests → {} per request ({} per request per worker with {} worker(s)) (run {id})",
            ready.url,
            c.peak_rps,
            c.requests,
            fmt_ns(c.service_ns),
            fmt_ns(c.service_ns * f64::from(workers)),
            workers
        );
    }
    if let Some(s) = ready.spawned {
        s.stop()?;
    }
    Ok(if status == "ok" { 0 } else { 1 })
}

/// A calibration and what the store keeps of it (also what `--json` prints).
pub struct Stored {
    pub cal: load::Calibration,
    pub summary: serde_json::Value,
    pub status: &'static str,
}

/// Saturates `target` (`load` = connections and requests in flight on each; `time` =
/// measurement and warm-up), inverts the peak throughput, and stores it as a "calibrate" run
/// under `label` — a failed calibration is stored as failed too.
#[allow(clippy::too_many_arguments)]
pub fn calibrate_and_store(
    st: &store::Store,
    label: &str,
    url: &str,
    target: &load::Target,
    f: &(dyn Fn() -> Box<dyn load::Protocol> + Send + Sync),
    load: (usize, usize),
    time: (std::time::Duration, std::time::Duration),
    workers: u32,
    config: serde_json::Value,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<Stored> {
    let id = st.begin_run(&store::NewRun {
        kind: "calibrate".into(),
        target: label.to_string(),
        started_at: now_rfc3339(),
        config,
        host: host_facts(),
    })?;
    let c = match load::calibrate(target, f, load.0, load.1, time.0, time.1, stop) {
        Ok(c) => c,
        Err(e) => {
            let _ = st.finish_run(id, "failed", &json!({"error": e.to_string()}));
            return Err(anyhow::Error::new(e).context(format!("calibration of {url} failed")));
        }
    };
    let status = if stop.load(std::sync::atomic::Ordering::Relaxed) {
        "interrupted"
    } else {
        "ok"
    };
    let summary = json!({
        "status": status, "run_id": id, "target": label, "url": url,
        "peak_rate_rps": c.peak_rps, "service_ns": c.service_ns, "service_us": c.service_ns / 1e3,
        "workers": workers, "per_worker_service_us": c.service_ns * f64::from(workers) / 1e3,
        "requests": c.requests, "duration_s": c.duration_ns as f64 / 1e9,
    });
    st.finish_run(id, status, &summary)?;
    Ok(Stored {
        cal: c,
        summary,
        status,
    })
}
