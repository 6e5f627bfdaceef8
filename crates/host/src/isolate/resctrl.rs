//! Cache ways through resctrl (Intel CAT, AMD's L3 QoS; Documentation/arch/x86/resctrl.rst):
//! a `tailscope-PID-N` resource group under `sys/fs/resctrl` whose `schemata` gives the L3
//! cache the lowest N ways of the capacity bitmask, with every thread of the server in its
//! `tasks`. The bitmask is contiguous from the lowest allowed bit, as Intel requires (ThunderX
//! §V-A: "the mask can only have consecutive 1s"). The rest of the host keeps every way: this
//! bounds the server's share of the cache, which is what the study's Figs 12–13 vary.
//! Removing the group hands its tasks back to the default group (the kernel does that).

use std::path::{Path, PathBuf};

use super::{is_kernel_fs, remove_dir, write_id, write_value, Created};
use crate::probe::HostRoot;
use crate::HostError;

const BASE: &str = "sys/fs/resctrl";

/// A checked cache-way request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub ways: u32,
    pub total_ways: u32,
    /// `L3`, or `L3CODE` and `L3DATA` with code/data prioritisation on.
    pub resources: Vec<String>,
    /// The cache domains (one per L3 instance), from the default group's schemata.
    pub domains: Vec<u32>,
    pub mask: u64,
}

impl Plan {
    /// The lines written to the group's `schemata`.
    pub fn schemata(&self) -> Vec<String> {
        let doms: Vec<String> = self
            .domains
            .iter()
            .map(|d| format!("{d}={:x}", self.mask))
            .collect();
        self.resources
            .iter()
            .map(|r| format!("{r}:{}", doms.join(";")))
            .collect()
    }
}

fn unavailable(reason: impl Into<String>) -> HostError {
    HostError::Unavailable {
        what: "llc-ways (cache allocation)".into(),
        reason: reason.into(),
    }
}

/// Checks that resctrl offers L3 allocation under `root` and that `ways` fits its bitmask.
pub(crate) fn plan(root: &HostRoot, ways: u32) -> Result<Plan, HostError> {
    let base = Path::new(BASE);
    if !root.join(base).is_dir() {
        return Err(unavailable(
            "no resctrl (sys/fs/resctrl is absent: this CPU or kernel has no cache allocation)",
        ));
    }
    if !root.join(base.join("info")).is_dir() {
        return Err(unavailable(
            "resctrl is not mounted (mount -t resctrl resctrl /sys/fs/resctrl)",
        ));
    }
    let resources: Vec<String> = if root.join(base.join("info/L3")).is_dir() {
        vec!["L3".into()]
    } else if root.join(base.join("info/L3CODE")).is_dir() {
        vec!["L3CODE".into(), "L3DATA".into()]
    } else {
        return Err(unavailable(
            "resctrl offers no L3 cache allocation (no info/L3)",
        ));
    };
    let info = base.join("info").join(&resources[0]);
    let cbm = root
        .read_trim(info.join("cbm_mask"))
        .ok()
        .and_then(|s| u64::from_str_radix(&s, 16).ok())
        .filter(|m| *m != 0)
        .ok_or_else(|| unavailable(format!("cannot read {}/cbm_mask", info.display())))?;
    let min = root
        .read_trim(info.join("min_cbm_bits"))
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1)
        .max(1);
    let total = cbm.count_ones();
    if ways < min || ways > total {
        return Err(HostError::BadRequest {
            what: "llc-ways".into(),
            reason: format!(
                "{ways} ways: this L3 allows {min}..={total} (cbm_mask {cbm:x}, min_cbm_bits {min})"
            ),
        });
    }
    let schemata = root.read(base.join("schemata")).unwrap_or_default();
    let line = schemata
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{}:", resources[0])))
        .ok_or_else(|| unavailable(format!("the default schemata has no {} line", resources[0])))?;
    let domains: Vec<u32> = line
        .split(';')
        .filter_map(|d| d.split_once('=')?.0.trim().parse().ok())
        .collect();
    if domains.is_empty() {
        return Err(unavailable(format!("no cache domains in '{line}'")));
    }
    let shift = cbm.trailing_zeros();
    let mask = if ways >= 64 {
        u64::MAX
    } else {
        ((1u64 << ways) - 1) << shift
    };
    Ok(Plan {
        ways,
        total_ways: total,
        resources,
        domains,
        mask,
    })
}

/// Every thread of `pids` (from `proc/PID/task`) and `tids`.
fn threads(root: &HostRoot, pids: &[u32], tids: &[u32]) -> Vec<u32> {
    let mut v: Vec<u32> = pids
        .iter()
        .flat_map(|p| {
            let listed: Vec<u32> = root
                .list(format!("proc/{p}/task"))
                .iter()
                .filter_map(|t| t.parse().ok())
                .collect();
            if listed.is_empty() {
                vec![*p]
            } else {
                listed
            }
        })
        .chain(tids.iter().copied())
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Creates group `name` with `plan`'s ways and moves every thread of the server into it.
pub(crate) fn create(
    root: &HostRoot,
    plan: &Plan,
    name: &str,
    pids: &[u32],
    tids: &[u32],
    record: &mut dyn FnMut(Created) -> Result<(), HostError>,
) -> Result<(), HostError> {
    let dir = PathBuf::from(BASE).join(name);
    record(Created::Resctrl { dir: dir.clone() })?;
    let abs = root.join(&dir);
    let kernel = is_kernel_fs(&root.join(BASE));
    std::fs::create_dir(&abs).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOSPC) {
            unavailable("every resctrl class of service is in use (num_closids)")
        } else {
            HostError::file("create", &abs, e)
        }
    })?;
    let schemata = abs.join("schemata");
    // One write: the kernel parses every line of it, and a fixture file keeps them all.
    let text: String = plan.schemata().iter().map(|l| format!("{l}\n")).collect();
    write_value(&schemata, &text, kernel).map_err(|e| HostError::file("write", &schemata, e))?;
    let tasks = abs.join("tasks");
    for t in threads(root, pids, tids) {
        if let Err(e) = write_id(&tasks, t, kernel) {
            // ESRCH: a thread that exited between the listing and the move.
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(HostError::file("move a thread into", &tasks, e));
            }
        }
    }
    Ok(())
}

/// Removes a group (relative to the root); its tasks return to the default group.
pub(crate) fn remove(root: &HostRoot, dir: &Path) -> Result<(), HostError> {
    let abs = root.join(dir);
    if !abs.exists() {
        return Ok(());
    }
    let kernel = is_kernel_fs(&abs);
    match remove_dir(&abs, kernel) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(HostError::file("remove", &abs, e)),
    }
}
