//! A tandem-stage simulator (LNS paper Figure 3b): requests pass through stages in series,
//! each with its own worker count, service-time law and discipline (FCFS or preemptive-resume
//! priority for the delay-sensitive label), then a constant delay. It checks the closed forms
//! of [`super::formulas`] without any measurement.
//!
//! Written by hand because the single-queue simulator of [`crate::sim`] has no notion of
//! stages in series. It is event-driven and keeps only the requests in flight (queues and
//! workers) plus one pending arrival, so memory is bounded by the queue lengths, not by the
//! run length; latencies go to `stats` recorders per label.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use stats::{Quantile, Recorder, Summary};

use super::formulas;
use crate::arrival::{ArrivalGen, ArrivalSpec};
use crate::service::{ServiceGen, ServiceSpec};
use crate::ModelError;

/// Class 0: delay-sensitive; class 1: the rest.
const SENSITIVE: u8 = 0;
/// Latencies kept exactly up to this many per label; a streaming histogram beyond.
const EXACT_LIMIT: u64 = 2_000_000;

/// The order in which a stage serves waiting requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageDiscipline {
    /// One shared queue, first come first served.
    Fcfs,
    /// Delay-sensitive requests first; one arriving when every worker is busy preempts the
    /// most recently started delay-insensitive request, which resumes later with its
    /// remaining work from the front of its queue.
    PriorityPreemptive,
}

/// How a stage hands requests to its workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// One queue shared by all workers (an M/D/c-like stage).
    Shared,
    /// The LNS paper's event dispatcher: each worker has its own queue and the requests of
    /// each label go to the workers in turn (a separate turn per label, so that one worker
    /// sees every k-th delay-sensitive request: the Erlang-k traffic of formula 7). An FCFS
    /// stage takes turns over all requests.
    RoundRobin,
}

/// One stage: `workers` identical workers.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub workers: u32,
    /// Service time per request at this stage (deterministic for the paper's model; the
    /// laws `T = T0 + L·mT` and `R = R0 + k·mR` give its value).
    pub service: ServiceSpec,
    pub discipline: StageDiscipline,
    pub dispatch: Dispatch,
}

impl Stage {
    /// A stage with deterministic service `service_ns` and a shared queue.
    pub fn deterministic(workers: u32, service_ns: f64, discipline: StageDiscipline) -> Self {
        Self {
            workers,
            service: ServiceSpec::Deterministic {
                mean_ns: service_ns,
            },
            discipline,
            dispatch: Dispatch::Shared,
        }
    }

    /// The same stage with `dispatch`.
    pub fn with_dispatch(self, dispatch: Dispatch) -> Self {
        Self { dispatch, ..self }
    }
}

/// Everything a tandem simulation needs.
#[derive(Clone, Debug, PartialEq)]
pub struct TandemConfig {
    pub stages: Vec<Stage>,
    /// The constant stage (G/D/∞): added to every request's latency.
    pub constant_delay_ns: f64,
    pub arrival: ArrivalSpec,
    /// Mean rate; `None` for bursts at their own period (and traces as recorded).
    pub rate_per_s: Option<f64>,
    /// α: probability that a request is delay-sensitive, in (0, 1].
    pub alpha: f64,
    /// Requests to simulate.
    pub requests: u64,
    pub seed: u64,
    /// Bin width u of the latency entropy (formulas 13–14); `None`: no entropy.
    pub entropy_bin_ns: Option<f64>,
}

/// Latency summaries per label (ns). A label with no request has no summary.
#[derive(Clone, Debug)]
pub struct TandemReport {
    pub all: Summary,
    pub sensitive: Option<Summary>,
    pub insensitive: Option<Summary>,
    /// p99 per label, ns.
    pub all_p99_ns: f64,
    pub sensitive_p99_ns: Option<f64>,
    pub insensitive_p99_ns: Option<f64>,
    /// Latency entropy in bits with the configured bin width, when asked for and the label's
    /// latencies were kept exactly (up to 2 000 000 per label).
    pub all_entropy_bits: Option<f64>,
    pub sensitive_entropy_bits: Option<f64>,
    /// Requests that ever waited for another at some stage (a sanity figure).
    pub queued: u64,
}

#[derive(Clone, Copy, Debug)]
struct Job {
    class: u8,
    arrival_ns: f64,
    /// Work left at the current stage; NaN before the stage samples it.
    remaining_ns: f64,
    queued: bool,
}

#[derive(Clone, Copy, Debug)]
struct Busy {
    job: Job,
    started_ns: f64,
    version: u64,
}

struct StageState {
    /// One pair of label queues (shared dispatch) or one per worker (round robin).
    queues: Vec<[VecDeque<Job>; 2]>,
    /// Next worker per label (round robin).
    turn: [usize; 2],
    busy: Vec<Option<Busy>>,
    gen: ServiceGen,
    priority: bool,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    External,
    Done {
        stage: usize,
        worker: usize,
        version: u64,
    },
}

#[derive(Clone, Copy, Debug)]
struct Event {
    time: f64,
    seq: u64,
    kind: Kind,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    /// Reversed, so that the max-heap pops the earliest event (ties: the first scheduled).
    fn cmp(&self, o: &Self) -> Ordering {
        o.time.total_cmp(&self.time).then(o.seq.cmp(&self.seq))
    }
}

struct Engine {
    stages: Vec<StageState>,
    heap: BinaryHeap<Event>,
    seq: u64,
    constant_ns: f64,
    rec: [Recorder; 2],
    queued: u64,
}

impl Engine {
    fn push(&mut self, time: f64, kind: Kind) {
        self.seq += 1;
        self.heap.push(Event {
            time,
            seq: self.seq,
            kind,
        });
    }

    fn start(&mut self, s: usize, w: usize, mut job: Job, now: f64) {
        if job.remaining_ns.is_nan() {
            job.remaining_ns = self.stages[s].gen.sample_ns().max(0.0);
        }
        self.seq += 1;
        let version = self.seq;
        self.stages[s].busy[w] = Some(Busy {
            job,
            started_ns: now,
            version,
        });
        self.push(
            now + job.remaining_ns,
            Kind::Done {
                stage: s,
                worker: w,
                version,
            },
        );
    }

    /// `job` reaches stage `s` at `now` (past the last stage: it is finished).
    fn arrive(&mut self, s: usize, mut job: Job, now: f64) {
        if s == self.stages.len() {
            let latency = now + self.constant_ns - job.arrival_ns;
            self.rec[usize::from(job.class)].record(latency.max(0.0).round() as u64);
            self.queued += u64::from(job.queued);
            return;
        }
        job.remaining_ns = f64::NAN;
        let st = &mut self.stages[s];
        // Labels matter only to a priority stage (queues and round-robin turns).
        let label = if st.priority {
            usize::from(job.class.min(1))
        } else {
            0
        };
        // Round robin: the worker is fixed now; shared: any free worker, else the queue.
        let (q, candidates) = if st.queues.len() > 1 {
            let w = st.turn[label];
            st.turn[label] = (w + 1) % st.busy.len();
            (w, w..w + 1)
        } else {
            (0, 0..st.busy.len())
        };
        if let Some(w) = candidates.clone().find(|&w| st.busy[w].is_none()) {
            return self.start(s, w, job, now);
        }
        job.queued = true;
        if st.priority && job.class == SENSITIVE {
            // Preempt the most recently started delay-insensitive job, if any.
            let victim = candidates
                .filter_map(|w| {
                    st.busy[w]
                        .filter(|b| b.job.class != SENSITIVE)
                        .map(|b| (w, b))
                })
                .max_by(|a, b| a.1.started_ns.total_cmp(&b.1.started_ns));
            if let Some((w, b)) = victim {
                let mut old = b.job;
                old.remaining_ns = (old.remaining_ns - (now - b.started_ns)).max(0.0);
                let q = if st.queues.len() > 1 { w } else { 0 };
                st.queues[q][1].push_front(old);
                return self.start(s, w, job, now);
            }
        }
        st.queues[q][label].push_back(job);
    }

    fn done(&mut self, s: usize, w: usize, version: u64, now: f64) {
        let st = &mut self.stages[s];
        let Some(b) = st.busy[w].filter(|b| b.version == version) else {
            return; // a preempted job's stale completion
        };
        st.busy[w] = None;
        let q = if st.queues.len() > 1 { w } else { 0 };
        let next = st.queues[q][0]
            .pop_front()
            .or_else(|| st.queues[q][1].pop_front());
        if let Some(j) = next {
            self.start(s, w, j, now);
        }
        self.arrive(s + 1, b.job, now);
    }
}

fn p99(rec: &mut Recorder) -> Option<f64> {
    rec.quantile(Quantile::new(0.99).ok()?)
}

/// Runs the tandem simulation. Errors: no stage, a stage with no worker, a bad service
/// spec, α outside (0, 1], a bad arrival process or zero requests.
pub fn simulate_tandem(cfg: &TandemConfig) -> Result<TandemReport, ModelError> {
    validate(cfg)?;
    let (mut eng, mut arrivals) = build(cfg)?;
    let mut labels = Xoshiro256PlusPlus::seed_from_u64(cfg.seed.wrapping_add(0x5eed));
    run_events(&mut eng, cfg, &mut arrivals, &mut labels);
    report(eng, cfg)
}

/// The checks of [`simulate_tandem`]'s configuration, before anything runs.
fn validate(cfg: &TandemConfig) -> Result<(), ModelError> {
    if cfg.stages.is_empty() {
        return Err(ModelError::Invalid {
            name: "tandem",
            reason: "needs at least one stage",
            value: "0 stages".into(),
        });
    }
    if !(cfg.alpha > 0.0 && cfg.alpha <= 1.0) {
        return Err(ModelError::Alpha(cfg.alpha));
    }
    if let Some(bin) = cfg.entropy_bin_ns {
        if !(bin.is_finite() && bin > 0.0) {
            return Err(ModelError::Invalid {
                name: "entropy bin width",
                reason: "must be a positive finite duration",
                value: format!("{bin} ns"),
            });
        }
    }
    if cfg.requests == 0 {
        return Err(ModelError::Invalid {
            name: "requests",
            reason: "must be at least 1",
            value: "0".into(),
        });
    }
    if !(cfg.constant_delay_ns.is_finite() && cfg.constant_delay_ns >= 0.0) {
        return Err(ModelError::Invalid {
            name: "constant delay",
            reason: "must be a non-negative finite duration",
            value: format!("{} ns", cfg.constant_delay_ns),
        });
    }
    Ok(())
}

/// The stages (their service generators seeded in stage order) and the arrival generator.
fn build(cfg: &TandemConfig) -> Result<(Engine, ArrivalGen), ModelError> {
    let mut stages = Vec::with_capacity(cfg.stages.len());
    for (i, st) in cfg.stages.iter().enumerate() {
        if st.workers == 0 {
            return Err(ModelError::NoWorkers);
        }
        let nq = match st.dispatch {
            Dispatch::Shared => 1,
            Dispatch::RoundRobin => st.workers as usize,
        };
        stages.push(StageState {
            queues: (0..nq)
                .map(|_| [VecDeque::new(), VecDeque::new()])
                .collect(),
            turn: [0, 0],
            busy: vec![None; st.workers as usize],
            gen: ServiceGen::new(&st.service, cfg.seed ^ (0x9e37_79b9 + i as u64))?,
            priority: st.discipline == StageDiscipline::PriorityPreemptive,
        });
    }
    let arrivals = ArrivalGen::new(&cfg.arrival, cfg.rate_per_s, cfg.seed)?;
    let expect = |p: f64| (cfg.requests as f64 * p).ceil() as u64;
    let eng = Engine {
        stages,
        heap: BinaryHeap::new(),
        seq: 0,
        constant_ns: cfg.constant_delay_ns,
        rec: [
            Recorder::for_count(expect(cfg.alpha), EXACT_LIMIT),
            Recorder::for_count(expect(1.0 - cfg.alpha), EXACT_LIMIT),
        ],
        queued: 0,
    };
    Ok((eng, arrivals))
}

/// Every arrival and completion, in time order, until the last request has left.
fn run_events(
    eng: &mut Engine,
    cfg: &TandemConfig,
    arrivals: &mut ArrivalGen,
    labels: &mut Xoshiro256PlusPlus,
) {
    let mut t = 0.0;
    let mut generated = 0u64;
    if let Some(g) = arrivals.next_gap_ns() {
        t += g;
        eng.push(t, Kind::External);
    }
    while let Some(ev) = eng.heap.pop() {
        match ev.kind {
            Kind::External => {
                generated += 1;
                let class = if cfg.alpha >= 1.0 || labels.gen::<f64>() < cfg.alpha {
                    SENSITIVE
                } else {
                    1
                };
                let job = Job {
                    class,
                    arrival_ns: ev.time,
                    remaining_ns: f64::NAN,
                    queued: false,
                };
                eng.arrive(0, job, ev.time);
                if generated < cfg.requests {
                    if let Some(g) = arrivals.next_gap_ns() {
                        t += g.max(0.0);
                        eng.push(t, Kind::External);
                    }
                }
            }
            Kind::Done {
                stage,
                worker,
                version,
            } => eng.done(stage, worker, version, ev.time),
        }
    }
}

/// The summaries, p99s and entropies of the recorded latencies.
fn report(eng: Engine, cfg: &TandemConfig) -> Result<TandemReport, ModelError> {
    let [mut sens, mut insens] = eng.rec;
    let entropy = |r: &Recorder| -> Result<Option<f64>, ModelError> {
        match (cfg.entropy_bin_ns, r.values()) {
            (Some(bin), Some(v)) if !v.is_empty() => {
                let x: Vec<f64> = v.iter().map(|&ns| ns as f64).collect();
                formulas::latency_entropy_bits(&x, bin).map(Some)
            }
            _ => Ok(None),
        }
    };
    let sensitive_entropy_bits = entropy(&sens)?;
    let sensitive_p99_ns = p99(&mut sens);
    let insensitive_p99_ns = p99(&mut insens);
    let summarize = |r: &mut Recorder| -> Result<Option<Summary>, ModelError> {
        if r.is_empty() {
            return Ok(None);
        }
        r.summarize(0.95)
            .map(Some)
            .map_err(|e| ModelError::Invalid {
                name: "tandem summary",
                reason: "failed",
                value: e.to_string(),
            })
    };
    let sensitive = summarize(&mut sens)?;
    let insensitive = summarize(&mut insens)?;
    let mut all = sens;
    all.merge(&insens).map_err(|e| ModelError::Invalid {
        name: "tandem summary",
        reason: "failed",
        value: e.to_string(),
    })?;
    let all_entropy_bits = entropy(&all)?;
    let all_p99_ns = p99(&mut all).unwrap_or(f64::NAN);
    let all_summary = summarize(&mut all)?.ok_or(ModelError::Invalid {
        name: "tandem",
        reason: "finished no request",
        value: "0".into(),
    })?;
    Ok(TandemReport {
        all: all_summary,
        sensitive,
        insensitive,
        all_p99_ns,
        sensitive_p99_ns,
        insensitive_p99_ns,
        all_entropy_bits,
        sensitive_entropy_bits,
        queued: eng.queued,
    })
}
