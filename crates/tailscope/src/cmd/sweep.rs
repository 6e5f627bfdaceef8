//! `tailscope sweep`: parse the options (or a TOML experiment file) into a `lab::SweepPlan`,
//! check it, run it, print the rows.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Mutex;

use lab::{Axis, Db, Load, RunTemplate, SweepPlan, View, ViewChoice};

use super::common::{db_path, shutdown_flag};
use super::progress::Progress;
use super::run::{load_config, nullrpc, plan};
use super::target::lab_err;
use crate::cli::{AgentArgs, Cli, Command, OnOff, SweepArgs};
use crate::exit::{usage, OrUsage};
use crate::output;

/// `10,20,...,100%` → loads. A trailing % (on the list or on each value) makes percentages;
/// `a,b,...,z` continues the step b − a up to z.
pub fn parse_loads(s: &str) -> anyhow::Result<Vec<Load>> {
    let t = s.trim();
    let all_pct = t.ends_with('%');
    let items: Vec<&str> = t
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .collect();
    let num = |x: &str| -> anyhow::Result<(f64, bool)> {
        let pct = x.ends_with('%') || all_pct;
        let v = x.trim_end_matches('%').trim();
        let n = model::parse_count(v)
            .map(|c| c as f64)
            .or_else(|_| v.parse::<f64>())
            .map_err(|_| usage(format!("--loads: cannot parse '{x}'")))?;
        if !(n > 0.0 && n.is_finite()) {
            return Err(usage(format!("--loads: '{x}' must be positive")));
        }
        Ok((n, pct))
    };
    let mut vals: Vec<(f64, bool)> = Vec::new();
    let mut i = 0;
    while i < items.len() {
        if items[i] == "..." {
            let (Some(&(b, p)), Some(&(a, _)), Some(z)) = (
                vals.last(),
                vals.len().checked_sub(2).and_then(|k| vals.get(k)),
                items.get(i + 1),
            ) else {
                return Err(usage(
                    "--loads: '...' needs two values before it and one after",
                ));
            };
            let (z, _) = num(z)?;
            let step = b - a;
            if step <= 0.0 || (z - b) / step > 10_000.0 {
                return Err(usage(format!(
                    "--loads: cannot step from {a} and {b} to {z}"
                )));
            }
            let mut x = b + step;
            while x <= z + step * 1e-9 {
                vals.push((x, p));
                x += step;
            }
            i += 2;
            continue;
        }
        vals.push(num(items[i])?);
        i += 1;
    }
    if vals.is_empty() {
        return Err(usage("--loads: no load given"));
    }
    Ok(vals
        .into_iter()
        .map(|(v, pct)| {
            if pct {
                Load::OfCapacity(v / 100.0)
            } else {
                Load::Rps(v)
            }
        })
        .collect())
}

/// A checked experiment file as `sweep`'s arguments: `target` the positional argument,
/// every option `--key=value` (so that a value starting with `-` stays a value; a switch that
/// is on is a bare `--key`), every `[param]` axis a `--param` (values joined by ',', or by ';'
/// when one holds a comma). Options and knobs named in `skip` are left out.
pub fn file_args(file: &lab::ExperimentFile, skip: &[String]) -> Vec<String> {
    let mut out = vec![file.target.clone()];
    for (k, v) in &file.options {
        if skip.contains(k) {
            continue;
        }
        match v {
            Some(v) => out.push(format!("--{k}={v}")),
            None => out.push(format!("--{k}")),
        }
    }
    for (name, vals) in &file.axes {
        if skip.contains(&format!("param {}", name.replace('_', "-"))) {
            continue;
        }
        let sep = if vals.iter().any(|v| v.contains(',')) {
            ";"
        } else {
            ","
        };
        out.push(format!("--param={name}={}", vals.join(sep)));
    }
    out
}

/// A sweep's arguments with an experiment file expanded: the file's options, then whatever
/// followed the file on the command line (later options override earlier ones). The file is
/// read and checked by `lab::ExperimentFile` first (every key and value, naming the line),
/// so clap only ever sees options it accepts.
pub fn expand(file: &str, after: &[OsString]) -> anyhow::Result<SweepArgs> {
    let spec = lab::ExperimentFile::read(Path::new(file)).map_err(lab_err)?;
    // The command line's --duration or --requests replaces the file's either, and its
    // `--param NAME=…` the file's axis of that knob.
    let after_text: Vec<&str> = after.iter().map(|a| a.to_str().unwrap_or("")).collect();
    let given = |flag: &str| {
        after_text
            .iter()
            .any(|a| *a == flag || a.starts_with(&format!("{flag}=")))
    };
    let mut skip = Vec::new();
    if given("--requests") {
        skip.push("duration".to_string());
    }
    if given("--duration") {
        skip.push("requests".to_string());
    }
    for (i, a) in after_text.iter().enumerate() {
        let axis = match a.strip_prefix("--param=") {
            Some(v) => Some(v),
            None if *a == "--param" => after_text.get(i + 1).copied(),
            None => None,
        };
        if let Some((name, _)) = axis.and_then(|v| v.split_once('=')) {
            skip.push(format!("param {}", name.trim().replace('_', "-")));
        }
    }
    let mut full: Vec<OsString> = vec!["tailscope".into(), "sweep".into()];
    full.extend(file_args(&spec, &skip).into_iter().map(OsString::from));
    full.extend(after.iter().cloned());
    let cli = <Cli as clap::Parser>::try_parse_from(&full).map_err(|e| {
        let text = e.to_string();
        let first = text.lines().next().unwrap_or("bad options").trim();
        let first = first.strip_prefix("error: ").unwrap_or(first);
        usage(format!("{}: {}", lab::clip(file), lab::clip(first)))
    })?;
    match cli.command {
        Command::Sweep(b) if !b.target.ends_with(".toml") => Ok(b),
        _ => Err(usage(format!(
            "{}: its target must be a URL",
            lab::clip(file)
        ))),
    }
}

/// What followed `word` on this process's command line (as given: not necessarily UTF-8).
pub fn args_after(word: &str) -> Vec<OsString> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    argv.iter()
        .position(|x| x == word)
        .map_or(Vec::new(), |i| argv[i + 1..].to_vec())
}

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

/// The validated plan of a sweep's arguments (a URL target).
pub fn sweep_plan(a: &SweepArgs) -> anyhow::Result<SweepPlan> {
    let (server_cpus, mut spec) = super::target::side_spec(&a.target, &a.side, nullrpc(&a.load))?;
    super::run::apply_workload(&a.load, &mut spec.workload);
    super::common::check_label(a.label.as_deref())?;
    let p = plan(&a.load)?;
    let loads = match &a.loads {
        Some(l) => parse_loads(l)?,
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

/// Passes everything on and keeps each stored run's views (the rows of a sweep carry its
/// status, not its views).
pub struct Headlines<'a> {
    pub inner: &'a dyn lab::Observer,
    pub views: Mutex<BTreeMap<i64, lab::Views>>,
}

impl<'a> Headlines<'a> {
    pub fn new(inner: &'a dyn lab::Observer) -> Headlines<'a> {
        Headlines {
            inner,
            views: Mutex::new(BTreeMap::new()),
        }
    }

    /// Each run's headline view, by run id.
    pub fn headlines(&self) -> BTreeMap<i64, View> {
        self.views
            .lock()
            .map(|m| m.iter().map(|(k, v)| (*k, v.headline)).collect())
            .unwrap_or_default()
    }

    /// The sweep's JSON with each row's `views` and `headline_view` added.
    pub fn json_of(&self, result: &lab::SweepResult) -> serde_json::Value {
        let mut v = result.to_json();
        let views = self.views.lock().map(|m| m.clone()).unwrap_or_default();
        if let Some(rows) = v.get_mut("rows").and_then(|r| r.as_array_mut()) {
            for row in rows {
                let Some(x) = row["run_id"].as_i64().and_then(|id| views.get(&id)) else {
                    continue;
                };
                row["headline_view"] = serde_json::json!(x.headline);
                row["views"] = serde_json::json!(x);
            }
        }
        v
    }
}

impl lab::Observer for Headlines<'_> {
    fn note(&self, msg: &str) {
        self.inner.note(msg)
    }
    fn progress(&self, phase: &str, done: u64, total: u64) {
        self.inner.progress(phase, done, total)
    }
    fn phase_done(&self, phase: &str) {
        self.inner.phase_done(phase)
    }
    fn run_done(&self, run: &lab::Run) {
        if let (Some(id), Ok(mut m)) = (run.run_id, self.views.lock()) {
            m.insert(id, run.views.clone());
        }
        self.inner.run_done(run)
    }
}

/// A sweep's exit code: 1 when it failed or was interrupted, or when a point's own status
/// gives 1 (no view asked for valid, or the target failed); saturated points are
/// measurements.
pub fn exit_code(result: &lab::SweepResult) -> i32 {
    if matches!(result.status.as_str(), "failed" | "interrupted") {
        return 1;
    }
    result
        .rows
        .iter()
        .map(|r| r.status.exit_code())
        .max()
        .unwrap_or(0)
}

/// With an SLO, a sweep whose points all measured fine exits 3 when a point of the grid
/// (role `load`, or its repeats' combination; the steps of a max-load search are expected to
/// cross the bound) violates it, or leaves it undecided under `--slo-undecided fail`.
pub fn gate_code(result: &lab::SweepResult, gate: &super::gate::Gate) -> i32 {
    if exit_code(result) != 0 {
        return exit_code(result);
    }
    // Repeated points are judged on their combination, single runs on themselves.
    let repeated = result.rows.iter().any(|r| r.repeat > 0);
    let verdicts: Vec<lab::Verdict> = if repeated {
        result.points.iter().filter_map(|p| p.slo).collect()
    } else {
        result
            .rows
            .iter()
            .filter(|r| r.role == lab::Role::Load)
            .filter_map(|r| r.slo)
            .collect()
    };
    verdicts
        .into_iter()
        .map(|v| gate.code(v))
        .max()
        .unwrap_or(0)
}

/// The JUnit / Markdown suites of a sweep: one per point of the grid, the judgement its exit
/// code reads (of its repeats combined when repeated, else of its run).
pub fn suites(result: &lab::SweepResult) -> Vec<(String, lab::SloReport)> {
    let name = |rps: f64, pct: Option<f64>, params: &BTreeMap<String, String>| {
        let mut name = format!("point {rps:.0} req/s");
        if let Some(l) = pct {
            name.push_str(&format!(" ({l:.0} %)"));
        }
        for (k, v) in params {
            name.push_str(&format!(" {k}={v}"));
        }
        name
    };
    if result.rows.iter().any(|r| r.repeat > 0) {
        return result
            .points
            .iter()
            .filter_map(|p| {
                let rep = p.slo_report.clone()?;
                let mut n = name(p.offered_rps, p.load_pct, &p.params);
                n.push_str(&format!(", {} repeats combined", p.result.repeats));
                Some((n, rep))
            })
            .collect();
    }
    result
        .rows
        .iter()
        .filter(|r| r.role == lab::Role::Load)
        .filter_map(|r| {
            Some((
                name(r.offered_rps, r.load_pct, &r.params),
                r.slo_report.clone()?,
            ))
        })
        .collect()
}

pub fn run(a: &SweepArgs) -> anyhow::Result<i32> {
    if a.target.ends_with(".toml") {
        return run(&expand(&a.target, &args_after(&a.target))?);
    }
    let mut splan = sweep_plan(a)?;
    let db = db_path(&a.db)?;
    splan.check(&db).map_err(lab_err)?;
    let gate = super::gate::Gate::new(a.slo.as_deref(), a.slo_view.into(), &a.gate)?;
    if a.dry_run {
        print_plan(&splan, a.json)?;
        return Ok(0);
    }
    let progress = Progress::new(a.json);
    let obs = Headlines::new(&progress);
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
    let suites = suites(&result);
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
        output::print_with(|w| report::sweep_view::sweep_views(w, &result, &obs.headlines()))?;
        for w in written {
            crate::output::outln!("wrote {w}")?;
        }
    }
    Ok(gate_code(&result, &gate))
}

/// `--dry-run`: what the sweep would do, once everything is checked.
fn print_plan(p: &SweepPlan, json: bool) -> anyhow::Result<()> {
    let loads: Vec<String> = p
        .loads
        .iter()
        .map(|l| match *l {
            Load::Rps(r) => format!("{r} req/s"),
            Load::OfCapacity(f) => format!("{}%", f * 100.0),
        })
        .collect();
    let runs = p.grid_points().map_err(lab_err)?;
    let configurations = p.configurations().map_err(lab_err)?;
    let calibrates = p.find_max || p.loads.iter().any(|l| matches!(l, Load::OfCapacity(_)));
    if json {
        return output::print_json(&serde_json::json!({
            "dry_run": true,
            "target": p.template.target.url,
            "axes": p.axes.iter().map(|a| serde_json::json!({"name": a.name, "values": a.values})).collect::<Vec<_>>(),
            "loads": loads,
            "repeat": p.repeat,
            "find_max": p.find_max,
            "configurations": configurations,
            "grid_runs": runs,
            "calibrates": calibrates,
        }));
    }
    output::print_with(|w| {
        writeln!(
            w,
            "dry run: {} (nothing started, nothing written)",
            p.template.target.url
        )?;
        for a in &p.axes {
            writeln!(w, "  axis {}: {}", a.name, a.values.join(", "))?;
        }
        writeln!(
            w,
            "  loads: {}",
            if loads.is_empty() {
                "-".into()
            } else {
                loads.join(", ")
            }
        )?;
        writeln!(
            w,
            "  {configurations} configuration(s), {runs} grid run(s) (× {} repeat(s)){}{}",
            p.repeat,
            if p.find_max {
                ", then the highest load meeting the SLO per point"
            } else {
                ""
            },
            if calibrates {
                "; each server configuration is calibrated first"
            } else {
                ""
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_step_and_take_percent_from_the_list() {
        let l = parse_loads("10,20,...,50%").unwrap();
        assert_eq!(l, [0.1, 0.2, 0.3, 0.4, 0.5].map(Load::OfCapacity).to_vec());
        // A trailing % on the list makes every value a percentage; on one value, that one.
        assert_eq!(
            parse_loads("20%, 1000").unwrap(),
            vec![Load::OfCapacity(0.2), Load::Rps(1000.0)]
        );
        assert_eq!(
            parse_loads("1000, 20%").unwrap(),
            vec![Load::OfCapacity(10.0), Load::OfCapacity(0.2)]
        );
        assert_eq!(parse_loads("5k").unwrap(), vec![Load::Rps(5000.0)]);
        for bad in ["", "x", "10,...", "-5", "10,5,...,100"] {
            assert!(parse_loads(bad).is_err(), "{bad}");
        }
    }

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

    #[test]
    fn the_command_line_overrides_a_file_option_by_option_and_axis_by_axis() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("e.toml");
        std::fs::write(
            &file,
            "target = \"nullrpc://\"\nspawn = true\nduration = \"5s\"\nwarmup = \"-1s\"\n\
             loads = [1000, 2000]\nkey-size = 30\n[param]\nconnections = [1, 2]\n\
             server-cpus = [\"0\", \"0,1\"]\n",
        )
        .unwrap();
        let file = file.to_str().unwrap();
        let a = expand(file, &[]).unwrap();
        assert_eq!(a.target, "nullrpc://");
        assert!(a.side.server.spawn);
        assert_eq!(a.load.duration, "5s");
        assert_eq!(
            a.load.warmup, "-1s",
            "a value starting with '-' stays a value"
        );
        assert_eq!(a.loads.as_deref(), Some("1000,2000"));
        assert_eq!(a.side.server.key_size, "30");
        assert_eq!(a.params, ["connections=1,2", "server-cpus=0;0,1"]);
        let after: Vec<OsString> = [
            "--param",
            "connections=4",
            "--requests",
            "1k",
            "--loads=5",
            "--warmup",
            "200ms",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let a = expand(file, &after).unwrap();
        assert_eq!(a.params, ["server-cpus=0;0,1", "connections=4"]);
        assert_eq!(a.load.requests.as_deref(), Some("1k"));
        assert_eq!(a.loads.as_deref(), Some("5"));
        assert!(sweep_plan(&a).is_ok());
    }
}
