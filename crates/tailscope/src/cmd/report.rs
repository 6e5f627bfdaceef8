//! `tailscope report`: stored runs or an experiment, read from the store (read-only, never
//! created), made into one self-contained HTML page by `report`, and written with its figures
//! as PNG when asked. Every output is checked, and everything read and built, before the first
//! file is written; a failed write leaves no partial output behind.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::json;

use super::common::check_not_the_store;
use super::common::open_existing_store;
use crate::cli::ReportArgs;
use crate::exit::usage;
use crate::output::{self, outln};

/// `--png DIR`: an existing directory we may create files in, or a new one whose parent is.
fn check_png_dir(d: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(d) {
        Ok(m) if m.is_dir() => output::check_writable("--png", &d.join("<figure>.png")),
        Ok(_) => Err(usage(format!("--png {}: is not a directory", d.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => output::check_writable("--png", d),
        Err(e) => Err(usage(format!("--png {}: {e}", d.display()))),
    }
}

pub fn run(a: &ReportArgs) -> anyhow::Result<i32> {
    output::check_writable("--output", &a.output)?;
    if let Some(d) = &a.png {
        check_png_dir(d)?;
    }
    let (db_path, st) = open_existing_store(&a.db)?;
    check_not_the_store("--output", &a.output, &db_path)?;
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
    let pngs: Vec<(PathBuf, &report::figure::Figure)> = match &a.png {
        Some(d) => page
            .figures
            .iter()
            .map(|f| (d.join(format!("{}.png", f.name)), f))
            .collect(),
        None => Vec::new(),
    };
    for (p, _) in &pngs {
        if p.exists() {
            output::check_writable("--png", p)?;
        }
        check_not_the_store("--png", p, &db_path)?;
        if output::same_file(p, &a.output) {
            return Err(usage(format!(
                "--output {} is also a figure of --png",
                a.output.display()
            )));
        }
    }
    let mut created: Vec<PathBuf> = Vec::new();
    let mut made_dir = None;
    let written = write_all(a, &page.html, &pngs, &mut created, &mut made_dir);
    let written = match written {
        Ok(w) => w,
        Err(e) => {
            for p in created.iter().rev() {
                let _ = std::fs::remove_file(p);
            }
            if let Some(d) = made_dir {
                let _ = std::fs::remove_dir(d);
            }
            return Err(e);
        }
    };
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

fn write_all(
    a: &ReportArgs,
    html: &str,
    pngs: &[(PathBuf, &report::figure::Figure)],
    created: &mut Vec<PathBuf>,
    made_dir: &mut Option<PathBuf>,
) -> anyhow::Result<Vec<String>> {
    let mut written = Vec::new();
    if !a.output.exists() {
        created.push(a.output.clone());
    }
    std::fs::write(&a.output, html)
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    written.push(a.output.display().to_string());
    if let Some(d) = &a.png {
        if !d.exists() {
            std::fs::create_dir(d).with_context(|| format!("cannot create {}", d.display()))?;
            *made_dir = Some(d.clone());
        }
    }
    for (p, f) in pngs {
        if !p.exists() {
            created.push(p.clone());
        }
        f.png(p)?;
        written.push(p.display().to_string());
    }
    Ok(written)
}
