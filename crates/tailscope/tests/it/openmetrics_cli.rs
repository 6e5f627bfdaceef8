//! `tailscope runs export --format openmetrics`, read back by the reference parser: PyPI's
//! `prometheus_client` (`openmetrics.parser.text_string_to_metric_families`) in the test
//! virtual environment. The values must be the run's own JSON (µs → s), with the run's labels.
//! In CI a missing Python environment fails; elsewhere it skips.

use crate::browser;
use crate::common;
use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{bin, json_of, serve};
use serde_json::{json, Value};
use support::assert_usage_error;

/// Parses an exposition with prometheus_client; returns `{family: {type, unit, samples:
/// [{name, labels, value}]}}`, or panics with the parser's error.
fn parse(python: &Path, text: &str) -> Value {
    const SCRIPT: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    out[f.name] = {"type": f.type, "unit": f.unit, "samples": [
        {"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]}
print(json.dumps(out))
"#;
    let mut child = Command::new(python)
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The one sample of `family` whose labels include all of `want`.
fn sample<'a>(families: &'a Value, family: &str, want: &[(&str, &str)]) -> &'a Value {
    let samples = families[family]["samples"]
        .as_array()
        .unwrap_or_else(|| panic!("no family {family}"));
    let found: Vec<&Value> = samples
        .iter()
        .filter(|s| want.iter().all(|(k, v)| s["labels"][*k] == *v))
        .collect();
    assert_eq!(found.len(), 1, "{family} {want:?}: {found:?}");
    found[0]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 + 1e-9 * b.abs()
}

fn export(db: &Path, args: &[&str]) -> String {
    let out = bin()
        .args(["runs", "export", "--format", "openmetrics", "--db"])
        .arg(db)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_run_exports_to_openmetrics_that_prometheus_client_reads_as_its_json() {
    let _g = common::shared();
    let Some(python) = browser::openmetrics_python() else {
        return;
    };
    let served = serve(&["--cpus", "1", "--arch", "epoll", "--work", "det:50us"]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = bin()
        .arg("run")
        .arg(format!("nullrpc://{}", served.addr))
        .args(["--rate", "2000", "--duration", "1.5s", "--warmup", "0.5s"])
        .args(["--cpus", "0", "--service", "50us", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let run = json_of(&out);
    let id = run["run_id"].as_i64().unwrap().to_string();

    let text = export(&db, &[&id]);
    assert!(text.ends_with("# EOF\n"), "{text}");
    // -o FILE writes the same exposition.
    let file = dir.path().join("run.om");
    let to_file = bin()
        .args(["runs", "export", &id, "--format", "openmetrics", "-o"])
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(to_file.status.code(), Some(0));
    assert!(to_file.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);

    let f = parse(&python, &text);
    assert_eq!(f["tailscope_latency_seconds"]["type"], "gauge");
    assert_eq!(f["tailscope_latency_seconds"]["unit"], "seconds");
    assert_eq!(f["tailscope_excess_ratio"]["unit"], "ratio");
    assert_eq!(f["tailscope_run_info"]["type"], "gauge");
    assert_eq!(f["tailscope_requests"]["type"], "counter");
    assert_eq!(f["tailscope_status"]["type"], "gauge");

    let info = sample(&f, "tailscope_run_info", &[]);
    assert_eq!(info["name"], "tailscope_run_info");
    assert_eq!(info["labels"]["run_id"], id.as_str());
    assert_eq!(info["labels"]["kind"], "run");
    assert_eq!(info["labels"]["target"], run["target"]);
    assert_eq!(info["labels"]["status"], run["status"]);
    assert!(!info["labels"]["host"].as_str().unwrap().is_empty());
    assert!(info["labels"].get("label").is_none(), "no --label given");

    // Every percentile of both views: the JSON's µs in seconds, with its interval ends.
    for (view, base) in [("user", &run), ("server", &run["server_view"])] {
        for (key, q) in [
            ("p50", "0.5"),
            ("p90", "0.9"),
            ("p99", "0.99"),
            ("p99.9", "0.999"),
            ("p99.99", "0.9999"),
        ] {
            let at = [("view", view), ("quantile", q)];
            let us = |v: &Value| v.as_f64().unwrap() / 1e6;
            for (family, want) in [
                ("tailscope_latency_seconds", us(&base["measured"][key])),
                (
                    "tailscope_latency_lower_seconds",
                    us(&base["measured_ci"][key]["lo"]),
                ),
                (
                    "tailscope_latency_upper_seconds",
                    us(&base["measured_ci"][key]["hi"]),
                ),
                ("tailscope_ideal_latency_seconds", us(&base["ideal"][key])),
                (
                    "tailscope_excess_ratio",
                    base["excess"][key].as_f64().unwrap(),
                ),
            ] {
                let got = sample(&f, family, &at)["value"].as_f64().unwrap();
                assert!(close(got, want), "{family} {view} {key}: {got} vs {want}");
            }
        }
    }
    let p99 = sample(
        &f,
        "tailscope_latency_seconds",
        &[("view", "user"), ("quantile", "0.99")],
    );
    assert!(close(
        p99["value"].as_f64().unwrap(),
        run["measured"]["p99"].as_f64().unwrap() / 1e6
    ));

    for (family, key) in [
        ("tailscope_offered_rate_requests_per_second", "rate_rps"),
        (
            "tailscope_achieved_rate_requests_per_second",
            "achieved_rate_rps",
        ),
    ] {
        let got = sample(&f, family, &[])["value"].as_f64().unwrap();
        assert!(close(got, run[key].as_f64().unwrap()), "{family}");
    }
    for outcome in ["ok", "error", "timeout", "dropped"] {
        let s = sample(&f, "tailscope_requests", &[("outcome", outcome)]);
        assert_eq!(s["name"], "tailscope_requests_total");
        assert_eq!(
            s["value"].as_f64().unwrap(),
            run["outcomes"][outcome].as_f64().unwrap(),
            "{outcome}"
        );
    }
    let status = run["status"].as_str().unwrap();
    for state in ["ok", "invalid", "failed", "saturated", "interrupted"] {
        let s = sample(&f, "tailscope_status", &[("status", state)]);
        let want = if state == status { 1.0 } else { 0.0 };
        assert_eq!(s["value"].as_f64().unwrap(), want, "{state}");
    }
    let valid = sample(&f, "tailscope_view_valid", &[("view", "user")]);
    let want = if run["views"]["user"]["valid"] == true {
        1.0
    } else {
        0.0
    };
    assert_eq!(valid["value"].as_f64().unwrap(), want);
}

#[test]
fn an_experiment_exports_one_sample_per_point_with_its_load_and_knobs() {
    let _g = common::shared();
    let Some(python) = browser::openmetrics_python() else {
        return;
    };
    let served = serve(&["--cpus", "1", "--arch", "epoll", "--work", "det:50us"]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = bin()
        .arg("sweep")
        .arg(format!("nullrpc://{}", served.addr))
        .args(["--loads", "2000", "--param", "connections=2,4"])
        .args(["--duration", "1.5s", "--warmup", "0.5s"])
        .args(["--cpus", "0", "--service", "50us", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let sweep = json_of(&out);
    let experiment = sweep["experiment_id"].as_i64().unwrap().to_string();
    let rows = sweep["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);

    let text = export(&db, &["--experiment", &experiment]);
    let f = parse(&python, &text);
    let info = sample(&f, "tailscope_experiment_info", &[]);
    assert_eq!(info["labels"]["experiment_id"], experiment.as_str());
    assert_eq!(
        f["tailscope_run_info"]["samples"].as_array().unwrap().len(),
        2
    );
    for row in rows {
        let id = row["run_id"].as_i64().unwrap().to_string();
        let connections = row["params"]["connections"].to_string();
        let connections = connections.trim_matches('"');
        let s = sample(
            &f,
            "tailscope_latency_seconds",
            &[
                ("run_id", &id),
                ("view", "user"),
                ("quantile", "0.99"),
                ("experiment_id", &experiment),
                ("param_connections", connections),
            ],
        );
        let want = row["measured"]["p99"].as_f64().unwrap() / 1e6;
        assert!(close(s["value"].as_f64().unwrap(), want), "{s}");
        let load = row["load_pct"].as_f64().unwrap();
        let got: f64 = s["labels"]["load_pct"].as_str().unwrap().parse().unwrap();
        assert!(close(got, load), "load_pct {got} vs {load}");
    }
}

#[test]
fn a_runs_label_is_a_label_escaped_as_openmetrics_wants() {
    let _g = common::shared();
    let Some(python) = browser::openmetrics_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let label = "canary \"b\" \\ east\nline two";
    {
        let st = store::Store::open(&db).unwrap();
        let id = st
            .begin_run(&store::NewRun {
                kind: "run".into(),
                target: "http://10.0.0.1:80/x?a=\"1\"".into(),
                started_at: "2026-11-21T21:00:00.000Z".into(),
                config: json!({"label": label}),
                host: json!({"hostname": "box-1"}),
            })
            .unwrap();
        st.finish_run(
            id,
            "failed",
            &json!({"status": "failed", "measured": {"p99": 1500.0},
                    "outcomes": {"ok": 3, "error": 2, "timeout": 0, "dropped": 1}}),
        )
        .unwrap();
    }
    let f = parse(&python, &export(&db, &["1"]));
    let p99 = sample(
        &f,
        "tailscope_latency_seconds",
        &[("view", "user"), ("quantile", "0.99")],
    );
    assert_eq!(p99["labels"]["label"], label);
    assert_eq!(p99["labels"]["target"], "http://10.0.0.1:80/x?a=\"1\"");
    assert_eq!(p99["labels"]["host"], "box-1");
    assert!(close(p99["value"].as_f64().unwrap(), 0.0015));
    let failed = sample(&f, "tailscope_status", &[("status", "failed")]);
    assert_eq!(failed["value"].as_f64().unwrap(), 1.0);
    let dropped = sample(&f, "tailscope_requests", &[("outcome", "dropped")]);
    assert_eq!(dropped["value"].as_f64().unwrap(), 1.0);
    // A summary without a server view or intervals has none of their samples.
    let servers = f["tailscope_latency_seconds"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["labels"]["view"] == "server")
        .count();
    assert_eq!(servers, 0);
}

#[test]
fn bad_openmetrics_exports_are_usage_errors_that_write_nothing() {
    let _g = common::shared();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    {
        let st = store::Store::open(&db).unwrap();
        let id = st
            .begin_run(&store::NewRun {
                kind: "run".into(),
                target: "t".into(),
                started_at: "2026-11-21T21:00:00.000Z".into(),
                config: json!({}),
                host: json!({}),
            })
            .unwrap();
        st.finish_run(id, "ok", &json!({"measured": {"p99": 1.0}}))
            .unwrap();
    }
    let file = dir.path().join("out.om");
    for (args, needles) in [
        (
            vec!["--experiment", "1", "--format", "csv"],
            vec!["--experiment", "openmetrics"],
        ),
        (
            vec!["--experiment", "7", "--format", "openmetrics"],
            vec!["no experiment with id 7"],
        ),
        (
            vec!["9", "--format", "openmetrics"],
            vec!["no run with id 9"],
        ),
        (vec!["1", "--format", "prometheus"], vec!["openmetrics"]),
        (
            vec!["1", "--experiment", "1", "--format", "openmetrics"],
            vec!["--experiment"],
        ),
        (
            vec!["--format", "openmetrics"],
            vec!["not provided", "<ID>"],
        ),
        (
            vec![
                "1",
                "--format",
                "csv",
                "--push",
                "http://127.0.0.1:9/metrics/job/t",
            ],
            vec!["--push", "openmetrics"],
        ),
        (
            vec![
                "1",
                "--format",
                "openmetrics",
                "--push",
                "https://gw/metrics/job/t",
            ],
            vec!["--push", "http://"],
        ),
    ] {
        let mut cmd = bin();
        cmd.args(["runs", "export"]).args(&args);
        // -o and --push exclude each other: a push is checked without it.
        if !args.contains(&"--push") {
            cmd.arg("-o").arg(&file);
        }
        let out = cmd.arg("--db").arg(&db).output().unwrap();
        assert_usage_error(&out, &needles);
        assert!(!file.exists(), "{args:?} wrote {}", file.display());
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// A `prometheus-pushgateway` on a free loopback port; killed when dropped.
struct Gateway {
    child: std::process::Child,
    port: u16,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gateway {
    fn start(bin: &Path) -> Gateway {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(bin)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let g = Gateway { child, port };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "no Pushgateway");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        g
    }

    /// What the Pushgateway exposes on /metrics.
    fn metrics(&self) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    }
}

#[test]
fn push_sends_the_exposition_to_a_real_pushgateway() {
    let _g = common::shared();
    let Some(gateway) = browser::need(
        "prometheus-pushgateway (Debian package prometheus-pushgateway)",
        browser::on_path("prometheus-pushgateway"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    {
        let st = store::Store::open(&db).unwrap();
        let id = st
            .begin_run(&store::NewRun {
                kind: "run".into(),
                target: "nullrpc://127.0.0.1:7000".into(),
                started_at: "2026-11-21T21:00:00.000Z".into(),
                config: json!({"label": "canary \"b\""}),
                host: json!({"hostname": "box-1"}),
            })
            .unwrap();
        st.finish_run(
            id,
            "ok",
            &json!({"status": "ok", "measured": {"p99": 1500.0},
                    "outcomes": {"ok": 3, "error": 0, "timeout": 0, "dropped": 0}}),
        )
        .unwrap();
    }
    let g = Gateway::start(&gateway);
    let url = format!(
        "http://127.0.0.1:{}/metrics/job/tailscope/instance/lab",
        g.port
    );
    let out = bin()
        .args([
            "runs",
            "export",
            "1",
            "--format",
            "openmetrics",
            "--push",
            &url,
        ])
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    let metrics = g.metrics();
    let p99 = metrics
        .lines()
        .find(|l| {
            l.starts_with("tailscope_latency_seconds{")
                && l.contains(r#"quantile="0.99""#)
                && l.contains(r#"job="tailscope""#)
                && l.contains(r#"instance="lab""#)
                && l.contains(r#"label="canary \"b\"""#)
        })
        .unwrap_or_else(|| panic!("no pushed p99 in {metrics}"));
    let value: f64 = p99.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(close(value, 0.0015), "{p99}");
    assert!(
        metrics.lines().any(|l| l.starts_with("tailscope_status{")
            && l.contains(r#"status="ok""#)
            && l.ends_with(" 1")),
        "{metrics}"
    );

    // A Pushgateway that is not there: the push fails (exit 1) in one line.
    drop(g);
    let out = bin()
        .args([
            "runs",
            "export",
            "1",
            "--format",
            "openmetrics",
            "--push",
            &url,
        ])
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot push to") && err.trim().lines().count() == 1,
        "{err}"
    );
}
