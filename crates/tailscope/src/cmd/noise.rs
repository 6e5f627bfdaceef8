//! `tailscope noise`: the TSC gap probe of Where Has My Time Gone? on the chosen CPUs.

use noise::{LoopKind, NoiseConfig, NoiseError};

use super::common::shutdown_flag;
use crate::cli::NoiseArgs;
use crate::exit::usage;
use crate::limits;
use crate::output;

pub fn run(a: &NoiseArgs) -> anyhow::Result<i32> {
    let cpus = a.cpus.value.0.clone();
    let loop_kind = match a.loop_kind {
        crate::cli::LoopArg::Consecutive => LoopKind::Consecutive,
        crate::cli::LoopArg::Paired => LoopKind::Paired,
    };
    let threshold = a.threshold.value.0.as_nanos() as f64;
    if threshold > limits::MAX_NOISE_THRESHOLD_NS {
        return Err(usage(format!(
            "--threshold must be at most 1s, got {}",
            a.threshold
        )));
    }
    let duration = a.duration.value.0;
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
        sched: a.sched.clone(),
        mlock: a.mlock,
        proc_root: a.root.clone(),
        contributors: a.contributors,
        ..NoiseConfig::default()
    };
    cfg.validate(host::placement::online_cpus())
        .map_err(|e| match e {
            NoiseError::Placement { .. } | NoiseError::Mlock(_) | NoiseError::Thread { .. } => {
                anyhow::Error::new(e)
            }
            other => usage(other),
        })?;
    let plot = a
        .plot
        .as_deref()
        .map(report::host_view::noise_plot_kind)
        .transpose();
    let plot = plot?;
    let stop = shutdown_flag()?;
    let bar = indicatif::ProgressBar::new(1000);
    bar.set_message(format!("probing {} for {}", a.cpus, a.duration));
    let reports = noise::run(&cfg, &stop, &|f| bar.set_position((f * 1000.0) as u64))?;
    bar.finish_and_clear();
    if let (Some(path), Some(svg)) = (&a.plot, plot) {
        report::host_view::noise_plot(path, svg, &reports)?;
    }
    let json = report::host_view::NoiseJson::of(&reports);
    output::print_json_or(a.json, &json, |w| report::host_view::noise(w, &reports))
}
