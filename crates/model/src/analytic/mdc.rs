//! M/D/c: Poisson arrivals at rate `lambda`, `c` servers, every service exactly `d` seconds,
//! one FIFO queue. Exact waiting time distribution as a finite sum of positive terms.
//!
//! Method (Crommelin 1932; the waiting-time form is Franx 2001):
//!
//! 1. Look at the number in system every `d` seconds: everyone in service finishes within
//!    `d`, nobody who was waiting does, so `Q' = max(Q - c, 0) + A` with `A ~ Poisson(lambda d)`.
//!    Its stationary law is the time-stationary law of the number in system. We solve the
//!    (truncated, banded) chain with the GTH state-reduction algorithm, which only adds,
//!    multiplies and divides non-negative numbers and is therefore accurate to a few ulps per
//!    state, whatever the load (the textbook recursion for `p_{j+c}` subtracts and is not).
//! 2. A FIFO customer arriving at time `s` waits at most `k d + u` (`0 <= u < d`) iff fewer
//!    than `(k + 1) c` of the customers ahead of it are still present at `s + u`; those are the
//!    `max(Q - c, 0)` left over from time `s + u - d` plus the Poisson(`lambda (d - u)`)
//!    arrivals in `(s + u - d, s)`. Hence, with `K = (k + 1) c - 1` and `N ~ Poisson(lambda
//!    (d - u))` independent of `Q`:
//!    `P(W <= k d + u) = sum_{n <= K} P(N = n) P(Q <= K - n + c)` and
//!    `P(W >  k d + u) = sum_{n <= K} P(N = n) P(Q >  K - n + c) + P(N > K)`.
//!    Every term is positive, so both the body and the far tail keep full relative precision.
//!
//! The tail of the queue law beyond the truncation point is extended geometrically with the
//! exact asymptotic ratio `1 / z0`, where `z0 > 1` solves `z^c = exp(lambda d (z - 1))`; the
//! waiting time then decays like `exp(-theta t)` with `theta = c ln(z0) / d`.

use super::poisson::{pmf_table, NEGLIGIBLE};
use super::solve::invert_ccdf;
use super::{positive, probability, stable, AnalyticError};

/// Largest worker count accepted: `exp(-lambda d)` must not underflow.
pub const MAX_WORKERS: u32 = 500;
/// Limit on stored matrix entries (states x band width), about 160 MB of `f64`.
const ENTRY_LIMIT: usize = 20_000_000;
/// Limit on floating-point work in the state reduction.
const WORK_LIMIT: usize = 2_000_000_000;
/// Truncate the queue law where its tail is below `exp(-TAIL_LOG)` (about 1e-25).
const TAIL_LOG: f64 = 58.0;

/// The exact M/D/c waiting-time law, precomputed once so that many evaluations and quantiles
/// are cheap.
#[derive(Clone, Debug)]
pub struct MdcWait {
    lambda: f64,
    d: f64,
    c: usize,
    /// Stationary P(Q = j), j = 0..=N (number in system, time average = seen by arrivals).
    p: Vec<f64>,
    /// P(Q <= j), summed from the bottom.
    cum: Vec<f64>,
    /// P(Q > j), summed from the top plus the geometric remainder.
    tail: Vec<f64>,
    /// ln z0: the per-state decay of the queue law.
    decay_x: f64,
}

/// Validate M/D/c parameters; return the offered load `a = lambda d`.
pub(crate) fn validate(lambda: f64, d: f64, c: u32) -> Result<f64, AnalyticError> {
    let lambda = positive("arrival rate", lambda)?;
    let d = positive("service time", d)?;
    if c == 0 {
        return Err(AnalyticError::NoWorkers);
    }
    if c > MAX_WORKERS {
        return Err(AnalyticError::TooManyWorkers {
            workers: c,
            max: MAX_WORKERS,
        });
    }
    let a = lambda * d;
    stable(a / f64::from(c))?;
    Ok(a)
}

/// `x0 = ln z0 > 0`, the root of `c x = a (e^x - 1)`, by bisection on the decreasing
/// function `c - a (e^x - 1) / x` (positive at 0 because `a < c`).
pub(crate) fn decay_root(a: f64, c: usize) -> f64 {
    let cf = c as f64;
    let g = |x: f64| cf - a * x.exp_m1() / x;
    let mut hi = 1.0;
    while g(hi) > 0.0 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if mid > 0.0 && g(mid) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Number of queue states (0..=N) to keep, or an error if that is unreasonable.
pub(crate) fn state_count(a: f64, c: usize, x0: f64, width: usize) -> Result<usize, AnalyticError> {
    // Memory is states x width entries, work states x width x c operations.
    let width = width.max(1);
    let limit = (ENTRY_LIMIT / width).min(WORK_LIMIT / (width * c.max(1)));
    let body = TAIL_LOG / x0;
    let states = if body.is_finite() && body < limit as f64 {
        body.ceil() as usize + 2 * c + width + 10
    } else {
        usize::MAX
    };
    if states > limit {
        return Err(AnalyticError::TooManyStates {
            rho: a / c as f64,
            states,
            limit,
        });
    }
    Ok(states)
}

/// Stationary law of Crommelin's chain `Q' = max(Q - c, 0) + Poisson(a)` on states
/// 0..n_states, by GTH state reduction on the banded transition matrix.
///
/// Row `i` has non-zero entries only in columns `i - c ..= i - c + M` (M: last non-negligible
/// Poisson term), and eliminating the highest state keeps that band, so the matrix is stored
/// as `n_states x (M + c + 1)`.
fn stationary_gth(a: f64, c: usize, n_states: usize) -> Vec<f64> {
    let alpha = pmf_table(a);
    let width = alpha.len() + c;
    let idx = |i: usize, k: usize| i * width + (k + c - i);
    let mut mat = vec![0.0; n_states * width];
    for i in 0..n_states {
        let base = i.saturating_sub(c);
        for (m, &am) in alpha.iter().enumerate() {
            let k = base + m;
            if k >= n_states {
                break;
            }
            mat[idx(i, k)] = am;
        }
    }
    for n in (1..n_states).rev() {
        let klo = n.saturating_sub(c);
        let s: f64 = (klo..n).map(|k| mat[idx(n, k)]).sum();
        let ilo = (n + c + 1).saturating_sub(width);
        for i in ilo..n {
            let v = mat[idx(i, n)] / s;
            mat[idx(i, n)] = v;
            if v == 0.0 {
                continue;
            }
            for k in klo..n {
                mat[idx(i, k)] += v * mat[idx(n, k)];
            }
        }
    }
    let mut pi = vec![0.0; n_states];
    pi[0] = 1.0;
    for n in 1..n_states {
        let ilo = (n + c + 1).saturating_sub(width);
        pi[n] = (ilo..n).map(|i| pi[i] * mat[idx(i, n)]).sum();
    }
    let total: f64 = pi.iter().sum();
    pi.iter_mut().for_each(|x| *x /= total);
    pi
}

impl MdcWait {
    /// Solve the M/D/c queue for arrival rate `lambda` (1/s), service time `d` (s) and `c`
    /// workers.
    pub fn new(lambda: f64, d: f64, c: u32) -> Result<Self, AnalyticError> {
        let a = validate(lambda, d, c)?;
        let c = c as usize;
        let x0 = decay_root(a, c);
        let width = pmf_table(a).len() + c;
        let n_states = state_count(a, c, x0, width)?;
        let p = stationary_gth(a, c, n_states);
        Ok(Self::from_probs(lambda, d, c, p, x0))
    }

    /// Build from a stationary queue law `p` (already validated parameters).
    pub(crate) fn from_probs(lambda: f64, d: f64, c: usize, p: Vec<f64>, decay_x: f64) -> Self {
        let mut cum = Vec::with_capacity(p.len());
        let mut acc = 0.0;
        for &x in &p {
            acc += x;
            cum.push(acc);
        }
        let r = (-decay_x).exp();
        let last = p.last().copied().unwrap_or(0.0);
        let mut acc = last * r / (1.0 - r);
        let mut tail = vec![0.0; p.len()];
        for j in (0..p.len()).rev() {
            tail[j] = acc;
            acc += p[j];
        }
        Self {
            lambda,
            d,
            c,
            p,
            cum,
            tail,
            decay_x,
        }
    }

    /// The stationary number-in-system probabilities P(Q = j), j = 0, 1, ... (truncated
    /// where the remaining mass is below about 1e-25).
    pub fn queue_probs(&self) -> &[f64] {
        &self.p
    }

    /// P(Q > m).
    fn tail_q(&self, m: usize) -> f64 {
        match self.tail.get(m) {
            Some(&t) => t,
            None => {
                let last = self.tail.len() - 1;
                self.tail[last] * (-self.decay_x * (m - last) as f64).exp()
            }
        }
    }

    /// P(Q <= m).
    fn cum_q(&self, m: usize) -> f64 {
        match self.cum.get(m) {
            Some(&t) => t,
            None => 1.0 - self.tail_q(m),
        }
    }

    /// Split `t >= 0` into (K, Poisson mean) of the positive-term form.
    fn split(&self, t: f64) -> Option<(usize, f64)> {
        let k = (t / self.d).floor();
        if k * self.c as f64 > 1e12 {
            return None;
        }
        let u = (t - k * self.d).clamp(0.0, self.d);
        let big_k = (k as usize + 1) * self.c - 1;
        Some((big_k, self.lambda * (self.d - u)))
    }

    /// P(W <= t).
    pub fn wait_cdf(&self, t: f64) -> f64 {
        if t.is_nan() {
            return f64::NAN;
        }
        if t < 0.0 {
            return 0.0;
        }
        let Some((big_k, mean)) = self.split(t) else {
            return 1.0;
        };
        let mut term = (-mean).exp();
        let mut sum = 0.0;
        for n in 0..=big_k {
            sum += term * self.cum_q(big_k - n + self.c);
            term *= mean / (n + 1) as f64;
            if (n + 1) as f64 > mean && term < NEGLIGIBLE {
                break;
            }
        }
        sum.min(1.0)
    }

    /// P(W > t), computed directly (not as `1 - cdf`) so that deep tails keep their relative
    /// precision.
    pub fn wait_ccdf(&self, t: f64) -> f64 {
        if t.is_nan() {
            return f64::NAN;
        }
        if t < 0.0 {
            return 1.0;
        }
        let Some((big_k, mean)) = self.split(t) else {
            return 0.0;
        };
        let mut term = (-mean).exp();
        let mut sum = 0.0;
        let mut n = 0usize;
        loop {
            sum += if n <= big_k {
                term * self.tail_q(big_k - n + self.c)
            } else {
                term
            };
            n += 1;
            term *= mean / n as f64;
            if n as f64 > mean && term <= NEGLIGIBLE * sum {
                break;
            }
        }
        sum.min(1.0)
    }

    /// P(R > t) for the response time R = W + d (the curve of Tales of the Tail's Figs 1-4).
    pub fn response_ccdf(&self, t: f64) -> f64 {
        self.wait_ccdf(t - self.d)
    }

    /// P(W = 0) = P(Q < c).
    pub fn prob_no_wait(&self) -> f64 {
        self.cum[self.c - 1]
    }

    /// The `p`-quantile of the waiting time (0 when `p <= P(W = 0)`).
    pub fn wait_quantile(&self, p: f64) -> Result<f64, AnalyticError> {
        let p = probability("quantile level", p)?;
        Ok(invert_ccdf(|t| self.wait_ccdf(t), 1.0 - p, self.d))
    }

    /// The `p`-quantile of the response time (wait + d).
    pub fn response_quantile(&self, p: f64) -> Result<f64, AnalyticError> {
        Ok(self.wait_quantile(p)? + self.d)
    }

    /// Mean waiting time by Little's law from the queue law: E[number waiting] / lambda.
    pub fn mean_wait(&self) -> f64 {
        let waiting: f64 = self
            .p
            .iter()
            .enumerate()
            .skip(self.c + 1)
            .map(|(j, &x)| (j - self.c) as f64 * x)
            .sum();
        waiting / self.lambda
    }

    /// The exact asymptotic decay rate theta (1/s): P(W > t) ~ K exp(-theta t).
    pub fn tail_decay_rate(&self) -> f64 {
        self.c as f64 * self.decay_x / self.d
    }
}

/// P(W <= t) for M/D/c. Solves the queue on every call; use [`MdcWait`] for many points.
pub fn wait_cdf(lambda: f64, d: f64, c: u32, t: f64) -> Result<f64, AnalyticError> {
    Ok(MdcWait::new(lambda, d, c)?.wait_cdf(t))
}

/// P(W > t) for M/D/c.
pub fn wait_ccdf(lambda: f64, d: f64, c: u32, t: f64) -> Result<f64, AnalyticError> {
    Ok(MdcWait::new(lambda, d, c)?.wait_ccdf(t))
}

/// The `p`-quantile of the M/D/c waiting time.
pub fn wait_quantile(lambda: f64, d: f64, c: u32, p: f64) -> Result<f64, AnalyticError> {
    MdcWait::new(lambda, d, c)?.wait_quantile(p)
}

/// The `p`-quantile of the M/D/c response time (wait + d).
pub fn response_quantile(lambda: f64, d: f64, c: u32, p: f64) -> Result<f64, AnalyticError> {
    MdcWait::new(lambda, d, c)?.response_quantile(p)
}
