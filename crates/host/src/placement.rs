//! Thread placement: CPU affinity and scheduling policy of the calling thread.
//!
//! Everything here acts on the *calling thread* (Linux schedules threads, and `nice`,
//! affinity and policy are per thread), so a server applies it at the top of each worker.

use std::fmt;
use std::io;
use std::str::FromStr;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::HostError;

/// Scheduling policy and priority for a thread.
#[derive(Clone, Debug, PartialEq)]
pub enum SchedSpec {
    /// `SCHED_OTHER` (CFS) at a nice level, −20 (favoured) ..= 19.
    Other { nice: i32 },
    /// `SCHED_FIFO` at a realtime priority 1 ..= 99.
    Fifo { prio: i32 },
    /// `SCHED_RR` at a realtime priority 1 ..= 99.
    Rr { prio: i32 },
}

impl fmt::Display for SchedSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchedSpec::Other { nice } => write!(f, "other:{nice}"),
            SchedSpec::Fifo { prio } => write!(f, "fifo:{prio}"),
            SchedSpec::Rr { prio } => write!(f, "rr:{prio}"),
        }
    }
}

impl FromStr for SchedSpec {
    type Err = HostError;

    /// `other`, `other:-20`, `fifo:50`, `rr:10`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| HostError::BadSched {
            text: s.to_string(),
            reason: reason.to_string(),
        };
        let t = s.trim();
        let (name, arg) = match t.split_once(':') {
            Some((n, a)) => (n, Some(a.trim())),
            None => (t, None),
        };
        let num = |a: Option<&str>| -> Result<Option<i32>, HostError> {
            match a {
                None => Ok(None),
                Some(a) => a
                    .parse::<i32>()
                    .map(Some)
                    .map_err(|_| bad("the number after ':' is not an integer")),
            }
        };
        match name.to_ascii_lowercase().as_str() {
            "other" | "normal" => {
                let nice = num(arg)?.unwrap_or(0);
                if !(-20..=19).contains(&nice) {
                    return Err(bad("nice must be in -20..=19"));
                }
                Ok(SchedSpec::Other { nice })
            }
            "fifo" | "rr" => {
                let prio = num(arg)?.ok_or_else(|| bad("a priority is required, e.g. fifo:50"))?;
                if !(1..=99).contains(&prio) {
                    return Err(bad("realtime priority must be in 1..=99"));
                }
                Ok(if name.eq_ignore_ascii_case("fifo") {
                    SchedSpec::Fifo { prio }
                } else {
                    SchedSpec::Rr { prio }
                })
            }
            _ => Err(bad("expected other[:NICE], fifo:PRIO or rr:PRIO")),
        }
    }
}

/// Number of online CPUs (`sysconf(_SC_NPROCESSORS_ONLN)`, at least 1).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 {
        1
    } else {
        n as usize
    }
}

/// Parses a Linux-style CPU list (`0`, `1,3`, `0-3,6`) and checks every id against the
/// online CPU count. Sorted, without duplicates.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, HostError> {
    parse_cpu_list_max(s, online_cpus())
}

/// [`parse_cpu_list`] against an explicit CPU count: ids must be `< count`.
pub fn parse_cpu_list_max(s: &str, count: usize) -> Result<Vec<usize>, HostError> {
    let bad = |reason: String| HostError::BadCpuList {
        text: s.to_string(),
        reason,
    };
    let id = |t: &str| -> Result<usize, HostError> {
        t.trim()
            .parse::<usize>()
            .map_err(|_| bad(format!("{:?} is not a CPU number", t.trim())))
    };
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(bad("empty element".to_string()));
        }
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (id(a)?, id(b)?),
            None => {
                let c = id(part)?;
                (c, c)
            }
        };
        if lo > hi {
            return Err(bad(format!("range {lo}-{hi} is reversed")));
        }
        if hi >= count {
            return Err(HostError::CpuOutOfRange { cpu: hi, count });
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Restricts the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[usize]) -> Result<(), HostError> {
    pin_thread(0, cpus)
}

/// Restricts thread `tid` of this process to `cpus` (0: the calling thread).
pub fn pin_thread(tid: u32, cpus: &[usize]) -> Result<(), HostError> {
    if cpus.is_empty() {
        return Err(HostError::EmptyCpuList);
    }
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c).map_err(|_| HostError::CpuOutOfRange {
            cpu: c,
            count: CpuSet::count(),
        })?;
    }
    sched_setaffinity(Pid::from_raw(tid as i32), &set)
        .map_err(|e| HostError::sys("sched_setaffinity", io::Error::from(e)))
}

/// The CPUs the calling thread may run on.
pub fn current_thread_affinity() -> Result<Vec<usize>, HostError> {
    let set = sched_getaffinity(Pid::from_raw(0))
        .map_err(|e| HostError::sys("sched_getaffinity", io::Error::from(e)))?;
    Ok((0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect())
}

fn set_scheduler(policy: libc::c_int, prio: i32) -> Result<(), HostError> {
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: `param` is a valid sched_param that outlives the call; pid 0 = calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc != 0 {
        return Err(HostError::sys(
            "sched_setscheduler",
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Moves the calling thread to `SCHED_IDLE`: it runs only when nothing else wants the CPU,
/// and any normal task that wakes up preempts it at once. For tailscope's own background
/// work (the record writer) beside a measurement.
pub fn set_idle_current_thread() -> Result<(), HostError> {
    set_scheduler(libc::SCHED_IDLE, 0)
}

/// Applies `s` to the calling thread: `SCHED_OTHER` plus `setpriority(PRIO_PROCESS, gettid)`
/// for a nice level, `sched_setscheduler` for FIFO/RR. Realtime policies need root or
/// CAP_SYS_NICE; the error then says so ([`HostError::is_permission_denied`]).
pub fn apply_sched_current_thread(s: &SchedSpec) -> Result<(), HostError> {
    match *s {
        SchedSpec::Other { nice } => {
            set_scheduler(libc::SCHED_OTHER, 0)?;
            let tid = nix::unistd::gettid().as_raw() as libc::id_t;
            // SAFETY: plain syscall wrapper with integer arguments.
            let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
            if rc != 0 {
                return Err(HostError::sys("setpriority", io::Error::last_os_error()));
            }
            Ok(())
        }
        SchedSpec::Fifo { prio } => set_scheduler(libc::SCHED_FIFO, prio),
        SchedSpec::Rr { prio } => set_scheduler(libc::SCHED_RR, prio),
    }
}

/// The calling thread's current policy and priority, read back from the kernel.
pub fn current_thread_sched() -> Result<SchedSpec, HostError> {
    // SAFETY: pid 0 = calling thread; no pointers involved.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 {
        return Err(HostError::sys(
            "sched_getscheduler",
            io::Error::last_os_error(),
        ));
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid, writable sched_param.
    if unsafe { libc::sched_getparam(0, &mut param) } != 0 {
        return Err(HostError::sys("sched_getparam", io::Error::last_os_error()));
    }
    match policy & !libc::SCHED_RESET_ON_FORK {
        libc::SCHED_FIFO => Ok(SchedSpec::Fifo {
            prio: param.sched_priority,
        }),
        libc::SCHED_RR => Ok(SchedSpec::Rr {
            prio: param.sched_priority,
        }),
        _ => {
            let tid = nix::unistd::gettid().as_raw() as libc::id_t;
            // getpriority can legitimately return -1, so errno is cleared and checked.
            // SAFETY: __errno_location returns this thread's errno slot.
            unsafe { *libc::__errno_location() = 0 };
            // SAFETY: plain syscall wrapper with integer arguments.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
            let err = io::Error::last_os_error();
            if nice == -1 && err.raw_os_error().unwrap_or(0) != 0 {
                return Err(HostError::sys("getpriority", err));
            }
            Ok(SchedSpec::Other { nice })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sched_spec_parses_and_checks_ranges() {
        assert_eq!(
            "other".parse::<SchedSpec>().unwrap(),
            SchedSpec::Other { nice: 0 }
        );
        assert_eq!(
            "other:-20".parse::<SchedSpec>().unwrap(),
            SchedSpec::Other { nice: -20 }
        );
        assert_eq!(
            "fifo:50".parse::<SchedSpec>().unwrap(),
            SchedSpec::Fifo { prio: 50 }
        );
        assert_eq!(
            "rr:10".parse::<SchedSpec>().unwrap(),
            SchedSpec::Rr { prio: 10 }
        );
        for bad in [
            "",
            "fifo",
            "fifo:0",
            "fifo:100",
            "rr:-1",
            "other:20",
            "other:-21",
            "other:x",
            "idle:1",
            "fifo:5.5",
        ] {
            assert!(bad.parse::<SchedSpec>().is_err(), "{bad:?} accepted");
        }
        for s in ["other:3", "fifo:1", "rr:99"] {
            assert_eq!(s.parse::<SchedSpec>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list_max("0", 4).unwrap(), vec![0]);
        assert_eq!(parse_cpu_list_max("1,3", 4).unwrap(), vec![1, 3]);
        assert_eq!(parse_cpu_list_max("0-3,6", 8).unwrap(), vec![0, 1, 2, 3, 6]);
        assert_eq!(parse_cpu_list_max("3, 1-2,2", 4).unwrap(), vec![1, 2, 3]);
        assert!(matches!(
            parse_cpu_list_max("0-4", 4),
            Err(HostError::CpuOutOfRange { cpu: 4, count: 4 })
        ));
        for bad in ["", "1,", "a", "3-1", "-1", "1--2", "1-"] {
            assert!(parse_cpu_list_max(bad, 64).is_err(), "{bad:?} accepted");
        }
        let n = online_cpus();
        assert!(n >= 1);
        assert_eq!(parse_cpu_list(&format!("0-{}", n - 1)).unwrap().len(), n);
        assert!(parse_cpu_list(&n.to_string()).is_err());
    }

    #[test]
    fn pinning_changes_the_affinity_of_this_thread_only() {
        let before = current_thread_affinity().unwrap();
        let last = online_cpus() - 1;
        std::thread::spawn(move || {
            pin_current_thread(&[last]).unwrap();
            assert_eq!(current_thread_affinity().unwrap(), vec![last]);
        })
        .join()
        .unwrap();
        assert_eq!(current_thread_affinity().unwrap(), before);
        assert!(matches!(
            pin_current_thread(&[]),
            Err(HostError::EmptyCpuList)
        ));
    }

    #[test]
    fn nice_is_applied_to_the_thread() {
        std::thread::spawn(|| {
            apply_sched_current_thread(&SchedSpec::Other { nice: 7 }).unwrap();
            assert_eq!(
                current_thread_sched().unwrap(),
                SchedSpec::Other { nice: 7 }
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn realtime_policy_applies_and_reverts_or_fails_clearly() {
        std::thread::spawn(|| {
            let before = current_thread_sched().unwrap();
            for spec in [SchedSpec::Fifo { prio: 10 }, SchedSpec::Rr { prio: 5 }] {
                match apply_sched_current_thread(&spec) {
                    Ok(()) => {
                        assert_eq!(current_thread_sched().unwrap(), spec);
                        // Back to normal before doing anything else (no spinning at RT).
                        apply_sched_current_thread(&SchedSpec::Other { nice: 0 }).unwrap();
                        assert_eq!(
                            current_thread_sched().unwrap(),
                            SchedSpec::Other { nice: 0 }
                        );
                    }
                    Err(e) => {
                        assert!(e.is_permission_denied(), "unexpected error {e}");
                        assert!(e.to_string().contains("CAP_SYS_NICE"));
                        assert_eq!(current_thread_sched().unwrap(), before);
                    }
                }
            }
        })
        .join()
        .unwrap();
    }
}
