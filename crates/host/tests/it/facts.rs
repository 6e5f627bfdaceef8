//! Host facts and CPU topology read from fixture trees: a bare-metal Xeon with SMT, NUMA and a
//! 20-way L3 (iso-v2), this project's VM layout without SMT (iso-v1), and a VM (vm).

use crate::common;

use common::fixture;
use host::facts;
use host::probe::HostRoot;
use host::topology::{choose, SmtPolicy, Topology};

#[test]
fn a_bare_metal_xeon() {
    let f = facts::read(&HostRoot::new(fixture("iso-v2")));
    assert_eq!(f.arch.as_deref(), Some("x86_64"));
    assert_eq!(
        f.cpu_model.as_deref(),
        Some("Intel(R) Xeon(R) CPU E5-2699 v4 @ 2.20GHz")
    );
    assert_eq!((f.cpus_online, f.cores, f.threads_per_core), (8, 4, 2));
    assert_eq!(f.smt_siblings, ["0,4", "1,5", "2,6", "3,7"]);
    let llc = f.llc.unwrap();
    assert_eq!((llc.level, llc.size_bytes, llc.ways), (3, 55 << 20, 20));
    assert_eq!(llc.shared_cpus, "0-7");
    assert_eq!(f.numa_nodes.len(), 2);
    assert_eq!(f.numa_nodes[1].cpus, "2-3,6-7");
    assert_eq!(f.kernel.as_deref(), Some("6.1.0-18-amd64"));
    assert_eq!(f.virtualisation, None);
    let v = serde_json::to_value(facts::read(&HostRoot::new(fixture("iso-v2")))).unwrap();
    for k in [
        "arch",
        "cpu_model",
        "llc",
        "smt_siblings",
        "numa_nodes",
        "kernel",
        "virtualisation",
    ] {
        assert!(v.get(k).is_some(), "{k} in {v}");
    }
}

#[test]
fn a_vm_says_so_and_lacks_what_it_lacks() {
    let f = facts::read(&HostRoot::new(fixture("vm")));
    assert_eq!(f.virtualisation.as_deref(), Some("unknown hypervisor"));
    assert_eq!(f.cpus_online, 2);
    assert_eq!(f.llc, None);
    assert!(f.numa_nodes.is_empty());
    // Not the real root: no architecture guessed from this binary.
    assert_eq!(f.arch, None);
}

#[test]
fn placement_by_physical_core() {
    let xeon = Topology::read(&HostRoot::new(fixture("iso-v2")));
    assert_eq!(
        xeon.cores,
        vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
    );
    // ThunderX Table V's "4–7" and "7–7" in small: 3 threads on 3 cores, or packed on 2.
    assert_eq!(
        choose(&xeon, &[], 3, SmtPolicy::DistinctCores).unwrap(),
        [0, 1, 2]
    );
    assert_eq!(
        choose(&xeon, &[], 3, SmtPolicy::Siblings).unwrap(),
        [0, 1, 4]
    );
    assert_eq!(
        choose(&xeon, &[1, 2, 5, 6], 2, SmtPolicy::Siblings).unwrap(),
        [1, 5]
    );
    let bare = Topology::read(&HostRoot::new(fixture("bare-metal")));
    assert_eq!(bare.cores, vec![vec![0, 1], vec![2, 3]]);
    assert!(choose(&bare, &[], 3, SmtPolicy::DistinctCores).is_err());
    // This VM's layout: every CPU a core of its own.
    let vm = Topology::read(&HostRoot::new(fixture("iso-v1")));
    assert_eq!(vm.threads_per_core(), 1);
    let e = choose(&vm, &[], 2, SmtPolicy::Siblings).unwrap_err();
    assert!(e.to_string().contains("no SMT siblings"), "{e}");
}
