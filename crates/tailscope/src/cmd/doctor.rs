//! `tailscope doctor`: the host checked for the known sources of tail latency (Tales of the
//! Tail §4, Table 1), each with its evidence, mitigation and trade-off; `--apply` holds the
//! safe, reversible subset until Ctrl-C and reverts it (also after a crash, on the next start).

use std::sync::atomic::Ordering;
use std::time::Duration;

use host::mitigate::Applied;
use lab::doctor::host_err;

use super::common::shutdown_flag;
use crate::cli::DoctorArgs;
use crate::exit::usage;
use crate::output::{self, out};

/// `--state-dir`: a directory (or one that can be made), readable when it exists, since
/// the journal of an earlier `--apply` that died is read from it.
fn check_state_dir(d: &std::path::Path) -> anyhow::Result<()> {
    lab::check_dir_flag("--state-dir", d)?;
    if d.is_dir() {
        std::fs::read_dir(d).map_err(|e| {
            usage(format!(
                "--state-dir {}: cannot read it: {e}",
                lab::clip(&d.display().to_string())
            ))
        })?;
    }
    Ok(())
}

pub fn run(a: &DoctorArgs) -> anyhow::Result<i32> {
    if let Some(d) = &a.state_dir {
        check_state_dir(d)?;
    }
    let cpus = a.cpus.as_deref();
    let e = lab::doctor::examine(&a.root, a.state_dir.as_deref(), a.pid, cpus)?;
    let applied = if a.apply && !e.plan.is_empty() {
        // The handler goes in before anything is changed: a Ctrl-C that came before it would
        // kill the process with the changes in force (until the next start reverts them).
        let stop = shutdown_flag()?;
        let held = Applied::apply(&e.root, &e.journal, &e.plan, false);
        Some((held.map_err(|x| anyhow::Error::from(host_err(x)))?, stop))
    } else {
        None
    };
    let plan_text: Vec<String> = e.plan.iter().map(|m| m.to_string()).collect();
    let view = report::host_view::DoctorJson {
        checks: &e.checks,
        plan: &plan_text,
        applied: applied.is_some(),
        reverted_leftovers: e.reverted,
    };
    let text = report::host_view::doctor(a.json, &view)?;
    if applied.is_some() {
        // Held mitigations are reverted only below: a reader that went away (`| head`) must
        // not end the process before that.
        output::write_stdout_ignoring_closed(&text)?;
    } else {
        out!("{text}")?;
    }
    if let Some((applied, stop)) = applied {
        eprintln!("tailscope doctor: mitigations held; press Ctrl-C to revert and exit");
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
        applied
            .revert()
            .map_err(|x| anyhow::Error::from(host_err(x)))?;
        eprintln!("tailscope doctor: reverted");
    }
    Ok(0)
}
