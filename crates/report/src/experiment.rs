//! A stored experiment read back for the reports: its row, its points, its SLO and max load,
//! and the runs of the points a report shows in full.
//!
//! The points are the `rows` of the experiment's summary (`tailscope sweep --json`'s shape:
//! `{run_id, params, load_pct, offered_rps, achieved_rps, status, measured, ideal, excess,
//! slo}`); an experiment without them (still running, interrupted before its summary) is read
//! from its runs' own summaries instead. The SLO is read from the summary's `max_load.slo`,
//! `slo`, or the configuration's `slo`: a text such as `p99<=1ms` or an object naming the
//! percentile and the bound.

use std::collections::BTreeMap;

use lab::RunStatus;
use serde::Deserialize;
use serde_json::Value;
use stats::Distribution;
use store::{ExperimentRow, RunRow, Store, StoreError};

use crate::stored::StoredRun;

/// Most points whose CCDFs and sections a report shows.
pub const MAX_CHOSEN: usize = 6;

/// One point of the experiment (a row of the verdict table).
#[derive(Clone, Debug)]
pub struct Point {
    pub run_id: Option<i64>,
    /// The knob values besides the load, as `name=value, …` ("" when there are none).
    pub group: String,
    pub load_pct: Option<f64>,
    pub offered_rps: Option<f64>,
    pub achieved_rps: Option<f64>,
    /// None when the stored status is none a finished run has (running, abandoned, absent).
    pub status: Option<RunStatus>,
    pub measured: Option<Distribution>,
    pub ideal: Option<Distribution>,
    pub excess: Option<Distribution>,
    pub slo: Option<String>,
}

impl Point {
    /// The status for a person ("?" when unknown).
    pub fn status_text(&self) -> &'static str {
        self.status.map_or("?", RunStatus::as_str)
    }
}

/// An SLO on one percentile.
#[derive(Clone, Debug, PartialEq)]
pub struct Slo {
    pub key: String,
    pub bound_us: f64,
    pub text: String,
}

/// The max load meeting the SLO, in the x axis' unit, and its rate.
#[derive(Clone, Debug)]
pub struct MaxLoad {
    pub x: f64,
    pub lo: f64,
    pub hi: f64,
    pub offered_rps: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct StoredExperiment {
    pub row: ExperimentRow,
    pub points: Vec<Point>,
    /// The points' runs shown in full (at most [`MAX_CHOSEN`]), with their curves.
    pub chosen: Vec<StoredRun>,
    pub slo: Option<Slo>,
    /// An SLO that was stored but could not be read.
    pub slo_unreadable: Option<String>,
    pub max_load: Option<MaxLoad>,
    /// The x axis is the load in % of capacity (else the offered rate in req/s).
    pub x_is_pct: bool,
    /// The points were read from the runs (no summary rows).
    pub from_runs: bool,
    /// An `ab` comparison's result and arms (None for every other kind).
    pub ab: Option<StoredAb>,
}

/// An `ab` experiment read back: its stored result ([`lab::ab::AbResult`]) and its two arms'
/// runs.
#[derive(Clone, Debug)]
pub struct StoredAb {
    /// The comparison as stored, or why there is none (still running, interrupted before its
    /// summary was stored, a summary this build cannot read).
    pub result: Result<lab::ab::AbResult, String>,
    /// The baseline's and the candidate's runs (None when not stored).
    pub arms: [Option<StoredRun>; 2],
}

impl StoredAb {
    /// Reads the comparison of experiment `row` (of kind `ab`) and its arms' runs: those its
    /// result names, else the experiment's runs by the arm their configuration names.
    fn load(store: &Store, row: &ExperimentRow, runs: &[RunRow]) -> Result<StoredAb, StoreError> {
        let result = match &row.summary {
            None => Err(format!(
                "the comparison stored no result (its status: {})",
                row.status
            )),
            Some(v) => serde_json::from_value::<lab::ab::AbResult>(v.clone())
                .map_err(|e| format!("its stored result cannot be read: {e}")),
        };
        let mut arms: [Option<StoredRun>; 2] = [None, None];
        for (k, arm) in [lab::ab::Arm::Baseline, lab::ab::Arm::Candidate]
            .into_iter()
            .enumerate()
        {
            let named = result.as_ref().ok().and_then(|r| r.arm(arm).run_id);
            let id = named.or_else(|| {
                runs.iter()
                    .find(|r| r.config.get("arm").and_then(Value::as_str) == Some(arm.as_str()))
                    .map(|r| r.id)
            });
            if let Some(id) = id {
                arms[k] = StoredRun::load(store, id)?;
            }
        }
        Ok(StoredAb { result, arms })
    }
}

/// The knobs that are the load axis itself, left out of a point's group.
const LOAD_KEYS: [&str; 6] = [
    "load",
    "load_pct",
    "rate",
    "rate_rps",
    "offered_rps",
    "loads",
];

/// An experiment's stored summary as the reports read it: any kind of experiment, every
/// key optional (a sweep's is [`lab::SweepResult`]'s JSON; older and other loops store less).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SummaryView {
    rows: Vec<RowView>,
    slo: Option<Value>,
    max_load: Option<MaxLoadView>,
}

/// A row of a stored experiment summary (`sweep --json`'s rows, legacy-tolerant).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RowView {
    run_id: Option<i64>,
    params: BTreeMap<String, Value>,
    load_pct: Option<f64>,
    offered_rps: Option<f64>,
    achieved_rps: Option<f64>,
    status: Option<RunStatus>,
    measured: Option<Distribution>,
    ideal: Option<Distribution>,
    excess: Option<Distribution>,
    slo: Option<String>,
}

/// A stored max-load search (`sweep --json`'s `max_load`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct MaxLoadView {
    slo: Option<Value>,
    offered_rps: Option<f64>,
    load_pct: Option<f64>,
    bracket_rps: Option<(Option<f64>, Option<f64>)>,
}

/// What a point reads of its run's stored configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RunConfigView {
    params: BTreeMap<String, Value>,
    tune_step: Option<Value>,
    colocation_cell: Option<Value>,
    load_pct: Option<f64>,
    rate_rps: Option<f64>,
}

/// What a point reads of its run's stored summary ([`lab::Run::to_json`], legacy-tolerant).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RunSummaryView {
    load_pct: Option<f64>,
    rate_rps: Option<f64>,
    achieved_rate_rps: Option<f64>,
    status: Option<RunStatus>,
    measured: Option<Distribution>,
    ideal: Option<Distribution>,
    excess: Option<Distribution>,
}

/// `T` read from stored JSON, or its default when the JSON is not of that shape.
fn view<T: Default + for<'de> Deserialize<'de>>(v: Option<&Value>) -> T {
    v.and_then(|v| T::deserialize(v).ok()).unwrap_or_default()
}

fn group_of(params: &BTreeMap<String, Value>) -> String {
    let mut kv: Vec<String> = params
        .iter()
        .filter(|(k, _)| !LOAD_KEYS.contains(&k.as_str()))
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    kv.sort();
    kv.join(", ")
}

fn point_of_row(r: RowView) -> Point {
    Point {
        run_id: r.run_id,
        group: group_of(&r.params),
        load_pct: r.load_pct,
        offered_rps: r.offered_rps,
        achieved_rps: r.achieved_rps,
        status: r.status,
        measured: r.measured,
        ideal: r.ideal,
        excess: r.excess,
        slo: r.slo,
    }
}

fn point_of_run(r: &RunRow) -> Point {
    let s: RunSummaryView = view(r.summary.as_ref());
    let c: RunConfigView = view(Some(&r.config));
    // A tuning walk's runs belong to their step and a colocation's to their service: the
    // loop's own axis, which the runs keep beside their (empty) params.
    let own = match (&c.tune_step, &c.colocation_cell) {
        (Some(Value::String(step)), _) => Some(format!("step={step}")),
        (_, Some(cell)) if !cell.is_null() => Some(format!("service={}", r.target)),
        _ => None,
    };
    let group = match (own, group_of(&c.params)) {
        (Some(o), g) if g.is_empty() => o,
        (Some(o), g) => format!("{o}, {g}"),
        (None, g) => g,
    };
    Point {
        run_id: Some(r.id),
        group,
        load_pct: c.load_pct.or(s.load_pct),
        offered_rps: s.rate_rps.or(c.rate_rps),
        achieved_rps: s.achieved_rate_rps,
        status: s.status.or_else(|| RunStatus::of_row(&r.status)),
        measured: s.measured,
        ideal: s.ideal,
        excess: s.excess,
        slo: None,
    }
}

/// An SLO as experiments have stored it: a text, an object holding the text (a sweep's
/// [`lab::Slo`]), or an object naming the percentile and the bound.
#[derive(Deserialize)]
#[serde(untagged)]
enum StoredSlo {
    Text(String),
    Holding {
        #[serde(alias = "slo")]
        text: Box<StoredSlo>,
    },
    Bound {
        #[serde(alias = "key", alias = "quantile")]
        percentile: String,
        #[serde(
            alias = "bound_us",
            alias = "target_us",
            alias = "le_us",
            alias = "threshold_us"
        )]
        max_us: f64,
    },
}

fn slo_of_text(s: &str) -> Option<Slo> {
    let t = s.replace('≤', "<=");
    let (k, b) = t.split_once("<=").or_else(|| t.split_once('<'))?;
    let key = k.trim().to_string();
    let ns = model::parse_duration_ns(b.trim()).ok()?;
    if !key.starts_with('p') || ns.is_nan() || ns <= 0.0 {
        return None;
    }
    Some(Slo {
        key,
        bound_us: ns / 1e3,
        text: s.replace("<=", " ≤ "),
    })
}

impl StoredSlo {
    fn slo(self) -> Option<Slo> {
        match self {
            StoredSlo::Text(s) => slo_of_text(&s),
            StoredSlo::Holding { text } => text.slo(),
            StoredSlo::Bound { percentile, max_us } => Some(Slo {
                text: format!("{percentile} ≤ {}", crate::figure::fmt_us(max_us)),
                key: percentile,
                bound_us: max_us,
            }),
        }
    }
}

/// An SLO from its stored form: `"p99<=1ms"`, `"p99.9 ≤ 500us"`, or an object such as
/// `{"percentile": "p99", "max_us": 1000}`. Err(text) when it is there but unreadable.
pub fn parse_slo(v: &Value) -> Result<Option<Slo>, String> {
    if v.is_null() {
        return Ok(None);
    }
    let unreadable = || match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match StoredSlo::deserialize(v) {
        Ok(s) => s.slo().map(Some).ok_or_else(unreadable),
        Err(_) => Err(unreadable()),
    }
}

impl StoredExperiment {
    /// Reads experiment `id`, its points, and the chosen points' runs with their curves;
    /// `Ok(None)` when there is no such experiment.
    pub fn load(store: &Store, id: i64) -> Result<Option<StoredExperiment>, StoreError> {
        let Some(row) = store.get_experiment(id)? else {
            return Ok(None);
        };
        let runs = store.experiment_runs(id)?;
        if row.kind == "ab" {
            // A comparison has no points on a load axis: its page reads its result and arms.
            let ab = StoredAb::load(store, &row, &runs)?;
            return Ok(Some(StoredExperiment {
                row,
                points: Vec::new(),
                chosen: Vec::new(),
                slo: None,
                slo_unreadable: None,
                max_load: None,
                x_is_pct: false,
                from_runs: false,
                ab: Some(ab),
            }));
        }
        let summary: SummaryView = view(row.summary.as_ref());
        let config: SummaryView = view(Some(&row.config));
        let from_runs = summary.rows.is_empty();
        let points: Vec<Point> = if from_runs {
            runs.iter().map(point_of_run).collect()
        } else {
            summary.rows.into_iter().map(point_of_row).collect()
        };
        let candidates = [
            summary.max_load.as_ref().and_then(|m| m.slo.as_ref()),
            summary.slo.as_ref(),
            config.slo.as_ref(),
        ];
        let (mut slo, mut slo_unreadable) = (None, None);
        for c in candidates.into_iter().flatten() {
            match parse_slo(c) {
                Ok(Some(s)) => {
                    slo = Some(s);
                    slo_unreadable = None;
                    break;
                }
                Ok(None) => {}
                Err(t) => slo_unreadable = slo_unreadable.or(Some(t)),
            }
        }
        let x_is_pct = !points.is_empty() && points.iter().all(|p| p.load_pct.is_some());
        let max_load = summary.max_load.and_then(|m| max_load_of(m, x_is_pct));
        let mut e = StoredExperiment {
            row,
            points,
            chosen: Vec::new(),
            slo,
            slo_unreadable,
            max_load,
            x_is_pct,
            from_runs,
            ab: None,
        };
        for id in e.choose() {
            if let Some(r) = StoredRun::load(store, id)? {
                e.chosen.push(r);
            }
        }
        Ok(Some(e))
    }

    /// The point's place on the x axis.
    pub fn x_of(&self, p: &Point) -> Option<f64> {
        if self.x_is_pct {
            p.load_pct
        } else {
            p.offered_rps
        }
    }

    pub fn x_label(&self) -> &'static str {
        if self.x_is_pct {
            "offered load (% of capacity)"
        } else {
            "offered load (req/s)"
        }
    }

    pub fn fmt_x(&self, x: f64) -> String {
        if self.x_is_pct {
            format!("{x:.0} %")
        } else {
            format!("{} req/s", crate::thousands(x))
        }
    }

    /// The configurations (knob values) in order of first appearance.
    pub fn groups(&self) -> Vec<String> {
        let mut g: Vec<String> = Vec::new();
        for p in &self.points {
            if !g.contains(&p.group) {
                g.push(p.group.clone());
            }
        }
        g
    }

    /// The points shown in full: per configuration its lowest and highest load, the points
    /// that decided the max load, then evenly spaced ones, up to [`MAX_CHOSEN`].
    fn choose(&self) -> Vec<i64> {
        let mut by_x: Vec<&Point> = self.points.iter().filter(|p| p.run_id.is_some()).collect();
        by_x.sort_by(|a, b| {
            let (x, y) = (self.x_of(a).unwrap_or(0.0), self.x_of(b).unwrap_or(0.0));
            x.total_cmp(&y)
        });
        let mut pick: Vec<i64> = Vec::new();
        let add = |id: Option<i64>, pick: &mut Vec<i64>| {
            if let Some(id) = id {
                if !pick.contains(&id) && pick.len() < MAX_CHOSEN {
                    pick.push(id);
                }
            }
        };
        for g in self.groups() {
            let of: Vec<&&Point> = by_x.iter().filter(|p| p.group == g).collect();
            add(of.first().and_then(|p| p.run_id), &mut pick);
            add(of.last().and_then(|p| p.run_id), &mut pick);
        }
        if let Some(m) = &self.max_load {
            for edge in [m.lo, m.hi, m.x] {
                let near = by_x.iter().min_by(|a, b| {
                    let d = |p: &Point| (self.x_of(p).unwrap_or(f64::MAX) - edge).abs();
                    d(a).total_cmp(&d(b))
                });
                add(near.and_then(|p| p.run_id), &mut pick);
            }
        }
        let n = by_x.len();
        for k in 1..=MAX_CHOSEN {
            if n > 0 {
                add(by_x[(k * (n - 1)) / (MAX_CHOSEN + 1)].run_id, &mut pick);
            }
        }
        // Shown in the order of the x axis.
        let order = |id: &i64| by_x.iter().position(|p| p.run_id == Some(*id));
        pick.sort_by_key(order);
        pick
    }
}

fn max_load_of(v: MaxLoadView, x_is_pct: bool) -> Option<MaxLoad> {
    let (rps, pct) = (v.offered_rps, v.load_pct);
    let (blo, bhi) = v.bracket_rps.unwrap_or((None, None));
    if x_is_pct {
        // The bracket is in req/s: into % through the max load's own rate and percentage.
        let per = match (pct, rps) {
            (Some(p), Some(r)) if r > 0.0 => p / r,
            _ => {
                return pct.map(|x| MaxLoad {
                    x,
                    lo: x,
                    hi: x,
                    offered_rps: rps,
                })
            }
        };
        let x = pct?;
        Some(MaxLoad {
            x,
            lo: blo.map_or(x, |b| b * per),
            hi: bhi.map_or(x, |b| b * per),
            offered_rps: rps,
        })
    } else {
        let x = rps?;
        Some(MaxLoad {
            x,
            lo: blo.unwrap_or(x),
            hi: bhi.unwrap_or(x),
            offered_rps: rps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn slos_read_as_text_or_object() {
        let s = parse_slo(&json!("p99<=1ms")).unwrap().unwrap();
        assert_eq!((s.key.as_str(), s.bound_us), ("p99", 1000.0));
        let s = parse_slo(&json!("p99.9 ≤ 500us")).unwrap().unwrap();
        assert_eq!((s.key.as_str(), s.bound_us), ("p99.9", 500.0));
        let s = parse_slo(&json!({"percentile": "p99", "max_us": 250.0}))
            .unwrap()
            .unwrap();
        assert_eq!(s.bound_us, 250.0);
        assert!(parse_slo(&json!("fast please")).is_err());
        assert_eq!(parse_slo(&Value::Null), Ok(None));
    }

    #[test]
    fn the_bracket_is_converted_into_percent() {
        let m = max_load_of(
            view(Some(
                &json!({"offered_rps": 8000.0, "load_pct": 80.0, "bracket_rps": [7800.0, 8200.0]}),
            )),
            true,
        )
        .unwrap();
        assert_eq!((m.x, m.lo, m.hi), (80.0, 78.0, 82.0));
    }

    #[test]
    fn groups_leave_the_load_out() {
        let params = |v: Value| view::<RunConfigView>(Some(&json!({ "params": v }))).params;
        assert_eq!(
            group_of(&params(
                json!({"load_pct": 50, "threads": 2, "arch": "epoll"})
            )),
            "arch=epoll, threads=2"
        );
        assert_eq!(group_of(&params(json!({"load": "50%"}))), "");
    }

    #[test]
    fn a_walks_runs_are_grouped_by_step_and_a_colocations_by_service() {
        let row = |config: Value| RunRow {
            id: 1,
            kind: "tune".into(),
            status: lab::RunStatus::Ok.into(),
            target: "memcached://127.0.0.1:1".into(),
            started_at: String::new(),
            finished_at: None,
            config,
            host: Value::Null,
            summary: None,
            requests: None,
        };
        let p = point_of_run(&row(
            json!({"params": {}, "tune_step": "rt", "load_pct": 30.0}),
        ));
        assert_eq!(p.group, "step=rt");
        let p = point_of_run(&row(
            json!({"params": {"server-threads": 2}, "tune_step": "udp"}),
        ));
        assert_eq!(p.group, "step=udp, server-threads=2");
        let p = point_of_run(&row(json!({"params": {}, "colocation_cell": [0, 1]})));
        assert_eq!(p.group, "service=memcached://127.0.0.1:1");
        let p = point_of_run(&row(json!({"params": {"load_pct": 20.0}})));
        assert_eq!(p.group, "");
    }
}
