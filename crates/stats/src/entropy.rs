//! Latency entropy (LNS paper, formulas 13–14).

use std::collections::HashMap;

use crate::StatsError;

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
