//! The host examined for the known sources of tail latency (`tailscope doctor`): changes left
//! by a tailscope that died while holding them reverted first, then every check and the
//! safe, reversible mitigations that apply.

use std::path::Path;

use host::mitigate::{self, Journal, Mitigation};
use host::probe::{self, Check, DoctorConfig, HostRoot};
use host::HostError;

use measurement::error::{invalid, LabError};

/// A host error as the CLI reports it: a root, pid or CPU the user named that is not there
/// is the user's input ([`LabError::Invalid`]).
pub fn host_err(e: HostError) -> LabError {
    match e {
        HostError::NoProc { .. } | HostError::NoSuchPid { .. } | HostError::UnknownCpus { .. } => {
            invalid(e)
        }
        other => LabError::Host(other),
    }
}

/// What the doctor found.
pub struct Examined {
    pub root: HostRoot,
    /// Where applied mitigations are journalled (to be reverted after a crash).
    pub journal: Journal,
    pub checks: Vec<Check>,
    /// The safe, reversible mitigations that apply.
    pub plan: Vec<Mitigation>,
    /// Changes of an earlier tailscope reverted before the checks.
    pub reverted: usize,
}

/// Examines the host under `root` (the server `pid` and its `cpus`, a CPU list, when given),
/// with the journal in `state_dir` (else its default place).
pub fn examine(
    root: &Path,
    state_dir: Option<&Path>,
    pid: Option<u32>,
    cpus: Option<&str>,
) -> Result<Examined, LabError> {
    if !root.is_dir() {
        return Err(invalid(format!(
            "--root {} is not a directory",
            root.display()
        )));
    }
    let cpus = match cpus {
        Some(s) => probe::parse_cpu_list_lenient(s)
            .ok_or_else(|| invalid(format!("--cpus: cannot parse '{s}'")))?,
        None => Vec::new(),
    };
    let cfg = DoctorConfig {
        root: HostRoot::new(root),
        pid,
        cpus,
    };
    let journal = Journal::in_dir(state_dir.map_or_else(Journal::default_dir, Path::to_path_buf));
    let host = HostRoot::new(root);
    let reverted = if journal.path().exists() {
        mitigate::revert_leftovers(&host, &journal).map_err(host_err)?
    } else {
        0
    };
    let checks = probe::run_checks(&cfg).map_err(host_err)?;
    let plan = mitigate::plan(&checks, &cfg);
    Ok(Examined {
        root: host,
        journal,
        checks,
        plan,
        reverted,
    })
}
