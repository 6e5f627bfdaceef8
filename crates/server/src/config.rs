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
    /// The LNS paper's tandem server: a network-stack thread (cost T0 + L·mT), a dispatcher
    /// thread, and k workers (cost R0 + k·mR), FCFS or with full-stack priority for
    /// delay-sensitive requests. Configured by [`ServerConfig::staged`]; `workers` and `work`
    /// are ignored (see [`crate::staged`]).
    Staged,
}

impl Arch {
    /// The name `FromStr` accepts.
    pub fn name(&self) -> &'static str {
        match self {
            Arch::Thread => "thread",
            Arch::Epoll => "epoll",
            Arch::Udp => "udp",
            Arch::Dispatch => "dispatch",
            Arch::Staged => "staged",
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
            "staged" => Ok(Arch::Staged),
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
    /// Memory policy of every server thread (None: inherit); a `bind` policy's CPUs are
    /// chosen by the caller (`cpus`).
    pub numa: Option<host::numa::NumaPolicy>,
    /// Honour `WANT_STAMPS` / `WANT_TX_STAMP` (turns on kernel timestamping on the sockets).
    pub stamps: bool,
    /// Largest request accepted; a longer frame closes its connection.
    pub max_frame: usize,
    /// Seed of the synthetic work generators (worker i uses `seed + i`).
    pub seed: u64,
    /// Stage costs, worker count and discipline of [`Arch::Staged`] (ignored by the others).
    pub staged: StagedConfig,
    /// How much one client can make the server hold (see the crate doc, "Memory bounds").
    pub limits: Limits,
    /// [`Arch::Epoll`] only: the replies to every request one read brought are written
    /// together, in one write after the last is served (as memcached answers pipelined
    /// requests), instead of one write per reply. A client that sends several requests
    /// between two of the worker's reads then costs the worker one write per read; T5 is
    /// taken when each reply is encoded, so T5→T6 also holds the serving of the requests
    /// after it in the read. Off by default.
    pub batch_replies: bool,
}

/// Bounds on what clients can make the server hold in memory. Each bound is enforced by
/// back-pressure (the server stops reading) or, for connections, by refusal; never by
/// dropping a request it has read. Every pause and refusal is counted in
/// [`Counters`](crate::Counters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Unsent reply bytes of one connection above which the server stops reading from it
    /// ([`Arch::Epoll`], [`Arch::Dispatch`], [`Arch::Staged`]). The kernel's socket buffers
    /// (megabytes on loopback) fill first, so a client that reads at all never gets near it.
    pub max_unsent_bytes: usize,
    /// Reads of a paused connection resume once its unsent bytes are at or below this
    /// (below `max_unsent_bytes`, so that a client reading slowly does not flip the pause
    /// on every reply).
    pub resume_unsent_bytes: usize,
    /// Requests read but not yet taken by a worker ([`Arch::Dispatch`], [`Arch::Staged`])
    /// at which the reading thread stops reading; it resumes once half are taken.
    pub max_queued_requests: usize,
    /// The same bound in bytes (each request counts its whole frame).
    pub max_queued_bytes: usize,
    /// Connections open at once in [`Arch::Thread`] (one thread each); more are accepted and
    /// closed at once.
    pub max_connections: usize,
}

impl Default for Limits {
    /// 256 KiB unsent per connection (reads resume at 64 KiB), 4096 requests or 8 MiB
    /// queued, 1024 connections for the thread architecture.
    fn default() -> Self {
        Limits {
            max_unsent_bytes: 256 << 10,
            resume_unsent_bytes: 64 << 10,
            max_queued_requests: 4096,
            max_queued_bytes: 8 << 20,
            max_connections: 1024,
        }
    }
}

impl Limits {
    /// Checks that every bound is at least 1 and that reads resume below the pause mark.
    pub fn validate(&self) -> Result<(), ServerError> {
        for (name, v) in [
            ("max_unsent_bytes", self.max_unsent_bytes),
            ("max_queued_requests", self.max_queued_requests),
            ("max_queued_bytes", self.max_queued_bytes),
            ("max_connections", self.max_connections),
        ] {
            if v == 0 {
                return Err(ServerError::Config(format!(
                    "limit {name} must be at least 1"
                )));
            }
        }
        if self.resume_unsent_bytes >= self.max_unsent_bytes {
            return Err(ServerError::Config(format!(
                "resume_unsent_bytes ({}) must be below max_unsent_bytes ({})",
                self.resume_unsent_bytes, self.max_unsent_bytes
            )));
        }
        Ok(())
    }
}

/// The tandem server of [`Arch::Staged`] (LNS paper §3, formulas 11–12). Costs are spent
/// busy-spinning, so they are exactly known: stage 1 spends `t0_ns + L·mt_ns_per_byte` per
/// request of payload length L bytes, each worker `r0_ns + k·mr_ns_per_worker`.
#[derive(Clone, Debug, PartialEq)]
pub struct StagedConfig {
    /// T0: fixed network-stack cost per request, ns.
    pub t0_ns: f64,
    /// mT: network-stack cost per payload byte, ns.
    pub mt_ns_per_byte: f64,
    /// R0: fixed worker cost per request, ns.
    pub r0_ns: f64,
    /// mR: worker cost added per worker thread (contention), ns.
    pub mr_ns_per_worker: f64,
    /// k: worker threads.
    pub workers: usize,
    /// Full-stack priority for delay-sensitive requests (false: FCFS everywhere).
    pub priority: bool,
    /// Workers wait out R by sleeping (an absolute CLOCK_MONOTONIC deadline, 1 ns timer
    /// slack) instead of spinning: work that waits on something else, such as the LNS paper's
    /// database queries, so that k workers overlap even on fewer than k CPUs.
    pub worker_sleep: bool,
}

impl Default for StagedConfig {
    /// No cost, one worker, FCFS.
    fn default() -> Self {
        StagedConfig {
            t0_ns: 0.0,
            mt_ns_per_byte: 0.0,
            r0_ns: 0.0,
            mr_ns_per_worker: 0.0,
            workers: 1,
            priority: false,
            worker_sleep: false,
        }
    }
}

impl StagedConfig {
    /// T = T0 + L·mT for a request with `payload_len` payload bytes, rounded to whole ns.
    pub fn stack_cost_ns(&self, payload_len: usize) -> u64 {
        (self.t0_ns + payload_len as f64 * self.mt_ns_per_byte).round() as u64
    }

    /// R = R0 + k·mR, rounded to whole ns.
    pub fn worker_cost_ns(&self) -> u64 {
        (self.r0_ns + self.workers as f64 * self.mr_ns_per_worker).round() as u64
    }

    /// Checks that every cost is finite and non-negative, that one request's cost fits in
    /// an hour, and that 1 ≤ k ≤ 4096.
    pub fn validate(&self) -> Result<(), ServerError> {
        const HOUR_NS: f64 = 3.6e12;
        for (name, v) in [
            ("t0", self.t0_ns),
            ("mt", self.mt_ns_per_byte),
            ("r0", self.r0_ns),
            ("mr", self.mr_ns_per_worker),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ServerError::Config(format!(
                    "staged {name} must be a finite number ≥ 0, got {v}"
                )));
            }
        }
        if !(1..=4096).contains(&self.workers) {
            return Err(ServerError::Config(format!(
                "staged workers must be between 1 and 4096, got {}",
                self.workers
            )));
        }
        let stack_max = self.t0_ns + wire::nullrpc::MAX_FRAME as f64 * self.mt_ns_per_byte;
        let worker = self.r0_ns + self.workers as f64 * self.mr_ns_per_worker;
        if stack_max > HOUR_NS || worker > HOUR_NS {
            return Err(ServerError::Config(
                "a staged cost per request exceeds one hour".into(),
            ));
        }
        Ok(())
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            arch: Arch::Thread,
            workers: 1,
            work: None,
            cpus: Vec::new(),
            sched: None,
            numa: None,
            stamps: true,
            max_frame: wire::nullrpc::MAX_FRAME,
            seed: 0,
            staged: StagedConfig::default(),
            limits: Limits::default(),
            batch_replies: false,
        }
    }
}

impl ServerConfig {
    /// Checks the values that do not need the kernel.
    pub fn validate(&self) -> Result<(), ServerError> {
        self.limits.validate()?;
        if self.arch == Arch::Staged {
            self.staged.validate()?;
        } else if self.workers == 0 && self.arch != Arch::Thread {
            return Err(ServerError::Config("workers must be at least 1".into()));
        }
        if self.batch_replies && self.arch != Arch::Epoll {
            return Err(ServerError::Config(format!(
                "batch_replies applies to the epoll architecture, not {}",
                self.arch.name()
            )));
        }
        if self.workers > 4096 && self.arch != Arch::Staged {
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
        for a in [
            Arch::Thread,
            Arch::Epoll,
            Arch::Udp,
            Arch::Dispatch,
            Arch::Staged,
        ] {
            assert_eq!(a.name().parse::<Arch>().unwrap(), a);
        }
        assert!(matches!(
            "fork".parse::<Arch>(),
            Err(ServerError::UnknownArch(_))
        ));
    }

    fn staged(s: StagedConfig) -> ServerConfig {
        ServerConfig {
            arch: Arch::Staged,
            staged: s,
            ..Default::default()
        }
    }

    #[test]
    fn staged_costs_follow_formulas_11_and_12() {
        let s = StagedConfig {
            t0_ns: 1000.0,
            mt_ns_per_byte: 2.5,
            r0_ns: 3000.0,
            mr_ns_per_worker: 100.4,
            workers: 5,
            priority: true,
            worker_sleep: false,
        };
        assert_eq!(s.stack_cost_ns(0), 1000);
        assert_eq!(s.stack_cost_ns(96), 1240);
        assert_eq!(s.worker_cost_ns(), 3502);
        // The staged worker count is the one that counts; ServerConfig::workers is ignored.
        let c = ServerConfig {
            workers: 0,
            ..staged(s)
        };
        assert!(c.validate().is_ok());
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
            staged(StagedConfig {
                workers: 0,
                ..Default::default()
            }),
            staged(StagedConfig {
                t0_ns: -1.0,
                ..Default::default()
            }),
            staged(StagedConfig {
                mr_ns_per_worker: f64::NAN,
                ..Default::default()
            }),
            staged(StagedConfig {
                mt_ns_per_byte: 1e12,
                ..Default::default()
            }),
            ServerConfig {
                limits: Limits {
                    max_queued_requests: 0,
                    ..Default::default()
                },
                ..Default::default()
            },
            ServerConfig {
                limits: Limits {
                    resume_unsent_bytes: 256 << 10,
                    ..Default::default()
                },
                ..Default::default()
            },
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?} accepted");
        }
    }
}
