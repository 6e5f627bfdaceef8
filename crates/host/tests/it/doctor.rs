//! `host::probe` against fixture trees (bare metal untuned and tuned, a VM like the one this
//! was written on) and against the real `/`.

use crate::common;

use std::collections::BTreeMap;
use std::fs;

use common::{copy_fixture, fixture};
use host::probe::{run_checks, Check, DoctorConfig, HostRoot, Status};
use host::HostError;

use Status::{Bad, Ok as Good, Unknown, Warn};

fn checks_at(root: HostRoot, cpus: &[usize], pid: Option<u32>) -> BTreeMap<String, Check> {
    let cfg = DoctorConfig {
        root,
        pid,
        cpus: cpus.to_vec(),
    };
    run_checks(&cfg)
        .unwrap()
        .into_iter()
        .map(|c| (c.id.clone(), c))
        .collect()
}

fn checks(name: &str, cpus: &[usize], pid: Option<u32>) -> BTreeMap<String, Check> {
    checks_at(HostRoot::new(fixture(name)), cpus, pid)
}

/// Expected status per check: (id, bare-metal, tuned, vm). Bare metal and tuned are checked
/// with server CPUs 2-3 and the server pid 4242, the VM with all CPUs and no pid. Every row
/// has at least two different statuses.
const TABLE: &[(&str, Status, Status, Option<Status>)] = &[
    ("cpu_governor", Warn, Good, Some(Unknown)),
    ("turbo", Warn, Good, Some(Unknown)),
    ("cpuidle", Bad, Good, Some(Good)),
    ("smt", Warn, Good, Some(Good)),
    ("irqbalance", Warn, Good, Some(Good)),
    ("irq_affinity", Warn, Good, Some(Warn)),
    ("rps_xps", Warn, Good, Some(Good)),
    ("isolation", Warn, Good, Some(Warn)),
    ("numa", Warn, Good, Some(Unknown)),
    ("numa_balancing", Warn, Good, Some(Good)),
    ("thp", Warn, Good, Some(Good)),
    ("swap", Warn, Good, Some(Good)),
    ("timer_migration", Warn, Good, Some(Warn)),
    ("watchdog", Warn, Good, Some(Warn)),
    ("virtualisation", Good, Good, Some(Warn)),
    ("rt_throttling", Warn, Good, Some(Warn)),
    ("cpu_contention", Warn, Good, Some(Warn)),
    ("server_sched", Warn, Good, None),
    ("server_runqueue_wait", Warn, Good, None),
];

#[test]
fn every_check_flips_between_fixtures() {
    let bare = checks("bare-metal", &[2, 3], Some(4242));
    let tuned = checks("tuned", &[2, 3], Some(4242));
    let vm = checks("vm", &[], None);
    assert_eq!(bare.len(), TABLE.len(), "{:?}", bare.keys());
    assert_eq!(vm.len(), TABLE.len() - 2, "server_* checks need a pid");
    for &(id, b, t, v) in TABLE {
        assert_eq!(bare[id].status, b, "bare-metal {id}: {}", bare[id].evidence);
        assert_eq!(tuned[id].status, t, "tuned {id}: {}", tuned[id].evidence);
        assert!(
            b != t || v.is_some_and(|v| v != b),
            "{id} must flip between fixtures"
        );
        match v {
            Some(v) => assert_eq!(vm[id].status, v, "vm {id}: {}", vm[id].evidence),
            None => assert!(!vm.contains_key(id)),
        }
        for c in [&bare[id], &tuned[id]] {
            assert!(
                !c.evidence.is_empty() && !c.mitigation.is_empty() && !c.tradeoff.is_empty(),
                "{c:?}"
            );
        }
    }
}

#[test]
fn evidence_names_what_was_read() {
    let bare = checks("bare-metal", &[2, 3], Some(4242));
    let ev = |id: &str| bare[id].evidence.clone();
    assert!(
        ev("cpu_governor").contains("cpu2=powersave"),
        "{}",
        ev("cpu_governor")
    );
    assert!(
        ev("cpuidle").contains("C6 on cpu2, exit latency 133 us"),
        "{}",
        ev("cpuidle")
    );
    assert!(ev("cpuidle").contains("C1=2us") && ev("cpuidle").contains("C1E=10us"));
    assert!(
        ev("irq_affinity").contains("122 (eth0-TxRx-2) -> 0-3, 90551 on server CPUs"),
        "{}",
        ev("irq_affinity")
    );
    assert!(ev("rps_xps").contains("eth0/rx-3/rps_cpus=f"));
    assert!(ev("irqbalance").contains("pid 812"));
    assert!(
        ev("numa").contains("pages per node {0: 2700, 1: 500}, 2700 of 3200 remote"),
        "{}",
        ev("numa")
    );
    assert!(
        ev("rt_throttling").contains("stopped for 50 ms in every 1000 ms"),
        "{}",
        ev("rt_throttling")
    );
    assert!(
        ev("cpu_contention").contains("900 (stress) on cpu2"),
        "{}",
        ev("cpu_contention")
    );
    assert!(
        !ev("cpu_contention").contains("kworker"),
        "sleeping tasks do not count"
    );
    assert!(
        ev("server_sched").contains("4243 (tailscope-w0) other nice -20"),
        "{}",
        ev("server_sched")
    );
    assert!(
        ev("server_runqueue_wait").contains("4243: 0.00% waiting"),
        "{}",
        ev("server_runqueue_wait")
    );
    assert!(ev("server_runqueue_wait").contains("400.0 us mean wait per slice"));
    let tuned = checks("tuned", &[2, 3], Some(4242));
    assert!(tuned["server_sched"].evidence.contains("fifo:50"));
    assert!(tuned["cpuidle"].evidence.contains("C6=133us (disabled)"));
    let vm = checks("vm", &[], None);
    assert!(
        vm["irq_affinity"].evidence.contains("38 (virtio2-input.0)"),
        "{}",
        vm["irq_affinity"].evidence
    );
    assert!(!vm["irq_affinity"].evidence.contains("virtio2-config"));
    assert!(vm["virtualisation"].evidence.contains("hypervisor flag"));
}

#[test]
fn server_cpus_change_the_verdicts() {
    // Tuned host, but the "server" is said to run on every CPU: IRQs and isolation now miss.
    let all = checks("tuned", &[], Some(4242));
    assert_eq!(all["irq_affinity"].status, Warn);
    assert_eq!(all["isolation"].status, Warn);
    assert!(all["isolation"].evidence.contains("no --cpus"));
    // Untuned host, server on CPUs 0-1 (performance, and on the node holding most pages).
    let low = checks("bare-metal", &[0, 1], Some(4242));
    assert_eq!(low["cpu_governor"].status, Good);
    assert_eq!(low["numa"].status, Warn, "{}", low["numa"].evidence);
    assert_eq!(low["cpu_contention"].status, Good, "stress runs on cpu2");
}

#[test]
fn single_unreadable_file_makes_one_check_unknown() {
    let dir = copy_fixture("tuned");
    let r = dir.path();
    fs::remove_file(r.join("proc/cmdline")).unwrap();
    fs::create_dir(r.join("proc/cmdline")).unwrap();
    fs::write(
        r.join("sys/kernel/mm/transparent_hugepage/enabled"),
        [0xff, 0xfe],
    )
    .unwrap();
    fs::write(r.join("proc/sys/kernel/timer_migration"), "garbage\n").unwrap();
    let c = checks_at(HostRoot::new(r), &[2, 3], Some(4242));
    assert_eq!(
        c["isolation"].status, Unknown,
        "{}",
        c["isolation"].evidence
    );
    assert!(c["isolation"].evidence.contains("proc/cmdline"));
    assert_eq!(c["thp"].status, Unknown);
    assert_eq!(c["timer_migration"].status, Unknown);
    assert!(c["timer_migration"].evidence.contains("\"garbage\""));
    assert_eq!(c["cpu_governor"].status, Good, "others unaffected");
}

#[test]
fn steal_time_turns_virtualisation_bad() {
    let dir = copy_fixture("vm");
    fs::write(
        dir.path().join("proc/stat"),
        "cpu  1000 0 0 8000 0 0 0 1000 0 0\ncpu0 1000 0 0 8000 0 0 0 1000 0 0\n",
    )
    .unwrap();
    let c = checks_at(HostRoot::new(dir.path()), &[], None);
    assert_eq!(c["virtualisation"].status, Bad);
    assert!(
        c["virtualisation"].evidence.contains("(10.00%)"),
        "{}",
        c["virtualisation"].evidence
    );
}

#[test]
fn bad_input_is_an_error_naming_it() {
    let empty = tempfile::tempdir().unwrap();
    let cfg = |root: HostRoot, cpus: Vec<usize>, pid| DoctorConfig { root, pid, cpus };
    match run_checks(&cfg(HostRoot::new(empty.path()), vec![], None)) {
        Err(e @ HostError::NoProc { .. }) => assert!(e.to_string().contains("no proc/")),
        other => panic!("{other:?}"),
    }
    match run_checks(&cfg(
        HostRoot::new(fixture("bare-metal")),
        vec![],
        Some(4243),
    )) {
        Err(e @ HostError::NoSuchPid { pid: 4243, .. }) => assert!(e.to_string().contains("4243")),
        other => panic!("{other:?}"),
    }
    match run_checks(&cfg(
        HostRoot::new(fixture("bare-metal")),
        vec![1, 4, 9],
        None,
    )) {
        Err(e @ HostError::UnknownCpus { .. }) => {
            assert_eq!(
                e.to_string(),
                "unknown CPU id(s) [4, 9]: the host's online CPUs are 0-3"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn json_shape_matches_the_interface() {
    let c = checks("vm", &[], None);
    let v = serde_json::to_value(&c["cpuidle"]).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys.len(), 7);
    for k in [
        "id",
        "status",
        "evidence",
        "mitigation",
        "tradeoff",
        "needs_root",
        "needs_reboot",
    ] {
        assert!(keys.contains(&k), "{k}");
    }
    assert_eq!(v["status"], "ok");
    assert_eq!(serde_json::to_value(Status::Unknown).unwrap(), "unknown");
    assert_eq!(serde_json::to_value(Status::Bad).unwrap(), "bad");
    assert!(c["isolation"].needs_reboot);
    let report = host::probe::Report {
        checks: c.into_values().collect(),
    };
    let doc = serde_json::to_value(&report).unwrap();
    assert_eq!(doc["checks"].as_array().unwrap().len(), TABLE.len() - 2);
}

#[test]
fn real_root_never_panics() {
    let me = std::process::id();
    let c = checks_at(HostRoot::default(), &[], Some(me));
    assert_eq!(c.len(), TABLE.len());
    for check in c.values() {
        assert!(!check.evidence.is_empty(), "{check:?}");
    }
    // This process exists and is not realtime.
    assert_ne!(
        c["server_sched"].status, Good,
        "{}",
        c["server_sched"].evidence
    );
}
