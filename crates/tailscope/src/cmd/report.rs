//! `tailscope report`: stored runs or an experiment, read from the store (read-only, never
//! created), made into one self-contained HTML page by `report`, and written with its figures
//! as PNG when asked. Every output is checked, and everything read and built, before the first
//! file is written; a failed write leaves no partial output behind.

use serde_json::json;

use super::common::{db_path, open_existing_store};
use crate::cli::ReportArgs;
use crate::exit::usage;
use crate::output::{self, outln};

pub fn run(a: &ReportArgs) -> anyhow::Result<i32> {
    let files = report::page_files::PageFiles {
        output: &a.output,
        png: a.png.as_deref(),
        db: &db_path(&a.db)?,
    };
    files.check()?;
    let (db_path, st) = open_existing_store(&a.db)?;
    let Some(st) = st else {
        return Err(usage(format!("no results store at {}", db_path.display())));
    };
    let ctx = report::html::Context {
        db: db_path.display().to_string(),
        generated_at: store::now_rfc3339(),
    };
    let page = match a.experiment {
        Some(n) => {
            let e = report::experiment::StoredExperiment::load(&st, n)?
                .ok_or_else(|| usage(format!("no experiment with id {n}")))?;
            report::html::experiment_page(&e, &ctx)?
        }
        None => {
            let mut runs = Vec::new();
            for &id in &a.runs {
                runs.push(
                    report::stored::StoredRun::load(&st, id)?
                        .ok_or_else(|| usage(format!("no run with id {id}")))?,
                );
            }
            report::html::runs_page(&runs, &ctx)?
        }
    };
    let pngs = files.check_figures(&page)?;
    let written = files.write(&page.html, &pngs)?;
    if a.json {
        output::print_json(&json!({ "written": written }))?;
    } else {
        outln!(
            "wrote {} ({:.0} KB, {} figure(s))",
            a.output.display(),
            page.html.len() as f64 / 1024.0,
            page.figures.len()
        )?;
        for p in &written[1..] {
            outln!("wrote {p}")?;
        }
    }
    Ok(0)
}
