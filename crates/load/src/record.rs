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
}

/// One per request. All times are integer ns since the run's start on CLOCK_MONOTONIC
/// (the start instant itself is [`RunRecords::start_mono_ns`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// When the schedule said the request should be sent.
    pub intended_ns: u64,
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
}

impl RequestRecord {
    /// A scheduled request that has not been sent yet (outcome `Dropped` until it is).
    pub fn scheduled(intended_ns: u64, class: u8) -> Self {
        RequestRecord {
            intended_ns,
            sent_ns: 0,
            received_ns: 0,
            kernel_rx_ns: 0,
            conn: 0,
            class,
            outcome: Outcome::Dropped,
            stamps: [0; 6],
        }
    }

    /// Latency as an open-loop user sees it: received − intended, for `Ok` requests only.
    pub fn latency_ns(&self) -> Option<u64> {
        (self.outcome == Outcome::Ok && self.received_ns != 0)
            .then(|| self.received_ns.saturating_sub(self.intended_ns))
    }

    /// How late the generator sent it: sent − intended, for requests that were sent.
    pub fn lateness_ns(&self) -> Option<u64> {
        (self.sent_ns != 0).then(|| self.sent_ns.saturating_sub(self.intended_ns))
    }
}

/// Everything one open-loop run produced.
#[derive(Clone, Debug, Default)]
pub struct RunRecords {
    /// The run's time origin, absolute CLOCK_MONOTONIC ns.
    pub start_mono_ns: u64,
    /// One record per scheduled request, in intended-time order.
    pub records: Vec<RequestRecord>,
    /// Requests with `intended_ns < warmup_ns` belong to the warm-up (analysis skips them).
    pub warmup_ns: u64,
    /// The stop flag ended the run early.
    pub interrupted: bool,
    /// The first few distinct connection errors seen during the run, for the user.
    pub errors: Vec<String>,
    /// Connections opened during the run: reconnects after failures, and in churn mode
    /// every connection (the ones opened before the run are not counted).
    pub connects: u64,
    /// Ok replies that were misses (memcached `END`, Redis nil; an HTTP 404 is an error, not a miss).
    pub misses: u64,
}

impl RunRecords {
    /// Records after the warm-up.
    pub fn measured(&self) -> impl Iterator<Item = &RequestRecord> {
        let w = self.warmup_ns;
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

    #[test]
    fn a_record_stays_under_100_bytes() {
        assert!(std::mem::size_of::<RequestRecord>() <= 96);
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
        assert_eq!(r.latency_ns(), None);
        r.outcome = Outcome::Ok;
        // Latency counts from the intended time, not the send time.
        assert_eq!(r.latency_ns(), Some(4_000));
    }
}
