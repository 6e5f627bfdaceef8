//! # agents — load from many client hosts
//!
//! `tailscope agent` processes, each started through the user's own remote execution (a
//! command line per agent: `ssh host1 tailscope agent`, `ip netns exec ns1 tailscope agent`,
//! `kubectl exec -i pod-1 -- tailscope agent`, or `local`: this binary), driven over its stdin
//! and stdout — no daemon, no port.
//!
//! ```text
//! coordinator ── hello, 16 clock pings, start(share i of n, common start) ──► agent i
//!             ◄── per-interval histograms, raw record chunks, progress, done ──
//! ```
//!
//! The coordinator ([`run`]) measures each agent's clock offset over that same channel
//! ([`ClockOffset`]), announces one start; each agent ([`serve`]) converts it to its own
//! CLOCK_MONOTONIC and sends its lanes of the one schedule (`load::LoadConfig::share`: Poisson
//! split exactly, other processes dealt), measuring every latency from its own intended
//! times. Their histograms are *added* ([`hist`]); their records go to one [`Sink`] (a stored
//! run, each agent's threads their own chunk streams, so that the analysis' merge by intended
//! time sees the whole arrival stream). An agent that dies is reported failed, named, with
//! what arrived kept.
//!
//! This crate is the transport and the coordinator only: it knows the load engine (`load`)
//! and the store's chunks (`store`), not experiments. `lab` turns agents into a load source
//! of a run (`lab::Agents`, its `LoadSource`), and finishes their run as any other.

mod clock;
pub mod columns;
mod coord;
mod error;
mod fleet;
mod frame;
pub mod hist;
mod job;
mod serve;

use std::time::Duration;

use serde::Serialize;

pub use clock::ClockOffset;
pub use coord::{run, AgentState, Collected, Sink};
pub use error::AgentError;
pub use job::{Done, Hello, JobTls, Sent};
pub use serve::serve;

/// One agent to start: how the run names it and the program and arguments it runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Launch {
    pub label: String,
    pub argv: Vec<String>,
}

/// The agents of one run, as the coordinator drives them.
#[derive(Clone, Debug)]
pub struct Plan {
    pub launch: Vec<Launch>,
    /// Stream every request's record; off: histograms only.
    pub records: bool,
    /// Time from the start announcement to the common start: every agent opens its
    /// connections in it. When every agent runs on the coordinator's machine the start
    /// takes at most [`LOCAL_LEAD`].
    pub lead: Duration,
    /// A TLS target's client options, sent with every job (None without TLS).
    pub tls: Option<job::JobTls>,
}

/// The lead when every agent runs on the coordinator's machine (same boot id): the start
/// message crosses a pipe and the connections are local, so a generator is ready within a
/// few ms; 250 ms leaves room for this VM's worst stalls (~17 ms) many times over. A
/// generator that is not ready by the start fails the run and says to give more lead.
pub const LOCAL_LEAD: Duration = Duration::from_millis(250);

/// What the coordinator tells the person watching while the agents run.
pub trait Progress {
    /// A one-line message.
    fn note(&self, msg: &str);
    /// Requests done of the run's total so far (phase `run`).
    fn progress(&self, phase: &str, done: u64, total: u64);
}
