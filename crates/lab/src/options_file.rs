//! An experiment file's typed options (read and checked by [`ExperimentFile`], serde) laid
//! under the command line's [`SweepOptions`], option by option: what the command line gave
//! wins (clap's own record of where each value came from), the file gives the rest, clap's
//! defaults the others. No argv is rebuilt.

use std::path::PathBuf;

use crate::experiment::{ExperimentFile, List, Text};
use crate::options::SweepOptions;
use measurement::clip;
use measurement::error::{invalid, LabError};

fn text(t: &Option<Text>) -> Option<String> {
    t.as_ref().map(|t| t.0.clone())
}

fn list(l: &Option<List>) -> Option<String> {
    l.as_ref().map(|l| l.0.join(","))
}

/// A file's text value parsed as its option's type, the error naming the key (the command
/// line's flags parse the same text with the same `FromStr`).
fn typed<T: std::str::FromStr>(key: &str, v: Option<String>) -> Result<Option<T>, LabError>
where
    T::Err: std::fmt::Display,
{
    v.map(|t| {
        t.parse::<T>()
            .map_err(|e| invalid(format!("{key}: cannot use '{}': {e}", clip(&t))))
    })
    .transpose()
}

fn path(p: &Option<String>) -> Option<PathBuf> {
    p.as_ref().map(PathBuf::from)
}

/// `field = value` for each `id: field = value;` whose value is `Some` and whose option
/// (clap id) the command line did not give.
macro_rules! lay {
    ($given:ident; $($id:literal: $field:expr => $value:expr;)*) => {
        $(if let (false, Some(v)) = ($given($id), $value) { $field = v; })*
    };
}

/// Sets each option of `a` the file sets and the command line did not give (`given` by clap
/// id). The file's `duration` yields to the command line's `--requests` and its `requests`
/// to `--duration`; its `workload` cannot stand beside the command line's options it sets.
fn overlay(
    a: &mut SweepOptions,
    f: &ExperimentFile,
    given: &dyn Fn(&str) -> bool,
) -> Result<(), LabError> {
    let s = &f.spec;
    let (l, d) = (&mut a.load, &mut a.side);
    // Checked to be process ids when the file was read.
    let pids = s.server_pid.as_ref().map(|p| {
        p.get_ref()
            .0
            .iter()
            .filter_map(|x| x.trim().parse().ok())
            .collect()
    });
    lay! { given;
        "loads": a.loads => list(&s.loads).map(Some);
        "repeat": a.repeat => s.repeat;
        "slo": a.gate.slo => s.slo.clone().map(Some);
        "slo_view": a.gate.slo_view => s.slo_view;
        "percentiles": a.gate.percentiles => list(&s.percentiles).map(Some);
        "slo_undecided": a.gate.slo_undecided => s.slo_undecided;
        "junit": a.gate.junit => path(&s.junit).map(Some);
        "markdown": a.gate.markdown => path(&s.markdown).map(Some);
        "no_noise_probe": a.no_noise_probe => s.no_noise_probe;
        "dry_run": a.dry_run => s.dry_run;
        "agent": a.agents.agent => s.agent.clone().map(|c| vec![c]);
        "agents_file": a.agents.agents_file => path(&s.agents).map(Some);
        "agent_records": a.agents.agent_records => s.agent_records;
        "label": a.label => s.label.clone().map(Some);
        "find_max": a.find_max => s.find_max;
        "max_steps": a.max_steps => s.max_steps;
        "interleave": a.interleave.interleave => s.interleave;
        "slice": a.interleave.slice => typed("slice", s.slice.clone())?;
        "pairs": a.interleave.pairs => s.pairs;
        "interleave_for": a.interleave.interleave_for => typed("interleave-for", s.interleave_for.clone())?;
        "decide": a.interleave.decide => text(&s.decide);
        "tolerance": a.interleave.tolerance => typed("tolerance", text(&s.tolerance))?;
        // The load (as for `run`).
        "arrival": l.arrival => s.arrival.clone();
        "workload": l.workload => s.workload.map(Some);
        "trace_unit": l.trace_unit => typed("trace-unit", s.trace_unit.clone())?;
        "warmup": l.warmup => typed("warmup", s.warmup.clone())?;
        "connections": l.connections => s.connections;
        "threads": l.threads => s.threads;
        "cpus": l.cpus => typed("cpus", text(&s.cpus))?.map(Some);
        "max_outstanding": l.max_outstanding => s.max_outstanding;
        "timeout": l.timeout => typed("timeout", s.timeout.clone())?;
        "request_size": l.request_size => s.request_size;
        "no_stamps": l.no_stamps => s.no_stamps;
        "yield_when_far": l.yield_when_far => s.yield_when_far;
        "overdue": l.overdue => typed("overdue", s.overdue.clone())?;
        "lateness_threshold": l.lateness_threshold => typed("lateness-threshold", s.lateness_threshold.clone())?;
        "precision": l.precision => s.precision.clone().map(Some);
        "max_duration": l.max_duration => typed("max-duration", s.max_duration.clone())?.map(Some);
        "alpha": l.alpha => s.alpha.map(Some);
        "seed": l.seed => s.seed;
        "confidence": l.confidence => s.confidence;
        // The server side: the ideal's inputs and the attribution.
        "service": d.service => s.service.clone().map(Some);
        "workers": d.workers => s.workers.map(Some);
        "queues": d.queues => s.queues;
        "server_pid": d.server_pid => pids;
        "server_cpus": d.server_cpus => typed("server-cpus", text(&s.server_cpus))?.map(Some);
        "no_attribution": d.no_attribution => s.no_attribution;
        // The target's server and workload.
        "spawn": d.server.spawn => s.spawn;
        "server_threads": d.server.server_threads => s.server_threads.map(Some);
        "server_sched": d.server.server_sched => typed("server-sched", s.server_sched.clone())?.map(Some);
        "server_arch": d.server.server_arch => typed("server-arch", s.server_arch.clone())?.map(Some);
        "server_work": d.server.server_work => s.server_work.clone().map(Some);
        "get_ratio": d.server.get_ratio => s.get_ratio;
        "key_size": d.server.key_size => typed("key-size", text(&s.key_size))?;
        "value_size": d.server.value_size => typed("value-size", text(&s.value_size))?;
        "items": d.server.items => s.items;
        "popularity": d.server.popularity => typed("popularity", s.popularity.clone())?;
        "no_preload": d.server.no_preload => s.no_preload;
        "files": d.server.files => s.files.map(Some);
        "file_size": d.server.file_size => typed("file-size", text(&s.file_size))?;
        "churn": d.server.churn => typed("churn", s.churn.clone())?.map(Some);
        "insecure": d.server.insecure => s.insecure;
        "ca": d.server.ca => s.ca.clone().map(|c| Some(std::path::PathBuf::from(c)));
        "sni": d.server.sni => s.sni.clone().map(Some);
        "tls_handshake_per_request": d.server.tls_handshake_per_request => s.tls_handshake_per_request;
        "method": d.server.method => s.method.clone().map(Some);
        "proto": d.server.proto => s.proto.clone().map(|c| Some(std::path::PathBuf::from(c)));
        "message": d.server.message => s.message.clone().map(|c| Some(std::path::PathBuf::from(c)));
        "data": d.server.data => s.data.clone().map(Some);
        "metadata": d.server.metadata => s.metadata.clone();
        "server_memory_mb": d.server.server_memory_mb => s.server_memory_mb.map(Some);
        "open_file_cache": d.server.open_file_cache => s.open_file_cache;
        "server_instances": d.server.server_instances => s.server_instances.map(Some);
        "server_smt": d.server.server_smt => typed("server-smt", s.server_smt.clone())?.map(Some);
        "server_numa": d.server.server_numa => typed("server-numa", s.server_numa.clone())?.map(Some);
        "server_cpuset": d.server.server_cpuset => typed("server-cpuset", text(&s.server_cpuset))?.map(Some);
        "server_memory": d.server.server_memory => typed("server-memory", text(&s.server_memory))?.map(Some);
        "server_cpu_quota": d.server.server_cpu_quota => typed("server-cpu-quota", text(&s.server_cpu_quota))?.map(Some);
        "net_rate": d.server.net_rate => typed("net-rate", s.net_rate.clone())?.map(Some);
        "net_dev": d.server.net_dev => s.net_dev.clone().map(Some);
        "llc_ways": d.server.llc_ways => s.llc_ways.map(Some);
        "stress": d.server.stress => typed("stress", s.stress.clone())?.map(Some);
    }
    // A run stops after a duration or a number of requests: the command line's choice of
    // the two wins (the file holds at most one).
    if !given("duration") && !given("requests") {
        if let Some(v) = typed("duration", s.duration.clone())? {
            a.load.duration = v;
        }
        if let Some(r) = typed("requests", text(&s.requests))? {
            a.load.requests = Some(r);
        }
    }
    // `workload` sets the arrival and the key-value mix: clap refuses both on one command
    // line, lab in one file; one from each is refused alike.
    let in_file = [
        ("arrival", s.arrival.is_some()),
        ("key_size", s.key_size.is_some()),
        ("value_size", s.value_size.is_some()),
        ("get_ratio", s.get_ratio.is_some()),
    ];
    let clash = match (s.workload.is_some(), given("workload")) {
        (true, false) => in_file.iter().find(|(k, _)| given(k)),
        (false, true) => in_file.iter().find(|(_, on)| *on),
        _ => None,
    };
    match clash {
        Some((k, _)) => Err(invalid(format!(
            "--workload sets --{} itself: give one of them, not both (one is in {})",
            k.replace('_', "-"),
            clip(&f.target)
        ))),
        None => Ok(()),
    }
}

impl SweepOptions {
    /// Lays the file's options under these (see the module's doc); `given` says, by clap
    /// id, which options the command line gave.
    pub fn overlay(
        &mut self,
        f: &ExperimentFile,
        given: &dyn Fn(&str) -> bool,
    ) -> Result<(), LabError> {
        overlay(self, f, given)
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use clap::parser::ValueSource;
    use clap::{Args, FromArgMatches};

    use super::*;
    use crate::options::{OnOff, QueuesArg, UndecidedArg, ViewArg, WorkloadArg};
    use experiments::Axis;

    /// `sweep`'s command line as the CLI builds it: a target, then the options.
    fn command() -> clap::Command {
        SweepOptions::augment_args(
            clap::Command::new("sweep")
                .args_override_self(true)
                .arg(clap::Arg::new("target").required(true)),
        )
    }

    /// What `tailscope sweep FILE ARGS…` plans: the file's options under the command line's.
    fn parse(file: &str, after: &[&str]) -> Result<(SweepOptions, String, Vec<Axis>), LabError> {
        let mut argv: Vec<OsString> = vec!["sweep".into(), file.into()];
        argv.extend(after.iter().map(OsString::from));
        let m = command().try_get_matches_from(argv).unwrap();
        let mut o = SweepOptions::from_arg_matches(&m).unwrap();
        let f = ExperimentFile::read(std::path::Path::new(file))?;
        o.overlay(&f, &|id| {
            m.value_source(id) == Some(ValueSource::CommandLine)
        })?;
        Ok((o, f.target, f.axes))
    }

    #[test]
    fn every_option_of_sweep_is_a_key_of_an_experiment_file() {
        let mut n = 0;
        for arg in command().get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if ["param", "help", "version"].contains(&long) {
                continue;
            }
            // A value of no option's type: refused for its type, not as an unknown key.
            let text = format!("target = \"nullrpc://\"\n{long} = {{ x = 1 }}\n");
            let e = ExperimentFile::parse("e.toml", &text)
                .unwrap_err()
                .to_string();
            assert!(!e.contains("unknown key"), "--{long}: {e}");
            n += 1;
        }
        assert!(n > 50, "{n} options");
    }

    #[test]
    fn keys_of_a_closed_set_become_the_options_values() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("e.toml");
        std::fs::write(
            &f,
            "target = \"memcached://\"\nslo = \"p99<=1ms\"\nslo-view = \"server\"\n\
             queues = \"per-worker\"\nslo-undecided = \"pass\"\nagent-records = \"off\"\n\
             workload = \"etc\"\nrequests = \"2k\"\nserver-pid = [7, 8]\n",
        )
        .unwrap();
        let f = f.to_str().unwrap();
        let (a, target, axes) = parse(f, &[]).unwrap();
        assert_eq!(target, "memcached://");
        assert!(axes.is_empty());
        assert_eq!(a.gate.slo_view, ViewArg::Server);
        assert_eq!(a.side.queues, QueuesArg::PerWorker);
        assert_eq!(a.gate.slo_undecided, UndecidedArg::Pass);
        assert_eq!(a.agents.agent_records, OnOff::Off);
        assert_eq!(a.load.workload, Some(WorkloadArg::Etc));
        assert_eq!(a.load.requests.map(|r| r.value.0), Some(2_000));
        assert_eq!(a.side.server_pid, [7, 8]);
        // The file's workload beside the command line's --key-size is refused.
        let e = parse(f, &["--key-size", "8"]).map(|_| ()).unwrap_err();
        assert!(e.is_invalid());
        assert!(e.to_string().contains("--key-size"), "{e}");
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
        let (o, target, axes) = parse(file, &[]).unwrap();
        assert_eq!(target, "nullrpc://");
        assert!(o.side.server.spawn);
        assert_eq!(o.load.duration, "5s");
        assert_eq!(o.load.warmup, "2s");
        assert_eq!(o.loads.as_deref(), Some("1000,2000"));
        assert_eq!(o.side.server.key_size, "30");
        assert_eq!(o.agents.agent_records, OnOff::Off);
        let p = o.plan(&target, axes).unwrap();
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
        let (o, target, axes) = parse(file, &after).unwrap();
        // The command line's value wins even when it is the option's default (64).
        assert_eq!(o.side.server.key_size, "64");
        assert_eq!(o.load.requests.as_ref().map(|r| r.value.0), Some(1_000));
        assert_eq!(o.loads.as_deref(), Some("5"));
        assert_eq!(o.load.warmup, "200ms");
        assert!(
            o.side.server.spawn,
            "what the command line leaves stays the file's"
        );
        let p = o.plan(&target, axes).unwrap();
        let names: Vec<&str> = p.axes.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["server-cpus", "connections"]);
        assert_eq!(p.axes[1].values, ["4"]);
        // The command line's --duration replaces the file's requests.
        let r = dir.path().join("r.toml");
        std::fs::write(&r, "target = \"nullrpc://\"\nrequests = 500\n").unwrap();
        let (o, _, _) = parse(r.to_str().unwrap(), &["--duration", "3s"]).unwrap();
        assert!(o.load.requests.is_none());
        assert_eq!(o.load.duration, "3s");
        // A knob given twice on the command line is refused, not half dropped.
        let (o, target, axes) = parse(
            file,
            &["--param", "connections=4", "--param", "connections=8"],
        )
        .unwrap();
        let e = o.plan(&target, axes).unwrap_err();
        assert!(e.is_invalid());
        assert!(e.to_string().contains("twice"), "{e}");
    }
}
