//! `tailscope check`'s output for a person: a candidate against its baseline, one row per
//! point, view and percentile, with the verdict and the counts that give the exit code.

use std::fmt::Write as _;

use lab::check::Check;

fn iv(i: Option<lab::check::Interval>, unit: &str) -> String {
    match i {
        // An arm of an `ab` comparison has its estimate only: its interval is the ratio's.
        Some(i) if i.lo.is_nan() || i.hi.is_nan() => format!("{:.2}{unit}", i.value),
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
    for n in &c.notes {
        writeln!(w, "  note: {n}")?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_print_one_line_each_under_the_heading() {
        let c = Check {
            kind: "run".into(),
            candidate: 2,
            baseline: 1,
            tolerance: 0.1,
            differences: Vec::new(),
            notes: vec![
                "the baseline's address differs: nullrpc://127.0.0.1:38153 (baseline) vs nullrpc://127.0.0.1:43355 (candidate); compared as the same target".into(),
            ],
            rows: Vec::new(),
            counts: Default::default(),
            regression: false,
            caveats: Vec::new(),
        };
        let mut out = Vec::new();
        table(&mut out, &c).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("check run 2 against run 1"), "{text}");
        assert_eq!(
            lines[1],
            "  note: the baseline's address differs: nullrpc://127.0.0.1:38153 (baseline) vs nullrpc://127.0.0.1:43355 (candidate); compared as the same target"
        );
    }
}
