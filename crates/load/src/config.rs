//! The validated description of one open-loop run.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

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

/// What the generator does with the requests that fell due while it was stalled (issue 37).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "policy")]
pub enum Overdue {
    /// Send them at once: the user view counts every request from its intended time (right
    /// for it), but the server sees the backlog as a burst the process asked for lacks.
    CatchUp,
    /// Skip (never send) a request seen due later than `bound_ns`: the server sees the
    /// process thinned; the user view says how many were skipped.
    Shed { bound_ns: u64 },
    /// Send the backlog at most `factor` × the thread's mean rate until caught up: the
    /// server sees a smoothed burst, the user view waits longer.
    Pace { factor: f64 },
}

impl Overdue {
    /// `catch-up`, `shed:1ms`, `pace:2x`.
    pub fn parse(s: &str) -> Result<Overdue, String> {
        let s = s.trim();
        if s == "catch-up" {
            return Ok(Overdue::CatchUp);
        }
        if let Some(b) = s.strip_prefix("shed:") {
            let ns = model::parse_duration_ns(b.trim()).map_err(|e| format!("shed:{b}: {e}"))?;
            if !(ns.is_finite() && ns >= 1_000.0) {
                return Err(format!("shed:{b}: the bound must be at least 1us"));
            }
            return Ok(Overdue::Shed {
                bound_ns: ns as u64,
            });
        }
        if let Some(f) = s.strip_prefix("pace:") {
            let x: f64 = f
                .trim()
                .trim_end_matches('x')
                .parse()
                .map_err(|_| format!("pace:{f}: a factor such as 2x"))?;
            if !(x.is_finite() && x > 1.0 && x <= 100.0) {
                return Err(format!(
                    "pace:{f}: the factor must be above 1 and at most 100"
                ));
            }
            return Ok(Overdue::Pace { factor: x });
        }
        Err(format!(
            "{s}: catch-up, shed:DURATION (e.g. shed:1ms) or pace:FACTOR (e.g. pace:2x)"
        ))
    }
}

impl std::str::FromStr for Overdue {
    type Err = String;
    fn from_str(s: &str) -> Result<Overdue, String> {
        Overdue::parse(s)
    }
}

impl std::fmt::Display for Overdue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Overdue::CatchUp => write!(f, "catch-up"),
            Overdue::Shed { bound_ns } => {
                write!(
                    f,
                    "shed:{}",
                    model::format_duration_ns(*bound_ns as f64).replace(' ', "")
                )
            }
            Overdue::Pace { factor } => write!(f, "pace:{factor}x"),
        }
    }
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
    /// What the generator does with requests it sees due late (after a stall of its own).
    pub overdue: Overdue,
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
            overdue: Overdue::CatchUp,
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

#[cfg(test)]
mod tests {
    use super::Overdue;

    #[test]
    fn overdue_policies_parse_print_and_refuse_nonsense() {
        assert_eq!(Overdue::parse("catch-up"), Ok(Overdue::CatchUp));
        assert_eq!(
            Overdue::parse("shed:1ms"),
            Ok(Overdue::Shed {
                bound_ns: 1_000_000
            })
        );
        assert_eq!(Overdue::parse("pace:2x"), Ok(Overdue::Pace { factor: 2.0 }));
        assert_eq!(
            Overdue::parse("pace:1.5"),
            Ok(Overdue::Pace { factor: 1.5 })
        );
        for p in ["catch-up", "shed:250us", "pace:3x"] {
            let o = Overdue::parse(p).unwrap();
            assert_eq!(Overdue::parse(&o.to_string()), Ok(o), "{p} → {o}");
        }
        for bad in [
            "",
            "shed",
            "shed:",
            "shed:0s",
            "shed:-1ms",
            "shed:abc",
            "pace:1x",
            "pace:0",
            "pace:x",
            "pace:1000x",
            "skip",
        ] {
            assert!(Overdue::parse(bad).is_err(), "{bad:?}");
        }
    }
}
