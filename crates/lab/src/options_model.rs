//! The options of `model` and `model bursty` (clap structs, as in [`crate::options`]) and
//! their one conversion into the plans `model_query` and `bursty` compute.

use std::path::PathBuf;

use clap::Args;
use model::bursty::{BurstyParams, BurstyWorkload, Stack};
use model::query::{ModelPlan, ModelQuery};

use experiments::bursty::BurstyPlan;
use experiments::model_query::{read_arrival, read_service};
use measurement::error::{invalid, LabError};

/// `model`'s options: an A/S/c queue and how to simulate it.
#[derive(Args, Debug, Clone)]
pub struct ModelOptions {
    /// Arrival process: poisson, det (the paper's "uniform"), lognormal:SIGMA, pareto:SHAPE,
    /// gpareto:SHAPE (generalized Pareto), etc (Facebook ETC's gaps), trace:PATH (one
    /// timestamp per line; see --trace-unit).
    #[arg(long, default_value = "poisson")]
    pub arrival: String,
    /// Unit of the timestamps in a trace file: ns or us.
    #[arg(long, default_value = "ns", value_name = "ns|us")]
    pub trace_unit: model::TimeUnit,
    /// Service time: det:50us, exp:50us, lognormal:50us,1.0 (mean, sigma), pareto:50us,2.5
    /// (mean, shape), empirical:PATH (one duration per line, e.g. 48us).
    #[arg(long, default_value = "det:50us")]
    pub service: String,
    /// Number of workers (c).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub workers: u32,
    /// Utilisation per worker, in (0, 1); the arrival rate is load * workers / E[S].
    #[arg(long, conflicts_with = "rate", allow_negative_numbers = true)]
    pub load: Option<f64>,
    /// Arrival rate in requests per second (instead of --load).
    #[arg(long, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Queueing discipline: fifo, lifo, random, random-worker, round-robin, priority,
    /// priority-preemptive.
    #[arg(long, default_value = "fifo")]
    pub discipline: String,
    /// Priority class probabilities, highest priority first (e.g. 0.2,0.8).
    #[arg(long, value_name = "P0,P1,..", allow_hyphen_values = true)]
    pub classes: Option<String>,
    /// Connections for round-robin static partitioning (default: one per worker).
    #[arg(long, allow_negative_numbers = true)]
    pub connections: Option<u32>,
    /// Requests to simulate (e.g. 10M, 1e9). Default 1M.
    #[arg(long, default_value = "1M", allow_hyphen_values = true)]
    pub requests: String,
    /// Fraction of the first requests excluded as warm-up.
    #[arg(long, default_value_t = 0.01, allow_negative_numbers = true)]
    pub warmup: f64,
    /// Seed of every random stream; the same seed gives the same result.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: u64,
    /// Independent replications (seeds seed..seed+R). With R >= 2 the confidence intervals come
    /// from the spread between replications, which is honest for autocorrelated samples.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub replications: u32,
    /// Keep every response time (exact quantiles) up to this many requests; above, a streaming
    /// HdrHistogram (3 significant digits) keeps memory bounded.
    #[arg(long, default_value = "20M", allow_hyphen_values = true)]
    pub exact_limit: String,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    pub confidence: f64,
}

/// `model bursty`'s options: the LNS model's parameters and workload, and what to do with
/// them.
#[derive(Args, Debug, Clone)]
pub struct BurstyOptions {
    /// T0: fixed network-stack time per request.
    #[arg(long, default_value = "4us", allow_hyphen_values = true)]
    pub t0: measurement::ServiceTime,
    /// mT: network-stack time per payload byte (e.g. 4ns; 0ns for a zero-copy stack).
    #[arg(long, default_value = "0ns", allow_hyphen_values = true)]
    pub mt: measurement::ServiceTime,
    /// R0: fixed worker time per request.
    #[arg(long, default_value = "45us", allow_hyphen_values = true)]
    pub r0: measurement::ServiceTime,
    /// mR: worker time per worker thread (contention), R = R0 + k·mR.
    #[arg(long, default_value = "500ns", allow_hyphen_values = true)]
    pub mr: measurement::ServiceTime,
    /// M: the constant part of the latency, the sum of every stage's service time (formula 1;
    /// --improve splits it as T + D + R + the rest).
    #[arg(long, default_value = "70us", allow_hyphen_values = true)]
    pub m: measurement::ServiceTime,
    /// N: requests per burst.
    #[arg(long, default_value_t = 1000, allow_negative_numbers = true)]
    pub n: u32,
    /// α: share of delay-sensitive requests, in (0, 1].
    #[arg(long, default_value_t = 0.05, allow_negative_numbers = true)]
    pub alpha: f64,
    /// L: payload length in bytes.
    #[arg(long, default_value_t = 512.0, allow_negative_numbers = true)]
    pub payload: f64,
    /// k: worker threads.
    #[arg(long, default_value_t = 29, allow_negative_numbers = true)]
    pub workers: u32,
    /// U: spacing between the requests of a burst.
    #[arg(long, default_value = "1us", allow_hyphen_values = true)]
    pub spacing: measurement::ServiceTime,
    /// The percentile to predict, in percent.
    #[arg(long, default_value_t = 99.0, allow_negative_numbers = true)]
    pub percentile: f64,
    /// fcfs or priority (the prioritised, LNS-like stack).
    #[arg(long, default_value = "priority")]
    pub stack: Stack,
    /// Also simulate the tandem of stages and print formula 15's relative error.
    #[arg(long)]
    pub simulate: bool,
    /// Bursts to simulate with --simulate.
    #[arg(long, default_value_t = 200, allow_negative_numbers = true)]
    pub bursts: u64,
    /// Bin width of the latency entropy (formulas 13-14) in --simulate.
    #[arg(long, allow_hyphen_values = true)]
    pub entropy_bin: Option<measurement::ServiceTime>,
    /// LNS Fig. 7: for each share in --alphas, the largest burst N whose predicted latency
    /// stays within this target (the paper: 50ms), at --workers and at k_t (formula 16).
    #[arg(long, value_name = "TARGET")]
    pub concurrency: Option<measurement::DurationArg>,
    /// With --concurrency: the shares α of delay-sensitive requests.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.05,0.1,0.2,0.5,1",
        allow_negative_numbers = true
    )]
    pub alphas: Vec<f64>,
    /// LNS Figs. 5–6: the prediction (and with --simulate the simulation and its entropy)
    /// at each value of one factor, the others as given: n=1k,5k,20k, payload=…, alpha=…,
    /// workers=….
    #[arg(long, value_name = "KEY=V1,V2,..", conflicts_with = "concurrency")]
    pub sweep: Option<experiments::bursty::Sweep>,
    /// LNS §3.2, Improvement 2: the predicted percentile with each stage's time (TCP/IP,
    /// event dispatcher, worker threads, the rest of M) cut by --by, everything else held;
    /// the reduction per stage and the bottleneck before and after. M is split as
    /// T + D + R + the rest, so --m must be at least T + D + R. With --simulate, each cut is
    /// simulated too.
    #[arg(long, conflicts_with_all = ["concurrency", "sweep", "validate", "fit"])]
    pub improve: bool,
    /// With --improve: the share of a stage's time removed, 50% or 0.5 (100%: the stage
    /// removed, the paper's "maximally").
    #[arg(
        long,
        value_name = "SHARE",
        requires = "improve",
        allow_hyphen_values = true
    )]
    pub by: Option<measurement::Cut>,
    /// With --improve: D, the event dispatcher's time per request [default: 1us, an
    /// illustrative value: the LNS paper does not publish its measured one].
    #[arg(long, requires = "improve", allow_hyphen_values = true)]
    pub dispatcher: Option<measurement::ServiceTime>,
    /// Formulas against tandem simulation over a grid of N, L, α and k, both stacks.
    #[arg(long)]
    pub validate: bool,
    /// With --validate: the small grid (48 rows) instead of the full one (216).
    #[arg(long)]
    pub small: bool,
    /// Fit T0, mT, R0, mR, M from basic tests in this JSON file: an array of
    /// {"n", "alpha", "payload", "workers", "spacing_us", "stack", "measured_p99_us"}.
    #[arg(long, value_name = "PATH")]
    pub fit: Option<PathBuf>,
    /// Seed of the simulations.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: u64,
}

impl ModelOptions {
    /// The validated simulation plan (a trace or an empirical service file read).
    pub fn plan(&self) -> Result<ModelPlan, LabError> {
        let named = |flag: &str, e: LabError| {
            if e.is_invalid() {
                invalid(format!("{flag}: {e}"))
            } else {
                e
            }
        };
        let query = ModelQuery {
            arrival: read_arrival(&self.arrival, self.trace_unit)
                .map_err(|e| named("--arrival", e))?,
            arrival_text: self.arrival.clone(),
            service: read_service(&self.service).map_err(|e| named("--service", e))?,
            service_text: self.service.clone(),
            workers: self.workers,
            discipline: self.discipline.clone(),
            classes: self.classes.clone(),
            connections: self.connections,
            requests: self.requests.clone(),
            warmup: self.warmup,
            seed: self.seed,
            replications: self.replications,
            exact_limit: self.exact_limit.clone(),
            confidence: self.confidence,
            load: self.load,
            rate: self.rate,
        };
        query.build().map_err(|e| invalid(e.to_string()))
    }
}

impl BurstyOptions {
    /// The prediction (and simulation) these options ask for.
    pub fn plan(&self) -> BurstyPlan {
        BurstyPlan {
            params: BurstyParams {
                t0_ns: self.t0.0,
                mt_ns_per_byte: self.mt.0,
                r0_ns: self.r0.0,
                mr_ns: self.mr.0,
                m_ns: self.m.0,
            },
            workload: BurstyWorkload {
                n: self.n,
                alpha: self.alpha,
                payload_bytes: self.payload,
                workers: self.workers,
                spacing_ns: self.spacing.0,
                percentile: self.percentile,
            },
            stack: self.stack,
            entropy_bin_ns: self.entropy_bin.map(|b| b.0),
            simulate: self.simulate,
            bursts: self.bursts,
            seed: self.seed,
        }
    }
}
