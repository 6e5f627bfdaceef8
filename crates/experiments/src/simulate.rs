//! Runs a validated simulation of the model, possibly as several independent replications,
//! reporting progress to an [`Observer`], and summarises it: the ideal as an experiment of its
//! own (`tailscope model`, `model figure`).

use model::{Collector, Completion, SimConfig, SimOutcome, Sink};
use stats::{Estimate, Recorder, Summary, STANDARD_QUANTILES};

use measurement::LabError;
use measurement::Observer;

/// How the confidence intervals were obtained.
pub const CI_BATCH_MEANS: &str = "batch means over 20 consecutive batches (Student t), widened to \
     contain the order-statistic interval: a queue's successive response times are correlated, so \
     order statistics alone would be too narrow";
pub const CI_REPLICATIONS: &str = "Student t over independent replications";
pub const CI_ORDER_STAT: &str =
    "order statistics (too few requests for batch means; assumes independent samples)";

/// The summary of one simulated configuration.
pub struct SimResult {
    pub outcome: SimOutcome,
    pub recorded: u64,
    pub response: Summary,
    pub wait: Summary,
    pub mean_response_ns: f64,
    pub class_response: Vec<Summary>,
    /// CCDF points of the response time (ns, P[X >= x]).
    pub ccdf: Vec<(f64, f64)>,
    pub ci_method: &'static str,
    pub replications: u32,
}

/// Forwards completions to the collector and reports progress now and then.
struct WithProgress<'a> {
    inner: &'a mut Collector,
    obs: &'a dyn Observer,
    label: &'a str,
    done: u64,
    total: u64,
}

impl WithProgress<'_> {
    /// Counts `n` more completions, reporting progress each time another 2^20 are done.
    #[inline(always)]
    fn count(&mut self, n: u64) {
        let before = self.done;
        self.done += n;
        if before >> 20 != self.done >> 20 {
            self.obs.progress(self.label, self.done, self.total);
        }
    }
}

impl Sink for WithProgress<'_> {
    // Inlined into the simulator's loop: a call per request would spill the recursion's
    // state to memory.
    #[inline(always)]
    fn record(&mut self, c: &Completion) {
        self.inner.record(c);
        self.count(1);
    }

    // The collector's block loops (recording, and serving while recording: see
    // `model::Sink`), with the progress counted once a block.
    #[inline(always)]
    fn record_run(&mut self, run: &model::Run) {
        self.inner.record_run(run);
        self.count(run.len() as u64);
    }

    #[inline(always)]
    fn serve_run<F: FnMut(usize) -> (f64, f64)>(&mut self, block: model::ToServe, serve: F) {
        let n = block.len() as u64;
        self.inner.serve_run(block, serve);
        self.count(n);
    }
}

fn model_err(e: model::ModelError) -> LabError {
    LabError::Invalid(e.to_string())
}

fn stats_err(e: stats::StatsError) -> LabError {
    LabError::Failed(e.to_string())
}

/// Simulates `cfg` `replications` times (seeds cfg.seed, cfg.seed+1, ...).
pub fn simulate(
    cfg: &SimConfig,
    replications: u32,
    exact_limit: u64,
    confidence: f64,
    label: &str,
    obs: &dyn Observer,
) -> Result<SimResult, LabError> {
    let reps = replications.max(1);
    let classes = cfg.class_probs.len().max(1);
    let total = cfg.requests * u64::from(reps);
    let mut cols = Vec::new();
    let mut outcome = None;
    let mut done = 0u64;
    for r in 0..reps {
        let mut c = cfg.clone();
        c.seed = cfg.seed.wrapping_add(u64::from(r));
        let limit = (exact_limit / u64::from(reps)).max(1);
        let mut col = Collector::new(c.requests, c.warmup_fraction, classes, limit);
        let mut sink = WithProgress {
            inner: &mut col,
            obs,
            label,
            done,
            total,
        };
        outcome = Some(model::simulate(&c, &mut sink).map_err(model_err)?);
        done = sink.done;
        cols.push(col);
    }
    obs.phase_done(label);
    let Some(outcome) = outcome else {
        return Err(LabError::Failed(
            "the simulation produced no requests".into(),
        ));
    };
    let recorded: u64 = cols.iter().map(|c| c.recorded()).sum();
    let mean_sum: f64 = cols
        .iter()
        .map(|c| c.mean_response_ns() * c.recorded() as f64)
        .sum();
    let (response, wait, ccdf, ci_method) = if let [col] = cols.as_mut_slice() {
        let (r, w) = col.summarize(confidence).map_err(stats_err)?;
        let method = if col.has_batch_means() {
            CI_BATCH_MEANS
        } else {
            CI_ORDER_STAT
        };
        (r, w, col.response().ccdf(10), method)
    } else {
        // Independent replications: each one's quantiles, then a t interval over them.
        let mut per_rep = vec![Vec::new(); STANDARD_QUANTILES.len()];
        let mut per_rep_wait = vec![Vec::new(); STANDARD_QUANTILES.len()];
        let (mut all_r, mut all_w) = (Recorder::exact(0), Recorder::exact(0));
        for col in cols.iter_mut() {
            let (s, w) = col.summarize(confidence).map_err(stats_err)?;
            for (i, q) in s.quantiles.iter().enumerate() {
                per_rep[i].push(q.est.value);
            }
            for (i, q) in w.quantiles.iter().enumerate() {
                per_rep_wait[i].push(q.est.value);
            }
            all_r.merge(col.response()).map_err(stats_err)?;
            all_w.merge(col.wait()).map_err(stats_err)?;
        }
        let mut r = all_r.summarize(confidence).map_err(stats_err)?;
        let mut w = all_w.summarize(confidence).map_err(stats_err)?;
        replace_with_replication_ci(&mut r, &per_rep, confidence)?;
        replace_with_replication_ci(&mut w, &per_rep_wait, confidence)?;
        (r, w, all_r.ccdf(10), CI_REPLICATIONS)
    };
    check_not_saturated(response.max_ns)?;
    let mut class_response = Vec::new();
    if classes > 1 {
        for k in 0..classes {
            let mut all = Recorder::exact(0);
            for col in cols.iter_mut() {
                if let Some(rec) = col.class_response(k) {
                    all.merge(rec).map_err(stats_err)?;
                }
            }
            if !all.is_empty() {
                class_response.push(all.summarize(confidence).map_err(stats_err)?);
            }
        }
    }
    Ok(SimResult {
        outcome,
        recorded,
        ccdf,
        response,
        wait,
        mean_response_ns: if recorded > 0 {
            mean_sum / recorded as f64
        } else {
            f64::NAN
        },
        class_response,
        ci_method,
        replications: reps,
    })
}

/// Fails when a simulated time reached the 2^64 ns that times are recorded in: every
/// percentile above it would be that ceiling, not a result. Input bounds make this rare
/// (service times of days at a utilisation within a hair of 1).
pub fn check_not_saturated(max_ns: f64) -> Result<(), LabError> {
    // Within a streaming histogram's 0.1 % rounding of the ceiling.
    if max_ns >= model::MAX_DURATION_NS * 0.99 {
        return Err(LabError::Failed(
            "a simulated latency reached 2^64 ns (about 584 years), the most that can be \
             recorded: the results would be saturated"
                .into(),
        ));
    }
    Ok(())
}

/// Each quantile's interval from its replications' spread, then made monotone in q
/// ([`Summary::monotone_intervals`]).
fn replace_with_replication_ci(
    s: &mut Summary,
    per_rep: &[Vec<f64>],
    confidence: f64,
) -> Result<(), LabError> {
    for (q, samples) in s.quantiles.iter_mut().zip(per_rep) {
        let e: Estimate = stats::mean_ci(samples, confidence).map_err(stats_err)?;
        q.est = e;
    }
    s.monotone_intervals();
    Ok(())
}
