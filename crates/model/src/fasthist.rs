//! A counting array with the bucket layout of an HdrHistogram of 3 significant digits (the
//! layout of `stats::Recorder`'s streaming histograms), for the simulator's hot loop.
//!
//! Why: a simulated request costs a few ns, and `hdrhistogram::Histogram::record` (an
//! out-of-line call that also keeps min, max and the total up to date) was a third of it. Here
//! a value costs a leading-zero count, a shift and an increment; the counts become an
//! `hdrhistogram::Histogram` once, when results are read ([`FastHist::into_histogram`]), by
//! recording each bucket's lowest value with its count. That value lies in the same bucket as
//! every value counted there, so the histogram is the one recording the values themselves gives
//! (the same counts; min, max, mean and quantiles are computed from the buckets either way).

use hdrhistogram::Histogram;

/// log2 of half the sub-buckets: 2 × 10³ needs 2¹¹ sub-buckets per bucket for 3 digits.
const HALF_MAG: u32 = 10;
const HALF: u64 = 1 << HALF_MAG;
const SUB_MASK: u64 = (1 << (HALF_MAG + 1)) - 1;
/// 64 − unit magnitude (0: ns resolution) − HALF_MAG − 1.
const LZ_BASE: u32 = 64 - HALF_MAG - 1;

/// The counting array (see the module's documentation). Public for `examples/sim_limit.rs`,
/// whose bare loop records the way the simulator does.
#[derive(Clone, Debug, Default)]
pub struct FastHist {
    counts: Vec<u64>,
}

/// The counting-array index of `v`.
#[inline(always)]
pub(crate) fn index_of(v: u64) -> usize {
    let bucket = LZ_BASE - (v | SUB_MASK).leading_zeros();
    let sub = v >> bucket;
    (((u64::from(bucket) + 1) << HALF_MAG) + sub - HALF) as usize
}

/// The lowest value of bucket-array index `i` (the inverse of [`index_of`] on that value).
fn lowest_of(i: usize) -> u64 {
    let i = i as u64;
    let bucket = (i >> HALF_MAG) as i64 - 1;
    let sub = (i & (HALF - 1)) + HALF;
    if bucket < 0 {
        sub - HALF
    } else {
        sub << bucket
    }
}

impl FastHist {
    /// Counts `v`.
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        let i = index_of(v);
        match self.counts.get_mut(i) {
            Some(c) => *c += 1,
            None => self.grow_and_record(i),
        }
    }

    /// The counts, indexed by [`index_of`], for a loop that increments them itself (and
    /// calls [`FastHist::record`] for a value whose index is past the end).
    #[inline(always)]
    pub(crate) fn counts_mut(&mut self) -> &mut [u64] {
        &mut self.counts
    }

    #[cold]
    #[inline(never)]
    fn grow_and_record(&mut self, i: usize) {
        // Room for this value and a few times it: values of a run grow rarely.
        let want = (i + 1).max(2 * self.counts.len()).max(4 * HALF as usize);
        self.counts.resize(want, 0);
        self.counts[i] += 1;
    }

    /// The same histogram as recording every value counted in an auto-resizing
    /// `Histogram::<u64>::new(3)`.
    pub fn into_histogram(self) -> Histogram<u64> {
        // 3 significant digits is within hdrhistogram's valid range; an auto-resizing
        // histogram takes any value, so no record below can fail.
        let mut h = Histogram::<u64>::new(3).unwrap_or_else(|_| unreachable!());
        for (i, &n) in self.counts.iter().enumerate() {
            if n > 0 {
                let _ = h.record_n(lowest_of(i), n);
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn the_histogram_is_the_one_recording_the_values_gives() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let mut fast = FastHist::default();
        let mut hdr = Histogram::<u64>::new(3).unwrap();
        let mut values: Vec<u64> = vec![0, 1, 2047, 2048, 2049, 4095, 4096, 1 << 40, u64::MAX >> 2];
        for _ in 0..100_000 {
            let mag = rng.gen_range(0..48);
            values.push(rng.gen_range(0..(2u64 << mag)));
        }
        for &v in &values {
            fast.record(v);
            hdr.record(v).unwrap();
        }
        let h = fast.into_histogram();
        assert_eq!(h, hdr);
        assert_eq!(h.len(), values.len() as u64);
        assert_eq!((h.min(), h.max()), (hdr.min(), hdr.max()));
        assert_eq!(h.mean(), hdr.mean());
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(h.value_at_quantile(q), hdr.value_at_quantile(q));
        }
        // Every index up to that of u64::MAX (bucket 53).
        assert_eq!(index_of(u64::MAX), 55 * 1024 - 1);
        for i in 0..55 * 1024 {
            assert_eq!(index_of(lowest_of(i)), i, "{i}");
        }
    }
}
