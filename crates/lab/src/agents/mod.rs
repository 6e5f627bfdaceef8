//! Load from many client hosts: `tailscope agent` processes, each started through the user's
//! own remote execution (a command line per agent: `ssh host1 tailscope agent`, `ip netns exec
//! ns1 tailscope agent`, `kubectl exec -i pod-1 -- tailscope agent`, or `local`: this binary),
//! driven over its stdin and stdout — no daemon, no port.
//!
//! ```text
//! coordinator ── hello, 16 clock pings, start(share i of n, common start) ──► agent i
//!             ◄── per-interval histograms, raw record chunks, progress, done ──
//! ```
//!
//! The coordinator measures each agent's clock offset over that same channel ([`clock`]),
//! announces one start; each agent converts it to its own CLOCK_MONOTONIC and sends its lanes
//! of the one schedule (`load::LoadConfig::share`: Poisson split exactly, other processes
//! dealt), measuring every latency from its own intended times. Their histograms are *added*
//! ([`hist`]); their records are stored as one run, each agent's threads their own chunk
//! streams, so the analysis' merge by intended time sees the whole arrival stream, and the
//! ideal is computed on it. An agent that dies fails the run, naming it, with what arrived
//! kept. [`serve()`] is the agent's side; [`crate::Agents`] is a [`crate::LoadSource`]
//! (in `report`): `measure` takes a plan's load from them and finishes the run as any other.

mod clock;
mod coord;
mod fleet;
mod frame;
mod hist;
mod job;
mod report;
mod serve;

pub use crate::agent_spec::{
    agents_file, AgentClock, AgentCommand, AgentReport, Agents, AgentsReport, MAX_AGENTS,
};
pub use clock::ClockOffset;
pub use serve::serve;
