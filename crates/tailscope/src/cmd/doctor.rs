//! `tailscope doctor`: the host checked for the known sources of tail latency (Tales of the
//! Tail §4, Table 1), each with its evidence, mitigation and trade-off; `--apply` holds the
//! safe, reversible subset until Ctrl-C and reverts it (also after a crash, on the next start).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::Duration;

use host::mitigate::{self, Applied, Journal};
use host::probe::{self, DoctorConfig, HostRoot, Status};
use host::HostError;
use serde_json::json;

use super::common::shutdown_flag;
use crate::cli::DoctorArgs;
use crate::exit::usage;
use crate::output::{self, out};

/// Errors in what the user named (root, pid, CPUs) are usage errors.
fn host_err(e: HostError) -> anyhow::Error {
    match e {
        HostError::NoProc { .. } | HostError::NoSuchPid { .. } | HostError::UnknownCpus { .. } => {
            usage(e)
        }
        other => anyhow::Error::new(other),
    }
}

/// `--state-dir`: a directory (or one that can be made), readable when it exists, since
/// the journal of an earlier `--apply` that died is read from it.
fn check_state_dir(d: &std::path::Path) -> anyhow::Result<()> {
    super::common::check_dir_flag("--state-dir", d)?;
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
    if !a.root.is_dir() {
        return Err(usage(format!(
            "--root {} is not a directory",
            a.root.display()
        )));
    }
    if let Some(d) = &a.state_dir {
        check_state_dir(d)?;
    }
    let root = HostRoot::new(&a.root);
    let cpus = match &a.cpus {
        Some(s) => probe::parse_cpu_list_lenient(s)
            .ok_or_else(|| usage(format!("--cpus: cannot parse '{s}'")))?,
        None => Vec::new(),
    };
    let cfg = DoctorConfig {
        root: HostRoot::new(&a.root),
        pid: a.pid,
        cpus,
    };
    let journal = match &a.state_dir {
        Some(d) => Journal::in_dir(d),
        None => Journal::in_dir(Journal::default_dir()),
    };
    // Changes left by a tailscope that died while holding them are undone first.
    let reverted = if journal.path().exists() {
        mitigate::revert_leftovers(&root, &journal).map_err(host_err)?
    } else {
        0
    };
    let checks = probe::run_checks(&cfg).map_err(host_err)?;
    let plan = mitigate::plan(&checks, &cfg);
    let applied = if a.apply && !plan.is_empty() {
        // The handler goes in before anything is changed: a Ctrl-C that came before it would
        // kill the process with the changes in force (until the next start reverts them).
        let stop = shutdown_flag()?;
        Some((
            Applied::apply(&root, &journal, &plan, false).map_err(host_err)?,
            stop,
        ))
    } else {
        None
    };
    let plan_text: Vec<String> = plan.iter().map(|m| m.to_string()).collect();
    let text = if a.json {
        let v = json!({
            "checks": checks,
            "plan": plan_text,
            "applied": applied.is_some(),
            "reverted_leftovers": reverted,
        });
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else {
        human(&checks, &plan_text, reverted, applied.is_some())?
    };
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
        applied.revert().map_err(host_err)?;
        eprintln!("tailscope doctor: reverted");
    }
    Ok(0)
}

/// The terminal report: every check, what to change, and the plan.
fn human(
    checks: &[probe::Check],
    plan_text: &[String],
    reverted: usize,
    applied: bool,
) -> Result<String, std::fmt::Error> {
    let mut s = String::new();
    if reverted > 0 {
        writeln!(
            s,
            "reverted {reverted} change(s) left by an earlier tailscope that did not exit cleanly"
        )?;
    }
    writeln!(s, "{:<8} {:<22} evidence", "status", "check")?;
    for c in checks {
        let st = match c.status {
            Status::Ok => "ok",
            Status::Warn => "WARN",
            Status::Bad => "BAD",
            Status::Unknown => "unknown",
        };
        writeln!(s, "{st:<8} {:<22} {}", c.id, c.evidence)?;
    }
    let todo: Vec<_> = checks
        .iter()
        .filter(|c| matches!(c.status, Status::Warn | Status::Bad))
        .collect();
    if !todo.is_empty() {
        writeln!(s, "\nwhat to change:")?;
        for c in todo {
            let how = match (c.needs_root, c.needs_reboot) {
                (_, true) => " [needs a reboot]",
                (true, false) => " [needs root]",
                _ => "",
            };
            writeln!(
                s,
                "  {}: {}{how}\n      trade-off: {}",
                c.id, c.mitigation, c.tradeoff
            )?;
        }
    }
    if plan_text.is_empty() {
        writeln!(s, "\nno safe, reversible mitigation applies")?;
    } else if applied {
        writeln!(s, "\napplied (reverted when you press Ctrl-C):")?;
    } else {
        writeln!(s, "\n--apply would (dry run, nothing changed):")?;
    }
    for p in plan_text {
        writeln!(s, "  {p}")?;
    }
    Ok(s)
}
