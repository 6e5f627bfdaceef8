//! Every command's whole option set, as clap derives it: the measuring and judging commands'
//! (`run`, `calibrate`, `demo`, `sweep`, `tune`, `colocate`, `ab`, `check`, `model`: their
//! positional arguments, output flags and the option groups of [`crate::options`] flattened),
//! and those of the host's tools (`serve`, `doctor`, `noise`, `stress`). The CLI holds the tree
//! of commands and calls each with its struct; every value is typed here (clap names the flag
//! of a bad one) and checked before anything starts.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::options::{AgentArgs, GateArgs, Given, UndecidedArg};

/// Where the results store lives.
#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// SQLite results file (default: $TAILSCOPE_DB, else ~/.local/share/tailscope/runs.db).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "Examples, one per protocol:
  tailscope run nullrpc:// --spawn --server-work det:50us --rate 60%
  tailscope run memcached:// --spawn --server-cpus 1 --cpus 0 --rate 50%
  tailscope run memcached+udp://127.0.0.1:11211 --rate 20000 --service 10us
  tailscope run http:/// --spawn --files 100 --rate 20000
  tailscope run h2c:/// --spawn --files 100 --connections 2 --rate 5000 --service 60us
  tailscope run https:/// --spawn --files 100 --connections 2 --rate 5000 --service 60us
  tailscope run h2://127.0.0.1:8443/ --ca ca.pem --connections 2 --rate 5000 --service 60us
  tailscope run redis://127.0.0.1:6379 --rate 20000 --service 8us
  tailscope run rediss:// --spawn --rate 20000 --service 8us
  tailscope run memcached+tls:// --spawn --rate 20000 --service 10us
  tailscope run grpc://127.0.0.1:50051 --method pkg.Greeter/SayHello --proto hello.proto \\
      --message hi.json --rate 1000
  tailscope run grpcs://127.0.0.1:50052/pkg.Greeter/SayHello --ca ca.pem --rate 1000")]
pub struct RunArgs {
    /// Target URL: nullrpc://HOST:PORT, nullrpc+udp://…, memcached://…, memcached+udp://…,
    /// http://HOST:PORT/PATH, h2c://…, redis://HOST:PORT, grpc://HOST:PORT[/pkg.Service/Method];
    /// over TLS https://…, h2://…, grpcs://…, rediss://… and memcached+tls://….
    pub target: String,
    #[command(flatten)]
    pub opts: crate::RunOptions,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Print everything measured: both views' tables, the path of each request, the
    /// generator's lateness, the arrival check, the why in full, the stages, the instruments
    /// (by default the headline view's table, validity, the leading causes, on one screen).
    #[arg(long)]
    pub detail: bool,
}

#[derive(Args, Debug, Clone)]
pub struct CalibrateArgs {
    /// Target URL (as for `run`).
    pub target: String,
    #[command(flatten)]
    pub opts: crate::CalibrateOptions,
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
    /// Length of each run, its warm-up included.
    #[arg(long, default_value = "6s")]
    pub duration: Given<crate::DurationArg>,
    /// Warm-up at the start of each run, not counted (shorter than --duration).
    #[arg(long, default_value = "2s")]
    pub warmup: Given<crate::DurationArg>,
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
    pub sched: Option<host::placement::SchedSpec>,
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
    pub label: Option<crate::Label>,
    #[command(flatten)]
    pub db: DbArgs,
    /// Print each run as `run --detail` does and the whole sweep table, not one screen.
    #[arg(long)]
    pub detail: bool,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// The candidate: a run id (or an experiment id with --experiment).
    pub candidate: i64,
    /// The candidate and the baseline are experiments (sweeps), compared point by point.
    #[arg(long)]
    pub experiment: bool,
    /// The baseline: an id, label:NAME (the latest run or experiment with that --label), or
    /// latest (the latest earlier one of the same target and configuration). Not given for an
    /// `ab` comparison (--experiment), which holds its own baseline.
    #[arg(long, value_name = "ID|label:NAME|latest")]
    pub baseline: Option<crate::check::BaselineRef>,
    /// How far the ratio candidate ÷ baseline may lie from 1 and still be the same, e.g.
    /// 10% or 0.1.
    #[arg(long, default_value = "10%", allow_hyphen_values = true)]
    pub tolerance: crate::Tolerance,
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
#[command(after_help = "Examples:
  tailscope ab 'nullrpc:// --server-work det:50us' 'nullrpc:// --server-work det:60us' \\
      --spawn --server-cpus 1 --cpus 0 --rate 6000 --until-decided
  tailscope ab http://127.0.0.1:8080/ http://127.0.0.1:8081/ --rate 5000 --pairs 30")]
pub struct AbArgs {
    /// The baseline: a target URL as `run` takes it, with its own server flags in the same
    /// quoted word ('memcached:// --server-threads 1'); flags outside the arms apply to both.
    pub baseline: String,
    /// The candidate, likewise.
    pub candidate: String,
    #[command(flatten)]
    pub opts: crate::ab::AbOptions,
    #[command(flatten)]
    pub db: DbArgs,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct BurstyArgs {
    #[command(flatten)]
    pub opts: crate::BurstyOptions,
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
    #[command(flatten)]
    pub opts: crate::SweepOptions,
    #[command(flatten)]
    pub db: DbArgs,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
#[command(mut_arg("slo", |a| {
    a.help(
        "Service-level objective of both services (as for `run --slo`), in place of their \
         files' `slo`. Exit 3 when a side of a cell violates its SLO",
    )
}))]
pub struct ColocateArgs {
    /// The first service: an experiment file (as for `sweep`: target, spawn options, loads,
    /// slo).
    pub a: String,
    /// The second service, likewise.
    pub b: String,
    /// Overrides each run's length in both files.
    #[arg(long)]
    pub duration: Option<Given<crate::DurationArg>>,
    /// Overrides each run's warm-up in both files.
    #[arg(long)]
    pub warmup: Option<Given<crate::DurationArg>>,
    /// The first service's SLO (in place of --slo and its file's).
    #[arg(long, value_name = "SLO")]
    pub slo_a: Option<String>,
    /// The second service's SLO (in place of --slo and its file's).
    #[arg(long, value_name = "SLO")]
    pub slo_b: Option<String>,
    #[command(flatten)]
    pub gate: GateArgs,
    /// A name stored with the matrix and its runs (config `label`), shown by `runs list`.
    /// Letters, digits and . _ - + / @.
    #[arg(long, value_name = "NAME")]
    pub label: Option<crate::Label>,
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
    #[command(flatten)]
    pub opts: crate::TuneOptions,
    #[command(flatten)]
    pub db: DbArgs,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    #[command(flatten)]
    pub opts: crate::ModelOptions,
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
    pub requests: crate::Count,
    /// Seed of every random stream.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: u64,
    /// Extra arrival trace to add to figure 1 (the paper's Wikipedia trace is not shipped).
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// Unit of the timestamps in --trace: ns or us.
    #[arg(long, default_value = "ns", value_name = "ns|us")]
    pub trace_unit: model::TimeUnit,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Args, Debug, Clone)]
pub struct StressArgs {
    /// What to contend for: cpu (a busy loop), memory (a sequential stream over 4x the LLC)
    /// or cache (every line of an LLC-sized buffer, in a scattered order).
    pub kind: stress::Kind,
    /// CPUs to run on, one pinned thread each (e.g. 1 or 0-1).
    #[arg(long)]
    pub cpus: crate::CpuList,
    /// Fraction of each 10 ms period each thread works, in (0, 1].
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub intensity: f64,
    /// How long to run; without it, until Ctrl-C.
    #[arg(long, allow_hyphen_values = true)]
    pub duration: Option<crate::DurationArg>,
    /// Root of the host whose sysfs gives the LLC size (cpuN/cache/index*/size).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
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
    pub cpus: Given<crate::CpuList>,
    /// How long to probe.
    #[arg(long, default_value = "5s", allow_hyphen_values = true)]
    pub duration: Given<crate::DurationArg>,
    /// A gap is a loop iteration longer than this.
    #[arg(long, default_value = "1us", allow_hyphen_values = true)]
    pub threshold: Given<crate::DurationArg>,
    /// Loop variant: consecutive (Listing 1.2) or paired (Listing 1.1).
    #[arg(long = "loop", value_enum, default_value_t = LoopArg::Consecutive)]
    pub loop_kind: LoopArg,
    /// Scheduling policy of the probe threads (e.g. fifo:50; RT throttling is detected).
    #[arg(long)]
    pub sched: Option<host::placement::SchedSpec>,
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
    /// Contributors: ebpf (each one's durations timed, classed by its p99.9), counters
    /// (classed by nominal cost) or auto (ebpf where the host allows, else counters).
    #[arg(long, default_value = "auto")]
    pub contributors: noise::Contributors,
    /// Print exactly one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to bind (port 0 picks a free port; the bound address is printed when ready).
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub listen: std::net::SocketAddr,
    /// Concurrency architecture: thread (thread per connection, blocking I/O), epoll (N epoll
    /// workers, connections statically partitioned), udp (N workers on one UDP socket),
    /// dispatch (a dispatcher feeding N workers from one queue), staged (the LNS tandem).
    #[arg(long, default_value = "thread")]
    pub arch: server::Arch,
    /// Worker threads (epoll, udp, dispatch).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub workers: usize,
    /// Synthetic work per request, spent busy-spinning: det:50us, exp:50us, lognormal:50us,1.0.
    #[arg(long)]
    pub work: Option<String>,
    /// CPUs the server threads run on (e.g. 1 or 0-3).
    #[arg(long)]
    pub cpus: Option<crate::CpuList>,
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
    pub t0: crate::ServiceTime,
    /// Staged mode: network-stack time per payload byte, mT (T = T0 + L·mT).
    #[arg(long, default_value = "0ns", allow_hyphen_values = true)]
    pub mt: crate::ServiceTime,
    /// Staged mode: worker time per request, R0.
    #[arg(long, default_value = "0ns", allow_hyphen_values = true)]
    pub r0: crate::ServiceTime,
    /// Staged mode: worker time per worker thread, mR (R = R0 + k·mR; k = --workers).
    #[arg(long, default_value = "0ns", allow_hyphen_values = true)]
    pub mr: crate::ServiceTime,
    /// Staged mode: serve delay-sensitive requests (class 0, first payload byte) first at
    /// every stage.
    #[arg(long)]
    pub priority: bool,
    /// Staged mode: workers wait out R by sleeping (work that waits on a database, as in the
    /// LNS paper) instead of spinning, so that k workers overlap on fewer CPUs.
    #[arg(long)]
    pub worker_sleep: bool,
    /// --arch epoll: write the replies to everything one read brought in one write, after
    /// the last is served (as memcached answers pipelined requests), instead of one write per
    /// reply. A fast sink for measuring a load generator; T5 is then taken when each reply is
    /// encoded, before the read's write.
    #[arg(long)]
    pub batch_replies: bool,
    /// Print the ready message as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `noise --loop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LoopArg {
    /// Listing 1.2: consecutive TSC reads.
    Consecutive,
    /// Listing 1.1: paired reads.
    Paired,
}
