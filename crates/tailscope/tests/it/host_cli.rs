//! `doctor` and `noise` driven as a user drives them. Doctor reads fixture trees that look like
//! bare-metal machines (crates/host/tests/fixtures), so its checks are exercised on a VM that
//! has no cpufreq, C-states or NUMA; `--apply` runs inside a copy, never on this host.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tailscope"))
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../host/tests/fixtures")
        .join(name)
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn statuses(v: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn doctor_json_has_the_documented_shape_and_tells_tuned_from_untuned() {
    let _g = crate::common::shared();
    let bare = json_of(
        &bin()
            .args(["doctor", "--root"])
            .arg(fixture("bare-metal"))
            .args(["--cpus", "2-3", "--json"])
            .output()
            .unwrap(),
    );
    let tuned = json_of(
        &bin()
            .args(["doctor", "--root"])
            .arg(fixture("tuned"))
            .args(["--cpus", "2-3", "--json"])
            .output()
            .unwrap(),
    );
    for c in bare["checks"].as_array().unwrap() {
        for k in [
            "id",
            "status",
            "evidence",
            "mitigation",
            "tradeoff",
            "needs_root",
            "needs_reboot",
        ] {
            assert!(c.get(k).is_some(), "check misses {k}: {c}");
        }
    }
    let (b, t) = (statuses(&bare), statuses(&tuned));
    assert_ne!(b["cpu_governor"], "ok");
    assert_eq!(t["cpu_governor"], "ok");
    assert_ne!(b["cpuidle"], "ok");
    assert_eq!(t["cpuidle"], "ok");
    assert_ne!(b["irqbalance"], "ok");
    // The plan is a dry run unless --apply.
    assert_eq!(bare["applied"], false);
    assert!(!bare["plan"].as_array().unwrap().is_empty());
}

#[test]
fn doctor_with_a_pid_checks_the_servers_threads() {
    let _g = crate::common::shared();
    let v = json_of(
        &bin()
            .args(["doctor", "--root"])
            .arg(fixture("bare-metal"))
            .args(["--pid", "4242", "--json"])
            .output()
            .unwrap(),
    );
    let s = statuses(&v);
    assert!(
        s.contains_key("server_sched") && s.contains_key("server_runqueue_wait"),
        "{s:?}"
    );
}

#[test]
fn doctor_bad_input_exits_2_with_one_line() {
    let _g = crate::common::shared();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state");
    std::fs::write(&file, b"not a directory").unwrap();
    let under = file.join("sub");
    for (args, needle) in [
        (
            vec!["doctor", "--root", "/nonexistent/root"],
            "/nonexistent/root",
        ),
        (vec!["doctor", "--pid", "999999999"], "999999999"),
        (vec!["doctor", "--cpus", "x-y"], "x-y"),
        // A state dir that is a file, or lies under one, could never hold the journal.
        (
            vec!["doctor", "--state-dir", file.to_str().unwrap()],
            "--state-dir",
        ),
        (
            vec!["doctor", "--state-dir", under.to_str().unwrap()],
            "is not a directory",
        ),
    ] {
        let out = bin().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
    let out = bin()
        .args(["doctor", "--root"])
        .arg(fixture("bare-metal"))
        .args(["--cpus", "64"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else if m.is_file() {
                out.push((
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn doctor_apply_holds_the_changes_until_sigint_and_then_restores_every_file() {
    let _g = crate::common::shared();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("host");
    let st = Command::new("cp")
        .arg("-a")
        .arg(fixture("bare-metal"))
        .arg(&root)
        .status()
        .unwrap();
    assert!(st.success());
    let before = snapshot(&root);
    let state = tmp.path().join("state");
    let mut child = bin()
        .args(["doctor", "--apply", "--cpus", "2-3", "--root"])
        .arg(&root)
        .arg("--state-dir")
        .arg(&state)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("held"), "{line}");
    let during = snapshot(&root);
    assert_ne!(before, during, "--apply changed nothing in the fixture");
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let st = child.wait().unwrap();
    assert!(st.success(), "{st:?}");
    assert_eq!(before, snapshot(&root), "files not restored byte for byte");
}

#[test]
fn noise_json_has_the_documented_shape() {
    let _g = crate::common::shared();
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("noise.svg");
    let v = json_of(
        &bin()
            .args([
                "noise",
                "--cpus",
                "0",
                "--duration",
                "300ms",
                "--json",
                "--plot",
            ])
            .arg(&plot)
            .output()
            .unwrap(),
    );
    let c = &v["cpus"][0];
    assert_eq!(c["cpu"], 0);
    for k in [
        "min_loop_ns",
        "gaps_per_s",
        "time_lost_fraction",
        "snr",
        "gaps",
    ] {
        assert!(c.get(k).is_some(), "missing {k}");
    }
    let min = c["min_loop_ns"].as_f64().unwrap();
    assert!(min > 0.0 && min < 1_000.0, "min loop {min} ns");
    let lost = c["time_lost_fraction"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&lost));
    // The paper's own figures: its SNR as a range (exact when low == high, never inverted)
    // and the loop's p99.9 within [shortest iteration, ∞).
    let p = &c["snr_paper"];
    let (lo, hi) = (p["low"].as_f64(), p["high"].as_f64());
    if let (Some(lo), Some(hi)) = (lo, hi) {
        assert!(lo <= hi && lo >= 0.0, "{p}");
        assert_eq!(p["exact"], lo == hi, "{p}");
    }
    let q = &c["loop_p999"];
    assert!(q["low_ns"].as_f64().unwrap() >= min * 0.999, "{q}");
    // --plot drew both panels of Figs. 7 and 8.
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.contains("CDF of gaps") && svg.contains("time lost"),
        "{plot:?}"
    );
}

#[test]
fn noise_bad_input_exits_2() {
    let _g = crate::common::shared();
    for (args, needle) in [
        (vec!["noise", "--cpus", "99"], "99"),
        (vec!["noise", "--duration", "0s"], "duration"),
        (vec!["noise", "--loop", "twisted"], "twisted"),
        (vec!["noise", "--threshold", "0ns"], "threshold"),
        (
            vec!["noise", "--contributors", "bpf"],
            "ebpf, counters or auto",
        ),
        (vec!["noise", "--plot", "gaps.txt"], ".png or .svg"),
        (
            vec!["noise", "--plot", "/nonexistent/dir/gaps.png"],
            "does not exist",
        ),
    ] {
        let out = bin().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.to_lowercase().contains(needle), "{args:?}: {err}");
    }
}
