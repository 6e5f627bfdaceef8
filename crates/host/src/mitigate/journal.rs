//! The journal of applied changes: one JSON object per line, appended before each write.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
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

/// An exclusive `flock` on the open journal, released on drop (close). Written by hand with
/// libc because it is four lines and the workspace's nix has no `fs` feature enabled. Shared
/// with the isolation journal ([`crate::isolate`]).
pub(crate) struct Locked(pub(crate) File);

impl Locked {
    pub(crate) fn open(path: &Path) -> Result<Self, HostError> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| HostError::file("create", dir, e))?;
        }
        let f = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| HostError::file("open", path, e))?;
        // SAFETY: flock on a valid, owned descriptor.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(HostError::file(
                "lock",
                path,
                std::io::Error::last_os_error(),
            ));
        }
        Ok(Locked(f))
    }
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

    fn parse(&self, text: &str) -> Result<Vec<Entry>, HostError> {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|e| HostError::Journal {
                    path: self.path.clone(),
                    reason: format!("line {}: {e}", i + 1),
                })
            })
            .collect()
    }

    /// Every entry; empty when the file does not exist.
    pub fn entries(&self) -> Result<Vec<Entry>, HostError> {
        match fs::read_to_string(&self.path) {
            Ok(t) => self.parse(&t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(HostError::file("read", &self.path, e)),
        }
    }

    /// Appends one entry and syncs it to disk before the caller touches the file.
    pub(crate) fn append(&self, e: &Entry) -> Result<(), HostError> {
        let mut lock = Locked::open(&self.path)?;
        let mut line = serde_json::to_string(e).map_err(|err| HostError::Journal {
            path: self.path.clone(),
            reason: err.to_string(),
        })?;
        line.push('\n');
        lock.0
            .write_all(line.as_bytes())
            .and_then(|_| lock.0.sync_data())
            .map_err(|err| HostError::file("write", &self.path, err))
    }

    /// Removes the entries `drop` selects (under the lock, rewriting the file in place).
    pub(crate) fn remove(&self, drop: impl Fn(&Entry) -> bool) -> Result<(), HostError> {
        let mut lock = Locked::open(&self.path)?;
        let mut text = String::new();
        let io = |e| HostError::file("rewrite", &self.path, e);
        lock.0.seek(SeekFrom::Start(0)).map_err(io)?;
        lock.0.read_to_string(&mut text).map_err(io)?;
        let keep: Vec<Entry> = self
            .parse(&text)?
            .into_iter()
            .filter(|e| !drop(e))
            .collect();
        let mut out = String::new();
        for e in &keep {
            // Serialising a struct of strings and numbers cannot fail.
            out.push_str(&serde_json::to_string(e).unwrap_or_default());
            out.push('\n');
        }
        lock.0.set_len(0).map_err(io)?;
        lock.0
            .write_all(out.as_bytes())
            .and_then(|_| lock.0.sync_data())
            .map_err(io)
    }
}
