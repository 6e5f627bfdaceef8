//! A stored experiment read back for the reports: its row, its points, its SLO and max load,
//! and the runs of the points a report shows in full.
//!
//! The points are the `rows` of the experiment's summary (`tailscope sweep --json`'s shape:
//! `{run_id, params, load_pct, offered_rps, achieved_rps, status, measured, ideal, excess,
//! slo}`); an experiment without them (still running, interrupted before its summary) is read
//! from its runs' own summaries instead. The SLO is read from the summary's `max_load.slo`,
//! `slo`, or the configuration's `slo`: a text such as `p99<=1ms` or an object naming the
//! percentile and the bound.

use serde_json::Value;
use store::{ExperimentRow, RunRow, Store, StoreError};

use crate::stored::{num, text, StoredRun};

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
    pub status: String,
    pub measured: Value,
    pub ideal: Value,
    pub excess: Value,
    pub slo: Option<String>,
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

fn group_of(params: Option<&Value>) -> String {
    let Some(Value::Object(m)) = params else {
        return String::new();
    };
    let mut kv: Vec<String> = m
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

fn point_of_row(r: &Value) -> Point {
    let get = |k: &str| r.get(k).cloned().unwrap_or(Value::Null);
    Point {
        run_id: r.get("run_id").and_then(Value::as_i64),
        group: group_of(r.get("params")),
        load_pct: num(r, "/load_pct"),
        offered_rps: num(r, "/offered_rps"),
        achieved_rps: num(r, "/achieved_rps"),
        status: text(r, "/status").unwrap_or("?").to_string(),
        measured: get("measured"),
        ideal: get("ideal"),
        excess: get("excess"),
        slo: text(r, "/slo").map(str::to_string),
    }
}

fn point_of_run(r: &RunRow) -> Point {
    let s = r.summary.clone().unwrap_or(Value::Null);
    let get = |k: &str| s.get(k).cloned().unwrap_or(Value::Null);
    // A tuning walk's runs belong to their step and a colocation's to their service: the
    // loop's own axis, which the runs keep beside their (empty) params.
    let own = match (r.config.get("tune_step"), r.config.get("colocation_cell")) {
        (Some(Value::String(step)), _) => Some(format!("step={step}")),
        (_, Some(_)) => Some(format!("service={}", r.target)),
        _ => None,
    };
    let group = match (own, group_of(r.config.get("params"))) {
        (Some(o), g) if g.is_empty() => o,
        (Some(o), g) => format!("{o}, {g}"),
        (None, g) => g,
    };
    Point {
        run_id: Some(r.id),
        group,
        load_pct: num(&r.config, "/load_pct").or_else(|| num(&s, "/load_pct")),
        offered_rps: num(&s, "/rate_rps").or_else(|| num(&r.config, "/rate_rps")),
        achieved_rps: num(&s, "/achieved_rate_rps"),
        status: text(&s, "/status").unwrap_or(&r.status).to_string(),
        measured: get("measured"),
        ideal: get("ideal"),
        excess: get("excess"),
        slo: None,
    }
}

/// An SLO from its stored form: `"p99<=1ms"`, `"p99.9 ≤ 500us"`, or an object such as
/// `{"percentile": "p99", "max_us": 1000}`. Err(text) when it is there but unreadable.
pub fn parse_slo(v: &Value) -> Result<Option<Slo>, String> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => {
            let t = s.replace('≤', "<=");
            let (k, b) = t
                .split_once("<=")
                .or_else(|| t.split_once('<'))
                .ok_or(s.clone())?;
            let key = k.trim().to_string();
            let ns = model::parse_duration_ns(b.trim()).map_err(|_| s.clone())?;
            if !key.starts_with('p') || ns.is_nan() || ns <= 0.0 {
                return Err(s.clone());
            }
            Ok(Some(Slo {
                key,
                bound_us: ns / 1e3,
                text: s.replace("<=", " ≤ "),
            }))
        }
        Value::Object(m) => {
            if let Some(t) = m.get("text").or_else(|| m.get("slo")) {
                return parse_slo(t);
            }
            let key = ["percentile", "key", "quantile"]
                .iter()
                .find_map(|k| m.get(*k).and_then(Value::as_str))
                .ok_or(v.to_string())?;
            let bound = ["max_us", "bound_us", "target_us", "le_us", "threshold_us"]
                .iter()
                .find_map(|k| m.get(*k).and_then(Value::as_f64))
                .ok_or(v.to_string())?;
            Ok(Some(Slo {
                key: key.to_string(),
                bound_us: bound,
                text: format!("{key} ≤ {}", crate::figure::fmt_us(bound)),
            }))
        }
        other => Err(other.to_string()),
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
        let summary = row.summary.clone().unwrap_or(Value::Null);
        let rows = summary.get("rows").and_then(Value::as_array);
        let from_runs = rows.is_none_or(|r| r.is_empty());
        let points: Vec<Point> = match rows {
            Some(r) if !r.is_empty() => r.iter().map(point_of_row).collect(),
            _ => runs.iter().map(point_of_run).collect(),
        };
        let candidates = [
            summary.pointer("/max_load/slo"),
            summary.get("slo"),
            row.config.get("slo"),
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
        let max_load = max_load_of(summary.get("max_load"), x_is_pct);
        let mut e = StoredExperiment {
            row,
            points,
            chosen: Vec::new(),
            slo,
            slo_unreadable,
            max_load,
            x_is_pct,
            from_runs,
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
            format!("{} req/s", crate::html::thousands(x))
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

fn max_load_of(v: Option<&Value>, x_is_pct: bool) -> Option<MaxLoad> {
    let v = v.filter(|v| !v.is_null())?;
    let rps = num(v, "/offered_rps");
    let pct = num(v, "/load_pct");
    let bracket = v.get("bracket_rps").and_then(Value::as_array);
    let (blo, bhi) = match bracket {
        Some(b) if b.len() == 2 => (b[0].as_f64(), b[1].as_f64()),
        _ => (None, None),
    };
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
            Some(
                &json!({"offered_rps": 8000.0, "load_pct": 80.0, "bracket_rps": [7800.0, 8200.0]}),
            ),
            true,
        )
        .unwrap();
        assert_eq!((m.x, m.lo, m.hi), (80.0, 78.0, 82.0));
    }

    #[test]
    fn groups_leave_the_load_out() {
        assert_eq!(
            group_of(Some(
                &json!({"load_pct": 50, "threads": 2, "arch": "epoll"})
            )),
            "arch=epoll, threads=2"
        );
        assert_eq!(group_of(Some(&json!({"load": "50%"}))), "");
    }

    #[test]
    fn a_walks_runs_are_grouped_by_step_and_a_colocations_by_service() {
        let row = |config: Value| RunRow {
            id: 1,
            kind: "tune".into(),
            status: "ok".into(),
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
