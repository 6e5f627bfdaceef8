//! cgroup controls of the server: a cpuset, a memory limit and CPU bandwidth (quota/period),
//! on either layout the kernel offers. cgroup v1 mounts one hierarchy per controller (or per
//! co-mounted set, `cpu,cpuacct`); cgroup v2 has one hierarchy whose `cgroup.controllers`
//! lists what it offers. A controller bound to a v1 hierarchy is absent from v2, so each
//! controller is looked up in `proc/mounts` under the root, v1 first.
//!
//! For each hierarchy involved, a `tailscope-PID-N` child is made under the server's current
//! group there (so limits nest inside whatever already confines it, e.g. a container's), the
//! settings are written, then the server's processes (`cgroup.procs`) or, for the built-in
//! server that lives inside tailscope, its threads (`tasks`, v1 only) are moved in. Removal
//! moves every task back to the parent first, then removes the directory.

use std::path::{Path, PathBuf};

use super::{is_kernel_fs, read_ids, remove_dir, write_id, write_value, Created, Tasks};
use crate::probe::{cpu_list, format_cpu_list, HostRoot};
use crate::HostError;

/// The period of CPU bandwidth control, µs (the kernel's default, 100 ms).
pub const DEFAULT_PERIOD_US: u64 = 100_000;
/// The kernel's smallest quota, µs.
const MIN_QUOTA_US: u64 = 1_000;
/// A memory limit below this would stop any server from starting its threads.
pub const MIN_MEMORY_BYTES: u64 = 1 << 20;

/// One cgroup hierarchy as mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hierarchy {
    /// The mount point, relative to the root.
    pub mount: PathBuf,
    pub v2: bool,
    /// v1: the controllers bound to it; v2: those its root offers (`cgroup.controllers`).
    pub controllers: Vec<String>,
}

/// `\040` and the like in a mount point (proc/mounts escapes blanks as octal).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], oct) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every cgroup hierarchy mounted under `root`, from `proc/mounts`.
pub(crate) fn hierarchies(root: &HostRoot) -> Vec<Hierarchy> {
    let text = root
        .read("proc/mounts")
        .or_else(|_| root.read("proc/self/mounts"))
        .unwrap_or_default();
    let mut out: Vec<Hierarchy> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(mnt), Some(fs), Some(opts)) = (f.get(1), f.get(2), f.get(3)) else {
            continue;
        };
        let mount = PathBuf::from(unescape(mnt).trim_start_matches('/'));
        let h = match *fs {
            "cgroup" => Hierarchy {
                mount,
                v2: false,
                controllers: opts
                    .split(',')
                    .filter(|o| ["cpu", "cpuset", "memory", "cpuacct"].contains(o))
                    .map(str::to_string)
                    .collect(),
            },
            "cgroup2" => {
                let offered = root
                    .read(mount.join("cgroup.controllers"))
                    .unwrap_or_default();
                Hierarchy {
                    mount,
                    v2: true,
                    controllers: offered.split_whitespace().map(str::to_string).collect(),
                }
            }
            _ => continue,
        };
        // The same hierarchy may be mounted twice; the first mount serves.
        if !out
            .iter()
            .any(|o| o.v2 == h.v2 && o.controllers == h.controllers)
        {
            out.push(h);
        }
    }
    out
}

/// The hierarchy that holds `controller` (v1 first: a controller bound to v1 is not on v2).
fn hierarchy_of<'a>(hs: &'a [Hierarchy], controller: &str) -> Option<&'a Hierarchy> {
    let has = |h: &&Hierarchy| h.controllers.iter().any(|c| c == controller);
    hs.iter()
        .filter(|h| !h.v2)
        .find(has)
        .or_else(|| hs.iter().filter(|h| h.v2).find(has))
}

/// The group of process `pid` (None: this process) in hierarchy `h`, relative to the root.
pub(crate) fn group_of(root: &HostRoot, pid: Option<u32>, h: &Hierarchy) -> Option<PathBuf> {
    let file = match pid {
        Some(p) => format!("proc/{p}/cgroup"),
        None => "proc/self/cgroup".to_string(),
    };
    let text = root.read(file).ok()?;
    let path = text.lines().find_map(|l| {
        let mut it = l.splitn(3, ':');
        let (id, ctrls, path) = (it.next()?, it.next()?, it.next()?);
        let hit = if h.v2 {
            id == "0" && ctrls.is_empty()
        } else {
            let named: Vec<&str> = ctrls.split(',').collect();
            h.controllers.iter().any(|c| named.contains(&c.as_str()))
        };
        hit.then(|| path.trim_start_matches('/').to_string())
    })?;
    Some(h.mount.join(path))
}

/// What one group gets.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Settings {
    pub cpus: Vec<usize>,
    pub memory_bytes: Option<u64>,
    /// (quota, period) in µs.
    pub quota_us: Option<(u64, u64)>,
}

impl Settings {
    fn controllers(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if !self.cpus.is_empty() {
            v.push("cpuset");
        }
        if self.memory_bytes.is_some() {
            v.push("memory");
        }
        if self.quota_us.is_some() {
            v.push("cpu");
        }
        v
    }

    /// The mechanisms' names as the run reports them.
    pub fn names(&self) -> Vec<&'static str> {
        self.controllers()
            .into_iter()
            .map(|c| if c == "cpu" { "cpu-quota" } else { c })
            .collect()
    }

    pub fn detail(&self) -> String {
        let mut v = Vec::new();
        if !self.cpus.is_empty() {
            v.push(format!("cpus {}", format_cpu_list(&self.cpus)));
        }
        if let Some(m) = self.memory_bytes {
            v.push(format!("memory limit {m} B"));
        }
        if let Some((q, p)) = self.quota_us {
            v.push(format!("cpu quota {q} us per {p} us"));
        }
        v.join(", ")
    }
}

/// One group to create: where and with what.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GroupPlan {
    pub h: Hierarchy,
    pub settings: Settings,
}

/// The CPU quota for `fraction` of one CPU per `period_us`.
pub(crate) fn quota_of(fraction: f64, period_us: u64, online: usize) -> Result<u64, HostError> {
    let bad = |reason: String| HostError::BadRequest {
        what: "cpu quota".into(),
        reason,
    };
    if !(fraction.is_finite() && fraction > 0.0) {
        return Err(bad(format!(
            "must be a positive fraction of a CPU (0.5 = half of one CPU), got {fraction}"
        )));
    }
    if fraction > online as f64 {
        return Err(bad(format!(
            "{fraction} CPUs is more than this host's {online}: no limit at all"
        )));
    }
    let q = (fraction * period_us as f64).round() as u64;
    if q < MIN_QUOTA_US {
        return Err(bad(format!(
            "{fraction} of a CPU is {q} us per {period_us} us period; the kernel's minimum is {MIN_QUOTA_US} us"
        )));
    }
    Ok(q)
}

/// Groups by hierarchy for `want`, each checked against the host under `root`: the
/// controller is mounted, tailscope's own group exists there, the cpuset is within the
/// parent's, and cgroup v2 can take what `tasks` moves.
pub(crate) fn plan(
    root: &HostRoot,
    want: &Settings,
    tasks: Tasks,
) -> Result<Vec<GroupPlan>, HostError> {
    let hs = hierarchies(root);
    let mut out: Vec<GroupPlan> = Vec::new();
    for c in want.controllers() {
        let unavailable = |reason: String| HostError::Unavailable {
            what: format!("cgroup {c} controller"),
            reason,
        };
        let h = hierarchy_of(&hs, c).ok_or_else(|| {
            unavailable(
                "not mounted (no cgroup v1 hierarchy with it, not offered by cgroup2)".into(),
            )
        })?;
        if h.v2 && tasks == Tasks::Threads {
            return Err(unavailable(
                "cgroup v2 moves whole processes and the built-in server's threads share tailscope's: use a spawned server".into(),
            ));
        }
        if c == "memory" && tasks == Tasks::Threads {
            return Err(HostError::BadRequest {
                what: "memory limit".into(),
                reason: "memory is charged per process and the built-in server runs inside tailscope: use a spawned server".into(),
            });
        }
        let parent = group_of(root, None, h).ok_or_else(|| {
            unavailable(format!(
                "proc/self/cgroup names no group in {}",
                h.mount.display()
            ))
        })?;
        if !root.join(&parent).is_dir() {
            return Err(unavailable(format!(
                "tailscope's own group {} is not there (a cgroup namespace?)",
                root.join(&parent).display()
            )));
        }
        if h.v2 {
            let offered = root
                .read(parent.join("cgroup.controllers"))
                .unwrap_or_default();
            if !offered.split_whitespace().any(|o| o == c) {
                return Err(unavailable(format!(
                    "not delegated to {} (its cgroup.controllers lacks it)",
                    root.join(&parent).display()
                )));
            }
        }
        if c == "cpuset" {
            let file = if h.v2 {
                "cpuset.cpus.effective"
            } else {
                "cpuset.effective_cpus"
            };
            let allowed = root
                .read(parent.join(file))
                .or_else(|_| root.read(parent.join("cpuset.cpus")))
                .ok()
                .and_then(|s| cpu_list(&s))
                .unwrap_or_default();
            let outside: Vec<usize> = want
                .cpus
                .iter()
                .copied()
                .filter(|x| !allowed.contains(x))
                .collect();
            if !allowed.is_empty() && !outside.is_empty() {
                return Err(HostError::BadRequest {
                    what: "cpuset".into(),
                    reason: format!(
                        "CPUs {} are outside the parent group's CPUs {}",
                        format_cpu_list(&outside),
                        format_cpu_list(&allowed)
                    ),
                });
            }
        }
        let slot = match out.iter_mut().find(|g| g.h == *h) {
            Some(g) => g,
            None => {
                out.push(GroupPlan {
                    h: h.clone(),
                    settings: Settings::default(),
                });
                let last = out.len() - 1;
                &mut out[last]
            }
        };
        match c {
            "cpuset" => slot.settings.cpus = want.cpus.clone(),
            "memory" => slot.settings.memory_bytes = want.memory_bytes,
            _ => slot.settings.quota_us = want.quota_us,
        }
    }
    Ok(out)
}

/// Creates `g`'s group `name` under the group of `pids[0]` (else this process's), writes its
/// settings and moves the tasks in. `record` journals each thing before it is created.
/// Returns the group's directory, relative to the root.
pub(crate) fn create(
    root: &HostRoot,
    g: &GroupPlan,
    name: &str,
    pids: &[u32],
    tids: &[u32],
    record: &mut dyn FnMut(Created) -> Result<(), HostError>,
) -> Result<PathBuf, HostError> {
    let h = &g.h;
    let parent =
        group_of(root, pids.first().copied(), h).ok_or_else(|| HostError::Unavailable {
            what: format!("cgroup hierarchy {}", h.mount.display()),
            reason: "the server's /proc/PID/cgroup names no group there".into(),
        })?;
    let parent_abs = root.join(&parent);
    let kernel = is_kernel_fs(&parent_abs);
    let s = &g.settings;
    if h.v2 {
        let file = parent.join("cgroup.subtree_control");
        let enabled = root.read(&file).unwrap_or_default();
        for c in s.controllers() {
            if enabled.split_whitespace().any(|e| e == c) {
                continue;
            }
            record(Created::SubtreeControl {
                file: file.clone(),
                controller: c.to_string(),
            })?;
            let path = root.join(&file);
            write_value(&path, &format!("+{c}"), kernel).map_err(|e| {
                if e.raw_os_error() == Some(libc::EBUSY) {
                    HostError::Unavailable {
                        what: format!("cgroup v2 {c} controller"),
                        reason: format!(
                            "{} holds processes itself, so it cannot enable {c} for a child (cgroup v2's no-internal-process rule)",
                            parent_abs.display()
                        ),
                    }
                } else {
                    HostError::file("write", &path, e)
                }
            })?;
        }
    }
    let dir = parent.join(name);
    record(Created::Cgroup {
        dir: dir.clone(),
        v2: h.v2,
    })?;
    let abs = root.join(&dir);
    std::fs::create_dir(&abs).map_err(|e| HostError::file("create", &abs, e))?;
    let set = |file: &str, value: String| {
        let p = abs.join(file);
        write_value(&p, &value, kernel).map_err(|e| HostError::file("write", &p, e))
    };
    if !s.cpus.is_empty() {
        set("cpuset.cpus", format_cpu_list(&s.cpus))?;
        if !h.v2 {
            // A v1 cpuset starts with no memory nodes and refuses tasks until it has some.
            let mems = root
                .read(parent.join("cpuset.mems"))
                .map_err(|e| HostError::file("read", &parent_abs.join("cpuset.mems"), e))?;
            set("cpuset.mems", mems.trim().to_string())?;
        }
    }
    if let Some(m) = s.memory_bytes {
        let file = if h.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        set(file, m.to_string())?;
    }
    if let Some((q, p)) = s.quota_us {
        if h.v2 {
            set("cpu.max", format!("{q} {p}"))?;
        } else {
            set("cpu.cfs_period_us", p.to_string())?;
            set("cpu.cfs_quota_us", q.to_string())?;
        }
    }
    for &pid in pids {
        let p = abs.join("cgroup.procs");
        write_id(&p, pid, kernel).map_err(|e| HostError::file("move a process into", &p, e))?;
    }
    for &tid in tids {
        let p = abs.join("tasks");
        write_id(&p, tid, kernel).map_err(|e| HostError::file("move a thread into", &p, e))?;
    }
    Ok(dir)
}

/// Moves every task of group `dir` (relative to the root) back to its parent and removes it.
/// A task that exits meanwhile is no error; a group still busy (a thread being born as it is
/// moved) is emptied again, a bounded number of times.
pub(crate) fn remove(root: &HostRoot, dir: &Path, v2: bool) -> Result<(), HostError> {
    let abs = root.join(dir);
    if !abs.exists() {
        return Ok(());
    }
    let Some(parent) = abs.parent().map(Path::to_path_buf) else {
        return Ok(());
    };
    let kernel = is_kernel_fs(&abs);
    // A task that could not be moved back explains a busy group better than rmdir's EBUSY.
    let mut move_err = None;
    let mut busy = None;
    for _ in 0..50 {
        for file in ["cgroup.procs", "tasks"] {
            if v2 && file == "tasks" {
                continue;
            }
            for id in read_ids(&abs.join(file)) {
                let to = parent.join(file);
                if let Err(e) = write_id(&to, id, kernel) {
                    // ESRCH: the task exited while being moved.
                    if e.raw_os_error() != Some(libc::ESRCH) {
                        move_err = Some(HostError::file("move a task back to", &to, e));
                    }
                }
            }
        }
        match remove_dir(&abs, kernel) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                busy = Some(HostError::file("remove", &abs, e));
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(e) => return Err(HostError::file("remove", &abs, e)),
        }
    }
    Err(move_err.or(busy).unwrap_or_else(|| {
        HostError::file(
            "remove",
            &abs,
            std::io::Error::from_raw_os_error(libc::EBUSY),
        )
    }))
}

/// Undoes a [`Created::SubtreeControl`].
pub(crate) fn disable(root: &HostRoot, file: &Path, controller: &str) -> Result<(), HostError> {
    let path = root.join(file);
    if !path.exists() {
        return Ok(());
    }
    let kernel = is_kernel_fs(&path);
    write_value(&path, &format!("-{controller}"), kernel)
        .map_err(|e| HostError::file("write", &path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/x\\0"), "/x\\0");
    }

    #[test]
    fn quota_bounds() {
        assert_eq!(quota_of(0.5, 100_000, 2).unwrap(), 50_000);
        assert_eq!(quota_of(2.0, 100_000, 2).unwrap(), 200_000);
        for bad in [0.0, -1.0, f64::NAN, 3.0, 0.001] {
            assert!(quota_of(bad, 100_000, 2).is_err(), "{bad}");
        }
    }
}
