//! What a stressor is asked to do: `KIND[:CPUS][@INTENSITY]`.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::StressError;

/// Which resource the stressor contends for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A busy loop: competes for the CPU itself (Tales §4.1's background process).
    Cpu,
    /// A sequential read-modify-write stream over a buffer far larger than the LLC: competes
    /// for memory bandwidth.
    Memory,
    /// Read-modify-writes of every cache line of an LLC-sized buffer in a scattered order:
    /// evicts whatever else the LLC held.
    Cache,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Cpu => "cpu",
            Kind::Memory => "memory",
            Kind::Cache => "cache",
        }
    }
}

impl FromStr for Kind {
    type Err = StressError;

    fn from_str(s: &str) -> Result<Kind, StressError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Kind::Cpu),
            "memory" | "mem" => Ok(Kind::Memory),
            "cache" | "llc" => Ok(Kind::Cache),
            _ => Err(StressError::BadSpec(format!(
                "unknown stressor '{s}' (cpu, memory or cache)"
            ))),
        }
    }
}

/// A stressor: its kind, its CPUs (empty: the caller chooses, e.g. off the generator's
/// CPUs) and its intensity (the fraction of each period it runs; 1 = all the time).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StressSpec {
    pub kind: Kind,
    pub cpus: Vec<usize>,
    pub intensity: f64,
}

impl StressSpec {
    /// A stressor of `kind` at full intensity on CPUs to be chosen.
    pub fn new(kind: Kind) -> StressSpec {
        StressSpec {
            kind,
            cpus: Vec::new(),
            intensity: 1.0,
        }
    }

    /// Checks the intensity and the CPU ids (against the online CPU count).
    pub fn validate(&self) -> Result<(), StressError> {
        check_intensity(self.intensity)?;
        let n = host::placement::online_cpus();
        if let Some(c) = self.cpus.iter().find(|&&c| c >= n) {
            return Err(StressError::BadSpec(format!(
                "CPU {c} does not exist (this host has {n} online CPUs)"
            )));
        }
        Ok(())
    }
}

/// An intensity must be a fraction in (0, 1].
pub fn check_intensity(f: f64) -> Result<(), StressError> {
    if f.is_finite() && f > 0.0 && f <= 1.0 {
        Ok(())
    } else {
        Err(StressError::BadSpec(format!(
            "intensity must be in (0, 1] (the fraction of each 10 ms period the stressor runs), got {f}"
        )))
    }
}

impl fmt::Display for StressSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.name())?;
        if !self.cpus.is_empty() {
            write!(f, ":{}", host::probe::format_cpu_list(&self.cpus))?;
        }
        if self.intensity < 1.0 {
            write!(f, "@{}", self.intensity)?;
        }
        Ok(())
    }
}

impl FromStr for StressSpec {
    type Err = StressError;

    /// `cpu`, `cpu:1`, `memory:0-1`, `cache:1@0.5`, `cpu@0.25`.
    fn from_str(s: &str) -> Result<StressSpec, StressError> {
        let t = s.trim();
        let (head, intensity) = match t.rsplit_once('@') {
            Some((h, i)) => {
                let f: f64 = i.trim().parse().map_err(|_| {
                    StressError::BadSpec(format!("'{s}': intensity '{i}' is not a number"))
                })?;
                (h, f)
            }
            None => (t, 1.0),
        };
        let (kind, cpus) = match head.split_once(':') {
            Some((k, c)) => {
                let cpus = host::placement::parse_cpu_list(c)
                    .map_err(|e| StressError::BadSpec(format!("'{s}': {e}")))?;
                (k, cpus)
            }
            None => (head, Vec::new()),
        };
        let spec = StressSpec {
            kind: kind.parse()?,
            cpus,
            intensity,
        };
        spec.validate()?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_print_and_refuse() {
        let s: StressSpec = "cache:0@0.5".parse().unwrap();
        assert_eq!(
            s,
            StressSpec {
                kind: Kind::Cache,
                cpus: vec![0],
                intensity: 0.5
            }
        );
        assert_eq!(s.to_string(), "cache:0@0.5");
        let c: StressSpec = "cpu".parse().unwrap();
        assert_eq!(c, StressSpec::new(Kind::Cpu));
        assert_eq!(c.to_string(), "cpu");
        assert_eq!("Memory@0.25".parse::<StressSpec>().unwrap().intensity, 0.25);
        for bad in [
            "", "disk", "cpu:99", "cpu@0", "cpu@1.5", "cpu@x", "cpu:", "cache:a",
        ] {
            assert!(bad.parse::<StressSpec>().is_err(), "{bad:?} accepted");
        }
    }
}
