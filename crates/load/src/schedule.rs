//! The run's schedule, generated lazily: each generator thread draws its own share of the
//! intended send times, class labels and (for traces with connection ids) connections as it
//! goes, so a run of any length holds no memory per planned request.
//!
//! Poisson splits exactly: a superposition of T independent Poisson streams at rate λ/T
//! is a Poisson stream at λ, so each thread draws its own stream from its own seed. Every
//! other process (and traces) is one global stream dealt round-robin: each thread replays
//! the whole stream from the same seed and keeps its own items, so the union of the
//! threads' schedules is exactly the requested process (replaying costs T× the drawing,
//! which is nanoseconds per item, against a copy of the whole schedule in memory).
//!
//! `StopAt::Requests(n)` counts measured requests over the merged stream. For a dealt stream
//! every thread sees the global count as it replays. For split Poisson streams the count
//! needs the merge, so [`plan`] runs it once up front (counting only, O(1) memory) and
//! gives each thread its exact quota.
//!
//! A run split over several processes (`LoadConfig::share`, agents on other hosts) is the
//! same thing one level up: the run has `count × threads` *lanes*, numbered as the threads of
//! one process would be, and each process draws only its own lanes (its Poisson streams, its
//! items of the dealt stream, its quotas from the one merge every process computes alike).
//! The shares together are exactly the requested process, and a request count stays exact.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::config::{LoadConfig, StopAt};
use crate::error::LoadError;

/// SplitMix64: derives independent-looking seeds for threads and streams from one seed.
pub(crate) fn mix_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed.wrapping_add(stream.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Draws class labels from cumulative probabilities.
#[derive(Clone)]
struct ClassPicker {
    cumulative: Vec<f64>,
    rng: Xoshiro256PlusPlus,
}

impl ClassPicker {
    fn new(probs: &[f64], seed: u64) -> Self {
        let mut acc = 0.0;
        let cumulative = probs
            .iter()
            .map(|p| {
                acc += p;
                acc
            })
            .collect();
        ClassPicker {
            cumulative,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    fn pick(&mut self) -> u8 {
        if self.cumulative.len() <= 1 {
            return 0;
        }
        let u: f64 = self.rng.gen::<f64>() * self.cumulative[self.cumulative.len() - 1];
        let i = self.cumulative.partition_point(|&c| c <= u);
        i.min(self.cumulative.len() - 1) as u8
    }
}

/// An arrival stream yielding absolute intended times (ns since the run start).
#[derive(Clone)]
struct Stream {
    gen: model::ArrivalGen,
    t: f64,
}

impl Stream {
    fn new(cfg: &LoadConfig, rate: Option<f64>, seed: u64) -> Result<Self, LoadError> {
        let gen = model::ArrivalGen::new(&cfg.arrival, rate, seed)
            .map_err(|e| LoadError::Schedule(e.to_string()))?;
        Ok(Stream { gen, t: 0.0 })
    }

    fn next(&mut self) -> Option<(u64, Option<u32>)> {
        let gap = self.gen.next_gap_ns()?;
        if !gap.is_finite() || gap < 0.0 {
            return None;
        }
        self.t += gap;
        if self.t >= u64::MAX as f64 {
            return None;
        }
        Some((self.t.round() as u64, self.gen.next_conn()))
    }
}

/// One scheduled request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    pub intended_ns: u64,
    pub class: u8,
    /// For traces with connection ids: the global connection it must use.
    pub forced_conn: Option<u32>,
}

/// How a thread's items are drawn.
enum Source {
    /// Its own Poisson stream (rate λ/T) up to the horizon, or exactly `quota` items.
    Own {
        stream: Stream,
        picker: ClassPicker,
        quota: Option<u64>,
    },
    /// The global stream, replayed; this thread keeps items `k` with `k mod lanes == lane`
    /// (or those whose trace connection it owns).
    Dealt {
        stream: Stream,
        picker: ClassPicker,
        lane: usize,
        lanes: usize,
        /// Threads and connections of one share (process).
        threads: usize,
        connections: usize,
        /// Shares (processes) of the run.
        shares: usize,
        is_trace: bool,
        /// Items of the global stream drawn so far.
        k: u64,
        /// Measured (post-warm-up) items of the global stream so far.
        measured: u64,
    },
}

/// One generator thread's share of the schedule, drawn on demand in intended order.
pub(crate) struct ThreadSchedule {
    source: Source,
    horizon_ns: u64,
    warmup_ns: u64,
    max_measured: u64,
    peeked: Option<Item>,
    done: bool,
    /// Items handed out so far.
    pub taken: u64,
}

impl ThreadSchedule {
    /// The next item without taking it.
    pub fn peek(&mut self) -> Option<&Item> {
        if self.peeked.is_none() && !self.done {
            self.peeked = self.draw();
            self.done = self.peeked.is_none();
        }
        self.peeked.as_ref()
    }

    /// Takes the next item.
    pub fn next_item(&mut self) -> Option<Item> {
        self.peek();
        let it = self.peeked.take();
        if it.is_some() {
            self.taken += 1;
        }
        it
    }

    /// Ends the schedule here (stop flag): nothing more is drawn.
    pub fn cut(&mut self) {
        self.peeked = None;
        self.done = true;
    }

    fn draw(&mut self) -> Option<Item> {
        match &mut self.source {
            Source::Own {
                stream,
                picker,
                quota,
            } => {
                if let Some(q) = quota {
                    if *q == 0 {
                        return None;
                    }
                    *q -= 1;
                }
                let (t, _) = stream.next()?;
                if quota.is_none() && t >= self.horizon_ns {
                    return None;
                }
                Some(Item {
                    intended_ns: t,
                    class: picker.pick(),
                    forced_conn: None,
                })
            }
            Source::Dealt {
                stream,
                picker,
                lane,
                lanes,
                threads,
                connections,
                shares,
                is_trace,
                k,
                measured,
            } => loop {
                let (t, conn) = stream.next()?;
                if t >= self.horizon_ns || *measured >= self.max_measured {
                    return None;
                }
                if t >= self.warmup_ns {
                    *measured += 1;
                }
                let class = picker.pick();
                let (owner, forced) = match conn.filter(|_| *is_trace) {
                    Some(c) => {
                        // The run's connections are numbered share by share: a trace's
                        // connection goes to the share that holds it, then to the thread
                        // that owns it there (its local connection c lives on thread c % T).
                        let global = c as usize % (*connections * *shares);
                        let (share, local) = (global / *connections, global % *connections);
                        (share * *threads + local % *threads, Some(local as u32))
                    }
                    None => ((*k % *lanes as u64) as usize, None),
                };
                *k += 1;
                if owner == *lane {
                    return Some(Item {
                        intended_ns: t,
                        class,
                        forced_conn: forced,
                    });
                }
            },
        }
    }
}

/// The whole run's schedule: one lazily drawn share per generator thread, and the expected
/// total (for progress and for refusing runs that cannot be stored).
pub(crate) struct Plan {
    pub threads: Vec<ThreadSchedule>,
    /// Expected number of scheduled requests (exact for a request count or a trace's length
    /// when known, else rate × horizon).
    pub expected: u64,
}

fn dur_ns(d: std::time::Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

/// Prepares every thread's share of the schedule for a validated configuration.
pub(crate) fn plan(cfg: &LoadConfig) -> Result<Plan, LoadError> {
    let threads = cfg.effective_threads();
    // This process draws lanes first_lane.. first_lane + threads of the run's `lanes`.
    let shares = cfg.share.1.max(1) as usize;
    let lanes = threads * shares;
    let first_lane = cfg.share.0 as usize * threads;
    let warmup_ns = dur_ns(cfg.warmup);
    let rate = (cfg.rate_per_s > 0.0).then_some(cfg.rate_per_s);
    let (horizon_ns, max_measured) = match cfg.stop {
        StopAt::Duration(d) => (warmup_ns.saturating_add(dur_ns(d)), u64::MAX),
        StopAt::Requests(n) => (u64::MAX, n),
    };
    let expected_rate = |r: f64| match cfg.stop {
        StopAt::Duration(_) => r * horizon_ns as f64 / 1e9,
        StopAt::Requests(n) => n as f64 + r * warmup_ns as f64 / 1e9,
    };
    let mk = |source| ThreadSchedule {
        source,
        horizon_ns,
        warmup_ns,
        max_measured,
        peeked: None,
        done: false,
        taken: 0,
    };
    if matches!(cfg.arrival, model::ArrivalSpec::Poisson) {
        let r = cfg.rate_per_s / lanes as f64;
        let lane = |i: usize| -> Result<(Stream, ClassPicker), LoadError> {
            Ok((
                Stream::new(cfg, Some(r), mix_seed(cfg.seed, 2 * i as u64))?,
                ClassPicker::new(&cfg.class_probs, mix_seed(cfg.seed, 2 * i as u64 + 1)),
            ))
        };
        let own = (first_lane..first_lane + threads)
            .map(lane)
            .collect::<Result<Vec<_>, _>>()?;
        let quotas = match cfg.stop {
            // The count needs every lane's stream, other processes' too (all compute it alike).
            StopAt::Requests(n) if lanes > 1 => {
                let all = (0..lanes).map(lane).collect::<Result<Vec<_>, _>>()?;
                let q = poisson_quotas(&all, warmup_ns, n);
                Some(q[first_lane..first_lane + threads].to_vec())
            }
            StopAt::Requests(n) => Some(vec![n_with_warmup(&own[0].0, warmup_ns, n)]),
            StopAt::Duration(_) => None,
        };
        let expected = match &quotas {
            Some(q) => q.iter().sum(),
            None => expected_rate(cfg.rate_per_s / shares as f64) as u64,
        };
        let threads = own
            .into_iter()
            .enumerate()
            .map(|(i, (stream, picker))| {
                mk(Source::Own {
                    stream,
                    picker,
                    quota: quotas.as_ref().map(|q| q[i]),
                })
            })
            .collect();
        return Ok(Plan { threads, expected });
    }
    let is_trace = matches!(cfg.arrival, model::ArrivalSpec::Trace(_));
    let stream = Stream::new(cfg, rate, cfg.seed)?;
    let picker = ClassPicker::new(&cfg.class_probs, mix_seed(cfg.seed, u64::MAX));
    let expected = match (&cfg.arrival, rate) {
        (model::ArrivalSpec::Trace(t), _) => {
            let len = t.times_ns.len() as u64;
            match cfg.stop {
                StopAt::Requests(n) => len.min(n.saturating_add(len)),
                StopAt::Duration(_) => match rate {
                    Some(r) => len.min(expected_rate(r) as u64),
                    None => len,
                },
            }
        }
        (_, Some(r)) => expected_rate(r) as u64,
        (_, None) => 0,
    };
    // This process's share of the dealt items (a trace's connection ids may skew it).
    let expected = expected / shares as u64;
    let plans = (0..threads)
        .map(|thread| {
            mk(Source::Dealt {
                stream: stream.clone(),
                picker: picker.clone(),
                lane: first_lane + thread,
                lanes,
                threads,
                connections: cfg.connections.max(1),
                shares,
                is_trace,
                k: 0,
                measured: 0,
            })
        })
        .collect();
    Ok(Plan {
        threads: plans,
        expected,
    })
}

/// One Poisson stream stopped after `n` measured items: how many items in all.
fn n_with_warmup(stream: &Stream, warmup_ns: u64, n: u64) -> u64 {
    let mut s = stream.clone();
    let mut warm = 0u64;
    while let Some((t, _)) = s.next() {
        if t >= warmup_ns {
            break;
        }
        warm += 1;
    }
    warm + n
}

/// Per-thread item counts such that the merged streams hold exactly `n` measured items: the
/// streams are merged in time order once, counting only (clones of the streams, so the
/// threads later draw exactly the same items).
fn poisson_quotas(own: &[(Stream, ClassPicker)], warmup_ns: u64, n: u64) -> Vec<u64> {
    let mut streams: Vec<Stream> = own.iter().map(|(s, _)| s.clone()).collect();
    let mut quotas = vec![0u64; streams.len()];
    let mut heads: Vec<Option<u64>> = streams.iter_mut().map(|s| s.next().map(|x| x.0)).collect();
    let mut measured = 0u64;
    while measured < n {
        let Some((i, t)) = heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|t| (i, t)))
            .min_by_key(|&(_, t)| t)
        else {
            break;
        };
        if t >= warmup_ns {
            measured += 1;
        }
        quotas[i] += 1;
        heads[i] = streams[i].next().map(|x| x.0);
    }
    quotas
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cfg(arrival: model::ArrivalSpec, rate: f64, stop: StopAt, threads: usize) -> LoadConfig {
        let mut c = LoadConfig::new("nullrpc://127.0.0.1:9".parse().unwrap(), rate);
        c.arrival = arrival;
        c.stop = stop;
        c.threads = threads;
        c.connections = threads;
        c
    }

    fn drain(s: &mut ThreadSchedule) -> Vec<Item> {
        std::iter::from_fn(|| s.next_item()).collect()
    }

    fn merged(c: &LoadConfig) -> Vec<u64> {
        let mut v: Vec<u64> = plan(c)
            .unwrap()
            .threads
            .iter_mut()
            .flat_map(|t| drain(t).into_iter().map(|i| i.intended_ns))
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn request_count_is_exact_and_threads_sorted() {
        for arrival in [
            model::ArrivalSpec::Poisson,
            model::ArrivalSpec::Deterministic,
        ] {
            let mut c = cfg(arrival, 10_000.0, StopAt::Requests(5_000), 3);
            c.warmup = Duration::from_millis(100);
            let mut p = plan(&c).unwrap();
            let mut all = Vec::new();
            for t in &mut p.threads {
                let items = drain(t);
                assert!(items
                    .windows(2)
                    .all(|w| w[0].intended_ns <= w[1].intended_ns));
                assert!(!items.is_empty());
                all.extend(items.iter().map(|i| i.intended_ns));
            }
            let measured = all.iter().filter(|&&t| t >= 100_000_000).count();
            assert_eq!(measured, 5_000);
            if matches!(c.arrival, model::ArrivalSpec::Poisson) {
                // Quotas are exact, so the expected total is the true total.
                assert_eq!(p.expected, all.len() as u64);
            }
        }
    }

    #[test]
    fn deterministic_is_dealt_round_robin() {
        let c = cfg(
            model::ArrivalSpec::Deterministic,
            1_000.0,
            StopAt::Duration(Duration::from_millis(100)),
            2,
        );
        let mut p = plan(&c).unwrap();
        let a = drain(&mut p.threads[0]);
        let b = drain(&mut p.threads[1]);
        let mut all: Vec<u64> = a.iter().chain(&b).map(|i| i.intended_ns).collect();
        all.sort_unstable();
        // Gaps of exactly 1 ms; 100 arrivals fit strictly before 100 ms (first at ≈1 ms).
        assert!((99..=100).contains(&all.len()), "{}", all.len());
        for w in all.windows(2) {
            assert!((w[1] - w[0]).abs_diff(1_000_000) <= 1);
        }
        assert!(a.len().abs_diff(b.len()) <= 1);
    }

    #[test]
    fn poisson_count_matches_rate() {
        // 4 threads × rate/4 for 10 s at 5000/s: count ~ Poisson(50000), sd ≈ 224; allow 5 sd.
        let c = cfg(
            model::ArrivalSpec::Poisson,
            5_000.0,
            StopAt::Duration(Duration::from_secs(10)),
            4,
        );
        let n = merged(&c).len() as f64;
        assert!((n - 50_000.0).abs() < 5.0 * 50_000f64.sqrt(), "{n}");
    }

    #[test]
    fn classes_follow_probabilities() {
        let mut c = cfg(
            model::ArrivalSpec::Poisson,
            100_000.0,
            StopAt::Requests(100_000),
            2,
        );
        c.class_probs = vec![0.2, 0.8];
        let ones = plan(&c)
            .unwrap()
            .threads
            .iter_mut()
            .flat_map(drain)
            .filter(|i| i.class == 1)
            .count() as f64;
        // Binomial(1e5, 0.8): sd ≈ 126; allow 5 sd.
        assert!((ones - 80_000.0).abs() < 5.0 * 126.5, "{ones}");
    }

    #[test]
    fn same_seed_same_schedule() {
        let c = cfg(
            model::ArrivalSpec::Poisson,
            1_000.0,
            StopAt::Requests(1_000),
            2,
        );
        assert_eq!(merged(&c), merged(&c));
        let mut d = c.clone();
        d.seed = 2;
        assert_ne!(merged(&c), merged(&d));
    }

    #[test]
    fn trace_connections_go_to_the_thread_that_owns_them() {
        let trace = model::Trace {
            times_ns: (0..40).map(|i| i * 1_000).collect(),
            conn: Some((0..40).map(|i| (i % 5) as u32).collect()),
        };
        let mut c = cfg(
            model::ArrivalSpec::Trace(trace),
            0.0,
            StopAt::Requests(1_000),
            2,
        );
        c.connections = 4;
        let mut p = plan(&c).unwrap();
        assert_eq!(p.expected, 40);
        let mut n = 0;
        for (t, s) in p.threads.iter_mut().enumerate() {
            for it in drain(s) {
                let g = it.forced_conn.unwrap();
                assert!(g < 4);
                assert_eq!(g as usize % 2, t);
                n += 1;
            }
        }
        assert_eq!(n, 40);
    }

    #[test]
    fn a_long_schedule_is_drawn_lazily() {
        // 1e9 req/s for an hour: 3.6e12 requests, never materialised; drawing the first few
        // costs nothing.
        let c = cfg(
            model::ArrivalSpec::Poisson,
            1e9,
            StopAt::Duration(Duration::from_secs(3600)),
            1,
        );
        let mut p = plan(&c).unwrap();
        assert!(p.expected > 3_000_000_000_000);
        let first: Vec<Item> = (0..1000).filter_map(|_| p.threads[0].next_item()).collect();
        assert_eq!(first.len(), 1000);
        assert_eq!(p.threads[0].taken, 1000);
    }
}

#[cfg(test)]
#[path = "schedule_share_tests.rs"]
mod share_tests;
