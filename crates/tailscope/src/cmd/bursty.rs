//! `tailscope model bursty`: the LNS paper's model of a tandem server under bursty traffic —
//! prediction (formulas 1–12), tandem simulation and formula 15's error, the validation grid,
//! Improvement 2 (each stage's time cut), and the fit of the service-time laws from the basic tests of Table 3 (`lab::bursty`,
//! `report::bursty_view`).

use report::bursty_view::{
    self as view, ConcurrencyJson, ImprovementJson, PredictionJson, SweepJson, ValidationJson,
};

use crate::cli::BurstyArgs;
use crate::output;

pub fn run(a: &BurstyArgs) -> anyhow::Result<i32> {
    let o = &a.opts;
    if o.validate {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_message("simulating the validation grid…");
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        let rows = lab::bursty::validate(o.small, o.seed)?;
        bar.finish_and_clear();
        return output::print_json_or(a.json, &ValidationJson { rows: &rows }, |w| {
            view::validation(w, &rows)
        });
    }
    let stack = o.stack;
    if let Some(path) = &o.fit {
        let (n, f) = lab::bursty::fit_file(path, stack, o.percentile)?;
        return output::print_json_or(a.json, &f, |w| view::fit(w, n, stack.name(), &f));
    }
    let plan = o.plan();
    if let Some(t) = &o.concurrency {
        let c = plan.concurrency(t.0.as_nanos() as f64, &o.alphas)?;
        return output::print_json_or(a.json, &ConcurrencyJson::of(&plan, &c), |w| {
            view::concurrency(w, &plan, &c)
        });
    }
    if o.improve {
        let by = o.by.map_or(1.0, |c| c.0);
        let d = o
            .dispatcher
            .map_or(lab::bursty::DEFAULT_DISPATCHER_NS, |d| d.0);
        let r = plan.improve(by, d)?;
        return output::print_json_or(a.json, &ImprovementJson::of(&plan, &r), |w| {
            view::improvement(w, &plan, &r)
        });
    }
    if let Some(sw) = &o.sweep {
        let rows = plan.sweep(sw)?;
        return output::print_json_or(a.json, &SweepJson::of(&plan, sw, &rows), |w| {
            view::sweep(w, &plan, sw, &rows)
        });
    }
    let r = plan.run()?;
    output::print_json_or(a.json, &PredictionJson::of(&plan, &r), |w| {
        view::prediction(w, &plan, &r)
    })
}
