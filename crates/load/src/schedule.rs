//! The run's schedule, computed before the run: every request's intended send time, its
//! class, and which generator thread (and for traces with connection ids, which
//! connection) sends it.
//!
//! Poisson splits exactly: a superposition of T independent Poisson streams at rate λ/T
//! is a Poisson stream at λ, so each thread draws its own stream from its own seed. Every
//! other process (and traces) is generated once and dealt round-robin, so the union of
//! the threads' schedules is exactly the requested process.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::config::{LoadConfig, StopAt};
use crate::error::LoadError;
use crate::record::RequestRecord;

/// Refuse schedules that could not sensibly be held in memory (~100 B per record).
const MAX_REQUESTS: u64 = 1 << 31;

/// One generator thread's share of the schedule.
pub(crate) struct ThreadPlan {
    /// Scheduled records in intended order (outcome Dropped until sent).
    pub records: Vec<RequestRecord>,
    /// For traces with connection ids: the global connection each request must use.
    pub forced_conn: Option<Vec<u32>>,
}

/// SplitMix64: derives independent-looking seeds for threads and streams from one seed.
pub(crate) fn mix_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed.wrapping_add(stream.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Draws class labels from cumulative probabilities.
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
        Some((self.t.round() as u64, self.gen.next_conn()))
    }
}

/// Builds every thread's share of the schedule for a validated configuration.
pub(crate) fn build(cfg: &LoadConfig) -> Result<Vec<ThreadPlan>, LoadError> {
    let threads = cfg.effective_threads();
    let warmup_ns = cfg.warmup.as_nanos().min(u64::MAX as u128) as u64;
    let is_trace = matches!(cfg.arrival, model::ArrivalSpec::Trace(_));
    let rate = (cfg.rate_per_s > 0.0).then_some(cfg.rate_per_s);
    let (horizon_ns, max_measured) = match cfg.stop {
        StopAt::Duration(d) => (
            warmup_ns.saturating_add(d.as_nanos().min(u64::MAX as u128) as u64),
            u64::MAX,
        ),
        StopAt::Requests(n) => (u64::MAX, n),
    };
    if let Some(r) = rate {
        let expected = match cfg.stop {
            StopAt::Duration(_) => r * horizon_ns as f64 / 1e9,
            StopAt::Requests(n) => n as f64 + r * warmup_ns as f64 / 1e9,
        };
        if expected > MAX_REQUESTS as f64 {
            return Err(LoadError::Config(format!(
                "schedule of ~{expected:.3e} requests is too large (limit {MAX_REQUESTS})"
            )));
        }
    }
    let expected_per_thread = |r: f64| -> usize {
        let n = match cfg.stop {
            StopAt::Duration(_) => r * horizon_ns as f64 / 1e9,
            StopAt::Requests(n) => (n as f64 + r * warmup_ns as f64 / 1e9) / threads as f64,
        };
        (n * 1.02 + 64.0).min(MAX_REQUESTS as f64) as usize
    };
    let mut plans: Vec<ThreadPlan> = (0..threads)
        .map(|_| ThreadPlan {
            records: Vec::new(),
            forced_conn: None,
        })
        .collect();

    let in_range = |t: u64, measured: u64| t < horizon_ns && measured < max_measured;
    let mut measured = 0u64;
    let mut total = 0u64;
    let mut push = |plan: &mut ThreadPlan, t: u64, class: u8| -> Result<(), LoadError> {
        total += 1;
        if total > MAX_REQUESTS {
            return Err(LoadError::Config(format!(
                "schedule exceeds {MAX_REQUESTS} requests"
            )));
        }
        plan.records.push(RequestRecord::scheduled(t, class));
        Ok(())
    };

    if matches!(cfg.arrival, model::ArrivalSpec::Poisson) {
        let r = cfg.rate_per_s / threads as f64;
        let mut streams = Vec::with_capacity(threads);
        let mut pickers = Vec::with_capacity(threads);
        for (i, plan) in plans.iter_mut().enumerate() {
            streams.push(Stream::new(cfg, Some(r), mix_seed(cfg.seed, 2 * i as u64))?);
            pickers.push(ClassPicker::new(
                &cfg.class_probs,
                mix_seed(cfg.seed, 2 * i as u64 + 1),
            ));
            plan.records.reserve(expected_per_thread(r));
        }
        // Merge the streams in time order only to count measured requests exactly for
        // StopAt::Requests; each thread keeps its own stream.
        let mut heads: Vec<Option<u64>> =
            streams.iter_mut().map(|s| s.next().map(|x| x.0)).collect();
        while let Some((i, t)) = heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|t| (i, t)))
            .min_by_key(|&(_, t)| t)
        {
            if !in_range(t, measured) {
                break;
            }
            if t >= warmup_ns {
                measured += 1;
            }
            let class = pickers[i].pick();
            push(&mut plans[i], t, class)?;
            heads[i] = streams[i].next().map(|x| x.0);
        }
    } else {
        let mut stream = Stream::new(cfg, rate, cfg.seed)?;
        let mut picker = ClassPicker::new(&cfg.class_probs, mix_seed(cfg.seed, u64::MAX));
        let per = rate
            .map(|r| expected_per_thread(r / threads as f64))
            .unwrap_or(0);
        let mut k = 0usize;
        while let Some((t, conn)) = stream.next() {
            if !in_range(t, measured) {
                break;
            }
            if t >= warmup_ns {
                measured += 1;
            }
            let class = picker.pick();
            let (thread, forced) = match conn.filter(|_| is_trace) {
                Some(c) => {
                    let global = (c as usize % cfg.connections) as u32;
                    (global as usize % threads, Some(global))
                }
                None => (k % threads, None),
            };
            k += 1;
            let plan = &mut plans[thread];
            if plan.records.capacity() == 0 {
                plan.records.reserve(per);
            }
            if let Some(g) = forced {
                let n = plan.records.len();
                let fc = plan.forced_conn.get_or_insert_with(Vec::new);
                // Requests dealt before the first forced one may use any connection:
                // mark them with u32::MAX ("any").
                fc.resize(n, u32::MAX);
                fc.push(g);
            }
            push(plan, t, class)?;
        }
        for plan in &mut plans {
            if let Some(fc) = plan.forced_conn.as_mut() {
                fc.resize(plan.records.len(), u32::MAX);
            }
        }
    }
    Ok(plans)
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

    fn merged(plans: &[ThreadPlan]) -> Vec<u64> {
        let mut v: Vec<u64> = plans
            .iter()
            .flat_map(|p| p.records.iter().map(|r| r.intended_ns))
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
            let plans = build(&c).unwrap();
            let all = merged(&plans);
            let measured = all.iter().filter(|&&t| t >= 100_000_000).count();
            assert_eq!(measured, 5_000);
            for p in &plans {
                assert!(p
                    .records
                    .windows(2)
                    .all(|w| w[0].intended_ns <= w[1].intended_ns));
                assert!(!p.records.is_empty());
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
        let plans = build(&c).unwrap();
        let all = merged(&plans);
        // Gaps of exactly 1 ms; 100 arrivals fit strictly before 100 ms (first at ≈1 ms).
        assert!((99..=100).contains(&all.len()), "{}", all.len());
        for w in all.windows(2) {
            assert!((w[1] - w[0]).abs_diff(1_000_000) <= 1);
        }
        assert!(plans[0].records.len().abs_diff(plans[1].records.len()) <= 1);
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
        let n = merged(&build(&c).unwrap()).len() as f64;
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
        let plans = build(&c).unwrap();
        let ones = plans
            .iter()
            .flat_map(|p| &p.records)
            .filter(|r| r.class == 1)
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
        assert_eq!(merged(&build(&c).unwrap()), merged(&build(&c).unwrap()));
        let mut d = c.clone();
        d.seed = 2;
        assert_ne!(merged(&build(&c).unwrap()), merged(&build(&d).unwrap()));
    }
}
