//! Latency over time: the figure a reader reaches for when the numbers disagree between
//! repeats. Per window of the run (100 ms or more), the measured p50 and p99 against the
//! ideal's p99 for the same arrivals, in each view; the generator's lateness; and the host's
//! time lost (steal time, other tasks, run-queue wait) that the attribution sampler saw in the
//! window. The windows whose tail moved (the run's stationarity test) are drawn as crosses and
//! listed below the figure.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use analysis::Window;
use lab::summary::{MovedFacts, RunSummary};

use super::{esc, figure_html};
use crate::figure::{self, Body, Figure, LoadFigure, LoadLine, LoadPanel};
use crate::stored::StoredRun;
use crate::ReportError;

const IDEAL: plotters::style::RGBColor = plotters::style::RGBColor(40, 40, 40);

fn seconds(x: f64) -> String {
    format!("{x:.1} s")
}

/// (window centre s, value) of every window with the field.
fn series(windows: &[Window], field: impl Fn(&Window) -> Option<f64>) -> Vec<(f64, f64)> {
    windows
        .iter()
        .filter_map(|w| {
            let (a, b) = (w.start_s, w.end_s);
            let v = field(w)?;
            (a.is_finite() && b.is_finite() && v.is_finite() && v > 0.0)
                .then_some((0.5 * (a + b), v))
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

/// What the section draws: the run's windows, the spans where each view's tail moved, the
/// stationarity verdict, and the host's time lost per window (start s, end s, µs by source).
struct Timeline {
    windows: Vec<Window>,
    user_spans: Vec<(f64, f64)>,
    server_spans: Vec<(f64, f64)>,
    steady: Option<String>,
    host: Vec<(f64, f64, BTreeMap<String, f64>)>,
}

/// From a typed run, by field.
fn of_run(run: &lab::Run) -> Timeline {
    let a = &run.analysis;
    let spans = |t: Option<&analysis::TailStationarity>| -> Vec<(f64, f64)> {
        t.map(|t| t.moved.iter().map(|m| (m.start_s, m.end_s)).collect())
            .unwrap_or_default()
    };
    let st = a.stationarity.as_ref();
    Timeline {
        windows: a.windows.clone(),
        user_spans: spans(st.map(|s| &s.user)),
        server_spans: spans(st.and_then(|s| s.server.as_ref())),
        steady: st.map(|s| s.summary.clone()),
        host: run
            .window_host
            .iter()
            .map(|h| (h.start_s, h.end_s, h.lost_us.clone()))
            .collect(),
    }
}

/// From a summary alone (runs stored without a typed form), by field; None without windows.
fn of_summary(s: &RunSummary) -> Option<Timeline> {
    let windows = s.windows.as_ref()?.iter().map(|w| w.to_window()).collect();
    let st = s.stationarity.as_ref();
    let spans = |m: Option<&MovedFacts>| m.map(MovedFacts::spans).unwrap_or_default();
    let host = s
        .window_host
        .iter()
        .filter_map(|h| Some((h.start_s?, h.end_s?, h.lost_us.clone())))
        .collect();
    Some(Timeline {
        windows,
        user_spans: spans(st.and_then(|s| s.user.as_ref())),
        server_spans: spans(st.and_then(|s| s.server.as_ref())),
        steady: st.and_then(|s| s.summary.clone()),
        host,
    })
}

/// The host's time lost per window, one line per source (None when nothing was lost).
fn host_panel(host: &[(f64, f64, BTreeMap<String, f64>)]) -> Option<LoadPanel> {
    let mut names: Vec<&String> = Vec::new();
    for (_, _, lost) in host {
        for k in lost.keys() {
            if !names.contains(&k) {
                names.push(k);
            }
        }
    }
    let lines: Vec<LoadLine> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let pts = host
                .iter()
                .filter_map(|(a, b, lost)| {
                    let v = *lost.get(*name)?;
                    (v > 0.0).then_some((0.5 * (a + b), v))
                })
                .collect();
            line(name, 4 + i, false, pts, &[])
        })
        .filter(|l| !l.points.is_empty())
        .collect();
    (!lines.is_empty()).then(|| LoadPanel {
        key: "host: time lost per window".into(),
        lines,
        slo_us: None,
    })
}

/// The run's latency-over-time section (nothing when the run kept no windows).
pub(crate) fn section(
    out: &mut String,
    r: &StoredRun,
    figures: &mut Vec<Figure>,
) -> Result<(), ReportError> {
    let t = match &r.run {
        Some(run) => of_run(run),
        None => match of_summary(&r.facts) {
            Some(t) => t,
            None => return Ok(()),
        },
    };
    let windows = &t.windows;
    if windows.len() < 2 {
        return Ok(());
    }
    let (user_spans, server_spans) = (&t.user_spans, &t.server_spans);
    let mut user = vec![
        line(
            "measured p99",
            0,
            false,
            series(windows, |w| Some(w.p99_us)),
            user_spans,
        ),
        line(
            "measured p50",
            2,
            false,
            series(windows, |w| Some(w.p50_us)),
            user_spans,
        ),
        line(
            "ideal p99 (same arrivals)",
            usize::MAX,
            true,
            series(windows, |w| w.ideal_p99_us),
            &[],
        ),
        line(
            "generator lateness p99",
            3,
            false,
            series(windows, |w| Some(w.lateness_p99_us)),
            &[],
        ),
    ];
    user.retain(|l| !l.points.is_empty());
    let mut server = vec![
        line(
            "measured p99",
            0,
            false,
            series(windows, |w| w.server_p99_us),
            server_spans,
        ),
        line(
            "measured p50",
            2,
            false,
            series(windows, |w| w.server_p50_us),
            server_spans,
        ),
        line(
            "ideal p99 (actual sends)",
            usize::MAX,
            true,
            series(windows, |w| w.server_ideal_p99_us),
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
    if let Some(p) = host_panel(&t.host) {
        panels.push(p);
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
    let steady = t
        .steady
        .as_deref()
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
