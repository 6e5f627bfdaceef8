//! The configuration stored with a run: what the user asked for (as written), and what each
//! loop adds to its runs (a sweep point's knobs and load, a colocation cell, a tuning step, a
//! repeat, the agents). One typed record from the option structs to the store and back: the
//! loops set fields, `check` and the reports read fields.
//!
//! Its JSON is the object every earlier version stored under `config`. The keys of `run`'s
//! configuration are always written (`null` when not given), as they always were; the keys a
//! loop adds are written when set. Every field is read leniently ([`lenient`]): a value this
//! build cannot read reads as absent, and keys this build does not know are kept in
//! [`RunConfig::other`] and written back unchanged.

use std::collections::BTreeMap;

use analysis::IdealSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::lenient::{lenient, read};
use crate::server_facts::ServerFacts;
use crate::view::ViewChoice;

/// Where a run's server stages come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StagesMode {
    /// eBPF for a server tailscope spawned when the host supports it (else, with the reason
    /// noted, none); the server's own stamps otherwise.
    #[default]
    Auto,
    /// eBPF, or the run is refused (the reason given).
    Ebpf,
    /// Only what the server returns itself (the built-in server's stamps).
    Stamps,
    /// None: the records keep no stamps.
    Off,
}

impl std::str::FromStr for StagesMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => StagesMode::Auto,
            "ebpf" => StagesMode::Ebpf,
            "stamps" => StagesMode::Stamps,
            "off" => StagesMode::Off,
            other => {
                return Err(format!(
                    "--stages must be auto, ebpf, stamps or off, got '{other}'"
                ))
            }
        })
    }
}

/// What the eBPF stage collector may cost (`--stages-budget`): a share of the server's CPUs,
/// which its programs' measured time (and its sampling thread's) stays within by attaching
/// them only in windows (`ebpf::sampling`), or `all`: attached throughout, every request
/// joined, at whatever it costs (up to a fifth of a server's peak throughput).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StagesBudget {
    All,
    /// A fraction of the server's CPUs' time, above 0 and at most 1.
    Share(f64),
}

impl Default for StagesBudget {
    /// 1 % of the server's CPUs: with what no statistic sees (the system call slow path
    /// while the programs are attached, the kernel's own work to attach and detach them)
    /// the throughput cost stays within 2 % at the server's peak.
    fn default() -> Self {
        StagesBudget::Share(0.01)
    }
}

impl std::str::FromStr for StagesBudget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(StagesBudget::All);
        }
        let bad = || {
            format!(
                "--stages-budget must be a percentage of the server's CPUs above 0 and at most 100 (e.g. 1%) or all, got '{s}'"
            )
        };
        let pct: f64 = s
            .strip_suffix('%')
            .unwrap_or(s)
            .parse()
            .map_err(|_| bad())?;
        if !(pct > 0.0 && pct <= 100.0) {
            return Err(bad());
        }
        Ok(StagesBudget::Share(pct / 100.0))
    }
}

impl std::fmt::Display for StagesBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StagesBudget::All => f.write_str("all"),
            StagesBudget::Share(x) => write!(f, "{}%", x * 100.0),
        }
    }
}

/// What a row of a sweep is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// A point of the grid.
    Load,
    /// A step of a max-load search.
    Search,
    /// The search's result × 1.3, which must not meet.
    Check,
    /// A step of the max-RPS search.
    MaxRps,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Load => "load",
            Role::Search => "search",
            Role::Check => "check",
            Role::MaxRps => "max-rps",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// The configuration stored with a run, or (its keys `label` and `run`) with an experiment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    // ---- what the user asked: `run`'s keys, written even when not given ----
    /// The target as the user named it.
    #[serde(default, deserialize_with = "lenient")]
    pub target: Option<String>,
    /// `--workload` preset (`etc`).
    #[serde(default, deserialize_with = "lenient")]
    pub workload_preset: Option<String>,
    /// `--requests` as written.
    #[serde(default, deserialize_with = "lenient")]
    pub requests: Option<String>,
    /// Zipf popularity exponent.
    #[serde(default, deserialize_with = "lenient")]
    pub alpha: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    pub label: Option<String>,
    /// `--service` as written (sweeps).
    #[serde(default, deserialize_with = "lenient")]
    pub service: Option<String>,
    /// `--slo` as written (sweeps, tuning).
    #[serde(default, deserialize_with = "lenient")]
    pub slo: Option<String>,
    /// The load in % of the capacity, when it was asked so (sweep points).
    #[serde(default, deserialize_with = "lenient")]
    pub load_pct: Option<f64>,
    /// The ideal the run is judged against.
    #[serde(default, deserialize_with = "lenient")]
    pub ideal: Option<IdealSpec>,
    /// `--churn MIN,MAX` requests per connection.
    #[serde(default, deserialize_with = "lenient")]
    pub churn: Option<(u64, u64)>,
    /// The host's noise probed before the run or its sweep.
    #[serde(default, deserialize_with = "lenient")]
    pub host_noise: Option<noise::HostNoise>,

    // ---- written when set ----
    /// The target measured (a spawned server's address).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub url: Option<String>,
    /// The rate as asked (`"40%"`, `"5000"`).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub rate: Option<String>,
    /// The rate offered, req/s.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub rate_rps: Option<f64>,
    /// `--arrival` as written.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub arrival: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub warmup: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub connections: Option<u64>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub threads: Option<u64>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_outstanding: Option<u64>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub request_size: Option<u64>,
    /// The generator's CPUs.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpus: Option<Vec<u64>>,
    /// Whether the built-in server's stage stamps were asked for.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub stamps: Option<bool>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub seed: Option<u64>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub stages: Option<StagesMode>,
    /// `--stages-budget` as written (absent: the default).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub stages_budget: Option<String>,
    /// The view an SLO is judged on.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub slo_view: Option<ViewChoice>,
    /// The view asked for (auto when absent).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub view: Option<ViewChoice>,
    /// The workload, as lab's spec prints it.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub workload: Option<String>,
    /// The server behind the target.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub server: Option<ServerFacts>,
    /// A sweep point's knob values besides the load.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub params: Option<BTreeMap<String, Value>>,
    /// What a sweep's row is for.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub role: Option<Role>,
    /// Which arm of an A/B comparison (`ab`) the run is.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub arm: Option<Arm>,
    /// A colocation's cell.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub colocation_cell: Option<u64>,
    /// A tuning walk's step and what it changed.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub tune_step: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub tune_changes: Option<Vec<String>>,
    /// The repeat's index (`run --repeat`).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub repeat: Option<u64>,
    /// The agents that sent the load.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub agents: Option<crate::agent_spec::Agents>,
    /// The demo's own keys.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub demo: Option<bool>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub client_cpu: Option<u64>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub server_cpu: Option<u64>,
    /// The built-in server's work (`det:20us`).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub work: Option<String>,
    /// An experiment's run template (`run --repeat`: `{"repeat": n, "run": {…}}`).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub run: Option<Box<RunConfig>>,
    /// Keys this build does not know (an older or newer version's), kept as stored.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A configuration as the store keeps it (a run's, or an experiment's kind: `experiments`'
/// `SweepConfig` and the others).
pub fn stored<T: Serialize>(config: &T) -> Value {
    // Every field is a string, number, list or map with string keys: serde_json cannot fail.
    serde_json::to_value(config).unwrap_or(Value::Null)
}

impl RunConfig {
    /// A stored configuration read back (lenient: see the module).
    pub fn of(v: &Value) -> RunConfig {
        read(v)
    }

    /// The JSON object the store keeps.
    pub fn to_json(&self) -> Value {
        stored(self)
    }

    /// The label: the configuration's own, else its run template's.
    pub fn label(&self) -> Option<&str> {
        self.label
            .as_deref()
            .or_else(|| self.run.as_ref().and_then(|r| r.label.as_deref()))
    }

    /// The view asked for (auto when absent) and the host's noise probed before the run.
    pub fn asked(&self) -> (ViewChoice, Option<noise::HostNoise>) {
        (self.view.unwrap_or_default(), self.host_noise.clone())
    }
}

/// One of the two configurations compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arm {
    Baseline,
    Candidate,
}

impl Arm {
    pub fn as_str(self) -> &'static str {
        match self {
            Arm::Baseline => "baseline",
            Arm::Candidate => "candidate",
        }
    }
    /// Its place in a pair (the baseline first).
    pub fn index(self) -> usize {
        match self {
            Arm::Baseline => 0,
            Arm::Candidate => 1,
        }
    }
}

impl std::fmt::Display for Arm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stored_configuration_reads_back_equal_and_keeps_unknown_keys() {
        let stored = json!({
            "target": "nullrpc://127.0.0.1:7", "rate": "40%", "arrival": "poisson",
            "workload_preset": null, "duration": "2s", "requests": null, "warmup": "0.5s",
            "connections": 4, "threads": 1, "cpus": [0], "max_outstanding": 64,
            "timeout": "1s", "request_size": 64, "stamps": true, "seed": 1, "alpha": null,
            "stages": "stamps", "label": "base", "params": {"connections": "4"},
            "rate_rps": 1234.5, "load_pct": 40.0, "role": "load", "future_key": [1, 2],
        });
        let c = RunConfig::of(&stored);
        assert_eq!(c.target.as_deref(), Some("nullrpc://127.0.0.1:7"));
        assert_eq!(
            (c.connections, c.seed, c.rate_rps),
            (Some(4), Some(1), Some(1234.5))
        );
        assert_eq!(c.role, Some(Role::Load));
        assert_eq!(c.other.get("future_key"), Some(&json!([1, 2])));
        let written = c.to_json();
        for (k, v) in stored.as_object().unwrap() {
            assert_eq!(written.get(k), Some(v), "{k}");
        }
        assert_eq!(RunConfig::of(&written), c);
    }

    #[test]
    fn a_value_of_another_type_reads_as_absent_and_an_experiment_finds_its_template_label() {
        let c = RunConfig::of(&json!({"connections": "four", "seed": -1, "cpus": "0"}));
        assert_eq!((c.connections, c.seed, c.cpus), (None, None, None));
        let e = RunConfig::of(&json!({"repeat": 3, "run": {"label": "nightly"}}));
        assert_eq!(e.label(), Some("nightly"));
        assert_eq!(RunConfig::of(&json!(17)), RunConfig::default());
    }
}
