//! # experiments — loops and verdicts over measurements
//!
//! Every experiment is a loop over [`measurement::measure`], each point an ordinary stored
//! run, the loop stored as an experiment that groups them: a [`sweep()`] over loads and knobs
//! (with the search for the highest load that meets an SLO), [`measure_repeated`] repeats,
//! the [`tune()`] walk, [`colocate()`], the paired A/B comparisons ([`ab`]), the demo. The
//! verdicts read intervals: an SLO's ([`slo`]), a regression check against a baseline
//! ([`check`]), the exit codes they map to ([`verdict_code`]). Views of stored results
//! ([`summary`]) and the ideal alone ([`simulate()`], [`model_query`], [`bursty`]) are here
//! too.
//!
//! The options that ask for these loops, and experiment files, are `lab`'s.

// `experiments::…` paths inside the crate too: the simulated comparison of
// examples/ab_coverage is also compiled into the unit tests.
extern crate self as experiments;

pub mod ab;
pub mod bursty;
pub mod check;
mod colocate;
pub mod demo;
pub mod doctor;
mod dry_run;
mod experiment_config;
pub mod figures;
mod headlines;
mod knob;
pub mod model_query;
mod outcome;
pub mod repeat;
mod simulate;
pub mod slo;
pub mod summary;
mod sweep;
mod tune;

pub use colocate::{colocate, Cell, Colocation};
pub use colocate::{ColocateConfig, ColocateSide};
pub use dry_run::{DryAxis, DryRun};
pub use experiment_config::ExperimentConfig;
pub use headlines::Headlines;
pub use knob::{merge_axes, Axis, Knob, KNOBS};
pub use outcome::{verdict_code, Suites, EXIT_FAILED, EXIT_SLO_VIOLATED};
pub use repeat::RepeatConfig;
pub use repeat::{measure_repeated, Combined, Repeated};
pub use simulate::{
    check_not_saturated, simulate, SimResult, CI_BATCH_MEANS, CI_ORDER_STAT, CI_REPLICATIONS,
};
pub use slo::{
    fmt_unit, parse_percentile, parse_percentiles, Bound, Condition, ConditionResult, Slo,
    SloReport, Verdict, View, ViewChoice, What,
};
pub use sweep::SweepConfig;
pub use sweep::{sweep, Bracket, Load, MaxLoad, Point, Role, Row, SweepPlan, SweepResult};
pub use tune::TuneConfig;
pub use tune::{check_tunable, tune, TunePlan, TuneResult, TuneStep, TuneStepKind};
