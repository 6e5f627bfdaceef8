//! A stored run's (or an experiment's) summary in the OpenMetrics text exposition format
//! (<https://prometheus.io/docs/specs/om/open_metrics_spec/>), for Prometheus' node-exporter
//! textfile collector and the Pushgateway.
//!
//! Every family is written once, with one sample per view and percentile per run, so that an
//! experiment (one run per point) is one exposition. Times are in seconds (OpenMetrics' base
//! unit), not the µs of the JSON. Every sample carries the run's identity labels (`run_id`,
//! `target`, `kind`, `host` and, when the run has one, `label`); an experiment's points add
//! `experiment_id`, `load_pct` and their knobs as `param_<name>`. No sample has a timestamp:
//! neither the textfile collector nor the Pushgateway accepts them.
//!
//! The families (all prefixed `tailscope_`):
//!
//! | family | type | labels |
//! |---|---|---|
//! | `run_info` | gauge (1) | `status`, `started_at`, `finished_at`, `url`, `headline_view` |
//! | `latency_seconds`, `latency_lower_seconds`, `latency_upper_seconds` | gauge | `view`, `quantile` |
//! | `ideal_latency_seconds` (and `_lower_`, `_upper_`) | gauge | `view`, `quantile` |
//! | `excess_ratio`, `excess_lower_ratio`, `excess_upper_ratio` | gauge | `view`, `quantile` |
//! | `view_valid` | gauge (1 valid, 0 not) | `view` |
//! | `offered_rate_requests_per_second`, `achieved_rate_requests_per_second` | gauge | |
//! | `requests` (`requests_total`) | counter | `outcome` |
//! | `status` | gauge (1 for the run's status, 0 for the others) | `status` |
//! | `experiment_info` (an experiment) | gauge (1) | `experiment_id`, `kind`, `status`, … |
//!
//! The lower and upper ends are the stored 95 % intervals. The run's facts and its status are
//! gauges in the `_info` and state-set style, not OpenMetrics' `info` and `stateset` types:
//! the Pushgateway and node-exporter's textfile collector parse the classic Prometheus text
//! format, which refuses those two types (and reads `# UNIT` and `# EOF` as comments), so this
//! exposition is valid OpenMetrics and accepted by both.

use std::io::Write;

use serde_json::Value;
use stats::STANDARD_QUANTILES;
use store::{ExperimentRow, RunRow};

/// The statuses a run can have (`lab::RunStatus`), the states of `tailscope_status`.
const STATUSES: [&str; 5] = ["ok", "invalid", "failed", "saturated", "interrupted"];

/// The request outcomes of a run's `outcomes` object.
const OUTCOMES: [&str; 4] = ["ok", "error", "timeout", "dropped"];

/// One run to expose and the labels that tell its samples apart.
struct Entry<'a> {
    row: &'a RunRow,
    labels: Vec<(String, String)>,
}

impl Entry<'_> {
    fn summary(&self) -> &Value {
        self.row.summary.as_ref().unwrap_or(&Value::Null)
    }

    /// The summary's objects of one view: (measured, measured_ci, ideal, ideal_ci, excess,
    /// excess_ci).
    fn view(&self, view: &str) -> Option<&Value> {
        let s = self.summary();
        match view {
            "user" => Some(s).filter(|s| !s.is_null()),
            _ => s.get("server_view").filter(|v| !v.is_null()),
        }
    }
}

/// Escapes a label value: backslash, double quote and line feed.
pub fn escape_label(v: &str) -> String {
    let mut o = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

/// Escapes a `# HELP` text: backslash, double quote and line feed.
fn escape_help(v: &str) -> String {
    escape_label(v)
}

/// A label name from any text: `[a-zA-Z0-9_]`, the rest replaced by `_`.
pub fn label_name(prefix: &str, name: &str) -> String {
    let mut o = prefix.to_string();
    o.extend(
        name.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
    );
    o
}

/// A number as OpenMetrics writes it.
fn number(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x == f64::INFINITY {
        "+Inf".into()
    } else if x == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{x}")
    }
}

fn labels_text(labels: &[(String, String)]) -> String {
    let inner: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

struct Out<'w> {
    w: &'w mut dyn Write,
}

impl Out<'_> {
    fn family(
        &mut self,
        name: &str,
        kind: &str,
        unit: Option<&str>,
        help: &str,
    ) -> std::io::Result<()> {
        writeln!(self.w, "# TYPE {name} {kind}")?;
        if let Some(u) = unit {
            writeln!(self.w, "# UNIT {name} {u}")?;
        }
        writeln!(self.w, "# HELP {name} {}", escape_help(help))
    }

    fn sample(
        &mut self,
        name: &str,
        labels: &[(String, String)],
        value: &str,
    ) -> std::io::Result<()> {
        writeln!(self.w, "{name}{} {value}", labels_text(labels))
    }
}

fn with(base: &[(String, String)], more: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut l = base.to_vec();
    l.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    l
}

/// The identity labels of a run.
fn run_labels(row: &RunRow) -> Vec<(String, String)> {
    let mut l = vec![
        ("run_id".to_string(), row.id.to_string()),
        ("target".to_string(), row.target.clone()),
        ("kind".to_string(), row.kind.clone()),
        (
            "host".to_string(),
            row.host
                .get("hostname")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        ),
    ];
    if let Some(label) = row.config.get("label").and_then(Value::as_str) {
        l.push(("label".into(), label.to_string()));
    }
    l
}

/// One percentile family (value, lower and upper end) of both views.
fn percentile_families(
    out: &mut Out<'_>,
    entries: &[Entry<'_>],
    base: &str,
    unit: &str,
    what: &str,
    value_key: &str,
    scale: f64,
) -> std::io::Result<()> {
    let ci_key = format!("{value_key}_ci");
    for (suffix, pick, help_end) in [
        ("", 0usize, ""),
        ("_lower", 1, " (lower end of its 95 % interval)"),
        ("_upper", 2, " (upper end of its 95 % interval)"),
    ] {
        let name = format!("tailscope_{base}{suffix}_{unit}");
        out.family(&name, "gauge", Some(unit), &format!("{what}{help_end}"))?;
        for e in entries {
            for view in ["user", "server"] {
                let Some(v) = e.view(view) else { continue };
                for (key, q) in STANDARD_QUANTILES {
                    let x = match pick {
                        0 => v
                            .get(value_key)
                            .and_then(|d| d.get(key))
                            .and_then(Value::as_f64),
                        _ => ci_end(v.get(&ci_key), key, if pick == 1 { "lo" } else { "hi" }),
                    };
                    let Some(x) = x else { continue };
                    let q = format!("{q}");
                    let l = with(&e.labels, &[("view", view), ("quantile", &q)]);
                    out.sample(&name, &l, &number(x * scale))?;
                }
            }
        }
    }
    Ok(())
}

/// One end of a percentile's interval, from `{"p99": {"lo", "hi"}}` or `[{"key": "p99", "lo",
/// "hi"}]`.
fn ci_end(ci: Option<&Value>, key: &str, end: &str) -> Option<f64> {
    match ci? {
        Value::Object(m) => m.get(key)?.get(end)?.as_f64(),
        Value::Array(a) => a
            .iter()
            .find(|e| e.get("key").and_then(Value::as_str) == Some(key))?
            .get(end)?
            .as_f64(),
        _ => None,
    }
}

/// The experiment the runs belong to.
fn experiment_info(out: &mut Out<'_>, x: &ExperimentRow) -> std::io::Result<()> {
    out.family(
        "tailscope_experiment_info",
        "gauge",
        None,
        "A tailscope experiment (a sweep, tuning walk, colocation or demo): one run per point",
    )?;
    let l = vec![
        ("experiment_id".to_string(), x.id.to_string()),
        ("kind".to_string(), x.kind.clone()),
        ("status".to_string(), x.status.clone()),
        ("started_at".to_string(), x.started_at.clone()),
        (
            "finished_at".to_string(),
            x.finished_at.clone().unwrap_or_default(),
        ),
    ];
    out.sample("tailscope_experiment_info", &l, "1")?;
    Ok(())
}

/// One info sample per run: its facts as labels.
fn run_info(out: &mut Out<'_>, entries: &[Entry<'_>]) -> std::io::Result<()> {
    out.family(
        "tailscope_run_info",
        "gauge",
        None,
        "A stored tailscope run (always 1; its facts are the labels)",
    )?;
    for e in entries {
        let s = e.summary();
        let status = s
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or(&e.row.status);
        let text = |p: &str| s.pointer(p).and_then(Value::as_str).unwrap_or("");
        let l = with(
            &e.labels,
            &[
                ("status", status),
                ("started_at", &e.row.started_at),
                ("finished_at", e.row.finished_at.as_deref().unwrap_or("")),
                ("url", text("/url")),
                ("headline_view", text("/headline_view")),
            ],
        );
        out.sample("tailscope_run_info", &l, "1")?;
    }

    Ok(())
}

/// Measured, ideal and excess percentiles of both views.
fn latency_families(out: &mut Out<'_>, entries: &[Entry<'_>]) -> std::io::Result<()> {
    percentile_families(
        out,
        entries,
        "latency",
        "seconds",
        "Measured latency at a percentile: user view from the intended send, server view from the actual send",
        "measured",
        1e-6,
    )?;
    percentile_families(
        out,
        entries,
        "ideal_latency",
        "seconds",
        "Ideal latency at a percentile: the queueing model for the same arrivals, service time and workers",
        "ideal",
        1e-6,
    )?;
    percentile_families(
        out,
        entries,
        "excess",
        "ratio",
        "Excess at a percentile: measured latency divided by ideal latency",
        "excess",
        1.0,
    )?;

    Ok(())
}

/// Each view's validity, and the offered and achieved rates.
fn validity_and_rates(out: &mut Out<'_>, entries: &[Entry<'_>]) -> std::io::Result<()> {
    out.family(
        "tailscope_view_valid",
        "gauge",
        None,
        "Whether a view's figures are valid (1) or not (0): a generator that fell behind spoils the user view",
    )?;
    for e in entries {
        for view in ["user", "server"] {
            let Some(valid) = e
                .summary()
                .pointer(&format!("/views/{view}/valid"))
                .and_then(Value::as_bool)
            else {
                continue;
            };
            let l = with(&e.labels, &[("view", view)]);
            out.sample("tailscope_view_valid", &l, if valid { "1" } else { "0" })?;
        }
    }

    for (name, key, help) in [
        (
            "tailscope_offered_rate_requests_per_second",
            "rate_rps",
            "Offered request rate (the schedule)",
        ),
        (
            "tailscope_achieved_rate_requests_per_second",
            "achieved_rate_rps",
            "Achieved request rate (completed requests per second)",
        ),
    ] {
        out.family(name, "gauge", Some("requests_per_second"), help)?;
        for e in entries {
            if let Some(x) = e.summary().get(key).and_then(Value::as_f64) {
                out.sample(name, &e.labels, &number(x))?;
            }
        }
    }

    Ok(())
}

/// Requests by outcome, and the run's status.
fn requests_and_status(out: &mut Out<'_>, entries: &[Entry<'_>]) -> std::io::Result<()> {
    out.family(
        "tailscope_requests",
        "counter",
        None,
        "Requests measured after the warm-up, by outcome",
    )?;
    for e in entries {
        let Some(o) = e.summary().get("outcomes") else {
            continue;
        };
        for outcome in OUTCOMES {
            if let Some(n) = o.get(outcome).and_then(Value::as_u64) {
                let l = with(&e.labels, &[("outcome", outcome)]);
                out.sample("tailscope_requests_total", &l, &n.to_string())?;
            }
        }
    }

    out.family(
        "tailscope_status",
        "gauge",
        None,
        "The run's status: 1 for its own (ok, invalid: no view valid, failed, saturated, interrupted), 0 for the others",
    )?;
    for e in entries {
        let status = e
            .summary()
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or(&e.row.status);
        let mut states: Vec<&str> = STATUSES.to_vec();
        if !states.contains(&status) {
            states.push(status);
        }
        for st in states {
            let l = with(&e.labels, &[("status", st)]);
            out.sample("tailscope_status", &l, if st == status { "1" } else { "0" })?;
        }
    }
    Ok(())
}

fn write_entries(
    w: &mut dyn Write,
    experiment: Option<&ExperimentRow>,
    entries: &[Entry<'_>],
) -> std::io::Result<()> {
    let mut out = Out { w };
    if let Some(x) = experiment {
        experiment_info(&mut out, x)?;
    }
    run_info(&mut out, entries)?;
    latency_families(&mut out, entries)?;
    validity_and_rates(&mut out, entries)?;
    requests_and_status(&mut out, entries)?;
    writeln!(out.w, "# EOF")
}

/// Writes one stored run's summary as an OpenMetrics exposition.
pub fn run(row: &RunRow, w: &mut dyn Write) -> std::io::Result<()> {
    let entries = [Entry {
        row,
        labels: run_labels(row),
    }];
    write_entries(w, None, &entries)
}

/// Writes an experiment's points (its runs, in the order they ran) as one OpenMetrics
/// exposition: every run's samples labelled with `experiment_id`, its load (`load_pct`, when
/// the experiment had a capacity) and its knobs (`param_<name>`).
pub fn experiment(x: &ExperimentRow, runs: &[RunRow], w: &mut dyn Write) -> std::io::Result<()> {
    let entries: Vec<Entry<'_>> = runs
        .iter()
        .map(|row| {
            let mut labels = run_labels(row);
            labels.push(("experiment_id".into(), x.id.to_string()));
            let load = row
                .config
                .get("load_pct")
                .and_then(Value::as_f64)
                .or_else(|| {
                    row.summary
                        .as_ref()
                        .and_then(|s| s.get("load_pct"))
                        .and_then(Value::as_f64)
                });
            if let Some(p) = load {
                labels.push(("load_pct".into(), number(p)));
            }
            if let Some(Value::Object(m)) = row.config.get("params") {
                let mut kv: Vec<(String, String)> = m
                    .iter()
                    .map(|(k, v)| {
                        let v = match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        (label_name("param_", k), v)
                    })
                    .collect();
                kv.sort();
                labels.extend(kv);
            }
            Entry { row, labels }
        })
        .collect();
    write_entries(w, Some(x), &entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row() -> RunRow {
        RunRow {
            id: 7,
            kind: "run".into(),
            status: "ok".into(),
            target: "nullrpc://h:1".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: None,
            config: json!({"label": "a \"b\"\\c\nd"}),
            host: json!({"hostname": "box"}),
            summary: Some(json!({
                "status": "saturated",
                "measured": {"p99": 250.0},
                "measured_ci": {"p99": {"value": 250.0, "lo": 200.0, "hi": 300.0}},
                "excess_ci": [{"key": "p99", "lo": 1.5, "hi": 2.5, "value": 2.0}],
                "outcomes": {"ok": 10, "error": 1},
            })),
            requests: None,
        }
    }

    #[test]
    fn escapes_labels_and_converts_to_seconds() {
        let mut buf = Vec::new();
        run(&row(), &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(text.contains(r#"label="a \"b\"\\c\nd""#), "{text}");
        assert!(
            text.contains(r#"tailscope_latency_seconds{run_id="7","#)
                && text.contains(r#"view="user",quantile="0.99"} 0.00025"#),
            "{text}"
        );
        assert!(text.contains(r#"quantile="0.99"} 0.0003"#), "{text}");
        assert!(text.contains(r#"tailscope_excess_upper_ratio"#), "{text}");
        assert!(text.contains(r#"status="saturated"} 1"#), "{text}");
        assert!(text.contains(r#"status="ok"} 0"#), "{text}");
        assert!(text.contains(r#"outcome="error"} 1"#), "{text}");
        assert!(!text.contains("view=\"server\""), "no server view: {text}");
    }

    #[test]
    fn label_names_are_sanitised() {
        assert_eq!(
            label_name("param_", "max-outstanding"),
            "param_max_outstanding"
        );
        assert_eq!(number(f64::INFINITY), "+Inf");
    }
}
