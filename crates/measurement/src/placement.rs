//! A spawned server's shape beyond "one process on these CPUs": its CPUs chosen by physical
//! core (SMT siblings or not), several instances each on its own share of the CPUs (scale-out
//! against scale-up), and the isolation mechanisms (cgroup cpuset, memory limit, CPU quota,
//! an HTB rate, cache ways) checked before anything starts and applied once it runs.

use std::net::SocketAddr;

use host::isolate::{IsoJournal, Isolated, Isolation, IsolationPlan, NetShape, Tasks};
use host::probe::HostRoot;
use host::topology::{choose, Topology};
use load::Target;

use crate::error::{invalid, LabError};
use crate::observer::Observer;
use crate::target_spec::{SpawnSpec, WorkloadSpec};

/// Most instances of one server (each a process on its own port).
pub const MAX_INSTANCES: u32 = 64;

/// A byte count: `N`, or `N` with `K`, `M`, `G`, `T` (binary: 1K = 1024, as cgroup memory
/// limits count; `KiB`, `KB` and `k` mean the same), e.g. `512M`, `1.5G`.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit.trim_end_matches("ib").trim_end_matches('b');
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(format!("'{s}': expected bytes, e.g. 512M or 2G")),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a number of bytes"))?;
    let b = v * (1u64 << shift) as f64;
    if !(b.is_finite() && b >= 1.0 && b < 2f64.powi(63)) {
        return Err(format!("'{s}' is out of range"));
    }
    Ok(b.round() as u64)
}

/// `cpus` over `n` instances: contiguous shares of the list when it has at least `n` CPUs
/// (the first shares one larger when it does not divide), else instance `i` on
/// `cpus[i % len]`. Empty `cpus`: every instance unplaced.
pub(crate) fn shares(cpus: &[usize], n: usize) -> Vec<Vec<usize>> {
    if cpus.is_empty() {
        return vec![Vec::new(); n];
    }
    if cpus.len() < n {
        return (0..n).map(|i| vec![cpus[i % cpus.len()]]).collect();
    }
    let (base, extra) = (cpus.len() / n, cpus.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let len = base + usize::from(i < extra);
        out.push(cpus[at..at + len].to_vec());
        at += len;
    }
    out
}

/// The server's CPUs after its NUMA and SMT policies: `bind:N` keeps those of `s.cpus` on
/// node N (node N's when `s.cpus` is empty); then `workers` CPUs out of those (all online
/// CPUs when empty), one per physical core or packed onto siblings. Without either,
/// `s.cpus`.
pub(crate) fn server_cpus(s: &SpawnSpec, workers: usize) -> Result<Vec<usize>, LabError> {
    let root = HostRoot::default();
    let cpus = match &s.numa {
        None => s.cpus.clone(),
        Some(p) => p
            .server_cpus(&host::numa::Nodes::read(&root), &s.cpus)
            .map_err(invalid)?,
    };
    match s.smt {
        None => Ok(cpus),
        Some(p) => {
            let topo = Topology::read(&root);
            choose(&topo, &cpus, workers.max(1), p)
                .map_err(|e| invalid(format!("--server-smt {p}: {e}")))
        }
    }
}

/// One config per instance of the real server `k` that `s` describes, each validated (and
/// the binary found) before anything starts. `http2`: nginx speaks HTTP/2 with prior
/// knowledge (`h2c://`), or by ALPN over TLS (`h2://`); `tls`: the server speaks TLS.
pub(crate) fn spawn_configs(
    s: &SpawnSpec,
    k: targets::Kind,
    udp: bool,
    (http2, tls): (bool, bool),
    w: &WorkloadSpec,
) -> Result<Vec<targets::SpawnConfig>, LabError> {
    let n = s.instances.unwrap_or(1);
    if n == 0 || n > MAX_INSTANCES {
        return Err(invalid(format!(
            "--server-instances must be in 1..={MAX_INSTANCES}, got {n}"
        )));
    }
    let mut c = targets::SpawnConfig::new(k);
    c.threads = s.threads;
    c.sched = s.sched.clone();
    c.numa = s.numa.clone();
    c.udp = udp;
    c.memory_mb = s.memory_mb;
    c.open_file_cache = s.open_file_cache;
    c.http2 = http2 && k == targets::Kind::Nginx;
    c.tls = tls;
    if k == targets::Kind::Nginx {
        // One seed: every instance, and every run of a sweep, serves the same files.
        c.http_files = Some(w.file_size.files(w.files.unwrap_or(100), 1));
    }
    if udp && n > 1 && c.worker_threads() != 1 {
        return Err(invalid(
            "several memcached+udp instances need --server-threads 1: an instance's threads share one UDP queue, and the ideal has no model of several shared queues",
        ));
    }
    let cpus = server_cpus(s, c.worker_threads() as usize * n as usize)?;
    let nodes = host::numa::Nodes::read(&HostRoot::default());
    let out: Vec<targets::SpawnConfig> = shares(&cpus, n as usize)
        .into_iter()
        .map(|share| targets::SpawnConfig {
            numa: s.numa.as_ref().map(|p| p.for_cpus(&nodes, &share)),
            cpus: share,
            ..c.clone()
        })
        .collect();
    for x in &out {
        x.validate().map_err(invalid)?;
    }
    // Fail now, with the package to install, rather than after the run is set up.
    targets::find_binary(k).map_err(invalid)?;
    Ok(out)
}

/// The isolation `s` asks for (nothing when it asks for none).
pub(crate) fn isolation(s: &SpawnSpec) -> Result<Isolation, LabError> {
    let net = match (s.net_rate_bps, &s.net_dev) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(invalid(
                "--net-rate needs --net-dev (the interface on the server's path, [NETNS/]DEV)",
            ))
        }
        (Some(rate), Some(dev)) => {
            let (netns, dev) = host::isolate::parse_dev(dev).map_err(invalid)?;
            Some(NetShape {
                rate_bps: rate,
                dev,
                netns,
            })
        }
    };
    Ok(Isolation {
        cpus: s.cpuset.clone(),
        memory_limit_bytes: s.memory_limit_bytes,
        cpu_quota: s.cpu_quota,
        cpu_period_us: None,
        net,
        llc_ways: s.llc_ways,
    })
}

/// Checks `s`'s isolation against this host (exit 2 and nothing created when it cannot be
/// had, e.g. "llc-ways (cache allocation) unavailable: no resctrl").
pub(crate) fn check_isolation(
    s: &SpawnSpec,
    tasks: Tasks,
) -> Result<Option<IsolationPlan>, LabError> {
    let iso = isolation(s)?;
    if iso.is_empty() {
        return Ok(None);
    }
    iso.check(&HostRoot::default(), tasks)
        .map(Some)
        .map_err(|e| invalid(format!("isolation: {e}")))
}

/// Removes what a tailscope that died left (cgroups, a qdisc, resctrl groups) before a new
/// server starts; returns the journal the new isolation goes to. A leftover that cannot be
/// removed is reported, not fatal: it belongs to an earlier run.
pub(crate) fn clear_leftovers(obs: &dyn Observer) -> IsoJournal {
    let journal = IsoJournal::default_location();
    match host::isolate::revert_leftovers(&HostRoot::default(), &journal) {
        Ok(0) => {}
        Ok(n) => obs.note(&format!(
            "removed {n} cgroup/qdisc/resctrl leftover(s) of a tailscope that died"
        )),
        Err(e) => obs.note(&format!("could not remove isolation leftovers: {e}")),
    }
    journal
}

/// Starts every instance (those already started stop again if one fails: they drop).
pub(crate) fn start_instances(
    cfgs: &[targets::SpawnConfig],
    obs: &dyn Observer,
) -> Result<Vec<targets::Spawned>, LabError> {
    let mut v = Vec::with_capacity(cfgs.len());
    for cfg in cfgs {
        let s = targets::Spawned::start(cfg)?;
        obs.note(&format!(
            "spawned {} at {} ({} worker thread(s), CPUs {:?}); ready after {:.1} ms",
            s.version(),
            s.addr(),
            s.worker_threads(),
            cfg.cpus,
            s.ready_after().as_secs_f64() * 1e3
        ));
        v.push(s);
    }
    Ok(v)
}

/// Applies the checked isolation to the started server's processes or threads.
pub(crate) fn isolate(
    plan: &IsolationPlan,
    journal: &IsoJournal,
    pids: &[u32],
    tids: &[u32],
    obs: &dyn Observer,
) -> Result<Isolated, LabError> {
    let iso = plan.apply(journal, pids, tids)?;
    for m in iso.mechanisms() {
        obs.note(&format!(
            "isolation: {} ({}), applied in {:.2} ms",
            m.name,
            m.detail,
            m.apply_us / 1e3
        ));
    }
    Ok(iso)
}

/// `target` at each address of `spread` (just `target` when there is none).
pub(crate) fn each_instance(target: &Target, spread: &[SocketAddr]) -> Vec<Target> {
    if spread.is_empty() {
        return vec![target.clone()];
    }
    spread
        .iter()
        .map(|a| Target {
            addr: *a,
            ..target.clone()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes() {
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_bytes("64KiB").unwrap(), 64 << 10);
        assert_eq!(parse_bytes("1000").unwrap(), 1000);
        for b in ["", "x", "5P", "-1M", "0"] {
            assert!(parse_bytes(b).is_err(), "{b}");
        }
    }

    #[test]
    fn instance_shares() {
        assert_eq!(shares(&[0, 1, 2, 3], 2), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(shares(&[0, 1, 2], 2), vec![vec![0, 1], vec![2]]);
        assert_eq!(shares(&[1], 3), vec![vec![1], vec![1], vec![1]]);
        assert_eq!(shares(&[], 2), vec![Vec::<usize>::new(), vec![]]);
    }

    #[test]
    fn isolation_needs_its_interface() {
        let mut s = SpawnSpec {
            net_rate_bps: Some(1_000_000),
            ..SpawnSpec::default()
        };
        assert!(isolation(&s).unwrap_err().to_string().contains("--net-dev"));
        s.net_dev = Some("ns/veth0".into());
        let iso = isolation(&s).unwrap();
        let n = iso.net.unwrap();
        assert_eq!((n.netns.as_deref(), n.dev.as_str()), (Some("ns"), "veth0"));
        assert!(isolation(&SpawnSpec::default()).unwrap().is_empty());
    }
}
