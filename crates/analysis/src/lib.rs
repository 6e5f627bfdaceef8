//! Analysis of a measured run: the step between the load generator's per-request records and
//! the store/report. It computes the measured latency distribution (from each request's
//! *intended* send time, so no coordinated omission), the ideal distribution that the queueing
//! model gives for the run's own arrival times (Tales of the Tail §3.2), the excess
//! (measured ÷ ideal per percentile), the generator's lateness, a check that Poisson arrivals
//! really were exponential, and the per-stage breakdown of slow versus median requests.

mod stages;

use load::{Outcome, RequestRecord};
use model::{ArrivalSpec, Collector, Discipline, ServiceSpec, SimConfig, Trace};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;
use stats::{Recorder, Summary, STANDARD_QUANTILES};

pub use stages::{stage_breakdown, StageBreakdown, StageRow, STAGE_NAMES};

/// Errors of the analysis.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnalysisError {
    #[error("no request completed successfully after the warm-up: nothing to analyse")]
    NoData,
    #[error("service time must be positive, got {0} ns")]
    Service(f64),
    #[error("workers must be at least 1")]
    Workers,
    #[error(transparent)]
    Model(#[from] model::ModelError),
    #[error(transparent)]
    Stats(#[from] stats::StatsError),
}

/// How the target's workers take requests: from one shared queue, or each from the connections
/// statically assigned to it (connection j → worker j mod c), as memcached and nginx do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueStructure {
    Single,
    PerWorker,
}

/// What the ideal is computed from.
#[derive(Clone, Debug, Serialize)]
pub struct IdealSpec {
    /// Per-request service time, ns (from calibration or given).
    pub service_ns: f64,
    pub workers: u32,
    pub queues: QueueStructure,
}

/// Inputs of the analysis beside the records.
#[derive(Clone, Debug)]
pub struct AnalysisConfig {
    pub ideal: Option<IdealSpec>,
    /// Run-relative time before which requests are warm-up (not counted).
    pub warmup_ns: u64,
    /// The arrival process that was asked for (the exponential check runs for Poisson).
    pub arrival: ArrivalSpec,
    pub confidence: f64,
    /// A run whose lateness p99 exceeds this is flagged.
    pub lateness_threshold_ns: f64,
    pub seed: u64,
    /// The run's start on the client's CLOCK_MONOTONIC when the server shares the host (its
    /// stamps are then on the same clock); None otherwise.
    pub same_host_start_mono_ns: Option<u64>,
}

/// Counts of request outcomes after the warm-up.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Outcomes {
    pub ok: u64,
    pub error: u64,
    pub timeout: u64,
    pub dropped: u64,
}

/// Excess of one percentile: measured ÷ ideal, with a conservative interval from the two CIs.
#[derive(Clone, Debug, Serialize)]
pub struct Excess {
    pub key: String,
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

/// The exponential check of the achieved inter-arrival times.
#[derive(Clone, Debug, Serialize)]
pub struct ArrivalCheck {
    /// Gaps tested (a random subsample: with millions of gaps any test rejects the tiniest
    /// deviation, such as the clock's granularity, so a fixed-size subsample keeps the test's
    /// power at a meaningful level).
    pub n: u64,
    /// Anderson–Darling on the achieved (sent) gaps.
    pub statistic: f64,
    pub p_value: f64,
    pub exponential: bool,
    /// The same test on the scheduled (intended) gaps: separates a bad schedule from a
    /// generator that could not follow it.
    pub schedule_statistic: f64,
    pub schedule_p_value: f64,
    /// Shortest achieved gap: a generator thread cannot send two requests closer than one
    /// send's cost, so shorter scheduled gaps are stretched.
    pub min_sent_gap_ns: u64,
    /// Fraction of scheduled gaps shorter than that.
    pub scheduled_below_min_fraction: f64,
}

/// The measured latency of one request label (class 0 = delay-sensitive in bursty runs).
#[derive(Clone, Debug, Serialize)]
pub struct ClassMeasured {
    pub class: u8,
    pub requests: u64,
    pub measured: Summary,
}

/// Everything the analysis says about a run.
#[derive(Clone, Debug, Serialize)]
pub struct RunAnalysis {
    pub requests: u64,
    pub outcomes: Outcomes,
    pub achieved_rate_rps: f64,
    pub measured: Summary,
    /// Per label, when the run had more than one.
    pub classes: Vec<ClassMeasured>,
    pub ideal: Option<Summary>,
    pub ideal_spec: Option<IdealSpec>,
    /// Why there is no ideal, when there is none although one was asked for.
    pub ideal_note: Option<String>,
    pub excess: Vec<Excess>,
    pub lateness: Summary,
    pub lateness_flagged: bool,
    pub arrival_check: Option<ArrivalCheck>,
    pub stages: Option<StageBreakdown>,
    /// Client-side wake-up delay: user-space receive time − kernel receive timestamp.
    pub client_wakeup: Option<Summary>,
    /// Why the slowest requests are slow (filled in by the caller that sampled the sources
    /// during the run; kept as JSON so that this crate does not depend on the sampler).
    pub why: Option<serde_json::Value>,
    /// CCDF points (µs, P[X >= x]) for plotting.
    pub measured_ccdf_us: Vec<(f64, f64)>,
    pub ideal_ccdf_us: Vec<(f64, f64)>,
}

/// Largest number of gaps the exponential check looks at.
const AD_SAMPLE: usize = 2000;

/// Analyses a run's records.
pub fn analyse(
    records: &[RequestRecord],
    cfg: &AnalysisConfig,
) -> Result<RunAnalysis, AnalysisError> {
    let counted: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.intended_ns >= cfg.warmup_ns)
        .collect();
    let mut outcomes = Outcomes::default();
    let mut measured = Recorder::exact(counted.len());
    let mut lateness = Recorder::exact(counted.len());
    let mut wake = Recorder::exact(0);
    for r in &counted {
        match r.outcome {
            Outcome::Ok => outcomes.ok += 1,
            Outcome::Error => outcomes.error += 1,
            Outcome::Timeout => outcomes.timeout += 1,
            Outcome::Dropped => outcomes.dropped += 1,
        }
        if let Some(l) = r.latency_ns() {
            measured.record(l);
        }
        if let Some(l) = r.lateness_ns() {
            lateness.record(l);
        }
        if r.outcome == Outcome::Ok && r.kernel_rx_ns > 0 && r.received_ns >= r.kernel_rx_ns {
            wake.record(r.received_ns - r.kernel_rx_ns);
        }
    }
    if measured.is_empty() {
        return Err(AnalysisError::NoData);
    }
    let measured_s = measured.summarize(cfg.confidence)?;
    let mut per_class: std::collections::BTreeMap<u8, Recorder> = std::collections::BTreeMap::new();
    for r in &counted {
        if let Some(l) = r.latency_ns() {
            per_class
                .entry(r.class)
                .or_insert_with(|| Recorder::exact(0))
                .record(l);
        }
    }
    let mut classes = Vec::new();
    if per_class.len() > 1 {
        for (class, mut rec) in per_class {
            classes.push(ClassMeasured {
                class,
                requests: rec.len(),
                measured: rec.summarize(cfg.confidence)?,
            });
        }
    }
    let measured_ccdf_us = to_us(measured.ccdf(10));
    let lateness_s = if lateness.is_empty() {
        lateness.record(0);
        lateness.summarize(cfg.confidence)?
    } else {
        lateness.summarize(cfg.confidence)?
    };
    let lateness_flagged = lateness_s
        .get("p99")
        .is_some_and(|e| e.value > cfg.lateness_threshold_ns);

    // Achieved rate: requests actually sent per second over the span of their send times.
    let mut sent: Vec<u64> = counted
        .iter()
        .filter(|r| r.sent_ns > 0)
        .map(|r| r.sent_ns)
        .collect();
    sent.sort_unstable();
    let achieved_rate_rps = match (sent.first(), sent.last()) {
        (Some(a), Some(b)) if b > a && sent.len() > 1 => {
            (sent.len() - 1) as f64 * 1e9 / (b - a) as f64
        }
        _ => 0.0,
    };
    let arrival_check = if matches!(cfg.arrival, ArrivalSpec::Poisson) && sent.len() > 20 {
        let mut intended: Vec<u64> = counted.iter().map(|r| r.intended_ns).collect();
        intended.sort_unstable();
        arrival_check(&sent, &intended, cfg.seed)
    } else {
        None
    };

    let mut ideal_note = None;
    let (ideal, ideal_ccdf_us) = match &cfg.ideal {
        Some(spec) => match ideal_for(records, cfg, spec) {
            Ok((s, ccdf)) => (Some(s), ccdf),
            Err(AnalysisError::Model(model::ModelError::Utilisation(rho))) => {
                ideal_note = Some(format!(
                    "the schedule offers {rho:.3} of the ideal server's capacity (>= 1): no stable ideal exists"
                ));
                (None, Vec::new())
            }
            Err(e) => return Err(e),
        },
        None => (None, Vec::new()),
    };
    let excess = match &ideal {
        Some(i) => excess(&measured_s, i),
        None => Vec::new(),
    };
    let ok: Vec<&RequestRecord> = counted
        .iter()
        .copied()
        .filter(|r| r.outcome == Outcome::Ok)
        .collect();
    let stages = stage_breakdown(&ok, cfg.same_host_start_mono_ns);
    let client_wakeup = if wake.is_empty() {
        None
    } else {
        Some(wake.summarize(cfg.confidence)?)
    };
    Ok(RunAnalysis {
        requests: counted.len() as u64,
        outcomes,
        achieved_rate_rps,
        measured: measured_s,
        classes,
        ideal,
        ideal_spec: cfg.ideal.clone(),
        ideal_note,
        excess,
        lateness: lateness_s,
        lateness_flagged,
        arrival_check,
        stages,
        client_wakeup,
        why: None,
        measured_ccdf_us,
        ideal_ccdf_us,
    })
}

/// Anderson–Darling of a subsample of the gaps between sorted times.
fn ad_of_gaps(times: &[u64], seed: u64) -> Option<stats::AndersonDarling> {
    let mut gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xAD);
    gaps.shuffle(&mut rng);
    gaps.truncate(AD_SAMPLE);
    stats::anderson_darling_exponential(&gaps).ok()
}

fn arrival_check(sent: &[u64], intended: &[u64], seed: u64) -> Option<ArrivalCheck> {
    let achieved = ad_of_gaps(sent, seed)?;
    let schedule = ad_of_gaps(intended, seed)?;
    let min_sent_gap_ns = sent.windows(2).map(|w| w[1] - w[0]).min()?;
    let short = intended
        .windows(2)
        .filter(|w| w[1] - w[0] < min_sent_gap_ns)
        .count();
    Some(ArrivalCheck {
        n: achieved.n,
        statistic: achieved.modified,
        p_value: achieved.p_value,
        exponential: !achieved.reject_at_5pct,
        schedule_statistic: schedule.modified,
        schedule_p_value: schedule.p_value,
        min_sent_gap_ns,
        scheduled_below_min_fraction: short as f64 / (intended.len().max(2) - 1) as f64,
    })
}

fn to_us(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    points.into_iter().map(|(x, p)| (x / 1e3, p)).collect()
}

/// The ideal: the run's own intended arrival times (every request, sent or not: the ideal
/// server sees the schedule) fed to the simulator with a deterministic service time and the
/// target's worker count and queue structure. The warm-up requests pass through the queue but
/// are not recorded, as in the measurement.
fn ideal_for(
    records: &[RequestRecord],
    cfg: &AnalysisConfig,
    spec: &IdealSpec,
) -> Result<(Summary, Vec<(f64, f64)>), AnalysisError> {
    if !(spec.service_ns.is_finite() && spec.service_ns > 0.0) {
        return Err(AnalysisError::Service(spec.service_ns));
    }
    if spec.workers == 0 {
        return Err(AnalysisError::Workers);
    }
    let mut order: Vec<(u64, u32)> = records.iter().map(|r| (r.intended_ns, r.conn)).collect();
    order.sort_unstable();
    let warm = order.iter().take_while(|(t, _)| *t < cfg.warmup_ns).count();
    let n = order.len() as u64;
    let trace = Trace {
        times_ns: order.iter().map(|(t, _)| *t).collect(),
        conn: Some(order.iter().map(|(_, c)| *c).collect()),
    };
    let discipline = match spec.queues {
        QueueStructure::Single => Discipline::Fifo,
        QueueStructure::PerWorker => Discipline::RoundRobin,
    };
    let sim = SimConfig {
        arrival: ArrivalSpec::Trace(trace),
        rate_per_s: None,
        service: ServiceSpec::Deterministic {
            mean_ns: spec.service_ns,
        },
        workers: spec.workers,
        discipline,
        class_probs: Vec::new(),
        connections: None,
        requests: n,
        warmup_fraction: if n > 0 { warm as f64 / n as f64 } else { 0.0 },
        seed: cfg.seed,
    };
    let mut col = Collector::new(n, sim.warmup_fraction, 1, u64::MAX);
    model::simulate(&sim, &mut col)?;
    let s = col.response().summarize(cfg.confidence)?;
    let ccdf = to_us(col.response().ccdf(10));
    Ok((s, ccdf))
}

fn excess(measured: &Summary, ideal: &Summary) -> Vec<Excess> {
    STANDARD_QUANTILES
        .iter()
        .filter_map(|(key, _)| {
            let m = measured.get(key)?;
            let i = ideal.get(key)?;
            if i.value <= 0.0 {
                return None;
            }
            Some(Excess {
                key: key.to_string(),
                value: m.value / i.value,
                lo: if i.hi > 0.0 { m.lo / i.hi } else { f64::NAN },
                hi: if i.lo > 0.0 {
                    m.hi / i.lo
                } else {
                    f64::INFINITY
                },
            })
        })
        .collect()
}

impl RunAnalysis {
    /// `{"p50": ratio, ...}` — the excess under the same percentile keys as the distributions.
    pub fn excess_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for e in &self.excess {
            m.insert(e.key.clone(), serde_json::json!(e.value));
        }
        serde_json::Value::Object(m)
    }
}
