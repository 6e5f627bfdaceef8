//! A run's section from its JSON summary alone: the fallback for runs stored without a typed
//! form (before the store kept one, schema 4; or a run that failed before it was analysed).
//! Everything here reads the summary ([`lab::Run::to_json`]'s shape) by JSON path; a run with
//! a typed form is drawn by [`super::run`] from its fields, the same page.

use std::fmt::Write as _;

use serde_json::Value;

use super::run_parts::view_figure;
use super::{badge, esc, figure_html, thousands};
use crate::figure::{self, fmt_us, Body, Figure, StageBar, StagesFigure};
use crate::stored::{ci, dist, num, text, StoredRun};
use crate::ReportError;

/// The headline: p99 measured against ideal, or why there is no comparison.
fn headline(s: &Value) -> String {
    let m = num(s, "/measured/p99");
    let i = num(s, "/ideal/p99");
    let e = s
        .get("excess_ci")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|e| text(e, "/key") == Some("p99")));
    match (m, i) {
        (Some(m), Some(i)) => {
            let ci = e
                .and_then(|e| Some((num(e, "/lo")?, num(e, "/hi")?)))
                .map(|(lo, hi)| format!(" (95 % CI {lo:.2}–{hi:.2}×)"))
                .unwrap_or_default();
            format!(
                "p99 <b>{}</b> measured against <b>{}</b> ideal: <b>{:.2}×</b> the ideal{ci}",
                fmt_us(m),
                fmt_us(i),
                m / i
            )
        }
        (Some(m), None) => format!(
            "p99 <b>{}</b> measured; no ideal to compare with{}",
            fmt_us(m),
            text(s, "/ideal_note")
                .map(|n| format!(" ({})", esc(n)))
                .unwrap_or_default()
        ),
        _ => format!(
            "nothing measured{}",
            text(s, "/error")
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
    let s = r.summary();
    let id = r.id();
    let _ = writeln!(
        out,
        "<section id=\"run-{id}\"><h2>Run {id} · {} {}</h2>",
        esc(&r.row.target),
        badge(r.status())
    );
    let _ = writeln!(out, "<p class=\"lede\">{}</p>", headline(s));
    let o = |k: &str| num(s, &format!("/outcomes/{k}")).unwrap_or(0.0);
    let _ = writeln!(
        out,
        "<p class=\"muted\">{} · started {} · {} requests after the warm-up · offered {} req/s, achieved {} req/s · outcomes: ok {}, error {}, timeout {}, dropped {}</p>",
        esc(&r.row.kind),
        esc(&r.row.started_at),
        thousands(num(s, "/requests").unwrap_or(0.0)),
        thousands(num(s, "/rate_rps").unwrap_or(f64::NAN)),
        thousands(num(s, "/achieved_rate_rps").unwrap_or(f64::NAN)),
        thousands(o("ok")),
        thousands(o("error")),
        thousands(o("timeout")),
        thousands(o("dropped")),
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
    let s = r.summary();
    let mut note = |class: &str, t: String| {
        let _ = writeln!(out, "<p class=\"note {class}\">{t}</p>");
    };
    match r.status() {
        "invalid" => note(
            "bad",
            "INVALID: no view asked for is valid — the generator fell behind its schedule (its own lateness p99 above the threshold), so the user's view counts its stalls, and the server's view is missing or its offered load was not sent.".into(),
        ),
        "saturated" => note(
            "",
            format!(
                "SATURATED: offered {} req/s, the server completed {} req/s — the completion rate is the capacity measured; beyond saturation the percentiles grow with the run's length.",
                thousands(num(s, "/saturation/offered_rps").unwrap_or(f64::NAN)),
                thousands(num(s, "/saturation/completed_rps").unwrap_or(f64::NAN))
            ),
        ),
        "failed" | "interrupted" => note(
            "bad",
            format!(
                "{}: {}",
                r.status().to_uppercase(),
                esc(text(s, "/error").unwrap_or("the run did not complete as planned"))
            ),
        ),
        _ => {}
    }
    if let Some(h) = text(s, "/headline_view") {
        note(
            "",
            format!(
                "headline: {} view — {}",
                esc(h),
                esc(text(s, "/views/headline_why").unwrap_or(""))
            ),
        );
    }
    if let Some(t) = text(s, "/status_note") {
        note("bad", esc(t));
    }
    if let Some(t) = text(s, "/ideal_check") {
        note("", format!("WARNING: {}", esc(t)));
    }
    if let Some(t) = text(s, "/ideal_note") {
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
    let s = r.summary();
    let id = r.id();
    let ideal_label = match s.get("ideal_spec") {
        Some(v) if !v.is_null() => format!(
            "ideal: {} worker(s), {} queue(s), {}",
            num(v, "/workers").unwrap_or(1.0),
            text(v, "/queues").unwrap_or("single"),
            fmt_us(num(v, "/service_ns").unwrap_or(f64::NAN) / 1e3)
        ),
        _ => "ideal".into(),
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
        view_table(s.get("measured_ci"), s.get("ideal_ci"), s.get("excess_ci"))
    );
    if let Some(sv) = s.get("server_view").filter(|v| !v.is_null()) {
        let _ = writeln!(
            out,
            "<p class=\"muted\">The server's view (sent → client kernel receive):</p>{}",
            view_table(
                sv.get("measured_ci"),
                sv.get("ideal_ci"),
                sv.get("excess_ci")
            )
        );
    }
    Ok(())
}

/// Measured, ideal and excess per percentile, each with its interval.
fn view_table(m: Option<&Value>, i: Option<&Value>, e: Option<&Value>) -> String {
    let Some(m) = m.filter(|v| !v.is_null()) else {
        return "<p class=\"muted\">nothing measured</p>".into();
    };
    let mut t = String::from(
        "<table><tr><th class=\"l\"></th><th>measured</th><th>95 % CI</th><th>ideal</th><th>95 % CI</th><th>excess</th><th>95 % CI</th></tr>",
    );
    for (key, _) in stats::STANDARD_QUANTILES
        .iter()
        .filter(|(k, _)| ci(m, k).is_some())
    {
        let cell = |v: Option<&Value>| v.and_then(|v| ci(v, key));
        let (mv, ml, mh) = cell(Some(m)).unwrap_or((f64::NAN, f64::NAN, f64::NAN));
        let iv = cell(i);
        let ex = e
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| text(x, "/key") == Some(key)));
        let exv = ex.and_then(|x| num(x, "/value"));
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
            iv.map_or("-".into(), |v| fmt_us(v.0)),
            iv.map_or(String::new(), |v| format!("[{}, {}]", fmt_us(v.1), fmt_us(v.2))),
            exv.map_or("-".into(), |x| format!("{x:.2}×")),
            ex.and_then(|x| Some((num(x, "/lo")?, num(x, "/hi")?)))
                .map_or(String::new(), |(lo, hi)| format!("[{lo:.2}, {hi:.2}]")),
        );
    }
    t.push_str("</table>");
    t
}

/// Lateness, time held, the path's decomposition, the arrival check, per-class latency.
fn validity(out: &mut String, s: &Value) {
    let _ = writeln!(out, "<h3>Lateness, time held and validity</h3><table><tr><th class=\"l\"></th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th class=\"l\"></th></tr>");
    let mut row = |name: &str, v: Option<&Value>, note: String| {
        let Some(v) = v.filter(|v| !v.is_null()) else {
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
    let flagged = s.get("lateness_flagged").and_then(Value::as_bool) == Some(true);
    row(
        "generator lateness (due → seen by its loop)",
        s.get("lateness"),
        if flagged {
            "<b>FLAGGED</b>: the generator fell behind".into()
        } else {
            "within the threshold".into()
        },
    );
    if let Some(h) = s.get("held_in_client").filter(|v| !v.is_null()) {
        row(
            "held in the client (all connections busy)",
            h.get("held"),
            format!(
                "{} requests ({:.1} %)",
                thousands(num(h, "/requests").unwrap_or(0.0)),
                100.0 * num(h, "/fraction").unwrap_or(0.0)
            ),
        );
    }
    if let Some(d) = s.get("decomposition").filter(|v| !v.is_null()) {
        row(
            "path: generator (intended → sent)",
            d.get("lateness"),
            String::new(),
        );
        row(
            "path: network + server (sent → kernel)",
            d.get("network_server"),
            String::new(),
        );
        row(
            "path: client wake-up (kernel → user)",
            d.get("client_wakeup"),
            String::new(),
        );
    }
    if let Some(classes) = s.get("classes").and_then(Value::as_array) {
        for c in classes {
            row(
                &format!(
                    "class {} ({})",
                    num(c, "/class").unwrap_or(0.0),
                    text(c, "/label").unwrap_or("")
                ),
                c.get("measured"),
                format!("{} requests", thousands(num(c, "/requests").unwrap_or(0.0))),
            );
        }
    }
    out.push_str("</table>\n");
    if let Some(a) = s.get("arrival_check").filter(|v| !v.is_null()) {
        let _ = writeln!(
            out,
            "<p class=\"muted\">Arrivals as sent: Anderson–Darling on {} inter-arrival gaps: A² = {:.3}, p = {:.3} → {} (the schedule's own gaps: p = {:.3}).</p>",
            num(a, "/n").unwrap_or(0.0),
            num(a, "/statistic").unwrap_or(f64::NAN),
            num(a, "/p_value").unwrap_or(f64::NAN),
            if a.get("exponential").and_then(Value::as_bool) == Some(true) {
                "consistent with exponential"
            } else {
                "NOT exponential"
            },
            num(a, "/schedule_p_value").unwrap_or(f64::NAN)
        );
    }
}

/// The stage breakdown as bars.
fn stages(out: &mut String, r: &StoredRun, figures: &mut Vec<Figure>) -> Result<(), ReportError> {
    let Some(st) = r.summary().get("stages").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let rows: Vec<StageBar> = st
        .get("rows")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| StageBar {
                    stage: text(x, "/stage").unwrap_or("?").to_string(),
                    slow_p50: num(x, "/slow_p50_us").unwrap_or(0.0),
                    slow_p99: num(x, "/slow_p99_us").unwrap_or(0.0),
                    median_p50: num(x, "/median_p50_us").unwrap_or(0.0),
                    median_p99: num(x, "/median_p99_us").unwrap_or(0.0),
                })
                .collect()
        })
        .unwrap_or_default();
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
                thousands(num(st, "/slow_requests").unwrap_or(0.0))
            ),
            median_label: format!(
                "median requests ({}): median, whisker to p99",
                thousands(num(st, "/median_requests").unwrap_or(0.0))
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
fn why(out: &mut String, s: &Value) {
    let _ = writeln!(out, "<h3>Why</h3>");
    if let Some(split) = s
        .get("excess_split")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    {
        let _ = writeln!(out, "<table><tr><th class=\"l\">excess time</th><th>total</th><th>client</th><th>server</th></tr>");
        for e in split {
            let _ = writeln!(
                out,
                "<tr><th class=\"l\">{}</th><td>{:.1} µs</td><td>{:.1} µs</td><td>{:.1} µs</td></tr>",
                esc(text(e, "/key").unwrap_or("")),
                num(e, "/total_us").unwrap_or(f64::NAN),
                num(e, "/client_us").unwrap_or(f64::NAN),
                num(e, "/server_us").unwrap_or(f64::NAN)
            );
        }
        out.push_str("</table>\n");
    }
    if let (Some(g), Some(u)) = (
        num(s, "/ideal_source/batching_gain"),
        num(s, "/ideal_source/unbatched_per_worker_service_ns"),
    ) {
        if g > 1.02 {
            let _ = writeln!(out, "<p>Batching: the ideal uses the server's batched cost ({g:.2}× the rate with one request in flight); a request that arrives alone costs {} — up to {g:.2}× of excess at low load is this.</p>", fmt_us(u / 1e3));
        }
    }
    let Some(w) = s.get("why").filter(|v| !v.is_null()) else {
        let _ = writeln!(
            out,
            "<p class=\"muted\">No sources were sampled for this run (attribution off).</p>"
        );
        return;
    };
    let _ = writeln!(
        out,
        "<p class=\"muted\">{} slowest requests; {} of {} sampled intervals held one. Sources ranked by significance (Holm-adjusted p of a circular-shift test), then lift.</p>",
        thousands(num(w, "/slow_requests").unwrap_or(0.0)),
        thousands(num(w, "/slow_intervals").unwrap_or(0.0)),
        thousands(num(w, "/intervals").unwrap_or(0.0))
    );
    let sources = w
        .get("sources")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if sources.is_empty() {
        let _ = writeln!(out, "<p>No sampled source moved during the run.</p>");
    } else {
        let _ = writeln!(out, "<table><tr><th>#</th><th class=\"l\">source</th><th>lift</th><th>p</th><th class=\"l\">evidence</th><th class=\"l\">fix</th><th class=\"l\">trade-off</th></tr>");
        for (i, x) in sources.iter().enumerate() {
            let p = num(x, "/p_value").unwrap_or(1.0);
            let _ = writeln!(
                out,
                "<tr{}><td>{}</td><td class=\"l\">{} <span class=\"muted\">({})</span></td><td>{:.1}×</td><td>{p:.3}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
                if p < 0.05 { "" } else { " class=\"insig\"" },
                i + 1,
                esc(text(x, "/source").unwrap_or("")),
                esc(&x.get("kind").map(|k| k.to_string().trim_matches('"').to_string()).unwrap_or_default()),
                num(x, "/lift").unwrap_or(f64::NAN),
                esc(text(x, "/evidence").unwrap_or("")),
                esc(text(x, "/mitigation").unwrap_or("")),
                esc(text(x, "/tradeoff").unwrap_or("")),
            );
        }
        out.push_str("</table>\n");
        if sources
            .iter()
            .all(|x| num(x, "/p_value").unwrap_or(1.0) >= 0.05)
        {
            let _ = writeln!(out, "<p class=\"muted\">No source lines up with the slowest requests at 5 % (all greyed): the table shows what moved, not a cause.</p>");
        }
    }
}

/// Host facts and the instruments that ran beside the load.
fn host(out: &mut String, r: &StoredRun) {
    super::run_parts::host_facts(out, r);
    let s = r.summary();
    if let Some(server) = s.get("server").filter(|v| !v.is_null()) {
        let _ = writeln!(out, "<dt>server</dt><dd>{}</dd>", esc(&server.to_string()));
    }
    for i in s
        .get("instruments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let _ = writeln!(
            out,
            "<dt>{}</dt><dd>{} · CPUs {} · {} samples ({} skipped), {} each</dd>",
            esc(text(i, "/name").unwrap_or("instrument")),
            esc(text(i, "/mode").unwrap_or("")),
            i.get("cpus").map_or("-".into(), |c| c.to_string()),
            thousands(num(i, "/samples").unwrap_or(0.0)),
            thousands(num(i, "/skipped").unwrap_or(0.0)),
            fmt_us(num(i, "/cost_per_sample_ns").unwrap_or(f64::NAN) / 1e3)
        );
    }
    out.push_str("</dl>\n");
}
