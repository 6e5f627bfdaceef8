//! The command that reproduces a stored run, rebuilt from the configuration stored with it.
//! What the store does not keep is not invented: it is listed beside the command, with the
//! value the command will use instead (the flag's default).

use lab::summary::RunSummary;
use lab::RunConfig;
use store::RunRow;

/// A shell word: quoted when it holds anything a shell would read specially.
fn sh(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:%,=@+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A number as the CLI reads it back exactly (Rust's shortest round-trip form).
fn exact(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The command and what it could not reconstruct.
pub fn reproduce(row: &RunRow) -> (String, Vec<String>) {
    let c = RunConfig::of(&row.config);
    if c.demo == Some(true) {
        return demo(&c);
    }
    if row.kind == "calibrate" {
        return (
            format!("tailscope calibrate {}", sh(&row.target)),
            vec!["a calibration stores its search, not its flags: --max-connections, --max-depth, --duration and --cpus are their defaults here".into()],
        );
    }
    let Some(target) = c.target.as_deref() else {
        return (
            "# this run's configuration does not name its target".into(),
            vec![format!("stored configuration: {}", row.config)],
        );
    };
    run(row, &c, target)
}

fn demo(c: &RunConfig) -> (String, Vec<String>) {
    let mut cmd = String::from("tailscope demo");
    if let Some(w) = &c.work {
        cmd += &format!(" --work {}", sh(w));
    }
    if let Some(d) = &c.duration {
        cmd += &format!(" --duration {}", sh(d));
    }
    if let Some(p) = c.load_pct {
        cmd += &format!(" --loads {}", exact(p));
    }
    (
        cmd,
        vec![
            "a point of `tailscope demo`: the demo calibrates the built-in server again, so the offered rate follows the new calibration".into(),
            "the demo's --server-cpu, --client-cpu and --sched are not stored: their defaults here".into(),
        ],
    )
}

fn run(row: &RunRow, c: &RunConfig, target: &str) -> (String, Vec<String>) {
    let s = row.summary.as_ref().map(RunSummary::of).unwrap_or_default();
    let mut w: Vec<String> = vec!["tailscope".into(), "run".into(), sh(target)];
    let mut caveats = Vec::new();
    let mut flag = |name: &str, v: String| {
        w.push(format!("--{name}"));
        w.push(v);
    };
    // The offered rate itself: a percentage means the capacity known at the time.
    if let Some(r) = c.rate_rps {
        flag("rate", exact(r));
        if let Some(orig) = c.rate.as_deref().filter(|r| r.ends_with('%')) {
            caveats.push(format!(
                "the run asked for --rate {orig} of the capacity calibrated then; the command gives the rate that offered ({} req/s)",
                exact(r)
            ));
        }
    }
    if let Some(a) = c.arrival.as_deref().filter(|a| *a != "poisson") {
        flag("arrival", sh(a));
        if a.starts_with("trace:") {
            caveats.push("a trace's --trace-unit is not stored: ns here".into());
        }
    }
    match (&c.requests, &c.duration) {
        (Some(n), _) => flag("requests", sh(n)),
        (None, Some(d)) => flag("duration", sh(d)),
        _ => {}
    }
    for (v, name) in [(&c.warmup, "warmup"), (&c.timeout, "timeout")] {
        if let Some(v) = v {
            flag(name, sh(v));
        }
    }
    for (v, name) in [
        (c.connections, "connections"),
        (c.threads, "threads"),
        (c.max_outstanding, "max-outstanding"),
        (c.request_size, "request-size"),
        (c.seed, "seed"),
    ] {
        if let Some(v) = v {
            flag(name, v.to_string());
        }
    }
    if let Some(cpus) = c.cpus.as_ref().filter(|c| !c.is_empty()) {
        let list: Vec<String> = cpus.iter().map(u64::to_string).collect();
        flag("cpus", list.join(","));
    }
    if let Some(a) = c.alpha {
        flag("alpha", exact(a));
    }
    if c.stamps == Some(false) {
        w.push("--no-stamps".into());
    }
    ideal_flags(c, &s, &mut w, &mut caveats);
    server_flags(c, &mut w, &mut caveats);
    if let Some(wl) = c
        .workload
        .as_deref()
        .filter(|wl| !wl.starts_with("NullRpc"))
    {
        caveats.push(format!(
            "the workload is stored only as text ({wl}): give --get-ratio, --key-size, --value-size, --items, --popularity, --files and --file-size again"
        ));
    }
    if let Some((a, b)) = c.churn {
        w.push("--churn".into());
        w.push(format!("{a},{b}"));
    }
    if s.instruments
        .iter()
        .any(|i| i.mode.as_deref() == Some("off"))
    {
        w.push("--no-attribution".into());
    }
    caveats.push(
        "--lateness-threshold, --confidence, --yield-when-far, --server-pid and --server-cpus are not stored: the command uses their defaults (50us, 0.95, off, none, none)".into(),
    );
    (w.join(" "), caveats)
}

/// The ideal: its service time as it was (given, or from a calibration), its shape.
fn ideal_flags(c: &RunConfig, s: &RunSummary, w: &mut Vec<String>, caveats: &mut Vec<String>) {
    let Some(i) = &c.ideal else {
        return;
    };
    w.push("--service".into());
    w.push(format!("{}ns", exact(i.service_ns.round())));
    let source = s.ideal_source.as_ref();
    if let Some(from) = source
        .and_then(|x| x.from.as_deref())
        .filter(|f| *f != "given")
    {
        caveats.push(format!(
            "the ideal's service time came from {from} (run {}); --service gives the same value without calibrating again",
            source
                .and_then(|x| x.calibration_run)
                .map_or("?".into(), exact)
        ));
    }
    w.push("--workers".into());
    w.push(i.workers.to_string());
    w.push("--queues".into());
    w.push(
        match i.queues {
            analysis::QueueStructure::Single => "single",
            analysis::QueueStructure::PerWorker => "per-worker",
        }
        .into(),
    );
}

/// A spawned server: `--spawn`, its threads, and what of it the flags cannot say.
fn server_flags(c: &RunConfig, w: &mut Vec<String>, caveats: &mut Vec<String>) {
    let Some(server) = c.server.as_ref().filter(|s| s.spawned) else {
        return;
    };
    w.push("--spawn".into());
    if let Some(t) = server.worker_threads {
        w.push("--server-threads".into());
        w.push(t.to_string());
    }
    caveats.push(format!(
        "--server-cpus and --server-sched of the spawned server are not stored as flags; its command line was: {}",
        server
            .command_line
            .as_ref()
            .map_or("-".into(), |v| serde_json::json!(v).to_string())
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn row(config: Value, summary: Value) -> RunRow {
        RunRow {
            id: 1,
            kind: "run".into(),
            status: lab::RunStatus::Ok.into(),
            target: "nullrpc://127.0.0.1:7000".into(),
            started_at: "2026-01-01T00:00:00.000Z".into(),
            finished_at: None,
            config,
            host: json!({}),
            summary: Some(summary),
            requests: None,
        }
    }

    #[test]
    fn a_run_command_is_rebuilt_from_its_config() {
        let r = row(
            json!({"target": "nullrpc://127.0.0.1:7000", "rate": "70%", "rate_rps": 12000.5,
                   "arrival": "poisson", "duration": "10s", "requests": null, "warmup": "1s",
                   "connections": 8, "threads": 1, "cpus": [0], "max_outstanding": 64,
                   "timeout": "1s", "request_size": 128, "stamps": true, "seed": 3,
                   "ideal": {"service_ns": 50000.0, "workers": 1, "queues": "single"},
                   "server": {"spawned": false}, "alpha": null, "workload": "NullRpc(..)"}),
            json!({"ideal_source": {"from": "stored calibration", "calibration_run": 4}}),
        );
        let (cmd, caveats) = reproduce(&r);
        assert_eq!(
            cmd,
            "tailscope run nullrpc://127.0.0.1:7000 --rate 12000.5 --duration 10s --warmup 1s \
             --timeout 1s --connections 8 --threads 1 --max-outstanding 64 --request-size 128 \
             --seed 3 --cpus 0 --service 50000ns --workers 1 --queues single"
        );
        assert!(caveats.iter().any(|c| c.contains("70%")));
        assert!(caveats.iter().any(|c| c.contains("run 4")));
        assert!(caveats.iter().any(|c| c.contains("--lateness-threshold")));
    }

    #[test]
    fn words_a_shell_would_split_are_quoted() {
        assert_eq!(sh("trace:/tmp/a b"), "'trace:/tmp/a b'");
        assert_eq!(sh("it's"), "'it'\\''s'");
        assert_eq!(sh("10s"), "10s");
    }
}
