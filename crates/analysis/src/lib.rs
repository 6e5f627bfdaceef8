//! Analysis of a measured run: the step between the load generator's per-request records and
//! the store/report. It computes the measured latency distribution (from each request's
//! *intended* send time, so no coordinated omission), the ideal distribution that the queueing
//! model gives for the run's own arrival times (Tales of the Tail §3.2), the excess
//! (measured ÷ ideal per percentile), the generator's lateness, a check that Poisson arrivals
//! really were exponential, and the per-stage breakdown of slow versus median requests.
//!
//! Every latency is seen two ways: the *user's view* (intended send → received: what a user
//! behind the arrival process sees, the generator's own stalls included) against the ideal
//! for the intended arrivals, and the *server's view* (sent → the client kernel's receive
//! stamp: what the network and the server did) against the ideal for the arrivals the server
//! really saw (the actual send times). The path of each request is split into the
//! generator's delay (intended → sent), network and server, and the client's wake-up.
//!
//! Memory does not grow with the run: the records are read as a stream, in intended order,
//! twice ([`Records`]); distributions are bounded recorders (exact up to [`EXACT_LIMIT`]
//! values, then HdrHistograms) and the ideals are driven online.

mod first;
mod stages;
mod stationarity;
mod windows;

use load::RequestRecord;
use model::ArrivalSpec;
use serde::{Deserialize, Serialize};
use stats::{BlockedRecorder, Quantile, Recorder, Summary, STANDARD_QUANTILES};

pub use stages::{StageBreakdown, StageRow, STAGE_NAMES};
pub use stationarity::{
    MovedSpan, Stationarity, TailStationarity, MIN_WINDOW_COUNT, MOVE_FACTOR, MOVE_MADS,
    TREND_ALPHA,
};
pub use windows::{server_latency, window_width, Window};

use first::First;

/// Up to this many values a distribution is kept exactly, beyond it in an HdrHistogram
/// (3 significant digits): exact quantiles for short runs, bounded memory for long ones.
pub const EXACT_LIMIT: u64 = 200_000;

/// A run's records, read as many times as the analysis needs, in intended-time order.
pub trait Records {
    /// Calls `f` on every record in intended-time order.
    fn visit(&mut self, f: &mut dyn FnMut(&RequestRecord)) -> Result<(), String>;
}

impl Records for &[RequestRecord] {
    fn visit(&mut self, f: &mut dyn FnMut(&RequestRecord)) -> Result<(), String> {
        self.iter().for_each(f);
        Ok(())
    }
}

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
    #[error("reading the run's records: {0}")]
    Read(String),
}

/// How the target's workers take requests: from one shared queue, or each from the connections
/// statically assigned to it (connection j → worker j mod c), as memcached and nginx do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueStructure {
    Single,
    PerWorker,
}

/// What the ideal is computed from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// Width of the per-window figures ([`RunAnalysis::windows`]), ns; 0 = choose: the run's
    /// span / 300 rounded up to a multiple of 100 ms, at least 100 ms.
    pub window_ns: u64,
    /// Quantiles `(key, q)` beyond the standard five in the measured summaries of both views
    /// (e.g. `("p95", 0.95)`), each with its time-block interval; the standard keys stay.
    pub extra_quantiles: Vec<(String, f64)>,
}

impl Default for AnalysisConfig {
    /// No ideal, no warm-up, Poisson arrivals, 95 % intervals, lateness flagged beyond
    /// 100 µs, seed 0, different hosts, automatic windows. Callers that build the struct
    /// field by field can end with `..AnalysisConfig::default()`.
    fn default() -> Self {
        AnalysisConfig {
            ideal: None,
            warmup_ns: 0,
            arrival: ArrivalSpec::Poisson,
            confidence: 0.95,
            lateness_threshold_ns: 100_000.0,
            seed: 0,
            same_host_start_mono_ns: None,
            window_ns: 0,
            extra_quantiles: Vec::new(),
        }
    }
}

/// Counts of request outcomes after the warm-up.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Outcomes {
    pub ok: u64,
    pub error: u64,
    pub timeout: u64,
    pub dropped: u64,
    /// Not sent on purpose (`--overdue shed`): neither lost nor answered (absent in runs
    /// stored before there was such a policy).
    #[serde(default)]
    pub skipped: u64,
}

/// Excess of one percentile: measured ÷ ideal. The interval is by sectioning on the per-block
/// ratio (measured and ideal see the same arrivals, so they move together) when there are
/// enough samples in time (`blocks` > 0); else the conservative ratio of the two intervals
/// (`blocks` = 0, which assumes independent samples).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Excess {
    pub key: String,
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
    /// Sections the interval was built from; 0 = ratio of the two intervals.
    #[serde(default)]
    pub blocks: u32,
}

/// The exponential check of the achieved inter-arrival times.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClassMeasured {
    pub class: u8,
    pub requests: u64,
    pub measured: Summary,
}

/// The server's view of a run: sent → the client kernel's receive stamp (or the user-space
/// receive when the kernel gave none), against the ideal for the arrivals the server saw
/// (the actual send times), with the same service time, workers and queues.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServerView {
    pub measured: Summary,
    pub ideal: Option<Summary>,
    pub ideal_note: Option<String>,
    pub excess: Vec<Excess>,
    /// Share of the requests whose receive time is the kernel's stamp (1 on Linux sockets
    /// with software timestamps; otherwise the user-space receive time stands in).
    pub kernel_stamped_fraction: f64,
    /// CCDF points (µs, P[X >= x]) of the measured and the ideal, for plotting.
    pub measured_ccdf_us: Vec<(f64, f64)>,
    pub ideal_ccdf_us: Vec<(f64, f64)>,
}

/// Where each request's time went, client and server apart.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Decomposition {
    /// Intended → sent: the generator's own lateness plus the time held for a free slot.
    pub lateness: Summary,
    /// Sent → kernel receive: the network and the server (= the server view's measured).
    pub network_server: Summary,
    /// Kernel receive → user space: the client's wake-up (None without kernel stamps).
    pub client_wakeup: Option<Summary>,
}

/// The excess time at one percentile split between client and server: the user's view's
/// excess (measured − ideal) less the server view's (measured − its ideal) is what the
/// client added (its lateness, time held, wake-up, and the bunching its stalls caused).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExcessSplit {
    pub key: String,
    pub total_us: f64,
    pub server_us: f64,
    pub client_us: f64,
}

/// Offered against completed: what the schedule asked of the server and what it did, over
/// the measured schedule's span (first to last intended send after the warm-up).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Throughput {
    pub offered_rps: f64,
    /// 95 % interval of the offered rate as a Poisson count over the span (its own noise).
    pub offered_lo_rps: f64,
    pub offered_hi_rps: f64,
    /// Successful replies received within the span, per second.
    pub completed_rps: f64,
    /// The same over the span's last third: a server that kept serving to the end (as a
    /// saturated one does) against one that stopped (a target that died).
    pub completed_end_rps: f64,
    pub span_s: f64,
}

/// Requests held in the client because every connection had its maximum in flight.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HeldInClient {
    /// Requests that waited for a free connection at all.
    pub requests: u64,
    /// Of the sent requests.
    pub fraction: f64,
    /// Time held, over every sent request (0 for those sent at once).
    pub held: Summary,
}

/// Everything the analysis says about a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunAnalysis {
    pub requests: u64,
    pub outcomes: Outcomes,
    pub achieved_rate_rps: f64,
    pub measured: Summary,
    /// Per label, when the run had more than one.
    pub classes: Vec<ClassMeasured>,
    pub ideal: Option<Summary>,
    /// When the offered load is at or beyond the ideal server's capacity there is no stable
    /// ideal (`ideal` is None): this is the transient of the same arrivals through it, whose
    /// percentiles grow with the run's length.
    pub ideal_transient: Option<Summary>,
    pub ideal_spec: Option<IdealSpec>,
    /// Why there is no ideal, when there is none although one was asked for.
    pub ideal_note: Option<String>,
    pub excess: Vec<Excess>,
    /// The generator's own lateness: when its loop saw each request due, after the intended
    /// time (a CPU stall of the sending thread). Time held for a free connection is not in it.
    pub lateness: Summary,
    pub lateness_flagged: bool,
    pub held_in_client: Option<HeldInClient>,
    pub server_view: Option<ServerView>,
    pub decomposition: Option<Decomposition>,
    /// Per percentile, how much of the excess time is the client's and how much the server's.
    pub excess_split: Vec<ExcessSplit>,
    /// Offered vs completed rates (None without a measured span).
    pub throughput: Option<Throughput>,
    /// The per-request service time the server's own stamps show at this load: the read
    /// (T2→T3, its lower decile), and the median work (T3→T4), encoding (T4→T5) and write
    /// (T5→T6) added up; beside the ideal's (calibrated or given) service time.
    pub stamped_service_ns: Option<f64>,
    /// Set when the ideal is not a lower bound here: the measured median is below the
    /// ideal's beyond both intervals (with why it may be).
    pub ideal_check: Option<String>,
    pub arrival_check: Option<ArrivalCheck>,
    pub stages: Option<StageBreakdown>,
    /// Client-side wake-up delay: user-space receive time − kernel receive timestamp.
    pub client_wakeup: Option<Summary>,
    /// Why the slowest requests are slow (filled in by the caller that sampled the sources
    /// during the run; kept as JSON so that this crate does not depend on the sampler).
    pub why: Option<serde_json::Value>,
    /// First intended send and last completion of the successful measured requests
    /// (run-relative ns), and the latency from which a request counts among the slowest 1 %.
    pub span_ns: Option<(u64, u64)>,
    pub slow_from_ns: Option<f64>,
    /// CCDF points (µs, P[X >= x]) for plotting.
    pub measured_ccdf_us: Vec<(f64, f64)>,
    pub ideal_ccdf_us: Vec<(f64, f64)>,
    /// How the run's intervals were made, in one line to print (the measured summary's
    /// `ci_method`), e.g. "sectioning over 24 time blocks of 256 ms (t, 23 df)".
    pub interval_method: String,
    /// Latency figures per time window ([`AnalysisConfig::window_ns`]), in time order.
    pub windows: Vec<Window>,
    /// Whether the tail was steady over the run (None without enough data).
    pub stationarity: Option<Stationarity>,
    /// The measured latencies' entropy (LNS formulas 13–14) at the distinctions
    /// [`ENTROPY_BINS_NS`] (empty in runs stored before it was computed).
    #[serde(default)]
    pub entropy: Vec<stats::EntropyEstimate>,
}

/// The distinctions u (bin widths) of a run's latency entropy: 1, 10 and 100 µs. The LNS
/// paper leaves u to the user; three decades let runs of different scales be compared at the
/// same u, and an entropy that grows by log₂ 10 ≈ 3.3 bits per decade shows a smooth spread.
pub const ENTROPY_BINS_NS: [f64; 3] = [1e3, 1e4, 1e5];

/// The latency entropy of `r`'s values at each of [`ENTROPY_BINS_NS`].
pub fn entropy_of(r: &stats::Recorder) -> Vec<stats::EntropyEstimate> {
    ENTROPY_BINS_NS
        .iter()
        .filter_map(|&u| stats::recorder_entropy(r, u).ok())
        .collect()
}

/// Analyses a run's records held in memory (in intended-time order).
pub fn analyse(
    records: &[RequestRecord],
    cfg: &AnalysisConfig,
) -> Result<RunAnalysis, AnalysisError> {
    analyse_records(&mut { records }, cfg, None)
}

/// Analyses a run's records read as a stream (twice). `on_slow`, if given, is called in the
/// second pass with (intended ns, latency ns) of each of the slowest 1 % of the successful
/// measured requests (for the attribution).
pub fn analyse_records(
    src: &mut dyn Records,
    cfg: &AnalysisConfig,
    on_slow: Option<&mut dyn FnMut(u64, u64)>,
) -> Result<RunAnalysis, AnalysisError> {
    check_ideal_spec(cfg.ideal.as_ref())?;
    let mut f = First::new(
        cfg.warmup_ns,
        cfg.ideal.as_ref(),
        cfg.seed,
        cfg.same_host_start_mono_ns,
    )?;
    src.visit(&mut |r| f.add(r)).map_err(AnalysisError::Read)?;
    f.finish();
    if f.measured.is_empty() {
        return Err(AnalysisError::NoData);
    }
    let conf = cfg.confidence;
    let mut measured_s = f.measured.summarize_with(conf, &cfg.extra_quantiles)?;
    f.measured_blk.section_summary(&mut measured_s)?;
    let classes = classes_of(&mut f, conf)?;
    let measured_ccdf_us = to_us(f.measured.ccdf(10));
    let mut lateness_s = summary_or_zero(&mut f.lateness, conf)?;
    if !f.lateness_blk.is_empty() {
        f.lateness_blk.section_summary(&mut lateness_s)?;
    }
    let lateness_flagged = lateness_s
        .get("p99")
        .is_some_and(|e| e.value > cfg.lateness_threshold_ns);

    let IdealOutcome {
        stable: ideal,
        note: ideal_note,
        ccdf_us: ideal_ccdf_us,
        transient: ideal_transient,
    } = match f.ideal.as_mut() {
        Some(i) => ideal_of(i, conf, "the schedule")?,
        None => IdealOutcome::default(),
    };
    let excess_user = match (&ideal, &f.ideal) {
        (Some(i), Some(oi)) => excess(&measured_s, i, &f.measured_blk, &oi.blocked)?,
        _ => Vec::new(),
    };
    let server_view = server_view_of(&mut f, cfg)?;
    let client_wakeup = (!f.wake.is_empty())
        .then(|| f.wake.summarize(conf))
        .transpose()?;
    let decomposition = match &server_view {
        Some(sv) if !f.send_delay.is_empty() => Some(Decomposition {
            lateness: f.send_delay.summarize(conf)?,
            network_server: sv.measured.clone(),
            client_wakeup: client_wakeup.clone(),
        }),
        _ => None,
    };
    let held_in_client = held_of(&mut f, conf)?;
    let second = second_pass(src, &mut f, cfg, on_slow)?;
    let throughput = throughput_of(&f, &second);
    let stamped_service_ns = stamped_service_ns(&mut f);
    let ideal_check = ideal_check(
        &measured_s,
        ideal.as_ref(),
        cfg.ideal.as_ref(),
        stamped_service_ns,
    );
    let excess_split = excess_split_of(&measured_s, ideal.as_ref(), server_view.as_ref());
    let stationarity = stationarity::stationarity(
        &f.measured_blk,
        (!f.network_server_blk.is_empty()).then_some(&f.network_server_blk),
        &second.windows,
    );
    let arrival_check = if second.poisson {
        arrival_check(&f, second.short_gaps)
    } else {
        None
    };
    let measured_s_method = measured_s.ci_method.clone();
    Ok(RunAnalysis {
        requests: f.requests,
        outcomes: f.outcomes.clone(),
        achieved_rate_rps: f.achieved_rate_rps(),
        measured: measured_s,
        classes,
        ideal,
        ideal_transient,
        ideal_spec: cfg.ideal.clone(),
        ideal_note,
        excess: excess_user,
        lateness: lateness_s,
        lateness_flagged,
        held_in_client,
        server_view,
        decomposition,
        excess_split,
        throughput,
        stamped_service_ns,
        ideal_check,
        arrival_check,
        stages: second.stages,
        client_wakeup,
        why: None,
        span_ns: f.span,
        slow_from_ns: second.slow_from,
        measured_ccdf_us,
        ideal_ccdf_us,
        interval_method: measured_s_method,
        windows: second.windows,
        stationarity,
        entropy: entropy_of(&f.measured),
    })
}

/// The excess split between client and server, when both views have an ideal.
fn excess_split_of(
    measured: &Summary,
    ideal: Option<&Summary>,
    server_view: Option<&ServerView>,
) -> Vec<ExcessSplit> {
    match (ideal, server_view) {
        (
            Some(i),
            Some(ServerView {
                measured: sm,
                ideal: Some(si),
                ..
            }),
        ) => excess_split(measured, i, sm, si),
        _ => Vec::new(),
    }
}

/// The ideal's parameters must make a queue: a positive, finite service time and a worker.
fn check_ideal_spec(spec: Option<&IdealSpec>) -> Result<(), AnalysisError> {
    let Some(spec) = spec else { return Ok(()) };
    if !(spec.service_ns.is_finite() && spec.service_ns > 0.0) {
        return Err(AnalysisError::Service(spec.service_ns));
    }
    if spec.workers == 0 {
        return Err(AnalysisError::Workers);
    }
    Ok(())
}

/// The measured distribution per request class, when the run has more than one.
fn classes_of(f: &mut First, conf: f64) -> Result<Vec<ClassMeasured>, AnalysisError> {
    let mut classes = Vec::new();
    if f.per_class.len() > 1 {
        for (class, mut rec) in std::mem::take(&mut f.per_class) {
            classes.push(ClassMeasured {
                class,
                requests: rec.len(),
                measured: rec.summarize(conf)?,
            });
        }
    }
    Ok(classes)
}

/// The requests the client held back (its window full), and for how long.
fn held_of(f: &mut First, conf: f64) -> Result<Option<HeldInClient>, AnalysisError> {
    if f.held.is_empty() {
        return Ok(None);
    }
    Ok(Some(HeldInClient {
        requests: f.held_requests,
        fraction: f.held_requests as f64 / f.held.len() as f64,
        held: f.held.summarize(conf)?,
    }))
}

/// The server's view (sent → kernel receive) with its own ideal, from the first pass; None
/// when no request carried a send stamp.
fn server_view_of(
    f: &mut First,
    cfg: &AnalysisConfig,
) -> Result<Option<ServerView>, AnalysisError> {
    if f.network_server.is_empty() {
        return Ok(None);
    }
    let conf = cfg.confidence;
    let mut measured = f
        .network_server
        .summarize_with(conf, &cfg.extra_quantiles)?;
    f.network_server_blk.section_summary(&mut measured)?;
    let IdealOutcome {
        stable: ideal,
        note: ideal_note,
        ccdf_us: ideal_ccdf_us,
        ..
    } = match f.server_ideal.as_mut() {
        Some(i) => ideal_of(i, conf, "the sent requests")?,
        None => IdealOutcome::default(),
    };
    let excess = match (&ideal, &f.server_ideal) {
        (Some(i), Some(oi)) => excess(&measured, i, &f.network_server_blk, &oi.blocked)?,
        _ => Vec::new(),
    };
    Ok(Some(ServerView {
        excess,
        measured,
        ideal,
        ideal_note,
        kernel_stamped_fraction: f.kernel_rx as f64 / f.outcomes.ok.max(1) as f64,
        measured_ccdf_us: to_us(f.network_server.ccdf(10)),
        ideal_ccdf_us,
    }))
}

/// What the second pass over the records finds.
struct SecondPass {
    /// The stage breakdown (None when no request carried the server's stamps).
    stages: Option<StageBreakdown>,
    windows: Vec<Window>,
    /// Scheduled gaps shorter than the shortest achieved one (for the arrival check).
    short_gaps: u64,
    /// Whether the schedule is Poisson with enough sends for the arrival check.
    poisson: bool,
    /// Successful replies received within the intended span, and within its last third.
    completed: u64,
    completed_end: u64,
    /// The latency from which a request is among the slowest 1 %.
    slow_from: Option<f64>,
}

/// Second pass: the stage groups, the slowest 1 % for the attribution (`on_slow`), the
/// windows, the completions, and the scheduled gaps shorter than the shortest achieved one.
fn second_pass(
    src: &mut dyn Records,
    f: &mut First,
    cfg: &AnalysisConfig,
    mut on_slow: Option<&mut dyn FnMut(u64, u64)>,
) -> Result<SecondPass, AnalysisError> {
    let groups = stages::StageGroups::from_latencies(&mut f.stamped);
    let n = f.measured.len();
    let slow_from = value_at_rank(&mut f.measured, n - n.div_ceil(100));
    let poisson = matches!(cfg.arrival, ArrivalSpec::Poisson) && f.sent_count > 20;
    let mut acc = groups.map(|g| stages::StageAcc::new(g, EXACT_LIMIT));
    let window_ns = window_width(
        cfg.window_ns,
        f.span.map_or(0, |(a, b)| b.saturating_sub(a)),
    );
    let mut win = windows::WindowAcc::new(window_ns, cfg.warmup_ns, cfg.ideal.as_ref())?;
    let mut short_gaps = 0u64;
    let mut completed = 0u64;
    let mut completed_end = 0u64;
    let (warmup, start) = (cfg.warmup_ns, cfg.same_host_start_mono_ns);
    let min_gap = f.min_sent_gap.unwrap_or(0);
    let span = (f.first_intended.unwrap_or(0), f.last_intended.unwrap_or(0));
    let mut last: Option<u64> = None;
    src.visit(&mut |r| {
        win.add(r);
        if r.outcome == load::Outcome::Ok && (span.0..span.1).contains(&r.received_ns) {
            completed += 1;
            if r.received_ns >= span.1 - (span.1 - span.0) / 3 {
                completed_end += 1;
            }
        }
        if r.intended_ns < warmup {
            return;
        }
        if let Some(p) = last.replace(r.intended_ns) {
            short_gaps += u64::from(r.intended_ns - p < min_gap);
        }
        let Some(l) = r.latency_ns() else {
            return;
        };
        if let (Some(acc), Some(iv)) = (acc.as_mut(), stages::intervals(r, start)) {
            acc.add(l, &iv);
        }
        if let (Some(cb), Some(thr)) = (on_slow.as_deref_mut(), slow_from) {
            if l as f64 >= thr {
                cb(r.intended_ns, l);
            }
        }
    })
    .map_err(AnalysisError::Read)?;
    Ok(SecondPass {
        stages: acc.map(stages::StageAcc::finish),
        windows: win.finish(),
        short_gaps,
        poisson,
        completed,
        completed_end,
        slow_from,
    })
}

/// Offered and completed rates over the intended span, with the offered rate's interval.
fn throughput_of(f: &First, second: &SecondPass) -> Option<Throughput> {
    match (f.first_intended, f.last_intended) {
        (Some(a), Some(b)) if b > a && f.intended_count > 1 => {
            let span_s = (b - a) as f64 / 1e9;
            let n = (f.intended_count - 1) as f64;
            Some(Throughput {
                offered_rps: n / span_s,
                offered_lo_rps: (n - 1.96 * n.sqrt()).max(0.0) / span_s,
                offered_hi_rps: (n + 1.96 * n.sqrt()) / span_s,
                completed_rps: second.completed as f64 / span_s,
                completed_end_rps: second.completed_end as f64 * 3.0 / span_s,
                span_s,
            })
        }
        _ => None,
    }
}

/// The server's own time per request from its stamps (the sum of its stages' typical
/// durations), None without stamps.
fn stamped_service_ns(f: &mut First) -> Option<f64> {
    let mut sum = 0.0;
    let mut any = false;
    for (k, r) in f.server_stages.iter_mut().enumerate() {
        // The read's own cost is its lower decile: a request later in a batch (several
        // read by one recv) also waits in T2→T3 for the ones before it to be served.
        let q = if k == 0 { 0.1 } else { 0.5 };
        let rank = ((r.len().max(1) - 1) as f64 * q) as u64;
        if let Some(m) = value_at_rank(r, rank) {
            sum += m;
            any = true;
        }
    }
    any.then_some(sum)
}

/// The value at 0-based rank `r` of a non-empty recorder (type-7 quantile r / (n − 1)).
fn value_at_rank(rec: &mut Recorder, r: u64) -> Option<f64> {
    let n = rec.len();
    if n == 0 {
        return None;
    }
    let q = if n == 1 {
        0.0
    } else {
        r as f64 / (n - 1) as f64
    };
    rec.quantile(Quantile::new(q).ok()?)
}

/// A summary, or all zeros when nothing was recorded (a run with no sent request).
fn summary_or_zero(rec: &mut Recorder, conf: f64) -> Result<Summary, AnalysisError> {
    if rec.is_empty() {
        let mut z = Recorder::exact(1);
        z.record(0);
        return Ok(z.summarize(conf)?);
    }
    Ok(rec.summarize(conf)?)
}

/// An ideal's distribution (or why there is none), its CCDF points in µs, and beyond
/// capacity the transient of the same arrivals.
#[derive(Default)]
struct IdealOutcome {
    stable: Option<Summary>,
    note: Option<String>,
    ccdf_us: Vec<(f64, f64)>,
    transient: Option<Summary>,
}

/// An online ideal's distribution, or why there is none (offered load ≥ 1: the queue grows
/// without bound, so its percentiles grow with the run's length and mean nothing; the
/// transient is given as such).
fn ideal_of(
    i: &mut first::OnlineIdeal,
    conf: f64,
    what: &str,
) -> Result<IdealOutcome, AnalysisError> {
    if i.response.is_empty() {
        return Ok(IdealOutcome::default());
    }
    let rho = i.offered_load();
    if rho >= 1.0 {
        return Ok(IdealOutcome {
            note: Some(format!(
                "{what} offers {rho:.3} of the ideal server's capacity (>= 1): no stable ideal exists; its transient for the same arrivals grows with the run's length"
            )),
            transient: Some(sectioned(&mut i.response, &i.blocked, conf)?),
            ..IdealOutcome::default()
        });
    }
    Ok(IdealOutcome {
        stable: Some(sectioned(&mut i.response, &i.blocked, conf)?),
        ccdf_us: to_us(i.response.ccdf(10)),
        ..IdealOutcome::default()
    })
}

/// A recorder's summary with the intervals by sectioning over the same values in time.
fn sectioned(
    rec: &mut Recorder,
    blk: &BlockedRecorder,
    conf: f64,
) -> Result<Summary, AnalysisError> {
    let mut s = rec.summarize(conf)?;
    blk.section_summary(&mut s)?;
    Ok(s)
}

fn arrival_check(f: &First, short_gaps: u64) -> Option<ArrivalCheck> {
    let achieved = stats::anderson_darling_exponential(&f.sent_gaps.values).ok()?;
    let schedule = stats::anderson_darling_exponential(&f.intended_gaps.values).ok()?;
    Some(ArrivalCheck {
        n: achieved.n,
        statistic: achieved.modified,
        p_value: achieved.p_value,
        exponential: !achieved.reject_at_5pct,
        schedule_statistic: schedule.modified,
        schedule_p_value: schedule.p_value,
        min_sent_gap_ns: f.min_sent_gap?,
        scheduled_below_min_fraction: short_gaps as f64 / (f.intended_count.max(2) - 1) as f64,
    })
}

fn to_us(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    points.into_iter().map(|(x, p)| (x / 1e3, p)).collect()
}

/// Whether the ideal is a lower bound: a measured median below the ideal's beyond both
/// intervals means the ideal's service time is too long for this server now.
fn ideal_check(
    measured: &Summary,
    ideal: Option<&Summary>,
    spec: Option<&IdealSpec>,
    stamped_service_ns: Option<f64>,
) -> Option<String> {
    let (m, i) = (measured.get("p50")?, ideal?.get("p50")?);
    if m.hi >= i.lo {
        return None;
    }
    let stamps = match (stamped_service_ns, spec) {
        (Some(s), Some(spec)) => format!(
            " (the server's stamps show {:.1} µs per request against the ideal's {:.1} µs)",
            s / 1e3,
            spec.service_ns / 1e3
        ),
        _ => String::new(),
    };
    Some(format!(
        "the ideal is not a lower bound here: measured p50 {:.1} µs is below the ideal's {:.1} µs beyond both intervals{stamps}; its service time is too long for this server now — a stale calibration, a server changed since (fewer workers, less work per request), or a different request mix than the calibration's: recalibrate or give --service",
        m.value / 1e3,
        i.value / 1e3
    ))
}

fn excess_split(um: &Summary, ui: &Summary, sm: &Summary, si: &Summary) -> Vec<ExcessSplit> {
    STANDARD_QUANTILES
        .iter()
        .filter_map(|(key, _)| {
            let total = um.get(key)?.value - ui.get(key)?.value;
            let server = sm.get(key)?.value - si.get(key)?.value;
            Some(ExcessSplit {
                key: key.to_string(),
                total_us: total / 1e3,
                server_us: server / 1e3,
                client_us: (total - server) / 1e3,
            })
        })
        .collect()
}

/// Measured ÷ ideal per percentile. The interval is sectioning on the per-block ratio of the
/// two (timed on the same clock: the same arrivals) around the overall ratio; with too few
/// samples in time, the conservative ratio of the two summaries' intervals.
fn excess(
    measured: &Summary,
    ideal: &Summary,
    m_blk: &BlockedRecorder,
    i_blk: &BlockedRecorder,
) -> Result<Vec<Excess>, AnalysisError> {
    let mut out = Vec::new();
    for (key, q) in STANDARD_QUANTILES {
        let (Some(m), Some(i)) = (measured.get(key), ideal.get(key)) else {
            continue;
        };
        if i.value <= 0.0 {
            continue;
        }
        let value = m.value / i.value;
        let iv = stats::ratio_interval(
            m_blk,
            i_blk,
            Quantile::new(q)?,
            measured.confidence,
            Some(value),
        )?;
        let (lo, hi, blocks) = if iv.sections > 0 {
            (iv.lo, iv.hi, iv.sections)
        } else {
            (
                if i.hi > 0.0 { m.lo / i.hi } else { f64::NAN },
                if i.lo > 0.0 {
                    m.hi / i.lo
                } else {
                    f64::INFINITY
                },
                0,
            )
        };
        out.push(Excess {
            key: key.to_string(),
            value,
            lo,
            hi,
            blocks,
        });
    }
    Ok(out)
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
