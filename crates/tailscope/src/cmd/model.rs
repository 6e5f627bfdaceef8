//! `tailscope model`: the ideal latency distribution of an A/S/c queue, by simulation or, with
//! `--analytic`, from the closed forms that apply (`model::query`, `lab::model_query`,
//! `report::model_view`).

use anyhow::Context;
use model::query::{ModelPlan, ModelQuery};
use model::{ArrivalSpec, ServiceSpec, TimeUnit};
use report::model_view::{self as view, AnalyticJson, Inputs, SimJson};

use super::common::lab_err;
use crate::cli::ModelArgs;
use crate::exit::OrUsage;
use crate::output;

/// `--trace-unit`.
pub fn parse_unit(s: &str) -> anyhow::Result<TimeUnit> {
    s.parse().or_usage()
}

/// Parses `--arrival`, reading a trace file for `trace:PATH`.
pub fn parse_arrival(text: &str, unit: TimeUnit) -> anyhow::Result<ArrivalSpec> {
    lab::model_query::read_arrival(text, unit).map_err(lab_err)
}

/// Parses `--service`, reading the file for `empirical:PATH`.
pub fn parse_service(text: &str) -> anyhow::Result<ServiceSpec> {
    lab::model_query::read_service(text).map_err(lab_err)
}

/// Validates the arguments into a simulation plan.
fn build(a: &ModelArgs) -> anyhow::Result<ModelPlan> {
    let unit = parse_unit(&a.trace_unit)?;
    let query = ModelQuery {
        arrival: parse_arrival(&a.arrival, unit).context("--arrival")?,
        arrival_text: a.arrival.clone(),
        service: parse_service(&a.service).context("--service")?,
        service_text: a.service.clone(),
        workers: a.workers,
        discipline: a.discipline.clone(),
        classes: a.classes.clone(),
        connections: a.connections,
        requests: a.requests.clone(),
        warmup: a.warmup,
        seed: a.seed,
        replications: a.replications,
        exact_limit: a.exact_limit.clone(),
        confidence: a.confidence,
        load: a.load,
        rate: a.rate,
    };
    query.build().or_usage()
}

pub fn run(a: &ModelArgs) -> anyhow::Result<i32> {
    let p = build(a)?;
    output::check_outputs(&a.out)?;
    if a.analytic {
        let forms = lab::model_query::closed_forms(&p).map_err(lab_err)?;
        let (inputs, closed_forms) = (Inputs::of(&p), view::forms(&forms));
        let json = AnalyticJson {
            model: &p.kendall,
            inputs,
            closed_forms,
        };
        return output::print_json_or(a.out.json, &json, |w| view::analytic_text(w, &p, &forms));
    }
    let obs = super::progress::Progress::new(a.out.json);
    let m = lab::model_query::simulate_plan(&p, &obs).map_err(lab_err)?;
    let title = format!("{}, ρ = {:.2}", p.label(), p.rho);
    let written = output::write_ccdf_outputs(&a.out, &title, &view::series(&p, &m))?;
    let json = SimJson::of(&p, &m, &written);
    output::print_json_or(a.out.json, &json, |w| view::sim_text(w, &p, &m, &written))
}
