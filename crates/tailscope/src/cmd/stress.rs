//! `tailscope stress`: a built-in interference generator on chosen CPUs until --duration or
//! Ctrl-C, then what it did (the same stressors a sweep's `stress` axis runs beside a run).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use host::probe::HostRoot;
use stress::{StressSpec, Stressor};

use super::common::shutdown_flag;
use crate::cli::StressArgs;
use crate::exit::{usage, OrUsage};
use crate::output;

pub fn run(a: &StressArgs) -> anyhow::Result<i32> {
    let cpus = a.cpus.0.clone();
    if cpus.is_empty() {
        return Err(usage("--cpus: no CPU given"));
    }
    stress::check_intensity(a.intensity).or_usage_ctx("--intensity")?;
    let duration = a.duration.map(|d| d.0);
    if duration.is_some_and(|d| d.is_zero()) {
        return Err(usage("--duration must be positive"));
    }
    if !a.root.is_dir() {
        return Err(usage(format!(
            "--root {} is not a directory",
            a.root.display()
        )));
    }
    let spec = StressSpec {
        kind: a.kind,
        cpus,
        intensity: a.intensity,
    };
    // The handler goes in first: Ctrl-C is how a stressor without --duration ends.
    let stop = shutdown_flag()?;
    let s = Stressor::start(&spec, &HostRoot::new(&a.root))?;
    if !a.json {
        eprintln!(
            "stressing: {spec}{} (Ctrl-C stops)",
            duration
                .map(|d| format!(" for {:.1} s", d.as_secs_f64()))
                .unwrap_or_default()
        );
    }
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) && duration.is_none_or(|d| t0.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = s.stop();
    output::print_json_or(a.json, &r, |w| report::host_view::stress(w, &r))
}
