//! The first pass over a run's records (in intended-time order): everything that one look at
//! each record can accumulate in bounded memory — outcome counts, the distributions (bounded
//! recorders: exact for short runs, HdrHistogram beyond), the two ideals driven online, the
//! arrival-check reservoirs, the span.
//!
//! The server's view needs the arrivals in *sent* order, while records come in intended
//! order. Every request is sent at or after its intended time, so once the records have
//! reached intended time I, no request not yet seen can have been sent before I: a min-heap of
//! send times releases, in sent order, everything sent before the current intended time. It
//! holds only the requests sent later than the record being read (the rate times the longest
//! send delay, which the timeout bounds).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use load::{Outcome, RequestRecord};
use model::OnlineQueue;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use stats::{BlockedRecorder, Recorder};

use crate::{IdealSpec, Outcomes, QueueStructure, EXACT_LIMIT};

/// A uniform random sample of fixed size from a stream (Algorithm R), seeded.
pub(crate) struct Reservoir {
    pub values: Vec<f64>,
    seen: u64,
    cap: usize,
    rng: Xoshiro256PlusPlus,
}

impl Reservoir {
    pub fn new(cap: usize, seed: u64) -> Self {
        Reservoir {
            values: Vec::with_capacity(cap),
            seen: 0,
            cap,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    pub fn push(&mut self, v: f64) {
        self.seen += 1;
        if self.values.len() < self.cap {
            self.values.push(v);
        } else {
            let j = self.rng.gen_range(0..self.seen);
            if (j as usize) < self.cap {
                self.values[j as usize] = v;
            }
        }
    }
}

/// An ideal driven online: the queue, what it recorded, and the arrival span it saw.
pub(crate) struct OnlineIdeal {
    pub service_ns: f64,
    pub workers: u32,
    pub queue: OnlineQueue,
    pub response: Recorder,
    /// The responses by arrival time, for intervals that account for time.
    pub blocked: BlockedRecorder,
    /// False for a replay that only needs each response back (the second pass's windows):
    /// nothing is recorded.
    keep: bool,
    pub arrivals: u64,
    pub first: Option<u64>,
    pub last: u64,
}

impl OnlineIdeal {
    pub fn new(spec: &IdealSpec) -> Result<Self, model::ModelError> {
        let queue = match spec.queues {
            QueueStructure::Single => OnlineQueue::shared(spec.workers)?,
            QueueStructure::PerWorker => OnlineQueue::per_worker(spec.workers)?,
        };
        Ok(OnlineIdeal {
            service_ns: spec.service_ns,
            workers: spec.workers,
            queue,
            response: Recorder::bounded(EXACT_LIMIT),
            blocked: BlockedRecorder::default(),
            keep: true,
            arrivals: 0,
            first: None,
            last: 0,
        })
    }

    /// The same queue that records nothing: it only hands each response back.
    pub fn replay(spec: &IdealSpec) -> Result<Self, model::ModelError> {
        let mut i = Self::new(spec)?;
        i.keep = false;
        i.response = Recorder::exact(0);
        Ok(i)
    }

    /// One arrival (in time order); its response is recorded when `counted`, and returned
    /// (ns).
    pub fn push(&mut self, t: u64, conn: u32, counted: bool) -> u64 {
        let (_, resp) = self.queue.push(t as f64, conn, self.service_ns);
        let resp = resp.round() as u64;
        if counted && self.keep {
            self.response.record(resp);
            self.blocked.record(t, resp);
        }
        self.arrivals += 1;
        self.first.get_or_insert(t);
        self.last = t;
        resp
    }

    /// Offered load per worker over the arrivals seen: λ·S/c from their count and span.
    pub fn offered_load(&self) -> f64 {
        match self.first {
            Some(f) if self.last > f && self.arrivals > 1 => {
                let rate = (self.arrivals - 1) as f64 / (self.last - f) as f64;
                rate * self.service_ns / f64::from(self.workers)
            }
            _ => 0.0,
        }
    }
}

/// Everything the first pass accumulates.
pub(crate) struct First {
    warmup_ns: u64,
    pub ideal: Option<OnlineIdeal>,
    pub server_ideal: Option<OnlineIdeal>,
    /// Sent requests not yet released in sent order: (sent, conn, counted).
    pending: BinaryHeap<Reverse<(u64, u32, bool)>>,
    pub requests: u64,
    pub outcomes: Outcomes,
    pub measured: Recorder,
    pub per_class: BTreeMap<u8, Recorder>,
    /// The generator's own lateness (seen − intended).
    pub lateness: Recorder,
    /// The same three by time: measured and lateness by intended time, network_server by
    /// sent time (for intervals that account for time).
    pub measured_blk: BlockedRecorder,
    pub lateness_blk: BlockedRecorder,
    pub network_server_blk: BlockedRecorder,
    /// Time held in the client for a free connection (sent − seen), for sent requests.
    pub held: Recorder,
    /// Requests that waited at all for a free connection.
    pub held_requests: u64,
    /// Intended → sent (lateness plus held).
    pub send_delay: Recorder,
    /// Sent → kernel receive stamp (user-space receive when the kernel gave none): the path
    /// through the network and the server, without the client's own delays.
    pub network_server: Recorder,
    pub kernel_rx: u64,
    /// Kernel receive → user space.
    pub wake: Recorder,
    /// Latencies of the requests that carry the server's stamps (for the stage groups).
    pub stamped: Recorder,
    /// The server's own per-request stages from its stamps: read (T2→T3), work (T3→T4),
    /// encode (T4→T5), write (T5→T6).
    pub server_stages: [Recorder; 4],
    pub sent_count: u64,
    sent_min: u64,
    sent_max: u64,
    last_sent_counted: Option<u64>,
    pub sent_gaps: Reservoir,
    pub min_sent_gap: Option<u64>,
    pub first_intended: Option<u64>,
    pub last_intended: Option<u64>,
    pub intended_count: u64,
    pub intended_gaps: Reservoir,
    /// First intended send and last completion of the successful measured requests.
    pub span: Option<(u64, u64)>,
    start_mono_ns: Option<u64>,
}

/// How many gaps the exponential check looks at (see `ArrivalCheck::n`).
const AD_SAMPLE: usize = 2000;

impl First {
    pub fn new(
        warmup_ns: u64,
        ideal: Option<&IdealSpec>,
        seed: u64,
        start_mono_ns: Option<u64>,
    ) -> Result<Self, model::ModelError> {
        let b = || Recorder::bounded(EXACT_LIMIT);
        Ok(First {
            warmup_ns,
            ideal: ideal.map(OnlineIdeal::new).transpose()?,
            server_ideal: ideal.map(OnlineIdeal::new).transpose()?,
            pending: BinaryHeap::new(),
            requests: 0,
            outcomes: Outcomes::default(),
            measured: b(),
            per_class: BTreeMap::new(),
            lateness: b(),
            measured_blk: BlockedRecorder::default(),
            lateness_blk: BlockedRecorder::default(),
            network_server_blk: BlockedRecorder::default(),
            held: b(),
            held_requests: 0,
            send_delay: b(),
            network_server: b(),
            kernel_rx: 0,
            wake: b(),
            stamped: b(),
            server_stages: [b(), b(), b(), b()],
            sent_count: 0,
            sent_min: u64::MAX,
            sent_max: 0,
            last_sent_counted: None,
            sent_gaps: Reservoir::new(AD_SAMPLE, seed ^ 0xAD),
            min_sent_gap: None,
            first_intended: None,
            last_intended: None,
            intended_count: 0,
            intended_gaps: Reservoir::new(AD_SAMPLE, seed ^ 0xAD),
            span: None,
            start_mono_ns,
        })
    }

    /// Takes one record (records arrive in intended-time order).
    pub fn add(&mut self, r: &RequestRecord) {
        let counted = r.intended_ns >= self.warmup_ns;
        // Every scheduled request reaches the ideal server at its intended time.
        if let Some(i) = &mut self.ideal {
            let _ = i.push(r.intended_ns, r.conn, counted);
        }
        self.release(r.intended_ns);
        if r.sent_ns > 0 {
            self.pending.push(Reverse((r.sent_ns, r.conn, counted)));
        }
        if !counted {
            return;
        }
        self.requests += 1;
        match r.outcome {
            Outcome::Ok => self.outcomes.ok += 1,
            Outcome::Error => self.outcomes.error += 1,
            Outcome::Timeout => self.outcomes.timeout += 1,
            Outcome::Dropped => self.outcomes.dropped += 1,
            Outcome::Skipped => self.outcomes.skipped += 1,
        }
        self.first_intended.get_or_insert(r.intended_ns);
        if let Some(p) = self.last_intended.replace(r.intended_ns) {
            self.intended_gaps.push((r.intended_ns - p) as f64);
        }
        self.intended_count += 1;
        if let Some(l) = r.lateness_ns() {
            self.lateness.record(l);
            self.lateness_blk.record(r.intended_ns, l);
        }
        if let Some(h) = r.held_ns() {
            self.held.record(h);
            self.held_requests += u64::from(h > 0);
        }
        if let Some(d) = r.send_delay_ns() {
            self.send_delay.record(d);
        }
        if let Some(l) = r.latency_ns() {
            self.measured.record(l);
            self.measured_blk.record(r.intended_ns, l);
            self.per_class
                .entry(r.class)
                .or_insert_with(|| Recorder::bounded(EXACT_LIMIT))
                .record(l);
            let end = r.intended_ns + l;
            self.span = Some(match self.span {
                Some((lo, hi)) => (lo.min(r.intended_ns), hi.max(end)),
                None => (r.intended_ns, end),
            });
            let arrived = if r.kernel_rx_ns > 0 {
                self.kernel_rx += 1;
                if r.received_ns >= r.kernel_rx_ns {
                    self.wake.record(r.received_ns - r.kernel_rx_ns);
                }
                r.kernel_rx_ns
            } else {
                r.received_ns
            };
            let ns = arrived.saturating_sub(r.sent_ns);
            self.network_server.record(ns);
            self.network_server_blk.record(r.sent_ns, ns);
            if let Some(iv) = crate::stages::intervals(r, self.start_mono_ns) {
                self.stamped.record(l);
                for (rec, v) in self.server_stages.iter_mut().zip(&iv[3..7]) {
                    if let Some(v) = v {
                        rec.record(*v);
                    }
                }
            }
        }
    }

    /// Releases, in sent order, every request sent at or before `upto` (no later record can
    /// have been sent before its own intended time, which is at least `upto`).
    fn release(&mut self, upto: u64) {
        while let Some(&Reverse((sent, conn, counted))) = self.pending.peek() {
            if sent > upto {
                break;
            }
            self.pending.pop();
            if let Some(i) = &mut self.server_ideal {
                let _ = i.push(sent, conn, counted);
            }
            if counted {
                self.sent_count += 1;
                self.sent_min = self.sent_min.min(sent);
                self.sent_max = self.sent_max.max(sent);
                if let Some(p) = self.last_sent_counted.replace(sent) {
                    let g = sent - p;
                    self.sent_gaps.push(g as f64);
                    self.min_sent_gap = Some(self.min_sent_gap.map_or(g, |m| m.min(g)));
                }
            }
        }
    }

    /// Releases the rest once every record has been read.
    pub fn finish(&mut self) {
        self.release(u64::MAX);
    }

    /// Requests actually sent per second over the span of their send times.
    pub fn achieved_rate_rps(&self) -> f64 {
        if self.sent_count > 1 && self.sent_max > self.sent_min {
            (self.sent_count - 1) as f64 * 1e9 / (self.sent_max - self.sent_min) as f64
        } else {
            0.0
        }
    }
}
