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

use super::{arrive, Arrival, Block, Completion, Sink, Source, ToServe, BLOCK};

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

/// Serves every arrival of `src` in order and hands each completion to `sink`: `step(state,
/// arrival time, service time)` runs the recursion on `state` and returns the request's start
/// time. Returns the number of requests served and the final state.
///
/// The arrivals are drawn a [`Block`] at a time (a loop of its own: the variates' rare paths
/// are calls), then served and recorded by [`Sink::serve_run`], which for the collector is
/// one loop without calls: the recursion, the arrival clock and the work sum (chains of
/// dependent operations) overlap with the recording. The state is a local here, stepped by a
/// function without captures, and the requests are counted by block: a count captured by
/// reference from the caller was incremented in memory on every request.
#[inline(always)]
fn serve_all<S: Sink, R>(
    src: &mut Source,
    sink: &mut S,
    mut state: R,
    step: impl Fn(&mut R, f64, f64) -> f64,
) -> (u64, R) {
    let mut b = Block::new();
    let (mut arrival, mut start) = ([0.0f64; BLOCK], [0.0f64; BLOCK]);
    let mut served_requests = 0u64;
    while src.fill_gaps(&mut b) > 0 {
        let n = b.len.min(BLOCK);
        // The gaps become arrival times here, beside the recursion (see `Source::fill_gaps`).
        let (mut now, mut served) = (src.now, src.served_ns);
        let (gap, service) = (&b.time[..n], &b.service[..n]);
        let block = ToServe {
            first: b.first,
            service_ns: service,
            class: &b.class[..n],
            arrival_ns: &mut arrival[..n],
            start_ns: &mut start[..n],
        };
        // `serve_run` calls this once for each request, in order.
        sink.serve_run(block, |j| {
            let t = arrive(&mut now, &mut served, gap[j], service[j]);
            (t, step(&mut state, t, service[j]))
        });
        (src.now, src.served_ns) = (now, served);
        served_requests += n as u64;
    }
    (served_requests, state)
}

/// One shared FIFO queue served by `workers`. Returns (completions, last completion time).
pub(super) fn fifo<S: Sink>(src: &mut Source, workers: u32, sink: &mut S) -> (u64, f64) {
    if workers == 1 {
        // The worker's free time.
        return serve_all(src, sink, 0.0f64, |free, t, s| {
            let start = if *free > t { *free } else { t };
            *free = start + s;
            start
        });
    }
    match workers {
        2 => return fifo_few::<2, S>(src, 2, sink),
        3 => return fifo_few::<3, S>(src, 3, sink),
        4 => return fifo_few::<4, S>(src, 4, sink),
        5..=8 => return fifo_few::<8, S>(src, workers as usize, sink),
        _ => {}
    }
    if workers <= SCAN_LIMIT {
        return fifo_scan(src, workers, sink);
    }
    // Non-negative finite f64s order like their bit patterns, so a heap of u64 bits works.
    let free: BinaryHeap<Reverse<u64>> = (0..workers).map(|_| Reverse(0f64.to_bits())).collect();
    let (n, (_, last)) = serve_all(src, sink, (free, 0.0f64), |(free, last), t, s| {
        let earliest = free.peek().map_or(0.0, |r| f64::from_bits(r.0));
        let start = if earliest > t { earliest } else { t };
        let end = start + s;
        if let Some(mut top) = free.peek_mut() {
            *top = Reverse(end.to_bits());
        }
        *last = last.max(end);
        start
    });
    (n, last)
}

/// [`fifo`] with the workers' free times in a vector, scanned for the earliest.
fn fifo_scan<S: Sink>(src: &mut Source, workers: u32, sink: &mut S) -> (u64, f64) {
    let free = vec![0.0f64; workers as usize];
    let (n, (_, last)) = serve_all(src, sink, (free, 0.0f64), |(free, last), t, s| {
        let (mut k, mut earliest) = (0, free[0]);
        for (i, &f) in free.iter().enumerate().skip(1) {
            if f < earliest {
                (k, earliest) = (i, f);
            }
        }
        let start = if earliest > t { earliest } else { t };
        let end = start + s;
        free[k] = end;
        *last = last.max(end);
        start
    });
    (n, last)
}

/// One Kiefer–Wolfowitz step on workers' free times sorted earliest first: the earliest
/// (`free[0]`, the worker the request took) is replaced by the request's `end`, and the array
/// stays sorted. A fixed network of `min`s and `max`es: slot i takes the (i+1)-th smallest of
/// `free[1..]` and `end`. Public so that the simulator's limit (`examples/sim_limit.rs`)
/// takes the very same step.
#[inline(always)]
pub fn replace_earliest<const N: usize>(free: &mut [f64; N], end: f64) {
    if N == 1 {
        free[0] = end;
        return;
    }
    let mut next = [0.0f64; N];
    next[0] = if free[1] < end { free[1] } else { end };
    for i in 1..N - 1 {
        let lo = if free[i] > end { free[i] } else { end };
        next[i] = if free[i + 1] < lo { free[i + 1] } else { lo };
    }
    next[N - 1] = if free[N - 1] > end { free[N - 1] } else { end };
    *free = next;
}

/// [`fifo`] for `workers` ≤ `N` workers, with the workers' free times in a sorted array, in
/// registers: the earliest is the first, and the request's end replaces it by an insertion
/// with a fixed network of `min`s and `max`es (no branch, no index computed). Slots past
/// `workers` are never free (`+∞`) and stay at the end.
///
/// The recursion needs only the multiset of free times (a request starts at the earliest,
/// whichever worker that is), so this serves every request as the scan does. Why: the scan
/// found the earliest by a chain of comparisons and stored the end at a computed index, so
/// each request waited for the previous one's store and chain; here the chain is a `max`, an
/// add and a `min`.
#[inline(always)]
fn fifo_few<const N: usize, S: Sink>(src: &mut Source, workers: usize, sink: &mut S) -> (u64, f64) {
    let mut free = [f64::INFINITY; N];
    for f in free.iter_mut().take(workers) {
        *f = 0.0;
    }
    let (n, free) = serve_all(src, sink, free, |free, t, s| {
        let e = free[0];
        let start = if e > t { e } else { t };
        replace_earliest(free, start + s);
        start
    });
    // Each worker's free time only grows, so the last completion is the latest of them (0 if
    // none served): the last of the `workers` sorted real slots.
    (n, free[workers - 1])
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Completion, Discipline, SimConfig};
    use crate::{ArrivalSpec, ServiceSpec};

    fn source(workers: u32) -> Source {
        let service = ServiceSpec::Exponential { mean_ns: 50_000.0 };
        let cfg = SimConfig {
            arrival: ArrivalSpec::Poisson,
            rate_per_s: SimConfig::rate_for_load(0.9, workers, &service).ok(),
            service,
            workers,
            discipline: Discipline::Fifo,
            class_probs: Vec::new(),
            connections: None,
            requests: 20_000,
            warmup_fraction: 0.0,
            seed: 3,
        };
        Source::new(&cfg).unwrap()
    }

    #[test]
    fn the_block_path_serves_every_request_as_the_recursion_one_at_a_time() {
        for w in [1u32, 3, 40] {
            let (mut got, mut want) = (Vec::new(), Vec::new());
            let mut blocks = source(w);
            let out = fifo(&mut blocks, w, &mut |c: &Completion| got.push(*c));
            let mut one = source(w);
            let mut free = vec![0.0f64; w as usize];
            while let Some(a) = one.next() {
                let k = (0..free.len()).fold(0, |k, i| if free[i] < free[k] { i } else { k });
                let start = free[k].max(a.time);
                free[k] = start + a.service;
                finish(&mut |c: &Completion| want.push(*c), &a, start, free[k]);
            }
            assert_eq!(got, want, "{w} workers");
            assert_eq!(out, (20_000, free.iter().fold(0.0, |m, &f| f.max(m))));
            assert_eq!(blocks.served_ns.to_bits(), one.served_ns.to_bits());
            assert_eq!(blocks.now.to_bits(), one.now.to_bits());
        }
    }

    #[test]
    fn the_fixed_array_path_serves_every_request_as_the_scan_does() {
        for w in 2..=8u32 {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let fast = fifo(&mut source(w), w, &mut |c: &Completion| a.push(*c));
            let scan = fifo_scan(&mut source(w), w, &mut |c: &Completion| b.push(*c));
            assert_eq!(fast, scan, "{w} workers");
            assert_eq!(a.len(), 20_000);
            assert_eq!(a, b, "{w} workers");
            // Not a trivial queue: some requests waited.
            assert!(a.iter().any(|c| c.wait_ns > 0.0));
        }
    }
}
