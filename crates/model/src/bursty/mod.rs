//! The LNS bursty tail-latency model (LNS paper §2.3–2.7): a server as a tandem of a TCP/IP
//! stage (one core, service `T = T0 + L·mT`), k workers (service `R = R0 + k·mR`) and a
//! constant delay, fed bursts of N requests U apart, a share α of them delay-sensitive.
//!
//! - [`formulas`]: formulas 1–16, one function each.
//! - [`predict`]: the p-th percentile latency of the delay-sensitive requests for a
//!   [`BurstyWorkload`] on an FCFS or a fully prioritised [`Stack`].
//! - [`fit`]: the parameters from the basic tests of Table 3.
//! - [`tandem`]: a tandem-stage simulator to check the formulas without any measurement.
//! - [`validate_grid`]: formulas against the simulator over a grid of N, L, α and k.
//! - [`concurrency_rows`]: Fig. 7, the largest burst meeting a latency target at k workers
//!   and at k_t.
//! - [`improve`]: Improvement 2, the prediction with one stage's time cut (TCP/IP, event
//!   dispatcher, workers, the rest of M), M split into the stages' times ([`StageTimes`]).
//!
//! ```
//! use model::bursty::{predict, BurstyParams, BurstyWorkload, Regime, Stack};
//!
//! // A zero-copy prioritised server: T = 4 µs, R = 45 µs + k·0.5 µs, M = 70 µs.
//! let params = BurstyParams {
//!     t0_ns: 4_000.0,
//!     mt_ns_per_byte: 0.0,
//!     r0_ns: 45_000.0,
//!     mr_ns: 500.0,
//!     m_ns: 70_000.0,
//! };
//! // 20 000 requests 1 µs apart, 5 % delay-sensitive, 29 workers.
//! let w = BurstyWorkload {
//!     n: 20_000,
//!     alpha: 0.05,
//!     payload_bytes: 512.0,
//!     workers: 29,
//!     spacing_ns: 1_000.0,
//!     percentile: 99.0,
//! };
//! let p = predict(&params, &w, Stack::Priority)?;
//! assert_eq!(p.regime, Regime::PrioritySteady); // U/α = 20 µs > B/c_B = 4 µs: formula 8
//! assert!((p.latency_ns - (100f64.ln() / 1.6 * 4_000.0 + 70_000.0)).abs() < 1e-6);
//! assert_eq!(params.best_workers(512.0), Some(13)); // k_t = ⌈45/(4 − 0.5)⌉
//! # Ok::<(), model::ModelError>(())
//! ```

mod concurrency;
pub mod fit;
pub mod formulas;
mod improve;
pub mod tandem;
mod validate;

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ModelError;
pub use concurrency::{concurrency_rows, max_burst_within, ConcurrencyRow};
pub use fit::{fit, table3_workloads, BasicTest, FitResult, FitSpec};
pub use formulas::Bottleneck;
pub use improve::{
    improve, tandem_for_stages, Handover, Improvement, ServerStage, StageCut, StageTimes,
};
pub use tandem::{simulate_tandem, Dispatch, Stage, StageDiscipline, TandemConfig, TandemReport};
pub use validate::{tandem_for, validate_grid, ValidationGrid, ValidationRow};

/// The server's parameters (LNS paper Table 1 and formulas 11–12), all in ns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BurstyParams {
    /// T0: fixed TCP/IP-stage time per request.
    pub t0_ns: f64,
    /// mT: TCP/IP-stage time per payload byte (0 for a zero-copy stack such as LNS).
    pub mt_ns_per_byte: f64,
    /// R0: fixed worker time per request.
    pub r0_ns: f64,
    /// mR: extra worker time per worker thread (contention).
    pub mr_ns: f64,
    /// M: the sum of the service times of all stages (formula 1).
    pub m_ns: f64,
}

impl BurstyParams {
    /// T for a payload of `payload_bytes` (formula 12).
    pub fn t_ns(&self, payload_bytes: f64) -> f64 {
        formulas::tcp_service(self.t0_ns, self.mt_ns_per_byte, payload_bytes)
    }

    /// R for `k` workers (formula 11).
    pub fn r_ns(&self, k: u32) -> f64 {
        formulas::worker_service(self.r0_ns, self.mr_ns, k)
    }

    /// The best worker count k_t (formula 16) for a payload of `payload_bytes`.
    pub fn best_workers(&self, payload_bytes: f64) -> Option<u32> {
        formulas::transition_workers(self.r0_ns, self.mr_ns, self.t_ns(payload_bytes))
    }

    fn validate(&self) -> Result<(), ModelError> {
        let fields = [
            ("T0", self.t0_ns),
            ("mT", self.mt_ns_per_byte),
            ("R0", self.r0_ns),
            ("mR", self.mr_ns),
            ("M", self.m_ns),
        ];
        for (name, v) in fields {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ModelError::Invalid {
                    name,
                    reason: "must be a non-negative finite number of ns",
                    value: v.to_string(),
                });
            }
            // Service times, bounded as every service time of the model is.
            if v > crate::MAX_SERVICE_NS {
                return Err(ModelError::Invalid {
                    name,
                    reason: "must be at most 1e6 s",
                    value: format!("{v} ns"),
                });
            }
        }
        Ok(())
    }
}

/// One traffic configuration (LNS paper Table 1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BurstyWorkload {
    /// N: requests per burst.
    pub n: u32,
    /// α: share of delay-sensitive requests, in (0, 1].
    pub alpha: f64,
    /// L: payload length in bytes.
    pub payload_bytes: f64,
    /// k: worker threads.
    pub workers: u32,
    /// U: gap between consecutive requests of a burst, ns.
    pub spacing_ns: f64,
    /// p: the percentile in percent (99 for the p99).
    pub percentile: f64,
}

impl BurstyWorkload {
    /// Checks the workload: N ≥ 1, α ∈ (0, 1], L ≥ 0, k ≥ 1, U > 0, p ∈ (0, 100).
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.n == 0 {
            return Err(ModelError::Invalid {
                name: "N (requests per burst)",
                reason: "must be at least 1",
                value: "0".into(),
            });
        }
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return Err(ModelError::Alpha(self.alpha));
        }
        if !(self.payload_bytes.is_finite() && self.payload_bytes >= 0.0) {
            return Err(ModelError::Invalid {
                name: "payload length L",
                reason: "must be a non-negative number of bytes",
                value: self.payload_bytes.to_string(),
            });
        }
        if self.workers == 0 {
            return Err(ModelError::NoWorkers);
        }
        if !(self.spacing_ns.is_finite() && self.spacing_ns > 0.0) {
            return Err(ModelError::Invalid {
                name: "spacing U",
                reason: "must be a positive finite duration",
                value: format!("{} ns", self.spacing_ns),
            });
        }
        if !(self.percentile > 0.0 && self.percentile < 100.0) {
            return Err(ModelError::Invalid {
                name: "percentile",
                reason: "must be in (0, 100)",
                value: self.percentile.to_string(),
            });
        }
        Ok(())
    }
}

/// How the server orders requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stack {
    /// Every stage first come first served (the paper's mTCP and Linux servers).
    Fcfs,
    /// Every stage serves delay-sensitive requests first, preemptively (the LNS server).
    Priority,
}

impl Stack {
    /// `"fcfs"` or `"priority"`, the names of the validation JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fcfs => "fcfs",
            Self::Priority => "priority",
        }
    }
}

impl FromStr for Stack {
    type Err = ModelError;

    /// `fcfs` (also `fifo`, `mtcp`, `linux`) or `priority` (also `lns`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fcfs" | "fifo" | "mtcp" | "linux" => Ok(Self::Fcfs),
            "priority" | "prio" | "lns" => Ok(Self::Priority),
            _ => Err(ModelError::Invalid {
                name: "stack",
                reason: "must be fcfs or priority",
                value: s.to_string(),
            }),
        }
    }
}

/// Which closed form produced the queueing time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Regime {
    /// Formula 9 (FCFS).
    Fcfs,
    /// Formula 4, case 1 of the prioritised server (`U/α ≤ B/c_B`).
    PriorityBacklog,
    /// Formula 7, case 2 of the prioritised server (`U/α > B/c_B`).
    PrioritySteady,
}

/// What [`predict`] says about one workload.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Prediction {
    /// W_p, the predicted p-th percentile latency (formula 5, 8 or 10).
    pub latency_ns: f64,
    /// w_p, the bottleneck's p-th percentile queueing time (formula 4, 7 or 9).
    pub wait_ns: f64,
    /// M.
    pub m_ns: f64,
    /// T (formula 12) and R (formula 11).
    pub t_ns: f64,
    pub r_ns: f64,
    pub bottleneck: Bottleneck,
    /// B and c_B.
    pub b_ns: f64,
    pub c_b: u32,
    pub regime: Regime,
    /// The delay-sensitive utilisation ρ of formula 7 (case 2 only).
    pub rho: Option<f64>,
    /// The upper end of formula 2's bound on W_p.
    pub upper_bound_ns: f64,
}

/// The model's prediction for `workload` on `stack` (formulas 1, 2, 4–12).
///
/// Choices where the paper leaves room: the FCFS formula is used for all requests and for the
/// delay-sensitive ones alike (labels do not change FCFS order); the case boundary
/// `U/α = B/c_B` belongs to case 1 (as in the paper); formula 9's negative values (U ≥ B/c_B,
/// outside the paper's assumption) are clamped to 0; formula 2's `max_{S_i≠B}` ranges over
/// the two queueing stages (TCP/IP and workers), not the constant stage.
pub fn predict(
    params: &BurstyParams,
    workload: &BurstyWorkload,
    stack: Stack,
) -> Result<Prediction, ModelError> {
    params.validate()?;
    workload.validate()?;
    let w = workload;
    let t = params.t_ns(w.payload_bytes);
    let r = params.r_ns(w.workers);
    if !(t > 0.0 && r > 0.0) {
        return Err(ModelError::Invalid {
            name: "service times T and R",
            reason: "must be positive",
            value: format!("T = {t} ns, R = {r} ns"),
        });
    }
    // Each within bound, T0 + L·mT or R0 + k·mR can still exceed it.
    if t > crate::MAX_SERVICE_NS || r > crate::MAX_SERVICE_NS {
        return Err(ModelError::Invalid {
            name: "service times T = T0 + L·mT and R = R0 + k·mR",
            reason: "must be at most 1e6 s",
            value: format!("T = {t} ns, R = {r} ns"),
        });
    }
    Ok(predict_services(t, r, params.m_ns, w, stack))
}

/// Formulas 1, 2 and 4–10 for a checked workload, given the first stage's service time `t`
/// (T, or the event dispatcher's when it is the larger), the worker stage's `r` and M. One
/// of `t` and `r` must be positive (the bottleneck's B).
pub(crate) fn predict_services(
    t: f64,
    r: f64,
    m_ns: f64,
    w: &BurstyWorkload,
    stack: Stack,
) -> Prediction {
    let (bottleneck, b, c_b) = formulas::bottleneck(t, r, w.workers);
    let (regime, wait, rho) = match stack {
        Stack::Fcfs => (
            Regime::Fcfs,
            formulas::fcfs_wait(w.percentile, w.n, b, c_b, w.spacing_ns),
            None,
        ),
        Stack::Priority if w.spacing_ns / w.alpha <= b / f64::from(c_b) => (
            Regime::PriorityBacklog,
            formulas::priority_backlog_wait(w.percentile, w.n, w.alpha, b, c_b, w.spacing_ns),
            None,
        ),
        Stack::Priority => (
            Regime::PrioritySteady,
            formulas::priority_steady_wait(w.percentile, w.alpha, w.spacing_ns, b, c_b),
            Some(formulas::priority_utilisation(
                w.alpha,
                w.spacing_ns,
                b,
                c_b,
            )),
        ),
    };
    let other = match bottleneck {
        Bottleneck::Tcp => r,
        Bottleneck::Redis => t,
    };
    let (_, upper) = formulas::decomposition_bound(wait, m_ns, c_b, other);
    Prediction {
        latency_ns: formulas::decomposition(wait, m_ns),
        wait_ns: wait,
        m_ns,
        t_ns: t,
        r_ns: r,
        bottleneck,
        b_ns: b,
        c_b,
        regime,
        rho,
        upper_bound_ns: upper,
    }
}
