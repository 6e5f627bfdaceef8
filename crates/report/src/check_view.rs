//! `tailscope check`'s output for a person: a candidate against its baseline, one row per
//! point, view and percentile, with the verdict and the counts that give the exit code.

use std::fmt::Write as _;

use lab::check::Check;

/// An estimate in µs with its interval, in the estimate's unit (µs, ms or s, said once) to
/// 3 significant digits: "12.3 [6.17, 30.9] ms".
fn iv(i: Option<lab::check::Interval>) -> String {
    let Some(i) = i else {
        return "-".into();
    };
    let (scale, unit) = crate::figure::us_unit(i.value.abs());
    let f = |x: f64| crate::figure::sig3(x / scale);
    // An arm of an `ab` comparison has its estimate only: its interval is the ratio's.
    if i.lo.is_nan() || i.hi.is_nan() {
        format!("{} {unit}", f(i.value))
    } else {
        format!("{} [{}, {}] {unit}", f(i.value), f(i.lo), f(i.hi))
    }
}

/// A ratio with its interval.
fn ratio(i: Option<lab::check::Interval>) -> String {
    match i {
        Some(i) if i.lo.is_nan() || i.hi.is_nan() => format!("{:.2}×", i.value),
        Some(i) => format!("{:.2}× [{:.2}, {:.2}]", i.value, i.lo, i.hi),
        None => "-".into(),
    }
}

/// `check`'s terminal table: one row per point, view and percentile, then the counts.
pub fn table(w: &mut dyn std::io::Write, c: &Check) -> std::io::Result<()> {
    writeln!(
        w,
        "check {kind} {} against {kind} {} · tolerance {:.0} %",
        c.candidate,
        c.baseline,
        c.tolerance * 100.0,
        kind = c.kind,
    )?;
    writeln!(
        w,
        "  worse when the ratio's interval lies above {:.3}, better when below {:.3}",
        1.0 + c.tolerance,
        1.0 / (1.0 + c.tolerance),
    )?;
    for d in &c.differences {
        writeln!(w, "  forced despite: {d}")?;
    }
    for n in &c.notes {
        writeln!(w, "  note: {n}")?;
    }
    // A sweep's rows are grouped under their point's label (a line of its own), so that a row
    // fits 100 columns.
    let head = format!(
        "{:<6} {:<6} {:>22} {:>22} {:>21}  verdict",
        "view", "pct", "baseline [95 %]", "candidate [95 %]", "ratio [interval]"
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
    let mut point = None;
    for r in &c.rows {
        let label = r.point.as_ref().map(|p| p.label());
        if label.is_some() && label != point {
            writeln!(w, "{}", label.as_deref().unwrap_or_default())?;
            point = label;
        }
        let mut line = String::new();
        let _ = write!(
            line,
            "{:<6} {:<6} {:>22} {:>22} {:>21}  {}",
            r.view,
            r.percentile,
            iv(r.baseline_us),
            iv(r.candidate_us),
            ratio(r.ratio),
            r.verdict
        );
        if let Some(why) = r.why.as_deref() {
            // Said inline when it is this row's alone and fits the 100 columns; else once,
            // under the table.
            let inline = line.chars().count() + why.chars().count() + 3 <= 100;
            if !inline && !shared.contains(&why) {
                shared.push(why);
            }
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
    counts_line(w, &c.counts, c.regression.then_some("regression"))
}

/// The verdicts' counts ("3 same, 1 worse") and the conclusion: `regression` names it (exit 3),
/// else "no regression".
pub(crate) fn counts_line(
    w: &mut dyn std::io::Write,
    counts: &std::collections::BTreeMap<String, usize>,
    regression: Option<&str>,
) -> std::io::Result<()> {
    let counts: Vec<String> = counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    match regression {
        Some(what) => writeln!(w, "{} → {what} (exit 3)", counts.join(", ")),
        None => writeln!(w, "{} → no regression", counts.join(", ")),
    }
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
        // A reason of one row alone that would push it past 100 columns: a footnote too.
        assert!(text.contains("undecided [2]"), "{text}");
        assert!(text.contains("[2] too few requests"), "{text}");
    }

    #[test]
    fn notes_print_one_line_each_under_the_heading() {
        let note = "the baseline's address differs: nullrpc://127.0.0.1:38153 (baseline) vs nullrpc://127.0.0.1:43355 (candidate); compared as the same target";
        let text = printed(vec![note.into()], Vec::new());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("check run 2 against run 1"), "{text}");
        assert!(lines[1].starts_with("  worse when"), "{text}");
        assert_eq!(lines[2], format!("  note: {note}"));
    }

    /// Every line but the notes' fits 100 columns: ms-scale figures with their intervals, a
    /// sweep's point labels (a line of their own) and a long reason of one row alone.
    #[test]
    fn rows_fit_a_hundred_columns() {
        let iv = |value: f64| lab::check::Interval {
            value,
            lo: value * 0.5,
            hi: value * 2.5,
        };
        let row = |point: Option<f64>, why: Option<&str>| lab::check::CheckRow {
            point: point.map(|p| lab::check::PointKey {
                params: [("server-threads".to_string(), "4".to_string())].into(),
                offered_rps: 12_000.0,
                load_pct: Some(p),
            }),
            view: "server".into(),
            percentile: "p99.99".into(),
            baseline_us: Some(iv(12_345.6)),
            candidate_us: Some(iv(123_456.7)),
            ratio: Some(iv(10.0)),
            verdict: lab::check::CheckVerdict::Undecided,
            why: why.map(str::to_string),
        };
        let long =
            "the baseline's interval reaches too far: its upper end is over 29 times its lower";
        let text = printed(
            Vec::new(),
            vec![
                row(Some(30.0), None),
                row(Some(30.0), Some(long)),
                row(Some(60.0), Some("few")),
            ],
        );
        for l in text.lines() {
            assert!(
                l.chars().count() <= 100,
                "{} columns: {l}\n{text}",
                l.chars().count()
            );
        }
        assert!(text.contains(&format!("[1] {long}")), "{text}");
        assert!(text.contains("undecided (few)"), "{text}");
        assert_eq!(text.matches("server-threads=4").count(), 2, "{text}");
    }
}
