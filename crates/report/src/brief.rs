//! A run on one screen (`run`'s and `runs show`'s default): the answer first — the headline
//! view's measured against its ideal with the excess — then one line of validity, the host's
//! noise, one line per leading cause of the excess with its fix, and where the rest is
//! (`--detail`, which prints [`crate::terminal::run`], and `report`). Every line fits in
//! [`WIDTH`] characters; a longer text is cut with "…" (the detail and `--json` keep it whole).

use std::io::{self, Write};

use analysis::Excess;
use lab::{Run, View};
use stats::Summary;

/// The widest line the brief view prints.
pub const WIDTH: usize = 100;

/// `s` cut to [`WIDTH`] characters.
fn fit(s: &str) -> String {
    lab::clip_to(s, WIDTH - 1).into_owned()
}

fn line(w: &mut dyn Write, s: &str) -> io::Result<()> {
    writeln!(w, "{}", fit(s))
}

/// The headline view's figures: measured, ideal, excess.
fn headline_figures(run: &Run) -> (&Summary, Option<&Summary>, &[Excess]) {
    let a = &run.analysis;
    match (run.views.headline, &a.server_view) {
        (View::Server, Some(sv)) => (&sv.measured, sv.ideal.as_ref(), &sv.excess[..]),
        _ => (&a.measured, a.ideal.as_ref(), &a.excess[..]),
    }
}

/// The run in one screen (see the module doc).
pub fn run(w: &mut dyn Write, run: &Run) -> io::Result<()> {
    let a = &run.analysis;
    let v = &run.views;
    let id = run
        .run_id
        .map(|i| format!("run {i}"))
        .unwrap_or_else(|| "run (not stored)".into());
    line(
        w,
        &format!(
            "{id} · {} · {} · {} requests · offered {:.0} req/s, achieved {:.0}",
            run.target, run.status, a.requests, run.rate_rps, a.achieved_rate_rps
        ),
    )?;
    let (measured, ideal, excess) = headline_figures(run);
    let what = match v.headline {
        View::User => "intended send → received",
        View::Server => "sent → client kernel receive",
    };
    let valid = if v.is_valid(v.headline) {
        ""
    } else {
        " — NOT VALID"
    };
    line(w, &format!("{} view ({what}){valid}:", v.headline))?;
    // The terminal's table, brief: no interval for the ideal.
    let not_stood_behind = |k: &str| v.is_valid(v.headline) && !v.percentile_valid(v.headline, k);
    for l in crate::terminal::table_lines(measured, ideal, excess, not_stood_behind, true) {
        line(w, &l)?;
    }
    marked(w, v, v.headline)?;
    validity(w, run)?;
    let o = &a.outcomes;
    if o.skipped > 0 {
        line(
            w,
            &format!(
                "overdue: {} requests skipped ({:.2} %), seen due past --overdue shed's bound: the server saw the process thinned",
                o.skipped,
                100.0 * o.skipped as f64 / a.requests.max(1) as f64
            ),
        )?;
    }
    if let Some(n) = &run.status_note {
        line(w, &format!("{}: {n}", run.status.as_str().to_uppercase()))?;
    }
    if let (Some(sat), lab::RunStatus::Saturated) = (&run.saturation, run.status) {
        line(
            w,
            &format!(
                "SATURATED: offered {:.0} req/s, the server completed {:.0} req/s (its capacity)",
                sat.offered_rps, sat.completed_rps
            ),
        )?;
    }
    if let Some(h) = &run.host_noise {
        line(w, &h.line())?;
    }
    if let Some(t) = &run.load.tls {
        for l in t.line().lines() {
            line(w, l)?;
        }
    }
    if let Some(l) = run.load.error_codes_line() {
        line(w, &l)?;
    }
    why(w, run)?;
    let more = match run.run_id {
        Some(i) => format!("more: tailscope runs show {i} --detail · tailscope report {i}"),
        None => "more: --detail".into(),
    };
    line(w, &more)
}

/// Below a table: why each marked percentile is not the view's (one line each).
fn marked(w: &mut dyn Write, v: &lab::Views, view: View) -> io::Result<()> {
    for l in crate::terminal::marked_lines(v, view) {
        line(w, &l)?;
    }
    Ok(())
}

/// One line: each view valid or not, and which the figures are; the reason an invalid view is
/// invalid on a second line.
fn validity(w: &mut dyn Write, run: &Run) -> io::Result<()> {
    let v = &run.views;
    let word = |valid: bool| if valid { "valid" } else { "INVALID" };
    let server = match &v.server {
        Some(s) => word(s.valid),
        None => "none",
    };
    line(
        w,
        &format!(
            "validity: user view {}, server view {server}; headline: {}",
            word(v.user.valid),
            v.headline_why
        ),
    )?;
    let behind: Vec<String> = [View::User, View::Server]
        .into_iter()
        .filter_map(|view| Some(format!("{view} {}", v.stands_behind(view)?)))
        .collect();
    if !behind.is_empty() {
        line(w, &format!("  stood behind: {}", behind.join("; ")))?;
    }
    if !v.user.valid {
        line(w, &format!("  user view: {}", v.user.why))?;
    }
    if let Some(s) = v.server.as_ref().filter(|s| !s.valid) {
        line(w, &format!("  server view: {}", s.why))?;
    }
    Ok(())
}

/// Whose the p99's excess is, then the leading causes (a grown stage, the sources that line
/// up with the slowest requests), each with its fix.
fn why(w: &mut dyn Write, run: &Run) -> io::Result<()> {
    let a = &run.analysis;
    if let Some(e) = a.excess_split.iter().find(|e| e.key == "p99") {
        if e.total_us.abs() > 1e-9 {
            line(
                w,
                &format!(
                    "why: the p99 is {:.1} µs over its ideal: {:.0} % the client's, {:.0} % the server's",
                    e.total_us,
                    100.0 * e.client_us / e.total_us,
                    100.0 * e.server_us / e.total_us
                ),
            )?;
        }
    }
    let Some(why) = &run.why else { return Ok(()) };
    if let Some(s) = why
        .stages
        .iter()
        .find(|s| s.slow_p50_us > s.median_p50_us + 1.0)
    {
        line(
            w,
            &format!(
                "  stage {}: {:.1} µs in the slowest 1 % vs {:.1} µs at the median",
                s.stage, s.slow_p50_us, s.median_p50_us
            ),
        )?;
    }
    let significant: Vec<_> = why.sources.iter().filter(|s| s.p_value < 0.05).collect();
    if significant.is_empty() {
        line(
            w,
            "  no sampled source lines up with the slowest requests (all p ≥ 0.05)",
        )?;
    }
    for s in significant.iter().take(3) {
        line(
            w,
            &format!(
                "  {}: {:.1}× during slow requests (p = {:.3}) → {}",
                s.source, s.lift, s.p_value, s.mitigation
            ),
        )?;
    }
    Ok(())
}
