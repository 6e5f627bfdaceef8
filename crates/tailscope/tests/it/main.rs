//! The integration tests of `tailscope`, one module per former test binary, linked once
//! (each test binary is a link of the whole dependency graph: issue 36, CI time).

mod ab_cli;
mod ab_report_cli;
mod agents_cli;
mod agents_netns;
mod agents_support;
mod browser;
mod bursty_cli;
mod check_cli;
mod ci_doc;
mod colocate_cli;
mod common;
mod experiments_cli;
mod grpc_cli;
mod host_cli;
mod install_cli;
mod isolation_cli;
mod model_cli;
mod noise_ebpf_cli;
mod openmetrics_cli;
mod report_cli;
mod reproduce_cli;
mod run_cli;
mod runs_cli;
mod schema_cli;
mod server_knobs_cli;
mod slo_cli;
mod stages_cli;
mod support;
mod sweep_cli;
mod targets_cli;
mod tls_cli;
mod tune_cli;
mod usage_cli;
mod verdict_cli;
