//! `runs compare`: stored runs side by side per percentile, each against the first — the ratio,
//! and whether the difference is significant (the two 95 % intervals do not overlap: a
//! conservative test, since overlapping intervals can still differ) — as a terminal table, a
//! JSON object and an overlay of their CCDFs.

use std::io::{self, Write};

use serde_json::{json, Value};
use stats::STANDARD_QUANTILES;

use crate::figure::fmt_us;
use crate::stored::StoredRun;
use crate::Series;
use lab::summary::figure;

/// One run's estimate of one percentile, against the first run's.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub value_us: f64,
    pub lo_us: f64,
    pub hi_us: f64,
    /// This run ÷ the first (None for the first, or when the first has no value).
    pub ratio: Option<f64>,
    /// The intervals do not overlap (None for the first).
    pub significant: Option<bool>,
}

/// One percentile across the runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub key: String,
    pub cells: Vec<Option<Cell>>,
}

/// A run's heading.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub run_id: i64,
    pub target: String,
    pub status: String,
    pub rate_rps: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
}

/// Compares the runs' measured latency (the user's view), each against the first.
pub fn compare(runs: &[StoredRun]) -> Comparison {
    let columns = runs
        .iter()
        .map(|r| Column {
            run_id: r.id(),
            target: r.row.target.clone(),
            status: r.status().to_string(),
            rate_rps: r.facts.rate_rps,
        })
        .collect();
    let rows = STANDARD_QUANTILES
        .iter()
        .map(|(key, _)| {
            let est: Vec<Option<(f64, f64, f64)>> = runs
                .iter()
                .map(|r| {
                    let c = r.facts.measured_ci.as_ref()?.of(key)?;
                    Some((c.value, c.lo, c.hi))
                })
                .collect();
            let first = est.first().copied().flatten();
            let cells = est
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let (v, lo, hi) = (*e)?;
                    let (ratio, significant) = match (i, first) {
                        (0, _) | (_, None) => (None, None),
                        (_, Some((fv, flo, fhi))) => {
                            ((fv > 0.0).then(|| v / fv), Some(hi < flo || lo > fhi))
                        }
                    };
                    Some(Cell {
                        value_us: v,
                        lo_us: lo,
                        hi_us: hi,
                        ratio,
                        significant,
                    })
                })
                .collect();
            Row {
                key: key.to_string(),
                cells,
            }
        })
        .collect();
    Comparison { columns, rows }
}

const W: usize = 34;

/// The comparison for a terminal: a column per run, a row per percentile.
pub fn table(w: &mut dyn Write, c: &Comparison) -> io::Result<()> {
    let Some(first) = c.columns.first() else {
        return Ok(());
    };
    writeln!(
        w,
        "measured latency (intended send → received), 95 % intervals; ratio = run ÷ run {}; * = intervals do not overlap",
        first.run_id
    )?;
    let mut lines = [String::new(), String::new(), String::new()];
    for l in &mut lines {
        *l = format!("{:<8}", "");
    }
    let clip = |t: String| -> String {
        if t.chars().count() > W {
            t.chars().take(W - 1).chain(['…']).collect()
        } else {
            t
        }
    };
    for col in &c.columns {
        let rate = col
            .rate_rps
            .map(|r| format!("offered {r:.0} req/s"))
            .unwrap_or_default();
        for (l, t) in lines.iter_mut().zip([
            format!("run {} ({})", col.run_id, col.status),
            col.target.clone(),
            rate,
        ]) {
            *l += &format!(" {:<W$}", clip(t));
        }
    }
    for l in &lines {
        writeln!(w, "{}", l.trim_end())?;
    }
    for row in &c.rows {
        let mut line = format!("{:<8}", row.key);
        for cell in &row.cells {
            let s = match cell {
                None => "-".to_string(),
                Some(x) => {
                    let mut s = format!(
                        "{} [{}, {}]",
                        fmt_us(x.value_us),
                        fmt_us(x.lo_us),
                        fmt_us(x.hi_us)
                    );
                    if let Some(r) = x.ratio {
                        s += &format!(" {r:.2}×");
                    }
                    if x.significant == Some(true) {
                        s.push('*');
                    }
                    s
                }
            };
            line += &format!(" {s:<W$}");
        }
        writeln!(w, "{}", line.trim_end())?;
    }
    Ok(())
}

/// `{"runs": [...], "percentiles": [{"key", "runs": [{"run_id", "value_us", "lo_us", "hi_us",
/// "ratio", "significant"}]}]}`.
pub fn to_json(c: &Comparison) -> Value {
    let runs: Vec<Value> = c
        .columns
        .iter()
        .map(|col| {
            json!({"run_id": col.run_id, "target": col.target, "status": col.status,
                   "rate_rps": col.rate_rps})
        })
        .collect();
    let rows: Vec<Value> = c
        .rows
        .iter()
        .map(|row| {
            let cells: Vec<Value> = row
                .cells
                .iter()
                .zip(&c.columns)
                .map(|(cell, col)| match cell {
                    Some(x) => json!({"run_id": col.run_id, "value_us": x.value_us,
                        "lo_us": x.lo_us, "hi_us": x.hi_us, "ratio": x.ratio,
                        "significant": x.significant}),
                    None => json!({"run_id": col.run_id, "value_us": null}),
                })
                .collect();
            json!({"key": row.key, "runs": cells})
        })
        .collect();
    json!({"runs": runs, "percentiles": rows})
}

/// The runs' measured CCDFs for an overlay plot; a run whose curve could not be recomputed is
/// drawn through its stored percentiles.
pub fn series(runs: &[StoredRun]) -> Vec<Series> {
    runs.iter()
        .map(|r| {
            let label = format!(
                "run {} ({}{})",
                r.id(),
                r.status(),
                r.facts
                    .url
                    .as_deref()
                    .map(|u| format!(", {u}"))
                    .unwrap_or_default()
            );
            match &r.curves {
                Ok(c) => Series::new(label, c.user.measured.clone()),
                Err(_) => {
                    let pts = STANDARD_QUANTILES
                        .iter()
                        .filter_map(|(k, q)| Some((figure(r.facts.measured.as_ref(), k)?, 1.0 - q)))
                        .collect();
                    Series::new(format!("{label}, percentiles only"), pts)
                }
            }
        })
        .collect()
}
