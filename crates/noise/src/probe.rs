//! The measuring loops (Listings 1.1 and 1.2 of Where Has My Time Gone?) and the per-CPU
//! thread that runs one of them.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::clock::TickSource;
use crate::LoopKind;

/// One gap as the loop records it, in raw ticks.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RawGap {
    /// Tick of the read that opened the gap.
    pub start: u64,
    /// Ticks until the read that closed it.
    pub len: u64,
}

/// What one probe loop saw, in ticks.
#[derive(Debug, Default)]
pub(crate) struct RawRun {
    pub loops: u64,
    pub min_ticks: u64,
    pub first: u64,
    pub last: u64,
    /// Gaps above threshold, in time order, at most the buffer's capacity.
    pub gaps: Vec<RawGap>,
    /// Gaps above threshold that did not fit in the buffer.
    pub dropped: u64,
    /// Ticks of the dropped gaps (so time lost stays exact when the buffer overflows).
    pub dropped_ticks: u64,
    /// Gaps whose two reads came from different CPUs (ignored, as in the paper).
    pub migrations: u64,
}

/// Parameters of one loop, in ticks.
pub(crate) struct LoopParams<'a> {
    pub kind: LoopKind,
    pub threshold_ticks: u64,
    pub end_tick: u64,
    /// Stop when either flag is set (the caller's stop, and the run's abort).
    pub stop: [&'a AtomicBool; 2],
    /// Preallocated, already-touched buffer (length 0, capacity = bound).
    pub buffer: Vec<RawGap>,
}

/// How many iterations pass between looks at the stop flag.
const STOP_CHECK_MASK: u64 = 0xfff;

#[inline(always)]
fn stopped(flags: [&AtomicBool; 2]) -> bool {
    flags[0].load(Ordering::Relaxed) || flags[1].load(Ordering::Relaxed)
}

/// Runs the chosen loop until `end_tick` or `stop`.
///
/// Both loops keep the minimum iteration, count iterations, and record every gap above the
/// threshold whose two reads came from the same CPU. The buffer never grows: once full,
/// further gaps are only counted (`dropped`, `dropped_ticks`), so no allocation or page
/// fault happens inside the measured window.
#[inline(never)]
pub(crate) fn run_loop<S: TickSource>(p: LoopParams<'_>) -> RawRun {
    let LoopParams {
        kind,
        threshold_ticks,
        end_tick,
        stop,
        mut buffer,
    } = p;
    let cap = buffer.capacity();
    let mut out = RawRun {
        min_ticks: u64::MAX,
        ..RawRun::default()
    };
    let mut record = |start: u64, len: u64, out: &mut RawRun| {
        if buffer.len() < cap {
            buffer.push(RawGap { start, len });
        } else {
            out.dropped += 1;
            out.dropped_ticks += len;
        }
    };
    let (first, first_cpu) = S::read();
    out.first = first;
    let mut last = first;
    let mut last_cpu = first_cpu;
    let mut loops: u64 = 0;
    let mut min = u64::MAX;
    match kind {
        LoopKind::Paired => loop {
            let (t1, c1) = S::read();
            let (t2, c2) = S::read();
            let d = t2.wrapping_sub(t1);
            loops += 1;
            if d < min {
                min = d;
            }
            if d > threshold_ticks {
                if c1 == c2 {
                    record(t1, d, &mut out);
                } else {
                    out.migrations += 1;
                }
            }
            last = t2;
            if t2 >= end_tick || (loops & STOP_CHECK_MASK == 0 && stopped(stop)) {
                break;
            }
        },
        LoopKind::Consecutive => loop {
            let (t, c) = S::read();
            let d = t.wrapping_sub(last);
            loops += 1;
            if d < min {
                min = d;
            }
            if d > threshold_ticks {
                if c == last_cpu {
                    record(last, d, &mut out);
                } else {
                    out.migrations += 1;
                }
            }
            last = t;
            last_cpu = c;
            if t >= end_tick || (loops & STOP_CHECK_MASK == 0 && stopped(stop)) {
                break;
            }
        },
    }
    out.loops = loops;
    out.min_ticks = min;
    out.last = last;
    out.gaps = buffer;
    out
}

/// A gap buffer of `cap` entries whose pages have all been written once, so recording into
/// it never faults (with `mlock` they also stay resident).
pub(crate) fn prefaulted_buffer(cap: usize) -> Vec<RawGap> {
    let mut v = Vec::with_capacity(cap);
    // `resize` writes every element (unlike `vec![0; n]`, which may get untouched
    // zero pages from calloc), which is the point.
    v.resize(cap, RawGap { start: 1, len: 1 });
    v.clear();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        static T: Cell<u64> = const { Cell::new(0) };
        static STEP: Cell<usize> = const { Cell::new(0) };
    }

    /// A scripted clock: advances by the next step of a fixed pattern (ticks), CPU 0.
    struct Scripted;
    const PATTERN: [u64; 8] = [10, 10, 500, 10, 10, 10, 2000, 10];
    impl TickSource for Scripted {
        fn read() -> (u64, u32) {
            let i = STEP.with(|s| {
                let i = s.get();
                s.set(i + 1);
                i
            });
            let t = T.with(|t| {
                let v = t.get() + PATTERN[i % PATTERN.len()];
                t.set(v);
                v
            });
            (t, 0)
        }
    }

    fn reset() {
        T.with(|t| t.set(0));
        STEP.with(|s| s.set(0));
    }

    #[test]
    fn consecutive_loop_records_exact_gaps_of_a_scripted_clock() {
        reset();
        let stop = AtomicBool::new(false);
        let r = run_loop::<Scripted>(LoopParams {
            kind: LoopKind::Consecutive,
            threshold_ticks: 100,
            end_tick: 2560 * 2, // two full patterns after the first read
            stop: [&stop, &stop],
            buffer: prefaulted_buffer(16),
        });
        // every gap is a 500 or 2000 step; reads advance by the pattern in order
        assert_eq!(r.min_ticks, 10);
        let lens: Vec<u64> = r.gaps.iter().map(|g| g.len).collect();
        assert_eq!(lens, vec![500, 2000, 500, 2000]);
        let starts: Vec<u64> = r.gaps.iter().map(|g| g.start).collect();
        assert_eq!(starts, vec![20, 550, 2580, 3110]);
        assert_eq!(r.last - r.first, 2560 * 2 - 10);
        assert_eq!(r.dropped, 0);
    }

    #[test]
    fn paired_loop_misses_gaps_between_iterations_and_buffer_overflow_is_counted() {
        reset();
        let stop = AtomicBool::new(false);
        // first read takes step 0 (10); pairs are then (1,2), (3,4), (5,6), (7,0)…: the pair's
        // gap is the second step of each pair: 500 (step 2), 10, 2000 (step 6), 10.
        let r = run_loop::<Scripted>(LoopParams {
            kind: LoopKind::Paired,
            threshold_ticks: 100,
            end_tick: 2560 * 4,
            stop: [&stop, &stop],
            buffer: prefaulted_buffer(3),
        });
        let lens: Vec<u64> = r.gaps.iter().map(|g| g.len).collect();
        assert_eq!(lens, vec![500, 2000, 500]);
        assert_eq!(r.dropped, 5); // 8 gaps in 4 patterns, 3 kept
        assert_eq!(r.dropped_ticks, 2000 + 500 + 2000 + 500 + 2000);
        assert_eq!(r.min_ticks, 10);
    }
}
