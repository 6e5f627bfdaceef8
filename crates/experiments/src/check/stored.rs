//! The check of stored results: a run or an experiment against its baseline, read from the
//! store, refused when host or configuration differ (unless forced), and each point's rows
//! compared.

use std::collections::BTreeMap;

use serde_json::Value;
use store::{ExperimentRow, RunRow, Store, StoreError};

use super::differences::{config_differences, config_notes, host_differences, same_target};
use super::{compare_sides, Check, PointKey, Sides};
use crate::summary::{ExperimentSummary, RunSummary};

pub use measurement::cli_values::BaselineRef;

/// Why a check cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("no {0} with id {1}")]
    NotFound(&'static str, i64),
    #[error("no {0} labelled '{1}'")]
    NoLabel(&'static str, String),
    #[error("no earlier {0} of the same target and configuration as {0} {1}")]
    NoLatest(&'static str, i64),
    #[error("the baseline cannot be the candidate itself ({0} {1})")]
    SameAsCandidate(&'static str, i64),
    #[error("{0} {1} has no stored result (status '{2}')")]
    Unfinished(&'static str, i64, store::RowStatus),
    #[error("{0} {1} is a calibration, not a measurement of latencies: check compares runs (give the id of a run)")]
    Calibration(&'static str, i64),
    #[error("baseline {kind} {id} differs from the candidate (use --force to compare anyway): {}", first_of(.differences))]
    Differs {
        kind: &'static str,
        id: i64,
        differences: Vec<String>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CheckError {
    /// True for what the user asked wrong (exit 2), false for the store failing.
    pub fn is_usage(&self) -> bool {
        !matches!(self, CheckError::Store(_))
    }
}

/// The first differences (each clipped), and how many more: one line a person reads; `--json`
/// and the check's own `differences` keep them all.
fn first_of(d: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s: Vec<String> = d
        .iter()
        .take(SHOWN)
        .map(|x| measurement::clip(x).into_owned())
        .collect();
    if d.len() > SHOWN {
        s.push(format!("and {} more", d.len() - SHOWN));
    }
    s.join("; ")
}

fn label_of(config: &Value) -> Option<String> {
    measurement::RunConfig::of(config)
        .label()
        .map(str::to_string)
}

/// The differences that refuse a baseline: host facts and configuration.
fn differences(c_host: &Value, b_host: &Value, c_cfg: &Value, b_cfg: &Value) -> Vec<String> {
    let mut d = host_differences(c_host, b_host);
    d.extend(config_differences(c_cfg, b_cfg));
    d
}

/// Checks run `candidate` against the baseline `baseline` names, in the read-only `store`.
/// Err(CheckError::Differs) when host or configuration differ and `force` is not set.
pub fn check_runs(
    store: &Store,
    candidate: i64,
    baseline: &BaselineRef,
    tol: f64,
    force: bool,
) -> Result<(Check, RunRow), CheckError> {
    let c = store
        .get_run(candidate)?
        .ok_or(CheckError::NotFound("run", candidate))?;
    let b = match baseline {
        BaselineRef::Id(id) => store
            .get_run(*id)?
            .ok_or(CheckError::NotFound("run", *id))?,
        BaselineRef::Label(l) => store
            .list_runs()?
            .into_iter()
            .filter(|r| r.id != c.id && label_of(&r.config).as_deref() == Some(l.as_str()))
            .max_by_key(|r| r.id)
            .ok_or_else(|| CheckError::NoLabel("run", l.clone()))?,
        BaselineRef::Latest => store
            .list_runs()?
            .into_iter()
            .filter(|r| {
                r.id < c.id
                    && r.kind == c.kind
                    && (r.target == c.target
                        || same_target(
                            "target",
                            &Value::String(r.target.clone()),
                            &Value::String(c.target.clone()),
                        ))
                    && r.summary.is_some()
                    && differences(&c.host, &r.host, &c.config, &r.config).is_empty()
            })
            .max_by_key(|r| r.id)
            .ok_or(CheckError::NoLatest("run", c.id))?,
    };
    if b.id == c.id {
        return Err(CheckError::SameAsCandidate("run", c.id));
    }
    for r in [&c, &b] {
        if r.kind == "calibrate" {
            return Err(CheckError::Calibration("run", r.id));
        }
    }
    let Some(bs) = &b.summary else {
        return Err(CheckError::Unfinished("run", b.id, b.status.clone()));
    };
    let diffs = differences(&c.host, &b.host, &c.config, &b.config);
    if !diffs.is_empty() && !force {
        return Err(CheckError::Differs {
            kind: "run",
            id: b.id,
            differences: diffs,
        });
    }
    let cs = RunSummary::of(c.summary.as_ref().unwrap_or(&Value::Null));
    let bs = RunSummary::of(bs);
    let rows = compare_sides(None, &Sides::of_summary(&cs), &Sides::of_summary(&bs), tol);
    let mut check = Check::new("run", c.id, b.id, tol, diffs, rows);
    check.notes = config_notes(&c.config, &b.config);
    for (who, s) in [("candidate", &cs), ("baseline", &bs)] {
        check.caveats.extend(caveats_of(who, s));
    }
    Ok((check, c))
}

/// A run's own word that its intervals do not bound a repeat, with its reasons.
pub fn caveats_of(who: &str, summary: &RunSummary) -> Vec<String> {
    let Some(r) = summary
        .reproducibility
        .as_ref()
        .filter(|r| r.single_run_bounds_repeats == Some(false))
    else {
        return Vec::new();
    };
    vec![format!(
        "{who}'s intervals do not bound a repeat ({})",
        if r.flags.is_empty() {
            "no reason stored".to_string()
        } else {
            r.flags.join("; ")
        }
    )]
}

/// One experiment's points, read back: key, combined result, and the summary of the point's
/// single run (for a point of one repeat).
fn points_of(store: &Store, e: &ExperimentRow) -> Result<Vec<(PointKey, Sides)>, CheckError> {
    let Some(summary) = e.summary.as_ref().map(ExperimentSummary::of) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    // A `run --repeat N` experiment keeps its one point's combined result as its summary.
    if summary.points.is_none() && summary.repeated.repeats.is_some() {
        let config = measurement::RunConfig::of(&e.config);
        let key = PointKey {
            params: BTreeMap::new(),
            offered_rps: config.run.and_then(|r| r.rate_rps).unwrap_or(0.0),
            load_pct: None,
        };
        out.push((key, Sides::of_point(&summary.repeated, None)));
    }
    for p in summary.points.unwrap_or_default() {
        let Some(r) = p.result else {
            continue;
        };
        let key = PointKey {
            params: p.params,
            offered_rps: p.offered_rps.unwrap_or(0.0),
            load_pct: p.load_pct,
        };
        let run = match r.run_ids.first() {
            Some(&id) if r.repeats.unwrap_or(0) < 2 => {
                store.get_run(id)?.and_then(|row| row.summary)
            }
            _ => None,
        };
        out.push((key, Sides::of_point(&r, run.as_ref())));
    }
    Ok(out)
}

/// The host facts of an experiment: its first run's.
fn host_of(store: &Store, e: i64) -> Result<Value, CheckError> {
    Ok(store
        .experiment_runs(e)?
        .first()
        .map(|r| r.host.clone())
        .unwrap_or(Value::Null))
}

/// Checks experiment `candidate` against a baseline experiment, point by point (matched by
/// params and load). A candidate point with no baseline point is undecided.
pub fn check_experiments(
    store: &Store,
    candidate: i64,
    baseline: &BaselineRef,
    tol: f64,
    force: bool,
) -> Result<(Check, ExperimentRow), CheckError> {
    let c = store
        .get_experiment(candidate)?
        .ok_or(CheckError::NotFound("experiment", candidate))?;
    let c_host = host_of(store, c.id)?;
    let b = match baseline {
        BaselineRef::Id(id) => store
            .get_experiment(*id)?
            .ok_or(CheckError::NotFound("experiment", *id))?,
        BaselineRef::Label(l) => store
            .list_experiments()?
            .into_iter()
            .filter(|e| e.id != c.id && label_of(&e.config).as_deref() == Some(l.as_str()))
            .max_by_key(|e| e.id)
            .ok_or_else(|| CheckError::NoLabel("experiment", l.clone()))?,
        BaselineRef::Latest => {
            let mut found = None;
            let mut all = store.list_experiments()?;
            all.sort_by_key(|e| std::cmp::Reverse(e.id));
            for e in all {
                if e.id < c.id
                    && e.kind == c.kind
                    && e.summary.is_some()
                    && differences(&c_host, &host_of(store, e.id)?, &c.config, &e.config).is_empty()
                {
                    found = Some(e);
                    break;
                }
            }
            found.ok_or(CheckError::NoLatest("experiment", c.id))?
        }
    };
    if b.id == c.id {
        return Err(CheckError::SameAsCandidate("experiment", c.id));
    }
    if b.summary.is_none() {
        return Err(CheckError::Unfinished("experiment", b.id, b.status.clone()));
    }
    let diffs = differences(&c_host, &host_of(store, b.id)?, &c.config, &b.config);
    if !diffs.is_empty() && !force {
        return Err(CheckError::Differs {
            kind: "experiment",
            id: b.id,
            differences: diffs,
        });
    }
    let base = points_of(store, &b)?;
    let mut rows = Vec::new();
    for (key, sides) in points_of(store, &c)? {
        match base.iter().find(|(k, _)| k.matches(&key)) {
            Some((_, bs)) => rows.extend(compare_sides(Some(&key), &sides, bs, tol)),
            None => {
                let none = Sides {
                    user: Err("no baseline point at this load".into()),
                    server: Err("no baseline point at this load".into()),
                    unbounded: None,
                    unstood: Vec::new(),
                };
                rows.extend(compare_sides(Some(&key), &sides, &none, tol));
            }
        }
    }
    let mut check = Check::new("experiment", c.id, b.id, tol, diffs, rows);
    check.notes = config_notes(&c.config, &b.config);
    Ok((check, c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::tests::summary;
    use crate::check::CheckVerdict;
    use serde_json::json;

    #[test]
    fn a_stored_baseline_on_another_port_is_compared_with_a_note() {
        let st = Store::open_in_memory().unwrap();
        let run = |port: u16, p50: f64| {
            let url = format!("nullrpc://127.0.0.1:{port}");
            let id = st
                .begin_run(&store::NewRun {
                    kind: "run".into(),
                    target: url.clone(),
                    started_at: "2026-01-01T00:00:00Z".into(),
                    config: json!({"target": url, "rate_rps": 4000.0}),
                    host: json!({"hostname": "h", "kernel": "k", "cpu_model": "m"}),
                })
                .unwrap();
            st.finish_run(id, "ok", &summary(p50, true)).unwrap();
            id
        };
        let (b, c) = (run(38153, 50.0), run(43355, 80.0));
        let (check, _) = check_runs(&st, c, &BaselineRef::Id(b), 0.1, false).unwrap();
        assert!(check.differences.is_empty(), "{:?}", check.differences);
        assert_eq!(check.notes.len(), 1, "{:?}", check.notes);
        assert!(check.notes[0].contains("127.0.0.1:38153 (baseline)"));
        assert!(check.regression);
        let json = serde_json::to_value(&check).unwrap();
        assert_eq!(json["notes"][0], json!(check.notes[0]));
    }

    fn stored(st: &Store, rate: f64, label: &str, p50: f64) -> i64 {
        let id = st
            .begin_run(&store::NewRun {
                kind: "run".into(),
                target: "nullrpc://127.0.0.1:7".into(),
                started_at: "2026-01-01T00:00:00Z".into(),
                config: json!({"target": "nullrpc://127.0.0.1:7", "rate_rps": rate,
                               "label": label, "seed": label.len()}),
                host: json!({"hostname": "h", "kernel": "k", "cpu_model": "m"}),
            })
            .unwrap();
        st.finish_run(id, "ok", &summary(p50, true)).unwrap();
        id
    }

    #[test]
    fn stored_runs_resolve_their_baseline_and_read_a_regression() {
        let st = Store::open_in_memory().unwrap();
        let a = stored(&st, 4000.0, "base", 50.0);
        let other = stored(&st, 2000.0, "slow-rate", 50.0);
        let c = stored(&st, 4000.0, "cand", 80.0);
        for b in [
            BaselineRef::Id(a),
            BaselineRef::Label("base".into()),
            BaselineRef::Latest,
        ] {
            let (check, _) = check_runs(&st, c, &b, 0.1, false).unwrap();
            assert_eq!(check.baseline, a, "{b:?}");
            assert!(check.regression);
            assert!(check.rows.iter().all(|r| r.verdict == CheckVerdict::Worse));
        }
        let e = check_runs(&st, c, &BaselineRef::Id(other), 0.1, false).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("rate_rps"), "{e}");
        let (forced, _) = check_runs(&st, c, &BaselineRef::Id(other), 0.1, true).unwrap();
        assert_eq!(forced.differences.len(), 1);
        for (b, want) in [
            (BaselineRef::Id(99), "no run with id 99"),
            (BaselineRef::Label("x".into()), "no run labelled 'x'"),
            (BaselineRef::Id(c), "candidate itself"),
        ] {
            let e = check_runs(&st, c, &b, 0.1, false).unwrap_err();
            assert!(e.is_usage() && e.to_string().contains(want), "{e}");
        }
        let e = check_runs(&st, a, &BaselineRef::Latest, 0.1, false).unwrap_err();
        assert!(e.to_string().contains("no earlier run"), "{e}");
    }

    #[test]
    fn points_match_by_params_and_load() {
        let k = |rps: f64, pct: Option<f64>| PointKey {
            params: BTreeMap::new(),
            offered_rps: rps,
            load_pct: pct,
        };
        assert!(k(4000.0, None).matches(&k(4001.0, None)));
        assert!(!k(4000.0, None).matches(&k(4200.0, None)));
        // By % of capacity when both have one, whatever the calibrated rate.
        assert!(k(4000.0, Some(60.0)).matches(&k(4300.0, Some(60.0))));
        let mut p = k(4000.0, None);
        p.params.insert("conns".into(), "4".into());
        assert!(!p.matches(&k(4000.0, None)));
    }
}
