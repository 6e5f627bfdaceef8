//! An experiment's page: latency against offered load (measured and ideal, one line per knob
//! value, the SLO and the max load drawn), the verdict table, the CCDFs of the chosen points
//! overlaid, then each chosen point's own section. An `ab` comparison has its own page
//! ([`super::ab`]).

use std::fmt::Write as _;

use stats::Distribution;

use super::run::run_section;
use super::{badge, esc, figure_html, page, thousands, Context, Report};
use crate::experiment::{Point, StoredExperiment};
use crate::figure::{
    self, fmt_us, Body, CcdfFigure, Curve, Figure, LoadFigure, LoadLine, LoadPanel, MaxLoadMark,
};
use crate::stored::wilson_band;

/// The figure under `key` of a point's distribution.
fn q(d: &Option<Distribution>, key: &str) -> Option<f64> {
    d.as_ref()?.get(key)
}
use crate::ReportError;

/// The page of a stored experiment.
pub fn experiment_page(e: &StoredExperiment, ctx: &Context) -> Result<Report, ReportError> {
    if let Some(ab) = &e.ab {
        return super::ab::ab_page(e, ab, ctx);
    }
    let mut body = String::new();
    let mut figures = Vec::new();
    let id = e.row.id;
    let title = format!("tailscope report — experiment {id} ({})", e.row.kind);
    let _ = writeln!(
        body,
        "<h1>{} {}</h1>",
        esc(&title),
        badge(e.row.status.as_str())
    );
    let _ = writeln!(body, "<p class=\"lede\">{}</p>", lede(e));
    let _ = writeln!(
        body,
        "<p class=\"muted\">started {} · finished {} · {} point(s) in {} configuration(s){}</p>",
        esc(&e.row.started_at),
        esc(e.row.finished_at.as_deref().unwrap_or("-")),
        e.points.len(),
        e.groups().len(),
        if e.from_runs {
            " · the experiment stored no summary rows: the points are read from its runs"
        } else {
            ""
        }
    );
    if let Some(t) = &e.slo_unreadable {
        let _ = writeln!(
            body,
            "<p class=\"note\">The SLO <code>{}</code> could not be read: it is not drawn.</p>",
            esc(t)
        );
    }
    figure_html(
        &mut body,
        load_figure(e),
        &format!(
            "Latency against offered load: solid = measured, dashed = ideal (the same arrivals through the ideal server), × = a run that was not ok{}{}.",
            e.slo.as_ref().map(|s| format!("; red = the SLO {}", esc(&s.text))).unwrap_or_default(),
            if e.max_load.is_some() { "; green = the max load meeting it, shaded = its search bracket" } else { "" }
        ),
        &mut figures,
    )?;
    verdicts(&mut body, e);
    let curves: Vec<Curve> = e
        .chosen
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let c = r.curves.as_ref().ok()?;
            let p = e.points.iter().find(|p| p.run_id == Some(r.id()))?;
            let label = point_label(e, p);
            let color = figure::color(i);
            let mut v = vec![Curve {
                label: format!("{label} measured"),
                points: c.user.measured.clone(),
                band: wilson_band(&c.user.measured, c.user.measured_n),
                color,
                dashed: false,
            }];
            if !c.user.ideal.is_empty() {
                v.push(Curve {
                    label: format!("{label} ideal"),
                    points: c.user.ideal.clone(),
                    band: Vec::new(),
                    color,
                    dashed: true,
                });
            }
            Some(v)
        })
        .flatten()
        .collect();
    let _ = writeln!(body, "<h2>The chosen points' CCDFs</h2>");
    let f = Figure {
        name: format!("experiment-{id}-ccdf"),
        title: format!("experiment {id}: measured (solid) against ideal (dashed)"),
        width: 1000,
        height: 600,
        body: Body::Ccdf(CcdfFigure { curves }),
    };
    figure_html(
        &mut body,
        f,
        &format!(
            "{} of the {} points (the lowest and highest load of each configuration, those that decided the max load, and evenly spaced ones between), the user's view with 95 % bands.",
            e.chosen.len(),
            e.points.len()
        ),
        &mut figures,
    )?;
    for r in &e.chosen {
        run_section(&mut body, r, &mut figures)?;
    }
    let _ = writeln!(
        body,
        "<h2>The experiment as stored</h2><pre>{}</pre>",
        esc(&serde_json::to_string_pretty(&e.row.config).unwrap_or_default())
    );
    Ok(Report {
        html: page(&title, &body, ctx),
        figures,
    })
}

/// What a reader sees first: the max load, or the range the points cover.
fn lede(e: &StoredExperiment) -> String {
    if let (Some(m), Some(slo)) = (&e.max_load, &e.slo) {
        return format!(
            "Highest load meeting <b>{}</b>: <b>{}</b>{} (bracket {} to {}).",
            esc(&slo.text),
            e.fmt_x(m.x),
            m.offered_rps
                .filter(|_| e.x_is_pct)
                .map(|r| format!(" ({} req/s)", thousands(r)))
                .unwrap_or_default(),
            e.fmt_x(m.lo),
            e.fmt_x(m.hi)
        );
    }
    let p99: Vec<f64> = e
        .points
        .iter()
        .filter_map(|p| q(&p.measured, "p99"))
        .collect();
    let (lo, hi) = p99
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
    let xs: Vec<f64> = e.points.iter().filter_map(|p| e.x_of(p)).collect();
    let (xa, xb) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let verdicts = match &e.slo {
        Some(s) => {
            let count = |v: &str| {
                e.points
                    .iter()
                    .filter(|p| p.slo.as_deref() == Some(v))
                    .count()
            };
            format!(
                "; SLO {}: {} meet, {} violate, {} undecided",
                esc(&s.text),
                count("meets"),
                count("violates"),
                count("undecided")
            )
        }
        None => String::new(),
    };
    if p99.is_empty() {
        return format!(
            "{} point(s); none measured a latency{verdicts}.",
            e.points.len()
        );
    }
    format!(
        "{} point(s) from {} to {}: measured p99 from <b>{}</b> to <b>{}</b>{verdicts}.",
        e.points.len(),
        e.fmt_x(xa),
        e.fmt_x(xb),
        fmt_us(lo),
        fmt_us(hi)
    )
}

fn point_label(e: &StoredExperiment, p: &Point) -> String {
    let x = e.x_of(p).map(|x| e.fmt_x(x)).unwrap_or_else(|| "?".into());
    if p.group.is_empty() {
        x
    } else {
        format!("{x} {}", p.group)
    }
}

/// Latency against load: p50, p99, p99.9 panels.
fn load_figure(e: &StoredExperiment) -> Figure {
    let groups = e.groups();
    let panels = ["p50", "p99", "p99.9"]
        .iter()
        .map(|key| {
            let mut lines = Vec::new();
            for (g, name) in groups.iter().enumerate() {
                let mut pts: Vec<(&Point, f64)> = e
                    .points
                    .iter()
                    .filter(|p| &p.group == name)
                    .filter_map(|p| Some((p, e.x_of(p)?)))
                    .collect();
                pts.sort_by(|a, b| a.1.total_cmp(&b.1));
                let series =
                    |v: fn(&Point) -> &Option<Distribution>| -> (Vec<(f64, f64)>, Vec<bool>) {
                        pts.iter()
                            .filter_map(|(p, x)| {
                                let y = q(v(p), key)?;
                                Some(((*x, y), p.status != Some(lab::RunStatus::Ok)))
                            })
                            .unzip()
                    };
                let color = figure::color(g);
                let tag = if name.is_empty() {
                    String::new()
                } else {
                    format!("{name} ")
                };
                let (m, flagged) = series(|p| &p.measured);
                lines.push(LoadLine {
                    label: format!("{tag}measured"),
                    color,
                    dashed: false,
                    points: m,
                    flagged,
                });
                let (i, _) = series(|p| &p.ideal);
                lines.push(LoadLine {
                    label: format!("{tag}ideal"),
                    color,
                    dashed: true,
                    points: i,
                    flagged: Vec::new(),
                });
            }
            LoadPanel {
                key: key.to_string(),
                lines,
                slo_us: e.slo.as_ref().filter(|s| s.key == *key).map(|s| s.bound_us),
            }
        })
        .collect();
    let max_load = e.max_load.as_ref().map(|m| MaxLoadMark {
        x: m.x,
        lo: m.lo,
        hi: m.hi,
        label: format!("max load {}", e.fmt_x(m.x)),
    });
    Figure {
        name: format!("experiment-{}-load", e.row.id),
        title: format!("experiment {}: latency against offered load", e.row.id),
        width: 1200,
        height: 500,
        body: Body::Load(LoadFigure {
            x_label: e.x_label().into(),
            x_format: if e.x_is_pct {
                |x| format!("{x:.0} %")
            } else {
                |x| crate::html::thousands(x)
            },
            panels,
            max_load,
        }),
    }
}

/// The verdict table: one row per point.
fn verdicts(out: &mut String, e: &StoredExperiment) {
    let _ = writeln!(out, "<h2>Verdicts</h2><table><tr><th>run</th><th class=\"l\">configuration</th><th>load</th><th>offered</th><th>achieved</th><th>status</th><th>p50</th><th>p99</th><th>p99.9</th><th>ideal p99</th><th>excess p99</th><th>SLO</th></tr>");
    let mut pts: Vec<&Point> = e.points.iter().collect();
    pts.sort_by(|a, b| {
        a.group.cmp(&b.group).then(
            e.x_of(a)
                .unwrap_or(0.0)
                .total_cmp(&e.x_of(b).unwrap_or(0.0)),
        )
    });
    for p in pts {
        let m = |k: &str| q(&p.measured, k).map_or("-".into(), fmt_us);
        let run = match p.run_id {
            Some(id) if e.chosen.iter().any(|r| r.id() == id) => {
                format!("<a href=\"#run-{id}\">{id}</a>")
            }
            Some(id) => id.to_string(),
            None => "-".into(),
        };
        let _ = writeln!(
            out,
            "<tr><td>{run}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(if p.group.is_empty() { "-" } else { &p.group }),
            p.load_pct.map_or("-".into(), |x| format!("{x:.0} %")),
            p.offered_rps.map_or("-".into(), thousands),
            p.achieved_rps.map_or("-".into(), thousands),
            badge(p.status_text()),
            m("p50"),
            m("p99"),
            m("p99.9"),
            q(&p.ideal, "p99").map_or("-".into(), fmt_us),
            q(&p.excess, "p99").map_or("-".into(), |x| format!("{x:.2}×")),
            p.slo.as_deref().map_or("-".into(), badge),
        );
    }
    out.push_str("</table>\n");
}
