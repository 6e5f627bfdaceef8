//! Runs a validated simulation, possibly as several independent replications, with progress on
//! stderr, and summarises it. Shared by `model` and `model figure`.

use indicatif::{ProgressBar, ProgressStyle};
use model::{Collector, Completion, SimConfig, SimOutcome, Sink};
use stats::{Estimate, Recorder, Summary, STANDARD_QUANTILES};

/// How the confidence intervals were obtained.
pub const CI_BATCH_MEANS: &str = "batch means over 20 consecutive batches (Student t), widened to \
     contain the order-statistic interval: a queue's successive response times are correlated, so \
     order statistics alone would be too narrow";
pub const CI_REPLICATIONS: &str = "Student t over independent replications";

/// Batches for the batch-means intervals of a single run.
const BATCHES: usize = 20;

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

/// Forwards completions to the collector, keeps per-batch response histograms for the
/// batch-means intervals, and advances a progress bar now and then.
struct WithProgress<'a> {
    inner: &'a mut Collector,
    bar: &'a ProgressBar,
    n: u64,
    /// Index of the first recorded (post-warm-up) request and the batch length.
    first: u64,
    batch_len: u64,
    /// Response and wait recorders per batch.
    batches: Vec<(Recorder, Recorder)>,
}

impl Sink for WithProgress<'_> {
    #[inline]
    fn record(&mut self, c: &Completion) {
        self.inner.record(c);
        if !self.batches.is_empty() && c.index >= self.first {
            let b =
                (((c.index - self.first) / self.batch_len) as usize).min(self.batches.len() - 1);
            let ns = |x: f64| if x > 0.0 { x.round() as u64 } else { 0 };
            self.batches[b].0.record(ns(c.response_ns));
            self.batches[b].1.record(ns(c.wait_ns));
        }
        self.n += 1;
        if self.n & 0xF_FFFF == 0 {
            self.bar.set_position(self.n);
        }
    }
}

/// Widens each quantile's interval to contain value ± t·s/√B of the batch quantiles.
fn widen_with_batches(
    s: &mut Summary,
    batches: &mut [Recorder],
    confidence: f64,
) -> anyhow::Result<()> {
    for q in s.quantiles.iter_mut() {
        let Ok(quant) = stats::Quantile::new(q.q) else {
            continue;
        };
        let per: Vec<f64> = batches
            .iter_mut()
            .filter_map(|b| b.quantile(quant))
            .collect();
        if per.len() < 2 {
            continue;
        }
        let e = stats::mean_ci(&per, confidence)?;
        let half = (e.hi - e.lo) / 2.0;
        q.est.lo = q.est.lo.min(q.est.value - half).max(0.0);
        q.est.hi = q.est.hi.max(q.est.value + half);
    }
    Ok(())
}

fn bar(total: u64, label: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{bar:30}] {human_pos}/{human_len} requests ({per_sec}, eta {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(label.to_string());
    bar
}

/// Simulates `cfg` `replications` times (seeds cfg.seed, cfg.seed+1, ...).
pub fn simulate(
    cfg: &SimConfig,
    replications: u32,
    exact_limit: u64,
    confidence: f64,
    label: &str,
) -> anyhow::Result<SimResult> {
    let reps = replications.max(1);
    let classes = cfg.class_probs.len().max(1);
    let bar = bar(cfg.requests * u64::from(reps), label);
    let mut merged_resp: Option<Recorder> = None;
    let mut merged_wait: Option<Recorder> = None;
    let mut merged_class: Vec<Option<Recorder>> = vec![None; classes];
    let mut per_rep: Vec<Vec<f64>> = vec![Vec::new(); STANDARD_QUANTILES.len()];
    let mut per_rep_wait: Vec<Vec<f64>> = vec![Vec::new(); STANDARD_QUANTILES.len()];
    let mut outcome = None;
    let mut mean_sum = 0.0;
    let mut recorded = 0;
    let mut batch_recorders: Option<Vec<(Recorder, Recorder)>> = None;
    for r in 0..reps {
        let mut c = cfg.clone();
        c.seed = cfg.seed.wrapping_add(u64::from(r));
        let limit = exact_limit / u64::from(reps);
        let mut col = Collector::new(c.requests, c.warmup_fraction, classes, limit.max(1));
        let first = (c.requests as f64 * c.warmup_fraction.clamp(0.0, 1.0)) as u64;
        let kept = c.requests.saturating_sub(first);
        let use_batches = reps == 1 && kept >= (BATCHES as u64) * 100;
        let mut sink = WithProgress {
            inner: &mut col,
            bar: &bar,
            n: 0,
            first,
            batch_len: (kept / BATCHES as u64).max(1),
            batches: if use_batches {
                (0..BATCHES)
                    .map(|_| {
                        (
                            Recorder::for_count(u64::MAX, 0),
                            Recorder::for_count(u64::MAX, 0),
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            },
        };
        let o = model::simulate(&c, &mut sink)?;
        bar.inc(sink.n % 0x10_0000);
        let mut batches = std::mem::take(&mut sink.batches);
        recorded += col.recorded();
        mean_sum += col.mean_response_ns() * col.recorded() as f64;
        if !batches.is_empty() {
            batch_recorders = Some(std::mem::take(&mut batches));
        }
        if reps > 1 {
            let s = col.response().summarize(confidence)?;
            let w = col.wait().summarize(confidence)?;
            for (i, q) in s.quantiles.iter().enumerate() {
                per_rep[i].push(q.est.value);
            }
            for (i, q) in w.quantiles.iter().enumerate() {
                per_rep_wait[i].push(q.est.value);
            }
        }
        merge_into(&mut merged_resp, col.response())?;
        merge_into(&mut merged_wait, col.wait())?;
        for (k, slot) in merged_class.iter_mut().enumerate() {
            if let Some(rec) = col.class_response(k) {
                merge_into(slot, rec)?;
            }
        }
        outcome = Some(o);
    }
    bar.finish_and_clear();
    let (Some(outcome), Some(mut resp), Some(mut wait)) = (outcome, merged_resp, merged_wait)
    else {
        anyhow::bail!("the simulation produced no requests");
    };
    let mut response = resp.summarize(confidence)?;
    let mut wait_s = wait.summarize(confidence)?;
    let ci_method = if reps > 1 {
        replace_with_replication_ci(&mut response, &per_rep, confidence)?;
        replace_with_replication_ci(&mut wait_s, &per_rep_wait, confidence)?;
        CI_REPLICATIONS
    } else {
        if let Some(b) = batch_recorders.take() {
            let (mut r, mut w): (Vec<Recorder>, Vec<Recorder>) = b.into_iter().unzip();
            widen_with_batches(&mut response, &mut r, confidence)?;
            widen_with_batches(&mut wait_s, &mut w, confidence)?;
        }
        CI_BATCH_MEANS
    };
    let mut class_response = Vec::new();
    if classes > 1 {
        for rec in merged_class.iter_mut().flatten() {
            if !rec.is_empty() {
                class_response.push(rec.summarize(confidence)?);
            }
        }
    }
    Ok(SimResult {
        outcome,
        recorded,
        ccdf: resp.ccdf(10),
        response,
        wait: wait_s,
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

fn merge_into(slot: &mut Option<Recorder>, rec: &Recorder) -> anyhow::Result<()> {
    match slot {
        Some(m) => m.merge(rec)?,
        None => {
            let mut m = Recorder::exact(0);
            m.merge(rec)?;
            *slot = Some(m);
        }
    }
    Ok(())
}

fn replace_with_replication_ci(
    s: &mut Summary,
    per_rep: &[Vec<f64>],
    confidence: f64,
) -> anyhow::Result<()> {
    for (q, samples) in s.quantiles.iter_mut().zip(per_rep) {
        let e: Estimate = stats::mean_ci(samples, confidence)?;
        q.est = e;
    }
    Ok(())
}
