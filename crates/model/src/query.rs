//! A model query as a person asks it (`tailscope model`): the queue's processes, its size and
//! the simulation's precision, each checked and bounded, then built into a [`ModelPlan`] (the
//! simulator's configuration, the offered load, the Kendall name, the closed-form query).
//! Errors name the parameter as the command line spells it (`--workers`, `--classes`).

use std::str::FromStr;

use crate::analytic::{ArrivalKind, Query, ServiceKind};
use crate::{
    format_duration_ns, mean_rate_of_trace, parse_count, ArrivalSpec, Discipline, ModelError,
    ServiceSpec, SimConfig, TimeUnit,
};

/// Workers of a simulated queue whose discipline keeps them in an array or a heap (fifo,
/// random-worker, round-robin): a few bytes and at most a heap step per request each.
pub const MAX_WORKERS: u32 = 100_000;
/// Workers for the event-driven disciplines (lifo, random, priority, priority-preemptive),
/// which scan every worker at every event: 1,000 workers simulate about a million requests
/// per second; 100,000 would take minutes per million.
pub const MAX_SCANNED_WORKERS: u32 = 1_000;
/// Requests one query simulates in all (requests × replications): about five minutes at the
/// simulator's 30 million requests per second.
pub const MAX_REQUESTS: u64 = 10_000_000_000;
/// Independent replications; more add nothing to a t interval.
pub const MAX_REPLICATIONS: u32 = 1_000;
/// Response times kept exactly: 16 bytes each (response and wait), so 1.6 GB of memory.
pub const MAX_EXACT_LIMIT: u64 = 100_000_000;
/// Connections of round-robin partitioning.
pub const MAX_CONNECTIONS: u32 = 1_000_000;

/// What is wrong with a query; each message names the parameter and the value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// A parameter out of its range, or inconsistent with another.
    #[error("{0}")]
    Invalid(String),
    /// A parameter the model itself refused (`what` names it).
    #[error("{what}: {source}")]
    Model {
        what: &'static str,
        source: ModelError,
    },
    /// The configuration as a whole, refused by the simulator.
    #[error(transparent)]
    Config(#[from] ModelError),
}

fn invalid(msg: impl Into<String>) -> QueryError {
    QueryError::Invalid(msg.into())
}

fn model_err(what: &'static str) -> impl Fn(ModelError) -> QueryError {
    move |source| QueryError::Model { what, source }
}

impl FromStr for TimeUnit {
    type Err = QueryError;

    /// `ns`, `us` or `µs` (any case): the unit of a trace file's time stamps.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "ns" => Ok(TimeUnit::Ns),
            "us" | "µs" => Ok(TimeUnit::Us),
            other => Err(invalid(format!(
                "--trace-unit must be ns or us, got '{other}'"
            ))),
        }
    }
}

/// Class probabilities (`0.2,0.8`): non-negative, summing to 1, at most 255 of them (the
/// simulator's class labels are bytes).
pub fn parse_probs(s: &str) -> Result<Vec<f64>, QueryError> {
    let v = s
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<f64>()
                .map_err(|_| invalid(format!("--classes: '{p}' is not a number")))
        })
        .collect::<Result<Vec<f64>, _>>()?;
    let sum: f64 = v.iter().sum();
    if v.iter().any(|p| !(p.is_finite() && *p >= 0.0)) || (sum - 1.0).abs() > 1e-9 {
        return Err(invalid(format!(
            "--classes must be non-negative probabilities that sum to 1, got {s}"
        )));
    }
    if v.len() > 255 {
        return Err(invalid(format!(
            "--classes must name at most 255 classes, got {}",
            v.len()
        )));
    }
    Ok(v)
}

/// A model query before it is checked: the processes already parsed (a trace or samples file
/// is read by the caller), the rest as given.
#[derive(Clone, Debug)]
pub struct ModelQuery {
    pub arrival: ArrivalSpec,
    /// `arrival` as the user wrote it (shown back in the inputs).
    pub arrival_text: String,
    pub service: ServiceSpec,
    pub service_text: String,
    pub workers: u32,
    /// A [`Discipline`] name (`fifo`, `priority`, …).
    pub discipline: String,
    /// Class probabilities ([`parse_probs`]); priority disciplines need them.
    pub classes: Option<String>,
    pub connections: Option<u32>,
    /// A count (`1M`).
    pub requests: String,
    /// Fraction of the requests dropped as warm-up, in [0, 1).
    pub warmup: f64,
    pub seed: u64,
    pub replications: u32,
    /// A count: above this many kept requests a streaming histogram replaces exact quantiles.
    pub exact_limit: String,
    pub confidence: f64,
    /// The utilisation per worker, in (0, 1); or else `rate`.
    pub load: Option<f64>,
    /// Arrivals per second.
    pub rate: Option<f64>,
}

/// A checked query: everything validated before any work starts.
#[derive(Clone, Debug)]
pub struct ModelPlan {
    pub cfg: SimConfig,
    /// Mean arrival rate (req/s) that the simulation uses.
    pub rate_per_s: f64,
    /// Offered load per worker, ρ = λ·E[S]/c.
    pub rho: f64,
    /// Kendall's notation (`M/D/1`).
    pub kendall: String,
    /// The closed forms' query, when the arrival process has a finite SCV.
    pub query: Option<Query>,
    pub exact_limit: u64,
    pub replications: u32,
    pub confidence: f64,
    pub arrival_text: String,
    pub service_text: String,
    pub discipline_text: String,
}

impl ModelPlan {
    /// The mean service time, ns.
    pub fn mean_service_ns(&self) -> f64 {
        self.cfg.service.mean_ns()
    }

    /// `M/D/1 fifo`: the queue and its discipline as the user named it.
    pub fn label(&self) -> String {
        format!("{} {}", self.kendall, self.discipline_text)
    }
}

fn arrival_letter(a: &ArrivalSpec) -> &'static str {
    match a {
        ArrivalSpec::Poisson => "M",
        ArrivalSpec::Deterministic => "D",
        ArrivalSpec::Lognormal { .. } => "LN",
        ArrivalSpec::Pareto { .. } => "Pareto",
        ArrivalSpec::GenPareto { .. } => "GPD",
        ArrivalSpec::Trace(_) => "Trace",
        ArrivalSpec::Bursty { .. } => "Burst",
    }
}

fn service_letter(s: &ServiceSpec) -> &'static str {
    match s {
        ServiceSpec::Deterministic { .. } => "D",
        ServiceSpec::Exponential { .. } => "M",
        ServiceSpec::Lognormal { .. } => "LN",
        ServiceSpec::Pareto { .. } => "Pareto",
        ServiceSpec::Empirical { .. } => "Emp",
    }
}

fn is_priority(d: &Discipline) -> bool {
    matches!(d, Discipline::Priority | Discipline::PriorityPreemptive)
}

/// The closed-form query for a configuration, when its arrival process has a finite SCV.
pub fn query_for(cfg: &SimConfig, rate: f64) -> Option<Query> {
    let arrival = match &cfg.arrival {
        ArrivalSpec::Poisson => ArrivalKind::Poisson,
        ArrivalSpec::Deterministic => ArrivalKind::Deterministic,
        other => ArrivalKind::General { ca2: other.scv()? },
    };
    let service = match &cfg.service {
        ServiceSpec::Deterministic { .. } => ServiceKind::Deterministic,
        ServiceSpec::Exponential { .. } => ServiceKind::Exponential,
        s => {
            let cs2 = s.scv();
            if !cs2.is_finite() {
                return None;
            }
            ServiceKind::General { cs2 }
        }
    };
    Some(Query {
        lambda: rate,
        mean_service_s: cfg.service.mean_ns() / 1e9,
        workers: cfg.workers,
        arrival,
        service,
        class_probs: if is_priority(&cfg.discipline) {
            cfg.class_probs.clone()
        } else {
            Vec::new()
        },
        preemptive: matches!(cfg.discipline, Discipline::PriorityPreemptive),
    })
}

/// The most workers the simulator runs for `d` in reasonable time.
fn max_workers(d: &Discipline) -> u32 {
    match d {
        Discipline::Fifo | Discipline::RandomWorker | Discipline::RoundRobin => MAX_WORKERS,
        _ => MAX_SCANNED_WORKERS,
    }
}

/// `v` in `[min, max]`, else an error naming `what` and the value.
pub fn in_range<T: PartialOrd + std::fmt::Display>(
    what: &str,
    v: T,
    min: T,
    max: T,
) -> Result<(), QueryError> {
    if !(v >= min && v <= max) {
        return Err(invalid(format!(
            "{what} must be between {min} and {max}, got {v}"
        )));
    }
    Ok(())
}

/// Refuses a run so long in simulated time that its f64 nanosecond time stamps could no
/// longer resolve its service times: a time stamp resolves 2^-52 of its value, so at the end
/// of a span of simulated time a response time is only known to span · 2^-52. Allowed up to
/// 0.1 % of the mean service time.
fn check_time_resolution(requests: u64, rate: f64, mean_ns: f64) -> Result<(), QueryError> {
    let span_ns = requests as f64 / rate * 1e9;
    let resolution_ns = span_ns * f64::EPSILON;
    if resolution_ns > mean_ns * 1e-3 {
        return Err(invalid(format!(
            "--requests {requests} at {rate} req/s span {} of simulated time, where time \
             stamps resolve only {}, too coarse for a mean service time of {}: give fewer \
             --requests or a higher --load or --rate",
            format_duration_ns(span_ns),
            format_duration_ns(resolution_ns),
            format_duration_ns(mean_ns)
        )));
    }
    Ok(())
}

impl ModelQuery {
    /// The requests and the exact limit, with the other bounds of a simulation's size and
    /// precision checked (the first out of range is the error).
    fn sizes(&self) -> Result<(u64, u64), QueryError> {
        let requests = parse_count(&self.requests).map_err(model_err("--requests"))?;
        if requests == 0 {
            return Err(invalid("--requests must be at least 1"));
        }
        in_range("--replications", self.replications, 1, MAX_REPLICATIONS)?;
        if requests.saturating_mul(u64::from(self.replications)) > MAX_REQUESTS {
            return Err(invalid(format!(
                "--requests × --replications must be at most {MAX_REQUESTS}, got {requests} × {}",
                self.replications
            )));
        }
        let exact_limit = parse_count(&self.exact_limit).map_err(model_err("--exact-limit"))?;
        if exact_limit > MAX_EXACT_LIMIT {
            return Err(invalid(format!(
                "--exact-limit must be at most {MAX_EXACT_LIMIT}, got {exact_limit}"
            )));
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(invalid(format!(
                "--confidence must be in (0, 1), got {}",
                self.confidence
            )));
        }
        if !(self.warmup >= 0.0 && self.warmup < 1.0) {
            return Err(invalid(format!(
                "--warmup must be in [0, 1) (a fraction of --requests), got {}",
                self.warmup
            )));
        }
        if let Some(c) = self.connections {
            in_range("--connections", c, 1, MAX_CONNECTIONS)?;
        }
        Ok((requests, exact_limit))
    }

    /// The arrival rate: from the load (the utilisation per worker), the rate, or a trace's
    /// own (`None`); 70 % load when none is given.
    fn rate(&self) -> Result<Option<f64>, QueryError> {
        let for_load = |load| SimConfig::rate_for_load(load, self.workers, &self.service);
        Ok(match (self.load, self.rate) {
            (Some(load), _) => {
                if !(load > 0.0 && load < 1.0) {
                    return Err(invalid(format!(
                        "--load must be in (0, 1) (the utilisation per worker), got {load}"
                    )));
                }
                Some(for_load(load).map_err(model_err("--load"))?)
            }
            (None, Some(r)) => {
                if !(r.is_finite() && r > 0.0) {
                    return Err(invalid(format!("--rate must be positive, got {r}")));
                }
                Some(r)
            }
            (None, None) => match self.arrival {
                ArrivalSpec::Trace(_) => None,
                _ => Some(for_load(0.7)?),
            },
        })
    }

    /// The discipline and its class probabilities, with the workers it can simulate.
    fn discipline(&self) -> Result<(Discipline, Vec<f64>), QueryError> {
        if self.workers == 0 {
            return Err(invalid("--workers must be at least 1"));
        }
        let d: Discipline = self.discipline.parse().map_err(model_err("--discipline"))?;
        if self.workers > max_workers(&d) {
            return Err(invalid(format!(
                "--workers must be at most {} with --discipline {}, got {}",
                max_workers(&d),
                self.discipline,
                self.workers
            )));
        }
        let probs = match &self.classes {
            Some(s) => parse_probs(s)?,
            None if is_priority(&d) => {
                return Err(invalid(
                    "priority disciplines need --classes (e.g. --classes 0.2,0.8)",
                ))
            }
            None => Vec::new(),
        };
        Ok((d, probs))
    }

    /// Checks everything and builds the plan.
    pub fn build(self) -> Result<ModelPlan, QueryError> {
        let (discipline, class_probs) = self.discipline()?;
        let (mut requests, exact_limit) = self.sizes()?;
        let rate = self.rate()?;
        let effective_rate = match (&self.arrival, rate) {
            (_, Some(r)) => r,
            (ArrivalSpec::Trace(t), None) => mean_rate_of_trace(t).ok_or_else(|| {
                invalid("trace needs at least two distinct timestamps to have a rate")
            })?,
            (_, None) => return Err(invalid("give --load or --rate")),
        };
        if let ArrivalSpec::Trace(t) = &self.arrival {
            requests = requests.min(t.times_ns.len() as u64);
        }
        check_time_resolution(requests, effective_rate, self.service.mean_ns())?;
        let mean_s = self.service.mean_ns() / 1e9;
        let rho = effective_rate * mean_s / f64::from(self.workers);
        let cfg = SimConfig {
            arrival: self.arrival,
            rate_per_s: rate,
            service: self.service,
            workers: self.workers,
            discipline,
            class_probs,
            connections: self.connections,
            requests,
            warmup_fraction: self.warmup,
            seed: self.seed,
        };
        cfg.validate()?;
        let kendall = format!(
            "{}/{}/{}",
            arrival_letter(&cfg.arrival),
            service_letter(&cfg.service),
            cfg.workers
        );
        let query = query_for(&cfg, effective_rate);
        Ok(ModelPlan {
            cfg,
            rate_per_s: effective_rate,
            rho,
            kendall,
            query,
            exact_limit,
            replications: self.replications,
            confidence: self.confidence,
            arrival_text: self.arrival_text,
            service_text: self.service_text,
            discipline_text: self.discipline,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query() -> ModelQuery {
        ModelQuery {
            arrival: ArrivalSpec::Poisson,
            arrival_text: "poisson".into(),
            service: "det:50us".parse().unwrap(),
            service_text: "det:50us".into(),
            workers: 1,
            discipline: "fifo".into(),
            classes: None,
            connections: None,
            requests: "1M".into(),
            warmup: 0.01,
            seed: 1,
            replications: 1,
            exact_limit: "20M".into(),
            confidence: 0.95,
            load: None,
            rate: None,
        }
    }

    #[test]
    fn builds_an_md1_at_seventy_percent_by_default() {
        let p = query().build().unwrap();
        assert_eq!(p.kendall, "M/D/1");
        assert_eq!(p.label(), "M/D/1 fifo");
        assert!((p.rho - 0.7).abs() < 1e-12, "{}", p.rho);
        assert!((p.rate_per_s - 14_000.0).abs() < 1e-6);
        assert_eq!(p.cfg.requests, 1_000_000);
        assert_eq!(p.exact_limit, 20_000_000);
        let q = p.query.unwrap();
        assert_eq!(q.arrival, ArrivalKind::Poisson);
        assert!(q.class_probs.is_empty());
    }

    #[test]
    fn errors_name_the_parameter() {
        type Change = fn(&mut ModelQuery);
        let cases: [(Change, &str); 7] = [
            (|q| q.workers = 0, "--workers must be at least 1"),
            (|q| q.discipline = "priority".into(), "need --classes"),
            (|q| q.classes = Some("0.5,0.6".into()), "sum to 1"),
            (|q| q.requests = "0".into(), "--requests must be at least 1"),
            (|q| q.exact_limit = "1G".into(), "--exact-limit"),
            (|q| q.load = Some(1.2), "--load must be in (0, 1)"),
            (
                |q| q.requests = "500G".into(),
                "--requests × --replications",
            ),
        ];
        for (change, expect) in cases {
            let mut q = query();
            change(&mut q);
            let e = q.build().unwrap_err().to_string();
            assert!(e.contains(expect), "{e} should say {expect}");
        }
        let mut q = query();
        q.discipline = "lifo".into();
        q.workers = 5_000;
        let e = q.build().unwrap_err().to_string();
        assert!(e.contains("at most 1000 with --discipline lifo"), "{e}");
    }

    #[test]
    fn too_long_a_simulated_span_is_refused() {
        let mut q = query();
        q.rate = Some(0.001);
        q.requests = "1G".into();
        let e = q.build().unwrap_err().to_string();
        assert!(e.contains("time stamps resolve only"), "{e}");
    }

    #[test]
    fn time_units_and_probabilities_parse() {
        assert_eq!("US".parse::<TimeUnit>().unwrap(), TimeUnit::Us);
        assert_eq!("µs".parse::<TimeUnit>().unwrap(), TimeUnit::Us);
        assert_eq!("ns".parse::<TimeUnit>().unwrap(), TimeUnit::Ns);
        assert!("ms"
            .parse::<TimeUnit>()
            .unwrap_err()
            .to_string()
            .contains("got 'ms'"));
        assert_eq!(parse_probs("0.25, 0.75").unwrap(), vec![0.25, 0.75]);
        assert!(parse_probs("x,1").unwrap_err().to_string().contains("'x'"));
        let many = vec!["0"; 256].join(",") + ",1";
        assert!(parse_probs(&many).is_err());
    }
}
