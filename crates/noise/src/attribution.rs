//! Contributors: the kernel counters that moved on a probe CPU during the run, each with a
//! Good/Bad/Ugly class.
//!
//! # The classification rule
//!
//! Where Has My Time Gone? (§5.1) sorts latency contributors by their 99.9th percentile:
//! **Good** below 1 µs, **Bad** from 1 µs to 100 µs, **Ugly** above 100 µs (the "noise").
//! A counter delta says how often a source fired, not how long each event took, so the
//! class of a contributor is decided in two steps:
//!
//! 1. its *nominal* class, from what one event of that kind costs a spinning user thread:
//!    - hardware interrupts (numbered IRQs and the named per-CPU ones: local timer,
//!      rescheduling, function-call, TLB shootdown, IRQ work…) and softirqs: **Bad**
//!      (entry, handler and exit take microseconds, not hundreds of them);
//!    - steal time (the hypervisor ran something else on this vCPU), involuntary context
//!      switches (another task got the CPU for a scheduler slice), voluntary context
//!      switches (the probe blocked, e.g. on a page fault needing I/O) and RT throttling:
//!      **Ugly** (each costs a time slice: hundreds of µs to tens of ms);
//! 2. *capped by the evidence*: a source cannot have caused a gap longer than the longest
//!    gap observed on that CPU, so the class is at most the class of the longest gap (with
//!    no gap at all, at most Good).
//!
//! Gap lengths themselves are classed by the same thresholds ([`GoodBadUgly::of_ns`]).

use serde::Serialize;

/// The three classes of Where Has My Time Gone? §5.1, by 99.9th percentile (or length).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum GoodBadUgly {
    /// Below 1 µs.
    Good,
    /// 1 µs up to 100 µs.
    Bad,
    /// Above 100 µs.
    Ugly,
}

impl GoodBadUgly {
    /// The class of a duration in ns: `< 1_000` Good, `<= 100_000` Bad, otherwise Ugly.
    pub fn of_ns(ns: f64) -> GoodBadUgly {
        if ns < 1_000.0 {
            GoodBadUgly::Good
        } else if ns <= 100_000.0 {
            GoodBadUgly::Bad
        } else {
            GoodBadUgly::Ugly
        }
    }

    /// Lower-case name for reports.
    pub fn name(self) -> &'static str {
        match self {
            GoodBadUgly::Good => "good",
            GoodBadUgly::Bad => "bad",
            GoodBadUgly::Ugly => "ugly",
        }
    }
}

/// One source of interruptions that fired on a probe CPU during the run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Contributor {
    /// What fired: `Local timer interrupts (LOC)`, `IRQ 36 virtio1-req.0`, `softirq TIMER`,
    /// `steal`, `involuntary context switches`, `voluntary context switches`.
    pub source: String,
    /// Counter increase over the run (events; for `steal`, clock ticks of `USER_HZ`).
    pub delta: u64,
    /// `delta` per second of the counter window.
    pub per_s: f64,
    /// Class per the module's rule.
    pub class: GoodBadUgly,
    /// How the class was reached, and the unit where it is not "events".
    pub note: String,
}

/// The kind of a source, which fixes its nominal class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SourceKind {
    Interrupt,
    Softirq,
    Steal,
    InvoluntarySwitch,
    VoluntarySwitch,
}

impl SourceKind {
    fn nominal(self) -> (GoodBadUgly, &'static str) {
        match self {
            SourceKind::Interrupt => (GoodBadUgly::Bad, "an interrupt costs microseconds"),
            SourceKind::Softirq => (GoodBadUgly::Bad, "a softirq costs microseconds"),
            SourceKind::Steal => (
                GoodBadUgly::Ugly,
                "the hypervisor took the vCPU for whole time slices",
            ),
            SourceKind::InvoluntarySwitch => {
                (GoodBadUgly::Ugly, "another task ran for a scheduler slice")
            }
            SourceKind::VoluntarySwitch => (
                GoodBadUgly::Ugly,
                "the probe thread blocked (page fault I/O?)",
            ),
        }
    }
}

/// Builds a contributor from a counter delta. `max_gap_ns` is the longest gap seen on the
/// CPU (0 with none); `window_s` the counter window.
pub(crate) fn contributor(
    source: String,
    kind: SourceKind,
    delta: u64,
    window_s: f64,
    max_gap_ns: f64,
    unit_note: &str,
) -> Contributor {
    let (nominal, why) = kind.nominal();
    let cap = GoodBadUgly::of_ns(max_gap_ns);
    let class = nominal.min(cap);
    let mut note = format!("nominally {}: {why}", nominal.name());
    if class < nominal {
        note.push_str(&format!(
            "; capped at {} because the longest gap was {:.1} µs",
            class.name(),
            max_gap_ns / 1000.0
        ));
    }
    if !unit_note.is_empty() {
        note.push_str("; ");
        note.push_str(unit_note);
    }
    Contributor {
        source,
        delta,
        per_s: if window_s > 0.0 {
            delta as f64 / window_s
        } else {
            0.0
        },
        class,
        note,
    }
}

/// Worst class first, then most frequent.
pub(crate) fn rank(cs: &mut [Contributor]) {
    cs.sort_by(|a, b| {
        b.class
            .cmp(&a.class)
            .then(b.delta.cmp(&a.delta))
            .then(a.source.cmp(&b.source))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_follow_the_paper() {
        assert_eq!(GoodBadUgly::of_ns(999.9), GoodBadUgly::Good);
        assert_eq!(GoodBadUgly::of_ns(1_000.0), GoodBadUgly::Bad);
        assert_eq!(GoodBadUgly::of_ns(100_000.0), GoodBadUgly::Bad);
        assert_eq!(GoodBadUgly::of_ns(100_000.1), GoodBadUgly::Ugly);
    }

    #[test]
    fn nominal_class_capped_by_longest_gap() {
        let c = contributor("steal".into(), SourceKind::Steal, 5, 2.0, 50_000.0, "");
        assert_eq!(c.class, GoodBadUgly::Bad);
        assert!(c.note.contains("capped"));
        assert_eq!(c.per_s, 2.5);
        let c = contributor("steal".into(), SourceKind::Steal, 5, 2.0, 500_000.0, "");
        assert_eq!(c.class, GoodBadUgly::Ugly);
        let c = contributor("x".into(), SourceKind::Interrupt, 5, 2.0, 500_000.0, "");
        assert_eq!(c.class, GoodBadUgly::Bad);
        let c = contributor("x".into(), SourceKind::Softirq, 5, 2.0, 0.0, "");
        assert_eq!(c.class, GoodBadUgly::Good);
        let mut v = vec![
            contributor("a".into(), SourceKind::Interrupt, 9, 1.0, 1e6, ""),
            contributor("b".into(), SourceKind::Steal, 1, 1.0, 1e6, ""),
            contributor("c".into(), SourceKind::Interrupt, 90, 1.0, 1e6, ""),
        ];
        rank(&mut v);
        let order: Vec<&str> = v.iter().map(|c| c.source.as_str()).collect();
        assert_eq!(order, ["b", "c", "a"]);
    }
}
