//! [`Recorder`]: where latencies are recorded, exactly or in an HdrHistogram.

use hdrhistogram::Histogram;

use crate::order_stat::{order_statistic_ci, type7_ranks};
use crate::summary::{QuantileEstimate, Summary};
use crate::{check_confidence, Estimate, Quantile, StatsError, STANDARD_QUANTILES};

/// Significant digits of the histogram that [`Recorder::for_count`] and merges create.
const DEFAULT_SIGFIG: u8 = 3;

/// The `ci_method` of a summary whose intervals are order-statistic ones.
pub const ORDER_STAT_METHOD: &str = "order statistic (assumes independent samples)";

/// Cap on the values [`Recorder::for_count`] pre-allocates (128 MiB of `u64`), so that a
/// generous `exact_limit` cannot turn a count estimate into a huge up-front allocation.
const MAX_PREALLOCATED: u64 = 1 << 24;

/// Records latencies in integer nanoseconds.
///
/// *Exact* keeps every value (exact quantiles, order-statistic confidence intervals on the
/// values themselves); *streaming* keeps an auto-resizing HdrHistogram (bounded memory,
/// relative precision 10^-sigfig, any `u64` value accepted).
#[derive(Clone, Debug)]
pub enum Recorder {
    /// Every value is kept.
    Exact(ExactSamples),
    /// Values are counted in an HdrHistogram.
    Streaming(StreamingHistogram),
}

/// The values of an exact recorder, and whether they are currently sorted.
#[derive(Clone, Debug, Default)]
pub struct ExactSamples {
    values: Vec<u64>,
    sorted: bool,
    /// Past this many values the recorder turns into a streaming one (see
    /// [`Recorder::bounded`]); `u64::MAX` = never.
    limit: u64,
}

/// The histogram of a streaming recorder.
#[derive(Clone, Debug)]
pub struct StreamingHistogram {
    hist: Histogram<u64>,
    /// Values the histogram refused. An auto-resizing histogram accepts every `u64` on
    /// platforms whose `usize` has at least 32 bits, so this stays 0 in practice; it exists so
    /// that a refusal is reported by `summarize` instead of silently lost.
    refused: u64,
}

impl StreamingHistogram {
    #[cold]
    #[inline(never)]
    fn refuse(&mut self) {
        self.refused += 1;
    }

    /// The underlying histogram.
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }
}

/// What a recorder knows about the value at a 0-based rank: the range of values that the
/// stored representation cannot tell apart, and its best single value.
#[derive(Clone, Copy, Debug)]
struct RankValue {
    low: f64,
    mid: f64,
    high: f64,
}

impl Recorder {
    /// An exact recorder with room for `capacity_hint` values.
    pub fn exact(capacity_hint: usize) -> Self {
        Recorder::Exact(ExactSamples {
            values: Vec::with_capacity(capacity_hint),
            sorted: true,
            limit: u64::MAX,
        })
    }

    /// Exact while it holds at most `exact_limit` values, then (for good) a streaming
    /// recorder with 3 significant digits holding all of them: exact quantiles for short
    /// runs, memory bounded for any length. For streams whose length is not known up front.
    pub fn bounded(exact_limit: u64) -> Self {
        Recorder::Exact(ExactSamples {
            values: Vec::new(),
            sorted: true,
            limit: exact_limit,
        })
    }

    /// A streaming recorder: an auto-resizing HdrHistogram with `sigfig` significant digits
    /// (0 to 5).
    pub fn streaming(sigfig: u8) -> Result<Self, StatsError> {
        let hist = Histogram::new(sigfig).map_err(|e| StatsError::Histogram(e.to_string()))?;
        Ok(Recorder::Streaming(StreamingHistogram { hist, refused: 0 }))
    }

    /// Exact when `expected_count <= exact_limit`, else a streaming recorder with 3
    /// significant digits. The exact recorder pre-allocates room for at most
    /// 16 Mi values (it grows as needed beyond that).
    pub fn for_count(expected_count: u64, exact_limit: u64) -> Self {
        if expected_count <= exact_limit {
            Recorder::exact(expected_count.min(MAX_PREALLOCATED) as usize)
        } else {
            Recorder::Streaming(default_streaming())
        }
    }

    /// A streaming recorder holding `hist`'s values: a distribution that arrived as a
    /// histogram (added up from several sources, e.g. the agents of a run) is summarised like
    /// any other.
    pub fn from_histogram(hist: Histogram<u64>) -> Self {
        Recorder::Streaming(StreamingHistogram { hist, refused: 0 })
    }

    /// Records one latency in nanoseconds. Never drops or clamps a value.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        match self {
            Recorder::Exact(e) => {
                if e.values.len() as u64 >= e.limit {
                    self.overflow(ns);
                    return;
                }
                e.values.push(ns);
                e.sorted = false;
            }
            Recorder::Streaming(s) => {
                if s.hist.record(ns).is_err() {
                    s.refuse();
                }
            }
        }
    }

    /// A bounded exact recorder is full: move its values into a histogram, then record `ns`.
    #[cold]
    #[inline(never)]
    fn overflow(&mut self, ns: u64) {
        let mut s = default_streaming();
        if let Recorder::Exact(e) = self {
            for &v in &e.values {
                if s.hist.record(v).is_err() {
                    s.refuse();
                }
            }
        }
        if s.hist.record(ns).is_err() {
            s.refuse();
        }
        *self = Recorder::Streaming(s);
    }

    /// Number of values recorded.
    pub fn len(&self) -> u64 {
        match self {
            Recorder::Exact(e) => e.values.len() as u64,
            Recorder::Streaming(s) => s.hist.len(),
        }
    }

    /// True when nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True for an exact recorder.
    pub fn is_exact(&self) -> bool {
        matches!(self, Recorder::Exact(_))
    }

    /// The recorded values (exact mode only; may be unsorted).
    pub fn values(&self) -> Option<&[u64]> {
        match self {
            Recorder::Exact(e) => Some(&e.values),
            Recorder::Streaming(_) => None,
        }
    }

    /// The histogram (streaming mode only).
    pub fn histogram(&self) -> Option<&Histogram<u64>> {
        match self {
            Recorder::Exact(_) => None,
            Recorder::Streaming(s) => Some(&s.hist),
        }
    }

    /// Adds `other`'s values. Exact + exact stays exact; any other combination leaves `self`
    /// streaming (an exact `self` is converted to a histogram with `other`'s precision).
    pub fn merge(&mut self, other: &Recorder) -> Result<(), StatsError> {
        match (&mut *self, other) {
            (Recorder::Exact(a), Recorder::Exact(b)) => {
                if !b.values.is_empty() {
                    a.values.extend_from_slice(&b.values);
                    a.sorted = false;
                }
                Ok(())
            }
            (Recorder::Streaming(a), Recorder::Exact(b)) => {
                for &v in &b.values {
                    if a.hist.record(v).is_err() {
                        a.refuse();
                    }
                }
                Ok(())
            }
            (Recorder::Streaming(a), Recorder::Streaming(b)) => {
                a.hist
                    .add(&b.hist)
                    .map_err(|e| StatsError::Histogram(e.to_string()))?;
                a.refused += b.refused;
                Ok(())
            }
            (Recorder::Exact(a), Recorder::Streaming(b)) => {
                let mut merged = StreamingHistogram {
                    hist: Histogram::new_from(&b.hist),
                    refused: b.refused,
                };
                merged
                    .hist
                    .add(&b.hist)
                    .map_err(|e| StatsError::Histogram(e.to_string()))?;
                for &v in &a.values {
                    if merged.hist.record(v).is_err() {
                        merged.refuse();
                    }
                }
                *self = Recorder::Streaming(merged);
                Ok(())
            }
        }
    }

    /// Sorts an exact recorder (once) and describes the values at the given 0-based ranks,
    /// which must be `< len()`.
    fn rank_values(&mut self, ranks: &[u64]) -> Vec<RankValue> {
        match self {
            Recorder::Exact(e) => {
                if !e.sorted {
                    e.values.sort_unstable();
                    e.sorted = true;
                }
                ranks
                    .iter()
                    .map(|&r| {
                        let v = e.values[r as usize] as f64;
                        RankValue {
                            low: v,
                            mid: v,
                            high: v,
                        }
                    })
                    .collect()
            }
            Recorder::Streaming(s) => histogram_rank_values(&s.hist, ranks),
        }
    }

    /// The q-quantile in ns (type 7 in exact mode; interpolated between histogram bucket
    /// midpoints in streaming mode). `None` when empty.
    pub fn quantile(&mut self, q: Quantile) -> Option<f64> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let (i, frac) = type7_ranks(n, q.get());
        let j = (i + 1).min(n - 1);
        let v = self.rank_values(&[i, j]);
        Some(v[0].mid + frac * (v[1].mid - v[0].mid))
    }

    /// Summary with order-statistic confidence intervals at `confidence` (e.g. 0.95).
    ///
    /// Each interval is the order-statistic interval widened, if needed, to contain the
    /// point estimate (matters only when the sample is too small for the quantile). In
    /// streaming mode the ranks are looked up in the histogram's cumulative counts directly
    /// (the same bucket `value_at_quantile((rank + 1)/n)` finds, without its float rounding),
    /// and the interval's ends are the lowest / highest values of those buckets, so the
    /// histogram's rounding never narrows it.
    pub fn summarize(&mut self, confidence: f64) -> Result<Summary, StatsError> {
        self.summarize_with(confidence, &[])
    }

    /// [`Recorder::summarize`] with `extra` quantiles `(key, q)` after the standard ones
    /// (e.g. `("p95", 0.95)`); an extra whose key is already present is skipped, so the
    /// standard keys and their order never change.
    pub fn summarize_with(
        &mut self,
        confidence: f64,
        extra: &[(String, f64)],
    ) -> Result<Summary, StatsError> {
        check_confidence(confidence)?;
        let mut wanted: Vec<(String, f64)> = STANDARD_QUANTILES
            .iter()
            .map(|&(k, q)| (k.to_string(), q))
            .collect();
        for (k, q) in extra {
            Quantile::new(*q)?;
            if !wanted.iter().any(|(w, _)| w == k) {
                wanted.push((k.clone(), *q));
            }
        }
        let n = self.len();
        if n == 0 {
            return Err(StatsError::Empty);
        }
        if let Recorder::Streaming(s) = self {
            if s.refused > 0 {
                return Err(StatsError::Histogram(format!(
                    "{} values could not be recorded",
                    s.refused
                )));
            }
        }
        // ranks per quantile: interpolation pair, then CI ends
        let mut plan = Vec::with_capacity(wanted.len());
        let mut ranks = Vec::with_capacity(4 * wanted.len() + 2);
        ranks.extend([0, n - 1]);
        for &(_, q) in &wanted {
            let (i, frac) = type7_ranks(n, q);
            let j = (i + 1).min(n - 1);
            let (lo, hi) = order_statistic_ci(n, q, confidence);
            let lo = lo.min(i);
            let hi = if frac > 0.0 { hi.max(j) } else { hi.max(i) };
            ranks.extend([i, j, lo, hi]);
            plan.push((i, j, frac, lo, hi));
        }
        let values = self.rank_values(&ranks);
        let at = |r: u64| -> RankValue {
            let k = ranks.iter().position(|&x| x == r).unwrap_or(0);
            values[k]
        };
        let quantiles = wanted
            .iter()
            .zip(&plan)
            .map(|((key, q), &(i, j, frac, lo, hi))| {
                let (a, b) = (at(i).mid, at(j).mid);
                let value = a + frac * (b - a);
                QuantileEstimate {
                    key: key.clone(),
                    q: *q,
                    est: Estimate {
                        value,
                        lo: at(lo).low.min(value),
                        hi: at(hi).high.max(value),
                    },
                    blocks: 0,
                }
            })
            .collect();
        let (mean_ns, stdev_ns, min_ns, max_ns) = match self {
            Recorder::Exact(e) => {
                let (mean, sd) = mean_stdev(&e.values);
                let min = e.values[0] as f64;
                let max = e.values[e.values.len() - 1] as f64;
                (mean, sd, min, max)
            }
            Recorder::Streaming(s) => (
                s.hist.mean(),
                s.hist.stdev(),
                s.hist.min() as f64,
                s.hist.max() as f64,
            ),
        };
        Ok(Summary {
            count: n,
            mean_ns,
            stdev_ns,
            min_ns,
            max_ns,
            exact: self.is_exact(),
            confidence,
            quantiles,
            ci_method: ORDER_STAT_METHOD.to_string(),
        })
    }

    /// CCDF points `(x_ns, P[X >= x])` with probabilities log-spaced from 1 down to 1/n,
    /// about `points_per_decade` per decade (at least 1), x increasing.
    ///
    /// The point for probability k/n is the value at 0-based rank n − k of the sorted sample
    /// (in streaming mode the midpoint of its histogram bucket), so ties count as distinct
    /// samples and the last point is (max, 1/n). Empty recorder: no points.
    pub fn ccdf(&mut self, points_per_decade: usize) -> Vec<(f64, f64)> {
        let n = self.len();
        if n == 0 {
            return Vec::new();
        }
        let ks = ccdf_counts(n, points_per_decade.max(1));
        let ranks: Vec<u64> = ks.iter().map(|&k| n - k).collect();
        let values = self.rank_values(&ranks);
        ks.iter()
            .zip(values)
            .map(|(&k, v)| (v.mid, k as f64 / n as f64))
            .collect()
    }
}

fn default_streaming() -> StreamingHistogram {
    // 3 significant digits is within hdrhistogram's valid range [0, 5]; this cannot fail.
    let hist = Histogram::new(DEFAULT_SIGFIG).expect("3 significant digits is valid");
    StreamingHistogram { hist, refused: 0 }
}

/// Sample counts k (of n) for the CCDF probabilities k/n: decreasing from n to 1, about
/// `per_decade` per factor of ten, without repeats.
fn ccdf_counts(n: u64, per_decade: usize) -> Vec<u64> {
    let mut ks = Vec::new();
    let nf = n as f64;
    let mut j = 0_u32;
    loop {
        let p = 10f64.powf(-(f64::from(j)) / per_decade as f64);
        let k = (p * nf).round().max(1.0) as u64;
        if ks.last() != Some(&k) {
            ks.push(k);
        }
        if k == 1 {
            break;
        }
        j += 1;
    }
    ks
}

/// Population mean and standard deviation (divides by n, like the histogram's).
fn mean_stdev(values: &[u64]) -> (f64, f64) {
    let n = values.len() as f64;
    let sum: u128 = values.iter().map(|&v| u128::from(v)).sum();
    let mean = sum as f64 / n;
    let ss: f64 = values
        .iter()
        .map(|&v| {
            let d = v as f64 - mean;
            d * d
        })
        .sum();
    (mean, (ss / n).sqrt())
}

/// One pass over the recorded buckets answering every rank (any order, each `< len`).
fn histogram_rank_values(hist: &Histogram<u64>, ranks: &[u64]) -> Vec<RankValue> {
    let mut order: Vec<usize> = (0..ranks.len()).collect();
    order.sort_unstable_by_key(|&i| ranks[i]);
    let mut out = vec![
        RankValue {
            low: f64::NAN,
            mid: f64::NAN,
            high: f64::NAN,
        };
        ranks.len()
    ];
    let mut next = order.iter().peekable();
    let mut below = 0_u64; // values in buckets already passed
    for bucket in hist.iter_recorded() {
        let count = bucket.count_at_value();
        let v = bucket.value_iterated_to();
        let here = RankValue {
            low: hist.lowest_equivalent(v) as f64,
            mid: hist.median_equivalent(v) as f64,
            high: hist.highest_equivalent(v) as f64,
        };
        below += count;
        while let Some(&&i) = next.peek() {
            if ranks[i] < below {
                out[i] = here;
                next.next();
            } else {
                break;
            }
        }
        if next.peek().is_none() {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests;
