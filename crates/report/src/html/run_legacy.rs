//! A run's section from its JSON summary alone: the fallback for runs stored without a typed
//! form (before the store kept one, schema 4; or a run that failed before it was analysed).
//! Everything here reads the summary ([`lab::Run::to_json`]'s shape, from any version) by
//! field, through [`lab::summary::RunSummary`]; a run with a typed form is drawn by
//! [`super::run`] from the [`lab::Run`] itself, the same page.

use std::fmt::Write as _;

use lab::summary::{figure as fig, Intervals, RunSummary};
use lab::RunStatus;
use stats::{Distribution, P99};

use super::run_parts::view_figure;
use super::{badge, esc, figure_html, thousands};
use crate::figure::{self, fmt_us, Body, Figure, StageBar, StagesFigure};
use crate::stored::{dist, StoredRun};
use crate::ReportError;

/// The headline: p99 of the run's headline view measured against that view's ideal, the view
/// named (as the typed section says it), or why there is no comparison. A summary from before
/// the views were stored has no headline view: its figures are the user's, unnamed.
fn headline(s: &RunSummary) -> String {
    let view = s.headline_view.as_deref();
    let sv = s.server_view().filter(|_| view == Some("server"));
    let (m, i, e, note) = match sv {
        Some(sv) => (
            fig(sv.measured.as_ref(), P99),
            fig(sv.ideal.as_ref(), P99),
            sv.excess_ci.as_ref().and_then(|e| e.of(P99)),
            sv.ideal_note.as_deref(),
        ),
        None => (
            fig(s.measured.as_ref(), P99),
            fig(s.ideal.as_ref(), P99),
            s.excess_ci.as_ref().and_then(|e| e.of(P99)),
            s.ideal_note.as_deref(),
        ),
    };
    let named = match view {
        Some(v) => {
            let valid = s
                .views
                .as_ref()
                .and_then(|x| x.of(v))
                .and_then(|x| x.valid)
                .unwrap_or(true);
            if valid {
                format!("{} view: ", esc(v))
            } else {
                format!("{} view (not valid: see Validity): ", esc(v))
            }
        }
        None => String::new(),
    };
    match (m, i) {
        (Some(m), Some(i)) => {
            let ci = e
                .map(|e| format!(" (95 % CI {:.2}–{:.2}×)", e.lo, e.hi))
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
            s.error
                .as_deref()
                .map(|e| format!(": {}", esc(e)))
                .unwrap_or_default()
        ),
    }
}

/// The section of a run stored without a typed form (see the module doc).
pub(super) fn section(
    out: &mut String,
    r: &StoredRun,
    figures: &mut Vec<Figure>,
) -> Result<(), ReportError> {
    let s = &r.facts;
    let id = r.id();
    let _ = writeln!(
        out,
        "<section id=\"run-{id}\"><h2>Run {id} · {} {}</h2>",
        esc(&r.row.target),
        badge(r.status())
    );
    let _ = writeln!(out, "<p class=\"lede\">{}</p>", headline(s));
    let o = s.outcomes.clone().unwrap_or_default();
    let n = |x: Option<u64>| x.unwrap_or(0) as f64;
    let _ = writeln!(
        out,
        "<p class=\"muted\">{} · started {} · {} requests after the warm-up · offered {} req/s, achieved {} req/s · outcomes: ok {}, error {}, timeout {}, dropped {}</p>",
        esc(&r.row.kind),
        esc(&r.row.started_at),
        thousands(s.requests.unwrap_or(0.0)),
        thousands(s.rate_rps.unwrap_or(f64::NAN)),
        thousands(s.achieved_rate_rps.unwrap_or(f64::NAN)),
        thousands(n(o.ok)),
        thousands(n(o.error)),
        thousands(n(o.timeout)),
        thousands(n(o.dropped)),
    );
    notes(out, r);
    views(out, r, figures)?;
    super::timeline::section(out, r, figures)?;
    validity(out, s);
    stages(out, r, figures)?;
    why(out, s);
    host(out, r);
    super::run_parts::reproduce(out, r);
    out.push_str("</section>\n");
    Ok(())
}

/// What a reader must know before trusting the numbers.
fn notes(out: &mut String, r: &StoredRun) {
    let s = &r.facts;
    let mut note = |class: &str, t: String| {
        let _ = writeln!(out, "<p class=\"note {class}\">{t}</p>");
    };
    match r.run_status() {
        Some(RunStatus::Invalid) => note(
            "bad",
            "INVALID: no view asked for is valid — the generator fell behind its schedule (its own lateness p99 above the threshold), so the user's view counts its stalls, and the server's view is missing or its offered load was not sent.".into(),
        ),
        Some(RunStatus::Saturated) => {
            let sat = s.saturation.clone().unwrap_or_default();
            note(
                "",
                format!(
                    "SATURATED: offered {} req/s, the server completed {} req/s — the completion rate is the capacity measured; beyond saturation the percentiles grow with the run's length.",
                    thousands(sat.offered_rps.unwrap_or(f64::NAN)),
                    thousands(sat.completed_rps.unwrap_or(f64::NAN))
                ),
            )
        }
        Some(st @ (RunStatus::Failed | RunStatus::Interrupted)) => note(
            "bad",
            format!(
                "{}: {}",
                st.as_str().to_uppercase(),
                esc(s
                    .error
                    .as_deref()
                    .unwrap_or("the run did not complete as planned"))
            ),
        ),
        _ => {}
    }
    if let Some(h) = &s.headline_view {
        let why = s.views.as_ref().and_then(|v| v.headline_why.as_deref());
        note(
            "",
            format!("headline: {} view — {}", esc(h), esc(why.unwrap_or(""))),
        );
    }
    if let Some(t) = &s.status_note {
        note("bad", esc(t));
    }
    if let Some(t) = &s.ideal_check {
        note("", format!("WARNING: {}", esc(t)));
    }
    if let Some(t) = &s.ideal_note {
        note("", format!("ideal: {}", esc(t)));
    }
    if let Some(e) = &r.typed_error {
        note(
            "bad",
            format!(
                "The run's typed form could not be read ({}): drawn from its summary.",
                esc(e)
            ),
        );
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
fn views(out: &mut String, r: &StoredRun, figures: &mut Vec<Figure>) -> Result<(), ReportError> {
    let s = &r.facts;
    let id = r.id();
    let ideal_label = match &s.ideal_spec {
        Some(v) => format!(
            "ideal: {} worker(s), {} queue(s), {}",
            v.workers.unwrap_or(1.0),
            v.queues.as_deref().unwrap_or("single"),
            fmt_us(v.service_ns.unwrap_or(f64::NAN) / 1e3)
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
            s.measured_ci.as_ref(),
            s.ideal_ci.as_ref(),
            s.excess_ci.as_ref()
        )
    );
    if let Some(sv) = s.server_view() {
        let _ = writeln!(
            out,
            "<p class=\"muted\">The server's view (sent → client kernel receive):</p>{}",
            view_table(
                sv.measured_ci.as_ref(),
                sv.ideal_ci.as_ref(),
                sv.excess_ci.as_ref()
            )
        );
    }
    Ok(())
}

/// Measured, ideal and excess per percentile, each with its interval.
fn view_table(m: Option<&Intervals>, i: Option<&Intervals>, e: Option<&Intervals>) -> String {
    let Some(m) = m else {
        return "<p class=\"muted\">nothing measured</p>".into();
    };
    let mut t = String::from(
        "<table><tr><th class=\"l\"></th><th>measured</th><th>95 % CI</th><th>ideal</th><th>95 % CI</th><th>excess</th><th>95 % CI</th></tr>",
    );
    for (key, mc) in stats::STANDARD_QUANTILES
        .iter()
        .filter_map(|(k, _)| Some((*k, m.of(k)?)))
    {
        let (mv, ml, mh) = (mc.value, mc.lo, mc.hi);
        let iv = i.and_then(|i| i.of(key));
        let ex = e.and_then(|e| e.of(key));
        let exv = ex.map(|x| x.value);
        let class = match exv {
            Some(x) if x >= 10.0 => " class=\"vhi\"",
            Some(x) if x >= 2.0 => " class=\"hi\"",
            _ => "",
        };
        let _ = write!(
            t,
            "<tr><th class=\"l\">{key}</th><td title=\"{mv} µs\">{}</td><td>[{}, {}]</td><td>{}</td><td>{}</td><td{class}>{}</td><td>{}</td></tr>",
            fmt_us(mv),
            fmt_us(ml),
            fmt_us(mh),
            iv.map_or("-".into(), |v| fmt_us(v.value)),
            iv.map_or(String::new(), |v| format!("[{}, {}]", fmt_us(v.lo), fmt_us(v.hi))),
            exv.map_or("-".into(), |x| format!("{x:.2}×")),
            ex.map_or(String::new(), |x| format!("[{:.2}, {:.2}]", x.lo, x.hi)),
        );
    }
    t.push_str("</table>");
    t
}

/// Lateness, time held, the path's decomposition, the arrival check, per-class latency.
fn validity(out: &mut String, s: &RunSummary) {
    let _ = writeln!(out, "<h3>Lateness, time held and validity</h3><table><tr><th class=\"l\"></th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th class=\"l\"></th></tr>");
    let mut row = |name: &str, v: Option<&Distribution>, note: String| {
        let Some(v) = v else {
            return;
        };
        let d = dist(v);
        let cells: String = ["p50", "p90", "p99", "p99.9", "p99.99"]
            .iter()
            .map(|k| {
                let x = d.iter().find(|(kk, _)| kk == k).map(|(_, x)| *x);
                format!("<td>{}</td>", x.map_or("-".into(), fmt_us))
            })
            .collect();
        let _ = writeln!(
            out,
            "<tr><th class=\"l\">{}</th>{cells}<td class=\"l\">{note}</td></tr>",
            esc(name)
        );
    };
    let flagged = s.lateness_flagged == Some(true);
    row(
        "generator lateness (due → seen by its loop)",
        s.lateness.as_ref(),
        if flagged {
            "<b>FLAGGED</b>: the generator fell behind".into()
        } else {
            "within the threshold".into()
        },
    );
    if let Some(h) = &s.held_in_client {
        row(
            "held in the client (all connections busy)",
            h.held.as_ref(),
            format!(
                "{} requests ({:.1} %)",
                thousands(h.requests.unwrap_or(0.0)),
                100.0 * h.fraction.unwrap_or(0.0)
            ),
        );
    }
    if let Some(d) = &s.decomposition {
        row(
            "path: generator (intended → sent)",
            d.lateness.as_ref(),
            String::new(),
        );
        row(
            "path: network + server (sent → kernel)",
            d.network_server.as_ref(),
            String::new(),
        );
        row(
            "path: client wake-up (kernel → user)",
            d.client_wakeup.as_ref(),
            String::new(),
        );
    }
    for c in &s.classes {
        row(
            &format!(
                "class {} ({})",
                c.class.unwrap_or(0.0),
                c.label.as_deref().unwrap_or("")
            ),
            c.measured.as_ref(),
            format!("{} requests", thousands(c.requests.unwrap_or(0.0))),
        );
    }
    out.push_str("</table>\n");
    if let Some(a) = &s.arrival_check {
        let t = crate::terminal::arrivals_text(
            a.n.unwrap_or(0.0),
            a.statistic.unwrap_or(f64::NAN),
            a.p_value.unwrap_or(f64::NAN),
            a.exponential == Some(true),
            a.schedule_p_value.unwrap_or(f64::NAN),
        );
        let _ = writeln!(out, "<p class=\"muted\">Arrivals as sent: {t}.</p>");
    }
}

/// The stage breakdown as bars.
fn stages(out: &mut String, r: &StoredRun, figures: &mut Vec<Figure>) -> Result<(), ReportError> {
    let Some(st) = &r.facts.stages else {
        return Ok(());
    };
    let rows: Vec<StageBar> = st
        .rows
        .iter()
        .map(|x| StageBar {
            stage: x.stage.clone().unwrap_or_else(|| "?".into()),
            slow_p50: x.slow_p50_us.unwrap_or(0.0),
            slow_p99: x.slow_p99_us.unwrap_or(0.0),
            median_p50: x.median_p50_us.unwrap_or(0.0),
            median_p99: x.median_p99_us.unwrap_or(0.0),
        })
        .collect();
    let n = rows.len();
    let _ = writeln!(out, "<h3>Where the time goes: stages</h3>");
    let f = Figure {
        name: format!("run-{}-stages", r.id()),
        title: format!(
            "run {}: stages of the slowest 1 % against median requests",
            r.id()
        ),
        width: 1000,
        height: figure::bars_height(n),
        body: Body::Stages(StagesFigure {
            rows,
            slow_label: format!(
                "slowest 1 % ({} requests): median, whisker to p99",
                thousands(st.slow_requests.unwrap_or(0.0))
            ),
            median_label: format!(
                "median requests ({}): median, whisker to p99",
                thousands(st.median_requests.unwrap_or(0.0))
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
fn why(out: &mut String, s: &RunSummary) {
    let _ = writeln!(out, "<h3>Why</h3>");
    let split = &s.excess_split;
    if !split.is_empty() {
        let _ = writeln!(out, "<table><tr><th class=\"l\">excess time</th><th>total</th><th>client</th><th>server</th></tr>");
        for e in split {
            let _ = writeln!(
                out,
                "<tr><th class=\"l\">{}</th><td>{:.1} µs</td><td>{:.1} µs</td><td>{:.1} µs</td></tr>",
                esc(e.key.as_deref().unwrap_or("")),
                e.total_us.unwrap_or(f64::NAN),
                e.client_us.unwrap_or(f64::NAN),
                e.server_us.unwrap_or(f64::NAN)
            );
        }
        out.push_str("</table>\n");
    }
    let source = s.ideal_source.as_ref();
    if let (Some(g), Some(u)) = (
        source.and_then(|x| x.batching_gain),
        source.and_then(|x| x.unbatched_per_worker_service_ns),
    ) {
        if g > 1.02 {
            let _ = writeln!(out, "<p>Batching: the ideal uses the server's batched cost ({g:.2}× the rate with one request in flight); a request that arrives alone costs {} — up to {g:.2}× of excess at low load is this.</p>", fmt_us(u / 1e3));
        }
    }
    let Some(w) = &s.why else {
        let _ = writeln!(
            out,
            "<p class=\"muted\">No sources were sampled for this run (attribution off).</p>"
        );
        return;
    };
    let _ = writeln!(
        out,
        "<p class=\"muted\">{} slowest requests; {} of {} sampled intervals held one. Sources ranked by significance (Holm-adjusted p of a circular-shift test), then lift.</p>",
        thousands(w.slow_requests.unwrap_or(0.0)),
        thousands(w.slow_intervals.unwrap_or(0.0)),
        thousands(w.intervals.unwrap_or(0.0))
    );
    let sources = &w.sources;
    if sources.is_empty() {
        let _ = writeln!(out, "<p>No sampled source moved during the run.</p>");
    } else {
        let _ = writeln!(out, "<table><tr><th>#</th><th class=\"l\">source</th><th>lift</th><th>p</th><th class=\"l\">evidence</th><th class=\"l\">fix</th><th class=\"l\">trade-off</th></tr>");
        for (i, x) in sources.iter().enumerate() {
            let p = x.p_value.unwrap_or(1.0);
            let _ = writeln!(
                out,
                "<tr{}><td>{}</td><td class=\"l\">{} <span class=\"muted\">({})</span></td><td>{:.1}×</td><td>{p:.3}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
                if p < 0.05 { "" } else { " class=\"insig\"" },
                i + 1,
                esc(x.source.as_deref().unwrap_or("")),
                esc(&x.kind.as_ref().map(|k| k.to_string().trim_matches('"').to_string()).unwrap_or_default()),
                x.lift.unwrap_or(f64::NAN),
                esc(x.evidence.as_deref().unwrap_or("")),
                esc(x.mitigation.as_deref().unwrap_or("")),
                esc(x.tradeoff.as_deref().unwrap_or("")),
            );
        }
        out.push_str("</table>\n");
        if sources.iter().all(|x| x.p_value.unwrap_or(1.0) >= 0.05) {
            let _ = writeln!(out, "<p class=\"muted\">No source lines up with the slowest requests at 5 % (all greyed): the table shows what moved, not a cause.</p>");
        }
    }
}

/// Host facts and the instruments that ran beside the load.
fn host(out: &mut String, r: &StoredRun) {
    super::run_parts::host_facts(out, r);
    let s = &r.facts;
    if let Some(server) = &s.server {
        let _ = writeln!(out, "<dt>server</dt><dd>{}</dd>", esc(&server.to_string()));
    }
    for i in &s.instruments {
        let _ = writeln!(
            out,
            "<dt>{}</dt><dd>{} · CPUs {} · {} samples ({} skipped), {} each</dd>",
            esc(i.name.as_deref().unwrap_or("instrument")),
            esc(i.mode.as_deref().unwrap_or("")),
            i.cpus.as_ref().map_or("-".into(), |c| c.to_string()),
            thousands(i.samples.unwrap_or(0.0)),
            thousands(i.skipped.unwrap_or(0.0)),
            fmt_us(i.cost_per_sample_ns.unwrap_or(f64::NAN) / 1e3)
        );
    }
    out.push_str("</dl>\n");
}
