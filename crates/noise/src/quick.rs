//! [`probe_host`]: the short probe made before a run (or once before a sweep): one probe
//! thread on each of the load's and the server's CPUs, concurrently, for a fraction of a
//! second, summarised per CPU as [`HostNoise`] — how much of its time the host takes from a
//! spinning thread there, and in which gaps. It runs before the load starts, so it disturbs
//! nothing that is measured.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{LoopKind, NoiseConfig, NoiseError};

/// The probe's length per CPU (the threads run concurrently, so this is its total).
pub const QUICK_PROBE: Duration = Duration::from_millis(250);

/// What the short probe saw on one CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuNoise {
    pub cpu: usize,
    /// Share of the window lost to gaps above the threshold, in percent.
    pub time_lost_pct: f64,
    pub gaps_per_s: f64,
    /// The 99th percentile and the longest of the gaps, ns (None / 0 without gaps).
    pub p99_gap_ns: Option<f64>,
    pub worst_gap_ns: f64,
    /// The window actually observed, ms.
    pub duration_ms: f64,
}

/// The host's noise just before a run, per probed CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostNoise {
    /// How long each probe thread spun, ms.
    pub duration_ms: f64,
    /// A gap is an iteration of the probe's loop longer than this, ns.
    pub threshold_ns: u64,
    pub cpus: Vec<CpuNoise>,
}

impl HostNoise {
    /// Mean share of time lost over the probed CPUs, percent.
    pub fn time_lost_pct(&self) -> f64 {
        mean(self.cpus.iter().map(|c| c.time_lost_pct))
    }

    /// Mean gaps per second over the probed CPUs.
    pub fn gaps_per_s(&self) -> f64 {
        mean(self.cpus.iter().map(|c| c.gaps_per_s))
    }

    /// The longest gap on any of `cpus` (every probed CPU when `cpus` is empty or none of
    /// them was probed), ns.
    pub fn worst_gap_ns(&self, cpus: &[usize]) -> f64 {
        let on = |c: &&CpuNoise| cpus.contains(&c.cpu);
        let mine: Vec<&CpuNoise> = self.cpus.iter().filter(on).collect();
        let set: Vec<&CpuNoise> = if mine.is_empty() {
            self.cpus.iter().collect()
        } else {
            mine
        };
        set.iter().map(|c| c.worst_gap_ns).fold(0.0, f64::max)
    }

    /// One line for a person: `host noise (250 ms on CPUs 0,1): 2.4 % lost, 910 gaps/s,
    /// worst gap 3.1 ms`.
    pub fn line(&self) -> String {
        let cpus: Vec<String> = self.cpus.iter().map(|c| c.cpu.to_string()).collect();
        format!(
            "host noise ({:.0} ms on CPU{} {}): {:.1} % lost, {:.0} gaps/s above {}, worst gap {}",
            self.duration_ms,
            if cpus.len() == 1 { "" } else { "s" },
            cpus.join(","),
            self.time_lost_pct(),
            self.gaps_per_s(),
            fmt_ns(self.threshold_ns as f64),
            fmt_ns(self.worst_gap_ns(&[]))
        )
    }
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// Probes `cpus` (deduplicated; every online CPU when empty) concurrently for `duration`
/// with a 1 µs gap threshold. Errors as [`crate::run`].
pub fn probe_host(
    cpus: &[usize],
    duration: Duration,
    stop: &AtomicBool,
) -> Result<HostNoise, NoiseError> {
    let mut cpus = cpus.to_vec();
    if cpus.is_empty() {
        cpus = (0..host::placement::online_cpus()).collect();
    }
    cpus.sort_unstable();
    cpus.dedup();
    let cfg = NoiseConfig {
        cpus,
        duration,
        threshold_ns: 1_000,
        loop_kind: LoopKind::Consecutive,
        // A short window: at ~1,000 gaps/s a few hundred per CPU, far below this.
        max_gaps: 1 << 14,
        ..NoiseConfig::default()
    };
    let reports = crate::run(&cfg, stop, &|_| {})?;
    Ok(HostNoise {
        duration_ms: duration.as_secs_f64() * 1e3,
        threshold_ns: cfg.threshold_ns,
        cpus: reports
            .iter()
            .map(|r| CpuNoise {
                cpu: r.cpu,
                time_lost_pct: 100.0 * r.time_lost_fraction,
                gaps_per_s: r.gaps_per_s,
                p99_gap_ns: r
                    .gap_summary
                    .as_ref()
                    .and_then(|s| s.get("p99"))
                    .map(|e| e.value),
                worst_gap_ns: r.gap_summary.as_ref().map_or(0.0, |s| s.max_ns),
                duration_ms: r.elapsed_ns as f64 / 1e6,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(cpu: usize, lost: f64, worst: f64) -> CpuNoise {
        CpuNoise {
            cpu,
            time_lost_pct: lost,
            gaps_per_s: 1000.0,
            p99_gap_ns: Some(worst / 2.0),
            worst_gap_ns: worst,
            duration_ms: 250.0,
        }
    }

    #[test]
    fn summaries_and_line() {
        let h = HostNoise {
            duration_ms: 250.0,
            threshold_ns: 1_000,
            cpus: vec![cpu(0, 2.0, 3.1e6), cpu(1, 3.0, 40e3)],
        };
        assert!((h.time_lost_pct() - 2.5).abs() < 1e-9);
        assert_eq!(h.worst_gap_ns(&[1]), 40e3);
        assert_eq!(h.worst_gap_ns(&[]), 3.1e6);
        assert_eq!(h.worst_gap_ns(&[7]), 3.1e6);
        assert_eq!(
            h.line(),
            "host noise (250 ms on CPUs 0,1): 2.5 % lost, 1000 gaps/s above 1.0 µs, worst gap 3.1 ms"
        );
        let back: HostNoise = serde_json::from_value(serde_json::to_value(&h).unwrap()).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn a_short_probe_of_one_cpu() {
        let stop = AtomicBool::new(false);
        let h = probe_host(&[0, 0], Duration::from_millis(30), &stop).unwrap();
        assert_eq!(h.cpus.len(), 1, "CPUs are deduplicated");
        assert!(h.cpus[0].duration_ms > 0.0);
        assert!((0.0..=100.0).contains(&h.cpus[0].time_lost_pct));
    }
}
