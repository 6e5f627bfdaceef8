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
//! - Protocols sit behind one trait, [`Protocol`]: [`NullRpc`] for the built-in server;
//!   memcached (TCP, UDP), HTTP/1.1 and Redis for real targets, built per connection by
//!   [`protocol_factory`] from a [`Workload`] (get/set mix, key/value sizes, popularity).
//!   [`preload`] stores every item of a key-value workload before a run.
//! - `LoadConfig::churn` reproduces the Tales §4.3 HTTP clients: a connection is closed
//!   after a random quota of requests and reopened for the next one.
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use std::time::Duration;
//! use load::{run_open_loop, LoadConfig, NullRpc, Protocol, StopAt, Target};
//!
//! let target: Target = "nullrpc://127.0.0.1:7000".parse()?;
//! let mut cfg = LoadConfig::new(target.clone(), 20_000.0); // Poisson, 20k req/s
//! cfg.stop = StopAt::Duration(Duration::from_secs(10));
//! cfg.connections = 8;
//! cfg.threads = 2;
//! let factory = move || {
//!     Box::new(NullRpc::new(target.transport, 128, true, false)) as Box<dyn Protocol>
//! };
//! let stop = AtomicBool::new(false); // set from a SIGINT handler to end early
//! let run = run_open_loop(&cfg, &factory, &stop, &|done, total| eprintln!("{done}/{total}"))?;
//! let ok: Vec<u64> = run.measured().filter_map(|r| r.latency_ns()).collect();
//! println!("{} ok of {}", ok.len(), run.records.len());
//! # Ok::<(), load::LoadError>(())
//! ```

mod calibrate;
mod config;
mod conn;
mod engine;
mod error;
pub mod etc;
mod preload;
mod protocol;
mod protocols;
mod record;
mod run;
mod schedule;
mod sys;
mod target;
mod tls;
mod workload;

pub use calibrate::{calibrate, Calibration};
pub use config::{LoadConfig, Overdue, StopAt, MAX_RATE};
pub use engine::cost::{GeneratorCost, InjectedPause, STALL_NS};
pub use engine::inject::{PAUSE_ENV, WRITES_ENV};
pub use engine::SlackTask;
pub use error::{LoadError, ProtoError};
pub use preload::{preload, preload_with, PreloadStats};
pub use protocol::{ErrorCode, NullRpc, Protocol, Reply};
pub use protocols::{
    grpc_metadata_ok, protocol_factory, protocol_factory_with, H2Client, HttpGet, MemcachedTcp,
    MemcachedUdp, ProtocolFactory, Redis, MAX_GRPC_MESSAGE, UDP_MAX_REQUEST,
};
pub use record::{BacklogSample, Outcome, RequestRecord, RunRecords, RunSummary, WriterStats};
pub use run::{run_open_loop, run_open_loop_into, RecordSink, VecSink};
pub use tls::{TlsClient, TlsOptions, TlsStats};

/// An independent-looking seed for the `index`-th of several runs sharing one base seed
/// (SplitMix64): repeated runs are independent samples, and one `--seed` fixes them all.
pub fn derive_seed(base: u64, index: u64) -> u64 {
    schedule::mix_seed(base, index)
}
pub use etc::EtcSize;
pub use target::{Target, Transport};
pub use workload::{
    GrpcWorkload, HttpWorkload, KvOp, KvWorkload, NullRpcWorkload, PathGen, Popularity, SizeDist,
    Workload, WorkloadGen,
};
