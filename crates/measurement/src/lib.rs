//! # measurement — one measurement of a server, from its plan to a [`Run`]
//!
//! What every experiment repeats: a [`TargetPlan`] says what is measured and starts it; the
//! ideal's service time comes from the user, the store or a calibration now
//! ([`calibrate()`]); [`measure`] runs one open-loop measurement — the load from this process
//! ([`local`]) or from agents on other hosts ([`agents`]), the instruments beside it placed
//! off the load's CPUs, the records streamed to the store, the analysis over them, the "why"
//! — and returns one [`Run`], the type every printer, export and the store consume. The
//! values a user gives (durations, CPU lists, loads, percentiles, targets) are typed here,
//! since every layer above reads them.
//!
//! ```text
//! TargetSpec ─► TargetPlan ─start─► Ready ─┐
//! service time (given / stored / calibrate) ─► RunPlan ─measure─► Run ─► store, CLI, report
//! ```
//!
//! The loops over [`measure`] (sweeps, repeats, tuning, A/B comparisons) and the verdicts
//! over runs are the `experiments` crate; the options a user gives them are `lab`'s.

pub mod agent_spec;
pub mod agents;
mod calibrate;
mod calibration;
pub mod cli_values;
mod container;
pub mod converge;
mod db;
pub mod error;
mod grpc_call;
pub mod input_file;
pub mod instruments;
pub mod interference;
mod judge;
pub mod lenient;
pub mod load_spec;
mod loads;
pub mod local;
pub mod measure;
mod observer;
pub mod percentile;
mod placement;
pub mod records;
pub mod reproduce;
mod run;
pub mod run_config;
pub mod run_spec;
mod server_facts;
mod source;
mod stages;
mod status;
pub mod tail_validity;
mod target;
pub mod target_spec;
pub mod timeline;
pub mod view;

pub use agent_spec::{
    agents_file, AgentClock, AgentCommand, AgentReport, AgentStatus, Agents, AgentsMerged,
    AgentsReport,
};
pub use calibrate::{calibrate, CalibrateSpec};
pub use calibration::{
    stored_calibration, Calibration, CalibrationRecord, Step, StoredCalibration,
};
pub use cli_values::{
    is_label, Bytes, Churn, Count, CpuList, CpuShare, Cut, DurationArg, Label, NetRate,
    ServiceTime, Tolerance,
};
pub use db::{host_facts, Db};
pub use error::LabError;
pub use error::{clip, clip_to, QUOTE_CHARS};
pub use grpc_call::GrpcSpec;
pub use input_file::read_bounded;
pub use instruments::{Instrument, ServerInfo};
pub use interference::stress_cpus;
pub use judge::{
    judge, lateness_verdict_of, saturation_of, status_of, views_of, JudgeInput, Judgement,
    LatenessCause, LatenessVerdict, Saturation, ViewValidity, Views,
};
pub use load_spec::LoadParseError;
pub use loads::parse_loads;
pub use measure::{check_load, expected_requests, measure};
pub use observer::{Observer, Quiet};
pub use placement::{parse_bytes, MAX_INSTANCES};
pub use run::IdealSource;
pub use run::{load_run, store_run, LoadFacts, Run, RUN_ENCODING_VERSION};
pub use run_config::{Arm, RunConfig};
pub use run_config::{StagesBudget, StagesMode};
pub use run_spec::{
    placeholder_target, probe_noise, resolve_ideal, CheckedRun, IdealAsk, LoadPlan, RunSpec,
    RunTemplate,
};
pub use server_facts::{ContainerFacts, ServerFacts};
pub use source::{LoadSource, Loaded, Measured, RunPlan, Sending};
pub use status::{ExperimentStatus, RunStatus, SweepStatus};
pub use tail_validity::{PercentileValidity, PERCENTILE_SHARE};
pub use target::{
    own_server_threads, Ready, Scheme, SpawnSpec, TargetPlan, TargetSpec, WorkloadSpec,
};
pub use target_spec::Container;
pub use view::{View, ViewChoice};
