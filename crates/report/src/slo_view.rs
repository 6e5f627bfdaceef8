//! An SLO's verdicts for CI: the terminal lines, JUnit XML (one testcase per condition and per
//! point) and a Markdown table (a GitHub job summary).

use std::fmt::Write as _;

use lab::{SloReport, Verdict};

/// One line per condition, then the SLO's verdict.
pub fn lines(w: &mut dyn std::io::Write, r: &SloReport) -> std::io::Result<()> {
    writeln!(
        w,
        "SLO {} (view {}): {}",
        r.text,
        r.view,
        r.verdict.as_str()
    )?;
    for c in &r.conditions {
        writeln!(w, "  {}", c.line())?;
    }
    Ok(())
}

pub(crate) fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML: a `<testsuite>` per named report (a run, or a point of a sweep), a `<testcase>`
/// per condition; a violated condition is a `<failure>`, an undecided one a `<failure>` when
/// `undecided_fails`, else `<skipped>`.
pub fn junit(suites: &[(String, SloReport)], undecided_fails: bool) -> String {
    let count = |f: &dyn Fn(Verdict) -> bool| -> usize {
        suites
            .iter()
            .flat_map(|(_, r)| r.conditions.iter())
            .filter(|c| f(c.verdict))
            .count()
    };
    let fails = |v: Verdict| v == Verdict::Violates || (v == Verdict::Undecided && undecided_fails);
    let skips = |v: Verdict| v == Verdict::Undecided && !undecided_fails;
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<testsuites name=\"tailscope slo\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" errors=\"0\">",
        count(&|_| true),
        count(&fails),
        count(&skips)
    );
    for (name, r) in suites {
        let n = r.conditions.len();
        let f = r.conditions.iter().filter(|c| fails(c.verdict)).count();
        let k = r.conditions.iter().filter(|c| skips(c.verdict)).count();
        let _ = writeln!(
            s,
            "  <testsuite name=\"{}\" tests=\"{n}\" failures=\"{f}\" skipped=\"{k}\" errors=\"0\">",
            xml_escape(name)
        );
        for c in &r.conditions {
            let _ = write!(
                s,
                "    <testcase classname=\"{}\" name=\"{}\"",
                xml_escape(name),
                xml_escape(&c.condition)
            );
            let msg = xml_escape(&c.line());
            if fails(c.verdict) {
                let _ = writeln!(
                    s,
                    ">\n      <failure message=\"{msg}\" type=\"{}\">{msg}</failure>\n    </testcase>",
                    c.verdict.as_str()
                );
            } else if skips(c.verdict) {
                let _ = writeln!(s, ">\n      <skipped message=\"{msg}\"/>\n    </testcase>");
            } else {
                let _ = writeln!(
                    s,
                    ">\n      <system-out>{msg}</system-out>\n    </testcase>"
                );
            }
        }
        s.push_str("  </testsuite>\n");
    }
    s.push_str("</testsuites>\n");
    s
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// A Markdown table per named report: condition, view, measured with its interval, bound,
/// verdict.
pub fn markdown(suites: &[(String, SloReport)]) -> String {
    let mut s = String::new();
    for (name, r) in suites {
        let _ = writeln!(
            s,
            "### SLO `{}` — {}: **{}**\n",
            r.text.replace('`', "'"),
            md_escape(name),
            r.verdict.as_str()
        );
        s.push_str("| condition | view | measured [interval] | bound | verdict |\n");
        s.push_str("|---|---|---|---|---|\n");
        for c in &r.conditions {
            let f = |v: f64| lab::fmt_unit(v, c.unit);
            let measured = match (c.measured, c.lo, c.hi) {
                (Some(m), Some(lo), Some(hi)) => format!("{} [{}, {}]", f(m), f(lo), f(hi)),
                (Some(m), _, _) => f(m),
                _ => "—".to_string(),
            };
            let rel = if c.unit == "rps" { "≥" } else { "≤" };
            let mut verdict = c.verdict.as_str().to_string();
            if let Some(n) = &c.note {
                verdict.push_str(&format!(" ({n})"));
            }
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {rel} {} | {} |",
                c.condition.replace('`', "'"),
                c.view,
                md_escape(&measured),
                f(c.bound),
                md_escape(&verdict)
            );
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab::{ConditionResult, ViewChoice};

    fn report() -> SloReport {
        let c = |cond: &str, verdict| ConditionResult {
            condition: cond.into(),
            view: "user".into(),
            measured: Some(1800.0),
            lo: Some(1600.0),
            hi: Some(2000.0),
            bound: 1000.0,
            unit: "us",
            verdict,
            note: None,
        };
        SloReport {
            text: "p99<=1ms,p50<=3ms,p90<=1.9ms".into(),
            view: ViewChoice::Auto,
            conditions: vec![
                c("p99<=1ms", Verdict::Violates),
                c("p50<=3ms", Verdict::Meets),
                c("p90<=1.9ms", Verdict::Undecided),
            ],
            verdict: Verdict::Violates,
        }
    }

    #[test]
    fn junit_counts_and_says_what_was_measured() {
        let suites = vec![("run <a&b>".to_string(), report())];
        let x = junit(&suites, true);
        assert!(
            x.contains("tests=\"3\" failures=\"2\" skipped=\"0\""),
            "{x}"
        );
        assert!(
            x.contains("p99 user view 1.800 ms [1.600 ms, 2.000 ms] &gt; 1.000 ms"),
            "{x}"
        );
        assert!(x.contains("run &lt;a&amp;b&gt;"), "{x}");
        let y = junit(&suites, false);
        assert!(
            y.contains("tests=\"3\" failures=\"1\" skipped=\"1\""),
            "{y}"
        );
        let m = markdown(&suites);
        assert!(
            m.contains(
                "| `p99<=1ms` | user | 1.800 ms [1.600 ms, 2.000 ms] | ≤ 1.000 ms | violates |"
            ),
            "{m}"
        );
    }
}
