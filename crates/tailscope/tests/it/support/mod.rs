//! What the tests of "nothing is created on bad input" share: listing a directory, and running
//! a command as a user who may not write into one.
#![allow(dead_code)] // each test binary uses its own subset

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

/// The names in `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Runs `cmd` as a user who may not write into `dir` (whose parents must be searchable by
/// everyone): root may write anywhere, so as root it runs as `nobody`; otherwise `dir` is
/// read-only for its owner. Either way `dir` is mode 0555 during the run and 0755 after.
pub fn as_user_without_write_access(dir: &Path, mut cmd: Command) -> Output {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.uid(65534).gid(65534);
    }
    let out = cmd.output().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    out
}

/// Asserts a usage error: exit 2, exactly one line on stderr containing every needle, and
/// nothing on stdout.
pub fn assert_usage_error(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{needles:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line expected: {err}");
    for n in needles {
        assert!(err.contains(n), "'{}' should name '{n}'", err.trim());
    }
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
