//! NUMA placement of a server (Tales of the Tail §4.5, Fig. 9): its memory bound to one node
//! with its CPUs taken from that node, or its memory interleaved over several nodes.
//!
//! The nodes and their CPUs are read under a [`HostRoot`] (`sys/devices/system/node/nodeN/
//! cpulist`), so multi-node hosts are tested on fixture trees. The policy itself is set with
//! `set_mempolicy(2)` in the server's process before it `exec`s; the kernel keeps a task's
//! policy across `execve`, and `/proc/PID/numa_maps` then names it on every mapping
//! (`bind:0`, `interleave:0-1`), which is how [`policies_in_numa_maps`] checks it.
//!
//! Written against the raw system call rather than a crate: libnuma's bindings need the C
//! library installed, and the one call needed between `fork` and `exec` must not allocate.

use std::fmt;
use std::io;
use std::str::FromStr;

use crate::error::HostError;
use crate::probe::{cpu_list, online_cpus, HostRoot};

/// `MPOL_BIND` and `MPOL_INTERLEAVE` of `linux/mempolicy.h`.
const MPOL_BIND: libc::c_int = 2;
const MPOL_INTERLEAVE: libc::c_int = 3;
/// Nodes a mask holds (the kernel's MAX_NUMNODES is at most 1024).
pub const MAX_NODES: usize = 1024;
const MASK_WORDS: usize = MAX_NODES / (8 * std::mem::size_of::<libc::c_ulong>());

/// A node mask as `set_mempolicy` reads it.
pub type NodeMask = [libc::c_ulong; MASK_WORDS];

/// Where a server's memory goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NumaPolicy {
    /// Memory only from this node, and the server's CPUs restricted to the node's.
    Bind(u32),
    /// Memory spread page by page over these nodes (CPUs unchanged).
    Interleave(Vec<u32>),
    /// Each instance's memory bound to the node of its first CPU (Tales §4.5's fix: one
    /// instance per node, each allocating locally); see [`NumaPolicy::for_cpus`].
    Local,
}

impl FromStr for NumaPolicy {
    type Err = HostError;
    /// `bind:N`, `interleave:N,M,…` (node ids; ranges like `0-3` allowed) or `local`.
    fn from_str(s: &str) -> Result<Self, HostError> {
        let bad = || HostError::BadRequest {
            what: "NUMA policy".into(),
            reason: format!(
                "'{s}': expected bind:NODE, interleave:NODES (e.g. 0,1 or 0-3) or local"
            ),
        };
        if s.trim() == "local" {
            return Ok(NumaPolicy::Local);
        }
        match s.trim().split_once(':') {
            Some(("bind", n)) => n.trim().parse().map(NumaPolicy::Bind).map_err(|_| bad()),
            Some(("interleave", ns)) => {
                let nodes = cpu_list(ns).filter(|v| !v.is_empty()).ok_or_else(bad)?;
                let nodes: Vec<u32> = nodes
                    .into_iter()
                    .map(u32::try_from)
                    .collect::<Result<_, _>>()
                    .map_err(|_| bad())?;
                Ok(NumaPolicy::Interleave(nodes))
            }
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for NumaPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NumaPolicy::Bind(n) => write!(f, "bind:{n}"),
            NumaPolicy::Interleave(ns) => {
                let ns: Vec<String> = ns.iter().map(u32::to_string).collect();
                write!(f, "interleave:{}", ns.join(","))
            }
            NumaPolicy::Local => f.write_str("local"),
        }
    }
}

/// `sys/devices/system/node/node*` under `root`: each node's id and CPUs (`cpulist`; none
/// when unreadable), in directory order; empty on a kernel without NUMA support.
pub fn node_dirs(root: &HostRoot) -> Vec<(u32, Vec<usize>)> {
    root.list("sys/devices/system/node")
        .iter()
        .filter_map(|n| {
            let id = n.strip_prefix("node")?.parse().ok()?;
            let cpus = root
                .read(format!("sys/devices/system/node/{n}/cpulist"))
                .ok()
                .and_then(|s| cpu_list(&s))
                .unwrap_or_default();
            Some((id, cpus))
        })
        .collect()
}

/// The host's NUMA nodes and their CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nodes {
    /// (node id, its CPUs), by id.
    pub nodes: Vec<(u32, Vec<usize>)>,
}

impl Nodes {
    /// Reads `sys/devices/system/node/node*/cpulist`. A kernel without NUMA support has no
    /// such directory: then the host is one node 0 holding every online CPU.
    pub fn read(root: &HostRoot) -> Nodes {
        let mut nodes = node_dirs(root);
        if nodes.is_empty() {
            nodes.push((0, online_cpus(root).unwrap_or_default()));
        }
        nodes.sort_by_key(|n| n.0);
        Nodes { nodes }
    }

    /// The CPUs of `node`, if it exists.
    pub fn cpus_of(&self, node: u32) -> Option<&[usize]> {
        self.nodes
            .iter()
            .find(|n| n.0 == node)
            .map(|n| n.1.as_slice())
    }

    /// The node holding `cpu`.
    pub fn node_of_cpu(&self, cpu: usize) -> Option<u32> {
        self.nodes.iter().find(|n| n.1.contains(&cpu)).map(|n| n.0)
    }
}

impl NumaPolicy {
    fn invalid(&self, reason: String) -> HostError {
        HostError::BadRequest {
            what: format!("--server-numa {self}"),
            reason,
        }
    }

    /// The nodes the policy names (none for `local`, which names them per instance).
    pub fn nodes(&self) -> Vec<u32> {
        match self {
            NumaPolicy::Bind(n) => vec![*n],
            NumaPolicy::Interleave(ns) => ns.clone(),
            NumaPolicy::Local => Vec::new(),
        }
    }

    /// The policy for one server instance on `cpus`: `local` becomes `bind` to the node of
    /// its first CPU (the first node when it is not pinned); the others stay as they are.
    pub fn for_cpus(&self, nodes: &Nodes, cpus: &[usize]) -> NumaPolicy {
        match self {
            NumaPolicy::Local => NumaPolicy::Bind(
                cpus.first()
                    .and_then(|&c| nodes.node_of_cpu(c))
                    .or_else(|| nodes.nodes.first().map(|n| n.0))
                    .unwrap_or(0),
            ),
            p => p.clone(),
        }
    }

    /// The server's CPUs under this policy, from the CPUs it was given (`server_cpus`, empty
    /// for anywhere): for `bind`, those of the node (all of the node's when none were
    /// given); for `interleave`, unchanged. Refuses nodes the host lacks, a node without
    /// CPUs, and given CPUs of which none is on the bound node.
    pub fn server_cpus(
        &self,
        nodes: &Nodes,
        server_cpus: &[usize],
    ) -> Result<Vec<usize>, HostError> {
        let have: Vec<String> = nodes.nodes.iter().map(|n| n.0.to_string()).collect();
        for n in self.nodes() {
            if nodes.cpus_of(n).is_none() {
                return Err(self.invalid(format!(
                    "this host has no node {n} (its nodes: {})",
                    have.join(", ")
                )));
            }
            if n as usize >= MAX_NODES {
                return Err(self.invalid(format!("node {n} is beyond {MAX_NODES}")));
            }
        }
        match self {
            NumaPolicy::Interleave(_) | NumaPolicy::Local => Ok(server_cpus.to_vec()),
            NumaPolicy::Bind(n) => {
                let on_node = nodes.cpus_of(*n).unwrap_or_default();
                let cpus: Vec<usize> = if server_cpus.is_empty() {
                    on_node.to_vec()
                } else {
                    server_cpus
                        .iter()
                        .copied()
                        .filter(|c| on_node.contains(c))
                        .collect()
                };
                if cpus.is_empty() {
                    return Err(self.invalid(format!(
                        "none of the server's CPUs {server_cpus:?} is on node {n} (its CPUs: {on_node:?})"
                    )));
                }
                Ok(cpus)
            }
        }
    }

    /// The mode and node mask for `set_mempolicy`.
    pub fn raw(&self) -> (libc::c_int, NodeMask) {
        let mut mask: NodeMask = [0; MASK_WORDS];
        let bits = 8 * std::mem::size_of::<libc::c_ulong>();
        for n in self.nodes() {
            let n = n as usize;
            if n < MAX_NODES {
                mask[n / bits] |= 1 << (n % bits);
            }
        }
        let mode = match self {
            // `local` is resolved per instance (`for_cpus`) before it is set; unresolved it
            // binds to nothing, which the kernel refuses rather than guessing.
            NumaPolicy::Bind(_) | NumaPolicy::Local => MPOL_BIND,
            NumaPolicy::Interleave(_) => MPOL_INTERLEAVE,
        };
        (mode, mask)
    }
}

/// `set_mempolicy(mode, mask)` for the calling thread (and what it forks and execs). Makes one
/// system call and does not allocate, so it is safe between `fork` and `exec`.
pub fn set_mempolicy(mode: libc::c_int, mask: &NodeMask) -> io::Result<()> {
    // SAFETY: the kernel reads MAX_NODES bits from `mask`, which holds exactly that many;
    // maxnode is one more than the bits to read, as the system call counts.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_set_mempolicy,
            mode,
            mask.as_ptr(),
            (MAX_NODES + 1) as libc::c_ulong,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The distinct memory policies `/proc/PID/numa_maps` names (its second column:
/// `default`, `bind:0`, `interleave:0-1`, `prefer:1`, …), in first-seen order.
pub fn policies_in_numa_maps(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(p) = line.split_whitespace().nth(1) {
            if !out.iter().any(|q| q == p) {
                out.push(p.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(nodes: &[(u32, &str)]) -> (tempfile::TempDir, HostRoot) {
        let dir = tempfile::tempdir().unwrap();
        for (id, cpus) in nodes {
            let d = dir.path().join(format!("sys/devices/system/node/node{id}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cpulist"), format!("{cpus}\n")).unwrap();
        }
        let d = dir.path().join("sys/devices/system/cpu");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("online"), "0-7\n").unwrap();
        let root = HostRoot::new(dir.path());
        (dir, root)
    }

    #[test]
    fn parses_and_prints_policies() {
        assert_eq!("bind:1".parse::<NumaPolicy>().unwrap(), NumaPolicy::Bind(1));
        let i: NumaPolicy = "interleave:0-2".parse().unwrap();
        assert_eq!(i, NumaPolicy::Interleave(vec![0, 1, 2]));
        assert_eq!(i.to_string(), "interleave:0,1,2");
        assert_eq!(i.to_string().parse::<NumaPolicy>().unwrap(), i);
        for bad in ["", "bind", "bind:x", "interleave:", "locale", "bind:-1"] {
            assert!(bad.parse::<NumaPolicy>().is_err(), "{bad}");
        }
    }

    #[test]
    fn bind_takes_the_nodes_cpus_on_a_two_node_fixture() {
        let (_d, root) = fixture(&[(0, "0-3"), (1, "4-7")]);
        let nodes = Nodes::read(&root);
        assert_eq!(nodes.node_of_cpu(5), Some(1));
        let bind1 = NumaPolicy::Bind(1);
        assert_eq!(bind1.server_cpus(&nodes, &[]).unwrap(), vec![4, 5, 6, 7]);
        assert_eq!(bind1.server_cpus(&nodes, &[3, 4, 6]).unwrap(), vec![4, 6]);
        let e = bind1.server_cpus(&nodes, &[0, 1]).unwrap_err().to_string();
        assert!(e.contains("none of the server's CPUs"), "{e}");
        let e = NumaPolicy::Bind(2)
            .server_cpus(&nodes, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no node 2") && e.contains("0, 1"), "{e}");
        let il = NumaPolicy::Interleave(vec![0, 1]);
        assert_eq!(il.server_cpus(&nodes, &[2, 5]).unwrap(), vec![2, 5]);
        let (mode, mask) = il.raw();
        assert_eq!((mode, mask[0], mask[1]), (MPOL_INTERLEAVE, 0b11, 0));
        let (mode, mask) = NumaPolicy::Bind(65).raw();
        assert_eq!((mode, mask[0], mask[1]), (MPOL_BIND, 0, 0b10));
        let local: NumaPolicy = "local".parse().unwrap();
        assert_eq!(local.for_cpus(&nodes, &[6, 7]), NumaPolicy::Bind(1));
        assert_eq!(local.for_cpus(&nodes, &[2]), NumaPolicy::Bind(0));
        assert_eq!(local.for_cpus(&nodes, &[]), NumaPolicy::Bind(0));
        assert_eq!(il.for_cpus(&nodes, &[6]), il);
        assert_eq!(local.server_cpus(&nodes, &[1, 5]).unwrap(), vec![1, 5]);
    }

    #[test]
    fn a_kernel_without_numa_is_one_node_of_every_cpu() {
        let (_d, root) = fixture(&[]);
        let nodes = Nodes::read(&root);
        assert_eq!(nodes.nodes, vec![(0, (0..8).collect::<Vec<_>>())]);
    }

    #[test]
    fn numa_maps_policies_are_read() {
        let text = "55a0 bind:0 file=/usr/bin/x mapped=2 N0=2\n\
                    55b0 bind:0 anon=3 N0=3\n7f00 interleave:0-1 anon=1 N1=1\n";
        assert_eq!(
            policies_in_numa_maps(text),
            vec!["bind:0", "interleave:0-1"]
        );
    }

    /// Binding a child to node 0 is real on any Linux host with NUMA support: the child's
    /// `numa_maps` says so after `exec`.
    #[test]
    fn a_bound_child_shows_its_policy_in_numa_maps() {
        use std::os::unix::process::CommandExt;
        if !std::path::Path::new("/proc/self/numa_maps").exists() {
            // A kernel built without NUMA has neither the file nor the system call; this
            // host's facts decide whether that may happen (CI's host has both).
            assert!(
                std::env::var("CI").is_err(),
                "CI host without /proc/self/numa_maps"
            );
            return;
        }
        let (mode, mask) = NumaPolicy::Bind(0).raw();
        let mut cmd = std::process::Command::new("cat");
        cmd.arg("/proc/self/numa_maps");
        // SAFETY: set_mempolicy makes one system call and does not allocate.
        unsafe {
            cmd.pre_exec(move || set_mempolicy(mode, &mask));
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(policies_in_numa_maps(&text), vec!["bind:0"], "{text}");
    }
}
