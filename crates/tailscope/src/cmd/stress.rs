//! `tailscope stress`: a built-in interference generator on chosen CPUs until --duration or
//! Ctrl-C, then what it did (the same stressors a sweep's `stress` axis runs beside a run).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use host::probe::HostRoot;
use stress::{StressSpec, Stressor};

use super::common::{parse_cpus, parse_duration, shutdown_flag};
use crate::cli::StressArgs;
use crate::exit::{usage, OrUsage};
use crate::output::{self, outln};

pub fn run(a: &StressArgs) -> anyhow::Result<i32> {
    let cpus = parse_cpus(Some(&a.cpus))?;
    if cpus.is_empty() {
        return Err(usage("--cpus: no CPU given"));
    }
    stress::check_intensity(a.intensity).or_usage_ctx("--intensity")?;
    let duration = match &a.duration {
        Some(d) => {
            let d = parse_duration("--duration", d)?;
            if d.is_zero() {
                return Err(usage("--duration must be positive"));
            }
            Some(d)
        }
        None => None,
    };
    if !a.root.is_dir() {
        return Err(usage(format!(
            "--root {} is not a directory",
            a.root.display()
        )));
    }
    let spec = StressSpec {
        kind: a.kind.into(),
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
    if a.json {
        output::print_json(&serde_json::to_value(&r)?)?;
        return Ok(0);
    }
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    outln!(
        "{} stressor on CPUs {} at intensity {}: {:.1} s",
        r.kind.name(),
        host::probe::format_cpu_list(&r.cpus),
        r.intensity,
        r.duration_s
    )?;
    outln!(
        "  iterations {} ({:.3e}/s){}",
        r.iterations,
        r.iterations_per_s,
        if r.bytes > 0 {
            format!(
                ", {:.0} MiB touched ({:.0} MiB/s)",
                mib(r.bytes),
                r.bytes_per_s / (1u64 << 20) as f64
            )
        } else {
            String::new()
        }
    )?;
    if r.buffer_bytes > 0 {
        outln!(
            "  buffer {:.1} MiB per thread; LLC {:.1} MiB ({})",
            mib(r.buffer_bytes),
            mib(r.llc_bytes),
            r.llc_source
        )?;
    }
    for t in &r.threads {
        outln!(
            "  cpu {}: {} iterations, {:.0} MiB",
            t.cpu,
            t.iterations,
            mib(t.bytes)
        )?;
    }
    Ok(0)
}
