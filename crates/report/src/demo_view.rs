//! `tailscope demo`'s own lines: what each run shows this host allows, the closing summary
//! (which view to read here) and how far the repeats of each load spread.

use lab::summary::RunSummary;
use serde_json::Value;

use crate::terminal::fmt_ns;

/// What a run shows this host allows, in one line: the status, each view's validity, the
/// headline view and its numbers (`headline: server view` is the run's `headline_view`).
pub fn allows(label: &str, run: &lab::Run) -> String {
    let v = &run.views;
    let word = |ok: bool| if ok { "valid" } else { "invalid" };
    let server = match &v.server {
        Some(s) => format!("server view {} ({})", word(s.valid), s.why),
        None => "no server view".into(),
    };
    let a = &run.analysis;
    let (measured, ideal) = match v.headline {
        lab::View::User => (Some(&a.measured), a.ideal.as_ref()),
        lab::View::Server => (
            a.server_view.as_ref().map(|s| &s.measured),
            a.server_view.as_ref().and_then(|s| s.ideal.as_ref()),
        ),
    };
    let q = |s: Option<&stats::Summary>, k: &str| {
        s.and_then(|s| s.get(k))
            .map_or("-".into(), |e| fmt_ns(e.value))
    };
    format!(
        "{label} (run {}): {}; user view {} ({}); {server}; headline: {} view: p50 {}, p99 {}, p99.9 {} (ideal p99 {}){}",
        run.run_id.map_or("-".into(), |i| i.to_string()),
        run.status,
        word(v.user.valid),
        v.user.why,
        v.headline,
        q(measured, "p50"),
        q(measured, "p99"),
        q(measured, "p99.9"),
        q(ideal, "p99"),
        if v.is_valid(v.headline) {
            ""
        } else {
            " — NOT VALID"
        }
    )
}

/// The closing lines: the host's noise (its probe's one line, when probed), then per load what this host allows, then which
/// view to read here.
pub fn closing(host: Option<&str>, per_run: &[String], runs: &[Value]) -> Vec<String> {
    let mut out = vec!["what this host allows:".to_string()];
    out.push(match host {
        Some(h) => format!("  {h}"),
        None => "  host noise: not probed".into(),
    });
    out.extend(per_run.iter().map(|l| format!("  {l}")));
    let runs: Vec<RunSummary> = runs.iter().map(RunSummary::of).collect();
    let heads: Vec<&str> = runs
        .iter()
        .filter_map(|r| r.headline_view.as_deref())
        .collect();
    let valid = |view: &str| {
        runs.iter()
            .filter(|r| {
                let v = r.views.as_ref().and_then(|v| v.of(view));
                v.and_then(|v| v.valid) == Some(true)
            })
            .count()
    };
    let (user, server) = (valid("user"), valid("server"));
    let n = runs.len();
    out.push(if n == 0 {
        "  no run was measured".into()
    } else if user == n {
        "  the user view is valid at every load: the generator kept its schedule on this host; read the user view".into()
    } else if server == n {
        format!(
            "  the user view is valid at {user} of {n} loads (the generator was late), the server view at every load: on this host read the server view (headlines: {})",
            heads.join(", ")
        )
    } else {
        format!(
            "  the user view is valid at {user} of {n} loads, the server view at {server}: read each run's headline view (headlines: {})",
            heads.join(", ")
        )
    });
    out
}

/// How far the repeats of each load spread, in the view each load is read from: the host's
/// drift between runs, which no single run's interval can show.
pub fn spread(points: &[lab::Point]) -> Vec<String> {
    let mut out = Vec::new();
    for p in points.iter().filter(|p| p.result.repeats > 1) {
        let r = &p.result;
        let (name, c) = match r.headline {
            lab::View::User => ("user", r.user.as_ref()),
            lab::View::Server => ("server", r.server.as_ref()),
        };
        let load = p
            .load_pct
            .map_or(format!("{:.0} req/s", p.offered_rps), |l| {
                format!("{l:.0}%")
            });
        let Some(c) = c else {
            out.push(format!(
                "  {load}: {} repeats, fewer than 2 of them measured a view validly",
                r.repeats
            ));
            continue;
        };
        let line = |key: &str| -> Option<String> {
            let e = c.summary.get(key)?;
            let vals = &c.estimates.iter().find(|(k, _)| k == key)?.1;
            let (lo, hi) = vals
                .iter()
                .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(*v), b.max(*v)));
            // Two repeats give a t(1) interval too wide to print usefully: their range says
            // more.
            let interval = if vals.len() >= 3 {
                format!(" [{}, {}]", fmt_ns(e.lo), fmt_ns(e.hi))
            } else {
                String::new()
            };
            Some(format!(
                "{key} {}{interval} (repeats {} to {}, x{:.2})",
                fmt_ns(e.value),
                fmt_ns(lo),
                fmt_ns(hi),
                if lo > 0.0 { hi / lo } else { f64::NAN }
            ))
        };
        out.push(format!(
            "  {load}: median of {} valid of {} repeats, {name} view: {}; {}",
            c.counted,
            r.repeats,
            line("p50").unwrap_or_default(),
            line("p99").unwrap_or_default()
        ));
    }
    if !out.is_empty() {
        out.insert(
            0,
            "how far the repeats spread (the host drifts between runs; only repeats show it — with 3 or more, an interval from their spread; --repeat):".into(),
        );
    }
    out
}

/// `text` folded into lines of at most `width` characters at spaces, the later ones indented
/// by `indent`.
pub fn wrap(text: &str, width: usize, indent: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        let lead = if out.is_empty() { "" } else { indent };
        let len = |s: &str| s.chars().count();
        if !cur.is_empty() && len(lead) + len(&cur) + 1 + len(word) > width {
            out.push(format!("{lead}{cur}"));
            cur = String::new();
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() || out.is_empty() {
        let lead = if out.is_empty() { "" } else { indent };
        out.push(format!("{lead}{cur}"));
    }
    out
}

/// The demo's end on one screen: one row per run (its load, its headline view's figures and
/// the excess at p99), how far each load's repeats spread (their range), which view to read
/// on this host, the picture, and the next commands.
pub fn brief(
    w: &mut dyn std::io::Write,
    experiment: i64,
    runs: &[Value],
    points: &[lab::Point],
    host: Option<&str>,
    written: &[String],
) -> std::io::Result<()> {
    const W: usize = crate::brief::WIDTH;
    let fit = |s: &str| lab::clip_to(s, W - 1).into_owned();
    if let Some(h) = host {
        writeln!(w, "{}", fit(h))?;
    }
    writeln!(
        w,
        "  {:>5} {:>5}  {:<7} {:>9} {:>9} {:>9} {:>10} {:>8}  status",
        "load", "run", "view", "p50", "p99", "p99.9", "ideal p99", "excess"
    )?;
    let mut daggers = false;
    for v in runs {
        let r = RunSummary::of(v);
        let view = r.headline_view.as_deref().unwrap_or("user");
        let (m, i, e) = match (view, r.server_view()) {
            ("server", Some(sv)) => (sv.measured.as_ref(), sv.ideal.as_ref(), sv.excess.as_ref()),
            _ => (r.measured.as_ref(), r.ideal.as_ref(), r.excess.as_ref()),
        };
        // A percentile the view does not stand behind (issue 37) carries a dagger.
        let unstood = |k: &str| r.views.as_ref().and_then(|x| x.unstood(view, k)).is_some();
        let us = |d, k: &str| {
            lab::summary::figure(d, k).map_or("-".into(), |x| {
                let mark = if unstood(k) {
                    crate::terminal::NOT_STOOD_BEHIND
                } else {
                    ""
                };
                format!("{}{mark}", fmt_ns(x * 1e3))
            })
        };
        let valid = r
            .views
            .as_ref()
            .and_then(|x| x.of(view))
            .and_then(|x| x.valid)
            .unwrap_or(false);
        let status = r.status.map_or("-", |s| s.as_str());
        writeln!(
            w,
            "{}",
            fit(&format!(
                "  {:>5} {:>5}  {:<7} {:>9} {:>9} {:>9} {:>10} {:>8}  {}{}",
                format!("{:.0}%", r.load_pct.unwrap_or(0.0)),
                v["run_id"].as_i64().map_or("-".into(), |i| i.to_string()),
                view,
                us(m, "p50"),
                us(m, "p99"),
                us(m, "p99.9"),
                lab::summary::figure(i, "p99").map_or("-".into(), |x| fmt_ns(x * 1e3)),
                lab::summary::figure(e, "p99").map_or("-".into(), |x| format!("{x:.2}×")),
                status,
                if valid { "" } else { " (view not valid)" }
            ))
        )?;
        daggers |= ["p50", "p99", "p99.9"].iter().any(|k| unstood(k));
    }
    if daggers {
        writeln!(w, "{}", fit(crate::terminal::NOT_STOOD_BEHIND_NOTE))?;
    }
    for p in points.iter().filter(|p| p.result.repeats > 1) {
        let r = &p.result;
        let c = match r.headline {
            lab::View::User => r.user.as_ref(),
            lab::View::Server => r.server.as_ref(),
        };
        let Some(c) = c else { continue };
        let Some(vals) = c.estimates.iter().find(|(k, _)| k == "p99").map(|x| &x.1) else {
            continue;
        };
        let (lo, hi) = vals
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(*v), b.max(*v)));
        if vals.len() < 2 || lo <= 0.0 {
            continue;
        }
        writeln!(
            w,
            "{}",
            fit(&format!(
                "  {:.0}%: p99 of {} repeats from {} to {} (×{:.2}): the host's drift between runs",
                p.load_pct.unwrap_or(0.0),
                vals.len(),
                fmt_ns(lo),
                fmt_ns(hi),
                hi / lo
            ))
        )?;
    }
    let closing = closing(None, &[], runs);
    if let Some(last) = closing.last() {
        for l in wrap(last.trim(), W, "  ") {
            writeln!(w, "{l}")?;
        }
    }
    for f in written {
        writeln!(
            w,
            "{}",
            fit(&format!("wrote {f} (measured solid, ideal dashed)"))
        )?;
    }
    writeln!(w, "next:")?;
    for l in [
        format!("  tailscope report --experiment {experiment}      # the HTML report of these runs"),
        "  tailscope run nullrpc:// --spawn --rate 60%     # one run, on one screen (--detail: all)"
            .to_string(),
        "  tailscope ab nullrpc:// 'nullrpc:// --server-work det:60us' --spawn --rate 40% --until-decided"
            .to_string(),
    ] {
        writeln!(w, "{}", fit(&l))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(user: bool, server: bool, headline: &str) -> Value {
        json!({"headline_view": headline,
               "views": {"user": {"valid": user}, "server": {"valid": server}}})
    }

    #[test]
    fn closing_says_which_view_to_read() {
        let all_user = closing(
            Some("host noise: quiet"),
            &["a".into()],
            &[run(true, true, "user")],
        );
        assert_eq!(all_user[1], "  host noise: quiet");
        assert_eq!(all_user[2], "  a");
        assert!(all_user[3].contains("read the user view"), "{all_user:?}");
        let late = closing(
            None,
            &[],
            &[run(false, true, "server"), run(true, true, "user")],
        );
        assert_eq!(late[1], "  host noise: not probed");
        assert!(late[2].contains("valid at 1 of 2 loads"), "{late:?}");
        assert!(late[2].contains("read the server view (headlines: server, user)"));
        assert_eq!(closing(None, &[], &[])[2], "  no run was measured");
    }
}
