//! Isolation through the real binary (root needed; in CI a missing privilege or tool fails):
//! every cgroup and qdisc a run creates is gone after it — after SIGINT mid-run, and after
//! SIGKILL mid-run once the next start has run; the stressor and the new target options
//! reach the stored run; bad isolation input exits 2 with nothing created. Sleeps only wait
//! for a run to reach its measurement; no wall-clock time is asserted.

use crate::common;
use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{bin, json_of};
use support::assert_usage_error;

fn privileged(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let tools = ["ip", "tc"]
        .iter()
        .all(|t| Command::new(t).arg("-V").output().is_ok());
    if root && tools {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what} needs root and iproute2, which CI must provide");
    }
    eprintln!("NOT RUN: {what} needs root and iproute2");
    false
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace holding a veth pair; its `vb` end is what the runs shape. Deleted
/// on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("tsc{tag}{}", std::process::id());
        sh(&["ip", "netns", "add", &name]);
        let n = Netns { name };
        sh(&[
            "ip", "-n", &n.name, "link", "add", "va", "type", "veth", "peer", "name", "vb",
        ]);
        n
    }

    fn dev(&self) -> String {
        format!("{}/vb", self.name)
    }

    fn shaped(&self) -> bool {
        let out = Command::new("tc")
            .args(["-n", &self.name, "qdisc", "show", "dev", "vb"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains("htb 7a5c:")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn journal(state: &Path) -> PathBuf {
    state.join("tailscope/isolation.jsonl")
}

/// The cgroup directories the journal names (absolute).
fn journalled_groups(state: &Path) -> Vec<PathBuf> {
    std::fs::read_to_string(journal(state))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["created"]["kind"] == "cgroup")
        .filter_map(|e| e["created"]["dir"].as_str().map(|d| Path::new("/").join(d)))
        .collect()
}

fn last_cpu() -> String {
    (std::thread::available_parallelism().unwrap().get() - 1).to_string()
}

/// `tailscope run` on a spawned memcached with a memory limit, a CPU quota and an HTB rate
/// on `dev`, for far longer than the test waits.
fn isolated_run(db: &Path, state: &Path, dev: &str) -> Child {
    bin()
        .args([
            "run",
            "--no-noise-probe",
            "memcached://",
            "--spawn",
            "--server-threads",
            "1",
            "--server-cpus",
            &last_cpu(),
            "--cpus",
            "0",
            "--rate",
            "2000",
            "--duration",
            "120s",
            "--warmup",
            "200ms",
            "--service",
            "20us",
            "--items",
            "1000",
            "--server-memory",
            "256M",
            "--server-cpu-quota",
            "0.9",
            "--net-rate",
            "50mbit",
            "--net-dev",
            dev,
            "--db",
            db.to_str().unwrap(),
            "--json",
        ])
        .env("XDG_STATE_HOME", state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the run's groups and qdisc exist (the journal is written before each), then
/// a little more so the load is running. Returns the groups.
fn wait_isolated(run: &mut Child, state: &Path, ns: &Netns) -> Vec<PathBuf> {
    let t = Instant::now();
    loop {
        let g = journalled_groups(state);
        if g.len() >= 2 && g.iter().all(|d| d.is_dir()) && ns.shaped() {
            std::thread::sleep(Duration::from_millis(1500));
            return g;
        }
        if let Ok(Some(st)) = run.try_wait() {
            panic!("the run ended early ({st})");
        }
        // A bound on the wait, not an assertion about speed: a broken run must not hang CI.
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no isolation after 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(c: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(c.id() as i32, sig);
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn sigint_mid_run_removes_every_group_and_the_qdisc() {
    let _g = common::shared();
    if !privileged("isolation through the CLI") {
        return;
    }
    let ns = Netns::new("i");
    let dir = tempfile::tempdir().unwrap();
    let (db, state) = (dir.path().join("runs.db"), dir.path().join("state"));
    let mut run = isolated_run(&db, &state, &ns.dev());
    let groups = wait_isolated(&mut run, &state, &ns);
    signal(&run, libc::SIGINT);
    let out = run.wait_with_output().unwrap();
    let v = json_of(&out);
    assert_eq!(v["status"], "interrupted", "{}", stderr(&out));
    let mech: Vec<&str> = v["server"]["isolation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(
        mech.contains(&"memory") && mech.contains(&"net-rate"),
        "{mech:?}"
    );
    assert!(
        groups.iter().all(|d| !d.exists()),
        "left behind: {groups:?}"
    );
    assert!(!ns.shaped(), "the qdisc is left behind");
    let left = std::fs::read_to_string(journal(&state)).unwrap_or_default();
    assert!(left.trim().is_empty(), "journal: {left}");
}

#[test]
fn sigkill_mid_run_leaves_leftovers_that_the_next_start_removes() {
    let _g = common::shared();
    if !privileged("isolation through the CLI") {
        return;
    }
    let ns = Netns::new("k");
    let dir = tempfile::tempdir().unwrap();
    let (db, state) = (dir.path().join("runs.db"), dir.path().join("state"));
    let mut run = isolated_run(&db, &state, &ns.dev());
    let groups = wait_isolated(&mut run, &state, &ns);
    signal(&run, libc::SIGKILL);
    run.wait().unwrap();
    assert!(
        groups.iter().all(|d| d.is_dir()),
        "a killed run cannot clean up"
    );
    assert!(ns.shaped());
    // The next start (any run) removes them first.
    let out = bin()
        .args([
            "run",
            "--no-noise-probe",
            "memcached://",
            "--spawn",
            "--server-threads",
            "1",
            "--rate",
            "1000",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--service",
            "20us",
            "--items",
            "100",
            "--db",
            db.to_str().unwrap(),
        ])
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("leftover(s) of a tailscope that died"),
        "{}",
        stderr(&out)
    );
    // The spawned memcached may take a moment to leave its (removed) group after SIGTERM.
    assert!(
        groups.iter().all(|d| !d.exists()),
        "left behind: {groups:?}"
    );
    assert!(!ns.shaped(), "the qdisc is left behind");
    let left = std::fs::read_to_string(journal(&state)).unwrap_or_default();
    assert!(left.trim().is_empty(), "journal: {left}");
}

#[test]
fn bad_isolation_input_exits_2_and_creates_nothing() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let (db, state) = (dir.path().join("runs.db"), dir.path().join("state"));
    let run = |extra: &[&str]| {
        let mut c = bin();
        c.args([
            "run",
            "--no-noise-probe",
            "memcached://",
            "--rate",
            "1000",
            "--service",
            "20us",
        ])
        .args(extra)
        .arg("--db")
        .arg(&db)
        .env("XDG_STATE_HOME", &state);
        c.output().unwrap()
    };
    let mut cases: Vec<(&[&str], &[&str])> = vec![
        (&["--server-memory", "64M"], &["need --spawn"]),
        (
            &["--spawn", "--server-memory", "lots"],
            &["--server-memory"],
        ),
        (
            &["--spawn", "--server-cpu-quota", "x"],
            &["--server-cpu-quota"],
        ),
        (&["--spawn", "--server-cpu-quota", "0"], &["cpu quota"]),
        (&["--spawn", "--net-rate", "10mbps"], &["bytes per second"]),
        (&["--spawn", "--net-rate", "10mbit"], &["--net-dev"]),
        (
            &["--spawn", "--net-rate", "10mbit", "--net-dev", "nosuch0"],
            &["no interface 'nosuch0'"],
        ),
        (
            &["--spawn", "--net-rate", "1mbit", "--net-dev", "ghost/vb"],
            &["no network namespace 'ghost'"],
        ),
        (&["--spawn", "--server-smt", "ht"], &["--server-smt"]),
        (&["--spawn", "--server-cpuset", "99"], &["--server-cpuset"]),
        (
            &["--spawn", "--server-instances", "0"],
            &["--server-instances"],
        ),
        (
            &["--spawn", "--server-instances", "3", "--connections", "2"],
            &["3 server instances"],
        ),
        (&["--stress", "disk"], &["--stress", "disk"]),
        (&["--stress", "cpu@2"], &["intensity"]),
        (&["--spawn", "--file-size", "uniform:9,1"], &["--file-size"]),
    ];
    // What this host lacks (this project's VM lacks both) is refused as unavailable.
    if !Path::new("/sys/fs/resctrl").exists() {
        cases.push((
            &["--spawn", "--llc-ways", "2"],
            &["unavailable: no resctrl"],
        ));
    }
    let siblings =
        std::fs::read_to_string("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
            .unwrap_or_default();
    if !siblings.contains(',') && !siblings.contains('-') {
        cases.push((
            &["--spawn", "--server-smt", "siblings"],
            &["no SMT siblings"],
        ));
    }
    for (args, needles) in cases {
        let out = run(args);
        assert_usage_error(&out, needles);
    }
    assert!(!db.exists() && !state.exists(), "nothing written");
}

#[test]
fn stress_command_runs_reports_and_refuses_bad_input() {
    let _g = common::shared();
    let out = bin()
        .args([
            "stress",
            "cache",
            "--cpus",
            &last_cpu(),
            "--intensity",
            "0.5",
            "--duration",
            "300ms",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json_of(&out);
    assert_eq!(v["kind"], "cache");
    assert!(v["iterations"].as_u64().unwrap() > 0);
    assert_eq!(v["buffer_bytes"], v["llc_bytes"]);
    // A host root without sysfs caches: the stated default LLC.
    let empty = tempfile::tempdir().unwrap();
    let out = bin()
        .args([
            "stress",
            "memory",
            "--cpus",
            "0",
            "--duration",
            "100ms",
            "--json",
        ])
        .arg("--root")
        .arg(empty.path())
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["llc_source"], "default");
    assert_eq!(v["llc_bytes"], 32u64 << 20);
    for (args, needle) in [
        (vec!["stress", "cpu", "--cpus", "99"], "--cpus"),
        (
            vec!["stress", "cpu", "--cpus", "0", "--intensity", "0"],
            "--intensity",
        ),
        (
            vec!["stress", "cpu", "--cpus", "0", "--duration", "0s"],
            "--duration",
        ),
        (vec!["stress", "disk", "--cpus", "0"], "disk"),
    ] {
        let out = bin().args(&args).output().unwrap();
        assert_usage_error(&out, &[needle]);
    }
}

/// ThunderX Fig. 8 and Table VI: a sweep runs memcached bare, in a veth container and in one
/// whose network processing is on the server's CPU; each run's record says what was made
/// (the container's namespaces, its network, the RPS CPUs) and the namespaces are gone after
/// the sweep. Bad container input exits 2 with nothing written.
#[test]
fn containers_are_made_recorded_and_removed_and_bad_input_is_refused() {
    let _g = common::shared();
    if !privileged("server containers") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (db, state) = (dir.path().join("runs.db"), dir.path().join("state"));
    let cpu = last_cpu();
    let sweep = |extra: &[&str]| {
        let mut c = bin();
        c.args([
            "sweep",
            "--no-noise-probe",
            "memcached://",
            "--spawn",
            "--server-threads",
            "1",
        ])
        .args(["--server-cpus", &cpu, "--cpus", "0", "--loads", "2000"])
        // A stated service time: no calibration each time a knob restarts the server.
        .args(["--duration", "0.5s", "--warmup", "0.2s", "--json"])
        .args(["--service", "20us"])
        .args(extra)
        .arg("--db")
        .arg(&db)
        .env("XDG_STATE_HOME", &state);
        c.output().unwrap()
    };
    for (args, needle) in [
        (&["--param", "server-container=vm"][..], "unknown container"),
        (
            &["--param", "server-rx-cpus=1"][..],
            "server-container=veth",
        ),
        (
            &[
                "--param",
                "server-container=namespaces",
                "--param",
                "server-rx-cpus=0",
            ][..],
            "server-container=veth",
        ),
        (
            &[
                "--param",
                "server-container=veth",
                "--param",
                "server-rx-cpus=99",
            ][..],
            "server-rx-cpus",
        ),
    ] {
        assert_usage_error(&sweep(args), &[needle]);
    }
    let o = bin()
        .args([
            "sweep",
            "--no-noise-probe",
            "nullrpc://",
            "--spawn",
            "--loads",
            "1000",
        ])
        .args(["--param", "server-container=veth", "--db"])
        .arg(&db)
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    assert_usage_error(&o, &["real servers"]);
    assert!(!db.exists() && !state.exists(), "nothing written");

    let o = sweep(&["--param", "server-container=none,veth"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Two containers one after the other in one process (a server knob restarts the
    // server): the second must not collide with the first's teardown.
    let o2 = sweep(&[
        "--param",
        "server-container=veth",
        "--param",
        &format!("server-rx-cpus={cpu}"),
        "--param",
        "server-threads=1,2",
    ]);
    assert_eq!(o2.status.code(), Some(0), "{}", stderr(&o2));
    let rows: Vec<serde_json::Value> = [json_of(&o), json_of(&o2)]
        .iter()
        .flat_map(|v| v["rows"].as_array().unwrap().clone())
        .collect();
    assert_eq!(rows.len(), 4);
    let mut made = Vec::new();
    for (row, want) in rows.iter().zip(["none", "veth", "veth", "veth"]) {
        assert_eq!(row["status"], "ok", "{row}");
        let id = row["run_id"].as_i64().unwrap().to_string();
        let shown = bin()
            .args(["runs", "show", &id, "--json", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        let server = &json_of(&shown)["summary"]["server"];
        let c = &server["container"];
        if want == "none" {
            assert!(c.is_null(), "{server}");
            continue;
        }
        assert_eq!(c["kind"], "veth", "{server}");
        assert!(c["namespaces"].as_array().unwrap().contains(&"net".into()));
        let network = c["network"].as_str().unwrap();
        let name = network
            .split_whitespace()
            .find(|w| w.starts_with("tailscope-ctr-"))
            .unwrap()
            .trim_end_matches(',')
            .to_string();
        assert!(c["apply_us"].as_f64().unwrap() > 0.0);
        made.push((name, c["rx_cpus"].clone()));
    }
    assert_eq!(made[0].1, serde_json::json!([]));
    for m in &made[1..] {
        assert_eq!(m.1, serde_json::json!([cpu.parse::<u64>().unwrap()]));
    }
    assert_ne!(made[1].0, made[2].0, "each container has its own namespace");
    for (name, _) in &made {
        assert!(
            !Path::new("/run/netns").join(name).exists(),
            "{name} left behind"
        );
    }
    let left = std::fs::read_to_string(journal(&state)).unwrap_or_default();
    assert!(left.trim().is_empty(), "journal not cleared: {left}");
}
