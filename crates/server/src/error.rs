//! The error type of the server crate.

use thiserror::Error;

/// Why the server could not start or stop cleanly.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A configuration value is out of range.
    #[error("invalid server configuration: {0}")]
    Config(String),
    /// `Arch::from_str` got an unknown name.
    #[error("unknown server architecture {0:?} (expected thread, epoll, udp, dispatch or staged)")]
    UnknownArch(String),
    /// The synthetic work distribution was rejected by the model crate.
    #[error("synthetic work: {0}")]
    Work(#[from] model::ModelError),
    /// Pinning or scheduling could not be applied.
    #[error("thread placement: {0}")]
    Placement(#[from] host::HostError),
    /// A system call needed to run the server failed.
    #[error("{op} failed: {source}")]
    Io {
        op: &'static str,
        source: std::io::Error,
    },
    /// A server thread panicked (a bug); the counters may be incomplete.
    #[error("a server thread panicked")]
    ThreadPanicked,
}

impl ServerError {
    pub(crate) fn io(op: &'static str, source: impl Into<std::io::Error>) -> Self {
        ServerError::Io {
            op,
            source: source.into(),
        }
    }
}
