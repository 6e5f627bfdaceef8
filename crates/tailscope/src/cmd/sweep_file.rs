//! `sweep FILE.toml [OPTIONS]`: the command line parsed by clap, the experiment file's
//! options laid under it (`lab::SweepOptions::overlay`, which asks clap which options the
//! command line gave); the file's axes are merged when the sweep is planned.

use std::ffi::OsString;
use std::path::Path;

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches};
use lab::ExperimentFile;

use crate::cli::{Cli, SweepArgs};
use crate::exit::usage;

/// A sweep's options from an experiment file and a command line (`argv`, the whole of it:
/// `tailscope sweep FILE.toml …`): what the command line gives wins, the file gives the
/// rest, clap's defaults the others. Returns the options and the file's axes.
pub fn from_command_line(
    argv: impl IntoIterator<Item = OsString>,
) -> anyhow::Result<(SweepArgs, Vec<lab::Axis>)> {
    let m = Cli::command()
        .try_get_matches_from(argv)
        .map_err(|e| usage(first_line(&e.to_string())))?;
    let Some(("sweep", m)) = m.subcommand() else {
        return Err(usage("not a sweep command line"));
    };
    let mut a = SweepArgs::from_arg_matches(m).map_err(|e| usage(first_line(&e.to_string())))?;
    let file = ExperimentFile::read(Path::new(&a.target))?;
    let given = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    a.target = file.target.clone();
    a.opts.overlay(&file, &given)?;
    Ok((a, file.axes))
}

/// A sweep's options from an experiment file alone (the command line gave none of them).
pub fn from_file(path: &str) -> anyhow::Result<(SweepArgs, Vec<lab::Axis>)> {
    let file = ExperimentFile::read(Path::new(path))?;
    let m = SweepArgs::augment_args(clap::Command::new("sweep"))
        .try_get_matches_from(["sweep", path])
        .map_err(|e| usage(first_line(&e.to_string())))?;
    let mut a = SweepArgs::from_arg_matches(&m).map_err(|e| usage(first_line(&e.to_string())))?;
    a.target = file.target.clone();
    a.opts.overlay(&file, &|_| false)?;
    Ok((a, file.axes))
}

fn first_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or("bad options").trim();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}
