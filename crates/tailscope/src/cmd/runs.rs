//! `tailscope runs list|show|export`: the results store, read back.

use std::io::Write;

use anyhow::Context;
use serde_json::json;

use super::common::open_store;
use crate::cli::{RunsCmd, RunsSub};
use crate::exit::usage;
use crate::output::{self, outln};

pub fn run(c: &RunsCmd) -> anyhow::Result<i32> {
    match &c.sub {
        RunsSub::List { db, json } => {
            let st = open_store(db)?;
            let runs = st.list_runs()?;
            if *json {
                let v: Vec<_> = runs
                    .iter()
                    .map(|r| {
                        json!({
                            "id": r.id, "kind": r.kind, "status": r.status, "target": r.target,
                            "started_at": r.started_at, "finished_at": r.finished_at, "requests": r.requests,
                            "p99_us": r.summary.as_ref().and_then(|s| s.pointer("/measured/p99")).cloned(),
                        })
                    })
                    .collect();
                output::print_json(&json!({ "runs": v }))?;
            } else {
                outln!(
                    "{:>5}  {:<10} {:<12} {:<22} {:>10}  target",
                    "id",
                    "kind",
                    "status",
                    "started",
                    "p99"
                )?;
                for r in runs {
                    let p99 = r
                        .summary
                        .as_ref()
                        .and_then(|s| s.pointer("/measured/p99"))
                        .and_then(|v| v.as_f64())
                        .map(|v| format!("{v:.1} µs"))
                        .unwrap_or_default();
                    outln!(
                        "{:>5}  {:<10} {:<12} {:<22} {:>10}  {}",
                        r.id,
                        r.kind,
                        r.status,
                        r.started_at,
                        p99,
                        r.target
                    )?;
                }
            }
        }
        RunsSub::Show { id, db, json } => {
            let st = open_store(db)?;
            let r = st
                .get_run(*id)?
                .ok_or_else(|| usage(format!("no run with id {id}")))?;
            if *json {
                output::print_json(&serde_json::to_value(&r)?)?;
            } else {
                outln!(
                    "run {} · {} · {} · {} · started {}",
                    r.id,
                    r.kind,
                    r.status,
                    r.target,
                    r.started_at
                )?;
                outln!("config: {}", serde_json::to_string(&r.config)?)?;
                outln!("host: {}", serde_json::to_string(&r.host)?)?;
                if let Some(s) = &r.summary {
                    outln!("summary: {}", serde_json::to_string_pretty(s)?)?;
                }
            }
        }
        RunsSub::Export {
            id,
            format,
            output: out,
            db,
        } => {
            if format != "csv" && format != "json" {
                return Err(usage(format!(
                    "--format must be csv or json, got '{format}'"
                )));
            }
            let st = open_store(db)?;
            let r = st
                .get_run(*id)?
                .ok_or_else(|| usage(format!("no run with id {id}")))?;
            let cols = st.columns(*id)?;
            if format == "csv" && cols.is_none() {
                return Err(usage(format!("run {id} has no per-request records")));
            }
            let mut w: Box<dyn Write> = match out {
                Some(p) => Box::new(std::io::BufWriter::new(
                    std::fs::File::create(p)
                        .with_context(|| format!("cannot create {}", p.display()))?,
                )),
                None => Box::new(std::io::BufWriter::new(output::Stdout)),
            };
            match format.as_str() {
                "csv" => {
                    if let Some(cols) = &cols {
                        store::export_csv(cols, &mut w)?;
                    }
                }
                _ => store::export_json(&r, cols.as_ref(), &mut w)?,
            }
            w.flush()?;
        }
    }
    Ok(0)
}
