//! Memory checks: NUMA placement and balancing, transparent huge pages, swap.

use std::collections::BTreeMap;

use super::{cpu_list, format_cpu_list, unreadable, Check, Ctx, Status};

/// NUMA nodes and their CPUs from `sys/devices/system/node/nodeN/cpulist`.
fn nodes(ctx: &Ctx) -> Vec<(usize, Vec<usize>)> {
    ctx.root
        .list("sys/devices/system/node")
        .iter()
        .filter_map(|n| n.strip_prefix("node")?.parse::<usize>().ok())
        .map(|n| {
            let cpus = ctx
                .root
                .read(format!("sys/devices/system/node/node{n}/cpulist"))
                .ok()
                .and_then(|s| cpu_list(&s))
                .unwrap_or_default();
            (n, cpus)
        })
        .collect()
}

/// Pages per NUMA node over all mappings of `proc/PID/numa_maps` (the `N<node>=<pages>` fields).
pub(crate) fn numa_pages(text: &str) -> BTreeMap<usize, u64> {
    let mut pages = BTreeMap::new();
    for w in text.split_whitespace() {
        let Some((k, v)) = w.split_once('=') else {
            continue;
        };
        let (Some(node), Ok(n)) = (
            k.strip_prefix('N').and_then(|n| n.parse().ok()),
            v.parse::<u64>(),
        ) else {
            continue;
        };
        *pages.entry(node).or_insert(0) += n;
    }
    pages
}

/// `numa`: server CPUs spanning nodes, or the server's memory on another node than its CPUs.
pub(super) fn numa(ctx: &Ctx) -> Check {
    const ID: &str = "numa";
    let fix = |c: Check| {
        c.fix(
            "keep the server's CPUs and memory on one node (numactl --cpunodebind=N --membind=N), \
             or run one server instance per node with a partitioned key set",
            "one instance per node creates several queues and may need load balancing between \
             them (Tales of the Tail, Table 1: NUMA)",
            false,
            false,
        )
    };
    let nodes = nodes(ctx);
    if nodes.is_empty() {
        return fix(Check::new(
            ID,
            Status::Unknown,
            "no sys/devices/system/node/node*",
        ));
    }
    let listing: Vec<String> = nodes
        .iter()
        .map(|(n, c)| format!("node{n}: cpus {}", format_cpu_list(c)))
        .collect();
    let mut ev = format!("{} NUMA node(s) ({})", nodes.len(), listing.join(", "));
    if nodes.len() == 1 {
        return fix(Check::new(ID, Status::Ok, ev));
    }
    let server_nodes: Vec<usize> = nodes
        .iter()
        .filter(|(_, cpus)| cpus.iter().any(|c| ctx.is_server_cpu(*c)))
        .map(|(n, _)| *n)
        .collect();
    ev.push_str(&format!(
        "; server CPUs {} on node(s) {server_nodes:?}",
        format_cpu_list(&ctx.server)
    ));
    let mut status = if server_nodes.len() > 1 {
        Status::Warn
    } else {
        Status::Ok
    };
    if let Some(pid) = ctx.pid {
        match ctx.root.read(format!("proc/{pid}/numa_maps")) {
            Ok(text) => {
                let pages = numa_pages(&text);
                let total: u64 = pages.values().sum();
                let remote: u64 = pages
                    .iter()
                    .filter(|(n, _)| !server_nodes.contains(n))
                    .map(|(_, p)| p)
                    .sum();
                ev.push_str(&format!(
                    "; pid {pid} pages per node {pages:?}, {remote} of {total} remote"
                ));
                // More than 5% of the pages remote: a visible share of accesses crosses the
                // interconnect.
                if total > 0 && remote * 20 > total {
                    status = Status::Warn;
                }
            }
            Err(e) => ev.push_str(&format!("; cannot read proc/{pid}/numa_maps: {e}")),
        }
    } else {
        ev.push_str("; memory placement not checked (no --pid)");
    }
    fix(Check::new(ID, status, ev))
}

/// `numa_balancing`: automatic NUMA balancing unmaps pages to sample accesses (extra faults).
pub(super) fn numa_balancing(ctx: &Ctx) -> Check {
    const ID: &str = "numa_balancing";
    let path = "proc/sys/kernel/numa_balancing";
    let check = match ctx.root.read_trim(path) {
        Ok(v) if v == "0" => Check::new(ID, Status::Ok, format!("{path} = 0")),
        Ok(v) => Check::new(
            ID,
            Status::Warn,
            format!("{path} = {v}: periodic hinting faults and page migrations"),
        ),
        Err(e) => unreadable(ID, path, &e),
    };
    check.fix(
        "echo 0 > /proc/sys/kernel/numa_balancing (doctor --apply does it for the run) and place memory explicitly",
        "memory stays where it was first touched, even when the threads move",
        true,
        false,
    )
}

/// `thp`: with `always`, page faults may compact memory synchronously and khugepaged scans.
pub(super) fn thp(ctx: &Ctx) -> Check {
    const ID: &str = "thp";
    let path = "sys/kernel/mm/transparent_hugepage/enabled";
    let check = match ctx.root.read_trim(path) {
        Ok(v) => {
            let mode = v
                .split_whitespace()
                .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
                .unwrap_or(v.as_str())
                .to_string();
            let status = if mode == "always" {
                Status::Warn
            } else {
                Status::Ok
            };
            Check::new(ID, status, format!("{path}: {v} (mode {mode})"))
        }
        Err(e) => unreadable(ID, path, &e),
    };
    check.fix(
        "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
        "programs that do not madvise() get no huge pages: more TLB misses on large heaps",
        true,
        false,
    )
}

/// `swap`: a swapped-out page of the server costs a disk read on its next touch.
pub(super) fn swap(ctx: &Ctx) -> Check {
    const ID: &str = "swap";
    let fix = |c: Check| {
        c.fix(
            "swapoff -a or vm.swappiness=1, and mlockall() the server",
            "no room for memory overflow: the OOM killer acts sooner",
            true,
            false,
        )
    };
    let swaps = match ctx.root.read("proc/swaps") {
        Ok(s) => s,
        Err(e) => return fix(unreadable(ID, "proc/swaps", &e)),
    };
    let devices: Vec<&str> = swaps
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let swappiness = ctx
        .root
        .read_trim("proc/sys/vm/swappiness")
        .ok()
        .and_then(|s| s.parse::<u32>().ok());
    let used_kb = ctx.root.read("proc/meminfo").ok().and_then(|m| {
        let field = |k: &str| -> Option<u64> {
            m.lines()
                .find(|l| l.starts_with(k))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        };
        Some(field("SwapTotal:")?.saturating_sub(field("SwapFree:")?))
    });
    let sw = swappiness.map_or("?".to_string(), |s| s.to_string());
    let used = used_kb.map_or("?".to_string(), |u| format!("{u} kB"));
    if devices.is_empty() {
        return fix(Check::new(
            ID,
            Status::Ok,
            format!("no swap devices in proc/swaps; swappiness {sw}"),
        ));
    }
    let ev = format!(
        "swap on {}; {used} in use; swappiness {sw}",
        devices.join(", ")
    );
    let status = if used_kb.unwrap_or(0) > 0 || swappiness.is_none_or(|s| s > 10) {
        Status::Warn
    } else {
        Status::Ok
    };
    fix(Check::new(ID, status, ev))
}
