//! `tailscope runs list|show|export` on stores made here: a reader that closes stdout early
//! (`| head -1`) is success, not a panic.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use common::bin;
use serde_json::json;

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
