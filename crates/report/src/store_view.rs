//! `runs list` and `runs show`: stored runs read by field (their summaries and configurations
//! through `lab::summary`'s lenient readers, so older stores keep listing), as a table, JSON,
//! or one run's lines.

use std::io::{self, Write};

use lab::summary::{figure, RunSummary};
use lab::RunConfig;
use serde::Serialize;
use store::RunRow;

/// One line of `runs list` (its `--json` object).
#[derive(Clone, Debug, Serialize)]
pub struct Listed<'a> {
    pub id: i64,
    pub kind: &'a str,
    pub status: String,
    pub target: &'a str,
    pub started_at: &'a str,
    pub finished_at: Option<&'a str>,
    pub requests: Option<i64>,
    /// The user view's p99 in µs, as stored.
    pub p99_us: Option<f64>,
    pub label: Option<String>,
}

impl<'a> Listed<'a> {
    pub fn of(r: &'a RunRow) -> Listed<'a> {
        let measured = r.summary.as_ref().and_then(|s| RunSummary::of(s).measured);
        Listed {
            id: r.id,
            kind: &r.kind,
            status: r.status.to_string(),
            target: &r.target,
            started_at: &r.started_at,
            finished_at: r.finished_at.as_deref(),
            requests: r.requests,
            p99_us: figure(measured.as_ref(), "p99"),
            label: RunConfig::of(&r.config).label,
        }
    }
}

/// `runs list --json`: `{"runs": [...]}`.
#[derive(Serialize)]
pub struct ListJson<'a> {
    pub runs: Vec<Listed<'a>>,
}

impl<'a> ListJson<'a> {
    pub fn of(rows: &'a [RunRow]) -> ListJson<'a> {
        ListJson {
            runs: rows.iter().map(Listed::of).collect(),
        }
    }
}

/// `runs list`: one line per run, newest first as given.
pub fn list(w: &mut dyn Write, rows: &[RunRow]) -> io::Result<()> {
    writeln!(
        w,
        "{:>5}  {:<10} {:<12} {:<22} {:>10}  {:<16} target",
        "id", "kind", "status", "started", "p99", "label"
    )?;
    for r in rows.iter().map(Listed::of) {
        let p99 = r.p99_us.map(|v| format!("{v:.1} µs")).unwrap_or_default();
        writeln!(
            w,
            "{:>5}  {:<10} {:<12} {:<22} {:>10}  {:<16} {}",
            r.id,
            r.kind,
            r.status,
            r.started_at,
            p99,
            r.label.as_deref().unwrap_or("-"),
            r.target
        )?;
    }
    Ok(())
}

/// `runs show`'s header: the row's identity, configuration and host facts.
pub fn show_header(w: &mut dyn Write, r: &RunRow, experiment: Option<i64>) -> io::Result<()> {
    show_title(w, r, experiment)?;
    writeln!(w, "config: {}", r.config)?;
    writeln!(w, "host: {}", r.host)
}

/// The first line of [`show_header`]: the run's id, kind, status, target, start, experiment.
pub fn show_title(w: &mut dyn Write, r: &RunRow, experiment: Option<i64>) -> io::Result<()> {
    writeln!(
        w,
        "run {} · {} · {} · {} · started {}{}",
        r.id,
        r.kind,
        r.status,
        r.target,
        r.started_at,
        experiment
            .map(|e| format!(" · experiment {e}"))
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(summary: Option<serde_json::Value>, config: serde_json::Value) -> RunRow {
        RunRow {
            id: 7,
            kind: "run".into(),
            status: store::RowStatus::from_text("ok"),
            target: "nullrpc://127.0.0.1:1".into(),
            started_at: "2026-11-26T00:00:00Z".into(),
            finished_at: None,
            config,
            host: serde_json::json!({}),
            summary,
            requests: Some(10),
        }
    }

    #[test]
    fn a_listing_reads_the_p99_and_the_label_by_field() {
        let r = row(
            Some(serde_json::json!({"measured": {"p50": 10.0, "p99": 42.5}})),
            serde_json::json!({"label": "v1"}),
        );
        let l = Listed::of(&r);
        assert_eq!((l.p99_us, l.label.as_deref()), (Some(42.5), Some("v1")));
        let v = serde_json::to_value(ListJson::of(std::slice::from_ref(&r))).unwrap();
        assert_eq!(v["runs"][0]["p99_us"], 42.5);
        assert_eq!(v["runs"][0]["status"], "ok");
        // A summary of another shape (an older store, a failed run) lists without them.
        let r = row(
            Some(serde_json::json!("x")),
            serde_json::json!({"label": 3}),
        );
        let l = Listed::of(&r);
        assert_eq!((l.p99_us, l.label), (None, None));
        let mut out = Vec::new();
        list(&mut out, &[r]).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().nth(1).unwrap().contains(" - "), "{text}");
    }
}
