//! Real targets: memcached, nginx and redis, started, placed and stopped by tailscope.
//!
//! In the data flow this crate sits at the far end of `load generator ⇄ server` when the
//! server is a real one (`--spawn`): it finds the server's binary, writes its configuration
//! into a temporary directory (for nginx also the static files the HTTP workload fetches),
//! starts it on a free loopback port with the requested CPU set and scheduling policy
//! (applied in the child before `exec`, so every thread the server creates inherits them),
//! waits until the server answers its own protocol's ping, and reports what the run stores
//! with its results: version, exact command line, pids and worker count (the `c` of the
//! ideal's queue). Stopping (explicitly or on drop) sends SIGTERM, then SIGKILL after a grace
//! period, and removes the temporary directory.
//!
//! ```no_run
//! use targets::{Kind, SpawnConfig, Spawned};
//! let mut cfg = SpawnConfig::new(Kind::Memcached);
//! cfg.threads = Some(2);
//! cfg.cpus = vec![0];
//! let server = Spawned::start(&cfg)?;
//! println!("{} ({}) on {}", server.url(), server.version(), server.addr());
//! let info = server.stop()?;
//! # Ok::<(), targets::TargetError>(())
//! ```
//!
//! Linux only. The servers come from Debian's packages (`apt-get install memcached nginx
//! redis-server`); they are never downloaded or built here.

mod binary;
mod cert;
mod child;
pub use child::spawner_tid;
mod command;
mod error;
mod ping;
mod ports;
mod procfs;
mod sizes;
mod spawn;
mod stats;

use std::fmt;
use std::str::FromStr;

pub use binary::{find_binary, version_of};
pub use error::TargetError;
pub use host::placement::SchedSpec;
pub use procfs::ThreadPlacement;
pub use sizes::{FileSizes, MAX_FILE_BYTES};
pub use spawn::{Spawned, StopInfo, READY_TIMEOUT, STOP_GRACE};
pub use stats::Stats;

/// Most bytes of generated files for one nginx (they are written to a temporary directory).
pub const MAX_TOTAL_FILE_BYTES: u64 = 8 << 30;

/// Which real server to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// memcached (text protocol over TCP, optionally UDP).
    Memcached,
    /// nginx serving static files over HTTP/1.1.
    Nginx,
    /// redis-server (RESP over TCP).
    Redis,
}

impl Kind {
    /// All kinds, in a fixed order.
    pub const ALL: [Kind; 3] = [Kind::Memcached, Kind::Nginx, Kind::Redis];

    /// The name accepted by [`FromStr`] and printed by [`fmt::Display`].
    pub fn name(self) -> &'static str {
        match self {
            Kind::Memcached => "memcached",
            Kind::Nginx => "nginx",
            Kind::Redis => "redis",
        }
    }

    /// The executable's file name.
    pub fn program(self) -> &'static str {
        match self {
            Kind::Memcached => "memcached",
            Kind::Nginx => "nginx",
            Kind::Redis => "redis-server",
        }
    }

    /// The Debian package that installs it.
    pub fn package(self) -> &'static str {
        match self {
            Kind::Memcached => "memcached",
            Kind::Nginx => "nginx",
            Kind::Redis => "redis-server",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kind {
    type Err = TargetError;

    /// `memcached`, `nginx` or `redis` (`redis-server` too), case-insensitive.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "memcached" => Ok(Kind::Memcached),
            "nginx" => Ok(Kind::Nginx),
            "redis" | "redis-server" => Ok(Kind::Redis),
            _ => Err(TargetError::UnknownKind(s.to_string())),
        }
    }
}

/// The static files generated into nginx's root: `f0`, `f1`, … `f{count-1}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpFiles {
    /// Number of files.
    pub count: u32,
    /// Size of every file in bytes, unless `sizes` is non-empty.
    pub size_bytes: u64,
    /// Per-file sizes: file `i` has `sizes[i % sizes.len()]` bytes. Empty: all `size_bytes`.
    pub sizes: Vec<u64>,
}

impl HttpFiles {
    /// `count` files of `size_bytes` each.
    pub fn uniform(count: u32, size_bytes: u64) -> Self {
        HttpFiles {
            count,
            size_bytes,
            sizes: Vec::new(),
        }
    }

    /// One file per entry of `sizes`.
    pub fn with_sizes(sizes: Vec<u64>) -> Self {
        HttpFiles {
            count: sizes.len() as u32,
            size_bytes: 0,
            sizes,
        }
    }

    /// Size in bytes of file `f{i}`.
    pub fn size_of(&self, i: u32) -> u64 {
        if self.sizes.is_empty() {
            self.size_bytes
        } else {
            self.sizes[i as usize % self.sizes.len()]
        }
    }

    /// `(path, size)` of every file, paths as requested over HTTP (`/f0`, …).
    pub fn paths(&self) -> Vec<(String, u64)> {
        (0..self.count)
            .map(|i| (format!("/f{i}"), self.size_of(i)))
            .collect()
    }

    /// Sum of all file sizes.
    pub fn total_bytes(&self) -> u64 {
        (0..self.count).map(|i| self.size_of(i)).sum()
    }
}

/// A container for the server: namespaces of its own, entered between fork and exec (its own
/// mount, UTS and IPC namespaces always; a network namespace when `netns` is set). The
/// cgroup of a container is the isolation's business (`host::isolate`). There is no PID
/// namespace: entering one needs another fork, and the server's pid is how tailscope stops
/// it and reads its threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Containment {
    /// The network namespace to enter (`/run/netns/NAME`); None: the host's network.
    pub netns: Option<std::path::PathBuf>,
    /// Where the server listens: the namespace's end of its veth pair (127.0.0.1 without one).
    pub listen: std::net::Ipv4Addr,
}

/// How to start a server. Build with [`SpawnConfig::new`] and set the fields that matter.
#[derive(Clone, Debug, PartialEq)]
pub struct SpawnConfig {
    /// Which server.
    pub kind: Kind,
    /// Worker threads or processes; `None` keeps this crate's default (1 for nginx and
    /// redis, 4 for memcached, its own default).
    /// - memcached: `-t N`, the worker threads that serve connections (a connection stays
    ///   on one worker: per-worker queues over TCP). memcached also runs a few housekeeping
    ///   threads (listener, LRU maintainer/crawler) that are not counted.
    /// - nginx: `worker_processes N`.
    /// - redis: `--io-threads N` (with `--io-threads-do-reads yes`) when N > 1; commands are
    ///   still executed by the one main thread, so redis is always one worker.
    pub threads: Option<u32>,
    /// CPU set for the whole server, applied with `sched_setaffinity` in the child before
    /// `exec` (every thread and process the server creates inherits it). Empty: unchanged.
    /// nginx additionally pins worker `i` to `cpus[i % cpus.len()]` (`worker_cpu_affinity`).
    pub cpus: Vec<usize>,
    /// Scheduling policy or nice level, applied in the child before `exec` and inherited by
    /// every thread. Realtime policies need root or CAP_SYS_NICE
    /// ([`TargetError::SchedPermission`] otherwise).
    pub sched: Option<SchedSpec>,
    /// Memory policy (`set_mempolicy`), applied in the child before `exec` and kept by the
    /// server's every thread; a `bind` policy's CPUs are the caller's to choose (`cpus`).
    pub numa: Option<host::numa::NumaPolicy>,
    /// memcached only: also listen on UDP, on the same port number as TCP.
    pub udp: bool,
    /// memcached `-m` (item memory) or redis `maxmemory`, in MiB. Not for nginx.
    pub memory_mb: Option<u32>,
    /// nginx only: the files to serve. `None`: one file `f0` of 1024 bytes (the readiness
    /// check fetches `/f0`).
    pub http_files: Option<HttpFiles>,
    /// nginx only: `open_file_cache` on (descriptors and sizes of served files kept open).
    pub open_file_cache: bool,
    /// nginx only: HTTP/2 with prior knowledge on its port (`listen … http2`, cleartext:
    /// `h2c://`); its readiness check then opens an HTTP/2 connection.
    pub http2: bool,
    /// TLS on its port (nginx: `https://`, or `h2://` with `http2`; memcached -Z:
    /// `memcached+tls://`; redis's TLS port: `rediss://`), with a certificate made for this
    /// start by a throwaway CA whose certificate is [`Spawned::ca_file`]. Not with `udp`.
    pub tls: bool,
    /// Appended verbatim to the server's command line (for nginx e.g. `-g "directive;"`).
    pub extra_args: Vec<String>,
    /// Start it in a container (namespaces of its own); None: on the host.
    pub container: Option<Containment>,
}

impl SpawnConfig {
    /// Defaults: no thread count, no placement, TCP only, default memory, no extra args.
    pub fn new(kind: Kind) -> Self {
        SpawnConfig {
            kind,
            threads: None,
            cpus: Vec::new(),
            sched: None,
            numa: None,
            udp: false,
            memory_mb: None,
            http_files: None,
            open_file_cache: false,
            http2: false,
            tls: false,
            extra_args: Vec::new(),
            container: None,
        }
    }

    /// The address the server listens on: 127.0.0.1, or its container's.
    pub fn listen(&self) -> std::net::Ipv4Addr {
        self.container
            .as_ref()
            .map_or(std::net::Ipv4Addr::LOCALHOST, |c| c.listen)
    }

    /// Checks the options against the server kind, before anything is started.
    pub fn validate(&self) -> Result<(), TargetError> {
        let bad = |reason: &str| {
            Err(TargetError::BadConfig {
                kind: self.kind,
                reason: reason.to_string(),
            })
        };
        if self.threads == Some(0) {
            return bad("threads must be at least 1");
        }
        if self.udp && self.kind != Kind::Memcached {
            return bad("UDP is only supported by memcached");
        }
        if self.memory_mb.is_some() && self.kind == Kind::Nginx {
            return bad("memory_mb applies to memcached and redis only");
        }
        if self.memory_mb == Some(0) {
            return bad("memory_mb must be at least 1");
        }
        if let Some(files) = &self.http_files {
            if self.kind != Kind::Nginx {
                return bad("http_files applies to nginx only");
            }
            if files.count == 0 {
                return bad("http_files needs at least one file (the readiness check fetches /f0)");
            }
            if files.total_bytes() > MAX_TOTAL_FILE_BYTES {
                return bad(&format!(
                    "the files add up to {} bytes, above the {MAX_TOTAL_FILE_BYTES} a run writes",
                    files.total_bytes()
                ));
            }
        }
        if self.open_file_cache && self.kind != Kind::Nginx {
            return bad("open_file_cache applies to nginx only");
        }
        let n = host::placement::online_cpus();
        if let Some(&c) = self.cpus.iter().find(|&&c| c >= n) {
            return bad(&format!("CPU {c} does not exist (online CPUs: 0..{n})"));
        }
        Ok(())
    }

    /// The worker count the ideal's queueing model should use (see [`SpawnConfig::threads`]).
    pub fn worker_threads(&self) -> u32 {
        match self.kind {
            Kind::Memcached => self.threads.unwrap_or(command::MEMCACHED_DEFAULT_THREADS),
            Kind::Nginx => self.threads.unwrap_or(1),
            Kind::Redis => 1,
        }
    }

    /// The files nginx serves (the default when `http_files` is `None`).
    pub fn effective_http_files(&self) -> Option<HttpFiles> {
        match self.kind {
            Kind::Nginx => Some(
                self.http_files
                    .clone()
                    .unwrap_or_else(|| HttpFiles::uniform(1, 1024)),
            ),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_print() {
        for k in Kind::ALL {
            assert_eq!(k.name().parse::<Kind>().unwrap(), k);
            assert_eq!(k.to_string(), k.name());
        }
        assert_eq!("Redis-Server".parse::<Kind>().unwrap(), Kind::Redis);
        let e = "apache".parse::<Kind>().unwrap_err();
        assert!(e.to_string().contains("memcached, nginx or redis"), "{e}");
    }

    #[test]
    fn http_files_sizes() {
        let u = HttpFiles::uniform(3, 100);
        assert_eq!(u.total_bytes(), 300);
        assert_eq!(u.paths()[2], ("/f2".to_string(), 100));
        let mut s = HttpFiles::with_sizes(vec![1, 10, 100]);
        assert_eq!(s.count, 3);
        assert_eq!(s.total_bytes(), 111);
        s.count = 5;
        assert_eq!(s.size_of(4), 10);
        assert_eq!(s.total_bytes(), 122);
    }

    #[test]
    fn validation_rejects_options_of_other_servers() {
        let mut c = SpawnConfig::new(Kind::Redis);
        assert!(c.validate().is_ok());
        c.udp = true;
        assert!(c.validate().unwrap_err().to_string().contains("UDP"));
        let mut c = SpawnConfig::new(Kind::Nginx);
        c.memory_mb = Some(10);
        assert!(c.validate().is_err());
        let mut c = SpawnConfig::new(Kind::Memcached);
        c.http_files = Some(HttpFiles::uniform(1, 1));
        assert!(c.validate().is_err());
        let mut c = SpawnConfig::new(Kind::Nginx);
        c.http_files = Some(HttpFiles::uniform(0, 1));
        assert!(c.validate().is_err());
        c.http_files = Some(HttpFiles::uniform(10_000, 1 << 30));
        assert!(c.validate().unwrap_err().to_string().contains("add up"));
        let mut c = SpawnConfig::new(Kind::Redis);
        c.open_file_cache = true;
        assert!(c.validate().is_err());
        let mut c = SpawnConfig::new(Kind::Memcached);
        c.threads = Some(0);
        assert!(c.validate().is_err());
        let mut c = SpawnConfig::new(Kind::Memcached);
        c.cpus = vec![host::placement::online_cpus()];
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
    }

    #[test]
    fn worker_counts_follow_each_servers_architecture() {
        let mut c = SpawnConfig::new(Kind::Memcached);
        assert_eq!(c.worker_threads(), 4);
        c.threads = Some(2);
        assert_eq!(c.worker_threads(), 2);
        let mut c = SpawnConfig::new(Kind::Nginx);
        assert_eq!(c.worker_threads(), 1);
        c.threads = Some(3);
        assert_eq!(c.worker_threads(), 3);
        let mut c = SpawnConfig::new(Kind::Redis);
        c.threads = Some(4);
        assert_eq!(c.worker_threads(), 1);
    }
}
