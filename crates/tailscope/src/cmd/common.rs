//! Small pieces shared by the measuring commands: signal flag, CPU lists, scheduling policy,
//! durations, the results store, host facts.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use host::placement::{self, SchedSpec};

use crate::cli::DbArgs;
use crate::exit::{usage, OrUsage};
use crate::output;

/// A flag set by SIGINT or SIGTERM (the first one; a second SIGINT kills as usual).
pub fn shutdown_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&flag))
            .context("cannot install signal handler")?;
        signal_hook::flag::register(sig, Arc::clone(&flag))
            .context("cannot install signal handler")?;
    }
    Ok(flag)
}

/// `--cpus` → CPU ids, checked against the CPUs that are online.
pub fn parse_cpus(s: Option<&str>) -> anyhow::Result<Vec<usize>> {
    parse_cpus_flag("--cpus", s)
}

/// A CPU list given with `flag` → CPU ids, checked against the CPUs that are online; the
/// error names `flag`.
pub fn parse_cpus_flag(flag: &str, s: Option<&str>) -> anyhow::Result<Vec<usize>> {
    match s {
        None => Ok(Vec::new()),
        Some(s) => {
            let v = placement::parse_cpu_list(s).or_usage_ctx(flag)?;
            let online = placement::online_cpus();
            if let Some(bad) = v.iter().find(|c| **c >= online) {
                return Err(usage(format!(
                    "{flag}: CPU {bad} does not exist (this machine has {online})"
                )));
            }
            Ok(v)
        }
    }
}

pub fn parse_sched(s: Option<&str>) -> anyhow::Result<Option<SchedSpec>> {
    s.map(|s| s.parse::<SchedSpec>().or_usage_ctx("--sched"))
        .transpose()
}

pub fn parse_duration(flag: &str, s: &str) -> anyhow::Result<Duration> {
    let ns = model::parse_duration_ns(s).or_usage_ctx(flag)?;
    Ok(Duration::from_nanos(ns.round() as u64))
}

/// The store file: --db, else $TAILSCOPE_DB, else the default location.
pub fn db_path(a: &DbArgs) -> anyhow::Result<PathBuf> {
    match &a.db {
        Some(p) => Ok(p.clone()),
        None => store::default_path().or_usage(),
    }
}

/// The store file and, when one exists there, the store opened read-only: for commands that
/// only read, which must never create a store (`runs list`, `show`, `export`).
pub fn open_existing_store(a: &DbArgs) -> anyhow::Result<(PathBuf, Option<store::Store>)> {
    let p = db_path(a)?;
    let st = store::Store::open_existing(&p)
        .map_err(|e| usage(format!("cannot open results store {}: {e}", p.display())))?;
    Ok((p, st))
}

/// `--label NAME`: 1 to 64 letters, digits or `. _ - + / @` (a name scripts can pass around,
/// and that `check --baseline label:NAME` finds).
pub fn check_label(label: Option<&str>) -> anyhow::Result<()> {
    let Some(l) = label else { return Ok(()) };
    if !lab::is_label(l) {
        return Err(usage(format!(
            "--label must be 1 to 64 letters, digits or . _ - + / @, got '{l}'"
        )));
    }
    Ok(())
}

/// A directory flag (`--state-dir`) that may not exist yet: refused when it, or the nearest
/// of its parents that exists, is not a directory (it could never be created).
pub fn check_dir_flag(flag: &str, dir: &std::path::Path) -> anyhow::Result<()> {
    for d in dir.ancestors().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(m) = std::fs::metadata(d) {
            if m.is_dir() {
                return Ok(());
            }
            let shown = d.display().to_string();
            return Err(usage(if d == dir {
                format!("{flag} {} is not a directory", lab::clip(&shown))
            } else {
                format!(
                    "{flag} {}: {} is not a directory",
                    lab::clip(&dir.display().to_string()),
                    lab::clip(&shown)
                )
            }));
        }
    }
    Ok(())
}

/// Refuses an output file that is the store itself or one of SQLite's files beside it:
/// writing the export there would destroy the runs being exported.
pub fn check_not_the_store(flag: &str, out: &Path, db: &Path) -> anyhow::Result<()> {
    let mut names = vec![db.to_path_buf()];
    // SQLite names its side files after the path it opened and, for a symbolic link, after
    // the link's target: check both spellings.
    let real = output::resolved(db);
    for base in [db.as_os_str(), real.as_os_str()] {
        for suffix in ["-wal", "-shm", "-journal"] {
            let mut n = base.to_owned();
            n.push(suffix);
            names.push(n.into());
        }
    }
    if names.iter().any(|n| output::same_file(out, n)) {
        return Err(usage(format!(
            "{flag} {} is the results store {} (or a file SQLite keeps beside it); \
             write to another file",
            out.display(),
            db.display()
        )));
    }
    Ok(())
}

/// A `lab` error as the CLI reports it: bad input is a usage error (exit 2).
pub fn lab_err(e: lab::LabError) -> anyhow::Error {
    if e.is_invalid() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}
