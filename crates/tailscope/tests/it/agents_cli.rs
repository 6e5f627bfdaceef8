//! `tailscope run --agent …` on this host: agents started as local processes (this binary,
//! through `sh -c` wrappers and a time namespace), against the built-in server on loopback.
//! Runs with agents in network namespaces and over SSH are in `agents_netns.rs`.

use crate::agents_support;
use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use agents_support::{assert_agents_add_up, assert_percentiles_match_records, export, serve};
use common::{bin, json_of, runs_list};

/// One run at a time: agents, server and coordinator share the host's CPUs.
static SERIAL: Mutex<()> = Mutex::new(());

const EXE: &str = env!("CARGO_BIN_EXE_tailscope");

/// `tailscope run` of the built-in server at `port` from `agents`, into store `db` (no
/// `--duration` when `duration` is empty).
fn run_cmd(port: u16, rate: &str, duration: &str, agents: &[String], db: &Path) -> Command {
    let mut c = bin();
    let target = format!("nullrpc://127.0.0.1:{port}");
    c.args([
        "run",
        "--no-noise-probe",
        &target,
        "--rate",
        rate,
        "--warmup",
        "500ms",
        "--service",
        "10us",
    ]);
    if !duration.is_empty() {
        c.args(["--duration", duration]);
    }
    for a in agents {
        c.args(["--agent", a]);
    }
    c.arg("--db").arg(db).arg("--json");
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn two_local_agents_split_the_rate_and_add_up_to_the_run() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let s = serve("127.0.0.1:0", None);
    let agents = ["local".to_string(), "local".to_string()];
    // The acceptance run. Its lateness threshold is 1 s, as in the netns agent tests: the
    // plumbing is under test here, and three processes sharing this host's two CPUs with the
    // server saw lateness p99 of 7 ms in a noisy hour (which a 5 ms threshold made `invalid`).
    let out = run_cmd(s.port, "4000", "3s", &agents, &db)
        .args(["--lateness-threshold", "1s"])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["status"], "ok", "{v}\n{}", stderr(&out));
    assert_eq!(out.status.code(), Some(0));
    assert_agents_add_up(&v, 2, 4000.0);
    for a in v["agents"].as_array().unwrap() {
        assert_eq!(a["status"], "ok", "{a}");
        assert_eq!(a["command"], "local");
        // Local agents read this host's very clock: offset exactly 0.
        assert_eq!(a["clock"], "shared");
        assert_eq!(a["offset_ns"], 0);
        assert!(a["uncertainty_ns"].is_u64() && a["min_rtt_ns"].as_u64().unwrap() > 0);
        assert!(a["lateness_p99_us"].as_f64().unwrap() <= 1_000_000.0);
    }
    assert_percentiles_match_records(&v, &db);
    // Each agent's threads are their own record streams, its connections its own numbers:
    // agent 1 holds connections 0..8, agent 2 8..16.
    let e = export(&db, v["run_id"].as_i64().unwrap());
    let conn = e.col("conn");
    let conns: std::collections::BTreeSet<i64> = e.rows.iter().map(|r| r[conn]).collect();
    assert!(conns.iter().any(|&c| c < 8) && conns.iter().any(|&c| c >= 8));
    assert!(conns.iter().all(|&c| (0..16).contains(&c)), "{conns:?}");
    // The ideal is computed on the merged arrival stream.
    assert!(v["ideal"]["p50"].as_f64().unwrap() >= 10.0);
}

#[test]
fn without_records_the_histograms_are_the_distribution_and_the_gaps_are_named() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let s = serve("127.0.0.1:0", None);
    let agents = ["local".to_string(), "local".to_string()];
    let out = run_cmd(s.port, "2000", "2s", &agents, &db)
        .args(["--agent-records", "off", "--lateness-threshold", "1s"])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["status"], "ok", "{v}\n{}", stderr(&out));
    assert_agents_add_up(&v, 2, 2000.0);
    // The run's distribution is the added histograms'; what needs records is named missing.
    assert_eq!(v["measured"], v["agents_merged"]["measured"]);
    assert!(v["ideal"].is_null());
    assert!(v["agents_missing"].as_str().unwrap().contains("ideal"));
    assert!(v["ideal_note"]
        .as_str()
        .unwrap()
        .contains("--agent-records off"));
    let id = v["run_id"].as_i64().unwrap().to_string();
    let out = bin()
        .args(["runs", "export", &id, "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("no per-request records"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_request_count_is_exact_across_agents() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let s = serve("127.0.0.1:0", None);
    let agents = [
        "local".to_string(),
        "local".to_string(),
        "local".to_string(),
    ];
    for arrival in ["poisson", "det"] {
        let out = run_cmd(s.port, "3000", "", &agents, &db)
            .args(["--requests", "4321", "--arrival", arrival])
            .output()
            .unwrap();
        let v = json_of(&out);
        // Poisson lanes take exact quotas from one merge; a dealt stream counts globally.
        assert_eq!(v["requests"], 4321, "{arrival}: {v}\n{}", stderr(&out));
        let sum: u64 = v["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["requests"].as_u64().unwrap())
            .sum();
        assert_eq!(sum, 4321, "{arrival}");
    }
}

#[test]
fn an_agent_killed_mid_run_fails_the_run_by_name_and_what_arrived_is_kept() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let pidfile = dir.path().join("agent2.pid");
    let s = serve("127.0.0.1:0", None);
    let victim = format!("sh -c 'echo $$ > {}; exec {EXE} agent'", pidfile.display());
    let agents = ["local".to_string(), victim];
    let child = run_cmd(s.port, "2000", "6s", &agents, &db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kill the agent once it has measured for a while (its pid appears when it starts).
    let mut pid = None;
    for _ in 0..500 {
        pid = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok());
        if pid.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = pid.expect("agent 2 started");
    std::thread::sleep(Duration::from_millis(3500));
    // SAFETY: kill(2) on the pid of the agent this test started; no memory is involved.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = json_of(&out);
    assert_eq!(v["status"], "failed", "{v}");
    let err = v["error"].as_str().unwrap();
    assert!(
        err.contains("agent 2") && err.contains("killed by signal 9"),
        "{err}"
    );
    let a = &v["agents"];
    assert_eq!(a[1]["status"], "failed");
    assert_ne!(a[0]["status"], "failed", "the survivor is not blamed");
    // What agent 2 measured before it died is in the run: its records and its histograms.
    assert!(a[1]["records"].as_u64().unwrap() > 1000, "{}", a[1]);
    assert!(a[1]["requests"].as_u64().unwrap() > 500, "{}", a[1]);
    assert_eq!(runs_list(&db)["runs"][0]["status"], "failed");
    let e = export(&db, v["run_id"].as_i64().unwrap());
    let conn = e.col("conn");
    assert!(
        e.rows.iter().any(|r| r[conn] >= 8),
        "agent 2's records are stored"
    );
}

#[test]
fn an_agent_in_a_time_namespace_starts_with_the_others() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let s = serve("127.0.0.1:0", None);
    // Its CLOCK_MONOTONIC reads exactly 1000 s more than this host's.
    let shifted = format!("unshare --time --fork --monotonic 1000 {EXE} agent");
    let agents = ["local".to_string(), shifted];
    let out = run_cmd(s.port, "2000", "3s", &agents, &db)
        .args(["--lateness-threshold", "5ms"])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert!(
        v["status"] == "ok" || v["status"] == "invalid",
        "{v}\n{}",
        stderr(&out)
    );
    assert_agents_add_up(&v, 2, 2000.0);
    let a = &v["agents"][1];
    assert_eq!(a["clock"], "measured", "{a}");
    let (offset, unc) = (
        a["offset_ns"].as_i64().unwrap(),
        a["uncertainty_ns"].as_i64().unwrap(),
    );
    // The measurement recovers the offset within its own bound.
    assert!(
        (offset - 1_000_000_000_000).abs() <= unc,
        "offset {offset} ± {unc} ns, true 1e12"
    );
    // And the start was common: the server stamps each request on this host's clock (T3,
    // after the read that brought it). For each agent, the least of T3 − (start + sent) is its fastest
    // one-way trip plus its start's error; the shifted agent's start error is the
    // difference, which must lie within the uncertainty (plus the trips' own variation).
    let start = v["start_mono_ns"].as_i64().unwrap();
    let e = export(&db, v["run_id"].as_i64().unwrap());
    let (sent, t3, conn) = (e.col("sent_ns"), e.col("t3_ns"), e.col("conn"));
    let least = |agent: i64| {
        e.rows
            .iter()
            .filter(|r| r[conn] / 8 == agent && r[sent] > 0 && r[t3] > 0)
            .map(|r| r[t3] - (start + r[sent]))
            .min()
            .unwrap()
    };
    let (d0, d1) = (least(0), least(1));
    eprintln!("fastest trips: {d0} ns (shared clock), {d1} ns (offset {offset} ± {unc} ns)");
    // On the shared clock no request reaches the server before it was sent; the shifted
    // agent's sends are placed on this clock only to within the offset's uncertainty.
    assert!(
        d0 > 0 && d1 > -unc,
        "a request reached the server before it was sent: {d0} {d1} (± {unc}) ns"
    );
    assert!(
        (d1 - d0).abs() <= unc + 50_000,
        "start error {} ns against ±{unc} ns",
        d1 - d0
    );
}

#[test]
fn ctrl_c_stops_every_agent_and_keeps_the_run() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let s = serve("127.0.0.1:0", None);
    let agents = ["local".to_string(), "local".to_string()];
    let child = run_cmd(s.port, "2000", "20s", &agents, &db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    // SAFETY: kill(2) on the coordinator this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let v = json_of(&out);
    assert_eq!(v["status"], "interrupted", "{v}\n{}", stderr(&out));
    assert_eq!(out.status.code(), Some(1));
    let agents = v["agents"].as_array().unwrap();
    // Both agents stopped and reported (none failed); far fewer than 20 s of requests.
    assert!(agents.iter().all(|a| a["status"] != "failed"), "{v}");
    let n = v["requests"].as_u64().unwrap();
    assert!(n > 1000 && n < 20_000, "{n}");
}

#[test]
fn bad_agents_are_refused_before_anything_starts_and_a_stranger_fails_the_run() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let bad_file = dir.path().join("agents.toml");
    std::fs::write(&bad_file, "[[agent]]\ncmd = \"local\"\n").unwrap();
    let usage = |args: &[&str], needle: &str| {
        let out = bin()
            .args([
                "run",
                "--no-noise-probe",
                "nullrpc://127.0.0.1:9",
                "--rate",
                "100",
                "--db",
            ])
            .arg(&db)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    };
    usage(
        &["--agent", "no-such-launcher host tailscope agent"],
        "no-such-launcher",
    );
    usage(&["--agent", "ssh 'host"], "unterminated");
    usage(
        &["--agent", "ssh host tailscope agent | tee x"],
        "shell syntax",
    );
    usage(&["--agents", bad_file.to_str().unwrap()], "--agents");
    usage(&["--agents", "/nonexistent/agents.toml"], "cannot read");
    // What joins this host's connections, or spreads them over ports, needs the load here.
    usage(
        &["--agent", "local", "--stages", "ebpf", "--server-pid", "1"],
        "--stages ebpf joins kernel events to this host's connections",
    );
    let out = bin()
        .args([
            "run",
            "--no-noise-probe",
            "memcached://",
            "--spawn",
            "--server-instances",
            "2",
        ])
        .args(["--rate", "100", "--agent", "local", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--server-instances"),
        "{}",
        stderr(&out)
    );
    assert!(!db.exists(), "nothing was written on bad input");

    // A command that is not a tailscope agent: its bytes are not frames.
    let s = serve("127.0.0.1:0", None);
    let stranger = "sh -c 'echo Welcome to host1; sleep 5'".to_string();
    let out = run_cmd(s.port, "1000", "1s", &["local".to_string(), stranger], &db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = json_of(&out);
    assert_eq!(v["status"], "failed", "{v}");
    let err = v["error"].as_str().unwrap();
    assert!(err.contains("agent 2") && err.contains("Welcome"), "{err}");
}

/// `tailscope agent` run by hand (a terminal on stdin) says what it is for; with a closed
/// stdin it ends quietly, as when its coordinator goes away before a run.
#[test]
fn the_agent_command_alone() {
    let _g = common::shared();
    let out = bin().arg("agent").stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

/// A stored run's summary (as `run --json` printed it), from `runs show ID --json`.
fn shown(db: &Path, id: i64) -> serde_json::Value {
    let out = bin()
        .args(["runs", "show", &id.to_string(), "--json", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_of(&out)["summary"].clone()
}

/// Issue 22's acceptance: two local agents drive a sweep in % of the capacity, with a
/// max-load search. The capacity is calibrated through the agents too (the server is
/// spawned, no --service); every point is a stored run whose distribution is the agents'
/// merge, and the search reports a load.
#[test]
fn two_local_agents_drive_a_sweep_in_percent_with_find_max() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let log = dir.path().join("agents.log");
    // Each agent process notes that it started (the load did go through agents).
    let counted = format!("sh -c 'echo up >> {}; exec {EXE} agent'", log.display());
    let out = bin()
        .args([
            "sweep",
            "--no-noise-probe",
            "nullrpc://",
            "--spawn",
            "--server-work",
            "det:200us",
        ])
        .args(["--loads", "20,40%", "--find-max", "--slo", "p99<=5ms"])
        .args(["--max-steps", "2", "--duration", "500ms"])
        .args(["--warmup", "200ms"])
        // The plumbing is under test (see the first test): a 1 s lateness threshold.
        .args(["--lateness-threshold", "1s"])
        .args(["--agent", "local", "--agent", &counted])
        .arg("--db")
        .arg(&db)
        .arg("--json")
        .output()
        .unwrap();
    let v = json_of(&out);
    let rows = v["rows"].as_array().unwrap();
    // Exit 1 when a point failed or had no valid view; else 3 exactly when a point of the
    // grid does not meet the SLO; else 0.
    let statuses: Vec<&str> = rows.iter().map(|r| r["status"].as_str().unwrap()).collect();
    // (Points run more than once are judged on their combination, as `sweep` does; an
    // undecided verdict fails by default, as a violation.)
    let failing = |x: &serde_json::Value| x == "violates" || x == "undecided";
    let repeated = rows.iter().any(|r| r["repeat"].as_u64() > Some(0));
    let violated = if repeated {
        v["points"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| failing(&p["slo"]))
    } else {
        rows.iter()
            .any(|r| r["role"] == "load" && failing(&r["slo"]))
    };
    let judged: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {} {}", r["role"], r["repeat"], r["slo"]))
        .collect();
    let want = if statuses.iter().any(|s| !["ok", "saturated"].contains(s)) {
        1
    } else if violated {
        3
    } else {
        0
    };
    assert_eq!(
        out.status.code(),
        Some(want),
        "{statuses:?} {judged:?}\n{v}\n{}",
        stderr(&out)
    );
    assert!(
        !["failed", "interrupted"].contains(&v["status"].as_str().unwrap()),
        "{v}"
    );
    // The % loads were made rates from a calibration that went through the agents.
    let loads: Vec<&serde_json::Value> = rows.iter().filter(|r| r["role"] == "load").collect();
    assert_eq!(loads.len(), 2, "{v}");
    let (r20, r40) = (
        loads[0]["offered_rps"].as_f64().unwrap(),
        loads[1]["offered_rps"].as_f64().unwrap(),
    );
    assert!(r20 > 0.0 && (r40 / r20 - 2.0).abs() < 1e-6, "{r20} {r40}");
    assert_eq!(loads[0]["load_pct"].as_f64().map(f64::round), Some(20.0));
    let started = std::fs::read_to_string(&log).unwrap().lines().count();
    // One agent process per calibration step and per point, of each command line.
    assert!(
        started > rows.len(),
        "{started} agents for {} rows",
        rows.len()
    );
    let list = runs_list(&db);
    let cal = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "calibrate")
        .unwrap_or_else(|| panic!("no calibration stored: {list}"));
    assert_eq!(cal["status"], "ok", "{cal}");
    // find-max reports a load, or, when no load met on this noisy host, the evidence for it:
    // the lowest load the search tried failed the SLO too and the bracket ends there. Every
    // point has its SLO verdict.
    let m = &v["max_load"];
    if m["offered_rps"].as_f64().unwrap() == 0.0 {
        let lowest = rows
            .iter()
            .filter(|r| r["role"] == "search")
            .map(|r| (r["offered_rps"].as_f64().unwrap(), r["slo"].clone()))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap_or_else(|| panic!("no search rows: {v}"));
        assert_ne!(lowest.1, "meets", "{v}");
        assert_eq!(m["bracket_rps"][0].as_f64(), Some(0.0), "{m}");
        assert!(
            (m["bracket_rps"][1].as_f64().unwrap() - lowest.0).abs() < 1.0,
            "{m}"
        );
    }
    assert!(rows.iter().any(|r| r["role"] == "search"), "{v}");
    for r in rows {
        assert!(
            ["meets", "violates", "undecided"].contains(&r["slo"].as_str().unwrap_or("")),
            "{r}"
        );
        let run = shown(&db, r["run_id"].as_i64().unwrap());
        assert_eq!(run["agents"].as_array().map(Vec::len), Some(2), "{run}");
        let sum: u64 = run["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["requests"].as_u64().unwrap())
            .sum();
        assert_eq!(Some(sum), run["requests"].as_u64(), "{run}");
        assert_percentiles_match_records(&run, &db);
        if r["role"] == "load" {
            assert_agents_add_up(&run, 2, run["rate_rps"].as_f64().unwrap());
        }
    }
}

/// `calibrate` through two local agents: the peak search and the open-loop confirmation
/// send from both (their replies added up), and the result is the server's cost.
#[test]
fn two_local_agents_calibrate_the_built_in_server() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let log = dir.path().join("agents.log");
    let counted = format!("sh -c 'echo up >> {}; exec {EXE} agent'", log.display());
    let out = bin()
        .args([
            "calibrate",
            "nullrpc://",
            "--spawn",
            "--server-work",
            "det:200us",
        ])
        .args(["--max-connections", "4", "--max-depth", "4"])
        .args(["--agent", &counted, "--agent", &counted])
        .arg("--db")
        .arg(&db)
        .arg("--json")
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{v}\n{}", stderr(&out));
    assert_eq!(v["status"], "ok", "{v}");
    // 200 µs of work per request: no worker does one in less.
    let per_worker = v["per_worker_service_us"].as_f64().unwrap();
    assert!(per_worker >= 190.0, "{v}");
    assert!(v["overload_completed_rps"].as_f64().unwrap() > 0.0, "{v}");
    // Both agents sent every step (each offer of the search and the confirmation).
    let started = std::fs::read_to_string(&log).unwrap().lines().count();
    let steps = v["search"].as_array().unwrap().len();
    assert!(
        started >= 2 * (steps + 1),
        "{started} agents, {steps} steps"
    );
    assert_eq!(started % 2, 0, "{started}");
    let list = runs_list(&db);
    let run = &list["runs"][0];
    assert_eq!(run["kind"], "calibrate", "{list}");
}

/// Bad agents on the experiment commands: exit 2, one line, nothing written.
#[test]
fn bad_agents_on_sweep_and_calibrate_are_refused_before_anything_starts() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let usage = |args: &[&str], needle: &str| {
        let out = bin().args(args).arg("--db").arg(&db).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    };
    let sweep = ["sweep", "nullrpc://", "--spawn", "--loads", "100,200"];
    usage(
        &[
            &sweep[..],
            &["--agent", "no-such-launcher host tailscope agent"],
        ]
        .concat(),
        "no-such-launcher",
    );
    usage(
        &[&sweep[..], &["--agents", "/nonexistent/agents.toml"]].concat(),
        "/nonexistent/agents.toml",
    );
    usage(
        &[
            &sweep[..],
            &["--find-max", "--slo", "p99<=5ms", "--agent", "ssh 'host"],
        ]
        .concat(),
        "unterminated",
    );
    usage(
        &[
            "calibrate",
            "nullrpc://",
            "--spawn",
            "--agent",
            "nosuch agent",
        ],
        "nosuch",
    );
    usage(
        &["tune", "nullrpc://", "--spawn", "--agent", "nosuch agent"],
        "nosuch",
    );
    assert!(!db.exists(), "nothing was written on bad input");
}
