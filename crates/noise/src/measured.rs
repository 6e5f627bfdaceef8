//! Contributors timed by eBPF: each source's duration distribution on a probed CPU and its
//! Good/Bad/Ugly class by its measured p99.9 (Where Has My Time Gone? §5.1), where the
//! counters ([`crate::attribution`]) can give only a nominal class.
//!
//! [`Contributors`] chooses: `ebpf` (fail when the host cannot), `counters` (today's
//! counter deltas only), `auto` (eBPF where the host supports it, else counters with the
//! reason). The kernel side is [`ebpf::contrib`]; its histograms give percentiles exact to
//! the bucket (12.5 % wide at most) and the p99.9's class exactly ([`ebpf::hist`]).

use std::fmt;
use std::str::FromStr;

use ebpf::contrib::{contributor_name, ContribConfig, ContribTimer, ContribTotals, Kind, Measured};
pub use ebpf::hist::Bucketed;
use serde::Serialize;

use crate::attribution::GoodBadUgly;
use crate::NoiseError;

/// Where a probe's contributors come from (`tailscope noise --contributors`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Contributors {
    /// eBPF where the host supports it, else counters (the reason is reported).
    Auto,
    /// Measured durations from eBPF; the probe fails if the host cannot.
    Ebpf,
    /// Counter deltas with nominal classes.
    #[default]
    Counters,
}

impl FromStr for Contributors {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Contributors::Auto),
            "ebpf" => Ok(Contributors::Ebpf),
            "counters" => Ok(Contributors::Counters),
            other => Err(format!(
                "unknown contributor source {other:?}: expected ebpf, counters or auto"
            )),
        }
    }
}

impl fmt::Display for Contributors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Contributors::Auto => "auto",
            Contributors::Ebpf => "ebpf",
            Contributors::Counters => "counters",
        })
    }
}

/// One contributor timed on one CPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeasuredContributor {
    /// `local_timer`, `IRQ 36 virtio1-req.0`, `softirq RCU`, `another task (probe preempted)`.
    pub source: String,
    /// `hardirq`, `softirq`, `vector`, `offcpu`.
    pub kind: &'static str,
    pub count: u64,
    /// Events per second of the time the programs were attached.
    pub per_s: f64,
    /// Percentiles of the durations, each as the bucket that holds it (ns).
    pub p50: Bucketed,
    pub p99: Bucketed,
    pub p999: Bucketed,
    pub max_ns: u64,
    pub mean_ns: f64,
    /// Sum of the durations, ns.
    pub total_ns: u64,
    /// `total_ns` ÷ the CPU's time lost to gaps (None when nothing was lost); nested events
    /// are inside both their own and their host's durations, so shares can overlap, and
    /// events shorter than the gap threshold count here but not in time lost, as do events
    /// in the few milliseconds the programs are attached before the probe starts and after
    /// it ends.
    pub lost_share: Option<f64>,
    /// Class of the p99.9 (exact).
    pub class: GoodBadUgly,
}

/// How the contributors of a run were found.
#[derive(Clone, Debug, Default)]
pub(crate) struct Timed {
    pub measured: Vec<Measured>,
    pub totals: Option<ContribTotals>,
    /// Why counters were used under `auto` (None when eBPF ran or counters were asked for).
    pub reason: Option<String>,
}

/// The name prefix of the probe threads (`noise-cpu0`, …), by which the programs know them.
pub(crate) const THREAD_PREFIX: &str = "noise-cpu";

/// Starts the eBPF timer as `mode` asks. `Ok(None, reason)`: counters (with the reason
/// under `auto`); an error only under `ebpf`.
pub(crate) fn start(
    mode: Contributors,
    cpus: &[usize],
) -> Result<(Option<ContribTimer>, Option<String>), NoiseError> {
    if mode == Contributors::Counters {
        return Ok((None, None));
    }
    let started = ebpf::support::check_contrib()
        .map_err(|u| u.to_string())
        .and_then(|()| {
            ContribTimer::start(&ContribConfig {
                cpus: cpus.to_vec(),
                tgid: std::process::id(),
                thread_prefix: THREAD_PREFIX.into(),
            })
            .map_err(|e| e.to_string())
        });
    match (started, mode) {
        (Ok(t), _) => Ok((Some(t), None)),
        (Err(why), Contributors::Ebpf) => Err(NoiseError::Contributors(why)),
        (Err(why), _) => Ok((None, Some(why))),
    }
}

/// Reads the timer's histograms at the end (`mode` decides whether a failure is an error).
pub(crate) fn finish(
    timer: Option<ContribTimer>,
    reason: Option<String>,
    mode: Contributors,
) -> Result<Timed, NoiseError> {
    let Some(t) = timer else {
        return Ok(Timed {
            reason,
            ..Timed::default()
        });
    };
    match t.finish() {
        Ok((measured, totals)) => Ok(Timed {
            measured,
            totals: Some(totals),
            reason: None,
        }),
        Err(e) if mode == Contributors::Ebpf => Err(NoiseError::Contributors(e.to_string())),
        Err(e) => Ok(Timed {
            reason: Some(format!("reading the eBPF histograms failed: {e}")),
            ..Timed::default()
        }),
    }
}

fn class_of(c: u8) -> GoodBadUgly {
    match c {
        0 => GoodBadUgly::Good,
        1 => GoodBadUgly::Bad,
        _ => GoodBadUgly::Ugly,
    }
}

/// `cpu`'s contributors from the histograms, worst class first then most time. `irq_label`
/// names a hard IRQ (from `/proc/interrupts`); `window_s` is how long the programs ran.
pub(crate) fn contributors(
    cpu: usize,
    measured: &[Measured],
    window_s: f64,
    irq_label: &dyn Fn(u16) -> Option<String>,
) -> Vec<MeasuredContributor> {
    let mut out: Vec<MeasuredContributor> = measured
        .iter()
        .filter(|m| m.cpu as usize == cpu && m.hist.count > 0)
        .filter_map(|m| {
            let h = &m.hist;
            let source = match m.kind {
                Kind::HardIrq => irq_label(m.id).unwrap_or_else(|| contributor_name(m.kind, m.id)),
                _ => contributor_name(m.kind, m.id),
            };
            Some(MeasuredContributor {
                source,
                kind: m.kind.name(),
                count: h.count,
                per_s: if window_s > 0.0 {
                    h.count as f64 / window_s
                } else {
                    0.0
                },
                p50: h.quantile(1, 2)?,
                p99: h.quantile(99, 100)?,
                p999: h.quantile(999, 1000)?,
                max_ns: h.max_ns,
                mean_ns: h.sum_ns as f64 / h.count as f64,
                total_ns: h.sum_ns,
                lost_share: None,
                class: class_of(h.p999_class()?),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.class
            .cmp(&a.class)
            .then(b.total_ns.cmp(&a.total_ns))
            .then(a.source.cmp(&b.source))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebpf::hist::Histogram;

    fn m(cpu: u32, kind: Kind, id: u16, v: &[u64]) -> Measured {
        let mut hist = Histogram::default();
        for &x in v {
            hist.record(x);
        }
        Measured {
            cpu,
            kind,
            id,
            hist,
        }
    }

    #[test]
    fn the_source_is_parsed_and_printed_back() {
        for s in ["auto", "ebpf", "counters"] {
            assert_eq!(s.parse::<Contributors>().unwrap().to_string(), s);
        }
        assert!("bpf".parse::<Contributors>().is_err());
    }

    #[test]
    fn contributors_are_classed_by_their_p999_and_ranked() {
        // CPU 0: a timer of 2 µs each (Bad), 1000 softirqs of 300 ns and one of 1 ms (p99.9
        // is the 1000th smallest of 1001: 300 ns, Good), one preemption of 4 ms (Ugly);
        // CPU 1's event is not CPU 0's.
        let ms = [
            m(0, Kind::Vector, 1, &[2_000; 500]),
            m(
                0,
                Kind::Softirq,
                9,
                &[&[300u64; 1000][..], &[1_000_000u64][..]].concat(),
            ),
            m(0, Kind::OffCpu, 0, &[4_000_000]),
            m(0, Kind::HardIrq, 36, &[700, 800]),
            m(1, Kind::Vector, 1, &[50]),
        ];
        let label = |id: u16| (id == 36).then(|| "IRQ 36 virtio1-req.0".to_string());
        let c = contributors(0, &ms, 2.0, &label);
        let got: Vec<(&str, GoodBadUgly, u64)> = c
            .iter()
            .map(|c| (c.source.as_str(), c.class, c.count))
            .collect();
        assert_eq!(
            got,
            [
                ("another task (probe preempted)", GoodBadUgly::Ugly, 1),
                ("vector local_timer", GoodBadUgly::Bad, 500),
                ("softirq RCU", GoodBadUgly::Good, 1001),
                ("IRQ 36 virtio1-req.0", GoodBadUgly::Good, 2),
            ]
        );
        let rcu = &c[2];
        assert_eq!(rcu.max_ns, 1_000_000);
        assert_eq!(rcu.total_ns, 1_300_000);
        assert!(rcu.p999.low_ns <= 300 && 300 < rcu.p999.high_ns);
        assert_eq!(c[1].per_s, 250.0);
        assert!(c
            .iter()
            .all(|c| c.p50.low_ns <= c.p99.low_ns && c.p99.low_ns <= c.p999.low_ns));
    }
}
