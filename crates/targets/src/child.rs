//! The child process: placement applied between `fork` and `exec`, and an orderly stop.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use host::numa::{NodeMask, NumaPolicy};
use host::placement::SchedSpec;

/// What the child does before `exec`. Everything is prepared in the parent (the CPU mask is
/// built, the spec copied), so the closure makes only system calls, which is all that is
/// safe between `fork` and `exec` in a multi-threaded parent.
#[derive(Clone, Copy)]
struct Setup {
    parent: libc::pid_t,
    cpus: Option<libc::cpu_set_t>,
    sched: Option<(libc::c_int, libc::c_int)>,
    nice: Option<libc::c_int>,
    /// `set_mempolicy`'s mode and node mask.
    mempolicy: Option<(libc::c_int, NodeMask)>,
    /// A container: `unshare` flags, and the network namespace's descriptor to `setns` into
    /// (opened by the parent, kept open until the child has been spawned).
    unshare: libc::c_int,
    netns_fd: Option<libc::c_int>,
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Setup {
    fn new(
        cpus: &[usize],
        sched: Option<&SchedSpec>,
        numa: Option<&NumaPolicy>,
        container: Option<&Container>,
    ) -> Self {
        // Without CPUs of its own, the server may run where tailscope could when it started,
        // not where the forking thread is placed now (off the server's CPUs, issue 37).
        let cpus = if cpus.is_empty() {
            original_affinity()
        } else {
            cpus
        };
        let cpus = (!cpus.is_empty()).then(|| {
            // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            for &c in cpus {
                // CPU ids were validated against the online count; CPU_SET ignores ids
                // beyond the set's capacity.
                // SAFETY: CPU_SET writes inside `set`.
                unsafe { libc::CPU_SET(c, &mut set) };
            }
            set
        });
        let (sched, nice) = match sched {
            None => (None, None),
            Some(SchedSpec::Other { nice }) => (Some((libc::SCHED_OTHER, 0)), Some(*nice)),
            Some(SchedSpec::Fifo { prio }) => (Some((libc::SCHED_FIFO, *prio)), None),
            Some(SchedSpec::Rr { prio }) => (Some((libc::SCHED_RR, *prio)), None),
        };
        Setup {
            // SAFETY: getpid has no preconditions.
            parent: unsafe { libc::getpid() },
            cpus,
            sched,
            nice,
            mempolicy: numa.map(NumaPolicy::raw),
            unshare: if container.is_some() {
                libc::CLONE_NEWNS | libc::CLONE_NEWUTS | libc::CLONE_NEWIPC
            } else {
                0
            },
            netns_fd: container.and_then(|c| c.netns_fd),
        }
    }

    /// Runs in the child. Only async-signal-safe calls, no allocation.
    fn apply(&self) -> io::Result<()> {
        // SAFETY: plain system calls on the calling (only) thread of the forked child, with
        // pointers to locals that live across each call.
        unsafe {
            // The server dies with us even if we are SIGKILLed (no Drop then). SIGTERM, not
            // SIGKILL: nginx's master then still stops its workers.
            check(libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            ))?;
            // The parent may have died between fork and prctl.
            if libc::getppid() != self.parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            if let Some(set) = &self.cpus {
                check(libc::sched_setaffinity(
                    0,
                    std::mem::size_of::<libc::cpu_set_t>(),
                    set,
                ))?;
            }
            if let Some((policy, prio)) = self.sched {
                let param = libc::sched_param {
                    sched_priority: prio,
                };
                check(libc::sched_setscheduler(0, policy, &param))?;
            }
            if let Some(nice) = self.nice {
                check(libc::setpriority(libc::PRIO_PROCESS, 0, nice))?;
            }
            if let Some(fd) = self.netns_fd {
                check(libc::setns(fd, libc::CLONE_NEWNET))?;
            }
            if self.unshare != 0 {
                check(libc::unshare(self.unshare))?;
            }
        }
        if let Some((mode, mask)) = &self.mempolicy {
            // Kept across exec: the server's every thread allocates under it.
            host::numa::set_mempolicy(*mode, mask)?;
        }
        Ok(())
    }
}

/// The container a child enters: the open network namespace's descriptor, if any.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Container {
    pub(crate) netns_fd: Option<libc::c_int>,
}

/// Makes `cmd` start in its own process group (so a stop reaches nginx's workers and the
/// terminal's Ctrl-C reaches only tailscope, which then stops the server itself) with the
/// given CPU set, scheduling and memory policy.
pub(crate) fn configure(
    cmd: &mut Command,
    cpus: &[usize],
    sched: Option<&SchedSpec>,
    numa: Option<&NumaPolicy>,
    container: Option<&Container>,
) {
    let setup = Setup::new(cpus, sched, numa, container);
    cmd.process_group(0);
    // SAFETY: `Setup::apply` only makes async-signal-safe system calls and does not
    // allocate; `setup` is Copy and moved into the closure before the fork.
    unsafe {
        cmd.pre_exec(move || setup.apply());
    }
}

type Job = (Command, Sender<io::Result<Child>>);

/// The one thread that forks every server. `PR_SET_PDEATHSIG` fires when the *thread* that
/// forked the child exits, not the process; forking from a thread that lives as long as the
/// process makes it mean "when tailscope dies", whichever thread started the server.
static SPAWNER: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();

/// The spawner thread's id, once it runs.
static SPAWNER_TID: OnceLock<u32> = OnceLock::new();

/// The CPUs this process could run on when it first started a server (or asked): what a
/// server without CPUs of its own gets, whatever the affinity of the thread that forks it.
static ORIGINAL: OnceLock<Vec<usize>> = OnceLock::new();

fn original_affinity() -> &'static [usize] {
    ORIGINAL.get_or_init(|| host::placement::current_thread_affinity().unwrap_or_default())
}

/// The thread that forks the servers, when it has started: placed off the server's CPUs
/// with the rest of tailscope's threads (`host::placement::pin_thread`).
pub fn spawner_tid() -> Option<u32> {
    SPAWNER_TID.get().copied()
}

/// Spawns `cmd` on the spawner thread.
pub(crate) fn spawn(cmd: Command) -> io::Result<Child> {
    original_affinity();
    let jobs = SPAWNER.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        std::thread::Builder::new()
            .name("tailscope-spawner".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                let _ = SPAWNER_TID.set(unsafe { libc::gettid() } as u32);
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .map_or_else(|_| Mutex::new(channel().0), |_| Mutex::new(tx))
    });
    let (reply, answer) = channel();
    let gone = || io::Error::other("the spawner thread is not running");
    jobs.lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((cmd, reply))
        .map_err(|_| gone())?;
    answer.recv().map_err(|_| gone())?
}

fn signal(pid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: kill has no memory preconditions; ESRCH (already gone) is fine.
    unsafe { libc::kill(pid, sig) };
}

/// True once `pid` (our child) has exited, without reaping it: while it is a zombie its pid
/// (and process-group id) cannot be reused, so signalling the group stays safe.
pub(crate) fn has_exited(pid: libc::pid_t) -> bool {
    // SAFETY: siginfo_t is plain data; waitid writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to `info`; WNOWAIT leaves the child waitable.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is valid to read after a successful waitid with WEXITED.
    rc != 0 || unsafe { info.si_pid() } != 0
}

/// How long the wake-up connection of [`terminate`] may take to be accepted.
const WAKE_TIMEOUT: Duration = Duration::from_millis(50);

/// SIGTERM, up to `grace` for the process to exit, then SIGKILL to its whole process
/// group; reaps it. Returns the exit status and whether SIGKILL was needed.
///
/// `wake`: the server's listening address, connected to once right after SIGTERM. memcached
/// notes the signal in its handler but looks at the note only when its main event loop comes
/// round, and that loop waits for its next event: the once-a-second clock tick when idle, so
/// a stop took 0–1 s (0.33 s measured; 18 ms with the connection). A connection is such an
/// event. Servers that act on the signal at once are not affected by it.
pub(crate) fn terminate(
    child: &mut Child,
    grace: Duration,
    wake: Option<SocketAddr>,
) -> io::Result<(ExitStatus, bool)> {
    let pid = child.id() as libc::pid_t;
    let mut forced = false;
    if !has_exited(pid) {
        signal(pid, libc::SIGTERM);
        if let Some(addr) = wake {
            // Refused or timed out only means the server is already going.
            drop(TcpStream::connect_timeout(&addr, WAKE_TIMEOUT));
        }
        let deadline = Instant::now() + grace;
        while !has_exited(pid) {
            if Instant::now() >= deadline {
                forced = true;
                signal(-pid, libc::SIGKILL);
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    if !forced {
        // Anything the server left behind in its group (the zombie holds the group id).
        signal(-pid, libc::SIGKILL);
    }
    let status = child.wait()?;
    Ok((status, forced))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn sigterm_first_then_sigkill_after_the_grace() {
        let mut c = sh("exec sleep 30");
        configure(&mut c, &[], None, None, None);
        let mut child = spawn(c).unwrap();
        let (status, forced) = terminate(&mut child, Duration::from_secs(30), None).unwrap();
        assert!(!forced);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));

        let mut c = sh("trap '' TERM; sleep 30");
        configure(&mut c, &[], None, None, None);
        let mut child = spawn(c).unwrap();
        let pid = child.id();
        // Let the shell install its trap first (otherwise SIGTERM would simply work).
        let term_ignored = || {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            let mask = status
                .lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .map(|m| u64::from_str_radix(m.trim(), 16).unwrap())
                .unwrap();
            mask & (1 << (libc::SIGTERM - 1)) != 0
        };
        while !term_ignored() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let (status, forced) = terminate(&mut child, Duration::from_millis(200), None).unwrap();
        assert!(forced);
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }

    /// A server like memcached: it notes SIGTERM but acts on it only at its next event. It
    /// exits with 7 when a connection comes after the signal; without the wake-up connection
    /// it would be killed after the grace.
    #[test]
    fn the_wake_up_connection_comes_after_sigterm() {
        use std::io::BufRead;
        use std::os::unix::process::ExitStatusExt;
        let script = "import signal, socket, sys\n\
                      seen = []\n\
                      signal.signal(signal.SIGTERM, lambda *a: seen.append(1))\n\
                      s = socket.socket()\n\
                      s.bind(('127.0.0.1', 0))\n\
                      s.listen(8)\n\
                      print(s.getsockname()[1], flush=True)\n\
                      while True:\n    \
                          c, _ = s.accept()\n    \
                          if seen: sys.exit(7)\n";
        let mut c = Command::new("python3");
        c.args(["-c", script]);
        c.stdout(std::process::Stdio::piped());
        configure(&mut c, &[], None, None, None);
        let mut child = spawn(c).unwrap();
        let mut line = String::new();
        let out = child.stdout.take().unwrap();
        std::io::BufReader::new(out).read_line(&mut line).unwrap();
        let port: u16 = line.trim().parse().unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let (status, forced) = terminate(&mut child, Duration::from_secs(20), Some(addr)).unwrap();
        assert!(!forced, "killed after the grace: {status:?}");
        assert_eq!((status.code(), status.signal()), (Some(7), None));
    }

    #[test]
    fn placement_is_applied_before_exec() {
        let mut c = sh("grep -E '^Cpus_allowed_list' /proc/self/status; cat /proc/self/stat");
        c.stdout(std::process::Stdio::piped());
        configure(
            &mut c,
            &[0],
            Some(&SchedSpec::Other { nice: 3 }),
            None,
            None,
        );
        let out = spawn(c).unwrap().wait_with_output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("Cpus_allowed_list:\t0\n"), "{text}");
        let stat = text.lines().nth(1).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 1..];
        let nice = after.split_whitespace().nth(19 - 3).unwrap();
        assert_eq!(nice, "3", "{stat}");
    }
}
