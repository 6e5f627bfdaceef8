//! An `ab` experiment's page, in the order a reader asks: the answer (the verdicts of the view
//! read first, at the percentiles it waited for), the design and why it stopped, every row with
//! its paired interval, both arms' CCDFs overlaid per view, the per-pair ratios over the
//! comparison with the carry-over check, and the two arms' runs.
//!
//! Everything is read from the stored [`lab::ab::AbResult`] and the arms' stored runs; the
//! pairs' own numbers stay in the JSON (`tailscope ab --json`, or the experiment's summary).

use std::fmt::Write as _;

use lab::ab::{AbResult, AbRow, Arm, CarryOver};
use lab::check::CheckVerdict;
use lab::View;
use plotters::style::RGBColor;

use super::{badge, esc, figure_html, page, thousands, Context, Report};
use crate::experiment::{StoredAb, StoredExperiment};
use crate::figure::{
    fmt_us, Body, CcdfFigure, Curve, Figure, RatioFigure, RatioPanel, RatioSeries, PALETTE,
};
use crate::stored::{wilson_band, StoredRun};
use crate::ReportError;

/// The arms' colours: blue and orange, apart in print and for most colour vision deficiencies.
const ARM_COLOR: [RGBColor; 2] = [PALETTE[0], PALETTE[3]];

const ARMS: [Arm; 2] = [Arm::Baseline, Arm::Candidate];

fn arm_index(a: Arm) -> usize {
    match a {
        Arm::Baseline => 0,
        Arm::Candidate => 1,
    }
}

fn view_name(v: View) -> &'static str {
    match v {
        View::User => "the user's view",
        View::Server => "the server's view",
    }
}

/// A verdict word, coloured by what it means for the candidate.
fn verdict(v: CheckVerdict) -> String {
    format!("<span class=\"v-{v}\">{v}</span>")
}

/// "×1.163 [1.131, 1.195]", or "-".
fn ratio_text(r: &AbRow) -> String {
    match r.ratio {
        Some(i) => format!("×{:.3} [{:.3}, {:.3}]", i.value, i.lo, i.hi),
        None => "-".into(),
    }
}

fn us(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite()).map_or("-".into(), fmt_us)
}

/// The row's reason says its view was not compared (an arm's view invalid or missing).
fn not_compared(row: &AbRow) -> bool {
    row.ratio.is_none()
        && row
            .why
            .as_deref()
            .is_some_and(|w| w.contains(" view is invalid") || w.contains(" has no "))
}

/// Why a row is undecided, short (the reason a whole view was not compared is said once).
fn short_why(row: &AbRow) -> String {
    match (row.needs_pairs, &row.why) {
        (Some(n), _) => format!("~{} pairs in all would decide it", thousands(n as f64)),
        _ if not_compared(row) => "not compared (see below)".into(),
        (None, Some(w)) => w.clone(),
        (None, None) if row.verdict == CheckVerdict::Undecided && row.ratio.is_some() => {
            "on the tolerance's edge: no number of pairs would decide it".into()
        }
        _ => String::new(),
    }
}

/// The answer, as HTML: "<b>server view</b>: p50 worse ×1.16 [1.13, 1.19] · p99 …".
fn answer(r: &AbResult) -> String {
    let parts: Vec<String> = r
        .decide
        .iter()
        .map(|k| match r.row(r.decided_view, k) {
            Some(row) => match row.ratio {
                Some(i) => format!(
                    "{} {} ×{:.3} [{:.3}, {:.3}]",
                    esc(k),
                    verdict(row.verdict),
                    i.value,
                    i.lo,
                    i.hi
                ),
                None => format!("{} {}", esc(k), verdict(row.verdict)),
            },
            None => format!("{} -", esc(k)),
        })
        .collect();
    let ended = match r.status {
        lab::RunStatus::Failed | lab::RunStatus::Interrupted => {
            format!(" (the comparison {})", r.status.as_str())
        }
        _ => String::new(),
    };
    let outcome = if r.regression {
        format!("the candidate is <b>worse</b>{ended}")
    } else if !r.decided {
        format!("not decided{ended}")
    } else if r.rows.iter().any(|x| x.verdict == CheckVerdict::Better) {
        format!("the candidate is better, nowhere worse{ended}")
    } else {
        format!("no regression{ended}")
    };
    format!(
        "<span class=\"answer\"><b>{} view</b>: {}</span> — {outcome}.",
        r.decided_view,
        if parts.is_empty() {
            "no percentile to decide".into()
        } else {
            parts.join(" · ")
        }
    )
}

/// The arm's specification: as the result names it, else as the experiment's configuration.
fn spec_of(e: &StoredExperiment, r: Option<&AbResult>, arm: Arm) -> String {
    match r {
        Some(r) => r.arm(arm).spec.clone(),
        None => e
            .row
            .config
            .get(arm.as_str())
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string(),
    }
}

/// Whether the arm's run measured `view` validly: `Ok`, or why not.
fn validity(run: Option<&StoredRun>, arm: Arm, view: View) -> Result<(), String> {
    let Some(r) = run else {
        return Err(format!("the {arm} has no stored run"));
    };
    if let Some(run) = &r.run {
        let v = match view {
            View::User => Some(&run.views.user),
            View::Server => run.views.server.as_ref(),
        };
        return match v {
            None => Err(format!("the {arm} has no {view} view")),
            Some(v) if v.valid => Ok(()),
            Some(v) => Err(format!("the {arm}'s {view} view is invalid: {}", v.why)),
        };
    }
    match r.facts.views.as_ref().and_then(|v| v.of(view.as_str())) {
        Some(v) if v.valid == Some(true) => Ok(()),
        Some(v) => Err(format!(
            "the {arm}'s {view} view is invalid: {}",
            v.why.as_deref().unwrap_or("no reason stored")
        )),
        None => Err(format!(
            "the {arm}'s run stored no {view} view (its status: {})",
            r.status()
        )),
    }
}

/// The page of a stored `ab` experiment.
pub(super) fn ab_page(
    e: &StoredExperiment,
    ab: &StoredAb,
    ctx: &Context,
) -> Result<Report, ReportError> {
    let mut body = String::new();
    let mut figures = Vec::new();
    let id = e.row.id;
    let title = format!("tailscope report — ab experiment {id}");
    let _ = writeln!(
        body,
        "<h1>{} {}</h1>",
        esc(&title),
        badge(e.row.status.as_str())
    );
    let result = ab.result.as_ref().ok();
    let specs = ARMS.map(|a| spec_of(e, result, a));
    let _ = writeln!(
        body,
        "<p class=\"muted\">candidate <code>{}</code> against baseline <code>{}</code> · started {} · finished {}</p>",
        esc(&specs[1]),
        esc(&specs[0]),
        esc(&e.row.started_at),
        esc(e.row.finished_at.as_deref().unwrap_or("-"))
    );
    match &ab.result {
        Ok(r) => {
            let _ = writeln!(body, "<p class=\"lede\">{}</p>", answer(r));
            notes(&mut body, r);
            design(&mut body, r);
            let _ = writeln!(
                body,
                "<nav class=\"toc\"><a href=\"#ab-rows\">all rows</a><a href=\"#ab-ccdf\">distributions</a><a href=\"#ab-pairs\">per pair</a><a href=\"#ab-arms\">the arms</a></nav>"
            );
            rows(&mut body, r);
        }
        Err(why) => {
            let _ = writeln!(
                body,
                "<p class=\"note bad\">No comparison to show: {}. The arms' runs below are what was stored.</p>",
                esc(why)
            );
        }
    }
    ccdfs(&mut body, e, ab, &specs, &mut figures)?;
    if let Some(r) = result {
        pairs(&mut body, id, r, &mut figures)?;
    }
    arms(&mut body, ab, result, &specs, ctx);
    let _ = writeln!(
        body,
        "<h2>The experiment as stored</h2><details><summary>Its configuration</summary><pre>{}</pre></details><p class=\"muted\">The pairs' own numbers are in its summary (<code>tailscope ab --json</code>'s object).</p>",
        esc(&serde_json::to_string_pretty(&e.row.config).unwrap_or_default())
    );
    Ok(Report {
        html: page(&title, &body, ctx),
        figures,
    })
}

/// What a reader must know before trusting the answer: a failed arm, a stop before the design's
/// end, a view not compared.
fn notes(out: &mut String, r: &AbResult) {
    for arm in ARMS {
        let a = r.arm(arm);
        if let Some(err) = &a.error {
            let _ = writeln!(
                out,
                "<p class=\"note bad\">The {arm} failed: {}</p>",
                esc(err)
            );
        } else if a.status != lab::RunStatus::Ok {
            let _ = writeln!(
                out,
                "<p class=\"note\">The {arm}'s run is {}.</p>",
                a.status.as_str()
            );
        }
    }
    if !r.decided {
        let _ = writeln!(
            out,
            "<p class=\"note\">Not decided: some percentile of {} has no verdict ({}).</p>",
            view_name(r.decided_view),
            esc(&r.stopped)
        );
    }
}

/// The design and how it ended.
fn design(out: &mut String, r: &AbResult) {
    let _ = writeln!(out, "<dl class=\"kv\">");
    let _ = writeln!(
        out,
        "<dt>design</dt><dd>{} pairs of {:.3} s slices ({:.3} s settle not counted, {:.3} s gap after each) at {} req/s; both slices of a pair get the same arrivals, in a counterbalanced order</dd>",
        r.pairs,
        r.slice_s,
        r.settle_s,
        r.gap_s,
        thousands(r.rate_rps)
    );
    let looks = if r.until_decided {
        format!(
            "; until decided: looks planned after {} pairs, made after {} (Bonferroni over the looks)",
            join(&r.looks),
            join(&r.looked)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "<dt>verdicts</dt><dd>tolerance ±{:.0} %; {:.1} % confidence asked, intervals at {:.2} % per look{looks}</dd>",
        r.tolerance * 100.0,
        r.confidence * 100.0,
        r.confidence_per_look * 100.0
    );
    let _ = writeln!(
        out,
        "<dt>read first</dt><dd>{} at {}</dd>",
        view_name(r.decided_view),
        esc(&r.decide.join(", "))
    );
    let _ = writeln!(
        out,
        "<dt>stopped</dt><dd>{} · {} · the pairs took {:.1} s</dd>",
        esc(&r.stopped),
        if r.decided { "decided" } else { "not decided" },
        r.elapsed_s
    );
    let _ = writeln!(out, "<dt>status</dt><dd>{}</dd>", badge(r.status.as_str()));
    let _ = writeln!(out, "<dt>method</dt><dd>{}</dd></dl>", esc(&r.method));
}

fn join(v: &[u32]) -> String {
    let s: Vec<String> = v.iter().map(u32::to_string).collect();
    if s.is_empty() {
        "-".into()
    } else {
        s.join(", ")
    }
}

/// Every row: view, percentile, both arms' estimates, the ratio with its paired interval, the
/// verdict and what an undecided row would need.
fn rows(out: &mut String, r: &AbResult) {
    let _ = writeln!(
        out,
        "<h2 id=\"ab-rows\">All rows</h2><table class=\"ab-rows\"><tr><th class=\"l\">view</th><th class=\"l\">percentile</th><th>baseline</th><th>candidate</th><th>candidate ÷ baseline [{:.1} % paired]</th><th>sections</th><th class=\"l\">verdict</th><th class=\"l\">why / needs</th></tr>",
        r.confidence_per_look * 100.0
    );
    for row in &r.rows {
        let read = row.view == r.decided_view && r.decide.contains(&row.percentile);
        let _ = writeln!(
            out,
            "<tr{}><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            if read { " class=\"read\"" } else { "" },
            row.view,
            esc(&format!(
                "{}{}",
                row.percentile,
                if row.unstood.is_some() { "†" } else { "" }
            )),
            us(row.baseline_us),
            us(row.candidate_us),
            ratio_text(row),
            if row.ratio.is_some() { row.sections.to_string() } else { "-".into() },
            verdict(row.verdict),
            esc(&short_why(row))
        );
    }
    out.push_str("</table>\n");
    let _ = writeln!(
        out,
        "<p class=\"muted\">Bold: the rows read first. The arms' estimates are over all their counted requests; the ratio's interval is made from groups of adjacent pairs (each group's ratio within one stretch of the host's time).</p>"
    );
    for row in &r.rows {
        if let Some(u) = &row.unstood {
            let _ = writeln!(
                out,
                "<p class=\"note\">† {} {}: {}</p>",
                view_name(row.view),
                esc(&row.percentile),
                esc(u)
            );
        }
    }
    for v in [View::User, View::Server] {
        if let Some(why) = r
            .rows
            .iter()
            .find(|x| x.view == v && not_compared(x))
            .and_then(|x| x.why.as_deref())
        {
            let _ = writeln!(
                out,
                "<p class=\"note\">{} not compared: {}</p>",
                view_name(v),
                esc(why)
            );
        }
    }
}

/// Both arms' CCDFs overlaid, one figure per view; an arm whose view is invalid is left out of
/// that view's figure, and the page says why.
fn ccdfs(
    out: &mut String,
    e: &StoredExperiment,
    ab: &StoredAb,
    specs: &[String; 2],
    figures: &mut Vec<Figure>,
) -> Result<(), ReportError> {
    let id = e.row.id;
    let _ = writeln!(
        out,
        "<h2 id=\"ab-ccdf\">Both arms' latency distributions</h2>"
    );
    let mut said = Vec::new();
    out.push_str("<div class=\"figs\">\n");
    for view in [View::User, View::Server] {
        let mut curves = Vec::new();
        let mut left_out = Vec::new();
        for arm in ARMS {
            let k = arm_index(arm);
            let run = ab.arms[k].as_ref();
            if let Err(why) = validity(run, arm, view) {
                left_out.push(why);
                continue;
            }
            let curves_of = run.map(|r| r.curves.as_ref());
            let v = match curves_of {
                Some(Ok(c)) => match view {
                    View::User => Some(&c.user),
                    View::Server => c.server.as_ref(),
                },
                Some(Err(why)) => {
                    left_out.push(format!("the {arm}'s run has no curves: {why}"));
                    continue;
                }
                None => None,
            };
            let Some(v) = v.filter(|v| !v.measured.is_empty()) else {
                left_out.push(format!("the {arm}'s run kept no {view} view curve"));
                continue;
            };
            // A run that failed or was interrupted still shows what it measured, said so.
            let status = run.map_or("", StoredRun::status);
            let label = match status {
                "ok" | "" => format!("{arm}: {}", specs[k]),
                other => format!("{arm}: {} ({other})", specs[k]),
            };
            curves.push(Curve {
                label,
                points: v.measured.clone(),
                band: wilson_band(&v.measured, v.measured_n),
                color: ARM_COLOR[k],
                dashed: false,
            });
        }
        let drawn = curves.len();
        let f = Figure {
            name: format!("experiment-{id}-{view}-ccdf"),
            title: format!("experiment {id}: {}, both arms", view_name(view)),
            width: 760,
            height: 500,
            body: Body::Ccdf(CcdfFigure { curves }),
        };
        let what = match view {
            View::User => "The user's view (intended send → received)",
            View::Server => "The server's view (sent → client kernel receive)",
        };
        let caption = if left_out.is_empty() {
            format!("{what} of both arms' runs, all their counted slices; shaded: 95 % pointwise bands.")
        } else {
            format!(
                "{what}; shaded: 95 % pointwise bands. Not drawn: {}.",
                esc(&left_out.join("; "))
            )
        };
        if drawn > 0 && !f.is_empty() {
            figure_html(out, f, &caption, figures)?;
        } else {
            said.push(format!(
                "{} is not drawn: {}.",
                view_name(view),
                if left_out.is_empty() {
                    "nothing was measured".into()
                } else {
                    left_out.join("; ")
                }
            ));
        }
    }
    out.push_str("</div>\n");
    for s in said {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(&s));
    }
    Ok(())
}

/// The carry-over check of `view` and `percentile`, when it was made.
fn carry_over<'a>(r: &'a AbResult, percentile: &str) -> Option<&'a CarryOver> {
    r.carry_over
        .iter()
        .find(|c| c.view == r.decided_view && c.percentile == percentile)
}

/// The carry-over check's line.
fn carry_line(c: &CarryOver) -> String {
    format!(
        "{} {}: candidate first ×{:.3}, baseline first ×{:.3} → {} (×{:.3} [{:.3}, {:.3}], {} + {} pairs)",
        c.view,
        esc(&c.percentile),
        c.candidate_first,
        c.baseline_first,
        if c.detected {
            "<b>the order matters</b>: a slice leaves something behind for the next (lengthen --gap or --settle)"
        } else {
            "no carry-over detected"
        },
        c.effect.value,
        c.effect.lo,
        c.effect.hi,
        c.pairs.0,
        c.pairs.1
    )
}

/// The per-pair ratios of the view read first at its p50 and p99, the overall ratio and its
/// interval across, and the carry-over check under the figure.
fn pairs(
    out: &mut String,
    id: i64,
    r: &AbResult,
    figures: &mut Vec<Figure>,
) -> Result<(), ReportError> {
    let view = r.decided_view;
    let _ = writeln!(
        out,
        "<h2 id=\"ab-pairs\">Per pair, over the comparison</h2>"
    );
    let panels: Vec<RatioPanel> = lab::ab::paired::SLICE_PERCENTILES
        .iter()
        .enumerate()
        .map(|(k, (key, _))| {
            let carry = carry_over(r, key);
            let series = [(false, "baseline first"), (true, "candidate first")]
                .into_iter()
                .map(|(cf, label)| RatioSeries {
                    label: format!("{label} ({})", if cf { "triangles" } else { "dots" }),
                    color: ARM_COLOR[usize::from(cf)],
                    triangle: cf,
                    points: r
                        .pair_facts
                        .iter()
                        .filter(|p| p.candidate_first == cf)
                        .filter_map(|p| Some((f64::from(p.index), p.log_ratio(view, k)?.exp())))
                        .collect(),
                    mean: carry.map(|c| {
                        if cf {
                            c.candidate_first
                        } else {
                            c.baseline_first
                        }
                    }),
                })
                .collect();
            let row = r.row(view, key);
            let overall = row.and_then(|x| x.ratio).map(|i| (i.value, i.lo, i.hi));
            RatioPanel {
                title: format!("{key}, {view} view"),
                series,
                overall,
                overall_label: match row {
                    Some(x) if x.ratio.is_some() => {
                        format!("overall {} ({})", ratio_text(x), x.verdict)
                    }
                    _ => "no overall ratio".into(),
                },
            }
        })
        .collect();
    let f = Figure {
        name: format!("experiment-{id}-pairs"),
        title: format!(
            "experiment {id}: candidate ÷ baseline per pair, {}",
            view_name(view)
        ),
        width: 1200,
        height: 500,
        body: Body::Ratio(RatioFigure {
            x_label: "pair (its index, in the order run)".into(),
            y_label: "candidate ÷ baseline (the pair's slices)".into(),
            tolerance: Some(r.tolerance),
            panels,
        }),
    };
    if f.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"note\">No pair has both slices' {} to compare.</p>",
            view_name(view)
        );
    } else {
        figure_html(
            out,
            f,
            &format!(
                "Each pair's ratio of its two slices' p50 and p99 ({}; the same arrivals in both slices) against the pair's index ({} pairs over {:.1} s). Dots: the baseline's slice ran first; triangles: the candidate's; dashed in their colour: each order's mean ratio (the carry-over check). Solid line and grey band: the overall ratio and its {:.1} % paired interval, as in the rows above (made from groups of adjacent pairs, see the method; not the mean of these points). Green: the tolerance's zone, where a whole interval reads \"same\".",
                view_name(view),
                r.pair_facts.len(),
                r.elapsed_s,
                r.confidence_per_look * 100.0
            ),
            figures,
        )?;
    }
    let _ = writeln!(
        out,
        "<h3>Carry-over check</h3><p class=\"muted\">Does the order within a pair change its ratio? The mean per-pair log ratio of the pairs whose candidate ran first against those whose baseline did (Welch's t interval at {:.0} %).</p>",
        r.confidence * 100.0
    );
    if r.carry_over.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"note\">Not made: fewer than two pairs of each order.</p>"
        );
    } else {
        out.push_str("<ul class=\"carry\">\n");
        for c in &r.carry_over {
            let _ = writeln!(
                out,
                "<li{}>{}</li>",
                if c.detected { " class=\"bad\"" } else { "" },
                carry_line(c)
            );
        }
        out.push_str("</ul>\n");
    }
    Ok(())
}

/// The arms' runs: ids, specifications, targets, status, views.
fn arms(out: &mut String, ab: &StoredAb, r: Option<&AbResult>, specs: &[String; 2], ctx: &Context) {
    let _ = writeln!(
        out,
        "<h2 id=\"ab-arms\">The arms</h2><table><tr><th class=\"l\">arm</th><th>run</th><th class=\"l\">specification</th><th class=\"l\">target</th><th class=\"l\">status</th><th>slices</th><th>requests</th><th class=\"l\">user view</th><th class=\"l\">server view</th></tr>"
    );
    let mut ids = Vec::new();
    for arm in ARMS {
        let k = arm_index(arm);
        let run = ab.arms[k].as_ref();
        let res = r.map(|r| r.arm(arm));
        let id = run.map(StoredRun::id).or(res.and_then(|a| a.run_id));
        ids.extend(id);
        let status = run
            .map(|x| x.status().to_string())
            .or(res.map(|a| a.status.as_str().to_string()))
            .unwrap_or_else(|| "-".into());
        let requests = run
            .and_then(|x| x.run.as_ref())
            .map_or("-".into(), |x| thousands(x.analysis.requests as f64));
        let valid = |v: View| match validity(run, arm, v) {
            Ok(()) => "valid".to_string(),
            Err(why) => format!("<span class=\"muted\">{}</span>", esc(&why)),
        };
        let _ = writeln!(
            out,
            "<tr id=\"arm-{arm}\"><td class=\"l\"><span class=\"swatch\" style=\"background:rgb({},{},{})\"></span>{arm}</td><td>{}</td><td class=\"l\"><code>{}</code></td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{requests}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            ARM_COLOR[k].0,
            ARM_COLOR[k].1,
            ARM_COLOR[k].2,
            id.map_or("-".into(), |i| format!("run {i}")),
            esc(&specs[k]),
            esc(res.map_or("-", |a| a.url.as_str())),
            badge(&status),
            res.map_or("-".into(), |a| a.slices.to_string()),
            valid(View::User),
            valid(View::Server),
        );
    }
    out.push_str("</table>\n");
    if !ids.is_empty() {
        let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
        let _ = writeln!(
            out,
            "<p class=\"muted\">Each arm's slices are one ordinary stored run (kind ab-arm, its slices on one timeline); its own page, with its lateness, stages and host:</p><pre>tailscope report {} --db {} -o arms.html</pre>",
            ids.join(" "),
            esc(&shell_word(&ctx.db))
        );
    }
}

/// `s` as one shell word.
fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:=,@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab::check::Interval;

    fn row(verdict: CheckVerdict, ratio: Option<f64>, why: Option<&str>) -> AbRow {
        AbRow {
            view: View::Server,
            percentile: "p50".into(),
            baseline_us: Some(100.0),
            candidate_us: ratio.map(|r| 100.0 * r),
            centre: None,
            ratio: ratio.map(|value| Interval {
                value,
                lo: value * 0.95,
                hi: value * 1.05,
            }),
            sections: 8,
            verdict,
            why: why.map(String::from),
            needs_pairs: None,
            unstood: None,
        }
    }

    #[test]
    fn an_invalid_view_is_said_once_not_per_row() {
        let r = row(
            CheckVerdict::Undecided,
            None,
            Some("the baseline's user view is invalid: late"),
        );
        assert!(not_compared(&r));
        assert_eq!(short_why(&r), "not compared (see below)");
        let r = row(CheckVerdict::Undecided, None, Some("too few pairs (3)"));
        assert!(!not_compared(&r));
        assert_eq!(short_why(&r), "too few pairs (3)");
        let mut r = row(CheckVerdict::Undecided, Some(1.1), None);
        assert!(short_why(&r).contains("edge"));
        r.needs_pairs = Some(1200);
        assert_eq!(short_why(&r), "~1,200 pairs in all would decide it");
    }

    #[test]
    fn a_store_path_is_one_shell_word() {
        assert_eq!(shell_word("/tmp/a.db"), "/tmp/a.db");
        assert_eq!(shell_word("/tmp/my runs.db"), "'/tmp/my runs.db'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }
}
