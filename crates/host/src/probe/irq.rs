//! Interrupt routing checks: irqbalance, the affinity of the NIC's queue IRQs and RPS/XPS,
//! against the server's CPUs (Tales of the Tail §4: dedicate cores to interrupts).

use super::{cpu_list, cpu_mask, format_cpu_list, unreadable, Check, Ctx, HostRoot, Status};

const IRQ_TRADEOFF: &str = "the interrupt CPUs may sit at low utilisation, lowering throughput \
                            (Tales of the Tail, Table 1: interrupt processing)";

/// One NIC queue interrupt from `proc/interrupts`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicIrq {
    pub irq: u32,
    /// The action name, e.g. `eth0-TxRx-0` or `virtio2-input.0`.
    pub name: String,
    /// Interrupts taken so far, per CPU column.
    pub counts: Vec<u64>,
}

/// The IRQs of the host's network interfaces (all but `lo`): actions named after the
/// interface (`eth0`, `eth0-TxRx-3`) or, for virtio NICs, after the device the interface's
/// `device` link points to (`virtio2-input.0`).
pub fn nic_irqs(root: &HostRoot) -> Option<Vec<NicIrq>> {
    let text = root.read("proc/interrupts").ok()?;
    let mut prefixes = Vec::new();
    for iface in root.list("sys/class/net") {
        if iface == "lo" {
            continue;
        }
        if let Ok(dev) = std::fs::read_link(root.join(format!("sys/class/net/{iface}/device"))) {
            if let Some(d) = dev.file_name().and_then(|d| d.to_str()) {
                if d.starts_with("virtio") {
                    prefixes.push(format!("{d}-input"));
                    prefixes.push(format!("{d}-output"));
                }
            }
        }
        prefixes.push(iface);
    }
    let mut lines = text.lines();
    let ncpu = lines.next()?.split_whitespace().count();
    let mut out = Vec::new();
    for line in lines {
        let Some((num, rest)) = line.split_once(':') else {
            continue;
        };
        let Ok(irq) = num.trim().parse::<u32>() else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        let counts: Vec<u64> = words
            .iter()
            .take(ncpu)
            .filter_map(|w| w.parse().ok())
            .collect();
        let Some(name) = words.last() else { continue };
        let nic = prefixes.iter().any(|p| {
            name == p
                || name
                    .strip_prefix(p.as_str())
                    .is_some_and(|r| r.starts_with(['-', '.']))
        });
        if nic {
            out.push(NicIrq {
                irq,
                name: name.to_string(),
                counts,
            });
        }
    }
    Some(out)
}

/// `irqbalance`: the daemon rewrites IRQ affinities every few seconds, onto server CPUs too.
pub(super) fn irqbalance(ctx: &Ctx) -> Check {
    const ID: &str = "irqbalance";
    let pids = ctx.root.pids();
    let fix = |c: Check| {
        c.fix(
            "stop irqbalance (systemctl stop irqbalance) or ban the server CPUs \
             (IRQBALANCE_BANNED_CPUS), then route NIC IRQs by hand",
            "IRQ load is no longer spread automatically as traffic changes",
            true,
            false,
        )
    };
    if pids.is_empty() {
        return fix(Check::new(
            ID,
            Status::Unknown,
            "no process directories in proc/",
        ));
    }
    let running: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|p| {
            ctx.root
                .read_trim(format!("proc/{p}/comm"))
                .is_ok_and(|c| c == "irqbalance")
        })
        .collect();
    match running.first() {
        Some(p) => fix(Check::new(
            ID,
            Status::Warn,
            format!("irqbalance is running (pid {p}, proc/{p}/comm)"),
        )),
        None => fix(Check::new(
            ID,
            Status::Ok,
            format!(
                "no irqbalance among the {} processes in proc/*/comm",
                pids.len()
            ),
        )),
    }
}

/// `irq_affinity`: NIC queue IRQs allowed on server CPUs interrupt the server.
pub(super) fn irq_affinity(ctx: &Ctx) -> Check {
    const ID: &str = "irq_affinity";
    let fix = |c: Check| {
        c.fix(
            "route the NIC queue IRQs to CPUs the server does not use (doctor --apply writes \
             /proc/irq/N/smp_affinity_list; stop irqbalance first or it undoes this)",
            IRQ_TRADEOFF,
            true,
            false,
        )
    };
    let Some(irqs) = nic_irqs(ctx.root) else {
        return fix(unreadable(
            ID,
            "proc/interrupts",
            &std::io::Error::other("missing or empty"),
        ));
    };
    if irqs.is_empty() {
        return fix(Check::new(
            ID,
            Status::Unknown,
            "no NIC queue IRQs found in proc/interrupts",
        ));
    }
    let mut on_server = Vec::new();
    let mut parts = Vec::new();
    for q in &irqs {
        let aff = ctx
            .root
            .read(format!("proc/irq/{}/smp_affinity_list", q.irq))
            .ok()
            .and_then(|s| cpu_list(&s));
        let served: u64 = q
            .counts
            .iter()
            .enumerate()
            .filter(|(c, _)| ctx.is_server_cpu(*c))
            .map(|(_, n)| n)
            .sum();
        let aff_text = aff.as_deref().map_or("?".to_string(), format_cpu_list);
        parts.push(format!(
            "{} ({}) -> {aff_text}, {served} on server CPUs",
            q.irq, q.name
        ));
        if aff.is_some_and(|a| a.iter().any(|c| ctx.is_server_cpu(*c))) {
            on_server.push(q.irq);
        }
    }
    let status = if on_server.is_empty() {
        Status::Ok
    } else {
        Status::Warn
    };
    let ev = format!(
        "server CPUs {}; NIC IRQs: {}",
        format_cpu_list(&ctx.server),
        parts.join("; ")
    );
    fix(Check::new(ID, status, ev))
}

/// `rps_xps`: receive packet steering onto server CPUs moves network softirq work there.
pub(super) fn rps_xps(ctx: &Ctx) -> Check {
    const ID: &str = "rps_xps";
    let mut parts = Vec::new();
    let mut on_server = false;
    for iface in ctx.root.list("sys/class/net") {
        if iface == "lo" {
            continue;
        }
        let qdir = format!("sys/class/net/{iface}/queues");
        for q in ctx.root.list(&qdir) {
            let file = if q.starts_with("rx-") {
                "rps_cpus"
            } else {
                "xps_cpus"
            };
            let Ok(mask) = ctx.root.read_trim(format!("{qdir}/{q}/{file}")) else {
                continue;
            };
            let cpus = cpu_mask(&mask).unwrap_or_default();
            if file == "rps_cpus" && cpus.iter().any(|c| ctx.is_server_cpu(*c)) {
                on_server = true;
            }
            parts.push(format!("{iface}/{q}/{file}={mask}"));
        }
    }
    let check = if parts.is_empty() {
        Check::new(
            ID,
            Status::Unknown,
            "no sys/class/net/*/queues/*/{rps,xps}_cpus",
        )
    } else if on_server {
        Check::new(
            ID,
            Status::Warn,
            format!("RPS steers packets onto server CPUs: {}", parts.join(" ")),
        )
    } else {
        Check::new(ID, Status::Ok, parts.join(" "))
    };
    check.fix(
        "set rps_cpus of every rx queue to the interrupt CPUs only (or 0 to process packets \
         on the CPU that took the IRQ)",
        IRQ_TRADEOFF,
        true,
        false,
    )
}
