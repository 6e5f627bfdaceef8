//! Prints `doctor`'s checks as the CLI's JSON: `cargo run -p host --example doctor -- [ROOT] [PID] [CPUS]`.
//! Also lists what `--apply` would change (dry run).

use host::mitigate::{plan, Applied, Journal};
use host::placement::parse_cpu_list_max;
use host::probe::{run_checks, DoctorConfig, HostRoot, Report};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = HostRoot::new(args.first().map_or("/", String::as_str));
    let pid = args.get(1).map(|p| p.parse()).transpose()?;
    let cpus = match args.get(2) {
        Some(s) => parse_cpu_list_max(s, 8192)?,
        None => Vec::new(),
    };
    let cfg = DoctorConfig { root, pid, cpus };
    let checks = run_checks(&cfg)?;
    println!(
        "{}",
        serde_json::to_string_pretty(&Report {
            checks: checks.clone()
        })?
    );
    let journal = Journal::in_dir(std::env::temp_dir().join("tailscope-doctor-example"));
    let dry = Applied::apply(&cfg.root, &journal, &plan(&checks, &cfg), true)?;
    for c in dry.changes() {
        eprintln!(
            "would write {:?} to {} (now {:?})",
            c.new,
            c.file.display(),
            c.old
        );
    }
    Ok(())
}
