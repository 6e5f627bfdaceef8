//! The in-loop mode: on a host with no spare CPU, the load generator itself takes the samples,
//! each one in a gap between two sends that is longer than the sample will take.
//!
//! The generator asks two things before each wait: when the next sample is wanted
//! ([`PacedProbe::next_due_ns`]) and how long it may take ([`PacedProbe::cost_bound_ns`]). If the
//! sample is due and the next send is further away than the bound, it calls
//! [`PacedProbe::sample`]; otherwise it sends and asks again. Intervals that pass without a
//! sample for want of slack are counted as skipped: a run at a high rate gets a coarser series,
//! never a late generator. To keep such skips rare, the probe runs on its lean schedule (see
//! [`Probe`]): no sample reads more than one slow file, /proc/interrupts only at the first and
//! last sample (or, where a per-CPU hard-interrupt source was injected, its counts in every
//! sample instead).

use crate::config::{mono_now_ns, SampleCost};
use crate::probe::Probe;
use crate::sampler::Pace;
use crate::Series;
use std::time::Duration;

/// How many recent durations of each kind of sample (light, with a slow read) the bound looks at.
const RECENT: usize = 32;
/// Headroom on the bound: ×1.25 plus this (the clock reads and the generator's own check).
const MARGIN_NS: u64 = 5_000;

/// Recent durations of one kind of sample.
#[derive(Clone, Debug)]
struct Recent {
    ns: [u64; RECENT],
    len: usize,
    next: usize,
    /// [`Recent::typical_max`], kept up to date by `push`: the generator may ask for the
    /// bound before every send, a sample happens once per interval.
    typical: Option<u64>,
}

impl Recent {
    fn new() -> Recent {
        Recent {
            ns: [0; RECENT],
            len: 0,
            next: 0,
            typical: None,
        }
    }

    fn push(&mut self, ns: u64) {
        self.ns[self.next] = ns;
        self.next = (self.next + 1) % RECENT;
        self.len = (self.len + 1).min(RECENT);
        self.typical = self.typical_max();
    }

    /// The second largest of the recent durations (the largest when there is only one).
    /// The single largest is left out on purpose: a sample during which the generator's
    /// thread was preempted lasts milliseconds, and a bound that kept it would find no gap
    /// long enough for the next sample, which would then never come to replace it. Such a
    /// preemption would have delayed the send just as much without the sample.
    fn typical_max(&self) -> Option<u64> {
        let mut sorted = self.ns;
        let sorted = &mut sorted[..self.len];
        sorted.sort_unstable();
        match sorted.len() {
            0 => None,
            1 => Some(sorted[0]),
            n => Some(sorted[n - 2]),
        }
    }
}

/// A [`Probe`] sampled from the load generator's own loop, every `interval` when the
/// generator has the slack for it (see the module doc).
pub struct PacedProbe {
    probe: Probe,
    pace: Pace,
    /// Stand-ins for the two kinds before any sample of that kind was timed.
    first_light_ns: u64,
    first_slow_ns: u64,
    light: Recent,
    slow: Recent,
}

impl PacedProbe {
    /// Put the probe on its lean schedule (see [`Probe`]: every sample cheap) and take the
    /// baseline sample at `now_mono_ns` (it reads everything; the durations of its reads give
    /// the first cost bounds). The first sample is then due one `interval` later. An interval
    /// under 1 µs is taken as 1 µs.
    pub fn new(mut probe: Probe, interval: Duration, now_mono_ns: u64) -> Self {
        probe.set_lean();
        probe.sample(now_mono_ns);
        let (first_light_ns, first_slow_ns) = probe.first_bounds();
        PacedProbe {
            probe,
            pace: Pace::new(interval, now_mono_ns),
            first_light_ns,
            first_slow_ns,
            light: Recent::new(),
            slow: Recent::new(),
        }
    }

    /// When the next sample is wanted: absolute CLOCK_MONOTONIC ns.
    pub fn next_due_ns(&self) -> u64 {
        self.pace.due_ns()
    }

    /// A conservative bound on how long the next sample will take, ns: 1.25 × the typical
    /// maximum of the recent samples of its kind (light, or with a slow read) plus 5 µs;
    /// before any sample of that kind, the baseline's reads stand in for it (its every-sample
    /// reads, plus its longest single slow read).
    pub fn cost_bound_ns(&self) -> u64 {
        let (recent, first) = if self.probe.next_reads_slow() {
            (&self.slow, self.first_slow_ns)
        } else {
            (&self.light, self.first_light_ns)
        };
        let ns = recent.typical.unwrap_or(first);
        ns.saturating_add(ns / 4).saturating_add(MARGIN_NS)
    }

    /// Take the sample due (the caller has checked its slack). Whole intervals that passed
    /// since the due instant without a sample are counted as skipped.
    pub fn sample(&mut self, now_mono_ns: u64) {
        let missed = self.pace.taken(now_mono_ns);
        self.probe.add_skipped(missed);
        self.probe.sample(now_mono_ns);
        let (ns, slow) = self.probe.last_sample();
        if slow {
            self.slow.push(ns);
        } else {
            self.light.push(ns);
        }
    }

    /// What the samples so far cost, and how many intervals were skipped.
    pub fn cost(&self) -> SampleCost {
        self.probe.cost()
    }

    /// End of the run: a closing sample of everything now (the load has stopped, so its cost no
    /// longer matters), then the series and what it cost.
    pub fn finish(self) -> (Series, SampleCost) {
        self.finish_at(mono_now_ns())
    }

    /// [`finish`](PacedProbe::finish) with the closing sample filed under `now_mono_ns` (for
    /// a caller with its own clock, and for tests).
    pub fn finish_at(mut self, now_mono_ns: u64) -> (Series, SampleCost) {
        let missed = self.pace.taken(now_mono_ns);
        self.probe.add_skipped(missed);
        self.probe.sample_full(now_mono_ns);
        let cost = self.probe.cost();
        (self.probe.finish(), cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_typical_max_leaves_out_one_outlier() {
        let mut r = Recent::new();
        assert_eq!(r.typical_max(), None);
        r.push(10);
        assert_eq!(r.typical_max(), Some(10));
        r.push(5_000_000);
        r.push(12);
        assert_eq!(r.typical_max(), Some(12));
        // Old durations age out.
        for _ in 0..RECENT {
            r.push(7);
        }
        assert_eq!(r.typical_max(), Some(7));
        assert_eq!(r.typical, Some(7));
    }
}
