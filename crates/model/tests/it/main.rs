//! The integration tests of `model`, one module per former test binary, linked once
//! (each test binary is a link of the whole dependency graph: issue 36, CI time).

mod analytic_forms;
mod analytic_md1;
mod analytic_mdc;
mod analytic_mm;
mod arrival_scv;
mod bursty_arrival;
mod bursty_fit;
mod bursty_formulas;
mod bursty_improve;
mod bursty_tandem;
mod bursty_validate;
mod collect_batches;
mod sim_config;
mod sim_disciplines;
mod sim_theory;
