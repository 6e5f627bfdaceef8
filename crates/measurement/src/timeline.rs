//! The host's events per window of a run, for the latency-over-time figure: the time the
//! attribution sampler saw lost on the load's and the server's CPUs (steal time, other tasks'
//! CPU time, run-queue wait) in each of the analysis' windows, so that a reader sees a burst of
//! the host beside the window whose tail moved.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The host's time lost in one window of the run, per source (µs of CPU time).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowHost {
    pub start_s: f64,
    pub end_s: f64,
    pub lost_us: BTreeMap<String, f64>,
}

/// Spreads each sampled interval's time-valued sources (unit "ns") over the windows it
/// overlaps, in proportion to the overlap. `start_mono_ns` is the run's time zero.
pub fn window_host(
    series: &attrib::Series,
    start_mono_ns: u64,
    windows: &[analysis::Window],
) -> Vec<WindowHost> {
    let mut out: Vec<WindowHost> = windows
        .iter()
        .map(|w| WindowHost {
            start_s: w.start_s,
            end_s: w.end_s,
            lost_us: BTreeMap::new(),
        })
        .collect();
    if windows.is_empty() {
        return out;
    }
    let rel = |t: u64| (t as f64 - start_mono_ns as f64) / 1e9;
    for src in series.sources.iter().filter(|s| s.unit == "ns") {
        for (i, d) in src.deltas.iter().enumerate() {
            let (Some(&a), Some(&b)) = (series.t_mono_ns.get(i), series.t_mono_ns.get(i + 1))
            else {
                continue;
            };
            let (a, b) = (rel(a), rel(b));
            if b <= a || !d.is_finite() || *d <= 0.0 {
                continue;
            }
            // Windows are sorted by start: find the overlapping ones.
            let first = out.partition_point(|w| w.end_s <= a);
            for w in out[first..].iter_mut().take_while(|w| w.start_s < b) {
                let overlap = (b.min(w.end_s) - a.max(w.start_s)).max(0.0);
                if overlap > 0.0 {
                    *w.lost_us.entry(src.name.clone()).or_insert(0.0) +=
                        d / 1e3 * overlap / (b - a);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(a: f64, b: f64) -> analysis::Window {
        analysis::Window {
            start_s: a,
            end_s: b,
            count: 1,
            p50_us: 1.0,
            p99_us: 1.0,
            max_us: 1.0,
            server_p50_us: None,
            server_p99_us: None,
            ideal_p99_us: None,
            server_ideal_p99_us: None,
            lateness_p99_us: 0.0,
        }
    }

    #[test]
    fn an_interval_is_spread_over_the_windows_it_overlaps() {
        let series = attrib::Series {
            // Run starts at 1 s: intervals 0.05–0.15 s and 0.15–0.25 s of the run.
            t_mono_ns: vec![1_050_000_000, 1_150_000_000, 1_250_000_000],
            sources: vec![
                attrib::SourceSeries {
                    name: "steal time".into(),
                    kind: attrib::SourceKind::Background,
                    unit: "ns".into(),
                    deltas: vec![4_000_000.0, 0.0],
                },
                attrib::SourceSeries {
                    name: "hard interrupts".into(),
                    kind: attrib::SourceKind::Interrupts,
                    unit: "count".into(),
                    deltas: vec![10.0, 10.0],
                },
            ],
            server_cpu_ns: vec![0.0, 0.0],
        };
        let w = window_host(
            &series,
            1_000_000_000,
            &[window(0.0, 0.1), window(0.1, 0.2)],
        );
        // 4 ms lost over 0.05–0.15 s: half in each window; counts are not time.
        let steal = "steal time".to_string();
        let near = |v: Option<&f64>| v.is_some_and(|v| (v - 2000.0).abs() < 1e-6);
        assert!(near(w[0].lost_us.get(&steal)), "{w:?}");
        assert!(near(w[1].lost_us.get(&steal)), "{w:?}");
        assert!(!w[0].lost_us.contains_key("hard interrupts"));
    }
}
