//! M/D/1: Poisson arrivals at rate `lambda`, one server, every service exactly `d` seconds.
//!
//! The classic Erlang series `P(W <= t) = (1 - rho) sum_{k <= t/d} e^{lambda (t - k d)}
//! (lambda (k d - t))^k / k!` alternates in sign with terms that grow like `e^{lambda t}`, so in
//! `f64` it loses every digit once `t` is a few dozen service times. Here the waiting time is
//! evaluated with the positive-term form of [`super::mdc`] (c = 1), and the number-in-system
//! law it needs comes from a recursion that is itself free of subtraction: equating the flows
//! across the cut between states `j` and `j + 1` of the embedded chain
//! `Q' = max(Q - 1, 0) + A`, `A ~ Poisson(rho)`, gives
//!
//! `p_{j+1} P(A = 0) = p_0 P(A > j) + sum_{i=1}^{j} p_i P(A > j + 1 - i)`, with `p_0 = 1 - rho`,
//!
//! a positive combination of earlier terms, so relative rounding errors grow at most linearly
//! in `j`. (The M/D/c solver reaches the same law by a different algorithm, GTH state
//! reduction; the tests check that they agree.)

use super::mdc::{decay_root, state_count, validate, MdcWait};
use super::poisson::{pmf_table, upper_tails};
use super::AnalyticError;

/// Stationary number-in-system law of M/D/1 with load `rho`, states 0..n_states, by the
/// positive cut recursion.
pub(crate) fn queue_law(rho: f64, n_states: usize) -> Vec<f64> {
    let alpha = pmf_table(rho);
    let tails = upper_tails(&alpha);
    // tails[m] is zero for m >= reach.
    let reach = tails.len();
    let mut p = Vec::with_capacity(n_states);
    p.push(1.0 - rho);
    for j in 0..n_states.saturating_sub(1) {
        let mut flow_up = if j < reach { p[0] * tails[j] } else { 0.0 };
        let first = (j + 1).saturating_sub(reach - 1).max(1);
        for (i, &pi) in p.iter().enumerate().take(j + 1).skip(first) {
            flow_up += pi * tails[j + 1 - i];
        }
        p.push(flow_up / alpha[0]);
    }
    p
}

/// The exact M/D/1 waiting-time law (an [`MdcWait`] with one worker whose queue law comes
/// from the cut recursion above).
pub fn solve(lambda: f64, d: f64) -> Result<MdcWait, AnalyticError> {
    let rho = validate(lambda, d, 1)?;
    let x0 = decay_root(rho, 1);
    let width = pmf_table(rho).len() + 1;
    let n_states = state_count(rho, 1, x0, width)?;
    Ok(MdcWait::from_probs(
        lambda,
        d,
        1,
        queue_law(rho, n_states),
        x0,
    ))
}

/// P(W <= t). Solves the queue on every call; use [`solve`] for many points.
pub fn wait_cdf(lambda: f64, d: f64, t: f64) -> Result<f64, AnalyticError> {
    Ok(solve(lambda, d)?.wait_cdf(t))
}

/// P(W > t), accurate in relative terms deep into the tail.
pub fn wait_ccdf(lambda: f64, d: f64, t: f64) -> Result<f64, AnalyticError> {
    Ok(solve(lambda, d)?.wait_ccdf(t))
}

/// The `p`-quantile of the waiting time; 0 when `p <= 1 - rho` (the atom at zero).
pub fn wait_quantile(lambda: f64, d: f64, p: f64) -> Result<f64, AnalyticError> {
    solve(lambda, d)?.wait_quantile(p)
}

/// The `p`-quantile of the response time (wait + d).
pub fn response_quantile(lambda: f64, d: f64, p: f64) -> Result<f64, AnalyticError> {
    solve(lambda, d)?.response_quantile(p)
}

/// Pollaczek–Khinchine mean wait `rho d / (2 (1 - rho))` (exact for M/D/1).
pub fn mean_wait(lambda: f64, d: f64) -> Result<f64, AnalyticError> {
    let rho = validate(lambda, d, 1)?;
    Ok(rho * d / (2.0 * (1.0 - rho)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_states_match_closed_forms() {
        // p1 = (1 - rho)(e^rho - 1); p2 = (1 - rho)(e^{2 rho} - e^rho (1 + rho)).
        let rho: f64 = 0.6;
        let p = queue_law(rho, 5);
        assert!((p[1] - (1.0 - rho) * rho.exp_m1()).abs() < 1e-15);
        let p2 = (1.0 - rho) * ((2.0 * rho).exp() - rho.exp() * (1.0 + rho));
        assert!((p[2] - p2).abs() < 1e-15, "{} vs {p2}", p[2]);
    }

    #[test]
    fn law_sums_to_one_without_renormalising() {
        for rho in [0.1, 0.5, 0.9, 0.99] {
            let x0 = decay_root(rho, 1);
            let n = state_count(rho, 1, x0, pmf_table(rho).len() + 1).unwrap();
            let total: f64 = queue_law(rho, n).iter().sum();
            assert!((total - 1.0).abs() < 1e-12, "rho {rho}: {total}");
        }
    }
}
