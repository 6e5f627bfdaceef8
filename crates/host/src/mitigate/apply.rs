//! Applying mitigations through a [`HostRoot`] and undoing them.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::journal::{Entry, EntryKind, Journal};
use super::Mitigation;
use crate::probe::{format_cpu_list, online_cpus, HostRoot};
use crate::HostError;

const DMA_LATENCY: &str = "dev/cpu_dma_latency";

/// One file change, planned (dry run) or made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Relative to the root.
    pub file: PathBuf,
    pub old: String,
    pub new: String,
    pub kind: EntryKind,
}

/// Mitigations in force; reverted by [`Applied::revert`] or on drop.
#[derive(Debug)]
pub struct Applied {
    root: HostRoot,
    journal: Journal,
    session: String,
    changes: Vec<Change>,
    /// Open `/dev/cpu_dma_latency` handles: the kernel keeps the latency request while open.
    holds: Vec<File>,
    dry_run: bool,
    done: bool,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Start time (clock ticks since boot) of a process, from the real `/proc`.
pub(crate) fn start_ticks(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.get(s.rfind(')')? + 1..)?
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// Whether the process that wrote a journal entry still runs.
pub(crate) fn alive(pid: u32, ticks: Option<u64>) -> bool {
    if Path::new("/proc/self/stat").exists() {
        match start_ticks(pid) {
            None => false,
            Some(t) => ticks.is_none_or(|r| r == t),
        }
    } else {
        // SAFETY: kill with signal 0 only checks for existence.
        let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
}

fn write_file(root: &HostRoot, rel: &Path, value: &str) -> Result<(), HostError> {
    let path = root.join(rel);
    OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| HostError::file("write", &path, e))
}

/// The files a mitigation writes, with their new values.
fn targets(root: &HostRoot, m: &Mitigation) -> Result<Vec<(PathBuf, String)>, HostError> {
    let online = || {
        online_cpus(root).ok_or_else(|| HostError::Mitigation {
            what: m.to_string(),
            reason: "cannot tell the online CPUs".to_string(),
        })
    };
    Ok(match m {
        Mitigation::CpuDmaLatencyZero => {
            vec![(PathBuf::from(DMA_LATENCY), "\0\0\0\0".to_string())]
        }
        Mitigation::Governor { cpus, to } => {
            let cpus = if cpus.is_empty() {
                online()?
            } else {
                cpus.clone()
            };
            cpus.iter()
                .map(|c| {
                    let f = format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor");
                    (PathBuf::from(f), format!("{to}\n"))
                })
                .collect()
        }
        Mitigation::IrqAffinityAway { irqs, from_cpus } => {
            let rest: Vec<usize> = online()?
                .into_iter()
                .filter(|c| !from_cpus.contains(c))
                .collect();
            if rest.is_empty() {
                return Err(HostError::Mitigation {
                    what: m.to_string(),
                    reason: "no online CPU is left for the interrupts".to_string(),
                });
            }
            let list = format_cpu_list(&rest);
            irqs.iter()
                .map(|i| {
                    (
                        PathBuf::from(format!("proc/irq/{i}/smp_affinity_list")),
                        format!("{list}\n"),
                    )
                })
                .collect()
        }
        Mitigation::NumaBalancingOff => {
            vec![(
                PathBuf::from("proc/sys/kernel/numa_balancing"),
                "0\n".to_string(),
            )]
        }
        Mitigation::TimerMigrationOff => {
            vec![(
                PathBuf::from("proc/sys/kernel/timer_migration"),
                "0\n".to_string(),
            )]
        }
    })
}

impl Applied {
    /// Applies `mitigations` under `root`, journalling every change before it is made; with
    /// `dry_run` only reads the current values and lists the changes. All old values are
    /// read before anything is written, and a failed write undoes the writes before it, so an
    /// error (e.g. no permission) leaves the host as it was.
    pub fn apply(
        root: &HostRoot,
        journal: &Journal,
        mitigations: &[Mitigation],
        dry_run: bool,
    ) -> Result<Applied, HostError> {
        let mut changes = Vec::new();
        for m in mitigations {
            for (file, new) in targets(root, m)? {
                let path = root.join(&file);
                let is_dev = std::fs::metadata(&path)
                    .map_err(|e| HostError::file("read", &path, e))?
                    .file_type()
                    .is_char_device();
                let (old, kind) = if is_dev {
                    // Reading the device gives the current system-wide value, not ours;
                    // closing our handle is what undoes the request.
                    (String::new(), EntryKind::Hold)
                } else {
                    let old = std::fs::read_to_string(&path)
                        .map_err(|e| HostError::file("read", &path, e))?;
                    (old, EntryKind::Write)
                };
                if kind == EntryKind::Write && old.trim() == new.trim() {
                    continue;
                }
                changes.push(Change {
                    file,
                    old,
                    new,
                    kind,
                });
            }
        }
        let pid = std::process::id();
        let mut applied = Applied {
            root: root.clone(),
            journal: journal.clone(),
            session: format!("{pid}-{}", now_ms()),
            changes: Vec::new(),
            holds: Vec::new(),
            dry_run,
            done: dry_run,
        };
        if dry_run {
            applied.changes = changes;
            return Ok(applied);
        }
        let ticks = start_ticks(pid);
        let root_abs =
            std::path::absolute(root.as_path()).unwrap_or_else(|_| root.as_path().to_path_buf());
        for c in changes {
            let entry = Entry {
                session: applied.session.clone(),
                pid,
                start_ticks: ticks,
                root: root_abs.clone(),
                file: c.file.clone(),
                old: c.old.clone(),
                new: c.new.clone(),
                time_unix_ms: now_ms(),
                kind: c.kind,
            };
            let step = journal.append(&entry).and_then(|_| match c.kind {
                EntryKind::Write => write_file(root, &c.file, &c.new),
                EntryKind::Hold => {
                    let path = root.join(&c.file);
                    let mut f = OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .map_err(|e| HostError::file("open", &path, e))?;
                    f.write_all(&0i32.to_ne_bytes())
                        .map_err(|e| HostError::file("write", &path, e))?;
                    applied.holds.push(f);
                    Ok(())
                }
            });
            // A failed write is still undone unless the file visibly kept its old value
            // (a truncating open may have emptied it before the write failed).
            let untouched = step.is_err()
                && c.kind == EntryKind::Write
                && std::fs::read_to_string(root.join(&c.file)).is_ok_and(|now| now == c.old);
            if !untouched {
                applied.changes.push(c);
            }
            if let Err(e) = step {
                // Undo what was done; the original error is the one worth reporting.
                let _ = applied.undo();
                return Err(e);
            }
        }
        Ok(applied)
    }

    /// The changes made (or, for a dry run, that would be made).
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// True when nothing was written.
    pub fn is_dry_run(&self) -> bool {
        self.dry_run
    }

    /// Restores every file to its old value, releases held devices and clears the journal
    /// entries of this session.
    pub fn revert(mut self) -> Result<(), HostError> {
        self.undo()
    }

    fn undo(&mut self) -> Result<(), HostError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        self.holds.clear();
        let mut first_err = None;
        let mut failed = Vec::new();
        for c in self
            .changes
            .iter()
            .rev()
            .filter(|c| c.kind == EntryKind::Write)
        {
            if let Err(e) = write_file(&self.root, &c.file, &c.old) {
                failed.push(c.file.clone());
                first_err.get_or_insert(e);
            }
        }
        // Entries whose revert failed stay, for revert_leftovers after this process exits.
        let cleared = self
            .journal
            .remove(|e| e.session == self.session && !failed.contains(&e.file));
        match first_err {
            Some(e) => Err(e),
            None => cleared,
        }
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        let _ = self.undo();
    }
}

/// Undoes the journalled changes under `root` of processes that are gone (a crash, a kill),
/// newest first, and drops their entries. Returns the number of files restored.
pub fn revert_leftovers(root: &HostRoot, journal: &Journal) -> Result<usize, HostError> {
    let root_abs =
        std::path::absolute(root.as_path()).unwrap_or_else(|_| root.as_path().to_path_buf());
    let dead: Vec<Entry> = journal
        .entries()?
        .into_iter()
        .filter(|e| e.root == root_abs && !alive(e.pid, e.start_ticks))
        .collect();
    let mut restored = 0;
    let mut first_err = None;
    let mut done = Vec::new();
    for e in dead.iter().rev() {
        let ok = match e.kind {
            EntryKind::Hold => true,
            EntryKind::Write => match write_file(root, &e.file, &e.old) {
                Ok(()) => {
                    restored += 1;
                    true
                }
                Err(err) => {
                    first_err.get_or_insert(err);
                    false
                }
            },
        };
        if ok {
            done.push((e.session.clone(), e.file.clone()));
        }
    }
    // Nothing to clear: do not create the journal (or its directory) on a clean start.
    if !done.is_empty() {
        journal.remove(|e| {
            e.root == root_abs && done.iter().any(|(s, f)| *s == e.session && *f == e.file)
        })?;
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(restored),
    }
}
