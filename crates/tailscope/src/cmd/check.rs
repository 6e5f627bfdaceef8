//! `tailscope check CANDIDATE --baseline B`: parse, have `lab::check` compare the stored run
//! or experiment with its baseline (the store opened read-only), print the rows. Exit code 3
//! (`exit::REGRESSION`) when any row is worse, 1 when the candidate's measurement failed.

use std::fmt::Write as _;

use lab::check::{BaselineRef, Check, CheckError};

use super::common::open_existing_store;
use crate::cli::CheckArgs;
use crate::exit::{usage, REGRESSION};
use crate::output::{self, outln};

/// `--baseline`: an id, `label:NAME` or `latest`.
pub fn parse_baseline(s: &str) -> anyhow::Result<BaselineRef> {
    if s == "latest" {
        return Ok(BaselineRef::Latest);
    }
    if let Some(name) = s.strip_prefix("label:") {
        super::common::check_label(Some(name)).map_err(|_| {
            usage(format!(
                "--baseline label:NAME needs a label name, got '{s}'"
            ))
        })?;
        return Ok(BaselineRef::Label(name.to_string()));
    }
    s.parse::<i64>().map(BaselineRef::Id).map_err(|_| {
        usage(format!(
            "--baseline must be a run or experiment id, label:NAME or latest, got '{s}'"
        ))
    })
}

/// `--tolerance`: "10%" or "0.1" → 0.1, in [0, 1].
pub fn parse_tolerance(s: &str) -> anyhow::Result<f64> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(usage(format!(
            "--tolerance must be a percentage (10%) or a fraction (0.1) between 0 and 100 %, got '{s}'"
        ))),
    }
}

fn check_err(e: CheckError) -> anyhow::Error {
    if e.is_usage() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

pub fn run(a: &CheckArgs) -> anyhow::Result<i32> {
    let baseline = parse_baseline(&a.baseline)?;
    let tol = parse_tolerance(&a.tolerance)?;
    let (db_path, st) = open_existing_store(&a.db)?;
    let Some(st) = st else {
        return Err(usage(format!("no results store at {}", db_path.display())));
    };
    let (check, failed) = if a.experiment {
        let (c, row) = lab::check::check_experiments(&st, a.candidate, &baseline, tol, a.force)
            .map_err(check_err)?;
        (c, row.status.parse() == Ok(lab::RunStatus::Failed))
    } else {
        let (c, row) =
            lab::check::check_runs(&st, a.candidate, &baseline, tol, a.force).map_err(check_err)?;
        let status = row
            .summary
            .as_ref()
            .and_then(|s| s.get("status"))
            .and_then(|s| s.as_str())
            .unwrap_or(&row.status)
            .parse();
        (c, status == Ok(lab::RunStatus::Failed))
    };
    let code = if failed {
        1
    } else if check.regression {
        REGRESSION
    } else {
        0
    };
    if a.json {
        let mut v = serde_json::to_value(&check)?;
        v["candidate_failed"] = serde_json::json!(failed);
        v["exit_code"] = serde_json::json!(code);
        output::print_json(&v)?;
    } else {
        output::print_with(|w| table(w, &check))?;
        if failed {
            outln!("the candidate's measurement failed: its rows cannot be trusted (exit 1)")?;
        }
    }
    Ok(code)
}

fn iv(i: Option<lab::check::Interval>, unit: &str) -> String {
    match i {
        Some(i) => format!("{:.2}{unit} [{:.2}, {:.2}]", i.value, i.lo, i.hi),
        None => "-".into(),
    }
}

/// The terminal table: one row per point, view and percentile, then the counts.
fn table(w: &mut dyn std::io::Write, c: &Check) -> std::io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baselines_and_tolerances_parse_or_are_usage_errors() {
        assert_eq!(parse_baseline("latest").unwrap(), BaselineRef::Latest);
        assert_eq!(parse_baseline("12").unwrap(), BaselineRef::Id(12));
        assert_eq!(
            parse_baseline("label:v1.2").unwrap(),
            BaselineRef::Label("v1.2".into())
        );
        for bad in ["label:", "x", "label:a b"] {
            let e = parse_baseline(bad).unwrap_err();
            assert_eq!(crate::exit::code_of(&e), 2, "{bad}");
        }
        assert!((parse_tolerance("10%").unwrap() - 0.1).abs() < 1e-12);
        assert!((parse_tolerance("0.05").unwrap() - 0.05).abs() < 1e-12);
        for bad in ["-1%", "x", "200%", "NaN"] {
            let e = parse_tolerance(bad).unwrap_err();
            assert_eq!(crate::exit::code_of(&e), 2, "{bad}");
        }
    }
}
