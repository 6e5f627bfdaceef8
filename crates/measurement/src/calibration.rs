//! A calibration's result: the steps of the search, the peak and the ideal's service time
//! ([`Calibration`]), the record `calibrate --json` prints and the store keeps
//! ([`CalibrationRecord`]), and a stored calibration read back for a later run's ideal
//! ([`stored_calibration`], [`IdealSource`]). The search itself is `calibrate`'s.

use serde::{Deserialize, Serialize};

use crate::error::LabError;
use crate::run::IdealSource;
use crate::status::RunStatus;

/// One step of the search.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub connections: usize,
    pub depth: usize,
    pub rate_rps: f64,
}

/// A calibration and its stored run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub run_id: i64,
    pub interrupted: bool,
    /// Replies per second at saturation (the whole target): the mean of what three open-loop
    /// confirmations completed at the best step's connections and depth — each a window 1.5×
    /// a step's, and not the largest of several noisy steps (on memcached the search's
    /// maximum of 200 ms steps came out 1-7 % above a calibration with 600 ms steps).
    /// Their spread gives its interval (`peak_interval_rps`): five calibrations of the
    /// built-in server (det:50us) spread ±1.5 %, and each one's interval held 18 of the 20
    /// others' peaks. The best step's own rate (`best`) when there was no confirmation
    /// (stopped first).
    pub peak_rps: f64,
    /// 1 / peak: the amortised time per request of the whole target, ns.
    pub service_ns: f64,
    /// The target's workers, and the per-worker service time of the ideal (workers × the
    /// whole target's time per request).
    pub workers: u32,
    pub per_worker_service_ns: f64,
    /// The best step with one request in flight per connection, and what a request costs
    /// there (per worker): the cost without batching.
    pub unbatched_rps: f64,
    pub unbatched_per_worker_service_ns: f64,
    /// best step ÷ unbatched step: how much the server gains from handling several requests
    /// per read (two steps of the same length, like for like).
    pub batching_gain: f64,
    /// The open-loop confirmation: completions per second while offered `overload` × peak.
    pub overload_offered_rps: f64,
    pub overload_completed_rps: f64,
    /// The peak's 95 % interval from the confirmations' spread (None with fewer than two).
    pub peak_interval_rps: Option<(f64, f64)>,
    /// Set when the search's best step and the peak differ by more than that interval's
    /// width: how, for a person.
    pub disagreement: Option<String>,
    /// The search, in order, and the step that gave the peak.
    pub steps: Vec<Step>,
    pub best: Step,
    pub requests: u64,
    pub duration_ns: u64,
}

impl Calibration {
    /// How the calibration ended: ok, or interrupted (a failed one is no `Calibration`).
    pub fn status(&self) -> RunStatus {
        if self.interrupted {
            RunStatus::Interrupted
        } else {
            RunStatus::Ok
        }
    }

    /// The search's best step ÷ what the confirmation completed: how optimistic the largest
    /// of the short steps was (the `peak_vs_overload` of the record).
    pub fn best_vs_confirmation(&self) -> f64 {
        self.best.rate_rps / self.overload_completed_rps.max(f64::MIN_POSITIVE)
    }

    /// The record `calibrate --json` prints and the store keeps.
    pub fn record(&self, label: &str, url: &str) -> CalibrationRecord {
        CalibrationRecord {
            status: self.status(),
            run_id: self.run_id,
            target: label.into(),
            url: url.into(),
            peak_rate_rps: self.peak_rps,
            service_ns: self.service_ns,
            service_us: self.service_ns / 1e3,
            workers: self.workers,
            per_worker_service_us: self.per_worker_service_ns / 1e3,
            unbatched_rate_rps: self.unbatched_rps,
            unbatched_per_worker_service_us: Some(self.unbatched_per_worker_service_ns / 1e3),
            batching_gain: Some(self.batching_gain),
            overload_offered_rps: self.overload_offered_rps,
            overload_completed_rps: self.overload_completed_rps,
            peak_lo_rps: self.peak_interval_rps.map(|i| i.0),
            peak_hi_rps: self.peak_interval_rps.map(|i| i.1),
            disagreement: self.disagreement.clone(),
            peak_vs_overload: self.best_vs_confirmation(),
            best: self.best.clone(),
            search: self.steps.clone(),
            requests: self.requests,
            duration_s: self.duration_ns as f64 / 1e9,
        }
    }

    /// The JSON object `calibrate --json` prints and the store keeps ([`CalibrationRecord`]).
    pub fn to_json(&self, label: &str, url: &str) -> serde_json::Value {
        serde_json::to_value(self.record(label, url)).unwrap_or(serde_json::Value::Null)
    }
}

/// A calibration as `calibrate --json` prints it and the store keeps it (µs where the key
/// says so), typed both ways: a stored calibration's summary reads back into it. Keys absent
/// from older stores read as 0; a figure JSON wrote as `null` (not a number) reads as NaN.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibrationRecord {
    pub status: RunStatus,
    #[serde(default)]
    pub run_id: i64,
    #[serde(default)]
    pub target: String,
    #[serde(default)]
    pub url: String,
    #[serde(default, deserialize_with = "f64_or_nan")]
    pub peak_rate_rps: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub service_ns: f64,
    #[serde(default, deserialize_with = "f64_or_nan")]
    pub service_us: f64,
    #[serde(default = "one")]
    pub workers: u32,
    #[serde(default, deserialize_with = "f64_or_nan")]
    pub per_worker_service_us: f64,
    #[serde(default, deserialize_with = "f64_or_nan")]
    pub unbatched_rate_rps: f64,
    /// Absent (None) in calibrations stored before it was measured.
    #[serde(default)]
    pub unbatched_per_worker_service_us: Option<f64>,
    #[serde(default)]
    pub batching_gain: Option<f64>,
    #[serde(default, deserialize_with = "f64_or_nan")]
    pub overload_offered_rps: f64,
    #[serde(default, deserialize_with = "f64_or_nan")]
    pub overload_completed_rps: f64,
    /// The peak's 95 % interval (absent in calibrations stored before it was made).
    #[serde(default)]
    pub peak_lo_rps: Option<f64>,
    #[serde(default)]
    pub peak_hi_rps: Option<f64>,
    /// The search's best step outside that interval, said how.
    #[serde(default)]
    pub disagreement: Option<String>,
    /// The search's best step ÷ the confirmation's completions (stored before the peak was
    /// the confirmation: peak ÷ confirmation, the same ratio then).
    #[serde(default, deserialize_with = "f64_or_nan")]
    pub peak_vs_overload: f64,
    #[serde(default)]
    pub best: Step,
    #[serde(default)]
    pub search: Vec<Step>,
    #[serde(default)]
    pub requests: u64,
    #[serde(default, deserialize_with = "f64_or_nan")]
    pub duration_s: f64,
}

fn one() -> u32 {
    1
}

/// A float JSON may have written as `null` (NaN or infinite): NaN.
fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl IdealSource {
    pub fn given() -> Self {
        IdealSource {
            from: "given".into(),
            calibration_run: None,
            batching_gain: None,
            unbatched_per_worker_service_ns: None,
        }
    }

    pub fn of(c: &Calibration, from: &str) -> Self {
        IdealSource {
            from: from.into(),
            calibration_run: Some(c.run_id),
            batching_gain: Some(c.batching_gain),
            unbatched_per_worker_service_ns: Some(c.unbatched_per_worker_service_ns),
        }
    }
}

/// A stored calibration: its whole-target time per request (ns), its workers, and where
/// it came from.
#[derive(Clone, Debug)]
pub struct StoredCalibration {
    pub service_ns: f64,
    pub workers: u32,
    pub source: IdealSource,
}

/// The latest successful stored calibration of `label`.
pub fn stored_calibration(
    db: &store::Store,
    label: &str,
) -> Result<Option<StoredCalibration>, LabError> {
    for r in db.list_runs()? {
        if r.kind != "calibrate" || r.target != label {
            continue;
        }
        // A failed or unfinished calibration has no record (its summary is an error or none).
        let Some(rec) = r
            .summary
            .as_ref()
            .and_then(|s| CalibrationRecord::deserialize(s).ok())
        else {
            continue;
        };
        if rec.status == RunStatus::Ok && rec.service_ns.is_finite() {
            return Ok(Some(StoredCalibration {
                service_ns: rec.service_ns,
                workers: rec.workers.max(1),
                source: IdealSource {
                    from: "stored calibration".into(),
                    calibration_run: Some(r.id),
                    batching_gain: rec.batching_gain,
                    unbatched_per_worker_service_ns: rec
                        .unbatched_per_worker_service_us
                        .map(|us| us * 1e3),
                },
            }));
        }
    }
    Ok(None)
}
