//! LNS paper Fig. 7 and Improvement 1: the concurrency a server sustains, the largest burst N
//! whose predicted p-th percentile latency stays within a target (the paper: 50 ms), at a
//! given worker count and at formula 16's k_t.

use serde::Serialize;

use super::{predict, BurstyParams, BurstyWorkload, Stack};
use crate::ModelError;

/// The largest burst N in `1..=max_n` whose predicted latency ([`predict`]) is at most
/// `target_ns`, for `workload` with its `n` replaced; `None` when even one request exceeds it.
///
/// The prediction does not decrease as N grows (formulas 4 and 9 grow with N; formula 7 does
/// not depend on it), so a binary search finds the boundary; `max_n` when every N within the
/// bound meets the target.
pub fn max_burst_within(
    params: &BurstyParams,
    workload: &BurstyWorkload,
    stack: Stack,
    target_ns: f64,
    max_n: u32,
) -> Result<Option<u32>, ModelError> {
    let meets = |n: u32| -> Result<bool, ModelError> {
        let w = BurstyWorkload { n, ..*workload };
        Ok(predict(params, &w, stack)?.latency_ns <= target_ns)
    };
    if max_n == 0 || !meets(1)? {
        return Ok(None);
    }
    if meets(max_n)? {
        return Ok(Some(max_n));
    }
    // Invariant: meets(lo) and not meets(hi).
    let (mut lo, mut hi) = (1u32, max_n);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if meets(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(Some(lo))
}

/// One row of Fig. 7: at one share α of delay-sensitive requests, the concurrency at the
/// given worker count and at k_t.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ConcurrencyRow {
    pub alpha: f64,
    /// The largest N meeting the target with the workload's workers (None: not even one).
    pub at_workers: Option<u32>,
    /// The same with k_t workers (formula 16; None when k_t is undefined).
    pub at_best: Option<u32>,
    /// `at_best ÷ at_workers`.
    pub gain: Option<f64>,
}

/// Fig. 7: for each α of `alphas`, [`max_burst_within`] at `workload.workers` and at k_t.
pub fn concurrency_rows(
    params: &BurstyParams,
    workload: &BurstyWorkload,
    stack: Stack,
    target_ns: f64,
    alphas: &[f64],
    max_n: u32,
) -> Result<(Option<u32>, Vec<ConcurrencyRow>), ModelError> {
    let best = params.best_workers(workload.payload_bytes);
    let mut rows = Vec::with_capacity(alphas.len());
    for &alpha in alphas {
        let w = BurstyWorkload { alpha, ..*workload };
        let at_workers = max_burst_within(params, &w, stack, target_ns, max_n)?;
        let at_best = match best {
            Some(k) => {
                let wb = BurstyWorkload { workers: k, ..w };
                max_burst_within(params, &wb, stack, target_ns, max_n)?
            }
            None => None,
        };
        let gain = match (at_workers, at_best) {
            (Some(a), Some(b)) => Some(f64::from(b) / f64::from(a)),
            _ => None,
        };
        rows.push(ConcurrencyRow {
            alpha,
            at_workers,
            at_best,
            gain,
        });
    }
    Ok((best, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> BurstyParams {
        BurstyParams {
            t0_ns: 4_000.0,
            mt_ns_per_byte: 0.0,
            r0_ns: 45_000.0,
            mr_ns: 500.0,
            m_ns: 70_000.0,
        }
    }

    fn workload(workers: u32, alpha: f64) -> BurstyWorkload {
        BurstyWorkload {
            n: 1,
            alpha,
            payload_bytes: 512.0,
            workers,
            spacing_ns: 1_000.0,
            percentile: 99.0,
        }
    }

    /// The boundary against the formulas themselves: N meets the target, N + 1 does not.
    #[test]
    fn the_boundary_is_where_the_prediction_crosses_the_target() {
        for stack in [Stack::Fcfs, Stack::Priority] {
            for (k, alpha) in [(4, 0.05), (4, 0.5), (13, 0.2), (29, 1.0)] {
                let w = workload(k, alpha);
                let at = |n: u32| {
                    predict(&params(), &BurstyWorkload { n, ..w }, stack)
                        .unwrap()
                        .latency_ns
                };
                let n = max_burst_within(&params(), &w, stack, 50e6, 1_000_000)
                    .unwrap()
                    .unwrap();
                assert!(at(n) <= 50e6, "{stack:?} k={k} α={alpha}: N={n}");
                if n < 1_000_000 {
                    assert!(at(n + 1) > 50e6, "{stack:?} k={k} α={alpha}: N={n}");
                }
                // The search's premise: the prediction never decreases with N.
                let mut last = 0.0;
                for m in (1..=n.min(50_000)).step_by(97) {
                    let v = at(m);
                    assert!(v >= last, "{stack:?} k={k} α={alpha}: N={m}");
                    last = v;
                }
            }
        }
    }

    #[test]
    fn more_workers_up_to_k_t_sustain_more_concurrency() {
        // k_t = ⌈45 / (4 − 0.5)⌉ = 13 (formula 16). Requests 100 ns apart: U/α stays below
        // B/c_B, so the delay-sensitive backlog grows with N (formula 4).
        let w = BurstyWorkload {
            spacing_ns: 100.0,
            ..workload(4, 0.05)
        };
        let (best, rows) = concurrency_rows(
            &params(),
            &w,
            Stack::Priority,
            50e6,
            &[0.05, 0.2, 0.5, 1.0],
            10_000_000,
        )
        .unwrap();
        assert_eq!(best, Some(13));
        for r in &rows {
            let (a, b) = (r.at_workers.unwrap(), r.at_best.unwrap());
            assert!(b > a && b < 10_000_000, "{r:?}");
            assert_eq!(r.gain, Some(f64::from(b) / f64::from(a)));
        }
        // In the steady regime (U/α above B/c_B, formula 7) the latency does not depend on N:
        // every burst within the bound meets the target.
        let steady = max_burst_within(&params(), &workload(4, 0.05), Stack::Priority, 50e6, 1000);
        assert_eq!(steady.unwrap(), Some(1000));
        // A target below the constant delay M: not even one request.
        let none = max_burst_within(&params(), &workload(4, 0.05), Stack::Fcfs, 1_000.0, 100);
        assert_eq!(none.unwrap(), None);
    }
}
