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
    /// Opens (creating if needed) the store at `path`, and marks `abandoned` the runs and
    /// experiments whose process died without finishing them, saying so on stderr, one line
    /// each.
    pub fn open(path: &Path) -> Result<Db, StoreError> {
        let store = Store::open(path)?;
        for a in store.mark_abandoned()? {
            eprintln!("{}", abandoned_line(&a));
        }
        Ok(Db {
            path: path.to_path_buf(),
            store,
        })
    }
}

/// The line that reports a run or an experiment found orphaned.
fn abandoned_line(a: &store::Abandoned) -> String {
    let what = if a.experiment {
        format!("experiment {} ({}", a.id, a.kind)
    } else {
        format!("run {} ({} of {}", a.id, a.kind, a.target)
    };
    format!(
        "tailscope: {what}, started {}) was abandoned: its process ended without finishing it; marked abandoned",
        a.started_at
    )
}

/// Facts about this host stored with every run: what a platform comparison needs
/// (architecture, CPU model, LLC size and ways, SMT siblings, NUMA nodes, kernel,
/// virtualisation; read by `host::facts` under the real root), the host name and
/// tailscope's version. The keys of earlier versions (`hostname`, `kernel`, `cpus_online`,
/// `cpu_model`, `tailscope_version`) keep their meaning.
pub fn host_facts() -> serde_json::Value {
    let f = host::facts::read(&host::probe::HostRoot::default());
    let mut v = serde_json::to_value(&f).unwrap_or_else(|_| serde_json::json!({}));
    v["hostname"] = serde_json::json!(std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok());
    // What the kernel counts online, as before (`host::facts` counts the CPUs it lists).
    v["cpus_online"] = serde_json::json!(host::placement::online_cpus());
    v["tailscope_version"] = serde_json::json!(env!("CARGO_PKG_VERSION"));
    v
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
