//! The crate's error type.

use thiserror::Error;

/// What can stop a noise probe from starting or finishing.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum NoiseError {
    /// No CPU was chosen.
    #[error("no CPUs chosen for the noise probe")]
    NoCpus,
    /// CPU ids at or above the number of online CPUs.
    #[error("unknown CPU id(s) {cpus:?}: this host has {online} online CPUs (0..{online})")]
    UnknownCpus {
        /// The offending ids, sorted.
        cpus: Vec<usize>,
        /// Number of online CPUs.
        online: usize,
    },
    /// The same CPU listed twice (two probes on one CPU would measure each other).
    #[error("CPU {0} listed more than once")]
    DuplicateCpu(usize),
    /// A duration of zero.
    #[error("the probe duration must be greater than zero")]
    ZeroDuration,
    /// A gap threshold of zero (every loop iteration would be a gap).
    #[error("the gap threshold must be greater than zero nanoseconds")]
    ZeroThreshold,
    /// A gap buffer of zero entries.
    #[error("the gap buffer must hold at least one gap")]
    ZeroGapBuffer,
    /// `proc_root` has no `proc` directory to read counters from.
    #[error("{root}: no proc directory under this root (expected {root}/proc)")]
    NoProc {
        /// The configured root.
        root: String,
    },
    /// Pinning or scheduling a probe thread failed.
    #[error("probe thread for CPU {cpu}: {source}")]
    Placement {
        /// The probe's CPU.
        cpu: usize,
        /// What the host crate reported.
        source: host::HostError,
    },
    /// `mlockall` failed.
    #[error("mlockall failed: {0} (needs root, CAP_IPC_LOCK or a higher RLIMIT_MEMLOCK)")]
    Mlock(std::io::Error),
    /// `--contributors ebpf` asked for, and the host cannot time contributors with eBPF.
    #[error("contributors from eBPF: {0} (use --contributors counters or auto)")]
    Contributors(String),
    /// A probe thread could not be started or panicked.
    #[error("probe thread for CPU {cpu} failed: {reason}")]
    Thread {
        /// The probe's CPU.
        cpu: usize,
        /// What happened.
        reason: String,
    },
}
