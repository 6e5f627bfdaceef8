//! The error type of the targets crate.

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::Kind;

/// What went wrong while finding, starting, checking or stopping a server.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TargetError {
    /// A server name that is not `memcached`, `nginx` or `redis`.
    #[error("unknown server {0:?} (expected memcached, nginx or redis)")]
    UnknownKind(String),
    /// The server's binary is not on PATH (nor in /usr/sbin, /usr/local/sbin, /sbin).
    #[error("{program} is not installed (apt-get install {package})")]
    NotInstalled {
        program: &'static str,
        package: &'static str,
    },
    /// An explicitly given binary path that does not name an executable file.
    #[error("{path}: not an executable file")]
    BadBinary { path: PathBuf },
    /// A [`crate::SpawnConfig`] that does not make sense for its server.
    #[error("invalid {kind} configuration: {reason}")]
    BadConfig { kind: Kind, reason: String },
    /// Preparing the temporary directory, config or files failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    /// The kernel refused the requested scheduling policy or nice level.
    #[error("cannot start {kind} with scheduling {sched}: {source} (realtime policies and negative nice levels need root or CAP_SYS_NICE)")]
    SchedPermission {
        kind: Kind,
        sched: String,
        source: std::io::Error,
    },
    /// `fork`/`exec` or the placement applied in the child failed.
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    /// The server exited before it answered the readiness check.
    #[error("{kind} exited before it was ready ({status}); command: {command}\n{output}")]
    Exited {
        kind: Kind,
        status: String,
        command: String,
        /// The tail of the server's stderr and stdout.
        output: String,
    },
    /// The server did not answer the readiness check in time (it has been stopped).
    #[error("{kind} was not ready after {timeout:?} (last check: {last_check}); command: {command}\n{output}")]
    NotReady {
        kind: Kind,
        timeout: Duration,
        last_check: String,
        command: String,
        output: String,
    },
    /// The server runs, but not with the policy that was asked for.
    #[error("{kind} pid {pid} thread {tid} runs with scheduling {got}, asked for {want}")]
    SchedNotApplied {
        kind: Kind,
        pid: u32,
        tid: u32,
        want: String,
        got: String,
    },
    /// The server runs, but not on the CPUs that were asked for (e.g. a cgroup cpuset
    /// narrowed the affinity).
    #[error("{kind} pid {pid} thread {tid} runs on CPUs {got:?}, asked for {want:?}")]
    Placement {
        kind: Kind,
        pid: u32,
        tid: u32,
        want: Vec<usize>,
        got: Vec<usize>,
    },
}

impl TargetError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        TargetError::Io {
            what: what.into(),
            source,
        }
    }
}
