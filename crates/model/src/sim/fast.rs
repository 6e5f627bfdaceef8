//! Disciplines that need no event queue. With first-come-first-served order at every queue,
//! a request's start time is known the moment it arrives:
//!
//! - one shared FIFO queue with c workers: the request starts when the earliest-free worker
//!   frees up (the Kiefer–Wolfowitz workload recursion; for c = 1 it is Lindley's);
//! - per-worker FIFO queues (random worker, static partition): one Lindley recursion per worker.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{Arrival, Completion, Sink, Source};

/// Above this many workers the earliest-free worker is found with a heap, below by a scan.
const SCAN_LIMIT: u32 = 32;

#[inline(always)]
fn finish<S: Sink>(sink: &mut S, a: &Arrival, start: f64, end: f64) {
    sink.record(&Completion {
        index: a.index,
        class: a.class,
        arrival_ns: a.time,
        wait_ns: start - a.time,
        response_ns: end - a.time,
    });
}

/// One shared FIFO queue served by `workers`. Returns (completions, last completion time).
pub(super) fn fifo<S: Sink>(src: &mut Source, workers: u32, sink: &mut S) -> (u64, f64) {
    let mut n = 0u64;
    let mut last = 0.0f64;
    if workers == 1 {
        let mut free = 0.0f64;
        while let Some(a) = src.next() {
            let start = if free > a.time { free } else { a.time };
            free = start + a.service;
            finish(sink, &a, start, free);
            n += 1;
        }
        return (n, free);
    }
    if workers <= SCAN_LIMIT {
        let mut free = vec![0.0f64; workers as usize];
        while let Some(a) = src.next() {
            let (mut k, mut earliest) = (0, free[0]);
            for (i, &f) in free.iter().enumerate().skip(1) {
                if f < earliest {
                    (k, earliest) = (i, f);
                }
            }
            let start = if earliest > a.time { earliest } else { a.time };
            let end = start + a.service;
            free[k] = end;
            last = last.max(end);
            finish(sink, &a, start, end);
            n += 1;
        }
        return (n, last);
    }
    // Non-negative finite f64s order like their bit patterns, so a heap of u64 bits works.
    let mut free: BinaryHeap<Reverse<u64>> =
        (0..workers).map(|_| Reverse(0f64.to_bits())).collect();
    while let Some(a) = src.next() {
        let earliest = free.peek().map_or(0.0, |r| f64::from_bits(r.0));
        let start = if earliest > a.time { earliest } else { a.time };
        let end = start + a.service;
        if let Some(mut top) = free.peek_mut() {
            *top = Reverse(end.to_bits());
        }
        last = last.max(end);
        finish(sink, &a, start, end);
        n += 1;
    }
    (n, last)
}

/// Per-worker FIFO queues; `route` names the worker for each arrival.
#[inline(always)]
fn per_worker<S: Sink>(
    src: &mut Source,
    workers: u32,
    sink: &mut S,
    mut route: impl FnMut(&Arrival) -> usize,
) -> (u64, f64) {
    let mut free = vec![0.0f64; workers as usize];
    let (mut n, mut last) = (0u64, 0.0f64);
    while let Some(a) = src.next() {
        let w = route(&a);
        let start = if free[w] > a.time { free[w] } else { a.time };
        let end = start + a.service;
        free[w] = end;
        last = last.max(end);
        finish(sink, &a, start, end);
        n += 1;
    }
    (n, last)
}

/// Each arrival joins a uniformly random worker's FIFO queue.
pub(super) fn random_worker<S: Sink>(
    src: &mut Source,
    workers: u32,
    seed: u64,
    sink: &mut S,
) -> (u64, f64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    per_worker(src, workers, sink, |_| rng.gen_range(0..workers) as usize)
}

/// Static partition: request k on connection k mod `connections` (or the trace's connection
/// id), connection j on worker j mod `workers`.
pub(super) fn round_robin<S: Sink>(
    src: &mut Source,
    workers: u32,
    connections: u32,
    sink: &mut S,
) -> (u64, f64) {
    let conns = u64::from(connections.max(1));
    per_worker(src, workers, sink, |a| {
        let conn = a.conn.map_or(a.index % conns, u64::from);
        (conn % u64::from(workers)) as usize
    })
}
