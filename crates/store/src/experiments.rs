//! Experiments: a loop over runs (a sweep, a search for the highest load meeting an SLO, a
//! tuning walk) stored as one row that groups its runs (schema 3). Each point of the loop is
//! an ordinary run whose `experiment_id` names the experiment.

use rusqlite::{params, OptionalExtension, Row};
use serde::{Deserialize, Serialize};

use crate::owner::Owner;
use crate::{NewRun, RowStatus, RunRow, Store, StoreError};

/// What is known of an experiment when it starts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NewExperiment {
    /// "sweep", "find-max", "tune", "demo", …
    pub kind: String,
    /// RFC 3339 UTC start time.
    pub started_at: String,
    /// The validated plan it runs (axes, fixed options, SLO).
    pub config: serde_json::Value,
}

/// One stored experiment.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ExperimentRow {
    pub id: i64,
    pub kind: String,
    /// [`RowStatus::Running`] until finished with an outcome ("ok", "interrupted",
    /// "failed", a sweep's "2 ok, 1 invalid"); [`RowStatus::Abandoned`] when the process
    /// that began it is gone and never finished it (as for a run).
    pub status: RowStatus,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub config: serde_json::Value,
    pub summary: Option<serde_json::Value>,
}

const EXPERIMENT_COLUMNS: &str = "id, kind, status, started_at, finished_at, config, summary";

type Raw = (
    i64,
    String,
    RowStatus,
    String,
    Option<String>,
    String,
    Option<String>,
    Option<Owner>,
);

fn row(r: &Row<'_>) -> rusqlite::Result<Raw> {
    let owner = match (r.get(7)?, r.get(8)?) {
        (Some(pid), Some(start)) => Some(Owner { pid, start }),
        _ => None,
    };
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        owner,
    ))
}

fn parse(r: Raw) -> Result<ExperimentRow, StoreError> {
    let (id, kind, status, started_at, finished_at, config, summary, owner) = r;
    let status = crate::owner::status_as_read(status, owner);
    let json = |field: &str, text: &str| {
        serde_json::from_str(text)
            .map_err(|e| StoreError::Corrupt(format!("experiment {id}: {field}: {e}")))
    };
    Ok(ExperimentRow {
        config: json("config", &config)?,
        summary: summary.as_deref().map(|s| json("summary", s)).transpose()?,
        id,
        kind,
        status,
        started_at,
        finished_at,
    })
}

impl Store {
    /// The columns [`row`] reads; a file older than schema 6 has no owners.
    fn experiment_columns(&self) -> String {
        let owner = if self.schema >= 6 {
            "owner_pid, owner_start"
        } else {
            "NULL, NULL"
        };
        format!("{EXPERIMENT_COLUMNS}, {owner}")
    }

    /// Inserts an experiment at its start, status "running"; returns its id.
    pub fn begin_experiment(&self, e: &NewExperiment) -> Result<i64, StoreError> {
        let owner = Owner::current();
        self.conn.execute(
            "INSERT INTO experiments (kind, status, started_at, config, owner_pid, owner_start)
             VALUES (?1, 'running', ?2, ?3, ?4, ?5)",
            params![
                e.kind,
                e.started_at,
                serde_json::to_string(&e.config)?,
                owner.map(|o| o.pid),
                owner.map(|o| o.start),
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Records an experiment's outcome and summary.
    pub fn finish_experiment(
        &self,
        id: i64,
        outcome: &str,
        summary: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.finish_row("experiments", id, outcome, summary)
    }

    /// Inserts a run as a point of experiment `experiment` (see [`Store::begin_run`]).
    pub fn begin_run_in(&self, r: &NewRun, experiment: Option<i64>) -> Result<i64, StoreError> {
        let id = self.begin_run(r)?;
        if let Some(e) = experiment {
            self.conn.execute(
                "UPDATE runs SET experiment_id = ?2 WHERE id = ?1",
                params![id, e],
            )?;
        }
        Ok(id)
    }

    /// The experiment a run belongs to, if any.
    pub fn experiment_of(&self, run: i64) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT experiment_id FROM runs WHERE id = ?1", [run], |r| {
                r.get::<_, Option<i64>>(0)
            })
            .optional()?
            .flatten())
    }

    /// One experiment by id.
    pub fn get_experiment(&self, id: i64) -> Result<Option<ExperimentRow>, StoreError> {
        self.conn
            .query_row(
                &format!(
                    "SELECT {} FROM experiments WHERE id = ?1",
                    self.experiment_columns()
                ),
                [id],
                row,
            )
            .optional()?
            .map(parse)
            .transpose()
    }

    /// All experiments, newest first.
    pub fn list_experiments(&self) -> Result<Vec<ExperimentRow>, StoreError> {
        let mut q = self.conn.prepare(&format!(
            "SELECT {} FROM experiments ORDER BY id DESC",
            self.experiment_columns()
        ))?;
        let raw = q.query_map([], row)?.collect::<Result<Vec<_>, _>>()?;
        raw.into_iter().map(parse).collect()
    }

    /// The runs of an experiment, in the order they were run.
    pub fn experiment_runs(&self, id: i64) -> Result<Vec<RunRow>, StoreError> {
        let ids: Vec<i64> = {
            let mut q = self
                .conn
                .prepare("SELECT id FROM runs WHERE experiment_id = ?1 ORDER BY id")?;
            let rows = q.query_map([id], |r| r.get(0))?;
            rows.collect::<Result<Vec<_>, _>>()?
        };
        ids.into_iter()
            .filter_map(|i| self.get_run(i).transpose())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time;

    fn new_run() -> NewRun {
        NewRun {
            kind: "run".into(),
            target: "t".into(),
            started_at: time::now_rfc3339(),
            config: serde_json::json!({}),
            host: serde_json::json!({}),
        }
    }

    #[test]
    fn an_experiment_groups_its_runs() {
        let st = Store::open_in_memory().unwrap();
        let e = st
            .begin_experiment(&NewExperiment {
                kind: "sweep".into(),
                started_at: time::now_rfc3339(),
                config: serde_json::json!({"loads": [20, 50]}),
            })
            .unwrap();
        let a = st.begin_run_in(&new_run(), Some(e)).unwrap();
        let lone = st.begin_run(&new_run()).unwrap();
        let b = st.begin_run_in(&new_run(), Some(e)).unwrap();
        let runs: Vec<i64> = st
            .experiment_runs(e)
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(runs, [a, b]);
        assert_eq!(st.experiment_of(a).unwrap(), Some(e));
        assert_eq!(st.experiment_of(lone).unwrap(), None);
        assert_eq!(
            st.get_experiment(e).unwrap().unwrap().status,
            RowStatus::Running
        );
        st.finish_experiment(e, "ok", &serde_json::json!({"rows": 2}))
            .unwrap();
        let x = st.get_experiment(e).unwrap().unwrap();
        assert_eq!(x.status, RowStatus::Finished("ok".into()));
        assert_eq!(x.summary.unwrap()["rows"], 2);
        assert_eq!(st.list_experiments().unwrap().len(), 1);
    }

    #[test]
    fn an_experiment_whose_process_died_is_abandoned_and_marked_once() {
        let st = Store::open_in_memory().unwrap();
        let begin = || {
            st.begin_experiment(&NewExperiment {
                kind: "sweep".into(),
                started_at: time::now_rfc3339(),
                config: serde_json::json!({}),
            })
            .unwrap()
        };
        let (mine, dead, done) = (begin(), begin(), begin());
        st.finish_experiment(done, "ok", &serde_json::json!({}))
            .unwrap();
        let me = Owner::current().unwrap();
        let stored = |id: i64| -> String {
            st.conn
                .query_row("SELECT status FROM experiments WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .unwrap()
        };
        // This pid with another start time: a process that reused the owner's pid.
        for id in [dead, done] {
            st.conn
                .execute(
                    "UPDATE experiments SET owner_start = ?2 WHERE id = ?1",
                    params![id, me.start + 1],
                )
                .unwrap();
        }
        assert_eq!(
            st.get_experiment(mine).unwrap().unwrap().status,
            RowStatus::Running
        );
        assert_eq!(
            st.get_experiment(dead).unwrap().unwrap().status,
            RowStatus::Abandoned
        );
        assert_eq!(stored(dead), "running", "a read changes nothing");
        let marked = st.mark_abandoned().unwrap();
        assert_eq!(marked.len(), 1, "{marked:?}");
        assert!(marked[0].experiment && marked[0].id == dead && marked[0].kind == "sweep");
        assert_eq!(stored(dead), "abandoned");
        assert_eq!(stored(done), "ok");
        assert_eq!(stored(mine), "running");
        assert!(st.mark_abandoned().unwrap().is_empty(), "once");
    }
}
