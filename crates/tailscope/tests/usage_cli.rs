//! Bad usage of the computing commands: exit 2, one line on stderr naming the flag, and
//! nothing created — unwritable outputs are found before any computation, and numeric inputs
//! beyond what the code can run (or negative ones) are refused instead of hanging, running out
//! of memory or printing saturated values.

mod common;
mod support;

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

#[test]
fn numeric_inputs_beyond_what_can_run_are_refused() {
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
        (&["noise", "--duration", "25h"], &["--duration"]),
        (&["noise", "--threshold", "5s"], &["--threshold"]),
    ]);
}

#[test]
fn durations_that_do_not_fit_are_refused_not_saturated() {
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
