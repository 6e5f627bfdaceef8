//! Request records: the engine's output, one per scheduled request.

use serde::{Deserialize, Serialize};

/// What became of one scheduled request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// A reply arrived and the server reported success.
    Ok,
    /// The server replied with an error, or the connection failed while the request was out.
    Error,
    /// Sent, but no reply within the configured timeout.
    Timeout,
    /// Never sent: no usable connection, it waited in the client backlog longer than the
    /// timeout, or the run ended (stop flag) before it could go out.
    Dropped,
    /// Never sent on purpose: the generator saw it due later than `--overdue shed:BOUND`
    /// allows (a stall of its own), so the server sees the process asked for, thinned.
    Skipped,
}

/// One per request. All times are integer ns since the run's start on CLOCK_MONOTONIC
/// (the start instant itself is [`RunRecords::start_mono_ns`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// When the schedule said the request should be sent.
    pub intended_ns: u64,
    /// When the generator's loop first saw it due (>= intended); 0 if the run ended first.
    /// `seen − intended` is the generator's own lateness (its thread did not run: a CPU
    /// stall, a slow loop iteration); `sent − seen` is the time it was held in the client
    /// because every connection already had its maximum in flight (the server's backlog).
    /// A request sent on the loop's first try has `seen = sent` (nothing held).
    pub seen_ns: u64,
    /// Stamped just before the write that carried it; 0 if never sent.
    pub sent_ns: u64,
    /// Stamped just after the read that completed its reply; 0 if none.
    pub received_ns: u64,
    /// Client-side kernel software receive stamp of that read; 0 if unavailable.
    pub kernel_rx_ns: u64,
    /// Index of the connection it was sent on; for a request never sent, the connection a
    /// trace assigned it, else 0.
    pub conn: u32,
    /// Request label (class), from the configured class probabilities.
    pub class: u8,
    /// What became of it.
    pub outcome: Outcome,
    /// Server T1..T6 in server CLOCK_MONOTONIC ns; 0 = missing.
    pub stamps: [u64; 6],
    /// Server: the end of the protocol stack — the request's data queued on its socket,
    /// before the application was woken (Tales of the Tail's T2, between our T1 and T2), in
    /// server CLOCK_MONOTONIC ns; 0 = not known (then T1→T2 is the stack and the wake-up
    /// together). Only the eBPF collector gives it.
    #[serde(default)]
    pub stack_ns: u64,
}

impl RequestRecord {
    /// A scheduled request that has not been sent yet (outcome `Dropped` until it is).
    pub fn scheduled(intended_ns: u64, class: u8) -> Self {
        RequestRecord {
            intended_ns,
            seen_ns: 0,
            sent_ns: 0,
            received_ns: 0,
            kernel_rx_ns: 0,
            conn: 0,
            class,
            outcome: Outcome::Dropped,
            stamps: [0; 6],
            stack_ns: 0,
        }
    }

    /// Latency as an open-loop user sees it: received − intended, for `Ok` requests only.
    pub fn latency_ns(&self) -> Option<u64> {
        (self.outcome == Outcome::Ok && self.received_ns != 0)
            .then(|| self.received_ns.saturating_sub(self.intended_ns))
    }

    /// How late it was sent: sent − intended, for requests that were sent. This is the
    /// generator's own lateness plus the time held in the client (see [`Self::seen_ns`]).
    pub fn send_delay_ns(&self) -> Option<u64> {
        (self.sent_ns != 0).then(|| self.sent_ns.saturating_sub(self.intended_ns))
    }

    /// The generator's own lateness: seen − intended (its thread was not running when the
    /// request fell due). Records without a `seen` stamp (older stores) fall back to
    /// sent − intended.
    pub fn lateness_ns(&self) -> Option<u64> {
        // A request skipped on purpose (`--overdue shed`) was never sent: its lateness is
        // the reason it was skipped, not a delay any sent request had.
        if self.outcome == Outcome::Skipped {
            return None;
        }
        if self.seen_ns != 0 {
            Some(self.seen_ns.saturating_sub(self.intended_ns))
        } else {
            self.send_delay_ns()
        }
    }

    /// Time held in the client for a free connection slot: sent − seen (0 when it went out
    /// as soon as it was seen); None when never sent or not stamped.
    pub fn held_ns(&self) -> Option<u64> {
        (self.sent_ns != 0 && self.seen_ns != 0).then(|| self.sent_ns.saturating_sub(self.seen_ns))
    }
}

#[cfg(any(test, feature = "test-fixtures"))]
impl RequestRecord {
    /// A test record answered `Ok` on connection `conn` with every field set, each stamp a
    /// fixed offset from its intended time `t` (class `t % 3`; server stamps T1..T5 and the
    /// stack's end, no T6):
    /// what a round trip through the store's columns must give back whole.
    pub fn fixture(t: u64, conn: u32) -> RequestRecord {
        RequestRecord {
            seen_ns: t + 1,
            sent_ns: t + 2,
            received_ns: t + 50,
            kernel_rx_ns: t + 40,
            conn,
            outcome: Outcome::Ok,
            stamps: [t + 9, t + 11, t + 12, t + 13, t + 14, 0],
            stack_ns: t + 10,
            ..RequestRecord::scheduled(t, (t % 3) as u8)
        }
    }
}

/// The in-flight and held requests at one instant of a run (summed over generator threads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BacklogSample {
    /// Run-relative time, ns.
    pub t_ns: u64,
    /// Requests sent and not yet answered.
    pub in_flight: u64,
    /// Requests due but held in the client because every connection had its maximum in
    /// flight (the server's backlog spilling into the client).
    pub held: u64,
}

/// What the record writer (the thread that hands records to the sink) did and cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriterStats {
    /// Chunks and records handed to the sink.
    pub chunks: u64,
    pub records: u64,
    /// The writer thread's own CPU time (CLOCK_THREAD_CPUTIME_ID), ns.
    pub cpu_ns: u64,
    /// CPUs it was pinned to (empty: wherever the kernel put it, at SCHED_IDLE).
    pub cpus: Vec<usize>,
    /// Its scheduling policy while idle-class, and how often a backlog of chunks made it
    /// step up to normal priority to catch up (each time reported, never silent).
    pub policy: String,
    pub escalations: u64,
    /// Most chunks waiting for it at once.
    pub max_queued_chunks: u64,
}

/// Everything an open-loop run produced besides the records themselves (which went to the
/// sink as the run went). The same facts describe a run's load wherever it was sent from:
/// `lab::LoadFacts` is this type (stored with every run), and an agent reports its share in it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run's time origin, absolute CLOCK_MONOTONIC ns.
    pub start_mono_ns: u64,
    /// Requests with `intended_ns < warmup_ns` belong to the warm-up (analysis skips them).
    pub warmup_ns: u64,
    /// The stop flag ended the run early (absent in runs stored before it was kept).
    #[serde(default)]
    pub interrupted: bool,
    /// The first few distinct connection errors seen during the run, for the user.
    pub errors: Vec<String>,
    /// Connections opened during the run: reconnects after failures, and in churn mode
    /// every connection (the ones opened before the run are not counted).
    pub connects: u64,
    /// Ok replies that were misses (memcached `END`, Redis nil; an HTTP 404 is an error, not a miss).
    pub misses: u64,
    /// Error replies counted by the code they carried ("gRPC UNIMPLEMENTED (12)", "HTTP 503",
    /// "RST_STREAM REFUSED_STREAM"); absent when there was none.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub error_codes: std::collections::BTreeMap<String, u64>,
    /// Records handed to the sink (one per scheduled request that fell due).
    pub records: u64,
    /// In-flight and held requests, sampled about every 100 ms.
    pub backlog: Vec<BacklogSample>,
    /// How long the run took after its last scheduled request fell due until every request
    /// was answered, timed out or dropped (a saturated server's backlog draining), ns.
    pub drain_ns: u64,
    pub writer: WriterStats,
    /// What the generator's loops cost and how they caught up after the host's stalls (the
    /// agents' added up for a run they sent; absent in runs stored before it was measured).
    #[serde(default)]
    pub generator: crate::engine::cost::GeneratorCost,
    /// This process's threads as seen once early in the measured part: where each may run
    /// and last ran (empty in runs stored before it was read, and for agents' runs).
    #[serde(default)]
    pub threads: Vec<host::threads::ThreadPlace>,
    /// The TLS handshakes of the run's connections, counted apart from its requests (absent
    /// without TLS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::tls::TlsStats>,
}

impl RunSummary {
    /// One line of the error replies by code, most frequent first (None without any).
    pub fn error_codes_line(&self) -> Option<String> {
        if self.error_codes.is_empty() {
            return None;
        }
        let mut v: Vec<(&String, &u64)> = self.error_codes.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let parts: Vec<String> = v.iter().map(|(c, n)| format!("{c} ×{n}")).collect();
        Some(format!("error replies: {}", parts.join(", ")))
    }

    /// Adds `counts` (another share's or slice's error replies by code) to this run's.
    pub fn add_error_codes<'a>(&mut self, counts: impl IntoIterator<Item = (&'a String, &'a u64)>) {
        for (code, n) in counts {
            *self.error_codes.entry(code.clone()).or_default() += n;
        }
    }
}

/// Everything one open-loop run produced, records kept in memory (see [`crate::run_open_loop`];
/// long runs stream them to a sink with [`crate::run_open_loop_into`] instead).
#[derive(Clone, Debug, Default)]
pub struct RunRecords {
    pub summary: RunSummary,
    /// One record per scheduled request, in intended-time order.
    pub records: Vec<RequestRecord>,
}

impl std::ops::Deref for RunRecords {
    type Target = RunSummary;
    fn deref(&self) -> &RunSummary {
        &self.summary
    }
}

impl std::ops::DerefMut for RunRecords {
    fn deref_mut(&mut self) -> &mut RunSummary {
        &mut self.summary
    }
}

impl RunRecords {
    /// Records after the warm-up.
    pub fn measured(&self) -> impl Iterator<Item = &RequestRecord> {
        let w = self.summary.warmup_ns;
        self.records.iter().filter(move |r| r.intended_ns >= w)
    }

    /// Count of records with the given outcome (warm-up included).
    pub fn count(&self, outcome: Outcome) -> usize {
        self.records.iter().filter(|r| r.outcome == outcome).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size is pinned: records are held a chunk per generator thread. It was 96 bytes
    /// (94 used) until the protocol stack's end (`stack_ns`) took 8 more.
    #[test]
    fn a_record_stays_within_104_bytes() {
        assert!(std::mem::size_of::<RequestRecord>() <= 104);
    }

    #[test]
    fn latency_and_lateness() {
        let mut r = RequestRecord::scheduled(1_000, 2);
        assert_eq!(r.latency_ns(), None);
        assert_eq!(r.lateness_ns(), None);
        r.sent_ns = 1_300;
        r.received_ns = 5_000;
        r.outcome = Outcome::Timeout;
        assert_eq!(r.lateness_ns(), Some(300));
        assert_eq!(r.held_ns(), None);
        // Seen 100 ns late, then held 200 ns for a free connection.
        r.seen_ns = 1_100;
        assert_eq!(r.lateness_ns(), Some(100));
        assert_eq!(r.held_ns(), Some(200));
        assert_eq!(r.send_delay_ns(), Some(300));
        assert_eq!(r.latency_ns(), None);
        r.outcome = Outcome::Ok;
        // Latency counts from the intended time, not the send time.
        assert_eq!(r.latency_ns(), Some(4_000));
    }
}
