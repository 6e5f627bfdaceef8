//! The closed forms of the LNS bursty tail-latency model, one function per formula. All times
//! are in ns, percentiles `p` in percent (99 for the p99). The functions do no input checking
//! beyond what their arithmetic needs; [`super::predict`] validates a whole workload first.

use crate::ModelError;

/// The stage that limits throughput (LNS paper, Definition 2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bottleneck {
    /// The TCP/IP (+ dispatcher) stage: one core, service time T.
    Tcp,
    /// The worker ("Redis") stage: k workers, service time R each.
    Redis,
}

/// Definition 2.1: the bottleneck is the stage with the largest service time per node.
/// Returns `(stage, B, c_B)`: TCP/IP with `B = T`, `c_B = 1` when `T > R/k`, else the worker
/// stage with `B = R`, `c_B = k` (a tie goes to the worker stage, as in the paper's "otherwise").
pub fn bottleneck(t_ns: f64, r_ns: f64, k: u32) -> (Bottleneck, f64, u32) {
    if t_ns > r_ns / f64::from(k.max(1)) {
        (Bottleneck::Tcp, t_ns, 1)
    } else {
        (Bottleneck::Redis, r_ns, k.max(1))
    }
}

/// Formula 1, the bottleneck decomposition: `W_p ≈ w_p + M`.
pub fn decomposition(w_p_ns: f64, m_ns: f64) -> f64 {
    w_p_ns + m_ns
}

/// Formula 2, the bound of the decomposition for deterministic service times:
/// `w_p + M ≤ W_p ≤ w_p + M + 2·c_B·max_{S_i ≠ B} S_i`. Returns `(lower, upper)`.
/// `max_other_ns` is the largest service time among the non-bottleneck queueing stages (the
/// constant stage does not queue and does not count).
pub fn decomposition_bound(w_p_ns: f64, m_ns: f64, c_b: u32, max_other_ns: f64) -> (f64, f64) {
    let lo = w_p_ns + m_ns;
    (lo, lo + 2.0 * f64::from(c_b) * max_other_ns)
}

/// Formula 4 (prioritised server, case 1, `U/α ≤ B/c_B`): the delay-sensitive requests arrive
/// faster than the bottleneck serves them, so the `(p/100·αN)`-th of them leaves at
/// `αpNB/(100 c_B)` and arrived at `pNU/100`: `w_p ≈ αpNB/(100 c_B) − pNU/100`.
/// Negative values (only possible outside case 1) are clamped to 0.
pub fn priority_backlog_wait(p: f64, n: u32, alpha: f64, b_ns: f64, c_b: u32, u_ns: f64) -> f64 {
    let n = f64::from(n);
    (alpha * p * n * b_ns / (100.0 * f64::from(c_b)) - p / 100.0 * n * u_ns).max(0.0)
}

/// `η = 2(1 − ρ)/(c_a² + c_s²)`, the decay rate of the E_c/D/1 waiting-time tail used by
/// formula 6 (`c_a²`, `c_s²`: squared coefficients of variation of the gaps and the service).
pub fn eta(rho: f64, ca2: f64, cs2: f64) -> f64 {
    2.0 * (1.0 - rho) / (ca2 + cs2)
}

/// Formula 6: the p-th percentile wait of an E_c/D/1 queue, `w_p ≈ −ln(1 − p/100)/η · B`.
pub fn ecd1_wait(p: f64, eta: f64, b_ns: f64) -> f64 {
    -(1.0 - p / 100.0).ln() / eta * b_ns
}

/// The bottleneck utilisation seen by the delay-sensitive requests in case 2:
/// `ρ = (B/c_B)/(U/α)`.
pub fn priority_utilisation(alpha: f64, u_ns: f64, b_ns: f64, c_b: u32) -> f64 {
    (b_ns / f64::from(c_b)) / (u_ns / alpha)
}

/// Formula 7 (prioritised server, case 2, `U/α > B/c_B`): the delay-sensitive requests form
/// roughly a Poisson stream, one worker of the bottleneck is an E_{c_B}/D/1 with `c_a² = 1/c_B`
/// and `c_s² = 0`, so `w_p ≈ −ln(1 − p/100)/(2(1 − ρ)) · B/c_B`. This is formula 6 with
/// [`eta`]`(ρ, 1/c_B, 0)`. Infinite when `ρ ≥ 1` (outside case 2).
pub fn priority_steady_wait(p: f64, alpha: f64, u_ns: f64, b_ns: f64, c_b: u32) -> f64 {
    let rho = priority_utilisation(alpha, u_ns, b_ns, c_b);
    if rho >= 1.0 {
        return f64::INFINITY;
    }
    ecd1_wait(p, eta(rho, 1.0 / f64::from(c_b), 0.0), b_ns)
}

/// Formula 9 (FCFS server): the `(pN/100)`-th request of the burst waits
/// `w_p ≈ pNB/(100 c_B) − pNU/100`. Negative values (`U ≥ B/c_B`, outside the paper's
/// assumption: the bottleneck never builds a queue) are clamped to 0.
pub fn fcfs_wait(p: f64, n: u32, b_ns: f64, c_b: u32, u_ns: f64) -> f64 {
    let n = f64::from(n);
    (p / 100.0 * n * (b_ns / f64::from(c_b) - u_ns)).max(0.0)
}

/// Formula 11: worker-stage service time `R = R0 + k·mR`.
pub fn worker_service(r0_ns: f64, mr_ns: f64, k: u32) -> f64 {
    r0_ns + f64::from(k) * mr_ns
}

/// Formula 12: TCP/IP-stage service time `T = T0 + L·mT` (L in bytes, mT in ns/byte).
pub fn tcp_service(t0_ns: f64, mt_ns_per_byte: f64, payload_bytes: f64) -> f64 {
    t0_ns + payload_bytes * mt_ns_per_byte
}

/// Formula 16: the worker count where the bottleneck moves from the worker stage to TCP/IP,
/// `k_t = ⌈R0/(T − mR)⌉` (solving `T = R/k` with formula 11). `None` when `T ≤ mR`: then
/// `R/k > T` for every k and the worker stage stays the bottleneck. At least 1.
pub fn transition_workers(r0_ns: f64, mr_ns: f64, t_ns: f64) -> Option<u32> {
    let d = t_ns - mr_ns;
    if d.is_nan() || d <= 0.0 || !r0_ns.is_finite() {
        return None;
    }
    let k = (r0_ns / d).ceil().max(1.0);
    (k <= f64::from(u32::MAX)).then_some(k as u32)
}

/// Formula 15: relative error `|measured − predicted| / measured × 100 %`.
pub fn relative_error_pct(measured: f64, predicted: f64) -> f64 {
    ((measured - predicted) / measured).abs() * 100.0
}

/// Formulas 13–14: latency entropy in bits with a user-set bin width `bin_ns` (the paper's
/// distinction u). The paper bins with `⌈W/u⌉`, `stats::latency_entropy` with `⌊W/u⌋`; the
/// entropies differ only when samples sit exactly on bin edges.
pub fn latency_entropy_bits(samples_ns: &[f64], bin_ns: f64) -> Result<f64, ModelError> {
    stats::latency_entropy(samples_ns, bin_ns).map_err(|e| ModelError::Invalid {
        name: "latency entropy",
        reason: "cannot be computed",
        value: e.to_string(),
    })
}
