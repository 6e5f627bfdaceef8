//! Small pieces shared by the measuring commands: signal flag, CPU lists, scheduling policy,
//! durations, the results store, host facts.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;

use crate::cli::DbArgs;
use crate::exit::{usage, OrUsage};

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
