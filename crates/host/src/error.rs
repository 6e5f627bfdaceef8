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

    /// True when the kernel refused for lack of privilege (EPERM/EACCES).
    pub fn is_permission_denied(&self) -> bool {
        matches!(self, HostError::Sys { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied)
    }
}
