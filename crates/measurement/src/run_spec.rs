//! `run` as a one-point experiment: the load options of every measuring command validated
//! into a [`LoadPlan`] (by `lab`'s options, the only place they are checked), the ideal's service time resolved
//! by one function ([`resolve_ideal`]: given, calibrated now, or stored), and [`RunSpec`],
//! everything `tailscope run` asks for, checked before anything starts and turned into a
//! [`RunPlan`] once the target is ready.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use analysis::{IdealSpec, QueueStructure};
use load::{LoadConfig, StopAt};

use crate::agent_spec::Agents;
use crate::calibrate::{calibrate, CalibrateSpec};
use crate::calibration::stored_calibration;
use crate::converge::Precision;
use crate::db::Db;
use crate::error::{invalid, LabError};
use crate::load_spec::Load;
use crate::measure::check_load;
use crate::observer::Observer;
use crate::run::IdealSource;
use crate::source::RunPlan;
use crate::stages::StagesMode;
use crate::target::{Ready, TargetPlan, TargetSpec};
use crate::view::ViewChoice;

/// What every run of a loop shares (a sweep's points, a tuning walk's steps, the arms of a
/// paired comparison inside them); the loop varies the load, the axes and the steps.
#[derive(Clone, Debug)]
pub struct RunTemplate {
    pub target: TargetSpec,
    /// The load (its rate and seed are set per point).
    pub load: LoadConfig,
    /// The ideal's per-worker service time when given (else calibrated or stored).
    pub service_ns: Option<f64>,
    pub workers: Option<u32>,
    pub queues: Option<QueueStructure>,
    pub confidence: f64,
    pub lateness_threshold_ns: f64,
    pub attribution: bool,
    pub server_cpus: Vec<usize>,
    pub extra_pids: Vec<u32>,
    pub calibrate: CalibrateSpec,
    /// The user's options, stored with every point (with the point's params added).
    pub config: crate::run_config::RunConfig,
    /// Each point measured until these intervals are tight (`--precision`).
    pub precision: Option<Precision>,
    /// Percentiles beyond the standard five in every point's measured summaries.
    pub extra_quantiles: Vec<(String, f64)>,
    /// Every point's load (and a calibration's steps) sent from these agents instead of
    /// from this process.
    pub agents: Option<Agents>,
}

/// Most connections of one load.
pub const MAX_CONNECTIONS: usize = 100_000;

/// Validated load options: everything of a [`LoadConfig`] but the rate and the target.
#[derive(Clone, Debug)]
pub struct LoadPlan {
    pub arrival: model::ArrivalSpec,
    pub stop: StopAt,
    pub warmup: Duration,
    pub timeout: Duration,
    pub cpus: Vec<usize>,
    pub lateness_threshold_ns: f64,
    pub precision: Option<Precision>,
    pub connections: usize,
    pub threads: usize,
    pub max_outstanding: usize,
    pub seed: u64,
    pub alpha: Option<f64>,
    pub confidence: f64,
    pub yield_when_far: bool,
    pub overdue: load::Overdue,
}

impl LoadPlan {
    /// The load configuration at `rate`; its target is a placeholder until the target is
    /// started.
    pub fn config(&self, rate: f64) -> LoadConfig {
        let mut c = LoadConfig::new(placeholder_target(), rate);
        c.arrival = self.arrival.clone();
        c.stop = self.stop;
        c.warmup = self.warmup;
        c.connections = self.connections;
        c.threads = self.threads;
        c.cpus = self.cpus.clone();
        c.max_outstanding_per_conn = self.max_outstanding;
        c.timeout = self.timeout;
        c.seed = self.seed;
        c.class_probs = match self.alpha {
            Some(alpha) if alpha < 1.0 => vec![alpha, 1.0 - alpha],
            _ => Vec::new(),
        };
        c.yield_when_far = self.yield_when_far;
        c.overdue = self.overdue;
        c
    }
}

/// The address a load configuration holds before its target is started.
pub fn placeholder_target() -> load::Target {
    load::Target {
        scheme: "nullrpc".into(),
        transport: load::Transport::Tcp,
        addr: std::net::SocketAddr::from(([127, 0, 0, 1], 1)),
        path: None,
        tls: false,
        host: "127.0.0.1".into(),
    }
}

/// How the ideal's per-worker service time is found once the target is ready.
#[derive(Clone, Debug)]
pub struct IdealAsk {
    /// Given by the user (`--service`).
    pub service_ns: Option<f64>,
    pub workers: Option<u32>,
    pub queues: Option<QueueStructure>,
    /// How a server tailscope started is calibrated when no time is given.
    pub calibrate: CalibrateSpec,
    /// What the stored source says of a calibration made here ("calibration").
    pub calibrated_as: String,
    /// Whether a target tailscope did not start falls back on its stored calibration.
    pub stored: bool,
    /// Whether the calibration's result is said as a note.
    pub announce: bool,
}

/// The one place the ideal's service time is chosen: given; else, for a server tailscope
/// started, calibrated now; else (when asked) the target's latest stored calibration (its
/// whole-target time per request × its workers); else there is no ideal.
pub fn resolve_ideal(
    ready: &Ready,
    ask: &IdealAsk,
    db: &Db,
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Result<Option<(IdealSpec, IdealSource)>, LabError> {
    let (workers, queues) = ready.ideal_shape(ask.workers, ask.queues)?;
    let service = match ask.service_ns {
        Some(s) => Some((s, IdealSource::given())),
        None if ready.owns_server() => {
            let c = calibrate(ready, &ask.calibrate, workers, db, stop, obs)?;
            if ask.announce {
                obs.note(&format!(
                    "peak {:.0} req/s → {} per request per worker ({} workers)",
                    c.peak_rps,
                    model::format_duration_ns(c.per_worker_service_ns),
                    workers
                ));
            }
            Some((
                c.per_worker_service_ns,
                IdealSource::of(&c, &ask.calibrated_as),
            ))
        }
        None if ask.stored => stored_calibration(&db.store, &ready.label)?
            .map(|c| (c.service_ns * f64::from(c.workers), c.source)),
        None => None,
    };
    Ok(service.map(|(service_ns, src)| {
        (
            IdealSpec {
                service_ns,
                workers,
                queues,
            },
            src,
        )
    }))
}

/// The host's noise just before the load: a short TSC-gap probe, one thread on each of the
/// generator's and the server's CPUs at once (every online CPU when either is not pinned),
/// said as one note. None when skipped or when the probe could not run (said why).
pub fn probe_noise(
    skip: bool,
    generator: &[usize],
    server: &[usize],
    stop: &AtomicBool,
    obs: &dyn Observer,
) -> Option<noise::HostNoise> {
    if skip {
        return None;
    }
    let cpus: Vec<usize> = if generator.is_empty() || server.is_empty() {
        Vec::new()
    } else {
        generator.iter().chain(server).copied().collect()
    };
    match noise::probe_host(&cpus, noise::QUICK_PROBE, stop) {
        Ok(h) => {
            obs.note(&h.line());
            Some(h)
        }
        Err(e) => {
            obs.note(&format!("host noise: the probe could not run ({e})"));
            None
        }
    }
}

/// Everything `tailscope run` asks for, after parsing: one point of an experiment.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// The target as the user named it.
    pub target: String,
    pub load: LoadPlan,
    pub rate: Load,
    pub ideal: IdealAsk,
    pub attribution: bool,
    /// `--server-cpus` (the attribution's; empty: the server's own when tailscope placed it).
    pub server_cpus: Vec<usize>,
    pub extra_pids: Vec<u32>,
    pub stages: StagesMode,
    pub stages_budget: crate::run_config::StagesBudget,
    pub agents: Option<Agents>,
    pub view: ViewChoice,
    pub noise_probe: bool,
    pub repeat: u32,
    pub extra_quantiles: Vec<(String, f64)>,
    /// The user's options as stored with the run (the rate, ideal and server are added).
    pub config: crate::run_config::RunConfig,
}

/// A [`RunSpec`] checked against its target and store, before anything starts.
pub struct CheckedRun {
    /// The ideal's service time and its source when known before the target starts (given,
    /// or stored for a target tailscope does not start).
    pub known: Option<(f64, IdealSource)>,
}

impl RunSpec {
    /// Every check of a run that needs no started target: placement beside the target, the
    /// stages and agents together, the repeat count, the rate's capacity, the load against
    /// the store's disk. Nothing is created (the store is only read when it exists).
    pub fn check(&self, tplan: &TargetPlan, db: &Path) -> Result<CheckedRun, LabError> {
        if self.load.connections < tplan.instances() {
            return Err(invalid(format!(
                "--connections {} cannot reach {} server instances: give at least one connection per instance",
                self.load.connections,
                tplan.instances()
            )));
        }
        if let Some(st) = tplan.stress() {
            crate::interference::stress_cpus(st, &tplan.server_cpus(), &self.load.cpus)?;
        }
        self.check_stages(tplan)?;
        if self.agents.is_some() && self.load.overdue != load::Overdue::CatchUp {
            return Err(invalid(format!(
                "--overdue {} is this process's engine's; agents send with catch-up (drop --overdue or --agent)",
                self.load.overdue
            )));
        }
        if !(1..=1000).contains(&self.repeat) {
            return Err(invalid(format!(
                "--repeat must be in 1..=1000, got {}",
                self.repeat
            )));
        }
        let known = self.known_service(tplan, db)?;
        if let (Load::OfCapacity(f), None, false) = (self.rate, &known, tplan.owns_server()) {
            return Err(invalid(format!(
                "--rate {}% needs the target's capacity: run `tailscope calibrate {}` first or give --service",
                f * 100.0,
                crate::error::clip(&self.target)
            )));
        }
        // A rate in % of capacity is known only after a calibration; check the rest now.
        let probe = self.rate.rps(None).unwrap_or(1.0);
        check_load(&self.load.config(probe), db)?;
        Ok(CheckedRun { known })
    }

    /// `--stages`: eBPF needs the server's process and a host that can run it, and joins
    /// kernel events to this host's connections (not an agent's).
    fn check_stages(&self, tplan: &TargetPlan) -> Result<(), LabError> {
        if let (StagesMode::Ebpf, Some(why)) = (self.stages, tplan.not_joinable()) {
            return Err(invalid(format!("--stages ebpf: {why}")));
        }
        if self.stages == StagesMode::Ebpf && !tplan.owns_server() && self.extra_pids.is_empty() {
            return Err(invalid(
                "--stages ebpf needs the server's process: --spawn it, or give --server-pid",
            ));
        }
        self.stages.check_host()?;
        if self.agents.is_some() {
            if self.stages == StagesMode::Ebpf {
                return Err(invalid(
                    "--stages ebpf joins kernel events to this host's connections; with --agent the load comes from elsewhere (use --stages stamps or off)",
                ));
            }
            if tplan.instances() > 1 {
                return Err(invalid(
                    "--server-instances above 1 spreads connections over several ports, which agents do not do yet; use one instance with --agent",
                ));
            }
        }
        Ok(())
    }

    /// The ideal's service time known before the target starts: given, or the latest stored
    /// calibration of a target tailscope does not start.
    fn known_service(
        &self,
        tplan: &TargetPlan,
        db: &Path,
    ) -> Result<Option<(f64, IdealSource)>, LabError> {
        if let Some(s) = self.ideal.service_ns {
            return Ok(Some((s, IdealSource::given())));
        }
        if tplan.owns_server() || !db.exists() {
            return Ok(None);
        }
        let st = store::Store::open(db)
            .map_err(|e| invalid(format!("cannot open results store {}: {e}", db.display())))?;
        Ok(stored_calibration(&st, &self.target)?
            .map(|c| (c.service_ns * f64::from(c.workers), c.source)))
    }

    /// The plan of the measurement once the target is ready: the ideal (calibrating a server
    /// tailscope started when nothing else gives it), the rate, the host's noise.
    pub fn plan(
        &self,
        checked: &CheckedRun,
        ready: &Ready,
        db: &Db,
        stop: &AtomicBool,
        obs: &dyn Observer,
    ) -> Result<RunPlan, LabError> {
        let ask = IdealAsk {
            service_ns: checked.known.as_ref().map(|k| k.0),
            ..self.ideal.clone()
        };
        let mut resolved = resolve_ideal(ready, &ask, db, stop, obs)?;
        if let (Some((_, src)), Some((_, known))) = (&mut resolved, &checked.known) {
            *src = known.clone();
        }
        let (ideal, ideal_source) = match resolved {
            Some((i, s)) => (Some(i), Some(s)),
            None => (None, None),
        };
        let capacity = ideal
            .as_ref()
            .map(|s| f64::from(s.workers) * 1e9 / s.service_ns);
        let rate_rps = self
            .rate
            .rps(capacity)
            .ok_or_else(|| invalid("--rate N% needs --service or a calibration"))?;
        let load = self.load.config(rate_rps);
        check_load(&load, &db.path)?;
        let probed = if self.server_cpus.is_empty() {
            ready.server_cpus()
        } else {
            self.server_cpus.clone()
        };
        let host_noise = probe_noise(!self.noise_probe, &self.load.cpus, &probed, stop, obs);
        let config = crate::run_config::RunConfig {
            url: Some(ready.url.clone()),
            rate_rps: Some(rate_rps),
            ideal: ideal.clone(),
            server: Some(ready.server_facts()),
            workload: Some(format!("{:?}", ready.workload)),
            churn: ready.churn.map(|(lo, hi)| (u64::from(lo), u64::from(hi))),
            view: Some(self.view),
            host_noise: host_noise.clone(),
            ..self.config.clone()
        };
        Ok(RunPlan {
            kind: "run".into(),
            load,
            ideal,
            ideal_source,
            confidence: self.load.confidence,
            lateness_threshold_ns: self.load.lateness_threshold_ns,
            attribution: self.attribution,
            server_cpus: self.server_cpus.clone(),
            extra_pids: self.extra_pids.clone(),
            config,
            experiment: None,
            stages: self.stages,
            stages_budget: self.stages_budget,
            agents: self.agents.clone(),
            precision: self.load.precision.clone(),
            extra_quantiles: self.extra_quantiles.clone(),
        })
    }
}
