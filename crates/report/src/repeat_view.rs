//! The terminal view of a repeated point (`run --repeat N`, a sweep's points): one line per
//! repeat, then the median of the repeats per view with the interval from their spread — the
//! figures that verdicts read.

use std::io::{self, Write};

use lab::{Combined, Repeated, Run};

use crate::terminal::fmt_ns;

const KEYS: [&str; 4] = ["p50", "p90", "p99", "p99.9"];

/// The median of the repeats with the interval from their spread; from fewer than 3 valid
/// repeats, their range instead ("median (a to b)"): a t interval with one degree of freedom
/// spans several orders of magnitude and says less than the two values themselves.
fn est(c: Option<&Combined>, key: &str) -> String {
    let Some((c, e)) = c.and_then(|c| Some((c, c.summary.get(key)?))) else {
        return "-".into();
    };
    let vals = c.estimates.iter().find(|(k, _)| k == key).map(|x| &x.1);
    match vals {
        Some(v) if v.len() < 3 => {
            let (lo, hi) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                    (a.min(*x), b.max(*x))
                });
            format!("{} ({} to {})", fmt_ns(e.value), fmt_ns(lo), fmt_ns(hi))
        }
        _ => format!("{} [{}, {}]", fmt_ns(e.value), fmt_ns(e.lo), fmt_ns(e.hi)),
    }
}

/// The repeats and their combination, for a person.
pub fn repeated(w: &mut dyn Write, runs: &[Run], p: &Repeated) -> io::Result<()> {
    writeln!(w, "{} repeats · {}", p.repeats, p.status)?;
    for (i, r) in runs.iter().enumerate() {
        let a = &r.analysis;
        let get = |s: &stats::Summary, k: &str| s.get(k).map_or("-".into(), |e| fmt_ns(e.value));
        let sv = a.server_view.as_ref().map(|s| &s.measured);
        writeln!(
            w,
            "  repeat {} (run {}): {:<11} user p50 {:>9} p99 {:>9} · server p50 {:>9} p99 {:>9} · lateness p99 {}",
            i + 1,
            r.run_id.map_or("-".into(), |id| id.to_string()),
            r.status.as_str(),
            get(&a.measured, "p50"),
            get(&a.measured, "p99"),
            sv.map_or("-".into(), |s| get(s, "p50")),
            sv.map_or("-".into(), |s| get(s, "p99")),
            get(&a.lateness, "p99"),
        )?;
    }
    writeln!(
        w,
        "\nmedian of the repeats [{} % interval from their spread; (range) from fewer than 3]",
        {
            let c = p
                .user
                .as_ref()
                .or(p.server.as_ref())
                .map_or(0.95, |c| c.summary.confidence);
            (c * 100.0).round()
        }
    )?;
    for (name, c) in [("user view", &p.user), ("server view", &p.server)] {
        let counted = c.as_ref().map_or(0, |c| c.counted);
        write!(w, "  {name:<12} ({counted} of {} valid)", p.repeats)?;
        if c.is_none() {
            writeln!(
                w,
                "  fewer than 2 repeats measured this view validly: no interval from their spread"
            )?;
            continue;
        }
        writeln!(w)?;
        for k in KEYS {
            writeln!(w, "    {k:<6} {}", est(c.as_ref(), k))?;
        }
    }
    if let Some(x) = &p.excess {
        let line: Vec<String> = ["p50", "p99", "p99.9"]
            .iter()
            .filter_map(|k| {
                x.summary
                    .get(k)
                    .map(|e| format!("{k} {:.2}x [{:.2}, {:.2}]", e.value, e.lo, e.hi))
            })
            .collect();
        writeln!(w, "  excess (user view) {}", line.join(" · "))?;
    }
    writeln!(w, "  interval: {}", p.method)
}

/// A sweep's points whose repeats were combined: one line per point (median and interval of
/// p50 and p99 in each view, the status and the SLO verdict of the combination).
pub fn points(w: &mut dyn Write, points: &[lab::Point]) -> io::Result<()> {
    if points.iter().all(|p| p.result.repeats <= 1) {
        return Ok(());
    }
    writeln!(
        w,
        "\npoints: median of the repeats [interval from their spread] or (range, under 3 repeats)"
    )?;
    for p in points {
        let params: Vec<String> = p.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let load = match p.load_pct {
            Some(pct) => format!("{pct:.0}%"),
            None => format!("{:.0} req/s", p.offered_rps),
        };
        writeln!(
            w,
            "  {}{load} · {} repeats · {} · slo {}",
            params.iter().map(|p| format!("{p} ")).collect::<String>(),
            p.result.repeats,
            p.result.status,
            p.slo.map_or("-", |v| v.as_str())
        )?;
        for (name, c) in [("user", &p.result.user), ("server", &p.result.server)] {
            writeln!(
                w,
                "    {name:<6} p50 {:<32} p99 {}",
                est(c.as_ref(), "p50"),
                est(c.as_ref(), "p99")
            )?;
        }
    }
    Ok(())
}
