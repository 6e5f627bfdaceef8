//! What an experiment's result means for its caller: the exit code a sweep, a tuning walk or
//! a colocation matrix ends with (0 fine, 1 the measurement failed, 3 an SLO violated), and
//! its SLO judgements as named suites (what JUnit and Markdown files hold).

use std::collections::BTreeMap;

use crate::colocate::Colocation;
use crate::slo::{SloReport, Verdict};
use crate::sweep::{Load, Role, SweepResult};
use crate::tune::{TuneResult, TuneStep};
use measurement::ExperimentStatus;

/// The exit code of a measurement that failed, was interrupted or measured nothing valid.
pub const EXIT_FAILED: i32 = 1;
/// The exit code of a measurement that went fine and violated its SLO.
pub const EXIT_SLO_VIOLATED: i32 = 3;

/// Named SLO judgements, one suite each.
pub type Suites = Vec<(String, SloReport)>;

/// The exit code of a verdict of a measurement that went fine: 3 when violated, or undecided
/// and `undecided_fails`; else 0.
pub fn verdict_code(v: Verdict, undecided_fails: bool) -> i32 {
    match v {
        Verdict::Violates => EXIT_SLO_VIOLATED,
        Verdict::Undecided if undecided_fails => EXIT_SLO_VIOLATED,
        _ => 0,
    }
}

/// A point's name in a suite: "point 1000 req/s (20 %) connections=4".
fn point_name(rps: f64, pct: Option<f64>, params: &BTreeMap<String, String>) -> String {
    let mut name = format!("point {rps:.0} req/s");
    if let Some(l) = pct {
        name.push_str(&format!(" ({l:.0} %)"));
    }
    for (k, v) in params {
        name.push_str(&format!(" {k}={v}"));
    }
    name
}

impl SweepResult {
    /// 1 when the sweep failed or was interrupted, or when a point's own status gives 1 (no
    /// view asked for valid, or the target failed); saturated points are measurements.
    pub fn exit_code(&self) -> i32 {
        if self.status.stopped() {
            return EXIT_FAILED;
        }
        self.rows
            .iter()
            .map(|r| r.status.exit_code())
            .max()
            .unwrap_or(0)
    }

    /// Whether some point was repeated (then points are judged on their repeats combined).
    fn repeated(&self) -> bool {
        self.rows.iter().any(|r| r.repeat > 0)
    }

    /// With an SLO, a sweep whose points all measured fine exits 3 when a point of the grid
    /// (role `load`, or its repeats' combination; the steps of a max-load search are
    /// expected to cross the bound) violates it, or leaves it undecided and
    /// `undecided_fails`.
    pub fn gate_code(&self, undecided_fails: bool) -> i32 {
        let code = self.exit_code();
        if code != 0 {
            return code;
        }
        let verdicts: Vec<Verdict> = if self.repeated() {
            self.points.iter().filter_map(|p| p.slo).collect()
        } else {
            self.rows
                .iter()
                .filter(|r| r.role == Role::Load)
                .filter_map(|r| r.slo)
                .collect()
        };
        verdicts
            .into_iter()
            .map(|v| verdict_code(v, undecided_fails))
            .max()
            .unwrap_or(0)
    }

    /// One suite per point of the grid: the judgement its exit code reads (of its repeats
    /// combined when repeated, else of its run).
    pub fn suites(&self) -> Suites {
        if self.repeated() {
            return self
                .points
                .iter()
                .filter_map(|p| {
                    let rep = p.slo_report.clone()?;
                    let mut n = point_name(p.offered_rps, p.load_pct, &p.params);
                    n.push_str(&format!(", {} repeats combined", p.result.repeats));
                    Some((n, rep))
                })
                .collect();
        }
        self.rows
            .iter()
            .filter(|r| r.role == Role::Load)
            .filter_map(|r| {
                Some((
                    point_name(r.offered_rps, r.load_pct, &r.params),
                    r.slo_report.clone()?,
                ))
            })
            .collect()
    }
}

impl TuneResult {
    /// 1 when the walk failed or was interrupted, or its tuned configuration (the last step
    /// measured) did not measure; else, with an SLO, the code of that configuration's verdict
    /// at the walk's load: earlier steps are expected to fall short (that is why one tunes),
    /// the configuration the walk ends with is the one to ship.
    pub fn exit_code(&self, undecided_fails: bool) -> i32 {
        if self.status != ExperimentStatus::Ok {
            return EXIT_FAILED;
        }
        let Some(t) = self.tuned() else {
            return EXIT_FAILED;
        };
        if matches!(
            t.status,
            Some(measurement::RunStatus::Failed | measurement::RunStatus::Interrupted) | None
        ) {
            return EXIT_FAILED;
        }
        t.slo
            .as_ref()
            .map_or(0, |r| verdict_code(r.verdict, undecided_fails))
    }

    /// The JUnit suites (the tuned configuration: what the exit code reads) and the Markdown
    /// ones (every step measured, in order).
    pub fn suites(&self) -> (Suites, Suites) {
        let name = |t: &TuneStep| {
            if t.changes.is_empty() {
                format!("step {}", t.name)
            } else {
                format!("step {} ({})", t.name, t.changes.join("; "))
            }
        };
        let all = self
            .steps
            .iter()
            .filter_map(|t| Some((name(t), t.slo.clone()?)))
            .collect();
        let gated = self
            .tuned()
            .and_then(|t| Some((format!("tuned configuration: {}", name(t)), t.slo.clone()?)))
            .into_iter()
            .collect();
        (gated, all)
    }
}

impl Colocation {
    /// 1 when the matrix failed or was interrupted, or a cell's run failed (the target, not
    /// the SLO); else 3 when a side of a cell violates its SLO (or leaves it undecided and
    /// `undecided_fails`), as for the points of a sweep.
    pub fn exit_code(&self, undecided_fails: bool) -> i32 {
        if self.status != ExperimentStatus::Ok {
            return EXIT_FAILED;
        }
        let statuses = self.cells.iter().flat_map(|c| [c.status_a, c.status_b]);
        let worst = statuses
            .map(|s| s.map_or(EXIT_FAILED, |s| s.exit_code()))
            .max()
            .unwrap_or(0);
        if worst != 0 {
            return worst;
        }
        self.cells
            .iter()
            .flat_map(|c| [c.slo_a, c.slo_b])
            .flatten()
            .map(|v| verdict_code(v, undecided_fails))
            .max()
            .unwrap_or(0)
    }

    /// One suite per cell and side with an SLO: "A 30 % + B 60 %: A memcached://…".
    pub fn suites(&self) -> Suites {
        let load = |l: &Load, rps: f64| match l {
            Load::OfCapacity(f) => format!("{:.0} %", f * 100.0),
            Load::Rps(_) => format!("{rps:.0} req/s"),
        };
        let mut out = Vec::new();
        for c in &self.cells {
            let cell = format!(
                "A {} + B {}",
                load(&c.load_a, c.rate_a_rps),
                load(&c.load_b, c.rate_b_rps)
            );
            for (side, target, rep) in [("A", &self.a, &c.report_a), ("B", &self.b, &c.report_b)] {
                if let Some(rep) = rep {
                    out.push((format!("{cell}: {side} {target}"), rep.clone()));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slo::ViewChoice;

    fn step(name: &str, verdict: Option<Verdict>) -> TuneStep {
        TuneStep {
            name: name.into(),
            changes: Vec::new(),
            skipped: verdict.is_none().then(|| "not on this host".into()),
            run_id: verdict.map(|_| 1),
            status: verdict.map(|_| measurement::RunStatus::Ok),
            measured: None,
            ideal: None,
            excess: None,
            max_load_rps: None,
            max_load_pct: None,
            slo: verdict.map(|verdict| SloReport {
                text: "p99<=1ms".into(),
                view: ViewChoice::Auto,
                conditions: Vec::new(),
                verdict,
            }),
            paired: None,
            paired_error: None,
        }
    }

    fn code(steps: Vec<TuneStep>, undecided_fails: bool) -> i32 {
        let r = TuneResult {
            experiment_id: 1,
            status: ExperimentStatus::Ok,
            steps,
        };
        r.exit_code(undecided_fails)
    }

    #[test]
    fn the_last_measured_step_of_a_walk_decides() {
        use Verdict::*;
        // The baseline falling short is why one tunes; the tuned configuration decides.
        let walk = vec![step("baseline", Some(Violates)), step("rt", Some(Meets))];
        assert_eq!(code(walk, true), 0);
        let walk = vec![step("baseline", Some(Meets)), step("rt", Some(Violates))];
        assert_eq!(code(walk, true), 3);
        // A skipped last step changed nothing: the step before it is the tuned one.
        let skipped = vec![
            step("baseline", Some(Violates)),
            step("rt", Some(Meets)),
            step("numa", None),
        ];
        assert_eq!(code(skipped, true), 0);
        assert_eq!(code(vec![step("baseline", Some(Undecided))], true), 3);
        assert_eq!(code(vec![step("baseline", Some(Undecided))], false), 0);
        // Nothing measured: the walk gave no configuration to judge.
        assert_eq!(code(vec![step("numa", None)], true), 1);
    }

    #[test]
    fn verdicts_give_their_codes() {
        assert_eq!(verdict_code(Verdict::Meets, true), 0);
        assert_eq!(verdict_code(Verdict::Violates, false), 3);
        assert_eq!(verdict_code(Verdict::Undecided, true), 3);
        assert_eq!(verdict_code(Verdict::Undecided, false), 0);
    }

    #[test]
    fn points_are_named_by_load_and_knobs() {
        let params = BTreeMap::from([("connections".to_string(), "4".to_string())]);
        assert_eq!(
            point_name(1000.4, Some(20.0), &params),
            "point 1000 req/s (20 %) connections=4"
        );
        assert_eq!(point_name(5.0, None, &BTreeMap::new()), "point 5 req/s");
    }
}
