//! The target of an experiment: what it is ([`Scheme`]), the server behind it (the built-in
//! server, a real server tailscope spawns and places, or one already running), the workload
//! sent to it, and its queue structure for the ideal.
//!
//! [`TargetPlan::new`] checks everything that can be checked without starting anything;
//! [`TargetPlan::start`] starts the server (when tailscope owns it) and preloads the items of a
//! key-value workload; the [`Ready`] target stops its server when dropped or [`Ready::stop`]ped.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;

use analysis::QueueStructure;
use host::isolate::{Isolated, IsolationPlan, Tasks};
use load::{
    HttpWorkload, KvWorkload, NullRpcWorkload, ProtocolFactory, Target, Transport, Workload,
};
use serde_json::{json, Value};
use server::{ServerConfig, ServerHandle};
use stress::StressSpec;

use crate::error::{invalid, LabError};
use crate::observer::Observer;
use crate::placement;
use crate::server_facts::ServerFacts;
pub use crate::target_spec::{Scheme, SpawnSpec, TargetSpec, WorkloadSpec};

/// Which server the plan starts, if any.
#[derive(Clone, Debug)]
enum Owned {
    None,
    /// One config per instance.
    Spawn(Vec<targets::SpawnConfig>),
    Builtin(ServerConfig),
}

/// A validated target: nothing started, nothing sent yet.
#[derive(Clone, Debug)]
pub struct TargetPlan {
    /// What the store calls the target (the URL the user gave).
    pub label: String,
    pub scheme: Scheme,
    target: Target,
    workload: Workload,
    churn: Option<(u32, u32)>,
    preload: bool,
    owned: Owned,
    isolation: Option<IsolationPlan>,
    stress: Option<StressSpec>,
    container: Option<crate::container::ContainerPlan>,
    /// TLS targets: what to trust and the server name (a spawned server's CA is added when it
    /// starts).
    tls: load::TlsOptions,
}

/// `scheme://[host[:port]][/path]` → `scheme://127.0.0.1:1/path`.
fn placeholder(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let path = rest.find('/').map(|i| &rest[i..]).unwrap_or("");
            format!("{scheme}://127.0.0.1:1{path}")
        }
        None => url.to_string(),
    }
}

/// A spawned server's URL names only the protocol (and, for http, the path): the server
/// listens where tailscope starts it. An address there would be ignored, and the run stored
/// under it, so it is refused.
fn check_no_address(url: &str) -> Result<(), LabError> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(());
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if authority.is_empty() {
        return Ok(());
    }
    Err(invalid(format!(
        "--spawn starts the server itself: give the URL without an address, {}://{} (got '{}')",
        crate::error::clip(scheme),
        crate::error::clip(path),
        crate::error::clip(url)
    )))
}

/// The load's workload for the target's scheme, from the spec's workload options.
fn workload_of(spec: &TargetSpec, scheme: Scheme, target: &Target) -> Result<Workload, LabError> {
    let w = &spec.workload;
    Ok(match scheme {
        Scheme::Http => {
            let paths = match w.files {
                Some(0) => return Err(invalid("--files must be at least 1")),
                Some(n) => (0..n).map(|i| format!("/f{i}")).collect(),
                None if spec.spawn.is_some() => (0..100).map(|i| format!("/f{i}")).collect(),
                None => vec![target.path.clone().unwrap_or_else(|| "/".into())],
            };
            Workload::Http(HttpWorkload {
                paths,
                popularity: w.popularity,
            })
        }
        Scheme::NullRpc => Workload::NullRpc(w.nullrpc),
        Scheme::Grpc => {
            // The method may be the URL's path (grpc://host:port/package.Service/Method).
            let mut call = w.grpc.clone();
            match (&call.method, &target.path) {
                (None, Some(p)) => call.method = Some(p.clone()),
                (Some(m), Some(p)) if m.trim_start_matches('/') != p.trim_start_matches('/') => {
                    return Err(invalid(format!(
                        "--method {} and the URL's path {} name different methods",
                        crate::error::clip(m),
                        crate::error::clip(p)
                    )))
                }
                _ => {}
            }
            Workload::Grpc(crate::grpc_call::workload(&call)?)
        }
        Scheme::Memcached | Scheme::Redis => {
            let kv = KvWorkload {
                get_ratio: w.get_ratio,
                key_size: w.key_size,
                value_size: w.value_size,
                items: w.items,
                popularity: w.popularity,
            };
            kv.validate().map_err(invalid)?;
            Workload::Kv(kv)
        }
    })
}

/// Whether `target` speaks HTTP/2 (`h2c://`, `h2://`, and gRPC's `grpc://`, `grpcs://`): many
/// requests to a read.
pub(crate) fn speaks_h2(target: &Target) -> bool {
    matches!(target.scheme.as_str(), "h2c" | "grpc")
}

/// Why an HTTP/2 run has no eBPF stages.
pub(crate) const NOT_FOR_H2: &str = "HTTP/2 (h2c://, h2://, grpc://) carries several requests' frames in one read or write, and the kernel's events are joined to requests by reads and writes; its stages would name the wrong request";

/// Why a run over TLS has no eBPF stages.
pub(crate) const NOT_FOR_TLS: &str = "over TLS the handshake's and the session tickets' reads and writes share the connection with the requests', and the kernel's events are joined to requests by reads and writes; its stages would name the wrong request";

/// Why the kernel's events cannot be joined to `target`'s requests, if they cannot.
pub(crate) fn not_joinable(target: &Target) -> Option<&'static str> {
    if speaks_h2(target) {
        Some(NOT_FOR_H2)
    } else if target.tls {
        Some(NOT_FOR_TLS)
    } else {
        None
    }
}

impl TargetPlan {
    /// Why the kernel's events cannot be joined to this target's requests (HTTP/2, TLS).
    pub(crate) fn not_joinable(&self) -> Option<&'static str> {
        not_joinable(&self.target)
    }

    /// Validates the target and its options (no process started, nothing sent).
    pub fn new(spec: &TargetSpec) -> Result<TargetPlan, LabError> {
        // With a spawned server the address is the spawned server's: `memcached://` names
        // only the protocol (an address is refused), so the URL is checked with a placeholder.
        let url = match spec.spawn {
            Some(_) => {
                check_no_address(&spec.url)?;
                placeholder(&spec.url)
            }
            None => spec.url.clone(),
        };
        let target: Target = url.parse().map_err(|e| invalid(format!("target: {e}")))?;
        let scheme = Scheme::of(&target)?;
        let kind = scheme.kind();
        if scheme == Scheme::Grpc && spec.spawn.is_some() {
            return Err(invalid(
                "--spawn starts memcached, nginx, redis or the built-in server; tailscope has no gRPC server to start: point grpc:// at a running one",
            ));
        }
        if scheme != Scheme::Grpc && spec.workload.grpc.given() {
            return Err(invalid(
                "--method, --proto, --message, --data and --metadata apply to gRPC targets (grpc://, grpcs://)",
            ));
        }
        let workload = workload_of(spec, scheme, &target)?;
        let w = &spec.workload;
        if !target.tls && spec.tls != load::TlsOptions::default() {
            return Err(invalid(
                "--insecure, --ca, --sni and --tls-handshake-per-request apply to TLS targets (https://, h2://, grpcs://, rediss://, memcached+tls://)",
            ));
        }
        if spec.tls.insecure && spec.tls.ca.is_some() {
            return Err(invalid("--insecure and --ca exclude each other"));
        }
        // The codec factory checks the workload against the scheme (e.g. the request size)
        // and TLS's options (a CA file is read here). A server tailscope starts brings its own
        // CA, made when it starts: until then nothing is checked against roots.
        let check_tls = match (&spec.spawn, &spec.tls.ca) {
            (Some(_), None) => load::TlsOptions {
                insecure: true,
                ..spec.tls.clone()
            },
            _ => spec.tls.clone(),
        };
        let _checked =
            load::protocol_factory_with(&target, &workload, 1, &check_tls).map_err(invalid)?;
        if spec.churn.is_some() && scheme != Scheme::Http {
            return Err(invalid("--churn applies to http targets only"));
        }
        if let Some((lo, hi)) = spec.churn {
            if lo == 0 || hi < lo {
                return Err(invalid(format!(
                    "--churn must be MIN,MAX requests per connection with 1 <= MIN <= MAX, got {lo},{hi}"
                )));
            }
        }
        // A handshake per request is the engine's churn of one request per connection.
        let churn = match (spec.tls.handshake_per_request, spec.churn) {
            (true, Some(_)) => {
                return Err(invalid(
                    "--tls-handshake-per-request opens a connection per request: drop --churn",
                ))
            }
            (true, None) => Some((1, 1)),
            (false, c) => c,
        };
        if let Some(s) = &spec.spawn {
            if kind.is_some() && (s.arch.is_some() || s.work.is_some()) {
                return Err(invalid(
                    "--server-arch and --server-work apply to the built-in server (nullrpc://) only",
                ));
            }
            if kind.is_none()
                && (s.memory_mb.is_some() || s.open_file_cache || s.instances.is_some())
            {
                return Err(invalid(
                    "--server-memory-mb, --open-file-cache and --server-instances apply to real servers (memcached, nginx, redis)",
                ));
            }
        }
        let owned = match (&spec.spawn, kind) {
            (None, _) => Owned::None,
            (Some(s), None) => {
                let arch = s.arch.unwrap_or(server::Arch::Epoll);
                if arch.is_udp() != (target.transport == Transport::Udp) {
                    return Err(invalid(format!(
                        "--server-arch {} does not serve {} ({} targets use the udp architecture)",
                        arch.name(),
                        target.scheme,
                        "nullrpc+udp"
                    )));
                }
                let workers = s.threads.map_or(1, |t| t as usize);
                let cpus = placement::server_cpus(s, workers)?;
                let nodes = host::numa::Nodes::read(&host::probe::HostRoot::default());
                let cfg = ServerConfig {
                    arch,
                    workers,
                    work: s.work.clone(),
                    numa: s.numa.as_ref().map(|p| p.for_cpus(&nodes, &cpus)),
                    cpus,
                    sched: s.sched.clone(),
                    seed: 1,
                    ..ServerConfig::default()
                };
                cfg.validate().map_err(invalid)?;
                Owned::Builtin(cfg)
            }
            (Some(s), Some(k)) => Owned::Spawn(placement::spawn_configs(
                s,
                k,
                target.transport == Transport::Udp,
                (speaks_h2(&target), target.tls),
                w,
            )?),
        };
        let isolation = match &spec.spawn {
            Some(s) => {
                // The built-in server's threads live in tailscope's own process.
                let tasks = if kind.is_none() {
                    Tasks::Threads
                } else {
                    Tasks::Processes
                };
                placement::check_isolation(s, tasks)?
            }
            None => None,
        };
        if let Some(st) = &spec.stress {
            st.validate().map_err(invalid)?;
        }
        let container = match &spec.spawn {
            Some(s) => crate::container::check(s, kind.is_some())?,
            None => None,
        };
        Ok(TargetPlan {
            label: spec.url.clone(),
            scheme,
            target,
            workload,
            churn,
            preload: spec.preload,
            owned,
            isolation,
            stress: spec.stress.clone(),
            container,
            tls: spec.tls.clone(),
        })
    }

    /// The built-in null-RPC server, started in this process on a free loopback port.
    pub fn builtin(cfg: ServerConfig, workload: NullRpcWorkload) -> Result<TargetPlan, LabError> {
        cfg.validate().map_err(invalid)?;
        let scheme = if cfg.arch.is_udp() {
            "nullrpc+udp"
        } else {
            "nullrpc"
        };
        let url = format!("{scheme}://127.0.0.1:1");
        let target: Target = url.parse().map_err(|e| invalid(format!("target: {e}")))?;
        let workload = Workload::NullRpc(workload);
        let _checked = load::protocol_factory(&target, &workload, 1).map_err(invalid)?;
        Ok(TargetPlan {
            label: format!("builtin:{}", cfg.arch.name()),
            scheme: Scheme::NullRpc,
            target,
            workload,
            churn: None,
            preload: false,
            owned: Owned::Builtin(cfg),
            isolation: None,
            stress: None,
            container: None,
            tls: load::TlsOptions::default(),
        })
    }

    /// Whether tailscope starts (and so knows the shape of) the server.
    pub fn owns_server(&self) -> bool {
        !matches!(self.owned, Owned::None)
    }

    /// The server's CPUs when tailscope places it.
    pub fn server_cpus(&self) -> Vec<usize> {
        match &self.owned {
            Owned::Spawn(v) => {
                let mut all: Vec<usize> = v.iter().flat_map(|c| c.cpus.clone()).collect();
                all.sort_unstable();
                all.dedup();
                all
            }
            Owned::Builtin(c) => c.cpus.clone(),
            Owned::None => Vec::new(),
        }
    }

    /// Instances of the server tailscope starts (1 unless scaled out).
    pub fn instances(&self) -> usize {
        match &self.owned {
            Owned::Spawn(v) => v.len(),
            _ => 1,
        }
    }

    /// The stressor every run of this target runs beside.
    pub fn stress(&self) -> Option<&StressSpec> {
        self.stress.as_ref()
    }

    /// Starts the server when tailscope owns it (then its isolation), and preloads a
    /// key-value workload's items. Isolation left by a tailscope that died is removed first.
    pub fn start(&self, stop: &AtomicBool, obs: &dyn Observer) -> Result<Ready, LabError> {
        let journal = placement::clear_leftovers(obs);
        let mut container_net = None;
        let mut tls = self.tls.clone();
        let (target, url, server) = match &self.owned {
            Owned::Spawn(cfgs) => {
                let v = match &self.container {
                    Some(plan) => {
                        let (cfgs, net) = crate::container::start(plan, &journal, cfgs)?;
                        if let Some(n) = &net {
                            obs.note(&format!(
                                "container network: {} ({:.0} µs)",
                                n.detail, n.apply_us
                            ));
                        }
                        container_net = net;
                        placement::start_instances(&cfgs, obs)?
                    }
                    None => placement::start_instances(cfgs, obs)?,
                };
                let url = v[0].url();
                let target: Target = url
                    .parse()
                    .map_err(|e| LabError::Failed(format!("spawned server's URL {url}: {e}")))?;
                // A TLS server tailscope made the certificate of is verified against its CA.
                if let Some(ca) = v[0].ca_file() {
                    if !tls.insecure && tls.ca.is_none() {
                        tls.ca = Some(ca);
                    }
                }
                (target, url, Server::Spawned(v))
            }
            Owned::Builtin(cfg) => {
                let h = start_builtin(cfg)?;
                let url = format!(
                    "{}://{}",
                    if cfg.arch.is_udp() {
                        "nullrpc+udp"
                    } else {
                        "nullrpc"
                    },
                    h.local_addr()
                );
                let target: Target = url
                    .parse()
                    .map_err(|e| LabError::Failed(format!("built-in server's URL {url}: {e}")))?;
                obs.note(&format!(
                    "built-in server ({}, {} worker(s)) at {}",
                    cfg.arch.name(),
                    cfg.workers,
                    h.local_addr()
                ));
                (target, url, Server::Builtin(h, cfg.clone()))
            }
            Owned::None => (
                self.target.clone(),
                self.target.to_string(),
                Server::External,
            ),
        };
        let isolation = match &self.isolation {
            Some(plan) => {
                let (pids, tids) = match &server {
                    Server::Spawned(v) => (v.iter().flat_map(|s| s.pids()).collect(), Vec::new()),
                    Server::Builtin(..) => (Vec::new(), own_server_threads()),
                    Server::External => (Vec::new(), Vec::new()),
                };
                Some(placement::isolate(plan, &journal, &pids, &tids, obs)?)
            }
            None => None,
        };
        let spread: Vec<SocketAddr> = match &server {
            Server::Spawned(v) if v.len() > 1 => v.iter().map(|s| s.addr()).collect(),
            _ => Vec::new(),
        };
        if self.preload && matches!(self.workload, Workload::Kv(_)) {
            // Every instance of a scaled-out server holds every item.
            for t in placement::each_instance(&target, &spread) {
                obs.note("preloading items");
                let st = load::preload_with(&t, &self.workload, 4, &tls, stop, &|done, total| {
                    obs.progress("preload", done, total)
                })?;
                if st.failed > 0 {
                    obs.note(&format!(
                        "preload: {} of {} items were not stored",
                        st.failed, st.items
                    ));
                }
            }
        }
        Ok(Ready {
            isolation,
            spread,
            stress: self.stress.clone(),
            server_cpus: self.server_cpus(),
            label: self.label.clone(),
            scheme: self.scheme,
            target,
            url,
            server,
            container: self.container.clone().map(|p| (p, container_net)),
            workload: self.workload.clone(),
            churn: self.churn,
            tls,
        })
    }
}

fn start_builtin(cfg: &ServerConfig) -> Result<ServerHandle, LabError> {
    let io = |e: std::io::Error| LabError::Failed(format!("binding the built-in server: {e}"));
    Ok(if cfg.arch.is_udp() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").map_err(io)?;
        server::Server::start_udp(s, cfg.clone())?
    } else {
        let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(io)?;
        server::Server::start_tcp(l, cfg.clone())?
    })
}

/// The server behind a ready target.
// One per run: the size of the built-in server's variant costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
enum Server {
    External,
    /// One per instance.
    Spawned(Vec<targets::Spawned>),
    Builtin(ServerHandle, ServerConfig),
}

/// A target ready to be measured; a server tailscope started stops when this is dropped.
pub struct Ready {
    /// Removed before the server stops (fields drop in declaration order).
    isolation: Option<Isolated>,
    /// Every instance's address when the server is scaled out (the load spreads over them).
    spread: Vec<SocketAddr>,
    stress: Option<StressSpec>,
    pub label: String,
    pub scheme: Scheme,
    pub target: Target,
    pub url: String,
    server: Server,
    /// The server's container; its network is removed after the server stops (declared
    /// after `server`, so it also drops after it).
    container: Option<(
        crate::container::ContainerPlan,
        Option<host::isolate::ContainerNet>,
    )>,
    pub workload: Workload,
    pub churn: Option<(u32, u32)>,
    server_cpus: Vec<usize>,
    /// TLS targets: what the connections trust (with a spawned server's CA).
    pub tls: load::TlsOptions,
}

impl Ready {
    /// Whether tailscope started the server (and so can calibrate it without asking).
    pub fn owns_server(&self) -> bool {
        !matches!(self.server, Server::External)
    }

    /// The server's CPUs when tailscope placed it (empty otherwise).
    pub fn server_cpus(&self) -> Vec<usize> {
        self.server_cpus.clone()
    }

    /// A codec factory whose connections draw their requests from `seed`.
    pub fn factory(&self, seed: u64) -> Result<ProtocolFactory, LabError> {
        Ok(load::protocol_factory_with(
            &self.target,
            &self.workload,
            seed,
            &self.tls,
        )?)
    }

    /// The target's worker count and queue structure for the ideal, unless the user said:
    /// memcached over TCP and nginx partition connections over their workers; memcached over
    /// UDP, Redis and the built-in server's single-queue architectures share one queue.
    pub fn ideal_shape(
        &self,
        workers: Option<u32>,
        queues: Option<QueueStructure>,
    ) -> Result<(u32, QueueStructure), LabError> {
        let (auto_workers, auto_queues) = match (&self.server, self.scheme, self.target.transport) {
            (Server::Builtin(_, c), _, _) => {
                let per = matches!(c.arch, server::Arch::Epoll | server::Arch::Thread);
                let w = u32::try_from(c.workers).unwrap_or(u32::MAX).max(1);
                let q = if per && w > 1 {
                    QueueStructure::PerWorker
                } else {
                    QueueStructure::Single
                };
                (w, q)
            }
            (_, Scheme::Redis, _) => (1, QueueStructure::Single),
            // N instances of a one-thread UDP memcached are N single-worker queues.
            (Server::Spawned(v), Scheme::Memcached, Transport::Udp) if v.len() > 1 => {
                (v.len() as u32, QueueStructure::PerWorker)
            }
            (Server::Spawned(v), Scheme::Memcached, Transport::Udp) => {
                (v[0].worker_threads(), QueueStructure::Single)
            }
            // Connection c goes to instance c % N and, in it, to worker (c / N) % t: the same
            // partition as c % (N·t) over N·t per-worker queues.
            (Server::Spawned(v), _, _) => (
                v.iter().map(|s| s.worker_threads()).sum(),
                QueueStructure::PerWorker,
            ),
            (_, Scheme::Memcached, Transport::Tcp) | (_, Scheme::Http, _) => {
                (1, QueueStructure::PerWorker)
            }
            _ => (1, QueueStructure::Single),
        };
        let w = workers.unwrap_or(auto_workers);
        if w == 0 {
            return Err(invalid("--workers must be at least 1"));
        }
        Ok((w, queues.unwrap_or(auto_queues)))
    }

    /// The server's process ids (a spawned server) for the attribution sampler.
    pub fn pids(&self) -> Vec<u32> {
        match &self.server {
            Server::Spawned(v) => v.iter().flat_map(|s| s.pids()).collect(),
            _ => Vec::new(),
        }
    }

    /// Every instance's address when the server is scaled out (else empty): the load's
    /// connections go round-robin over them (`LoadConfig::spread`).
    pub fn spread(&self) -> Vec<SocketAddr> {
        self.spread.clone()
    }

    /// The stressor each run of this target runs beside.
    pub fn stress(&self) -> Option<&StressSpec> {
        self.stress.as_ref()
    }

    /// Changes the stressor beside the next runs (a sweep's `stress` axis keeps the server).
    pub fn set_stress(&mut self, s: Option<StressSpec>) {
        self.stress = s;
    }

    /// Items the spawned server evicted since it started (summed over its instances); None
    /// when it keeps no such counter or it cannot be read.
    pub fn evictions(&self) -> Option<u64> {
        match &self.server {
            Server::Spawned(v) => v
                .iter()
                .map(|s| s.evictions().ok().flatten())
                .sum::<Option<u64>>(),
            _ => None,
        }
    }

    /// The built-in server's threads, when it runs in this process.
    pub fn tids(&self) -> Vec<u32> {
        match &self.server {
            Server::Builtin(..) => own_server_threads(),
            _ => Vec::new(),
        }
    }

    /// What the store keeps about the server, as JSON ([`ServerFacts::to_json`]).
    pub fn server_json(&self) -> Value {
        self.server_facts().to_json()
    }

    /// What the store keeps about the server.
    pub fn server_facts(&self) -> ServerFacts {
        let isolation = self.isolation.as_ref().map(|i| json!(i.mechanisms()));
        match &self.server {
            Server::Spawned(v) => {
                let s = &v[0];
                // What the kernel says the server allocates under (`bind:0` once bound).
                let policies = s.memory_policies();
                ServerFacts {
                    spawned: true,
                    kind: Some(s.kind().name().to_string()),
                    version: Some(s.version()),
                    command_line: Some(s.command_line()),
                    worker_threads: Some(s.worker_threads()),
                    pids: Some(self.pids()),
                    instances: Some(v.len()),
                    instance_addresses: (v.len() > 1)
                        .then(|| self.spread.iter().map(ToString::to_string).collect()),
                    isolation,
                    memory_policies: (!policies.is_empty()).then_some(policies),
                    container: self
                        .container
                        .as_ref()
                        .map(|(p, n)| crate::container::describe(p, n.as_ref())),
                    ..ServerFacts::default()
                }
            }
            Server::Builtin(h, c) => ServerFacts {
                builtin: Some(true),
                address: Some(h.local_addr().to_string()),
                arch: Some(c.arch.name().to_string()),
                workers: Some(c.workers),
                cpus: Some(c.cpus.clone()),
                sched: Some(c.sched.as_ref().map(|s| s.to_string())),
                numa: Some(c.numa.as_ref().map(|p| p.to_string())),
                isolation: Some(isolation.unwrap_or(Value::Null)),
                t1_stamp: Some(crate::server_facts::t1_stamp(&h.counters(), h.hw_clock())),
                ..ServerFacts::default()
            },
            Server::External => ServerFacts {
                scheme: Some(self.target.scheme.clone()),
                ..ServerFacts::default()
            },
        }
    }

    /// Stops a server tailscope started (a no-op for an external one); the built-in server's
    /// counters are returned.
    pub fn stop(self) -> Result<Option<server::Counters>, LabError> {
        // Isolation first: the tasks go back to their groups while they still exist.
        let reverted = self.isolation.map_or(Ok(()), Isolated::revert);
        let stopped = match self.server {
            Server::Spawned(v) => {
                let mut first = Ok(None);
                for s in v {
                    if let Err(e) = s.stop() {
                        first = first.and(Err(e.into()));
                    }
                }
                first
            }
            Server::Builtin(h, _) => Ok(Some(h.shutdown()?)),
            Server::External => Ok(None),
        };
        let removed = match self.container {
            Some((_, Some(net))) => net.remove().map_err(|e| {
                LabError::Failed(format!("removing the server's container network: {e}"))
            }),
            _ => Ok(()),
        };
        reverted?;
        removed?;
        stopped
    }
}

/// The threads of this process whose names mark them as the built-in server's ("ts-…").
pub fn own_server_threads() -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc/self/task") {
        for e in rd.flatten() {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if comm.starts_with("ts-") {
                if let Some(t) = e.file_name().to_str().and_then(|s| s.parse().ok()) {
                    out.push(t);
                }
            }
        }
    }
    out
}
