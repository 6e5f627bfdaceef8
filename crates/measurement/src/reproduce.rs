//! What a single run can promise about the next one. A run's intervals (time blocks) hold for
//! the run itself; whether they also bound a repeat depends on the host staying the same
//! between runs, which no run can see from inside. So a run says when its own evidence makes
//! that unlikely: its tail moved within the run (stationarity), or the host it ran on loses
//! time in bursts (the noise probe before it), or its user view counts the generator's
//! stalls. Such a run carries the flags; only repeats spread over time (`--repeat`) bound the
//! next run then.

use serde::{Deserialize, Serialize};

/// A host losing more than this share of its time in gaps drifts between runs.
pub const NOISY_LOST_PCT: f64 = 0.5;
/// … or one whose worst gap in the short probe is longer than this (ns).
pub const NOISY_GAP_NS: f64 = 1_000_000.0;

/// Whether a single run's intervals may be read as bounds on a repeat, and why not.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reproducibility {
    /// No flag below: the run was steady on a quiet host.
    pub single_run_bounds_repeats: bool,
    /// Why not, one short phrase each ("tail not steady: …", "host noisy: …").
    pub flags: Vec<String>,
    /// What to do about it.
    pub advice: Option<String>,
}

/// The flags of one run from its stationarity, the host's noise and its user view's validity.
pub fn reproducibility(
    stationarity: Option<&analysis::Stationarity>,
    noise: Option<&noise::HostNoise>,
    user_valid: bool,
) -> Reproducibility {
    let mut flags = Vec::new();
    if let Some(s) = stationarity.filter(|s| !s.steady) {
        flags.push(format!("tail not steady: {}", s.summary));
    }
    if let Some(n) = noise {
        let (lost, gap) = (n.time_lost_pct(), n.worst_gap_ns(&[]));
        if lost > NOISY_LOST_PCT || gap > NOISY_GAP_NS {
            flags.push(format!(
                "host noisy: {lost:.1} % of time lost in gaps up to {:.1} ms before the run (runs drift between repeats on such a host)",
                gap / 1e6
            ));
        }
    }
    if !user_valid {
        flags.push("user view counts the generator's stalls".into());
    }
    Reproducibility {
        single_run_bounds_repeats: flags.is_empty(),
        advice: (!flags.is_empty()).then(|| {
            "this run's intervals hold for this run; to bound the next run, repeat it (--repeat 3 or more) and read the median and spread of the repeats".to_string()
        }),
        flags,
    }
}
