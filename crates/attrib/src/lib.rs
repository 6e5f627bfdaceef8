//! Attribution: the "why" at the end of the data flow (DESIGN.md, host probe + noise probe ─►
//! attribution). While a run lasts, a [`Probe`] records per-interval deltas of the counters
//! behind the known sources of tail latency (Tales of the Tail §4): the server threads' run-queue
//! wait and context switches, interrupts and softirqs on the server's CPUs, steal time, and CPU
//! time of other tasks on those CPUs. After the run, [`explain`] lines these series up with the
//! slowest 1 % of requests and with the per-stage breakdown of the analysis, ranks the sources
//! that coincide with slow requests, and attaches each one's mitigation and trade-off
//! ([`mitigation_table`], after Tales of the Tail Table 1).
//!
//! The instrument must not disturb what it measures (DESIGN.md): a sample costs 5–20 µs
//! ([`probe`](crate::Probe) has the figures) and its cost is measured and returned
//! ([`SampleCost`]). It runs either on a thread of its own pinned to a CPU that is neither the
//! server's nor the load generator's ([`Sampler`], which refuses to start when the host has no
//! such CPU: [`spare_cpus`], [`AttribError::NoSpareCpu`]), or inside the load generator's loop
//! in the gaps between sends ([`PacedProbe`]).
//!
//! ```no_run
//! # fn main() -> Result<(), attrib::AttribError> {
//! use attrib::{explain, Sampler, SamplerConfig};
//! let sampler = Sampler::start(SamplerConfig {
//!     server_pids: vec![4242],
//!     cpus: vec![1],       // the server's
//!     avoid_cpus: vec![0], // the load generator's
//!     ..SamplerConfig::default()
//! })?; // on a 2-CPU host: Err(NoSpareCpu), use a PacedProbe in the generator instead
//! // … the run: records hold (run-relative intended send, latency) of the ok requests …
//! # let (start_mono_ns, requests): (u64, Vec<(u64, u64)>) = (0, Vec::new());
//! let out = sampler.stop();
//! eprintln!("sampling cost {:.1} µs per sample on CPUs {:?}", out.cost.mean_ns / 1e3, out.cpus);
//! let why = explain(&out.series, start_mono_ns, &requests, None);
//! for f in &why.sources {
//!     println!("{}: lift {:.1}, p {:.3}: {}", f.source, f.lift, f.p_value, f.mitigation);
//! }
//! # Ok(()) }
//! ```

mod config;
mod explain;
mod paced;
mod probe;
mod procfile;
/// The /proc parsers, shared with the noise probe (they live in `host`).
pub use host::procfs;
mod rows;
mod sampler;
mod schedule;
mod table;
mod taskstats;

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub use config::{mono_now_ns, spare_cpus, SampleCost, SamplerConfig};
pub use explain::{
    explain, explain_mask, SlowMask, SourceFinding, StageFinding, Why, PERMUTATION_SHIFTS,
};
pub use paced::PacedProbe;
pub use probe::{HardIrqCounts, Probe};
pub use sampler::{Sampler, SamplerOutput};
pub use table::mitigation_table;

/// Errors of the sampler.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttribError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: unexpected format")]
    Format { path: PathBuf },
    #[error("no process {pid} under {root} (has it exited?)")]
    NoProcess { pid: u32, root: PathBuf },
    #[error("no thread {tid} in this process under {root}")]
    NoThread { tid: u32, root: PathBuf },
    #[error("CPU {cpu} does not exist on this host (it has CPUs {known:?})")]
    UnknownCpu { cpu: usize, known: Vec<usize> },
    #[error("the sampling interval must be positive")]
    Interval,
    #[error("slow_every must be at least 1 (every sample reads everything)")]
    SlowEvery,
    /// Every CPU is the server's or the load generator's: sample from the generator's loop
    /// ([`PacedProbe`]) instead.
    #[error(
        "no spare CPU for the sampler: host CPUs {host:?}, server {server:?} (empty: any), \
         load generator {avoid:?}; sample from the generator's loop instead"
    )]
    NoSpareCpu {
        host: Vec<usize>,
        server: Vec<usize>,
        avoid: Vec<usize>,
    },
    #[error("cannot pin the sampler thread to CPUs {cpus:?}: {source}")]
    Pin {
        cpus: Vec<usize>,
        #[source]
        source: host::HostError,
    },
    #[error("cannot start the sampler thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// The family a sampled source belongs to; it selects the mitigation. `Concurrency`, `Numa` and
/// `PowerSaving` have no sampled series (they come from the host check and the run's
/// configuration) but are in the table so that all of Table 1 is here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// Other processes on the server's CPUs, and time stolen by the hypervisor.
    Background,
    /// Run-queue wait and involuntary switches of the server's threads (non-FIFO scheduling).
    Scheduling,
    /// Connections statically partitioned among workers (a queue per worker).
    Concurrency,
    Interrupts,
    SoftIrq,
    Numa,
    PowerSaving,
    /// OS and hardware noise as the TSC probe sees it (Where Has My Time Gone?).
    Noise,
}

impl SourceKind {
    /// The name used in JSON (kebab-case).
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::Background => "background",
            SourceKind::Scheduling => "scheduling",
            SourceKind::Concurrency => "concurrency",
            SourceKind::Interrupts => "interrupts",
            SourceKind::SoftIrq => "soft-irq",
            SourceKind::Numa => "numa",
            SourceKind::PowerSaving => "power-saving",
            SourceKind::Noise => "noise",
        }
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One sampled source: its per-interval deltas.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourceSeries {
    pub name: String,
    pub kind: SourceKind,
    /// Unit of the deltas ("ns", "count").
    pub unit: String,
    /// `deltas[i]` is the growth of the counter over interval i.
    pub deltas: Vec<f64>,
}

/// Everything a sampler recorded. `t_mono_ns` holds the sample instants on CLOCK_MONOTONIC
/// (absolute, not run-relative), one more than there are intervals: interval i runs from
/// `t_mono_ns[i]` to `t_mono_ns[i + 1]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Series {
    pub t_mono_ns: Vec<u64>,
    pub sources: Vec<SourceSeries>,
    /// CPU time of the server's threads per interval, ns (context for the sources: how busy
    /// the server itself was).
    pub server_cpu_ns: Vec<f64>,
}

impl Series {
    /// Number of intervals.
    pub fn intervals(&self) -> usize {
        self.t_mono_ns.len().saturating_sub(1)
    }

    /// The series of the source with this name.
    pub fn source(&self, name: &str) -> Option<&SourceSeries> {
        self.sources.iter().find(|s| s.name == name)
    }
}
