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
    let stop = shutdown_flag()?;
    let bar = indicatif::ProgressBar::new(1000);
    bar.set_message(format!("probing {} for {}", a.cpus, a.duration));
    let reports = noise::run(&cfg, &stop, &|f| bar.set_position((f * 1000.0) as u64))?;
    bar.finish_and_clear();
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
