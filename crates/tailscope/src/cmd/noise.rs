//! `tailscope noise`: the TSC gap probe of Where Has My Time Gone? on the chosen CPUs.

use noise::{LoopKind, NoiseConfig, NoiseError};
use serde_json::json;

use super::common::{parse_duration, parse_sched, shutdown_flag};
use crate::cli::NoiseArgs;
use crate::exit::{usage, OrUsage};
use crate::limits;
use crate::output::{self, fmt_ns, outln};

pub fn run(a: &NoiseArgs) -> anyhow::Result<i32> {
    let cpus = host::placement::parse_cpu_list(&a.cpus).or_usage_ctx("--cpus")?;
    let loop_kind = match a.loop_kind {
        crate::cli::LoopArg::Consecutive => LoopKind::Consecutive,
        crate::cli::LoopArg::Paired => LoopKind::Paired,
    };
    let threshold = model::parse_duration_ns(&a.threshold).or_usage_ctx("--threshold")?;
    if threshold > limits::MAX_NOISE_THRESHOLD_NS {
        return Err(usage(format!(
            "--threshold must be at most 1s, got {}",
            a.threshold
        )));
    }
    let duration = parse_duration("--duration", &a.duration)?;
    if duration > limits::MAX_NOISE_DURATION {
        return Err(usage(format!(
            "--duration must be at most {} s, got {}",
            limits::MAX_NOISE_DURATION.as_secs(),
            a.duration
        )));
    }
    let cfg = NoiseConfig {
        cpus,
        duration,
        threshold_ns: threshold.round() as u64,
        loop_kind,
        sched: parse_sched(a.sched.as_deref())?,
        mlock: a.mlock,
        proc_root: a.root.clone(),
        ..NoiseConfig::default()
    };
    cfg.validate(host::placement::online_cpus())
        .map_err(|e| match e {
            NoiseError::Placement { .. } | NoiseError::Mlock(_) | NoiseError::Thread { .. } => {
                anyhow::Error::new(e)
            }
            other => usage(other),
        })?;
    let plot = plot_kind(a)?;
    let stop = shutdown_flag()?;
    let bar = indicatif::ProgressBar::new(1000);
    bar.set_message(format!("probing {} for {}", a.cpus, a.duration));
    let reports = noise::run(&cfg, &stop, &|f| bar.set_position((f * 1000.0) as u64))?;
    bar.finish_and_clear();
    if let (Some(path), Some(svg)) = (&a.plot, plot) {
        write_plot(path, svg, &reports)?;
    }
    if a.json {
        output::print_json(&json!({
            "clock": noise::clock_kind().describe(),
            "ns_per_tick": noise::tsc_ns_per_tick(),
            "cpus": reports.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
        }))?;
        return Ok(0);
    }
    outln!("clock: {}", noise::clock_kind().describe())?;
    outln!("SNR: {}", noise::SNR_DEFINITION)?;
    for r in &reports {
        let g = |k: &str| {
            r.gap_summary
                .as_ref()
                .and_then(|s| s.get(k))
                .map(|e| fmt_ns(e.value))
                .unwrap_or_else(|| "-".into())
        };
        outln!(
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
        outln!(
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
        print_paper_view(r)?;
        for c in &r.gap_classes {
            outln!(
                "  {:<5} gaps: {:>8}, time lost {}",
                c.class.name(),
                c.count,
                fmt_ns(c.lost_ns as f64)
            )?;
        }
        for c in &r.classes {
            outln!(
                "  {:<32} {:>10} ({:>8.1}/s) {:<5} {}",
                c.source,
                c.delta,
                c.per_s,
                c.class.name(),
                c.note
            )?;
        }
        for w in &r.warnings {
            outln!("  warning: {w}")?;
        }
    }
    Ok(0)
}

/// Where Has My Time Gone?'s own figures for a CPU: its SNR (time below the iterations'
/// p99.9 over time above it) and the loop's p99.9 with its Good/Bad/Ugly class.
fn print_paper_view(r: &noise::CpuReport) -> anyhow::Result<()> {
    if let Some(p) = &r.paper_snr {
        if p.exact() {
            outln!("  paper's SNR (below p99.9 ÷ above): {:.1}", p.low)?;
        } else {
            outln!(
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
            outln!("  loop p99.9: {} ({class})", fmt_ns(q.low_ns))?;
        } else {
            let hi = if q.high_ns.is_finite() {
                fmt_ns(q.high_ns)
            } else {
                "∞".into()
            };
            outln!("  loop p99.9: {} to {hi} ({class})", fmt_ns(q.low_ns))?;
        }
    }
    Ok(())
}

/// Whether `--plot` is an SVG (else PNG), checked writable before the probe runs.
fn plot_kind(a: &NoiseArgs) -> anyhow::Result<Option<bool>> {
    let Some(p) = &a.plot else {
        return Ok(None);
    };
    let svg = match p.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => true,
        Some(e) if e.eq_ignore_ascii_case("png") => false,
        _ => {
            return Err(usage(format!(
                "--plot {}: name a .png or .svg file",
                p.display()
            )))
        }
    };
    output::check_writable("--plot", p)?;
    Ok(Some(svg))
}

/// The gap CDF and time-lost CCDF of every probed CPU, written to `path`.
fn write_plot(
    path: &std::path::Path,
    svg: bool,
    reports: &[noise::CpuReport],
) -> anyhow::Result<()> {
    use report::figure::{color, gap_cdf, Body, Figure, NoiseCurve, NoiseFigure};
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
        std::fs::write(path, f.svg()?)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    } else {
        f.png(path)?;
    }
    Ok(())
}
