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
    writeln!(
        w,
        "{:<28} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "response time", "p50", "p90", "p99", "p99.9", "p99.99"
    )?;
    let keys = ["p50", "p90", "p99", "p99.9", "p99.99"];
    for (c, r) in f.curves.iter().zip(&f.results) {
        let row: Vec<String> = keys.iter().map(|k| fmt_ns(q(r, k))).collect();
        writeln!(
            w,
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
            writeln!(
                w,
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
