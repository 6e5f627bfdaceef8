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
    // A reason many rows share (an invalid view, a caveat of the method) is said once, under
    // the table, and each of those rows points to it.
    let mut shared: Vec<&str> = Vec::new();
    for r in &c.rows {
        if let Some(why) = r.why.as_deref() {
            let n = c
                .rows
                .iter()
                .filter(|x| x.why.as_deref() == Some(why))
                .count();
            if n > 1 && !shared.contains(&why) {
                shared.push(why);
            }
        }
    }
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
        if let Some(why) = r.why.as_deref() {
            match shared.iter().position(|s| *s == why) {
                Some(k) => {
                    let _ = write!(line, " [{}]", k + 1);
                }
                None => {
                    let _ = write!(line, " ({why})");
                }
            }
        }
        writeln!(w, "{line}")?;
    }
    for (k, why) in shared.iter().enumerate() {
        writeln!(w, "[{}] {why}", k + 1)?;
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

    /// The table of a check of run 2 against run 1 with these notes and rows.
    fn printed(notes: Vec<String>, rows: Vec<lab::check::CheckRow>) -> String {
        let c = Check {
            kind: "run".into(),
            candidate: 2,
            baseline: 1,
            tolerance: 0.1,
            differences: Vec::new(),
            notes,
            rows,
            counts: Default::default(),
            regression: false,
            caveats: Vec::new(),
        };
        let mut out = Vec::new();
        table(&mut out, &c).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_reason_many_rows_share_is_said_once() {
        let row = |pct: &str, why: Option<&str>| lab::check::CheckRow {
            point: None,
            view: "user".into(),
            percentile: pct.into(),
            baseline_us: None,
            candidate_us: None,
            ratio: None,
            verdict: lab::check::CheckVerdict::Undecided,
            why: why.map(str::to_string),
        };
        let long = "the candidate's user view is invalid: the generator was late";
        let text = printed(
            Vec::new(),
            vec![
                row("p50", Some(long)),
                row("p99", Some(long)),
                row("p99.9", Some("too few requests")),
                row("p99.99", None),
            ],
        );
        assert_eq!(text.matches(long).count(), 1, "{text}");
        assert_eq!(text.matches("undecided [1]").count(), 2, "{text}");
        assert!(text.contains(&format!("[1] {long}")), "{text}");
        assert!(text.contains("undecided (too few requests)"), "{text}");
    }

    #[test]
    fn notes_print_one_line_each_under_the_heading() {
        let note = "the baseline's address differs: nullrpc://127.0.0.1:38153 (baseline) vs nullrpc://127.0.0.1:43355 (candidate); compared as the same target";
        let text = printed(vec![note.into()], Vec::new());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("check run 2 against run 1"), "{text}");
        assert_eq!(lines[1], format!("  note: {note}"));
    }
}
