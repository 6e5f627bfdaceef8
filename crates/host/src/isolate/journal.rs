//! The isolation journal: one JSON object per line, appended (and synced) *before* a cgroup,
//! qdisc or resctrl group is created, so that whatever a run created can be found and removed
//! after the process that created it died. A file of its own beside `mitigate`'s journal (in
//! the same state directory, under the same kind of lock): its entries name things created,
//! not file values rewritten.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::HostError;

/// What one journal line says was created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Created {
    /// A cgroup directory (relative to the root). Undo: move its tasks to the parent
    /// directory's group, then remove it.
    Cgroup { dir: PathBuf, v2: bool },
    /// A controller enabled in a cgroup v2 parent's `cgroup.subtree_control` (relative to the
    /// root) so that a child could use it. Undo: write `-CONTROLLER` back.
    SubtreeControl { file: PathBuf, controller: String },
    /// A resctrl group directory (relative to the root). Undo: remove it (the kernel moves its
    /// tasks back to the default group).
    Resctrl { dir: PathBuf },
    /// A root qdisc with tailscope's handle on `dev` (in network namespace `netns` when set).
    /// Undo: delete the root qdisc if it is still tailscope's.
    Qdisc {
        netns: Option<String>,
        dev: String,
        handle: String,
    },
    /// A network namespace `name` (`ip netns`) with a veth pair, a container's network.
    /// Undo: delete the namespace.
    Netns { name: String },
}

/// One journal line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsoEntry {
    /// The [`crate::isolate::Isolated`] that created it.
    pub session: String,
    /// The creating process and its start time (clock ticks since boot), so that a recycled
    /// pid is not taken for the original process.
    pub pid: u32,
    pub start_ticks: Option<u64>,
    /// The host root the paths are under.
    pub root: PathBuf,
    pub time_unix_ms: u64,
    pub created: Created,
}

/// The isolation journal file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsoJournal {
    path: PathBuf,
}

impl IsoJournal {
    /// A journal at `path` (created on first use).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        IsoJournal { path: path.into() }
    }

    /// `isolation.jsonl` in the state directory `dir`.
    pub fn in_dir(dir: impl AsRef<Path>) -> Self {
        IsoJournal::new(dir.as_ref().join("isolation.jsonl"))
    }

    /// The journal in the default state directory ([`crate::mitigate::Journal::default_dir`]).
    pub fn default_location() -> Self {
        IsoJournal::in_dir(crate::mitigate::Journal::default_dir())
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry; empty when the file does not exist.
    pub fn entries(&self) -> Result<Vec<IsoEntry>, HostError> {
        crate::jsonl::entries(&self.path)
    }

    /// Appends one entry and syncs it to disk before the caller creates anything.
    pub(crate) fn append(&self, e: &IsoEntry) -> Result<(), HostError> {
        crate::jsonl::append(&self.path, e)
    }

    /// Removes the entries `drop` selects (under the lock, rewriting the file in place).
    pub(crate) fn remove(&self, drop: impl Fn(&IsoEntry) -> bool) -> Result<(), HostError> {
        crate::jsonl::remove(&self.path, drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_are_removed_selectively() {
        let dir = tempfile::tempdir().unwrap();
        let j = IsoJournal::in_dir(dir.path().join("state"));
        assert_eq!(j.entries().unwrap(), vec![]);
        let e = |session: &str, created: Created| IsoEntry {
            session: session.into(),
            pid: 1,
            start_ticks: Some(5),
            root: "/".into(),
            time_unix_ms: 0,
            created,
        };
        let a = e(
            "a",
            Created::Cgroup {
                dir: "sys/fs/cgroup/memory/tailscope-1-0".into(),
                v2: false,
            },
        );
        let b = e(
            "b",
            Created::Qdisc {
                netns: Some("ns".into()),
                dev: "veth0".into(),
                handle: "7a5c:".into(),
            },
        );
        j.append(&a).unwrap();
        j.append(&b).unwrap();
        assert_eq!(j.entries().unwrap(), vec![a.clone(), b.clone()]);
        j.remove(|x| x.session == "a").unwrap();
        assert_eq!(j.entries().unwrap(), vec![b]);
        std::fs::write(j.path(), "{\"session\": 3}\n").unwrap();
        let err = j.entries().unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }
}
