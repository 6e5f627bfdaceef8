//! # lab — what the user asks of tailscope's experiments
//!
//! The measuring commands' options as clap structs the CLI flattens ([`options`]: `run`,
//! `sweep`, `tune`, `calibrate`, `colocate`, `ab`, `model`), their one conversion into the
//! plans of the crates below (`options_plan`), and experiment files laid under them
//! ([`ExperimentSpec`]). Everything `measurement` (one measurement, plan → [`Run`]) and
//! `experiments` (loops and verdicts over measurements) make public is reachable here under
//! its old `lab::` name, so the CLI and `report` read one crate.
//!
//! ```text
//! lab (options, experiment files) ─► experiments (sweep, repeat, tune, colocate, ab, check, slo)
//!                                   ─► measurement (target, load source, measure → Run)
//! ```

mod ab_options;
pub mod commands;
pub mod experiment;
pub mod options;
mod options_cmd;
mod options_file;
mod options_model;
mod options_plan;

/// The paired A/B comparisons (`experiments::ab`) with their options.
pub mod ab {
    pub use crate::ab_options::{AbOptions, InterleaveArgs};
    pub use experiments::ab::*;
}

pub use experiments::*;
pub use measurement::*;

pub use experiment::{ExperimentFile, ExperimentSpec};
pub use options::SweepOptions;
pub use options_cmd::{check_dir_flag, CalibrateOptions, RunOptions, TuneOptions};
pub use options_model::{BurstyOptions, ModelOptions};
