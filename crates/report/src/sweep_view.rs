//! The terminal view of a sweep: a table per combination of the axes — offered load against
//! achieved rate, the user view's measured and ideal p50/p99/p99.9, the p99 excess, status,
//! each run's headline view (when the caller knows it) and SLO verdict — then the max-load
//! searches.

use std::collections::BTreeMap;
use std::io::{self, Write};

use lab::{Row, SweepResult};
use stats::Distribution;

use crate::terminal::fmt_ns;

fn us(v: Option<&Distribution>, k: &str) -> String {
    v.and_then(|d| d.get(k))
        .map(|x| fmt_ns(x * 1e3))
        .unwrap_or_else(|| "-".into())
}

fn ratio(v: Option<&Distribution>, k: &str) -> String {
    v.and_then(|d| d.get(k))
        .map(|e| format!("{e:.2}x"))
        .unwrap_or_else(|| "-".into())
}

/// A point's knob values (`name=value …`); empty for a sweep without axes, which then has no
/// heading line above its table.
fn params(p: &BTreeMap<String, String>) -> String {
    p.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The sweep, for a person.
pub fn sweep(w: &mut dyn Write, r: &SweepResult) -> io::Result<()> {
    sweep_views(w, r, &BTreeMap::new())
}

/// The sweep, for a person, with each run's headline view (by run id; the `view` column,
/// "-" for a run not in `headlines`).
pub fn sweep_views(
    w: &mut dyn Write,
    r: &SweepResult,
    headlines: &BTreeMap<i64, lab::View>,
) -> io::Result<()> {
    writeln!(
        w,
        "experiment {} · {} · {} runs{}",
        r.experiment_id,
        r.status,
        r.rows.len(),
        r.slo
            .as_ref()
            .map(|s| match s.view {
                lab::ViewChoice::Auto => format!(
                    " · SLO {} (auto view: each run's headline view, see the view column)",
                    s.text
                ),
                v => format!(" · SLO {} ({v} view)", s.text),
            })
            .unwrap_or_default()
    )?;
    let mut groups: Vec<(String, Vec<&Row>)> = Vec::new();
    for row in &r.rows {
        let key = params(&row.params);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(row),
            None => groups.push((key, vec![row])),
        }
    }
    for (key, rows) in groups {
        if key.is_empty() {
            writeln!(w)?;
        } else {
            writeln!(w, "\n{key}")?;
        }
        writeln!(
            w,
            "  {:>6} {:>8} {:>10} {:>10} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>7} {:>10} {:>6} {:>9}",
            "run", "role", "offered", "achieved", "p50", "p99", "p99.9", "ideal p50", "p99",
            "p99.9", "excess", "status", "view", "slo"
        )?;
        let mut daggers = false;
        for x in rows {
            // The figures of the view the view column names; a percentile that view does not
            // stand behind (issue 37) carries a dagger.
            let (measured, ideal, excess) = x.headline_figures();
            let m = |k: &str| {
                let mark = if x.unstood.iter().any(|u| u == k) {
                    crate::terminal::NOT_STOOD_BEHIND
                } else {
                    ""
                };
                format!("{}{mark}", us(measured, k))
            };
            daggers |= !x.unstood.is_empty();
            let offered = match x.load_pct {
                Some(p) => format!("{p:.0}%"),
                None => format!("{:.0}", x.offered_rps),
            };
            writeln!(
                w,
                "  {:>6} {:>8} {:>10} {:>10.0} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>7} {:>10} {:>6} {:>9}",
                x.run_id.map(|i| i.to_string()).unwrap_or_default(),
                x.role,
                offered,
                x.achieved_rps,
                m("p50"),
                m("p99"),
                m("p99.9"),
                us(ideal, "p50"),
                us(ideal, "p99"),
                us(ideal, "p99.9"),
                ratio(excess, "p99"),
                x.status.as_str(),
                x.headline
                    .or_else(|| x.run_id.and_then(|i| headlines.get(&i).copied()))
                    .map_or("-", |v| v.as_str()),
                x.slo.map(|v| v.as_str()).unwrap_or("-"),
            )?;
        }
        if daggers {
            writeln!(w, "{}", crate::terminal::NOT_STOOD_BEHIND_NOTE)?;
        }
    }
    crate::repeat_view::points(w, &r.points)?;
    for m in &r.max_loads {
        match params(&m.params) {
            p if p.is_empty() => writeln!(w, "\nmax load:")?,
            p => writeln!(w, "\nmax load for {p}:")?,
        }
        if let (Some(slo), Some(rate), Some((lo, hi))) = (&m.slo, m.offered_rps, m.bracket_rps) {
            writeln!(
                w,
                "  highest load meeting {slo}: {rate:.0} req/s{} (bracket {lo:.0} .. {})",
                m.load_pct
                    .map(|p| format!(" ({p:.0} % of capacity)"))
                    .unwrap_or_default(),
                hi.map(|h| format!("{h:.0}"))
                    .unwrap_or_else(|| "none failed".into())
            )?;
        }
        if let Some(b) = &m.max_rps {
            writeln!(
                w,
                "  max RPS (achieved >= 99 % of offered, no timeouts): {:.0} req/s{} (bracket {:.0} .. {})",
                b.offered_rps,
                b.load_pct
                    .map(|p| format!(" ({p:.0} % of capacity)"))
                    .unwrap_or_default(),
                b.bracket_rps.0,
                b.bracket_rps
                    .1
                    .map(|h| format!("{h:.0}"))
                    .unwrap_or_else(|| "none failed".into())
            )?;
        }
    }
    if !r.paired.is_empty() {
        writeln!(
            w,
            "\npaired (--interleave: candidate ÷ first, interleaved slices, same arrivals):"
        )?;
        for g in &r.paired {
            let (rows, how) = gain(g);
            writeln!(w, "  {}: {rows}", g.candidate)?;
            writeln!(w, "    {how}")?;
        }
    }
    Ok(())
}

/// A tuning walk, for a person: one line per step.
pub fn tune(w: &mut dyn Write, r: &lab::TuneResult) -> io::Result<()> {
    writeln!(w, "experiment {} · tune · {}", r.experiment_id, r.status)?;
    writeln!(
        w,
        "  {:<9} {:>4} {:>8} | {:>8} {:>8} {:>8} | {:>9} {:>8} | {:>7} {:>12}",
        "step", "run", "status", "p50", "p99", "p99.9", "ideal p50", "p99", "excess", "max load"
    )?;
    for s in &r.steps {
        if let Some(why) = &s.skipped {
            writeln!(w, "  {:<9} skipped: {why}", s.name)?;
            continue;
        }
        let (measured, ideal) = (&s.measured, &s.ideal);
        writeln!(
            w,
            "  {:<9} {:>4} {:>8} | {:>8} {:>8} {:>8} | {:>9} {:>8} | {:>7} {:>12}",
            s.name,
            s.run_id.map(|i| i.to_string()).unwrap_or_default(),
            s.status.map_or("-", |s| s.as_str()),
            us(measured.as_ref(), "p50"),
            us(measured.as_ref(), "p99"),
            us(measured.as_ref(), "p99.9"),
            us(ideal.as_ref(), "p50"),
            us(ideal.as_ref(), "p99"),
            ratio(s.excess.as_ref(), "p99"),
            s.max_load_rps
                .map(|m| format!("{m:.0} req/s"))
                .unwrap_or_else(|| "-".into()),
        )?;
        for c in &s.changes {
            writeln!(w, "            changed: {c}")?;
        }
        if let Some(g) = &s.paired {
            let (rows, how) = gain(g);
            writeln!(w, "            paired {rows}")?;
            writeln!(w, "              {how}")?;
        }
        if let Some(e) = &s.paired_error {
            writeln!(w, "            paired: not measured: {e}")?;
        }
    }
    Ok(())
}

/// A paired comparison inside a loop, in two lines of at most ~85 characters: the verdicts
/// ("vs baseline: p50 better ×0.91 [0.88, 0.94] · p99 …") and how they were reached ("(12
/// pairs at 8000 req/s, user view; experiment 7)").
pub fn gain(g: &lab::ab::Gain) -> (String, String) {
    let rows: Vec<String> = g
        .decide
        .iter()
        .filter_map(|k| g.row(k))
        .map(|r| match r.ratio {
            Some(i) => format!(
                "{} {} ×{:.2} [{:.2}, {:.2}]",
                r.percentile, r.verdict, i.value, i.lo, i.hi
            ),
            None => format!("{} {}", r.percentile, r.verdict),
        })
        .collect();
    (
        format!("vs {}: {}", g.against, rows.join(" · ")),
        format!(
            "({} pairs at {:.0} req/s, {} view{}; experiment {})",
            g.pairs,
            g.rate_rps,
            g.view,
            if g.decided { "" } else { ", not decided" },
            g.experiment
        ),
    )
}

fn load(l: &lab::Load) -> String {
    match l {
        lab::Load::Rps(r) => format!("{r:.0}/s"),
        lab::Load::OfCapacity(f) => format!("{:.0}%", f * 100.0),
    }
}

/// The QoS matrix, as in ThunderX Fig. 11: rows the first service's loads, columns the
/// second's; each cell says who meets its SLO (B = both, A or B alone, - neither) with the
/// two p99s.
pub fn colocation(w: &mut dyn Write, c: &lab::Colocation) -> io::Result<()> {
    writeln!(
        w,
        "experiment {} · colocate · {} · A = {} (rows), B = {} (columns)",
        c.experiment_id, c.status, c.a, c.b
    )?;
    let mut cols: Vec<String> = Vec::new();
    let mut rows: Vec<String> = Vec::new();
    for cell in &c.cells {
        let (r, k) = (load(&cell.load_a), load(&cell.load_b));
        if !rows.contains(&r) {
            rows.push(r);
        }
        if !cols.contains(&k) {
            cols.push(k);
        }
    }
    write!(w, "  {:>8}", "A \\ B")?;
    for k in &cols {
        write!(w, " {:>26}", k)?;
    }
    writeln!(w)?;
    for r in &rows {
        write!(w, "  {r:>8}")?;
        for k in &cols {
            let cell = c
                .cells
                .iter()
                .find(|x| load(&x.load_a) == *r && load(&x.load_b) == *k);
            let text = match cell {
                Some(x) => format!(
                    "{} {}/{}",
                    match x.meets.as_str() {
                        "both" => "AB",
                        "a" => "A ",
                        "b" => " B",
                        _ => "--",
                    },
                    x.p99_a_us
                        .map(|v| fmt_ns(v * 1e3))
                        .unwrap_or_else(|| "-".into()),
                    x.p99_b_us
                        .map(|v| fmt_ns(v * 1e3))
                        .unwrap_or_else(|| "-".into())
                ),
                None => "".into(),
            };
            write!(w, " {:>26}", text)?;
        }
        writeln!(w)?;
    }
    writeln!(
        w,
        "  (AB: both meet their SLO; A or B: only that one; --: neither; then the two p99s)"
    )
}
