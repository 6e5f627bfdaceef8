//! The one conversion of the measuring commands' options ([`crate::options`]) into lab's
//! specs: the target ([`TargetSpec`]), the load ([`LoadPlan`], in `run_spec`), the agents,
//! a sweep ([`SweepPlan`]). Every check names the flag; nothing starts here.

use std::time::Duration;

use load::{NullRpcWorkload, StopAt};

use crate::options::{
    AgentArgs, LoadArgs, OnOff, ServerSideArgs, SweepOptions, TargetArgs, WorkloadArg,
};
use experiments::SweepPlan;
use experiments::{merge_axes, Axis};
use measurement::converge::Precision;
use measurement::error::{invalid, LabError};
use measurement::run_spec::{LoadPlan, MAX_CONNECTIONS};
use measurement::target_spec::{SpawnSpec, TargetSpec, WorkloadSpec};
use measurement::view::{View, ViewChoice};
use measurement::Agents;
use measurement::CalibrateSpec;
use measurement::RunTemplate;

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
    pub fn stored(&self, target: &str, cpus: &[usize]) -> measurement::RunConfig {
        let n = |x: usize| Some(x as u64);
        measurement::RunConfig {
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
            ..measurement::RunConfig::default()
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
            None => experiments::model_query::read_arrival(&self.arrival, self.trace_unit),
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
            measurement::clip(s)
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
            grpc: measurement::GrpcSpec {
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
                    .map(experiments::model_query::read_service)
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
            Some(l) => measurement::parse_loads(l)?,
            None => Vec::new(),
        };
        if self.find_max && self.gate.slo.is_none() {
            return Err(invalid("--find-max needs --slo (e.g. --slo 'p99<=1ms')"));
        }
        let cli_axes = self
            .params
            .iter()
            .map(|x| Axis::parse(x))
            .collect::<Result<Vec<_>, _>>()?;
        let axes = merge_axes(file_axes, cli_axes)?;
        let view: ViewChoice = self.gate.slo_view.into();
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
                config: measurement::RunConfig {
                    service: side.service.clone(),
                    slo: self.gate.slo.clone(),
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

impl LoadArgs {
    /// Checks every option (and their combinations); the error names the flag. A trace
    /// file named by `--arrival trace:PATH` is read here.
    pub fn plan(&self) -> Result<LoadPlan, LabError> {
        let stop = self.stop()?;
        self.check_counts()?;
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(invalid(format!(
                "--confidence must be in (0, 1), got {}",
                self.confidence
            )));
        }
        if let Some(alpha) = self.alpha {
            if !(alpha > 0.0 && alpha <= 1.0) {
                return Err(invalid(format!("--alpha must be in (0, 1], got {alpha}")));
            }
        }
        // The warm-up comes before the measured --duration (or --requests), as the schedule
        // lays them out (issue 37: the help said inside), so any length of either is coherent.
        let warmup = self.warmup.value.0;
        let timeout = self.timeout.value.0;
        if timeout.is_zero() {
            return Err(invalid("--timeout must be positive"));
        }
        Ok(LoadPlan {
            arrival: self.arrival_spec()?,
            stop,
            warmup,
            timeout,
            cpus: self.cpus.clone().unwrap_or_default().0,
            lateness_threshold_ns: self.lateness_threshold.0.as_nanos() as f64,
            precision: self.precision(stop)?,
            connections: self.connections,
            threads: self.threads,
            max_outstanding: self.max_outstanding,
            seed: self.seed,
            alpha: self.alpha,
            confidence: self.confidence,
            yield_when_far: self.yield_when_far,
            overdue: self.overdue,
        })
    }

    fn stop(&self) -> Result<StopAt, LabError> {
        if let Some(r) = &self.requests {
            let n = r.value.0;
            if n == 0 {
                return Err(invalid("--requests must be at least 1"));
            }
            return Ok(StopAt::Requests(n));
        }
        let d = self.duration.value.0;
        if d.is_zero() {
            return Err(invalid("--duration must be positive"));
        }
        Ok(StopAt::Duration(d))
    }

    fn check_counts(&self) -> Result<(), LabError> {
        if self.connections == 0 || self.threads == 0 || self.max_outstanding == 0 {
            return Err(invalid(
                "--connections, --threads and --max-outstanding must be at least 1",
            ));
        }
        if self.threads > self.connections {
            return Err(invalid(format!(
                "--threads ({}) cannot exceed --connections ({}): each thread owns connections",
                self.threads, self.connections
            )));
        }
        if self.connections > MAX_CONNECTIONS {
            return Err(invalid(format!(
                "--connections must be at most {MAX_CONNECTIONS}, got {}",
                self.connections
            )));
        }
        Ok(())
    }

    /// `--precision` (with `--max-duration`, default 60 s): a run that keeps going in time.
    fn precision(&self, stop: StopAt) -> Result<Option<Precision>, LabError> {
        let Some(text) = &self.precision else {
            if self.max_duration.is_some() {
                return Err(invalid(
                    "--max-duration goes with --precision (how long a converging run may take)",
                ));
            }
            return Ok(None);
        };
        let (max_text, max) = match &self.max_duration {
            Some(m) => (m.text.as_str(), m.value.0),
            None => ("60s", Duration::from_secs(60)),
        };
        let p = Precision::parse(text, View::User, max)?;
        match stop {
            StopAt::Requests(_) => Err(invalid(
                "--precision keeps a run going in time: give --duration (the least it runs), not --requests",
            )),
            StopAt::Duration(d) if d > max => Err(invalid(format!(
                "--duration ({}) is longer than --max-duration ({max_text})",
                self.duration
            ))),
            StopAt::Duration(_) => Ok(Some(p)),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    /// The load options of a command line: `--duration 2s --warmup 500ms …` and `extra`.
    fn options(extra: &[&str]) -> LoadArgs {
        let base = [
            "x",
            "--duration=2s",
            "--warmup=500ms",
            "--connections=4",
            "--threads=2",
            "--max-outstanding=8",
            "--alpha=0.25",
            "--seed=7",
        ];
        // With the target's flags beside them, as every command has them (`--workload`
        // conflicts with `--key-size`, which clap checks in debug builds).
        let cmd = crate::options::TargetArgs::augment_args(LoadArgs::augment_args(
            clap::Command::new("x").args_override_self(true),
        ));
        let m = cmd.try_get_matches_from(base.iter().chain(extra)).unwrap();
        LoadArgs::from_arg_matches(&m).unwrap()
    }

    #[test]
    fn load_options_become_a_plan_and_a_config() {
        let p = options(&[]).plan().unwrap();
        assert_eq!(p.stop, StopAt::Duration(Duration::from_secs(2)));
        assert_eq!(p.warmup, Duration::from_millis(500));
        assert_eq!(p.lateness_threshold_ns, 50_000.0);
        let c = p.config(1234.0);
        assert_eq!(c.rate_per_s, 1234.0);
        assert_eq!((c.connections, c.threads, c.seed), (4, 2, 7));
        assert_eq!(c.class_probs, vec![0.25, 0.75]);
        assert!(!c.yield_when_far);
        let mut r = options(&[]);
        r.requests = Some("10k".parse().unwrap());
        assert_eq!(r.plan().unwrap().stop, StopAt::Requests(10_000));
        // The warm-up precedes the measured duration, whatever their lengths (issue 37).
        let w = options(&["--warmup=3s", "--duration=2s"]).plan().unwrap();
        assert_eq!(w.warmup, Duration::from_secs(3));
        assert_eq!(w.stop, StopAt::Duration(Duration::from_secs(2)));
    }

    #[test]
    fn bad_load_options_name_their_flag() {
        let connections = format!("--connections={}", MAX_CONNECTIONS + 1);
        let cases: Vec<(LoadArgs, &str)> = vec![
            (options(&["--threads=5"]), "--threads (5) cannot exceed"),
            (options(&["--timeout=0s"]), "--timeout must be positive"),
            (options(&["--confidence=1"]), "--confidence"),
            (
                options(&["--max-duration=9s"]),
                "--max-duration goes with --precision",
            ),
            (options(&[&connections]), "--connections must be at most"),
        ];
        for (o, needle) in cases {
            let e = o.plan().unwrap_err();
            assert!(e.is_invalid(), "{needle}: {e}");
            assert!(e.to_string().contains(needle), "{needle}: {e}");
        }
        let mut zero = options(&[]);
        zero.requests = Some("0".parse().unwrap());
        let e = zero.plan().unwrap_err();
        assert!(
            e.to_string().contains("--requests must be at least 1"),
            "{e}"
        );
        // Values of no option's type are refused by clap, naming the flag.
        let cmd = crate::options::TargetArgs::augment_args(LoadArgs::augment_args(
            clap::Command::new("x"),
        ));
        for bad in [
            "--warmup=soon",
            "--timeout=-1s",
            "--requests=many",
            "--trace-unit=ms",
        ] {
            let e = cmd.clone().try_get_matches_from(["x", bad]).unwrap_err();
            let flag = bad.split('=').next().unwrap();
            assert!(e.to_string().contains(flag), "{bad}: {e}");
        }
    }
}
