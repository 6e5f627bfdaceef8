//! The `--json` shapes scripts rely on, held to the checked-in JSON Schemas in `docs/schemas/`
//! by a real validator (PyPI's jsonschema, Draft 2020-12, in the test virtual environment):
//! `calibrate`, `run` (with an SLO), `runs show` of both, and `sweep` (with an SLO, so its
//! verdicts appear) against the built-in server. The validator must also reject documents
//! that break the shapes, so a check that cannot fail is not mistaken for one that passed.

use crate::browser;
use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bin, json_of, serve};
use serde_json::Value;

fn schemas() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas")
}

/// Validates `doc` against `docs/schemas/NAME.schema.json` (with the other schemas of the
/// directory as its references): None when valid, else the validator's message.
fn validate(python: &Path, name: &str, doc: &Value, dir: &Path) -> Option<String> {
    let path = dir.join(format!("{name}-{}.json", rand_suffix(doc)));
    std::fs::write(&path, serde_json::to_vec(doc).unwrap()).unwrap();
    let out = Command::new(python)
        .arg("-c")
        .arg(
            "import json, pathlib, sys\n\
             from jsonschema import Draft202012Validator\n\
             from referencing import Registry, Resource\n\
             d = pathlib.Path(sys.argv[1])\n\
             all = [json.loads(p.read_text()) for p in sorted(d.glob('*.schema.json'))]\n\
             reg = Registry().with_resources([(s['$id'], Resource.from_contents(s)) for s in all])\n\
             schema = json.loads((d / (sys.argv[2] + '.schema.json')).read_text())\n\
             Draft202012Validator.check_schema(schema)\n\
             errors = sorted(Draft202012Validator(schema, registry=reg).iter_errors(json.load(open(sys.argv[3]))), key=str)\n\
             print('ok' if not errors else '; '.join(f'{list(e.absolute_path)}: {e.message}' for e in errors[:5]))",
        )
        .arg(schemas())
        .arg(name)
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success(),
        "the validator failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (text != "ok").then_some(text)
}

/// A distinct file name per document (its length and first bytes suffice here).
fn rand_suffix(doc: &Value) -> String {
    let s = doc.to_string();
    format!(
        "{}-{}",
        s.len(),
        s.bytes().take(64).map(u64::from).sum::<u64>()
    )
}

fn assert_valid(python: &Path, name: &str, doc: &Value, dir: &Path) {
    if let Some(e) = validate(python, name, doc, dir) {
        panic!("{name}: the output does not match docs/schemas/{name}.schema.json: {e}\n{doc}");
    }
}

#[test]
fn json_outputs_match_their_schemas() {
    let _g = common::shared();
    let Some(python) = browser::schema_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let s = serve(&["--cpus", "1", "--arch", "epoll", "--work", "det:50us"]);
    let url = format!("nullrpc://{}", s.addr);
    let cmd = |args: &[&str]| {
        let out = bin().args(args).arg("--db").arg(&db).output().unwrap();
        (json_of(&out), out)
    };

    let (cal, out) = cmd(&["calibrate", &url, "--cpus", "0", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_valid(&python, "calibrate", &cal, dir.path());

    // Exit 0, 1 or 3 are all measurements with the documented shape; the SLO adds `slo`.
    let (run, out) = cmd(&[
        "run",
        &url,
        "--rate",
        "2000",
        "--duration",
        "1500ms",
        "--warmup",
        "300ms",
        "--cpus",
        "0",
        "--service",
        "50us",
        "--slo",
        "p99<=10s",
        "--percentiles",
        "95",
        "--json",
    ]);
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_valid(&python, "run", &run, dir.path());
    assert!(run["measured"]["p95"].is_number(), "{run}");

    for id in [&cal["run_id"], &run["run_id"]] {
        let (shown, out) = cmd(&["runs", "show", &id.to_string(), "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_valid(&python, "runs-show", &shown, dir.path());
    }

    let (sweep, out) = cmd(&[
        "sweep",
        &url,
        "--loads",
        "1000,2000",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--cpus",
        "0",
        "--service",
        "50us",
        "--slo",
        "p99<=10s",
        "--json",
    ]);
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_valid(&python, "sweep", &sweep, dir.path());
    assert_eq!(
        sweep["slo_points"].as_array().map(Vec::len),
        Some(2),
        "{sweep}"
    );

    // The schemas can fail: documents that break the shapes are rejected.
    let mut bad = run.clone();
    bad["status"] = "fine".into();
    assert!(validate(&python, "run", &bad, dir.path()).is_some());
    let mut bad = run.clone();
    bad.as_object_mut().unwrap().remove("measured");
    assert!(validate(&python, "run", &bad, dir.path()).is_some());
    let mut bad = run.clone();
    bad["measured"]["p99"] = "1 ms".into();
    assert!(validate(&python, "run", &bad, dir.path()).is_some());
    let mut bad = cal.clone();
    bad["peak_rate_rps"] = 0.into();
    assert!(validate(&python, "calibrate", &bad, dir.path()).is_some());
    let mut bad = sweep.clone();
    bad["rows"][0]["role"] = "point".into();
    assert!(validate(&python, "sweep", &bad, dir.path()).is_some());
}
