//! `tailscope doctor`: the host checked for the known sources of tail latency (Tales of the
//! Tail §4, Table 1), each with its evidence, mitigation and trade-off; `--apply` holds the
//! safe, reversible subset until Ctrl-C and reverts it (also after a crash, on the next start).

use std::sync::atomic::Ordering;
use std::time::Duration;

use host::mitigate::{self, Applied, Journal};
use host::probe::{self, DoctorConfig, HostRoot, Status};
use host::HostError;
use serde_json::json;

use super::common::shutdown_flag;
use crate::cli::DoctorArgs;
use crate::exit::usage;
use crate::output;

/// Errors in what the user named (root, pid, CPUs) are usage errors.
fn host_err(e: HostError) -> anyhow::Error {
    match e {
        HostError::NoProc { .. } | HostError::NoSuchPid { .. } | HostError::UnknownCpus { .. } => {
            usage(e)
        }
        other => anyhow::Error::new(other),
    }
}

pub fn run(a: &DoctorArgs) -> anyhow::Result<i32> {
    if !a.root.is_dir() {
        return Err(usage(format!(
            "--root {} is not a directory",
            a.root.display()
        )));
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
        Some(Applied::apply(&root, &journal, &plan, false).map_err(host_err)?)
    } else {
        None
    };
    let plan_text: Vec<String> = plan.iter().map(|m| m.to_string()).collect();
    if a.json {
        output::print_json(&json!({
            "checks": checks,
            "plan": plan_text,
            "applied": applied.is_some(),
            "reverted_leftovers": reverted,
        }))?;
    } else {
        if reverted > 0 {
            println!("reverted {reverted} change(s) left by an earlier tailscope that did not exit cleanly");
        }
        println!("{:<8} {:<22} evidence", "status", "check");
        for c in &checks {
            let st = match c.status {
                Status::Ok => "ok",
                Status::Warn => "WARN",
                Status::Bad => "BAD",
                Status::Unknown => "unknown",
            };
            println!("{st:<8} {:<22} {}", c.id, c.evidence);
        }
        let todo: Vec<_> = checks
            .iter()
            .filter(|c| matches!(c.status, Status::Warn | Status::Bad))
            .collect();
        if !todo.is_empty() {
            println!("\nwhat to change:");
            for c in todo {
                let how = match (c.needs_root, c.needs_reboot) {
                    (_, true) => " [needs a reboot]",
                    (true, false) => " [needs root]",
                    _ => "",
                };
                println!(
                    "  {}: {}{how}\n      trade-off: {}",
                    c.id, c.mitigation, c.tradeoff
                );
            }
        }
        if plan_text.is_empty() {
            println!("\nno safe, reversible mitigation applies");
        } else if applied.is_some() {
            println!("\napplied (reverted when you press Ctrl-C):");
        } else {
            println!("\n--apply would (dry run, nothing changed):");
        }
        for p in &plan_text {
            println!("  {p}");
        }
    }
    if let Some(applied) = applied {
        eprintln!("tailscope doctor: mitigations held; press Ctrl-C to revert and exit");
        let stop = shutdown_flag()?;
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
        applied.revert().map_err(host_err)?;
        eprintln!("tailscope doctor: reverted");
    }
    Ok(0)
}
