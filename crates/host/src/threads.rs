//! Where this process's threads may run and last ran (issue 37: every tailscope thread
//! placed, and the run lists each one's CPUs), and a pin of the calling thread that is undone
//! when it goes out of scope.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::placement::{current_thread_affinity, parse_cpu_list, pin_current_thread};
use crate::HostError;

/// One thread of a process: its name, the CPUs it may run on, the CPU it last ran on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadPlace {
    pub tid: u32,
    /// `comm` (the kernel's 15-character thread name).
    pub name: String,
    /// `Cpus_allowed_list`.
    pub allowed: Vec<usize>,
    /// The CPU it was last seen on (`stat` field 39); None when unreadable.
    pub last_cpu: Option<usize>,
}

/// The threads of the process whose `/proc/<pid>` (or `/proc/self`) directory is `dir`, by
/// thread id. A thread that ends while it is read is left out.
pub fn threads_of(dir: &Path) -> Vec<ThreadPlace> {
    let Ok(entries) = fs::read_dir(dir.join("task")) else {
        return Vec::new();
    };
    let mut out: Vec<ThreadPlace> = entries
        .flatten()
        .filter_map(|e| {
            let tid: u32 = e.file_name().to_str()?.parse().ok()?;
            let t = e.path();
            let name = fs::read_to_string(t.join("comm")).ok()?.trim().to_string();
            let status = fs::read_to_string(t.join("status")).ok()?;
            let allowed = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(|v| parse_cpu_list(v.trim()).ok())?;
            let last_cpu = fs::read_to_string(t.join("stat"))
                .ok()
                .and_then(|s| last_cpu_of_stat(&s));
            Some(ThreadPlace {
                tid,
                name,
                allowed,
                last_cpu,
            })
        })
        .collect();
    out.sort_by_key(|t| t.tid);
    out
}

/// Field 39 (`processor`) of a `stat` line. The name (field 2) is in parentheses and may
/// hold spaces and parentheses itself, so the fields are counted after its last ')'.
fn last_cpu_of_stat(stat: &str) -> Option<usize> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ')' come fields 3.. : field 39 is the 37th of them.
    rest.split_whitespace().nth(36)?.parse().ok()
}

/// The calling thread pinned to some CPUs until this is dropped, when its affinity before
/// is restored.
pub struct PinnedForNow {
    before: Vec<usize>,
}

impl PinnedForNow {
    /// Pins the calling thread to `cpus`.
    pub fn pin(cpus: &[usize]) -> Result<PinnedForNow, HostError> {
        let before = current_thread_affinity()?;
        pin_current_thread(cpus)?;
        Ok(PinnedForNow { before })
    }
}

impl Drop for PinnedForNow {
    fn drop(&mut self) {
        // Best effort: the CPUs it had a moment ago are still there.
        let _ = pin_current_thread(&self.before);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_processor_field_whatever_the_name() {
        // A real line's shape (fields 3..52), with a name holding ") (" and spaces.
        let tail = (3..=52)
            .map(|f| {
                if f == 39 {
                    "7".to_string()
                } else {
                    f.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(last_cpu_of_stat(&format!("42 (a) (b c) {tail}")), Some(7));
        assert_eq!(last_cpu_of_stat("42 (x) S 1"), None);
        assert_eq!(last_cpu_of_stat("no parenthesis"), None);
    }

    #[test]
    fn a_fixture_tree_lists_its_threads_and_skips_the_broken_ones() {
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("task");
        let tail = |cpu: usize| {
            (3..=52)
                .map(|f| if f == 39 { cpu.to_string() } else { "0".into() })
                .collect::<Vec<_>>()
                .join(" ")
        };
        for (tid, name, allowed, cpu) in
            [(11, "tailscope", "0", 0), (12, "tailscope-rec", "0-1", 1)]
        {
            let t = task.join(tid.to_string());
            fs::create_dir_all(&t).unwrap();
            fs::write(t.join("comm"), format!("{name}\n")).unwrap();
            fs::write(
                t.join("status"),
                format!("Name:\t{name}\nCpus_allowed_list:\t{allowed}\n"),
            )
            .unwrap();
            fs::write(t.join("stat"), format!("{tid} ({name}) {}", tail(cpu))).unwrap();
        }
        // A thread that ended while being read: no status.
        fs::create_dir_all(task.join("13")).unwrap();
        fs::write(task.join("13").join("comm"), "gone\n").unwrap();
        let got = threads_of(dir.path());
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].name, "tailscope");
        assert_eq!(got[0].allowed, vec![0]);
        assert_eq!(got[1].allowed, vec![0, 1]);
        assert_eq!(got[1].last_cpu, Some(1));
    }

    #[test]
    fn a_pin_for_now_is_undone_when_dropped() {
        let before = current_thread_affinity().unwrap();
        let one = before[0];
        std::thread::spawn(move || {
            let before = current_thread_affinity().unwrap();
            {
                let _p = PinnedForNow::pin(&[one]).unwrap();
                assert_eq!(current_thread_affinity().unwrap(), vec![one]);
                // This very thread, as /proc lists it.
                let me = threads_of(Path::new("/proc/self"));
                assert!(me.iter().any(|t| t.allowed == vec![one]), "{me:?}");
            }
            assert_eq!(current_thread_affinity().unwrap(), before);
        })
        .join()
        .unwrap();
    }
}
