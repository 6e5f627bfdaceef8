//! `tailscope runs list|show|compare|export`: the results store, read back. These commands only
//! read: they never create a store, and `export` writes nothing until the run has been read.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use serde_json::json;

use super::common::{check_not_the_store, open_existing_store};
use report::pushgateway::PushUrl;

use crate::cli::{DbArgs, ExportFormat, RunsCmd, RunsSub};
use crate::exit::usage;
use crate::output::{self, outln};

pub fn run(c: &RunsCmd) -> anyhow::Result<i32> {
    match &c.sub {
        RunsSub::List {
            db,
            json,
            experiment,
        } => list(db, *json, *experiment),
        RunsSub::Show { id, db, json } => show(*id, db, *json),
        RunsSub::Compare {
            ids,
            plot,
            db,
            json,
        } => super::compare::run(ids, plot.as_ref(), db, *json),
        RunsSub::Export {
            id,
            format,
            experiment,
            output: out,
            push,
            db,
        } => export(*id, *experiment, *format, out.as_deref(), push.as_ref(), db),
    }
}

/// The store, or the usage error of a command that needs one.
fn existing(db: &DbArgs) -> anyhow::Result<store::Store> {
    match open_existing_store(db)? {
        (_, Some(st)) => Ok(st),
        (p, None) => Err(usage(format!("no results store at {}", p.display()))),
    }
}

fn list(db: &DbArgs, json: bool, experiment: Option<i64>) -> anyhow::Result<i32> {
    // No store yet is no runs yet.
    let runs = match (open_existing_store(db)?, experiment) {
        ((_, Some(st)), None) => st.list_runs()?,
        ((_, Some(st)), Some(e)) => {
            if st.get_experiment(e)?.is_none() {
                return Err(usage(format!("no experiment with id {e}")));
            }
            st.experiment_runs(e)?
        }
        ((_, None), None) => Vec::new(),
        ((p, None), Some(_)) => return Err(usage(format!("no results store at {}", p.display()))),
    };
    if json {
        let v: Vec<_> = runs
            .iter()
            .map(|r| {
                json!({
                    "id": r.id, "kind": r.kind, "status": r.status, "target": r.target,
                    "started_at": r.started_at, "finished_at": r.finished_at, "requests": r.requests,
                    "p99_us": r.summary.as_ref().and_then(|s| s.pointer("/measured/p99")).cloned(),
                    "label": r.config.get("label").and_then(|l| l.as_str()),
                })
            })
            .collect();
        output::print_json(&json!({ "runs": v }))?;
        return Ok(0);
    }
    outln!(
        "{:>5}  {:<10} {:<12} {:<22} {:>10}  {:<16} target",
        "id",
        "kind",
        "status",
        "started",
        "p99",
        "label"
    )?;
    for r in runs {
        let p99 = r
            .summary
            .as_ref()
            .and_then(|s| s.pointer("/measured/p99"))
            .and_then(|v| v.as_f64())
            .map(|v| format!("{v:.1} µs"))
            .unwrap_or_default();
        let label = r
            .config
            .get("label")
            .and_then(|l| l.as_str())
            .unwrap_or("-");
        outln!(
            "{:>5}  {:<10} {:<12} {:<22} {:>10}  {:<16} {}",
            r.id,
            r.kind,
            r.status,
            r.started_at,
            p99,
            label,
            r.target
        )?;
    }
    Ok(0)
}

fn show(id: i64, db: &DbArgs, json: bool) -> anyhow::Result<i32> {
    let st = existing(db)?;
    let r = st
        .get_run(id)?
        .ok_or_else(|| usage(format!("no run with id {id}")))?;
    let experiment = st.experiment_of(id)?;
    if json {
        let mut v = serde_json::to_value(&r)?;
        v["experiment_id"] = serde_json::json!(experiment);
        output::print_json(&v)?;
        return Ok(0);
    }
    outln!(
        "run {} · {} · {} · {} · started {}{}",
        r.id,
        r.kind,
        r.status,
        r.target,
        r.started_at,
        experiment
            .map(|e| format!(" · experiment {e}"))
            .unwrap_or_default()
    )?;
    outln!("config: {}", serde_json::to_string(&r.config)?)?;
    outln!("host: {}", serde_json::to_string(&r.host)?)?;
    // The run by field when it was stored with its typed form; else (older stores, runs that
    // failed before their analysis) its JSON summary as stored.
    match lab::load_run(&st, id) {
        Ok(Some(run)) => return output::print_with(|w| report::terminal::run(w, &run)).map(|()| 0),
        Ok(None) => {}
        Err(e) => eprintln!("tailscope: run {id}: {e}; showing its stored summary"),
    }
    if let Some(s) = &r.summary {
        outln!("summary: {}", serde_json::to_string_pretty(s)?)?;
    }
    Ok(0)
}

/// What `runs export` reads: one run, or an experiment's runs.
enum Exported {
    Run(Box<store::RunRow>),
    Experiment(store::ExperimentRow, Vec<store::RunRow>),
}

fn export(
    id: Option<i64>,
    experiment: Option<i64>,
    format: ExportFormat,
    out: Option<&Path>,
    push: Option<&PushUrl>,
    db: &DbArgs,
) -> anyhow::Result<i32> {
    let name = format!("{format:?}").to_lowercase();
    if experiment.is_some() && format != ExportFormat::Openmetrics {
        return Err(usage(format!(
            "--experiment exports with --format openmetrics only, got '{name}'"
        )));
    }
    if push.is_some() && format != ExportFormat::Openmetrics {
        return Err(usage(format!(
            "--push sends --format openmetrics only, got '{name}'"
        )));
    }
    let (db_path, st) = open_existing_store(db)?;
    if let Some(p) = out {
        output::check_writable("--output", p)?;
        check_not_the_store("--output", p, &db_path)?;
    }
    let Some(st) = st else {
        return Err(usage(format!("no results store at {}", db_path.display())));
    };
    let what = match (id, experiment) {
        (_, Some(e)) => {
            let x = st
                .get_experiment(e)?
                .ok_or_else(|| usage(format!("no experiment with id {e}")))?;
            let runs = st.experiment_runs(e)?;
            Exported::Experiment(x, runs)
        }
        (Some(id), None) => Exported::Run(Box::new(
            st.get_run(id)?
                .ok_or_else(|| usage(format!("no run with id {id}")))?,
        )),
        (None, None) => return Err(usage("runs export needs a run id or --experiment")),
    };
    if let Some(gateway) = push {
        let mut body = Vec::new();
        match &what {
            Exported::Run(r) => report::openmetrics::run(r, &mut body)?,
            Exported::Experiment(x, runs) => report::openmetrics::experiment(x, runs, &mut body)?,
        }
        gateway.push(&body).map_err(anyhow::Error::msg)?;
        return Ok(0);
    }
    let r = match what {
        Exported::Run(r) => *r,
        Exported::Experiment(x, runs) => {
            return write_export(out, |w| {
                report::openmetrics::experiment(&x, &runs, w)?;
                Ok(())
            });
        }
    };
    let id = r.id;
    if format == ExportFormat::Openmetrics {
        return write_export(out, |w| {
            report::openmetrics::run(&r, w)?;
            Ok(())
        });
    }
    if format != ExportFormat::Json && r.requests.is_none() {
        return Err(usage(format!("run {id} has no per-request records")));
    }
    let records = lab::records::StoredRecords::new(&st, id);
    write_export(out, |mut w| {
        if format == ExportFormat::Hdr {
            report::hdr::interval_log(&st, &r, &mut w)?;
        } else if format == ExportFormat::Hgrm {
            report::hdr::hgrm(&st, &r, &mut w)?;
        } else if format == ExportFormat::Csv {
            // Streamed: one batch of records in memory at a time, however long the run.
            let mut first = true;
            records.batches(8192, &mut |cols| {
                if first {
                    store::export_csv_header(cols.names(), &mut w)?;
                    first = false;
                }
                store::export_csv_rows(cols, &mut w)
            })?;
            if first {
                store::export_csv_header(lab::records::COLUMNS, &mut w)?;
            }
        } else {
            store::export_json(&r, records.all_columns()?.as_ref(), &mut w)?;
        }
        Ok(())
    })
}

/// Writes an export to stdout or to `out`, buffered; a file that could not be written whole
/// and did not exist before is removed.
fn write_export(
    out: Option<&Path>,
    body: impl Fn(&mut dyn Write) -> anyhow::Result<()>,
) -> anyhow::Result<i32> {
    let write = |w: &mut dyn Write| -> anyhow::Result<()> {
        let mut w = std::io::BufWriter::new(w);
        body(&mut w)?;
        w.flush()?;
        Ok(())
    };
    match out {
        None => write(&mut output::Stdout)?,
        Some(p) => {
            let existed = p.exists();
            let mut f = std::fs::File::create(p)
                .with_context(|| format!("cannot create {}", p.display()))?;
            if let Err(e) = write(&mut f) {
                // No partial export left behind (a file that was there is already truncated).
                if !existed {
                    let _ = std::fs::remove_file(p);
                }
                return Err(e.context(format!("cannot write {}", p.display())));
            }
        }
    }
    Ok(0)
}
