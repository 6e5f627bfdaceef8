//! CPU checks: frequency governor, turbo, idle states, SMT, isolation, timer migration,
//! watchdogs and virtualisation.

use super::{cpu_list, format_cpu_list, unreadable, Check, Ctx, Status};

const POWER_TRADEOFF: &str =
    "higher energy use and heat (Tales of the Tail, Table 1: power saving)";

fn cpu_dir(cpu: usize) -> String {
    format!("sys/devices/system/cpu/cpu{cpu}")
}

/// `cpu_governor`: every server CPU's `scaling_governor` should be `performance`.
pub(super) fn governor(ctx: &Ctx) -> Check {
    const ID: &str = "cpu_governor";
    let mut read = Vec::new();
    let mut slow = Vec::new();
    for &c in &ctx.server {
        if let Ok(g) = ctx
            .root
            .read_trim(format!("{}/cpufreq/scaling_governor", cpu_dir(c)))
        {
            if g != "performance" {
                slow.push(c);
            }
            read.push(format!("cpu{c}={g}"));
        }
    }
    let fix = |c: Check| {
        c.fix(
            "set the governor of the server CPUs to performance (doctor --apply does it for the run)",
            POWER_TRADEOFF,
            true,
            false,
        )
    };
    if read.is_empty() {
        return fix(Check::new(
            ID,
            Status::Unknown,
            "no cpufreq/scaling_governor for the server CPUs (no frequency driver, e.g. a VM)",
        ));
    }
    let status = if slow.is_empty() {
        Status::Ok
    } else {
        Status::Warn
    };
    fix(Check::new(
        ID,
        status,
        format!("scaling_governor: {}", read.join(" ")),
    ))
}

/// `turbo`: turbo/boost changes the clock with temperature and the load of other cores.
pub(super) fn turbo(ctx: &Ctx) -> Check {
    const ID: &str = "turbo";
    let (path, on) = if let Ok(v) = ctx
        .root
        .read_trim("sys/devices/system/cpu/intel_pstate/no_turbo")
    {
        ("intel_pstate/no_turbo", v != "1")
    } else if let Ok(v) = ctx.root.read_trim("sys/devices/system/cpu/cpufreq/boost") {
        ("cpufreq/boost", v == "1")
    } else {
        return Check::new(
            ID,
            Status::Unknown,
            "neither sys/devices/system/cpu/intel_pstate/no_turbo nor cpufreq/boost exists",
        );
    };
    let status = if on { Status::Warn } else { Status::Ok };
    Check::new(ID, status, format!("{path}: turbo {}", if on { "on" } else { "off" })).fix(
        "turn turbo off (echo 1 > intel_pstate/no_turbo or 0 > cpufreq/boost) for stable service times",
        "lower peak single-thread speed",
        true,
        false,
    )
}

/// `cpuidle`: the deepest enabled idle state's exit latency on the server CPUs.
pub(super) fn cpuidle(ctx: &Ctx) -> Check {
    const ID: &str = "cpuidle";
    let mut worst: Option<(u64, String)> = None;
    let mut states = Vec::new();
    for &c in &ctx.server {
        let dir = format!("{}/cpuidle", cpu_dir(c));
        for s in ctx.root.list(&dir) {
            if !s.starts_with("state") {
                continue;
            }
            let base = format!("{dir}/{s}");
            let Ok(lat) = ctx.root.read_trim(format!("{base}/latency")) else {
                continue;
            };
            let Ok(lat) = lat.parse::<u64>() else {
                continue;
            };
            let name = ctx
                .root
                .read_trim(format!("{base}/name"))
                .unwrap_or_else(|_| s.clone());
            let disabled = ctx
                .root
                .read_trim(format!("{base}/disable"))
                .is_ok_and(|d| d == "1");
            if c == ctx.server[0] {
                let off = if disabled { " (disabled)" } else { "" };
                states.push(format!("{name}={lat}us{off}"));
            }
            if !disabled && worst.as_ref().is_none_or(|(w, _)| lat > *w) {
                worst = Some((lat, format!("{name} on cpu{c}")));
            }
        }
    }
    let fix = |c: Check| {
        c.fix(
            "keep the server CPUs out of deep C-states: hold /dev/cpu_dma_latency at 0 during the run \
             (doctor --apply), or boot with intel_idle.max_cstate=1 / disable states in cpuidle/stateN/disable",
            POWER_TRADEOFF,
            true,
            false,
        )
    };
    let Some((lat, which)) = worst else {
        return fix(Check::new(
            ID,
            Status::Unknown,
            "no cpuidle states for the server CPUs",
        ));
    };
    // A wake-up of a few µs is within the noise of a network round trip; tens of µs are not.
    let status = match lat {
        0..=2 => Status::Ok,
        3..=20 => Status::Warn,
        _ => Status::Bad,
    };
    let ev = format!(
        "idle states of cpu{}: {}; deepest enabled: {which}, exit latency {lat} us",
        ctx.server[0],
        states.join(" ")
    );
    fix(Check::new(ID, status, ev))
}

/// `smt`: a server CPU whose hyperthread sibling is busy shares its core's pipeline and caches.
pub(super) fn smt(ctx: &Ctx) -> Check {
    const ID: &str = "smt";
    let mut shared = Vec::new();
    let mut read = 0;
    for &c in &ctx.server {
        let Ok(s) = ctx
            .root
            .read(format!("{}/topology/thread_siblings_list", cpu_dir(c)))
        else {
            continue;
        };
        read += 1;
        let sib: Vec<usize> = cpu_list(&s)
            .unwrap_or_default()
            .into_iter()
            .filter(|&x| x != c)
            .collect();
        if !sib.is_empty() {
            shared.push(format!(
                "cpu{c} shares a core with {}",
                format_cpu_list(&sib)
            ));
        }
    }
    let fix = |c: Check| {
        c.fix(
            "keep the sibling hyperthreads of the server CPUs idle (leave them out of every CPU set) \
             or turn SMT off (echo off > /sys/devices/system/cpu/smt/control)",
            "fewer usable logical CPUs, lower throughput",
            true,
            false,
        )
    };
    if read == 0 {
        return fix(Check::new(
            ID,
            Status::Unknown,
            "no topology/thread_siblings_list for the server CPUs",
        ));
    }
    if shared.is_empty() {
        fix(Check::new(
            ID,
            Status::Ok,
            "no server CPU has an SMT sibling",
        ))
    } else {
        fix(Check::new(ID, Status::Warn, shared.join("; ")))
    }
}

/// `isolation`: isolcpus / nohz_full / rcu_nocbs on the kernel command line.
pub(super) fn isolation(ctx: &Ctx) -> Check {
    const ID: &str = "isolation";
    let fix = |c: Check| {
        c.fix(
            "boot with isolcpus=, nohz_full= and rcu_nocbs= set to the server CPUs, then pin the server there",
            "isolated CPUs run nothing else (idle when no requests are pending: Tales Table 1, \
             dedicated core); nohz_full makes kernel entry and exit slower",
            true,
            true,
        )
    };
    let cmdline = match ctx.root.read("proc/cmdline") {
        Ok(s) => s,
        Err(e) => return fix(unreadable(ID, "proc/cmdline", &e)),
    };
    let mut missing = Vec::new();
    let mut found = Vec::new();
    for key in ["isolcpus", "nohz_full", "rcu_nocbs"] {
        let val = cmdline
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')));
        // isolcpus may carry flags before the list: isolcpus=nohz,domain,2-3
        let cpus = val.and_then(|v| {
            let list: Vec<&str> = v
                .split(',')
                .filter(|p| !p.chars().any(|c| c.is_ascii_alphabetic()))
                .collect();
            cpu_list(&list.join(","))
        });
        match (val, cpus) {
            (Some(v), Some(cpus)) if ctx.server.iter().all(|c| cpus.contains(c)) => {
                found.push(format!("{key}={v}"))
            }
            (Some(v), _) => missing.push(format!("{key}={v} does not cover the server CPUs")),
            (None, _) => missing.push(format!("no {key}=")),
        }
    }
    let server = format_cpu_list(&ctx.server);
    if missing.is_empty() {
        fix(Check::new(
            ID,
            Status::Ok,
            format!("proc/cmdline: {} (server CPUs {server})", found.join(" ")),
        ))
    } else {
        let all = if ctx.explicit {
            ""
        } else {
            " (no --cpus: all CPUs count as server CPUs)"
        };
        fix(Check::new(
            ID,
            Status::Warn,
            format!(
                "proc/cmdline: {}; server CPUs {server}{all}",
                missing.join(", ")
            ),
        ))
    }
}

/// Reads a `0`/`1` (or number) sysctl.
fn sysctl(ctx: &Ctx, path: &str) -> Result<i64, String> {
    let s = ctx
        .root
        .read_trim(path)
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    s.parse()
        .map_err(|_| format!("{path} holds {s:?}, not a number"))
}

/// `timer_migration`: with 1, timers may be moved onto the (busy) server CPUs.
pub(super) fn timer_migration(ctx: &Ctx) -> Check {
    const ID: &str = "timer_migration";
    let check = match sysctl(ctx, "proc/sys/kernel/timer_migration") {
        Ok(0) => Check::new(ID, Status::Ok, "proc/sys/kernel/timer_migration = 0"),
        Ok(v) => Check::new(
            ID,
            Status::Warn,
            format!("proc/sys/kernel/timer_migration = {v}"),
        ),
        Err(e) => Check::new(ID, Status::Unknown, e),
    };
    check.fix(
        "echo 0 > /proc/sys/kernel/timer_migration (doctor --apply does it for the run)",
        "idle CPUs wake up for their own timers: more energy",
        true,
        false,
    )
}

/// `watchdog`: the NMI and soft-lockup watchdogs interrupt every CPU periodically.
pub(super) fn watchdog(ctx: &Ctx) -> Check {
    const ID: &str = "watchdog";
    let mut on = Vec::new();
    let mut read = Vec::new();
    for f in ["nmi_watchdog", "watchdog", "soft_watchdog"] {
        if let Ok(v) = sysctl(ctx, &format!("proc/sys/kernel/{f}")) {
            read.push(format!("{f}={v}"));
            if v != 0 {
                on.push(f);
            }
        }
    }
    let check = if read.is_empty() {
        Check::new(
            ID,
            Status::Unknown,
            "no proc/sys/kernel/{nmi_,soft_,}watchdog",
        )
    } else if on.is_empty() {
        Check::new(
            ID,
            Status::Ok,
            format!("proc/sys/kernel: {}", read.join(" ")),
        )
    } else {
        Check::new(
            ID,
            Status::Warn,
            format!("proc/sys/kernel: {}", read.join(" ")),
        )
    };
    check.fix(
        "echo 0 > /proc/sys/kernel/nmi_watchdog and /proc/sys/kernel/watchdog, or boot with nowatchdog",
        "hard and soft lockups are no longer detected",
        true,
        false,
    )
}

/// `virtualisation`: a hypervisor can deschedule the vCPU (steal time).
pub(super) fn virtualisation(ctx: &Ctx) -> Check {
    const ID: &str = "virtualisation";
    let fix = |c: Check| {
        c.fix(
            "measure on bare metal, or on a VM with dedicated, pinned vCPUs",
            "dedicated hosts cost more and consolidate less",
            false,
            false,
        )
    };
    let cpuinfo = match ctx.root.read("proc/cpuinfo") {
        Ok(s) => s,
        Err(e) => return fix(unreadable(ID, "proc/cpuinfo", &e)),
    };
    let hyper = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|w| w == "hypervisor"));
    // proc/stat "cpu" line: user nice system idle iowait irq softirq steal ...
    let steal = ctx.root.read("proc/stat").ok().and_then(|s| {
        let line = s.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|w| w.parse().ok())
            .collect();
        let total: u64 = v.iter().take(8).sum();
        Some((*v.get(7)?, total))
    });
    let steal_text = match steal {
        Some((s, t)) if t > 0 => format!(
            "steal {s} of {t} ticks since boot ({:.2}%)",
            100.0 * s as f64 / t as f64
        ),
        _ => "no steal column in proc/stat".to_string(),
    };
    let frac = steal.map_or(0.0, |(s, t)| if t > 0 { s as f64 / t as f64 } else { 0.0 });
    let status = match (hyper, frac) {
        (_, f) if f > 0.005 => Status::Bad,
        (true, _) => Status::Warn,
        (false, _) => Status::Ok,
    };
    let flag = if hyper {
        "cpuinfo has the hypervisor flag"
    } else {
        "no hypervisor flag in cpuinfo"
    };
    fix(Check::new(ID, status, format!("{flag}; {steal_text}")))
}
