//! One arm's slices on their way to the store and to the paired estimate: [`SliceSink`]
//! takes a slice's records from the engine (on its writer thread), leaves out the slice's
//! settle time, records both views' latencies into the [`Paired`] recorders under the pair's
//! index, and stores the records in the arm's run on one timeline (each slice shifted by its
//! start's distance from the arm's first slice), so that the arm's run is an ordinary run
//! whose analysis sees the gaps between its slices as idle time. [`ArmFacts`] adds the
//! slices' load facts up into the arm run's.

use std::net::SocketAddr;

use load::{RecordSink, RequestRecord, RunSummary};

use super::paired::{Arm, Paired, SliceFacts, SLICE_PERCENTILES};
use analysis::server_latency;
use measurement::records::StoreSink;
use measurement::view::View;

/// A record moved `shift` ns later on its run's timeline (unset times stay unset; the
/// server's stamps are on its own clock and stay as they are).
fn shifted(r: &RequestRecord, shift: u64) -> RequestRecord {
    let at = |t: u64| if t == 0 { 0 } else { t + shift };
    RequestRecord {
        intended_ns: r.intended_ns + shift,
        seen_ns: at(r.seen_ns),
        sent_ns: at(r.sent_ns),
        received_ns: at(r.received_ns),
        kernel_rx_ns: at(r.kernel_rx_ns),
        ..*r
    }
}

/// The q-quantile of sorted values (nearest rank), µs; NaN when empty.
fn quantile_us(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1e3
}

/// One slice of one arm being sent.
pub(crate) struct SliceSink<'a> {
    pub store: &'a mut StoreSink,
    pub paired: &'a mut Paired,
    pub pair: u32,
    pub arm: Arm,
    /// The arm's time zero (its first slice's start), absolute CLOCK_MONOTONIC ns; set by
    /// the first slice.
    pub origin: &'a mut Option<u64>,
    /// Requests intended before this (slice-relative) are the settle time: not counted.
    pub settle_ns: u64,
    /// This slice's start, absolute CLOCK_MONOTONIC ns.
    pub start: u64,
    /// Records stored (counted).
    pub stored: u64,
    user: Vec<u64>,
    server: Vec<u64>,
    lateness: Vec<u64>,
    failed: u64,
    buf: Vec<RequestRecord>,
}

impl<'a> SliceSink<'a> {
    pub fn new(
        store: &'a mut StoreSink,
        paired: &'a mut Paired,
        origin: &'a mut Option<u64>,
        pair: u32,
        arm: Arm,
        settle_ns: u64,
    ) -> Self {
        SliceSink {
            store,
            paired,
            pair,
            arm,
            origin,
            settle_ns,
            start: 0,
            stored: 0,
            user: Vec::new(),
            server: Vec::new(),
            lateness: Vec::new(),
            failed: 0,
            buf: Vec::new(),
        }
    }

    /// This slice's shift onto the arm's timeline, ns.
    pub fn shift(&self) -> u64 {
        self.origin.map_or(0, |o| self.start.saturating_sub(o))
    }

    /// What the slice measured.
    pub fn facts(mut self) -> SliceFacts {
        for v in [&mut self.user, &mut self.server, &mut self.lateness] {
            v.sort_unstable();
        }
        let each = |v: &[u64]| -> Vec<f64> {
            SLICE_PERCENTILES
                .iter()
                .map(|(_, q)| quantile_us(v, *q))
                .collect()
        };
        SliceFacts {
            requests: self.stored,
            ok: self.user.len() as u64,
            failed: self.failed,
            lateness_p99_us: quantile_us(&self.lateness, 0.99),
            user_us: each(&self.user),
            server_us: each(&self.server),
        }
    }
}

impl RecordSink for SliceSink<'_> {
    fn write(&mut self, thread: usize, records: &[RequestRecord]) -> Result<(), String> {
        let shift = self.shift();
        self.buf.clear();
        for r in records.iter().filter(|r| r.intended_ns >= self.settle_ns) {
            match r.latency_ns() {
                Some(l) => {
                    self.paired.record(self.pair, self.arm, View::User, l);
                    self.user.push(l);
                    if let Some(s) = server_latency(r) {
                        self.paired.record(self.pair, self.arm, View::Server, s);
                        self.server.push(s);
                    }
                }
                None => self.failed += 1,
            }
            if let Some(l) = r.lateness_ns() {
                self.lateness.push(l);
            }
            self.buf.push(shifted(r, shift));
        }
        self.stored += self.buf.len() as u64;
        if self.buf.is_empty() {
            return Ok(());
        }
        self.store.write(thread, &self.buf)
    }

    fn started(&mut self, start_mono_ns: u64) {
        self.start = start_mono_ns;
        if self.origin.is_none() {
            *self.origin = Some(start_mono_ns);
        }
    }

    fn connected(&mut self, _conn: u32, _local: SocketAddr, _at_mono_ns: u64) {}
}

/// A sink that keeps nothing (the warm-up before the first pair).
pub(crate) struct Discard;

impl RecordSink for Discard {
    fn write(&mut self, _thread: usize, _records: &[RequestRecord]) -> Result<(), String> {
        Ok(())
    }
}

/// An arm's load facts, its slices' added up onto its timeline.
#[derive(Default)]
pub(crate) struct ArmFacts {
    pub summary: RunSummary,
    slices: u32,
}

/// The first few distinct connection errors a run keeps.
const MAX_ERRORS: usize = 8;

impl ArmFacts {
    /// Adds a slice's facts: `shift` places it on the arm's timeline, `stored` is the records
    /// it kept (those after its settle time), `settle_ns` its settle time.
    pub fn add(&mut self, s: &RunSummary, shift: u64, stored: u64, settle_ns: u64) {
        let a = &mut self.summary;
        if self.slices == 0 {
            a.start_mono_ns = s.start_mono_ns;
        }
        self.slices += 1;
        a.interrupted |= s.interrupted;
        for e in &s.errors {
            if a.errors.len() < MAX_ERRORS && !a.errors.contains(e) {
                a.errors.push(e.clone());
            }
        }
        a.connects += s.connects;
        a.misses += s.misses;
        a.add_error_codes(&s.error_codes);
        a.records += stored;
        a.backlog
            .extend(s.backlog.iter().filter(|b| b.t_ns >= settle_ns).map(|b| {
                load::BacklogSample {
                    t_ns: b.t_ns + shift,
                    ..*b
                }
            }));
        a.drain_ns = a.drain_ns.max(s.drain_ns);
        let w = &mut a.writer;
        w.chunks += s.writer.chunks;
        w.records += s.writer.records;
        w.cpu_ns += s.writer.cpu_ns;
        w.escalations += s.writer.escalations;
        w.max_queued_chunks = w.max_queued_chunks.max(s.writer.max_queued_chunks);
        w.cpus.clone_from(&s.writer.cpus);
        w.policy.clone_from(&s.writer.policy);
        let threads = s.generator.threads;
        a.generator.add(&s.generator);
        // The same threads each slice: their count is one slice's, not the sum.
        a.generator.threads = threads;
    }

    pub fn slices(&self) -> u32 {
        self.slices
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shifted_record_keeps_unset_times_unset_and_server_stamps_as_they_are() {
        let mut r = RequestRecord::fixture(100, 2);
        r.kernel_rx_ns = 0;
        let s = shifted(&r, 1_000);
        assert_eq!(s.intended_ns, 1_100);
        assert_eq!(s.sent_ns, r.sent_ns + 1_000);
        assert_eq!(s.kernel_rx_ns, 0);
        assert_eq!(s.stamps, r.stamps);
        assert_eq!(s.latency_ns(), r.latency_ns());
        assert_eq!(server_latency(&s), server_latency(&r));
    }

    #[test]
    fn slice_quantiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).map(|x| x * 1000).collect();
        assert_eq!(quantile_us(&v, 0.5), 50.0);
        assert_eq!(quantile_us(&v, 0.99), 99.0);
        assert!(quantile_us(&[], 0.5).is_nan());
    }
}
