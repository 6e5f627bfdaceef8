//! [`Run`]: one measured run, the type every view consumes — the terminal printer, `--json`,
//! the store's summary, exports and reports.
//!
//! A run has two serialised forms:
//!
//! - [`Run::to_json`]: the documented JSON shape that `--json` prints and the store keeps as
//!   the run's summary (distributions as `{p50, …}` in µs, units in key names; keys are only
//!   ever added). It is written for people and scripts, not read back into a `Run`.
//! - [`Run::encode`]: the serde form of the whole `Run` (every field, as derived), which the
//!   store keeps beside the summary ([`store::Store::finish_run_typed`]) and [`load_run`]
//!   reads back, so that views read a stored run by field.
//!
//! The serde form is CBOR, not JSON, for one reason: floats. A run holds floats that can be
//! NaN or infinite (a stage's growth over a median of 0, the figures of an empty
//! distribution), and JSON has no such numbers: serde_json writes them as `null`, which does
//! not read back into an `f64`. CBOR keeps every `f64` bit for bit (NaN, ±inf, −0), for every
//! field, present and future, without a helper on each float; `--json` keeps serde_json's
//! `null` for them, as before. [`RUN_ENCODING_VERSION`] names the encoding: a field added to
//! a type inside `Run` later needs `#[serde(default)]` (older stored runs lack it) or a new
//! version.

use analysis::RunAnalysis;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::LabError;
use crate::instruments::Instrument;
use crate::judge::{LatenessVerdict, Saturation, Views};
use crate::status::RunStatus;

/// What a run's ideal service time came from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IdealSource {
    /// "given" (--service), "stored calibration" or "calibration" (made for this run).
    pub from: String,
    /// The calibration run, when it came from one.
    pub calibration_run: Option<i64>,
    /// Its batching gain and the per-worker cost without batching: a request arriving alone
    /// costs that, not the batched cost the ideal assumes — a source of excess at low load.
    pub batching_gain: Option<f64>,
    pub unbatched_per_worker_service_ns: Option<f64>,
}

/// What the load generator reported beside the records: the engine's own summary, for a
/// local run and for agents alike (theirs added up, see `crate::agents`).
pub type LoadFacts = load::RunSummary;

/// The version of [`Run::encode`]'s form this build writes and reads (stored with it).
pub const RUN_ENCODING_VERSION: i64 = 1;

/// Largest nesting [`Run::decode`] follows (a run nests a handful of levels, plus the JSON
/// values it carries: its configuration and the server's facts).
const DECODE_DEPTH: usize = 128;

/// One measured run. `Serialize + Deserialize`: its serde form is what the store keeps
/// ([`Run::encode`]); `--json` prints [`Run::to_json`], the documented shape.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    pub run_id: Option<i64>,
    pub status: RunStatus,
    /// Beside a status that is not about validity (failed, saturated, interrupted): the
    /// generator was also late.
    pub status_note: Option<String>,
    /// The validity of each view and the headline.
    pub views: Views,
    /// Whose the generator's lateness is.
    pub lateness_verdict: LatenessVerdict,
    /// The host's noise probed just before the run (or its sweep); None when skipped.
    pub host_noise: Option<noise::HostNoise>,
    /// Whether this single run's intervals may be read as bounds on a repeat, and why not.
    pub reproducibility: crate::reproduce::Reproducibility,
    /// The target as the user named it.
    pub target: String,
    /// The target actually measured (a spawned server's address).
    pub url: String,
    /// Offered rate, req/s.
    pub rate_rps: f64,
    /// Seed of the schedule and the workload.
    pub seed: u64,
    /// The configuration stored with the run.
    pub config: crate::run_config::RunConfig,
    /// The server behind the target (spawned: version and command line).
    pub server: crate::server_facts::ServerFacts,
    /// Where the ideal's service time came from.
    pub ideal_source: Option<IdealSource>,
    pub analysis: RunAnalysis,
    /// Set when the run is saturated (and also computed, as evidence, for failed runs).
    pub saturation: Option<Saturation>,
    pub why: Option<attrib::Why>,
    pub load: LoadFacts,
    /// What ran beside the load, where, and what it cost.
    pub instruments: Vec<Instrument>,
    /// The agents that sent the load, when other hosts did.
    pub agents: Option<crate::agent_spec::AgentsReport>,
    /// A run asked to converge (`--precision`): whether it did, and after how long.
    pub convergence: Option<crate::converge::Convergence>,
    /// The host's time lost per window of the analysis (from the attribution sampler).
    pub window_host: Vec<crate::timeline::WindowHost>,
}

/// Stores a finished run: its status, its summary ([`Run::to_json`]) and its typed form
/// ([`Run::encode`]), in one transaction. The run must have been begun in `st` (its
/// `run_id`).
pub fn store_run(st: &store::Store, run: &Run) -> Result<(), LabError> {
    let id = run
        .run_id
        .ok_or_else(|| LabError::Failed("a run without an id cannot be stored".into()))?;
    st.finish_run_typed(id, run.status.as_str(), &run.to_json(), &run.encode()?)?;
    Ok(())
}

/// Stored run `id` as a [`Run`]; `Ok(None)` when it has no typed form this build reads: it
/// was stored before typed runs, never finished, failed before it was analysed, or a newer
/// build encoded it (its JSON summary is then all there is). A typed form that does not
/// decode is an error.
pub fn load_run(st: &store::Store, id: i64) -> Result<Option<Run>, LabError> {
    match st.typed_run(id)? {
        Some(blob) => Run::decode(&blob),
        None => Ok(None),
    }
}

impl Run {
    /// The serde form of the whole run, as the store keeps it (see the module doc: CBOR,
    /// [`RUN_ENCODING_VERSION`]).
    pub fn encode(&self) -> Result<store::RunBlob, LabError> {
        let mut data = Vec::new();
        ciborium::into_writer(self, &mut data).map_err(|e| LabError::Encoding(e.to_string()))?;
        Ok(store::RunBlob {
            version: RUN_ENCODING_VERSION,
            data,
        })
    }

    /// A run from [`Run::encode`]'s form; `Ok(None)` for another version's (a newer build's).
    pub fn decode(blob: &store::RunBlob) -> Result<Option<Run>, LabError> {
        if blob.version != RUN_ENCODING_VERSION {
            return Ok(None);
        }
        ciborium::de::from_reader_with_recursion_limit(blob.data.as_slice(), DECODE_DEPTH)
            .map(Some)
            .map_err(|e| LabError::Encoding(e.to_string()))
    }

    /// The JSON object of a run (DESIGN.md's shapes; keys are only ever added).
    pub fn to_json(&self) -> Value {
        let a = &self.analysis;
        let o = &a.outcomes;
        let l = &self.load;
        let mut v = json!({
            "status": self.status,
            "run_id": self.run_id,
            "target": self.target,
            "url": self.url,
            "rate_rps": self.rate_rps,
            "seed": self.seed,
            "requests": a.requests,
            "achieved_rate_rps": a.achieved_rate_rps,
            "outcomes": {"ok": o.ok, "error": o.error, "timeout": o.timeout, "dropped": o.dropped, "skipped": o.skipped},
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
            "ideal_source": self.ideal_source,
            "excess": a.excess_json(),
            "excess_ci": a.excess,
            "lateness": a.lateness.distribution_json(),
            "lateness_flagged": a.lateness_flagged,
            "views": self.views,
            "headline_view": self.views.headline,
            "stands_behind": self.views.stood_behind_json(),
            "threads": self.load.threads,
            "status_note": self.status_note,
            "lateness_verdict": self.lateness_verdict,
            "host_noise": self.host_noise,
            "reproducibility": self.reproducibility,
        });
        // Built in two parts: one json! of every key exceeds the macro's recursion limit.
        let rest = json!({
            "held_in_client": a.held_in_client.as_ref().map(|h| json!({
                "requests": h.requests,
                "fraction": h.fraction,
                "held": h.held.distribution_json(),
            })),
            "server_view": a.server_view.as_ref().map(|sv| json!({
                "measured": sv.measured.distribution_json(),
                "measured_ci": sv.measured.intervals_json(),
                "ideal": sv.ideal.as_ref().map(|s| s.distribution_json()),
                "ideal_ci": sv.ideal.as_ref().map(|s| s.intervals_json()),
                "ideal_note": sv.ideal_note,
                "excess": excess_json(&sv.excess),
                "excess_ci": sv.excess,
                "kernel_stamped_fraction": sv.kernel_stamped_fraction,
            })),
            "decomposition": a.decomposition.as_ref().map(|d| json!({
                "lateness": d.lateness.distribution_json(),
                "network_server": d.network_server.distribution_json(),
                "client_wakeup": d.client_wakeup.as_ref().map(|s| s.distribution_json()),
            })),
            "excess_split": a.excess_split,
            "throughput": a.throughput,
            "saturation": self.saturation,
            "ideal_transient": a.ideal_transient.as_ref().map(|s| s.distribution_json()),
            "drain_s": l.drain_ns as f64 / 1e9,
            "stamped_service_us": a.stamped_service_ns.map(|s| s / 1e3),
            "ideal_check": a.ideal_check,
            "arrival_check": a.arrival_check,
            "stages": a.stages,
            "why": self.why,
            "client_wakeup": a.client_wakeup.as_ref().map(|s| s.distribution_json()),
            "connection_errors": l.errors,
            "error_codes": l.error_codes,
            "connects": l.connects,
            "tls": l.tls,
            "misses": l.misses,
            "start_mono_ns": l.start_mono_ns,
            "warmup_ns": l.warmup_ns,
            "records": l.records,
            "backlog": l.backlog,
            "instruments": self.instruments,
            "server": self.server.to_json(),
            "convergence": self.convergence,
            "interval_method": a.interval_method,
            "windows": a.windows,
            "stationarity": a.stationarity,
            "entropy": a.entropy,
            "window_host": self.window_host,
        });
        if let (Value::Object(m), Value::Object(r)) = (&mut v, rest) {
            m.extend(r);
        }
        if let (Value::Object(m), Some(a)) = (&mut v, &self.agents) {
            m.insert("agents".into(), json!(a.agents));
            m.insert("agents_merged".into(), json!(a.merged));
            m.insert("agents_missing".into(), json!(a.missing));
            m.insert("agents_notes".into(), json!(a.notes));
            if let Some(e) = &a.error {
                m.insert("error".into(), json!(e));
            }
        }
        v
    }
}

/// `{"p50": ratio, ...}`.
fn excess_json(e: &[analysis::Excess]) -> Value {
    let mut m = serde_json::Map::new();
    for x in e {
        m.insert(x.key.clone(), json!(x.value));
    }
    Value::Object(m)
}
