//! The one conversion of the measuring commands' options ([`crate::options`]) into lab's
//! specs: the target ([`TargetSpec`]), the load ([`LoadPlan`], in `run_spec`), the agents,
//! a sweep ([`SweepPlan`]). Every check names the flag; nothing starts here.

use load::NullRpcWorkload;

use crate::agent_spec::Agents;
use crate::calibrate::CalibrateSpec;
use crate::error::{invalid, LabError};
use crate::knob::{merge_axes, Axis};
use crate::options::{
    AgentArgs, LoadArgs, OnOff, ServerSideArgs, SweepOptions, TargetArgs, WorkloadArg,
};
use crate::slo::ViewChoice;
use crate::sweep::{RunTemplate, SweepPlan};
use crate::target_spec::{SpawnSpec, TargetSpec, WorkloadSpec};

impl LoadArgs {
    /// The null-RPC request options.
    pub fn nullrpc(&self) -> NullRpcWorkload {
        NullRpcWorkload {
            request_size: self.request_size,
            stamps: !self.no_stamps,
        }
    }

    /// `--workload`'s sizes and mix in `w` (its arrivals are [`LoadArgs::arrival_spec`]'s).
    pub fn apply_workload(&self, w: &mut WorkloadSpec) {
        if self.workload == Some(WorkloadArg::Etc) {
            w.key_size = load::SizeDist::Etc(load::EtcSize::Key);
            w.value_size = load::SizeDist::Etc(load::EtcSize::Value);
            w.get_ratio = load::etc::ETC_GET_RATIO;
        }
    }

    /// The load flags as the user wrote them, for the run's stored configuration.
    pub fn stored(&self, target: &str, cpus: &[usize]) -> crate::RunConfig {
        let n = |x: usize| Some(x as u64);
        crate::RunConfig {
            target: Some(target.to_string()),
            arrival: Some(self.arrival_text()),
            duration: Some(self.duration.to_string()),
            requests: self.requests.as_ref().map(ToString::to_string),
            warmup: Some(self.warmup.to_string()),
            connections: n(self.connections),
            threads: n(self.threads),
            cpus: Some(cpus.iter().map(|c| *c as u64).collect()),
            max_outstanding: n(self.max_outstanding),
            timeout: Some(self.timeout.to_string()),
            seed: Some(self.seed),
            ..crate::RunConfig::default()
        }
    }

    /// The arrival process as the user named it (for the stored config).
    pub fn arrival_text(&self) -> String {
        match self.workload {
            Some(WorkloadArg::Etc) => "etc".into(),
            None => self.arrival.clone(),
        }
    }

    /// The arrival process (a trace file read).
    pub fn arrival_spec(&self) -> Result<model::ArrivalSpec, LabError> {
        match self.workload {
            Some(WorkloadArg::Etc) => Ok(model::ArrivalSpec::GenPareto {
                shape: model::ETC_GAP_SHAPE,
            }),
            None => crate::model_query::read_arrival(&self.arrival, self.trace_unit),
        }
    }
}

impl AgentArgs {
    /// The agents `--agent`/`--agents` name, checked before anything starts (None: the load
    /// runs in this process).
    pub fn agents(&self) -> Result<Option<Agents>, LabError> {
        Agents::from_args(
            &self.agent,
            self.agents_file.as_deref(),
            self.agent_records == OnOff::On,
        )
    }
}

impl ServerSideArgs {
    /// The target of `run` or `sweep` and the server-side flags they share, all checked
    /// before anything starts: `--server-cpus`, the target's spec, `--workers`, every
    /// `--server-pid`.
    pub fn side_spec(
        &self,
        url: &str,
        nullrpc: NullRpcWorkload,
    ) -> Result<(Vec<usize>, TargetSpec), LabError> {
        let server_cpus = self.server_cpus.clone().unwrap_or_default().0;
        let spec = self.server.spec(url, &server_cpus, nullrpc)?;
        if self.workers == Some(0) {
            return Err(invalid("--workers must be at least 1"));
        }
        for &pid in &self.server_pid {
            if !std::path::Path::new(&format!("/proc/{pid}")).is_dir() {
                return Err(invalid(format!("--server-pid: no process {pid}")));
            }
        }
        Ok((server_cpus, spec))
    }

    /// `--service`: the ideal's per-worker service time, when given.
    pub fn service_ns(&self) -> Result<Option<f64>, LabError> {
        service_ns(self.service.as_deref())
    }
}

/// `--service` of `run`, `sweep` and `tune`: a positive duration, in ns.
pub(crate) fn service_ns(text: Option<&str>) -> Result<Option<f64>, LabError> {
    let Some(s) = text else {
        return Ok(None);
    };
    let ns = model::parse_duration_ns(s).map_err(|e| invalid(format!("--service: {e}")))?;
    if ns.is_nan() || ns <= 0.0 {
        return Err(invalid(format!(
            "--service must be positive, got '{}'",
            crate::clip(s)
        )));
    }
    Ok(Some(ns))
}

impl TargetArgs {
    /// The target spec from the URL, the target options and the null-RPC request options.
    pub fn spec(
        &self,
        url: &str,
        server_cpus: &[usize],
        nullrpc: NullRpcWorkload,
    ) -> Result<TargetSpec, LabError> {
        let workload = WorkloadSpec {
            get_ratio: self.get_ratio,
            key_size: self.key_size.value,
            value_size: self.value_size.value,
            items: self.items,
            popularity: self.popularity,
            files: self.files,
            file_size: self.file_size,
            nullrpc,
            grpc: crate::GrpcSpec {
                method: self.method.clone(),
                proto: self.proto.clone(),
                message: self.message.clone(),
                data: self.data.clone(),
                metadata: self.metadata.clone(),
            },
        };
        let spawn = if self.spawn {
            Some(SpawnSpec {
                threads: self.server_threads,
                cpus: server_cpus.to_vec(),
                sched: self.server_sched.clone(),
                arch: self.server_arch,
                work: self
                    .server_work
                    .as_deref()
                    .map(crate::model_query::read_service)
                    .transpose()?,
                ..self.isolation_spec()
            })
        } else {
            self.refuse_spawn_options()?;
            None
        };
        Ok(TargetSpec {
            url: url.to_string(),
            spawn,
            workload,
            churn: self.churn.map(|c| (c.0, c.1)),
            preload: !self.no_preload,
            stress: self.stress.clone(),
            tls: load::TlsOptions {
                insecure: self.insecure,
                ca: self.ca.clone(),
                server_name: self.sni.clone(),
                handshake_per_request: self.tls_handshake_per_request,
                ca_pem: None,
            },
        })
    }

    /// Options that only a server tailscope starts can take, refused without `--spawn`.
    fn refuse_spawn_options(&self) -> Result<(), LabError> {
        if self.server_threads.is_some()
            || self.server_sched.is_some()
            || self.server_arch.is_some()
            || self.server_work.is_some()
        {
            return Err(invalid(
                "--server-threads, --server-sched, --server-arch and --server-work need --spawn",
            ));
        }
        let placed = self.server_memory_mb.is_some()
            || self.open_file_cache
            || self.server_instances.is_some()
            || self.server_smt.is_some()
            || self.server_numa.is_some()
            || self.server_cpuset.is_some()
            || self.server_memory.is_some()
            || self.server_cpu_quota.is_some()
            || self.net_rate.is_some()
            || self.net_dev.is_some()
            || self.llc_ways.is_some();
        if placed {
            return Err(invalid(
                "--server-memory-mb, --open-file-cache, --server-instances, --server-smt, --server-numa, --server-cpuset, --server-memory, --server-cpu-quota, --net-rate, --net-dev and --llc-ways need --spawn (a server tailscope starts and places)",
            ));
        }
        Ok(())
    }

    /// The scale-out, SMT and isolation flags as a spawn spec (the other fields default).
    fn isolation_spec(&self) -> SpawnSpec {
        SpawnSpec {
            memory_mb: self.server_memory_mb,
            open_file_cache: self.open_file_cache,
            instances: self.server_instances,
            smt: self.server_smt,
            numa: self.server_numa.clone(),
            cpuset: self.server_cpuset.clone().unwrap_or_default().0,
            memory_limit_bytes: self.server_memory.map(|b| b.0),
            cpu_quota: self.server_cpu_quota.map(|q| q.0),
            net_rate_bps: self.net_rate.map(|r| r.0),
            net_dev: self.net_dev.clone(),
            llc_ways: self.llc_ways,
            ..SpawnSpec::default()
        }
    }
}

impl SweepOptions {
    /// The validated plan of a sweep of `target` (a URL) with an experiment file's axes (the
    /// command line's `--param` of a knob replaces the file's); its SLO and extra
    /// percentiles are the gate's to set.
    pub fn plan(&self, target: &str, file_axes: Vec<Axis>) -> Result<SweepPlan, LabError> {
        let (la, side) = (&self.load, &self.side);
        let (server_cpus, mut spec) = side.side_spec(target, la.nullrpc())?;
        la.apply_workload(&mut spec.workload);
        let p = la.plan()?;
        let loads = match &self.loads {
            Some(l) => crate::loads::parse_loads(l)?,
            None => Vec::new(),
        };
        if self.find_max && self.slo.is_none() {
            return Err(invalid("--find-max needs --slo (e.g. --slo 'p99<=1ms')"));
        }
        let cli_axes = self
            .params
            .iter()
            .map(|x| Axis::parse(x))
            .collect::<Result<Vec<_>, _>>()?;
        let axes = merge_axes(file_axes, cli_axes)?;
        let view: ViewChoice = self.slo_view.into();
        let interleave = self.interleave.design(
            la.confidence,
            la.seed,
            self.label.as_ref().map(|l| l.0.clone()),
        )?;
        Ok(SweepPlan {
            interleave,
            kind: "sweep".into(),
            template: RunTemplate {
                agents: self.agents.agents()?,
                precision: p.precision.clone(),
                extra_quantiles: Vec::new(),
                target: spec,
                load: p.config(1.0),
                service_ns: side.service_ns()?,
                workers: side.workers,
                queues: side.queues.structure(),
                confidence: la.confidence,
                lateness_threshold_ns: p.lateness_threshold_ns,
                attribution: !side.no_attribution,
                server_cpus,
                extra_pids: side.server_pid.clone(),
                calibrate: CalibrateSpec::default(),
                config: crate::RunConfig {
                    service: side.service.clone(),
                    slo: self.slo.clone(),
                    slo_view: Some(view),
                    label: self.label.as_ref().map(|l| l.0.clone()),
                    ..la.stored(target, &p.cpus)
                },
            },
            loads,
            axes,
            repeat: self.repeat,
            slo: None,
            find_max: self.find_max,
            max_steps: self.max_steps,
            experiment: None,
        })
    }
}
