//! `tailscope runs list|show|export` on stores made here: the read-only commands never create
//! a store, `export` never overwrites the store it reads, and a reader that closes stdout
//! early (`| head -1`) is success, not a panic.

use crate::common;
use crate::support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use common::bin;
use serde_json::json;
use support::{as_user_without_write_access, assert_usage_error, names};

/// A store at `dir/runs.db` with `runs` runs whose targets are `target_len` bytes long; the
/// first run keeps `records` per-request records.
fn make_store(dir: &Path, runs: usize, target_len: usize, records: usize) -> PathBuf {
    let path = dir.join("runs.db");
    let st = store::Store::open(&path).unwrap();
    for i in 0..runs {
        let id = st
            .begin_run(&store::NewRun {
                kind: "run".into(),
                target: format!("{i:0>target_len$}"),
                started_at: "2026-11-21T21:00:00.000Z".into(),
                config: json!({}),
                host: json!({}),
            })
            .unwrap();
        if i == 0 {
            let mut c = store::Columns::new(records);
            c.push_column("intended_ns", (0..records as i64).collect())
                .unwrap();
            st.put_columns(id, &c).unwrap();
        }
        st.finish_run(id, "ok", &json!({"measured": {"p99": 12.5}}))
            .unwrap();
    }
    path
}

#[test]
fn read_only_commands_on_a_missing_store_create_nothing() {
    let _g = common::shared();
    // Regression: `runs show 9999 --db NEW_PATH` created an empty store at NEW_PATH.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sub/new.db");
    let out = bin()
        .args(["runs", "show", "9999", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_usage_error(&out, &[&format!("no results store at {}", db.display())]);
    let out = bin()
        .args(["runs", "export", "1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_usage_error(&out, &[&format!("no results store at {}", db.display())]);
    // No store yet is no runs yet.
    let out = bin()
        .args(["runs", "list", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(common::json_of(&out), json!({"runs": []}));
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
}

#[test]
fn read_only_commands_leave_an_existing_store_as_it_was() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = make_store(dir.path(), 2, 4, 10);
    let before = std::fs::read(&db).unwrap();
    assert_eq!(common::runs_list(&db)["runs"].as_array().unwrap().len(), 2);
    let out = bin()
        .args(["runs", "show", "1", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(names(dir.path()), ["runs.db"], "no -wal/-shm left behind");
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn export_refuses_to_overwrite_the_store_it_reads() {
    let _g = common::shared();
    // Regression: `runs export 1 -o runs.db --db runs.db` replaced the store with CSV.
    let dir = tempfile::tempdir().unwrap();
    let db = make_store(dir.path(), 1, 4, 10);
    let link = dir.path().join("link.csv");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let wal = dir.path().join("runs.db-wal");
    let before = std::fs::read(&db).unwrap();
    for o in [&db, &link, &wal] {
        let out = bin()
            .args(["runs", "export", "1", "-o"])
            .arg(o)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        assert_usage_error(&out, &["--output"]);
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
    assert_eq!(names(dir.path()), ["link.csv", "runs.db"]);
    // Another file is fine.
    let csv = dir.path().join("run1.csv");
    let out = bin()
        .args(["runs", "export", "1", "-o"])
        .arg(&csv)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 11);
}

#[test]
fn export_to_an_unwritable_place_is_a_usage_error_before_reading() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = make_store(dir.path(), 1, 4, 10);
    for (o, needle) in [
        (dir.path().to_path_buf(), "is a directory"),
        (dir.path().join("no/such/dir/x.csv"), "does not exist"),
        (PathBuf::from("/proc/x.csv"), "/proc"),
    ] {
        let out = bin()
            .args(["runs", "export", "1", "-o"])
            .arg(&o)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        assert_usage_error(&out, &["--output", needle]);
    }
    assert_eq!(names(dir.path()), ["runs.db"]);
}

/// Starts `tailscope ARGS`, reads one line of its stdout, closes the pipe and waits.
fn read_one_line_then_close(args: &[&str]) -> Output {
    let mut child = bin()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(!first.is_empty());
    child.wait_with_output().unwrap()
}

#[test]
fn a_reader_that_closes_stdout_early_is_success() {
    let _g = common::shared();
    // Regression: `tailscope runs list | head -1` panicked in println! (exit 101). Each
    // output is far larger than a pipe's 64 KiB, so the writer is still writing when the
    // reader goes away.
    let dir = tempfile::tempdir().unwrap();
    let db = make_store(dir.path(), 100, 2_000, 100_000);
    let db = db.to_str().unwrap();
    for args in [
        vec!["runs", "list", "--db", db],
        vec!["runs", "list", "--json", "--db", db],
        vec!["runs", "export", "1", "--db", db],
        vec!["runs", "export", "1", "--format", "json", "--db", db],
    ] {
        let out = read_one_line_then_close(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

#[test]
fn a_store_in_a_directory_we_may_not_write_is_still_readable() {
    let _g = common::shared();
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = top.path().join("ro");
    std::fs::create_dir(&dir).unwrap();
    let db = make_store(&dir, 3, 4, 10);
    let mut cmd = bin();
    cmd.args(["runs", "list", "--json", "--db"]).arg(&db);
    let out = as_user_without_write_access(&dir, cmd);
    assert_eq!(common::json_of(&out)["runs"].as_array().unwrap().len(), 3);
    assert_eq!(names(&dir), ["runs.db"]);
}
