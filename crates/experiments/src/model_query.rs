//! The ideal alone (`tailscope model`): the processes of a query read with the files they
//! name (`trace:PATH`, `empirical:PATH`, bounded), and the simulation of a checked
//! [`ModelPlan`] beside the closed forms that apply to it.

use std::path::Path;

use model::analytic::{self, ClosedForm};
use model::query::ModelPlan;
use model::{ArrivalSpec, Discipline, ServiceSpec, TimeUnit};

use crate::figures::{self, Claim, Curve};
use crate::simulate::simulate;
use crate::simulate::SimResult;
use measurement::error::{invalid, LabError};
use measurement::{read_bounded, Observer};

/// The most a trace or samples file may hold: some 50 million lines, more than the simulator
/// and the generator take from a file in reasonable time; `/dev/zero` is refused outright.
pub const MAX_MODEL_INPUT_BYTES: u64 = 1 << 30;

/// An arrival process (`poisson`, `pareto:1.5`, …), reading the file of `trace:PATH`.
pub fn read_arrival(text: &str, unit: TimeUnit) -> Result<ArrivalSpec, LabError> {
    match text.split_once(':') {
        Some((kind, path)) if kind.eq_ignore_ascii_case("trace") => {
            let body = read_bounded(Path::new(path), MAX_MODEL_INPUT_BYTES, "trace file")?;
            let t = model::parse_trace(&body, unit)
                .map_err(|e| invalid(format!("trace {path}: {e}")))?;
            Ok(ArrivalSpec::Trace(t))
        }
        _ => text.parse::<ArrivalSpec>().map_err(invalid),
    }
}

/// A service-time distribution (`det:50us`, …), reading the file of `empirical:PATH` (or
/// `trace:PATH`).
pub fn read_service(text: &str) -> Result<ServiceSpec, LabError> {
    match text.split_once(':') {
        Some((kind, path))
            if kind.eq_ignore_ascii_case("empirical") || kind.eq_ignore_ascii_case("trace") =>
        {
            let body = read_bounded(
                Path::new(path),
                MAX_MODEL_INPUT_BYTES,
                "service samples file",
            )?;
            model::parse_empirical(&body)
                .map_err(|e| invalid(format!("service samples {path}: {e}")))
        }
        _ => text.parse::<ServiceSpec>().map_err(invalid),
    }
}

/// The closed forms of a plan; an error when none can apply (a process without a finite
/// coefficient of variation).
pub fn closed_forms(plan: &ModelPlan) -> Result<Vec<ClosedForm>, LabError> {
    let Some(q) = &plan.query else {
        return Err(invalid(format!(
            "no closed form applies to {} (an arrival or service process without a finite \
             coefficient of variation); simulate instead",
            plan.kendall
        )));
    };
    analytic::closed_forms(q).map_err(invalid)
}

/// A plan simulated, with the closed forms that apply to it.
pub struct Modelled {
    pub sim: SimResult,
    pub forms: Vec<ClosedForm>,
}

impl Modelled {
    /// The closed form whose response-time distribution is exact for the plan's discipline
    /// (FIFO only: the forms describe first-come-first-served service).
    pub fn exact(&self, d: &Discipline) -> Option<&ClosedForm> {
        if !matches!(d, Discipline::Fifo) {
            return None;
        }
        self.forms
            .iter()
            .find(|f| f.exact && !f.response_quantiles.is_empty())
    }
}

/// Simulates `plan` (its replications, reporting to `obs`) and evaluates its closed forms
/// (none when they do not apply).
pub fn simulate_plan(plan: &ModelPlan, obs: &dyn Observer) -> Result<Modelled, LabError> {
    let forms = match &plan.query {
        Some(q) => analytic::closed_forms(q).unwrap_or_default(),
        None => Vec::new(),
    };
    let sim = simulate(
        &plan.cfg,
        plan.replications,
        plan.exact_limit,
        plan.confidence,
        &plan.label(),
        obs,
    )?;
    Ok(Modelled { sim, forms })
}

/// A figure of Tales of the Tail §2 re-derived: its curves simulated beside exact theory and
/// the paper's statements checked against both.
pub struct FigureRun {
    pub title: String,
    pub curves: Vec<Curve>,
    pub results: Vec<SimResult>,
    pub claims: Vec<Claim>,
}

/// Simulates figure `number` with `requests` per curve (on a trace's arrivals where the figure
/// takes one).
pub fn figure(
    number: u32,
    requests: u64,
    seed: u64,
    trace: Option<(ArrivalSpec, String)>,
    obs: &dyn Observer,
) -> Result<FigureRun, LabError> {
    let (title, curves) = figures::curves(number, requests, seed, trace)?;
    let results = curves
        .iter()
        .map(|c| simulate(&c.cfg, 1, 20_000_000, 0.95, &c.label, obs))
        .collect::<Result<Vec<_>, _>>()?;
    let claims = figures::claims(number, &curves, &results);
    Ok(FigureRun {
        title,
        curves,
        results,
        claims,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_read_and_their_errors_named() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("t.txt");
        std::fs::write(&trace, "1000\n2000\n4000\n").unwrap();
        let a = read_arrival(&format!("trace:{}", trace.display()), TimeUnit::Ns).unwrap();
        assert!(matches!(a, ArrivalSpec::Trace(t) if t.times_ns.len() == 3));
        std::fs::write(&trace, "1000\nx\n").unwrap();
        let e = read_arrival(&format!("TRACE:{}", trace.display()), TimeUnit::Us).unwrap_err();
        assert!(e.is_invalid() && e.to_string().starts_with("trace "), "{e}");
        let e = read_service("empirical:/dev/zero").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(read_service("det:50us").is_ok());
        assert!(read_arrival("bogus", TimeUnit::Ns)
            .unwrap_err()
            .is_invalid());
    }
}
