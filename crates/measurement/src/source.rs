//! Where a run's load comes from: a [`LoadSource`] sends a planned run's load against the
//! started target — the open-loop engine in this process (`local`), or `tailscope agent`
//! processes on other hosts (`agents`) — with its request records into the run's store row,
//! and hands back what it [`Loaded`]. One function, `measure`, then finishes every run alike:
//! the analysis, the "why", the status and saturation, the stored [`crate::run::Run`].

use std::sync::atomic::AtomicBool;

use crate::run::IdealSource;
use analysis::{AnalysisError, IdealSpec, RunAnalysis};
use load::LoadConfig;

use crate::agent_spec::AgentsReport;
use crate::converge::Convergence;
use crate::db::Db;
use crate::error::LabError;
use crate::instruments::Instrument;
use crate::observer::Observer;
use crate::target::Ready;

/// Everything one measurement needs beside the started target.
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// What the store calls it: "run", "sweep-point", …
    pub kind: String,
    /// The load; its target and churn are taken from the ready target.
    pub load: LoadConfig,
    pub ideal: Option<IdealSpec>,
    /// Where the ideal's service time came from (None: no ideal).
    pub ideal_source: Option<IdealSource>,
    pub confidence: f64,
    /// A run whose generator lateness p99 exceeds this is invalid.
    pub lateness_threshold_ns: f64,
    /// Sample the sources of tail latency beside the run (the "why").
    pub attribution: bool,
    /// Where the server runs (for the attribution), beyond what the target knows.
    pub server_cpus: Vec<usize>,
    pub extra_pids: Vec<u32>,
    /// What the user asked for, stored with the run.
    pub config: crate::run_config::RunConfig,
    /// The experiment this run is a point of, if any.
    pub experiment: Option<i64>,
    /// Where the per-request server stages come from (eBPF for real servers).
    pub stages: crate::stages::StagesMode,
    /// What eBPF stages may cost.
    pub stages_budget: crate::run_config::StagesBudget,
    /// Send the load from these agents (other hosts) instead of from this process.
    pub agents: Option<crate::agent_spec::Agents>,
    /// Keep measuring until these intervals are tight (or the longest duration it allows);
    /// the load's own duration is then the least the run takes.
    pub precision: Option<crate::converge::Precision>,
    /// Percentiles `(key, q)` beyond the standard five in the measured summaries
    /// (`--percentiles`, an SLO's `p95<=…`).
    pub extra_quantiles: Vec<(String, f64)>,
}

/// One run being sent: its plan, the started target, the store and the run's row in it.
pub struct Sending<'a> {
    pub plan: &'a RunPlan,
    pub ready: &'a Ready,
    pub db: &'a Db,
    pub run_id: i64,
    pub stop: &'a AtomicBool,
    pub obs: &'a dyn Observer,
}

/// How the run's distribution is known.
pub enum Measured {
    /// Every request's record is in the store (the exact distribution, the ideal on the
    /// arrival stream, the server's view, stages): `measure` analyses them.
    Records,
    /// Only histograms came back: the analysis the source made of them.
    Histograms(Box<Result<RunAnalysis, AnalysisError>>),
}

/// What a source sent: the load's facts (the engine's summary, or the agents' added up) and
/// what only it knows.
pub struct Loaded {
    /// The load as it was sent (target, seed, arrival process, rate).
    pub cfg: LoadConfig,
    pub facts: load::RunSummary,
    pub measured: Measured,
    /// The CPUs the generator was pinned to here (none for agents).
    pub generator_cpus: Vec<usize>,
    pub instruments: Vec<Instrument>,
    /// The server's side (`Beside::finish`).
    pub server: crate::server_facts::ServerFacts,
    /// The records' time zero on this host's clock when the server's stamps share it.
    pub same_host_start_mono_ns: Option<u64>,
    /// The attribution sampler's series (the "why"), when it ran.
    pub series: Option<attrib::Series>,
    pub convergence: Option<Convergence>,
    /// The agents that sent it, when they did.
    pub agents: Option<AgentsReport>,
    /// Why the source failed the run (an agent died), though records arrived.
    pub failures: Vec<String>,
    /// Why the user's view is invalid though the merged lateness is fine (an agent late).
    pub user_late: Option<String>,
}

/// A source of a run's load.
pub trait LoadSource {
    /// Refuses what this source cannot send, before anything is created.
    fn check(&self, _plan: &RunPlan, _ready: &Ready) -> Result<(), LabError> {
        Ok(())
    }
    /// The run's stored configuration: what the user asked, and this source's own part.
    fn config(&self, plan: &RunPlan) -> crate::run_config::RunConfig {
        plan.config.clone()
    }
    /// Sends the load of `s.plan` against `s.ready`, its records into run `s.run_id`.
    fn send(&self, s: &Sending) -> Result<Loaded, LabError>;
    /// Sends `cfg` (its target the started one) with its records into `sink` instead of a
    /// stored run: the steps of a calibration. Agents add theirs up.
    fn send_to(
        &self,
        cfg: &LoadConfig,
        ready: &Ready,
        sink: &mut dyn load::RecordSink,
        stop: &AtomicBool,
        obs: &dyn Observer,
    ) -> Result<(), LabError>;
}
