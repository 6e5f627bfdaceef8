//! Real targets, started by tailscope (`--spawn`) or by the test, from Debian's packages
//! (installed by scripts/test.sh; a missing server fails these tests, it never skips them):
//! memcached over TCP and UDP, nginx with persistent and churning connections and over
//! HTTP/2 (h2c), Redis; faults
//! (a server killed mid-run, garbage replies) and bad input.

use crate::common;

use common::{bin, json_of};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// One at a time: these tests share two CPUs with the servers they start.
static SERIAL: Mutex<()> = Mutex::new(());

fn run_spawned(url: &str, extra: &[&str]) -> (Output, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = bin()
        .args([
            "run",
            url,
            "--spawn",
            "--server-cpus",
            "1",
            "--cpus",
            "0",
            "--duration",
            "1s",
            "--warmup",
            "300ms",
        ])
        .args([
            "--lateness-threshold",
            "5ms",
            // The host's noise probe (0.3-0.6 s a run) is not what these tests judge.
            "--no-noise-probe",
            "--db",
            db.to_str().unwrap(),
            "--json",
        ])
        .args(extra)
        .output()
        .unwrap();
    let v = json_of(&out);
    (out, v)
}

/// The run measured every request without error, and validly: with the generator on its
/// own CPU and a 5 ms lateness threshold, only a broken generator is late.
fn assert_clean(v: &serde_json::Value) {
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["outcomes"]["error"], 0, "{v}");
    assert!(v["outcomes"]["ok"].as_u64().unwrap() > 1000, "{v}");
}

fn pid_gone(pid: u64) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn memcached_tcp_is_per_worker_queues_and_is_stopped_after() {
    let _g = common::one_at_a_time(&SERIAL);
    let (out, v) = run_spawned(
        "memcached://",
        &[
            "--server-threads",
            "2",
            "--rate",
            "2000",
            "--service",
            "20us",
        ],
    );
    assert_clean(&v);
    assert_eq!(
        out.status.code(),
        Some(if v["status"] == "ok" { 0 } else { 1 })
    );
    assert_eq!(v["ideal_spec"]["queues"], "per-worker");
    assert_eq!(v["ideal_spec"]["workers"], 2);
    assert!(v["server"]["version"]
        .as_str()
        .unwrap()
        .contains("memcached"));
    assert!(v["server"]["command_line"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "-t"));
    for pid in v["server"]["pids"].as_array().unwrap() {
        assert!(
            pid_gone(pid.as_u64().unwrap()),
            "spawned memcached {pid} still running"
        );
    }
    // Gets of preloaded keys hit: no misses with the default 90/10 mix.
    assert_eq!(v["misses"], 0, "{v}");
}

#[test]
fn memcached_udp_is_one_queue() {
    let _g = common::one_at_a_time(&SERIAL);
    let (out, v) = run_spawned(
        "memcached+udp://",
        &[
            "--server-threads",
            "2",
            "--rate",
            "2000",
            "--service",
            "20us",
        ],
    );
    assert_eq!(v["ideal_spec"]["queues"], "single");
    assert_eq!(v["ideal_spec"]["workers"], 2);
    assert_eq!(v["outcomes"]["error"], 0, "{v}");
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(out.status.code(), Some(0));
    // Datagrams can be lost on loopback under load; nearly all must arrive.
    let ok = v["outcomes"]["ok"].as_u64().unwrap();
    let timeouts = v["outcomes"]["timeout"].as_u64().unwrap();
    assert!(timeouts * 100 <= ok, "{v}");
}

#[test]
fn redis_is_one_worker_and_calibrates_itself_for_percent_rates() {
    let _g = common::one_at_a_time(&SERIAL);
    let (_, v) = run_spawned("redis://", &["--rate", "10%"]);
    assert_clean(&v);
    assert_eq!(v["ideal_spec"]["workers"], 1);
    assert_eq!(v["ideal_spec"]["queues"], "single");
    // 10 % of the calibrated capacity, achieved within 10 %.
    let svc = v["ideal_spec"]["service_ns"].as_f64().unwrap();
    let want = 0.1 * 1e9 / svc;
    let got = v["achieved_rate_rps"].as_f64().unwrap();
    assert!((got / want - 1.0).abs() < 0.1, "achieved {got} for {want}");
}

#[test]
fn nginx_keep_alive_and_churning_clients() {
    let _g = common::one_at_a_time(&SERIAL);
    let (_, v) = run_spawned(
        "http:///",
        &[
            "--server-threads",
            "2",
            "--rate",
            "2000",
            "--service",
            "30us",
            "--files",
            "20",
        ],
    );
    assert_clean(&v);
    assert_eq!(v["ideal_spec"]["queues"], "per-worker");
    let keep = v["connects"].as_u64().unwrap();
    let (_, v) = run_spawned(
        "http:///",
        &["--rate", "2000", "--service", "30us", "--churn", "20,40"],
    );
    assert_clean(&v);
    // Each client sends 20-40 requests then closes: about one connect per 30 requests.
    let n = v["outcomes"]["ok"].as_u64().unwrap();
    let connects = v["connects"].as_u64().unwrap();
    assert!(
        connects > keep + n / 60,
        "churn opened {connects} connections for {n} requests (keep-alive: {keep})"
    );
}

/// Issue 38: `h2c://` against nginx spawned with HTTP/2 (prior knowledge): each request on
/// its own stream of the one connection, several in flight at once (the raw records say so:
/// requests sent before the one sent before them was answered), every one answered, the
/// offered load sent.
#[test]
fn nginx_over_h2c_carries_many_streams_on_one_connection() {
    let _g = common::one_at_a_time(&SERIAL);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = bin()
        .args([
            "run",
            "h2c:///",
            "--spawn",
            "--server-cpus",
            "1",
            "--cpus",
            "0",
        ])
        .args(["--connections", "1", "--rate", "4000", "--service", "40us"])
        .args(["--files", "20", "--duration", "1s", "--warmup", "300ms"])
        .args([
            "--lateness-threshold",
            "5ms",
            "--no-noise-probe",
            "--json",
            "--db",
        ])
        .arg(&db)
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_clean(&v);
    // The one connection opened before the run carried it all: no reopen, no GOAWAY.
    assert_eq!(v["connects"], 0, "{v}");
    assert_eq!(v["connection_errors"], serde_json::json!([]), "{v}");
    common::assert_offered_sent(&v);
    let e = crate::agents_support::export(&db, v["run_id"].as_i64().unwrap());
    let (sent, recv, conn) = (e.col("sent_ns"), e.col("received_ns"), e.col("conn"));
    let mut rows: Vec<&Vec<i64>> = e.rows.iter().filter(|r| r[conn] == 0).collect();
    assert_eq!(rows.len(), e.rows.len());
    rows.sort_by_key(|r| r[sent]);
    let overlapped = rows.windows(2).filter(|w| w[1][sent] < w[0][recv]).count();
    assert!(
        overlapped * 100 >= rows.len(),
        "{overlapped} of {} requests sent while the one before was in flight",
        rows.len()
    );
}

#[test]
fn a_memcached_killed_mid_run_fails_the_run_which_is_still_stored() {
    let _g = common::one_at_a_time(&SERIAL);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mc = ["/usr/bin/memcached", "/usr/local/bin/memcached"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("memcached is installed (scripts/test.sh installs it)");
    let mut server = Command::new(mc)
        .args([
            "-p",
            &port.to_string(),
            "-U",
            "0",
            "-l",
            "127.0.0.1",
            "-u",
            "root",
            "-t",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let dir = tempfile::tempdir().unwrap();
    let url = format!("memcached://127.0.0.1:{port}");
    common::run_with_server_killed(
        &[
            &url,
            "--rate",
            "2000",
            "--duration",
            "6s",
            "--warmup",
            "200ms",
            "--timeout",
            "300ms",
            "--service",
            "20us",
        ],
        &dir.path().join("runs.db"),
        &mut server,
        Duration::from_millis(2000),
    );
}

#[test]
fn garbage_replies_are_counted_not_a_panic() {
    let _g = common::one_at_a_time(&SERIAL);
    // A "memcached" that answers everything with bytes that are no memcached reply.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = s;
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(b"\x00\xffNOT A REPLY\r\n").is_err() {
                        break;
                    }
                }
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args([
            "run",
            &format!("memcached://127.0.0.1:{port}"),
            "--rate",
            "500",
            "--duration",
            "1500ms",
        ])
        .args([
            "--warmup",
            "200ms",
            "--no-preload",
            "--service",
            "20us",
            "--db",
        ])
        .arg(dir.path().join("runs.db"))
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Every reply was garbage: errors counted, nothing ok, and the run stored as failed.
    let v = json_of(&out);
    assert_eq!(v["status"], "failed", "{v}");
    assert!(v["outcomes"]["error"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["outcomes"]["ok"], 0, "{v}");
    let id = v["run_id"].as_i64().unwrap();
    let shown = bin()
        .args(["runs", "show", &id.to_string(), "--json", "--db"])
        .arg(dir.path().join("runs.db"))
        .output()
        .unwrap();
    let stored = json_of(&shown);
    assert_eq!(stored["status"], "failed");
    assert!(stored["summary"]["outcomes"]["error"].as_u64().unwrap() > 0);
}

#[test]
fn bad_real_target_input_exits_2() {
    let _g = common::shared();
    for (args, needle) in [
        (
            vec![
                "run",
                "memcached://",
                "--spawn",
                "--rate",
                "10",
                "--server-work",
                "det:5us",
            ],
            "built-in server",
        ),
        (
            vec![
                "run",
                "memcached://127.0.0.1:11211",
                "--rate",
                "10",
                "--churn",
                "20,40",
            ],
            "http",
        ),
        (
            vec![
                "run",
                "memcached://127.0.0.1:11211",
                "--rate",
                "10",
                "--key-size",
                "huge",
            ],
            "huge",
        ),
        (
            vec![
                "run",
                "memcached://127.0.0.1:11211",
                "--rate",
                "10",
                "--server-threads",
                "2",
            ],
            "--spawn",
        ),
        (
            vec![
                "run",
                "http://127.0.0.1:8080/",
                "--rate",
                "10",
                "--churn",
                "40,20",
            ],
            "churn",
        ),
        (
            vec!["run", "gopher://127.0.0.1:70", "--rate", "10"],
            "gopher",
        ),
        (
            vec!["run", "h2c+udp://127.0.0.1:80/", "--rate", "10"],
            "udp",
        ),
        (
            vec!["run", "h2c://127.0.0.1:80/", "--spawn", "--rate", "10"],
            "address",
        ),
        (
            vec![
                "run",
                "h2c://127.0.0.1:80/x",
                "--rate",
                "10",
                "--churn",
                "40,20",
            ],
            "churn",
        ),
        (
            vec![
                "run", "h2c:///", "--spawn", "--stages", "ebpf", "--rate", "10",
            ],
            "HTTP/2",
        ),
    ] {
        let out = bin()
            .args(&args)
            .arg("--db")
            .arg("/nonexistent/dir/runs.db")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
