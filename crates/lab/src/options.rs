//! The options of the measuring commands (`run`, `sweep`, `tune`, `calibrate`, `colocate`)
//! as one typed spec: clap reads them from a command line (each flag's help is its doc
//! comment, each value parsed by its type's `FromStr`), `options_plan` turns them
//! into lab's plans, and an experiment file lays its keys under them
//! ([`SweepOptions::overlay`]). The CLI only flattens them into its commands.

use std::path::PathBuf;
use std::str::FromStr;

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use measurement::{Count, DurationArg};

/// A value as parsed and as the user wrote it (stored configurations repeat the text).
#[derive(Clone, Debug)]
pub struct Given<T> {
    pub text: String,
    pub value: T,
}

/// A value compares with text as the user wrote it.
impl<T> PartialEq<&str> for Given<T> {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

impl<T> std::fmt::Display for Given<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Stored and printed as the user wrote it.
impl<T> Serialize for Given<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<T: FromStr> FromStr for Given<T> {
    type Err = T::Err;
    fn from_str(s: &str) -> Result<Self, T::Err> {
        Ok(Given {
            text: s.to_string(),
            value: s.parse()?,
        })
    }
}

/// The load of every measuring command (`run`, `sweep`, `tune`, an experiment file).
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// Arrival process: poisson, det, lognormal:SIGMA, pareto:SHAPE, gpareto:SHAPE, etc,
    /// trace:PATH.
    #[arg(long, default_value = "poisson")]
    pub arrival: String,
    /// A published key-value workload in one flag: etc (Facebook's ETC pool, Atikoglu et al.
    /// 2012: its key and value sizes, 30 gets to 1 set, its generalized-Pareto gaps). Instead
    /// of --key-size, --value-size, --get-ratio and --arrival.
    #[arg(long, value_enum, conflicts_with_all = ["arrival", "key_size", "value_size", "get_ratio"])]
    pub workload: Option<WorkloadArg>,
    /// Unit of a trace file's timestamps: ns or us.
    #[arg(long, default_value = "ns", value_name = "ns|us")]
    pub trace_unit: model::TimeUnit,
    /// Measured time (e.g. 10s), after the warm-up: a run lasts --warmup plus --duration.
    #[arg(long, default_value = "10s", conflicts_with = "requests")]
    pub duration: Given<DurationArg>,
    /// Stop after this many requests instead of a duration (e.g. 100k).
    #[arg(long)]
    pub requests: Option<Given<Count>>,
    /// Warm-up before the measured --duration (or --requests), excluded from every figure.
    #[arg(long, default_value = "1s")]
    pub warmup: Given<DurationArg>,
    /// Connections to the target.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Generator threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// CPUs for the generator threads (e.g. 0).
    #[arg(long)]
    pub cpus: Option<measurement::CpuList>,
    /// Requests in flight per connection before further ones wait in the client.
    #[arg(long, default_value_t = 64)]
    pub max_outstanding: usize,
    /// Per-request timeout.
    #[arg(long, default_value = "1s")]
    pub timeout: Given<DurationArg>,
    /// Null-RPC request size in bytes.
    #[arg(long, default_value_t = 128)]
    pub request_size: usize,
    /// Do not ask the server for stage stamps.
    #[arg(long)]
    pub no_stamps: bool,
    /// Sleep (epoll with a timeout, waking 100 µs early) when the next send is more than
    /// 200 µs away, instead of spinning; saves the generator's CPU at the cost of lateness
    /// when wake-ups are slow (as on VMs).
    #[arg(long)]
    pub yield_when_far: bool,
    /// What the generator does with requests it sees due late after a stall of its own:
    /// catch-up (send them at once: the user view counts them from their intended time, the
    /// server sees a burst), shed:BOUND (skip those seen due more than BOUND late: the server
    /// sees the process thinned, the run counts them as skipped) or pace:FACTOR (send the
    /// backlog at most FACTOR × the rate: a smoothed burst).
    #[arg(
        long,
        default_value = "catch-up",
        value_name = "catch-up|shed:DUR|pace:Nx"
    )]
    pub overdue: load::Overdue,
    /// Flag the run invalid when the generator's lateness p99 exceeds this.
    #[arg(long, default_value = "50us")]
    pub lateness_threshold: DurationArg,
    /// Keep measuring until the interval of each given percentile is within this fraction of
    /// its estimate: p99=5%, server:p99.9=10% (user view unless named), several joined by
    /// commas; checked every second after --duration, up to --max-duration.
    #[arg(long, value_name = "[VIEW:]PCT=REL%")]
    pub precision: Option<String>,
    /// With --precision: the longest the run may take (then it says it did not converge);
    /// default 60s.
    #[arg(long)]
    pub max_duration: Option<Given<DurationArg>>,
    /// Label each request delay-sensitive (class 0) with this probability, the others class 1
    /// (LNS bursty traffic); latency is then also reported per label.
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Seed of the arrival schedule.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
}

/// The target's server (spawned or not) and the workload sent to it.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// Start the URL's server (memcached, nginx or redis) on a free loopback port instead of
    /// connecting, and stop it after; the URL then names only the protocol (memcached://,
    /// memcached+udp://, http:///, h2c:///, redis://, and over TLS https:///, h2:///,
    /// rediss://, memcached+tls://): an address in it is refused.
    #[arg(long)]
    pub spawn: bool,
    /// Spawned server: threads (memcached -t), worker processes (nginx) or I/O threads (redis).
    #[arg(long)]
    pub server_threads: Option<u32>,
    /// Spawned server: scheduling policy (other:NICE, fifo:PRIO, rr:PRIO).
    #[arg(long)]
    pub server_sched: Option<host::placement::SchedSpec>,
    /// Spawned built-in server (nullrpc:// --spawn): architecture (thread, epoll, udp,
    /// dispatch, staged; default epoll).
    #[arg(long)]
    pub server_arch: Option<server::Arch>,
    /// Spawned built-in server: synthetic work per request (det:50us, exp:50us, …).
    #[arg(long)]
    pub server_work: Option<String>,
    /// memcached/redis: share of gets (the rest are sets).
    #[arg(long, default_value_t = 0.9)]
    pub get_ratio: f64,
    /// memcached/redis: key size in bytes: N, fixed:N, uniform:LO,HI or etc (Facebook ETC's
    /// published fit; with --value-size etc, --get-ratio 0.968 and --arrival etc, the ETC mix).
    #[arg(long, default_value = "64")]
    pub key_size: Given<load::SizeDist>,
    /// memcached/redis: value size in bytes: N, fixed:N, uniform:LO,HI or etc (Facebook ETC's).
    #[arg(long, default_value = "1024")]
    pub value_size: Given<load::SizeDist>,
    /// memcached/redis: number of distinct items (keys).
    #[arg(long, default_value_t = 10_000)]
    pub items: u64,
    /// Key (or file) popularity: uniform or zipf:S.
    #[arg(long, default_value = "uniform")]
    pub popularity: load::Popularity,
    /// memcached/redis: do not set every item before the run.
    #[arg(long)]
    pub no_preload: bool,
    /// http: number of static files (f0..fN-1; generated into a spawned nginx's root).
    #[arg(long)]
    pub files: Option<u32>,
    /// http: sizes of the generated files in bytes: N, uniform:LO,HI or
    /// lognormal:MEDIAN,SIGMA (drawn from a fixed seed: the same files every run).
    #[arg(long, default_value = "4096")]
    pub file_size: targets::FileSizes,
    /// http: each client opens a connection, sends MIN..MAX requests and closes it
    /// (Tales of the Tail §4.3), e.g. 20,40.
    #[arg(long, value_name = "MIN,MAX")]
    pub churn: Option<measurement::Churn>,
    /// TLS targets (https://, h2://, grpcs://, rediss://, memcached+tls://): accept any server
    /// certificate (for test certificates);
    /// the handshake's signatures are still checked, and the run says the certificate was not.
    #[arg(long)]
    pub insecure: bool,
    /// TLS targets: trust the certificates in this PEM file instead of the system's (a spawned
    /// server's own throwaway CA is trusted without it).
    #[arg(long, value_name = "FILE")]
    pub ca: Option<std::path::PathBuf>,
    /// TLS targets: the server name sent (SNI) and checked against the certificate (default:
    /// the URL's host).
    #[arg(long, value_name = "NAME")]
    pub sni: Option<String>,
    /// TLS targets: every request on a new connection with a full handshake (no session
    /// resumed), so each latency includes its connect and handshake; the run reports the
    /// handshakes' own percentiles.
    #[arg(long)]
    pub tls_handshake_per_request: bool,
    /// gRPC targets (grpc://, grpcs://): the unary method called, package.Service/Method.
    #[arg(long, value_name = "METHOD")]
    pub method: Option<String>,
    /// gRPC: the .proto file declaring the method; --message is then JSON for its input type
    /// (imports are looked up beside the file).
    #[arg(long, value_name = "FILE")]
    pub proto: Option<std::path::PathBuf>,
    /// gRPC: the request message, sent with every call: protobuf bytes, or JSON with --proto
    /// (default: the empty message).
    #[arg(long, value_name = "FILE")]
    pub message: Option<std::path::PathBuf>,
    /// gRPC: the request message as JSON on the command line (with --proto), instead of
    /// --message.
    #[arg(long, value_name = "JSON")]
    pub data: Option<String>,
    /// gRPC: custom metadata sent with every call, KEY:VALUE (repeatable), e.g.
    /// "authorization: Bearer …".
    #[arg(long, value_name = "KEY:VALUE")]
    pub metadata: Vec<String>,
    // Isolation, scale-out and colocation (ThunderX §V; Tales §4.1).
    /// Spawned server: item memory in MiB (memcached -m, redis maxmemory). memcached evicts
    /// silently when the items do not fit (64 MB by default); runs report its evictions.
    #[arg(long)]
    pub server_memory_mb: Option<u32>,
    /// Spawned nginx: open_file_cache on (descriptors and sizes of served files kept).
    #[arg(long)]
    pub open_file_cache: bool,
    /// Spawned server: this many instances, each on its own port and share of
    /// --server-cpus; the load's connections go round-robin over them (scale-out).
    #[arg(long)]
    pub server_instances: Option<u32>,
    /// Spawned server: its CPUs chosen by physical core, one per worker thread, among
    /// --server-cpus (or all): distinct-cores or siblings (SMT).
    #[arg(long)]
    pub server_smt: Option<host::topology::SmtPolicy>,
    /// Spawned server: its memory policy (Tales §4.5): bind:NODE (memory from that node,
    /// its CPUs among the node's), interleave:NODES (0-1) or local (each instance bound to
    /// the node of its CPUs). Runs store what /proc/PID/numa_maps then says.
    #[arg(long, value_name = "POLICY")]
    pub server_numa: Option<host::numa::NumaPolicy>,
    /// Spawned server: a cgroup cpuset (a CPU list the server cannot widen).
    #[arg(long)]
    pub server_cpuset: Option<measurement::CpuList>,
    /// Spawned server: a cgroup memory limit (512M, 2G).
    #[arg(long)]
    pub server_memory: Option<measurement::Bytes>,
    /// Spawned server: cgroup CPU bandwidth, a fraction of one CPU (0.5: 50 ms per 100 ms).
    #[arg(long, allow_hyphen_values = true)]
    pub server_cpu_quota: Option<measurement::CpuShare>,
    /// Spawned server: outgoing bandwidth on --net-dev through an HTB class (100mbit).
    #[arg(long)]
    pub net_rate: Option<measurement::NetRate>,
    /// The interface --net-rate (or the net-rate knob) shapes: DEV, or NETNS/DEV for one in
    /// a network namespace (`ip netns`), e.g. the server side of a veth pair.
    #[arg(long, value_name = "[NETNS/]DEV")]
    pub net_dev: Option<String>,
    /// Spawned server: this many L3 cache ways (resctrl; refused where there is none).
    #[arg(long)]
    pub llc_ways: Option<u32>,
    /// A stressor beside each run: cpu, memory or cache, then [:CPUS][@INTENSITY] (e.g.
    /// cache:1@0.5); without CPUs, the server's that are not the generator's.
    #[arg(long)]
    pub stress: Option<stress::StressSpec>,
}

/// What `run` and `sweep` say of the server beside the load: the ideal's service time and
/// shape, the target's spawn and placement options, and what the attribution samples.
#[derive(Args, Debug, Clone)]
pub struct ServerSideArgs {
    /// Per-request service time for the ideal (default: the target's stored calibration).
    #[arg(long)]
    pub service: Option<String>,
    /// Workers of the target, for the ideal (default: a spawned server's threads, else 1;
    /// redis is always 1).
    #[arg(long)]
    pub workers: Option<u32>,
    /// Queue structure of the target, for the ideal: single (one shared queue), per-worker
    /// (connections statically partitioned over the workers), or auto (memcached over TCP and
    /// nginx: per-worker; memcached over UDP, redis, nullrpc: single).
    #[arg(long, value_enum, default_value_t = QueuesArg::Auto)]
    pub queues: QueuesArg,
    #[command(flatten)]
    pub server: TargetArgs,
    /// The server's process id(s), for the attribution ("why"): its threads' run-queue wait
    /// and context switches are sampled during the run.
    #[arg(long, value_delimiter = ',')]
    pub server_pid: Vec<u32>,
    /// The server's CPUs, for the attribution (interrupts, softirqs, steal, other tasks).
    #[arg(long)]
    pub server_cpus: Option<measurement::CpuList>,
    /// Do not sample the sources of tail latency beside the run (no "why"; for measuring the
    /// sampler's own cost, as bench/observer.sh does).
    #[arg(long)]
    pub no_attribution: bool,
}

/// `--queues`: the target's queue structure for the ideal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueuesArg {
    /// From the target: memcached over TCP and nginx per worker, the rest one queue.
    Auto,
    Single,
    PerWorker,
}

impl QueuesArg {
    pub fn structure(self) -> Option<analysis::QueueStructure> {
        match self {
            QueuesArg::Auto => None,
            QueuesArg::Single => Some(analysis::QueueStructure::Single),
            QueuesArg::PerWorker => Some(analysis::QueueStructure::PerWorker),
        }
    }
}

/// The SLO group of every measuring command (`run`, `sweep`, `tune`, `ab`, `colocate`),
/// declared once: the service-level objective and the view it reads, extra percentiles, how an
/// undecided verdict counts, and JUnit / Markdown files of the verdicts. A command whose
/// `--slo` means more (a verdict per step, per arm) says so with its own help
/// (`#[command(mut_arg("slo", …))]` on its struct).
#[derive(Args, Debug, Clone)]
pub struct GateArgs {
    /// Service-level objective: conditions joined by commas, all of which must hold — any
    /// percentile 'p99<=1ms' (p95, p99.5, …), 'mean<=500us', 'errors<=0.1%' (errors, timeouts
    /// and drops), 'rate>=9000' or 'rate>=99%' (of offered); prefix one with a view
    /// ('server:p99<=1ms'). Verdicts read the intervals; violated → exit 3.
    #[arg(long)]
    pub slo: Option<String>,
    /// The view an SLO condition without a prefix reads: user (intended → received), server
    /// (sent → kernel receive), or auto (each run's headline view: the user's when valid, else
    /// the server's). A verdict read from a view that is invalid for the run is undecided.
    #[arg(long, value_enum, default_value_t = ViewArg::Auto)]
    pub slo_view: ViewArg,
    /// Extra percentiles to report beside p50, p90, p99, p99.9 and p99.99, each with its
    /// interval (e.g. 50,95,99.5).
    #[arg(long, value_name = "LIST")]
    pub percentiles: Option<String>,
    /// What an undecided SLO verdict gives: fail (exit 3, a JUnit failure) or pass (exit 0,
    /// JUnit skipped).
    #[arg(long, value_enum, default_value_t = UndecidedArg::Fail)]
    pub slo_undecided: UndecidedArg,
    /// Write the SLO verdicts as JUnit XML (one testcase per condition, per point).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the SLO verdicts as a Markdown table (for a CI job summary).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
}

/// `--slo-undecided`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UndecidedArg {
    Fail,
    Pass,
}

/// `run --view`, `sweep --slo-view`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViewArg {
    /// The user view when it is valid, else the server view.
    Auto,
    User,
    Server,
}

impl From<ViewArg> for experiments::ViewChoice {
    fn from(v: ViewArg) -> experiments::ViewChoice {
        match v {
            ViewArg::Auto => experiments::ViewChoice::Auto,
            ViewArg::User => experiments::ViewChoice::User,
            ViewArg::Server => experiments::ViewChoice::Server,
        }
    }
}

/// A run whose load comes from agents on other hosts (`run --agent`).
#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// Send the load from an agent started by this command line (repeatable), e.g.
    /// 'ssh host1 tailscope agent', 'ip netns exec ns1 tailscope agent', 'kubectl exec -i
    /// pod-1 -- tailscope agent', or local (this binary). The rate is split over the agents;
    /// --connections, --threads and --cpus apply to each.
    #[arg(long = "agent", value_name = "COMMAND")]
    pub agent: Vec<String>,
    /// A TOML file listing agents: [[agent]] tables with command = "…" (and name = "…").
    #[arg(long = "agents", value_name = "FILE")]
    pub agents_file: Option<PathBuf>,
    /// Agents stream every request's record (on) or only histograms (off: then there is no
    /// ideal, server view or stage breakdown).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub agent_records: OnOff,
}

/// `--workload`: the published workloads tailscope ships.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadArg {
    Etc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnOff {
    On,
    Off,
}

/// The options of `sweep` (and of every point of an experiment file) beside its target.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("slo", |a| {
    a.help(
        "Service-level objective (as for `run --slo`), e.g. 'p99<=1ms' or 'p99<=1ms,p99.9<=5ms': \
         a verdict per point (meets / violates / undecided, from the confidence intervals)",
    )
}))]
pub struct SweepOptions {
    /// Offered loads: req/s, or percentages of the calibrated capacity with a trailing %
    /// (on the list or on each); `a,b,...,z` steps evenly: 10,20,...,100%.
    #[arg(long)]
    pub loads: Option<String>,
    /// A knob and its values, NAME=V1,V2,… (';' separates values holding commas); repeat
    /// for more axes, whose product is the grid. Knobs: server-threads, server-cpus,
    /// server-sched, server-arch, server-work, connections, threads, key-size, value-size,
    /// items, popularity, get-ratio, file-size, files, arrival; isolation and colocation:
    /// server-memory, server-cpu-quota, server-cpuset, net-rate, llc-ways, memcached-mb,
    /// open-file-cache, server-instances, server-smt, server-numa, stress (none, cpu:1,
    /// cache:1@0.5, …), server-container (none, namespaces, veth), server-rx-cpus.
    #[arg(long = "param", value_name = "NAME=V1,V2")]
    pub params: Vec<String>,
    /// Run each point this many times (each with its own seed derived from --seed).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    #[command(flatten)]
    pub gate: GateArgs,
    /// Skip the short host-noise probe made before the sweep.
    #[arg(long)]
    pub no_noise_probe: bool,
    /// Check everything (the file, every point's target, placement and isolation on this
    /// host, the store's path) and print the plan: start, calibrate and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// A name stored with the experiment and its runs (config `label`), shown by `runs list` and usable as a
    /// baseline: `tailscope check ID --baseline label:NAME`. Letters, digits and . _ - + / @.
    #[arg(long, value_name = "NAME")]
    pub label: Option<measurement::Label>,
    /// Search the highest offered load meeting the SLO (bracket, then bisect to 2 %), and the
    /// highest rate with achieved >= 99 % of offered and no timeouts.
    #[arg(long)]
    pub find_max: bool,
    /// Most runs per search.
    #[arg(long, default_value_t = 10)]
    pub max_steps: u32,
    /// Options of every run (as for `run`).
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub side: ServerSideArgs,
    /// Send the load from agents (as for `run`).
    #[command(flatten)]
    pub interleave: crate::ab::InterleaveArgs,
    #[command(flatten)]
    pub agents: AgentArgs,
}
