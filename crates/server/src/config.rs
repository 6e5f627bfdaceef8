//! What the server is asked to be: architecture, workers, synthetic work, placement.

use std::fmt;
use std::str::FromStr;

use host::placement::SchedSpec;
use model::ServiceSpec;

use crate::ServerError;

/// Concurrency architecture: how requests reach worker threads (Tales of the Tail §4.3 and
/// the queueing structure the ideal is computed for).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// One thread per connection, blocking I/O: the paper's null-RPC server. `workers` is
    /// ignored (there are as many workers as connections).
    Thread,
    /// `workers` epoll loops; accepted connections are dealt out round-robin and stay on
    /// their worker (memcached/nginx style: per-worker queues).
    Epoll,
    /// `workers` threads blocking on one shared UDP socket (one queue, any idle worker).
    Udp,
    /// One dispatcher epoll thread reads and decodes requests into one shared FIFO queue that
    /// `workers` threads serve; workers write the responses (one queue, c servers).
    Dispatch,
}

impl Arch {
    /// The name `FromStr` accepts.
    pub fn name(&self) -> &'static str {
        match self {
            Arch::Thread => "thread",
            Arch::Epoll => "epoll",
            Arch::Udp => "udp",
            Arch::Dispatch => "dispatch",
        }
    }

    /// True for the architecture that takes a UDP socket.
    pub fn is_udp(&self) -> bool {
        matches!(self, Arch::Udp)
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Arch {
    type Err = ServerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "thread" => Ok(Arch::Thread),
            "epoll" => Ok(Arch::Epoll),
            "udp" => Ok(Arch::Udp),
            "dispatch" => Ok(Arch::Dispatch),
            _ => Err(ServerError::UnknownArch(s.to_string())),
        }
    }
}

/// Everything `Server::start_*` needs besides the socket.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    pub arch: Arch,
    /// Worker threads (ignored by [`Arch::Thread`]).
    pub workers: usize,
    /// Synthetic work per request, spent busy-spinning (None: answer at once).
    pub work: Option<ServiceSpec>,
    /// CPUs every server thread is pinned to (empty: no pinning).
    pub cpus: Vec<usize>,
    /// Scheduling policy of every server thread (None: inherit).
    pub sched: Option<SchedSpec>,
    /// Honour `WANT_STAMPS` / `WANT_TX_STAMP` (turns on kernel timestamping on the sockets).
    pub stamps: bool,
    /// Largest request accepted; a longer frame closes its connection.
    pub max_frame: usize,
    /// Seed of the synthetic work generators (worker i uses `seed + i`).
    pub seed: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            arch: Arch::Thread,
            workers: 1,
            work: None,
            cpus: Vec::new(),
            sched: None,
            stamps: true,
            max_frame: wire::nullrpc::MAX_FRAME,
            seed: 0,
        }
    }
}

impl ServerConfig {
    /// Checks the values that do not need the kernel.
    pub fn validate(&self) -> Result<(), ServerError> {
        if self.workers == 0 && self.arch != Arch::Thread {
            return Err(ServerError::Config("workers must be at least 1".into()));
        }
        if self.workers > 4096 {
            return Err(ServerError::Config(format!(
                "{} workers is more than 4096",
                self.workers
            )));
        }
        let min = wire::nullrpc::HEADER_LEN;
        let max = wire::nullrpc::MAX_FRAME;
        if !(min..=max).contains(&self.max_frame) {
            return Err(ServerError::Config(format!(
                "max_frame {} outside {min}..={max}",
                self.max_frame
            )));
        }
        let n = host::placement::online_cpus();
        if let Some(&c) = self.cpus.iter().find(|&&c| c >= n) {
            return Err(ServerError::Placement(host::HostError::CpuOutOfRange {
                cpu: c,
                count: n,
            }));
        }
        if let Some(w) = &self.work {
            model::ServiceGen::new(w, self.seed)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names_round_trip() {
        for a in [Arch::Thread, Arch::Epoll, Arch::Udp, Arch::Dispatch] {
            assert_eq!(a.name().parse::<Arch>().unwrap(), a);
        }
        assert!(matches!(
            "fork".parse::<Arch>(),
            Err(ServerError::UnknownArch(_))
        ));
    }

    #[test]
    fn validation() {
        assert!(ServerConfig::default().validate().is_ok());
        let bad = [
            ServerConfig {
                arch: Arch::Epoll,
                workers: 0,
                ..Default::default()
            },
            ServerConfig {
                max_frame: 31,
                ..Default::default()
            },
            ServerConfig {
                max_frame: wire::nullrpc::MAX_FRAME + 1,
                ..Default::default()
            },
            ServerConfig {
                cpus: vec![host::placement::online_cpus()],
                ..Default::default()
            },
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?} accepted");
        }
    }
}
