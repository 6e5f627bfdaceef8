//! Round trips of runs and record columns through in-memory and on-disk stores.

use serde_json::json;
use store::{Columns, NewRun, RowStatus, Store, StoreError, SCHEMA_VERSION};

fn new_run(kind: &str, target: &str) -> NewRun {
    NewRun {
        kind: kind.into(),
        target: target.into(),
        started_at: "2026-11-21T21:00:00.000Z".into(),
        config: json!({"rate_rps": 50_000, "arrival": "poisson", "seed": 1}),
        host: json!({"cpus": 2, "governor": null}),
    }
}

fn sample_columns(n: usize) -> Columns {
    let mut c = Columns::new(n);
    let intended: Vec<i64> = (0..n as i64).map(|i| i * 20_000).collect();
    let sent: Vec<i64> = intended.iter().map(|t| t + 150).collect();
    let recv: Vec<i64> = sent.iter().map(|t| t + 30_000 + (t % 977)).collect();
    c.push_column("intended_ns", intended).unwrap();
    c.push_column("sent_ns", sent).unwrap();
    c.push_column("received_ns", recv).unwrap();
    c.push_column("outcome", (0..n as i64).map(|i| i % 3 - 1).collect())
        .unwrap();
    c
}

fn round_trip(store: &Store) {
    let id = store.begin_run(&new_run("run", "127.0.0.1:11211")).unwrap();
    let row = store.get_run(id).unwrap().unwrap();
    assert_eq!(row.status, RowStatus::Running);
    assert_eq!(row.kind, "run");
    assert_eq!(row.target, "127.0.0.1:11211");
    assert_eq!(row.config["rate_rps"], 50_000);
    assert_eq!(row.host["governor"], serde_json::Value::Null);
    assert_eq!(row.finished_at, None);
    assert_eq!(row.summary, None);
    assert_eq!(row.requests, None);
    assert_eq!(store.columns(id).unwrap(), None);

    let cols = sample_columns(5_000);
    store.put_columns(id, &cols).unwrap();
    let summary = json!({"latency_us": {"p50": 31.2, "p99": 48.0}, "rate_rps": 49_998.5});
    store.finish_run(id, "ok", &summary).unwrap();

    let row = store.get_run(id).unwrap().unwrap();
    assert_eq!(row.status, RowStatus::Finished("ok".into()));
    assert_eq!(row.summary, Some(summary));
    assert_eq!(row.requests, Some(5_000));
    let finished = row.finished_at.unwrap();
    assert_eq!(finished.len(), "2026-11-21T21:00:00.000Z".len());
    assert!(finished.ends_with('Z') && finished.as_bytes()[10] == b'T');
    assert_eq!(store.columns(id).unwrap(), Some(cols));

    // Replacing the records replaces all columns, not just those named again.
    let mut fewer = Columns::new(2);
    fewer.push_column("sent_ns", vec![5, 6]).unwrap();
    store.put_columns(id, &fewer).unwrap();
    assert_eq!(store.columns(id).unwrap(), Some(fewer));
    assert_eq!(store.get_run(id).unwrap().unwrap().requests, Some(2));

    // A run with zero records keeps that fact (Some, empty) apart from "none kept".
    let empty_id = store.begin_run(&new_run("run", "x")).unwrap();
    store.put_columns(empty_id, &Columns::new(0)).unwrap();
    assert_eq!(store.columns(empty_id).unwrap(), Some(Columns::new(0)));
}

#[test]
fn in_memory_round_trip() {
    round_trip(&Store::open_in_memory().unwrap());
}

#[test]
fn file_round_trip_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    // Parent directories are created.
    let path = dir.path().join("a/b/runs.db");
    let id;
    {
        let store = Store::open(&path).unwrap();
        round_trip(&store);
        id = store.begin_run(&new_run("calibrate", "builtin")).unwrap();
        store.put_columns(id, &sample_columns(100)).unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(store.list_runs().unwrap().len(), 3);
    assert_eq!(store.get_run(id).unwrap().unwrap().kind, "calibrate");
    assert_eq!(store.columns(id).unwrap(), Some(sample_columns(100)));
}

#[test]
fn list_is_newest_first_and_delete_removes_records() {
    let store = Store::open_in_memory().unwrap();
    let ids: Vec<i64> = (0..4)
        .map(|i| store.begin_run(&new_run("run", &format!("t{i}"))).unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let listed: Vec<i64> = store.list_runs().unwrap().iter().map(|r| r.id).collect();
    assert_eq!(listed, ids.iter().rev().copied().collect::<Vec<_>>());

    store.put_columns(ids[1], &sample_columns(10)).unwrap();
    assert!(store.delete_run(ids[1]).unwrap());
    assert!(!store.delete_run(ids[1]).unwrap());
    assert_eq!(store.get_run(ids[1]).unwrap(), None);
    assert_eq!(store.columns(ids[1]).unwrap(), None);
    let listed: Vec<i64> = store.list_runs().unwrap().iter().map(|r| r.id).collect();
    assert_eq!(listed, [ids[3], ids[2], ids[0]]);
    // Ids are not reused after a delete.
    let next = store.begin_run(&new_run("run", "t4")).unwrap();
    assert!(next > ids[3]);
}

#[test]
fn unknown_ids_are_errors_or_none() {
    let store = Store::open_in_memory().unwrap();
    assert!(matches!(
        store.finish_run(42, "ok", &json!({})),
        Err(StoreError::UnknownRun(42))
    ));
    assert!(matches!(
        store.put_columns(42, &sample_columns(3)),
        Err(StoreError::UnknownRun(42))
    ));
    assert_eq!(store.get_run(42).unwrap(), None);
    assert_eq!(store.columns(42).unwrap(), None);
    assert!(!store.delete_run(42).unwrap());
}

#[test]
fn invalid_columns_are_refused_before_writing() {
    let store = Store::open_in_memory().unwrap();
    let id = store.begin_run(&new_run("run", "x")).unwrap();
    let bad = Columns {
        len: 3,
        cols: vec![("a".into(), vec![1, 2, 3]), ("b".into(), vec![1])],
    };
    assert!(matches!(
        store.put_columns(id, &bad),
        Err(StoreError::ColumnLength { .. })
    ));
    assert_eq!(store.columns(id).unwrap(), None);
    assert_eq!(store.get_run(id).unwrap().unwrap().requests, None);
}

/// Damages the stored file behind the store's back with plain SQL.
fn tamper(path: &std::path::Path, sql: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(sql).unwrap();
}

#[test]
fn corrupt_data_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let store = Store::open(&path).unwrap();
    let id = store.begin_run(&new_run("run", "x")).unwrap();
    store.put_columns(id, &sample_columns(1_000)).unwrap();

    tamper(
        &path,
        "UPDATE columns SET data = x'28b52ffd00' WHERE ord = 1",
    );
    assert!(matches!(store.columns(id), Err(StoreError::Corrupt(_))));

    // A blob that is fine but disagrees with the run's record count.
    let id2 = store.begin_run(&new_run("run", "y")).unwrap();
    store.put_columns(id2, &sample_columns(10)).unwrap();
    tamper(
        &path,
        &format!("UPDATE runs SET requests = 11 WHERE id = {id2}"),
    );
    assert!(matches!(store.columns(id2), Err(StoreError::Corrupt(_))));
    tamper(
        &path,
        &format!("UPDATE runs SET requests = -1 WHERE id = {id2}"),
    );
    assert!(matches!(store.columns(id2), Err(StoreError::Corrupt(_))));
    // An absurd record count must not make the decoder allocate for it.
    tamper(
        &path,
        &format!("UPDATE runs SET requests = {} WHERE id = {id2}", i64::MAX),
    );
    assert!(matches!(store.columns(id2), Err(StoreError::Corrupt(_))));

    tamper(
        &path,
        &format!("UPDATE runs SET config = '{{not json' WHERE id = {id2}"),
    );
    assert!(matches!(store.get_run(id2), Err(StoreError::Corrupt(_))));
    assert!(matches!(store.list_runs(), Err(StoreError::Corrupt(_))));
}

#[test]
fn newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    drop(Store::open(&path).unwrap());
    tamper(
        &path,
        &format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1),
    );
    assert!(matches!(
        Store::open(&path),
        Err(StoreError::SchemaTooNew { found, supported })
            if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION
    ));
}

#[test]
fn a_file_that_is_not_a_database_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    assert!(Store::open(&path).is_err());
}

#[test]
fn concurrent_writers_share_one_file() {
    // Separate connections in separate threads take the same file locks as separate
    // processes would (SQLite's POSIX locks plus its per-inode bookkeeping).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    const WRITERS: usize = 4;
    const RUNS: usize = 10;
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let path = &path;
            s.spawn(move || {
                // Every writer opens the fresh file itself: migration races too.
                let store = Store::open(path).unwrap();
                for r in 0..RUNS {
                    let id = store
                        .begin_run(&new_run("run", &format!("w{w}r{r}")))
                        .unwrap();
                    store.put_columns(id, &sample_columns(200 + r)).unwrap();
                    store
                        .finish_run(id, "ok", &json!({"w": w, "r": r}))
                        .unwrap();
                }
            });
        }
    });
    let store = Store::open(&path).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), WRITERS * RUNS);
    for run in runs {
        assert_eq!(run.status, RowStatus::Finished("ok".into()));
        let r = run.summary.as_ref().unwrap()["r"].as_u64().unwrap() as usize;
        assert_eq!(run.target, format!("w{}r{r}", run.summary.unwrap()["w"]));
        assert_eq!(
            store.columns(run.id).unwrap(),
            Some(sample_columns(200 + r))
        );
    }
}
