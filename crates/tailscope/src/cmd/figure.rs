//! `tailscope model figure N`: Tales of the Tail §2, Figures 1–4, re-derived (`lab::figures`):
//! the curves simulated beside exact theory, the paper's statements checked, printed and
//! plotted here.

use std::path::PathBuf;

use lab::figures::{agrees, claims, curves, exact_q, q, LOGNORMAL_SIGMA, PARETO_SHAPE, SERVICE_NS};
use serde_json::{json, Value};

use super::model::{parse_unit, read_trace};
use super::progress::Progress;
use super::target::lab_err;
use crate::cli::FigureArgs;
use crate::exit::{usage, OrUsage};
use crate::limits;
use crate::output::{self, fmt_ns, outln, us};

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
    let figure = Figure {
        number: a.number,
        title,
        curves: cs,
        results: rs,
        claims,
    };
    if a.out.json {
        print_json(&figure, &written)?;
    } else {
        print_text(&figure, &written)?;
    }
    Ok(0)
}

/// A figure's simulated curves and the paper's claims checked against them.
struct Figure {
    number: u32,
    title: String,
    curves: Vec<lab::figures::Curve>,
    results: Vec<lab::SimResult>,
    claims: Vec<lab::figures::Claim>,
}

/// The figure as one JSON object.
fn print_json(f: &Figure, written: &[String]) -> anyhow::Result<()> {
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

/// The figure for a person: its quantiles per curve (simulated, and exact where theory has
/// them), each claim of the paper against both, and the files written.
fn print_text(f: &Figure, written: &[String]) -> anyhow::Result<()> {
    outln!("{}", f.title)?;
    if f.number == 1 {
        outln!(
            "(lognormal σ = {LOGNORMAL_SIGMA} and Pareto α = {PARETO_SHAPE} are our choices: the paper does not give them; \
             its Wikipedia trace is not shipped — add one with --trace PATH)"
        )?;
    }
    outln!(
        "{:<28} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "response time",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "p99.99"
    )?;
    let keys = ["p50", "p90", "p99", "p99.9", "p99.99"];
    for (c, r) in f.curves.iter().zip(&f.results) {
        let row: Vec<String> = keys.iter().map(|k| fmt_ns(q(r, k))).collect();
        outln!(
            "{:<28} {:>9} {:>9} {:>9} {:>9} {:>9}",
            format!("{} (sim)", c.label),
            row[0],
            row[1],
            row[2],
            row[3],
            row[4]
        )?;
        if c.exact.is_some() {
            let row: Vec<String> = keys
                .iter()
                .map(|k| exact_q(c, k).map(fmt_ns).unwrap_or_default())
                .collect();
            outln!(
                "{:<28} {:>9} {:>9} {:>9} {:>9} {:>9}",
                format!("{} (exact)", c.label),
                row[0],
                row[1],
                row[2],
                row[3],
                row[4]
            )?;
        }
    }
    for c in &f.claims {
        let exact = c
            .exact
            .map(|e| format!("exact {e:.2}{}", c.unit))
            .unwrap_or_else(|| "no exact form".into());
        outln!(
            "paper: {} — paper {:.0}{u}, {exact}, simulated {:.2}{u}",
            c.text,
            c.paper,
            c.simulated,
            u = c.unit
        )?;
        if let Some(e) = c.exact {
            if !agrees(c, e) {
                outln!(
                    "  the paper's text and exact theory disagree: the exact value is {e:.2}{}",
                    c.unit
                )?;
            }
        }
    }
    for w in written {
        outln!("wrote {w}")?;
    }
    Ok(())
}
