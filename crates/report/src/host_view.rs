//! Views of the host commands: `noise` (the TSC gap probe per CPU, its plot), `stress` (what
//! a stressor did) and `doctor` (the checks, what to change, the mitigation plan); as text for
//! a person and as their `--json` objects.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use host::probe::{Check, Status};
use noise::CpuReport;
use serde::Serialize;

use crate::files::{check_writable, FileError};
use crate::terminal::fmt_ns;
use crate::ReportError;

/// `noise --json`.
#[derive(Serialize)]
pub struct NoiseJson {
    pub clock: &'static str,
    pub ns_per_tick: f64,
    pub cpus: Vec<serde_json::Value>,
}

impl NoiseJson {
    pub fn of(reports: &[CpuReport]) -> Self {
        NoiseJson {
            clock: noise::clock_kind().describe(),
            ns_per_tick: noise::tsc_ns_per_tick(),
            cpus: reports.iter().map(CpuReport::to_json).collect(),
        }
    }
}

/// The probe's findings per CPU, for a person.
pub fn noise(w: &mut dyn Write, reports: &[CpuReport]) -> io::Result<()> {
    writeln!(w, "clock: {}", noise::clock_kind().describe())?;
    writeln!(w, "SNR: {}", noise::SNR_DEFINITION)?;
    for r in reports {
        let g = |k: &str| {
            r.gap_summary
                .as_ref()
                .and_then(|s| s.get(k))
                .map(|e| fmt_ns(e.value))
                .unwrap_or_else(|| "-".into())
        };
        writeln!(
            w,
            "\nCPU {}: min loop {:.1} ns · {:.0} gaps/s above {} · time lost {:.3}% · SNR {:.0}{}",
            r.cpu,
            r.min_loop_ns,
            r.gaps_per_s,
            fmt_ns(r.threshold_ns as f64),
            r.time_lost_fraction * 100.0,
            r.snr,
            if r.rt_throttled {
                " · RT-throttled (those gaps are not counted as noise)"
            } else {
                ""
            }
        )?;
        writeln!(
            w,
            "  gaps: p50 {} · p90 {} · p99 {} · p99.9 {} · max {}",
            g("p50"),
            g("p90"),
            g("p99"),
            g("p99.9"),
            r.gap_summary
                .as_ref()
                .map(|s| fmt_ns(s.max_ns))
                .unwrap_or_else(|| "-".into())
        )?;
        paper_view(w, r)?;
        for c in &r.gap_classes {
            writeln!(
                w,
                "  {:<5} gaps: {:>8}, time lost {}",
                c.class.name(),
                c.count,
                fmt_ns(c.lost_ns as f64)
            )?;
        }
        contributors(w, r)?;
        for warning in &r.warnings {
            writeln!(w, "  warning: {warning}")?;
        }
    }
    Ok(())
}

/// A CPU's contributors: measured ones (eBPF) classed by their p99.9, then the counters
/// with their nominal classes.
fn contributors(w: &mut dyn Write, r: &CpuReport) -> io::Result<()> {
    if r.contributor_source == noise::Contributors::Ebpf {
        writeln!(
            w,
            "  contributors, timed by eBPF on this CPU and classed by their measured p99.9 \
             (percentiles: the middle of their bucket, within 6.25 %; --json has the bounds):"
        )?;
        writeln!(
            w,
            "    {:<34} {:>8} {:>9} {:>9} {:>9} {:>9} {:<5} {:>9}",
            "source", "count", "p50", "p99", "p99.9", "max", "class", "% of lost"
        )?;
        let mid = |q: &noise::measured::Bucketed| fmt_ns((q.low_ns + q.high_ns) as f64 / 2.0);
        for c in &r.measured {
            writeln!(
                w,
                "    {:<34} {:>8} {:>9} {:>9} {:>9} {:>9} {:<5} {:>9}",
                c.source,
                c.count,
                mid(&c.p50),
                mid(&c.p99),
                mid(&c.p999),
                fmt_ns(c.max_ns as f64),
                c.class.name(),
                c.lost_share
                    .map_or("-".into(), |s| format!("{:.1}", s * 100.0))
            )?;
        }
        if let Some(t) = &r.ebpf {
            if t.cost.measured {
                writeln!(
                    w,
                    "    (the programs ran {} times for {} in all, on every CPU{})",
                    t.cost.runs,
                    fmt_ns(t.cost.run_time_ns as f64),
                    if t.no_slot > 0 {
                        format!("; {} events found the histogram map full", t.no_slot)
                    } else {
                        String::new()
                    }
                )?;
            }
        }
        writeln!(w, "  counters (nominal classes, for comparison):")?;
    } else {
        writeln!(
            w,
            "  contributors from counters, classed by nominal cost capped by the longest gap{}:",
            r.contributors_reason
                .as_ref()
                .map_or(String::new(), |why| format!(" (eBPF not used: {why})"))
        )?;
    }
    for c in &r.classes {
        writeln!(
            w,
            "    {:<32} {:>10} ({:>8.1}/s) {:<5} {}",
            c.source,
            c.delta,
            c.per_s,
            c.class.name(),
            c.note
        )?;
    }
    Ok(())
}

/// Where Has My Time Gone?'s own figures for a CPU: its SNR (time below the iterations'
/// p99.9 over time above it) and the loop's p99.9 with its Good/Bad/Ugly class.
fn paper_view(w: &mut dyn Write, r: &CpuReport) -> io::Result<()> {
    if let Some(p) = &r.paper_snr {
        if p.exact() {
            writeln!(w, "  paper's SNR (below p99.9 ÷ above): {:.1}", p.low)?;
        } else {
            writeln!(
                w,
                "  paper's SNR (below p99.9 ÷ above): between {:.1} and {:.1} (the slowest 0.1 % reach below the {} threshold)",
                p.low,
                p.high,
                fmt_ns(r.threshold_ns as f64)
            )?;
        }
    }
    if let Some(q) = &r.loop_p999 {
        let class = q.class.map_or("between classes", |c| c.name());
        if q.low_ns == q.high_ns {
            writeln!(w, "  loop p99.9: {} ({class})", fmt_ns(q.low_ns))?;
        } else {
            let hi = if q.high_ns.is_finite() {
                fmt_ns(q.high_ns)
            } else {
                "∞".into()
            };
            writeln!(w, "  loop p99.9: {} to {hi} ({class})", fmt_ns(q.low_ns))?;
        }
    }
    Ok(())
}

/// Whether a noise plot at `path` is an SVG (else a PNG), checked writable before the probe
/// runs.
pub fn noise_plot_kind(path: &Path) -> Result<bool, FileError> {
    let svg = match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => true,
        Some(e) if e.eq_ignore_ascii_case("png") => false,
        _ => {
            return Err(FileError::Refused(format!(
                "--plot {}: name a .png or .svg file",
                path.display()
            )))
        }
    };
    check_writable("--plot", path)?;
    Ok(svg)
}

/// The gap CDF and time-lost CCDF of every probed CPU, written to `path`.
pub fn noise_plot(path: &Path, svg: bool, reports: &[CpuReport]) -> Result<(), ReportError> {
    use crate::figure::{color, gap_cdf, Body, Figure, NoiseCurve, NoiseFigure};
    let curves = reports
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let lens: Vec<u64> = r
                .gaps
                .iter()
                .filter(|g| !g.throttle)
                .map(|g| g.len_ns)
                .collect();
            NoiseCurve {
                label: format!("CPU {}", r.cpu),
                color: color(i),
                gap_cdf: gap_cdf(&lens),
                lost_ccdf: r.lost_ccdf.iter().map(|&(x, f)| (x / 1000.0, f)).collect(),
            }
        })
        .collect();
    let f = Figure {
        name: "noise".into(),
        title: format!(
            "host noise: gaps above {}",
            fmt_ns(reports.first().map_or(0, |r| r.threshold_ns) as f64)
        ),
        width: 1000,
        height: 420,
        body: Body::Noise(NoiseFigure { curves }),
    };
    if svg {
        std::fs::write(path, f.svg()?).map_err(|e| ReportError::Write {
            path: path.display().to_string(),
            msg: e.to_string(),
        })?;
    } else {
        f.png(path)?;
    }
    Ok(())
}

/// What a stressor did, for a person.
pub fn stress(w: &mut dyn Write, r: &stress::Report) -> io::Result<()> {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    writeln!(
        w,
        "{} stressor on CPUs {} at intensity {}: {:.1} s",
        r.kind.name(),
        host::probe::format_cpu_list(&r.cpus),
        r.intensity,
        r.duration_s
    )?;
    let touched = if r.bytes > 0 {
        format!(
            ", {:.0} MiB touched ({:.0} MiB/s)",
            mib(r.bytes),
            r.bytes_per_s / (1u64 << 20) as f64
        )
    } else {
        String::new()
    };
    writeln!(
        w,
        "  iterations {} ({:.3e}/s){touched}",
        r.iterations, r.iterations_per_s
    )?;
    if r.buffer_bytes > 0 {
        writeln!(
            w,
            "  buffer {:.1} MiB per thread; LLC {:.1} MiB ({})",
            mib(r.buffer_bytes),
            mib(r.llc_bytes),
            r.llc_source
        )?;
    }
    for t in &r.threads {
        writeln!(
            w,
            "  cpu {}: {} iterations, {:.0} MiB",
            t.cpu,
            t.iterations,
            mib(t.bytes)
        )?;
    }
    Ok(())
}

/// `doctor --json`.
#[derive(Serialize)]
pub struct DoctorJson<'a> {
    pub checks: &'a [Check],
    pub plan: &'a [String],
    pub applied: bool,
    pub reverted_leftovers: usize,
}

/// The doctor's report as one text: the JSON object (`json`), or for a person every check,
/// what to change, and the plan.
pub fn doctor(json: bool, v: &DoctorJson<'_>) -> Result<String, ReportError> {
    if json {
        let value = serde_json::to_value(v).map_err(|e| ReportError::Io(e.into()))?;
        let text = serde_json::to_string_pretty(&value).map_err(|e| ReportError::Io(e.into()))?;
        return Ok(format!("{text}\n"));
    }
    doctor_text(v.checks, v.plan, v.reverted_leftovers, v.applied)
        .map_err(|e| ReportError::Io(io::Error::other(e)))
}

/// The terminal report: every check, what to change, and the plan.
fn doctor_text(
    checks: &[Check],
    plan_text: &[String],
    reverted: usize,
    applied: bool,
) -> Result<String, std::fmt::Error> {
    let mut s = String::new();
    if reverted > 0 {
        writeln!(
            s,
            "reverted {reverted} change(s) left by an earlier tailscope that did not exit cleanly"
        )?;
    }
    writeln!(s, "{:<8} {:<22} evidence", "status", "check")?;
    for c in checks {
        let st = match c.status {
            Status::Ok => "ok",
            Status::Warn => "WARN",
            Status::Bad => "BAD",
            Status::Unknown => "unknown",
        };
        writeln!(s, "{st:<8} {:<22} {}", c.id, c.evidence)?;
    }
    let todo: Vec<_> = checks
        .iter()
        .filter(|c| matches!(c.status, Status::Warn | Status::Bad))
        .collect();
    if !todo.is_empty() {
        writeln!(s, "\nwhat to change:")?;
        for c in todo {
            let how = match (c.needs_root, c.needs_reboot) {
                (_, true) => " [needs a reboot]",
                (true, false) => " [needs root]",
                _ => "",
            };
            writeln!(
                s,
                "  {}: {}{how}\n      trade-off: {}",
                c.id, c.mitigation, c.tradeoff
            )?;
        }
    }
    if plan_text.is_empty() {
        writeln!(s, "\nno safe, reversible mitigation applies")?;
    } else if applied {
        writeln!(s, "\napplied (reverted when you press Ctrl-C):")?;
    } else {
        writeln!(s, "\n--apply would (dry run, nothing changed):")?;
    }
    for p in plan_text {
        writeln!(s, "  {p}")?;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_noise_plot_is_an_svg_or_a_png() {
        let dir = tempfile::tempdir().unwrap();
        assert!(noise_plot_kind(&dir.path().join("n.SVG")).unwrap());
        assert!(!noise_plot_kind(&dir.path().join("n.png")).unwrap());
        let e = noise_plot_kind(&dir.path().join("n.txt")).unwrap_err();
        assert!(
            e.is_refused() && e.to_string().contains(".png or .svg"),
            "{e}"
        );
    }

    #[test]
    fn the_doctor_says_what_it_would_do() {
        let plan = vec!["hold /dev/cpu_dma_latency at 0".to_string()];
        let v = DoctorJson {
            checks: &[],
            plan: &plan,
            applied: false,
            reverted_leftovers: 2,
        };
        let text = doctor(false, &v).unwrap();
        assert!(text.starts_with("reverted 2 change(s)"), "{text}");
        assert!(text.contains(
            "--apply would (dry run, nothing changed):\n  hold /dev/cpu_dma_latency at 0"
        ));
        let json: serde_json::Value = serde_json::from_str(&doctor(true, &v).unwrap()).unwrap();
        assert_eq!(json["reverted_leftovers"], 2);
        assert_eq!(json["plan"][0], plan[0]);
        let none = DoctorJson { plan: &[], ..v };
        assert!(doctor(false, &none)
            .unwrap()
            .contains("no safe, reversible mitigation applies"));
    }
}
