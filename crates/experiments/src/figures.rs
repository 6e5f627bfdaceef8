//! Tales of the Tail §2, Figures 1–4, re-derived from the model: the curves each figure
//! compares (simulated, with the exact distribution where theory has one: M/D/1, M/D/c,
//! D/D/1) and the paper's quantitative statements about them, checked against the exact value
//! and the simulation. `tailscope model figure N` prints them.

use model::analytic::{self, ArrivalKind, Query, ServiceKind};
use model::{ArrivalSpec, Discipline, ServiceSpec, SimConfig};

use crate::simulate::SimResult;
use measurement::error::{invalid, LabError};

/// The service time of every figure (the paper's 50 µs).
pub const SERVICE_NS: f64 = 50_000.0;
/// Parameters the paper does not give for Figure 1's lognormal and Pareto inter-arrival times;
/// ours, stated in the output. α = 1.5 (infinite variance) reproduces the paper's ordering, in
/// which Pareto arrivals have the heaviest tail; with α > 2 Pareto gaps are smoother than Poisson.
pub const LOGNORMAL_SIGMA: f64 = 1.0;
pub const PARETO_SHAPE: f64 = 1.5;

/// One curve of a figure.
pub struct Curve {
    pub label: String,
    pub cfg: SimConfig,
    /// Exact response-time quantiles (key, seconds) when theory has them.
    pub exact: Option<Vec<(String, f64, f64)>>,
}

/// One of the paper's statements about a figure (serialised as `model figure --json` prints
/// it, the statement as `claim`).
#[derive(serde::Serialize)]
pub struct Claim {
    #[serde(rename = "claim")]
    pub text: &'static str,
    pub paper: f64,
    pub exact: Option<f64>,
    pub simulated: f64,
    pub unit: &'static str,
    /// Relative tolerance for agreement: the paper's "about N×" statements are rounded, its
    /// stated values in µs are not.
    pub tolerance: f64,
}

fn base(
    arrival: ArrivalSpec,
    workers: u32,
    load: f64,
    d: Discipline,
    n: u64,
    seed: u64,
) -> Result<SimConfig, LabError> {
    let service = ServiceSpec::Deterministic {
        mean_ns: SERVICE_NS,
    };
    let rate = SimConfig::rate_for_load(load, workers, &service).map_err(invalid)?;
    Ok(SimConfig {
        arrival,
        rate_per_s: Some(rate),
        service,
        workers,
        discipline: d,
        class_probs: Vec::new(),
        connections: None,
        requests: n,
        warmup_fraction: 0.01,
        seed,
    })
}

/// Exact FIFO response-time quantiles for Poisson or deterministic arrivals and deterministic
/// service, from the closed forms.
fn exact_fifo(arrival: ArrivalKind, workers: u32, load: f64) -> Option<Vec<(String, f64, f64)>> {
    let mean = SERVICE_NS / 1e9;
    let q = Query {
        lambda: load * f64::from(workers) / mean,
        mean_service_s: mean,
        workers,
        arrival,
        service: ServiceKind::Deterministic,
        class_probs: Vec::new(),
        preemptive: false,
    };
    analytic::closed_forms(&q)
        .ok()?
        .into_iter()
        .find(|f| f.exact && !f.response_quantiles.is_empty())
        .map(|f| f.response_quantiles)
}

/// Figure `number`'s title and curves, `n` requests each (seed `s`); figure 1 adds a curve
/// for `trace` (an `ArrivalSpec::Trace`) when given, labelled `trace_label`.
pub fn curves(
    number: u32,
    n: u64,
    s: u64,
    trace: Option<(ArrivalSpec, String)>,
) -> Result<(String, Vec<Curve>), LabError> {
    let mut v = Vec::new();
    let title;
    match number {
        1 => {
            title = "Figure 1: arrival processes (1 worker, 50 µs service, 70% load)".to_string();
            let arrivals: Vec<(String, ArrivalSpec, Option<ArrivalKind>)> = vec![
                (
                    "uniform".into(),
                    ArrivalSpec::Deterministic,
                    Some(ArrivalKind::Deterministic),
                ),
                (
                    "Poisson".into(),
                    ArrivalSpec::Poisson,
                    Some(ArrivalKind::Poisson),
                ),
                (
                    format!("lognormal σ={LOGNORMAL_SIGMA}"),
                    ArrivalSpec::Lognormal {
                        sigma: LOGNORMAL_SIGMA,
                    },
                    None,
                ),
                (
                    format!("Pareto α={PARETO_SHAPE}"),
                    ArrivalSpec::Pareto {
                        shape: PARETO_SHAPE,
                    },
                    None,
                ),
            ];
            for (label, arr, kind) in arrivals {
                v.push(Curve {
                    label,
                    cfg: base(arr, 1, 0.7, Discipline::Fifo, n, s)?,
                    exact: kind.and_then(|k| exact_fifo(k, 1, 0.7)),
                });
            }
            if let Some((arr, label)) = trace {
                let mut cfg = base(arr, 1, 0.7, Discipline::Fifo, n, s)?;
                if let ArrivalSpec::Trace(t) = &cfg.arrival {
                    cfg.requests = cfg.requests.min(t.times_ns.len() as u64);
                }
                cfg.validate().map_err(invalid)?;
                v.push(Curve {
                    label: format!("trace {label}"),
                    cfg,
                    exact: None,
                });
            }
        }
        2 => {
            title = "Figure 2: utilisation (Poisson, 1 worker, 50 µs service)".to_string();
            for load in [0.5, 0.6, 0.7, 0.8, 0.9, 0.95] {
                v.push(Curve {
                    label: format!("{:.0}% load", load * 100.0),
                    cfg: base(ArrivalSpec::Poisson, 1, load, Discipline::Fifo, n, s)?,
                    exact: exact_fifo(ArrivalKind::Poisson, 1, load),
                });
            }
        }
        3 => {
            title = "Figure 3: workers sharing one queue (Poisson, 50 µs service, 70% load)"
                .to_string();
            for c in [1u32, 2, 4, 8] {
                v.push(Curve {
                    label: format!("{c} worker{}", if c > 1 { "s" } else { "" }),
                    cfg: base(ArrivalSpec::Poisson, c, 0.7, Discipline::Fifo, n, s)?,
                    exact: exact_fifo(ArrivalKind::Poisson, c, 0.7),
                });
            }
            v.push(Curve {
                label: "8 workers, separate queues".into(),
                cfg: base(ArrivalSpec::Poisson, 8, 0.7, Discipline::RandomWorker, n, s)?,
                exact: None,
            });
        }
        4 => {
            title = "Figure 4: queueing disciplines (Poisson, 4 workers, 50 µs service, 80% load)"
                .to_string();
            for (label, d) in [
                ("FIFO", Discipline::Fifo),
                ("LIFO", Discipline::Lifo),
                ("random worker", Discipline::RandomWorker),
                ("random request", Discipline::Random),
            ] {
                let exact = matches!(d, Discipline::Fifo)
                    .then(|| exact_fifo(ArrivalKind::Poisson, 4, 0.8))
                    .flatten();
                v.push(Curve {
                    label: label.into(),
                    cfg: base(ArrivalSpec::Poisson, 4, 0.8, d, n, s)?,
                    exact,
                });
            }
        }
        k => return Err(invalid(format!("figure must be 1, 2, 3 or 4, got {k}"))),
    }
    Ok((title, v))
}

/// A simulated response-time quantile, ns.
pub fn q(r: &SimResult, key: &str) -> f64 {
    r.response.get(key).map(|e| e.value).unwrap_or(f64::NAN)
}

/// An exact response-time quantile, ns.
pub fn exact_q(c: &Curve, key: &str) -> Option<f64> {
    c.exact
        .as_ref()?
        .iter()
        .find(|(k, _, _)| k == key)
        .map(|(_, _, sec)| sec * 1e9)
}

/// The paper's statements about figure `fig`, with the exact and simulated values.
pub fn claims(fig: u32, cs: &[Curve], rs: &[SimResult]) -> Vec<Claim> {
    let us = |ns: f64| ns / 1e3;
    let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b?);
    match fig {
        2 => vec![Claim {
            text: "p99 grows about 10x from 50% to 95% utilisation",
            paper: 10.0,
            exact: ratio(exact_q(&cs[5], "p99"), exact_q(&cs[0], "p99")),
            simulated: q(&rs[5], "p99") / q(&rs[0], "p99"),
            unit: "x",
            tolerance: 0.15,
        }],
        3 => vec![
            Claim {
                text: "p99 drops about 4x with 8 workers instead of 1 (shared queue)",
                paper: 4.0,
                exact: ratio(exact_q(&cs[0], "p99"), exact_q(&cs[3], "p99")),
                simulated: q(&rs[0], "p99") / q(&rs[3], "p99"),
                unit: "x",
                tolerance: 0.15,
            },
            Claim {
                text: "with separate per-worker queues p99 is the same as 1 worker (ratio 1)",
                paper: 1.0,
                exact: None,
                simulated: q(&rs[0], "p99") / q(&rs[4], "p99"),
                unit: "x",
                tolerance: 0.15,
            },
        ],
        4 => vec![
            Claim {
                text: "FIFO median response is 64 µs",
                paper: 64.0,
                exact: exact_q(&cs[0], "p50").map(us),
                simulated: us(q(&rs[0], "p50")),
                unit: "µs",
                tolerance: 0.05,
            },
            Claim {
                text: "LIFO median response is 50 µs",
                paper: 50.0,
                exact: None,
                simulated: us(q(&rs[1], "p50")),
                unit: "µs",
                tolerance: 0.05,
            },
        ],
        _ => Vec::new(),
    }
}

/// Paper and exact agree when within the claim's tolerance.
pub fn agrees(c: &Claim, exact: f64) -> bool {
    (exact / c.paper - 1.0).abs() <= c.tolerance
}
