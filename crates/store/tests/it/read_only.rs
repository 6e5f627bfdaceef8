//! `Store::open_existing`: the read-only open of `runs list/show/export`, which must never
//! create a store, a directory or (once closed) WAL side files.

use std::path::Path;

use serde_json::json;
use store::{NewRun, Store, StoreError, SCHEMA_VERSION};

fn new_run(target: &str) -> NewRun {
    NewRun {
        kind: "run".into(),
        target: target.into(),
        started_at: "2026-11-21T21:00:00.000Z".into(),
        config: json!({}),
        host: json!({}),
    }
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_missing_store_is_none_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/runs.db");
    assert!(Store::open_existing(&path).unwrap().is_none());
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
}

#[test]
fn an_empty_file_holds_no_store_and_stays_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    std::fs::write(&path, b"").unwrap();
    assert!(Store::open_existing(&path).unwrap().is_none());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    assert_eq!(names(dir.path()), ["runs.db"]);
}

#[test]
fn reads_a_wal_store_and_leaves_no_side_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    {
        let w = Store::open(&path).unwrap();
        w.begin_run(&new_run("a")).unwrap();
        w.begin_run(&new_run("b")).unwrap();
    }
    // A clean close of the writer removed its -wal and -shm.
    assert_eq!(names(dir.path()), ["runs.db"]);
    let before = std::fs::read(&path).unwrap();
    {
        let r = Store::open_existing(&path).unwrap().expect("a store");
        let runs = r.list_runs().unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].target, "b");
        assert!(r.get_run(runs[1].id).unwrap().is_some());
        // query_only: the read-only handle refuses writes.
        assert!(r.begin_run(&new_run("c")).is_err());
    }
    assert_eq!(names(dir.path()), ["runs.db"]);
    assert_eq!(std::fs::read(&path).unwrap(), before, "the file changed");
}

#[test]
fn sees_what_a_live_writer_committed_to_its_wal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let w = Store::open(&path).unwrap();
    let id = w.begin_run(&new_run("live")).unwrap();
    let r = Store::open_existing(&path).unwrap().expect("a store");
    assert_eq!(r.get_run(id).unwrap().unwrap().target, "live");
    let id2 = w.begin_run(&new_run("later")).unwrap();
    assert_eq!(r.get_run(id2).unwrap().unwrap().target, "later");
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    drop(Store::open(&path).unwrap());
    rusqlite::Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    assert!(matches!(
        Store::open_existing(&path),
        Err(StoreError::SchemaTooNew { found, .. }) if found == SCHEMA_VERSION + 1
    ));
}

#[test]
fn a_file_that_is_not_a_database_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    std::fs::write(&path, "id,sent_ns\n1,2\n").unwrap();
    assert!(Store::open_existing(&path).is_err());
}
