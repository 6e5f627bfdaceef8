//! `tailscope model bursty`: the LNS paper's model of a tandem server under bursty traffic —
//! prediction (formulas 1–12), tandem simulation and formula 15's error, the validation grid,
//! and the fit of the service-time laws from the basic tests of Table 3 (`lab::bursty`,
//! `report::bursty_view`).

use lab::bursty::BurstyPlan;
use model::bursty::{BurstyParams, BurstyWorkload, Stack};
use report::bursty_view::{
    self as view, ConcurrencyJson, PredictionJson, SweepJson, ValidationJson,
};

use super::target::lab_err;
use crate::cli::BurstyArgs;
use crate::exit::OrUsage;
use crate::limits::service_ns as ns;
use crate::output;

pub fn run(a: &BurstyArgs) -> anyhow::Result<i32> {
    if a.validate {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_message("simulating the validation grid…");
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        let rows = lab::bursty::validate(a.small, a.seed).map_err(lab_err)?;
        bar.finish_and_clear();
        return output::print_json_or(a.json, &ValidationJson { rows: &rows }, |w| {
            view::validation(w, &rows)
        });
    }
    let stack: Stack = a.stack.parse().or_usage()?;
    if let Some(path) = &a.fit {
        let (n, f) = lab::bursty::fit_file(path, stack, a.percentile).map_err(lab_err)?;
        return output::print_json_or(a.json, &f, |w| view::fit(w, n, stack.name(), &f));
    }
    let plan = BurstyPlan {
        params: BurstyParams {
            t0_ns: ns("--t0", &a.t0)?,
            mt_ns_per_byte: ns("--mt", &a.mt)?,
            r0_ns: ns("--r0", &a.r0)?,
            mr_ns: ns("--mr", &a.mr)?,
            m_ns: ns("--m", &a.m)?,
        },
        workload: BurstyWorkload {
            n: a.n,
            alpha: a.alpha,
            payload_bytes: a.payload,
            workers: a.workers,
            spacing_ns: ns("--spacing", &a.spacing)?,
            percentile: a.percentile,
        },
        stack,
        entropy_bin_ns: a
            .entropy_bin
            .as_deref()
            .map(|s| ns("--entropy-bin", s))
            .transpose()?,
        simulate: a.simulate,
        bursts: a.bursts,
        seed: a.seed,
    };
    if let Some(t) = &a.concurrency {
        let c = plan
            .concurrency(t.0.as_nanos() as f64, &a.alphas)
            .map_err(lab_err)?;
        return output::print_json_or(a.json, &ConcurrencyJson::of(&plan, &c), |w| {
            view::concurrency(w, &plan, &c)
        });
    }
    if let Some(sw) = &a.sweep {
        let rows = plan.sweep(sw).map_err(lab_err)?;
        return output::print_json_or(a.json, &SweepJson::of(&plan, sw, &rows), |w| {
            view::sweep(w, &plan, sw, &rows)
        });
    }
    let r = plan.run().map_err(lab_err)?;
    output::print_json_or(a.json, &PredictionJson::of(&plan, &r), |w| {
        view::prediction(w, &plan, &r)
    })
}
