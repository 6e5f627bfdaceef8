//! Two operating-system processes writing one store file at the same time.
//!
//! The test re-runs this test binary as child processes, each running only
//! `child_writer`, which does nothing unless the parent set `STORE_TEST_CHILD_DB`.

use std::process::{Command, Stdio};

use serde_json::json;
use store::{Columns, NewRun, RowStatus, Store};

const CHILD_ENV: &str = "STORE_TEST_CHILD_DB";
const RUNS_PER_CHILD: usize = 15;

fn columns_for(tag: usize, r: usize) -> Columns {
    let n = 500 + r * 37;
    let mut c = Columns::new(n);
    c.push_column("t", (0..n as i64).map(|i| i * 1_000 + tag as i64).collect())
        .unwrap();
    c.push_column("who", vec![tag as i64; n]).unwrap();
    c
}

#[test]
fn child_writer() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return; // run directly by the harness: nothing to do
    };
    let tag: usize = std::env::var("STORE_TEST_CHILD_TAG")
        .unwrap()
        .parse()
        .unwrap();
    let store = Store::open(path.as_ref()).unwrap();
    for r in 0..RUNS_PER_CHILD {
        let id = store
            .begin_run(&NewRun {
                kind: "run".into(),
                target: format!("child{tag}"),
                started_at: store::now_rfc3339(),
                config: json!({"r": r}),
                host: json!({}),
            })
            .unwrap();
        store.put_columns(id, &columns_for(tag, r)).unwrap();
        store.finish_run(id, "ok", &json!({"r": r})).unwrap();
    }
}

#[test]
fn two_processes_write_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|tag| {
            Command::new(&exe)
                .args(["--exact", "processes::child_writer", "--test-threads=1"])
                .env(CHILD_ENV, &path)
                .env("STORE_TEST_CHILD_TAG", tag.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "a child writer failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let store = Store::open(&path).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 2 * RUNS_PER_CHILD);
    for run in runs {
        assert_eq!(run.status, RowStatus::Finished("ok".into()));
        let tag: usize = run.target.trim_start_matches("child").parse().unwrap();
        let r = run.config["r"].as_u64().unwrap() as usize;
        assert_eq!(store.columns(run.id).unwrap(), Some(columns_for(tag, r)));
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}
