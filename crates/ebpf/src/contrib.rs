//! [`ContribTimer`]: how long each contributor to a CPU's lost time took, on the CPUs the
//! noise probe spins on (`tailscope noise --contributors ebpf`).
//!
//! Where Has My Time Gone? (§5.1) classes latency contributors by the 99.9th percentile of
//! their durations. `/proc/interrupts`, `/proc/softirqs` and context switch counts say how
//! often a source fired, not for how long; these programs time each event on raw
//! tracepoints and keep one duration histogram ([`crate::hist`]) per (CPU, contributor):
//!
//! | contributor ([`Kind`]) | from → to | id |
//! |---|---|---|
//! | hard IRQ handler | `irq:irq_handler_entry` → `irq_handler_exit` | the IRQ number |
//! | softirq | `irq:softirq_entry` → `softirq_exit` | the vector (`TIMER`, `NET_RX`, `RCU`, …) |
//! | x86 system vector | `irq_vectors:NAME_entry` → `NAME_exit` (local timer, IPIs, IRQ work, …; those the kernel has) | [`VECTORS`] |
//! | probe thread off its CPU | `sched:sched_switch` away from a probe thread → back to it | 0: it was preempted (another task ran), 1: it blocked or yielded |
//!
//! A duration is the span between the two tracepoints: the interrupt's entry and exit code
//! around the handler, and nested events (a hard IRQ inside a softirq) are not split out,
//! so shares of lost time can overlap. Programs on other CPUs return at once; events that
//! began before the programs were attached are not counted.
//!
//! Memory is fixed: a hash map of at most [`MAX_HISTS`] histograms of 2.4 KiB each, updated
//! in place; nothing is read until [`ContribTimer::finish`]. An event that finds the map
//! full is counted ([`ContribTotals::no_slot`]).

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags};

use crate::collector::{
    attach_loaded, enable_stats, kernel_cost, load_error, open_object, percpu_sum, update_map,
    KernelCost,
};
use crate::hist::Histogram;
use crate::EbpfError;

/// Histograms the map holds at most (`MAX_HISTS` in the program).
pub const MAX_HISTS: usize = 1024;
/// CPU ids the program can be told about (`MAX_CPUS`).
pub const MAX_CPUS: usize = 4096;

/// The x86 system vectors timed (id, tracepoint name stem in `irq_vectors:`), as numbered
/// in `bpf/contrib.bpf.c`.
pub const VECTORS: [(u16, &str); 11] = [
    (1, "local_timer"),
    (2, "reschedule"),
    (3, "call_function"),
    (4, "call_function_single"),
    (5, "irq_work"),
    (6, "x86_platform_ipi"),
    (7, "thermal_apic"),
    (8, "threshold_apic"),
    (9, "deferred_error_apic"),
    (10, "error_apic"),
    (11, "spurious_apic"),
];

/// The kernel's softirq vectors, in `enum { HI_SOFTIRQ, … }` order (the order of
/// `/proc/softirqs`).
pub const SOFTIRQS: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// What kind of event a contributor's durations are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Kind {
    HardIrq,
    Softirq,
    Vector,
    OffCpu,
}

impl Kind {
    fn from_raw(k: u16) -> Option<Kind> {
        Some(match k {
            1 => Kind::HardIrq,
            2 => Kind::Softirq,
            3 => Kind::Vector,
            4 => Kind::OffCpu,
            _ => return None,
        })
    }

    /// Short lower-case name (`hardirq`, `softirq`, `vector`, `offcpu`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::HardIrq => "hardirq",
            Kind::Softirq => "softirq",
            Kind::Vector => "vector",
            Kind::OffCpu => "offcpu",
        }
    }
}

/// A readable name for contributor `(kind, id)`: `softirq TIMER`, `local_timer`,
/// `another task (probe preempted)`; a hard IRQ is `IRQ n` (the caller knows its device
/// from `/proc/interrupts`).
pub fn contributor_name(kind: Kind, id: u16) -> String {
    match kind {
        Kind::HardIrq => format!("IRQ {id}"),
        Kind::Softirq => match SOFTIRQS.get(usize::from(id)) {
            Some(n) => format!("softirq {n}"),
            None => format!("softirq {id}"),
        },
        Kind::Vector => match VECTORS.iter().find(|(v, _)| *v == id) {
            Some((_, n)) => format!("vector {n}"),
            None => format!("vector {id}"),
        },
        Kind::OffCpu if id == 0 => "another task (probe preempted)".into(),
        Kind::OffCpu => "probe off CPU (blocked or yielded)".into(),
    }
}

/// One contributor's durations on one CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Measured {
    pub cpu: u32,
    pub kind: Kind,
    pub id: u16,
    pub hist: Histogram,
}

/// Which CPUs to time, and how to know the probe threads.
#[derive(Clone, Debug, Default)]
pub struct ContribConfig {
    pub cpus: Vec<usize>,
    /// The probe threads' process.
    pub tgid: u32,
    /// The probe threads' name prefix (1 to 16 bytes).
    pub thread_prefix: String,
}

/// What the programs did and cost, besides the histograms.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ContribTotals {
    /// Durations recorded.
    pub recorded: u64,
    /// Durations lost because the map was full.
    pub no_slot: u64,
    /// Programs attached.
    pub programs: usize,
    /// `irq_vectors:*` pairs this kernel lacks (left out).
    pub vectors_missing: Vec<String>,
    /// The programs' own runs and time in the kernel (all CPUs).
    pub cost: KernelCost,
    /// How long the programs were attached, ns.
    pub attached_ns: u64,
}

/// The loaded and attached programs; detached when dropped.
pub struct ContribTimer {
    links: Vec<libbpf_rs::Link>,
    obj: libbpf_rs::Object,
    stats: Option<OwnedFd>,
    started: Instant,
    vectors_missing: Vec<String>,
}

/// The program's `struct config`: `{ u32 tgid; u32 prefix_len; char prefix[16]; }`.
fn config_value(cfg: &ContribConfig) -> Result<Vec<u8>, EbpfError> {
    let p = cfg.thread_prefix.as_bytes();
    if p.is_empty() || p.len() > 16 {
        return Err(EbpfError::Config(
            "the probe threads' name prefix must be 1 to 16 bytes".into(),
        ));
    }
    let mut v = Vec::with_capacity(24);
    v.extend_from_slice(&cfg.tgid.to_ne_bytes());
    v.extend_from_slice(&(p.len() as u32).to_ne_bytes());
    let mut prefix = [0u8; 16];
    prefix[..p.len()].copy_from_slice(p);
    v.extend_from_slice(&prefix);
    Ok(v)
}

impl ContribTimer {
    /// Loads the programs, tells them the CPUs and the probe threads, attaches them. Check
    /// [`crate::support::check_contrib`] first for the reason a host cannot.
    pub fn start(cfg: &ContribConfig) -> Result<ContribTimer, EbpfError> {
        if cfg.cpus.is_empty() {
            return Err(EbpfError::Config("no CPU to time contributors on".into()));
        }
        if let Some(c) = cfg.cpus.iter().find(|&&c| c >= MAX_CPUS) {
            return Err(EbpfError::Config(format!(
                "CPU {c} is beyond the {MAX_CPUS} CPUs the programs know"
            )));
        }
        let config = config_value(cfg)?;
        // A vector is timed only where both its entry and exit tracepoints exist.
        let (open, left_out) = open_object(embedded_object!("contrib.bpf.o"), |name| {
            let stem = name
                .strip_prefix("vec_entry_")
                .or_else(|| name.strip_prefix("vec_exit_"));
            stem.is_none_or(|stem| {
                crate::support::has_tracepoint("irq_vectors", &format!("{stem}_entry"))
                    && crate::support::has_tracepoint("irq_vectors", &format!("{stem}_exit"))
            })
        })?;
        let vectors_missing = left_out
            .iter()
            .filter_map(|name| name.strip_prefix("vec_entry_"))
            .map(str::to_string)
            .collect();
        let obj = open
            .load()
            .map_err(|e| load_error("loading the contributor programs", e))?;
        let update = |name: &str, key: &[u8], value: &[u8]| update_map(&obj, name, key, value);
        for &c in &cfg.cpus {
            update("cpus", &(c as u32).to_ne_bytes(), &[1])?;
        }
        update("config", &0u32.to_ne_bytes(), &config)?;
        let stats = enable_stats();
        let links = attach_loaded(&obj, |_| true)?;
        Ok(ContribTimer {
            links,
            obj,
            stats,
            started: Instant::now(),
            vectors_missing,
        })
    }

    /// Detaches the programs and reads every histogram, sorted by CPU, kind and id.
    pub fn finish(mut self) -> Result<(Vec<Measured>, ContribTotals), EbpfError> {
        let attached = self.started.elapsed();
        let cost = kernel_cost(&self.obj, self.stats.is_some());
        let programs = self.links.len();
        // Detach first: nothing changes the maps while they are read.
        self.links.clear();
        let map = self
            .obj
            .maps()
            .find(|m| m.name() == "hists")
            .ok_or_else(|| EbpfError::Load("the BPF object has no map hists".into()))?;
        let mut out = Vec::new();
        for key in map.keys() {
            if key.len() != 8 {
                return Err(EbpfError::Read(format!("a key of {} bytes", key.len())));
            }
            let word = |i: usize| u32::from_ne_bytes([key[i], key[i + 1], key[i + 2], key[i + 3]]);
            let cpu = word(0);
            let kind_raw = u16::from_ne_bytes([key[4], key[5]]);
            let id = u16::from_ne_bytes([key[6], key[7]]);
            let Some(kind) = Kind::from_raw(kind_raw) else {
                return Err(EbpfError::Read(format!(
                    "unknown contributor kind {kind_raw}"
                )));
            };
            let value = map
                .lookup(&key, MapFlags::ANY)
                .map_err(|e| EbpfError::Read(format!("reading a histogram: {e}")))?;
            let Some(value) = value else { continue };
            let hist = Histogram::parse(&value).ok_or_else(|| {
                EbpfError::Read(format!(
                    "a histogram of {} bytes: kernel and user layouts differ",
                    value.len()
                ))
            })?;
            out.push(Measured {
                cpu,
                kind,
                id,
                hist,
            });
        }
        out.sort_by_key(|m| (m.cpu, m.kind, m.id));
        let counter = |slot: u32| percpu_sum(&self.obj, "counters", slot);
        let totals = ContribTotals {
            recorded: counter(0),
            no_slot: counter(1),
            programs,
            vectors_missing: std::mem::take(&mut self.vectors_missing),
            cost,
            attached_ns: duration_ns(attached),
        };
        Ok((out, totals))
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_kernels_tables() {
        assert_eq!(contributor_name(Kind::Softirq, 1), "softirq TIMER");
        assert_eq!(contributor_name(Kind::Softirq, 9), "softirq RCU");
        assert_eq!(contributor_name(Kind::Softirq, 12), "softirq 12");
        assert_eq!(contributor_name(Kind::Vector, 1), "vector local_timer");
        assert_eq!(contributor_name(Kind::HardIrq, 36), "IRQ 36");
        assert!(contributor_name(Kind::OffCpu, 0).contains("preempted"));
        assert_eq!(Kind::from_raw(4), Some(Kind::OffCpu));
        assert_eq!(Kind::from_raw(9), None);
    }

    #[test]
    fn the_config_value_is_the_programs_layout() {
        let v = config_value(&ContribConfig {
            cpus: vec![0],
            tgid: 7,
            thread_prefix: "noise-cpu".into(),
        })
        .unwrap();
        assert_eq!(v.len(), 24);
        assert_eq!(&v[..4], &7u32.to_ne_bytes());
        assert_eq!(&v[4..8], &9u32.to_ne_bytes());
        assert_eq!(&v[8..17], b"noise-cpu");
        assert!(config_value(&ContribConfig::default()).is_err());
        let long = ContribConfig {
            thread_prefix: "x".repeat(17),
            ..ContribConfig::default()
        };
        assert!(config_value(&long).is_err());
    }
}
