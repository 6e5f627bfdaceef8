//! [`Spawned`]: one running server, from start to stop.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::binary::{is_executable_file, version_of};
use crate::ports::{free_port, PortLease};
use crate::procfs::{children_of, threads_of, ThreadPlacement};
use crate::{child, command, find_binary, ping, HttpFiles, Kind, SpawnConfig, TargetError};

/// How long [`Spawned::start`] waits for the server to answer its readiness check.
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a stop waits after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// Ports tried when the chosen one is taken before the server binds it.
const PORT_ATTEMPTS: usize = 5;
/// Bytes of each server log kept for error messages.
const TAIL_BYTES: usize = 3000;

/// How a server ended.
#[derive(Debug)]
pub struct StopInfo {
    /// The main process's exit status (a signal for SIGTERM on some servers).
    pub status: ExitStatus,
    /// SIGKILL was needed: the server ignored SIGTERM for [`STOP_GRACE`].
    pub forced: bool,
    /// The end of the server's stderr and stdout.
    pub output: String,
}

/// A server started by tailscope on a free loopback port. Stops on [`Spawned::stop`] or on
/// drop (also while a panic unwinds); if tailscope itself is killed, the kernel sends the
/// server SIGTERM (`PR_SET_PDEATHSIG`, armed from a spawner thread that lives as long as the
/// process, so a `Spawned` may move between threads and outlive the one that started it).
#[derive(Debug)]
pub struct Spawned {
    kind: Kind,
    /// `None` once stopped.
    child: Option<Child>,
    /// The main pid (also the server's process-group id).
    pid: u32,
    /// Config, logs, nginx's files; removed on stop.
    dir: Option<TempDir>,
    /// Keeps the port out of other starts of this process while the server lives.
    port: PortLease,
    /// Where it listens (127.0.0.1, or its container's address).
    ip: Ipv4Addr,
    udp: bool,
    /// nginx speaks HTTP/2 with prior knowledge on its port.
    http2: bool,
    /// nginx speaks TLS on its port.
    tls: bool,
    version: String,
    command: Vec<String>,
    worker_threads: u32,
    http_files: Option<HttpFiles>,
    ready_after: Duration,
}

fn as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The last `TAIL_BYTES` of a log file, on a char boundary.
fn tail(path: &Path) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let start = text.len().saturating_sub(TAIL_BYTES);
    String::from_utf8_lossy(&text[start..]).trim().to_string()
}

fn output_of(dir: &Path) -> String {
    format!(
        "--- stderr ---\n{}\n--- stdout ---\n{}",
        tail(&dir.join("server.err")),
        tail(&dir.join("server.out"))
    )
}

fn is_addr_in_use(output: &str) -> bool {
    output.contains("Address already in use") || output.contains("EADDRINUSE")
}

/// The outcome of one start attempt on one port.
enum Attempt {
    Ready(Spawned),
    /// Someone bound the port first; the directory is handed back for the next try.
    PortTaken(TempDir),
    Failed(TargetError),
}

impl Spawned {
    /// Starts `cfg.kind` from [`find_binary`] and waits up to [`READY_TIMEOUT`].
    pub fn start(cfg: &SpawnConfig) -> Result<Spawned, TargetError> {
        Spawned::start_with(cfg, &find_binary(cfg.kind)?, READY_TIMEOUT)
    }

    /// Starts the server from `binary`, waiting up to `ready_timeout` for it to answer.
    pub fn start_with(
        cfg: &SpawnConfig,
        binary: &Path,
        ready_timeout: Duration,
    ) -> Result<Spawned, TargetError> {
        Spawned::start_on(cfg, binary, ready_timeout, &mut || free_port(cfg.udp))
    }

    pub(crate) fn start_on(
        cfg: &SpawnConfig,
        binary: &Path,
        ready_timeout: Duration,
        next_port: &mut dyn FnMut() -> Result<PortLease, TargetError>,
    ) -> Result<Spawned, TargetError> {
        cfg.validate()?;
        if !is_executable_file(binary) {
            return Err(TargetError::BadBinary {
                path: binary.to_path_buf(),
            });
        }
        let version = version_of(cfg.kind, binary)?;
        let mut dir = tempfile::Builder::new()
            .prefix(&format!("tailscope-{}-", cfg.kind))
            .tempdir()
            .map_err(|e| TargetError::io("creating a temporary directory", e))?;
        let http_files = cfg.effective_http_files();
        if let Some(files) = &http_files {
            command::write_http_files(files, dir.path())?;
        }
        if cfg.tls {
            crate::cert::write_server_files(dir.path(), cfg.listen())?;
        }
        for _ in 0..PORT_ATTEMPTS {
            let port = next_port()?;
            match Spawned::attempt(cfg, binary, dir, port, &version, &http_files, ready_timeout) {
                Attempt::Ready(s) => {
                    s.check_placement(cfg)?;
                    return Ok(s);
                }
                // Same directory (and files) for the next port.
                Attempt::PortTaken(d) => dir = d,
                Attempt::Failed(e) => return Err(e),
            }
        }
        Err(TargetError::io(
            format!("starting {}", cfg.kind),
            std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!(
                    "every one of {PORT_ATTEMPTS} free ports was taken before the server bound it"
                ),
            ),
        ))
    }

    fn attempt(
        cfg: &SpawnConfig,
        binary: &Path,
        dir: TempDir,
        port: PortLease,
        version: &str,
        http_files: &Option<HttpFiles>,
        ready_timeout: Duration,
    ) -> Attempt {
        let args = match command::args(cfg, dir.path(), port.0, as_root()) {
            Ok(a) => a,
            Err(e) => return Attempt::Failed(e),
        };
        let log = |name: &str| {
            File::create(dir.path().join(name))
                .map_err(|e| TargetError::io(format!("creating {name}"), e))
        };
        let (out, err) = match (log("server.out"), log("server.err")) {
            (Ok(o), Ok(e)) => (o, e),
            (Err(e), _) | (_, Err(e)) => return Attempt::Failed(e),
        };
        let mut cmd = Command::new(binary);
        cmd.args(&args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        // Open until the child has been spawned (it enters the namespace before exec).
        let netns = match cfg.container.as_ref().and_then(|c| c.netns.as_ref()) {
            Some(p) => match File::open(p) {
                Ok(f) => Some(f),
                Err(e) => {
                    return Attempt::Failed(TargetError::io(
                        format!("opening network namespace {}", p.display()),
                        e,
                    ))
                }
            },
            None => None,
        };
        let container = cfg.container.as_ref().map(|_| child::Container {
            netns_fd: netns.as_ref().map(|f| f.as_raw_fd()),
        });
        child::configure(
            &mut cmd,
            &cfg.cpus,
            cfg.sched.as_ref(),
            cfg.numa.as_ref(),
            container.as_ref(),
        );
        let started = Instant::now();
        let spawned = child::spawn(cmd);
        drop(netns);
        let child = match spawned {
            Ok(c) => c,
            Err(source) => return Attempt::Failed(spawn_error(cfg, binary, source)),
        };
        let mut command = vec![binary.to_string_lossy().into_owned()];
        command.extend(args);
        let mut s = Spawned {
            kind: cfg.kind,
            pid: child.id(),
            child: Some(child),
            dir: Some(dir),
            port,
            ip: cfg.listen(),
            udp: cfg.udp,
            http2: cfg.http2,
            tls: cfg.tls,
            version: version.to_string(),
            command,
            worker_threads: cfg.worker_threads(),
            http_files: http_files.clone(),
            ready_after: Duration::ZERO,
        };
        match s.wait_ready(started, ready_timeout) {
            Ok(()) => {
                s.ready_after = started.elapsed();
                Attempt::Ready(s)
            }
            Err(e) => {
                let taken =
                    matches!(&e, TargetError::Exited { output, .. } if is_addr_in_use(output));
                if taken {
                    if let Some(mut c) = s.child.take() {
                        // It has exited already; this only reaps it.
                        let _ = child::terminate(&mut c, STOP_GRACE, None);
                    }
                    if let Some(d) = s.dir.take() {
                        return Attempt::PortTaken(d);
                    }
                }
                drop(s.shutdown());
                Attempt::Failed(e)
            }
        }
    }

    /// Polls the readiness check until it passes, the server exits, or the timeout.
    fn wait_ready(&mut self, started: Instant, timeout: Duration) -> Result<(), TargetError> {
        let first_len = self.http_files.as_ref().map_or(0, |f| f.size_of(0));
        loop {
            if child::has_exited(self.pid as libc::pid_t) {
                let status = self
                    .child
                    .as_mut()
                    .and_then(|c| c.wait().ok())
                    .map_or("unknown status".to_string(), |s| s.to_string());
                return Err(TargetError::Exited {
                    kind: self.kind,
                    status,
                    command: self.command.join(" "),
                    output: self.output(),
                });
            }
            let check = ping::ping(
                self.kind,
                self.addr(),
                self.udp_addr(),
                first_len,
                self.http2,
                self.tls,
            );
            let last_check = match check {
                Ok(()) if self.kind != Kind::Nginx => return Ok(()),
                Ok(()) => {
                    let n = children_of(self.pid).len() as u32;
                    if n >= self.worker_threads {
                        return Ok(());
                    }
                    format!("{n} of {} nginx workers up", self.worker_threads)
                }
                Err(e) => e,
            };
            if started.elapsed() >= timeout {
                return Err(TargetError::NotReady {
                    kind: self.kind,
                    timeout,
                    last_check,
                    command: self.command.join(" "),
                    output: self.output(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Affinity and policy as the kernel reports them, against what `cfg` asked for.
    fn check_placement(&self, cfg: &SpawnConfig) -> Result<(), TargetError> {
        let mut want = cfg.cpus.clone();
        want.sort_unstable();
        want.dedup();
        for t in self.placement() {
            let main = t.pid == self.pid;
            let cpus_ok = want.is_empty()
                || if main {
                    t.cpus == want
                } else {
                    t.cpus.iter().all(|c| want.contains(c))
                };
            if !cpus_ok {
                return Err(TargetError::Placement {
                    kind: self.kind,
                    pid: t.pid,
                    tid: t.tid,
                    want,
                    got: t.cpus,
                });
            }
            // nginx may re-nice its workers (`worker_priority`), so only the main process
            // is held to the requested policy.
            if let (Some(w), true) = (&cfg.sched, main) {
                if t.sched.as_ref() != Some(w) {
                    return Err(TargetError::SchedNotApplied {
                        kind: self.kind,
                        pid: t.pid,
                        tid: t.tid,
                        want: w.to_string(),
                        got: t
                            .sched
                            .map_or("other policy".to_string(), |s| s.to_string()),
                    });
                }
            }
        }
        Ok(())
    }

    /// Which server this is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The TCP address: `127.0.0.1:PORT` (the container's address when it runs in one).
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((self.ip, self.port.0))
    }

    /// memcached's UDP address (same port number) when UDP was asked for.
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.udp.then(|| self.addr())
    }

    /// The target URL for `tailscope run`: `memcached://127.0.0.1:P` (or
    /// `memcached+udp://…` when UDP was asked for; TCP stays open at [`Spawned::addr`]),
    /// `http://127.0.0.1:P/` (`h2c://…` for HTTP/2), `redis://127.0.0.1:P`.
    pub fn url(&self) -> String {
        let a = self.addr();
        match (self.kind, self.udp) {
            (Kind::Memcached, _) if self.tls => format!("memcached+tls://{a}"),
            (Kind::Memcached, false) => format!("memcached://{a}"),
            (Kind::Memcached, true) => format!("memcached+udp://{a}"),
            (Kind::Nginx, _) if self.http2 && self.tls => format!("h2://{a}/"),
            (Kind::Nginx, _) if self.http2 => format!("h2c://{a}/"),
            (Kind::Nginx, _) if self.tls => format!("https://{a}/"),
            (Kind::Nginx, _) => format!("http://{a}/"),
            (Kind::Redis, _) if self.tls => format!("rediss://{a}"),
            (Kind::Redis, _) => format!("redis://{a}"),
        }
    }

    /// The server's own version line (see [`crate::version_of`]).
    pub fn version(&self) -> String {
        self.version.clone()
    }

    /// Program path and arguments exactly as executed.
    pub fn command_line(&self) -> Vec<String> {
        self.command.clone()
    }

    /// The main pid, then its child processes (nginx's workers), sorted.
    pub fn pids(&self) -> Vec<u32> {
        let mut v = vec![self.pid];
        if self.child.is_some() {
            v.extend(children_of(self.pid));
        }
        v
    }

    /// The worker count of the ideal's queueing model (see [`SpawnConfig::threads`]).
    pub fn worker_threads(&self) -> u32 {
        self.worker_threads
    }

    /// nginx's files as `(path, size)`; empty for the other servers.
    pub fn http_paths(&self) -> Vec<(String, u64)> {
        self.http_files
            .as_ref()
            .map_or_else(Vec::new, HttpFiles::paths)
    }

    /// Every thread of every process of the server, with CPUs and policy from /proc.
    pub fn placement(&self) -> Vec<ThreadPlacement> {
        self.pids().into_iter().flat_map(threads_of).collect()
    }

    /// The memory policies `/proc/PID/numa_maps` names for the server's processes (e.g.
    /// `["bind:0"]` after [`SpawnConfig::numa`] bound it), in first-seen order; empty when
    /// the kernel has no NUMA support (no `numa_maps`).
    pub fn memory_policies(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for pid in self.pids() {
            let text =
                std::fs::read_to_string(format!("/proc/{pid}/numa_maps")).unwrap_or_default();
            for p in host::numa::policies_in_numa_maps(&text) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// Time from `exec` to the first passing readiness check.
    pub fn ready_after(&self) -> Duration {
        self.ready_after
    }

    /// The PEM certificate of the throwaway CA that signed a TLS server's certificate (trust
    /// it to verify the server); `None` without TLS or once stopped.
    pub fn ca_file(&self) -> Option<PathBuf> {
        if !self.tls {
            return None;
        }
        self.dir
            .as_ref()
            .map(|d| d.path().join(crate::cert::CA_FILE))
    }

    /// The server's temporary directory (config, logs, nginx's `www/`).
    pub fn dir(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.path().to_path_buf())
    }

    /// The server's own counters (memcached `stats`, redis `INFO`); nginx has none.
    pub fn stats(&self) -> Result<crate::Stats, TargetError> {
        crate::stats::read(self.kind, self.addr(), self.ca_file().as_deref())
    }

    /// Items evicted since the server started (memcached `evictions`, redis
    /// `evicted_keys`); `None` for nginx, which evicts nothing.
    pub fn evictions(&self) -> Result<Option<u64>, TargetError> {
        let Some(key) = crate::stats::eviction_key(self.kind) else {
            return Ok(None);
        };
        let st = self.stats()?;
        Ok(st.get(key).and_then(|v| v.trim().parse().ok()))
    }

    /// The end of the server's stderr and stdout so far.
    pub fn output(&self) -> String {
        self.dir
            .as_ref()
            .map_or_else(String::new, |d| output_of(d.path()))
    }

    /// SIGTERM, SIGKILL after [`STOP_GRACE`], reap, remove the temporary directory.
    pub fn stop(mut self) -> Result<StopInfo, TargetError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<StopInfo, TargetError> {
        let Some(mut c) = self.child.take() else {
            return Err(TargetError::io(
                format!("stopping {}", self.kind),
                std::io::Error::other("already stopped"),
            ));
        };
        let stopped = child::terminate(&mut c, STOP_GRACE, Some(self.addr()));
        let output = self.output();
        let removed = self.dir.take().map_or(Ok(()), TempDir::close);
        let (status, forced) =
            stopped.map_err(|e| TargetError::io(format!("waiting for {}", self.kind), e))?;
        removed.map_err(|e| TargetError::io("removing the temporary directory", e))?;
        Ok(StopInfo {
            status,
            forced,
            output,
        })
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if self.child.is_some() {
            // Nothing to report to from a drop; the server is gone either way.
            let _ = self.shutdown();
        }
    }
}

fn spawn_error(cfg: &SpawnConfig, binary: &Path, source: std::io::Error) -> TargetError {
    let denied = matches!(
        source.raw_os_error(),
        Some(libc::EPERM) | Some(libc::EACCES)
    );
    match (&cfg.sched, denied) {
        (Some(s), true) => TargetError::SchedPermission {
            kind: cfg.kind,
            sched: s.to_string(),
            source,
        },
        _ if source.raw_os_error() == Some(libc::EINVAL) && !cfg.cpus.is_empty() => {
            TargetError::BadConfig {
                kind: cfg.kind,
                reason: format!(
                    "CPU set {:?} is not allowed here (cgroup cpuset?): {source}",
                    cfg.cpus
                ),
            }
        }
        _ => TargetError::Spawn {
            program: binary.to_path_buf(),
            source,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_port_taken_before_the_server_binds_it_is_retried() {
        let cfg = SpawnConfig::new(Kind::Redis);
        let bin = find_binary(Kind::Redis).expect("apt-get install redis-server");
        // The first port handed out is held by someone else; the second is free.
        let squatter = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = squatter.local_addr().unwrap().port();
        let mut handed = Vec::new();
        let mut ports = || {
            let lease = if handed.is_empty() {
                PortLease::take(taken).expect("lease")
            } else {
                free_port(false)?
            };
            handed.push(lease.0);
            Ok(lease)
        };
        let s = Spawned::start_on(&cfg, &bin, READY_TIMEOUT, &mut ports).unwrap();
        assert_eq!(handed.len(), 2);
        assert_eq!(handed[0], taken);
        assert_eq!(s.addr().port(), handed[1]);
        s.stop().unwrap();
    }

    #[test]
    fn a_server_that_never_answers_times_out_with_its_output_and_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = dir.path().join("fake-redis");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'Redis server v=0.0.0 fake'; exit 0; fi\n\
                 echo $$ > {}\necho 'fake: starting' >&2\nexec sleep 60\n",
                pidfile.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cfg = SpawnConfig::new(Kind::Redis);
        // A fork on another test thread while the script was being written may still hold
        // it open for writing: exec then fails with ETXTBSY, so that one error is retried.
        let mut tries = 0;
        let e = loop {
            let e = Spawned::start_with(&cfg, &script, Duration::from_millis(500)).unwrap_err();
            let busy = matches!(&e, TargetError::Spawn { source, .. } | TargetError::Io { source, .. }
                if source.raw_os_error() == Some(libc::ETXTBSY));
            tries += 1;
            if !busy || tries == 5 {
                break e;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        match &e {
            TargetError::NotReady {
                last_check, output, ..
            } => {
                assert!(last_check.contains("connect"), "{last_check}");
                assert!(output.contains("fake: starting"), "{output}");
            }
            other => panic!("expected NotReady, got {other}"),
        }
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        assert!(
            !Path::new(&format!("/proc/{}", pid.trim())).exists(),
            "fake server {pid} left running"
        );
    }
}
