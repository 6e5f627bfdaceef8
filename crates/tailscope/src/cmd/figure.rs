//! `tailscope model figure N`: Tales of the Tail §2, Figures 1–4, re-derived (`lab::figures`):
//! the curves simulated beside exact theory, the paper's statements checked, printed and
//! plotted here.

use std::path::PathBuf;

use lab::figures::{agrees, claims, curves, SERVICE_NS};
use serde_json::{json, Value};

use super::model::{parse_unit, read_trace};
use super::progress::Progress;
use super::target::lab_err;
use crate::cli::FigureArgs;
use crate::exit::{usage, OrUsage};
use crate::limits;
use crate::output::{self, us};

pub fn run(a: &FigureArgs) -> anyhow::Result<i32> {
    let n = model::parse_count(&a.requests).or_usage_ctx("--requests")?;
    if n == 0 {
        return Err(usage("--requests must be at least 1"));
    }
    limits::at_most("--requests", n, limits::MAX_FIGURE_REQUESTS)?;
    let mut out = a.out.clone();
    if out.plot.is_none() {
        out.plot = Some(PathBuf::from(format!("tailscope-figure-{}.svg", a.number)));
    }
    output::check_outputs(&out)?;
    let trace = match &a.trace {
        Some(p) => Some((
            read_trace(p, parse_unit(&a.trace_unit)?)?,
            p.display().to_string(),
        )),
        None => None,
    };
    let (title, cs) = curves(a.number, n, a.seed, trace).map_err(lab_err)?;
    let obs = Progress::new(a.out.json);
    let mut rs = Vec::new();
    for c in &cs {
        rs.push(lab::simulate(&c.cfg, 1, 20_000_000, 0.95, &c.label, &obs).map_err(lab_err)?);
    }
    let mut series = Vec::new();
    for (c, r) in cs.iter().zip(&rs) {
        series.push(report::Series::new(
            c.label.clone(),
            r.ccdf.iter().map(|&(x, p)| (us(x), p)).collect(),
        ));
    }
    let written = output::write_ccdf_outputs(&out, &title, &series)?;
    let claims = claims(a.number, &cs, &rs);
    let figure = report::paper_figure::Figure {
        number: a.number,
        title,
        curves: cs,
        results: rs,
        claims,
    };
    if a.out.json {
        print_json(&figure, &written)?;
    } else {
        output::print_with(|w| report::paper_figure::text(w, &figure, &written))?;
    }
    Ok(0)
}

/// The figure as one JSON object.
fn print_json(f: &report::paper_figure::Figure, written: &[String]) -> anyhow::Result<()> {
    let curves: Vec<Value> = f
        .curves
        .iter()
        .zip(&f.results)
        .map(|(c, r)| {
            json!({
                "label": c.label,
                "workers": c.cfg.workers,
                "load": c.cfg.rate_per_s.map(|l| l * c.cfg.service.mean_ns() / 1e9 / f64::from(c.cfg.workers)),
                "requests": r.recorded,
                "response": r.response.distribution_json(),
                "response_ci": r.response.intervals_json(),
                "mean_us": us(r.mean_response_ns),
                "exact_response": c.exact.as_ref().map(|v| output::dist_json(v.iter().map(|(k, _, s)| (k.as_str(), s * 1e9)))),
            })
        })
        .collect();
    let cl: Vec<Value> = f
        .claims
        .iter()
        .map(|c| {
            json!({
                "claim": c.text, "paper": c.paper, "exact": c.exact, "simulated": c.simulated, "unit": c.unit,
                "tolerance": c.tolerance,
                "paper_agrees_with_exact": c.exact.map(|e| agrees(c, e)),
            })
        })
        .collect();
    output::print_json(&json!({
        "figure": f.number, "title": f.title, "service_us": us(SERVICE_NS),
        "curves": curves, "claims": cl, "written": written,
    }))?;
    Ok(())
}
