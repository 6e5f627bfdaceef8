//! CPU topology under a [`HostRoot`]: which logical CPUs are SMT siblings of one physical
//! core (`topology/thread_siblings_list`), and choosing a server's CPUs by physical core —
//! one thread per core, or packed onto siblings (ThunderX §V-B, Table V: "n−m" is n physical
//! cores and m logical ones; Fig 11 colocates on the same or on different logical cores).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::probe::{cpu_list, format_cpu_list, online_cpus, HostRoot};
use crate::HostError;

/// The host's physical cores and their logical CPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Topology {
    /// One entry per physical core: its online logical CPUs, sorted; cores in order of their
    /// first CPU.
    pub cores: Vec<Vec<usize>>,
}

impl Topology {
    /// Reads the online CPUs and their siblings. A CPU without a `thread_siblings_list` (some
    /// VMs) is a core of its own.
    pub fn read(root: &HostRoot) -> Topology {
        let online = online_cpus(root).unwrap_or_default();
        let mut cores: Vec<Vec<usize>> = Vec::new();
        for &c in &online {
            if cores.iter().any(|k| k.contains(&c)) {
                continue;
            }
            let sib = root
                .read(format!(
                    "sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"
                ))
                .ok()
                .and_then(|s| cpu_list(&s))
                .unwrap_or_default();
            let mut core: Vec<usize> = sib.into_iter().filter(|s| online.contains(s)).collect();
            if !core.contains(&c) {
                core.push(c);
            }
            core.sort_unstable();
            cores.push(core);
        }
        cores.sort_by_key(|k| k[0]);
        Topology { cores }
    }

    /// Most logical CPUs on one core (1: no SMT).
    pub fn threads_per_core(&self) -> usize {
        self.cores.iter().map(Vec::len).max().unwrap_or(1)
    }

    /// Every core's CPUs as kernel lists (`0,4`), as stored with a run.
    pub fn sibling_lists(&self) -> Vec<String> {
        self.cores.iter().map(|k| format_cpu_list(k)).collect()
    }
}

/// How a server's threads share physical cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SmtPolicy {
    /// One logical CPU per physical core (its siblings stay free).
    DistinctCores,
    /// Fill every logical CPU of a core before the next core.
    Siblings,
}

impl fmt::Display for SmtPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SmtPolicy::DistinctCores => "distinct-cores",
            SmtPolicy::Siblings => "siblings",
        })
    }
}

impl FromStr for SmtPolicy {
    type Err = HostError;

    /// `distinct-cores` (also `cores`, `distinct`) or `siblings` (also `pack`).
    fn from_str(s: &str) -> Result<Self, HostError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "distinct-cores" | "cores" | "distinct" => Ok(SmtPolicy::DistinctCores),
            "siblings" | "pack" => Ok(SmtPolicy::Siblings),
            _ => Err(HostError::BadRequest {
                what: "smt placement".into(),
                reason: format!("'{s}': expected distinct-cores or siblings"),
            }),
        }
    }
}

/// `n` CPUs out of `allowed` (all online CPUs when empty) placed by `policy`, sorted.
pub fn choose(
    topo: &Topology,
    allowed: &[usize],
    n: usize,
    policy: SmtPolicy,
) -> Result<Vec<usize>, HostError> {
    let ok = |c: &usize| allowed.is_empty() || allowed.contains(c);
    let cores: Vec<Vec<usize>> = topo
        .cores
        .iter()
        .map(|k| k.iter().copied().filter(ok).collect::<Vec<_>>())
        .filter(|k| !k.is_empty())
        .collect();
    let among = if allowed.is_empty() {
        "the online CPUs".to_string()
    } else {
        format!("CPUs {}", format_cpu_list(allowed))
    };
    let mut out: Vec<usize> = match policy {
        SmtPolicy::DistinctCores => {
            if cores.len() < n {
                return Err(HostError::BadRequest {
                    what: "smt placement".into(),
                    reason: format!(
                        "{n} threads on distinct physical cores, but {among} span {} core(s)",
                        cores.len()
                    ),
                });
            }
            cores.iter().take(n).map(|k| k[0]).collect()
        }
        SmtPolicy::Siblings => {
            if topo.threads_per_core() < 2 {
                return Err(HostError::Unavailable {
                    what: "smt placement on siblings".into(),
                    reason: "this host has no SMT siblings (one logical CPU per core)".into(),
                });
            }
            let packed: Vec<usize> = cores
                .iter()
                .filter(|k| k.len() > 1)
                .flatten()
                .copied()
                .take(n)
                .collect();
            if packed.len() < n {
                return Err(HostError::BadRequest {
                    what: "smt placement".into(),
                    reason: format!(
                        "{n} threads on sibling CPUs, but {among} hold {} CPU(s) on cores with siblings",
                        packed.len()
                    ),
                });
            }
            packed
        }
    };
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(cores: &[&[usize]]) -> Topology {
        Topology {
            cores: cores.iter().map(|k| k.to_vec()).collect(),
        }
    }

    #[test]
    fn distinct_cores_and_siblings() {
        let t = topo(&[&[0, 4], &[1, 5], &[2, 6], &[3, 7]]);
        let c = |a: &[usize], n, p| choose(&t, a, n, p);
        assert_eq!(c(&[], 3, SmtPolicy::DistinctCores).unwrap(), vec![0, 1, 2]);
        assert_eq!(c(&[], 3, SmtPolicy::Siblings).unwrap(), vec![0, 1, 4]);
        assert_eq!(
            c(&[4, 5, 6], 2, SmtPolicy::DistinctCores).unwrap(),
            vec![4, 5]
        );
        assert_eq!(c(&[0, 4, 5], 2, SmtPolicy::Siblings).unwrap(), vec![0, 4]);
        assert!(c(&[0, 4], 2, SmtPolicy::DistinctCores).is_err());
        assert!(c(&[0, 1], 2, SmtPolicy::Siblings).is_err());
        let flat = topo(&[&[0], &[1]]);
        let e = choose(&flat, &[], 2, SmtPolicy::Siblings).unwrap_err();
        assert!(e.to_string().contains("no SMT siblings"), "{e}");
        assert_eq!(
            choose(&flat, &[], 2, SmtPolicy::DistinctCores).unwrap(),
            vec![0, 1]
        );
    }

    #[test]
    fn policies_parse() {
        assert_eq!(
            "cores".parse::<SmtPolicy>().unwrap(),
            SmtPolicy::DistinctCores
        );
        assert_eq!(
            "Siblings".parse::<SmtPolicy>().unwrap(),
            SmtPolicy::Siblings
        );
        assert!("ht".parse::<SmtPolicy>().is_err());
        assert_eq!(SmtPolicy::DistinctCores.to_string(), "distinct-cores");
    }
}
