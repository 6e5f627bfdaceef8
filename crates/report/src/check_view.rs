//! `tailscope check`'s output for a person: a candidate against its baseline, one row per
//! point, view and percentile, with the verdict and the counts that give the exit code.

use std::fmt::Write as _;

use lab::check::Check;

fn iv(i: Option<lab::check::Interval>, unit: &str) -> String {
    match i {
        Some(i) => format!("{:.2}{unit} [{:.2}, {:.2}]", i.value, i.lo, i.hi),
        None => "-".into(),
    }
}

/// `check`'s terminal table: one row per point, view and percentile, then the counts.
pub fn table(w: &mut dyn std::io::Write, c: &Check) -> std::io::Result<()> {
    writeln!(
        w,
        "check {kind} {} against {kind} {} · tolerance {:.0} % (worse when the ratio's interval lies above {:.3}, better below {:.3})",
        c.candidate,
        c.baseline,
        c.tolerance * 100.0,
        1.0 + c.tolerance,
        1.0 / (1.0 + c.tolerance),
        kind = c.kind,
    )?;
    for d in &c.differences {
        writeln!(w, "  forced despite: {d}")?;
    }
    let with_points = c.rows.iter().any(|r| r.point.is_some());
    let mut head = String::new();
    if with_points {
        let _ = write!(head, "{:<28} ", "point");
    }
    let _ = write!(
        head,
        "{:<7} {:<7} {:>30} {:>30} {:>24}  verdict",
        "view", "pct", "baseline µs [95 %]", "candidate µs [95 %]", "ratio [interval]"
    );
    writeln!(w, "{head}")?;
    for r in &c.rows {
        let mut line = String::new();
        if with_points {
            let p = r.point.as_ref().map(|p| p.label()).unwrap_or_default();
            let _ = write!(line, "{p:<28} ");
        }
        let _ = write!(
            line,
            "{:<7} {:<7} {:>30} {:>30} {:>24}  {}",
            r.view,
            r.percentile,
            iv(r.baseline_us, ""),
            iv(r.candidate_us, ""),
            iv(r.ratio, "×"),
            r.verdict
        );
        if let Some(why) = &r.why {
            let _ = write!(line, " ({why})");
        }
        writeln!(w, "{line}")?;
    }
    for cv in &c.caveats {
        writeln!(w, "caveat: {cv}")?;
    }
    let counts: Vec<String> = c
        .counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    writeln!(
        w,
        "{}{}",
        counts.join(", "),
        if c.regression {
            " → regression (exit 3)"
        } else {
            " → no regression"
        }
    )
}
