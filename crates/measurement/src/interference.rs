//! What runs and what is read beside one measurement, for the colocation and isolation
//! experiments: a stressor (ThunderX Fig 11; Tales §4.1) started just before the load and
//! stopped just after, off the generator's CPUs unless the user named them, and the server's
//! own eviction counter read before and after (a memcached whose item memory is full evicts
//! silently; the run says how many). Both go into the run's `server` object.

use serde_json::json;
use stress::{StressSpec, Stressor};

use crate::error::{invalid, LabError};
use crate::observer::Observer;
use crate::server_facts::ServerFacts;
use crate::target::Ready;

/// The CPUs a stressor runs on: the ones it names (even the generator's: the user said so),
/// else the server's CPUs that are not the generator's, else every online CPU that is not
/// the generator's.
pub fn stress_cpus(
    spec: &StressSpec,
    server_cpus: &[usize],
    generator_cpus: &[usize],
) -> Result<Vec<usize>, LabError> {
    if !spec.cpus.is_empty() {
        return Ok(spec.cpus.clone());
    }
    let off = |c: &usize| !generator_cpus.contains(c);
    let mut v: Vec<usize> = server_cpus.iter().copied().filter(off).collect();
    if v.is_empty() {
        v = (0..host::placement::online_cpus()).filter(off).collect();
    }
    if v.is_empty() {
        return Err(invalid(format!(
            "--stress {spec}: every CPU is the generator's; name the stressor's CPUs (e.g. {}:0)",
            spec.kind.name()
        )));
    }
    Ok(v)
}

/// The stressor and counters of one run.
pub struct Beside {
    stressor: Option<Stressor>,
    evictions_before: Option<u64>,
}

impl Beside {
    /// Reads the counters and starts the stressor, right before the load.
    pub fn start(
        ready: &Ready,
        generator_cpus: &[usize],
        server_cpus: &[usize],
        obs: &dyn Observer,
    ) -> Result<Beside, LabError> {
        let evictions_before = ready.evictions();
        let stressor = match ready.stress() {
            None => None,
            Some(spec) => {
                let mut s = spec.clone();
                s.cpus = stress_cpus(spec, server_cpus, generator_cpus)?;
                let st = Stressor::start(&s, &host::probe::HostRoot::default())
                    .map_err(|e| LabError::Failed(format!("starting the stressor: {e}")))?;
                obs.note(&format!("stressor {s} running beside the run"));
                Some(st)
            }
        };
        Ok(Beside {
            stressor,
            evictions_before,
        })
    }

    /// Reads the counters only: a run beside which another's stressor runs (`ab`'s candidate,
    /// whose stressor is the baseline's).
    pub fn counters_only(ready: &Ready) -> Beside {
        Beside {
            stressor: None,
            evictions_before: ready.evictions(),
        }
    }

    /// Stops the stressor and reads the counters again: the server's JSON with
    /// `colocated_stress` (what the stressor did) and `evictions_during_run` /
    /// `evictions_total` where the server counts evictions.
    pub fn finish(self, ready: &Ready, obs: &dyn Observer) -> ServerFacts {
        let mut v = ready.server_facts();
        if let Some(s) = self.stressor {
            v.colocated_stress = Some(json!(s.stop()));
        }
        if let (Some(before), Some(after)) = (self.evictions_before, ready.evictions()) {
            let during = after.saturating_sub(before);
            v.evictions_during_run = Some(during);
            v.evictions_total = Some(after);
            if during > 0 {
                obs.note(&format!(
                    "the server evicted {during} items during the run ({after} since it started): its item memory is full (raise --server-memory-mb)"
                ));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stressor_cpus_stay_off_the_generator_unless_named() {
        let spec: StressSpec = "cpu".parse().unwrap();
        assert_eq!(stress_cpus(&spec, &[1], &[0]).unwrap(), vec![1]);
        let n = host::placement::online_cpus();
        let all_but_0: Vec<usize> = (1..n).collect();
        if n > 1 {
            assert_eq!(stress_cpus(&spec, &[0], &[0]).unwrap(), all_but_0);
        }
        let named: StressSpec = "cpu:0".parse().unwrap();
        assert_eq!(stress_cpus(&named, &[1], &[0]).unwrap(), vec![0]);
        let everything: Vec<usize> = (0..n).collect();
        assert!(stress_cpus(&spec, &[], &everything).is_err());
    }
}
