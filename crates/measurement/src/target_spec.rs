//! What an experiment's target is, as the user specified it: its protocol ([`Scheme`]), the
//! server tailscope spawns and how it is placed ([`SpawnSpec`]), the workload
//! ([`WorkloadSpec`]) — plain data, checked and started by [`crate::target`].

use host::placement::SchedSpec;
use host::topology::SmtPolicy;
use load::{KvWorkload, NullRpcWorkload, Popularity, SizeDist, Target};
use serde::{Deserialize, Serialize};
use stress::StressSpec;

use crate::error::{invalid, LabError};

/// What protocol a target speaks (the transport is in [`load::Target`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    NullRpc,
    Memcached,
    Http,
    Redis,
    Grpc,
}

impl Scheme {
    pub(crate) fn of(target: &Target) -> Result<Scheme, LabError> {
        Ok(match target.scheme.as_str() {
            "nullrpc" => Scheme::NullRpc,
            "memcached" => Scheme::Memcached,
            // HTTP/2 (h2c://, h2://) and HTTPS are HTTP to the workload and the ideal; their
            // codecs and TLS are load's.
            "http" | "h2c" => Scheme::Http,
            "redis" => Scheme::Redis,
            "grpc" => Scheme::Grpc,
            other => return Err(invalid(format!("target: unknown scheme '{other}'"))),
        })
    }

    /// The real server behind the scheme (None: the built-in null-RPC server). tailscope
    /// starts no gRPC server (`--spawn` with grpc:// is refused before this is asked).
    pub fn kind(self) -> Option<targets::Kind> {
        match self {
            Scheme::NullRpc | Scheme::Grpc => None,
            Scheme::Memcached => Some(targets::Kind::Memcached),
            Scheme::Http => Some(targets::Kind::Nginx),
            Scheme::Redis => Some(targets::Kind::Redis),
        }
    }
}

/// A server for tailscope to start: its knobs. For `nullrpc://` it is the built-in server,
/// started in this process.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SpawnSpec {
    /// memcached -t, nginx worker processes, redis I/O threads; the built-in server's workers.
    pub threads: Option<u32>,
    /// Its CPUs (empty: anywhere).
    pub cpus: Vec<usize>,
    /// Its scheduling policy.
    #[serde(serialize_with = "display_opt")]
    pub sched: Option<SchedSpec>,
    /// The built-in server only: its architecture (default epoll) and synthetic work per
    /// request (default none).
    #[serde(serialize_with = "display_arch")]
    pub arch: Option<server::Arch>,
    #[serde(serialize_with = "debug_opt")]
    pub work: Option<model::ServiceSpec>,
    /// A real server's item memory in MiB (memcached -m, redis maxmemory).
    pub memory_mb: Option<u32>,
    /// nginx: `open_file_cache` on.
    pub open_file_cache: bool,
    /// Instances of a real server, each on its own port and share of the CPUs (scale-out
    /// against scale-up); the load's connections go round-robin over them. None: one.
    pub instances: Option<u32>,
    /// Choose the CPUs (among `cpus`, or all) by physical core, one per worker thread:
    /// on distinct cores or packed onto SMT siblings.
    pub smt: Option<SmtPolicy>,
    /// Its memory policy (`bind:N` also takes its CPUs from node N).
    #[serde(serialize_with = "display_opt")]
    pub numa: Option<host::numa::NumaPolicy>,
    /// Isolation (`host::isolate`), applied once the server runs and removed before it
    /// stops: a cgroup cpuset, a memory limit, CPU bandwidth (a fraction of one CPU), an
    /// HTB rate in bit/s on `net_dev` (`[NETNS/]DEV`), L3 cache ways through resctrl.
    pub cpuset: Vec<usize>,
    pub memory_limit_bytes: Option<u64>,
    pub cpu_quota: Option<f64>,
    pub net_rate_bps: Option<u64>,
    pub net_dev: Option<String>,
    pub llc_ways: Option<u32>,
    /// A real server started in a container (ThunderX Fig. 8); None: on the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<Container>,
    /// A `veth` container's network receive processing (RPS on both ends of its pair) on
    /// these CPUs (ThunderX Table VI: the server's core or another); empty: where the
    /// kernel puts it (the sending CPU).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rx_cpus: Vec<usize>,
}

/// How a spawned server is contained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Container {
    /// Mount, UTS and IPC namespaces of its own; the host's network.
    Namespaces,
    /// Also a network namespace of its own, reached over a veth pair (LXC's default
    /// network, without its bridge).
    Veth,
}

impl std::str::FromStr for Container {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "namespaces" => Ok(Container::Namespaces),
            "veth" => Ok(Container::Veth),
            other => Err(format!(
                "unknown container '{other}' (none, namespaces or veth)"
            )),
        }
    }
}

impl std::fmt::Display for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Container::Namespaces => "namespaces",
            Container::Veth => "veth",
        })
    }
}

fn display_arch<S: serde::Serializer>(v: &Option<server::Arch>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(a) => s.serialize_str(a.name()),
        None => s.serialize_none(),
    }
}

fn debug_opt<S: serde::Serializer, T: std::fmt::Debug>(
    v: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_str(&format!("{v:?}")),
        None => s.serialize_none(),
    }
}

fn display_opt<S: serde::Serializer, T: std::fmt::Display>(
    v: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_str(&v.to_string()),
        None => s.serialize_none(),
    }
}

/// The workload's knobs (each applies to the schemes that have it).
#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    /// memcached/redis: share of gets.
    pub get_ratio: f64,
    pub key_size: SizeDist,
    pub value_size: SizeDist,
    /// Distinct items (keys).
    pub items: u64,
    /// Key or file popularity.
    pub popularity: Popularity,
    /// http: number of files (f0..fN-1); a spawned nginx serves generated ones.
    pub files: Option<u32>,
    /// http: sizes of the generated files (fixed, or drawn from a distribution).
    pub file_size: targets::FileSizes,
    /// nullrpc: request size and stamps.
    pub nullrpc: NullRpcWorkload,
    /// grpc: the method and its request message.
    pub grpc: crate::grpc_call::GrpcSpec,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        let kv = KvWorkload::default();
        WorkloadSpec {
            get_ratio: kv.get_ratio,
            key_size: kv.key_size,
            value_size: kv.value_size,
            items: kv.items,
            popularity: Popularity::Uniform,
            files: None,
            file_size: targets::FileSizes::Fixed(4096),
            nullrpc: NullRpcWorkload::default(),
            grpc: Default::default(),
        }
    }
}

/// Everything the user said about the target.
#[derive(Clone, Debug)]
pub struct TargetSpec {
    /// `scheme://host:port[/path]`; with a spawned server only the scheme counts.
    pub url: String,
    /// Start the URL's real server instead of connecting to one.
    pub spawn: Option<SpawnSpec>,
    pub workload: WorkloadSpec,
    /// http: each client connection carries MIN..=MAX requests, then is closed and reopened.
    pub churn: Option<(u32, u32)>,
    /// memcached/redis: set every item before the run.
    pub preload: bool,
    /// A stressor beside every run, started before the load and stopped after it.
    pub stress: Option<StressSpec>,
    /// TLS targets (`https://`, `h2://`): which certificates to trust, the server name.
    pub tls: load::TlsOptions,
}
