//! `tailscope model`: the ideal latency distribution of an A/S/c queue, by simulation or, with
//! `--analytic`, from the closed forms that apply (`model::query`, `lab::model_query`,
//! `report::model_view`).

use report::model_view::{self as view, AnalyticJson, Inputs, SimJson};

use crate::cli::ModelArgs;
use crate::output;

pub fn run(a: &ModelArgs) -> anyhow::Result<i32> {
    let p = a.opts.plan()?;
    output::check_outputs(&a.out)?;
    if a.analytic {
        let forms = lab::model_query::closed_forms(&p)?;
        let (inputs, closed_forms) = (Inputs::of(&p), view::forms(&forms));
        let json = AnalyticJson {
            model: &p.kendall,
            inputs,
            closed_forms,
        };
        return output::print_json_or(a.out.json, &json, |w| view::analytic_text(w, &p, &forms));
    }
    let obs = super::progress::Progress::new(a.out.json);
    let m = lab::model_query::simulate_plan(&p, &obs)?;
    let title = format!("{}, ρ = {:.2}", p.label(), p.rho);
    let written = output::write_ccdf_outputs(&a.out, &title, &view::series(&p, &m))?;
    let json = SimJson::of(&p, &m, &written);
    output::print_json_or(a.out.json, &json, |w| view::sim_text(w, &p, &m, &written))
}
