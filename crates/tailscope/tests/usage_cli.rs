//! Unwritable output paths: exit 2, one line on stderr naming the flag, and nothing created —
//! found before any computation starts.

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
