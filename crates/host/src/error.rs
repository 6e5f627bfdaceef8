//! The error type of the host crate.

use thiserror::Error;

/// What went wrong while parsing a placement option or talking to the kernel.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum HostError {
    /// A scheduling spec that is not `other[:NICE]`, `fifo:PRIO` or `rr:PRIO`.
    #[error("invalid scheduling spec {text:?}: {reason}")]
    BadSched { text: String, reason: String },
    /// A CPU list that is not like `0`, `1,3` or `0-3,6`.
    #[error("invalid CPU list {text:?}: {reason}")]
    BadCpuList { text: String, reason: String },
    /// A CPU id at or above the number of CPUs.
    #[error("CPU {cpu} does not exist (this host has {count} online CPUs: 0..{count})")]
    CpuOutOfRange { cpu: usize, count: usize },
    /// A placement call with no CPUs.
    #[error("empty CPU list")]
    EmptyCpuList,
    /// A system call failed.
    #[error("{op} failed: {source}{hint}")]
    Sys {
        op: &'static str,
        source: std::io::Error,
        /// Extra advice, e.g. that realtime scheduling needs CAP_SYS_NICE.
        hint: &'static str,
    },
    /// The host root given to `doctor` has no `proc/` directory.
    #[error("{root} has no proc/ directory: not a host root (expected / or a fixture tree)")]
    NoProc { root: std::path::PathBuf },
    /// A `--pid` that names no process under the host root.
    #[error("no process with pid {pid} (no {path})")]
    NoSuchPid { pid: u32, path: std::path::PathBuf },
    /// CPU ids that are not online on the host being checked.
    #[error("unknown CPU id(s) {cpus:?}: the host's online CPUs are {online}")]
    UnknownCpus { cpus: Vec<usize>, online: String },
    /// Reading or writing a host file failed.
    #[error("{op} {path} failed: {source}{hint}")]
    File {
        op: &'static str,
        path: std::path::PathBuf,
        source: std::io::Error,
        /// "(needs root)" when the kernel refused for lack of privilege.
        hint: &'static str,
    },
    /// The mitigation journal is unreadable or holds a line that is not a journal entry.
    #[error("journal {path}: {reason}")]
    Journal {
        path: std::path::PathBuf,
        reason: String,
    },
    /// A mitigation that cannot be applied on this host as asked.
    #[error("cannot apply {what}: {reason}")]
    Mitigation { what: String, reason: String },
    /// An isolation mechanism this host does not offer (no resctrl, no cgroup controller).
    #[error("{what} unavailable: {reason}")]
    Unavailable { what: String, reason: String },
    /// An isolation or placement request that is wrong whatever the host (a bad value).
    #[error("{what}: {reason}")]
    BadRequest { what: String, reason: String },
    /// An external command (`tc`) that failed; its stderr says why.
    #[error("{command} failed: {stderr}")]
    Command { command: String, stderr: String },
}

impl HostError {
    pub(crate) fn sys(op: &'static str, source: std::io::Error) -> Self {
        let hint = if source.kind() == std::io::ErrorKind::PermissionDenied {
            " (needs root or CAP_SYS_NICE)"
        } else {
            ""
        };
        HostError::Sys { op, source, hint }
    }

    pub(crate) fn file(op: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        let hint = if source.kind() == std::io::ErrorKind::PermissionDenied {
            " (permission denied: needs root)"
        } else {
            ""
        };
        HostError::File {
            op,
            path: path.to_path_buf(),
            source,
            hint,
        }
    }

    /// True when the kernel refused for lack of privilege (EPERM/EACCES).
    pub fn is_permission_denied(&self) -> bool {
        match self {
            HostError::Sys { source, .. } | HostError::File { source, .. } => {
                source.kind() == std::io::ErrorKind::PermissionDenied
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_errors_say_what_is_needed() {
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = HostError::file(
            "write",
            std::path::Path::new("/proc/irq/5/smp_affinity_list"),
            denied,
        );
        assert!(e.is_permission_denied());
        assert_eq!(
            e.to_string(),
            "write /proc/irq/5/smp_affinity_list failed: permission denied \
             (permission denied: needs root)"
        );
        let other = HostError::file(
            "write",
            std::path::Path::new("/x"),
            std::io::Error::from_raw_os_error(libc::EIO),
        );
        assert!(!other.is_permission_denied());
        assert!(!other.to_string().contains("needs root"));
    }
}
