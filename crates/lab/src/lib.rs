//! # lab — tailscope's experiments
//!
//! The layer between the domain crates and the CLI (DESIGN.md): everything a measurement
//! needs beside the load itself. A [`TargetPlan`] says what is measured and starts it; the
//! ideal's service time comes from the user, the store or a calibration now
//! ([`calibrate()`]); [`measure`] runs one open-loop measurement — the instruments beside it
//! placed off the load's CPUs, the records streamed to the store, the analysis over them,
//! the "why" — and returns one [`Run`], the type every printer, export and the store
//! consume. A sweep, a search for the highest load meeting an SLO, a tuning walk are loops
//! over [`measure`].
//!
//! ```text
//! TargetSpec ─► TargetPlan ─start─► Ready ─┐
//! service time (given / stored / calibrate) ─► RunPlan ─measure─► Run ─► store, CLI, report
//! ```

// `lab::…` paths inside the crate too: the simulated comparison of examples/ab_coverage is
// also compiled into the unit tests.
extern crate self as lab;

pub mod ab;
mod agent_spec;
pub mod agents;
pub mod bursty;
mod calibrate;
pub mod check;
mod cli_values;
mod colocate;
mod container;
pub mod converge;
mod db;
pub mod demo;
pub mod doctor;
mod dry_run;
mod error;
pub mod experiment;
pub mod figures;
mod grpc_call;
mod headlines;
mod input_file;
pub mod instruments;
mod interference;
mod knob;
mod lenient;
mod load_spec;
mod loads;
mod local;
mod measure;
pub mod model_query;
mod observer;
pub mod options;
mod options_cmd;
mod options_file;
mod options_model;
mod options_plan;
mod outcome;
mod percentile;
mod placement;
pub mod records;
pub mod repeat;
pub mod reproduce;
mod run;
mod run_config;
mod run_spec;
mod server_facts;
mod simulate;
mod slo;
mod source;
mod stages;
pub mod summary;
mod sweep;
pub mod tail_validity;
mod target;
mod target_spec;
pub mod timeline;
mod tune;
mod view;

pub use agent_spec::{
    agents_file, AgentClock, AgentCommand, AgentReport, AgentStatus, Agents, AgentsMerged,
    AgentsReport,
};
pub use calibrate::{
    calibrate, stored_calibration, CalibrateSpec, Calibration, CalibrationRecord, IdealSource,
    Step, StoredCalibration,
};
pub use cli_values::{
    is_label, Bytes, Churn, Count, CpuList, CpuShare, Cut, DurationArg, Label, NetRate,
    ServiceTime, Tolerance,
};
pub use colocate::{colocate, Cell, Colocation};
pub use db::{host_facts, Db};
pub use dry_run::{DryAxis, DryRun};
pub use error::LabError;
pub use error::{clip, clip_to, QUOTE_CHARS};
pub use experiment::{ExperimentFile, ExperimentSpec};
pub use grpc_call::GrpcSpec;
pub use headlines::Headlines;
pub use input_file::read_bounded;
pub use instruments::{Instrument, ServerInfo};
pub use interference::stress_cpus;
pub use knob::{merge_axes, Axis, Knob, KNOBS};
pub use load_spec::LoadParseError;
pub use loads::parse_loads;
pub use measure::{check_load, expected_requests, measure};
pub use observer::{Observer, Quiet};
pub use options::SweepOptions;
pub use options_cmd::{check_dir_flag, CalibrateOptions, RunOptions, TuneOptions};
pub use options_model::{BurstyOptions, ModelOptions};
pub use outcome::{verdict_code, Suites, EXIT_FAILED, EXIT_SLO_VIOLATED};
pub use placement::{parse_bytes, MAX_INSTANCES};
pub use repeat::{measure_repeated, Combined, Repeated};
pub use run::{
    judge, lateness_verdict_of, load_run, saturation_of, status_of, store_run, views_of,
    ExperimentStatus, JudgeInput, Judgement, LatenessCause, LatenessVerdict, LoadFacts, Run,
    RunStatus, Saturation, SweepStatus, ViewValidity, Views, RUN_ENCODING_VERSION,
};
pub use run_config::RunConfig;
pub use run_config::{StagesBudget, StagesMode};
pub use run_spec::{
    placeholder_target, probe_noise, resolve_ideal, CheckedRun, IdealAsk, LoadPlan, RunSpec,
};
pub use server_facts::{ContainerFacts, ServerFacts};
pub use simulate::{
    check_not_saturated, simulate, SimResult, CI_BATCH_MEANS, CI_ORDER_STAT, CI_REPLICATIONS,
};
pub use slo::{
    fmt_unit, parse_percentile, parse_percentiles, Bound, Condition, ConditionResult, Slo,
    SloReport, Verdict, View, ViewChoice, What,
};
pub use source::{LoadSource, Loaded, Measured, RunPlan, Sending};
pub use sweep::{
    sweep, Bracket, Load, MaxLoad, Point, Role, Row, RunTemplate, SweepPlan, SweepResult,
};
pub use tail_validity::{PercentileValidity, PERCENTILE_SHARE};
pub use target::{
    own_server_threads, Ready, Scheme, SpawnSpec, TargetPlan, TargetSpec, WorkloadSpec,
};
pub use target_spec::Container;
pub use tune::{check_tunable, tune, TunePlan, TuneResult, TuneStep, TuneStepKind};
