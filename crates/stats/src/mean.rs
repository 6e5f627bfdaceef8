//! Confidence interval of a mean from independent replications.

use crate::special::student_t_quantile;
use crate::{check_confidence, Estimate, StatsError};

/// Student-t confidence interval of the mean of independent replications (batch means):
/// mean ± t_{(1+c)/2, n−1} · s/√n with s the sample standard deviation (divides by n − 1).
/// Needs at least 2 finite samples.
pub fn mean_ci(samples: &[f64], confidence: f64) -> Result<Estimate, StatsError> {
    check_confidence(confidence)?;
    if samples.len() < 2 {
        return Err(StatsError::TooFewSamples {
            need: 2,
            got: samples.len(),
        });
    }
    if let Some(&bad) = samples.iter().find(|x| !x.is_finite()) {
        return Err(StatsError::InvalidSample(bad));
    }
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let var = samples.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    let t = student_t_quantile(0.5 + confidence / 2.0, samples.len() as u64 - 1);
    let half = t * (var / n).sqrt();
    Ok(Estimate {
        value: mean,
        lo: mean - half,
        hi: mean + half,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_hand_computation() {
        // samples 1..=5: mean 3, s² = 10/4 = 2.5, s/√n = √0.5 = 0.70710678,
        // t_{0.975,4} = 2.77644511 → half-width 1.963243161
        let e = mean_ci(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95).unwrap();
        assert!((e.value - 3.0).abs() < 1e-12);
        assert!((e.hi - 3.0 - 1.963243161).abs() < 1e-7, "{e:?}");
        assert!((3.0 - e.lo - 1.963243161).abs() < 1e-7);
        // two samples 10, 12: mean 11, s = √2, s/√2 = 1, t_{0.95,1} = 6.31375151
        let e = mean_ci(&[10.0, 12.0], 0.9).unwrap();
        assert!((e.hi - 11.0 - 6.31375151).abs() < 1e-7, "{e:?}");
    }

    #[test]
    fn rejects_bad_input() {
        assert!(matches!(
            mean_ci(&[1.0], 0.95),
            Err(StatsError::TooFewSamples { need: 2, got: 1 })
        ));
        assert!(matches!(
            mean_ci(&[1.0, 2.0], 1.0),
            Err(StatsError::InvalidConfidence(_))
        ));
        assert!(matches!(
            mean_ci(&[1.0, f64::NAN], 0.9),
            Err(StatsError::InvalidSample(_))
        ));
    }

    #[test]
    fn constant_samples_give_zero_width() {
        let e = mean_ci(&[4.0; 10], 0.99).unwrap();
        assert_eq!((e.lo, e.value, e.hi), (4.0, 4.0, 4.0));
    }
}
