//! The terminal view of a run's agents: one row per agent (its share, what it sent, how late
//! it was, its clock against the coordinator's, its status), then why the run failed when an
//! agent did, and what a run without raw records cannot show.

use std::io::{self, Write};

use lab::AgentsReport;
use stats::P99;

fn us(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1} µs"))
        .unwrap_or_else(|| "-".into())
}

pub fn agents(w: &mut dyn Write, a: &AgentsReport) -> io::Result<()> {
    writeln!(
        w,
        "agents ({}; histograms added, never percentiles averaged):",
        if a.records {
            "raw records merged by intended time"
        } else {
            "histograms only"
        }
    )?;
    writeln!(
        w,
        "  {:>3}  {:<11}  {:>9}  {:>10}  {:>10}  {:>11}  {:>10}  {:>14}  command",
        "#", "status", "requests", "offered/s", "achieved/s", "lateness99", "p99", "clock offset"
    )?;
    for r in &a.agents {
        let p99 = r
            .measured
            .as_ref()
            .and_then(|m| m.get(P99))
            .map(|x| format!("{x:.1} µs"))
            .unwrap_or_else(|| "-".into());
        let clock = match (r.clock, r.offset_ns, r.uncertainty_ns) {
            (lab::AgentClock::Shared, _, _) => "shared".to_string(),
            // A time namespace or another host's boot: seconds; a wall clock's drift: ms.
            (_, Some(o), Some(u)) if o.unsigned_abs() >= 1_000_000_000 => {
                format!("{:+.6} s ±{:.0} µs", o as f64 / 1e9, u as f64 / 1e3)
            }
            (_, Some(o), Some(u)) => format!("{:+.3} ms ±{:.0} µs", o as f64 / 1e6, u as f64 / 1e3),
            _ => "-".into(),
        };
        writeln!(
            w,
            "  {:>3}  {:<11}  {:>9}  {:>10.0}  {:>10.0}  {:>11}  {:>10}  {:>14}  {}",
            r.agent,
            r.status,
            r.requests,
            r.offered_rate_rps,
            r.achieved_rate_rps,
            us(r.lateness_p99_us),
            p99,
            clock,
            r.command
        )?;
    }
    if let Some(e) = &a.error {
        writeln!(w, "  FAILED: {e}")?;
    }
    for r in a
        .agents
        .iter()
        .filter(|r| r.status == lab::AgentStatus::Late)
    {
        if let Some(e) = &r.error {
            writeln!(w, "  agent {} is late: {e}", r.agent)?;
        }
    }
    for n in &a.notes {
        writeln!(w, "  note: {n}")?;
    }
    if let Some(m) = &a.missing {
        writeln!(w, "  missing: {m}")?;
    }
    Ok(())
}
