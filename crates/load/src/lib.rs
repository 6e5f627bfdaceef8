//! # load — the open-loop load generator engine
//!
//! In tailscope's data flow this crate is the *load generator*: it turns a workload spec
//! (arrival process, rate, request classes) into a schedule, sends every request at its
//! intended time over real sockets, and hands back one [`RequestRecord`] per request
//! (intended, sent and received times, kernel receive stamp, server stage stamps,
//! outcome). Analysis, the queueing model and the store consume those records.
//!
//! Decisions (see DESIGN.md, "Timing precision"):
//! - Own threads, non-blocking sockets and epoll — no async runtime. Each generator
//!   thread owns a subset of the connections and its slice of the schedule.
//! - Intended times come from the schedule, never from "now"; latency counts from the
//!   intended time, so a generator that falls behind shows up as lateness, not as a
//!   shorter latency (no coordinated omission).
//! - Protocols sit behind one trait, [`Protocol`]; [`NullRpc`] is the first.

mod calibrate;
mod config;
mod conn;
mod engine;
mod error;
mod protocol;
mod record;
mod run;
mod schedule;
mod sys;
mod target;

pub use calibrate::{calibrate, Calibration};
pub use config::{LoadConfig, StopAt};
pub use error::{LoadError, ProtoError};
pub use protocol::{NullRpc, Protocol, Reply};
pub use record::{Outcome, RequestRecord, RunRecords};
pub use run::run_open_loop;
pub use target::{Target, Transport};
