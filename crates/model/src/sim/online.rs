//! A queue fed one arrival at a time: the ideal of a measured run, whose arrivals are read
//! from the run's stored records chunk by chunk (so the whole arrival sequence is never in
//! memory). The same recursions as [`super::fast`] — Kiefer–Wolfowitz for one shared FIFO
//! queue, Lindley per worker for static partitioning — driven by the caller instead of a
//! [`super::Source`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::ModelError;

enum Queues {
    /// One shared FIFO queue: the workers' next free times (a heap of f64 bits; finite
    /// non-negative f64s order like their bit patterns).
    Shared(BinaryHeap<Reverse<u64>>),
    /// Connection j's requests queue at worker j mod c.
    PerWorker(Vec<f64>),
}

/// A FIFO queue with `c` workers fed arrivals in time order.
pub struct OnlineQueue {
    queues: Queues,
    /// Latest completion so far.
    last_end: f64,
    /// Service given so far (for the busy fraction).
    work: f64,
}

impl OnlineQueue {
    /// One shared FIFO queue served by `workers`.
    pub fn shared(workers: u32) -> Result<Self, ModelError> {
        if workers == 0 {
            return Err(ModelError::NoWorkers);
        }
        Ok(Self::new(Queues::Shared(
            (0..workers).map(|_| Reverse(0f64.to_bits())).collect(),
        )))
    }

    /// Per-worker FIFO queues: connection j is served by worker j mod `workers` (memcached
    /// and nginx partition connections over their threads this way).
    pub fn per_worker(workers: u32) -> Result<Self, ModelError> {
        if workers == 0 {
            return Err(ModelError::NoWorkers);
        }
        Ok(Self::new(Queues::PerWorker(vec![0.0; workers as usize])))
    }

    fn new(queues: Queues) -> Self {
        OnlineQueue {
            queues,
            last_end: 0.0,
            work: 0.0,
        }
    }

    /// Serves one arrival (times in ns, arrivals in non-decreasing order) arriving on
    /// connection `conn`; returns (wait, response) in ns.
    #[inline]
    pub fn push(&mut self, arrival_ns: f64, conn: u32, service_ns: f64) -> (f64, f64) {
        let start = match &mut self.queues {
            Queues::Shared(free) => {
                let earliest = free.peek().map_or(0.0, |r| f64::from_bits(r.0));
                let start = earliest.max(arrival_ns);
                if let Some(mut top) = free.peek_mut() {
                    *top = Reverse((start + service_ns).to_bits());
                }
                start
            }
            Queues::PerWorker(free) => {
                let w = conn as usize % free.len();
                let start = free[w].max(arrival_ns);
                free[w] = start + service_ns;
                start
            }
        };
        let end = start + service_ns;
        self.last_end = self.last_end.max(end);
        self.work += service_ns;
        (start - arrival_ns, end - arrival_ns)
    }

    /// The latest completion so far, ns.
    pub fn last_completion_ns(&self) -> f64 {
        self.last_end
    }

    /// Service time given so far, ns.
    pub fn work_ns(&self) -> f64 {
        self.work
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{simulate, ArrivalSpec, Discipline, ServiceSpec, SimConfig, Trace};
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Fed the same trace, the online queue gives exactly the responses of the simulator's
    /// FIFO and round-robin (static partition) disciplines.
    #[test]
    fn matches_the_simulator_on_a_trace() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut t = 0u64;
        let mut times = Vec::new();
        let mut conns = Vec::new();
        for _ in 0..20_000 {
            t += rng.gen_range(0..40_000u64);
            times.push(t);
            conns.push(rng.gen_range(0..7u32));
        }
        for (disc, workers) in [
            (Discipline::Fifo, 1),
            (Discipline::Fifo, 3),
            (Discipline::Fifo, 40),
            (Discipline::RoundRobin, 3),
        ] {
            let cfg = SimConfig {
                arrival: ArrivalSpec::Trace(Trace {
                    times_ns: times.clone(),
                    conn: Some(conns.clone()),
                }),
                rate_per_s: None,
                service: ServiceSpec::Deterministic {
                    mean_ns: 15_000.0 * f64::from(workers).min(4.0),
                },
                workers,
                discipline: disc,
                class_probs: Vec::new(),
                connections: None,
                requests: times.len() as u64,
                warmup_fraction: 0.0,
                seed: 1,
            };
            let mut want = vec![0.0; times.len()];
            simulate(&cfg, &mut |c: &crate::Completion| {
                want[c.index as usize] = c.response_ns
            })
            .unwrap();
            let mut q = match disc {
                Discipline::Fifo => OnlineQueue::shared(workers).unwrap(),
                _ => OnlineQueue::per_worker(workers).unwrap(),
            };
            let s = 15_000.0 * f64::from(workers).min(4.0);
            for (k, (&a, &c)) in times.iter().zip(&conns).enumerate() {
                let (_, r) = q.push(a as f64, c, s);
                // The simulator rebases the trace on its first time.
                assert!(
                    (r - want[k]).abs() < 1e-6 * want[k].max(1.0),
                    "{disc:?}/{workers}: request {k}: {r} vs {}",
                    want[k]
                );
            }
        }
    }

    #[test]
    fn no_workers_is_refused() {
        assert!(OnlineQueue::shared(0).is_err());
        assert!(OnlineQueue::per_worker(0).is_err());
    }
}
