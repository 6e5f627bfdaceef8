//! The event-driven path for disciplines where a request's start depends on later arrivals:
//! LIFO, random order, and non-preemptive and preemptive-resume priority. Arrivals are drawn
//! lazily in time order; the next event is whichever comes first of the next arrival and the
//! earliest completion among the c workers (a linear scan: c is small in every use we know).

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{Arrival, Completion, Discipline, Sink, Source};

/// A request in the system.
#[derive(Clone, Copy, Debug)]
struct Job {
    index: u64,
    class: u8,
    arrival: f64,
    /// Work still to do (all of it until a preemption).
    remaining: f64,
    /// Time spent waiting so far.
    waited: f64,
    /// When the job last joined the queue (arrival, or its preemption).
    ready: f64,
}

/// A job in service and when it will finish.
#[derive(Clone, Copy, Debug)]
struct Running {
    job: Job,
    /// When this stretch of service began (a resumed job starts a new stretch).
    start: f64,
    end: f64,
}

/// The waiting room, one shape per discipline.
enum Queue {
    /// LIFO: the newest waiting job is served next.
    Stack(Vec<Job>),
    /// Random order: any waiting job equally likely (swap-remove at a random index).
    Bag(Vec<Job>, Xoshiro256PlusPlus),
    /// Priority: one FIFO per class, class 0 served first.
    Classes(Vec<VecDeque<Job>>),
}

impl Queue {
    fn push(&mut self, j: Job) {
        match self {
            Self::Stack(v) | Self::Bag(v, _) => v.push(j),
            Self::Classes(q) => q[usize::from(j.class)].push_back(j),
        }
    }

    /// A preempted job goes back to the front of its class queue.
    fn push_front(&mut self, j: Job) {
        match self {
            Self::Classes(q) => q[usize::from(j.class)].push_front(j),
            _ => self.push(j),
        }
    }

    fn pop(&mut self) -> Option<Job> {
        match self {
            Self::Stack(v) => v.pop(),
            Self::Bag(v, rng) => {
                if v.is_empty() {
                    None
                } else {
                    let i = rng.gen_range(0..v.len());
                    Some(v.swap_remove(i))
                }
            }
            Self::Classes(q) => q.iter_mut().find_map(VecDeque::pop_front),
        }
    }
}

/// Simulates `discipline` (LIFO, Random, Priority or PriorityPreemptive) with `workers`.
/// Returns (completions, last completion time).
pub(super) fn run<S: Sink>(
    src: &mut Source,
    workers: u32,
    discipline: Discipline,
    classes: usize,
    seed: u64,
    sink: &mut S,
) -> (u64, f64) {
    let mut queue = match discipline {
        Discipline::Lifo => Queue::Stack(Vec::new()),
        Discipline::Random => Queue::Bag(Vec::new(), Xoshiro256PlusPlus::seed_from_u64(seed)),
        _ => Queue::Classes(vec![VecDeque::new(); classes]),
    };
    let preemptive = discipline == Discipline::PriorityPreemptive;
    let mut slots: Vec<Option<Running>> = vec![None; workers as usize];
    let (mut n, mut last) = (0u64, 0.0f64);
    let mut next_arrival = src.next();
    loop {
        // Earliest completion among busy workers.
        let mut done: Option<(usize, f64)> = None;
        for (w, s) in slots.iter().enumerate() {
            if let Some(r) = s {
                if !matches!(done, Some((_, t)) if t <= r.end) {
                    done = Some((w, r.end));
                }
            }
        }
        let arrival_first = match (next_arrival, done) {
            (Some(_), None) => true,
            // Completions win ties, so a worker freed at the arrival instant is free for it.
            (Some(a), Some((_, t))) => a.time < t,
            (None, _) => false,
        };
        match (next_arrival, done) {
            (Some(a), _) if arrival_first => {
                arrive(&a, &mut slots, &mut queue, preemptive);
                next_arrival = src.next();
            }
            (_, Some((w, now))) => {
                if let Some(r) = slots[w].take() {
                    let j = r.job;
                    sink.record(&Completion {
                        index: j.index,
                        class: j.class,
                        arrival_ns: j.arrival,
                        wait_ns: j.waited,
                        response_ns: now - j.arrival,
                    });
                    n += 1;
                    last = now;
                }
                if let Some(j) = queue.pop() {
                    slots[w] = Some(start(j, now));
                }
            }
            _ => break,
        }
    }
    (n, last)
}

fn start(mut job: Job, now: f64) -> Running {
    job.waited += now - job.ready;
    Running {
        job,
        start: now,
        end: now + job.remaining,
    }
}

fn arrive(a: &Arrival, slots: &mut [Option<Running>], queue: &mut Queue, preemptive: bool) {
    let job = Job {
        index: a.index,
        class: a.class,
        arrival: a.time,
        remaining: a.service,
        waited: 0.0,
        ready: a.time,
    };
    if let Some(free) = slots.iter_mut().find(|s| s.is_none()) {
        *free = Some(start(job, a.time));
        return;
    }
    if preemptive {
        // The lowest-priority job in service (largest class), if it is lower than the
        // arrival's class; among equals the one that started last. The choice must not look
        // at remaining work: a real scheduler cannot, and preferring long residuals would
        // favour short jobs and lower the mean below what preemptive-resume gives.
        let mut victim: Option<(usize, u8, f64)> = None;
        for (w, s) in slots.iter().enumerate() {
            if let Some(r) = s {
                let better = match victim {
                    None => true,
                    Some((_, c, started)) => {
                        r.job.class > c || (r.job.class == c && r.start > started)
                    }
                };
                if r.job.class > job.class && better {
                    victim = Some((w, r.job.class, r.start));
                }
            }
        }
        if let Some((w, _, _)) = victim {
            if let Some(r) = slots[w].take() {
                let mut old = r.job;
                old.remaining = r.end - a.time;
                old.ready = a.time;
                queue.push_front(old);
            }
            slots[w] = Some(start(job, a.time));
            return;
        }
    }
    queue.push(job);
}
