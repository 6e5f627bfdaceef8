//! LNS paper §3.2, Improvement 2: which stage of the server is worth optimising. For each
//! stage (TCP/IP, event dispatcher, worker threads, and the rest of M) the p-th percentile is
//! predicted again with that stage's service time cut by a fraction (1 = the stage removed,
//! the paper's "maximally"), everything else held.
//!
//! The model needs M as a sum for this (formula 1: M is the sum of the service times of all
//! stages). [`StageTimes`] makes it one: `M = T + D + R + rest`, with T (formula 12) and R
//! (formula 11) from the laws, D the event dispatcher's per-request time (a parameter the
//! paper measures by instrumentation and does not publish) and the rest (the NIC, the send
//! path, the LNS server's interference between labels: constant delays) what the given M
//! leaves. Stage 1 of the simplified network is the larger of TCP/IP and the dispatcher, the
//! smaller being a constant delay (§2.2); so a cut of T below D makes the dispatcher the first
//! stage, and a cut of the bottleneck below the next stage's time per node hands the
//! bottleneck over (Definition 2.1): the next stage bounds the gain.

use serde::Serialize;

use super::tandem::{Dispatch, Stage, StageDiscipline, TandemConfig};
use super::{formulas, predict, predict_services, BurstyParams, BurstyWorkload, Prediction, Stack};
use crate::arrival::ArrivalSpec;
use crate::ModelError;

/// A stage of the modeled server (LNS paper Fig. 2 and Fig. 3a), the same for the LNS, mTCP
/// and Linux servers (they differ in their service times and in the order they serve).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerStage {
    /// The network stack, receive and send, on one core: T = T0 + L·mT.
    TcpIp,
    /// The event dispatcher, on one core, handing requests to the workers in turn: D.
    Dispatcher,
    /// The k worker threads querying the database: R = R0 + k·mR each.
    Workers,
    /// The rest of M: constant delays (the NIC, the response's way out, the LNS server's
    /// interference between labels), which never queue.
    Rest,
}

impl ServerStage {
    /// Every stage, in the order a request meets them.
    pub const ALL: [ServerStage; 4] = [Self::TcpIp, Self::Dispatcher, Self::Workers, Self::Rest];

    /// The stage's name for a person.
    pub fn label(self) -> &'static str {
        match self {
            Self::TcpIp => "TCP/IP",
            Self::Dispatcher => "event dispatcher",
            Self::Workers => "worker threads",
            Self::Rest => "rest of M",
        }
    }
}

/// The per-request service time of each stage, ns; formula 1's M is their sum.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StageTimes {
    /// T (formula 12).
    pub tcp_ip_ns: f64,
    /// D.
    pub dispatcher_ns: f64,
    /// R (formula 11).
    pub workers_ns: f64,
    /// M − T − D − R.
    pub rest_ns: f64,
}

/// The relative slack allowed when M is compared with T + D + R (M given as the exact sum
/// may come back a rounding below it).
const SUM_SLACK: f64 = 1e-12;

impl StageTimes {
    /// The stages of `params` for `workload` with a dispatcher time `dispatcher_ns`; the rest
    /// is what `params.m_ns` leaves. Errors: a bad parameter or workload (as [`predict`]), a
    /// dispatcher time that is not a non-negative finite number of ns, M below T + D + R.
    pub fn split(
        params: &BurstyParams,
        dispatcher_ns: f64,
        workload: &BurstyWorkload,
    ) -> Result<StageTimes, ModelError> {
        if !(dispatcher_ns.is_finite() && (0.0..=crate::MAX_SERVICE_NS).contains(&dispatcher_ns)) {
            return Err(ModelError::Invalid {
                name: "event dispatcher time D",
                reason: "must be a non-negative number of ns, at most 1e6 s",
                value: format!("{dispatcher_ns} ns"),
            });
        }
        // Checks the parameters and the workload, and that T and R are positive.
        predict(params, workload, Stack::Fcfs)?;
        let t = params.t_ns(workload.payload_bytes);
        let r = params.r_ns(workload.workers);
        let stages = t + dispatcher_ns + r;
        let rest = params.m_ns - stages;
        if rest < -SUM_SLACK * stages {
            return Err(ModelError::Invalid {
                name: "M",
                reason: "must be at least T + D + R, since formula 1's M is the sum of every stage's service time",
                value: format!(
                    "M = {} ns < T + D + R = {t} + {dispatcher_ns} + {r} ns",
                    params.m_ns
                ),
            });
        }
        Ok(StageTimes {
            tcp_ip_ns: t,
            dispatcher_ns,
            workers_ns: r,
            rest_ns: rest.max(0.0),
        })
    }

    /// M, the sum of the four.
    pub fn m_ns(&self) -> f64 {
        self.tcp_ip_ns + self.dispatcher_ns + self.workers_ns + self.rest_ns
    }

    /// One stage's service time.
    pub fn get(&self, stage: ServerStage) -> f64 {
        match stage {
            ServerStage::TcpIp => self.tcp_ip_ns,
            ServerStage::Dispatcher => self.dispatcher_ns,
            ServerStage::Workers => self.workers_ns,
            ServerStage::Rest => self.rest_ns,
        }
    }

    /// The same stages with `stage`'s time set to `ns`.
    pub fn with(&self, stage: ServerStage, ns: f64) -> StageTimes {
        let mut s = *self;
        match stage {
            ServerStage::TcpIp => s.tcp_ip_ns = ns,
            ServerStage::Dispatcher => s.dispatcher_ns = ns,
            ServerStage::Workers => s.workers_ns = ns,
            ServerStage::Rest => s.rest_ns = ns,
        }
        s
    }

    /// Stage 1 of the simplified network (§2.2): the larger of TCP/IP and the dispatcher (a
    /// tie: TCP/IP), and its service time.
    pub fn first_stage(&self) -> (ServerStage, f64) {
        if self.dispatcher_ns > self.tcp_ip_ns {
            (ServerStage::Dispatcher, self.dispatcher_ns)
        } else {
            (ServerStage::TcpIp, self.tcp_ip_ns)
        }
    }

    /// The bottleneck (Definition 2.1 over stage 1 and the workers; a tie goes to the
    /// workers) and its time per node, B/c_B.
    pub fn bottleneck(&self, workers: u32) -> (ServerStage, f64) {
        let (first, s1) = self.first_stage();
        let k = f64::from(workers.max(1));
        match formulas::bottleneck(s1, self.workers_ns, workers) {
            (formulas::Bottleneck::Tcp, b, _) => (first, b),
            (formulas::Bottleneck::Redis, r, _) => (ServerStage::Workers, r / k),
        }
    }

    /// Formulas 1–10 for these stages: stage 1's time as B when it is the bottleneck, M as
    /// the sum. The workload must have passed [`predict`]'s checks.
    pub fn predict(&self, workload: &BurstyWorkload, stack: Stack) -> Prediction {
        let (_, s1) = self.first_stage();
        predict_services(s1, self.workers_ns, self.m_ns(), workload, stack)
    }

    /// When `stage` is the bottleneck: the fraction of its time whose cut makes another
    /// stage the bottleneck (Definition 2.1), that stage, and its time per node (which the
    /// cut stage's time per node cannot usefully go below). `None` for a stage that is not
    /// the bottleneck.
    pub fn handover(&self, stage: ServerStage, workers: u32) -> Option<Handover> {
        let (bottleneck, per_node) = self.bottleneck(workers);
        if stage != bottleneck || per_node <= 0.0 {
            return None;
        }
        let k = f64::from(workers.max(1));
        let (to, next) = match stage {
            ServerStage::TcpIp | ServerStage::Dispatcher => {
                let other = if stage == ServerStage::TcpIp {
                    (ServerStage::Dispatcher, self.dispatcher_ns)
                } else {
                    (ServerStage::TcpIp, self.tcp_ip_ns)
                };
                // A tie between stage 1 and R/k goes to the workers.
                let workers = (ServerStage::Workers, self.workers_ns / k);
                if other.1 > workers.1 {
                    other
                } else {
                    workers
                }
            }
            ServerStage::Workers => self.first_stage(),
            ServerStage::Rest => return None,
        };
        Some(Handover {
            to,
            at_fraction: (1.0 - next / per_node).clamp(0.0, 1.0),
            next_per_node_ns: next,
        })
    }
}

/// Where a cut of the bottleneck stops paying: beyond `at_fraction` of its time, `to` is
/// the bottleneck, with `next_per_node_ns` per node.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Handover {
    pub to: ServerStage,
    pub at_fraction: f64,
    pub next_per_node_ns: f64,
}

/// One stage optimised.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StageCut {
    pub stage: ServerStage,
    /// The stage's service time before and after the cut, ns.
    pub before_ns: f64,
    pub after_ns: f64,
    /// The prediction with the cut.
    pub prediction: Prediction,
    /// The bottleneck with the cut.
    pub bottleneck: ServerStage,
    /// `(W_before − W_after)/W_before × 100`.
    pub reduction_pct: f64,
    /// For the bottleneck stage: where the cut hands the bottleneck over.
    pub handover: Option<Handover>,
}

/// Improvement 2 for one workload: the baseline and each stage cut by `fraction`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Improvement {
    /// The share of each stage's time removed, in (0, 1].
    pub fraction: f64,
    pub stages: StageTimes,
    pub baseline: Prediction,
    pub baseline_bottleneck: ServerStage,
    pub cuts: Vec<StageCut>,
}

impl Improvement {
    /// The cut of one stage.
    pub fn cut(&self, stage: ServerStage) -> Option<&StageCut> {
        self.cuts.iter().find(|c| c.stage == stage)
    }
}

/// Improvement 2: the prediction for `workload` on `stack` with each stage's time cut by
/// `fraction` (in (0, 1]; 1 removes the stage), M split by [`StageTimes::split`] with the
/// dispatcher time `dispatcher_ns`.
pub fn improve(
    params: &BurstyParams,
    dispatcher_ns: f64,
    workload: &BurstyWorkload,
    stack: Stack,
    fraction: f64,
) -> Result<Improvement, ModelError> {
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(ModelError::Invalid {
            name: "the cut of a stage's time",
            reason: "must be in (0, 1] (0 %, 100 %]",
            value: fraction.to_string(),
        });
    }
    let stages = StageTimes::split(params, dispatcher_ns, workload)?;
    let baseline = stages.predict(workload, stack);
    let (baseline_bottleneck, _) = stages.bottleneck(workload.workers);
    let cuts = ServerStage::ALL
        .iter()
        .map(|&stage| {
            let before_ns = stages.get(stage);
            let after_ns = before_ns * (1.0 - fraction);
            let cut = stages.with(stage, after_ns);
            let prediction = cut.predict(workload, stack);
            StageCut {
                stage,
                before_ns,
                after_ns,
                prediction,
                bottleneck: cut.bottleneck(workload.workers).0,
                reduction_pct: (baseline.latency_ns - prediction.latency_ns) / baseline.latency_ns
                    * 100.0,
                handover: stages.handover(stage, workload.workers),
            }
        })
        .collect();
    Ok(Improvement {
        fraction,
        stages,
        baseline,
        baseline_bottleneck,
        cuts,
    })
}

/// The simulated counterpart of `stages` (the paper's queueing network of Fig. 3a without its
/// loops): TCP/IP (one worker, T), the event dispatcher (one worker, D) and the k workers (R
/// each, dispatched by `dispatch`) in series, then the rest of M as a constant delay; every
/// stage FCFS or preemptive priority as `stack` says. A stage whose time is 0 (removed) is
/// left out. Bursts of N requests U apart, far enough apart to drain
/// (`2·(N·max(T, D, R/k, U) + M)`).
pub fn tandem_for_stages(
    stages: &StageTimes,
    w: &BurstyWorkload,
    stack: Stack,
    dispatch: Dispatch,
    bursts: u64,
    seed: u64,
) -> TandemConfig {
    let disc = match stack {
        Stack::Fcfs => StageDiscipline::Fcfs,
        Stack::Priority => StageDiscipline::PriorityPreemptive,
    };
    let k = w.workers.max(1);
    let per_node = stages
        .tcp_ip_ns
        .max(stages.dispatcher_ns)
        .max(stages.workers_ns / f64::from(k))
        .max(w.spacing_ns);
    let period = 2.0 * (f64::from(w.n) * per_node + stages.m_ns());
    let mut list = Vec::new();
    if stages.tcp_ip_ns > 0.0 {
        list.push(Stage::deterministic(1, stages.tcp_ip_ns, disc));
    }
    if stages.dispatcher_ns > 0.0 {
        list.push(Stage::deterministic(1, stages.dispatcher_ns, disc));
    }
    if stages.workers_ns > 0.0 {
        list.push(Stage::deterministic(k, stages.workers_ns, disc).with_dispatch(dispatch));
    }
    TandemConfig {
        stages: list,
        constant_delay_ns: stages.rest_ns,
        arrival: ArrivalSpec::Bursty {
            n: w.n,
            period_ns: period,
            spacing_ns: w.spacing_ns,
        },
        rate_per_s: None,
        alpha: w.alpha,
        requests: bursts.max(1).saturating_mul(u64::from(w.n)),
        seed,
        entropy_bin_ns: None,
    }
}
