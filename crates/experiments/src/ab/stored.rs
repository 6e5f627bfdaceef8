//! A stored `ab` comparison read back for `check`: its rows' paired intervals judged again at
//! the tolerance asked for (the baseline is inside the comparison).

use std::collections::BTreeMap;

use store::{ExperimentRow, Store};

use super::compare::AbResult;
use crate::check::{verdict_of, Check, CheckError, CheckRow, CheckVerdict};

/// The stored comparison of experiment `row`, when it is one.
pub fn stored_result(row: &ExperimentRow) -> Option<AbResult> {
    if row.kind != "ab" {
        return None;
    }
    serde_json::from_value(row.summary.clone()?).ok()
}

/// `check ID --experiment` of an `ab` experiment: its rows as a check's, each verdict read
/// again from its paired interval at `tol`. Err when `id` is no stored, finished comparison.
pub fn check_stored(store: &Store, id: i64, tol: f64) -> Result<(Check, AbResult), CheckError> {
    let row = store
        .get_experiment(id)?
        .ok_or(CheckError::NotFound("experiment", id))?;
    let r = stored_result(&row).ok_or(CheckError::Unfinished("experiment", id, row.status))?;
    let rows: Vec<CheckRow> = r
        .rows
        .iter()
        .map(|x| {
            let verdict = match x.ratio {
                Some(i) => verdict_of(i.lo, i.hi, tol),
                None => CheckVerdict::Undecided,
            };
            let iv = |v: Option<f64>| {
                v.map(|value| crate::check::Interval {
                    value,
                    lo: f64::NAN,
                    hi: f64::NAN,
                })
            };
            CheckRow {
                point: None,
                view: x.view.as_str().into(),
                percentile: x.percentile.clone(),
                baseline_us: iv(x.baseline_us),
                candidate_us: iv(x.candidate_us),
                ratio: x.ratio,
                verdict,
                why: x.why.clone(),
            }
        })
        .collect();
    let mut counts = BTreeMap::new();
    for v in ["better", "worse", "same", "undecided"] {
        counts.insert(v.to_string(), 0);
    }
    for x in &rows {
        *counts.entry(x.verdict.to_string()).or_insert(0) += 1;
    }
    let run_id = |a: &super::ArmResult| a.run_id.unwrap_or(0);
    let check = Check {
        kind: "ab".into(),
        candidate: run_id(&r.candidate),
        baseline: run_id(&r.baseline),
        tolerance: tol,
        differences: Vec::new(),
        notes: vec![format!(
            "paired comparison {id}: {} pairs of {:.3} s slices, intervals at {:.1} %",
            r.pairs,
            r.slice_s,
            r.confidence_per_look * 100.0
        )],
        regression: rows.iter().any(|x| x.verdict == CheckVerdict::Worse),
        rows,
        counts,
        caveats: Vec::new(),
    };
    Ok((check, r))
}
