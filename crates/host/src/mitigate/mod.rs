//! Reversible mitigations for `tailscope doctor --apply`: the safe subset of what the checks
//! of [`crate::probe`] recommend (hold `/dev/cpu_dma_latency` at 0, governor to
//! `performance`, NIC IRQs away from the server CPUs, NUMA balancing and timer migration off).
//!
//! Every change is written to a [`Journal`] *before* the file is touched, with its old value,
//! so [`Applied::revert`] (also run on drop) restores it and [`revert_leftovers`] undoes the
//! changes of a process that died before it could. Dry run is the caller's default.
//! Settings that need a reboot (isolcpus) or whose read-back syntax differs from what is
//! written (THP's `always [madvise] never`) are recommended by the checks but not applied.

mod apply;
pub(crate) mod journal;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::probe::{format_cpu_list, nic_irqs, online_cpus, Check, DoctorConfig, Status};

pub(crate) use apply::{alive, now_ms, start_ticks};
pub use apply::{revert_leftovers, Applied, Change};
pub use journal::{Entry, EntryKind, Journal};

/// One reversible change to the host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Mitigation {
    /// Hold `/dev/cpu_dma_latency` open with 0 while the [`Applied`] lives: cpuidle keeps
    /// every CPU in states with zero exit latency (the kernel drops the request on close).
    CpuDmaLatencyZero,
    /// Set `scaling_governor` of `cpus` (empty: all online CPUs) to `to`.
    Governor { cpus: Vec<usize>, to: String },
    /// Rewrite `smp_affinity_list` of `irqs` to the online CPUs outside `from_cpus`.
    IrqAffinityAway {
        irqs: Vec<u32>,
        from_cpus: Vec<usize>,
    },
    /// `/proc/sys/kernel/numa_balancing` = 0.
    NumaBalancingOff,
    /// `/proc/sys/kernel/timer_migration` = 0.
    TimerMigrationOff,
}

impl fmt::Display for Mitigation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mitigation::CpuDmaLatencyZero => write!(f, "hold /dev/cpu_dma_latency at 0"),
            Mitigation::Governor { cpus, to } if cpus.is_empty() => {
                write!(f, "governor of all CPUs to {to}")
            }
            Mitigation::Governor { cpus, to } => {
                write!(f, "governor of CPUs {} to {to}", format_cpu_list(cpus))
            }
            Mitigation::IrqAffinityAway { irqs, from_cpus } => write!(
                f,
                "IRQs {irqs:?} away from CPUs {}",
                format_cpu_list(from_cpus)
            ),
            Mitigation::NumaBalancingOff => write!(f, "numa_balancing to 0"),
            Mitigation::TimerMigrationOff => write!(f, "timer_migration to 0"),
        }
    }
}

/// What `--apply` would do for these check results: one mitigation per check that is
/// `warn` or `bad` and has a safe, reversible fix. IRQs are moved only when the server CPUs
/// were named and leave at least one CPU for them.
pub fn plan(checks: &[Check], cfg: &DoctorConfig) -> Vec<Mitigation> {
    let flagged = |id: &str| {
        checks
            .iter()
            .any(|c| c.id == id && matches!(c.status, Status::Warn | Status::Bad))
    };
    let mut out = Vec::new();
    if flagged("cpuidle") {
        out.push(Mitigation::CpuDmaLatencyZero);
    }
    if flagged("cpu_governor") {
        out.push(Mitigation::Governor {
            cpus: cfg.cpus.clone(),
            to: "performance".to_string(),
        });
    }
    if flagged("irq_affinity") && !cfg.cpus.is_empty() {
        let online = online_cpus(&cfg.root).unwrap_or_default();
        let spare = online.iter().any(|c| !cfg.cpus.contains(c));
        let irqs: Vec<u32> = nic_irqs(&cfg.root)
            .unwrap_or_default()
            .iter()
            .filter(|q| {
                cfg.root
                    .read(format!("proc/irq/{}/smp_affinity_list", q.irq))
                    .ok()
                    .and_then(|s| crate::probe::parse_cpu_list_lenient(&s))
                    .is_some_and(|a| a.iter().any(|c| cfg.cpus.contains(c)))
            })
            .map(|q| q.irq)
            .collect();
        if spare && !irqs.is_empty() {
            out.push(Mitigation::IrqAffinityAway {
                irqs,
                from_cpus: cfg.cpus.clone(),
            });
        }
    }
    if flagged("numa_balancing") {
        out.push(Mitigation::NumaBalancingOff);
    }
    if flagged("timer_migration") {
        out.push(Mitigation::TimerMigrationOff);
    }
    out
}
