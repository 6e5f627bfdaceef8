//! What a platform comparison needs to know about the host a run measured on (the Xeon vs
//! ThunderX study compares exactly these): architecture, CPU model, last-level cache size and
//! ways, SMT siblings, NUMA nodes, kernel and virtualisation. Read under a [`HostRoot`] so the
//! facts of a bare-metal Xeon or an ARM server are tested on fixture trees.

use serde::Serialize;

use crate::probe::{format_cpu_list, online_cpus, HostRoot};
use crate::topology::Topology;

/// The last-level cache as `cpu0/cache/indexN` describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Cache {
    pub level: u32,
    pub size_bytes: u64,
    /// `ways_of_associativity` (0 when the kernel does not say).
    pub ways: u32,
    /// CPUs sharing it (`shared_cpu_list`).
    pub shared_cpus: String,
}

/// One NUMA node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: String,
}

/// The facts stored with every run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostFacts {
    /// `x86_64`, `aarch64`, …
    pub arch: Option<String>,
    pub cpu_model: Option<String>,
    pub cpus_online: usize,
    pub cores: usize,
    pub threads_per_core: usize,
    /// Each physical core's logical CPUs (`0,4`).
    pub smt_siblings: Vec<String>,
    pub llc: Option<Cache>,
    pub numa_nodes: Vec<NumaNode>,
    pub kernel: Option<String>,
    /// None on bare metal; the hypervisor when one shows (`kvm`, `xen`, `vmware`, …) or
    /// `unknown hypervisor`.
    pub virtualisation: Option<String>,
}

/// `32768K`, `1M`, `512` (bytes) → bytes.
fn size_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok().map(|n| n * mult)
}

/// The highest-level data or unified cache of CPU `cpu`.
pub fn last_level_cache(root: &HostRoot, cpu: usize) -> Option<Cache> {
    let dir = format!("sys/devices/system/cpu/cpu{cpu}/cache");
    root.list(&dir)
        .iter()
        .filter(|n| n.starts_with("index"))
        .filter_map(|n| {
            let f = |x: &str| root.read_trim(format!("{dir}/{n}/{x}")).ok();
            if f("type").as_deref() == Some("Instruction") {
                return None;
            }
            Some(Cache {
                level: f("level")?.parse().ok()?,
                size_bytes: size_bytes(&f("size")?)?,
                ways: f("ways_of_associativity")
                    .and_then(|w| w.parse().ok())
                    .unwrap_or(0),
                shared_cpus: f("shared_cpu_list").unwrap_or_default(),
            })
        })
        .max_by_key(|c| (c.level, c.size_bytes))
}

fn cpuinfo_field<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// x86's `model name`; ARM's `Hardware` or implementer and part numbers.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    if let Some(m) = cpuinfo_field(cpuinfo, "model name") {
        return Some(m.to_string());
    }
    if let Some(h) = cpuinfo_field(cpuinfo, "Hardware") {
        return Some(h.to_string());
    }
    let imp = cpuinfo_field(cpuinfo, "CPU implementer")?;
    let part = cpuinfo_field(cpuinfo, "CPU part").unwrap_or("?");
    let vendor = match imp {
        "0x41" => "Arm",
        "0x43" => "Cavium",
        "0x48" => "HiSilicon",
        "0x50" => "Ampere (APM)",
        "0xc0" => "Ampere",
        "0x51" => "Qualcomm",
        _ => "implementer",
    };
    Some(format!("{vendor} {imp} part {part}"))
}

fn virtualisation(root: &HostRoot, cpuinfo: &str) -> Option<String> {
    if let Ok(t) = root.read_trim("sys/hypervisor/type") {
        if !t.is_empty() {
            return Some(t);
        }
    }
    let hyper = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|w| w == "hypervisor"));
    let dmi = ["sys_vendor", "product_name"]
        .iter()
        .filter_map(|f| root.read_trim(format!("sys/class/dmi/id/{f}")).ok())
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase();
    let known = [
        ("kvm", "kvm"),
        ("qemu", "kvm"),
        ("vmware", "vmware"),
        ("virtualbox", "virtualbox"),
        ("microsoft", "hyper-v"),
        ("xen", "xen"),
        ("amazon ec2", "kvm (amazon ec2)"),
        ("google", "kvm (google compute engine)"),
        ("firecracker", "firecracker"),
    ];
    match known.iter().find(|(k, _)| dmi.contains(k)) {
        Some((_, v)) => Some(v.to_string()),
        None if hyper => Some("unknown hypervisor".into()),
        None => None,
    }
}

/// Every fact readable under `root` (missing files leave their field empty).
pub fn read(root: &HostRoot) -> HostFacts {
    let cpuinfo = root.read("proc/cpuinfo").unwrap_or_default();
    let online = online_cpus(root).unwrap_or_default();
    let topo = Topology::read(root);
    let numa_nodes = crate::numa::node_dirs(root)
        .into_iter()
        .map(|(id, cpus)| NumaNode {
            id,
            cpus: if cpus.is_empty() {
                String::new()
            } else {
                format_cpu_list(&cpus)
            },
        })
        .collect();
    HostFacts {
        // Kernels before 6.1 have no kernel/arch; on the real root the architecture this
        // binary was built for is the one it runs on.
        arch: root.read_trim("proc/sys/kernel/arch").ok().or_else(|| {
            (root.as_path() == std::path::Path::new("/")).then(|| std::env::consts::ARCH.into())
        }),
        cpu_model: cpu_model(&cpuinfo),
        cpus_online: online.len(),
        cores: topo.cores.len(),
        threads_per_core: topo.threads_per_core(),
        smt_siblings: topo.sibling_lists(),
        llc: online.first().and_then(|&c| last_level_cache(root, c)),
        numa_nodes,
        kernel: root.read_trim("proc/sys/kernel/osrelease").ok(),
        virtualisation: virtualisation(root, &cpuinfo),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_models() {
        assert_eq!(size_bytes("32768K"), Some(32 << 20));
        assert_eq!(size_bytes("16M"), Some(16 << 20));
        assert_eq!(size_bytes("512"), Some(512));
        assert_eq!(size_bytes("x"), None);
        let arm = "processor\t: 0\nCPU implementer\t: 0x43\nCPU part\t: 0x0a1\n";
        assert_eq!(cpu_model(arm).unwrap(), "Cavium 0x43 part 0x0a1");
        assert_eq!(
            cpu_model("model name\t: Intel(R) Xeon(R)\n").unwrap(),
            "Intel(R) Xeon(R)"
        );
    }

    #[test]
    fn this_host_has_facts() {
        let f = read(&HostRoot::default());
        assert!(f.cpus_online >= 1);
        assert!(f.arch.is_some());
        assert!(f.kernel.is_some());
        assert_eq!(f.smt_siblings.len(), f.cores);
    }
}
