//! `sweep FILE.toml [OPTIONS]`: the experiment file's typed options (read and checked by
//! `lab::ExperimentFile`, serde) laid under the command line's, option by option; its axes
//! merged under the command line's, axis by axis (`lab::merge_axes`). No argv is rebuilt:
//! which options the command line gave is clap's own record of where each value came from.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches};
use lab::experiment::{List, Text};
use lab::ExperimentFile;

use super::common::lab_err;
use crate::cli::{Cli, SweepArgs};
use crate::exit::usage;

/// A sweep's options from an experiment file and a command line (`argv`, the whole of it:
/// `tailscope sweep FILE.toml …`): what the command line gives wins, the file gives the
/// rest, clap's defaults the others. Returns the options and the file's axes.
pub fn from_command_line(
    argv: impl IntoIterator<Item = OsString>,
) -> anyhow::Result<(SweepArgs, Vec<lab::Axis>)> {
    let m = Cli::command()
        .try_get_matches_from(argv)
        .map_err(|e| usage(first_line(&e.to_string())))?;
    let Some(("sweep", m)) = m.subcommand() else {
        return Err(usage("not a sweep command line"));
    };
    let mut a = SweepArgs::from_arg_matches(m).map_err(|e| usage(first_line(&e.to_string())))?;
    let file = ExperimentFile::read(Path::new(&a.target)).map_err(lab_err)?;
    let given = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    overlay(&mut a, &file, &given)?;
    Ok((a, file.axes))
}

/// A sweep's options from an experiment file alone (the command line gave none of them).
pub fn from_file(path: &str) -> anyhow::Result<(SweepArgs, Vec<lab::Axis>)> {
    let file = ExperimentFile::read(Path::new(path)).map_err(lab_err)?;
    let m = SweepArgs::augment_args(clap::Command::new("sweep"))
        .try_get_matches_from(["sweep", path])
        .map_err(|e| usage(first_line(&e.to_string())))?;
    let mut a = SweepArgs::from_arg_matches(&m).map_err(|e| usage(first_line(&e.to_string())))?;
    overlay(&mut a, &file, &|_| false)?;
    Ok((a, file.axes))
}

fn first_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or("bad options").trim();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

/// The file's value of a key whose type has a clap enum of the same names (`slo-view`,
/// `queues`, …) as that enum.
fn same<K: serde::Serialize, V: clap::ValueEnum>(k: &Option<K>) -> Option<V> {
    let v = serde_json::to_value(k.as_ref()?).ok()?;
    V::from_str(v.as_str()?, false).ok()
}

fn text(t: &Option<Text>) -> Option<String> {
    t.as_ref().map(|t| t.0.clone())
}

fn list(l: &Option<List>) -> Option<String> {
    l.as_ref().map(|l| l.0.join(","))
}

/// A file's text value parsed as its option's type, the error naming the key (the command
/// line's flags parse the same text with the same `FromStr`).
fn typed<T: std::str::FromStr>(key: &str, v: Option<String>) -> anyhow::Result<Option<T>>
where
    T::Err: std::fmt::Display,
{
    v.map(|t| {
        t.parse::<T>()
            .map_err(|e| usage(format!("{key}: cannot use '{}': {e}", lab::clip(&t))))
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
    a: &mut SweepArgs,
    f: &ExperimentFile,
    given: &dyn Fn(&str) -> bool,
) -> anyhow::Result<()> {
    let s = &f.spec;
    a.target = f.target.clone();
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
        "slo": a.slo => s.slo.clone().map(Some);
        "slo_view": a.slo_view => same(&s.slo_view);
        "percentiles": a.gate.percentiles => list(&s.percentiles).map(Some);
        "slo_undecided": a.gate.slo_undecided => same(&s.slo_undecided);
        "junit": a.gate.junit => path(&s.junit).map(Some);
        "markdown": a.gate.markdown => path(&s.markdown).map(Some);
        "no_noise_probe": a.no_noise_probe => s.no_noise_probe;
        "dry_run": a.dry_run => s.dry_run;
        "agent": a.agents.agent => s.agent.clone().map(|c| vec![c]);
        "agents_file": a.agents.agents_file => path(&s.agents).map(Some);
        "agent_records": a.agents.agent_records => same(&s.agent_records);
        "label": a.label => s.label.clone().map(Some);
        "find_max": a.find_max => s.find_max;
        "max_steps": a.max_steps => s.max_steps;
        // The load (as for `run`).
        "arrival": l.arrival => s.arrival.clone();
        "workload": l.workload => same(&s.workload).map(Some);
        "trace_unit": l.trace_unit => s.trace_unit.clone();
        "warmup": l.warmup => s.warmup.clone();
        "connections": l.connections => s.connections;
        "threads": l.threads => s.threads;
        "cpus": l.cpus => typed("cpus", text(&s.cpus))?.map(Some);
        "max_outstanding": l.max_outstanding => s.max_outstanding;
        "timeout": l.timeout => s.timeout.clone();
        "request_size": l.request_size => s.request_size;
        "no_stamps": l.no_stamps => s.no_stamps;
        "yield_when_far": l.yield_when_far => s.yield_when_far;
        "lateness_threshold": l.lateness_threshold => s.lateness_threshold.clone();
        "precision": l.precision => s.precision.clone().map(Some);
        "max_duration": l.max_duration => s.max_duration.clone().map(Some);
        "alpha": l.alpha => s.alpha.map(Some);
        "seed": l.seed => s.seed;
        "confidence": l.confidence => s.confidence;
        // The server side: the ideal's inputs and the attribution.
        "service": d.service => s.service.clone().map(Some);
        "workers": d.workers => s.workers.map(Some);
        "queues": d.queues => same(&s.queues);
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
        "churn": d.server.churn => s.churn.clone().map(Some);
        "server_memory_mb": d.server.server_memory_mb => s.server_memory_mb.map(Some);
        "open_file_cache": d.server.open_file_cache => s.open_file_cache;
        "server_instances": d.server.server_instances => s.server_instances.map(Some);
        "server_smt": d.server.server_smt => typed("server-smt", s.server_smt.clone())?.map(Some);
        "server_numa": d.server.server_numa => typed("server-numa", s.server_numa.clone())?.map(Some);
        "server_cpuset": d.server.server_cpuset => typed("server-cpuset", text(&s.server_cpuset))?.map(Some);
        "server_memory": d.server.server_memory => text(&s.server_memory).map(Some);
        "server_cpu_quota": d.server.server_cpu_quota => text(&s.server_cpu_quota).map(Some);
        "net_rate": d.server.net_rate => s.net_rate.clone().map(Some);
        "net_dev": d.server.net_dev => s.net_dev.clone().map(Some);
        "llc_ways": d.server.llc_ways => s.llc_ways.map(Some);
        "stress": d.server.stress => typed("stress", s.stress.clone())?.map(Some);
    }
    // A run stops after a duration or a number of requests: the command line's choice of
    // the two wins (the file holds at most one).
    if !given("duration") && !given("requests") {
        if let Some(v) = &s.duration {
            a.load.duration = v.clone();
        }
        if let Some(r) = &s.requests {
            a.load.requests = Some(r.0.clone());
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
        Some((k, _)) => Err(usage(format!(
            "--workload sets --{} itself: give one of them, not both (one is in {})",
            k.replace('_', "-"),
            lab::clip(&a.target)
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{OnOff, QueuesArg, UndecidedArg, ViewArg, WorkloadArg};

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
        let (a, axes) = from_file(f.to_str().unwrap()).unwrap();
        assert!(axes.is_empty());
        assert_eq!(a.slo_view, ViewArg::Server);
        assert_eq!(a.side.queues, QueuesArg::PerWorker);
        assert_eq!(a.gate.slo_undecided, UndecidedArg::Pass);
        assert_eq!(a.agents.agent_records, OnOff::Off);
        assert_eq!(a.load.workload, Some(WorkloadArg::Etc));
        assert_eq!(a.load.requests.as_deref(), Some("2k"));
        assert_eq!(a.side.server_pid, [7, 8]);
        // The file's workload beside the command line's --key-size is refused.
        let argv = ["tailscope", "sweep", f.to_str().unwrap(), "--key-size", "8"];
        let e = from_command_line(argv.map(OsString::from)).unwrap_err();
        assert_eq!(crate::exit::code_of(&e), 2);
        assert!(e.to_string().contains("--key-size"), "{e}");
    }
}
