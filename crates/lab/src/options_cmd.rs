//! The options of `run`, `calibrate` and `tune` beside their target (clap structs, as in
//! [`crate::options`]), and their one conversion into lab's specs: every check names the
//! flag, and nothing starts here.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::options::{AgentArgs, GateArgs, Given, LoadArgs, ServerSideArgs, TargetArgs, ViewArg};
use crate::options_plan::service_ns;
use experiments::{TunePlan, TuneStepKind};
use measurement::clip;
use measurement::error::{invalid, LabError};
use measurement::CalibrateSpec;
use measurement::RunTemplate;
use measurement::TargetPlan;
use measurement::{IdealAsk, RunSpec};

/// `run`'s options.
#[derive(Args, Debug, Clone)]
pub struct RunOptions {
    /// Request rate: requests per second (10000) or a percentage of the calibrated capacity (70%).
    #[arg(long)]
    pub rate: Given<experiments::Load>,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub side: ServerSideArgs,
    /// Where the server's per-request stages come from: ebpf (kernel tracepoints on the
    /// server's threads; needs root, BTF and Linux 6.3), stamps (what the server returns:
    /// the built-in server's), off, or auto (ebpf for a spawned server when the host
    /// supports it, else stamps).
    #[arg(long, default_value = "auto", value_name = "auto|ebpf|stamps|off")]
    pub stages: measurement::StagesMode,
    /// What eBPF stages may cost: a percentage of the server's CPUs (their programs are
    /// attached only in windows that keep their measured time within it; at low rates that
    /// is the whole run), or all (attached throughout, every request joined).
    #[arg(long, default_value = "1%", value_name = "PERCENT|all")]
    pub stages_budget: measurement::StagesBudget,
    /// Run N times in a row against the same target (distinct seeds): the result is the
    /// median of the repeats with an interval from their spread, the one that holds when the
    /// host drifts between runs.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeat: u32,
    /// A name stored with the run (config `label`), shown by `runs list` and usable as a
    /// baseline: `tailscope check ID --baseline label:NAME`. Letters, digits and . _ - + / @.
    #[arg(long, value_name = "NAME")]
    pub label: Option<measurement::Label>,
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
    #[command(flatten)]
    pub gate: GateArgs,
    #[command(flatten)]
    pub agents: AgentArgs,
}

/// `calibrate`'s options.
#[derive(Args, Debug, Clone)]
pub struct CalibrateOptions {
    #[command(flatten)]
    pub server: TargetArgs,
    /// Spawned server: its CPUs.
    #[arg(long)]
    pub server_cpus: Option<measurement::CpuList>,
    /// CPUs of the calibration's load (as `run --cpus`; default: not pinned).
    #[arg(long)]
    pub cpus: Option<measurement::CpuList>,
    /// Measured window of each step of the peak search.
    #[arg(long, default_value = "200ms")]
    pub duration: measurement::DurationArg,
    /// Warm-up of each step.
    #[arg(long, default_value = "100ms")]
    pub warmup: measurement::DurationArg,
    /// The open-loop confirmation's length (a quarter of it warm-up); default 600ms.
    /// (Hidden: for bench/calibrate.sh, which times the old 2 s beside it.)
    #[arg(long, hide = true)]
    pub confirm: Option<measurement::DurationArg>,
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
}

/// `tune`'s options.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("slo", |a| {
    a.help(
        "Service-level objective (as for `run --slo`): a verdict per step at --rate, and each \
         step also searches the highest load meeting it. Exit 3 when the tuned configuration \
         (the last step measured) violates it at --rate",
    )
}))]
pub struct TuneOptions {
    /// The offered load of every step: req/s, or a percentage of each step's calibrated
    /// capacity (80%).
    #[arg(long, default_value = "80%")]
    pub rate: Given<experiments::Load>,
    /// The mitigations, in order (each adds to the ones before).
    #[arg(long, default_value = "rt,udp,irq,numa,cstate,governor")]
    pub steps: String,
    #[command(flatten)]
    pub gate: GateArgs,
    /// A name stored with the walk and its runs (config `label`), shown by `runs list`.
    /// Letters, digits and . _ - + / @.
    #[arg(long, value_name = "NAME")]
    pub label: Option<measurement::Label>,
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
    pub server_cpus: Option<measurement::CpuList>,
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
    pub interleave: crate::ab::InterleaveArgs,
}

impl RunOptions {
    /// The target these options name and the run of it they ask for, both checked;
    /// `extra_quantiles` as the gate read them.
    pub fn plan(
        &self,
        target: &str,
        extra_quantiles: Vec<(String, f64)>,
    ) -> Result<(TargetPlan, RunSpec), LabError> {
        let (_, mut tspec) = self.side.side_spec(target, self.load.nullrpc())?;
        self.load.apply_workload(&mut tspec.workload);
        let tplan = TargetPlan::new(&tspec)?;
        Ok((tplan, self.spec(target, extra_quantiles)?))
    }

    /// The run of `target` (already checked by [`RunOptions::plan`]).
    fn spec(&self, target: &str, extra_quantiles: Vec<(String, f64)>) -> Result<RunSpec, LabError> {
        let (la, side) = (&self.load, &self.side);
        let server_cpus = side.server_cpus.clone().unwrap_or_default().0;
        let load = la.plan()?;
        let config = measurement::RunConfig {
            rate: Some(self.rate.to_string()),
            workload_preset: la.workload.map(|_| "etc".to_string()),
            request_size: Some(la.request_size as u64),
            stamps: Some(!la.no_stamps),
            alpha: la.alpha,
            stages: Some(self.stages),
            stages_budget: Some(self.stages_budget.to_string()),
            label: self.label.as_ref().map(|l| l.0.clone()),
            ..la.stored(target, &load.cpus)
        };
        Ok(RunSpec {
            target: target.to_string(),
            load,
            rate: self.rate.value,
            ideal: IdealAsk {
                service_ns: side.service_ns()?,
                workers: side.workers,
                queues: side.queues.structure(),
                calibrate: CalibrateSpec::default(),
                calibrated_as: "calibration".into(),
                stored: false,
                announce: true,
            },
            attribution: !side.no_attribution,
            server_cpus,
            extra_pids: side.server_pid.clone(),
            stages: self.stages,
            stages_budget: self.stages_budget,
            agents: self.agents.agents()?,
            view: self.view.into(),
            noise_probe: !self.no_noise_probe,
            repeat: self.repeat,
            extra_quantiles,
            config,
        })
    }
}

impl CalibrateOptions {
    /// The target of `target` and the peak search these options ask for, checked.
    pub fn plan(&self, target: &str) -> Result<(TargetPlan, CalibrateSpec), LabError> {
        if self.server.stress.is_some() {
            return Err(invalid(
                "--stress applies to run and sweep: a calibration measures the server alone",
            ));
        }
        let nullrpc = load::NullRpcWorkload {
            request_size: self.request_size,
            stamps: !self.no_stamps,
        };
        let cpus = self.server_cpus.clone().unwrap_or_default().0;
        let tplan = TargetPlan::new(&self.server.spec(target, &cpus, nullrpc)?)?;
        let c = CalibrateSpec {
            max_connections: self.max_connections,
            max_depth: self.max_depth,
            step: self.duration.0,
            step_warmup: self.warmup.0,
            overload_time: self
                .confirm
                .map_or(CalibrateSpec::default().overload_time, |c| c.0),
            cpus: self.cpus.clone().unwrap_or_default().0,
            agents: self.agents.agents()?,
            ..CalibrateSpec::default()
        };
        c.check()?;
        Ok((tplan, c))
    }
}

impl TuneOptions {
    /// The walk over `target` these options ask for, checked; its SLO and extra percentiles
    /// are the gate's to set.
    pub fn plan(&self, target: &str) -> Result<TunePlan, LabError> {
        let server_cpus = self.server_cpus.clone().unwrap_or_default().0;
        let la = &self.load;
        let mut spec = self.server.spec(target, &server_cpus, la.nullrpc())?;
        la.apply_workload(&mut spec.workload);
        let p = la.plan()?;
        let steps = TuneStepKind::parse_list(&self.steps)?;
        if let Some(dir) = &self.state_dir {
            check_dir_flag("--state-dir", dir)?;
        }
        let service_ns = service_ns(self.service.as_deref())?;
        let template = RunTemplate {
            agents: self.agents.agents()?,
            precision: p.precision.clone(),
            extra_quantiles: Vec::new(),
            target: spec,
            load: p.config(1.0),
            service_ns,
            workers: None,
            queues: None,
            confidence: la.confidence,
            lateness_threshold_ns: p.lateness_threshold_ns,
            attribution: !self.no_attribution,
            server_cpus,
            extra_pids: Vec::new(),
            calibrate: CalibrateSpec::default(),
            config: measurement::RunConfig {
                target: Some(target.to_string()),
                rate: Some(self.rate.to_string()),
                duration: Some(la.duration.to_string()),
                warmup: Some(la.warmup.to_string()),
                connections: Some(la.connections as u64),
                cpus: Some(p.cpus.iter().map(|c| *c as u64).collect()),
                seed: Some(la.seed),
                slo: self.gate.slo.clone(),
                slo_view: Some(self.gate.slo_view.into()),
                label: self.label.as_ref().map(|l| l.0.clone()),
                ..measurement::RunConfig::default()
            },
        };
        if self.interleave.interleave && template.agents.is_some() {
            return Err(invalid(
                "--interleave sends the load from this process: it does not go with --agent",
            ));
        }
        let interleave = self.interleave.design(
            la.confidence,
            la.seed,
            self.label.as_ref().map(|l| l.0.clone()),
        )?;
        Ok(TunePlan {
            interleave,
            template,
            load: self.rate.value,
            steps,
            slo: None,
            max_steps: self.max_steps,
            root: self.root.clone(),
            journal_dir: self
                .state_dir
                .clone()
                .unwrap_or_else(host::mitigate::Journal::default_dir),
        })
    }
}

/// A directory flag (`--state-dir`) that may not exist yet: refused when it, or the nearest
/// of its parents that exists, is not a directory (it could never be created).
pub fn check_dir_flag(flag: &str, dir: &Path) -> Result<(), LabError> {
    for d in dir.ancestors().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(m) = std::fs::metadata(d) {
            if m.is_dir() {
                return Ok(());
            }
            let shown = d.display().to_string();
            return Err(invalid(if d == dir {
                format!("{flag} {} is not a directory", clip(&shown))
            } else {
                format!(
                    "{flag} {}: {} is not a directory",
                    clip(&dir.display().to_string()),
                    clip(&shown)
                )
            }));
        }
    }
    Ok(())
}
