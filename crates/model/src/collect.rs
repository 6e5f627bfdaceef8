//! The bridge from the simulator to `stats`: a [`Sink`] that drops the warm-up requests and
//! records response and wait times, overall and per class, in `stats::Recorder`s, and keeps
//! what batch-means confidence intervals need.
//!
//! Why batch means: a queue's successive response times are strongly correlated, so the
//! order-statistic interval (which assumes independent samples) is too narrow. The recorded
//! requests are cut into [`BATCHES`] consecutive batches; the spread of the batch quantiles
//! gives a Student-t interval, and the reported interval is the union of the two.

use stats::{Recorder, Summary, STANDARD_QUANTILES};

use crate::fasthist::{index_of_ns, to_ns, FastHist};
use crate::sim::{serve_then_record, Completion, Run, Sink, ToServe};

/// Records simulated latencies after the warm-up.
#[derive(Debug)]
pub struct Collector {
    /// Requests with an arrival index below this are warm-up and not recorded.
    warmup: u64,
    response: Recorder,
    wait: Recorder,
    /// Per-class recorders; empty when there is a single class (the overall ones serve).
    class_response: Vec<Recorder>,
    class_wait: Vec<Recorder>,
    sum_response_ns: f64,
    sum_wait_ns: f64,
    recorded: u64,
    /// Requests per batch (of the recorded ones).
    batch_len: u64,
    /// Streaming mode: the batch being filled and how many more requests go into it (a
    /// countdown instead of a division on the hot path).
    batch: usize,
    batch_left: u64,
    /// Streaming mode records into per-batch histograms (merged into `response`/`wait` when
    /// first read), so batch means cost nothing extra; exact mode cuts the kept values instead.
    /// They are bare counting arrays in the histograms' layout (module `fasthist`): the hot
    /// loop pays an increment per value.
    /// The batches filled so far, and the one being filled (`cur_*`): the hot loop records
    /// into a field, not into an element of a vector.
    batch_response: Vec<FastHist>,
    batch_wait: Vec<FastHist>,
    cur_response: FastHist,
    cur_wait: FastHist,
    /// Streaming with batch means: record into the batch histograms.
    batched: bool,
    /// Per batch, the standard quantiles of response and wait, computed when first read.
    batch_q: Option<(BatchQuantiles, BatchQuantiles)>,
}

/// Per batch, the five standard quantiles.
type BatchQuantiles = Vec<[f64; 5]>;

/// Batches of the batch-means intervals.
pub const BATCHES: usize = 20;
/// Fewer recorded requests than this per batch and no batch-means interval is made.
const MIN_BATCH: u64 = 100;

impl Collector {
    /// A collector for a run of `total_requests`, discarding the first
    /// `⌊warmup_fraction·total⌋`, with `classes` classes (1 or more). Recorders are exact
    /// when the number kept is at most `exact_limit`, else streaming histograms.
    pub fn new(
        total_requests: u64,
        warmup_fraction: f64,
        classes: usize,
        exact_limit: u64,
    ) -> Self {
        let frac = if warmup_fraction.is_finite() {
            warmup_fraction.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let warmup = ((total_requests as f64 * frac) as u64).min(total_requests);
        let kept = total_requests - warmup;
        let per_class = || {
            if kept <= exact_limit {
                Recorder::exact(0)
            } else {
                Recorder::for_count(u64::MAX, 0)
            }
        };
        let k = if classes > 1 { classes } else { 0 };
        let streaming = kept > exact_limit;
        let batched = kept / BATCHES as u64 >= MIN_BATCH;
        let nb = if streaming && batched { BATCHES } else { 0 };
        Self {
            warmup,
            response: Recorder::for_count(kept, exact_limit),
            wait: Recorder::for_count(kept, exact_limit),
            batch_len: if batched {
                kept / BATCHES as u64
            } else {
                u64::MAX
            },
            batch: 0,
            batch_left: if batched {
                kept / BATCHES as u64
            } else {
                u64::MAX
            },
            batch_response: Vec::with_capacity(nb),
            batch_wait: Vec::with_capacity(nb),
            cur_response: FastHist::default(),
            cur_wait: FastHist::default(),
            batched: nb > 0,
            batch_q: None,
            class_response: (0..k).map(|_| per_class()).collect(),
            class_wait: (0..k).map(|_| per_class()).collect(),
            sum_response_ns: 0.0,
            sum_wait_ns: 0.0,
            recorded: 0,
        }
    }

    /// Response times (arrival to completion) of all recorded requests.
    pub fn response(&mut self) -> &mut Recorder {
        self.settle();
        &mut self.response
    }

    /// Waiting times (time not in service) of all recorded requests.
    pub fn wait(&mut self) -> &mut Recorder {
        self.settle();
        &mut self.wait
    }

    /// Computes the batch quantiles (before anything sorts the exact values) and folds the
    /// per-batch histograms into the overall ones. Runs once, when results are first read.
    fn settle(&mut self) {
        if self.batch_q.is_some() {
            return;
        }
        let per_batch = |recs: &mut [Recorder]| -> Vec<[f64; 5]> {
            recs.iter_mut().map(batch_quantiles).collect()
        };
        let q = if !self.batched {
            (
                chunk_quantiles(&self.response, self.batch_len),
                chunk_quantiles(&self.wait, self.batch_len),
            )
        } else {
            let recorders = |f: Vec<FastHist>| -> Vec<Recorder> {
                f.into_iter()
                    .map(|h| Recorder::from_histogram(h.into_histogram()))
                    .collect()
            };
            // The batch being filled, then empty ones for batches never reached.
            self.batched = false;
            self.batch_response
                .push(std::mem::take(&mut self.cur_response));
            self.batch_wait.push(std::mem::take(&mut self.cur_wait));
            self.batch_response.resize_with(BATCHES, FastHist::default);
            self.batch_wait.resize_with(BATCHES, FastHist::default);
            let mut br = recorders(std::mem::take(&mut self.batch_response));
            let mut bw = recorders(std::mem::take(&mut self.batch_wait));
            let q = (per_batch(&mut br), per_batch(&mut bw));
            for b in &br {
                // Both are auto-resizing histograms: merging cannot fail.
                let _ = self.response.merge(b);
            }
            for b in &bw {
                let _ = self.wait.merge(b);
            }
            q
        };
        self.batch_q = Some(q);
    }

    /// Response and wait summaries whose intervals are the union of the order-statistic
    /// interval and the batch-means interval (value ± t·s/√B over the batch quantiles).
    pub fn summarize(&mut self, confidence: f64) -> Result<(Summary, Summary), stats::StatsError> {
        self.settle();
        let mut r = self.response.summarize(confidence)?;
        let mut w = self.wait.summarize(confidence)?;
        if let Some((br, bw)) = &self.batch_q {
            widen(&mut r, br, confidence)?;
            widen(&mut w, bw, confidence)?;
        }
        Ok((r, w))
    }

    /// Whether the intervals of [`Collector::summarize`] include batch means.
    pub fn has_batch_means(&self) -> bool {
        self.batch_len != u64::MAX
    }

    /// Response times of one class (with a single class, class 0 is everything).
    pub fn class_response(&mut self, class: usize) -> Option<&mut Recorder> {
        self.settle();
        if self.class_response.is_empty() {
            (class == 0).then_some(&mut self.response)
        } else {
            self.class_response.get_mut(class)
        }
    }

    /// Waiting times of one class (with a single class, class 0 is everything).
    pub fn class_wait(&mut self, class: usize) -> Option<&mut Recorder> {
        self.settle();
        if self.class_wait.is_empty() {
            (class == 0).then_some(&mut self.wait)
        } else {
            self.class_wait.get_mut(class)
        }
    }

    /// Mean response time in ns (unrounded), NaN when nothing was recorded.
    pub fn mean_response_ns(&self) -> f64 {
        self.sum_response_ns / self.recorded as f64
    }

    /// Mean waiting time in ns (unrounded), NaN when nothing was recorded.
    pub fn mean_wait_ns(&self) -> f64 {
        self.sum_wait_ns / self.recorded as f64
    }

    /// Requests recorded (after the warm-up).
    pub fn recorded(&self) -> u64 {
        self.recorded
    }

    /// Requests discarded as warm-up (by arrival index).
    pub fn warmup_requests(&self) -> u64 {
        self.warmup
    }
}

impl Collector {
    /// The batch being filled is full: file it and start the next; the last batch takes
    /// every request that is left.
    #[cold]
    #[inline(never)]
    fn next_batch(&mut self) {
        if self.batch + 1 < BATCHES {
            self.batch_response
                .push(std::mem::take(&mut self.cur_response));
            self.batch_wait.push(std::mem::take(&mut self.cur_wait));
            self.batch += 1;
            self.batch_left = self.batch_len;
        } else {
            self.batch_left = u64::MAX;
        }
    }
}

impl Collector {
    /// Records requests `from..end` of a block into the current batch's histograms, all
    /// after the warm-up and in the current batch, until one needs the general path (a count
    /// array to grow, a time of 2⁶⁴ ns or more). `times(k)` gives request k's arrival and
    /// start times and is called once for each, in order (it may be the queue's recursion,
    /// see [`Sink::serve_run`]). Returns where it stopped (`end` if done) and, if before
    /// `end`, the times of that request, not recorded.
    ///
    /// Why: the loop makes no call, and the sums and counters are locals, so they stay in
    /// registers (through `&mut self` in [`Sink::record`] they went to memory and back on every
    /// request, a loop-carried chain of store-to-load forwardings longer than the rest of the
    /// recording). The same values are recorded in the same order as [`Sink::record`] does.
    #[inline(always)]
    fn record_batched<F: FnMut(usize) -> (f64, f64)>(
        &mut self,
        service: &[f64],
        from: usize,
        end: usize,
        times: &mut F,
    ) -> (usize, Option<(f64, f64)>) {
        let service = &service[..end];
        let (mut sum_r, mut sum_w) = (self.sum_response_ns, self.sum_wait_ns);
        let rc = self.cur_response.counts_mut();
        let wc = self.cur_wait.counts_mut();
        let mut k = from;
        let mut stopped = None;
        while k < end {
            let (t, st) = times(k);
            let s = service[k];
            // As `Completion::served` computes them.
            let (w, r) = (st - t, (st + s) - t);
            let (ri, wi) = (index_of_ns(r), index_of_ns(w));
            if ri < rc.len() && wi < wc.len() {
                rc[ri] += 1;
                wc[wi] += 1;
            } else {
                stopped = Some((t, st));
                break;
            }
            sum_r += r;
            sum_w += w;
            k += 1;
        }
        self.sum_response_ns = sum_r;
        self.sum_wait_ns = sum_w;
        let done = (k - from) as u64;
        self.recorded += done;
        self.batch_left -= done;
        (k, stopped)
    }

    /// Records requests `first..first + service.len()`, whose times `times(j)` gives (called
    /// once for each, in order), with [`Collector::record_batched`]: the fast path of
    /// [`Sink::record_run`] and [`Sink::serve_run`], for one class in batches.
    #[inline(always)]
    fn record_block<F: FnMut(usize) -> (f64, f64)>(
        &mut self,
        first: u64,
        service: &[f64],
        class: &[u8],
        mut times: F,
    ) {
        let n = service.len().min(class.len());
        // The warm-up requests are served, not recorded.
        let skip = usize::try_from(self.warmup.saturating_sub(first))
            .unwrap_or(usize::MAX)
            .min(n);
        for j in 0..skip {
            times(j);
        }
        let mut j = skip;
        while j < n {
            if self.batch_left == 0 {
                self.next_batch();
            }
            let left = usize::try_from(self.batch_left).unwrap_or(usize::MAX);
            let end = n.min(j.saturating_add(left));
            let (k, stopped) = self.record_batched(service, j, end, &mut times);
            j = k;
            if let Some((t, st)) = stopped {
                // The rare case that stopped the fast loop (in this batch, which has room).
                let index = first + j as u64;
                self.record(&Completion::served(index, class[j], t, st, service[j]));
                j += 1;
            }
        }
    }

    /// Whether [`Collector::record_block`] applies: one class, recorded in batches.
    fn blocks_apply(&self) -> bool {
        self.batched && self.class_response.is_empty()
    }
}

impl Sink for Collector {
    #[inline(always)]
    fn record_run(&mut self, run: &Run) {
        if !self.blocks_apply() {
            for j in 0..run.len() {
                self.record(&run.get(j));
            }
            return;
        }
        let n = run.len();
        let (time, start) = (&run.arrival_ns[..n], &run.start_ns[..n]);
        self.record_block(run.first, &run.service_ns[..n], &run.class[..n], |k| {
            (time[k], start[k])
        });
    }

    /// Serves in the recording loop when [`Collector::record_block`] applies.
    #[inline(always)]
    fn serve_run<F: FnMut(usize) -> (f64, f64)>(&mut self, block: ToServe, serve: F) {
        if !self.blocks_apply() {
            serve_then_record(self, block, serve);
            return;
        }
        let n = block.len();
        self.record_block(
            block.first,
            &block.service_ns[..n],
            &block.class[..n],
            serve,
        );
    }

    #[inline(always)]
    fn record(&mut self, c: &Completion) {
        if c.index < self.warmup {
            return;
        }
        if !self.batched {
            self.response.record(to_ns(c.response_ns));
            self.wait.record(to_ns(c.wait_ns));
        } else {
            if self.batch_left == 0 {
                self.next_batch();
            }
            self.batch_left -= 1;
            // `record(to_ns(..))`, for less (see `FastHist::record_ns`).
            self.cur_response.record_ns(c.response_ns);
            self.cur_wait.record_ns(c.wait_ns);
        }
        if let (Some(rc), Some(wc)) = (
            self.class_response.get_mut(usize::from(c.class)),
            self.class_wait.get_mut(usize::from(c.class)),
        ) {
            rc.record(to_ns(c.response_ns));
            wc.record(to_ns(c.wait_ns));
        }
        self.sum_response_ns += c.response_ns;
        self.sum_wait_ns += c.wait_ns;
        self.recorded += 1;
    }
}

/// The standard quantiles of one recorder (NaN where it has none).
fn batch_quantiles(r: &mut Recorder) -> [f64; 5] {
    let mut out = [f64::NAN; 5];
    for (o, (_, q)) in out.iter_mut().zip(STANDARD_QUANTILES) {
        if let Ok(q) = stats::Quantile::new(q) {
            *o = r.quantile(q).unwrap_or(f64::NAN);
        }
    }
    out
}

/// The standard quantiles of consecutive chunks of an exact recorder's values, in the order
/// they were recorded; empty when the recorder is not exact or there are no full batches.
fn chunk_quantiles(r: &Recorder, batch_len: u64) -> Vec<[f64; 5]> {
    let Some(values) = r.values() else {
        return Vec::new();
    };
    if batch_len == u64::MAX || batch_len == 0 {
        return Vec::new();
    }
    values
        .chunks(batch_len as usize)
        .take(BATCHES)
        .map(|c| {
            let mut v = c.to_vec();
            v.sort_unstable();
            let mut out = [f64::NAN; 5];
            for (o, (_, q)) in out.iter_mut().zip(STANDARD_QUANTILES) {
                *o = stats::quantile_sorted(&v, q);
            }
            out
        })
        .collect()
}

/// Widens each standard quantile's interval to contain value ± t·s/√B of the batch quantiles.
fn widen(s: &mut Summary, batches: &[[f64; 5]], confidence: f64) -> Result<(), stats::StatsError> {
    for (i, q) in s.quantiles.iter_mut().enumerate().take(5) {
        let per: Vec<f64> = batches
            .iter()
            .map(|b| b[i])
            .filter(|v| v.is_finite())
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A run of `n` completions with waits and services of every size the collector treats
    /// apart: zero and negative (rounding) waits, growing values (the count arrays grow),
    /// times of 2⁶³ ns and more and of 2⁶⁴ ns and more, NaN.
    fn columns(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<u8>) {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let (mut t, mut st, mut s, mut c) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut now = 0.0f64;
        for i in 0..n {
            now += rng.gen_range(0.0..100_000.0);
            let scale = 2f64.powi((i * 50 / n) as i32);
            let wait = match rng.gen_range(0..10) {
                0 | 1 => 0.0,
                2 => -1e-9,
                _ => rng.gen_range(0.0..scale),
            };
            let service = match rng.gen_range(0..1000) {
                0 => 1e19,
                1 => f64::NAN,
                2 => 1e20,
                _ => rng.gen_range(0.0..scale),
            };
            t.push(now);
            st.push(now + wait);
            s.push(service);
            c.push(rng.gen_range(0..2u8));
        }
        (t, st, s, c)
    }

    /// Asserts that two collectors recorded the same.
    fn assert_same(a: &mut Collector, b: &mut Collector, classes: usize) {
        assert_eq!(a.recorded(), b.recorded());
        assert_eq!(
            a.mean_response_ns().to_bits(),
            b.mean_response_ns().to_bits()
        );
        assert_eq!(a.mean_wait_ns().to_bits(), b.mean_wait_ns().to_bits());
        assert_eq!(a.response().histogram(), b.response().histogram());
        assert_eq!(a.wait().histogram(), b.wait().histogram());
        assert_eq!(a.response().values(), b.response().values());
        assert_eq!(a.wait().values(), b.wait().values());
        let (aq, bq) = (a.batch_q.clone(), b.batch_q.clone());
        assert_eq!(format!("{aq:?}"), format!("{bq:?}"));
        for k in 0..classes {
            let r = a.class_response(k).map(|r| r.len());
            assert_eq!(r, b.class_response(k).map(|r| r.len()));
        }
        assert_eq!(
            format!("{:?}", a.summarize(0.95)),
            format!("{:?}", b.summarize(0.95))
        );
    }

    #[test]
    fn a_run_records_as_its_completions_one_by_one() {
        let n = 50_000;
        let (t, st, s, c) = columns(n, 5);
        // Streaming with batches (one class and two), exact, and without batch means.
        for (warmup, classes, exact_limit, total) in [
            (0.0, 1, 0, n),
            (0.0123, 1, 0, n),
            (0.3, 2, 0, n),
            (0.05, 1, u64::MAX, n),
            (0.0, 1, 0, 1_000),
        ] {
            let total = total as u64;
            // Two alike, as reading sorts an exact recorder's values.
            let mut one = Collector::new(total, warmup, classes, exact_limit);
            let mut one2 = Collector::new(total, warmup, classes, exact_limit);
            let mut runs = Collector::new(total, warmup, classes, exact_limit);
            let mut served = Collector::new(total, warmup, classes, exact_limit);
            let mut first = 0;
            // Runs of every length up to a block, cut anywhere.
            let mut len = 1;
            while first < total as usize {
                let end = (first + len).min(total as usize);
                let run = Run {
                    first: first as u64,
                    arrival_ns: &t[first..end],
                    start_ns: &st[first..end],
                    service_ns: &s[first..end],
                    class: &c[first..end],
                };
                for j in 0..run.len() {
                    one.record(&run.get(j));
                    one2.record(&run.get(j));
                }
                runs.record_run(&run);
                let (mut arrival, mut start) = (vec![0.0; end - first], vec![0.0; end - first]);
                let block = ToServe {
                    first: first as u64,
                    service_ns: &s[first..end],
                    class: &c[first..end],
                    arrival_ns: &mut arrival,
                    start_ns: &mut start,
                };
                // Every request served once, in order.
                let mut next = 0;
                served.serve_run(block, |j| {
                    assert_eq!(j, next);
                    next += 1;
                    (t[first + j], st[first + j])
                });
                assert_eq!(next, end - first);
                first = end;
                len = len * 7 % 257;
            }
            assert_same(&mut runs, &mut one, classes);
            assert_same(&mut served, &mut one2, classes);
        }
    }
}
