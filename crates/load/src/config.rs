//! The validated description of one open-loop run.

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::LoadError;
use crate::target::Target;

/// Highest rate accepted: one request every 10 ns, far beyond what a software generator sends.
pub const MAX_RATE: f64 = 1e8;

/// When the schedule ends (after the warm-up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopAt {
    /// Measured part of the schedule lasts this long (the warm-up comes before it).
    Duration(Duration),
    /// This many measured requests (the warm-up's requests come on top).
    Requests(u64),
}

/// Everything the engine needs to run one open-loop experiment.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Where to send requests.
    pub target: Target,
    /// The arrival process of the whole run (all threads together).
    pub arrival: model::ArrivalSpec,
    /// Mean arrival rate of the whole run. For trace replay, `0.0` replays the trace as
    /// recorded and a positive rate rescales it.
    pub rate_per_s: f64,
    /// How long the measured part of the schedule runs.
    pub stop: StopAt,
    /// Warm-up before the measured part (its requests are recorded, flagged by time).
    pub warmup: Duration,
    /// Connections (TCP) or UDP sockets, opened before the run and dealt to threads.
    pub connections: usize,
    /// Generator threads (capped at `connections`).
    pub threads: usize,
    /// Generator threads are pinned round-robin over these CPUs; empty = no pinning.
    pub cpus: Vec<usize>,
    /// At most this many requests in flight per connection; more wait in a client backlog.
    pub max_outstanding_per_conn: usize,
    /// A sent request unanswered for this long is a Timeout; an unsent one waiting this
    /// long in the backlog is Dropped.
    pub timeout: Duration,
    /// Seed of the schedule and the class labels.
    pub seed: u64,
    /// Label probabilities (class i with probability class_probs\[i\]); empty = class 0.
    pub class_probs: Vec<f64>,
    /// Spin while waiting for the next send, but sleep in epoll when it is > ~200 µs away.
    pub yield_when_far: bool,
    /// Connection churn (Tales of the Tail §4.3, HTTP): `Some((lo, hi))` closes each
    /// connection after a quota of requests drawn uniformly from `lo..=hi` (Tales: 20..=40)
    /// and reopens it for the next request, whose latency includes the connect. The
    /// connections opened before the run are closed at its start, so every quota pays
    /// its connect. `None` (default): persistent connections.
    pub churn: Option<(u32, u32)>,
    /// CPUs for the record writer thread (it runs at SCHED_IDLE); empty = not pinned. Give
    /// CPUs that are neither the generator's nor the server's when the host has any.
    pub writer_cpus: Vec<usize>,
    /// Several addresses of one target (instances of a scaled-out server): connection `c`
    /// goes to `spread[c % len]` instead of `target.addr`, so the connections go round-robin
    /// over them. Empty (default): every connection to `target.addr`.
    pub spread: Vec<SocketAddr>,
    /// This process's share of a run split over several (agents on other hosts): `(index,
    /// count)`. The run's schedule has `count × threads` lanes numbered like the threads of
    /// one process (share `i`'s thread `t` is lane `i × threads + t`), so the shares together
    /// are exactly the run one process with `count × threads` threads would send. `(0, 1)`:
    /// the whole run.
    pub share: (u32, u32),
    /// The schedule's time zero as an absolute CLOCK_MONOTONIC instant (processes starting
    /// together); `None`: ~2 ms after the generator threads are ready. A run whose threads
    /// are ready only after this instant fails rather than start late.
    pub start_at_mono_ns: Option<u64>,
    /// Hand each thread's finished records to the sink at least this often, in partial
    /// chunks if need be (None: in full chunks only, the most compact). A sink that
    /// forwards records elsewhere (an agent to its coordinator) then loses at most this much
    /// when its process dies.
    pub flush_every: Option<Duration>,
}

impl LoadConfig {
    /// A Poisson run at `rate_per_s` for 10 s on one connection and thread, 1 s timeout,
    /// 64 outstanding requests per connection, no warm-up, one class.
    pub fn new(target: Target, rate_per_s: f64) -> Self {
        LoadConfig {
            target,
            arrival: model::ArrivalSpec::Poisson,
            rate_per_s,
            stop: StopAt::Duration(Duration::from_secs(10)),
            warmup: Duration::ZERO,
            connections: 1,
            threads: 1,
            cpus: Vec::new(),
            max_outstanding_per_conn: 64,
            timeout: Duration::from_secs(1),
            seed: 1,
            class_probs: Vec::new(),
            yield_when_far: true,
            churn: None,
            writer_cpus: Vec::new(),
            spread: Vec::new(),
            share: (0, 1),
            start_at_mono_ns: None,
            flush_every: None,
        }
    }

    /// The address connection `c` goes to (see [`LoadConfig::spread`]).
    pub fn addr_of(&self, c: usize) -> SocketAddr {
        match self.spread.len() {
            0 => self.target.addr,
            n => self.spread[c % n],
        }
    }

    /// Generator threads actually used.
    pub fn effective_threads(&self) -> usize {
        self.threads.clamp(1, self.connections.max(1))
    }

    /// Checks everything that can be checked before any socket is opened.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |m: String| Err(LoadError::Config(m));
        let is_trace = matches!(self.arrival, model::ArrivalSpec::Trace(_));
        if !self.rate_per_s.is_finite() || self.rate_per_s < 0.0 {
            return bad(format!(
                "rate must be a finite number of requests/s, got {}",
                self.rate_per_s
            ));
        }
        if self.rate_per_s == 0.0 && !is_trace {
            return bad("rate must be positive (0 is only meaningful for trace replay)".into());
        }
        if self.connections == 0 {
            return bad("connections must be at least 1".into());
        }
        if self.connections > u32::MAX as usize {
            return bad(format!("too many connections: {}", self.connections));
        }
        if self.threads == 0 {
            return bad("threads must be at least 1".into());
        }
        if self.spread.len() > self.connections {
            return bad(format!(
                "{} connections cannot reach {} addresses: give at least one connection per address",
                self.connections,
                self.spread.len()
            ));
        }
        if self.max_outstanding_per_conn == 0 {
            return bad("max outstanding requests per connection must be at least 1".into());
        }
        if self.timeout.is_zero() {
            return bad("timeout must be positive".into());
        }
        match self.stop {
            StopAt::Duration(d) if d.is_zero() => return bad("duration must be positive".into()),
            StopAt::Requests(0) => return bad("request count must be at least 1".into()),
            _ => {}
        }
        if let Some((lo, hi)) = self.churn {
            if lo == 0 || lo > hi {
                return bad(format!(
                    "churn needs 1 <= min <= max requests per connection, got {lo}..={hi}"
                ));
            }
        }
        let (share, shares) = self.share;
        if shares == 0 || share >= shares {
            return bad(format!(
                "share {share} of {shares}: needs 0 <= index < count"
            ));
        }
        if self.rate_per_s > MAX_RATE {
            return bad(format!(
                "rate {} req/s is beyond any generator (at most {MAX_RATE:.0e} req/s: one request every 10 ns)",
                self.rate_per_s
            ));
        }
        let online = host::placement::online_cpus();
        if let Some(c) = self
            .cpus
            .iter()
            .chain(&self.writer_cpus)
            .find(|&&c| c >= online)
        {
            return bad(format!(
                "cpu {c} does not exist (this host has {online} online CPUs)"
            ));
        }
        if !self.class_probs.is_empty() {
            if self.class_probs.len() > 256 {
                return bad(format!(
                    "at most 256 classes, got {}",
                    self.class_probs.len()
                ));
            }
            if let Some(p) = self
                .class_probs
                .iter()
                .find(|p| !(p.is_finite() && **p >= 0.0))
            {
                return bad(format!("class probabilities must be >= 0, got {p}"));
            }
            let sum: f64 = self.class_probs.iter().sum();
            if (sum - 1.0).abs() > 1e-6 {
                return bad(format!("class probabilities must sum to 1, got {sum}"));
            }
        }
        Ok(())
    }
}
