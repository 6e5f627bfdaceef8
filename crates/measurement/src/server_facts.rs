//! [`ServerFacts`]: what a run keeps about the server behind its target — spawned (its kind,
//! version, command line, processes), built in (its address, architecture, workers, CPUs) or
//! external (its scheme) — and what happened to it during the run (a stressor beside it, the
//! items it evicted).
//!
//! Its JSON is the `server` object of `--json` and of the stored configuration and summary:
//! a key is written only where it was before (the built-in server's `sched`, `numa` and
//! `isolation` are written as `null` when unset; a spawned server's only when set). Keys this
//! build does not know (a newer build's, or an older one's) are kept in `extra` and written
//! back, so the object only ever grows.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::lenient::lenient;

/// A spawned server's container as a run records it (ThunderX Fig. 8).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContainerFacts {
    pub kind: crate::target_spec::Container,
    /// The namespaces of its own: `mnt`, `uts`, `ipc`, and `net` with a veth pair.
    pub namespaces: Vec<String>,
    /// Its network (namespace, veth pair, addresses), when it has its own.
    pub network: Option<String>,
    /// CPUs that handle its network's receive processing (RPS on its veth end); empty: the
    /// kernel's default.
    pub rx_cpus: Vec<usize>,
    /// How long making its network took, µs.
    pub apply_us: Option<f64>,
}

/// A key present (`Some`, its value possibly `null`) or absent (`None`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = Value::deserialize(d)?;
    Ok(Some(serde_json::from_value(v).unwrap_or(None)))
}

/// A key present with any value, `null` included.
fn present_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The server behind a run's target (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerFacts {
    /// Started by tailscope as a process of its own.
    #[serde(default, deserialize_with = "lenient")]
    pub spawned: bool,
    /// The built-in server, in this process.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub builtin: Option<bool>,
    /// A spawned server's kind (`memcached`, `nginx`, …).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub kind: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub version: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub command_line: Option<Vec<String>>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub worker_threads: Option<u32>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub pids: Option<Vec<u32>>,
    /// A server the user started (not spawned, no `--server-pid`): the process found
    /// listening on the target's address, whose threads the why counts as the server's, or
    /// why none was (issue 37).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub found: Option<String>,
    /// Instances of a scaled-out spawned server.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub instances: Option<usize>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub instance_addresses: Option<Vec<String>>,
    /// The isolation mechanisms applied (`host::isolate`), as recorded; `null` for a built-in
    /// server without any.
    #[serde(
        default,
        deserialize_with = "present_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub isolation: Option<Value>,
    /// The memory policies the kernel reports for the spawned server.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_policies: Option<Vec<String>>,
    /// The spawned server's container (ThunderX Fig. 8): its kind, namespaces, network and
    /// receive CPUs, and the time it took to make.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub container: Option<ContainerFacts>,
    /// The built-in server's address, architecture, workers and CPUs.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub address: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub arch: Option<String>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub workers: Option<usize>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpus: Option<Vec<usize>>,
    /// The built-in server's scheduling policy and NUMA policy (`null` when unset).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub sched: Option<Option<String>>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub numa: Option<Option<String>>,
    /// An external server's URL scheme.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub scheme: Option<String>,
    /// What the stressor beside the run did (`stress::Report`), as recorded.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub colocated_stress: Option<Value>,
    /// Items the server evicted during the run, and since it started.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub evictions_during_run: Option<u64>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub evictions_total: Option<u64>,
    /// The built-in server's T1: which receive stamp it came from (`source`: "NIC hardware
    /// stamp", "kernel software stamp", both, or "none"), the reads of each kind since the
    /// server started and the NIC clock used (`nic_clock`, null without one).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub t1_stamp: Option<Value>,
    /// Keys this build does not know, kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What the built-in server's T1 came from, from its counters and its NIC clock.
pub fn t1_stamp(c: &server::Counters, nic_clock: Option<&std::path::Path>) -> Value {
    let source = match (c.rx_stamps_hardware > 0, c.rx_stamps_software > 0) {
        (true, false) => "NIC hardware stamp",
        (false, true) => "kernel software stamp",
        (true, true) => "NIC hardware stamp, else kernel software stamp",
        (false, false) => "none",
    };
    serde_json::json!({
        "source": source,
        "hardware_reads": c.rx_stamps_hardware,
        "software_reads": c.rx_stamps_software,
        "nic_clock": nic_clock.map(|p| p.display().to_string()),
    })
}

impl ServerFacts {
    /// True when nothing is known of the server (a run that never reached its target).
    pub fn is_empty(&self) -> bool {
        self == &ServerFacts::default()
    }

    /// The object as `--json` prints it.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_kind_of_server_reads_back_the_object_it_was_written_from() {
        for v in [
            json!({"spawned": true, "kind": "memcached", "version": "1.6.21",
                   "command_line": ["memcached", "-t", "2"], "worker_threads": 2,
                   "pids": [41, 42], "instances": 1, "memory_policies": ["bind:0"],
                   "evictions_during_run": 3, "evictions_total": 9}),
            json!({"spawned": false, "builtin": true, "address": "127.0.0.1:7000",
                   "arch": "epoll", "workers": 2, "cpus": [1], "sched": null, "numa": null,
                   "isolation": null, "colocated_stress": {"kind": "cpu"},
                   "t1_stamp": {"source": "kernel software stamp", "software_reads": 9,
                                "hardware_reads": 0, "nic_clock": null}}),
            json!({"spawned": false, "scheme": "http", "from_a_newer_build": {"x": 1}}),
        ] {
            let f: ServerFacts = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(f.to_json(), v);
            let mut cbor = Vec::new();
            ciborium::into_writer(&f, &mut cbor).unwrap();
            let back: ServerFacts = ciborium::from_reader(cbor.as_slice()).unwrap();
            assert_eq!(back, f);
        }
        let f: ServerFacts = serde_json::from_value(json!({"spawned": false, "scheme": "http",
            "from_a_newer_build": 1}))
        .unwrap();
        assert_eq!(f.extra.len(), 1);
        assert_eq!(f.scheme.as_deref(), Some("http"));
        assert!(ServerFacts::default().is_empty() && !f.is_empty());
    }
}
