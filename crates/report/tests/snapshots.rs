//! Snapshot tests of the terminal tables, as hyperfine tests its exports: each output of a
//! fixed synthetic run (`report::synthetic`) against checked-in text in `tests/snapshots/`.
//! After an intended change of an output, `UPDATE_SNAPSHOTS=1 cargo test -p report --test
//! snapshots` rewrites the files; review their diff like any other change.

use std::path::PathBuf;

use report::stored::StoredRun;

fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_SNAPSHOTS=1 writes it)", path.display()));
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the output, first at line {}:\nexpected: {:?}\nactual:   {:?}\n\
             (UPDATE_SNAPSHOTS=1 rewrites it after an intended change)\n--- actual ---\n{actual}",
            path.display(),
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first),
        );
    }
}

fn stored(run: &lab::Run, id: i64) -> StoredRun {
    let row = store::RunRow {
        id,
        kind: "run".into(),
        status: run.status.into(),
        target: run.target.clone(),
        started_at: "2026-11-21T21:00:00.000Z".into(),
        finished_at: None,
        config: run.config.to_json(),
        host: serde_json::json!({}),
        summary: Some(run.to_json()),
        requests: None,
    };
    StoredRun::without_curves(row, "synthetic")
}

#[test]
fn terminal_view_of_a_run() {
    let run = report::synthetic::run(12_000.0, 50_000.0, 20_000, 3).unwrap();
    let mut out = Vec::new();
    report::terminal::run(&mut out, &run).unwrap();
    check("terminal_run.txt", &String::from_utf8(out).unwrap());
}

#[test]
fn runs_compare_table() {
    let a = report::synthetic::run(8_000.0, 50_000.0, 20_000, 3).unwrap();
    let b = report::synthetic::run(16_000.0, 50_000.0, 20_000, 4).unwrap();
    let c = report::compare::compare(&[stored(&a, 7), stored(&b, 8)]);
    let mut out = Vec::new();
    report::compare::table(&mut out, &c).unwrap();
    check("runs_compare.txt", &String::from_utf8(out).unwrap());
    check(
        "runs_compare.json",
        &(serde_json::to_string_pretty(&report::compare::to_json(&c)).unwrap() + "\n"),
    );
}

#[test]
fn hgrm_spectrum() {
    let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    for r in report::synthetic::records(12_000.0, 50_000.0, 20_000, 3) {
        h.record(r.latency_ns().unwrap()).unwrap();
    }
    let mut out = Vec::new();
    report::hdr::spectrum(&h, &mut out).unwrap();
    check("spectrum.hgrm", &String::from_utf8(out).unwrap());
}
