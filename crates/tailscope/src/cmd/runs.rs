//! `tailscope runs list|show|compare|export`: the results store, read back. These commands only
//! read: they never create a store, and `export` writes nothing until the run has been read.

use std::path::Path;

use super::common::open_existing_store;
use report::files::check_not_the_store;
use report::pushgateway::PushUrl;

use crate::cli::{DbArgs, RunsCmd, RunsSub};
use crate::exit::usage;
use crate::output::{self, outln};
use report::export::Format;

pub fn run(c: &RunsCmd) -> anyhow::Result<i32> {
    match &c.sub {
        RunsSub::List {
            db,
            json,
            experiment,
        } => list(db, *json, *experiment),
        RunsSub::Show {
            id,
            db,
            json,
            detail,
        } => show(*id, db, *json, *detail),
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
        output::print_json(&report::store_view::ListJson::of(&runs))?;
    } else {
        output::print_with(|w| report::store_view::list(w, &runs))?;
    }
    Ok(0)
}

fn show(id: i64, db: &DbArgs, json: bool, detail: bool) -> anyhow::Result<i32> {
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
    output::print_with(|w| {
        if detail {
            report::store_view::show_header(w, &r, experiment)
        } else {
            report::store_view::show_title(w, &r, experiment)
        }
    })?;
    // The run by field when it was stored with its typed form; else (older stores, runs that
    // failed before their analysis) its JSON summary as stored.
    match lab::load_run(&st, id) {
        Ok(Some(run)) => {
            return output::print_with(|w| {
                if detail {
                    report::terminal::run(w, &run)
                } else {
                    report::brief::run(w, &run)
                }
            })
            .map(|()| 0)
        }
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
    format: Format,
    out: Option<&Path>,
    push: Option<&PushUrl>,
    db: &DbArgs,
) -> anyhow::Result<i32> {
    let name = format.name();
    if experiment.is_some() && format != Format::Openmetrics {
        return Err(usage(format!(
            "--experiment exports with --format openmetrics only, got '{name}'"
        )));
    }
    if push.is_some() && format != Format::Openmetrics {
        return Err(usage(format!(
            "--push sends --format openmetrics only, got '{name}'"
        )));
    }
    let (db_path, st) = open_existing_store(db)?;
    if let Some(p) = out {
        report::files::check_writable("--output", p)?;
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
    if let Exported::Run(r) = &what {
        if format.needs_records() && r.requests.is_none() {
            return Err(usage(format!("run {} has no per-request records", r.id)));
        }
    }
    report::export::write_to(out, &mut output::Stdout, |w| match &what {
        Exported::Run(r) => report::export::run(format, &st, r, w),
        Exported::Experiment(x, runs) => Ok(report::openmetrics::experiment(x, runs, w)?),
    })?;
    Ok(0)
}
