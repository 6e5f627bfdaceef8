//! A container's network for a spawned server (ThunderX Fig. 8, Table VI): a network
//! namespace of its own reached over a veth pair, as LXC's default network gives a container
//! (LXC adds a bridge on the host side; here the host end of the pair is addressed directly).
//! The server is started inside it by the caller (`setns` between fork and exec, see the
//! `targets` crate) together with mount, UTS and IPC namespaces of its own.
//!
//! The receive side of both ends can be steered to chosen CPUs with RPS
//! (`queues/rx-0/rps_cpus`): a veth has no hardware interrupt, its packets are processed in
//! the `NET_RX` softirq of the CPU that RPS names (by default the sending CPU). That places
//! the network processing of the server's traffic on the server's core or off it, which is
//! what ThunderX's Table VI varies with its interrupt cores.
//!
//! Like every isolation mechanism, the namespace is journalled before it is made and removed
//! when the guard drops, or by [`super::revert_leftovers`] after a crash.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use super::journal::{Created, IsoEntry, IsoJournal};
use crate::mitigate::{now_ms, start_ticks};
use crate::HostError;

/// The namespaces' name prefix; a namespace is `tailscope-ctr-N`.
const PREFIX: &str = "tailscope-ctr-";
/// How many namespaces may exist at once (each takes a /30 of 10.213.0.0/16).
const SLOTS: u32 = 16_384;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A container network in force: removed on drop.
#[derive(Debug)]
pub struct ContainerNet {
    name: String,
    slot: u32,
    journal: IsoJournal,
    session: String,
    removed: bool,
    /// What was set up, for the run's record.
    pub detail: String,
    /// Time to create it, µs.
    pub apply_us: f64,
}

/// Runs `ip ARGS`; its stderr as the error.
fn ip(args: &[&str]) -> Result<(), HostError> {
    let bin = super::net::tool_path("ip").ok_or_else(|| HostError::Unavailable {
        what: "container network".into(),
        reason: "ip is not installed (apt-get install iproute2)".into(),
    })?;
    let shown = format!("ip {}", args.join(" "));
    let out = Command::new(bin)
        .args(args)
        .output()
        .map_err(|e| HostError::Command {
            command: shown.clone(),
            stderr: e.to_string(),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(HostError::Command {
            command: shown,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The hexadecimal CPU mask of `rps_cpus` for `cpus` (CPU 0 is bit 0).
pub fn rps_mask(cpus: &[usize]) -> String {
    let top = cpus.iter().copied().max().unwrap_or(0);
    let mut words = vec![0u32; top / 32 + 1];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    // The kernel's bitmap format: 32-bit words, most significant first, comma-separated.
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The addresses of slot `n`: (host end, container end), in 10.213.0.0/16, one /30 each.
pub fn slot_addrs(n: u32) -> (Ipv4Addr, Ipv4Addr) {
    let base = u32::from(Ipv4Addr::new(10, 213, 0, 0)) + (n % SLOTS) * 4;
    (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2))
}

impl ContainerNet {
    /// Creates a network namespace with a veth pair (host end `tsh-N`, container end
    /// `tsc-N`), addresses both ends and brings them (and the namespace's loopback) up. With
    /// `rx_cpus`, both ends' receive processing runs on those CPUs (RPS).
    pub fn create(journal: &IsoJournal, rx_cpus: Option<&[usize]>) -> Result<Self, HostError> {
        let t = std::time::Instant::now();
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let session = format!("{pid}-{}-ctr{n}", now_ms());
        // A namespace name is taken atomically by `ip netns add`: the first free slot wins,
        // so two tailscope processes never share one. Each container of this process starts
        // its search elsewhere, so that a sweep's next one does not wait for the kernel to
        // finish tearing down the last.
        let start = pid.wrapping_mul(7).wrapping_add(n.wrapping_mul(64)) % SLOTS;
        let hr = crate::probe::HostRoot::default();
        let root = std::path::absolute(hr.as_path()).unwrap_or_else(|_| hr.as_path().into());
        let mut last = None;
        for k in 0..64 {
            let slot = (start + k) % SLOTS;
            let name = format!("{PREFIX}{slot}");
            journal.append(&IsoEntry {
                session: session.clone(),
                pid,
                start_ticks: start_ticks(pid),
                root: root.clone(),
                time_unix_ms: now_ms(),
                created: Created::Netns { name: name.clone() },
            })?;
            match ip(&["netns", "add", &name]) {
                Ok(()) => {
                    let mut c = ContainerNet {
                        name,
                        slot,
                        journal: journal.clone(),
                        session,
                        removed: false,
                        detail: String::new(),
                        apply_us: 0.0,
                    };
                    c.wire(rx_cpus)?;
                    c.apply_us = t.elapsed().as_secs_f64() * 1e6;
                    return Ok(c);
                }
                Err(e) => {
                    // Not ours: forget the line (the namespace belongs to someone else).
                    journal.remove(|x| {
                        x.session == session && x.created == Created::Netns { name: name.clone() }
                    })?;
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| HostError::Unavailable {
            what: "container network".into(),
            reason: "no free namespace slot".into(),
        }))
    }

    fn wire(&mut self, rx_cpus: Option<&[usize]>) -> Result<(), HostError> {
        let (h, c) = slot_addrs(self.slot);
        let (hd, cd) = (self.host_dev(), format!("tsc-{}", self.slot));
        let ns = self.name.clone();
        ip(&["link", "add", &hd, "type", "veth", "peer", "name", &cd])?;
        if let Some(cpus) = rx_cpus {
            // Set while both ends are in this namespace's sysfs; the setting stays with the
            // device when it moves.
            let mask = rps_mask(cpus);
            for d in [&hd, &cd] {
                let path = format!("/sys/class/net/{d}/queues/rx-0/rps_cpus");
                std::fs::write(&path, &mask).map_err(|e| HostError::File {
                    op: "write",
                    path: path.into(),
                    source: e,
                    hint: "",
                })?;
            }
        }
        ip(&["link", "set", &cd, "netns", &ns])?;
        ip(&["addr", "add", &format!("{h}/30"), "dev", &hd])?;
        ip(&["link", "set", &hd, "up"])?;
        ip(&["-n", &ns, "addr", "add", &format!("{c}/30"), "dev", &cd])?;
        ip(&["-n", &ns, "link", "set", &cd, "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        self.detail = format!(
            "network namespace {ns}, veth {hd} {h} <-> {cd} {c}{}",
            match rx_cpus {
                Some(cpus) => format!(", receive processing (RPS) on CPUs {cpus:?}"),
                None => String::new(),
            }
        );
        Ok(())
    }

    fn host_dev(&self) -> String {
        format!("tsh-{}", self.slot)
    }

    /// The namespace's file, to `setns` into.
    pub fn netns_path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// The namespace's name (`ip netns`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The container end's address: where the server listens.
    pub fn server_addr(&self) -> Ipv4Addr {
        slot_addrs(self.slot).1
    }

    /// Removes the namespace (its veth pair goes with it) and the journal line.
    pub fn remove(mut self) -> Result<(), HostError> {
        self.undo()
    }

    fn undo(&mut self) -> Result<(), HostError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        remove_netns(&self.name)?;
        self.journal.remove(|e| e.session == self.session)
    }
}

impl Drop for ContainerNet {
    fn drop(&mut self) {
        let _ = self.undo();
    }
}

/// Deletes namespace `name` (gone already: fine). The host end of its veth pair disappears
/// with the container end once no process keeps the namespace alive.
pub(crate) fn remove_netns(name: &str) -> Result<(), HostError> {
    // The pair goes first, synchronously: a namespace's own teardown is asynchronous, and
    // the host end would keep its name (and address) for a while after `netns del`.
    if let Some(slot) = name.strip_prefix(PREFIX) {
        let host_end = format!("tsh-{slot}");
        if PathBuf::from("/sys/class/net").join(&host_end).exists() {
            ip(&["link", "del", &host_end])?;
        }
    }
    if !PathBuf::from("/run/netns").join(name).exists() {
        return Ok(());
    }
    ip(&["netns", "del", name])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rps_masks_are_the_kernels_bitmap_format() {
        assert_eq!(rps_mask(&[0]), "00000001");
        assert_eq!(rps_mask(&[1]), "00000002");
        assert_eq!(rps_mask(&[0, 1]), "00000003");
        assert_eq!(rps_mask(&[33]), "00000002,00000000");
    }

    #[test]
    fn slots_get_disjoint_30s_in_10_213() {
        assert_eq!(
            slot_addrs(0),
            (Ipv4Addr::new(10, 213, 0, 1), Ipv4Addr::new(10, 213, 0, 2))
        );
        assert_eq!(
            slot_addrs(64),
            (Ipv4Addr::new(10, 213, 1, 1), Ipv4Addr::new(10, 213, 1, 2))
        );
        assert_eq!(slot_addrs(SLOTS), slot_addrs(0));
        let (_, last) = slot_addrs(SLOTS - 1);
        assert_eq!(last, Ipv4Addr::new(10, 213, 255, 254));
    }

    /// A namespace journalled by a process that died (SIGKILL: no drop) is removed by the
    /// next start's `revert_leftovers`. Needs root (CI's); elsewhere `ip netns add` must be
    /// the thing refused.
    #[test]
    fn a_dead_processes_namespace_is_removed_at_the_next_start() {
        let dir = tempfile::tempdir().unwrap();
        let journal = IsoJournal::in_dir(dir.path());
        let name = format!("{PREFIX}test-{}", std::process::id());
        if let Err(e) = ip(&["netns", "add", &name]) {
            // SAFETY: geteuid has no preconditions.
            assert_ne!(unsafe { libc::geteuid() }, 0, "root, yet: {e}");
            return;
        }
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        dead.wait().unwrap();
        let hr = crate::probe::HostRoot::default();
        journal
            .append(&IsoEntry {
                session: "gone".into(),
                pid: dead.id(),
                start_ticks: Some(1),
                root: std::path::absolute(hr.as_path()).unwrap(),
                time_unix_ms: 0,
                created: Created::Netns { name: name.clone() },
            })
            .unwrap();
        assert!(PathBuf::from("/run/netns").join(&name).exists());
        assert_eq!(super::super::revert_leftovers(&hr, &journal).unwrap(), 1);
        assert!(!PathBuf::from("/run/netns").join(&name).exists());
        assert_eq!(journal.entries().unwrap(), vec![]);
    }
}
