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

use lab::summary::{figure, Intervals, RunSummary};
use lab::RunConfig;
use lab::RunStatus;
use serde_json::Value;
use stats::{Distribution, STANDARD_QUANTILES};
use store::{ExperimentRow, RunRow};

/// One run to expose and the labels that tell its samples apart.
struct Entry<'a> {
    row: &'a RunRow,
    /// Its stored summary by field.
    facts: RunSummary,
    labels: Vec<(String, String)>,
}

/// Which figures of a view a percentile family reads.
#[derive(Clone, Copy)]
enum Figures {
    Measured,
    Ideal,
    Excess,
}

/// One view's distributions and intervals, as stored.
struct ViewFigures<'a> {
    measured: (Option<&'a Distribution>, Option<&'a Intervals>),
    ideal: (Option<&'a Distribution>, Option<&'a Intervals>),
    excess: (Option<&'a Distribution>, Option<&'a Intervals>),
}

impl ViewFigures<'_> {
    fn of(&self, f: Figures) -> (Option<&Distribution>, Option<&Intervals>) {
        match f {
            Figures::Measured => self.measured,
            Figures::Ideal => self.ideal,
            Figures::Excess => self.excess,
        }
    }
}

impl<'a> Entry<'a> {
    fn new(row: &'a RunRow, labels: Vec<(String, String)>) -> Entry<'a> {
        let facts = row.summary.as_ref().map(RunSummary::of).unwrap_or_default();
        Entry { row, facts, labels }
    }

    /// The figures of one view ("user" or "server"), when the run has it.
    fn view(&self, view: &str) -> Option<ViewFigures<'_>> {
        let s = &self.facts;
        match view {
            "user" => self.row.summary.as_ref().map(|_| ViewFigures {
                measured: (s.measured.as_ref(), s.measured_ci.as_ref()),
                ideal: (s.ideal.as_ref(), s.ideal_ci.as_ref()),
                excess: (s.excess.as_ref(), s.excess_ci.as_ref()),
            }),
            _ => s.server_view().map(|v| ViewFigures {
                measured: (v.measured.as_ref(), v.measured_ci.as_ref()),
                ideal: (v.ideal.as_ref(), v.ideal_ci.as_ref()),
                excess: (v.excess.as_ref(), v.excess_ci.as_ref()),
            }),
        }
    }

    /// The run's status: its summary's, else its row's.
    fn status(&self) -> &str {
        match self.facts.status {
            Some(s) => s.as_str(),
            None => self.row.status.as_str(),
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
            lab::summary::HostFacts::of(&row.host)
                .hostname
                .as_str()
                .unwrap_or("")
                .to_string(),
        ),
    ];
    if let Some(label) = RunConfig::of(&row.config).label {
        l.push(("label".into(), label));
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
    figures: Figures,
    scale: f64,
) -> std::io::Result<()> {
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
                let (dist, ci) = v.of(figures);
                for (key, q) in STANDARD_QUANTILES {
                    let x = match pick {
                        0 => figure(dist, key),
                        1 => ci.and_then(|c| c.of(key)).map(|c| c.lo),
                        _ => ci.and_then(|c| c.of(key)).map(|c| c.hi),
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
        ("status".to_string(), x.status.to_string()),
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
        let status = e.status();
        let s = &e.facts;
        let l = with(
            &e.labels,
            &[
                ("status", status),
                ("started_at", &e.row.started_at),
                ("finished_at", e.row.finished_at.as_deref().unwrap_or("")),
                ("url", s.url.as_deref().unwrap_or("")),
                ("headline_view", s.headline_view.as_deref().unwrap_or("")),
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
        Figures::Measured,
        1e-6,
    )?;
    percentile_families(
        out,
        entries,
        "ideal_latency",
        "seconds",
        "Ideal latency at a percentile: the queueing model for the same arrivals, service time and workers",
        Figures::Ideal,
        1e-6,
    )?;
    percentile_families(
        out,
        entries,
        "excess",
        "ratio",
        "Excess at a percentile: measured latency divided by ideal latency",
        Figures::Excess,
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
                .facts
                .views
                .as_ref()
                .and_then(|v| v.of(view))
                .and_then(|v| v.valid)
            else {
                continue;
            };
            let l = with(&e.labels, &[("view", view)]);
            out.sample("tailscope_view_valid", &l, if valid { "1" } else { "0" })?;
        }
    }

    let offered = |s: &RunSummary| s.rate_rps;
    let achieved = |s: &RunSummary| s.achieved_rate_rps;
    for (name, rate, help) in [
        (
            "tailscope_offered_rate_requests_per_second",
            &offered as &dyn Fn(&RunSummary) -> Option<f64>,
            "Offered request rate (the schedule)",
        ),
        (
            "tailscope_achieved_rate_requests_per_second",
            &achieved,
            "Achieved request rate (completed requests per second)",
        ),
    ] {
        out.family(name, "gauge", Some("requests_per_second"), help)?;
        for e in entries {
            if let Some(x) = rate(&e.facts) {
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
        let Some(o) = &e.facts.outcomes else {
            continue;
        };
        for (outcome, n) in o.named() {
            if let Some(n) = n {
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
        let status = e.status();
        let mut states: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
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
    let entries = [Entry::new(row, run_labels(row))];
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
            let config = RunConfig::of(&row.config);
            let load = config.load_pct.or_else(|| {
                row.summary
                    .as_ref()
                    .and_then(|s| RunSummary::of(s).load_pct)
            });
            if let Some(p) = load {
                labels.push(("load_pct".into(), number(p)));
            }
            {
                let mut kv: Vec<(String, String)> = config
                    .params
                    .iter()
                    .flatten()
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
            Entry::new(row, labels)
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
            status: lab::RunStatus::Ok.into(),
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
