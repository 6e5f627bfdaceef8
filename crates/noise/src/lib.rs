//! # noise — the OS and hardware noise probe (`tailscope noise`)
//!
//! Place in the data flow: the *noise probe* beside the host probe, feeding attribution
//! ("why") and the `tailscope noise` command. It measures how much of a CPU's time a
//! spinning user thread loses to everything that is not itself — interrupts, softirqs,
//! other tasks, the hypervisor — with the TSC gap probe of Where Has My Time Gone?
//! (Zilberman et al., PAM 2017, §4, Listings 1.1 and 1.2).
//!
//! One thread per chosen CPU is pinned there (optionally `SCHED_FIFO`/`RR` or a nice level,
//! optionally with all memory locked), reads the TSC with `rdtscp` in a tight loop and
//! records every gap between reads longer than a threshold, with its start time, into a
//! preallocated buffer. Two loop shapes ([`LoopKind`]): *paired* reads back to back and
//! only their difference counts (misses what happens between iterations); *consecutive*
//! compares each read with the one before (sees everything, including the loop's own cost).
//!
//! Per CPU the [`CpuReport`] gives the minimum loop time, gaps per second, gap percentiles,
//! time lost and its fraction, the CCDF of aggregated time lost (the paper's Fig 8), a
//! signal-to-noise ratio ([`SNR_DEFINITION`]), gap counts per Good/Bad/Ugly class, and the
//! kernel counters that moved on that CPU during the run (interrupts, softirqs, steal,
//! the probe thread's context switches), each classed Good/Bad/Ugly ([`attribution`]) by
//! its nominal cost. Where the host allows eBPF ([`Contributors`]), each contributor's
//! events are also timed on the probed CPUs and classed by their measured p99.9, as the
//! paper classes contributors ([`measured`]).
//! With a realtime policy and RT throttling on, the ~50 ms throttle stalls are recognised
//! and kept out of the noise figures ([`throttle`]).
//!
//! Linux only; the TSC on x86_64 ([`tsc_ns_per_tick`]), `CLOCK_MONOTONIC` elsewhere.

pub mod attribution;
mod clock;
mod counters;
mod error;
pub mod measured;
mod probe;
mod quick;
mod report;
mod run;
pub mod throttle;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

pub use attribution::{Contributor, GoodBadUgly};
pub use clock::{clock_kind, read_ticks, tsc_ns_per_tick, ClockKind};
pub use error::NoiseError;
pub use host::placement::SchedSpec;
pub use measured::{Contributors, MeasuredContributor};
pub use quick::{probe_host, CpuNoise, HostNoise, QUICK_PROBE};
pub use report::{
    loop_p999, lost_ccdf, paper_snr, snr, ClassShare, CpuReport, Gap, LoopP999, PaperSnr,
    PAPER_SNR_DEFINITION, SNR_DEFINITION,
};
pub use run::run;

/// The shape of the measuring loop (Where Has My Time Gone?, Listings 1.1 and 1.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum LoopKind {
    /// Two reads per iteration; a gap is `t2 − t1`. Only the instant between the two reads
    /// is observed, so events between iterations are missed (Listing 1.1).
    Paired,
    /// One read per iteration; a gap is the time since the previous read, so nothing is
    /// missed but the loop's own cost is included (Listing 1.2).
    #[default]
    Consecutive,
}

/// What to probe and how.
#[derive(Clone, Debug)]
pub struct NoiseConfig {
    /// CPUs to probe, one pinned thread each; ids must be below the online CPU count.
    pub cpus: Vec<usize>,
    /// How long each thread spins (> 0).
    pub duration: Duration,
    /// A gap is an iteration longer than this, ns (> 0).
    pub threshold_ns: u64,
    /// Which loop.
    pub loop_kind: LoopKind,
    /// Scheduling policy for the probe threads (None: leave as inherited).
    pub sched: Option<SchedSpec>,
    /// Lock all current and future memory (`mlockall`) for the run, so page faults cannot
    /// add gaps; unlocked again afterwards.
    pub mlock: bool,
    /// Root under which `proc/` is read for counters and RT settings ("/" normally).
    pub proc_root: PathBuf,
    /// Gaps listed per CPU at most (the buffer is allocated and touched before the loop);
    /// further gaps are counted only.
    pub max_gaps: usize,
    /// Where the contributors come from (eBPF durations, counters, or eBPF when possible).
    pub contributors: Contributors,
}

impl Default for NoiseConfig {
    /// CPU 0, 5 s, 1 µs threshold, consecutive reads, inherited scheduling, no mlock, `/`,
    /// 2^19 gaps (8 MiB) per CPU, contributors from counters.
    fn default() -> Self {
        NoiseConfig {
            cpus: vec![0],
            duration: Duration::from_secs(5),
            threshold_ns: 1_000,
            loop_kind: LoopKind::Consecutive,
            sched: None,
            mlock: false,
            proc_root: PathBuf::from("/"),
            max_gaps: 1 << 19,
            contributors: Contributors::Counters,
        }
    }
}

impl NoiseConfig {
    /// Checks the configuration against a host with `online` CPUs; see [`NoiseError`].
    pub fn validate(&self, online: usize) -> Result<(), NoiseError> {
        if self.cpus.is_empty() {
            return Err(NoiseError::NoCpus);
        }
        let mut unknown: Vec<usize> = self.cpus.iter().copied().filter(|&c| c >= online).collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            unknown.dedup();
            return Err(NoiseError::UnknownCpus {
                cpus: unknown,
                online,
            });
        }
        let mut seen = self.cpus.clone();
        seen.sort_unstable();
        if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
            return Err(NoiseError::DuplicateCpu(w[0]));
        }
        if self.duration.is_zero() {
            return Err(NoiseError::ZeroDuration);
        }
        if self.threshold_ns == 0 {
            return Err(NoiseError::ZeroThreshold);
        }
        if self.max_gaps == 0 {
            return Err(NoiseError::ZeroGapBuffer);
        }
        if !self.proc_root.join("proc").is_dir() {
            return Err(NoiseError::NoProc {
                root: self.proc_root.display().to_string(),
            });
        }
        Ok(())
    }
}
