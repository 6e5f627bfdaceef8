//! The results store as an experiment uses it: one file, opened by path, because the record
//! writer of a run opens a connection of its own to it.

use std::path::{Path, PathBuf};

use store::{Store, StoreError};

/// The store file and a connection to it.
pub struct Db {
    pub path: PathBuf,
    pub store: Store,
}

impl Db {
    /// Opens (creating if needed) the store at `path`.
    pub fn open(path: &Path) -> Result<Db, StoreError> {
        Ok(Db {
            path: path.to_path_buf(),
            store: Store::open(path)?,
        })
    }
}

/// Facts about this host stored with every run.
pub fn host_facts() -> serde_json::Value {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .ok()
    };
    let model_name = read("/proc/cpuinfo").and_then(|c| {
        c.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    serde_json::json!({
        "hostname": read("/proc/sys/kernel/hostname"),
        "kernel": read("/proc/sys/kernel/osrelease"),
        "cpus_online": host::placement::online_cpus(),
        "cpu_model": model_name,
        "tailscope_version": env!("CARGO_PKG_VERSION"),
    })
}

/// Free bytes on the filesystem holding `path` (or its nearest existing ancestor).
pub(crate) fn free_bytes(path: &Path) -> Option<u64> {
    let mut p = path;
    while !p.exists() {
        p = p.parent()?;
        if p.as_os_str().is_empty() {
            p = Path::new(".");
            break;
        }
    }
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs writes one struct into the valid, zeroed buffer; the path is a valid
    // NUL-terminated string. std has no API for free space, hence libc.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut s) != 0 {
            return None;
        }
        Some(s.f_bavail as u64 * s.f_frsize as u64)
    }
}
