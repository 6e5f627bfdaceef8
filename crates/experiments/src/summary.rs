//! Stored JSON read back by field: a run's summary ([`measurement::Run::to_json`]'s shape, as every
//! version stored it), the configuration stored with a run or an experiment, the host facts,
//! and an experiment's summary (its points and their combined repeats).
//!
//! These are the readers of what the store keeps as JSON, for runs that have no typed form
//! (stored before the store kept one, or failed before their analysis) and for the keys
//! `check` and the reports compare. Every field is read leniently ([`lenient`]): a key
//! missing, `null`, or of another type than this build expects reads as the field's default
//! (`None`, empty), exactly as a lookup that finds nothing — an older store keeps reading, and
//! one odd key never hides the rest of a run.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use stats::Distribution;

use measurement::RunStatus;

pub use measurement::lenient::{lenient, lenient_each, lenient_list, read};

/// A figure with its interval (µs for latencies, a ratio for an excess).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ci {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

/// One keyed interval of an array of them (`excess_ci`: `[{"key": "p99", "value", "lo", "hi"}]`).
#[derive(Deserialize)]
struct KeyedCi {
    key: String,
    value: f64,
    lo: f64,
    hi: f64,
}

/// Intervals by percentile, in their stored order: read from an object
/// `{"p99": {"value", "lo", "hi"}}` or an array `[{"key": "p99", "value", "lo", "hi"}]`;
/// an entry without all three numbers is left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Intervals(pub Vec<(String, Ci)>);

impl Intervals {
    /// The interval of `key` (`"p99"`, …).
    pub fn of(&self, key: &str) -> Option<Ci> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, c)| *c)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de> Deserialize<'de> for Intervals {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Intervals, D::Error> {
        let out = match Value::deserialize(d)? {
            Value::Object(m) => m
                .into_iter()
                .filter_map(|(k, v)| Some((k, Ci::deserialize(v).ok()?)))
                .collect(),
            Value::Array(a) => a
                .into_iter()
                .filter_map(|v| KeyedCi::deserialize(v).ok())
                .map(|k| {
                    let c = Ci {
                        value: k.value,
                        lo: k.lo,
                        hi: k.hi,
                    };
                    (k.key, c)
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok(Intervals(out))
    }
}

/// A distribution's figure under `key`, when it is a number (a stored `null` is no figure).
pub fn figure(d: Option<&Distribution>, key: &str) -> Option<f64> {
    d.and_then(|d| d.get(key)).filter(|x| !x.is_nan())
}

/// The request counts of a run by outcome.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct OutcomeCounts {
    #[serde(default, deserialize_with = "lenient")]
    pub ok: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub error: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub timeout: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub dropped: Option<u64>,
}

impl OutcomeCounts {
    /// `(name, count)` in the order of the stored object.
    pub fn named(&self) -> [(&'static str, Option<u64>); 4] {
        [
            ("ok", self.ok),
            ("error", self.error),
            ("timeout", self.timeout),
            ("dropped", self.dropped),
        ]
    }
}

/// The ideal's shape as stored (`ideal_spec` of a summary, `ideal` of a configuration).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct IdealFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub service_ns: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub workers: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub queues: Option<String>,
}

/// Where the ideal's service time came from, as stored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct IdealSourceFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub from: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub calibration_run: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub batching_gain: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub unbatched_per_worker_service_ns: Option<f64>,
}

/// One request class's latency.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ClassFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub class: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub label: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub requests: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub measured: Option<Distribution>,
}

/// One view's validity as stored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ValidityFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub valid: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub why: Option<String>,
}

/// The views' validity as stored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ViewsFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub user: Option<ValidityFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub server: Option<ValidityFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub headline_why: Option<String>,
    /// Per percentile, each view's verdict (`lab::PercentileValidity`).
    #[serde(default, deserialize_with = "lenient")]
    pub percentiles: Vec<PercentileFacts>,
}

/// One percentile's verdict per view, as stored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PercentileFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub key: String,
    #[serde(default, deserialize_with = "lenient")]
    pub user: Option<ValidityFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub server: Option<ValidityFacts>,
}

impl ViewsFacts {
    /// The validity of view `name` ("user" or "server").
    pub fn of(&self, name: &str) -> Option<&ValidityFacts> {
        match name {
            "user" => self.user.as_ref(),
            _ => self.server.as_ref(),
        }
    }

    /// Why view `name` does not stand behind percentile `key` (None: it does, or it was not
    /// judged).
    pub fn unstood(&self, name: &str, key: &str) -> Option<String> {
        let p = self.percentiles.iter().find(|p| p.key == key)?;
        let v = match name {
            "user" => p.user.as_ref(),
            _ => p.server.as_ref(),
        }?;
        (v.valid == Some(false)).then(|| v.why.clone().unwrap_or_else(|| "not valid".into()))
    }
}

/// Whether a single run's intervals bound a repeat, as stored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ReproducibilityFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub single_run_bounds_repeats: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub flags: Vec<String>,
}

/// Time held in the client.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct HeldFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub requests: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub fraction: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub held: Option<Distribution>,
}

/// The server's view as stored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ServerViewFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub measured: Option<Distribution>,
    #[serde(default, deserialize_with = "lenient")]
    pub measured_ci: Option<Intervals>,
    #[serde(default, deserialize_with = "lenient")]
    pub ideal: Option<Distribution>,
    #[serde(default, deserialize_with = "lenient")]
    pub ideal_ci: Option<Intervals>,
    #[serde(default, deserialize_with = "lenient")]
    pub ideal_note: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub excess: Option<Distribution>,
    #[serde(default, deserialize_with = "lenient")]
    pub excess_ci: Option<Intervals>,
}

/// The latency path's decomposition.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct DecompositionFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub lateness: Option<Distribution>,
    #[serde(default, deserialize_with = "lenient")]
    pub network_server: Option<Distribution>,
    #[serde(default, deserialize_with = "lenient")]
    pub client_wakeup: Option<Distribution>,
}

/// One percentile's excess time split between client and server.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ExcessSplitFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub key: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub total_us: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub client_us: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub server_us: Option<f64>,
}

/// Saturation evidence as stored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct SaturationFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub offered_rps: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub completed_rps: Option<f64>,
}

/// The check of the sent arrivals against exponential gaps.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ArrivalCheckFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub n: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub statistic: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub p_value: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub exponential: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub schedule_p_value: Option<f64>,
}

/// One stage of the breakdown.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StageRowFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub stage: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub slow_p50_us: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub slow_p99_us: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub median_p50_us: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub median_p99_us: Option<f64>,
}

/// The stage breakdown.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StagesFacts {
    #[serde(default, deserialize_with = "lenient_each")]
    pub rows: Vec<StageRowFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub slow_requests: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub median_requests: Option<f64>,
}

/// One sampled source of the "why".
#[derive(Clone, Debug, Default, Deserialize)]
pub struct SourceFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub source: Option<String>,
    /// The source's kind as stored (a name, or an object in some versions).
    #[serde(default, deserialize_with = "lenient")]
    pub kind: Option<Value>,
    #[serde(default, deserialize_with = "lenient")]
    pub lift: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub p_value: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub evidence: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub mitigation: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub tradeoff: Option<String>,
}

/// The "why" as stored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct WhyFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub slow_requests: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub slow_intervals: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub intervals: Option<f64>,
    #[serde(default, deserialize_with = "lenient_each")]
    pub sources: Vec<SourceFacts>,
}

/// An instrument beside the load, as stored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct InstrumentFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub mode: Option<String>,
    /// Its CPUs as stored (a list, or a word).
    #[serde(default, deserialize_with = "lenient")]
    pub cpus: Option<Value>,
    #[serde(default, deserialize_with = "lenient")]
    pub samples: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub skipped: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub cost_per_sample_ns: Option<f64>,
}

/// One time window's figures, each optional (older runs lack some).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct WindowFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub start_s: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub end_s: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub count: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub p50_us: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub p99_us: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub max_us: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub server_p50_us: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub server_p99_us: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub ideal_p99_us: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub server_ideal_p99_us: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub lateness_p99_us: Option<f64>,
}

impl WindowFacts {
    /// The window as the analysis types it (a missing figure: NaN, a missing count: 0).
    pub fn to_window(&self) -> analysis::Window {
        let nan = |x: Option<f64>| x.unwrap_or(f64::NAN);
        analysis::Window {
            start_s: nan(self.start_s),
            end_s: nan(self.end_s),
            count: self.count.map_or(0, |c| c as u64),
            p50_us: nan(self.p50_us),
            p99_us: nan(self.p99_us),
            max_us: nan(self.max_us),
            server_p50_us: self.server_p50_us,
            server_p99_us: self.server_p99_us,
            ideal_p99_us: self.ideal_p99_us,
            server_ideal_p99_us: self.server_ideal_p99_us,
            lateness_p99_us: nan(self.lateness_p99_us),
        }
    }
}

/// A span of time, s.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct SpanFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub start_s: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub end_s: Option<f64>,
}

/// Where one view's tail moved.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct MovedFacts {
    #[serde(default, deserialize_with = "lenient_each")]
    pub moved: Vec<SpanFacts>,
}

impl MovedFacts {
    /// The spans with both ends.
    pub fn spans(&self) -> Vec<(f64, f64)> {
        self.moved
            .iter()
            .filter_map(|m| Some((m.start_s?, m.end_s?)))
            .collect()
    }
}

/// The stationarity check as stored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StationarityFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub user: Option<MovedFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub server: Option<MovedFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub summary: Option<String>,
}

/// The host's time lost in one window.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct WindowHostFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub start_s: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub end_s: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub lost_us: BTreeMap<String, f64>,
}

/// A run's stored summary ([`measurement::Run::to_json`]'s shape, from any version), by field.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RunSummary {
    /// None for a status this build does not know (or none stored).
    #[serde(default, deserialize_with = "lenient")]
    pub status: Option<RunStatus>,
    #[serde(default, deserialize_with = "lenient")]
    pub url: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub rate_rps: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub seed: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub requests: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub achieved_rate_rps: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub load_pct: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub outcomes: Option<OutcomeCounts>,
    #[serde(default, deserialize_with = "lenient")]
    pub measured: Option<Distribution>,
    #[serde(default, deserialize_with = "lenient")]
    pub measured_ci: Option<Intervals>,
    #[serde(default, deserialize_with = "lenient_each")]
    pub classes: Vec<ClassFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub ideal: Option<Distribution>,
    #[serde(default, deserialize_with = "lenient")]
    pub ideal_ci: Option<Intervals>,
    #[serde(default, deserialize_with = "lenient")]
    pub ideal_spec: Option<IdealFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub ideal_note: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub ideal_source: Option<IdealSourceFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub ideal_check: Option<String>,
    /// Measured ÷ ideal per percentile.
    #[serde(default, deserialize_with = "lenient")]
    pub excess: Option<Distribution>,
    #[serde(default, deserialize_with = "lenient")]
    pub excess_ci: Option<Intervals>,
    #[serde(default, deserialize_with = "lenient")]
    pub lateness: Option<Distribution>,
    #[serde(default, deserialize_with = "lenient")]
    pub lateness_flagged: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub views: Option<ViewsFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub headline_view: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub status_note: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub error: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub reproducibility: Option<ReproducibilityFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub held_in_client: Option<HeldFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub server_view: Option<ServerViewFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub decomposition: Option<DecompositionFacts>,
    #[serde(default, deserialize_with = "lenient_each")]
    pub excess_split: Vec<ExcessSplitFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub saturation: Option<SaturationFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub arrival_check: Option<ArrivalCheckFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub stages: Option<StagesFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub why: Option<WhyFacts>,
    /// The server's facts exactly as stored (printed verbatim).
    #[serde(default, deserialize_with = "lenient")]
    pub server: Option<Value>,
    #[serde(default, deserialize_with = "lenient_each")]
    pub instruments: Vec<InstrumentFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub start_mono_ns: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub warmup_ns: Option<f64>,
    #[serde(default, deserialize_with = "lenient_list")]
    pub windows: Option<Vec<WindowFacts>>,
    #[serde(default, deserialize_with = "lenient")]
    pub stationarity: Option<StationarityFacts>,
    #[serde(default, deserialize_with = "lenient_each")]
    pub window_host: Vec<WindowHostFacts>,
}

impl RunSummary {
    /// A stored summary by field (`null`, or not an object: every field empty).
    pub fn of(v: &Value) -> RunSummary {
        read(v)
    }

    /// The server's view as stored, when there is one.
    pub fn server_view(&self) -> Option<&ServerViewFacts> {
        self.server_view.as_ref()
    }
}

/// The host facts two runs must share to be compared ([`measurement::host_facts`]'s keys), each
/// as stored (`null` when missing).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct HostFacts {
    #[serde(default)]
    pub hostname: Value,
    #[serde(default)]
    pub kernel: Value,
    #[serde(default)]
    pub cpu_model: Value,
    #[serde(default)]
    pub arch: Value,
    #[serde(default)]
    pub cpus_online: Value,
}

impl HostFacts {
    pub fn of(v: &Value) -> HostFacts {
        read(v)
    }

    /// `(key, value)` of each fact, in [`crate::check::HOST_KEYS`]'s order.
    pub fn named(&self) -> [(&'static str, &Value); 5] {
        [
            ("hostname", &self.hostname),
            ("kernel", &self.kernel),
            ("cpu_model", &self.cpu_model),
            ("arch", &self.arch),
            ("cpus_online", &self.cpus_online),
        ]
    }
}

/// A view's repeats combined, as an experiment stores it: their combined summary.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CombinedFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub summary: Option<stats::Summary>,
}

/// A point's repeated runs combined (a `Repeated` as stored).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RepeatedFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub repeats: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub run_ids: Vec<i64>,
    #[serde(default, deserialize_with = "lenient")]
    pub user: Option<CombinedFacts>,
    #[serde(default, deserialize_with = "lenient")]
    pub server: Option<CombinedFacts>,
}

impl RepeatedFacts {
    /// The combined summary of view `name` ("user" or "server").
    pub fn combined(&self, name: &str) -> Option<&stats::Summary> {
        match name {
            "user" => self.user.as_ref(),
            _ => self.server.as_ref(),
        }
        .and_then(|c| c.summary.as_ref())
    }
}

/// One point of an experiment as stored.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PointFacts {
    #[serde(default, deserialize_with = "lenient")]
    pub params: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "lenient")]
    pub offered_rps: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub load_pct: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub result: Option<RepeatedFacts>,
}

/// An experiment's stored summary: its points (a sweep's), or, for `run --repeat`, its one
/// point's combined result in place.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ExperimentSummary {
    /// None when the summary has no `points` (a `run --repeat` experiment's).
    #[serde(default, deserialize_with = "lenient_list")]
    pub points: Option<Vec<PointFacts>>,
    #[serde(flatten)]
    pub repeated: RepeatedFacts,
}

impl ExperimentSummary {
    pub fn of(v: &Value) -> ExperimentSummary {
        read(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_of_another_type_reads_as_missing_and_the_rest_still_reads() {
        let s = RunSummary::of(&json!({
            "status": "saturated", "rate_rps": "fast", "requests": 1200,
            "measured": {"p50": 10.0, "p99": null}, "views": {"user": {"valid": "yes"}},
            "excess_ci": [{"key": "p99", "value": 2.0, "lo": 1.5, "hi": 2.5}, {"key": "p50"}],
            "measured_ci": {"p99": {"value": 20.0, "lo": 18.0, "hi": 23.0}, "p50": 3},
        }));
        assert_eq!(s.status, Some(RunStatus::Saturated));
        assert_eq!(s.rate_rps, None);
        assert_eq!(s.requests, Some(1200.0));
        assert_eq!(figure(s.measured.as_ref(), "p50"), Some(10.0));
        assert_eq!(figure(s.measured.as_ref(), "p99"), None);
        let user = s.views.as_ref().and_then(|v| v.user.as_ref()).unwrap();
        assert_eq!(user.valid, None);
        let e = s.excess_ci.unwrap();
        assert_eq!(e.0.len(), 1);
        assert_eq!(e.of("p99").map(|c| (c.lo, c.hi)), Some((1.5, 2.5)));
        let m = s.measured_ci.unwrap();
        assert_eq!(m.of("p99").map(|c| c.value), Some(20.0));
        assert_eq!(m.of("p50"), None);
        assert!(RunSummary::of(&Value::Null).status.is_none());
        assert_eq!(
            RunSummary::of(&json!({"status": "running"})).status,
            None,
            "no run status"
        );
    }

    #[test]
    fn a_configuration_reads_its_label_from_its_template_and_an_experiment_its_points() {
        let c = measurement::RunConfig::of(
            &json!({"repeat": 3, "run": {"label": "base", "rate_rps": 5.0}}),
        );
        assert_eq!(c.label(), Some("base"));
        assert_eq!(c.run.as_ref().and_then(|r| r.rate_rps), Some(5.0));
        let c = measurement::RunConfig::of(&json!({"label": 7, "view": "server", "churn": [1, 2]}));
        assert_eq!(c.label(), None);
        assert_eq!(c.view, Some(crate::slo::ViewChoice::Server));
        assert_eq!(c.churn, Some((1, 2)));
        let e = ExperimentSummary::of(&json!({
            "points": [{"params": {"conns": "4"}, "offered_rps": 100.0,
                        "result": {"repeats": 1, "run_ids": [7]}}, 3]
        }));
        let p = e.points.unwrap();
        assert_eq!(p.len(), 2, "each element read on its own");
        assert!(p[0].result.is_some() && p[1].result.is_none());
        let e = ExperimentSummary::of(&json!({
            "points": [{"params": {"conns": "4"}, "offered_rps": 100.0,
                        "result": {"repeats": 1, "run_ids": [7]}}]
        }));
        let p = &e.points.unwrap()[0];
        let conns = BTreeMap::from([("conns".to_string(), "4".to_string())]);
        assert_eq!(p.params, conns);
        assert_eq!(p.result.as_ref().map(|r| r.run_ids.clone()), Some(vec![7]));
        let r = ExperimentSummary::of(&json!({"repeats": 3, "run_ids": [1, 2, 3]}));
        assert!(r.points.is_none());
        assert_eq!(r.repeated.repeats, Some(3));
    }
}
