//! [`BlockedRecorder`]: confidence intervals for quantiles that account for time.
//!
//! The order-statistic interval of [`crate::Recorder::summarize`] assumes independent samples.
//! A queue's latencies are autocorrelated (a busy period makes many neighbours slow together)
//! and a host's stalls come in bursts, so that interval is far too narrow for a run. This
//! module groups the values into consecutive equal-width *time blocks* and builds the interval
//! by **sectioning** (Asmussen & Glynn, *Stochastic Simulation* §IV.5; Nakayama 2014): with k
//! sections (groups of adjacent blocks), ξ_s the quantile estimate of section s and ξ the one
//! over all data,
//!
//! ```text
//! S² = Σ_s (ln ξ_s − ln ξ)² / (k − 1),    ξ · exp(± t_{k−1, (1+conf)/2} · S / √k)
//! ```
//!
//! Sections long against the correlation time are nearly independent, so the spread of their
//! estimates measures the estimator's real noise, whatever the dependence inside them.
//!
//! **The log scale.** A latency quantile is positive and its estimates vary multiplicatively
//! (a burst doubles a section's p99, it does not add a constant), so their spread is taken on
//! the logarithms and the interval is symmetric there: it never reaches 0, and its upper end
//! stretches as far as a skewed spread needs. On the linear scale, `ξ ± t·S/√k` with few
//! sections ran below 0 (clipped, so "p99 341 µs [0, 735]", and a ratio against that lower end
//! undecidable) and under-covered the skewed tail quantiles of autocorrelated data more (the
//! tests' p99.9 of an M/M/1 queue over 10 sections: 0.80 linear, 0.84 on logs; over 5: 0.88
//! and 0.90). When an estimate is 0 (data holding zeros, e.g. a generator's lateness), the
//! logarithms do not exist and the interval is the linear one, with its lower end clipped at
//! 0 (see [`SectionedInterval::log_scale`]).
//!
//! **Storage.** Each block holds a compact histogram: log-linear buckets with 2¹⁰ buckets per
//! octave (values below 2048 ns exact; relative bucket width ≤ 2⁻¹⁰ ≈ 0.1 %, the precision of a
//! 3-significant-digit HdrHistogram), counted densely over the range of buckets the block has
//! seen, in `u32`. Blocks are mergeable (add the counts), which doubling the block width needs.
//! Chosen over `hdrhistogram::Histogram<u32>` because the HdrHistogram allocates its counts
//! from 0 up to the highest value (about 2× more memory at 3 digits for latencies that start
//! at microseconds), and 2 digits (1 % buckets) would be coarse against intervals of ~1 %.
//! A block costs 4 bytes × the buckets between its smallest and largest value: ≈ 4 KiB per
//! octave of range, e.g. 40 KiB for values spanning 10 µs–10 ms, at most 220 KiB for any u64.
//!
//! **Bounded memory.** The block width starts at `initial_width_ns` and doubles (adjacent pairs
//! merge) whenever the blocks would span more than 2K; so once the data span K initial widths
//! there are between K and 2K blocks, whatever the run's length. With K = 16 (the default)
//! a recorder holds at most 32 blocks: ≈ 1.3 MB for a 10 µs–10 ms latency range.
//!
//! Values may arrive in any time order (e.g. from out-of-order chunks of a running load
//! generator); every query can be made at any time. The type is `Send`.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::order_stat::order_statistic_ci;
use crate::special::student_t_quantile;
use crate::summary::Summary;
use crate::{check_confidence, Quantile, StatsError};

/// Default minimum number of blocks K (between K and 2K are kept).
pub const DEFAULT_MIN_BLOCKS: usize = 16;
/// Default initial block width: 1 ms (it doubles as the run grows).
pub const DEFAULT_INITIAL_WIDTH_NS: u64 = 1_000_000;
/// A section must hold at least this many expected samples beyond the quantile
/// (n_s · min(q, 1 − q)) for its estimate of the quantile to mean something.
pub const MIN_TAIL_PER_SECTION: f64 = 5.0;
/// Fewest sections sectioning uses; with fewer the interval falls back to the
/// order-statistic one (which assumes independence).
pub const MIN_SECTIONS: usize = 3;

/// Sub-bucket bits: values below 2^SUB_BITS are exact, above them 2^(SUB_BITS−1) buckets per
/// octave.
const SUB_BITS: u32 = 11;
const HALF: u32 = 1 << (SUB_BITS - 1);

/// The bucket index of a value (monotone in the value, contiguous).
#[inline]
fn bucket_of(v: u64) -> u32 {
    if v < (1 << SUB_BITS) {
        v as u32
    } else {
        let bits = 64 - v.leading_zeros();
        let shift = bits - SUB_BITS;
        let top = (v >> shift) as u32; // in [HALF, 2·HALF)
        (shift << (SUB_BITS - 1)) + top
    }
}

/// The lowest and highest value of a bucket.
fn range_of(idx: u32) -> (f64, f64) {
    if idx < (1 << SUB_BITS) {
        let v = f64::from(idx);
        return (v, v);
    }
    let shift = (idx >> (SUB_BITS - 1)) - 1;
    let top = u64::from(HALF + (idx & (HALF - 1)));
    // On u64, not u128: converting a u128 to f64 is a call into compiler-rt, and this runs for
    // every bucket of every quantile (a quarter of the sectioning tests' time). The largest
    // shift is 64 − SUB_BITS (the bucket of u64::MAX), so only the very last bucket's
    // (top + 1) << shift is 2^64, which wraps to 0: its hi, 0 − 1, wraps to u64::MAX.
    let lo = top << shift;
    let hi = ((top + 1) << shift).wrapping_sub(1);
    (lo as f64, hi as f64)
}

/// Adds `c` to a bucket's count, which stops at u32::MAX; returns what did not fit.
#[inline]
fn add_saturating(slot: &mut u32, c: u32) -> u64 {
    let (sum, over) = slot.overflowing_add(c);
    if over {
        *slot = u32::MAX;
        u64::from(sum) + 1
    } else {
        *slot = sum;
        0
    }
}

/// A mergeable histogram of one block: dense counts for buckets `base..base + counts.len()`.
#[derive(Clone, Debug, Default)]
struct Block {
    base: u32,
    counts: Vec<u32>,
    n: u64,
    /// Counts lost to a bucket's u32 saturating (needs > 4·10⁹ equal values in one block).
    saturated: u64,
}

impl Block {
    #[inline]
    fn add(&mut self, idx: u32, c: u32) {
        if self.counts.is_empty()
            || idx < self.base
            || (idx - self.base) as usize >= self.counts.len()
        {
            self.reach(idx);
        }
        self.saturated += add_saturating(&mut self.counts[(idx - self.base) as usize], c);
        self.n += u64::from(c);
    }

    /// Extends the counts to cover bucket `idx`. Not inlined, so that it is compiled (and
    /// optimised) here even where `add` is inlined into a crate built without optimisation:
    /// the tests of `lab` spent a third of their time in an unoptimised copy of it.
    #[inline(never)]
    fn reach(&mut self, idx: u32) {
        if self.counts.is_empty() {
            self.base = idx;
            self.counts.push(0);
        } else if idx < self.base {
            let grow = (self.base - idx) as usize;
            let mut counts = vec![0; grow + self.counts.len()];
            counts[grow..].copy_from_slice(&self.counts);
            self.counts = counts;
            self.base = idx;
        } else if (idx - self.base) as usize >= self.counts.len() {
            self.counts.resize((idx - self.base) as usize + 1, 0);
        }
    }

    fn merge(&mut self, other: &Block) {
        if other.n == 0 {
            return;
        }
        // grow once to the union range, then add
        let (lo, hi) = if self.counts.is_empty() {
            (other.base, other.base + other.counts.len() as u32 - 1)
        } else {
            (
                self.base.min(other.base),
                (self.base + self.counts.len() as u32 - 1)
                    .max(other.base + other.counts.len() as u32 - 1),
            )
        };
        self.reach(lo);
        self.reach(hi);
        // Both ranges are now inside self's: add other's counts slot by slot.
        let off = (other.base - self.base) as usize;
        let dst = &mut self.counts[off..off + other.counts.len()];
        for (slot, &c) in dst.iter_mut().zip(&other.counts) {
            self.saturated += add_saturating(slot, c);
        }
        self.n += other.n;
        self.saturated += other.saturated;
    }

    /// The q-quantile of the histogram: the value at position q·n of the sorted data, values
    /// spread evenly across each bucket's range. None when empty.
    fn quantile(&self, q: f64) -> Option<f64> {
        quantile_of_counts(self.base, &self.counts, self.n, q)
    }

    /// (lowest, highest) value of the bucket holding 0-based rank r (< n).
    fn rank_range(&self, r: u64) -> (f64, f64) {
        let mut below = 0;
        for (j, &c) in self.counts.iter().enumerate() {
            below += u64::from(c);
            if r < below {
                return range_of(self.base + j as u32);
            }
        }
        range_of(self.base + self.counts.len().saturating_sub(1) as u32)
    }
}

fn quantile_of_counts(base: u32, counts: &[u32], n: u64, q: f64) -> Option<f64> {
    if n == 0 {
        return None;
    }
    let h = q.clamp(0.0, 1.0) * n as f64;
    let mut below = 0.0;
    let mut last = None;
    for (j, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let c = f64::from(c);
        let (lo, hi) = range_of(base + j as u32);
        if h <= below + c {
            let frac = ((h - below) / c).clamp(0.0, 1.0);
            return Some(lo + frac * (hi - lo));
        }
        below += c;
        last = Some(hi);
    }
    last
}

/// One block's estimate of a quantile.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockEstimate {
    /// Start of the block (same clock as the recorded times), ns.
    pub start_ns: u64,
    /// End of the block (exclusive), ns.
    pub end_ns: u64,
    /// Values in the block.
    pub count: u64,
    /// The block's estimate of the quantile, ns.
    pub value: f64,
}

/// A quantile's confidence interval by sectioning, or the fallback when there are too few
/// samples in time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SectionedInterval {
    /// The centre: the estimate over all data (the caller's, when it gave one).
    pub value: f64,
    /// Lower end (never below 0, never above `value`; above 0 on the log scale).
    pub lo: f64,
    /// Upper end (never below `value`).
    pub hi: f64,
    /// Sections used; 0 = too few samples in time for 3 sections: the interval is the
    /// order-statistic one, which assumes independent samples.
    pub sections: u32,
    /// The upper half-width `hi − value`, in the value's unit: value · (e^h − 1) with
    /// h = t_{k−1, (1+conf)/2} · S / √k on the log scale (the lower half-width,
    /// value · (1 − e^−h), is smaller; h itself is ln(hi / value)); t · S / √k on the linear
    /// scale; 0 for the order-statistic fallback.
    pub half_width: f64,
    /// Width of the time blocks the sections were built from, ns.
    pub block_width_ns: u64,
    /// True when the sections' spread was taken on the logarithms (every estimate positive:
    /// the interval is value · exp(±h)); false for the linear interval value ± t · S / √k
    /// (some estimate was 0) and for the order-statistic fallback. Absent (false) in
    /// intervals stored before it existed.
    #[serde(default)]
    pub log_scale: bool,
}

/// Values grouped into equal-width time blocks, for intervals that account for time. See the
/// module documentation.
#[derive(Clone, Debug)]
pub struct BlockedRecorder {
    initial_width_ns: u64,
    width_ns: u64,
    min_blocks: usize,
    /// Block index (time / width) of `blocks[0]`.
    first: u64,
    blocks: VecDeque<Block>,
    count: u64,
}

impl Default for BlockedRecorder {
    fn default() -> Self {
        BlockedRecorder {
            initial_width_ns: DEFAULT_INITIAL_WIDTH_NS,
            width_ns: DEFAULT_INITIAL_WIDTH_NS,
            min_blocks: DEFAULT_MIN_BLOCKS,
            first: 0,
            blocks: VecDeque::new(),
            count: 0,
        }
    }
}

impl BlockedRecorder {
    /// Blocks of `initial_width_ns` (doubling as needed), keeping between `min_blocks` (K)
    /// and 2K of them. Needs a positive width and K ≥ 2.
    pub fn new(initial_width_ns: u64, min_blocks: usize) -> Result<Self, StatsError> {
        if initial_width_ns == 0 {
            return Err(StatsError::InvalidBinWidth(0.0));
        }
        if min_blocks < 2 {
            return Err(StatsError::TooFewSamples {
                need: 2,
                got: min_blocks,
            });
        }
        Ok(BlockedRecorder {
            initial_width_ns,
            width_ns: initial_width_ns,
            min_blocks,
            ..BlockedRecorder::default()
        })
    }

    /// Values recorded.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// True when nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The current block width, ns.
    pub fn width_ns(&self) -> u64 {
        self.width_ns
    }

    /// Blocks holding at least one value.
    pub fn nonempty_blocks(&self) -> usize {
        self.blocks.iter().filter(|b| b.n > 0).count()
    }

    /// Bytes held by the block histograms (their counts), for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.blocks
            .iter()
            .map(|b| b.counts.capacity() * 4)
            .sum::<usize>()
            + self.blocks.capacity() * std::mem::size_of::<Block>()
    }

    /// Records `value_ns` observed at time `t_ns` (any order).
    #[inline]
    pub fn record(&mut self, t_ns: u64, value_ns: u64) {
        let i = self.slot_for(t_ns);
        self.blocks[i].add(bucket_of(value_ns), 1);
        self.count += 1;
    }

    /// Adds `other`'s values. Both must have the same initial width (so that their block
    /// boundaries align); the result has the wider of the two widths (or wider).
    pub fn merge(&mut self, other: &BlockedRecorder) -> Result<(), StatsError> {
        if other.initial_width_ns != self.initial_width_ns {
            return Err(StatsError::Histogram(format!(
                "blocked recorders with different initial widths ({} vs {} ns) cannot merge",
                self.initial_width_ns, other.initial_width_ns
            )));
        }
        while self.width_ns < other.width_ns {
            self.double();
        }
        for (j, b) in other.blocks.iter().enumerate() {
            if b.n == 0 {
                continue;
            }
            // self.width ≥ other.width and both are initial·2^j: the block fits one slot.
            let start = (other.first + j as u64).saturating_mul(other.width_ns);
            let i = self.slot_for(start);
            self.blocks[i].merge(b);
            self.count += b.n;
        }
        Ok(())
    }

    /// The index in `blocks` for time t, growing (and doubling the width) as needed.
    #[inline]
    fn slot_for(&mut self, t: u64) -> usize {
        let mut idx = t / self.width_ns;
        if self.blocks.is_empty() {
            self.first = idx;
            self.blocks.push_back(Block::default());
            return 0;
        }
        let last = self.first + self.blocks.len() as u64 - 1;
        if idx >= self.first && idx <= last {
            return (idx - self.first) as usize;
        }
        // Outside: double until the union span fits 2K blocks, then extend.
        loop {
            let last = self.first + self.blocks.len() as u64 - 1;
            let span = last.max(idx) - self.first.min(idx) + 1;
            if span <= 2 * self.min_blocks as u64 {
                break;
            }
            self.double();
            idx = t / self.width_ns;
        }
        while idx < self.first {
            self.blocks.push_front(Block::default());
            self.first -= 1;
        }
        while idx >= self.first + self.blocks.len() as u64 {
            self.blocks.push_back(Block::default());
        }
        (idx - self.first) as usize
    }

    /// Doubles the block width: adjacent pairs (aligned on even indices) merge.
    fn double(&mut self) {
        let old = std::mem::take(&mut self.blocks);
        let new_first = self.first / 2;
        let mut out: VecDeque<Block> = VecDeque::with_capacity(old.len() / 2 + 1);
        for (j, b) in old.into_iter().enumerate() {
            let k = ((self.first + j as u64) / 2 - new_first) as usize;
            if k >= out.len() {
                out.push_back(b);
            } else {
                out[k].merge(&b);
            }
        }
        self.first = new_first;
        self.blocks = out;
        self.width_ns = self.width_ns.saturating_mul(2);
    }

    /// (start time, block) of the non-empty blocks at width `w` (≥ the current width,
    /// initial·2^j), by merging copies.
    fn blocks_at(&self, w: u64) -> Vec<(u64, Block)> {
        let mut out: Vec<(u64, Block)> = Vec::new();
        for (j, b) in self.blocks.iter().enumerate() {
            if b.n == 0 {
                continue;
            }
            let start = (self.first + j as u64).saturating_mul(self.width_ns);
            let idx = start / w;
            match out.last_mut() {
                Some((i, acc)) if *i == idx => acc.merge(b),
                _ => out.push((idx, b.clone())),
            }
        }
        out.into_iter()
            .map(|(i, b)| (i.saturating_mul(w), b))
            .collect()
    }

    fn all(&self) -> Block {
        let mut all = Block::default();
        for b in &self.blocks {
            all.merge(b);
        }
        all
    }

    fn check_saturation(&self) -> Result<(), StatsError> {
        let lost: u64 = self.blocks.iter().map(|b| b.saturated).sum();
        if lost > 0 {
            return Err(StatsError::Histogram(format!(
                "{lost} values overflowed a block's bucket count"
            )));
        }
        Ok(())
    }

    /// The q-quantile over all data (from the block histograms). None when empty.
    pub fn quantile(&self, q: Quantile) -> Option<f64> {
        self.all().quantile(q.get())
    }

    /// Each non-empty block's estimate of the q-quantile, in time order.
    pub fn block_quantiles(&self, q: Quantile) -> Vec<BlockEstimate> {
        self.blocks
            .iter()
            .enumerate()
            .filter_map(|(j, b)| {
                let start = (self.first + j as u64).saturating_mul(self.width_ns);
                Some(BlockEstimate {
                    start_ns: start,
                    end_ns: start.saturating_add(self.width_ns),
                    count: b.n,
                    value: b.quantile(q.get())?,
                })
            })
            .collect()
    }

    /// The q-quantile's confidence interval at `confidence` by sectioning, centred on
    /// `centre` (the caller's estimate over all data, e.g. an exact one) or, when None, on
    /// this recorder's own estimate over all data. Falls back to the order-statistic interval
    /// (`sections == 0`) when fewer than [`MIN_SECTIONS`] sections can each hold
    /// [`MIN_TAIL_PER_SECTION`] expected samples beyond the quantile.
    pub fn interval(
        &self,
        q: Quantile,
        confidence: f64,
        centre: Option<f64>,
    ) -> Result<SectionedInterval, StatsError> {
        check_confidence(confidence)?;
        self.check_saturation()?;
        let all = self.all();
        let own = all.quantile(q.get()).ok_or(StatsError::Empty)?;
        let value = centre.unwrap_or(own);
        let units: Vec<(u64, Block)> = self.blocks_at(self.width_ns);
        let counts: Vec<u64> = units.iter().map(|(_, b)| b.n).collect();
        let groups = sections(&counts, q.get());
        if groups.len() < MIN_SECTIONS {
            let (lo, hi) = order_stat_fallback(&all, q, confidence);
            return Ok(fallback(value, lo, hi, self.width_ns));
        }
        let estimates: Vec<f64> = groups
            .iter()
            .filter_map(|g| {
                let mut s = Block::default();
                for (_, b) in &units[g.clone()] {
                    s.merge(b);
                }
                s.quantile(q.get())
            })
            .collect();
        Ok(sectioned(value, own, &estimates, confidence, self.width_ns))
    }

    /// Replaces each quantile interval of `summary` (which must describe the same values)
    /// by its sectioning interval around the summary's own point estimate; quantiles with
    /// too few samples in time keep their (order-statistic) interval with `blocks = 0`.
    /// Then makes the intervals monotone in q ([`Summary::monotone_intervals`]: a p99's
    /// interval never starts below the p90's) and sets `ci_method`.
    pub fn section_summary(&self, summary: &mut Summary) -> Result<(), StatsError> {
        let conf = summary.confidence;
        let mut parts: Vec<Part> = Vec::new();
        for qe in &mut summary.quantiles {
            let q = Quantile::new(qe.q)?;
            let iv = self.interval(q, conf, Some(qe.est.value))?;
            qe.blocks = iv.sections;
            if iv.sections > 0 {
                qe.est.lo = iv.lo;
                qe.est.hi = iv.hi;
            }
            parts.push(Part {
                key: qe.key.clone(),
                sections: iv.sections,
                linear: iv.sections > 0 && !iv.log_scale,
            });
        }
        summary.monotone_intervals();
        summary.ci_method = describe_method(&parts, self.width_ns);
        Ok(())
    }
}

/// Sectioning on the per-block ratio `num_b / den_b` of the q-quantiles of two recorders
/// timed on the same clock (e.g. measured and ideal latency for the same arrivals: the two are
/// correlated, so the ratio's spread across sections is much smaller than the two intervals
/// suggest). Centred on `centre` or the ratio of the two overall estimates; on the log scale
/// (the logarithms of the sections' ratios around that of the overall ratio, so the interval
/// is value · exp(±h), as symmetric for 1.2 as for 1/1.2) unless a section's ratio is 0.
/// Falls back (`sections == 0`) to the conservative ratio of the two order-statistic
/// intervals.
pub fn ratio_interval(
    num: &BlockedRecorder,
    den: &BlockedRecorder,
    q: Quantile,
    confidence: f64,
    centre: Option<f64>,
) -> Result<SectionedInterval, StatsError> {
    check_confidence(confidence)?;
    num.check_saturation()?;
    den.check_saturation()?;
    if num.initial_width_ns != den.initial_width_ns {
        return Err(StatsError::Histogram(
            "ratio of blocked recorders with different initial widths".into(),
        ));
    }
    let (na, da) = (num.all(), den.all());
    let n_all = na.quantile(q.get()).ok_or(StatsError::Empty)?;
    let d_all = da.quantile(q.get()).ok_or(StatsError::Empty)?;
    let own = if d_all > 0.0 { n_all / d_all } else { f64::NAN };
    let value = centre.unwrap_or(own);
    let w = num.width_ns.max(den.width_ns);
    let estimates = if own.is_finite() {
        section_ratio_estimates(num, den, q, w)
    } else {
        Vec::new()
    };
    if estimates.len() < MIN_SECTIONS || !value.is_finite() {
        let (nl, nh) = order_stat_fallback(&na, q, confidence);
        let (dl, dh) = order_stat_fallback(&da, q, confidence);
        let lo = if dh > 0.0 { nl / dh } else { 0.0 };
        let hi = if dl > 0.0 { nh / dl } else { f64::INFINITY };
        return Ok(fallback(value, lo, hi, w));
    }
    Ok(sectioned(value, own, &estimates, confidence, w))
}

/// The per-section ratios `num_s / den_s` of the q-quantiles over sections of the blocks both
/// recorders hold at width `w` (as [`ratio_interval`] forms them).
fn section_ratio_estimates(
    num: &BlockedRecorder,
    den: &BlockedRecorder,
    q: Quantile,
    w: u64,
) -> Vec<f64> {
    let a = num.blocks_at(w);
    let b = den.blocks_at(w);
    // join on the block start
    let mut pairs: Vec<(Block, Block)> = Vec::new();
    let mut j = 0;
    for (t, x) in a {
        while j < b.len() && b[j].0 < t {
            j += 1;
        }
        if j < b.len() && b[j].0 == t {
            pairs.push((x, b[j].1.clone()));
        }
    }
    let counts: Vec<u64> = pairs.iter().map(|(x, y)| x.n.min(y.n)).collect();
    sections(&counts, q.get())
        .iter()
        .filter_map(|g| {
            let (mut x, mut y) = (Block::default(), Block::default());
            for (p, r) in &pairs[g.clone()] {
                x.merge(p);
                y.merge(r);
            }
            let (xq, yq) = (x.quantile(q.get())?, y.quantile(q.get())?);
            (yq > 0.0).then_some(xq / yq)
        })
        .collect()
}

/// The ratio of the q-quantiles of two recorders as the mean of its sections' log ratios
/// (batch means on the log scale): `exp(m ± t_{k−1} · S / √k)`, m the mean of the sections'
/// ln(num_s / den_s) and S their standard deviation around m. Unlike [`ratio_interval`]'s
/// centre (the ratio of the two overall estimates), this centre is the very estimator whose
/// noise S/√k measures, so one section that dominates an overall tail (a host stall landing
/// in one arm's time) moves it by 1/k of its log ratio and widens the interval, instead of
/// making the overall ratio and an interval too narrow for it. For paired comparisons whose
/// blocks are pairs (`tailscope ab`). `sections == 0` (and NaN ends) when fewer than
/// [`MIN_SECTIONS`] sections can each hold [`MIN_TAIL_PER_SECTION`] samples beyond the quantile
/// in both, or a section's estimate is not positive.
pub fn section_mean_ratio(
    num: &BlockedRecorder,
    den: &BlockedRecorder,
    q: Quantile,
    confidence: f64,
) -> Result<SectionedInterval, StatsError> {
    let (logs, w) = section_log_ratios(num, den, q, confidence)?;
    let Some(logs) = logs else {
        return Ok(no_sections(w));
    };
    let k = logs.len();
    let m = logs.iter().sum::<f64>() / k as f64;
    let ss: f64 = logs.iter().map(|l| (l - m) * (l - m)).sum();
    let h = student_t_quantile(0.5 + confidence / 2.0, (k - 1) as u64)
        * (ss / (k - 1) as f64).sqrt()
        / (k as f64).sqrt();
    Ok(log_interval(m, m - h, m + h, k, w))
}

/// The ratio of the q-quantiles of two recorders as the Hodges–Lehmann centre of its
/// sections' log ratios, with the distribution-free interval of Wilcoxon's signed-rank
/// statistic ([`crate::hodges_lehmann`]). It assumes what a randomized paired design gives:
/// sections independent enough and their log ratios symmetric about one centre — a host stall
/// is as likely in either arm's slice, so it adds wild values on both sides alike. Where
/// [`section_mean_ratio`] lets one such section move its centre by 1/k of its log ratio and
/// widen the interval with its square, here it moves the centre by about one rank. `sections
/// == 0` as there, and also when the sections are too few for the confidence (6 at 95 %).
pub fn section_median_ratio(
    num: &BlockedRecorder,
    den: &BlockedRecorder,
    q: Quantile,
    confidence: f64,
) -> Result<SectionedInterval, StatsError> {
    let (logs, w) = section_log_ratios(num, den, q, confidence)?;
    let Some(h) = logs.and_then(|l| crate::hodges_lehmann(&l, confidence).map(|h| (h, l.len())))
    else {
        return Ok(no_sections(w));
    };
    let (h, k) = h;
    Ok(log_interval(h.centre, h.lo, h.hi, k, w))
}

/// The sections' ln(num_s / den_s) and the block width they were taken at; None when fewer
/// than [`MIN_SECTIONS`] sections or a section's estimate is not positive.
fn section_log_ratios(
    num: &BlockedRecorder,
    den: &BlockedRecorder,
    q: Quantile,
    confidence: f64,
) -> Result<(Option<Vec<f64>>, u64), StatsError> {
    check_confidence(confidence)?;
    num.check_saturation()?;
    den.check_saturation()?;
    if num.initial_width_ns != den.initial_width_ns {
        return Err(StatsError::Histogram(
            "ratio of blocked recorders with different initial widths".into(),
        ));
    }
    let w = num.width_ns.max(den.width_ns);
    let est = section_ratio_estimates(num, den, q, w);
    if est.len() < MIN_SECTIONS || est.iter().any(|e| !(e.is_finite() && *e > 0.0)) {
        return Ok((None, w));
    }
    Ok((Some(est.iter().map(|e| e.ln()).collect()), w))
}

fn no_sections(w: u64) -> SectionedInterval {
    SectionedInterval {
        value: f64::NAN,
        lo: f64::NAN,
        hi: f64::NAN,
        sections: 0,
        half_width: 0.0,
        block_width_ns: w,
        log_scale: true,
    }
}

/// The interval exp(lo) ..= exp(hi) around exp(centre), all on the log scale.
fn log_interval(centre: f64, lo: f64, hi: f64, k: usize, w: u64) -> SectionedInterval {
    let value = centre.exp();
    SectionedInterval {
        value,
        lo: lo.exp(),
        hi: hi.exp(),
        sections: k as u32,
        half_width: hi.exp() - value,
        block_width_ns: w,
        log_scale: true,
    }
}

/// The interval from section estimates around `value`; S is taken around `own` (the same
/// estimator over all data as the sections use, so that a difference in estimators — e.g.
/// an exact centre against histogram sections — cannot shrink it).
///
/// On the log scale when `value`, `own` and every section estimate are positive (see the
/// module documentation). Otherwise — a quantile of 0 ns in some section, which only data
/// holding zeros give — the linear interval `value ± t·S/√k`, clipped at 0. Neither of the
/// alternatives is better there: flooring the estimates at 1 ns would make S depend on the
/// unit (a section at 0 against an overall 500 ns adds (ln 500)² to the sum in ns,
/// (ln 500 000)² in ps) and give an interval spanning orders of magnitude around a small value;
/// the order-statistic interval ignores the dependence in time that sectioning is for. A
/// quantity that is exactly 0 in a whole section is not varying multiplicatively anyway, and
/// the linear interval is what sectioning promised before the log scale.
fn sectioned(value: f64, own: f64, est: &[f64], confidence: f64, w: u64) -> SectionedInterval {
    let k = est.len();
    let t = student_t_quantile(0.5 + confidence / 2.0, (k - 1) as u64);
    let positive = |x: f64| x > 0.0 && x.is_finite();
    if positive(value) && positive(own) && est.iter().all(|&e| positive(e)) {
        let l_own = own.ln();
        let ss: f64 = est.iter().map(|e| (e.ln() - l_own).powi(2)).sum();
        let h = t * (ss / (k - 1) as f64).sqrt() / (k as f64).sqrt();
        let (lo, hi) = (value * (-h).exp(), (value * h.exp()).max(value));
        return SectionedInterval {
            value,
            lo: lo.min(value),
            hi,
            sections: k as u32,
            half_width: hi - value,
            block_width_ns: w,
            log_scale: true,
        };
    }
    let ss: f64 = est.iter().map(|e| (e - own) * (e - own)).sum();
    let s = (ss / (k - 1) as f64).sqrt();
    let half = t * s / (k as f64).sqrt();
    SectionedInterval {
        value,
        lo: (value - half).max(0.0).min(value),
        hi: (value + half).max(value),
        sections: k as u32,
        half_width: half,
        block_width_ns: w,
        log_scale: false,
    }
}

fn fallback(value: f64, lo: f64, hi: f64, w: u64) -> SectionedInterval {
    SectionedInterval {
        value,
        lo: lo.max(0.0).min(value),
        hi: hi.max(value),
        sections: 0,
        half_width: 0.0,
        block_width_ns: w,
        log_scale: false,
    }
}

/// Order-statistic interval (assumes independence) from a histogram: the lowest / highest
/// value of the buckets holding the interval's ranks.
fn order_stat_fallback(all: &Block, q: Quantile, confidence: f64) -> (f64, f64) {
    let (lo, hi) = order_statistic_ci(all.n, q.get(), confidence);
    (all.rank_range(lo).0, all.rank_range(hi).1)
}

/// Groups adjacent units (blocks, with these counts, in time order) into sections of about
/// equal count, as many as the units allow but each with at least
/// [`MIN_TAIL_PER_SECTION`] expected samples beyond the q-quantile. Returns the index ranges;
/// fewer than [`MIN_SECTIONS`] means sectioning is not possible.
fn sections(counts: &[u64], q: f64) -> Vec<std::ops::Range<usize>> {
    let tail = q.min(1.0 - q);
    let total: u64 = counts.iter().sum();
    let units = counts.iter().filter(|&&c| c > 0).count();
    let by_tail = (total as f64 * tail / MIN_TAIL_PER_SECTION).floor() as usize;
    let k = units.min(by_tail);
    if k < MIN_SECTIONS {
        return Vec::new();
    }
    let need = (MIN_TAIL_PER_SECTION / tail).ceil() as u64;
    let target = total as f64 / k as f64;
    let mut out = Vec::with_capacity(k);
    let mut start = 0;
    let mut acc = 0u64;
    let mut cum = 0u64;
    for (i, &c) in counts.iter().enumerate() {
        acc += c;
        cum += c;
        // close the section when the cumulative count reaches its share of the total
        if acc >= need && cum as f64 >= target * (out.len() + 1) as f64 - 0.5 * c as f64 {
            out.push(start..i + 1);
            start = i + 1;
            acc = 0;
        }
    }
    if start < counts.len() {
        if acc >= need || out.is_empty() {
            out.push(start..counts.len());
        } else if let Some(last) = out.last_mut() {
            last.end = counts.len(); // a short remainder joins the last section
        }
    }
    out
}

/// One quantile's part in [`describe_method`].
struct Part {
    key: String,
    /// Sections used (0: the order-statistic fallback).
    sections: u32,
    /// Sectioned on the linear scale (an estimate was 0).
    linear: bool,
}

/// "sectioning over 24 time blocks of 200 ms (t on logs, 23 df)", with the quantiles that
/// used fewer sections, the linear scale or no sections named.
fn describe_method(parts: &[Part], width_ns: u64) -> String {
    let k = parts.iter().map(|p| p.sections).max().unwrap_or(0);
    if k == 0 {
        return "order statistic (assumes independence: too few samples in time)".to_string();
    }
    let mut s = format!(
        "sectioning over {k} time blocks of {} (t on logs, {} df)",
        format_width(width_ns),
        k - 1
    );
    let fewer: Vec<String> = parts
        .iter()
        .filter(|p| p.sections > 0 && p.sections < k)
        .map(|p| format!("{} {}", p.key, p.sections))
        .collect();
    if !fewer.is_empty() {
        s.push_str(&format!("; sections: {}", fewer.join(", ")));
    }
    let linear: Vec<&str> = parts
        .iter()
        .filter(|p| p.linear)
        .map(|p| p.key.as_str())
        .collect();
    if !linear.is_empty() {
        s.push_str(&format!(
            "; {} on the linear scale: a section's estimate is 0",
            linear.join(", ")
        ));
    }
    let none: Vec<&str> = parts
        .iter()
        .filter(|p| p.sections == 0)
        .map(|p| p.key.as_str())
        .collect();
    if !none.is_empty() {
        s.push_str(&format!(
            "; {} assume{} independence: too few samples in time",
            none.join(", "),
            if none.len() == 1 { "s" } else { "" }
        ));
    }
    s
}

/// A block width for people: "512 ms", "1.02 s", "64 µs".
pub fn format_width(ns: u64) -> String {
    let f = ns as f64;
    if f >= 1e9 {
        format!("{:.3} s", f / 1e9)
    } else if f >= 1e6 {
        format!("{:.0} ms", f / 1e6)
    } else if f >= 1e3 {
        format!("{:.0} µs", f / 1e3)
    } else {
        format!("{ns} ns")
    }
}

#[cfg(test)]
mod tests;
