//! RT throttling: the kernel lets realtime tasks run only `sched_rt_runtime_us` out of every
//! `sched_rt_period_us` (default 950 000 of 1 000 000), so a spinning `SCHED_FIFO` probe is
//! stopped for about `period − runtime` (50 ms) once per period. Those stalls are the
//! kernel's policy, not OS noise; this module finds them in a gap list.

use std::fs;
use std::path::Path;

use serde::Serialize;

use crate::Gap;

/// The RT bandwidth limit read from `/proc/sys/kernel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RtThrottle {
    /// `sched_rt_runtime_us`; −1 means unlimited (throttling off).
    pub runtime_us: i64,
    /// `sched_rt_period_us`.
    pub period_us: u64,
}

impl RtThrottle {
    /// Reads both files under `proc_dir` (normally `/proc`); `None` when either is missing
    /// or unparsable.
    pub fn read(proc_dir: &Path) -> Option<RtThrottle> {
        let num = |name: &str| -> Option<String> {
            fs::read_to_string(proc_dir.join("sys/kernel").join(name))
                .ok()
                .map(|s| s.trim().to_string())
        };
        Some(RtThrottle {
            runtime_us: num("sched_rt_runtime_us")?.parse().ok()?,
            period_us: num("sched_rt_period_us")?.parse().ok()?,
        })
    }

    /// True when realtime tasks are limited to less than the whole period.
    pub fn enabled(&self) -> bool {
        self.runtime_us >= 0 && (self.runtime_us as u64) < self.period_us
    }

    /// The expected stall, `period − runtime`, in ns.
    pub fn stall_ns(&self) -> f64 {
        (self.period_us as f64 - self.runtime_us.max(0) as f64) * 1_000.0
    }

    /// The period in ns.
    pub fn period_ns(&self) -> f64 {
        self.period_us as f64 * 1_000.0
    }
}

/// Marks the gaps (sorted by start) that match the throttle pattern and returns how many.
///
/// A gap is a *candidate* when its length lies within ×0.5 … ×1.5 of `period − runtime`.
/// With one candidate, it is marked (its length alone is the evidence: a run shorter than
/// two periods can show only one stall). With several, a candidate is marked when another
/// candidate starts a whole number k ≥ 1 of periods away, ±20 % of a period: the stalls
/// recur once per period.
pub fn mark_throttle_gaps(gaps: &mut [Gap], t: &RtThrottle) -> usize {
    if !t.enabled() {
        return 0;
    }
    let (stall, period) = (t.stall_ns(), t.period_ns());
    let cand: Vec<usize> = gaps
        .iter()
        .enumerate()
        .filter(|(_, g)| {
            let l = g.len_ns as f64;
            l >= 0.5 * stall && l <= 1.5 * stall
        })
        .map(|(i, _)| i)
        .collect();
    let periodic = |a: &Gap, b: &Gap| {
        let d = (a.start_ns as f64 - b.start_ns as f64).abs();
        let k = (d / period).round();
        k >= 1.0 && (d - k * period).abs() <= 0.2 * period
    };
    let marked: Vec<usize> = if cand.len() == 1 {
        cand
    } else {
        cand.iter()
            .copied()
            .filter(|&i| cand.iter().any(|&j| j != i && periodic(&gaps[i], &gaps[j])))
            .collect()
    };
    for &i in &marked {
        gaps[i].throttle = true;
    }
    marked.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gap(start_ms: f64, len_us: f64) -> Gap {
        Gap {
            start_ns: (start_ms * 1e6) as u64,
            len_ns: (len_us * 1e3) as u64,
            throttle: false,
        }
    }

    const DEFAULT: RtThrottle = RtThrottle {
        runtime_us: 950_000,
        period_us: 1_000_000,
    };

    #[test]
    fn periodic_50ms_stalls_are_throttling_and_the_rest_is_noise() {
        // stalls of ~50 ms every ~1 s (with jitter), among ordinary gaps, one lone 60 ms gap
        // at an off-period time, and a 50 ms-ish gap that is too short to match (20 ms).
        let mut g = vec![
            gap(10.0, 3.0),
            gap(950.0, 50_000.0),
            gap(1200.0, 12.0),
            gap(1460.0, 60_000.0), // 0.51 periods from the stall before: not periodic
            gap(1951.0, 49_800.0),
            gap(2500.0, 20_000.0),
            gap(2949.0, 50_100.0),
        ];
        let n = mark_throttle_gaps(&mut g, &DEFAULT);
        let marked: Vec<bool> = g.iter().map(|g| g.throttle).collect();
        assert_eq!(
            marked,
            [false, true, false, false, true, false, true],
            "{g:?}"
        );
        assert_eq!(n, 3);
    }

    #[test]
    fn single_candidate_marked_and_disabled_throttling_marks_nothing() {
        let mut g = vec![gap(5.0, 2.0), gap(900.0, 48_000.0)];
        assert_eq!(mark_throttle_gaps(&mut g, &DEFAULT), 1);
        assert!(g[1].throttle && !g[0].throttle);
        let mut g = vec![gap(900.0, 48_000.0), gap(1900.0, 48_000.0)];
        let off = RtThrottle {
            runtime_us: -1,
            period_us: 1_000_000,
        };
        assert!(!off.enabled());
        assert_eq!(mark_throttle_gaps(&mut g, &off), 0);
        let full = RtThrottle {
            runtime_us: 1_000_000,
            period_us: 1_000_000,
        };
        assert!(!full.enabled());
        assert_eq!(DEFAULT.stall_ns(), 50e6);
    }

    #[test]
    fn reads_proc_sys_kernel_under_a_root() {
        let dir = std::env::temp_dir().join(format!("noise-rt-{}", std::process::id()));
        let k = dir.join("sys/kernel");
        fs::create_dir_all(&k).unwrap();
        fs::write(k.join("sched_rt_runtime_us"), "-1\n").unwrap();
        fs::write(k.join("sched_rt_period_us"), "1000000\n").unwrap();
        let t = RtThrottle::read(&dir).unwrap();
        assert_eq!(t.runtime_us, -1);
        fs::write(k.join("sched_rt_period_us"), "x\n").unwrap();
        assert!(RtThrottle::read(&dir).is_none());
        fs::remove_dir_all(&dir).unwrap();
    }
}
