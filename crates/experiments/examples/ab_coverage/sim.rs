//! A simulated A/B comparison against exact truth, for the paired estimate's coverage: the
//! unit tests of `experiments::ab::paired` run it small, `examples/ab_coverage` (`bench/ab_power.sh`)
//! at full size.

use experiments::ab::{Arm, PairFacts, Paired, SliceFacts};
use measurement::View;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, Normal};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A simulated comparison against exact truth: two M/M/1 servers (mean service `s_base` and
/// `s_cand`) receive the same Poisson arrivals at `rate` in each pair (common random numbers;
/// their service times are drawn apart), one slice of `slice_s` each after `settle_s` not
/// counted, in a counterbalanced order. The host's drift multiplies every latency of a slice
/// by exp(W), W a random walk shared by both arms that steps N(0, drift²) per slice. An
/// M/M/1 sojourn time is exponential with rate μ − λ, so every percentile's true ratio is
/// (1/s_base − λ) / (1/s_cand − λ), drift or not. With `stalls`, each slice is hit with that
/// probability by a host stall that freezes the server for an exponential time of mean
/// `stall_s` at a uniform instant: one arm's, not shared (the arms alike in distribution, so
/// the truth stays the same).
pub struct Sim {
    pub rate: f64,
    pub s_base: f64,
    pub s_cand: f64,
    pub slice_s: f64,
    pub settle_s: f64,
    pub drift: f64,
    pub stalls: f64,
    pub stall_s: f64,
}

impl Sim {
    pub fn truth(&self) -> f64 {
        (1.0 / self.s_base - self.rate) / (1.0 / self.s_cand - self.rate)
    }

    /// Latencies (ns) of the counted arrivals of one slice.
    fn slice(&self, arrivals: &[f64], service: f64, scale: f64, rng: &mut impl Rng) -> Vec<u64> {
        let exp = Exp::new(1.0 / service).unwrap();
        let mut stall = (self.stalls > 0.0 && rng.gen::<f64>() < self.stalls).then(|| {
            let at = rng.gen::<f64>() * (self.settle_s + self.slice_s);
            let d: f64 = Exp::new(1.0 / self.stall_s).unwrap().sample(rng);
            (at, d)
        });
        let mut free_at = 0.0f64;
        let mut out = Vec::with_capacity(arrivals.len());
        for &a in arrivals {
            if let Some((at, d)) = stall {
                if a >= at {
                    // Frozen from `at` for `d`: the work in progress and everything queued wait.
                    free_at = free_at.max(at) + d;
                    stall = None;
                }
            }
            let start = free_at.max(a);
            free_at = start + exp.sample(rng);
            if a >= self.settle_s {
                out.push(((free_at - a) * scale * 1e9).round() as u64);
            }
        }
        out
    }

    /// One comparison of `pairs` pairs.
    pub fn run(&self, pairs: u32, seed: u64) -> Paired {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let gap = Exp::new(self.rate).unwrap();
        let step = Normal::new(0.0f64, self.drift.max(1e-12)).unwrap();
        let mut walk = 0.0f64;
        let mut p = Paired::new();
        for i in 0..pairs {
            let mut arrivals = Vec::new();
            let mut t = 0.0;
            loop {
                t += gap.sample(&mut rng);
                if t >= self.settle_s + self.slice_s {
                    break;
                }
                arrivals.push(t);
            }
            // Counterbalanced: each block of two pairs holds both orders.
            let candidate_first = (i % 2 == 0) == rng.gen::<bool>();
            let order = if candidate_first {
                [Arm::Candidate, Arm::Baseline]
            } else {
                [Arm::Baseline, Arm::Candidate]
            };
            for arm in order {
                if self.drift > 0.0 {
                    walk += step.sample(&mut rng);
                }
                let s = match arm {
                    Arm::Baseline => self.s_base,
                    Arm::Candidate => self.s_cand,
                };
                for l in self.slice(&arrivals, s, walk.exp(), &mut rng) {
                    // The server view alike in this model.
                    p.record(i, arm, View::User, l);
                    p.record(i, arm, View::Server, l);
                }
            }
            p.push_pair(PairFacts {
                index: i,
                seed: i.into(),
                candidate_first,
                at_s: 0.0,
                baseline: SliceFacts::default(),
                candidate: SliceFacts::default(),
            });
        }
        p
    }
}
