//! Fitting (T0, mT, R0, mR, M) from measured tail latencies of basic tests (LNS paper §2.7,
//! Table 3), least squares on relative residuals when there are more tests than parameters.
//!
//! The model is piecewise (which stage is the bottleneck, which case of the prioritised
//! server applies) and nonlinear in case 2, so the fit is Levenberg–Marquardt, started from
//! the linear least-squares solutions of every assignment of a branch to each test (in the
//! linear branches W is affine in the parameters); the best end point wins. Written by hand:
//! a 5-parameter problem does not justify a numerical-optimisation dependency.

use serde::Serialize;

use super::{predict, BurstyParams, BurstyWorkload, Stack};
use crate::ModelError;

/// One basic test: a workload, the stack it ran on and its measured p-th percentile latency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BasicTest {
    pub workload: BurstyWorkload,
    pub stack: Stack,
    pub measured_ns: f64,
}

/// Which parameters are held fixed (`Some`) rather than fitted (`None`).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct FitSpec {
    pub t0_ns: Option<f64>,
    pub mt_ns_per_byte: Option<f64>,
    pub r0_ns: Option<f64>,
    pub mr_ns: Option<f64>,
    pub m_ns: Option<f64>,
}

impl FitSpec {
    /// The paper's choice for a stack: LNS (priority) is zero-copy, so mT = 0; for the FCFS
    /// servers M is set to 0 (Table 3).
    pub fn for_stack(stack: Stack) -> Self {
        match stack {
            Stack::Priority => Self {
                mt_ns_per_byte: Some(0.0),
                ..Self::default()
            },
            Stack::Fcfs => Self {
                m_ns: Some(0.0),
                ..Self::default()
            },
        }
    }

    fn fixed(&self) -> [Option<f64>; 5] {
        [
            self.t0_ns,
            self.mt_ns_per_byte,
            self.r0_ns,
            self.mr_ns,
            self.m_ns,
        ]
    }
}

/// The workloads of Table 3 for `stack` (N = 20 000, the given spacing U, p99): FCFS: L = 16
/// and 1434 with 29 workers (T0, mT), L = 512 with 1 and 4 workers (R0, mR); priority: α =
/// 0.05 and α = 1 with 29 workers (M, T), L = 512 with 1 and 4 workers (R0, mR).
pub fn table3_workloads(stack: Stack, spacing_ns: f64) -> Vec<BurstyWorkload> {
    let w = |alpha, payload_bytes, workers| BurstyWorkload {
        n: 20_000,
        alpha,
        payload_bytes,
        workers,
        spacing_ns,
        percentile: 99.0,
    };
    match stack {
        Stack::Fcfs => vec![
            w(1.0, 16.0, 29),
            w(1.0, 1434.0, 29),
            w(1.0, 512.0, 1),
            w(1.0, 512.0, 4),
        ],
        Stack::Priority => vec![
            w(0.05, 512.0, 29),
            w(1.0, 512.0, 29),
            w(1.0, 512.0, 1),
            w(1.0, 512.0, 4),
        ],
    }
}

/// A fit and how well it reproduces the tests.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FitResult {
    pub params: BurstyParams,
    /// Predicted − measured, ns, per test.
    pub residuals_ns: Vec<f64>,
    /// Root mean square of the relative residuals.
    pub rms_relative: f64,
}

const NAMES: [&str; 5] = ["T0", "mT", "R0", "mR", "M"];
/// Relative residual that stands for "the model cannot evaluate these parameters".
const INVALID: f64 = 1e6;
const MAX_STARTS: usize = 1024;

/// Fits the free parameters of `spec` to `tests`. Errors: fewer tests than free parameters,
/// a bad workload (α outside (0, 1], U ≤ 0, k = 0, …), a measurement that is not a positive
/// finite number of ns, or no finite fit.
pub fn fit(tests: &[BasicTest], spec: &FitSpec) -> Result<FitResult, ModelError> {
    let fixed = spec.fixed();
    let free: Vec<usize> = (0..5).filter(|&i| fixed[i].is_none()).collect();
    if tests.len() < free.len() {
        return Err(ModelError::TooFewTests {
            tests: tests.len(),
            params: free.len(),
        });
    }
    for t in tests {
        t.workload.validate()?;
        if !(t.measured_ns.is_finite() && t.measured_ns > 0.0) {
            return Err(ModelError::Invalid {
                name: "measured latency",
                reason: "must be a positive finite number of ns",
                value: t.measured_ns.to_string(),
            });
        }
    }
    for (i, v) in fixed.iter().enumerate() {
        if let Some(v) = v {
            if !(v.is_finite() && *v >= 0.0) {
                return Err(ModelError::Invalid {
                    name: NAMES[i],
                    reason: "must be a non-negative finite number of ns when fixed",
                    value: v.to_string(),
                });
            }
        }
    }
    let problem = Problem {
        tests,
        fixed,
        free: &free,
    };
    let mut best: Option<(f64, Vec<f64>)> = None;
    for start in problem.starts() {
        let theta = problem.levenberg_marquardt(start);
        let cost = problem.cost(&theta);
        if cost.is_finite() && best.as_ref().is_none_or(|(c, _)| cost < *c) {
            best = Some((cost, theta));
        }
    }
    let (cost, theta) = best.ok_or_else(|| ModelError::Fit("no finite fit".into()))?;
    if cost >= INVALID * INVALID {
        return Err(ModelError::Fit(
            "no parameters make the model evaluate every test".into(),
        ));
    }
    let params = problem.params(&theta);
    let residuals_ns = tests
        .iter()
        .map(|t| predict(&params, &t.workload, t.stack).map(|p| p.latency_ns - t.measured_ns))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(FitResult {
        params,
        residuals_ns,
        rms_relative: (cost / tests.len() as f64).sqrt(),
    })
}

struct Problem<'a> {
    tests: &'a [BasicTest],
    fixed: [Option<f64>; 5],
    free: &'a [usize],
}

impl Problem<'_> {
    fn full(&self, theta: &[f64]) -> [f64; 5] {
        let mut x = [0.0; 5];
        for (i, slot) in x.iter_mut().enumerate() {
            *slot = self.fixed[i].unwrap_or(0.0);
        }
        for (j, &i) in self.free.iter().enumerate() {
            x[i] = theta[j].max(0.0);
        }
        x
    }

    fn params(&self, theta: &[f64]) -> BurstyParams {
        let x = self.full(theta);
        BurstyParams {
            t0_ns: x[0],
            mt_ns_per_byte: x[1],
            r0_ns: x[2],
            mr_ns: x[3],
            m_ns: x[4],
        }
    }

    fn residuals(&self, theta: &[f64]) -> Vec<f64> {
        let p = self.params(theta);
        self.tests
            .iter()
            .map(|t| match predict(&p, &t.workload, t.stack) {
                Ok(pr) if pr.latency_ns.is_finite() => {
                    (pr.latency_ns - t.measured_ns) / t.measured_ns
                }
                _ => INVALID,
            })
            .collect()
    }

    fn cost(&self, theta: &[f64]) -> f64 {
        self.residuals(theta).iter().map(|r| r * r).sum()
    }

    /// Linear least-squares starts: each test gets a branch (bottleneck TCP/IP or workers;
    /// for the prioritised stack also case 1, or case 2 at low load where formula 7 tends to
    /// `−ln(1 − p/100)/2 · B/c_B`), in which W is affine in (T0, mT, R0, mR, M).
    fn starts(&self) -> Vec<Vec<f64>> {
        let branches: Vec<usize> = self
            .tests
            .iter()
            .map(|t| if t.stack == Stack::Priority { 4 } else { 2 })
            .collect();
        let combos = branches
            .iter()
            .try_fold(1usize, |acc, &b| acc.checked_mul(b))
            .unwrap_or(usize::MAX);
        let stride = combos.div_ceil(MAX_STARTS).max(1);
        let mut out = Vec::new();
        let mut c = 0usize;
        while c < combos && out.len() < MAX_STARTS {
            if let Some(x) = self.linear_start(c, &branches) {
                out.push(x);
            }
            c += stride;
        }
        out.push(vec![1000.0; self.free.len()]);
        out
    }

    fn linear_start(&self, mut code: usize, branches: &[usize]) -> Option<Vec<f64>> {
        let p = self.free.len();
        let mut rows = Vec::with_capacity(self.tests.len());
        let mut rhs = Vec::with_capacity(self.tests.len());
        for (t, &nb) in self.tests.iter().zip(branches) {
            let branch = code % nb;
            code /= nb;
            let w = &t.workload;
            let (n, k, pct) = (f64::from(w.n), f64::from(w.workers), w.percentile / 100.0);
            // W = g·(B/c_B) − h + M
            let (g, h) = match (t.stack, branch / 2) {
                (Stack::Fcfs, _) => (pct * n, pct * n * w.spacing_ns),
                (Stack::Priority, 0) => (pct * n * w.alpha, pct * n * w.spacing_ns),
                _ => (-(1.0 - pct).ln() / 2.0, 0.0),
            };
            let coef = if branch.is_multiple_of(2) {
                [g, g * w.payload_bytes, 0.0, 0.0, 1.0]
            } else {
                [0.0, 0.0, g / k, g, 1.0]
            };
            let mut y = t.measured_ns + h;
            for (i, v) in self.fixed.iter().enumerate() {
                y -= coef[i] * v.unwrap_or(0.0);
            }
            rows.push(self.free.iter().map(|&i| coef[i] / t.measured_ns).collect());
            rhs.push(y / t.measured_ns);
        }
        let x = least_squares(&rows, &rhs, p)?;
        x.iter().all(|v| v.is_finite()).then_some(x)
    }

    fn levenberg_marquardt(&self, mut theta: Vec<f64>) -> Vec<f64> {
        let p = theta.len();
        for v in theta.iter_mut() {
            *v = v.max(0.0);
        }
        let mut r = self.residuals(&theta);
        let mut cost: f64 = r.iter().map(|x| x * x).sum();
        let mut lambda = 1e-3;
        for _ in 0..300 {
            if cost < 1e-28 {
                break;
            }
            // Forward-difference Jacobian.
            let mut jac = vec![vec![0.0; p]; r.len()];
            for j in 0..p {
                let h = 1e-7 * theta[j].abs().max(1.0);
                let mut t2 = theta.clone();
                t2[j] += h;
                let r2 = self.residuals(&t2);
                for (i, row) in jac.iter_mut().enumerate() {
                    row[j] = (r2[i] - r[i]) / h;
                }
            }
            let mut jtj = vec![vec![0.0; p]; p];
            let mut jtr = vec![0.0; p];
            for (i, row) in jac.iter().enumerate() {
                for a in 0..p {
                    jtr[a] -= row[a] * r[i];
                    for b in 0..p {
                        jtj[a][b] += row[a] * row[b];
                    }
                }
            }
            let mut improved = false;
            for _ in 0..20 {
                let mut m = jtj.clone();
                for (a, row) in m.iter_mut().enumerate() {
                    row[a] += lambda * jtj[a][a].max(1e-30);
                }
                let Some(delta) = solve(m, jtr.clone()) else {
                    lambda *= 10.0;
                    continue;
                };
                let cand: Vec<f64> = theta
                    .iter()
                    .zip(&delta)
                    .map(|(t, d)| (t + d).max(0.0))
                    .collect();
                let rc = self.residuals(&cand);
                let c: f64 = rc.iter().map(|x| x * x).sum();
                if c < cost {
                    let gain = cost - c;
                    theta = cand;
                    r = rc;
                    cost = c;
                    lambda = (lambda / 3.0).max(1e-12);
                    improved = gain > 1e-30 * cost.max(1e-30);
                    break;
                }
                lambda *= 4.0;
            }
            if !improved {
                break;
            }
        }
        theta
    }
}

/// Least squares `min ‖A x − b‖` through the normal equations (A is at most a few columns).
fn least_squares(a: &[Vec<f64>], b: &[f64], p: usize) -> Option<Vec<f64>> {
    let mut ata = vec![vec![0.0; p]; p];
    let mut atb = vec![0.0; p];
    for (row, y) in a.iter().zip(b) {
        for i in 0..p {
            atb[i] += row[i] * y;
            for j in 0..p {
                ata[i][j] += row[i] * row[j];
            }
        }
    }
    solve(ata, atb)
}

/// Solves the symmetric system `m x = v` after scaling it to a unit diagonal (the
/// parameters differ by orders of magnitude: mT in ns/byte, M in tens of µs).
fn solve(mut m: Vec<Vec<f64>>, mut v: Vec<f64>) -> Option<Vec<f64>> {
    let d: Vec<f64> = (0..v.len())
        .map(|i| {
            let x = m[i][i].abs().sqrt();
            if x > 0.0 {
                1.0 / x
            } else {
                1.0
            }
        })
        .collect();
    for (i, row) in m.iter_mut().enumerate() {
        for (j, x) in row.iter_mut().enumerate() {
            *x *= d[i] * d[j];
        }
        v[i] *= d[i];
    }
    let y = gauss(m, v)?;
    Some(y.iter().zip(&d).map(|(y, d)| y * d).collect())
}

/// Gaussian elimination with partial pivoting; `None` for a (numerically) singular matrix.
fn gauss(mut m: Vec<Vec<f64>>, mut v: Vec<f64>) -> Option<Vec<f64>> {
    let n = v.len();
    let scale = m
        .iter()
        .flatten()
        .fold(0.0_f64, |s, x| s.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    for col in 0..n {
        let piv = (col..n).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[piv][col].abs() <= 1e-12 * scale {
            return None;
        }
        m.swap(col, piv);
        v.swap(col, piv);
        let (top, rest) = m.split_at_mut(col + 1);
        let pivot_row = &top[col];
        for (i, row) in rest.iter_mut().enumerate() {
            let f = row[col] / pivot_row[col];
            for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= f * p;
            }
            v[col + 1 + i] -= f * v[col];
        }
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| m[i][k] * x[k]).sum();
        x[i] = (v[i] - s) / m[i][i];
    }
    Some(x)
}
