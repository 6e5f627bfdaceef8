//! What a generator thread's loop costs, and how it recovers from the host's stalls.
//!
//! The loop reads the clock before every send and for every reply, so consecutive reads are
//! one operation apart (a system call, an encode, a decode): microseconds. A gap between two
//! reads longer than [`STALL_NS`] that the loop did not ask for (it sleeps in `epoll_wait` when
//! the next send is far, and runs the slack task in its gaps) is time the thread did not run —
//! the host took the CPU — and is counted as a stall. Requests that fell due during a stall are
//! its backlog; the catch-up is the time from the stall's end until the last of them is sent.
//!
//! The loop's work (building, sending, receiving, recording) is the wall time of the
//! iterations that sent or read something, less their stalls and deliberate waits: with
//! stalls taken out, wall time is the thread's running time, read from the clock the loop
//! reads anyway (a per-iteration CPU-time system call would cost more than it measures).

use std::cell::Cell;

use serde::{Deserialize, Serialize};

/// A gap between two of the loop's clock reads longer than this, not asked for, is a stall.
pub const STALL_NS: u64 = 50_000;

/// The generator's cost and catch-up over a run (all its threads).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GeneratorCost {
    /// Generator threads whose figures are summed here.
    pub threads: u32,
    /// Requests written (first attempts) and replies read.
    pub sends: u64,
    pub replies: u64,
    /// Write system calls that carried them (TCP writes, UDP `sendmmsg` calls): fewer than
    /// the sends when requests due together go out together (absent in runs stored before
    /// it was counted).
    #[serde(default)]
    pub writes: u64,
    /// Running time of the loop's work (see the module doc), ns.
    pub busy_ns: u64,
    /// The threads' whole CPU time (CLOCK_THREAD_CPUTIME_ID), spinning included, ns.
    pub thread_cpu_ns: u64,
    /// Stalls of the loop (gaps over [`STALL_NS`] it did not ask for): how many, their total
    /// and the longest, ns.
    pub stalls: u64,
    pub stalled_ns: u64,
    pub longest_stall_ns: u64,
    /// Requests that fell due during a stall (sent late by up to its length).
    pub due_in_stalls: u64,
    /// Stalls that left requests due, and the time from their end until the last of those
    /// was sent: total and longest, ns.
    pub catch_ups: u64,
    pub catch_up_ns: u64,
    pub longest_catch_up_ns: u64,
    /// Pauses injected by the catch-up benchmark (a testing knob, see `engine::inject`; empty
    /// in every ordinary run, and then absent from the serialized form).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub injected_pauses: Vec<InjectedPause>,
}

/// One pause injected into a generator thread's loop (a testing knob standing in for a host
/// stall of a known length) and how the loop recovered from it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InjectedPause {
    /// How long the loop did not run, from its clock (the asked length plus the wake-up), ns.
    pub pause_ns: u64,
    /// Requests that fell due during the pause.
    pub due: u64,
    /// From the pause's end until every request due was written to the kernel, ns.
    pub catch_up_ns: u64,
}

impl InjectedPause {
    /// The catch-up as a fraction of the pause (the goal: <= 0.1).
    pub fn ratio(&self) -> f64 {
        self.catch_up_ns as f64 / self.pause_ns.max(1) as f64
    }
}

impl GeneratorCost {
    /// Adds another thread's figures (sums; the longest of the longest).
    pub fn add(&mut self, o: &GeneratorCost) {
        self.threads += o.threads;
        self.sends += o.sends;
        self.replies += o.replies;
        self.writes += o.writes;
        self.busy_ns += o.busy_ns;
        self.thread_cpu_ns += o.thread_cpu_ns;
        self.stalls += o.stalls;
        self.stalled_ns += o.stalled_ns;
        self.longest_stall_ns = self.longest_stall_ns.max(o.longest_stall_ns);
        self.due_in_stalls += o.due_in_stalls;
        self.catch_ups += o.catch_ups;
        self.catch_up_ns += o.catch_up_ns;
        self.longest_catch_up_ns = self.longest_catch_up_ns.max(o.longest_catch_up_ns);
        self.injected_pauses.extend_from_slice(&o.injected_pauses);
    }

    /// The work's running time per request sent, ns (None before any send).
    pub fn busy_per_request_ns(&self) -> Option<f64> {
        (self.sends > 0).then(|| self.busy_ns as f64 / self.sends as f64)
    }

    /// The injected pauses' catch-up ÷ pause ([`InjectedPause::ratio`]): the median (the
    /// mean of the middle two for an even count) and the largest; None without pauses.
    pub fn injected_ratios(&self) -> Option<(f64, f64)> {
        let mut r: Vec<f64> = self.injected_pauses.iter().map(|p| p.ratio()).collect();
        r.sort_by(f64::total_cmp);
        let (n, last) = (r.len(), *r.last()?);
        let median = if n % 2 == 1 {
            r[n / 2]
        } else {
            (r[n / 2 - 1] + r[n / 2]) / 2.0
        };
        Some((median, last))
    }

    /// The rate one core could send at this cost per request, req/s.
    pub fn ceiling_per_core_rps(&self) -> Option<f64> {
        self.busy_per_request_ns()
            .filter(|c| *c > 0.0)
            .map(|c| 1e9 / c)
    }
}

/// The loop's clock: run-relative reads with stall detection. Interior mutability because the
/// engine reads it from `&self` paths and from the reply-reading closure.
pub(crate) struct LoopClock {
    start: Cell<u64>,
    last: Cell<u64>,
    /// Deliberate waits (sleeps in epoll, the slack task), ns.
    waited: Cell<u64>,
    stalls: Cell<u64>,
    stalled: Cell<u64>,
    longest: Cell<u64>,
    /// The stalls not yet matched with the requests due in them: (from, to), merged.
    open: Cell<Option<(u64, u64)>>,
}

impl LoopClock {
    pub(crate) fn new() -> LoopClock {
        LoopClock {
            start: Cell::new(0),
            last: Cell::new(0),
            waited: Cell::new(0),
            stalls: Cell::new(0),
            stalled: Cell::new(0),
            longest: Cell::new(0),
            open: Cell::new(None),
        }
    }

    /// Sets the run's time origin (absolute CLOCK_MONOTONIC ns) and starts watching afresh
    /// (reads before the start, while the thread set up, are not the loop's).
    pub(crate) fn start_at(&self, start: u64) {
        self.start.set(start);
        self.last.set(self.raw());
        for c in [&self.waited, &self.stalls, &self.stalled, &self.longest] {
            c.set(0);
        }
        self.open.set(None);
    }

    #[inline]
    fn raw(&self) -> u64 {
        host::tstamp::mono_now_ns().saturating_sub(self.start.get())
    }

    /// Run-relative now; a gap since the previous read over [`STALL_NS`] is a stall.
    #[inline]
    pub(crate) fn read(&self) -> u64 {
        let now = self.raw();
        let gap = now.saturating_sub(self.last.get());
        if gap > STALL_NS {
            let from = self.last.get();
            self.stalls.set(self.stalls.get() + 1);
            self.stalled.set(self.stalled.get() + gap);
            self.longest.set(self.longest.get().max(gap));
            self.open.set(Some(match self.open.get() {
                Some((f, _)) => (f, now),
                None => (from, now),
            }));
        }
        self.last.set(now);
        now
    }

    /// After a deliberate wait: the time since the previous read is counted as waiting, not
    /// as a stall.
    pub(crate) fn resume(&self) -> u64 {
        let now = self.raw();
        self.waited
            .set(self.waited.get() + now.saturating_sub(self.last.get()));
        self.last.set(now);
        now
    }

    /// After the loop's own work that reads no clock (maintenance, handing records on): its
    /// time is neither a stall nor a wait.
    pub(crate) fn own(&self) {
        self.last.set(self.raw());
    }

    /// The end of the stalls not yet taken, if any.
    pub(crate) fn open_until(&self) -> Option<u64> {
        self.open.get().map(|(_, to)| to)
    }

    /// The stalls since the last call, merged: (from, to).
    pub(crate) fn take_open(&self) -> Option<(u64, u64)> {
        self.open.take()
    }

    /// (waited, stalled) so far, ns.
    pub(crate) fn excluded(&self) -> (u64, u64) {
        (self.waited.get(), self.stalled.get())
    }

    /// The stall figures into `c`.
    pub(crate) fn fill(&self, c: &mut GeneratorCost) {
        c.stalls = self.stalls.get();
        c.stalled_ns = self.stalled.get();
        c.longest_stall_ns = self.longest.get();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_add_up_and_the_longest_stays_the_longest() {
        let mut a = GeneratorCost {
            threads: 1,
            sends: 100,
            busy_ns: 200_000,
            stalls: 1,
            longest_stall_ns: 3_000_000,
            longest_catch_up_ns: 100_000,
            ..GeneratorCost::default()
        };
        let b = GeneratorCost {
            threads: 1,
            sends: 300,
            busy_ns: 600_000,
            stalls: 2,
            longest_stall_ns: 1_000_000,
            longest_catch_up_ns: 400_000,
            ..GeneratorCost::default()
        };
        a.add(&b);
        assert_eq!((a.threads, a.sends, a.stalls), (2, 400, 3));
        assert_eq!(a.longest_stall_ns, 3_000_000);
        assert_eq!(a.longest_catch_up_ns, 400_000);
        assert_eq!(a.busy_per_request_ns(), Some(2_000.0));
        assert_eq!(a.ceiling_per_core_rps(), Some(500_000.0));
        assert_eq!(GeneratorCost::default().ceiling_per_core_rps(), None);
    }

    #[test]
    fn injected_pauses_give_their_median_and_largest_ratio() {
        let pause = |catch_up_ns| InjectedPause {
            pause_ns: 1_000_000,
            due: 100,
            catch_up_ns,
        };
        let mut g = GeneratorCost::default();
        assert_eq!(g.injected_ratios(), None);
        g.injected_pauses = vec![pause(40_000), pause(10_000), pause(30_000)];
        assert_eq!(g.injected_ratios(), Some((0.03, 0.04)));
        g.injected_pauses.push(pause(20_000));
        assert_eq!(g.injected_ratios(), Some((0.025, 0.04)));
    }

    #[test]
    fn a_gap_not_asked_for_is_a_stall_and_a_wait_is_not() {
        let c = LoopClock::new();
        c.start_at(host::tstamp::mono_now_ns());
        c.read();
        std::thread::sleep(std::time::Duration::from_millis(2));
        c.resume();
        assert_eq!(c.take_open(), None);
        assert!(c.excluded().0 >= 2_000_000);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let end = c.read();
        let (from, to) = c.take_open().unwrap();
        assert_eq!(to, end);
        assert!(to - from >= 2_000_000);
        let mut g = GeneratorCost::default();
        c.fill(&mut g);
        assert_eq!(g.stalls, 1);
        assert!(g.longest_stall_ns >= 2_000_000);
    }
}
