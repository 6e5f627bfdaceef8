//! `sweep --dry-run`: what a checked sweep would do, without starting or writing anything.

use serde::Serialize;

use crate::sweep::{Load, SweepPlan};
use measurement::LabError;

/// One axis of the plan: its knob and values as given.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DryAxis {
    pub name: String,
    pub values: Vec<String>,
}

/// A sweep's plan as `--dry-run` shows it (and its `--json` object).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DryRun {
    pub dry_run: bool,
    pub target: String,
    pub axes: Vec<DryAxis>,
    /// Each load as people write it: `1000 req/s`, `20%`.
    pub loads: Vec<String>,
    pub repeat: u32,
    pub find_max: bool,
    /// Server and load configurations: the product of the axes.
    pub configurations: usize,
    /// Runs of the grid (configurations × loads × repeats; a max-load search adds its own).
    pub grid_runs: usize,
    /// Whether each server configuration is calibrated first (a load in % or a search).
    pub calibrates: bool,
}

impl SweepPlan {
    /// What this plan would do.
    pub fn dry_run(&self) -> Result<DryRun, LabError> {
        Ok(DryRun {
            dry_run: true,
            target: self.template.target.url.clone(),
            axes: self
                .axes
                .iter()
                .map(|a| DryAxis {
                    name: a.name.clone(),
                    values: a.values.clone(),
                })
                .collect(),
            loads: self
                .loads
                .iter()
                .map(|l| match *l {
                    Load::Rps(r) => format!("{r} req/s"),
                    Load::OfCapacity(f) => format!("{}%", f * 100.0),
                })
                .collect(),
            repeat: self.repeat,
            find_max: self.find_max,
            configurations: self.configurations()?,
            grid_runs: self.grid_points()?,
            calibrates: self.find_max
                || self.loads.iter().any(|l| matches!(l, Load::OfCapacity(_))),
        })
    }
}
