//! `host::isolate` on this host's real kernel (root needed; in CI, `CI=true`, a missing
//! privilege or tool fails the test instead of skipping it): cgroup groups hold a real
//! process and are gone after; an HTB class on the server side of a veth pair between two
//! network namespaces holds the rate; a crashed process's groups and qdisc are removed on
//! the next start. Rates are compared with generous margins; no wall-clock time is asserted.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use host::isolate::{revert_leftovers, Created, IsoJournal, Isolation, NetShape, Tasks};
use host::probe::HostRoot;

/// True when the test can run; outside CI without root it says why it does not.
fn privileged(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let tools = ["ip", "tc"]
        .iter()
        .all(|t| Command::new(t).arg("-V").output().is_ok());
    if root && tools {
        return true;
    }
    let why = if root { "ip and tc (iproute2)" } else { "root" };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what} needs {why}, which CI must provide");
    }
    eprintln!("NOT RUN: {what} needs {why}");
    false
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two network namespaces joined by a veth pair (`a` 10.199.N.1, `b` 10.199.N.2), deleted
/// on drop (their interfaces and qdiscs go with them).
struct Pair {
    a: String,
    b: String,
    dev_b: String,
    addr_b: Ipv4Addr,
}

impl Pair {
    fn new(tag: &str) -> Pair {
        let id = std::process::id();
        let (a, b) = (format!("tsi{tag}{id}a"), format!("tsi{tag}{id}b"));
        let (va, vb) = (format!("ti{tag}{id}a"), format!("ti{tag}{id}b"));
        let net = (id % 250) as u8;
        let addr_b = Ipv4Addr::new(10, 199, net, 2);
        sh(&["ip", "netns", "add", &a]);
        let p = Pair {
            a: a.clone(),
            b: b.clone(),
            dev_b: vb.clone(),
            addr_b,
        };
        sh(&["ip", "netns", "add", &b]);
        sh(&[
            "ip", "link", "add", &va, "netns", &a, "type", "veth", "peer", "name", &vb, "netns", &b,
        ]);
        sh(&[
            "ip",
            "-n",
            &a,
            "addr",
            "add",
            &format!("10.199.{net}.1/30"),
            "dev",
            &va,
        ]);
        sh(&[
            "ip",
            "-n",
            &b,
            "addr",
            "add",
            &format!("{addr_b}/30"),
            "dev",
            &vb,
        ]);
        sh(&["ip", "-n", &a, "link", "set", &va, "up"]);
        sh(&["ip", "-n", &b, "link", "set", &vb, "up"]);
        p
    }

    fn qdiscs(&self) -> String {
        let out = Command::new("tc")
            .args(["-n", &self.b, "qdisc", "show", "dev", &self.dev_b])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for n in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Moves the calling thread into network namespace `ns` (namespaces are per thread).
fn enter(ns: &str) {
    let f = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
    nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
}

/// Bits per second that `b` sends to `a` over one TCP connection, measured for `secs`
/// after a warm-up (which spends HTB's initial burst).
fn throughput_bps(p: &Pair, secs: f64) -> f64 {
    let (b, a, addr) = (p.b.clone(), p.a.clone(), p.addr_b);
    let (tx, rx) = std::sync::mpsc::channel();
    let sender = std::thread::spawn(move || {
        enter(&b);
        let l = TcpListener::bind((addr, 0)).unwrap();
        tx.send(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let buf = vec![7u8; 64 << 10];
        while s.write_all(&buf).is_ok() {}
    });
    let at: SocketAddr = rx.recv().unwrap();
    let receiver = std::thread::spawn(move || {
        enter(&a);
        let mut s = TcpStream::connect(at).unwrap();
        let mut buf = vec![0u8; 64 << 10];
        let warm = Instant::now();
        while warm.elapsed() < Duration::from_millis(400) {
            let _warming: usize = s.read(&mut buf).unwrap();
        }
        let t = Instant::now();
        let mut bytes = 0u64;
        while t.elapsed().as_secs_f64() < secs {
            bytes += s.read(&mut buf).unwrap() as u64;
        }
        bytes as f64 * 8.0 / t.elapsed().as_secs_f64()
    });
    let bps = receiver.join().unwrap();
    sender.join().unwrap();
    bps
}

#[test]
fn htb_on_the_server_side_of_a_veth_pair_holds_the_rate_and_is_removed() {
    if !privileged("a tc rate limit in a network namespace") {
        return;
    }
    let pair = Pair::new("r");
    let free = throughput_bps(&pair, 0.5);
    let rate = 8_000_000u64;
    assert!(
        free > 4.0 * rate as f64,
        "unshaped veth only {free:.0} bit/s"
    );
    let state = tempfile::tempdir().unwrap();
    let journal = IsoJournal::in_dir(state.path());
    let spec = Isolation {
        net: Some(NetShape::parse("8mbit", &format!("{}/{}", pair.b, pair.dev_b)).unwrap()),
        ..Isolation::default()
    };
    let iso = spec
        .check(&HostRoot::default(), Tasks::Processes)
        .unwrap()
        .apply(&journal, &[], &[])
        .unwrap();
    assert!(
        pair.qdiscs().contains("qdisc htb 7a5c: root"),
        "{}",
        pair.qdiscs()
    );
    let shaped = throughput_bps(&pair, 1.5);
    eprintln!("unshaped {free:.0} bit/s, through the 8 Mbit/s class {shaped:.0} bit/s");
    // HTB lets a burst through at the start (spent in the warm-up); beyond it the rate holds.
    assert!(
        shaped < 1.25 * rate as f64,
        "{shaped:.0} bit/s through an 8 Mbit/s class"
    );
    assert!(
        shaped > 0.5 * rate as f64,
        "{shaped:.0} bit/s: the class starves"
    );
    // A second run on the same interface is refused before it creates anything.
    let e = spec
        .check(&HostRoot::default(), Tasks::Processes)
        .unwrap_err();
    assert!(e.to_string().contains("shapes"), "{e}");
    iso.revert().unwrap();
    assert!(!pair.qdiscs().contains("htb"), "{}", pair.qdiscs());
    assert_eq!(journal.entries().unwrap(), vec![]);
}

/// A process of our own to put in groups.
fn sleeper() -> Child {
    Command::new("sleep").arg("120").spawn().unwrap()
}

fn cgroup_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap()
}

fn cgroup_dirs(journal: &IsoJournal) -> Vec<PathBuf> {
    journal
        .entries()
        .unwrap()
        .iter()
        .filter_map(|e| match &e.created {
            Created::Cgroup { dir, .. } => Some(PathBuf::from("/").join(dir)),
            _ => None,
        })
        .collect()
}

fn last_cpu() -> usize {
    host::placement::online_cpus() - 1
}

#[test]
fn real_cgroups_hold_a_process_and_are_gone_after() {
    if !privileged("cgroups on this host") {
        return;
    }
    let mut kid = sleeper();
    let pid = kid.id();
    let before = cgroup_of(pid);
    let state = tempfile::tempdir().unwrap();
    let journal = IsoJournal::in_dir(state.path());
    let spec = Isolation {
        cpus: vec![last_cpu()],
        memory_limit_bytes: Some(64 << 20),
        cpu_quota: Some(0.25),
        ..Isolation::default()
    };
    let iso = spec
        .check(&HostRoot::default(), Tasks::Processes)
        .unwrap()
        .apply(&journal, &[pid], &[])
        .unwrap();
    let inside = cgroup_of(pid);
    for c in ["memory", "cpuset", "cpu"] {
        assert!(
            inside
                .lines()
                .any(|l| l.contains(c) && l.contains("tailscope-"))
                || inside
                    .lines()
                    .any(|l| l.starts_with("0::") && l.contains("tailscope-")),
            "{c}: {inside}"
        );
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(
        status.contains(&format!("Cpus_allowed_list:\t{}\n", last_cpu())),
        "the cpuset narrowed the affinity: {status}"
    );
    let dirs = cgroup_dirs(&journal);
    assert!(!dirs.is_empty() && dirs.iter().all(|d| d.is_dir()));
    let limit = dirs
        .iter()
        .find_map(|d| {
            std::fs::read_to_string(d.join("memory.limit_in_bytes"))
                .or_else(|_| std::fs::read_to_string(d.join("memory.max")))
                .ok()
        })
        .unwrap();
    assert_eq!(limit.trim(), (64u64 << 20).to_string());
    assert_eq!(iso.mechanisms().len(), dirs.len());
    iso.revert().unwrap();
    assert_eq!(cgroup_of(pid), before, "back where it was");
    assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
    assert_eq!(journal.entries().unwrap(), vec![]);
    kid.kill().unwrap();
    kid.wait().unwrap();
}

const CRASH_ENV: &str = "HOST_TEST_REAL_CRASH_CHILD";

/// Child half of `a_killed_process_leaves_groups_and_a_qdisc_that_the_next_start_removes`.
#[test]
#[ignore = "child process of a_killed_process_leaves_groups_and_a_qdisc_that_the_next_start_removes"]
fn real_crash_child() {
    let Some(arg) = std::env::var_os(CRASH_ENV) else {
        return;
    };
    let arg = arg.into_string().unwrap();
    let mut it = arg.split('|');
    let (pid, state, dev) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
    let spec = Isolation {
        memory_limit_bytes: Some(64 << 20),
        cpu_quota: Some(0.5),
        net: Some(NetShape::parse("10mbit", dev).unwrap()),
        ..Isolation::default()
    };
    let iso = spec
        .check(&HostRoot::default(), Tasks::Processes)
        .unwrap()
        .apply(&IsoJournal::in_dir(state), &[pid.parse().unwrap()], &[])
        .unwrap();
    std::mem::forget(iso);
}

#[test]
fn a_killed_process_leaves_groups_and_a_qdisc_that_the_next_start_removes() {
    if !privileged("cgroups and tc on this host") {
        return;
    }
    let pair = Pair::new("c");
    let mut kid = sleeper();
    let pid = kid.id();
    let before = cgroup_of(pid);
    let state = tempfile::tempdir().unwrap();
    let journal = IsoJournal::in_dir(state.path());
    let arg = format!("{pid}|{}|{}/{}", state.path().display(), pair.b, pair.dev_b);
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "isolate_real::real_crash_child",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CRASH_ENV, arg)
        .status()
        .unwrap();
    assert!(status.success());
    let dirs = cgroup_dirs(&journal);
    assert!(!dirs.is_empty() && dirs.iter().all(|d| d.is_dir()));
    assert_ne!(cgroup_of(pid), before);
    assert!(pair.qdiscs().contains("7a5c:"), "{}", pair.qdiscs());
    let removed = revert_leftovers(&HostRoot::default(), &journal).unwrap();
    assert_eq!(removed, dirs.len() + 1);
    assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
    assert!(!pair.qdiscs().contains("htb"), "{}", pair.qdiscs());
    assert_eq!(cgroup_of(pid), before);
    assert_eq!(journal.entries().unwrap(), vec![]);
    kid.kill().unwrap();
    kid.wait().unwrap();
}
