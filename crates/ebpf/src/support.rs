//! Whether this host can run the collector, and if not, the one-line reason.
//!
//! Every file is read under a root path (`/` on a real host, a fixture tree in tests), as
//! `host` does, so the unsupported paths are tested on a host that supports everything. The
//! environment variable [`ROOT_ENV`] points a whole run at such a tree.

use std::path::{Path, PathBuf};

/// Environment variable naming the root under which support is checked (tests force the
/// unsupported paths with a fixture tree; unset: `/`).
pub const ROOT_ENV: &str = "TAILSCOPE_EBPF_ROOT";

/// Raw tracepoints the collector attaches to (category, name): none needs a kprobe.
pub const TRACEPOINTS: [(&str, &str); 7] = [
    ("sock", "sock_recv_length"),
    ("sock", "sock_send_length"),
    ("sock", "sk_data_ready"),
    ("net", "net_dev_queue"),
    ("sched", "sched_wakeup"),
    ("sched", "sched_switch"),
    ("sched", "sched_process_fork"),
];

/// System calls watched on their own tracepoints (`syscalls:sys_enter_CALL` and
/// `sys_exit_CALL`), and whether the collector needs them: the others are left out where
/// the kernel lacks them (`epoll_wait` on arm64, `epoll_pwait2` before Linux 5.11).
pub const SYSCALLS: [(&str, bool); 14] = [
    ("read", true),
    ("readv", true),
    ("recvfrom", true),
    ("recvmsg", true),
    ("recvmmsg", true),
    ("write", true),
    ("writev", true),
    ("sendto", true),
    ("sendmsg", true),
    ("sendmmsg", true),
    ("sendfile64", true),
    ("epoll_wait", false),
    ("epoll_pwait", true),
    ("epoll_pwait2", false),
];

/// Every tracepoint the collector needs (category, name): the raw ones and both of each
/// needed system call's.
pub fn required_tracepoints() -> Vec<(String, String)> {
    let raw = TRACEPOINTS
        .iter()
        .map(|(c, n)| (c.to_string(), n.to_string()));
    let calls = SYSCALLS
        .iter()
        .filter(|(_, need)| *need)
        .flat_map(|(call, _)| {
            ["enter", "exit"].map(|side| ("syscalls".to_string(), format!("sys_{side}_{call}")))
        });
    raw.chain(calls).collect()
}

/// Where tracefs is mounted, under a root: its own mount point, else debugfs's.
const TRACEFS_DIRS: [&str; 2] = ["sys/kernel/tracing", "sys/kernel/debug/tracing"];

/// Whether the kernel has tracepoint `category:name` (under [`root`]'s tracefs).
pub fn has_tracepoint(category: &str, name: &str) -> bool {
    let root = root();
    TRACEFS_DIRS.iter().any(|d| {
        root.join(d)
            .join("events")
            .join(category)
            .join(name)
            .is_dir()
    })
}

/// Why the collector cannot run here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unsupported {
    /// Loading BPF programs needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN).
    NotRoot,
    /// No kernel BTF: CO-RE cannot relocate the programs.
    NoBtf(PathBuf),
    /// tracefs is not mounted (and could not be, not being root or failing to).
    NoTracefs(String),
    /// The kernel lacks a tracepoint the collector needs (older than 6.3 for `sock:*_length`).
    NoTracepoint(String),
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsupported::NotRoot => f.write_str(
                "not root: loading eBPF programs needs CAP_BPF and CAP_PERFMON (run as root)",
            ),
            Unsupported::NoBtf(p) => write!(
                f,
                "no kernel BTF at {} (CONFIG_DEBUG_INFO_BTF): CO-RE cannot relocate the programs",
                p.display()
            ),
            Unsupported::NoTracefs(why) => write!(f, "tracefs not mounted: {why}"),
            Unsupported::NoTracepoint(tp) if tp.starts_with("syscalls:") => write!(
                f,
                "the kernel has no tracepoint {tp} (system call tracepoints need CONFIG_FTRACE_SYSCALLS)"
            ),
            Unsupported::NoTracepoint(tp) if tp.starts_with("sock:") => write!(
                f,
                "the kernel has no tracepoint {tp} (sock:sock_recv_length and sock_send_length need Linux 6.3)"
            ),
            Unsupported::NoTracepoint(tp) => write!(f, "the kernel has no tracepoint {tp}"),
        }
    }
}

/// `epoll_pwait2`'s number, the same on every architecture (a call numbered after 424 is).
pub const NR_EPOLL_PWAIT2: u64 = 441;

/// Whether a thread of the traced server is blocked in system call `nr` now, by
/// `/proc/TID/syscall` under `root` (its first field is the call's number, or "running"):
/// every thread of `tgids`, the threads `tids`, and the threads of `prefix.0` whose names
/// start with `prefix.1`. Read before the load starts, when a server's threads wait for
/// work in the call their event loop uses.
pub fn server_waits_in(
    root: &Path,
    tgids: &[u32],
    tids: &[u32],
    prefix: Option<&(u32, String)>,
    nr: u64,
) -> bool {
    let in_call = |task: &Path| {
        std::fs::read_to_string(task.join("syscall"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            == Some(nr)
    };
    let tasks = |pid: u32| -> Vec<PathBuf> {
        std::fs::read_dir(root.join(format!("proc/{pid}/task")))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let named = |task: &Path, p: &str| {
        std::fs::read_to_string(task.join("comm")).is_ok_and(|c| c.trim_end().starts_with(p))
    };
    tgids.iter().flat_map(|p| tasks(*p)).any(|t| in_call(&t))
        || tids
            .iter()
            .any(|t| in_call(&root.join(format!("proc/{t}"))))
        || prefix.is_some_and(|(pid, p)| tasks(*pid).iter().any(|t| named(t, p) && in_call(t)))
}

/// The root support is checked under: [`ROOT_ENV`] or `/`.
pub fn root() -> PathBuf {
    std::env::var_os(ROOT_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Checks the host (under [`root`]); on the real root, mounts tracefs at
/// `/sys/kernel/tracing` when it is missing and we are root.
pub fn check() -> Result<(), Unsupported> {
    check_at(&root())
}

/// Checks the tree under `root` (the real host when `root` is `/`).
pub fn check_at(root: &Path) -> Result<(), Unsupported> {
    check_with(root, &required_tracepoints())
}

/// Tracepoints the noise contributors' timer ([`crate::contrib`]) needs; the x86 system
/// vectors (`irq_vectors:*`) are used where the kernel has them.
pub const CONTRIB_TRACEPOINTS: [(&str, &str); 5] = [
    ("irq", "irq_handler_entry"),
    ("irq", "irq_handler_exit"),
    ("irq", "softirq_entry"),
    ("irq", "softirq_exit"),
    ("sched", "sched_switch"),
];

/// Whether this host (under [`root`]) can run the noise contributors' timer.
pub fn check_contrib() -> Result<(), Unsupported> {
    check_contrib_at(&root())
}

/// Whether this host (under [`root`]) can run the hard-IRQ counter ([`crate::irqcount`]):
/// root, BTF, and tracefs with at least the device lines' tracepoint. Mounts tracefs when it
/// is missing, as [`check`] does: without it every attach point would look absent and the
/// counter would load no program at all — it would count nothing and say nothing (issue 36,
/// where a fresh VM has no tracefs mounted until something mounts it).
pub fn check_irqcount() -> Result<(), Unsupported> {
    check_with(
        &root(),
        &[("irq".to_string(), "irq_handler_entry".to_string())],
    )
}

/// [`check_contrib`] under `root`.
pub fn check_contrib_at(root: &Path) -> Result<(), Unsupported> {
    let tps: Vec<(String, String)> = CONTRIB_TRACEPOINTS
        .iter()
        .map(|(c, n)| (c.to_string(), n.to_string()))
        .collect();
    check_with(root, &tps)
}

fn check_with(root: &Path, tracepoints: &[(String, String)]) -> Result<(), Unsupported> {
    if !privileged(root) {
        return Err(Unsupported::NotRoot);
    }
    let btf = root.join("sys/kernel/btf/vmlinux");
    if !btf.is_file() {
        return Err(Unsupported::NoBtf(PathBuf::from("/sys/kernel/btf/vmlinux")));
    }
    let tracing = tracefs(root)?;
    for (cat, name) in tracepoints {
        if !tracing.join("events").join(cat).join(name).is_dir() {
            return Err(Unsupported::NoTracepoint(format!("{cat}:{name}")));
        }
    }
    Ok(())
}

/// Effective capabilities hold CAP_SYS_ADMIN, or both CAP_BPF and CAP_PERFMON.
fn privileged(root: &Path) -> bool {
    let status = std::fs::read_to_string(root.join("proc/self/status")).unwrap_or_default();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    const SYS_ADMIN: u64 = 1 << 21;
    const PERFMON: u64 = 1 << 38;
    const BPF: u64 = 1 << 39;
    caps & SYS_ADMIN != 0 || (caps & PERFMON != 0 && caps & BPF != 0)
}

/// The tracefs directory under `root`, mounting it on the real root when we may.
fn tracefs(root: &Path) -> Result<PathBuf, Unsupported> {
    for dir in TRACEFS_DIRS {
        let p = root.join(dir);
        if p.join("events").is_dir() {
            return Ok(p);
        }
    }
    let target = root.join("sys/kernel/tracing");
    if root != Path::new("/") {
        return Err(Unsupported::NoTracefs(format!(
            "no events under {}",
            target.display()
        )));
    }
    // One mount at a time in this process; another (a second tailscope, a test binary beside
    // this one) may mount it at the same moment: its EBUSY means it is there, or soon will be.
    static MOUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MOUNTING.lock().unwrap_or_else(|p| p.into_inner());
    if target.join("events").is_dir() {
        return Ok(target);
    }
    if let Err(e) = mount_tracefs(&target) {
        let mounted_meanwhile = e.raw_os_error() == Some(libc::EBUSY)
            && (0..100).any(|_| {
                std::thread::sleep(std::time::Duration::from_millis(10));
                target.join("events").is_dir()
            });
        if !mounted_meanwhile {
            return Err(Unsupported::NoTracefs(format!(
                "mounting it at {} failed: {e}",
                target.display()
            )));
        }
    }
    if target.join("events").is_dir() {
        Ok(target)
    } else {
        Err(Unsupported::NoTracefs(format!(
            "mounted at {} but it has no events",
            target.display()
        )))
    }
}

fn mount_tracefs(target: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(target.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let fstype = c"tracefs";
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call; data
    // may be NULL for tracefs.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            path.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_waits_in_a_call_when_one_of_its_threads_is_blocked_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let task = |pid: u32, tid: u32, comm: &str, syscall: &str| {
            let d = dir.path().join(format!("proc/{pid}/task/{tid}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
            std::fs::write(d.join("syscall"), syscall).unwrap();
            let lone = dir.path().join(format!("proc/{tid}"));
            std::fs::create_dir_all(&lone).unwrap();
            std::fs::write(lone.join("syscall"), syscall).unwrap();
        };
        task(
            100,
            100,
            "memcached",
            "232 0x1a 0x7f 0x400 0xffffffff 0x0 0x0 0x7ffd 0x7f12\n",
        );
        task(100, 101, "mc-worker", "running\n");
        task(
            200,
            200,
            "tailscope",
            "441 0x3 0x7f 0x40 0x7ffd 0x0 0x8 0x7ffd 0x7f12\n",
        );
        task(
            200,
            201,
            "ts-srv-0",
            "232 0x5 0x7f 0x40 0xffffffff 0x0 0x0 0x7ffd 0x7f12\n",
        );
        let root = dir.path();
        let p2 = NR_EPOLL_PWAIT2;
        assert!(!server_waits_in(root, &[100], &[], None, p2));
        assert!(server_waits_in(root, &[100], &[], None, 232));
        assert!(
            server_waits_in(root, &[200], &[], None, p2),
            "every thread of a tgid"
        );
        assert!(
            !server_waits_in(root, &[], &[201], None, p2),
            "only the threads named"
        );
        assert!(server_waits_in(root, &[], &[200], None, p2));
        let builtin = (200, "ts-srv".to_string());
        assert!(
            !server_waits_in(root, &[], &[], Some(&builtin), p2),
            "the generator is not"
        );
        assert!(server_waits_in(root, &[], &[], Some(&builtin), 232));
        assert!(
            !server_waits_in(root, &[300], &[300], None, 232),
            "no such process"
        );
    }

    #[test]
    fn this_process_is_seen_waiting_in_its_call() {
        // A thread of this process blocked in read(2) on a pipe: /proc says so, and the
        // check reads the real /proc.
        let mut fds = [0i32; 2];
        // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            let mut b = [0u8; 1];
            // SAFETY: `b` is a valid one-byte buffer; fds[0] is the pipe's open read end.
            unsafe { libc::read(fds[0], b.as_mut_ptr().cast(), 1) };
        });
        let tid = rx.recv().unwrap();
        let nr = libc::SYS_read as u64;
        let seen = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            server_waits_in(Path::new("/"), &[], &[tid], None, nr)
        });
        let other = server_waits_in(Path::new("/"), &[], &[tid], None, NR_EPOLL_PWAIT2);
        // SAFETY: fds[1] is the pipe's open write end; one byte from a valid buffer.
        unsafe { libc::write(fds[1], b"x".as_ptr().cast(), 1) };
        h.join().unwrap();
        // SAFETY: both descriptors are open and closed once.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        assert!(seen, "thread {tid} never read as blocked in read(2)");
        assert!(!other, "blocked in read(2), not in epoll_pwait2");
    }

    fn tree(caps: &str, btf: bool, events: &[(String, String)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc/self")).unwrap();
        std::fs::write(
            d.path().join("proc/self/status"),
            format!("Name:\tx\nCapEff:\t{caps}\n"),
        )
        .unwrap();
        if btf {
            std::fs::create_dir_all(d.path().join("sys/kernel/btf")).unwrap();
            std::fs::write(d.path().join("sys/kernel/btf/vmlinux"), b"btf").unwrap();
        }
        for (c, n) in events {
            std::fs::create_dir_all(d.path().join("sys/kernel/tracing/events").join(c).join(n))
                .unwrap();
        }
        d
    }

    const ROOT_CAPS: &str = "000001ffffffffff";

    #[test]
    fn a_complete_host_is_supported() {
        let d = tree(ROOT_CAPS, true, &required_tracepoints());
        assert_eq!(check_at(d.path()), Ok(()));
    }

    #[test]
    fn each_missing_piece_is_named() {
        let all = required_tracepoints();
        let d = tree("0000000000000000", true, &all);
        assert_eq!(check_at(d.path()), Err(Unsupported::NotRoot));
        // CAP_BPF + CAP_PERFMON without CAP_SYS_ADMIN is enough.
        let d = tree("000000c000000000", true, &all);
        assert_eq!(check_at(d.path()), Ok(()));
        let d = tree(ROOT_CAPS, false, &all);
        assert!(matches!(check_at(d.path()), Err(Unsupported::NoBtf(_))));
        let d = tree(ROOT_CAPS, true, &[]);
        let e = check_at(d.path()).unwrap_err();
        assert!(matches!(e, Unsupported::NoTracefs(_)), "{e}");
        let d = tree(ROOT_CAPS, true, &all[2..]);
        let e = check_at(d.path()).unwrap_err();
        assert_eq!(
            e,
            Unsupported::NoTracepoint("sock:sock_recv_length".into()),
            "{e}"
        );
        assert!(e.to_string().contains("6.3"));
        // A needed system call's tracepoint, not an optional one.
        let no_read: Vec<_> = all
            .iter()
            .filter(|(_, n)| n != "sys_exit_read")
            .cloned()
            .collect();
        let e = check_at(tree(ROOT_CAPS, true, &no_read).path()).unwrap_err();
        assert_eq!(
            e,
            Unsupported::NoTracepoint("syscalls:sys_exit_read".into())
        );
        assert!(e.to_string().contains("CONFIG_FTRACE_SYSCALLS"), "{e}");
        assert!(!all.iter().any(|(_, n)| n.contains("epoll_pwait2")));
    }

    #[test]
    fn the_contributors_timer_needs_only_irq_and_sched_tracepoints() {
        let irq: Vec<(String, String)> = CONTRIB_TRACEPOINTS
            .iter()
            .map(|(c, n)| (c.to_string(), n.to_string()))
            .collect();
        assert_eq!(check_contrib_at(tree(ROOT_CAPS, true, &irq).path()), Ok(()));
        // The stage collector's sock tracepoints are not needed; a missing softirq one is
        // named, without the sock tracepoints' kernel version.
        let e = check_contrib_at(tree(ROOT_CAPS, true, &irq[..2]).path()).unwrap_err();
        assert_eq!(e, Unsupported::NoTracepoint("irq:softirq_entry".into()));
        assert!(!e.to_string().contains("6.3"), "{e}");
        assert_eq!(
            check_contrib_at(tree("0", true, &irq).path()),
            Err(Unsupported::NotRoot)
        );
    }
}
