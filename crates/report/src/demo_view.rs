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
