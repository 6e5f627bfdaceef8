//! What a probe samples and where a sampler may run ([`SamplerConfig`]), what sampling cost
//! ([`SampleCost`]), and the clocks.

use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// What to sample, and where the sampler may run.
#[derive(Clone, Debug, Serialize)]
pub struct SamplerConfig {
    /// Where /proc is mounted (tests point this at a fixture tree).
    pub proc_root: PathBuf,
    /// Server processes: all their threads are sampled (threads that appear later too, from
    /// the next re-listing of their task directories on).
    pub server_pids: Vec<u32>,
    /// Threads of this very process (an in-process server), read under `proc_root/self/task`.
    pub server_tids: Vec<u32>,
    /// The server's CPUs; empty means the server may run on every CPU.
    pub cpus: Vec<usize>,
    /// The load generator's CPUs on this host: a [`Sampler`](crate::Sampler) thread never runs
    /// there. Empty when the generator runs elsewhere (another host).
    pub avoid_cpus: Vec<usize>,
    pub interval: Duration,
    /// The cycle of the slow reads: once every this many samples, /proc/stat, /proc/interrupts
    /// and each thread's context switches are read and new server threads looked for, each
    /// in its own sample of the cycle (see [`Probe`] for the costs, the schedule and how these
    /// counters' deltas are spread). 1 makes every sample read everything.
    ///
    /// [`Probe`]: crate::Probe
    pub slow_every: u32,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            proc_root: PathBuf::from("/proc"),
            server_pids: Vec::new(),
            server_tids: Vec::new(),
            cpus: Vec::new(),
            avoid_cpus: Vec::new(),
            interval: Duration::from_millis(10),
            slow_every: 10,
        }
    }
}

/// What sampling cost, measured around each call (this is what the load generator's slack
/// must cover in the in-loop mode, and what a run records about its instrument).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SampleCost {
    /// Samples that closed an interval (the baseline sample, taken before the run, is
    /// not counted).
    pub samples: u64,
    /// Whole intervals that passed without a sample: the sampler thread woke late, or the
    /// load generator had no slack for one.
    pub skipped: u64,
    pub mean_ns: f64,
    pub max_ns: u64,
    /// Where the hard interrupts came from: "/proc/interrupts", an injected per-CPU source's
    /// name ("ebpf"; see [`HardIrqCounts`](crate::HardIrqCounts)), or "" (neither).
    pub hard_irq_source: &'static str,
    /// What that source's counting cost outside the samples (the kernel's runs of its
    /// programs on every interrupt, and their ns), when it measures it.
    pub hard_irq_counting: Option<(u64, u64)>,
}

/// CLOCK_MONOTONIC now, ns: the clock the run's records are relative to.
pub fn mono_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer we pass; CLOCK_MONOTONIC
    // always exists on Linux. std's Instant does not expose its raw value, hence libc.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub(crate) fn clock_tick_ns() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        1e9 / hz as f64
    } else {
        1e7
    }
}

/// The CPUs an instrument may run on: the host's, minus the server's and minus those to avoid
/// (the load generator's). Sorted, without duplicates.
///
/// An empty `server_cpus` means the server is not pinned and may run on any CPU, so no CPU is
/// spare: an unpinned server migrates onto whatever CPU the instrument is busy on, and the
/// instrument would then be one more background task in the measurement. An empty
/// `avoid_cpus` means there is nothing else to avoid (the generator runs on another host).
pub fn spare_cpus(host_cpus: &[usize], server_cpus: &[usize], avoid_cpus: &[usize]) -> Vec<usize> {
    if server_cpus.is_empty() {
        return Vec::new();
    }
    let mut spare: Vec<usize> = host_cpus
        .iter()
        .copied()
        .filter(|c| !server_cpus.contains(c) && !avoid_cpus.contains(c))
        .collect();
    spare.sort_unstable();
    spare.dedup();
    spare
}
