//! `tailscope ab`'s outputs: the answer on one screen (the verdicts of the view read first,
//! then both views' rows, the carry-over check, the arms), its `--json` object, and the
//! comparison (with each arm's SLO) as JUnit XML and a Markdown table for CI.

use std::fmt::Write as _;

use lab::ab::{AbResult, AbRow, Arm};
use lab::check::CheckVerdict;
use lab::{Run, SloReport, View};

use crate::slo_view::xml_escape;

/// "1.16× [1.13, 1.19]".
fn ratio(r: &AbRow) -> String {
    match r.ratio {
        Some(i) => format!("{:.3}× [{:.3}, {:.3}]", i.value, i.lo, i.hi),
        None => "-".into(),
    }
}

fn us(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            if v >= 1e4 {
                format!("{:.2} ms", v / 1e3)
            } else {
                format!("{v:.1} µs")
            }
        }
        _ => "-".into(),
    }
}

/// The verdicts of the view read, in one line: "p50 worse ×1.16 [1.13, 1.19] · p99 …".
pub fn headline(r: &AbResult) -> String {
    let parts: Vec<String> = r
        .decide
        .iter()
        .filter_map(|k| r.row(r.decided_view, k))
        .map(|row| match row.ratio {
            Some(i) => format!(
                "{} {} ×{:.3} [{:.3}, {:.3}]",
                row.percentile, row.verdict, i.value, i.lo, i.hi
            ),
            None => format!("{} {}", row.percentile, row.verdict),
        })
        .collect();
    parts.join(" · ")
}

/// Why a row is undecided, shortened for the table (the JSON keeps it whole).
fn short_why(row: &AbRow) -> String {
    match (row.needs_pairs, &row.why) {
        (Some(n), _) => format!("~{n} pairs would decide it"),
        (None, Some(w)) if w.starts_with("too few pairs") => "too few pairs".into(),
        // An invalid view's reason is said once, under the table.
        (None, Some(w)) if w.contains(" view is invalid") || w.contains(" has no ") => {
            "not compared".into()
        }
        (None, Some(w)) => w.clone(),
        (None, None) if row.verdict == CheckVerdict::Undecided && row.ratio.is_some() => {
            "on the tolerance's edge".into()
        }
        _ => String::new(),
    }
}

fn arm_line(r: &AbResult, arm: Arm, run: Option<&Run>) -> String {
    let a = r.arm(arm);
    let mut s = format!("{arm:<9} '{}' → {}", a.spec, a.url);
    if let Some(id) = a.run_id {
        let _ = write!(s, " · run {id}");
    }
    let _ = write!(s, " · {}", a.status);
    if let Some(run) = run {
        let _ = write!(
            s,
            " · user view {}",
            if run.views.user.valid {
                "valid"
            } else {
                "invalid"
            }
        );
    }
    if let Some(e) = &a.error {
        let _ = write!(s, " · {e}");
    }
    s
}

/// The terminal screen. `runs` are the arms' runs (baseline, candidate) when stored, `slo`
/// each arm's SLO report.
pub fn lines(
    w: &mut dyn std::io::Write,
    r: &AbResult,
    runs: [Option<&Run>; 2],
    slo: &[(Arm, SloReport)],
    written: &[String],
) -> std::io::Result<()> {
    writeln!(
        w,
        "ab experiment {} · candidate ÷ baseline at {:.0} req/s, tolerance {:.0} %",
        r.experiment,
        r.rate_rps,
        r.tolerance * 100.0
    )?;
    writeln!(
        w,
        "{} pairs of {:.3} s slices, same arrivals per pair, counterbalanced · {} · {:.0} s",
        r.pairs, r.slice_s, r.stopped, r.elapsed_s
    )?;
    writeln!(w, "{} view: {}", r.decided_view, headline(r))?;
    writeln!(w)?;
    writeln!(
        w,
        "{:<7} {:<7} {:>10} {:>10}  {:<27} {:<9} ",
        "view",
        "pct",
        "baseline",
        "candidate",
        format!("ratio [{:.1} % paired]", r.confidence_per_look * 100.0),
        "verdict"
    )?;
    for row in &r.rows {
        let why = short_why(row);
        let mark = if row.unstood.is_some() {
            crate::terminal::NOT_STOOD_BEHIND
        } else {
            ""
        };
        writeln!(
            w,
            "{:<7} {:<7} {:>10} {:>10}  {:<27} {:<9} {}",
            row.view.as_str(),
            format!("{}{mark}", row.percentile),
            us(row.baseline_us),
            us(row.candidate_us),
            ratio(row),
            row.verdict.to_string(),
            why
        )?;
    }
    // An invalid view's rows all share one reason: said once.
    for v in [View::User, View::Server] {
        if let Some(why) = r
            .rows
            .iter()
            .find(|x| {
                x.view == v
                    && x.ratio.is_none()
                    && x.why
                        .as_deref()
                        .is_some_and(|w| w.contains(" view is invalid"))
            })
            .and_then(|x| x.why.as_deref())
        {
            writeln!(w, "{v} view not compared: {why}")?;
        }
    }
    for row in r.rows.iter().filter(|x| x.unstood.is_some()) {
        writeln!(
            w,
            "{} {} {}: {}",
            crate::terminal::NOT_STOOD_BEHIND,
            row.view,
            row.percentile,
            row.unstood.as_deref().unwrap_or_default()
        )?;
    }
    for c in &r.carry_over {
        writeln!(
            w,
            "carry-over ({} {}): candidate first ×{:.3}, baseline first ×{:.3} → {} (×{:.3} [{:.3}, {:.3}], {}+{} pairs)",
            c.view,
            c.percentile,
            c.candidate_first,
            c.baseline_first,
            if c.detected {
                "the order matters: lengthen --gap or --settle"
            } else {
                "none detected"
            },
            c.effect.value,
            c.effect.lo,
            c.effect.hi,
            c.pairs.0,
            c.pairs.1
        )?;
    }
    writeln!(w, "{}", arm_line(r, Arm::Baseline, runs[0]))?;
    writeln!(w, "{}", arm_line(r, Arm::Candidate, runs[1]))?;
    for (arm, s) in slo {
        write!(w, "{arm}: ")?;
        crate::slo_view::lines(w, s)?;
    }
    for p in written {
        writeln!(w, "wrote {p}")?;
    }
    crate::check_view::counts_line(
        w,
        &r.counts,
        r.regression.then_some("the candidate is worse"),
    )
}

/// The `--json` object: the stored result, each arm's SLO report, the files written and the
/// exit code.
pub fn json(
    r: &AbResult,
    slo: &[(Arm, SloReport)],
    written: &[String],
    exit_code: i32,
) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap_or(serde_json::Value::Null);
    let slo: serde_json::Map<String, serde_json::Value> = slo
        .iter()
        .map(|(a, s)| (a.to_string(), serde_json::to_value(s).unwrap_or_default()))
        .collect();
    v["slo"] = serde_json::Value::Object(slo);
    v["written"] = serde_json::json!(written);
    v["exit_code"] = serde_json::json!(exit_code);
    v
}

fn row_line(row: &AbRow) -> String {
    let mut s = format!(
        "{} {}: {} {}",
        row.view.as_str(),
        row.percentile,
        row.verdict,
        ratio(row)
    );
    if let Some(w) = &row.why {
        let _ = write!(s, " ({w})");
    }
    if let Some(u) = &row.unstood {
        let _ = write!(s, " ({u})");
    }
    s
}

/// JUnit XML: a suite for the comparison (a testcase per view and percentile: `worse` is a
/// failure, `undecided` skipped — as the exit code, which only `worse` makes 3) and one per
/// arm's SLO (an undecided condition a failure when `undecided_fails`, as for `run`).
pub fn junit(r: &AbResult, slo: &[(Arm, SloReport)], undecided_fails: bool) -> String {
    let fails = |v: CheckVerdict| v == CheckVerdict::Worse;
    let skips = |v: CheckVerdict| v == CheckVerdict::Undecided;
    let (n, f, k) = (
        r.rows.len(),
        r.rows.iter().filter(|x| fails(x.verdict)).count(),
        r.rows.iter().filter(|x| skips(x.verdict)).count(),
    );
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(s, "<testsuites name=\"tailscope ab\">");
    let name = format!("ab {} vs {}", r.candidate.spec, r.baseline.spec);
    let _ = writeln!(
        s,
        "  <testsuite name=\"{}\" tests=\"{n}\" failures=\"{f}\" skipped=\"{k}\" errors=\"0\">",
        xml_escape(&name)
    );
    for row in &r.rows {
        let msg = xml_escape(&row_line(row));
        let _ = write!(
            s,
            "    <testcase classname=\"{}\" name=\"{} {}\"",
            xml_escape(&name),
            row.view.as_str(),
            xml_escape(&row.percentile)
        );
        if fails(row.verdict) {
            let _ = writeln!(
                s,
                ">\n      <failure message=\"{msg}\" type=\"{}\">{msg}</failure>\n    </testcase>",
                row.verdict
            );
        } else if skips(row.verdict) {
            let _ = writeln!(s, ">\n      <skipped message=\"{msg}\"/>\n    </testcase>");
        } else {
            let _ = writeln!(
                s,
                ">\n      <system-out>{msg}</system-out>\n    </testcase>"
            );
        }
    }
    s.push_str("  </testsuite>\n");
    if !slo.is_empty() {
        let suites: Vec<(String, SloReport)> = slo
            .iter()
            .map(|(a, rep)| (format!("{a} SLO"), rep.clone()))
            .collect();
        let inner = crate::slo_view::junit(&suites, undecided_fails);
        // Its <testsuite> elements, inside this document's <testsuites>.
        for line in inner.lines().filter(|l| l.starts_with("  ")) {
            s.push_str(line);
            s.push('\n');
        }
    }
    s.push_str("</testsuites>\n");
    s
}

/// A Markdown table of the comparison (and each arm's SLO), for a CI job summary.
pub fn markdown(r: &AbResult, slo: &[(Arm, SloReport)]) -> String {
    let mut s = format!(
        "### ab: `{}` vs `{}` — {}\n\n{} pairs of {:.3} s slices at {:.0} req/s, tolerance {:.0} %: {}\n\n",
        r.candidate.spec.replace('`', "'"),
        r.baseline.spec.replace('`', "'"),
        if r.regression { "**worse**" } else { "no regression" },
        r.pairs,
        r.slice_s,
        r.rate_rps,
        r.tolerance * 100.0,
        r.stopped
    );
    s.push_str("| view | percentile | baseline | candidate | ratio [interval] | verdict |\n");
    s.push_str("|---|---|---|---|---|---|\n");
    for row in &r.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            row.view.as_str(),
            row.percentile,
            us(row.baseline_us),
            us(row.candidate_us),
            ratio(row),
            row.verdict
        );
    }
    s.push('\n');
    if !slo.is_empty() {
        let suites: Vec<(String, SloReport)> = slo
            .iter()
            .map(|(a, rep)| (a.to_string(), rep.clone()))
            .collect();
        s.push_str(&crate::slo_view::markdown(&suites));
    }
    s
}
