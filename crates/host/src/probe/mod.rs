//! Read-only host checks for `tailscope doctor`: the sources of excess tail latency of Tales
//! of the Tail §4 (background processes, non-FIFO scheduling, interrupt routing, NUMA, power
//! saving) and the kernel settings that add OS noise, each turned into a [`Check`] with the
//! evidence read, the mitigation and its trade-off.
//!
//! Every file is read through a [`HostRoot`], `/` on a real host and a fixture tree in tests,
//! so a check for C-states or NIC queue IRQs is tested on a VM that has neither. A file that
//! cannot be read makes its check [`Status::Unknown`]; only a root without `proc/`, a pid that
//! does not exist and unknown CPU ids are errors.

mod cpu;
mod irq;
mod mem;
mod sched;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::HostError;

pub use irq::{nic_irqs, NicIrq};
pub use sched::{runqueue_wait_check, SchedStat};

/// The directory the host's `proc/`, `sys/` and `dev/` are read from (and, for mitigations,
/// written to): `/` by default, a fixture tree in tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRoot(PathBuf);

impl Default for HostRoot {
    fn default() -> Self {
        HostRoot(PathBuf::from("/"))
    }
}

impl HostRoot {
    /// A root at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        HostRoot(path.into())
    }

    /// The root directory itself.
    pub fn as_path(&self) -> &Path {
        &self.0
    }

    /// `rel` (e.g. `proc/cmdline`, no leading slash) under the root.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        let rel = rel.as_ref();
        let rel = rel.strip_prefix("/").unwrap_or(rel);
        self.0.join(rel)
    }

    /// The whole file `rel` as text.
    pub fn read(&self, rel: impl AsRef<Path>) -> io::Result<String> {
        fs::read_to_string(self.join(rel))
    }

    /// The file `rel`, trimmed.
    pub fn read_trim(&self, rel: impl AsRef<Path>) -> io::Result<String> {
        self.read(rel).map(|s| s.trim().to_string())
    }

    /// Names of the entries of directory `rel`, sorted; empty when it does not exist.
    pub fn list(&self, rel: impl AsRef<Path>) -> Vec<String> {
        let mut names: Vec<String> = match fs::read_dir(self.join(rel)) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort_by_key(|n| natural_key(n));
        names
    }

    /// The numeric entries of `proc/` (process ids), ascending.
    pub fn pids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .list("proc")
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        v.sort_unstable();
        v
    }
}

/// Sort key that orders `cpu2` before `cpu10`.
fn natural_key(s: &str) -> (String, u64) {
    let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = s.split_at(s.len() - digits);
    (head.to_string(), tail.parse().unwrap_or(0))
}

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to do for tail latency.
    Ok,
    /// A known source of excess tail latency, worth changing for a measurement.
    Warn,
    /// A source that is likely to dominate the tail.
    Bad,
    /// The files the check needs are missing or unreadable (often: a VM without them).
    Unknown,
}

/// One host check: what was read and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable id, e.g. `cpu_governor` (scripts depend on it).
    pub id: String,
    pub status: Status,
    /// What was read, with the file names, so a reader can verify it.
    pub evidence: String,
    /// What to change.
    pub mitigation: String,
    /// What the change costs (Tales of the Tail, Table 1, where it applies).
    pub tradeoff: String,
    /// The mitigation needs root (or a capability).
    pub needs_root: bool,
    /// The mitigation needs a reboot (kernel command line).
    pub needs_reboot: bool,
}

impl Check {
    pub(crate) fn new(id: &str, status: Status, evidence: impl Into<String>) -> Self {
        Check {
            id: id.to_string(),
            status,
            evidence: evidence.into(),
            mitigation: String::new(),
            tradeoff: String::new(),
            needs_root: false,
            needs_reboot: false,
        }
    }

    pub(crate) fn fix(
        mut self,
        mitigation: &str,
        tradeoff: &str,
        root: bool,
        reboot: bool,
    ) -> Self {
        self.mitigation = mitigation.to_string();
        self.tradeoff = tradeoff.to_string();
        self.needs_root = root;
        self.needs_reboot = reboot;
        self
    }
}

/// `tailscope doctor --json`'s document: `{"checks": [...]}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    pub checks: Vec<Check>,
}

/// What `doctor` looks at.
#[derive(Clone, Debug, Default)]
pub struct DoctorConfig {
    pub root: HostRoot,
    /// The server process, for its memory placement, scheduling policy and run-queue wait.
    pub pid: Option<u32>,
    /// The server's CPUs; empty means all online CPUs.
    pub cpus: Vec<usize>,
}

/// What every check needs to know about the host, worked out once.
pub(crate) struct Ctx<'a> {
    pub root: &'a HostRoot,
    pub pid: Option<u32>,
    /// Online CPUs of the host.
    pub online: Vec<usize>,
    /// The server's CPUs (all online CPUs when none were given).
    pub server: Vec<usize>,
    /// True when the caller named the server CPUs.
    pub explicit: bool,
}

impl Ctx<'_> {
    pub fn is_server_cpu(&self, cpu: usize) -> bool {
        self.server.binary_search(&cpu).is_ok()
    }
}

/// Parses a CPU list as the kernel writes it (`0-3,6`, up to 8192 CPUs); sorted, no
/// duplicates; `None` when malformed.
pub fn parse_cpu_list_lenient(s: &str) -> Option<Vec<usize>> {
    cpu_list(s)
}

pub(crate) fn cpu_list(s: &str) -> Option<Vec<usize>> {
    let s = s.trim();
    if s.is_empty() {
        return Some(Vec::new());
    }
    // 8192 bounds the allocation for a corrupt file; Linux's NR_CPUS maximum is 8192.
    crate::placement::parse_cpu_list_max(s, 8192).ok()
}

/// Formats CPU ids as a kernel CPU list (`0-3,6`).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// Parses a hexadecimal CPU mask as in `rps_cpus` (`ff`, `00000000,0000000f`).
pub(crate) fn cpu_mask(s: &str) -> Option<Vec<usize>> {
    let hex: String = s.trim().chars().filter(|c| *c != ',').collect();
    let mut cpus = Vec::new();
    for (i, c) in hex.chars().rev().enumerate() {
        let d = c.to_digit(16)?;
        for b in 0..4 {
            if d & (1 << b) != 0 {
                cpus.push(i * 4 + b);
            }
        }
    }
    Some(cpus)
}

/// Online CPUs of the host under `root`: `sys/devices/system/cpu/online`, else the `cpuN`
/// lines of `proc/stat`.
pub fn online_cpus(root: &HostRoot) -> Option<Vec<usize>> {
    if let Some(v) = root
        .read("sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| cpu_list(&s))
    {
        if !v.is_empty() {
            return Some(v);
        }
    }
    let stat = root.read("proc/stat").ok()?;
    let mut v: Vec<usize> = stat
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|w| w.strip_prefix("cpu"))
        .filter_map(|n| n.parse().ok())
        .collect();
    v.sort_unstable();
    v.dedup();
    (!v.is_empty()).then_some(v)
}

/// Validates the configuration against the host (`Err` for a root without `proc/`, unknown
/// CPU ids or a missing pid).
fn context(cfg: &DoctorConfig) -> Result<Ctx<'_>, HostError> {
    let root = &cfg.root;
    if !root.join("proc").is_dir() {
        return Err(HostError::NoProc {
            root: root.as_path().to_path_buf(),
        });
    }
    let online = online_cpus(root).unwrap_or_default();
    let mut server: Vec<usize> = cfg.cpus.clone();
    server.sort_unstable();
    server.dedup();
    if !online.is_empty() {
        let unknown: Vec<usize> = server
            .iter()
            .copied()
            .filter(|c| online.binary_search(c).is_err())
            .collect();
        if !unknown.is_empty() {
            return Err(HostError::UnknownCpus {
                cpus: unknown,
                online: format_cpu_list(&online),
            });
        }
    }
    let explicit = !server.is_empty();
    if !explicit {
        server = online.clone();
    }
    if let Some(pid) = cfg.pid {
        let path = root.join(format!("proc/{pid}"));
        if !path.is_dir() {
            return Err(HostError::NoSuchPid { pid, path });
        }
    }
    Ok(Ctx {
        root,
        pid: cfg.pid,
        online,
        server,
        explicit,
    })
}

/// Runs every check. `Err` only for a root without `proc/`, unknown CPU ids or a pid that does
/// not exist; a file that cannot be read makes that one check [`Status::Unknown`]. The
/// `server_*` checks appear only with a pid; `server_runqueue_wait` samples for ~100 ms.
pub fn run_checks(cfg: &DoctorConfig) -> Result<Vec<Check>, HostError> {
    let ctx = context(cfg)?;
    let mut checks = vec![
        cpu::governor(&ctx),
        cpu::turbo(&ctx),
        cpu::cpuidle(&ctx),
        cpu::smt(&ctx),
        irq::irqbalance(&ctx),
        irq::irq_affinity(&ctx),
        irq::rps_xps(&ctx),
        cpu::isolation(&ctx),
        mem::numa(&ctx),
        mem::numa_balancing(&ctx),
        mem::thp(&ctx),
        mem::swap(&ctx),
        cpu::timer_migration(&ctx),
        cpu::watchdog(&ctx),
        cpu::virtualisation(&ctx),
        sched::rt_throttling(&ctx),
        sched::cpu_contention(&ctx),
    ];
    if let Some(pid) = ctx.pid {
        checks.push(sched::server_sched(&ctx, pid));
        checks.push(sched::server_runqueue_wait(
            &ctx,
            pid,
            std::time::Duration::from_millis(100),
        ));
    }
    Ok(checks)
}

/// An Unknown check for a file that could not be read.
pub(crate) fn unreadable(id: &str, path: &str, e: &io::Error) -> Check {
    Check::new(id, Status::Unknown, format!("cannot read {path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_masks_and_lists() {
        assert_eq!(cpu_mask("f"), Some(vec![0, 1, 2, 3]));
        assert_eq!(cpu_mask("00000001,00000000"), Some(vec![32]));
        assert_eq!(cpu_mask("0"), Some(vec![]));
        assert_eq!(cpu_mask("xz"), None);
        assert_eq!(format_cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(cpu_list("0-2,5"), Some(vec![0, 1, 2, 5]));
        assert_eq!(cpu_list(""), Some(vec![]));
        assert_eq!(cpu_list("a"), None);
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["cpu10", "cpu2", "cpu1"];
        v.sort_by_key(|n| natural_key(n));
        assert_eq!(v, ["cpu1", "cpu2", "cpu10"]);
    }
}
