//! `tailscope figure N`: a figure of the Tales of the Tail paper re-made by simulation, for a
//! person: its quantiles per curve (simulated, and exact where theory has them) and each of
//! the paper's claims against both.

use std::io::{self, Write};

use lab::figures::{agrees, exact_q, q, Claim, Curve, LOGNORMAL_SIGMA, PARETO_SHAPE};
use lab::SimResult;

use crate::terminal::fmt_ns;

/// A figure's simulated curves and the paper's claims checked against them.
pub struct Figure {
    pub number: u32,
    pub title: String,
    pub curves: Vec<Curve>,
    pub results: Vec<SimResult>,
    pub claims: Vec<Claim>,
}

/// The figure for a person: its quantiles per curve (simulated, and exact where theory has
/// them), each claim of the paper against both, and the files written.
pub fn text(w: &mut dyn Write, f: &Figure, written: &[String]) -> io::Result<()> {
    writeln!(w, "{}", f.title)?;
    if f.number == 1 {
        writeln!(
        w,
            "(lognormal σ = {LOGNORMAL_SIGMA} and Pareto α = {PARETO_SHAPE} are our choices: the paper does not give them; \
             its Wikipedia trace is not shipped — add one with --trace PATH)"
        )?;
    }
    // One row: its name and five cells.
    let row = |w: &mut dyn Write, name: &str, cells: [&str; 5]| {
        writeln!(
            w,
            "{:<28} {:>9} {:>9} {:>9} {:>9} {:>9}",
            name, cells[0], cells[1], cells[2], cells[3], cells[4]
        )
    };
    let keys = ["p50", "p90", "p99", "p99.9", "p99.99"];
    row(w, "response time", keys)?;
    for (c, r) in f.curves.iter().zip(&f.results) {
        let sim = keys.map(|k| fmt_ns(q(r, k)));
        row(
            w,
            &format!("{} (sim)", c.label),
            sim.each_ref().map(String::as_str),
        )?;
        if c.exact.is_some() {
            let exact = keys.map(|k| exact_q(c, k).map(fmt_ns).unwrap_or_default());
            row(
                w,
                &format!("{} (exact)", c.label),
                exact.each_ref().map(String::as_str),
            )?;
        }
    }
    for c in &f.claims {
        let exact = c
            .exact
            .map(|e| format!("exact {e:.2}{}", c.unit))
            .unwrap_or_else(|| "no exact form".into());
        writeln!(
            w,
            "paper: {} — paper {:.0}{u}, {exact}, simulated {:.2}{u}",
            c.text,
            c.paper,
            c.simulated,
            u = c.unit
        )?;
        if let Some(e) = c.exact {
            if !agrees(c, e) {
                writeln!(
                    w,
                    "  the paper's text and exact theory disagree: the exact value is {e:.2}{}",
                    c.unit
                )?;
            }
        }
    }
    for path in written {
        writeln!(w, "wrote {path}")?;
    }
    Ok(())
}
