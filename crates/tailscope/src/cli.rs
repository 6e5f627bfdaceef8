//! The tree of commands (clap derive). Each command's options are a struct of
//! `lab::commands` (values typed there, so clap names the flag of a bad one), but for those
//! that read `report`'s types (`report`, `runs`) and the CLI's own (`completions`, `man`),
//! declared here; what is kept as text is validated by each command before any work starts.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
pub use lab::commands::{
    AbArgs, BurstyArgs, CalibrateArgs, CheckArgs, ColocateArgs, DbArgs, DemoArgs, DoctorArgs,
    FigureArgs, LoopArg, ModelArgs, NoiseArgs, OutputArgs, RunArgs, ServeArgs, StressArgs,
    SweepArgs, TuneArgs,
};
pub use lab::options::GateArgs;

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
    /// Two configurations interleaved in short paired slices (the same arrivals for both
    /// slices of a pair, counterbalanced order): the ratio candidate ÷ baseline per
    /// percentile with a paired interval, and a verdict (exit code 3 when worse).
    Ab(AbArgs),
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
        /// Everything measured (as `run --detail`), not one screen.
        #[arg(long)]
        detail: bool,
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
        #[arg(long, default_value = "csv")]
        format: report::export::Format,
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

/// `tailscope agent` takes no options: everything comes from the coordinator.
#[derive(Args, Debug, Clone)]
pub struct AgentCmd {}
