//! `run --stages` (issue 14): eBPF stages by default for a spawned server on a host that
//! supports them (this one: CI runs as root on a kernel with BTF; a host without them fails
//! the first test, it does not skip it), a clean fallback with its one-line reason where the
//! host does not — forced here with a fixture root (`TAILSCOPE_EBPF_ROOT`) that lacks
//! everything — and the refusals of what cannot run.

use crate::common;

use common::{bin, json_of};
use std::process::Output;
use std::sync::Mutex;

/// One at a time: these tests share two CPUs with the servers they start.
static SERIAL: Mutex<()> = Mutex::new(());

/// `tailscope run memcached:// --spawn …` for one second, with `extra` flags and `env`.
fn run_memcached(db: &std::path::Path, extra: &[&str], env: Option<&std::path::Path>) -> Output {
    let mut c = bin();
    c.args([
        "run",
        "memcached://",
        "--spawn",
        "--service",
        "10us",
        "--rate",
        "2000",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--lateness-threshold",
        "1s",
        "--no-attribution",
        // The host's noise probe (0.3-0.6 s a run) is not what these tests judge.
        "--no-noise-probe",
        "--db",
    ])
    .arg(db)
    .args(extra);
    if let Some(root) = env {
        c.env("TAILSCOPE_EBPF_ROOT", root);
    }
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn collector(v: &serde_json::Value) -> serde_json::Value {
    v["instruments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "eBPF stage collector")
        .cloned()
        .unwrap_or_else(|| panic!("no eBPF stage collector among the instruments: {v}"))
}

#[test]
fn a_spawned_server_gets_ebpf_stages_by_default() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let out = run_memcached(&dir.path().join("runs.db"), &["--json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json_of(&out);
    let c = collector(&v);
    assert_eq!(c["detail"]["source"], "ebpf", "{c}");
    // The default budget: what a window saw whole is matched, the rest counted.
    let d = &c["detail"];
    let s = &d["sampling"];
    assert_eq!(s["budget_fraction"], 0.01, "{c}");
    let whole = d["answered"].as_u64().unwrap()
        - s["answered_outside_windows"].as_u64().unwrap()
        - s["answered_at_window_edges"].as_u64().unwrap();
    assert_eq!(d["matched"].as_u64(), Some(whole), "{c}");
    assert!(whole > 0, "{c}");
    // The stage table of a real server, from the kernel. Sampled, a one-second run at 2k
    // req/s may hold fewer stamped requests after its warm-up than the table needs (100):
    // attached throughout, every request has its stages.
    let out = run_memcached(
        &dir.path().join("all.db"),
        &["--json", "--stages-budget", "all"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json_of(&out);
    let c = collector(&v);
    assert!(c["detail"]["sampling"].is_null(), "{c}");
    assert_eq!(c["detail"]["matched"], c["detail"]["answered"], "{c}");
    let rows = v["stages"]["rows"].as_array().unwrap();
    assert!(rows
        .iter()
        .any(|r| r["stage"].as_str().unwrap().starts_with("read")));
}

#[test]
fn a_host_without_support_falls_back_with_the_reason() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    // A root with no /proc/self/status (no capabilities), no BTF, no tracefs.
    let fixture = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = run_memcached(&db, &["--json"], Some(fixture.path()));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json_of(&out);
    assert_eq!(v["status"], "ok", "{v}");
    let c = collector(&v);
    assert_eq!(c["mode"], "off");
    assert!(c["note"].as_str().unwrap().contains("not root"), "{c}");
    // memcached returns no stamps of its own: no stage table.
    assert!(v["stages"].is_null(), "{}", v["stages"]);
    // On the terminal the reason is one line on stderr.
    let out = run_memcached(&db, &[], Some(fixture.path()));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    let why: Vec<&str> = err.lines().filter(|l| l.contains("eBPF")).collect();
    assert_eq!(
        why,
        ["stages: no eBPF stages for this run: not root: loading eBPF programs needs CAP_BPF and CAP_PERFMON (run as root)"],
        "{err}"
    );
    // Asked for explicitly, eBPF is refused before anything starts, with the reason.
    let db = dir.path().join("refused.db");
    let out = run_memcached(&db, &["--stages", "ebpf"], Some(fixture.path()));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--stages ebpf") && err.contains("not root"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!db.exists(), "nothing stored");
}

#[test]
fn stages_that_cannot_be_had_are_bad_usage() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for (args, says) in [
        (vec!["--stages", "sometimes"], "--stages must be"),
        (vec!["--stages-budget", "0"], "--stages-budget must be"),
        (vec!["--stages-budget", "150%"], "--stages-budget must be"),
        (vec!["--stages-budget", "some"], "--stages-budget must be"),
        // An external server: eBPF needs its process.
        (vec!["--stages", "ebpf"], "--server-pid"),
    ] {
        let out = bin()
            .args(["run", "memcached://127.0.0.1:1", "--rate", "1000"])
            .args(["--service", "10us", "--db"])
            .arg(&db)
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(!db.exists());
    }
}
