//! Command-line definitions (clap derive). Values parse into the domain crates' types here
//! (clap names the flag of a bad value); the rest is kept as text and validated by each
//! command before any work starts.

use std::path::PathBuf;
use std::str::FromStr;

use clap::{Args, Parser, Subcommand, ValueEnum};

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

impl<T: FromStr> FromStr for Given<T> {
    type Err = T::Err;
    fn from_str(s: &str) -> Result<Self, T::Err> {
        Ok(Given {
            text: s.to_string(),
            value: s.parse()?,
        })
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "tailscope",
    version,
    about = "A tail-latency lab for network services: ideal (queueing theory) vs measured latency",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Simulate or compute the ideal latency distribution of an A/S/c queue.
    Model(ModelCmd),
    /// Run the built-in null-RPC server.
    Serve(ServeArgs),
    /// Open-loop load against a target; measured vs ideal; stored.
    Run(RunArgs),
    /// Find a target's peak throughput and per-request service time (Tales §3.2).
    Calibrate(CalibrateArgs),
    /// The one-command tour: built-in server, calibration, three loads, measured vs ideal.
    Demo(DemoArgs),
    /// Repeat runs over offered loads and knobs (or a TOML experiment file); SLO verdicts,
    /// --find-max.
    Sweep(SweepArgs),
    /// Tales of the Tail's walk: a baseline, then one mitigation at a time (rt, udp, irq,
    /// numa, cstate, governor), measured vs ideal and the throughput each costs or buys.
    Tune(TuneArgs),
    /// Two services on one host (ThunderX Fig. 11): for every pair of their loads, both
    /// measured at once; the QoS matrix of who meets its SLO.
    Colocate(ColocateArgs),
    /// List, show, compare and export stored runs.
    Runs(RunsCmd),
    /// A self-contained HTML report (and PNG figures) of stored runs or of an experiment.
    Report(ReportArgs),
    /// A run or experiment against a stored baseline, per percentile and view: better, worse,
    /// same or undecided (exit code 3 when any is worse).
    Check(CheckArgs),
    /// Check the host for the known sources of tail latency; --apply the safe mitigations.
    Doctor(DoctorArgs),
    /// TSC-gap probe of OS and hardware noise (Where Has My Time Gone?).
    Noise(NoiseArgs),
    /// Built-in interference: a CPU hog, a memory-bandwidth streamer or an LLC thrasher on
    /// chosen CPUs, until --duration or Ctrl-C.
    Stress(StressArgs),
    /// The load part of a run on another host, driven over stdin/stdout by `run --agent`
    /// (started through ssh, ip netns exec, kubectl exec -i …; not run by hand).
    Agent(AgentCmd),
    /// Print a shell completion script on stdout (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print tailscope's man page (roff) on stdout, or write one page per command into --out.
    Man(ManArgs),
}

#[derive(Args, Debug, Clone)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug, Clone)]
pub struct ManArgs {
    /// Write tailscope.1 and one page per command (tailscope-run.1, …) into this existing
    /// directory instead of printing tailscope.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct StressArgs {
    /// What to contend for: cpu (a busy loop), memory (a sequential stream over 4x the LLC)
    /// or cache (every line of an LLC-sized buffer, in a scattered order).
    #[arg(value_enum)]
    pub kind: StressKindArg,
    /// CPUs to run on, one pinned thread each (e.g. 1 or 0-1).
    #[arg(long)]
    pub cpus: String,
    /// Fraction of each 10 ms period each thread works, in (0, 1].
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub intensity: f64,
    /// How long to run; without it, until Ctrl-C.
    #[arg(long, allow_hyphen_values = true)]
    pub duration: Option<String>,
    /// Root of the host whose sysfs gives the LLC size (cpuN/cache/index*/size).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `stress KIND`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StressKindArg {
    Cpu,
    Memory,
    Cache,
}

impl From<StressKindArg> for stress::Kind {
    fn from(k: StressKindArg) -> stress::Kind {
        match k {
            StressKindArg::Cpu => stress::Kind::Cpu,
            StressKindArg::Memory => stress::Kind::Memory,
            StressKindArg::Cache => stress::Kind::Cache,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct DoctorArgs {
    /// Root of the host to inspect (tests point it at fixture trees).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// The server's process id: adds its scheduling policy and run-queue wait.
    #[arg(long, allow_negative_numbers = true)]
    pub pid: Option<u32>,
    /// The server's CPUs (e.g. 1 or 2-3); default all.
    #[arg(long)]
    pub cpus: Option<String>,
    /// Apply the safe, reversible mitigations and hold them until Ctrl-C (then revert).
    /// Without it, the plan is only printed (dry run).
    #[arg(long)]
    pub apply: bool,
    /// Where the journal of applied changes lives (default $XDG_STATE_HOME/tailscope or
    /// /var/lib/tailscope).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct NoiseArgs {
    /// CPUs to probe, one pinned thread each (e.g. 0 or 0-1).
    #[arg(long, default_value = "0")]
    pub cpus: String,
    /// How long to probe.
    #[arg(long, default_value = "5s", allow_hyphen_values = true)]
    pub duration: String,
    /// A gap is a loop iteration longer than this.
    #[arg(long, default_value = "1us", allow_hyphen_values = true)]
    pub threshold: String,
    /// Loop variant: consecutive (Listing 1.2) or paired (Listing 1.1).
    #[arg(long = "loop", value_enum, default_value_t = LoopArg::Consecutive)]
    pub loop_kind: LoopArg,
    /// Scheduling policy of the probe threads (e.g. fifo:50; RT throttling is detected).
    #[arg(long)]
    pub sched: Option<String>,
    /// Lock memory (mlockall) during the probe.
    #[arg(long)]
    pub mlock: bool,
    /// Root under which /proc is read for the counter attribution.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Also draw the gap CDF and the CCDF of time lost (Where Has My Time Gone? Figs. 7–8),
    /// one curve per CPU, into FILE (.png or .svg).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Where the results store lives.
#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// SQLite results file (default: $TAILSCOPE_DB, else ~/.local/share/tailscope/runs.db).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to bind (port 0 picks a free port; the bound address is printed when ready).
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub listen: std::net::SocketAddr,
    /// Concurrency architecture: thread (thread per connection, blocking I/O), epoll (N epoll
    /// workers, connections statically partitioned), udp (N workers on one UDP socket),
    /// dispatch (a dispatcher feeding N workers from one queue), staged (the LNS tandem).
    #[arg(long, value_enum, default_value_t = ArchArg::Thread)]
    pub arch: ArchArg,
    /// Worker threads (epoll, udp, dispatch).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub workers: usize,
    /// Synthetic work per request, spent busy-spinning: det:50us, exp:50us, lognormal:50us,1.0.
    #[arg(long)]
    pub work: Option<String>,
    /// CPUs the server threads run on (e.g. 1 or 0-3).
    #[arg(long)]
    pub cpus: Option<lab::CpuList>,
    /// Scheduling policy per thread: other, other:NICE, fifo:PRIO, rr:PRIO.
    #[arg(long)]
    pub sched: Option<host::placement::SchedSpec>,
    /// Largest accepted frame in bytes; larger frames close the connection.
    #[arg(long, default_value_t = 65536, allow_negative_numbers = true)]
    pub max_frame: usize,
    /// Seed of the synthetic work distribution.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: u64,
    /// Staged mode (--arch staged, the LNS tandem): network-stack time per request, T0.
    #[arg(long, default_value = "0ns", allow_hyphen_values = true)]
    pub t0: String,
    /// Staged mode: network-stack time per payload byte, mT (T = T0 + L·mT).
    #[arg(long, default_value = "0ns", allow_hyphen_values = true)]
    pub mt: String,
    /// Staged mode: worker time per request, R0.
    #[arg(long, default_value = "0ns", allow_hyphen_values = true)]
    pub r0: String,
    /// Staged mode: worker time per worker thread, mR (R = R0 + k·mR; k = --workers).
    #[arg(long, default_value = "0ns", allow_hyphen_values = true)]
    pub mr: String,
    /// Staged mode: serve delay-sensitive requests (class 0, first payload byte) first at
    /// every stage.
    #[arg(long)]
    pub priority: bool,
    /// Staged mode: workers wait out R by sleeping (work that waits on a database, as in the
    /// LNS paper) instead of spinning, so that k workers overlap on fewer CPUs.
    #[arg(long)]
    pub worker_sleep: bool,
    /// Print the ready message as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Load options shared by `run` and `demo`.
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
    pub trace_unit: String,
    /// Run length (e.g. 10s); the warm-up is inside it.
    #[arg(long, default_value = "10s", conflicts_with = "requests")]
    pub duration: String,
    /// Stop after this many requests instead of a duration (e.g. 100k).
    #[arg(long)]
    pub requests: Option<String>,
    /// Warm-up excluded from every figure.
    #[arg(long, default_value = "1s")]
    pub warmup: String,
    /// Connections to the target.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Generator threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// CPUs for the generator threads (e.g. 0).
    #[arg(long)]
    pub cpus: Option<lab::CpuList>,
    /// Requests in flight per connection before further ones wait in the client.
    #[arg(long, default_value_t = 64)]
    pub max_outstanding: usize,
    /// Per-request timeout.
    #[arg(long, default_value = "1s")]
    pub timeout: String,
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
    /// Flag the run invalid when the generator's lateness p99 exceeds this.
    #[arg(long, default_value = "50us")]
    pub lateness_threshold: String,
    /// Keep measuring until the interval of each given percentile is within this fraction of
    /// its estimate: p99=5%, server:p99.9=10% (user view unless named), several joined by
    /// commas; checked every second after --duration, up to --max-duration.
    #[arg(long, value_name = "[VIEW:]PCT=REL%")]
    pub precision: Option<String>,
    /// With --precision: the longest the run may take (then it says it did not converge);
    /// default 60s.
    #[arg(long)]
    pub max_duration: Option<String>,
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
    /// memcached+udp://, http:///, redis://): an address in it is refused.
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
    pub churn: Option<String>,
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
    pub server_cpuset: Option<lab::CpuList>,
    /// Spawned server: a cgroup memory limit (512M, 2G).
    #[arg(long)]
    pub server_memory: Option<String>,
    /// Spawned server: cgroup CPU bandwidth, a fraction of one CPU (0.5: 50 ms per 100 ms).
    #[arg(long, allow_hyphen_values = true)]
    pub server_cpu_quota: Option<String>,
    /// Spawned server: outgoing bandwidth on --net-dev through an HTB class (100mbit).
    #[arg(long)]
    pub net_rate: Option<String>,
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
    pub server_cpus: Option<lab::CpuList>,
    /// Do not sample the sources of tail latency beside the run (no "why"; for measuring the
    /// sampler's own cost, as bench/observer.sh does).
    #[arg(long)]
    pub no_attribution: bool,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Target URL: nullrpc://HOST:PORT, nullrpc+udp://…, memcached://…, memcached+udp://…,
    /// http://HOST:PORT/PATH, redis://HOST:PORT.
    pub target: String,
    /// Request rate: requests per second (10000) or a percentage of the calibrated capacity (70%).
    #[arg(long)]
    pub rate: Given<lab::Load>,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub side: ServerSideArgs,
    /// Where the server's per-request stages come from: ebpf (kernel tracepoints on the
    /// server's threads; needs root, BTF and Linux 6.3), stamps (what the server returns:
    /// the built-in server's), off, or auto (ebpf for a spawned server when the host
    /// supports it, else stamps).
    #[arg(long, default_value = "auto", value_name = "auto|ebpf|stamps|off")]
    pub stages: lab::StagesMode,
    /// Run N times in a row against the same target (distinct seeds): the result is the
    /// median of the repeats with an interval from their spread, the one that holds when the
    /// host drifts between runs.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeat: u32,
    /// A name stored with the run (config `label`), shown by `runs list` and usable as a
    /// baseline: `tailscope check ID --baseline label:NAME`. Letters, digits and . _ - + / @.
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// The view the run is judged by: user (intended send → received; valid when the
    /// generator kept its schedule), server (sent → kernel receive; valid when the offered
    /// load was sent), or auto (the user view if valid, else the server view). Exit code 1
    /// when no view asked for is valid.
    #[arg(long, value_enum, default_value_t = ViewArg::Auto)]
    pub view: ViewArg,
    /// Skip the short host-noise probe (TSC gaps on the generator's and the server's CPUs)
    /// made before the load starts.
    #[arg(long)]
    pub no_noise_probe: bool,
    /// Service-level objective: conditions joined by commas, all of which must hold — any
    /// percentile 'p99<=1ms' (p95, p99.5, …), 'mean<=500us', 'errors<=0.1%' (errors, timeouts
    /// and drops), 'rate>=9000' or 'rate>=99%' (of offered); prefix one with a view
    /// ('server:p99<=1ms'). Verdicts read the intervals; violated → exit 3.
    #[arg(long)]
    pub slo: Option<String>,
    /// The view an SLO condition without a prefix reads (auto: the run's headline view).
    #[arg(long, value_enum, default_value_t = ViewArg::Auto)]
    pub slo_view: ViewArg,
    #[command(flatten)]
    pub gate: GateArgs,
    #[command(flatten)]
    pub agents: AgentArgs,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Args, Debug, Clone)]
pub struct CalibrateArgs {
    /// Target URL (as for `run`).
    pub target: String,
    #[command(flatten)]
    pub server: TargetArgs,
    /// Spawned server: its CPUs.
    #[arg(long)]
    pub server_cpus: Option<lab::CpuList>,
    /// CPUs of the calibration's load (as `run --cpus`; default: not pinned).
    #[arg(long)]
    pub cpus: Option<lab::CpuList>,
    /// Measured window of each step of the peak search.
    #[arg(long, default_value = "200ms")]
    pub duration: lab::DurationArg,
    /// Warm-up of each step.
    #[arg(long, default_value = "100ms")]
    pub warmup: lab::DurationArg,
    /// The open-loop confirmation's length (a quarter of it warm-up); default 600ms.
    /// (Hidden: for bench/calibrate.sh, which times the old 2 s beside it.)
    #[arg(long, hide = true)]
    pub confirm: Option<lab::DurationArg>,
    /// Most connections the search tries (one request in flight each, then pipelines).
    #[arg(long, alias = "connections", default_value_t = 16)]
    pub max_connections: usize,
    /// Most requests in flight per connection the search tries (pipelining: servers batch
    /// what one read brings them; the cost without batching is reported too).
    #[arg(long, alias = "outstanding", default_value_t = 64)]
    pub max_depth: usize,
    /// Null-RPC request size in bytes.
    #[arg(long, default_value_t = 128)]
    pub request_size: usize,
    /// Calibrate without stage stamps (use when the runs will use --no-stamps).
    #[arg(long)]
    pub no_stamps: bool,
    /// Send the load from agents (as for `run`).
    #[command(flatten)]
    pub agents: AgentArgs,
    #[command(flatten)]
    pub db: DbArgs,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Synthetic service time of the built-in server.
    #[arg(long, default_value = "det:50us")]
    pub work: String,
    /// Utilisations to run, in percent of the calibrated capacity.
    #[arg(long, default_value = "30,60,85", value_delimiter = ',')]
    pub loads: Vec<f64>,
    /// Length of each run.
    #[arg(long, default_value = "6s")]
    pub duration: String,
    /// Runs per load, interleaved over the loads (30, 60, 85, 30, 60, 85 …): each load's
    /// result is the median of its repeats, and the closing lines say how far they spread.
    #[arg(long, default_value_t = 2)]
    pub repeat: u32,
    /// CPU for the server (default 1 when the machine has two or more CPUs).
    #[arg(long)]
    pub server_cpu: Option<usize>,
    /// CPU for the generator (default 0).
    #[arg(long)]
    pub client_cpu: Option<usize>,
    /// Server scheduling policy: other, other:NICE, fifo:PRIO.
    #[arg(long)]
    pub sched: Option<String>,
    /// Where to write the CCDF plot.
    #[arg(long, default_value = "tailscope-demo.svg")]
    pub plot: PathBuf,
    /// An optional SLO for every load (as for `run --slo`, read from each run's headline
    /// view): a verdict per point, exit 3 when one violates it.
    #[arg(long)]
    pub slo: Option<String>,
    /// What an undecided verdict gives (as for `run`).
    #[arg(long, value_enum, default_value_t = UndecidedArg::Fail)]
    pub slo_undecided: UndecidedArg,
    /// Skip the short host-noise probe made before the runs.
    #[arg(long)]
    pub no_noise_probe: bool,
    /// A name stored with the demo's experiment and runs (config `label`), shown by `runs
    /// list` and usable as a baseline (`tailscope check ID --experiment --baseline
    /// label:NAME`). Letters, digits and . _ - + / @.
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    #[command(flatten)]
    pub db: DbArgs,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RunsCmd {
    #[command(subcommand)]
    pub sub: RunsSub,
}

#[derive(Subcommand, Debug)]
pub enum RunsSub {
    /// List stored runs, newest first.
    List {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        json: bool,
        /// Only the runs of this experiment (a sweep, a demo), in the order they ran.
        #[arg(long)]
        experiment: Option<i64>,
    },
    /// Show one run's configuration and summary.
    Show {
        id: i64,
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        json: bool,
    },
    /// Stored runs side by side per percentile, each against the first: ratio and whether
    /// the 95 % intervals overlap.
    Compare {
        /// Two or more run ids; the first is the reference.
        #[arg(num_args = 2.., required = true)]
        ids: Vec<i64>,
        /// Write an overlay of their CCDFs (PNG when the name ends in .png, else SVG).
        #[arg(long, value_name = "PATH")]
        plot: Option<std::path::PathBuf>,
        #[command(flatten)]
        db: DbArgs,
        /// Print exactly one JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Export one run: its per-request records (csv, json), an HdrHistogram interval log
    /// (hdr), the percentile spectrum of its latency (hgrm), or its summary for Prometheus
    /// (openmetrics: percentiles in seconds with their intervals, excess, rates, outcomes,
    /// status; for the textfile collector or a Pushgateway).
    Export {
        /// The run (ids from `tailscope runs list`).
        #[arg(required_unless_present = "experiment", conflicts_with = "experiment")]
        id: Option<i64>,
        /// csv, json, hdr, hgrm or openmetrics.
        #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
        format: ExportFormat,
        /// Export every point (run) of this experiment as one exposition, labelled with its
        /// load and knobs (--format openmetrics only).
        #[arg(long)]
        experiment: Option<i64>,
        /// Output file (default: stdout).
        #[arg(long, short, conflicts_with = "push")]
        output: Option<PathBuf>,
        /// Send the exposition to a Prometheus Pushgateway instead (--format openmetrics; an
        /// HTTP PUT replacing the group), e.g. http://127.0.0.1:9091/metrics/job/tailscope.
        #[arg(long, value_name = "URL")]
        push: Option<report::pushgateway::PushUrl>,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// `runs export --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Csv,
    Json,
    Hdr,
    Hgrm,
    Openmetrics,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// The candidate: a run id (or an experiment id with --experiment).
    pub candidate: i64,
    /// The candidate and the baseline are experiments (sweeps), compared point by point.
    #[arg(long)]
    pub experiment: bool,
    /// The baseline: an id, label:NAME (the latest run or experiment with that --label), or
    /// latest (the latest earlier one of the same target and configuration).
    #[arg(long, value_name = "ID|label:NAME|latest")]
    pub baseline: lab::check::BaselineRef,
    /// How far the ratio candidate ÷ baseline may lie from 1 and still be the same, e.g.
    /// 10% or 0.1.
    #[arg(long, default_value = "10%", allow_hyphen_values = true)]
    pub tolerance: lab::Tolerance,
    /// Compare with a baseline from another host or configuration anyway.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub db: DbArgs,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// Runs to report (ids from `tailscope runs list`).
    #[arg(required_unless_present = "experiment", conflicts_with = "experiment")]
    pub runs: Vec<i64>,
    /// Report a stored experiment (its points, verdicts and chosen runs) instead.
    #[arg(long, value_name = "N")]
    pub experiment: Option<i64>,
    /// The HTML file to write.
    #[arg(long, short, default_value = "tailscope-report.html")]
    pub output: PathBuf,
    /// Also write every figure as PNG into this directory (created if its parent exists).
    #[arg(long, value_name = "DIR")]
    pub png: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArgs,
    /// Print exactly one JSON object on stdout: {"written": [...]}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ModelCmd {
    #[command(subcommand)]
    pub sub: Option<ModelSub>,
    #[command(flatten)]
    pub args: ModelArgs,
}

#[derive(Subcommand, Debug)]
pub enum ModelSub {
    /// Reproduce a figure of Tales of the Tail §2 (1: arrival processes, 2: utilisation,
    /// 3: workers, 4: queueing disciplines) as a table and a plotted CCDF.
    Figure(FigureArgs),
    /// The LNS bursty tail-latency model: predict the p99 of delay-sensitive requests under
    /// bursts (formulas 1-12), check it by tandem simulation, validate it over a grid, or fit
    /// its parameters from the four basic tests (Table 3).
    Bursty(BurstyArgs),
}

#[derive(Args, Debug, Clone)]
pub struct BurstyArgs {
    /// T0: fixed network-stack time per request.
    #[arg(long, default_value = "4us", allow_hyphen_values = true)]
    pub t0: String,
    /// mT: network-stack time per payload byte (e.g. 4ns; 0ns for a zero-copy stack).
    #[arg(long, default_value = "0ns", allow_hyphen_values = true)]
    pub mt: String,
    /// R0: fixed worker time per request.
    #[arg(long, default_value = "45us", allow_hyphen_values = true)]
    pub r0: String,
    /// mR: worker time per worker thread (contention), R = R0 + k·mR.
    #[arg(long, default_value = "500ns", allow_hyphen_values = true)]
    pub mr: String,
    /// M: the constant part of the latency (sum of the non-bottleneck service times).
    #[arg(long, default_value = "70us", allow_hyphen_values = true)]
    pub m: String,
    /// N: requests per burst.
    #[arg(long, default_value_t = 1000, allow_negative_numbers = true)]
    pub n: u32,
    /// α: share of delay-sensitive requests, in (0, 1].
    #[arg(long, default_value_t = 0.05, allow_negative_numbers = true)]
    pub alpha: f64,
    /// L: payload length in bytes.
    #[arg(long, default_value_t = 512.0, allow_negative_numbers = true)]
    pub payload: f64,
    /// k: worker threads.
    #[arg(long, default_value_t = 29, allow_negative_numbers = true)]
    pub workers: u32,
    /// U: spacing between the requests of a burst.
    #[arg(long, default_value = "1us", allow_hyphen_values = true)]
    pub spacing: String,
    /// The percentile to predict, in percent.
    #[arg(long, default_value_t = 99.0, allow_negative_numbers = true)]
    pub percentile: f64,
    /// fcfs or priority (the prioritised, LNS-like stack).
    #[arg(long, default_value = "priority")]
    pub stack: String,
    /// Also simulate the tandem of stages and print formula 15's relative error.
    #[arg(long)]
    pub simulate: bool,
    /// Bursts to simulate with --simulate.
    #[arg(long, default_value_t = 200, allow_negative_numbers = true)]
    pub bursts: u64,
    /// Bin width of the latency entropy (formulas 13-14) in --simulate.
    #[arg(long, allow_hyphen_values = true)]
    pub entropy_bin: Option<String>,
    /// LNS Fig. 7: for each share in --alphas, the largest burst N whose predicted latency
    /// stays within this target (the paper: 50ms), at --workers and at k_t (formula 16).
    #[arg(long, value_name = "TARGET")]
    pub concurrency: Option<lab::DurationArg>,
    /// With --concurrency: the shares α of delay-sensitive requests.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.05,0.1,0.2,0.5,1",
        allow_negative_numbers = true
    )]
    pub alphas: Vec<f64>,
    /// LNS Figs. 5–6: the prediction (and with --simulate the simulation and its entropy)
    /// at each value of one factor, the others as given: n=1k,5k,20k, payload=…, alpha=…,
    /// workers=….
    #[arg(long, value_name = "KEY=V1,V2,..", conflicts_with = "concurrency")]
    pub sweep: Option<lab::bursty::Sweep>,
    /// Formulas against tandem simulation over a grid of N, L, α and k, both stacks.
    #[arg(long)]
    pub validate: bool,
    /// With --validate: the small grid (48 rows) instead of the full one (216).
    #[arg(long)]
    pub small: bool,
    /// Fit T0, mT, R0, mR, M from basic tests in this JSON file: an array of
    /// {"n", "alpha", "payload", "workers", "spacing_us", "stack", "measured_p99_us"}.
    #[arg(long, value_name = "PATH")]
    pub fit: Option<PathBuf>,
    /// Seed of the simulations.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: u64,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Output options shared by the model commands.
#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write CCDF points (series, latency_us, ccdf) to this CSV file.
    #[arg(long, value_name = "PATH")]
    pub ccdf: Option<PathBuf>,
    /// Write a log-log CCDF plot to this file: PNG when its name ends in .png, else SVG.
    #[arg(long, value_name = "PATH")]
    pub plot: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
#[command(args_override_self = true)]
pub struct SweepArgs {
    /// Target URL (as for `run`), or an experiment file (.toml) holding the same options;
    /// options given after the file override the file's.
    pub target: String,
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
    /// Service-level objective, e.g. 'p99<=1ms' or 'p99<=1ms,p99.9<=5ms': a verdict per
    /// point (meets / violates / undecided, from the confidence intervals).
    #[arg(long)]
    pub slo: Option<String>,
    /// Which latency the SLO reads: user (intended → received), server (sent → kernel
    /// receive), or auto (each run's headline view: the user's when valid, else the
    /// server's). A verdict read from a view that is invalid for the run is undecided.
    #[arg(long, value_enum, default_value_t = ViewArg::Auto)]
    pub slo_view: ViewArg,
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
    pub label: Option<String>,
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
    pub agents: AgentArgs,
    #[command(flatten)]
    pub db: DbArgs,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ColocateArgs {
    /// The first service: an experiment file (as for `sweep`: target, spawn options, loads,
    /// slo).
    pub a: String,
    /// The second service, likewise.
    pub b: String,
    /// Overrides each run's length in both files.
    #[arg(long)]
    pub duration: Option<String>,
    /// Overrides each run's warm-up in both files.
    #[arg(long)]
    pub warmup: Option<String>,
    /// Service-level objective of both services (as for `run --slo`), in place of their
    /// files' `slo`. Exit 3 when a side of a cell violates its SLO.
    #[arg(long)]
    pub slo: Option<String>,
    /// The first service's SLO (in place of --slo and its file's).
    #[arg(long, value_name = "SLO")]
    pub slo_a: Option<String>,
    /// The second service's SLO (in place of --slo and its file's).
    #[arg(long, value_name = "SLO")]
    pub slo_b: Option<String>,
    /// The view an SLO condition without a prefix reads (auto: each run's headline view).
    #[arg(long, value_enum, default_value_t = ViewArg::Auto)]
    pub slo_view: ViewArg,
    #[command(flatten)]
    pub gate: GateArgs,
    /// A name stored with the matrix and its runs (config `label`), shown by `runs list`.
    /// Letters, digits and . _ - + / @.
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// Send the load from agents (as for `run`).
    #[command(flatten)]
    pub agents: AgentArgs,
    #[command(flatten)]
    pub db: DbArgs,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct TuneArgs {
    /// Target URL of a server tailscope starts (memcached://, http://, redis://, nullrpc://
    /// with --spawn).
    pub target: String,
    /// The offered load of every step: req/s, or a percentage of each step's calibrated
    /// capacity (80%).
    #[arg(long, default_value = "80%")]
    pub rate: String,
    /// The mitigations, in order (each adds to the ones before).
    #[arg(long, default_value = "rt,udp,irq,numa,cstate,governor")]
    pub steps: String,
    /// Service-level objective (as for `run --slo`): a verdict per step at --rate, and each
    /// step also searches the highest load meeting it. Exit 3 when the tuned configuration
    /// (the last step measured) violates it at --rate.
    #[arg(long)]
    pub slo: Option<String>,
    /// The view an SLO condition without a prefix reads (auto: each run's headline view).
    #[arg(long, value_enum, default_value_t = ViewArg::Auto)]
    pub slo_view: ViewArg,
    #[command(flatten)]
    pub gate: GateArgs,
    /// A name stored with the walk and its runs (config `label`), shown by `runs list`.
    /// Letters, digits and . _ - + / @.
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// Most runs per search.
    #[arg(long, default_value_t = 8)]
    pub max_steps: u32,
    /// Per-worker service time for the ideal of every step (default: each step calibrated).
    #[arg(long)]
    pub service: Option<String>,
    /// Options of every run (as for `run`).
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub server: TargetArgs,
    /// The server's CPUs (the interrupts step moves IRQs away from them).
    #[arg(long)]
    pub server_cpus: Option<String>,
    /// Root of the host whose /proc and /sys the host steps read and write.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Where the journal of host changes lives (default as for doctor).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Do not sample the sources of tail latency beside each run.
    #[arg(long)]
    pub no_attribution: bool,
    /// Send the load from agents (as for `run`).
    #[command(flatten)]
    pub agents: AgentArgs,
    #[command(flatten)]
    pub db: DbArgs,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// Arrival process: poisson, det (the paper's "uniform"), lognormal:SIGMA, pareto:SHAPE,
    /// gpareto:SHAPE (generalized Pareto), etc (Facebook ETC's gaps), trace:PATH (one
    /// timestamp per line; see --trace-unit).
    #[arg(long, default_value = "poisson")]
    pub arrival: String,
    /// Unit of the timestamps in a trace file: ns or us.
    #[arg(long, default_value = "ns", value_name = "ns|us")]
    pub trace_unit: String,
    /// Service time: det:50us, exp:50us, lognormal:50us,1.0 (mean, sigma), pareto:50us,2.5
    /// (mean, shape), empirical:PATH (one duration per line, e.g. 48us).
    #[arg(long, default_value = "det:50us")]
    pub service: String,
    /// Number of workers (c).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub workers: u32,
    /// Utilisation per worker, in (0, 1); the arrival rate is load * workers / E[S].
    #[arg(long, conflicts_with = "rate", allow_negative_numbers = true)]
    pub load: Option<f64>,
    /// Arrival rate in requests per second (instead of --load).
    #[arg(long, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Queueing discipline: fifo, lifo, random, random-worker, round-robin, priority,
    /// priority-preemptive.
    #[arg(long, default_value = "fifo")]
    pub discipline: String,
    /// Priority class probabilities, highest priority first (e.g. 0.2,0.8).
    #[arg(long, value_name = "P0,P1,..", allow_hyphen_values = true)]
    pub classes: Option<String>,
    /// Connections for round-robin static partitioning (default: one per worker).
    #[arg(long, allow_negative_numbers = true)]
    pub connections: Option<u32>,
    /// Requests to simulate (e.g. 10M, 1e9). Default 1M.
    #[arg(long, default_value = "1M", allow_hyphen_values = true)]
    pub requests: String,
    /// Fraction of the first requests excluded as warm-up.
    #[arg(long, default_value_t = 0.01, allow_negative_numbers = true)]
    pub warmup: f64,
    /// Seed of every random stream; the same seed gives the same result.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: u64,
    /// Independent replications (seeds seed..seed+R). With R >= 2 the confidence intervals come
    /// from the spread between replications, which is honest for autocorrelated samples.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub replications: u32,
    /// Keep every response time (exact quantiles) up to this many requests; above, a streaming
    /// HdrHistogram (3 significant digits) keeps memory bounded.
    #[arg(long, default_value = "20M", allow_hyphen_values = true)]
    pub exact_limit: String,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    pub confidence: f64,
    /// Print the closed-form results that apply (exact or approximate, each with its source)
    /// instead of simulating.
    #[arg(long)]
    pub analytic: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Args, Debug, Clone)]
pub struct FigureArgs {
    /// Figure number: 1, 2, 3 or 4.
    #[arg(allow_negative_numbers = true)]
    pub number: u32,
    /// Requests simulated per curve.
    #[arg(long, default_value = "2M", allow_hyphen_values = true)]
    pub requests: String,
    /// Seed of every random stream.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: u64,
    /// Extra arrival trace to add to figure 1 (the paper's Wikipedia trace is not shipped).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// Unit of the timestamps in --trace: ns or us.
    #[arg(long, default_value = "ns", value_name = "ns|us")]
    pub trace_unit: String,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// `serve --arch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ArchArg {
    Thread,
    Epoll,
    Udp,
    Dispatch,
    Staged,
}

impl From<ArchArg> for server::Arch {
    fn from(a: ArchArg) -> server::Arch {
        match a {
            ArchArg::Thread => server::Arch::Thread,
            ArchArg::Epoll => server::Arch::Epoll,
            ArchArg::Udp => server::Arch::Udp,
            ArchArg::Dispatch => server::Arch::Dispatch,
            ArchArg::Staged => server::Arch::Staged,
        }
    }
}

/// `--queues`: the target's queue structure for the ideal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
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

/// What a run or sweep reports for CI: extra percentiles, how an undecided SLO counts, and
/// JUnit / Markdown files of the verdicts.
#[derive(Args, Debug, Clone)]
pub struct GateArgs {
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum UndecidedArg {
    Fail,
    Pass,
}

/// `run --view`, `sweep --slo-view`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ViewArg {
    /// The user view when it is valid, else the server view.
    Auto,
    User,
    Server,
}

impl From<ViewArg> for lab::ViewChoice {
    fn from(v: ViewArg) -> lab::ViewChoice {
        match v {
            ViewArg::Auto => lab::ViewChoice::Auto,
            ViewArg::User => lab::ViewChoice::User,
            ViewArg::Server => lab::ViewChoice::Server,
        }
    }
}

/// `noise --loop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LoopArg {
    /// Listing 1.2: consecutive TSC reads.
    Consecutive,
    /// Listing 1.1: paired reads.
    Paired,
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WorkloadArg {
    Etc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// `tailscope agent` takes no options: everything comes from the coordinator.
#[derive(Args, Debug, Clone)]
pub struct AgentCmd {}
