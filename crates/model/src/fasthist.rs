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

/// Below this a value's index is its whole part (the first bucket counts every ns).
const LINEAR: f64 = (2 * HALF) as f64;
/// Bits of an f64 shifted right by this keep its biased exponent and the top `HALF_MAG` bits
/// of its mantissa.
const MANTISSA_SHIFT: u32 = 52 - HALF_MAG;
/// Those bits minus this are the index (see [`index_of_f64`]).
const EXPONENT_OFFSET: u64 = (1023 + HALF_MAG as u64 - 1) << HALF_MAG;

/// The indices of all u64 values are below this (that of `u64::MAX` is one less), so the
/// count arrays never grow past it.
const INDICES: usize = (LZ_BASE as usize + 2) << HALF_MAG;

/// For `y ≥ 0`, not NaN: `index_of(y as u64)` (the index of `y`'s whole part) if `y < 2⁶⁴`,
/// else an index of [`INDICES`] or more (never a count's), from the bits of `y`.
///
/// Why: at 2¹¹ and above, the sub-bucket boundaries are whole numbers, so `y` and its whole
/// part share a sub-bucket, and an f64's exponent and top mantissa bits are that sub-bucket's
/// bucket and position: one shift and one subtraction, without the conversion to an integer
/// and the leading-zero count. Below 2¹¹ the index is the whole part itself (converted as
/// u16: branch-free, the compiler clamps in the float domain; above 2¹¹ it is not used).
#[inline(always)]
pub(crate) fn index_of_f64(y: f64) -> usize {
    let small = usize::from(y as u16);
    let large = (y.to_bits() >> MANTISSA_SHIFT).wrapping_sub(EXPONENT_OFFSET) as usize;
    if y < LINEAR {
        small
    } else {
        large
    }
}

/// Rounds a non-negative time to whole nanoseconds (negatives from rounding error, and NaN,
/// become 0): how the simulator's collector, and the limit it is measured against, record.
///
/// Without a branch on the sign: waits are 0 for a share 1 − ρ of the requests, at random, and
/// a mispredicted branch per request costs more than the rest of the recording. Below 2⁶³ the
/// signed conversion (one instruction on x86-64) gives the unsigned one's integer; 2⁶³ ns is
/// 292 years. `max` returns 0 for NaN, as the comparison it replaces did.
///
/// The rare path is a call: as a select, the compiler computed both conversions for every
/// value (the unsigned one is a dozen instructions).
#[inline(always)]
pub(crate) fn to_ns(x: f64) -> u64 {
    let y = (x + 0.5).max(0.0);
    if y < TO_NS_SIGNED_MAX {
        y as i64 as u64
    } else {
        to_ns_large(y)
    }
}

/// Below this (less than 2⁶³), [`to_ns`] converts to a signed integer.
const TO_NS_SIGNED_MAX: f64 = 9.2e18;

#[cold]
#[inline(never)]
fn to_ns_large(y: f64) -> u64 {
    y as u64
}

/// `index_of(to_ns(x))`, or an index of [`INDICES`] or more when `x` rounds to 2⁶⁴ ns or
/// more (where `to_ns` saturates: that value goes through `record(to_ns(x))`): the rounding
/// of [`to_ns`], then [`index_of_f64`], without the integer.
///
/// Why no check against `to_ns`'s signed limit: from there (just under 2⁶³) to 2⁶⁴ `to_ns`
/// converts unsigned, to the same whole number, and above, the index is past every count
/// array (which the caller checks anyway), so one bounds check covers both.
#[inline(always)]
pub(crate) fn index_of_ns(x: f64) -> usize {
    index_of_f64((x + 0.5).max(0.0))
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

    /// Counts `x` ns rounded to a whole number as [`to_ns`] rounds (negatives and NaN count
    /// as 0): the same as `record(to_ns(x))`, for less (see [`index_of_f64`]).
    #[inline(always)]
    pub fn record_ns(&mut self, x: f64) {
        match self.counts.get_mut(index_of_ns(x)) {
            Some(c) => *c += 1,
            None => self.record_ns_slow(x),
        }
    }

    #[cold]
    #[inline(never)]
    fn record_ns_slow(&mut self, x: f64) {
        self.record(to_ns(x));
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
        // Room for this value and a few times it (values of a run grow rarely), but never
        // past the last index, so that larger ones are out of bounds (see `index_of_ns`).
        let want = (i + 1)
            .max(2 * self.counts.len())
            .max(4 * HALF as usize)
            .min(INDICES);
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
        // Whole numbers and fractions on both sides of every sub-bucket boundary, and values
        // of every magnitude, by their bits.
        let mut ys = vec![
            0.0, 0.5, 1.0, 2047.0, 2047.999, 2048.0, LINEAR, 9.2e18, 1.8e19,
        ];
        for i in 1..55 * 1024 {
            let lo = lowest_of(i) as f64;
            ys.extend([lo, lo - 0.5, lo + 0.5, f64::from_bits(lo.to_bits() - 1)]);
            ys.push(f64::from_bits(lo.to_bits() + 1));
        }
        for _ in 0..1_000_000 {
            let y = f64::from_bits(rng.gen_range(0..(1.8e19f64).to_bits()));
            ys.push(y);
        }
        for &y in ys.iter().filter(|y| **y >= 0.0) {
            if y < 18446744073709551616.0 {
                assert_eq!(index_of_f64(y), index_of(y as u64), "{y}");
            } else {
                assert!(index_of_f64(y) >= INDICES, "{y}");
            }
        }
        assert!(index_of_f64(f64::INFINITY) >= INDICES);
        // record_ns is record(to_ns(..)), for times of every kind.
        let (mut a, mut b) = (FastHist::default(), FastHist::default());
        let xs = ys
            .iter()
            .map(|y| y - 0.5)
            .chain(ys.iter().map(|y| y * 1e-3));
        let edges = [
            -1.0,
            -1e-9,
            f64::NAN,
            1e19,
            f64::INFINITY,
            9.3e18,
            1.85e19,
            1e300,
        ];
        for x in xs.chain(edges) {
            a.record_ns(x);
            b.record(to_ns(x));
        }
        assert_eq!(a.counts, b.counts);
        // Every index up to that of u64::MAX (bucket 53).
        assert_eq!(index_of(u64::MAX), 55 * 1024 - 1);
        assert_eq!(INDICES, 55 * 1024);
        for i in 0..55 * 1024 {
            assert_eq!(index_of(lowest_of(i)), i, "{i}");
        }
    }
}
