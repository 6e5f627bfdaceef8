//! `serve`, `run`, `calibrate` and `runs`, driven as a user drives them: a real built-in server
//! process on 127.0.0.1 (port 0), the real generator, the real store in a temporary file.
//! Nothing here asserts a wall-clock time: sleeps only place a fault (server killed, SIGINT)
//! in the middle of a run whose length is given in requests or seconds.

use crate::common;

use common::{bin, json_of, serve, Served};

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

/// The tests share two CPUs: run them one at a time so that one's load is not another's noise.
static SERIAL: Mutex<()> = Mutex::new(());

fn export_csv(db: &Path, id: i64) -> Vec<Vec<i64>> {
    let out = bin()
        .args([
            "runs",
            "export",
            &id.to_string(),
            "--format",
            "csv",
            "--db",
            db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        header,
        [
            "intended_ns",
            "sent_ns",
            "received_ns",
            "kernel_rx_ns",
            "conn",
            "class",
            "outcome",
            "t1_ns",
            "t2_ns",
            "t3_ns",
            "t4_ns",
            "t5_ns",
            "t6_ns",
            "seen_ns",
            "stack_ns"
        ]
    );
    lines
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect()
}

#[test]
fn run_measures_stores_and_its_records_are_consistent() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let s = serve(&["--arch", "epoll", "--work", "det:200us"]);
    let out = bin()
        .args([
            "run",
            &format!("nullrpc://{}", s.addr),
            "--rate",
            "400",
            "--duration",
            "3s",
            "--warmup",
            "500ms",
            "--connections",
            "4",
            "--service",
            "210us",
            "--workers",
            "1",
            "--lateness-threshold",
            "1ms",
            "--db",
            db.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let v = json_of(&out);
    // 400 req/s with a 1 ms lateness threshold: only a broken generator is late.
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(out.status.code(), Some(0));
    for k in [
        "run_id",
        "requests",
        "achieved_rate_rps",
        "outcomes",
        "measured",
        "ideal",
        "lateness",
        "excess",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    // Achieved rate at low load within 5 % of the target (a count over the span of send times).
    let rate = v["achieved_rate_rps"].as_f64().unwrap();
    assert!(
        (rate / 400.0 - 1.0).abs() < 0.05,
        "achieved {rate} req/s for 400"
    );
    // Ids matched: every request answered, none mismatched (a wrong id would be an error).
    assert_eq!(v["outcomes"]["error"], 0);
    assert_eq!(v["outcomes"]["timeout"], 0);
    // Latency is never below the synthetic service time; the ideal's p50 is the service time.
    assert!(v["measured"]["p50"].as_f64().unwrap() >= 200.0);
    assert!((v["ideal"]["p50"].as_f64().unwrap() - 210.0).abs() < 1.0);

    let id = v["run_id"].as_i64().unwrap();
    let start = v["start_mono_ns"].as_i64().unwrap();
    let rows = export_csv(&db, id);
    assert!(rows.len() >= 1000, "{} records", rows.len());
    let mut stamped = 0;
    for r in &rows {
        let (intended, sent, received, outcome) = (r[0], r[1], r[2], r[6]);
        assert_eq!(outcome, 0, "every request ok");
        assert!(
            received - intended >= 200_000,
            "latency {} ns below the 200 µs of work",
            received - intended
        );
        assert!(sent >= intended);
        let t = &r[7..13];
        // T2..T5 always; T1 (kernel rx) and T6 (kernel tx) when the kernel gave them.
        assert!(t[1] > 0 && t[2] > 0 && t[3] > 0 && t[4] > 0);
        assert!(
            t[1] <= t[2] && t[2] <= t[3] && t[3] <= t[4],
            "stamps out of order: {t:?}"
        );
        assert!(
            t[3] - t[2] >= 200_000,
            "work stage shorter than the synthetic work"
        );
        // Same host, same CLOCK_MONOTONIC: the server's stamps lie inside the client's window.
        // (T2 is the wake-up that preceded the read, which can predate a request that arrived
        // while the worker was already awake; T3, "request read", cannot.)
        assert!(
            start + sent <= t[2] && t[4] <= start + received,
            "stamps outside the client window"
        );
        if t[0] > 0 {
            stamped += 1;
            assert!(start + sent <= t[0] && t[0] <= t[1]);
        }
        if t[5] > 0 {
            assert!(t[4] <= t[5]);
        }
    }
    assert!(
        stamped * 2 > rows.len(),
        "kernel rx stamp T1 on only {stamped} of {}",
        rows.len()
    );

    let l = common::runs_list(&db);
    let runs = l["runs"].as_array().unwrap();
    assert_eq!(runs[0]["id"].as_i64(), Some(id));
    assert_eq!(runs[0]["status"].as_str(), Some("ok"));
    for k in ["id", "status", "target", "started_at"] {
        assert!(runs[0].get(k).is_some(), "runs list misses {k}");
    }
}

#[test]
fn a_run_survives_the_server_dying() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let mut s = serve(&["--arch", "thread"]);
    let url = format!("nullrpc://{}", s.addr);
    let v = common::run_with_server_killed(
        &[
            &url,
            "--rate",
            "1000",
            "--duration",
            "6s",
            "--warmup",
            "200ms",
            "--timeout",
            "300ms",
            "--service",
            "20us",
        ],
        &db,
        &mut s.child,
        Duration::from_millis(1500),
    );
    let lost = v["outcomes"]["error"].as_u64().unwrap()
        + v["outcomes"]["timeout"].as_u64().unwrap()
        + v["outcomes"]["dropped"].as_u64().unwrap();
    assert!(lost > 0);
}

#[test]
fn sigint_stores_a_partial_run_marked_interrupted() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let s = serve(&["--arch", "epoll"]);
    let run = bin()
        .args([
            "run",
            &format!("nullrpc://{}", s.addr),
            "--rate",
            "2000",
            "--duration",
            "60s",
            "--warmup",
            "200ms",
            "--service",
            "20us",
            "--db",
            db.to_str().unwrap(),
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(run.id() as i32, libc::SIGINT);
    }
    let out = run.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    assert_eq!(v["status"], "interrupted");
    let n = v["requests"].as_u64().unwrap();
    assert!(n > 100 && n < 100_000, "partial run of {n} requests");
    let l = common::runs_list(&db);
    assert_eq!(l["runs"][0]["status"], "interrupted");
}

/// A short `run` against `addr` storing into `db`; its output.
fn short_run(addr: &str, db: &Path) -> std::process::Output {
    bin()
        .args([
            "run",
            &format!("nullrpc://{addr}"),
            "--rate",
            "500",
            "--duration",
            "300ms",
            "--warmup",
            "100ms",
            "--service",
            "20us",
            "--db",
            db.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap()
}

/// Waits (polling, read-only, up to 60 s) until the store's first run is there and
/// running.
fn first_run_running(db: &Path) -> bool {
    for _ in 0..600 {
        if db.exists() && common::runs_list(db)["runs"][0]["status"] == "running" {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn a_run_killed_by_sigkill_is_marked_abandoned_by_the_next_writer() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let s = serve(&["--arch", "epoll"]);
    let mut run = bin()
        .args([
            "run",
            &format!("nullrpc://{}", s.addr),
            "--rate",
            "500",
            "--duration",
            "600s",
            "--warmup",
            "100ms",
            "--service",
            "20us",
            "--db",
            db.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        first_run_running(&db),
        "the run's row never read as running"
    );
    run.kill().unwrap(); // SIGKILL
    run.wait().unwrap(); // reaped: not left a zombie

    // A read-only command reports it abandoned and changes nothing.
    let list = bin()
        .args(["runs", "list", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(list.status.code(), Some(0));
    assert_eq!(json_of(&list)["runs"][0]["status"], "abandoned");
    assert!(!String::from_utf8_lossy(&list.stderr).contains("abandoned"));

    // The next writing command marks it, and says so once.
    let out = short_run(&s.addr, &db);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("abandoned")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("tailscope: run 1 (run of nullrpc://"),
        "{err}"
    );
    assert!(lines[0].contains("started 20"), "{err}");
    let show = bin()
        .args(["runs", "show", "1", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(json_of(&show)["status"], "abandoned");
    assert_eq!(json_of(&show)["finished_at"], serde_json::Value::Null);
    // Marked in the store: the writer after it has nothing to say, and its own run is fine.
    let again = short_run(&s.addr, &db);
    let err = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(0), "{err}");
    assert!(!err.contains("abandoned"), "{err}");
    let l = common::runs_list(&db);
    let statuses: Vec<&str> = l["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.len(), 3);
    assert_eq!(statuses[2], "abandoned");
    assert!(!statuses[..2].contains(&"abandoned") && !statuses.contains(&"running"));
}

#[test]
fn a_sweep_killed_by_sigkill_is_marked_abandoned_with_its_point() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let s = serve(&["--arch", "epoll"]);
    let mut sweep = bin()
        .args(["sweep", &format!("nullrpc://{}", s.addr)])
        .args([
            "--loads",
            "500,600",
            "--duration",
            "600s",
            "--warmup",
            "100ms",
        ])
        .args(["--service", "20us", "--no-noise-probe", "--db"])
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        first_run_running(&db),
        "the sweep's first point never read as running"
    );
    sweep.kill().unwrap(); // SIGKILL
    sweep.wait().unwrap();
    // A read sees the experiment abandoned without marking it.
    let st = store::Store::open_existing(&db).unwrap().unwrap();
    assert_eq!(
        st.get_experiment(1).unwrap().unwrap().status,
        store::RowStatus::Abandoned
    );
    drop(st);
    // The next writer marks both, a line each.
    let out = short_run(&s.addr, &db);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("abandoned")).collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("tailscope: experiment 1 (sweep, started 20"),
        "{err}"
    );
    assert!(lines[1].starts_with("tailscope: run 1 ("), "{err}");
    let st = store::Store::open_existing(&db).unwrap().unwrap();
    let stored = st.get_experiment(1).unwrap().unwrap().status;
    assert_eq!(stored, store::RowStatus::Abandoned);
}

#[test]
fn calibrate_inverts_the_peak_throughput_and_feeds_percent_rates() {
    // Alone: it reads an absolute figure of the host, which a test beside it would move.
    let _g = common::alone();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let s = serve(&["--arch", "epoll", "--work", "det:300us"]);
    let url = format!("nullrpc://{}", s.addr);
    let out = bin()
        .args([
            "calibrate",
            &url,
            "--duration",
            "300ms",
            "--warmup",
            "100ms",
            "--db",
            db.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert!(out.status.success());
    let svc = v["service_us"].as_f64().unwrap();
    // The amortised service time is the 300 µs of work plus the server's per-request overhead.
    assert!((300.0..600.0).contains(&svc), "calibrated service {svc} µs");
    // The search is stored and shown, and the open-loop overload at twice the peak completes
    // about the peak (a server saturated either way).
    assert!(v["search"].as_array().unwrap().len() >= 3, "{v}");
    let ratio = v["peak_vs_overload"].as_f64().unwrap();
    assert!(
        (0.85..1.15).contains(&ratio),
        "peak / overload completion {ratio}"
    );
    assert!(v["batching_gain"].as_f64().unwrap() >= 1.0);
    let out = bin()
        .args([
            "run",
            &url,
            "--rate",
            "20%",
            "--duration",
            "2s",
            "--warmup",
            "500ms",
            "--lateness-threshold",
            "1ms",
            "--db",
            db.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let r = json_of(&out);
    let spec = &r["ideal_spec"];
    assert!((spec["service_ns"].as_f64().unwrap() / 1e3 - svc).abs() < 1e-6);
    let achieved = r["achieved_rate_rps"].as_f64().unwrap();
    let asked = 0.2 * 1e6 / svc;
    assert!(
        (achieved / asked - 1.0).abs() < 0.1,
        "achieved {achieved} for {asked}"
    );
}

#[test]
fn bad_targets_and_flags_exit_2_and_write_nothing() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sub").join("runs.db");
    let dbs = db.to_str().unwrap().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "foo://127.0.0.1:1", "--rate", "10"], "foo"),
        (vec!["run", "nullrpc://127.0.0.1", "--rate", "10"], "port"),
        (vec!["run", "nullrpc://127.0.0.1:9", "--rate", "abc"], "abc"),
        (
            vec!["run", "nullrpc://127.0.0.1:9", "--rate", "70%"],
            "calibrate",
        ),
        (
            vec![
                "run",
                "nullrpc://127.0.0.1:9",
                "--rate",
                "10",
                "--duration=-1s",
            ],
            "-1s",
        ),
        (
            vec![
                "run",
                "nullrpc://127.0.0.1:9",
                "--rate",
                "10",
                "--cpus",
                "999",
            ],
            "999",
        ),
        (
            vec![
                "run",
                "nullrpc://127.0.0.1:9",
                "--rate",
                "10",
                "--queues",
                "many",
            ],
            "many",
        ),
        // Issue 9's findings: each refused before the store is opened or a server started.
        (
            vec![
                "run",
                "nullrpc://127.0.0.1:9",
                "--rate",
                "10",
                "--timeout",
                "0s",
            ],
            "--timeout",
        ),
        (
            vec!["run", "nullrpc://127.0.0.1:9", "--rate", "1e99"],
            "--rate",
        ),
        (
            vec!["run", "nullrpc://127.0.0.1:9", "--rate", "1e9"],
            "--rate",
        ),
        (
            vec![
                "run",
                "nullrpc://127.0.0.1:9",
                "--rate",
                "10",
                "--server-pid",
                "999999999",
            ],
            "--server-pid",
        ),
        (
            vec![
                "run",
                "nullrpc://127.0.0.1:9",
                "--rate",
                "10",
                "--server-cpus",
                "99",
            ],
            "--server-cpus",
        ),
        (
            vec![
                "run",
                "nullrpc://127.0.0.1:9",
                "--rate",
                "10",
                "--plot",
                "/proc/x.svg",
            ],
            "/proc/x.svg",
        ),
        (
            // A day at 100M req/s: more records than the disk holds, refused up front.
            vec![
                "run",
                "nullrpc://127.0.0.1:9",
                "--rate",
                "1e8",
                "--duration",
                "86400s",
            ],
            "free",
        ),
        (
            vec![
                "run",
                "nullrpc://127.0.0.1:9",
                "--rate",
                "10",
                "--connections",
                "4000000000",
            ],
            "--connections",
        ),
        (vec!["serve", "--arch", "forking"], "forking"),
        (vec!["serve", "--sched", "fifo:500"], "500"),
        (vec!["runs", "export", "1", "--format", "xml"], "xml"),
    ];
    for (args, needle) in cases {
        let mut cmd = bin();
        cmd.args(&args);
        if args[0] != "serve" {
            cmd.args(["--db", &dbs]);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: '{err}' should name '{needle}'"
        );
        assert!(!db.exists(), "{args:?} wrote the store");
    }
}

#[test]
fn an_unreachable_target_is_a_clear_failure() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    // Bind then drop a listener: nothing listens on that port afterwards.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = bin()
        .args([
            "run",
            &format!("nullrpc://127.0.0.1:{port}"),
            "--rate",
            "100",
            "--duration",
            "1s",
            "--warmup",
            "100ms",
            "--service",
            "10us",
            "--db",
            db.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&port.to_string()), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Issue 17: a calibration that no longer fits the server (calibrated with 200 µs of work,
/// restarted with 50 µs at the same address) makes the ideal slower than the server; the run
/// says its ideal is not a lower bound.
#[test]
fn a_stale_calibration_is_called_out() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let first = serve(&["--arch", "epoll", "--work", "det:200us"]);
    let addr = first.addr.clone();
    let url = format!("nullrpc://{addr}");
    let cal = bin()
        .args([
            "calibrate",
            &url,
            "--duration",
            "300ms",
            "--warmup",
            "100ms",
        ])
        .args(["--max-depth", "4", "--db", db.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        cal.status.success(),
        "{}",
        String::from_utf8_lossy(&cal.stderr)
    );
    drop(first);
    // The same address, a quarter of the work.
    let mut child = bin()
        .args([
            "serve", "--listen", &addr, "--arch", "epoll", "--work", "det:50us",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let again = Served { child, addr };
    let out = bin()
        .args([
            "run",
            &url,
            "--rate",
            "20%",
            "--duration",
            "2s",
            "--warmup",
            "500ms",
        ])
        .args([
            "--lateness-threshold",
            "1ms",
            "--db",
            db.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    drop(again);
    let v = json_of(&out);
    let note = v["ideal_check"].as_str().unwrap_or_default();
    let (m, i) = (&v["measured_ci"]["p50"], &v["ideal_ci"]["p50"]);
    let f = |x: &serde_json::Value, k: &str| x[k].as_f64().unwrap();
    if note.contains("not a lower bound") {
        assert!(f(m, "hi") < f(i, "lo"), "{v}");
    } else {
        // The call-out needs the measured median below the ideal's beyond both (time-aware)
        // intervals; a burst of the host can widen them until they overlap, or lift the
        // measured median itself above the stale ideal's. The evidence for that outcome: the
        // intervals overlap (the exact complement of the call-out's condition).
        assert!(f(m, "hi") >= f(i, "lo"), "no call-out although apart: {v}");
        eprintln!(
            "stale calibration: intervals overlap on this run (measured p50 {m}, ideal p50 {i})"
        );
    }
}

/// Issue 36: a person's screen. `run` leads with the headline view's table and fits 30 lines
/// of at most 100 characters; `--detail` prints everything (both views, the path, the
/// generator's lateness); `runs show N` is the same screen, `runs show N --detail` the rest;
/// `demo` fits 40 lines, its notes included.
#[test]
fn run_and_demo_fit_a_screen_and_detail_shows_the_rest() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let fits = |what: &str, text: &str, lines: usize| {
        let n = text.lines().count();
        assert!(n <= lines, "{what}: {n} lines (at most {lines}):\n{text}");
        for l in text.lines() {
            assert!(l.chars().count() <= 100, "{what}: a line over 100: {l}");
        }
    };
    let s = serve(&["--arch", "epoll", "--work", "det:20us"]);
    let url = format!("nullrpc://{}", s.addr);
    let args = ["run", &url, "--service", "30us", "--rate", "2000"];
    let short = ["--duration", "800ms", "--warmup", "200ms", "--cpus", "0"];
    let out = bin()
        .args(args)
        .args(short)
        .args(["--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    fits("run", &text, 30);
    let first: Vec<&str> = text.lines().take(3).collect();
    assert!(
        first[0].starts_with("run ") && first[0].contains(" ok "),
        "{text}"
    );
    assert!(first[1].contains(" view ("), "{text}");
    assert!(text.contains("validity: user view"), "{text}");
    assert!(text.contains("--detail"), "{text}");
    assert!(!text.contains("generator lateness"), "{text}");
    let id = first[0]
        .strip_prefix("run ")
        .and_then(|r| r.split(' ').next())
        .unwrap()
        .to_string();
    let detail = bin()
        .args(args)
        .args(short)
        .args(["--detail", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    let detail = String::from_utf8(detail.stdout).unwrap();
    // (Whether the user view is valid depends on this host's stalls: either way --detail
    // says so on its lines of validity and headline.)
    for needle in ["generator lateness", "the server's view", "headline: "] {
        assert!(
            detail.contains(needle),
            "--detail lacks {needle}:\n{detail}"
        );
    }
    assert!(detail.lines().count() > text.lines().count());
    let show = |extra: &[&str]| {
        let o = bin()
            .args(["runs", "show", &id, "--db", db.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success());
        String::from_utf8(o.stdout).unwrap()
    };
    let brief = show(&[]);
    fits("runs show", &brief, 31);
    assert!(!brief.contains("config: {"), "{brief}");
    assert!(show(&["--detail"]).contains("generator lateness"));
    drop(s);
    // The demo, shortened: its screen, notes on stderr included.
    let plot = dir.path().join("demo.svg");
    let out = bin()
        .args([
            "demo",
            "--duration",
            "1300ms",
            "--warmup",
            "300ms",
            "--loads",
            "30,60",
        ])
        .args(["--plot", plot.to_str().unwrap()])
        .args(["--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    fits("demo", &format!("{stderr}{stdout}"), 40);
    assert!(
        stdout.contains("next:") && stdout.contains("wrote "),
        "{stdout}"
    );
    // One row per run: 2 loads × 2 repeats.
    let rows = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("30%") || l.trim_start().starts_with("60%"))
        .filter(|l| l.contains(" ok") || l.contains("saturated") || l.contains("invalid"))
        .count();
    assert_eq!(rows, 4, "{stdout}");
}

/// Issue 37, item 3: with `--cpus 0` and the server on CPU 1, every tailscope thread the run
/// lists may run on CPU 0 only — the main thread, the record writer, the generator, the
/// thread that forks servers — but the stage collector's window thread, which runs on the
/// server's CPU by design (its attach and detach are paid from the server's budget, and on
/// the generator's CPU they stalled the generator). memcached is a process of its own, so
/// every thread listed is tailscope's; `--detail` lists them.
#[test]
fn every_tailscope_thread_is_placed_off_the_servers_cpu() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = bin()
        .args(["run", "memcached://", "--spawn", "--server-threads", "1"])
        .args(["--server-cpus", "1", "--cpus", "0", "--rate", "2000"])
        .args(["--service", "20us", "--duration", "1s", "--warmup", "200ms"])
        .args(["--db", db.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let v = json_of(&out);
    let threads = v["threads"].as_array().unwrap();
    let names: Vec<&str> = threads
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for want in [
        "tailscope",
        "tailscope-rec",
        "tailscope-gen-0",
        "tailscope-spawn",
    ] {
        assert!(names.contains(&want), "{want} not listed: {names:?}");
    }
    for t in threads {
        let allowed: Vec<u64> = t["allowed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .collect();
        let want: &[u64] = if t["name"] == "ebpf-windows" {
            &[1]
        } else {
            &[0]
        };
        assert_eq!(allowed, want, "{t}");
    }
    let id = v["run_id"].as_i64().unwrap().to_string();
    let shown = bin()
        .args([
            "runs",
            "show",
            &id,
            "--detail",
            "--db",
            db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("threads (the CPUs each may run on): ")
                && l.contains("tailscope-rec on 0")),
        "{text}"
    );
}

/// Issue 37, item 5: a memcached the user started by hand (not spawned, no `--server-pid`)
/// is found listening on the target's address; its pid and CPUs are the run's server, so
/// the why counts its threads as the server's rather than as other tasks.
#[test]
fn a_server_started_by_hand_is_found_and_counted_as_the_server() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut mc = std::process::Command::new("taskset")
        .args([
            "-c",
            "1",
            "memcached",
            "-u",
            "root",
            "-t",
            "2",
            "-l",
            "127.0.0.1",
        ])
        .args(["-p", &port.to_string()])
        .spawn()
        .expect("memcached (Debian's) is installed by scripts/test.sh");
    let addr = format!("127.0.0.1:{port}");
    let up = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        std::net::TcpStream::connect(&addr).is_ok()
    });
    assert!(up, "memcached did not come up on {addr}");
    let out = bin()
        .args(["run", &format!("memcached://{addr}"), "--cpus", "0"])
        .args(["--rate", "2000", "--service", "20us", "--duration", "1s"])
        .args(["--warmup", "200ms", "--db", db.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let _ = mc.kill();
    let _ = mc.wait();
    let v = json_of(&out);
    let found = v["server"]["found"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", v["server"]));
    assert!(
        found.starts_with(&format!(
            "server: pid {} (memcached) listens on {addr}",
            mc.id()
        )) && found.contains("on CPUs 1: counted as the server's"),
        "{found}"
    );
}
