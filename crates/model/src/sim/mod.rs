//! The discrete-event simulator: an A/S/c queue fed by an [`ArrivalSpec`] and a
//! [`ServiceSpec`], under one of the queueing disciplines of Tales of the Tail §2.4 (plus
//! static partitioning and priorities). Every request's completion goes to a [`Sink`]; the
//! simulator itself keeps only the queue contents, so memory stays bounded for any length.
//!
//! FIFO, random-worker and round-robin need no event queue (see [`fast`]); LIFO, random
//! order and the priority disciplines run an event loop (see [`event`]).

mod event;
mod fast;
mod online;

pub use fast::replace_earliest;
pub use online::OnlineQueue;

use std::str::FromStr;

use crate::arrival::{mean_rate_of_trace, ArrivalGen, ArrivalSpec};
use crate::service::{ServiceGen, ServiceSpec};
use crate::ModelError;

/// The order in which waiting requests are served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discipline {
    /// One shared queue, first come first served.
    Fifo,
    /// One shared queue, most recent arrival first (non-preemptive).
    Lifo,
    /// One shared queue, a free worker takes a uniformly random waiting request.
    Random,
    /// Each request goes to a uniformly random worker; each worker has its own FIFO queue.
    RandomWorker,
    /// Static partition: request k is on connection k mod N (or the trace's connection id),
    /// connection j is pinned to worker j mod c; each worker has its own FIFO queue.
    RoundRobin,
    /// Non-preemptive priority, class 0 highest, FIFO within a class, one shared queue.
    Priority,
    /// Preemptive-resume priority: an arriving request preempts the lowest-priority job in
    /// service when all workers are busy and that job's class is lower; the preempted job
    /// goes back to the front of its class queue with its remaining work.
    PriorityPreemptive,
}

impl Discipline {
    /// The name accepted by [`FromStr`].
    pub fn name(self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
            Self::Lifo => "lifo",
            Self::Random => "random",
            Self::RandomWorker => "random-worker",
            Self::RoundRobin => "round-robin",
            Self::Priority => "priority",
            Self::PriorityPreemptive => "priority-preemptive",
        }
    }

    fn is_priority(self) -> bool {
        matches!(self, Self::Priority | Self::PriorityPreemptive)
    }
}

impl FromStr for Discipline {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(
            match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
                "fifo" | "fcfs" => Self::Fifo,
                "lifo" => Self::Lifo,
                "random" | "random-request" => Self::Random,
                "random-worker" => Self::RandomWorker,
                "round-robin" | "rr" | "partitioned" => Self::RoundRobin,
                "priority" => Self::Priority,
                "priority-preemptive" => Self::PriorityPreemptive,
                _ => return Err(ModelError::Discipline(s.to_string())),
            },
        )
    }
}

/// Everything a simulation needs.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub arrival: ArrivalSpec,
    /// Mean arrival rate; `None` only for a trace replayed as recorded.
    pub rate_per_s: Option<f64>,
    pub service: ServiceSpec,
    pub workers: u32,
    pub discipline: Discipline,
    /// Probability of each class (class 0 first); empty means one class. Priority disciplines
    /// need at least two.
    pub class_probs: Vec<f64>,
    /// Connections for [`Discipline::RoundRobin`] (default: one per worker); ignored when the
    /// trace carries connection ids.
    pub connections: Option<u32>,
    /// Requests to simulate (a trace may end sooner).
    pub requests: u64,
    /// Leading fraction of requests that the collector discards.
    pub warmup_fraction: f64,
    pub seed: u64,
}

/// One finished request. Times in ns from the start of the simulation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Completion {
    /// Arrival order, from 0.
    pub index: u64,
    pub class: u8,
    pub arrival_ns: f64,
    /// Time spent waiting (not in service).
    pub wait_ns: f64,
    /// Completion − arrival.
    pub response_ns: f64,
}

/// Completions of consecutive arrivals, as columns: request `first + j` arrived at
/// `arrival_ns[j]`, started at `start_ns[j]` and was served for `service_ns[j]`. The FIFO
/// paths hand their completions over a block at a time in this form (see
/// [`Sink::record_run`]). All four columns have the same length.
#[derive(Clone, Copy, Debug)]
pub struct Run<'a> {
    pub first: u64,
    pub arrival_ns: &'a [f64],
    pub start_ns: &'a [f64],
    pub service_ns: &'a [f64],
    pub class: &'a [u8],
}

impl Run<'_> {
    /// Completions in the run.
    pub fn len(&self) -> usize {
        columns_len(self.arrival_ns, self.start_ns, self.service_ns, self.class)
    }

    /// Whether the run is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `j`-th completion of the run (`j` < [`Run::len`]): the wait and the response are
    /// computed here, once, for every sink.
    #[inline(always)]
    pub fn get(&self, j: usize) -> Completion {
        Completion::served(
            self.first + j as u64,
            self.class[j],
            self.arrival_ns[j],
            self.start_ns[j],
            self.service_ns[j],
        )
    }
}

impl Completion {
    /// Request `index` of `class`, which arrived at `arrival_ns`, started at `start_ns` and was
    /// served for `service_ns`: the wait and the response computed as every FIFO path
    /// computes them.
    #[inline(always)]
    pub fn served(index: u64, class: u8, arrival_ns: f64, start_ns: f64, service_ns: f64) -> Self {
        Completion {
            index,
            class,
            arrival_ns,
            wait_ns: start_ns - arrival_ns,
            response_ns: (start_ns + service_ns) - arrival_ns,
        }
    }
}

/// The rows the four columns of a [`Run`] or a [`ToServe`] all have.
#[inline(always)]
fn columns_len(arrival: &[f64], start: &[f64], service: &[f64], class: &[u8]) -> usize {
    arrival
        .len()
        .min(start.len())
        .min(service.len())
        .min(class.len())
}

/// Consecutive requests for [`Sink::serve_run`] to serve and record: requests `first + j`,
/// served for `service_ns[j]`, of class `class[j]`; `arrival_ns` and `start_ns` are room for
/// their times (what the default method fills). All four columns have the same length.
#[derive(Debug)]
pub struct ToServe<'a> {
    pub first: u64,
    pub service_ns: &'a [f64],
    pub class: &'a [u8],
    pub arrival_ns: &'a mut [f64],
    pub start_ns: &'a mut [f64],
}

impl ToServe<'_> {
    /// Requests to serve.
    pub fn len(&self) -> usize {
        columns_len(self.arrival_ns, self.start_ns, self.service_ns, self.class)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What [`Sink::serve_run`] does by default: serves every request of `block` into its arrival
/// and start columns, then hands them to [`Sink::record_run`].
#[inline(always)]
pub fn serve_then_record<S: Sink, F: FnMut(usize) -> (f64, f64)>(
    sink: &mut S,
    block: ToServe,
    mut serve: F,
) {
    let n = block.len();
    for (j, (t, st)) in block.arrival_ns[..n]
        .iter_mut()
        .zip(&mut block.start_ns[..n])
        .enumerate()
    {
        (*t, *st) = serve(j);
    }
    sink.record_run(&Run {
        first: block.first,
        arrival_ns: &block.arrival_ns[..n],
        start_ns: &block.start_ns[..n],
        service_ns: &block.service_ns[..n],
        class: &block.class[..n],
    });
}

/// Receives every completion, warm-up included, possibly out of arrival order.
pub trait Sink {
    fn record(&mut self, c: &Completion);

    /// Records every completion of `run`, in order: the same as [`Sink::record`] on each.
    ///
    /// Why a method of its own: a sink that keeps running state (sums, counters) can keep it
    /// in registers over a whole run; recorded one at a time, through `&mut self`, that state
    /// went to memory and back on every completion, a chain of store-to-load forwardings.
    #[inline(always)]
    fn record_run(&mut self, run: &Run) {
        for j in 0..run.len() {
            self.record(&run.get(j));
        }
    }

    /// Serves the requests of `block` and records their completions, in order: `serve(j)`
    /// runs the queue's recursion for request `block.first + j` and returns its arrival and
    /// start times; it must be called once for each `j`, in order (warm-up requests included).
    /// The default is [`serve_then_record`]: the whole block served, then recorded.
    ///
    /// Why: a sink whose recording loop makes no call can serve in the same loop, so that
    /// the recursion's chain of dependent operations overlaps with the recording; in two
    /// passes, each waits for the other.
    #[inline(always)]
    fn serve_run<F: FnMut(usize) -> (f64, f64)>(&mut self, block: ToServe, serve: F)
    where
        Self: Sized,
    {
        serve_then_record(self, block, serve);
    }
}

impl<F: FnMut(&Completion)> Sink for F {
    #[inline]
    fn record(&mut self, c: &Completion) {
        self(c)
    }
}

/// What a simulation did.
#[derive(Clone, Debug, PartialEq)]
pub struct SimOutcome {
    /// Requests completed.
    pub requests: u64,
    /// Time of the last completion.
    pub simulated_ns: f64,
    /// λ·E[S]/c from the configured (or the trace's) rate and the service spec.
    pub offered_load: f64,
    /// Work actually served ÷ (workers × simulated time).
    pub busy_fraction: f64,
}

impl SimConfig {
    /// The arrival rate that loads each of `workers` servers to `load`: λ = load·c/E[S].
    pub fn rate_for_load(
        load: f64,
        workers: u32,
        service: &ServiceSpec,
    ) -> Result<f64, ModelError> {
        if !(load > 0.0 && load < 1.0) {
            return Err(ModelError::Utilisation(load));
        }
        if workers == 0 {
            return Err(ModelError::NoWorkers);
        }
        service.validate()?;
        Ok(load * workers as f64 * 1e9 / service.mean_ns())
    }

    /// The mean arrival rate in requests/s: the configured one, else the trace's.
    pub fn effective_rate(&self) -> Option<f64> {
        match (self.rate_per_s, &self.arrival) {
            (Some(r), _) => Some(r),
            (None, ArrivalSpec::Trace(t)) => mean_rate_of_trace(t),
            (None, _) => None,
        }
    }

    /// Offered load per worker ρ = λ·E[S]/c (0 when the rate is unknown).
    pub fn offered_load(&self) -> f64 {
        self.effective_rate().unwrap_or(0.0) * self.service.mean_ns()
            / 1e9
            / self.workers.max(1) as f64
    }

    /// Checks the whole configuration before anything runs.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.workers == 0 {
            return Err(ModelError::NoWorkers);
        }
        if self.requests == 0 {
            return Err(ModelError::Invalid {
                name: "requests",
                reason: "must be at least 1",
                value: "0".into(),
            });
        }
        if !(self.warmup_fraction >= 0.0 && self.warmup_fraction < 1.0) {
            return Err(ModelError::Warmup(self.warmup_fraction));
        }
        if self.connections == Some(0) {
            return Err(ModelError::Invalid {
                name: "connections",
                reason: "must be at least 1",
                value: "0".into(),
            });
        }
        if !self.class_probs.is_empty() {
            let sum: f64 = self.class_probs.iter().sum();
            let bad = self
                .class_probs
                .iter()
                .any(|p| !(p.is_finite() && *p >= 0.0));
            if bad || (sum - 1.0).abs() > 1e-9 {
                return Err(ModelError::ClassProbs(self.class_probs.clone()));
            }
        }
        let classes = self.class_probs.len().max(1);
        if classes > 255 || (self.discipline.is_priority() && classes < 2) {
            return Err(ModelError::Classes {
                discipline: self.discipline.name(),
                classes,
            });
        }
        self.service.validate()?;
        // Checks the arrival parameters and the rate.
        ArrivalGen::new(&self.arrival, self.rate_per_s, 0)?;
        let rho = self.offered_load();
        if rho >= 1.0 {
            return Err(ModelError::Utilisation(rho));
        }
        Ok(())
    }
}

/// Independent, reproducible RNG seeds for the arrival, service, routing and class streams
/// (SplitMix64 finaliser over seed and stream number).
fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The inputs every simulation path shares: arrivals, service times and class labels, all
/// generated lazily in arrival order.
pub(crate) struct Source {
    arrivals: ArrivalGen,
    service: ServiceGen,
    classes: ClassPicker,
    /// Arrival time of the most recent request.
    now: f64,
    next_index: u64,
    limit: u64,
    served_ns: f64,
}

/// One arriving request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arrival {
    pub index: u64,
    pub class: u8,
    pub time: f64,
    pub service: f64,
    /// The trace's connection id, when it has one.
    pub conn: Option<u32>,
}

impl Source {
    fn new(cfg: &SimConfig) -> Result<Self, ModelError> {
        Ok(Self {
            arrivals: ArrivalGen::new(&cfg.arrival, cfg.rate_per_s, stream_seed(cfg.seed, 1))?,
            service: ServiceGen::new(&cfg.service, stream_seed(cfg.seed, 2))?,
            classes: ClassPicker::new(&cfg.class_probs, stream_seed(cfg.seed, 4)),
            now: 0.0,
            next_index: 0,
            limit: cfg.requests,
            served_ns: 0.0,
        })
    }

    /// The next request, or `None` when `requests` have arrived or the trace ended.
    #[inline(always)]
    pub fn next(&mut self) -> Option<Arrival> {
        if self.next_index >= self.limit {
            return None;
        }
        let gap = self.arrivals.next_gap_ns()?;
        self.now += gap;
        let service = self.service.sample_ns();
        self.served_ns += service;
        let index = self.next_index;
        self.next_index += 1;
        Some(Arrival {
            index,
            class: self.classes.pick(),
            time: self.now,
            service,
            conn: self.arrivals.next_conn(),
        })
    }
}

/// Requests drawn ahead by [`Source::fill`].
pub(crate) const BLOCK: usize = 256;

/// Up to [`BLOCK`] consecutive arrivals, as columns: the simulator's recursions read them in
/// a loop that makes no call, so their state stays in registers.
pub(crate) struct Block {
    /// Arrival index of the first.
    pub first: u64,
    pub len: usize,
    pub time: [f64; BLOCK],
    pub service: [f64; BLOCK],
    pub class: [u8; BLOCK],
}

impl Block {
    pub fn new() -> Self {
        Self {
            first: 0,
            len: 0,
            time: [0.0; BLOCK],
            service: [0.0; BLOCK],
            class: [0; BLOCK],
        }
    }
}

impl Source {
    /// Replaces `b`'s contents with the next arrivals (the same ones, with the same times,
    /// services and classes, as that many calls of [`Source::next`] return; connection ids
    /// are not kept); returns how many, 0 when there are no more.
    #[cfg(test)]
    pub fn fill(&mut self, b: &mut Block) -> usize {
        let n = self.fill_gaps(b);
        let (mut now, mut served) = (self.now, self.served_ns);
        for (t, s) in b.time[..n].iter_mut().zip(&b.service[..n]) {
            *t = arrive(&mut now, &mut served, *t, *s);
        }
        (self.now, self.served_ns) = (now, served);
        n
    }

    /// [`Source::fill`] but for the clock: `b.time` holds the gaps between arrivals (the first
    /// one's from the previous arrival), and `self.now` and `self.served_ns` are left as they
    /// were. The caller turns the gaps into times and sums the services by [`arrive`], in
    /// order, and stores the two sums back.
    ///
    /// Why: each sum is a chain of dependent additions; done in the loop that runs the
    /// queue's recursion (another such chain), they cost nothing, while in loops of their own
    /// they cost as much as the recursion.
    pub fn fill_gaps(&mut self, b: &mut Block) -> usize {
        let want = (self.limit - self.next_index).min(BLOCK as u64) as usize;
        let n = self.arrivals.fill_gaps_ns(&mut b.time[..want]);
        self.service.fill_ns(&mut b.service[..n]);
        if self.classes.cumulative.is_empty() {
            b.class[..n].fill(0);
        } else {
            for c in &mut b.class[..n] {
                *c = self.classes.pick();
            }
        }
        b.first = self.next_index;
        b.len = n;
        self.next_index += n as u64;
        n
    }
}

/// One arrival on the clock of [`Source::fill_gaps`]: advances the arrival time by `gap` (and
/// returns it) and the work served by `service`, in order, as [`Source::next`] sums them.
#[inline(always)]
pub(crate) fn arrive(now: &mut f64, served: &mut f64, gap: f64, service: f64) -> f64 {
    *now += gap;
    *served += service;
    *now
}

/// Draws class labels from the configured probabilities.
struct ClassPicker {
    /// Cumulative probabilities; empty for a single class.
    cumulative: Vec<f64>,
    rng: rand_xoshiro::Xoshiro256PlusPlus,
}

impl ClassPicker {
    fn new(probs: &[f64], seed: u64) -> Self {
        use rand::SeedableRng;
        let mut acc = 0.0;
        let mut cumulative: Vec<f64> = if probs.len() <= 1 {
            Vec::new()
        } else {
            probs
                .iter()
                .map(|p| {
                    acc += p;
                    acc
                })
                .collect()
        };
        // Rounding can leave the total a hair under 1: the last class with positive
        // probability takes everything above, so a zero-probability class is never drawn.
        if let Some(last) = probs.iter().rposition(|p| *p > 0.0) {
            if let Some(c) = cumulative.get_mut(last) {
                *c = f64::INFINITY;
            }
        }
        Self {
            cumulative,
            rng: rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    #[inline]
    fn pick(&mut self) -> u8 {
        use rand::Rng;
        if self.cumulative.is_empty() {
            return 0;
        }
        let u: f64 = self.rng.gen();
        let k = self.cumulative.iter().position(|c| u < *c).unwrap_or(0);
        k as u8
    }
}

/// Runs the simulation described by `cfg`, handing every completion to `sink`.
pub fn simulate<S: Sink>(cfg: &SimConfig, sink: &mut S) -> Result<SimOutcome, ModelError> {
    cfg.validate()?;
    let mut src = Source::new(cfg)?;
    let routing = stream_seed(cfg.seed, 3);
    let (done, end_ns) = match cfg.discipline {
        Discipline::Fifo => fast::fifo(&mut src, cfg.workers, sink),
        Discipline::RandomWorker => fast::random_worker(&mut src, cfg.workers, routing, sink),
        Discipline::RoundRobin => fast::round_robin(
            &mut src,
            cfg.workers,
            cfg.connections.unwrap_or(cfg.workers),
            sink,
        ),
        d => event::run(
            &mut src,
            cfg.workers,
            d,
            cfg.class_probs.len().max(1),
            routing,
            sink,
        ),
    };
    let busy_fraction = if end_ns > 0.0 {
        src.served_ns / (cfg.workers as f64 * end_ns)
    } else {
        0.0
    };
    Ok(SimOutcome {
        requests: done,
        simulated_ns: end_ns,
        offered_load: cfg.offered_load(),
        busy_fraction,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrival::Trace;

    fn cfg(arrival: ArrivalSpec, service: ServiceSpec, classes: Vec<f64>, n: u64) -> SimConfig {
        SimConfig {
            arrival,
            rate_per_s: Some(15_000.0),
            service,
            workers: 2,
            discipline: Discipline::Fifo,
            class_probs: classes,
            connections: None,
            requests: n,
            warmup_fraction: 0.0,
            seed: 9,
        }
    }

    #[test]
    fn blocks_hold_the_arrivals_that_next_returns() {
        let trace = Trace {
            times_ns: (0..700u64).map(|i| i * i * 31).collect(),
            conn: None,
        };
        let cases = [
            // Exponential and deterministic, not a whole number of blocks.
            cfg(
                ArrivalSpec::Poisson,
                ServiceSpec::Exponential { mean_ns: 50_000.0 },
                Vec::new(),
                1_000,
            ),
            cfg(
                ArrivalSpec::Deterministic,
                ServiceSpec::Deterministic { mean_ns: 50_000.0 },
                Vec::new(),
                512,
            ),
            // The out-of-line samplers and classes.
            cfg(
                ArrivalSpec::Lognormal { sigma: 1.0 },
                ServiceSpec::Pareto {
                    mean_ns: 50_000.0,
                    shape: 2.5,
                },
                vec![0.25, 0.75],
                900,
            ),
            // A trace that ends before `requests`, inside a block.
            cfg(
                ArrivalSpec::Trace(trace),
                ServiceSpec::Exponential { mean_ns: 50_000.0 },
                Vec::new(),
                5_000,
            ),
        ];
        for c in &cases {
            let mut one = Source::new(c).unwrap();
            let mut expected = Vec::new();
            while let Some(a) = one.next() {
                expected.push((a.index, a.class, a.time.to_bits(), a.service.to_bits()));
            }
            let mut blocks = Source::new(c).unwrap();
            let mut b = Block::new();
            let mut got = Vec::new();
            while blocks.fill(&mut b) > 0 {
                for j in 0..b.len {
                    got.push((
                        b.first + j as u64,
                        b.class[j],
                        b.time[j].to_bits(),
                        b.service[j].to_bits(),
                    ));
                }
            }
            assert_eq!(got.len(), expected.len(), "{c:?}");
            assert_eq!(got, expected, "{:?}", c.arrival);
            assert_eq!(blocks.served_ns.to_bits(), one.served_ns.to_bits());
            assert_eq!(blocks.now.to_bits(), one.now.to_bits());
            // Both classes drawn where there are two.
            if c.class_probs.len() == 2 {
                assert!(got.iter().any(|g| g.1 == 1) && got.iter().any(|g| g.1 == 0));
            }
        }
        // The trace ended at 700 requests, not at `requests`.
        let mut src = Source::new(&cases[3]).unwrap();
        let mut b = Block::new();
        let mut total = 0;
        while src.fill(&mut b) > 0 {
            total += b.len;
        }
        assert_eq!(total, 700);
    }
}
