//! Bad usage of the computing commands: exit 2, one line on stderr naming the flag, and
//! nothing created — unwritable outputs are found before any computation, and numeric inputs
//! beyond what the code can run (or negative ones) are refused instead of hanging, running out
//! of memory or printing saturated values.

use crate::common;
use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use support::{as_user_without_write_access, assert_usage_error, names};

/// `tailscope ARGS` run in `dir`.
fn run_in(dir: &Path, args: &[&str]) -> Output {
    common::bin().current_dir(dir).args(args).output().unwrap()
}

/// Each command exits 2 naming its needles, and creates nothing in its working directory.
fn refused(cases: &[(&[&str], &[&str])]) {
    for (args, needles) in cases {
        let dir = tempfile::tempdir().unwrap();
        let out = run_in(dir.path(), args);
        assert_usage_error(&out, needles);
        assert!(
            names(dir.path()).is_empty(),
            "{args:?} created {:?}",
            names(dir.path())
        );
    }
}

#[test]
fn unwritable_outputs_are_refused_before_any_computation() {
    let _g = common::shared();
    // Regression: `model --ccdf a.csv --plot /proc/x.svg` simulated, wrote a.csv, then failed.
    refused(&[
        (
            &["model", "--ccdf", "a.csv", "--plot", "/proc/x.svg"],
            &["--plot", "/proc"],
        ),
        (&["model", "--plot", "."], &["--plot", "is a directory"]),
        (
            &["model", "--ccdf", "no/such/dir/a.csv"],
            &["--ccdf", "does not exist"],
        ),
        (&["model", "--ccdf", "/proc/self/comm"], &["--ccdf", "proc"]),
        (
            &["model", "--ccdf", "a.csv", "--plot", "./a.csv"],
            &["--ccdf and --plot"],
        ),
        // 100M requests per curve would take minutes: refused at once.
        (
            &[
                "model",
                "figure",
                "2",
                "--requests",
                "100M",
                "--plot",
                "/proc/f.svg",
            ],
            &["--plot"],
        ),
    ]);
}

#[test]
fn a_directory_or_file_we_may_not_write_is_refused() {
    let _g = common::shared();
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = top.path().join("ro");
    std::fs::create_dir(&dir).unwrap();
    let existing = dir.join("old.svg");
    std::fs::write(&existing, "old").unwrap();
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o444)).unwrap();
    for (flag, path, needle) in [
        ("--ccdf", dir.join("new.csv"), "cannot create files in"),
        ("--plot", existing.clone(), "cannot write it"),
    ] {
        let mut cmd = common::bin();
        cmd.args(["model", "--requests", "1k", flag]).arg(&path);
        let out = as_user_without_write_access(&dir, cmd);
        assert_usage_error(&out, &[flag, needle]);
    }
    assert_eq!(names(&dir), ["old.svg"]);
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "old");
}

/// Issue 36: a store the user may not write is found when it is opened, before the host is
/// probed or anything is sent: exit 2 naming it, and no `-wal`/`-shm` beside it.
#[test]
fn a_store_we_may_not_write_is_refused_before_anything_starts() {
    let _g = common::shared();
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = top.path().join("ro");
    std::fs::create_dir(&dir).unwrap();
    let db = dir.join("runs.db");
    std::fs::write(&db, "").unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut cmd = common::bin();
    cmd.args([
        "run",
        "nullrpc://127.0.0.1:9",
        "--rate",
        "100",
        "--duration",
        "2s",
    ])
    .args(["--no-noise-probe", "--db"])
    .arg(&db);
    let out = as_user_without_write_access(&dir, cmd);
    assert_usage_error(&out, &["cannot be written", db.to_str().unwrap()]);
    assert_eq!(names(&dir), ["runs.db"]);
}

#[test]
fn numeric_inputs_beyond_what_can_run_are_refused() {
    let _g = common::shared();
    // Regression: `model --workers 4000000000` hung.
    refused(&[
        (&["model", "--workers", "4000000000"], &["--workers"]),
        (
            &["model", "--workers", "5000", "--discipline", "lifo"],
            &["--workers", "lifo"],
        ),
        (&["model", "--requests", "1e12"], &["--requests"]),
        (&["model", "--replications", "5000"], &["--replications"]),
        (&["model", "--exact-limit", "1G"], &["--exact-limit"]),
        (&["model", "--connections", "2000000"], &["--connections"]),
        // 5e11 s of simulated time: f64 time stamps no longer resolve a 50 µs service.
        (
            &["model", "--load", "0.000001", "--requests", "1e10"],
            &["--requests"],
        ),
        (
            &["model", "figure", "2", "--requests", "10G"],
            &["--requests"],
        ),
        (&["model", "bursty", "--n", "4000000000"], &["--n"]),
        (&["model", "bursty", "--workers", "100000"], &["--workers"]),
        (&["model", "bursty", "--bursts", "10000000"], &["--bursts"]),
        (&["model", "bursty", "--payload", "1e300"], &["--payload"]),
        (
            &[
                "model",
                "bursty",
                "--simulate",
                "--n",
                "1000000",
                "--bursts",
                "10000",
            ],
            &["--n", "--bursts"],
        ),
        (&["serve", "--workers", "100000"], &["--workers"]),
        (
            &["serve", "--arch", "thread", "--batch-replies"],
            &["--batch-replies", "epoll", "thread"],
        ),
        (&["noise", "--duration", "25h"], &["--duration"]),
        (&["noise", "--threshold", "5s"], &["--threshold"]),
    ]);
    // Issue 36: a 20,000-point list of loads would run for hours without a word.
    let loads: Vec<String> = (1..=20_000).map(|i| i.to_string()).collect();
    let loads = loads.join(",");
    refused(&[(
        &[
            "sweep",
            "nullrpc://127.0.0.1:9",
            "--service",
            "50us",
            "--loads",
            &loads,
        ],
        &["20000 points", "at most 1000", "h of runs"],
    )]);
}

#[test]
fn durations_that_do_not_fit_are_refused_not_saturated() {
    let _g = common::shared();
    // Regression: `model --service det:1e99s` printed 2^64 ns everywhere with exit 0, and
    // `noise --duration 1e99s` was accepted.
    refused(&[
        (
            &["model", "--service", "det:1e99s"],
            &["--service", "1e99s"],
        ),
        (&["model", "--service", "exp:2e6s"], &["--service", "1e6 s"]),
        (&["model", "bursty", "--t0", "1e99s"], &["--t0"]),
        (&["model", "bursty", "--r0", "2e6s"], &["--r0"]),
        (&["noise", "--duration", "1e99s"], &["--duration"]),
        (&["serve", "--t0", "1e7s"], &["--t0"]),
        (&["serve", "--work", "det:1e99s"], &["--work"]),
    ]);
}

#[test]
fn negative_numbers_reach_the_range_checks() {
    let _g = common::shared();
    // Regression: clap took `--load -0.1` for a flag named `-0`.
    refused(&[
        (
            &["model", "--load", "-0.1"],
            &["--load must be in (0, 1)", "-0.1"],
        ),
        (&["model", "--rate", "-5"], &["--rate"]),
        (&["model", "--warmup", "-0.1"], &["--warmup"]),
        (&["model", "--workers", "-5"], &["--workers"]),
        (
            &["model", "--discipline", "priority", "--classes", "-0.1,1.1"],
            &["--classes"],
        ),
        (&["model", "--requests", "-3"], &["--requests"]),
        (&["model", "bursty", "--alpha", "-0.1"], &["--alpha"]),
        (&["model", "bursty", "--t0", "-5us"], &["--t0"]),
        (&["noise", "--duration", "-1s"], &["--duration"]),
        (&["doctor", "--pid", "-1"], &["--pid"]),
    ]);
}

/// Issue 22: an experiment file with a bad key or value, `/dev/zero`, a directory or a huge
/// file as an experiment file; a doubled `--param`; an empty SLO condition; `tune --steps`
/// empty, with an empty item or a step twice, `--state-dir` a file; `--spawn` with an
/// address; a 100,000-character URL; an argument that is not UTF-8. Each: exit 2, one line
/// naming what is wrong, no store and no output file created (`--db`, `--junit` and `--plot`
/// point into the empty working directory).
mod issue_22 {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    /// `refused`, with owned arguments.
    fn refused_owned(cases: &[(Vec<String>, Vec<String>)]) {
        for (args, needles) in cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
            refused(&[(&args, &needles)]);
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// A valid side of an experiment, then `extra` lines.
    const GOOD: &str = "target = \"nullrpc://\"\nspawn = true\nserver-work = \"det:50us\"\n\
                        loads = \"1000\"\nduration = \"1s\"\nwarmup = \"200ms\"\n";

    #[test]
    fn experiment_files_are_checked_key_by_key_in_our_words() {
        let _g = common::shared();
        let inputs = tempfile::tempdir().unwrap();
        let file = |name: &str, text: &str| {
            let p = inputs.path().join(name);
            std::fs::write(&p, text).unwrap();
            p.to_str().unwrap().to_string()
        };
        let good = file("good.toml", GOOD);
        let bogus = file("bogus.toml", &format!("{GOOD}bogus-key = 1\n"));
        let boolean = file(
            "bool.toml",
            "target = \"nullrpc://\"\nspawn = true\nduration = true\n",
        );
        let dup = file("dup.toml", &format!("{GOOD}duration = \"2s\"\n"));
        let param = file(
            "param.toml",
            &format!("{GOOD}[param]\nconnections = [1, \"x\"]\n"),
        );
        let view = file("view.toml", &format!("{GOOD}slo-view = \"both\"\n"));
        let neg = file(
            "neg.toml",
            "target = \"nullrpc://\"\nspawn = true\nloads = \"1000\"\nduration = \"-1s\"\n",
        );
        let zero = inputs.path().join("zero.toml");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let zero = zero.to_str().unwrap().to_string();
        let dir = inputs.path().join("dir.toml");
        std::fs::create_dir(&dir).unwrap();
        let dir = dir.to_str().unwrap().to_string();
        let big = file(
            "big.toml",
            &format!("description = \"{}\"\n", "x".repeat(2 << 20)),
        );
        let sweep = |f: &str| strings(&["sweep", f, "--db", "runs.db", "--junit", "j.xml"]);
        let cases = vec![
            (
                sweep(&bogus),
                strings(&["bogus.toml line 7", "unknown key 'bogus-key'"]),
            ),
            (sweep(&boolean), strings(&["line 3", "duration", "boolean"])),
            (
                sweep(&dup),
                strings(&["line 7", "duplicate key", "duration"]),
            ),
            (sweep(&param), strings(&["line 8", "connections", "x"])),
            (sweep(&view), strings(&["line 7", "slo-view", "both"])),
            // A value is checked by its option's parser when the file is read: the error
            // names the file's line and key.
            (
                sweep(&neg),
                strings(&["neg.toml line 4", "duration: ", "negative"]),
            ),
            (sweep(&zero), strings(&["zero.toml", "not a regular file"])),
            (sweep(&dir), strings(&["dir.toml", "a directory"])),
            (sweep(&big), strings(&["big.toml", "1 MiB"])),
            (
                strings(&["colocate", &good, &bogus, "--db", "runs.db"]),
                strings(&["bogus.toml line 7", "bogus-key"]),
            ),
            (
                strings(&["colocate", &zero, &good, "--db", "runs.db"]),
                strings(&["not a regular file"]),
            ),
        ];
        refused_owned(&cases);
        for (args, _) in &cases {
            let out = common::bin().args(args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            for clap_words in [
                "tip:",
                "unexpected argument",
                "a value is required",
                "Usage:",
            ] {
                assert!(!err.contains(clap_words), "{args:?}: {err}");
            }
        }
    }

    #[test]
    fn doubled_axes_and_empty_conditions_are_refused() {
        let _g = common::shared();
        let sweep = [
            "sweep",
            "nullrpc://",
            "--spawn",
            "--loads",
            "1000",
            "--db",
            "runs.db",
        ];
        let with = |more: &[&str]| {
            let mut v = strings(&sweep);
            v.extend(strings(more));
            v
        };
        refused_owned(&[
            (
                with(&["--param", "connections=4", "--param", "connections=8"]),
                strings(&["--param connections", "twice"]),
            ),
            (
                with(&["--param", "server-threads=1", "--param", "server_threads=2"]),
                strings(&["server-threads", "twice"]),
            ),
            (
                with(&["--slo", "p99<=1ms,", "--junit", "j.xml"]),
                strings(&["--slo", "empty condition"]),
            ),
            (
                with(&["--slo", ",p99<=1ms"]),
                strings(&["--slo", "empty condition"]),
            ),
            (
                strings(&[
                    "run",
                    "nullrpc://",
                    "--spawn",
                    "--rate",
                    "1000",
                    "--slo",
                    "p99<=1ms,,p50<=1ms",
                    "--db",
                    "runs.db",
                ]),
                strings(&["--slo", "empty condition"]),
            ),
        ]);
    }

    #[test]
    fn tune_refuses_bad_steps_and_a_state_dir_that_is_a_file() {
        let _g = common::shared();
        let inputs = tempfile::tempdir().unwrap();
        let state = inputs.path().join("state");
        std::fs::write(&state, "").unwrap();
        let state = state.to_str().unwrap().to_string();
        let tune = |more: &[&str]| {
            let mut v = strings(&[
                "tune",
                "nullrpc://",
                "--spawn",
                "--rate",
                "1000",
                "--db",
                "runs.db",
            ]);
            v.extend(strings(more));
            v
        };
        refused_owned(&[
            (tune(&["--steps", ""]), strings(&["--steps", "no step"])),
            (tune(&["--steps", " "]), strings(&["--steps", "no step"])),
            (
                tune(&["--steps", "rt,"]),
                strings(&["--steps", "empty item"]),
            ),
            (
                tune(&["--steps", "rt,rt"]),
                strings(&["--steps", "'rt'", "twice"]),
            ),
            (
                tune(&["--steps", "rt", "--state-dir", &state]),
                strings(&["--state-dir", "not a directory"]),
            ),
            (
                tune(&["--steps", "rt", "--state-dir", &format!("{state}/sub")]),
                strings(&["--state-dir", "not a directory"]),
            ),
        ]);
    }

    #[test]
    fn spawn_with_an_address_is_refused() {
        let _g = common::shared();
        refused_owned(&[
            (
                strings(&[
                    "run",
                    "memcached://127.0.0.1:11211",
                    "--spawn",
                    "--rate",
                    "10",
                    "--db",
                    "runs.db",
                ]),
                strings(&[
                    "--spawn starts the server itself",
                    "memcached://",
                    "127.0.0.1:11211",
                ]),
            ),
            (
                strings(&[
                    "run",
                    "nullrpc://127.0.0.1:7000",
                    "--spawn",
                    "--rate",
                    "10",
                    "--db",
                    "runs.db",
                ]),
                strings(&["--spawn", "nullrpc://"]),
            ),
            (
                strings(&[
                    "sweep",
                    "http://localhost/f0",
                    "--spawn",
                    "--loads",
                    "10",
                    "--db",
                    "runs.db",
                ]),
                strings(&["--spawn", "http:///f0"]),
            ),
        ]);
    }

    #[test]
    fn runs_compare_refuses_a_calibration() {
        let _g = common::shared();
        let stores = tempfile::tempdir().unwrap();
        let db = stores.path().join("runs.db");
        let st = store::Store::open(&db).unwrap();
        let mut ids = Vec::new();
        for kind in ["calibrate", "run"] {
            let id = st
                .begin_run(&store::NewRun {
                    kind: kind.into(),
                    target: "nullrpc://".into(),
                    started_at: "2026-11-21T21:00:00.000Z".into(),
                    config: serde_json::json!({}),
                    host: serde_json::json!({}),
                })
                .unwrap();
            st.finish_run(id, "ok", &serde_json::json!({"measured": {"p99": 12.5}}))
                .unwrap();
            ids.push(id.to_string());
        }
        drop(st);
        let db = db.to_str().unwrap();
        refused_owned(&[
            (
                strings(&["runs", "compare", &ids[0], &ids[1], "--db", db]),
                vec![
                    format!("run {} is a calibration", ids[0]),
                    "not a load run".into(),
                ],
            ),
            (
                strings(&[
                    "runs", "compare", &ids[1], &ids[0], "--db", db, "--plot", "c.svg",
                ]),
                vec![format!("run {} is a calibration", ids[0])],
            ),
        ]);
    }

    #[test]
    fn long_values_are_quoted_clipped() {
        let _g = common::shared();
        let inputs = tempfile::tempdir().unwrap();
        let url = format!("nullrpc://{}:1", "a".repeat(100_000));
        let long = inputs.path().join("long.toml");
        std::fs::write(
            &long,
            format!(
                "target = \"gopher://{}\"\nloads = \"10\"\n",
                "b".repeat(500_000)
            ),
        )
        .unwrap();
        let long = long.to_str().unwrap().to_string();
        for args in [
            strings(&["run", &url, "--rate", "10", "--db", "runs.db"]),
            strings(&["run", &url, "--spawn", "--rate", "10", "--db", "runs.db"]),
            strings(&["sweep", &url, "--loads", "10", "--db", "runs.db"]),
            strings(&["sweep", &long, "--db", "runs.db"]),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let out = run_in(
                dir.path(),
                &args.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            assert_usage_error(&out, &["…"]);
            assert!(
                out.stderr.len() < 2_500,
                "{} bytes of stderr",
                out.stderr.len()
            );
            assert!(names(dir.path()).is_empty());
        }
    }

    #[test]
    fn an_argument_that_is_not_utf8_is_named() {
        let _g = common::shared();
        let dir = tempfile::tempdir().unwrap();
        let out = common::bin()
            .current_dir(dir.path())
            .args(["run", "nullrpc://127.0.0.1:1", "--db", "runs.db", "--rate"])
            .arg(OsStr::from_bytes(b"10\xff"))
            .output()
            .unwrap();
        assert_usage_error(&out, &["argument 6", "10\\xff", "--rate", "UTF-8"]);
        let out = common::bin()
            .current_dir(dir.path())
            .arg("run")
            .arg(OsStr::from_bytes(b"nullrpc://\xfe"))
            .args(["--rate", "10", "--db", "runs.db"])
            .output()
            .unwrap();
        assert_usage_error(&out, &["argument 2", "\\xfe", "UTF-8"]);
        assert!(names(dir.path()).is_empty());
    }
}
