//! Latency entropy (LNS paper, formulas 13–14).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::{Recorder, StatsError};

/// The latency entropy of a run's recorded latencies at one bin width.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EntropyEstimate {
    /// The distinction u (bin width), ns.
    pub bin_ns: f64,
    /// H in bits.
    pub bits: f64,
    /// True when every value's bin is known: the recorder kept every value, or each of its
    /// histogram's recorded buckets lies inside one bin. False: a bucket straddles a bin
    /// boundary (or is wider than a bin) and its count went to the bin of its middle value.
    pub exact: bool,
}

/// H = log₂ n − (1/n) Σ c log₂ c over the non-empty bins' counts c (n their sum).
fn entropy_of_counts(counts: impl Iterator<Item = u64>) -> Option<f64> {
    let (mut n, mut s) = (0u64, 0.0f64);
    for c in counts.filter(|&c| c > 0) {
        n += c;
        s += c as f64 * (c as f64).log2();
    }
    (n > 0).then(|| ((n as f64).log2() - s / n as f64).max(0.0))
}

/// The latency entropy (formulas 13–14, bins ⌊W/u⌋ as [`latency_entropy`]) of the values a
/// recorder holds: from the values themselves when it kept them, otherwise from its
/// histogram's buckets, without a copy of the values (memory stays flat in run length).
pub fn recorder_entropy(r: &Recorder, bin_ns: f64) -> Result<EntropyEstimate, StatsError> {
    if !(bin_ns.is_finite() && bin_ns > 0.0) {
        return Err(StatsError::InvalidBinWidth(bin_ns));
    }
    let bin_of = |v: f64| (v / bin_ns).floor() as i64;
    let mut bins: BTreeMap<i64, u64> = BTreeMap::new();
    let mut exact = true;
    if let Some(values) = r.values() {
        for &v in values {
            *bins.entry(bin_of(v as f64)).or_insert(0) += 1;
        }
    } else if let Some(h) = r.histogram() {
        for it in h.iter_recorded() {
            let v = it.value_iterated_to();
            let (lo, hi) = (h.lowest_equivalent(v), h.highest_equivalent(v));
            if bin_of(lo as f64) != bin_of(hi as f64) {
                exact = false;
            }
            *bins
                .entry(bin_of(h.median_equivalent(v) as f64))
                .or_insert(0) += it.count_at_value();
        }
    }
    let bits = entropy_of_counts(bins.into_values()).ok_or(StatsError::Empty)?;
    Ok(EntropyEstimate {
        bin_ns,
        bits,
        exact,
    })
}

/// Shannon entropy in bits of the histogram of `samples` with bins
/// [k·bin, (k+1)·bin): H = −Σ pᵢ log₂ pᵢ over the non-empty bins (0·log 0 = 0).
pub fn latency_entropy(samples: &[f64], bin: f64) -> Result<f64, StatsError> {
    if !(bin.is_finite() && bin > 0.0) {
        return Err(StatsError::InvalidBinWidth(bin));
    }
    if samples.is_empty() {
        return Err(StatsError::Empty);
    }
    let mut counts: HashMap<i64, u64> = HashMap::new();
    for &x in samples {
        if !x.is_finite() {
            return Err(StatsError::InvalidSample(x));
        }
        // `as` saturates, so absurd ratios land in the extreme bins instead of wrapping.
        *counts.entry((x / bin).floor() as i64).or_insert(0) += 1;
    }
    let n = samples.len() as f64;
    let h = counts
        .values()
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum::<f64>();
    Ok(h.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_over_power_of_two_bins_is_k_bits() {
        for k in 0..8_u32 {
            let bins = 1_u32 << k;
            // three samples inside each of 2^k bins of width 10
            let samples: Vec<f64> = (0..bins)
                .flat_map(|b| [0.5, 3.0, 9.9].map(|o| f64::from(b) * 10.0 + o))
                .collect();
            let h = latency_entropy(&samples, 10.0).unwrap();
            assert!((h - f64::from(k)).abs() < 1e-12, "k={k}: {h}");
        }
    }

    #[test]
    fn two_point_distribution() {
        // P = (1/4, 3/4): H = 2 − (3/4)·log₂3 = 0.811278124459
        let h = latency_entropy(&[1.0, 5.0, 5.0, 5.0], 2.0).unwrap();
        assert!((h - 0.811_278_124_459_133).abs() < 1e-12);
    }

    #[test]
    fn a_recorders_entropy_matches_the_samples_exact_or_streaming() {
        // 1,000 values spread over 64 bins of 1 µs, 100..164 µs: H = 6 bits exactly when the
        // bins are equally filled (each 1/64 of the values).
        let values: Vec<u64> = (0..6400u64)
            .map(|i| 100_000 + (i % 64) * 1_000 + (i * 37) % 1_000)
            .collect();
        let mut exact = Recorder::exact(values.len());
        let mut streaming = Recorder::bounded(0);
        for &v in &values {
            exact.record(v);
            streaming.record(v);
        }
        assert!(!streaming.is_exact());
        let from_samples =
            latency_entropy(&values.iter().map(|&v| v as f64).collect::<Vec<_>>(), 1e3).unwrap();
        assert!((from_samples - 6.0).abs() < 1e-12);
        let e = recorder_entropy(&exact, 1e3).unwrap();
        assert!(e.exact && (e.bits - 6.0).abs() < 1e-12, "{e:?}");
        // A 3-significant-digit histogram's buckets are 64 ns wide here: most lie inside one
        // bin, but some straddle a µs boundary, so the estimate says it is not exact and is
        // within a few hundredths of a bit.
        let s = recorder_entropy(&streaming, 1e3).unwrap();
        assert!((s.bits - 6.0).abs() < 0.05, "{s:?}");
        // Bins of 1.024 µs are unions of whole 64-ns buckets: exact again, and equal to the
        // samples' entropy at that width.
        let w = 1024.0;
        let s = recorder_entropy(&streaming, w).unwrap();
        let want =
            latency_entropy(&values.iter().map(|&v| v as f64).collect::<Vec<_>>(), w).unwrap();
        assert!(s.exact && (s.bits - want).abs() < 1e-9, "{s:?} vs {want}");
        assert!(matches!(
            recorder_entropy(&Recorder::exact(0), 1e3),
            Err(StatsError::Empty)
        ));
        assert!(recorder_entropy(&exact, 0.0).is_err());
    }

    #[test]
    fn rejects_bad_input() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                latency_entropy(&[1.0], bad),
                Err(StatsError::InvalidBinWidth(_))
            ));
        }
        assert!(matches!(latency_entropy(&[], 1.0), Err(StatsError::Empty)));
        assert!(matches!(
            latency_entropy(&[f64::NAN], 1.0),
            Err(StatsError::InvalidSample(_))
        ));
    }
}
