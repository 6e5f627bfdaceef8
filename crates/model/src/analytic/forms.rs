//! [`closed_forms`]: every closed form that applies to a query, with its provenance.

use serde::Serialize;

use super::mdc::MdcWait;
use super::{
    allen_cunneen_mean_wait, cobham_mean_waits, erlang_c, heavy_traffic_wait_quantile,
    kingman_mean_wait, md1, mm1, mmc, mmc_priority_mean_waits, non_negative, positive, stable,
    AnalyticError,
};

/// The standard quantiles every distribution is reported at: (key, level), as in `stats`.
pub use stats::STANDARD_QUANTILES;

/// One closed-form result, with its provenance: every result names its source and whether it
/// is exact or approximate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClosedForm {
    /// Kendall notation of the model, e.g. "M/D/1", "Allen-Cunneen G/G/4".
    pub model: String,
    /// What is given: "waiting time distribution", "mean waiting time", ...
    pub quantity: String,
    /// Who derived it, and the form evaluated.
    pub source: &'static str,
    /// Exact for the query's model, or an approximation.
    pub exact: bool,
    /// Mean time in queue, seconds.
    pub mean_wait_s: Option<f64>,
    /// Mean wait plus mean service, seconds.
    pub mean_response_s: Option<f64>,
    /// (key, q, seconds) at [`STANDARD_QUANTILES`] when the form gives a distribution.
    pub wait_quantiles: Vec<(String, f64, f64)>,
    /// Same for the response time (wait + service).
    pub response_quantiles: Vec<(String, f64, f64)>,
    /// Priority forms only: mean delay beyond own service per class, highest first.
    pub per_class_mean_wait_s: Vec<f64>,
    /// Anything the reader must know to use the numbers.
    pub note: Option<String>,
}

/// Inter-arrival process.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum ArrivalKind {
    /// Poisson arrivals (exponential gaps, `ca2 = 1`).
    Poisson,
    /// Evenly spaced arrivals (`ca2 = 0`).
    Deterministic,
    /// Any renewal process with this squared coefficient of variation of the gaps.
    General { ca2: f64 },
}

/// Service-time distribution.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum ServiceKind {
    /// Every request takes exactly the mean (`cs2 = 0`).
    Deterministic,
    /// Exponential service (`cs2 = 1`).
    Exponential,
    /// Any distribution with this squared coefficient of variation.
    General { cs2: f64 },
}

impl ArrivalKind {
    /// Squared coefficient of variation of the inter-arrival times.
    pub fn ca2(&self) -> f64 {
        match self {
            Self::Poisson => 1.0,
            Self::Deterministic => 0.0,
            Self::General { ca2 } => *ca2,
        }
    }
    fn letter(&self) -> &'static str {
        match self {
            Self::Poisson => "M",
            Self::Deterministic => "D",
            Self::General { .. } => "G",
        }
    }
}

impl ServiceKind {
    /// Squared coefficient of variation of the service times.
    pub fn cs2(&self) -> f64 {
        match self {
            Self::Deterministic => 0.0,
            Self::Exponential => 1.0,
            Self::General { cs2 } => *cs2,
        }
    }
    fn letter(&self) -> &'static str {
        match self {
            Self::Deterministic => "D",
            Self::Exponential => "M",
            Self::General { .. } => "G",
        }
    }
}

/// What the CLI knows: arrival and service described by rate and squared coefficients of
/// variation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Query {
    /// Arrival rate, 1/s.
    pub lambda: f64,
    /// Mean service time, s.
    pub mean_service_s: f64,
    /// Number of workers sharing one FIFO queue.
    pub workers: u32,
    /// Arrival process.
    pub arrival: ArrivalKind,
    /// Service-time distribution.
    pub service: ServiceKind,
    /// Priority class probabilities, highest priority first; empty (or one class) = FIFO.
    pub class_probs: Vec<f64>,
    /// With priority classes: preemptive-resume (true) or non-preemptive (false).
    pub preemptive: bool,
}

impl Query {
    /// Utilisation per worker.
    pub fn rho(&self) -> f64 {
        self.lambda * self.mean_service_s / f64::from(self.workers)
    }

    /// Validate everything before any work: "validate, then run".
    fn validate(&self) -> Result<(), AnalyticError> {
        positive("arrival rate", self.lambda)?;
        positive("mean service time", self.mean_service_s)?;
        if self.workers == 0 {
            return Err(AnalyticError::NoWorkers);
        }
        non_negative("ca2", self.arrival.ca2())?;
        non_negative("cs2", self.service.cs2())?;
        let mut sum = 0.0;
        for &p in &self.class_probs {
            sum += positive("class probability", p)?;
        }
        if !self.class_probs.is_empty() && (sum - 1.0).abs() > 1e-9 {
            return Err(AnalyticError::ClassProbsSum { sum });
        }
        stable(self.rho())?;
        Ok(())
    }

    fn kendall(&self) -> String {
        format!(
            "{}/{}/{}",
            self.arrival.letter(),
            self.service.letter(),
            self.workers
        )
    }
}

/// Every closed form that applies to the query: exact ones first, then approximations.
///
/// FIFO (no priority classes): M/D/1 and M/D/c exact distributions, M/M/1 and M/M/c (Erlang C)
/// exact distributions, M/G/1 Pollaczek–Khinchine exact mean, D/D/c exact; then Kingman (one
/// worker) and Allen–Cunneen, each with the heavy-traffic exponential tail. With priority
/// classes: Cobham (M/G/1), M/M/c with equal rates, and an Allen–Cunneen/Cobham approximation
/// for the rest (non-preemptive only).
///
/// Errors when utilisation is at or above one, workers is zero, or any number is NaN, infinite,
/// negative or (where it must be) zero.
pub fn closed_forms(q: &Query) -> Result<Vec<ClosedForm>, AnalyticError> {
    q.validate()?;
    if q.class_probs.len() > 1 {
        return priority_forms(q);
    }
    let mut out = Vec::new();
    let skipped = exact_fifo(q, &mut out)?;
    let first_approx = out.len();
    approximate_fifo(q, &mut out)?;
    if let (Some(why), Some(f)) = (skipped, out.get_mut(first_approx)) {
        f.note = Some(match f.note.take() {
            Some(n) => format!("{why}; {n}"),
            None => why,
        });
    }
    Ok(out)
}

fn quantiles(
    f: impl Fn(f64) -> Result<f64, AnalyticError>,
) -> Result<Vec<(String, f64, f64)>, AnalyticError> {
    STANDARD_QUANTILES
        .iter()
        .map(|&(key, p)| Ok((key.to_string(), p, f(p)?)))
        .collect()
}

fn blank(model: String, quantity: &str, source: &'static str, exact: bool) -> ClosedForm {
    ClosedForm {
        model,
        quantity: quantity.to_string(),
        source,
        exact,
        mean_wait_s: None,
        mean_response_s: None,
        wait_quantiles: Vec::new(),
        response_quantiles: Vec::new(),
        per_class_mean_wait_s: Vec::new(),
        note: None,
    }
}

/// Push the exact FIFO form, if any. Returns why an applicable exact form was left out.
fn exact_fifo(q: &Query, out: &mut Vec<ClosedForm>) -> Result<Option<String>, AnalyticError> {
    let (lambda, s, c) = (q.lambda, q.mean_service_s, q.workers);
    let dist = "waiting and response time distributions";
    match (q.arrival, q.service) {
        (ArrivalKind::Poisson, ServiceKind::Deterministic) => {
            let solved = if c == 1 {
                md1::solve(lambda, s)
            } else {
                MdcWait::new(lambda, s, c)
            };
            let source = if c == 1 {
                "Crommelin (1932) embedded chain by positive cut recursion; Franx (2001) \
                 positive-term waiting-time form"
            } else {
                "Crommelin (1932) embedded chain by GTH state reduction; Franx (2001) \
                 positive-term waiting-time form"
            };
            match solved {
                Ok(w) => {
                    let mut f = blank(q.kendall(), dist, source, true);
                    let mean = if c == 1 {
                        md1::mean_wait(lambda, s)?
                    } else {
                        w.mean_wait()
                    };
                    f.mean_wait_s = Some(mean);
                    f.mean_response_s = Some(mean + s);
                    f.wait_quantiles = quantiles(|p| w.wait_quantile(p))?;
                    f.response_quantiles = quantiles(|p| w.response_quantile(p))?;
                    out.push(f);
                }
                // Too heavy for the exact solver: leave it to the approximations.
                Err(
                    e
                    @ (AnalyticError::TooManyStates { .. } | AnalyticError::TooManyWorkers { .. }),
                ) => {
                    return Ok(Some(format!(
                        "exact {} form not computed: {e}",
                        q.kendall()
                    )))
                }
                Err(e) => return Err(e),
            }
        }
        (ArrivalKind::Poisson, ServiceKind::Exponential) => {
            let mu = 1.0 / s;
            let mut f = if c == 1 {
                let mut f = blank(
                    q.kendall(),
                    dist,
                    "M/M/1: W = 0 w.p. 1 - rho, else Exp(mu - lambda); R ~ Exp(mu - lambda)",
                    true,
                );
                f.mean_wait_s = Some(mm1::mean_wait(lambda, mu)?);
                f.wait_quantiles = quantiles(|p| mm1::wait_quantile(lambda, mu, p))?;
                f.response_quantiles = quantiles(|p| mm1::response_quantile(lambda, mu, p))?;
                f
            } else {
                let mut f = blank(
                    q.kendall(),
                    dist,
                    "Erlang (1917) delay formula (Erlang C by the Erlang B recurrence); \
                     response = wait + Exp(mu) as a hypoexponential mixture",
                    true,
                );
                f.mean_wait_s = Some(mmc::mean_wait(lambda, mu, c)?);
                f.wait_quantiles = quantiles(|p| mmc::wait_quantile(lambda, mu, c, p))?;
                f.response_quantiles = quantiles(|p| mmc::response_quantile(lambda, mu, c, p))?;
                f
            };
            f.mean_response_s = f.mean_wait_s.map(|w| w + s);
            out.push(f);
        }
        (ArrivalKind::Poisson, ServiceKind::General { cs2 }) if c == 1 => {
            let mut f = blank(
                q.kendall(),
                "mean waiting time",
                "Pollaczek (1930) / Khinchine (1932) mean-value formula",
                true,
            );
            let w = kingman_mean_wait(q.rho(), s, 1.0, cs2)?;
            f.mean_wait_s = Some(w);
            f.mean_response_s = Some(w + s);
            out.push(f);
        }
        (ArrivalKind::Deterministic, ServiceKind::Deterministic) => {
            let mut f = blank(
                q.kendall(),
                dist,
                "evenly spaced arrivals with constant service below capacity never queue",
                true,
            );
            f.mean_wait_s = Some(0.0);
            f.mean_response_s = Some(s);
            f.wait_quantiles = quantiles(|_| Ok(0.0))?;
            f.response_quantiles = quantiles(|_| Ok(s))?;
            out.push(f);
        }
        _ => {}
    }
    Ok(None)
}

/// An approximate mean with the heavy-traffic exponential tail attached.
fn approx_form(
    q: &Query,
    model: String,
    source: &'static str,
    mean: f64,
    p_wait: f64,
    with_tail: bool,
) -> Result<ClosedForm, AnalyticError> {
    let s = q.mean_service_s;
    let mut f = blank(model, "mean waiting time", source, false);
    f.mean_wait_s = Some(mean);
    f.mean_response_s = Some(mean + s);
    if with_tail {
        f.quantity = "mean waiting time; heavy-traffic exponential tail".to_string();
        f.wait_quantiles = quantiles(|p| heavy_traffic_wait_quantile(p_wait, mean, p))?;
        if q.service == ServiceKind::Deterministic {
            f.response_quantiles = f
                .wait_quantiles
                .iter()
                .map(|(k, p, w)| (k.clone(), *p, w + s))
                .collect();
        } else {
            f.note = Some(
                "response quantiles need the service distribution, not only its cs2".to_string(),
            );
        }
    }
    Ok(f)
}

fn approximate_fifo(q: &Query, out: &mut Vec<ClosedForm>) -> Result<(), AnalyticError> {
    let (ca2, cs2) = (q.arrival.ca2(), q.service.cs2());
    let (lambda, s, c) = (q.lambda, q.mean_service_s, q.workers);
    let rho = q.rho();
    if c == 1 {
        let mean = kingman_mean_wait(rho, s, ca2, cs2)?;
        out.push(approx_form(
            q,
            "Kingman G/G/1".to_string(),
            "Kingman (1961) heavy-traffic mean; tail P(W > t) = rho exp(-rho t / mean)",
            mean,
            rho,
            true,
        )?);
    }
    let mean = allen_cunneen_mean_wait(c, lambda, s, ca2, cs2)?;
    let p_wait = erlang_c(c, lambda * s)?;
    out.push(approx_form(
        q,
        format!("Allen-Cunneen G/G/{c}"),
        "Allen (1978) / Cunneen: Erlang C wait scaled by (ca2 + cs2) / 2; tail \
         P(W > t) = C exp(-C t / mean)",
        mean,
        p_wait,
        c > 1,
    )?);
    Ok(())
}

fn priority_forms(q: &Query) -> Result<Vec<ClosedForm>, AnalyticError> {
    let (s, c) = (q.mean_service_s, q.workers);
    let cs2 = q.service.cs2();
    let lambdas: Vec<f64> = q.class_probs.iter().map(|p| p * q.lambda).collect();
    let discipline = if q.preemptive {
        "preemptive-resume"
    } else {
        "non-preemptive"
    };
    let quantity = format!(
        "mean waiting time per class ({discipline}; delay beyond own service, highest first)"
    );
    let mut out = Vec::new();
    let finish = |mut f: ClosedForm, waits: Vec<f64>| {
        let mean: f64 = waits.iter().zip(&q.class_probs).map(|(w, p)| w * p).sum();
        f.mean_wait_s = Some(mean);
        f.mean_response_s = Some(mean + s);
        f.per_class_mean_wait_s = waits;
        f
    };
    let poisson = q.arrival == ArrivalKind::Poisson;
    if poisson && c == 1 {
        let n = lambdas.len();
        let waits = cobham_mean_waits(
            &lambdas,
            &vec![s; n],
            &vec![(1.0 + cs2) * s * s; n],
            q.preemptive,
        )?;
        let f = blank(
            format!("{} priority", q.kendall()),
            &quantity,
            "Cobham (1954) M/G/1 priority; preemptive-resume form as in Kleinrock (1976)",
            true,
        );
        out.push(finish(f, waits));
    } else if poisson && q.service == ServiceKind::Exponential {
        let waits = mmc_priority_mean_waits(c, &lambdas, 1.0 / s, q.preemptive)?;
        let f = blank(
            format!("{} priority", q.kendall()),
            &quantity,
            "M/M/c priority with equal service rates (Kleinrock 1976): non-preemptive by the \
             Erlang C residual, preemptive by aggregating higher classes",
            true,
        );
        out.push(finish(f, waits));
    }
    if !q.preemptive && !(poisson && (c == 1 || q.service == ServiceKind::Exponential)) {
        // Non-preemptive M/G/1: W_k = W_fifo (1 - rho) / ((1 - s_{k-1})(1 - s_k)); use the
        // Allen-Cunneen FIFO wait in place of the exact one.
        let fifo = allen_cunneen_mean_wait(c, q.lambda, s, q.arrival.ca2(), cs2)?;
        let rho = q.rho();
        let cap = f64::from(c) / s;
        let mut above = 0.0;
        let waits = lambdas
            .iter()
            .map(|l| {
                let upto = above + l / cap;
                let w = fifo * (1.0 - rho) / ((1.0 - above) * (1.0 - upto));
                above = upto;
                w
            })
            .collect();
        let f = blank(
            format!("Allen-Cunneen/Cobham G/G/{c} priority"),
            &quantity,
            "Cobham's class factors applied to the Allen-Cunneen FIFO wait",
            false,
        );
        out.push(finish(f, waits));
    }
    if out.is_empty() {
        let mut f = blank(
            format!("{} priority", q.kendall()),
            &quantity,
            "none",
            false,
        );
        f.note = Some(
            "no closed form for preemptive priority with these arrivals and service; \
             use the simulator"
                .to_string(),
        );
        out.push(f);
    }
    Ok(out)
}
