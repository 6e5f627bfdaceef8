//! The one file format of host's journals (applied mitigations, created isolation): one JSON
//! object per line, each append synced to disk before the caller changes the host, every
//! read and rewrite under an exclusive `flock` so that two tailscope processes never
//! interleave their lines.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::HostError;

/// An exclusive `flock` on the open file, released on drop (close). Written by hand with libc
/// because it is four lines and the workspace's nix has no `fs` feature enabled.
struct Locked(File);

impl Locked {
    fn open(path: &Path) -> Result<Self, HostError> {
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

fn parse<E: DeserializeOwned>(path: &Path, text: &str) -> Result<Vec<E>, HostError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| HostError::Journal {
                path: path.to_path_buf(),
                reason: format!("line {}: {e}", i + 1),
            })
        })
        .collect()
}

/// Every entry of the file at `path`; empty when it does not exist.
pub(crate) fn entries<E: DeserializeOwned>(path: &Path) -> Result<Vec<E>, HostError> {
    match fs::read_to_string(path) {
        Ok(t) => parse(path, &t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(HostError::file("read", path, e)),
    }
}

/// Appends one entry and syncs it to disk (the caller changes the host only after this).
pub(crate) fn append<E: Serialize>(path: &Path, e: &E) -> Result<(), HostError> {
    let mut lock = Locked::open(path)?;
    let mut line = serde_json::to_string(e).map_err(|err| HostError::Journal {
        path: path.to_path_buf(),
        reason: err.to_string(),
    })?;
    line.push('\n');
    lock.0
        .write_all(line.as_bytes())
        .and_then(|_| lock.0.sync_data())
        .map_err(|err| HostError::file("write", path, err))
}

/// Removes the entries `drop` selects (under the lock, rewriting the file in place).
pub(crate) fn remove<E: Serialize + DeserializeOwned>(
    path: &Path,
    drop: impl Fn(&E) -> bool,
) -> Result<(), HostError> {
    let mut lock = Locked::open(path)?;
    let mut text = String::new();
    let io = |e| HostError::file("rewrite", path, e);
    lock.0.seek(SeekFrom::Start(0)).map_err(io)?;
    lock.0.read_to_string(&mut text).map_err(io)?;
    let mut out = String::new();
    for e in parse::<E>(path, &text)?.into_iter().filter(|e| !drop(e)) {
        // An entry that was read back from JSON serialises again.
        out.push_str(&serde_json::to_string(&e).unwrap_or_default());
        out.push('\n');
    }
    lock.0.set_len(0).map_err(io)?;
    lock.0
        .write_all(out.as_bytes())
        .and_then(|_| lock.0.sync_data())
        .map_err(io)
}
