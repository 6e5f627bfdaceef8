//! Erlang B and Erlang C, by the forward recurrence on the number of servers.
//!
//! The recurrence `B(k) = a B(k-1) / (k + a B(k-1))` only adds and divides positive numbers,
//! so it neither overflows (unlike `a^c / c!`) nor cancels.

use super::{positive, stable, AnalyticError};

/// Erlang B: the blocking probability of an M/M/c/c loss system with offered load
/// `offered_load_a` = arrival rate x mean service time (in Erlangs).
pub fn erlang_b(c: u32, offered_load_a: f64) -> Result<f64, AnalyticError> {
    if c == 0 {
        return Err(AnalyticError::NoWorkers);
    }
    let a = positive("offered load", offered_load_a)?;
    let mut b = 1.0;
    for k in 1..=c {
        b = a * b / (f64::from(k) + a * b);
    }
    Ok(b)
}

/// Erlang C: the probability that an arrival to an M/M/c queue has to wait, for offered load
/// `offered_load_a` = arrival rate x mean service time; requires `offered_load_a < c`.
///
/// Computed from Erlang B as `C = B / (1 - rho (1 - B))` with `rho = a / c`.
pub fn erlang_c(c: u32, offered_load_a: f64) -> Result<f64, AnalyticError> {
    let b = erlang_b(c, offered_load_a)?;
    let rho = stable(offered_load_a / f64::from(c))?;
    Ok(b / (1.0 - rho * (1.0 - b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_c_single_server_is_rho() {
        for rho in [0.1, 0.5, 0.9, 0.999] {
            let c = erlang_c(1, rho).unwrap();
            assert!((c - rho).abs() < 1e-15, "{c} vs {rho}");
        }
    }

    #[test]
    fn erlang_b_small_cases_by_hand() {
        // B(1, a) = a / (1 + a); B(2, a) = (a^2/2) / (1 + a + a^2/2).
        let a: f64 = 1.7;
        assert!((erlang_b(1, a).unwrap() - a / (1.0 + a)).abs() < 1e-15);
        let b2 = (a * a / 2.0) / (1.0 + a + a * a / 2.0);
        assert!((erlang_b(2, a).unwrap() - b2).abs() < 1e-15);
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(erlang_c(0, 0.5), Err(AnalyticError::NoWorkers));
        assert!(erlang_c(2, 2.0).is_err());
        assert!(erlang_c(2, f64::NAN).is_err());
        assert!(erlang_c(2, -1.0).is_err());
    }
}
