//! How a run, a sweep and a loop of runs ended: the statuses the store keeps and every view
//! prints ([`RunStatus`], [`SweepStatus`], [`ExperimentStatus`]).

use serde::{Deserialize, Serialize};

/// How a loop of runs (a tuning walk, a colocation matrix) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExperimentStatus {
    /// Every step ran (each run has its own status).
    Ok,
    /// Stopped early (Ctrl-C); the finished steps are kept.
    Interrupted,
    /// A step could not run (the error is stored with the experiment).
    Failed,
}

impl ExperimentStatus {
    /// From how the loop ended: its outcome and whether it was stopped.
    pub fn of<T, E>(outcome: &Result<T, E>, stopped: bool) -> ExperimentStatus {
        match outcome {
            Ok(_) if stopped => ExperimentStatus::Interrupted,
            Ok(_) => ExperimentStatus::Ok,
            Err(_) => ExperimentStatus::Failed,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ExperimentStatus::Ok => "ok",
            ExperimentStatus::Interrupted => "interrupted",
            ExperimentStatus::Failed => "failed",
        }
    }
}

impl std::fmt::Display for ExperimentStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a sweep ended, as the experiment stores it: the loop stopped (`failed`,
/// `interrupted`), or it completed and every point is ok (`ok`), or the count of each point
/// status in [`SweepStatus::ORDER`] ("2 ok, 1 invalid", "3 saturated"). Its serde form is
/// that text, so older stores read back the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SweepStatus {
    /// The loop itself stopped on an error (stored with the experiment).
    Failed,
    /// Stopped early (Ctrl-C); the finished points are kept.
    Interrupted,
    /// Completed, every point ok.
    AllOk,
    /// Completed; how many points ended with each status (non-zero counts, in
    /// [`SweepStatus::ORDER`]), not all ok.
    Points(Vec<(RunStatus, usize)>),
}

impl SweepStatus {
    /// The order point statuses are counted in.
    pub const ORDER: [RunStatus; 5] = [
        RunStatus::Ok,
        RunStatus::Saturated,
        RunStatus::Invalid,
        RunStatus::Failed,
        RunStatus::Interrupted,
    ];

    /// From how the loop ended and its points' statuses.
    pub fn of(completed: bool, interrupted: bool, points: &[RunStatus]) -> SweepStatus {
        if !completed {
            return SweepStatus::Failed;
        }
        if interrupted {
            return SweepStatus::Interrupted;
        }
        if points.iter().all(|s| *s == RunStatus::Ok) {
            return SweepStatus::AllOk;
        }
        SweepStatus::Points(
            SweepStatus::ORDER
                .iter()
                .map(|s| (*s, points.iter().filter(|p| *p == s).count()))
                .filter(|(_, n)| *n > 0)
                .collect(),
        )
    }

    /// Whether the loop stopped before its end (then the exit code is 1 whatever the points).
    pub fn stopped(&self) -> bool {
        matches!(self, SweepStatus::Failed | SweepStatus::Interrupted)
    }

    /// The status that colours the whole: the loop's own when it stopped, else the worst of
    /// its points' (failed, invalid, saturated, interrupted, ok).
    pub fn worst(&self) -> RunStatus {
        match self {
            SweepStatus::Failed => RunStatus::Failed,
            SweepStatus::Interrupted => RunStatus::Interrupted,
            SweepStatus::AllOk => RunStatus::Ok,
            SweepStatus::Points(counts) => [
                RunStatus::Failed,
                RunStatus::Invalid,
                RunStatus::Saturated,
                RunStatus::Interrupted,
                RunStatus::Ok,
            ]
            .into_iter()
            .find(|w| counts.iter().any(|(s, n)| s == w && *n > 0))
            .unwrap_or(RunStatus::Ok),
        }
    }
}

impl std::fmt::Display for SweepStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SweepStatus::Failed => f.write_str("failed"),
            SweepStatus::Interrupted => f.write_str("interrupted"),
            SweepStatus::AllOk => f.write_str("ok"),
            SweepStatus::Points(counts) => {
                let parts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
                f.write_str(&parts.join(", "))
            }
        }
    }
}

impl std::str::FromStr for SweepStatus {
    type Err = String;

    /// The stored text ([`SweepStatus`]'s `Display`); anything else is no sweep status.
    fn from_str(s: &str) -> Result<SweepStatus, String> {
        match s {
            "failed" => return Ok(SweepStatus::Failed),
            "interrupted" => return Ok(SweepStatus::Interrupted),
            "ok" => return Ok(SweepStatus::AllOk),
            _ => {}
        }
        let bad = || format!("no sweep status '{s}'");
        let counts = s
            .split(", ")
            .map(|part| {
                let (n, status) = part.split_once(' ').ok_or_else(bad)?;
                let n: usize = n.parse().map_err(|_| bad())?;
                let status: RunStatus = status.parse().map_err(|_| bad())?;
                Ok((status, n))
            })
            .collect::<Result<Vec<_>, String>>()?;
        if counts.is_empty() || counts.iter().any(|(_, n)| *n == 0) {
            return Err(bad());
        }
        Ok(SweepStatus::Points(counts))
    }
}

impl Serialize for SweepStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SweepStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SweepStatus, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Measured, and a view asked for is valid ([`Views`]: the user's when the generator
    /// kept its schedule, the server's when the offered load was sent).
    Ok,
    /// Measured, but no view asked for is valid: the generator fell behind its schedule (the
    /// user's view counts its stalls) and the server's view is missing or was not asked for
    /// or the offered load was not sent.
    Invalid,
    /// The target failed: refused, died, or answered errors or garbage to more than 0.1 %.
    Failed,
    /// Stopped early (Ctrl-C); what was measured is kept.
    Interrupted,
    /// The server could not keep up: it completed clearly less than was offered, or its
    /// backlog grew through the run. A measurement of capacity, not a failure: the
    /// completion rate is what the server can do; latency percentiles grow with the run's
    /// length.
    Saturated,
}

impl RunStatus {
    /// Every status, in the order they are listed.
    pub const ALL: [RunStatus; 5] = [
        RunStatus::Ok,
        RunStatus::Invalid,
        RunStatus::Failed,
        RunStatus::Saturated,
        RunStatus::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Invalid => "invalid",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Saturated => "saturated",
        }
    }

    /// The outcome a stored row records, read as a run status: the one place lab reads a
    /// row's status. `None` for a row still running or abandoned, and for an outcome that is
    /// no run status (an experiment's "2 ok, 1 invalid", a foreign text).
    pub fn of_row(status: &store::RowStatus) -> Option<RunStatus> {
        status.outcome()?.parse().ok()
    }

    /// The process exit code a run with this status gives: 0 for a valid measurement (a
    /// saturated one included), 1 otherwise.
    pub fn exit_code(self) -> i32 {
        match self {
            RunStatus::Ok | RunStatus::Saturated => 0,
            _ => 1,
        }
    }
}

impl std::str::FromStr for RunStatus {
    type Err = String;

    /// The stored and printed name ([`RunStatus::as_str`]); anything else (a row still
    /// `running`, an experiment's "2 ok, 1 invalid") is no run status.
    fn from_str(s: &str) -> Result<RunStatus, String> {
        RunStatus::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("no run status '{s}'"))
    }
}

/// The row of a run that finished with this status.
impl From<RunStatus> for store::RowStatus {
    fn from(s: RunStatus) -> store::RowStatus {
        store::RowStatus::Finished(s.as_str().to_string())
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::RowStatus;

    #[test]
    fn a_sweep_status_counts_its_points_and_reads_back_from_its_text() {
        use RunStatus::*;
        let cases = [
            (true, false, vec![Ok, Ok], SweepStatus::AllOk, "ok", Ok),
            (
                false,
                false,
                vec![Ok],
                SweepStatus::Failed,
                "failed",
                Failed,
            ),
            (
                true,
                true,
                vec![Ok],
                SweepStatus::Interrupted,
                "interrupted",
                Interrupted,
            ),
            (
                true,
                false,
                vec![Invalid, Ok, Ok],
                SweepStatus::Points(vec![(Ok, 2), (Invalid, 1)]),
                "2 ok, 1 invalid",
                Invalid,
            ),
            (
                true,
                false,
                vec![Saturated, Saturated, Saturated],
                SweepStatus::Points(vec![(Saturated, 3)]),
                "3 saturated",
                Saturated,
            ),
            (
                true,
                false,
                vec![Saturated, Failed, Invalid],
                SweepStatus::Points(vec![(Saturated, 1), (Invalid, 1), (Failed, 1)]),
                "1 saturated, 1 invalid, 1 failed",
                Failed,
            ),
        ];
        for (completed, interrupted, points, want, text, worst) in cases {
            let got = SweepStatus::of(completed, interrupted, &points);
            assert_eq!(got, want);
            assert_eq!(got.to_string(), text);
            assert_eq!(got.worst(), worst, "{text}");
            assert_eq!(got.stopped(), !completed || interrupted, "{text}");
            assert_eq!(
                text.parse::<SweepStatus>(),
                std::result::Result::Ok(want.clone())
            );
            let json = serde_json::to_value(&got).unwrap();
            assert_eq!(json, serde_json::json!(text));
            assert_eq!(serde_json::from_value::<SweepStatus>(json).unwrap(), want);
        }
        for bad in [
            "",
            "2 ok,",
            "0 ok",
            "two ok",
            "2 fine",
            "running",
            "2 ok,1 invalid",
        ] {
            assert!(bad.parse::<SweepStatus>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_row_reads_as_a_run_status_only_when_finished_with_one() {
        for s in RunStatus::ALL {
            let row = RowStatus::from_text(s.as_str());
            assert_eq!(RunStatus::of_row(&row), Some(s));
        }
        assert_eq!(RunStatus::of_row(&RowStatus::Running), None);
        assert_eq!(RunStatus::of_row(&RowStatus::Abandoned), None);
        assert_eq!(RowStatus::from(RunStatus::Saturated).as_str(), "saturated");
        let counts = RowStatus::Finished("2 ok, 1 invalid".into());
        assert_eq!(RunStatus::of_row(&counts), None);
    }
}
