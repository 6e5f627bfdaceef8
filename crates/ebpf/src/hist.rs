//! The duration histograms of the noise contributors' timer ([`crate::contrib`]), user side:
//! the bucket layout (the same arithmetic as `bucket()` in `bpf/contrib.bpf.c`), parsing a
//! map value, and percentiles exact to the bucket.
//!
//! # Layout
//!
//! Durations are integer nanoseconds. Values below 2^[`SUB_BITS`] (8 ns) have a bucket each;
//! above, every power of two `[2^m, 2^(m+1))` is split into 2^[`SUB_BITS`] equal buckets, so
//! a bucket is at most 1/8 of its lower bound wide (12.5 %: finer than log2). The last
//! power is `m = `[`MAX_MSB`] (up to 2^40 ns, about 18 minutes); longer durations are
//! counted in the last bucket (the histogram's exact maximum still says how long).
//!
//! # Percentiles
//!
//! The q-quantile of `n` durations is the `r`-th smallest, `r = ⌈q·n⌉` (at least 1),
//! the same rank as `noise`'s loop p99.9. [`Histogram::quantile`] returns the bucket that
//! holds that duration, `[low, high)`, with `high` lowered to the maximum + 1 ns where the
//! maximum lies in the bucket: the true quantile is inside, always. The Good/Bad/Ugly class
//! of the p99.9 needs no bucket: the kernel counts the durations of at least 1 µs and of
//! more than 100 µs exactly, so [`Histogram::p999_class`] is exact even where a bucket
//! straddles 1 µs or 100 µs.

/// Sub-buckets per power of two: 2^SUB_BITS.
pub const SUB_BITS: u32 = 3;
/// The highest power of two with buckets of its own.
pub const MAX_MSB: u32 = 39;
/// Number of buckets.
pub const NBUCKETS: usize = ((MAX_MSB - SUB_BITS + 2) << SUB_BITS) as usize;
/// Fields before the buckets in the map value (count, sum, max, ≥ 1 µs, > 100 µs).
const HEADER: usize = 5;

const SUB: u64 = 1 << SUB_BITS;

/// The bucket of a duration of `v` ns.
pub fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    if v >> (MAX_MSB + 1) != 0 {
        return NBUCKETS - 1;
    }
    let m = 63 - v.leading_zeros();
    (((m - SUB_BITS + 1) as u64 * SUB) + ((v >> (m - SUB_BITS)) & (SUB - 1))) as usize
}

/// The durations bucket `i` holds: `[low, high)` ns (the last bucket also holds everything
/// longer, see the module's documentation).
pub fn bucket_bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, i + 1);
    }
    let m = i / SUB + u64::from(SUB_BITS) - 1;
    let sub = i % SUB;
    let width = 1u64 << (m - u64::from(SUB_BITS));
    let low = (SUB + sub) * width;
    (low, low + width)
}

/// One contributor's durations on one CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    pub count: u64,
    /// Sum of the durations, ns.
    pub sum_ns: u64,
    /// The longest, ns (exact).
    pub max_ns: u64,
    /// Durations of at least 1,000 ns (exact).
    pub ge_1us: u64,
    /// Durations of more than 100,000 ns (exact).
    pub gt_100us: u64,
    /// Counts per bucket ([`NBUCKETS`]).
    pub buckets: Vec<u64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            count: 0,
            sum_ns: 0,
            max_ns: 0,
            ge_1us: 0,
            gt_100us: 0,
            buckets: vec![0; NBUCKETS],
        }
    }
}

/// A quantile known to the bucket: `low ≤ q < high`, ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Bucketed {
    pub low_ns: u64,
    pub high_ns: u64,
}

/// The 1-based rank of the `num/den` quantile among `n` values: `⌈n·num/den⌉`, at least 1.
pub fn rank(n: u64, num: u64, den: u64) -> u64 {
    ((u128::from(n) * u128::from(num)).div_ceil(u128::from(den.max(1))) as u64).max(1)
}

impl Histogram {
    /// Adds one duration, as the kernel program does.
    pub fn record(&mut self, v: u64) {
        self.count += 1;
        self.sum_ns += v;
        self.max_ns = self.max_ns.max(v);
        self.ge_1us += u64::from(v >= 1_000);
        self.gt_100us += u64::from(v > 100_000);
        self.buckets[bucket_of(v)] += 1;
    }

    /// Parses a map value (`struct hist`, native endian); None when its size is wrong.
    pub fn parse(bytes: &[u8]) -> Option<Histogram> {
        if bytes.len() != 8 * (HEADER + NBUCKETS) {
            return None;
        }
        let words: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                u64::from_ne_bytes(a)
            })
            .collect();
        Some(Histogram {
            count: words[0],
            sum_ns: words[1],
            max_ns: words[2],
            ge_1us: words[3],
            gt_100us: words[4],
            buckets: words[HEADER..].to_vec(),
        })
    }

    /// The `num/den` quantile (p99.9: 999/1000) as its bucket; None when empty.
    pub fn quantile(&self, num: u64, den: u64) -> Option<Bucketed> {
        let n: u64 = self.buckets.iter().sum();
        if n == 0 {
            return None;
        }
        let r = rank(n, num, den);
        let mut seen = 0u64;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= r {
                let (low, mut high) = bucket_bounds(i);
                if i == NBUCKETS - 1 || (self.max_ns >= low && self.max_ns < high) {
                    high = self.max_ns.saturating_add(1).max(low + 1);
                }
                return Some(Bucketed {
                    low_ns: low,
                    high_ns: high,
                });
            }
        }
        None
    }

    /// The Good/Bad/Ugly class of the p99.9 (Where Has My Time Gone? §5.1), exact from the
    /// threshold counts: 0 Good (< 1 µs), 1 Bad (1–100 µs), 2 Ugly (> 100 µs); None when
    /// empty.
    pub fn p999_class(&self) -> Option<u8> {
        if self.count == 0 {
            return None;
        }
        let r = rank(self.count, 999, 1000);
        // The r-th smallest is below 1 µs iff at least r durations are.
        Some(if self.count - self.ge_1us >= r {
            0
        } else if self.count - self.gt_100us >= r {
            1
        } else {
            2
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact r-th smallest of `v`.
    fn exact(v: &[u64], num: u64, den: u64) -> u64 {
        let mut s = v.to_vec();
        s.sort_unstable();
        s[(rank(s.len() as u64, num, den) - 1) as usize]
    }

    fn hist(v: &[u64]) -> Histogram {
        let mut h = Histogram::default();
        for &x in v {
            h.record(x);
        }
        h
    }

    #[test]
    fn buckets_tile_the_line_without_gaps_and_match_their_bounds() {
        assert_eq!(NBUCKETS, 304);
        let mut next = 0;
        for i in 0..NBUCKETS {
            let (lo, hi) = bucket_bounds(i);
            assert_eq!(lo, next, "bucket {i}");
            assert!(hi > lo);
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi - 1), i);
            if lo >= SUB {
                // at most 1/8 of the lower bound wide
                assert!((hi - lo) * SUB <= lo, "bucket {i}: [{lo}, {hi})");
            }
            next = hi;
        }
        assert_eq!(next, 1 << (MAX_MSB + 1));
        assert_eq!(bucket_of(u64::MAX), NBUCKETS - 1);
        // A few by hand: 1000 ns is in [960, 1024), 100 µs in [98304, 106496).
        assert_eq!(bucket_bounds(bucket_of(1_000)), (960, 1_024));
        assert_eq!(bucket_bounds(bucket_of(100_000)), (98_304, 106_496));
        assert_eq!(bucket_bounds(bucket_of(15)), (15, 16));
        assert_eq!(bucket_bounds(bucket_of(16)), (16, 18));
    }

    #[test]
    fn quantiles_are_exact_to_the_bucket() {
        // Known inputs: 1..=10,000 ns; 1000 copies of 500 ns and one of 2 ms; a geometric
        // spread; a single value.
        let ramp: Vec<u64> = (1..=10_000).collect();
        let mut spike = vec![500u64; 1_000];
        spike.push(2_000_000);
        let geo: Vec<u64> = (0..3_000)
            .map(|i| (1.004f64.powi(i) * 50.0) as u64)
            .collect();
        let one = vec![123_456u64];
        for v in [&ramp, &spike, &geo, &one] {
            let h = hist(v);
            for (num, den) in [(1, 2), (99, 100), (999, 1000), (1, 1)] {
                let x = exact(v, num, den);
                let q = h.quantile(num, den).unwrap();
                assert!(
                    q.low_ns <= x && x < q.high_ns,
                    "{num}/{den}: {x} not in {q:?}"
                );
                let (lo, hi) = bucket_bounds(bucket_of(x));
                assert_eq!(q.low_ns, lo);
                assert!(q.high_ns <= hi);
            }
        }
        // The ramp's p50 is 5,000 ns: bucket [4608, 5120).
        let q = hist(&ramp).quantile(1, 2).unwrap();
        assert_eq!((q.low_ns, q.high_ns), (4_608, 5_120));
        // 1,001 values: p99.9's rank is ⌈999.999⌉ = 1000, still 500 ns: bucket [480, 512).
        let q = hist(&spike).quantile(999, 1000).unwrap();
        assert_eq!((q.low_ns, q.high_ns), (480, 512));
        // The maximum, rank 1001: the 2 ms spike's bucket, its top lowered to max + 1.
        let q = hist(&spike).quantile(1, 1).unwrap();
        assert_eq!((q.low_ns, q.high_ns), (1_966_080, 2_000_001));
        assert_eq!(Histogram::default().quantile(1, 2), None);
    }

    #[test]
    fn the_p999_class_is_exact_at_the_thresholds() {
        // 1000 durations, p99.9 = the 999th smallest.
        let mut v = vec![999u64; 998];
        v.extend([1_000, 1_000]);
        // 999th smallest is 1000 ns: Bad, although its bucket [960, 1024) straddles 1 µs.
        assert_eq!(hist(&v).p999_class(), Some(1));
        v[998] = 999;
        assert_eq!(hist(&v).p999_class(), Some(0));
        let mut v = vec![100_000u64; 999];
        v.push(1_000_000);
        assert_eq!(hist(&v).p999_class(), Some(1));
        v[0] = 100_001;
        v[1] = 100_001;
        // sorted: 997 × 100,000, 2 × 100,001, 1 ms; the 999th is 100,001: Ugly.
        assert_eq!(hist(&v).p999_class(), Some(2));
        assert_eq!(Histogram::default().p999_class(), None);
        // Against the exact p99.9 of random-ish inputs.
        let mut x = 88_172_645_463_325_252u64;
        for _ in 0..50 {
            let v: Vec<u64> = (0..2_000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // 10 ns .. ~1 ms, log-uniform
                    (10.0 * 10f64.powf((x % 10_000) as f64 / 2_000.0)) as u64
                })
                .collect();
            let p = exact(&v, 999, 1000);
            let want = if p < 1_000 {
                0
            } else if p <= 100_000 {
                1
            } else {
                2
            };
            assert_eq!(hist(&v).p999_class(), Some(want));
        }
    }

    #[test]
    fn a_map_value_parses_back() {
        let h = hist(&[5, 70, 7_000, 700_000]);
        let mut bytes = Vec::new();
        for w in [h.count, h.sum_ns, h.max_ns, h.ge_1us, h.gt_100us] {
            bytes.extend_from_slice(&w.to_ne_bytes());
        }
        for b in &h.buckets {
            bytes.extend_from_slice(&b.to_ne_bytes());
        }
        assert_eq!(Histogram::parse(&bytes), Some(h));
        assert_eq!(Histogram::parse(&bytes[8..]), None);
    }
}
