//! One module per subcommand; `dispatch` routes the parsed command line.

mod ab;
mod agent;
mod bursty;
mod calibrate;
mod check;
mod colocate;
mod common;
mod compare;
mod demo;
mod doctor;
mod figure;
mod install;
mod model;
mod noise;
mod progress;
mod report;
mod run;
mod runs;
mod serve;
mod stress;
mod sweep;
mod sweep_file;
mod tune;

use crate::cli::{Cli, Command, ModelSub};

/// Runs the command; returns the process exit code for a completed command.
pub fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Model(m) => match m.sub {
            Some(ModelSub::Figure(f)) => figure::run(&f),
            Some(ModelSub::Bursty(b)) => bursty::run(&b),
            None => model::run(&m.args),
        },
        Command::Serve(a) => serve::run(&a),
        Command::Run(a) => run::run(&a),
        Command::Calibrate(a) => calibrate::run(&a),
        Command::Demo(a) => demo::run(&a),
        Command::Sweep(a) => sweep::run(&a),
        Command::Tune(a) => tune::run(&a),
        Command::Colocate(a) => colocate::run(&a),
        Command::Runs(c) => runs::run(&c),
        Command::Report(a) => report::run(&a),
        Command::Check(a) => check::run(&a),
        Command::Ab(a) => ab::run(&a),
        Command::Doctor(a) => doctor::run(&a),
        Command::Noise(a) => noise::run(&a),
        Command::Stress(a) => stress::run(&a),
        Command::Agent(_) => agent::run(),
        Command::Completions(a) => install::completions(&a),
        Command::Man(a) => install::man(&a),
    }
}
