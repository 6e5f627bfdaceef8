//! What the kernel says about a running server: its child processes and, for every thread,
//! the CPUs it may run on and its scheduling policy (read from /proc, as `doctor` and the
//! attribution will).

use std::path::Path;

use host::placement::{parse_cpu_list_max, SchedSpec};

/// Placement of one server thread as read from `/proc/PID/task/TID/{status,stat}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadPlacement {
    /// Process id (the main pid or, for nginx, a worker's).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The thread's name (`Name:`), e.g. `mc-worker`, `nginx`, `io_thd_1`.
    pub name: String,
    /// `Cpus_allowed_list`.
    pub cpus: Vec<usize>,
    /// Policy with nice or realtime priority; `None` for SCHED_BATCH/IDLE/DEADLINE.
    pub sched: Option<SchedSpec>,
}

/// The fields of a `stat` line after the `(comm)`, which may itself contain spaces.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let close = stat.rfind(')')?;
    Some(stat.get(close + 1..)?.split_whitespace().collect())
}

/// Parent pid from a `stat` line.
pub(crate) fn ppid_of_stat(stat: &str) -> Option<u32> {
    stat_fields(stat)?.get(1)?.parse().ok()
}

/// Direct children of `pid` (scan of /proc/*/stat).
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| ppid_of_stat(&s))
                == Some(pid)
        })
        .collect();
    out.sort_unstable();
    out
}

fn sched_of_stat(stat: &str) -> Option<SchedSpec> {
    let f = stat_fields(stat)?;
    // Field numbers from proc(5), counted from 1 with `state` at 3.
    let field = |n: usize| f.get(n - 3)?.parse::<i64>().ok();
    let (nice, rt, policy) = (field(19)?, field(40)?, field(41)?);
    match policy as i32 {
        libc::SCHED_OTHER => Some(SchedSpec::Other { nice: nice as i32 }),
        libc::SCHED_FIFO => Some(SchedSpec::Fifo { prio: rt as i32 }),
        libc::SCHED_RR => Some(SchedSpec::Rr { prio: rt as i32 }),
        _ => None,
    }
}

fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

fn read_thread(pid: u32, task: &Path) -> Option<ThreadPlacement> {
    let tid = task.file_name()?.to_str()?.parse().ok()?;
    let status = std::fs::read_to_string(task.join("status")).ok()?;
    let stat = std::fs::read_to_string(task.join("stat")).ok()?;
    Some(ThreadPlacement {
        pid,
        tid,
        name: status_field(&status, "Name").unwrap_or("").to_string(),
        cpus: parse_cpu_list_max(status_field(&status, "Cpus_allowed_list")?, usize::MAX).ok()?,
        sched: sched_of_stat(&stat),
    })
}

/// Every thread of `pid` (threads that exit while being read are skipped).
pub(crate) fn threads_of(pid: u32) -> Vec<ThreadPlacement> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<ThreadPlacement> = dir
        .filter_map(|e| read_thread(pid, &e.ok()?.path()))
        .collect();
    out.sort_by_key(|t| t.tid);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_and_parens_in_comm() {
        let mut f: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        f[0] = "S".into();
        f[1] = "77".into(); // ppid
        f[19 - 3] = "-5".into(); // nice
        f[40 - 3] = "0".into(); // rt_priority
        f[41 - 3] = "0".into(); // policy
        let line = format!("123 (a) b (c) {}", f.join(" "));
        assert_eq!(ppid_of_stat(&line), Some(77));
        assert_eq!(sched_of_stat(&line), Some(SchedSpec::Other { nice: -5 }));
        f[40 - 3] = "20".into();
        f[41 - 3] = "1".into();
        let line = format!("123 (x) {}", f.join(" "));
        assert_eq!(sched_of_stat(&line), Some(SchedSpec::Fifo { prio: 20 }));
        assert_eq!(ppid_of_stat("garbage"), None);
    }

    #[test]
    fn this_process_reads_back() {
        let me = std::process::id();
        let threads = threads_of(me);
        assert!(threads.iter().any(|t| t.tid == me));
        let mine = host::placement::current_thread_affinity().unwrap();
        let tid = nix_free_gettid();
        let t = threads.iter().find(|t| t.tid == tid).unwrap();
        assert_eq!(t.cpus, mine);
        let mut kid = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(children_of(me).contains(&kid.id()));
        assert!(!children_of(me).contains(&me));
        kid.kill().unwrap();
        kid.wait().unwrap();
        assert!(!children_of(me).contains(&kid.id()));
    }

    fn nix_free_gettid() -> u32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u32 }
    }
}
