//! The JSON messages of the agent protocol: [`Hello`] (versions and clock identity), [`Job`]
//! (the share of a run an agent sends, and when) and [`Done`] (what its load generator
//! reported). The load's own types carry no serde (they are the engine's, not a wire
//! format), so the job spells out every field and converts back with the engine's checks.

use std::time::Duration;

use load::{HttpWorkload, KvWorkload, LoadConfig, NullRpcWorkload, RunSummary, StopAt, Workload};
use serde::{Deserialize, Serialize};

/// Bumped whenever a frame or message changes meaning.
pub const PROTOCOL: u32 = 1;
/// The coordinator and its agents must be the same build of tailscope.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The first message each way.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub version: String,
    pub hostname: Option<String>,
    pub pid: u32,
    /// The kernel's boot id and this process's time namespace: equal on both ends means one
    /// CLOCK_MONOTONIC (the same host, no time-namespace offset), whose offset is exactly 0.
    pub boot_id: Option<String>,
    pub time_ns: Option<String>,
}

impl Hello {
    /// This process.
    pub fn here() -> Hello {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        Hello {
            protocol: PROTOCOL,
            version: VERSION.to_string(),
            hostname: read("/proc/sys/kernel/hostname"),
            pid: std::process::id(),
            boot_id: read("/proc/sys/kernel/random/boot_id"),
            time_ns: std::fs::read_link("/proc/self/ns/time")
                .ok()
                .map(|p| p.to_string_lossy().into_owned()),
        }
    }

    /// Why `other` cannot work with this process, if it cannot.
    pub fn mismatch(&self, other: &Hello) -> Option<String> {
        (other.protocol != self.protocol || other.version != self.version).then(|| {
            format!(
                "version mismatch: tailscope {} (protocol {}) here, {} (protocol {}) there: run the same build on every host",
                self.version, self.protocol, other.version, other.protocol
            )
        })
    }

    /// Whether `other` runs on this very machine (one kernel: same boot id), so shares its
    /// CPUs, whatever namespaces it is in.
    pub fn same_machine(&self, other: &Hello) -> bool {
        self.boot_id.is_some() && self.boot_id == other.boot_id
    }

    /// Whether `other` reads the very same CLOCK_MONOTONIC.
    pub fn same_clock(&self, other: &Hello) -> bool {
        let same = |a: &Option<String>, b: &Option<String>| a.is_some() && a == b;
        same(&self.boot_id, &other.boot_id) && same(&self.time_ns, &other.time_ns)
    }
}

/// The arrival process, as sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    Poisson,
    Deterministic,
    Lognormal {
        sigma: f64,
    },
    Pareto {
        shape: f64,
    },
    GenPareto {
        shape: f64,
    },
    Trace {
        times_ns: Vec<u64>,
        conn: Option<Vec<u32>>,
    },
    Bursty {
        n: u32,
        period_ns: f64,
        spacing_ns: f64,
    },
}

impl Arrival {
    fn of(a: &model::ArrivalSpec) -> Arrival {
        use model::ArrivalSpec as A;
        match a {
            A::Poisson => Arrival::Poisson,
            A::Deterministic => Arrival::Deterministic,
            A::Lognormal { sigma } => Arrival::Lognormal { sigma: *sigma },
            A::Pareto { shape } => Arrival::Pareto { shape: *shape },
            A::GenPareto { shape } => Arrival::GenPareto { shape: *shape },
            A::Trace(t) => Arrival::Trace {
                times_ns: t.times_ns.clone(),
                conn: t.conn.clone(),
            },
            A::Bursty {
                n,
                period_ns,
                spacing_ns,
            } => Arrival::Bursty {
                n: *n,
                period_ns: *period_ns,
                spacing_ns: *spacing_ns,
            },
        }
    }

    fn spec(&self) -> model::ArrivalSpec {
        use model::ArrivalSpec as A;
        match self {
            Arrival::Poisson => A::Poisson,
            Arrival::Deterministic => A::Deterministic,
            Arrival::Lognormal { sigma } => A::Lognormal { sigma: *sigma },
            Arrival::Pareto { shape } => A::Pareto { shape: *shape },
            Arrival::GenPareto { shape } => A::GenPareto { shape: *shape },
            Arrival::Trace { times_ns, conn } => A::Trace(model::Trace {
                times_ns: times_ns.clone(),
                conn: conn.clone(),
            }),
            Arrival::Bursty {
                n,
                period_ns,
                spacing_ns,
            } => A::Bursty {
                n: *n,
                period_ns: *period_ns,
                spacing_ns: *spacing_ns,
            },
        }
    }
}

/// The workload, as sent (sizes and popularity in their spec syntax).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Work {
    NullRpc {
        request_size: usize,
        stamps: bool,
    },
    Kv {
        get_ratio: f64,
        key_size: String,
        value_size: String,
        items: u64,
        popularity: String,
    },
    Http {
        paths: Vec<String>,
        popularity: String,
    },
    Grpc {
        path: String,
        message: Vec<u8>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        metadata: Vec<(String, String)>,
    },
}

impl Work {
    pub fn of(w: &Workload) -> Work {
        match w {
            Workload::NullRpc(n) => Work::NullRpc {
                request_size: n.request_size,
                stamps: n.stamps,
            },
            Workload::Kv(k) => Work::Kv {
                get_ratio: k.get_ratio,
                key_size: k.key_size.to_string(),
                value_size: k.value_size.to_string(),
                items: k.items,
                popularity: k.popularity.to_string(),
            },
            Workload::Http(h) => Work::Http {
                paths: h.paths.clone(),
                popularity: h.popularity.to_string(),
            },
            Workload::Grpc(g) => Work::Grpc {
                path: g.path.clone(),
                message: g.message.clone(),
                metadata: g.metadata.clone(),
            },
        }
    }

    pub fn workload(&self) -> Result<Workload, String> {
        let e = |x: load::LoadError| x.to_string();
        Ok(match self {
            Work::NullRpc {
                request_size,
                stamps,
            } => Workload::NullRpc(NullRpcWorkload {
                request_size: *request_size,
                stamps: *stamps,
            }),
            Work::Kv {
                get_ratio,
                key_size,
                value_size,
                items,
                popularity,
            } => {
                let kv = KvWorkload {
                    get_ratio: *get_ratio,
                    key_size: key_size.parse().map_err(e)?,
                    value_size: value_size.parse().map_err(e)?,
                    items: *items,
                    popularity: popularity.parse().map_err(e)?,
                };
                kv.validate().map_err(e)?;
                Workload::Kv(kv)
            }
            Work::Http { paths, popularity } => Workload::Http(HttpWorkload {
                paths: paths.clone(),
                popularity: popularity.parse().map_err(e)?,
            }),
            Work::Grpc {
                path,
                message,
                metadata,
            } => Workload::Grpc(load::GrpcWorkload {
                path: path.clone(),
                message: message.clone(),
                metadata: metadata.clone(),
            }),
        })
    }
}

/// A TLS target's client options as an agent needs them: the CA's certificates themselves
/// (the coordinator's `--ca` file is not on the agent's host), the server's name (the job's
/// target names the address only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobTls {
    pub insecure: bool,
    pub ca_pem: Option<String>,
    pub server_name: String,
    pub handshake_per_request: bool,
}

impl JobTls {
    /// The options the agent's codecs are built with.
    pub fn options(&self) -> load::TlsOptions {
        load::TlsOptions {
            insecure: self.insecure,
            ca: None,
            server_name: Some(self.server_name.clone()),
            handshake_per_request: self.handshake_per_request,
            ca_pem: self.ca_pem.as_ref().map(|p| p.as_bytes().to_vec()),
        }
    }
}

/// One agent's share of a run: the load (everything of [`LoadConfig`] the agent cannot know
/// itself), the share, and the common start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The target as the coordinator resolved it (`scheme+transport://addr/path`).
    pub target: String,
    pub work: Work,
    /// A TLS target's client options (None without TLS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<JobTls>,
    /// Seed of the agent's request contents (keys, values): its own, so that agents do not
    /// all ask for the same keys in the same order.
    pub work_seed: u64,
    pub arrival: Arrival,
    /// The whole run's rate (the share takes its lanes of it).
    pub rate_per_s: f64,
    pub duration_ns: Option<u64>,
    pub requests: Option<u64>,
    pub warmup_ns: u64,
    pub connections: usize,
    pub threads: usize,
    pub cpus: Vec<usize>,
    pub max_outstanding: usize,
    pub timeout_ns: u64,
    pub seed: u64,
    pub class_probs: Vec<f64>,
    pub yield_when_far: bool,
    pub churn: Option<(u32, u32)>,
    pub share: (u32, u32),
    /// The common start on the coordinator's CLOCK_MONOTONIC, and the agent's clock minus
    /// the coordinator's as measured: the agent starts at `start + offset` on its own clock.
    pub start_mono_ns: u64,
    pub offset_ns: i64,
    /// Stream raw records (else histograms only).
    pub records: bool,
    /// Length of a histogram interval (of intended time), ns.
    pub interval_ns: u64,
}

impl Job {
    /// The job for share `share` of `cfg` (whose target is the started one).
    pub fn of(cfg: &LoadConfig, work: &Workload, share: (u32, u32)) -> Job {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let (duration_ns, requests) = match cfg.stop {
            StopAt::Duration(d) => (Some(ns(d)), None),
            StopAt::Requests(n) => (None, Some(n)),
        };
        Job {
            target: cfg.target.to_string(),
            work: Work::of(work),
            tls: None,
            work_seed: if share.1 > 1 {
                load::derive_seed(cfg.seed, 0x1000 + u64::from(share.0))
            } else {
                cfg.seed
            },
            arrival: Arrival::of(&cfg.arrival),
            rate_per_s: cfg.rate_per_s,
            duration_ns,
            requests,
            warmup_ns: ns(cfg.warmup),
            connections: cfg.connections,
            threads: cfg.threads,
            cpus: cfg.cpus.clone(),
            max_outstanding: cfg.max_outstanding_per_conn,
            timeout_ns: ns(cfg.timeout),
            seed: cfg.seed,
            class_probs: cfg.class_probs.clone(),
            yield_when_far: cfg.yield_when_far,
            churn: cfg.churn,
            share,
            start_mono_ns: 0,
            offset_ns: 0,
            records: true,
            interval_ns: 1_000_000_000,
        }
    }

    /// The agent's load configuration, starting at the common start on its own clock; the
    /// engine's validation runs on it before anything is opened.
    pub fn load_config(&self) -> Result<LoadConfig, String> {
        let target: load::Target = self
            .target
            .parse()
            .map_err(|e| format!("target {}: {e}", self.target))?;
        let stop = match (self.duration_ns, self.requests) {
            (Some(d), None) => StopAt::Duration(Duration::from_nanos(d)),
            (None, Some(n)) => StopAt::Requests(n),
            _ => return Err("a job needs exactly one of a duration and a request count".into()),
        };
        if self.interval_ns == 0 {
            return Err("the histogram interval must be positive".into());
        }
        let start = crate::clock::to_agent_clock(self.start_mono_ns, self.offset_ns)
            .ok_or("the common start is before this host's clock began")?;
        let mut cfg = LoadConfig::new(target, self.rate_per_s);
        cfg.arrival = self.arrival.spec();
        cfg.stop = stop;
        cfg.warmup = Duration::from_nanos(self.warmup_ns);
        cfg.connections = self.connections;
        cfg.threads = self.threads;
        cfg.cpus = self.cpus.clone();
        cfg.max_outstanding_per_conn = self.max_outstanding;
        cfg.timeout = Duration::from_nanos(self.timeout_ns);
        cfg.seed = self.seed;
        cfg.class_probs = self.class_probs.clone();
        cfg.yield_when_far = self.yield_when_far;
        cfg.churn = self.churn;
        cfg.share = self.share;
        cfg.start_at_mono_ns = Some(start);
        // What an agent measured reaches the coordinator within about a second: little is
        // lost when the agent dies.
        cfg.flush_every = Some(Duration::from_secs(1));
        cfg.validate().map_err(|e| e.to_string())?;
        Ok(cfg)
    }
}

/// The measured requests an agent sent: how many, first and last send (run-relative ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    pub count: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

impl Sent {
    pub fn add(&mut self, t: u64) {
        if self.count == 0 {
            self.first_ns = t;
            self.last_ns = t;
        }
        self.first_ns = self.first_ns.min(t);
        self.last_ns = self.last_ns.max(t);
        self.count += 1;
    }

    /// Sent requests per second over the span of their send times.
    pub fn rate_rps(&self) -> f64 {
        if self.count > 1 && self.last_ns > self.first_ns {
            (self.count - 1) as f64 * 1e9 / (self.last_ns - self.first_ns) as f64
        } else {
            0.0
        }
    }
}

/// An agent's last message: what its load generator reported (the engine's own summary,
/// its time zero on the agent's clock) and what it sent.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Done {
    #[serde(flatten)]
    pub summary: RunSummary,
    pub sent: Sent,
    /// Chunks of raw records it sent (0 with records off).
    pub chunks: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_carries_the_load_and_converts_back() {
        let mut cfg = LoadConfig::new("memcached://127.0.0.1:11211".parse().unwrap(), 5e3);
        cfg.arrival = model::ArrivalSpec::Lognormal { sigma: 0.5 };
        cfg.stop = StopAt::Requests(10_000);
        cfg.warmup = Duration::from_millis(250);
        cfg.connections = 6;
        cfg.threads = 2;
        cfg.class_probs = vec![0.1, 0.9];
        let work = Workload::Kv(KvWorkload::default());
        let mut job = Job::of(&cfg, &work, (1, 3));
        job.start_mono_ns = 5_000;
        job.offset_ns = -2_000;
        let wire: Job = serde_json::from_slice(&serde_json::to_vec(&job).unwrap()).unwrap();
        assert_eq!(wire, job);
        let back = wire.load_config().unwrap();
        assert_eq!(back.target, cfg.target);
        assert_eq!(back.arrival, cfg.arrival);
        assert_eq!(back.stop, cfg.stop);
        assert_eq!(back.warmup, cfg.warmup);
        assert_eq!((back.connections, back.threads), (6, 2));
        assert_eq!(back.class_probs, cfg.class_probs);
        assert_eq!(back.share, (1, 3));
        assert_eq!(back.start_at_mono_ns, Some(3_000));
        assert_eq!(wire.work.workload().unwrap(), work);
        assert_ne!(job.work_seed, cfg.seed);
        // A gRPC call travels with its method and message bytes.
        let call = Workload::Grpc(load::GrpcWorkload {
            path: "/pkg.S/M".into(),
            message: vec![0x0a, 1, b'x'],
            metadata: vec![("x-k".into(), "v".into())],
        });
        let job = Job::of(&cfg, &call, (0, 1));
        let wire: Job = serde_json::from_slice(&serde_json::to_vec(&job).unwrap()).unwrap();
        assert_eq!(wire.work.workload().unwrap(), call);
    }

    #[test]
    fn versions_and_clocks_are_compared() {
        let a = Hello::here();
        assert!(a.mismatch(&a).is_none());
        let mut b = a.clone();
        b.version = "9.9.9".into();
        assert!(a.mismatch(&b).unwrap().contains("9.9.9"));
        assert_eq!(a.same_clock(&a), a.boot_id.is_some() && a.time_ns.is_some());
        b.time_ns = Some("time:[1]".into());
        assert!(!a.same_clock(&b));
        // Another time namespace on the same machine still shares its CPUs.
        assert_eq!(a.same_machine(&b), a.boot_id.is_some());
        b.boot_id = Some("another boot".into());
        assert!(!a.same_machine(&b));
    }

    #[test]
    fn a_bad_job_is_refused_by_the_engine_checks() {
        let cfg = LoadConfig::new("nullrpc://127.0.0.1:9".parse().unwrap(), 100.0);
        let mut job = Job::of(&cfg, &Workload::NullRpc(NullRpcWorkload::default()), (0, 1));
        job.start_mono_ns = 10;
        job.share = (3, 2);
        assert!(job.load_config().is_err());
        job.share = (0, 1);
        job.offset_ns = -20;
        assert!(job.load_config().is_err());
        job.offset_ns = 0;
        job.requests = Some(5);
        assert!(job.load_config().is_err());
    }
}
