//! A run's section of the report, in the order a reader asks: how far from ideal is it (the
//! headline, the CCDFs of both views, the excess tables), can it be trusted (status, the
//! generator's lateness, time held, saturation), where did the time go (stages), why (the
//! sources with their fixes), on what host, and how to run it again.
//!
//! A run stored with its typed form is drawn from the fields of its [`lab::Run`]; one stored
//! without (older stores, runs that failed before their analysis) from its JSON summary by
//! [`super::run_legacy`], the one place that reads a run by JSON path. Both draw the same
//! page (a test holds them to it).

use std::fmt::Write as _;

use analysis::{Excess, RunAnalysis};
use lab::{Run, RunStatus};
use stats::Summary;

use super::run_parts::{host_facts, reproduce, view_figure};
use super::{badge, esc, figure_html, page, thousands, Context, Report};
use crate::figure::{self, fmt_us, Body, CcdfFigure, Curve, Figure, StageBar, StagesFigure};
use crate::stored::{wilson_band, StoredRun};
use crate::ReportError;

/// The page of one or more stored runs: with several, an overlay of their measured CCDFs
/// first, then each run's section.
pub fn runs_page(runs: &[StoredRun], ctx: &Context) -> Result<Report, ReportError> {
    let mut body = String::new();
    let mut figures = Vec::new();
    let ids: Vec<String> = runs.iter().map(|r| r.id().to_string()).collect();
    let title = match runs {
        [one] => format!("tailscope report — run {}", one.id()),
        _ => format!("tailscope report — runs {}", ids.join(", ")),
    };
    let _ = writeln!(body, "<h1>{}</h1>", esc(&title));
    if runs.len() > 1 {
        let _ = writeln!(
            body,
            "<nav class=\"toc\">{}</nav>",
            runs.iter()
                .map(|r| format!("<a href=\"#run-{0}\">run {0}</a>", r.id()))
                .collect::<String>()
        );
        let curves: Vec<Curve> = runs
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let c = r.curves.as_ref().ok()?;
                Some(Curve {
                    label: format!("run {} ({})", r.id(), r.status()),
                    points: c.user.measured.clone(),
                    band: wilson_band(&c.user.measured, c.user.measured_n),
                    color: figure::color(i),
                    dashed: false,
                })
            })
            .collect();
        let f = Figure {
            name: format!("runs-{}-ccdf", ids.join("-")),
            title: "measured latency, the user's view".into(),
            width: 1000,
            height: 560,
            body: Body::Ccdf(CcdfFigure { curves }),
        };
        figure_html(
            &mut body,
            f,
            "Each run's measured CCDF (intended send → received) with its 95 % band; its ideal is in its own section.",
            &mut figures,
        )?;
    }
    for r in runs {
        run_section(&mut body, r, &mut figures)?;
    }
    Ok(Report {
        html: page(&title, &body, ctx),
        figures,
    })
}

/// A finite number, or None (JSON writes the others as null: the views print "-" for them).
fn fin(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// A quantile of a summary in µs.
fn us(s: &Summary, key: &str) -> Option<f64> {
    s.get(key).and_then(|e| fin(e.value / 1e3))
}

/// (value, lo, hi) of a quantile of a summary in µs.
fn us_ci(s: &Summary, key: &str) -> Option<(f64, f64, f64)> {
    let e = s.get(key)?;
    Some((fin(e.value / 1e3)?, fin(e.lo / 1e3)?, fin(e.hi / 1e3)?))
}

fn excess_of<'a>(e: &'a [Excess], key: &str) -> Option<&'a Excess> {
    e.iter().find(|x| x.key == key)
}

/// Why the run failed, when it says (the agents' error).
fn error_of(run: &Run) -> Option<&str> {
    run.agents.as_ref().and_then(|a| a.error.as_deref())
}

/// The headline: p99 of the run's headline view measured against that view's ideal, the
/// view named (a view declared invalid is never the one quoted), or why there is no
/// comparison.
fn headline(run: &Run) -> String {
    let a = &run.analysis;
    let view = run.views.headline;
    let (measured, ideal, excess, note) = match (view, &a.server_view) {
        (lab::View::Server, Some(sv)) => (
            &sv.measured,
            sv.ideal.as_ref(),
            &sv.excess[..],
            sv.ideal_note.as_deref(),
        ),
        _ => (
            &a.measured,
            a.ideal.as_ref(),
            &a.excess[..],
            a.ideal_note.as_deref(),
        ),
    };
    let m = us(measured, "p99");
    let i = ideal.and_then(|s| us(s, "p99"));
    let named = if !run.views.is_valid(view) {
        format!("{view} view (not valid: see Validity): ")
    } else if !run.views.percentile_valid(view, "p99") {
        format!("{view} view (its p99 is not the server's: see the † below): ")
    } else {
        format!("{view} view: ")
    };
    match (m, i) {
        (Some(m), Some(i)) => {
            let ci = excess_of(excess, "p99")
                .and_then(|e| Some((fin(e.lo)?, fin(e.hi)?)))
                .map(|(lo, hi)| format!(" (95 % CI {lo:.2}–{hi:.2}×)"))
                .unwrap_or_default();
            format!(
                "{named}p99 <b>{}</b> measured against <b>{}</b> ideal: <b>{:.2}×</b> the ideal{ci}",
                fmt_us(m),
                fmt_us(i),
                m / i
            )
        }
        (Some(m), None) => format!(
            "{named}p99 <b>{}</b> measured; no ideal to compare with{}",
            fmt_us(m),
            note.map(|n| format!(" ({})", esc(n))).unwrap_or_default()
        ),
        _ => format!(
            "nothing measured{}",
            error_of(run)
                .map(|e| format!(": {}", esc(e)))
                .unwrap_or_default()
        ),
    }
}

/// One run's section (also a point's section on an experiment page).
pub(crate) fn run_section(
    out: &mut String,
    r: &StoredRun,
    figures: &mut Vec<Figure>,
) -> Result<(), ReportError> {
    let Some(run) = &r.run else {
        return super::run_legacy::section(out, r, figures);
    };
    let a = &run.analysis;
    let id = r.id();
    let _ = writeln!(
        out,
        "<section id=\"run-{id}\"><h2>Run {id} · {} {}</h2>",
        esc(&r.row.target),
        badge(run.status.as_str())
    );
    let _ = writeln!(out, "<p class=\"lede\">{}</p>", headline(run));
    let o = &a.outcomes;
    let _ = writeln!(
        out,
        "<p class=\"muted\">{} · started {} · {} requests after the warm-up · offered {} req/s, achieved {} req/s · outcomes: ok {}, error {}, timeout {}, dropped {}</p>",
        esc(&r.row.kind),
        esc(&r.row.started_at),
        thousands(a.requests as f64),
        thousands(run.rate_rps),
        thousands(a.achieved_rate_rps),
        thousands(o.ok as f64),
        thousands(o.error as f64),
        thousands(o.timeout as f64),
        thousands(o.dropped as f64),
    );
    notes(out, r, run);
    views(out, r, run, figures)?;
    super::timeline::section(out, r, figures)?;
    validity(out, a);
    stages(out, id, a, figures)?;
    why(out, run);
    host(out, r, run);
    reproduce(out, r);
    out.push_str("</section>\n");
    Ok(())
}

/// What a reader must know before trusting the numbers.
fn notes(out: &mut String, r: &StoredRun, run: &Run) {
    let a = &run.analysis;
    let mut note = |class: &str, t: String| {
        let _ = writeln!(out, "<p class=\"note {class}\">{t}</p>");
    };
    match run.status {
        RunStatus::Invalid => note(
            "bad",
            "INVALID: no view asked for is valid — the generator fell behind its schedule (its own lateness p99 above the threshold), so the user's view counts its stalls, and the server's view is missing or its offered load was not sent.".into(),
        ),
        RunStatus::Saturated => note(
            "",
            format!(
                "SATURATED: offered {} req/s, the server completed {} req/s — the completion rate is the capacity measured; beyond saturation the percentiles grow with the run's length.",
                thousands(run.saturation.as_ref().map_or(f64::NAN, |s| s.offered_rps)),
                thousands(run.saturation.as_ref().map_or(f64::NAN, |s| s.completed_rps))
            ),
        ),
        RunStatus::Failed | RunStatus::Interrupted => note(
            "bad",
            format!(
                "{}: {}",
                run.status.as_str().to_uppercase(),
                esc(error_of(run).unwrap_or("the run did not complete as planned"))
            ),
        ),
        RunStatus::Ok => {}
    }
    note(
        "",
        format!(
            "headline: {} view — {}",
            esc(run.views.headline.as_str()),
            esc(&run.views.headline_why)
        ),
    );
    if let Some(t) = &run.status_note {
        note("bad", esc(t));
    }
    if let Some(t) = &a.ideal_check {
        note("", format!("WARNING: {}", esc(t)));
    }
    if let Some(t) = &a.ideal_note {
        note("", format!("ideal: {}", esc(t)));
    }
    match &r.curves {
        Err(why) => note("", format!("No curves: {}.", esc(why))),
        Ok(c) if !c.agrees => note(
            "",
            "The curves were recomputed from the stored records and their p99 differs from the stored summary's (the analysis changed since the run): the tables show the stored figures.".into(),
        ),
        Ok(_) => {}
    }
}

/// Both views: their CCDFs side by side, then their tables.
fn views(
    out: &mut String,
    r: &StoredRun,
    run: &Run,
    figures: &mut Vec<Figure>,
) -> Result<(), ReportError> {
    let a = &run.analysis;
    let id = r.id();
    let ideal_label = match &a.ideal_spec {
        Some(v) => format!(
            "ideal: {} worker(s), {} queue(s), {}",
            v.workers,
            match v.queues {
                analysis::QueueStructure::Single => "single",
                analysis::QueueStructure::PerWorker => "per-worker",
            },
            fmt_us(v.service_ns / 1e3)
        ),
        None => "ideal".into(),
    };
    if let Ok(c) = &r.curves {
        out.push_str("<div class=\"figs\">\n");
        figure_html(
            out,
            view_figure(
                format!("run-{id}-ccdf"),
                &format!("run {id}: the user's view"),
                &c.user,
                &ideal_label,
            ),
            "The user's view: latency from each request's intended send to its reply (no coordinated omission), against the ideal for the same arrivals. Shaded: 95 % pointwise bands.",
            figures,
        )?;
        if let Some(sv) = &c.server {
            figure_html(
                out,
                view_figure(
                    format!("run-{id}-server-ccdf"),
                    &format!("run {id}: the server's view"),
                    sv,
                    &ideal_label,
                ),
                "The server's view: from the actual send to the client kernel's receive stamp, against the ideal for the arrivals the server really saw.",
                figures,
            )?;
        }
        out.push_str("</div>\n");
    }
    let _ = writeln!(out, "<h3>Measured against ideal</h3>");
    let _ = writeln!(
        out,
        "<p class=\"muted\">The user's view (intended send → received):</p>{}",
        view_table(
            &a.measured,
            a.ideal.as_ref(),
            &a.excess,
            &run.views,
            lab::View::User
        )
    );
    if let Some(sv) = &a.server_view {
        let _ = writeln!(
            out,
            "<p class=\"muted\">The server's view (sent → client kernel receive):</p>{}",
            view_table(
                &sv.measured,
                sv.ideal.as_ref(),
                &sv.excess,
                &run.views,
                lab::View::Server
            )
        );
    }
    Ok(())
}

/// Measured, ideal and excess per percentile, each with its interval; a percentile a valid
/// view does not stand behind is marked † with why below the table.
fn view_table(
    m: &Summary,
    i: Option<&Summary>,
    e: &[Excess],
    views: &lab::Views,
    view: lab::View,
) -> String {
    let mut t = String::from(
        "<table><tr><th class=\"l\"></th><th>measured</th><th>95 % CI</th><th>ideal</th><th>95 % CI</th><th>excess</th><th>95 % CI</th></tr>",
    );
    let bad = views.invalid_percentiles(view);
    for (key, _) in stats::STANDARD_QUANTILES
        .iter()
        .filter(|(k, _)| us_ci(m, k).is_some())
    {
        let (mv, ml, mh) = us_ci(m, key).unwrap_or((f64::NAN, f64::NAN, f64::NAN));
        let iv = i.and_then(|i| us_ci(i, key));
        let ex = excess_of(e, key);
        let exv = ex.and_then(|x| fin(x.value));
        let class = match exv {
            Some(x) if x >= 10.0 => " class=\"vhi\"",
            Some(x) if x >= 2.0 => " class=\"hi\"",
            _ => "",
        };
        let mark = if bad.contains(key) { "†" } else { "" };
        let _ = write!(
            t,
            "<tr><th class=\"l\">{key}{mark}</th><td title=\"{mv} µs\">{}</td><td>[{}, {}]</td><td>{}</td><td>{}</td><td{class}>{}</td><td>{}</td></tr>",
            fmt_us(mv),
            fmt_us(ml),
            fmt_us(mh),
            iv.map_or("-".into(), |v| fmt_us(v.0)),
            iv.map_or(String::new(), |v| format!("[{}, {}]", fmt_us(v.1), fmt_us(v.2))),
            exv.map_or("-".into(), |x| format!("{x:.2}×")),
            ex.and_then(|x| Some((fin(x.lo)?, fin(x.hi)?)))
                .map_or(String::new(), |(lo, hi)| format!("[{lo:.2}, {hi:.2}]")),
        );
    }
    t.push_str("</table>");
    for (k, why) in views.unstood(view) {
        let _ = write!(
            t,
            "<p class=\"muted\">† {k} is not the server's alone: {}</p>",
            esc(why)
        );
    }
    t
}

/// Lateness, time held, the path's decomposition, the arrival check, per-class latency.
fn validity(out: &mut String, a: &RunAnalysis) {
    let _ = writeln!(out, "<h3>Lateness, time held and validity</h3><table><tr><th class=\"l\"></th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th class=\"l\"></th></tr>");
    let mut row = |name: &str, v: Option<&Summary>, note: String| {
        let Some(v) = v else {
            return;
        };
        let cells: String = ["p50", "p90", "p99", "p99.9", "p99.99"]
            .iter()
            .map(|k| format!("<td>{}</td>", us(v, k).map_or("-".into(), fmt_us)))
            .collect();
        let _ = writeln!(
            out,
            "<tr><th class=\"l\">{}</th>{cells}<td class=\"l\">{note}</td></tr>",
            esc(name)
        );
    };
    row(
        "generator lateness (due → seen by its loop)",
        Some(&a.lateness),
        if a.lateness_flagged {
            "<b>FLAGGED</b>: the generator fell behind".into()
        } else {
            "within the threshold".into()
        },
    );
    if let Some(h) = &a.held_in_client {
        row(
            "held in the client (all connections busy)",
            Some(&h.held),
            format!(
                "{} requests ({:.1} %)",
                thousands(h.requests as f64),
                100.0 * fin(h.fraction).unwrap_or(0.0)
            ),
        );
    }
    if let Some(d) = &a.decomposition {
        row(
            "path: generator (intended → sent)",
            Some(&d.lateness),
            String::new(),
        );
        row(
            "path: network + server (sent → kernel)",
            Some(&d.network_server),
            String::new(),
        );
        row(
            "path: client wake-up (kernel → user)",
            d.client_wakeup.as_ref(),
            String::new(),
        );
    }
    for c in &a.classes {
        row(
            &format!(
                "class {} ({})",
                c.class,
                if c.class == 0 {
                    "delay-sensitive"
                } else {
                    "other"
                }
            ),
            Some(&c.measured),
            format!("{} requests", thousands(c.requests as f64)),
        );
    }
    out.push_str("</table>\n");
    if let Some(c) = &a.arrival_check {
        let t = crate::terminal::arrivals_text(
            c.n as f64,
            c.statistic,
            c.p_value,
            c.exponential,
            c.schedule_p_value,
        );
        let _ = writeln!(out, "<p class=\"muted\">Arrivals as sent: {t}.</p>");
    }
}

/// The stage breakdown as bars.
fn stages(
    out: &mut String,
    id: i64,
    a: &RunAnalysis,
    figures: &mut Vec<Figure>,
) -> Result<(), ReportError> {
    let Some(st) = &a.stages else {
        return Ok(());
    };
    let rows: Vec<StageBar> = st
        .rows
        .iter()
        .map(|x| StageBar {
            stage: x.stage.clone(),
            slow_p50: fin(x.slow_p50_us).unwrap_or(0.0),
            slow_p99: fin(x.slow_p99_us).unwrap_or(0.0),
            median_p50: fin(x.median_p50_us).unwrap_or(0.0),
            median_p99: fin(x.median_p99_us).unwrap_or(0.0),
        })
        .collect();
    let n = rows.len();
    let _ = writeln!(out, "<h3>Where the time goes: stages</h3>");
    let f = Figure {
        name: format!("run-{id}-stages"),
        title: format!("run {id}: stages of the slowest 1 % against median requests"),
        width: 1000,
        height: figure::bars_height(n),
        body: Body::Stages(StagesFigure {
            rows,
            slow_label: format!(
                "slowest 1 % ({} requests): median, whisker to p99",
                thousands(st.slow_requests as f64)
            ),
            median_label: format!(
                "median requests ({}): median, whisker to p99",
                thousands(st.median_requests as f64)
            ),
        }),
    };
    figure_html(
        out,
        f,
        "Each interval of a request's life between consecutive stamps (client send, the server's T1..T6, client receive).",
        figures,
    )
}

/// The "why": whose the excess is, then each sampled source with its fix and trade-off.
fn why(out: &mut String, run: &Run) {
    let a = &run.analysis;
    let _ = writeln!(out, "<h3>Why</h3>");
    if !a.excess_split.is_empty() {
        let _ = writeln!(out, "<table><tr><th class=\"l\">excess time</th><th>total</th><th>client</th><th>server</th></tr>");
        for e in &a.excess_split {
            let _ = writeln!(
                out,
                "<tr><th class=\"l\">{}</th><td>{:.1} µs</td><td>{:.1} µs</td><td>{:.1} µs</td></tr>",
                esc(&e.key),
                fin(e.total_us).unwrap_or(f64::NAN),
                fin(e.client_us).unwrap_or(f64::NAN),
                fin(e.server_us).unwrap_or(f64::NAN)
            );
        }
        out.push_str("</table>\n");
    }
    if let Some((g, u)) = run.ideal_source.as_ref().and_then(|s| {
        Some((
            s.batching_gain.and_then(fin)?,
            s.unbatched_per_worker_service_ns.and_then(fin)?,
        ))
    }) {
        if g > 1.02 {
            let _ = writeln!(out, "<p>Batching: the ideal uses the server's batched cost ({g:.2}× the rate with one request in flight); a request that arrives alone costs {} — up to {g:.2}× of excess at low load is this.</p>", fmt_us(u / 1e3));
        }
    }
    let Some(w) = &run.why else {
        let _ = writeln!(
            out,
            "<p class=\"muted\">No sources were sampled for this run (attribution off).</p>"
        );
        return;
    };
    let _ = writeln!(
        out,
        "<p class=\"muted\">{} slowest requests; {} of {} sampled intervals held one. Sources ranked by significance (Holm-adjusted p of a circular-shift test), then lift.</p>",
        thousands(w.slow_requests as f64),
        thousands(w.slow_intervals as f64),
        thousands(w.intervals as f64)
    );
    let p_of = |x: &attrib::SourceFinding| fin(x.p_value).unwrap_or(1.0);
    if w.sources.is_empty() {
        let _ = writeln!(out, "<p>No sampled source moved during the run.</p>");
    } else {
        let _ = writeln!(out, "<table><tr><th>#</th><th class=\"l\">source</th><th>lift</th><th>p</th><th class=\"l\">evidence</th><th class=\"l\">fix</th><th class=\"l\">trade-off</th></tr>");
        for (i, x) in w.sources.iter().enumerate() {
            let p = p_of(x);
            let _ = writeln!(
                out,
                "<tr{}><td>{}</td><td class=\"l\">{} <span class=\"muted\">({})</span></td><td>{:.1}×</td><td>{p:.3}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
                if p < 0.05 { "" } else { " class=\"insig\"" },
                i + 1,
                esc(&x.source),
                esc(x.kind.name()),
                fin(x.lift).unwrap_or(f64::NAN),
                esc(&x.evidence),
                esc(&x.mitigation),
                esc(&x.tradeoff),
            );
        }
        out.push_str("</table>\n");
        if w.sources.iter().all(|x| p_of(x) >= 0.05) {
            let _ = writeln!(out, "<p class=\"muted\">No source lines up with the slowest requests at 5 % (all greyed): the table shows what moved, not a cause.</p>");
        }
    }
}

/// Host facts and the instruments that ran beside the load.
fn host(out: &mut String, r: &StoredRun, run: &Run) {
    host_facts(out, r);
    if !run.server.is_empty() {
        let _ = writeln!(
            out,
            "<dt>server</dt><dd>{}</dd>",
            esc(&run.server.to_json().to_string())
        );
    }
    for i in &run.instruments {
        let cpus: Vec<String> = i.cpus.iter().map(usize::to_string).collect();
        let _ = writeln!(
            out,
            "<dt>{}</dt><dd>{} · CPUs [{}] · {} samples ({} skipped), {} each</dd>",
            esc(&i.name),
            esc(&i.mode),
            cpus.join(","),
            thousands(i.samples as f64),
            thousands(i.skipped as f64),
            fmt_us(i.cost_per_sample_ns / 1e3)
        );
    }
    out.push_str("</dl>\n");
}
