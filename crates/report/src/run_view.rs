//! `tailscope run`'s output: one measured run (its `--json` object or its terminal view with
//! the SLO, the precision reached, the agents and the files written), and `run --repeat`'s
//! repeats with their combination.

use std::io::{self, Write};

use lab::{Repeated, Run, SloReport};
use serde_json::{json, Value};

use crate::Series;

/// The run's `--json` object: [`Run::to_json`] with the files written and the SLO's report.
pub fn run_json(run: &Run, slo: Option<&SloReport>, written: &[String]) -> Value {
    let mut v = run.to_json();
    v["written"] = json!(written);
    if let Some(r) = slo {
        v["slo"] = json!(r);
    }
    v
}

/// The run for a person: the run on one screen (with `detail`, everything measured), its SLO
/// verdicts, whether it reached `--precision`, its agents, then the files written.
pub fn run_lines(
    w: &mut dyn Write,
    run: &Run,
    slo: Option<&SloReport>,
    written: &[String],
    detail: bool,
) -> io::Result<()> {
    if detail {
        crate::terminal::run(w, run)?;
    } else {
        crate::brief::run(w, run)?;
    }
    if let Some(r) = slo {
        crate::slo_view::lines(w, r)?;
    }
    if let Some(c) = &run.convergence {
        match &c.why_not {
            None => writeln!(
                w,
                "precision {}: converged after {:.1} s of measurement",
                c.precision.text, c.after_s
            )?,
            Some(why) => writeln!(
                w,
                "precision {}: did NOT converge ({why})",
                c.precision.text
            )?,
        }
    }
    if let Some(agents) = &run.agents {
        crate::agents_view::agents(w, agents)?;
    }
    for f in written {
        writeln!(w, "wrote {f}")?;
    }
    Ok(())
}

/// The measured and the ideal CCDF of a run, for its plot (`--plot`, `--ccdf`).
pub fn run_series(label: &str, an: &analysis::RunAnalysis) -> Vec<Series> {
    let mut series = vec![Series::new(
        format!("measured {label}"),
        an.measured_ccdf_us.clone(),
    )];
    if !an.ideal_ccdf_us.is_empty() {
        let mut s = Series::new("ideal (same arrivals)", an.ideal_ccdf_us.clone());
        s.dashed = true;
        series.push(s);
    }
    series
}

/// What `run --repeat N` judged: the combined point's SLO report and each repeat's.
pub struct RepeatedSlo<'a> {
    pub combined: Option<&'a SloReport>,
    pub each: &'a [SloReport],
}

/// `run --repeat N`'s `--json` object: the experiment, the combination of the repeats (the
/// median with an interval from their spread), every repeat's run, the SLO, the files written.
pub fn repeated_json(
    experiment: i64,
    runs: &[Run],
    p: &Repeated,
    slo: &RepeatedSlo,
    written: &[String],
) -> Value {
    let us = |c: &Option<lab::Combined>| c.as_ref().map(|c| c.intervals_json());
    json!({
        "experiment_id": experiment,
        "status": p.status,
        "headline_view": p.headline,
        "repeat": p.repeats,
        "method": p.method,
        "combined": {
            "user": us(&p.user),
            "server": us(&p.server),
            "counted": {
                "user": p.user.as_ref().map_or(0, |c| c.counted),
                "server": p.server.as_ref().map_or(0, |c| c.counted),
            },
            "excess": p.excess.as_ref().map(|x| x.summary.quantiles.iter().map(|q| {
                (q.key.clone(), json!({"value": q.est.value, "lo": q.est.lo, "hi": q.est.hi}))
            }).collect::<serde_json::Map<_, _>>()),
        },
        "result": p,
        "runs": runs.iter().map(Run::to_json).collect::<Vec<_>>(),
        "slo": slo.combined.map(|c| {
            let mut v = json!(c);
            v["repeats"] = json!(slo.each);
            v
        }),
        "written": written,
    })
}

/// `run --repeat N` for a person: the repeats, their combination, its SLO, the files written.
pub fn repeated_lines(
    w: &mut dyn Write,
    runs: &[Run],
    p: &Repeated,
    combined: Option<&SloReport>,
    written: &[String],
) -> io::Result<()> {
    crate::repeat_view::repeated(w, runs, p)?;
    if let Some(c) = combined {
        writeln!(w, "of the combined repeats:")?;
        crate::slo_view::lines(w, c)?;
    }
    for f in written {
        writeln!(w, "wrote {f}")?;
    }
    Ok(())
}
