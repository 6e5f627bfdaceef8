//! A spawned server in a container (ThunderX Fig. 8) and its network processing placed on
//! chosen CPUs (Table VI): checked with the target, made when the server starts, removed
//! after it stops. The mechanisms are `host::isolate::ContainerNet` (a network namespace
//! over a veth pair) and `targets::Containment` (namespaces entered before exec).

use host::isolate::{ContainerNet, IsoJournal};
use host::probe::HostRoot;

use crate::error::{invalid, LabError};
use crate::server_facts::ContainerFacts;
use crate::target_spec::{Container, SpawnSpec};

/// A checked container request.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ContainerPlan {
    pub kind: Container,
    pub rx_cpus: Vec<usize>,
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Checks `s`'s container against the target and the host; creates nothing. `real`: the
/// target is a real server (the built-in one lives in tailscope's own process).
pub(crate) fn check(s: &SpawnSpec, real: bool) -> Result<Option<ContainerPlan>, LabError> {
    let Some(kind) = s.container else {
        if !s.rx_cpus.is_empty() {
            return Err(invalid(
                "server-rx-cpus needs server-container=veth (the container's veth pair is what it steers)",
            ));
        }
        return Ok(None);
    };
    if !real {
        return Err(invalid(
            "server-container applies to real servers (memcached, nginx, redis): the built-in server runs inside tailscope",
        ));
    }
    if !s.rx_cpus.is_empty() && kind != Container::Veth {
        return Err(invalid(
            "server-rx-cpus needs server-container=veth (the container's veth pair is what it steers)",
        ));
    }
    if !is_root() {
        return Err(invalid(
            "server-container needs root (entering namespaces needs CAP_SYS_ADMIN)",
        ));
    }
    let online = host::probe::online_cpus(&HostRoot::default())
        .unwrap_or_else(|| (0..host::placement::online_cpus()).collect());
    if let Some(c) = s.rx_cpus.iter().find(|c| !online.contains(c)) {
        return Err(invalid(format!("server-rx-cpus: CPU {c} is not online")));
    }
    Ok(Some(ContainerPlan {
        kind,
        rx_cpus: s.rx_cpus.clone(),
    }))
}

/// Makes the container's network when it has one, and returns the servers' configurations
/// set to start inside it.
pub(crate) fn start(
    plan: &ContainerPlan,
    journal: &IsoJournal,
    cfgs: &[targets::SpawnConfig],
) -> Result<(Vec<targets::SpawnConfig>, Option<ContainerNet>), LabError> {
    let net = match plan.kind {
        Container::Namespaces => None,
        Container::Veth => {
            let rx = (!plan.rx_cpus.is_empty()).then_some(plan.rx_cpus.as_slice());
            Some(ContainerNet::create(journal, rx).map_err(|e| {
                LabError::Failed(format!("creating the server's container network: {e}"))
            })?)
        }
    };
    let containment = targets::Containment {
        netns: net.as_ref().map(ContainerNet::netns_path),
        listen: net
            .as_ref()
            .map_or(std::net::Ipv4Addr::LOCALHOST, ContainerNet::server_addr),
    };
    let cfgs = cfgs
        .iter()
        .map(|c| targets::SpawnConfig {
            container: Some(containment.clone()),
            ..c.clone()
        })
        .collect();
    Ok((cfgs, net))
}

/// What a run's record says about the container.
pub(crate) fn describe(plan: &ContainerPlan, net: Option<&ContainerNet>) -> ContainerFacts {
    let mut namespaces = vec!["mnt", "uts", "ipc"];
    if plan.kind == Container::Veth {
        namespaces.push("net");
    }
    ContainerFacts {
        kind: plan.kind,
        namespaces: namespaces.into_iter().map(String::from).collect(),
        network: net.map(|n| n.detail.clone()),
        rx_cpus: plan.rx_cpus.clone(),
        apply_us: net.map(|n| n.apply_us),
    }
}
