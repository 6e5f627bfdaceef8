//! Isolation mechanisms for one run (ThunderX §V-A, Table IV): cgroup controls of the
//! server's tasks (a cpuset, a memory limit, CPU bandwidth) on cgroup v1 or v2, a network
//! bandwidth limit (an HTB class on an interface, also inside a network namespace), and
//! cache ways through resctrl.
//!
//! Everything is created for a run and removed after it, like [`crate::mitigate`]'s changes:
//! [`Isolation::check`] validates the request against the host under a [`HostRoot`] (so it is
//! tested on fixture trees for hosts this one is not) and creates nothing;
//! [`IsolationPlan::apply`] writes a journal line *before* creating each thing, and the
//! [`Isolated`] guard removes them on [`Isolated::revert`] or drop; after a crash,
//! [`revert_leftovers`] on the next start removes what a dead process left. A group is
//! removed only after its tasks are moved back to the parent.
//!
//! Each mechanism's time to apply is measured (Table IV's figure) and reported with it.

mod cgroup;
mod container;
mod journal;
mod net;
mod resctrl;

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::mitigate::{alive, now_ms, start_ticks};
use crate::probe::{online_cpus, HostRoot};
use crate::HostError;

pub use cgroup::{DEFAULT_PERIOD_US, MIN_MEMORY_BYTES};
pub use container::{rps_mask, slot_addrs, ContainerNet};
pub use journal::{Created, IsoEntry, IsoJournal};
pub use net::{parse_dev, parse_rate_bps, NetShape, HANDLE as QDISC_HANDLE};

/// What a run asks for; every field is optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Isolation {
    /// A cgroup cpuset for the server (empty: none). Unlike affinity, a task cannot widen it.
    pub cpus: Vec<usize>,
    /// A cgroup memory limit, bytes.
    pub memory_limit_bytes: Option<u64>,
    /// CPU bandwidth: this fraction of one CPU per period (0.5: half a CPU; 2: two CPUs).
    pub cpu_quota: Option<f64>,
    /// The period of the CPU bandwidth control, µs (default [`DEFAULT_PERIOD_US`]).
    pub cpu_period_us: Option<u64>,
    /// A bandwidth limit on an interface's egress.
    pub net: Option<NetShape>,
    /// L3 cache ways through resctrl.
    pub llc_ways: Option<u32>,
}

/// What is moved into the groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tasks {
    /// Whole processes (a spawned server).
    Processes,
    /// Threads of this process (the built-in server, which lives inside tailscope).
    Threads,
}

/// One mechanism as applied, for the run's record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mechanism {
    /// `cpuset`, `memory`, `cpu-quota` (joined with `+` when one group holds several),
    /// `net-rate`, `llc-ways`.
    pub name: String,
    /// What was set, and where.
    pub detail: String,
    /// Time to create and fill it, µs (ThunderX Table IV).
    pub apply_us: f64,
}

/// A checked request: nothing created yet.
#[derive(Clone, Debug, PartialEq)]
pub struct IsolationPlan {
    root: HostRoot,
    groups: Vec<cgroup::GroupPlan>,
    net: Option<NetShape>,
    cache: Option<resctrl::Plan>,
}

impl Isolation {
    /// Whether nothing is asked for.
    pub fn is_empty(&self) -> bool {
        self == &Isolation::default()
    }

    /// Checks every mechanism against the host under `root` (controllers mounted and
    /// delegated, CPUs within the parent's cpuset, the interface present and free, resctrl
    /// with enough ways); creates nothing. A mechanism the host lacks is
    /// [`HostError::Unavailable`] (e.g. "llc-ways (cache allocation) unavailable: no resctrl").
    pub fn check(&self, root: &HostRoot, tasks: Tasks) -> Result<IsolationPlan, HostError> {
        let online =
            online_cpus(root).unwrap_or_else(|| (0..crate::placement::online_cpus()).collect());
        if let Some(c) = self.cpus.iter().find(|c| !online.contains(c)) {
            return Err(HostError::BadRequest {
                what: "cpuset".into(),
                reason: format!("CPU {c} is not online"),
            });
        }
        if let Some(m) = self.memory_limit_bytes {
            if m < MIN_MEMORY_BYTES {
                return Err(HostError::BadRequest {
                    what: "memory limit".into(),
                    reason: format!("{m} bytes is below the 1 MiB a server needs to start"),
                });
            }
        }
        let period = self.cpu_period_us.unwrap_or(DEFAULT_PERIOD_US);
        if !(1_000..=1_000_000).contains(&period) {
            return Err(HostError::BadRequest {
                what: "cpu period".into(),
                reason: format!("{period} us is outside the kernel's 1000..=1000000 us"),
            });
        }
        let quota_us = match self.cpu_quota {
            Some(f) => Some((cgroup::quota_of(f, period, online.len())?, period)),
            None => None,
        };
        let want = cgroup::Settings {
            cpus: self.cpus.clone(),
            memory_bytes: self.memory_limit_bytes,
            quota_us,
        };
        let groups = cgroup::plan(root, &want, tasks)?;
        if let Some(n) = &self.net {
            net::check(root, n)?;
        }
        let cache = match self.llc_ways {
            Some(w) => Some(resctrl::plan(root, w)?),
            None => None,
        };
        Ok(IsolationPlan {
            root: root.clone(),
            groups,
            net: self.net.clone(),
            cache,
        })
    }
}

/// Names of the groups of this process: `tailscope-PID-N`.
static NEXT: AtomicU32 = AtomicU32::new(0);

impl IsolationPlan {
    /// Whether the plan creates nothing.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.net.is_none() && self.cache.is_none()
    }

    /// Creates every mechanism for the server's processes `pids` (cgroups move whole
    /// processes) and threads `tids` (the built-in server's, moved one by one), journalling
    /// each before it is made. On an error, what was made is removed again.
    pub fn apply(
        &self,
        journal: &IsoJournal,
        pids: &[u32],
        tids: &[u32],
    ) -> Result<Isolated, HostError> {
        if pids.is_empty() && tids.is_empty() && (!self.groups.is_empty() || self.cache.is_some()) {
            return Err(HostError::BadRequest {
                what: "isolation".into(),
                reason: "no server process or thread to isolate".into(),
            });
        }
        let pid = std::process::id();
        let name = format!("tailscope-{pid}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let mut iso = Isolated {
            root: self.root.clone(),
            journal: journal.clone(),
            session: format!("{pid}-{}-{name}", now_ms()),
            ticks: start_ticks(pid),
            created: Vec::new(),
            mechanisms: Vec::new(),
            done: false,
        };
        if let Err(e) = self.create_all(&mut iso, &name, pids, tids) {
            // The original error is the one worth reporting.
            let _ = iso.undo();
            return Err(e);
        }
        Ok(iso)
    }

    fn create_all(
        &self,
        iso: &mut Isolated,
        name: &str,
        pids: &[u32],
        tids: &[u32],
    ) -> Result<(), HostError> {
        let root = self.root.clone();
        for g in &self.groups {
            let t = Instant::now();
            let dir = cgroup::create(&root, g, name, pids, tids, &mut |c| iso.record(c))?;
            iso.mechanisms.push(Mechanism {
                name: g.settings.names().join("+"),
                detail: format!(
                    "{} in {} (cgroup {})",
                    g.settings.detail(),
                    dir.display(),
                    if g.h.v2 { "v2" } else { "v1" }
                ),
                apply_us: t.elapsed().as_secs_f64() * 1e6,
            });
        }
        if let Some(n) = &self.net {
            let t = Instant::now();
            net::create(n, &mut |c| iso.record(c))?;
            iso.mechanisms.push(Mechanism {
                name: "net-rate".into(),
                detail: format!(
                    "htb {} bit/s on {}{}",
                    n.rate_bps,
                    n.dev,
                    n.netns
                        .as_ref()
                        .map(|s| format!(" (netns {s})"))
                        .unwrap_or_default()
                ),
                apply_us: t.elapsed().as_secs_f64() * 1e6,
            });
        }
        if let Some(c) = &self.cache {
            let t = Instant::now();
            resctrl::create(&root, c, name, pids, tids, &mut |x| iso.record(x))?;
            iso.mechanisms.push(Mechanism {
                name: "llc-ways".into(),
                detail: format!(
                    "{} of {} L3 ways (mask {:x}) in sys/fs/resctrl/{name}",
                    c.ways, c.total_ways, c.mask
                ),
                apply_us: t.elapsed().as_secs_f64() * 1e6,
            });
        }
        Ok(())
    }
}

/// Mechanisms in force for a run; removed by [`Isolated::revert`] or on drop.
#[derive(Debug)]
pub struct Isolated {
    root: HostRoot,
    journal: IsoJournal,
    session: String,
    ticks: Option<u64>,
    /// In creation order.
    created: Vec<Created>,
    mechanisms: Vec<Mechanism>,
    done: bool,
}

impl Isolated {
    fn record(&mut self, c: Created) -> Result<(), HostError> {
        let root =
            std::path::absolute(self.root.as_path()).unwrap_or_else(|_| self.root.as_path().into());
        self.journal.append(&IsoEntry {
            session: self.session.clone(),
            pid: std::process::id(),
            start_ticks: self.ticks,
            root,
            time_unix_ms: now_ms(),
            created: c.clone(),
        })?;
        self.created.push(c);
        Ok(())
    }

    /// What was applied, with each mechanism's time to apply.
    pub fn mechanisms(&self) -> &[Mechanism] {
        &self.mechanisms
    }

    /// Removes everything (tasks moved back first) and clears this session's journal lines.
    pub fn revert(mut self) -> Result<(), HostError> {
        self.undo()
    }

    fn undo(&mut self) -> Result<(), HostError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut first_err = None;
        let mut failed = Vec::new();
        for c in self.created.iter().rev() {
            if let Err(e) = undo_one(&self.root, c) {
                failed.push(c.clone());
                first_err.get_or_insert(e);
            }
        }
        // Lines whose undo failed stay, for revert_leftovers after this process exits.
        let cleared = self
            .journal
            .remove(|e| e.session == self.session && !failed.contains(&e.created));
        match first_err {
            Some(e) => Err(e),
            None => cleared,
        }
    }
}

impl Drop for Isolated {
    fn drop(&mut self) {
        let _ = self.undo();
    }
}

fn undo_one(root: &HostRoot, c: &Created) -> Result<(), HostError> {
    match c {
        Created::Cgroup { dir, v2 } => cgroup::remove(root, dir, *v2),
        Created::SubtreeControl { file, controller } => cgroup::disable(root, file, controller),
        Created::Resctrl { dir } => resctrl::remove(root, dir),
        Created::Qdisc { netns, dev, handle } => net::remove(netns.as_deref(), dev, handle),
        Created::Netns { name } => container::remove_netns(name),
    }
}

/// Removes what processes that are gone (a crash, SIGKILL) created under `root`, newest
/// first, and drops their journal lines. Returns how many things were removed. A clean
/// start (no journal) creates nothing.
pub fn revert_leftovers(root: &HostRoot, journal: &IsoJournal) -> Result<usize, HostError> {
    if !journal.path().exists() {
        return Ok(0);
    }
    let root_abs = std::path::absolute(root.as_path()).unwrap_or_else(|_| root.as_path().into());
    let dead: Vec<IsoEntry> = journal
        .entries()?
        .into_iter()
        .filter(|e| e.root == root_abs && !alive(e.pid, e.start_ticks))
        .collect();
    let mut first_err = None;
    let mut done = Vec::new();
    for e in dead.iter().rev() {
        match undo_one(root, &e.created) {
            Ok(()) => done.push((e.session.clone(), e.created.clone())),
            Err(err) => {
                first_err.get_or_insert(err);
            }
        }
    }
    if !done.is_empty() {
        journal.remove(|e| {
            e.root == root_abs && done.iter().any(|(s, c)| *s == e.session && *c == e.created)
        })?;
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(done.len()),
    }
}

// Filesystem magic numbers (linux/magic.h) of the kernel's group filesystems.
const CGROUP_SUPER_MAGIC: i64 = 0x27e0eb;
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
const RDTGROUP_SUPER_MAGIC: i64 = 0x0765_5821;

/// Whether `path` is on cgroupfs or resctrl, whose control files exist by themselves and
/// cannot be created or unlinked; elsewhere (a fixture tree) they are ordinary files.
pub(crate) fn is_kernel_fs(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs writes one struct into the zeroed buffer; `c` is NUL-terminated.
    unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        if libc::statfs(c.as_ptr(), &mut s) != 0 {
            return false;
        }
        [
            CGROUP_SUPER_MAGIC,
            CGROUP2_SUPER_MAGIC,
            RDTGROUP_SUPER_MAGIC,
        ]
        .contains(&(s.f_type as i64))
    }
}

/// Replaces a control file's value (a fixture tree's file is created when missing).
pub(crate) fn write_value(path: &Path, value: &str, kernel: bool) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .create(!kernel)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
}

/// Writes one task id to `cgroup.procs`/`tasks` (one id per write, as the kernel wants; a
/// fixture tree's file is appended to).
pub(crate) fn write_id(path: &Path, id: u32, kernel: bool) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .create(!kernel)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{id}\n").as_bytes()))
}

/// The ids listed in a `cgroup.procs`/`tasks` file (none when unreadable).
pub(crate) fn read_ids(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// Removes a group directory: `rmdir` on the kernel's filesystems (which refuse to unlink
/// control files and remove them with the directory), the whole tree on a fixture.
pub(crate) fn remove_dir(path: &Path, kernel: bool) -> std::io::Result<()> {
    if kernel {
        std::fs::remove_dir(path)
    } else {
        std::fs::remove_dir_all(path)
    }
}
