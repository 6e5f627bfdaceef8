//! What sampling costs on this host's real /proc:
//! `cargo run --release -p attrib --example sample_cost [SAMPLES]` (or `bench/attrib_sample.sh`).
//!
//! Samples this process (its main thread and four idle ones, as a small server would have) on
//! every CPU, back to back, and prints the median, p99 and maximum µs per sample of three
//! schedules:
//!
//! - `in-loop`: the default schedule as the load generator's loop takes it (a
//!   [`PacedProbe`](attrib::PacedProbe): the lean schedule), every sample;
//! - `thread`: the default schedule of a sampler thread on a spare CPU (a bare [`Probe`]);
//! - `light`: samples that make no slow read;
//! - `complete`: every counter at once (`slow_every = 1`): what the baseline and closing
//!   samples of a run cost, outside the measurement.
//!
//! Each sample is timed around the call with CLOCK_MONOTONIC; the figures are per call.

use attrib::{mono_now_ns, PacedProbe, Probe, SamplerConfig};
use std::time::Duration;

fn quantile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1e3
}

fn measure(
    name: &str,
    slow_every: u32,
    in_loop: bool,
    samples: usize,
) -> Result<(), attrib::AttribError> {
    let cfg = SamplerConfig {
        server_pids: vec![std::process::id()],
        slow_every,
        ..SamplerConfig::default()
    };
    let probe = Probe::new(&cfg)?;
    let mut ns = Vec::with_capacity(samples);
    let s = if in_loop {
        let mut p = PacedProbe::new(probe, Duration::from_millis(10), mono_now_ns());
        for _ in 0..samples {
            let t0 = mono_now_ns();
            p.sample(t0);
            ns.push(mono_now_ns() - t0);
        }
        p.finish().0
    } else {
        let mut p = probe;
        p.sample(mono_now_ns());
        for _ in 0..samples {
            let t0 = mono_now_ns();
            p.sample(t0);
            ns.push(mono_now_ns() - t0);
        }
        p.finish()
    };
    if slow_every > 1 && slow_every <= 100 {
        // Sample i (from 1) is in slot i mod slow_every of the cycle: one line per kind.
        let slots: Vec<String> = (0..slow_every as usize)
            .map(|slot| {
                let mut v: Vec<u64> = (0..ns.len())
                    .filter(|i| (i + 1) % slow_every as usize == slot)
                    .map(|i| ns[i])
                    .collect();
                v.sort_unstable();
                format!("{:.1}/{:.1}", quantile(&v, 0.5), quantile(&v, 0.99))
            })
            .collect();
        println!(
            "{name:10} by slot of the cycle, median/p99 µs: {}",
            slots.join(" ")
        );
    }
    ns.sort_unstable();
    println!(
        "{name:10} median {:6.1} µs  p99 {:6.1} µs  max {:7.1} µs  ({} samples, {} sources, a slow read every {} samples)",
        quantile(&ns, 0.5),
        quantile(&ns, 0.99),
        quantile(&ns, 1.0),
        ns.len(),
        s.sources.len(),
        slow_every,
    );
    Ok(())
}

fn main() -> Result<(), attrib::AttribError> {
    let samples: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000);
    let _threads: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(3600))))
        .collect();
    println!("one attribution sample on this host's /proc, 5 server threads, every CPU:");
    let every = SamplerConfig::default().slow_every;
    measure("in-loop", every, true, samples)?;
    measure("thread", every, false, samples)?;
    measure("light", u32::MAX, false, samples)?;
    measure("complete", 1, false, samples)?;
    Ok(())
}
