//! Errors of the load engine and of protocol codecs.

use std::net::SocketAddr;

/// A reply the protocol codec could not make sense of. The engine closes the connection
/// that produced it (its byte stream can no longer be trusted) and reconnects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// The bytes are not a valid reply of this protocol.
    #[error("malformed reply: {0}")]
    Malformed(String),
    /// A well-formed frame that a client must never receive (e.g. a request).
    #[error("unexpected frame from server: {0}")]
    Unexpected(String),
}

/// Why a load run or a calibration could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The target URL could not be parsed or resolved.
    #[error("bad target '{url}': {reason}")]
    BadTarget { url: String, reason: String },
    /// The configuration is inconsistent (zero connections, non-positive rate, ...).
    #[error("invalid load configuration: {0}")]
    Config(String),
    /// The arrival schedule could not be generated.
    #[error("arrival schedule: {0}")]
    Schedule(String),
    /// Opening a connection to the target failed before the run started.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// A local system call (epoll, thread spawn, socket option) failed.
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A generator thread panicked (a bug; reported instead of propagating the panic).
    #[error("generator thread {0} panicked")]
    ThreadPanicked(usize),
    /// The connection failed during a calibration (closed loop cannot ride it out).
    #[error("connection to the target failed: {0}")]
    Connection(String),
    /// The record sink failed (e.g. the store could not be written); the run was stopped.
    #[error("storing the run's records failed: {0}")]
    Sink(String),
    /// Calibration saw no replies at all during its measurement window.
    #[error("calibration got no replies from {0} during the measurement window")]
    NoReplies(SocketAddr),
}

impl LoadError {
    pub(crate) fn io(what: &'static str, source: std::io::Error) -> Self {
        LoadError::Io { what, source }
    }
}
