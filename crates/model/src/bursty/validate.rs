//! The formulas against the tandem simulator over a grid of N, L, α and k, for both stacks
//! (the acceptance check of issue 6: errors within the paper's 0.8–24.4 %).

use serde::Serialize;

use super::improve::{tandem_for_stages, StageTimes};
use super::tandem::{simulate_tandem, Dispatch, TandemConfig};
use super::{formulas, predict, BurstyParams, BurstyWorkload, Stack};
use crate::ModelError;

/// One grid point: the JSON names are an interface (`tailscope model bursty --validate`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ValidationRow {
    pub n: u32,
    pub alpha: f64,
    pub payload: f64,
    pub workers: u32,
    /// `"fcfs"` or `"priority"`.
    pub stack: &'static str,
    pub formula_p99_us: f64,
    pub simulated_p99_us: f64,
    /// Formula 15 with the simulation as the measurement.
    pub error_pct: f64,
}

/// The grid and the synthetic server it is run on. The simulated server is the paper's
/// simplified network: a TCP/IP stage (1 worker, deterministic `T = T0 + L·mT`), a worker
/// stage (k workers sharing a queue, deterministic `R = R0 + k·mR`) and a constant delay;
/// every stage FCFS or preemptive priority. The formulas get `M = T + R + constant` (the sum
/// of all service times, formula 1); the `m_ns` fields of the params are ignored.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidationGrid {
    pub ns: Vec<u32>,
    pub payloads: Vec<f64>,
    pub alphas: Vec<f64>,
    pub workers: Vec<u32>,
    /// Service laws of the FCFS server (copying: mT > 0).
    pub fcfs_params: BurstyParams,
    /// Service laws of the prioritised server (zero-copy: mT = 0).
    pub priority_params: BurstyParams,
    pub constant_ns: f64,
    /// U.
    pub spacing_ns: f64,
    /// How the worker stage dispatches (the paper's servers: round robin).
    pub dispatch: Dispatch,
    /// Bursts are simulated until at least this many delay-sensitive requests …
    pub min_sensitive: u64,
    /// … or this many requests in all (whole bursts, at least one).
    pub max_requests: u64,
    pub seed: u64,
}

impl ValidationGrid {
    /// The default grid: N ∈ {1000, 5000, 20000}, L ∈ {16, 512, 1434} B,
    /// α ∈ {0.05, 0.5, 1}, k ∈ {1, 4, 12, 29}, U = 1 µs, on a synthetic server shaped like
    /// the paper's (T0 = 6 µs, mT = 4 ns/B for FCFS; T0 = 4 µs, mT = 0 for LNS; R0 = 45 µs,
    /// mR = 0.5 µs, so k_t = 12 for LNS; constant 10 µs). 216 rows.
    pub fn paper() -> Self {
        Self {
            ns: vec![1000, 5000, 20_000],
            payloads: vec![16.0, 512.0, 1434.0],
            alphas: vec![0.05, 0.5, 1.0],
            workers: vec![1, 4, 12, 29],
            fcfs_params: BurstyParams {
                t0_ns: 6_000.0,
                mt_ns_per_byte: 4.0,
                r0_ns: 45_000.0,
                mr_ns: 500.0,
                m_ns: 0.0,
            },
            priority_params: BurstyParams {
                t0_ns: 4_000.0,
                mt_ns_per_byte: 0.0,
                r0_ns: 45_000.0,
                mr_ns: 500.0,
                m_ns: 0.0,
            },
            constant_ns: 10_000.0,
            spacing_ns: 1_000.0,
            dispatch: Dispatch::RoundRobin,
            min_sensitive: 20_000,
            max_requests: 400_000,
            seed: 1,
        }
    }

    /// A smaller grid for debug-mode tests: N ∈ {1000, 5000}, L ∈ {16, 1434},
    /// α ∈ {0.05, 1}, k ∈ {1, 4, 29} (48 rows), fewer simulated requests.
    pub fn small() -> Self {
        Self {
            ns: vec![1000, 5000],
            payloads: vec![16.0, 1434.0],
            alphas: vec![0.05, 1.0],
            workers: vec![1, 4, 29],
            min_sensitive: 10_000,
            max_requests: 100_000,
            ..Self::paper()
        }
    }
}

/// Runs the grid (N outermost, then L, α, k, stack) and returns one row per point and stack.
pub fn validate_grid(grid: &ValidationGrid) -> Result<Vec<ValidationRow>, ModelError> {
    let mut rows = Vec::new();
    let mut point = 0u64;
    for &n in &grid.ns {
        for &payload in &grid.payloads {
            for &alpha in &grid.alphas {
                for &workers in &grid.workers {
                    for stack in [Stack::Fcfs, Stack::Priority] {
                        point += 1;
                        let w = BurstyWorkload {
                            n,
                            alpha,
                            payload_bytes: payload,
                            workers,
                            spacing_ns: grid.spacing_ns,
                            percentile: 99.0,
                        };
                        rows.push(row(grid, &w, stack, grid.seed.wrapping_add(point))?);
                    }
                }
            }
        }
    }
    Ok(rows)
}

/// The simulated counterpart of a workload: the paper's simplified network with TCP/IP
/// (1 worker, deterministic T from formula 12), k workers (deterministic R from formula 11,
/// dispatched by `dispatch`) and a constant delay, every stage FCFS or preemptive priority as
/// `stack` says, fed `bursts` bursts of N requests U apart. The period is long enough for
/// every burst to drain before the next (`2·(N·max(T, R/k, U) + T + R + constant)`), so the
/// bursts are independent. `params.m_ns` is not used: the simulated M is `T + R + constant`.
/// It is [`tandem_for_stages`] without a dispatcher stage.
pub fn tandem_for(
    params: &BurstyParams,
    w: &BurstyWorkload,
    stack: Stack,
    constant_ns: f64,
    dispatch: Dispatch,
    bursts: u64,
    seed: u64,
) -> TandemConfig {
    let stages = StageTimes {
        tcp_ip_ns: params.t_ns(w.payload_bytes),
        dispatcher_ns: 0.0,
        workers_ns: params.r_ns(w.workers),
        rest_ns: constant_ns,
    };
    tandem_for_stages(&stages, w, stack, dispatch, bursts, seed)
}

fn row(
    grid: &ValidationGrid,
    w: &BurstyWorkload,
    stack: Stack,
    seed: u64,
) -> Result<ValidationRow, ModelError> {
    let base = match stack {
        Stack::Fcfs => grid.fcfs_params,
        Stack::Priority => grid.priority_params,
    };
    let t = base.t_ns(w.payload_bytes);
    let r = base.r_ns(w.workers);
    let params = BurstyParams {
        m_ns: t + r + grid.constant_ns,
        ..base
    };
    let formula = predict(&params, w, stack)?;
    let per_burst = (f64::from(w.n) * w.alpha).max(1.0);
    let by_label = (grid.min_sensitive as f64 / per_burst).ceil() as u64;
    let by_total = grid.max_requests / u64::from(w.n);
    let bursts = by_label.min(by_total).max(1);
    let cfg = tandem_for(
        &base,
        w,
        stack,
        grid.constant_ns,
        grid.dispatch,
        bursts,
        seed,
    );
    let sim = simulate_tandem(&cfg)?;
    let simulated = sim.sensitive_p99_ns.unwrap_or(sim.all_p99_ns);
    Ok(ValidationRow {
        n: w.n,
        alpha: w.alpha,
        payload: w.payload_bytes,
        workers: w.workers,
        stack: stack.name(),
        formula_p99_us: formula.latency_ns / 1e3,
        simulated_p99_us: simulated / 1e3,
        error_pct: formulas::relative_error_pct(simulated, formula.latency_ns),
    })
}
