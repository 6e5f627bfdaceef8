//! Latency over time: the figure a reader reaches for when the numbers disagree between
//! repeats. Per window of the run (100 ms or more), the measured p50 and p99 against the
//! ideal's p99 for the same arrivals, in each view; the generator's lateness; and the host's
//! time lost (steal time, other tasks, run-queue wait) that the attribution sampler saw in the
//! window. The windows whose tail moved (the run's stationarity test) are drawn as crosses and
//! listed below the figure.

use std::fmt::Write as _;

use serde_json::Value;

use super::{esc, figure_html};
use crate::figure::{self, Body, Figure, LoadFigure, LoadLine, LoadPanel};
use crate::stored::{num, text, StoredRun};
use crate::ReportError;

const IDEAL: plotters::style::RGBColor = plotters::style::RGBColor(40, 40, 40);

fn seconds(x: f64) -> String {
    format!("{x:.1} s")
}

/// (window centre s, value) of every window with the field.
fn series(windows: &[Value], key: &str) -> Vec<(f64, f64)> {
    windows
        .iter()
        .filter_map(|w| {
            let a = num(w, "/start_s")?;
            let b = num(w, "/end_s")?;
            let v = num(w, &format!("/{key}"))?;
            (v.is_finite() && v > 0.0).then_some((0.5 * (a + b), v))
        })
        .collect()
}

/// Whether the window centred at `x` lies in one of the moved spans.
fn moved(spans: &[(f64, f64)], x: f64) -> bool {
    spans.iter().any(|&(a, b)| x >= a && x <= b)
}

fn line(
    label: &str,
    i: usize,
    dashed: bool,
    points: Vec<(f64, f64)>,
    spans: &[(f64, f64)],
) -> LoadLine {
    LoadLine {
        label: label.into(),
        color: if dashed && i == usize::MAX {
            IDEAL
        } else {
            figure::color(i)
        },
        dashed,
        flagged: points.iter().map(|p| moved(spans, p.0)).collect(),
        points,
    }
}

fn spans(st: Option<&Value>) -> Vec<(f64, f64)> {
    st.and_then(|s| s.get("moved"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|m| Some((num(m, "/start_s")?, num(m, "/end_s")?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The run's latency-over-time section (nothing when the run kept no windows).
pub(crate) fn section(
    out: &mut String,
    r: &StoredRun,
    figures: &mut Vec<Figure>,
) -> Result<(), ReportError> {
    let s = r.summary();
    let Some(windows) = s.get("windows").and_then(Value::as_array) else {
        return Ok(());
    };
    if windows.len() < 2 {
        return Ok(());
    }
    let st = s.get("stationarity").filter(|v| !v.is_null());
    let user_spans = spans(st.and_then(|s| s.get("user")));
    let server_spans = spans(st.and_then(|s| s.get("server")));
    let mut user = vec![
        line(
            "measured p99",
            0,
            false,
            series(windows, "p99_us"),
            &user_spans,
        ),
        line(
            "measured p50",
            2,
            false,
            series(windows, "p50_us"),
            &user_spans,
        ),
        line(
            "ideal p99 (same arrivals)",
            usize::MAX,
            true,
            series(windows, "ideal_p99_us"),
            &[],
        ),
        line(
            "generator lateness p99",
            3,
            false,
            series(windows, "lateness_p99_us"),
            &[],
        ),
    ];
    user.retain(|l| !l.points.is_empty());
    let mut server = vec![
        line(
            "measured p99",
            0,
            false,
            series(windows, "server_p99_us"),
            &server_spans,
        ),
        line(
            "measured p50",
            2,
            false,
            series(windows, "server_p50_us"),
            &server_spans,
        ),
        line(
            "ideal p99 (actual sends)",
            usize::MAX,
            true,
            series(windows, "server_ideal_p99_us"),
            &[],
        ),
    ];
    server.retain(|l| !l.points.is_empty());
    let mut panels = vec![LoadPanel {
        key: "user view".into(),
        lines: user,
        slo_us: None,
    }];
    if !server.is_empty() {
        panels.push(LoadPanel {
            key: "server view".into(),
            lines: server,
            slo_us: None,
        });
    }
    // The host's time lost per window, as the sampler saw it (µs of CPU time per window).
    if let Some(host) = s.get("window_host").and_then(Value::as_array) {
        let mut names: Vec<String> = Vec::new();
        for h in host {
            if let Some(m) = h.get("lost_us").and_then(Value::as_object) {
                for k in m.keys() {
                    if !names.contains(k) {
                        names.push(k.clone());
                    }
                }
            }
        }
        let lines: Vec<LoadLine> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let pts = host
                    .iter()
                    .filter_map(|h| {
                        let a = num(h, "/start_s")?;
                        let b = num(h, "/end_s")?;
                        let v = h.get("lost_us")?.get(name)?.as_f64()?;
                        (v > 0.0).then_some((0.5 * (a + b), v))
                    })
                    .collect();
                line(name, 4 + i, false, pts, &[])
            })
            .filter(|l| !l.points.is_empty())
            .collect();
        if !lines.is_empty() {
            panels.push(LoadPanel {
                key: "host: time lost per window".into(),
                lines,
                slo_us: None,
            });
        }
    }
    let id = r.id();
    let n = panels.len() as u32;
    let f = Figure {
        name: format!("run-{id}-timeline"),
        title: format!("run {id}: latency over time"),
        width: 520 * n,
        height: 460,
        body: Body::Load(LoadFigure {
            x_label: "time in the run".into(),
            x_format: seconds,
            panels,
            max_load: None,
        }),
    };
    let _ = writeln!(out, "<h3>Latency over time</h3>");
    let steady = st
        .and_then(|s| text(s, "/summary"))
        .map(|t| format!("<p class=\"lede\">{}</p>", esc(t)))
        .unwrap_or_default();
    out.push_str(&steady);
    figure_html(
        out,
        f,
        "Per window of the run: measured p50 and p99 against the ideal's p99 for the same arrivals (dashed), in each view; the generator's lateness; the host's time lost as the attribution sampler saw it. Crosses: windows whose tail moved (the stationarity test). When repeats disagree, this shows whether a burst of the host or a drift is why.",
        figures,
    )?;
    Ok(())
}
