//! # lab — tailscope's experiments
//!
//! The layer between the domain crates and the CLI (DESIGN.md): everything a measurement
//! needs beside the load itself. A [`TargetPlan`] says what is measured and starts it; the
//! ideal's service time comes from the user, the store or a calibration now
//! ([`calibrate`]); [`measure`] runs one open-loop measurement — the instruments beside it,
//! the records streamed to the store, the analysis over them, the "why" — and returns one
//! [`Run`], the type every printer, export and the store consume. A sweep, a search for the
//! highest load meeting an SLO, a tuning walk are loops over [`measure`].
//!
//! ```text
//! TargetPlan ─start─► Ready ─┐
//! IdealSpec (given/stored/calibrated) ─► RunPlan ─measure─► Run ─► store, report, CLI
//! ```

mod error;
mod observer;
pub mod records;
mod target;

pub use error::LabError;
pub use observer::{Observer, Quiet};
pub use target::{
    own_server_threads, Ready, Scheme, SpawnSpec, TargetPlan, TargetSpec, WorkloadSpec,
};
