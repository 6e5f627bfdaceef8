//! `tailscope sweep`: parse the options (or a TOML experiment file) into a `lab::SweepPlan`,
//! check it, run it, print the rows.

use lab::{Axis, Db, RunTemplate, SweepPlan, ViewChoice};

use super::common::{db_path, shutdown_flag};
use super::progress::Progress;
use super::run::{load_config, nullrpc, plan};
use super::target::lab_err;
use crate::cli::{AgentArgs, OnOff, SweepArgs};
use crate::exit::{usage, OrUsage};
use crate::output;

/// The agents `--agent`/`--agents` name, checked before anything starts (None: the load
/// runs in this process).
pub fn agents_of(a: &AgentArgs) -> anyhow::Result<Option<lab::Agents>> {
    lab::Agents::from_args(
        &a.agent,
        a.agents_file.as_deref(),
        a.agent_records == OnOff::On,
    )
    .map_err(lab_err)
}

/// The validated plan of a sweep's arguments (a URL target) and an experiment file's axes
/// (the command line's `--param` of a knob replaces the file's).
pub fn sweep_plan(a: &SweepArgs, file_axes: Vec<Axis>) -> anyhow::Result<SweepPlan> {
    let (server_cpus, mut spec) = super::target::side_spec(&a.target, &a.side, nullrpc(&a.load))?;
    super::run::apply_workload(&a.load, &mut spec.workload);
    super::common::check_label(a.label.as_deref())?;
    let p = plan(&a.load)?;
    let loads = match &a.loads {
        Some(l) => lab::parse_loads(l).map_err(lab_err)?,
        None => Vec::new(),
    };
    let view: ViewChoice = a.slo_view.into();
    let gate = super::gate::Gate::new(a.slo.as_deref(), view, &a.gate)?;
    let slo = gate.slo.clone();
    if a.find_max && slo.is_none() {
        return Err(usage("--find-max needs --slo (e.g. --slo 'p99<=1ms')"));
    }
    let axes = a
        .params
        .iter()
        .map(|x| Axis::parse(x))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|cli| lab::merge_axes(file_axes, cli))
        .map_err(lab_err)?;
    let service_ns = a
        .side
        .service
        .as_deref()
        .map(|s| model::parse_duration_ns(s).or_usage_ctx("--service"))
        .transpose()?;
    let agents = agents_of(&a.agents)?;
    let la = &a.load;
    Ok(SweepPlan {
        kind: "sweep".into(),
        template: RunTemplate {
            agents,
            precision: p.precision.clone(),
            extra_quantiles: gate.extra.clone(),
            target: spec,
            load: load_config(la, &p, 1.0)?,
            service_ns,
            workers: a.side.workers,
            queues: a.side.queues.structure(),
            confidence: la.confidence,
            lateness_threshold_ns: p.lateness_threshold_ns,
            attribution: !a.side.no_attribution,
            server_cpus,
            extra_pids: a.side.server_pid.clone(),
            calibrate: lab::CalibrateSpec::default(),
            config: serde_json::json!({
                "target": a.target, "arrival": super::run::arrival_text(la), "duration": la.duration,
                "requests": la.requests, "warmup": la.warmup, "connections": la.connections,
                "threads": la.threads, "cpus": p.cpus, "max_outstanding": la.max_outstanding,
                "timeout": la.timeout, "seed": la.seed, "service": a.side.service,
                "slo": a.slo, "slo_view": view, "label": a.label,
            }),
        },
        loads,
        axes,
        repeat: a.repeat,
        slo,
        find_max: a.find_max,
        max_steps: a.max_steps,
        experiment: None,
    })
}

/// A sweep's exit code with its SLO gate (see `lab::SweepResult::gate_code`).
pub fn gate_code(result: &lab::SweepResult, gate: &super::gate::Gate) -> i32 {
    result.gate_code(gate.undecided_fails)
}

pub fn run(a: &SweepArgs) -> anyhow::Result<i32> {
    // An experiment file's options under the command line's (read from this process's own
    // command line: clap says which options it gave).
    let (a, file_axes) = if a.target.ends_with(".toml") {
        super::sweep_file::from_command_line(std::env::args_os())?
    } else {
        (a.clone(), Vec::new())
    };
    let mut splan = sweep_plan(&a, file_axes)?;
    let db = db_path(&a.db)?;
    splan.check(&db).map_err(lab_err)?;
    let gate = super::gate::Gate::new(a.slo.as_deref(), a.slo_view.into(), &a.gate)?;
    if a.dry_run {
        let plan = splan.dry_run().map_err(lab_err)?;
        return if a.json {
            output::print_json(&serde_json::to_value(&plan)?)
        } else {
            output::print_with(|w| report::plan_view::dry_run(w, &plan))
        }
        .map(|()| 0);
    }
    let progress = Progress::new(a.json);
    let obs = lab::Headlines::new(&progress);
    let db = Db::open(&db)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", db.display())))?;
    let stop = shutdown_flag()?;
    // The host's noise, once before the sweep; every point keeps it.
    let server_cpus = match &splan.template.target.spawn {
        Some(s) if splan.template.server_cpus.is_empty() => s.cpus.clone(),
        _ => splan.template.server_cpus.clone(),
    };
    let host_noise = super::run::probe_noise(
        a.no_noise_probe,
        &splan.template.load.cpus,
        &server_cpus,
        &stop,
        &obs,
    );
    splan.template.config["host_noise"] = serde_json::json!(host_noise);
    let result = lab::sweep(&splan, &db, &stop, &obs).map_err(lab_err)?;
    let suites = result.suites();
    let written = if gate.slo.is_some() {
        gate.write(&suites)?
    } else {
        Vec::new()
    };
    if a.json {
        let mut v = obs.json_of(&result);
        if gate.slo.is_some() {
            v["slo_points"] = serde_json::json!(suites
                .iter()
                .map(|(name, r)| serde_json::json!({"point": name, "slo": r}))
                .collect::<Vec<_>>());
            v["written"] = serde_json::json!(written);
        }
        output::print_json(&v)?;
    } else {
        output::print_with(|w| {
            report::sweep_view::sweep_views(w, &result, &obs.headlines())?;
            report::outcome_view::written(w, &written)
        })?;
    }
    Ok(gate_code(&result, &gate))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;
    use crate::cli::Cli;

    #[test]
    fn every_option_of_sweep_is_a_key_of_an_experiment_file() {
        let cmd = <Cli as clap::CommandFactory>::command();
        let sweep = cmd.find_subcommand("sweep").unwrap();
        let mut n = 0;
        for arg in sweep.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if ["db", "json", "param", "help", "version"].contains(&long) {
                continue;
            }
            // A value of no option's type: refused for its type, not as an unknown key.
            let text = format!("target = \"nullrpc://\"\n{long} = {{ x = 1 }}\n");
            let e = lab::ExperimentFile::parse("e.toml", &text)
                .unwrap_err()
                .to_string();
            assert!(!e.contains("unknown key"), "--{long}: {e}");
            n += 1;
        }
        assert!(n > 50, "{n} options");
    }

    fn sweep_line(file: &str, after: &[&str]) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec!["tailscope".into(), "sweep".into(), file.into()];
        argv.extend(after.iter().map(OsString::from));
        argv
    }

    #[test]
    fn the_command_line_overrides_a_file_option_by_option_and_axis_by_axis() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("e.toml");
        std::fs::write(
            &file,
            "target = \"nullrpc://\"\nspawn = true\nduration = \"5s\"\nwarmup = \"2s\"\n\
             loads = [1000, 2000]\nkey-size = 30\nagent-records = \"off\"\n[param]\n\
             connections = [1, 2]\nserver-cpus = [\"0\", \"0,1\"]\n",
        )
        .unwrap();
        let file = file.to_str().unwrap();
        let (a, axes) = super::super::sweep_file::from_command_line(sweep_line(file, &[])).unwrap();
        assert_eq!(a.target, "nullrpc://");
        assert!(a.side.server.spawn);
        assert_eq!(a.load.duration, "5s");
        assert_eq!(a.load.warmup, "2s");
        assert_eq!(a.loads.as_deref(), Some("1000,2000"));
        assert_eq!(a.side.server.key_size, "30");
        assert_eq!(a.agents.agent_records, OnOff::Off);
        let p = sweep_plan(&a, axes).unwrap();
        let axes: Vec<(&str, &[String])> = p
            .axes
            .iter()
            .map(|x| (x.name.as_str(), &x.values[..]))
            .collect();
        assert_eq!(
            axes,
            [
                ("connections", &["1".to_string(), "2".into()][..]),
                ("server-cpus", &["0".to_string(), "0,1".into()][..])
            ]
        );
        let after = [
            "--param",
            "connections=4",
            "--requests",
            "1k",
            "--loads=5",
            "--warmup",
            "200ms",
            "--key-size",
            "64",
        ];
        let (a, axes) =
            super::super::sweep_file::from_command_line(sweep_line(file, &after)).unwrap();
        // The command line's value wins even when it is the option's default (64).
        assert_eq!(a.side.server.key_size, "64");
        assert_eq!(a.load.requests.as_deref(), Some("1k"));
        assert_eq!(a.loads.as_deref(), Some("5"));
        assert_eq!(a.load.warmup, "200ms");
        assert!(
            a.side.server.spawn,
            "what the command line leaves stays the file's"
        );
        let p = sweep_plan(&a, axes).unwrap();
        let names: Vec<&str> = p.axes.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["server-cpus", "connections"]);
        assert_eq!(p.axes[1].values, ["4"]);
        // The command line's --duration replaces the file's requests.
        std::fs::write(
            dir.path().join("r.toml"),
            "target = \"nullrpc://\"\nrequests = 500\n",
        )
        .unwrap();
        let r = dir.path().join("r.toml");
        let (a, _) = super::super::sweep_file::from_command_line(sweep_line(
            r.to_str().unwrap(),
            &["--duration", "3s"],
        ))
        .unwrap();
        assert_eq!((a.load.requests, a.load.duration.as_str()), (None, "3s"));
        // A knob given twice on the command line is refused, not half dropped.
        let (a, axes) = super::super::sweep_file::from_command_line(sweep_line(
            file,
            &["--param", "connections=4", "--param", "connections=8"],
        ))
        .unwrap();
        let e = sweep_plan(&a, axes).unwrap_err();
        assert_eq!(crate::exit::code_of(&e), 2);
        assert!(e.to_string().contains("twice"), "{e}");
    }
}
