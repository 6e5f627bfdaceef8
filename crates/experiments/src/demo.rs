//! The one-command tour (`tailscope demo`) as a small sweep: the built-in server (one epoll
//! worker, a known synthetic service time) on its own CPU, calibrated, Poisson load at a few
//! utilisations from the generator's CPU, the runs stored as one experiment.

use std::time::Duration;

use host::placement::SchedSpec;
use load::{LoadConfig, Target};
use model::ServiceSpec;
use serde_json::Value;

use crate::slo::Slo;
use crate::sweep::Load;
use crate::sweep::SweepPlan;
use measurement::error::{invalid, LabError};
use measurement::RunTemplate;
use measurement::{CalibrateSpec, Db, SpawnSpec, TargetSpec, WorkloadSpec};

/// The demo's warm-up before each run, unless `--warmup` says otherwise.
pub const DEMO_WARMUP: Duration = Duration::from_secs(2);
/// The generator's connections.
const CONNECTIONS: usize = 8;

/// What the demo is asked for, its texts already parsed.
#[derive(Clone, Debug)]
pub struct DemoSpec {
    /// The server's CPU; CPU 1 (0 on a one-CPU machine) when not given.
    pub server_cpu: Option<usize>,
    /// The generator's CPU; CPU 0 when not given.
    pub client_cpu: Option<usize>,
    pub work: ServiceSpec,
    /// `work` as given (stored in the runs' configuration).
    pub work_text: String,
    pub sched: Option<SchedSpec>,
    /// Each run's length, its warm-up included.
    pub duration: Duration,
    pub duration_text: String,
    /// The warm-up before each run's counted part ([`DEMO_WARMUP`] unless given).
    pub warmup: Duration,
    /// `warmup` as given (stored in the runs' configuration when not the default).
    pub warmup_text: String,
    /// Loads in % of the calibrated capacity.
    pub loads_pct: Vec<f64>,
    pub repeat: u32,
    pub label: Option<String>,
    pub slo: Option<Slo>,
    /// Percentiles beyond the standard five.
    pub extra_quantiles: Vec<(String, f64)>,
}

/// A checked demo: its CPUs and the sweep it runs.
#[derive(Clone, Debug)]
pub struct DemoPlan {
    pub server_cpu: usize,
    pub client_cpu: usize,
    pub sweep: SweepPlan,
}

impl DemoSpec {
    /// Checks the CPUs against the `online` ones, the repeats, the loads and the duration, then
    /// builds the sweep.
    pub fn plan(self, online: usize) -> Result<DemoPlan, LabError> {
        let server_cpu = self.server_cpu.unwrap_or(if online > 1 { 1 } else { 0 });
        let client_cpu = self.client_cpu.unwrap_or(0);
        for (flag, c) in [("--server-cpu", server_cpu), ("--client-cpu", client_cpu)] {
            if c >= online {
                return Err(invalid(format!(
                    "{flag}: CPU {c} does not exist (this machine has {online})"
                )));
            }
        }
        if self.repeat == 0 || self.repeat > 20 {
            return Err(invalid(format!(
                "--repeat must be in 1..=20, got {}",
                self.repeat
            )));
        }
        if self.loads_pct.is_empty() || self.loads_pct.iter().any(|l| !(*l > 0.0 && *l < 100.0)) {
            return Err(invalid(
                "--loads must be percentages in (0, 100), e.g. 30,60,85",
            ));
        }
        if self.duration <= self.warmup {
            return Err(invalid(format!(
                "--duration must be longer than the demo's {} warm-up (--warmup), got {}",
                self.warmup_text, self.duration_text
            )));
        }
        let sweep = self.sweep(server_cpu, client_cpu)?;
        Ok(DemoPlan {
            server_cpu,
            client_cpu,
            sweep,
        })
    }

    /// The built-in server (one epoll worker, the given work) on its CPU, 8 connections from
    /// the generator's, one point per load in % of the calibrated capacity.
    fn sweep(self, server_cpu: usize, client_cpu: usize) -> Result<SweepPlan, LabError> {
        let target: Target = "nullrpc://127.0.0.1:1".parse().map_err(invalid)?;
        let mut load = LoadConfig::new(target, 1.0);
        load.stop = load::StopAt::Duration(self.duration - self.warmup);
        load.warmup = self.warmup;
        load.connections = CONNECTIONS;
        load.cpus = vec![client_cpu];
        load.yield_when_far = false;
        let spawn = SpawnSpec {
            threads: Some(1),
            cpus: vec![server_cpu],
            sched: self.sched,
            arch: Some(server::Arch::Epoll),
            work: Some(self.work),
            ..SpawnSpec::default()
        };
        let config = measurement::RunConfig {
            demo: Some(true),
            duration: Some(self.duration_text.clone()),
            // Stored only when not the demo's own, so default demos keep their shape.
            warmup: (self.warmup != DEMO_WARMUP).then(|| self.warmup_text.clone()),
            connections: Some(CONNECTIONS as u64),
            client_cpu: Some(client_cpu as u64),
            server_cpu: Some(server_cpu as u64),
            work: Some(self.work_text.clone()),
            label: self.label.clone(),
            ..measurement::RunConfig::default()
        };
        let template = RunTemplate {
            agents: None,
            precision: None,
            extra_quantiles: self.extra_quantiles,
            target: TargetSpec {
                url: "nullrpc://".into(),
                spawn: Some(spawn),
                workload: WorkloadSpec::default(),
                churn: None,
                preload: false,
                stress: None,
                tls: Default::default(),
            },
            load,
            service_ns: None,
            workers: None,
            queues: None,
            confidence: 0.95,
            lateness_threshold_ns: 50_000.0,
            attribution: true,
            server_cpus: Vec::new(),
            extra_pids: Vec::new(),
            calibrate: CalibrateSpec::default(),
            config,
        };
        Ok(SweepPlan {
            kind: "demo".into(),
            template,
            loads: self
                .loads_pct
                .iter()
                .map(|p| Load::OfCapacity(p / 100.0))
                .collect(),
            axes: Vec::new(),
            repeat: self.repeat,
            slo: self.slo,
            find_max: false,
            max_steps: 2,
            experiment: None,
            interleave: None,
        })
    }
}

/// The calibration the demo's sweep made, as the store keeps it (the summary of the run the
/// first run's ideal names).
pub fn calibration_of(db: &Db, runs: &[Value]) -> Option<Value> {
    let id = runs.first()?["ideal_source"]["calibration_run"].as_i64()?;
    db.store.get_run(id).ok().flatten()?.summary
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> DemoSpec {
        DemoSpec {
            server_cpu: None,
            client_cpu: None,
            work: "det:20us".parse().unwrap(),
            work_text: "det:20us".into(),
            sched: None,
            duration: Duration::from_secs(5),
            duration_text: "5s".into(),
            warmup: DEMO_WARMUP,
            warmup_text: "2s".into(),
            loads_pct: vec![30.0, 60.0],
            repeat: 1,
            label: None,
            slo: None,
            extra_quantiles: Vec::new(),
        }
    }

    #[test]
    fn a_demo_is_a_sweep_over_loads_of_capacity() {
        let p = spec().plan(4).unwrap();
        assert_eq!((p.server_cpu, p.client_cpu), (1, 0));
        assert_eq!(p.sweep.loads.len(), 2);
        assert!(matches!(p.sweep.loads[1], Load::OfCapacity(f) if (f - 0.6).abs() < 1e-12));
        assert_eq!(
            p.sweep.template.load.stop,
            load::StopAt::Duration(Duration::from_secs(3))
        );
        assert_eq!(p.sweep.template.config.work.as_deref(), Some("det:20us"));
        assert_eq!(spec().plan(1).unwrap().server_cpu, 0);
    }

    #[test]
    fn bad_input_names_its_flag() {
        let mut s = spec();
        s.server_cpu = Some(9);
        assert!(s
            .plan(4)
            .unwrap_err()
            .to_string()
            .starts_with("--server-cpu: CPU 9"));
        let mut s = spec();
        s.loads_pct = vec![100.0];
        assert!(s.plan(4).unwrap_err().is_invalid());
        let mut s = spec();
        s.duration = DEMO_WARMUP;
        assert!(s.plan(4).unwrap_err().to_string().contains("warm-up"));
        let mut s = spec();
        s.warmup = Duration::from_millis(300);
        s.warmup_text = "300ms".into();
        s.duration = Duration::from_millis(1300);
        let p = s.plan(4).unwrap();
        assert_eq!(p.sweep.template.load.warmup, Duration::from_millis(300));
        assert_eq!(p.sweep.template.config.warmup.as_deref(), Some("300ms"));
        assert_eq!(spec().plan(4).unwrap().sweep.template.config.warmup, None);
        assert_eq!(
            p.sweep.template.load.stop,
            load::StopAt::Duration(Duration::from_secs(1))
        );
        let mut s = spec();
        s.repeat = 0;
        assert!(s.plan(4).unwrap_err().to_string().contains("--repeat"));
    }
}
