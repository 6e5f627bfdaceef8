//! `tailscope model figure N`: Tales of the Tail §2, Figures 1–4, re-derived (`lab::figures`):
//! the curves simulated beside exact theory, the paper's statements checked, printed and
//! plotted here.

use std::path::PathBuf;

use report::model_view::{figure_series, FigureJson};
use report::paper_figure::Figure;

use super::progress::Progress;
use crate::cli::FigureArgs;
use crate::exit::usage;
use crate::limits;
use crate::output;

pub fn run(a: &FigureArgs) -> anyhow::Result<i32> {
    let n = a.requests.0;
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
        Some(p) => {
            let text = format!("trace:{}", p.display());
            let t = lab::model_query::read_arrival(&text, a.trace_unit)?;
            Some((t, p.display().to_string()))
        }
        None => None,
    };
    let obs = Progress::new(a.out.json);
    let f = lab::model_query::figure(a.number, n, a.seed, trace, &obs)?;
    let (title, curves, results, claims) = (f.title, f.curves, f.results, f.claims);
    let figure = Figure {
        number: a.number,
        title,
        curves,
        results,
        claims,
    };
    let written = output::write_ccdf_outputs(&out, &figure.title, &figure_series(&figure))?;
    let json = FigureJson::of(&figure, &written);
    output::print_json_or(a.out.json, &json, |w| {
        report::paper_figure::text(w, &figure, &written)
    })
}
