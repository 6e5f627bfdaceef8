//! `model` is the right-hand side of tailscope's data flow: the queueing model that says what
//! latency distribution an ideal server would give for the same arrivals, the same
//! per-request work and the same workers (Tales of the Tail §2, §3.2).
//!
//! - [`units`]: human durations and counts (`50us`, `10M`).
//! - [`arrival`]: arrival processes and trace replay ([`ArrivalGen`]).
//! - [`service`]: service-time distributions ([`ServiceGen`]).
//! - [`sim`]: the discrete-event simulator ([`simulate`]) for A/S/c queues under FIFO, LIFO,
//!   random order, random worker, static partitioning and priorities.
//! - [`collect`]: a [`Sink`] that records simulated latencies in `stats` recorders.
//! - [`analytic`]: closed-form results.
//! - [`query`]: a model query as a person asks it, checked and built into a simulation plan.
//! - [`bursty`]: the LNS bursty tail-latency model (bottleneck decomposition, prioritised and
//!   FCFS servers, parameter fitting) and a tandem-stage simulator to check it.
//!
//! `model` does no I/O: the command line reads files and hands their text to the parsers here.

pub mod analytic;
pub mod arrival;
pub mod bursty;
pub mod collect;
mod error;
mod fasthist;
pub mod query;
pub mod service;
pub mod sim;
pub mod units;
mod variate;

pub use arrival::{
    mean_rate_of_trace, parse_trace, ArrivalGen, ArrivalSpec, TimeUnit, Trace, ETC_GAP_SHAPE,
};
pub use bursty::{
    predict, simulate_tandem, validate_grid, BurstyParams, BurstyWorkload, Prediction, Stack,
    TandemConfig, TandemReport, ValidationGrid, ValidationRow,
};
pub use collect::Collector;
pub use error::ModelError;
pub use fasthist::FastHist;
pub use service::{parse_empirical, ServiceGen, ServiceSpec, MAX_SERVICE_NS};
pub use sim::{
    serve_then_record, simulate, Completion, Discipline, OnlineQueue, Run, SimConfig, SimOutcome,
    Sink, ToServe,
};
pub use units::{format_duration_ns, parse_count, parse_duration_ns, MAX_DURATION_NS};
