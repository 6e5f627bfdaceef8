//! Mean waits with non-preemptive or preemptive-resume priority classes, highest priority
//! first.

use super::{erlang_c, non_negative, positive, stable, AnalyticError};

fn check_lengths(lens: &[usize]) -> Result<(), AnalyticError> {
    if lens.iter().any(|&l| l != lens[0]) || lens[0] == 0 {
        return Err(AnalyticError::LengthMismatch {
            lens: lens.to_vec(),
        });
    }
    Ok(())
}

/// Cobham's M/G/1 priority formulas. Class `k` (0 = highest) has Poisson arrival rate
/// `lambdas[k]`, mean service `es[k]` and second moment of service `es2[k]` (seconds squared).
///
/// Returns, per class, the mean delay beyond the class's own service time, i.e. mean response
/// minus `es[k]`:
/// - non-preemptive (`preemptive = false`): the mean wait in queue,
///   `R / ((1 - s_{k-1})(1 - s_k))` with `R = sum_i lambda_i es2_i / 2` and `s_k` the load of
///   classes `0..=k`;
/// - preemptive-resume (`preemptive = true`): mean response `T_k = es_k / (1 - s_{k-1}) +
///   R_k / ((1 - s_{k-1})(1 - s_k))` (with `R_k` over classes `0..=k` only) minus `es_k`, so it
///   includes the time a job spends preempted.
///
/// Use [`cobham_mean_responses`] for the mean responses themselves.
pub fn cobham_mean_waits(
    lambdas: &[f64],
    es: &[f64],
    es2: &[f64],
    preemptive: bool,
) -> Result<Vec<f64>, AnalyticError> {
    check_lengths(&[lambdas.len(), es.len(), es2.len()])?;
    for k in 0..lambdas.len() {
        non_negative("class arrival rate", lambdas[k])?;
        positive("class mean service time", es[k])?;
        non_negative("class service second moment", es2[k])?;
    }
    let total: f64 = lambdas.iter().zip(es).map(|(l, s)| l * s).sum();
    stable(total)?;
    let residual_all: f64 = lambdas.iter().zip(es2).map(|(l, s2)| l * s2 / 2.0).sum();
    let mut out = Vec::with_capacity(lambdas.len());
    let (mut above, mut residual_upto) = (0.0, 0.0);
    for k in 0..lambdas.len() {
        let upto = above + lambdas[k] * es[k];
        residual_upto += lambdas[k] * es2[k] / 2.0;
        let wait = if preemptive {
            es[k] * above / (1.0 - above) + residual_upto / ((1.0 - above) * (1.0 - upto))
        } else {
            residual_all / ((1.0 - above) * (1.0 - upto))
        };
        out.push(wait);
        above = upto;
    }
    Ok(out)
}

/// Mean responses (delay + own service) for the M/G/1 priority queue of
/// [`cobham_mean_waits`].
pub fn cobham_mean_responses(
    lambdas: &[f64],
    es: &[f64],
    es2: &[f64],
    preemptive: bool,
) -> Result<Vec<f64>, AnalyticError> {
    let waits = cobham_mean_waits(lambdas, es, es2, preemptive)?;
    Ok(waits.iter().zip(es).map(|(w, s)| w + s).collect())
}

/// M/M/c with priority classes that share one exponential service rate `mu`: mean delay
/// beyond own service per class (highest first), exact.
///
/// - non-preemptive: `C(c, a) / (c mu) / ((1 - s_{k-1})(1 - s_k))`, with `a` the total offered
///   load and `s_k` the per-server load of classes `0..=k`;
/// - preemptive-resume: classes `0..=k` together form an M/M/c queue (lower classes are
///   invisible to them and, service being memoryless, preemption does not change their
///   count), so `T_k` follows from the aggregate M/M/c responses by Little's law; the result is
///   `T_k - 1/mu`.
pub fn mmc_priority_mean_waits(
    c: u32,
    lambdas: &[f64],
    mu: f64,
    preemptive: bool,
) -> Result<Vec<f64>, AnalyticError> {
    if c == 0 {
        return Err(AnalyticError::NoWorkers);
    }
    check_lengths(&[lambdas.len()])?;
    let mu = positive("service rate", mu)?;
    for &l in lambdas {
        positive("class arrival rate", l)?;
    }
    let cmu = f64::from(c) * mu;
    let total: f64 = lambdas.iter().sum();
    stable(total / cmu)?;
    let mut out = Vec::with_capacity(lambdas.len());
    if preemptive {
        // Aggregate mean response of classes 0..=k, times their rate (= mean number present).
        let mut prev_number = 0.0;
        let mut upto = 0.0;
        for &l in lambdas {
            upto += l;
            let response = 1.0 / mu + erlang_c(c, upto / mu)? / (cmu - upto);
            let number = upto * response;
            out.push((number - prev_number) / l - 1.0 / mu);
            prev_number = number;
        }
    } else {
        let base = erlang_c(c, total / mu)? / cmu;
        let mut above = 0.0;
        for &l in lambdas {
            let upto = above + l / cmu;
            out.push(base / ((1.0 - above) * (1.0 - upto)));
            above = upto;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_class_is_fifo() {
        // M/M/1, lambda 0.7, mu 1: W = 0.7 / 0.3 in both disciplines (nobody to preempt).
        let w = cobham_mean_waits(&[0.7], &[1.0], &[2.0], false).unwrap();
        assert!((w[0] - 0.7 / 0.3).abs() < 1e-14);
        let w = cobham_mean_waits(&[0.7], &[1.0], &[2.0], true).unwrap();
        assert!((w[0] - 0.7 / 0.3).abs() < 1e-14);
        let w = mmc_priority_mean_waits(1, &[0.7], 1.0, true).unwrap();
        assert!((w[0] - 0.7 / 0.3).abs() < 1e-14);
    }

    #[test]
    fn conservation_law_non_preemptive() {
        // Equal service laws: the rate-weighted mean wait equals FIFO's (Kleinrock).
        let (l, s, s2) = ([0.2, 0.3, 0.25], [1.0; 3], [1.0; 3]);
        let w = cobham_mean_waits(&l, &s, &s2, false).unwrap();
        let avg: f64 = w.iter().zip(&l).map(|(w, l)| w * l).sum::<f64>() / 0.75;
        let fifo = 0.75 / (2.0 * 0.25);
        assert!((avg - fifo).abs() < 1e-13, "{avg} vs {fifo}");
        let w = mmc_priority_mean_waits(3, &[0.5, 1.0, 0.7], 1.0, false).unwrap();
        let avg: f64 = w
            .iter()
            .zip(&[0.5, 1.0, 0.7])
            .map(|(w, l)| w * l)
            .sum::<f64>()
            / 2.2;
        let fifo = erlang_c(3, 2.2).unwrap() / (3.0 - 2.2);
        assert!((avg - fifo).abs() < 1e-13);
    }

    #[test]
    fn mmc_preemptive_one_server_matches_cobham() {
        let l = [0.3, 0.4];
        let a = mmc_priority_mean_waits(1, &l, 1.0, true).unwrap();
        let b = cobham_mean_waits(&l, &[1.0; 2], &[2.0; 2], true).unwrap();
        for k in 0..2 {
            assert!((a[k] - b[k]).abs() < 1e-13, "{a:?} {b:?}");
        }
    }

    #[test]
    fn rejects_mismatch_and_overload() {
        assert!(cobham_mean_waits(&[0.1], &[1.0, 1.0], &[1.0], false).is_err());
        assert!(cobham_mean_waits(&[0.6, 0.5], &[1.0; 2], &[1.0; 2], false).is_err());
        assert!(mmc_priority_mean_waits(0, &[0.1], 1.0, false).is_err());
    }
}
