//! Typed runs (schema 4) and stores written by the schema before them (3).

use rusqlite::Connection;
use serde_json::json;
use store::{NewRun, RowStatus, RunBlob, Store, StoreError, SCHEMA_VERSION};

/// The schema a tailscope built before typed runs wrote (schema version 3), frozen here as
/// such a build left it: what the migration to 4 must keep readable.
const SCHEMA_3: &str = "
    CREATE TABLE runs (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        kind        TEXT NOT NULL,
        status      TEXT NOT NULL,
        target      TEXT NOT NULL,
        started_at  TEXT NOT NULL,
        finished_at TEXT,
        config      TEXT NOT NULL,
        host        TEXT NOT NULL,
        summary     TEXT,
        requests    INTEGER
    );
    CREATE TABLE columns (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        ord    INTEGER NOT NULL,
        name   TEXT NOT NULL,
        data   BLOB NOT NULL,
        PRIMARY KEY (run_id, ord),
        UNIQUE (run_id, name)
    );
    CREATE TABLE chunks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        stream INTEGER NOT NULL,
        seq    INTEGER NOT NULL,
        len    INTEGER NOT NULL,
        data   BLOB NOT NULL,
        PRIMARY KEY (run_id, stream, seq)
    );
    CREATE TABLE experiments (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        kind        TEXT NOT NULL,
        status      TEXT NOT NULL,
        started_at  TEXT NOT NULL,
        finished_at TEXT,
        config      TEXT NOT NULL,
        summary     TEXT
    );
    ALTER TABLE runs ADD COLUMN experiment_id INTEGER REFERENCES experiments(id);
    PRAGMA journal_mode = WAL;
    PRAGMA user_version = 3;
    INSERT INTO runs (kind, status, target, started_at, finished_at, config, host, summary)
    VALUES ('run', 'ok', 'builtin', '2026-11-01T10:00:00.000Z', '2026-11-01T10:00:05.000Z',
            '{\"rate_rps\": 1000}', '{\"hostname\": \"old\"}',
            '{\"status\": \"ok\", \"measured\": {\"p99\": 12.5}}');
";

fn old_store(path: &std::path::Path) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(SCHEMA_3).unwrap();
}

fn new_run() -> NewRun {
    NewRun {
        kind: "run".into(),
        target: "builtin".into(),
        started_at: store::now_rfc3339(),
        config: json!({"rate_rps": 2000}),
        host: json!({"hostname": "new"}),
    }
}

fn blob(n: usize) -> RunBlob {
    RunBlob {
        version: 1,
        data: (0..n).map(|i| (i % 251) as u8).collect(),
    }
}

#[test]
fn a_schema_3_store_reads_as_it_is_without_typed_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    old_store(&path);
    let st = Store::open_existing(&path).unwrap().unwrap();
    assert_eq!(st.schema_version().unwrap(), 3, "a reader never migrates");
    let runs = st.list_runs().unwrap();
    assert_eq!(runs.len(), 1);
    let id = runs[0].id;
    let row = st.get_run(id).unwrap().unwrap();
    assert_eq!(row.status, RowStatus::Finished("ok".into()));
    assert_eq!(row.summary.unwrap()["measured"]["p99"], 12.5);
    assert_eq!(st.typed_run(id).unwrap(), None);
}

#[test]
fn a_schema_3_store_migrates_keeping_its_runs_and_takes_typed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    old_store(&path);
    let st = Store::open(&path).unwrap();
    assert_eq!(st.schema_version().unwrap(), SCHEMA_VERSION);
    let old = st.list_runs().unwrap()[0].clone();
    assert_eq!(old.config["rate_rps"], 1000);
    assert_eq!(st.typed_run(old.id).unwrap(), None);
    let id = st.begin_run(&new_run()).unwrap();
    let b = blob(100_000);
    st.finish_run_typed(id, "ok", &json!({"status": "ok"}), &b)
        .unwrap();
    drop(st);
    // A reader of the migrated file sees both runs, the new one with its typed form.
    let r = Store::open_existing(&path).unwrap().unwrap();
    assert_eq!(r.typed_run(id).unwrap(), Some(b));
    assert_eq!(r.typed_run(old.id).unwrap(), None);
    assert_eq!(r.get_run(old.id).unwrap(), Some(old));
    assert_eq!(
        r.get_run(id).unwrap().unwrap().status,
        RowStatus::Finished("ok".into())
    );
}

#[test]
fn a_typed_run_goes_with_its_run() {
    let st = Store::open_in_memory().unwrap();
    let id = st.begin_run(&new_run()).unwrap();
    assert_eq!(st.typed_run(id).unwrap(), None, "not finished yet");
    assert!(matches!(
        st.finish_run_typed(id + 1, "ok", &json!({}), &blob(10)),
        Err(StoreError::UnknownRun(_))
    ));
    assert_eq!(st.typed_run(id + 1).unwrap(), None);
    // Finishing again replaces it.
    st.finish_run_typed(id, "ok", &json!({}), &blob(10))
        .unwrap();
    let b = RunBlob {
        version: 2,
        data: b"{}".to_vec(),
    };
    st.finish_run_typed(id, "failed", &json!({}), &b).unwrap();
    assert_eq!(st.typed_run(id).unwrap(), Some(b));
    assert_eq!(
        st.get_run(id).unwrap().unwrap().status,
        RowStatus::Finished("failed".into())
    );
    assert!(st.delete_run(id).unwrap());
    assert_eq!(st.typed_run(id).unwrap(), None);
}

#[test]
fn a_damaged_typed_run_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let st = Store::open(&path).unwrap();
    let id = st.begin_run(&new_run()).unwrap();
    st.finish_run_typed(id, "ok", &json!({}), &blob(1000))
        .unwrap();
    let c = Connection::open(&path).unwrap();
    c.execute(
        "UPDATE typed_runs SET data = x'00112233445566' WHERE run_id = ?1",
        [id],
    )
    .unwrap();
    drop(c);
    assert!(matches!(st.typed_run(id), Err(StoreError::Corrupt(_))));
}

#[test]
fn a_run_left_running_before_schema_5_has_no_owner_and_stays_running() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    old_store(&path);
    let c = Connection::open(&path).unwrap();
    c.execute(
        "INSERT INTO runs (kind, status, target, started_at, config, host)
         VALUES ('run', 'running', 'builtin', '2026-11-01T11:00:00.000Z', '{}', '{}')",
        [],
    )
    .unwrap();
    drop(c);
    // A reader of the old file reads it as stored.
    let r = Store::open_existing(&path).unwrap().unwrap();
    assert_eq!(r.list_runs().unwrap()[0].status, RowStatus::Running);
    drop(r);
    let st = Store::open(&path).unwrap();
    assert_eq!(st.schema_version().unwrap(), SCHEMA_VERSION);
    assert!(st.mark_abandoned().unwrap().is_empty(), "no owner to judge");
    assert_eq!(st.list_runs().unwrap()[0].status, RowStatus::Running);
    // A run begun after the migration has an owner: this process, alive.
    let id = st.begin_run(&new_run()).unwrap();
    assert!(st.mark_abandoned().unwrap().is_empty());
    assert_eq!(st.get_run(id).unwrap().unwrap().status, RowStatus::Running);
}
