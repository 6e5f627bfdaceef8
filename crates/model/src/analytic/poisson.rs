//! Poisson probabilities for the deterministic-service forms.
//!
//! Hand-written rather than taken from a special-functions crate: only the pmf by its
//! multiplicative recurrence is needed, and keeping it here lets us sum tails from the top
//! (positive terms only) instead of forming `1 - cdf`.

/// Terms below this are dropped: they cannot change any probability we report.
pub(crate) const NEGLIGIBLE: f64 = 1e-40;

/// The Poisson(`mean`) pmf at 0..=M, where M is the first index past the mean whose term is
/// below [`NEGLIGIBLE`]. `mean` must be finite, non-negative and small enough that `exp(-mean)`
/// does not underflow (callers limit it to a few hundred).
pub(crate) fn pmf_table(mean: f64) -> Vec<f64> {
    let mut out = vec![(-mean).exp()];
    let mut term = out[0];
    let mut k = 0.0_f64;
    loop {
        k += 1.0;
        term *= mean / k;
        if k > mean && term < NEGLIGIBLE {
            break;
        }
        out.push(term);
    }
    out
}

/// Upper tails of a pmf table: `tail[m] = sum of pmf[k] for k > m`, summed from the top.
pub(crate) fn upper_tails(pmf: &[f64]) -> Vec<f64> {
    let mut tail = vec![0.0; pmf.len()];
    let mut acc = 0.0;
    for m in (0..pmf.len()).rev() {
        tail[m] = acc;
        acc += pmf[m];
    }
    tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_sums_to_one_and_tails_agree() {
        for mean in [0.0, 0.3, 1.0, 7.5, 60.0] {
            let pmf = pmf_table(mean);
            let total: f64 = pmf.iter().sum();
            assert!((total - 1.0).abs() < 1e-13, "mean {mean}: {total}");
            let tail = upper_tails(&pmf);
            assert!((tail[0] - (1.0 - pmf[0])).abs() < 1e-13);
            assert_eq!(*tail.last().unwrap(), 0.0);
        }
    }
}
