//! The bridge from the simulator to `stats`: a [`Sink`] that drops the warm-up requests and
//! records response and wait times, overall and per class, in `stats::Recorder`s.

use stats::Recorder;

use crate::sim::{Completion, Sink};

/// Records simulated latencies after the warm-up.
#[derive(Debug)]
pub struct Collector {
    /// Requests with an arrival index below this are warm-up and not recorded.
    warmup: u64,
    response: Recorder,
    wait: Recorder,
    /// Per-class recorders; empty when there is a single class (the overall ones serve).
    class_response: Vec<Recorder>,
    class_wait: Vec<Recorder>,
    sum_response_ns: f64,
    sum_wait_ns: f64,
    recorded: u64,
}

/// Rounds a non-negative time to whole nanoseconds (negatives from rounding error become 0).
#[inline(always)]
fn to_ns(x: f64) -> u64 {
    if x > 0.0 {
        (x + 0.5) as u64
    } else {
        0
    }
}

impl Collector {
    /// A collector for a run of `total_requests`, discarding the first
    /// `⌊warmup_fraction·total⌋`, with `classes` classes (1 or more). Recorders are exact
    /// when the number kept is at most `exact_limit`, else streaming histograms.
    pub fn new(
        total_requests: u64,
        warmup_fraction: f64,
        classes: usize,
        exact_limit: u64,
    ) -> Self {
        let frac = if warmup_fraction.is_finite() {
            warmup_fraction.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let warmup = ((total_requests as f64 * frac) as u64).min(total_requests);
        let kept = total_requests - warmup;
        let per_class = || {
            if kept <= exact_limit {
                Recorder::exact(0)
            } else {
                Recorder::for_count(u64::MAX, 0)
            }
        };
        let k = if classes > 1 { classes } else { 0 };
        Self {
            warmup,
            response: Recorder::for_count(kept, exact_limit),
            wait: Recorder::for_count(kept, exact_limit),
            class_response: (0..k).map(|_| per_class()).collect(),
            class_wait: (0..k).map(|_| per_class()).collect(),
            sum_response_ns: 0.0,
            sum_wait_ns: 0.0,
            recorded: 0,
        }
    }

    /// Response times (arrival to completion) of all recorded requests.
    pub fn response(&mut self) -> &mut Recorder {
        &mut self.response
    }

    /// Waiting times (time not in service) of all recorded requests.
    pub fn wait(&mut self) -> &mut Recorder {
        &mut self.wait
    }

    /// Response times of one class (with a single class, class 0 is everything).
    pub fn class_response(&mut self, class: usize) -> Option<&mut Recorder> {
        if self.class_response.is_empty() {
            (class == 0).then_some(&mut self.response)
        } else {
            self.class_response.get_mut(class)
        }
    }

    /// Waiting times of one class (with a single class, class 0 is everything).
    pub fn class_wait(&mut self, class: usize) -> Option<&mut Recorder> {
        if self.class_wait.is_empty() {
            (class == 0).then_some(&mut self.wait)
        } else {
            self.class_wait.get_mut(class)
        }
    }

    /// Mean response time in ns (unrounded), NaN when nothing was recorded.
    pub fn mean_response_ns(&self) -> f64 {
        self.sum_response_ns / self.recorded as f64
    }

    /// Mean waiting time in ns (unrounded), NaN when nothing was recorded.
    pub fn mean_wait_ns(&self) -> f64 {
        self.sum_wait_ns / self.recorded as f64
    }

    /// Requests recorded (after the warm-up).
    pub fn recorded(&self) -> u64 {
        self.recorded
    }

    /// Requests discarded as warm-up (by arrival index).
    pub fn warmup_requests(&self) -> u64 {
        self.warmup
    }
}

impl Sink for Collector {
    #[inline(always)]
    fn record(&mut self, c: &Completion) {
        if c.index < self.warmup {
            return;
        }
        let (r, w) = (to_ns(c.response_ns), to_ns(c.wait_ns));
        self.response.record(r);
        self.wait.record(w);
        if let (Some(rc), Some(wc)) = (
            self.class_response.get_mut(usize::from(c.class)),
            self.class_wait.get_mut(usize::from(c.class)),
        ) {
            rc.record(r);
            wc.record(w);
        }
        self.sum_response_ns += c.response_ns;
        self.sum_wait_ns += c.wait_ns;
        self.recorded += 1;
    }
}
