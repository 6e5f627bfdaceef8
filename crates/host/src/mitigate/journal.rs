//! The journal of applied changes: one JSON object per line, appended before each write.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::HostError;

/// What a journal line records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// `file` was rewritten from `old` to `new`; undo by writing `old` back.
    Write,
    /// A device (`/dev/cpu_dma_latency`) held open; the kernel undoes it when the holder exits.
    Hold,
}

/// One applied change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The [`crate::mitigate::Applied`] that made it.
    pub session: String,
    /// The process that made it, and its start time in clock ticks since boot (field 22 of
    /// `/proc/PID/stat`) so a recycled pid is not taken for the original process.
    pub pid: u32,
    pub start_ticks: Option<u64>,
    /// The host root the file is under.
    pub root: PathBuf,
    /// The file, relative to the root.
    pub file: PathBuf,
    pub old: String,
    pub new: String,
    pub time_unix_ms: u64,
    pub kind: EntryKind,
}

/// The journal file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Journal {
    path: PathBuf,
}

impl Journal {
    /// A journal at `path` (created on first use).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Journal { path: path.into() }
    }

    /// `journal.jsonl` in the state directory `dir`.
    pub fn in_dir(dir: impl AsRef<Path>) -> Self {
        Journal::new(dir.as_ref().join("journal.jsonl"))
    }

    /// The default state directory: `$XDG_STATE_HOME/tailscope` when set, else
    /// `/var/lib/tailscope` for root, else `$HOME/.local/state/tailscope`.
    pub fn default_dir() -> PathBuf {
        if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| !x.is_empty()) {
            return PathBuf::from(x).join("tailscope");
        }
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            return PathBuf::from("/var/lib/tailscope");
        }
        match std::env::var_os("HOME") {
            Some(h) => PathBuf::from(h).join(".local/state/tailscope"),
            None => PathBuf::from("/var/lib/tailscope"),
        }
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry; empty when the file does not exist.
    pub fn entries(&self) -> Result<Vec<Entry>, HostError> {
        crate::jsonl::entries(&self.path)
    }

    /// Appends one entry and syncs it to disk before the caller touches the file.
    pub(crate) fn append(&self, e: &Entry) -> Result<(), HostError> {
        crate::jsonl::append(&self.path, e)
    }

    /// Removes the entries `drop` selects (under the lock, rewriting the file in place).
    pub(crate) fn remove(&self, drop: impl Fn(&Entry) -> bool) -> Result<(), HostError> {
        crate::jsonl::remove(&self.path, drop)
    }
}
