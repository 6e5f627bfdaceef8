//! The ideal's service time (Tales of the Tail §3.2): given by the user, the latest stored
//! calibration of the target, or measured now by saturating the target and inverting its
//! peak throughput. One calibration, one parameter set ([`CalibrateSpec::default`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use crate::db::{host_facts, Db};
use crate::error::LabError;
use crate::target::Ready;
use crate::Observer;

/// How a calibration saturates the target.
#[derive(Clone, Debug, Serialize)]
pub struct CalibrateSpec {
    /// Connections, each with `outstanding` requests in flight. The default, 16 × 1, saturates
    /// without pipelining: pipelined requests let a server batch (Redis answers a pipeline
    /// in one go), which would make it look faster than it is for independent requests.
    pub connections: usize,
    pub outstanding: usize,
    /// Measured window, after the warm-up.
    pub duration: Duration,
    pub warmup: Duration,
}

impl Default for CalibrateSpec {
    fn default() -> Self {
        CalibrateSpec {
            connections: 16,
            outstanding: 1,
            duration: Duration::from_secs(3),
            warmup: Duration::from_secs(1),
        }
    }
}

/// A calibration and its stored run.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    pub run_id: i64,
    pub interrupted: bool,
    /// Replies per second at saturation (the whole target).
    pub peak_rps: f64,
    /// 1 / peak: the amortised time per request of the whole target, ns.
    pub service_ns: f64,
    /// The target's workers, and the per-worker service time of the ideal (workers × the
    /// whole target's time per request).
    pub workers: u32,
    pub per_worker_service_ns: f64,
    pub requests: u64,
    pub duration_ns: u64,
}

impl Calibration {
    /// The JSON object `calibrate --json` prints and the store keeps.
    pub fn to_json(&self, label: &str, url: &str) -> serde_json::Value {
        json!({
            "status": if self.interrupted { "interrupted" } else { "ok" },
            "run_id": self.run_id, "target": label, "url": url,
            "peak_rate_rps": self.peak_rps, "service_ns": self.service_ns,
            "service_us": self.service_ns / 1e3, "workers": self.workers,
            "per_worker_service_us": self.per_worker_service_ns / 1e3,
            "requests": self.requests, "duration_s": self.duration_ns as f64 / 1e9,
        })
    }
}

/// Saturates `ready` as `spec` says, inverts the peak throughput and stores the result as a
/// "calibrate" run of the target (a failed calibration is stored as failed).
pub fn calibrate(
    ready: &Ready,
    spec: &CalibrateSpec,
    workers: u32,
    db: &Db,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<Calibration, LabError> {
    let st = &db.store;
    let id = st.begin_run(&store::NewRun {
        kind: "calibrate".into(),
        target: ready.label.clone(),
        started_at: store::now_rfc3339(),
        config: json!({"spec": spec, "url": ready.url, "server": ready.server_json()}),
        host: host_facts(),
    })?;
    obs.note(&format!(
        "calibrating {}: {} connections × {} in flight for {:.1} s after {:.1} s warm-up",
        ready.url,
        spec.connections,
        spec.outstanding,
        spec.duration.as_secs_f64(),
        spec.warmup.as_secs_f64()
    ));
    let f = ready.factory(1)?;
    let c = match load::calibrate(
        &ready.target,
        f.as_ref(),
        spec.connections,
        spec.outstanding,
        spec.duration,
        spec.warmup,
        stop,
    ) {
        Ok(c) => c,
        Err(e) => {
            let _ = st.finish_run(id, "failed", &json!({"error": e.to_string()}));
            return Err(LabError::Failed(format!(
                "calibration of {} failed: {e}",
                ready.url
            )));
        }
    };
    let cal = Calibration {
        run_id: id,
        interrupted: stop.load(Ordering::Relaxed),
        peak_rps: c.peak_rps,
        service_ns: c.service_ns,
        workers,
        per_worker_service_ns: c.service_ns * f64::from(workers),
        requests: c.requests,
        duration_ns: c.duration_ns,
    };
    let status = if cal.interrupted { "interrupted" } else { "ok" };
    st.finish_run(id, status, &cal.to_json(&ready.label, &ready.url))?;
    Ok(cal)
}

/// The latest successful stored calibration of `label`: its whole-target time per request,
/// ns, and the workers it had.
pub fn stored_calibration(db: &store::Store, label: &str) -> Result<Option<(f64, u32)>, LabError> {
    for r in db.list_runs()? {
        if r.kind == "calibrate" && r.target == label && r.status == "ok" {
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
